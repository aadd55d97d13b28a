/* hub_download.c - the transfers of one pull on a curl multi handle. Each file streams into
 * blobs/<name>.incomplete through its checksum; a cut connection resumes with a Range request
 * (the bytes on disk are hashed again first), a server that ignores the Range restarts the
 * file, and only a file whose size and checksum match is renamed into blobs/. Redirects are
 * followed here, hop by hop, so the token goes to the endpoint's origin only. */
#include "hub/hub_download.h"

#include "common/err.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "hub/hub_cache.h"
#include "hub/hub_digest.h"
#include "hub/hub_curl.h"
#include "hub/hub_http.h"
#include "hub/hub_url.h"

#define MAX_ATTEMPTS   4 /* the first try and 3 resumes */
#define MAX_REDIRECTS  10
#define REPORT_EVERY_S 0.1

double hub_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

void hub_progress_emit(hub_progress_state *ps, cortiq_hub_event ev, const char *file, uint64_t size,
                       uint64_t resumed) {
    if (!ps->fn) return;
    double now = hub_now();
    if (ev == CORTIQ_HUB_EV_BYTES && now - ps->last_report < REPORT_EVERY_S) return;
    ps->last_report = now;
    ps->p.event = ev;
    ps->p.file = file;
    ps->p.file_size = size;
    ps->p.bytes_resumed = resumed;
    ps->p.seconds = now - ps->t0;
    ps->fn(ps->user, &ps->p);
}

typedef struct xfer {
    const hub_file *f;
    char *part, *blob, *url;
    FILE *fp;
    hub_digest dg;
    uint64_t have;  /* bytes of the file on disk (and in dg) */
    uint64_t asked; /* the Range start of the request in flight */
    int attempts, hops;
    bool body_started; /* the current response's first body byte was handled */
    bool bad_range;    /* a 206 for another offset than asked */
    bool too_long;     /* more bytes than the listing's size */
    CURL *h;
    struct curl_slist *hdrs;
    hub_http_headers hh;
    char errbuf[CURL_ERROR_SIZE];
    hub_progress_state *ps;
} xfer;

static size_t on_body(char *data, size_t size, size_t nmemb, void *user) {
    xfer *x = user;
    size_t n = size * nmemb;
    long code = 0;
    hub_curl.easy_getinfo(x->h, CURLINFO_RESPONSE_CODE, &code);
    if (code != 200 && code != 206) return n; /* a redirect's or an error's body */
    if (!x->body_started) {
        x->body_started = true;
        if (code == 200 && x->have > 0) {
            /* the server ignored the Range: start the file over */
            if (fflush(x->fp) != 0 || ftruncate(fileno(x->fp), 0) != 0) return 0;
            x->ps->p.bytes_done -= x->have;
            x->have = 0;
            hub_digest_init(&x->dg, x->f);
        } else if (code == 206) {
            char want[64];
            snprintf(want, sizeof want, "bytes %" PRIu64 "-", x->asked);
            if (strncmp(x->hh.content_range, want, strlen(want))) {
                x->bad_range = true;
                return 0;
            }
        }
    }
    if (x->have + n > x->f->size) { /* longer than the hub says: not this file */
        x->too_long = true;
        return 0;
    }
    if (fwrite(data, 1, n, x->fp) != n) return 0;
    hub_digest_update(&x->dg, data, n);
    x->have += n;
    x->ps->p.bytes_done += n;
    x->ps->p.bytes_received += n;
    return n;
}

static void xfer_close(xfer *x) {
    if (x->fp) fclose(x->fp);
    x->fp = NULL;
}

static void xfer_free(xfer *x) {
    xfer_close(x);
    if (x->h) hub_curl.easy_cleanup(x->h);
    hub_curl.slist_free_all(x->hdrs);
    free(x->part);
    free(x->blob);
    free(x->url);
    memset(x, 0, sizeof *x);
}

/* Point the handle at x->url (token per origin) and ask from x->have on. */
static cmf_status xfer_arm(xfer *x, const hub_env *env, long stall_s, cmf_err *err) {
    cmf_status st = hub_http_setup(x->h, env, x->url, stall_s, &x->hdrs, &x->hh, err);
    if (st) return st;
    char range[48];
    snprintf(range, sizeof range, "%" PRIu64 "-", x->have);
    hub_curl.easy_setopt(x->h, CURLOPT_RANGE, x->have ? range : NULL);
    hub_curl.easy_setopt(x->h, CURLOPT_WRITEFUNCTION, on_body);
    hub_curl.easy_setopt(x->h, CURLOPT_WRITEDATA, x);
    hub_curl.easy_setopt(x->h, CURLOPT_ERRORBUFFER, x->errbuf);
    hub_curl.easy_setopt(x->h, CURLOPT_PRIVATE, x);
    /* the body is checked against the hub's sha256: no transparent decompression */
    hub_curl.easy_setopt(x->h, CURLOPT_ACCEPT_ENCODING, NULL);
    x->asked = x->have;
    x->body_started = false;
    x->bad_range = false;
    x->too_long = false;
    x->errbuf[0] = 0;
    return CMF_OK;
}

/* (Re)open the partial file, hash what it holds, and arm a request for the rest. */
static cmf_status xfer_start(xfer *x, const hub_env *env, const char *repo, const char *commit,
                             long stall_s, cmf_err *err) {
    xfer_close(x);
    if (!(x->fp = fopen(x->part, "ab")))
        return cmf_err_set(err, CMF_E_IO, x->part, "cannot write: %s", strerror(errno));
    /* one writer per partial file: a second process appending would corrupt it */
    if (flock(fileno(x->fp), LOCK_EX | LOCK_NB) != 0)
        return cmf_err_set(err, CMF_E_IO, x->part,
                           "another process is downloading %s: wait for it to finish", x->f->path);
    struct stat sb;
    x->have = fstat(fileno(x->fp), &sb) == 0 ? (uint64_t)sb.st_size : 0;
    hub_digest_init(&x->dg, x->f);
    if (x->have > x->f->size || (x->have && !hub_digest_file_prefix(&x->dg, x->part, x->have))) {
        /* longer than the file, or unreadable: not a prefix of it */
        if (ftruncate(fileno(x->fp), 0) != 0)
            return cmf_err_set(err, CMF_E_IO, x->part, "cannot truncate: %s", strerror(errno));
        x->have = 0;
        hub_digest_init(&x->dg, x->f);
    }
    x->ps->p.bytes_done += x->have;
    if (x->have) hub_progress_emit(x->ps, CORTIQ_HUB_EV_RESUMED, x->f->path, x->f->size, x->have);
    free(x->url);
    if (!(x->url = hub_url_resolve(env->endpoint, repo, commit, x->f->path)))
        return cmf_err_set(err, CMF_E_NOMEM, x->f->path, "out of memory");
    x->hops = 0;
    x->attempts++;
    return xfer_arm(x, env, stall_s, err);
}

/* The body is all here: size and checksum, then rename into blobs/ and link. */
static cmf_status xfer_finish(xfer *x, const char *repo_dir, const char *commit, cmf_err *err) {
    bool flushed = fflush(x->fp) == 0;
    xfer_close(x);
    if (!flushed) return cmf_err_set(err, CMF_E_IO, x->part, "cannot write: %s", strerror(errno));
    char hex[65];
    if (x->have != x->f->size) {
        unlink(x->part);
        return cmf_err_set(err, CMF_E_HASH, x->url,
                           "%s: received %" PRIu64 " bytes, the hub lists %" PRIu64
                           ": deleted, run again",
                           x->f->path, x->have, x->f->size);
    }
    if (!hub_digest_matches(&x->dg, x->f, hex)) {
        unlink(x->part);
        return cmf_err_set(err, CMF_E_HASH, x->url,
                           "%s: %s %s does not match the hub's %s: the download is corrupt "
                           "(deleted; run again, or check a proxy or mirror in between)",
                           x->f->path, x->dg.lfs ? "sha256" : "git blob id", hex,
                           x->dg.lfs ? x->f->sha256 : x->f->oid);
    }
    if (rename(x->part, x->blob) != 0)
        return cmf_err_set(err, CMF_E_IO, x->blob, "cannot rename from %s: %s", x->part,
                           strerror(errno));
    return hub_cache_link(repo_dir, commit, x->f->path, hub_file_blob_name(x->f), err);
}

static bool retryable(CURLcode cc) {
    return cc == CURLE_PARTIAL_FILE || cc == CURLE_RECV_ERROR || cc == CURLE_SEND_ERROR ||
           cc == CURLE_OPERATION_TIMEDOUT || cc == CURLE_GOT_NOTHING || cc == CURLE_HTTP2_STREAM ||
           cc == CURLE_HTTP2;
}

typedef struct run {
    const hub_env *env;
    const char *repo, *commit, *repo_dir;
    long stall_s;
    CURLM *m;
    hub_progress_state *ps;
} run;

/* Handle a finished request of x: follow a redirect, retry, or finish. Returns CMF_OK with
 * *again set when x went back into the multi handle. */
static cmf_status on_done(run *r, xfer *x, CURLcode cc, bool *again, cmf_err *err) {
    *again = false;
    long code = 0;
    hub_curl.easy_getinfo(x->h, CURLINFO_RESPONSE_CODE, &code);
    hub_curl.multi_remove_handle(r->m, x->h);
    bool token_sent = r->env->token && hub_url_same_origin(x->url, r->env->endpoint);
    char what[1100];
    snprintf(what, sizeof what, "%s in %s", x->f->path, r->repo);
    if (x->bad_range) {
        xfer_close(x);
        unlink(x->part);
        return cmf_err_set(err, CMF_E_NETWORK, x->url,
                           "asked for bytes %" PRIu64 "- of %s, got '%s': deleted the partial "
                           "file, run again",
                           x->asked, x->f->path, x->hh.content_range);
    }
    if (x->too_long) {
        xfer_close(x);
        unlink(x->part);
        return cmf_err_set(err, CMF_E_HASH, x->url,
                           "%s: the server sent more than the %" PRIu64
                           " bytes the hub lists: deleted, run again",
                           what, x->f->size);
    }
    if (cc == CURLE_OK) {
        char *target = hub_http_redirect_target(x->h);
        if (target) {
            if (++x->hops > MAX_REDIRECTS) {
                free(target);
                return cmf_err_set(err, CMF_E_NETWORK, x->url, "%s: more than %d redirects", what,
                                   MAX_REDIRECTS);
            }
            free(x->url);
            x->url = target;
            cmf_status st = xfer_arm(x, r->env, r->stall_s, err);
            if (!st && hub_curl.multi_add_handle(r->m, x->h) != CURLM_OK)
                st = cmf_err_set(err, CMF_E_NETWORK, x->url, "libcurl refused a transfer");
            *again = !st;
            return st;
        }
        if (code == 416 && x->have == x->f->size) /* it was whole already: check it */
            return xfer_finish(x, r->repo_dir, r->commit, err);
        if (code == 416) { /* the partial file is not a prefix the server knows: start over */
            xfer_close(x);
            unlink(x->part);
        } else if (code >= 400 || code < 200)
            return hub_http_fail(err, x->url, what, CURLE_OK, NULL, code, &x->hh, token_sent);
        else if (x->have == x->f->size)
            return xfer_finish(x, r->repo_dir, r->commit, err);
        /* a 2xx that ended early, or a 416: one more try below */
    } else if (!retryable(cc) || x->attempts >= MAX_ATTEMPTS)
        return hub_http_fail(err, x->url, what, cc, x->errbuf, 0, NULL, token_sent);
    if (x->attempts >= MAX_ATTEMPTS)
        return cmf_err_set(err, CMF_E_NETWORK, x->url,
                           "%s: the transfer ended at %" PRIu64 " of %" PRIu64
                           " bytes %d times: run again to resume",
                           what, x->have, x->f->size, x->attempts);
    x->ps->p.bytes_done -= x->have; /* xfer_start counts the bytes on disk again */
    cmf_status st = xfer_start(x, r->env, r->repo, r->commit, r->stall_s, err);
    if (!st && hub_curl.multi_add_handle(r->m, x->h) != CURLM_OK)
        st = cmf_err_set(err, CMF_E_NETWORK, x->url, "libcurl refused a transfer");
    *again = !st;
    return st;
}

static cmf_status xfer_init(xfer *x, const hub_file *f, const char *repo_dir,
                            hub_progress_state *ps, cmf_err *err) {
    memset(x, 0, sizeof *x);
    x->f = f;
    x->ps = ps;
    x->blob = hub_cache_join(repo_dir, "blobs", hub_file_blob_name(f));
    x->part = x->blob ? malloc(strlen(x->blob) + 16) : NULL;
    x->h = hub_curl.easy_init();
    if (!x->blob || !x->part || !x->h)
        return cmf_err_set(err, CMF_E_NOMEM, f->path, "out of memory");
    sprintf(x->part, "%s.incomplete", x->blob);
    return CMF_OK;
}

cmf_status hub_download(const hub_env *env, const char *repo, const char *commit,
                        const char *repo_dir, const hub_file *const *files, size_t n,
                        unsigned parallel, long stall_s, hub_progress_state *ps, cmf_err *err) {
    if (n == 0) return CMF_OK;
    char *blobs = hub_cache_join(repo_dir, "blobs", NULL);
    cmf_status st = blobs ? hub_cache_mkdirs(blobs, err)
                          : cmf_err_set(err, CMF_E_NOMEM, repo_dir, "out of memory");
    free(blobs);
    if (st) return st;
    xfer *xs = calloc(n, sizeof *xs);
    CURLM *m = hub_curl.multi_init();
    if (!xs || !m) {
        free(xs);
        if (m) hub_curl.multi_cleanup(m);
        return cmf_err_set(err, CMF_E_NOMEM, repo, "out of memory");
    }
    run r = {env, repo, commit, repo_dir, stall_s, m, ps};
    size_t next = 0, active = 0;
    while (!st && (next < n || active > 0)) {
        while (!st && next < n && active < parallel) {
            xfer *x = &xs[next++];
            st = xfer_init(x, files[next - 1], repo_dir, ps, err);
            if (!st) st = xfer_start(x, env, repo, commit, stall_s, err);
            if (!st && hub_curl.multi_add_handle(m, x->h) != CURLM_OK)
                st = cmf_err_set(err, CMF_E_NETWORK, x->url, "libcurl refused a transfer");
            if (!st) active++;
        }
        if (st) break;
        int running = 0;
        CURLMcode mc = hub_curl.multi_perform(m, &running);
        if (mc == CURLM_OK) mc = hub_curl.multi_poll(m, NULL, 0, 100, NULL);
        if (mc != CURLM_OK) {
            st = cmf_err_set(err, CMF_E_NETWORK, repo, "libcurl: %s", hub_curl.multi_strerror(mc));
            break;
        }
        CURLMsg *msg;
        int left;
        while (!st && (msg = hub_curl.multi_info_read(m, &left))) {
            if (msg->msg != CURLMSG_DONE) continue;
            char *priv = NULL;
            hub_curl.easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, &priv);
            xfer *x = (xfer *)(void *)priv;
            bool again = false;
            st = on_done(&r, x, msg->data.result, &again, err);
            if (!st && !again) {
                active--;
                ps->p.files_done++;
                hub_progress_emit(ps, CORTIQ_HUB_EV_DONE, x->f->path, x->f->size, 0);
                xfer_free(x);
            }
        }
        hub_progress_emit(ps, CORTIQ_HUB_EV_BYTES, NULL, 0, 0);
    }
    for (size_t i = 0; i < n; i++) {
        if (xs[i].h) hub_curl.multi_remove_handle(m, xs[i].h);
        xfer_free(&xs[i]); /* a failed file's partial download stays for the next run */
    }
    hub_curl.multi_cleanup(m);
    free(xs);
    return st;
}
