/* hub_pull.c - cortiq_hub_pull: resolve, list, select, skip what the cache holds, download
 * the rest (the safetensors index first when the weights are sharded), link the snapshot. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cortiq/hub.h"
#include "common/fileio.h"
#include "hub/hub_cache.h"

#include "common/err.h"
#include "hub/hub_curl.h"
#include "hub/hub_download.h"
#include "hub/hub_env.h"
#include "hub/hub_http.h"
#include "hub/hub_listing.h"
#include "hub/hub_select.h"

#define DEFAULT_PARALLEL 4
#define MAX_PARALLEL     32

/* HF_HUB_OFFLINE=1 (or true/yes/on): the cache only, no request at all. */
static bool offline_mode(void) {
    const char *v = getenv("HF_HUB_OFFLINE");
    return v && (!strcmp(v, "1") || !strcasecmp(v, "true") || !strcasecmp(v, "yes") ||
                 !strcasecmp(v, "on"));
}

void cortiq_hub_opts_default(cortiq_hub_opts *o) {
    memset(o, 0, sizeof *o);
}

void cortiq_hub_result_free(cortiq_hub_result *r) {
    if (!r) return;
    free(r->repo);
    free(r->commit);
    free(r->snapshot_dir);
    free(r->gguf_path);
    memset(r, 0, sizeof *r);
}

char *cortiq_hub_cache_dir(const cortiq_hub_opts *opts, cmf_err *err) {
    return hub_env_cache_dir(opts, err);
}

typedef struct pull {
    const hub_env *env;
    const char *repo;
    const hub_listing *l;
    const char *repo_dir;
    unsigned parallel;
    long stall_s;
    hub_progress_state ps;
    cortiq_hub_result *out;
} pull;

/* The index in todo[0..n) of a file with f's content, or n. */
static size_t same_blob(const hub_file **todo, size_t n, const hub_file *f) {
    for (size_t i = 0; i < n; i++)
        if (!strcmp(hub_file_blob_name(todo[i]), hub_file_blob_name(f))) return i;
    return n;
}

/* Fetch the files sel->idx[from..) that the cache lacks; link the ones whose blob is there.
 * Two paths with one content download it once (a second writer would be locked out). */
static cmf_status fetch_batch(pull *p, const hub_selection *sel, size_t from, cmf_err *err) {
    const hub_file **todo = calloc(sel->n - from + 1, sizeof *todo);
    const hub_file **dups = calloc(sel->n - from + 1, sizeof *dups);
    if (!todo || !dups) {
        free(todo);
        free(dups);
        return cmf_err_set(err, CMF_E_NOMEM, p->repo, "out of memory");
    }
    size_t n = 0, n_dups = 0;
    cmf_status st = CMF_OK;
    p->ps.p.files_total = (unsigned)sel->n;
    for (size_t k = from; !st && k < sel->n; k++) {
        const hub_file *f = &p->l->files[sel->idx[k]];
        if (hub_cache_has_file(p->repo_dir, p->l->commit, f->path, f->size)) {
            p->ps.p.files_done++;
            hub_progress_emit(&p->ps, CORTIQ_HUB_EV_CACHED, f->path, f->size, 0);
        } else if (hub_cache_has_blob(p->repo_dir, hub_file_blob_name(f), f->size)) {
            /* the same content under another commit: a new link is all it takes */
            st = hub_cache_link(p->repo_dir, p->l->commit, f->path, hub_file_blob_name(f), err);
            p->ps.p.files_done++;
            if (!st) hub_progress_emit(&p->ps, CORTIQ_HUB_EV_CACHED, f->path, f->size, 0);
        } else if (p->out->offline) {
            st = cmf_err_set(err, CMF_E_NOT_FOUND, p->repo,
                             "%s is not in the cached snapshot %s, and the hub was not asked "
                             "(HF_HUB_OFFLINE) or could not be reached: pull it with a network",
                             f->path, p->l->commit);
        } else if (same_blob(todo, n, f) < n) {
            dups[n_dups++] = f;
        } else {
            todo[n++] = f;
            p->ps.p.bytes_total += f->size;
        }
    }
    if (!st) {
        hub_progress_emit(&p->ps, CORTIQ_HUB_EV_START, NULL, 0, 0);
        uint64_t before = p->ps.p.bytes_received;
        st = hub_download(p->env, p->repo, p->l->commit, p->repo_dir, todo, n, p->parallel,
                          p->stall_s, &p->ps, err);
        if (!st) {
            p->out->files_fetched += (unsigned)n;
            p->out->bytes_fetched += p->ps.p.bytes_received - before;
        }
    }
    for (size_t i = 0; !st && i < n_dups; i++) {
        const hub_file *f = dups[i];
        st = hub_cache_link(p->repo_dir, p->l->commit, f->path, hub_file_blob_name(f), err);
        p->ps.p.files_done++;
        if (!st) hub_progress_emit(&p->ps, CORTIQ_HUB_EV_CACHED, f->path, f->size, 0);
    }
    free(todo);
    free(dups);
    return st;
}

/* The sharded checkpoint's index is in the snapshot now: add the shards it names. */
static cmf_status add_index_shards(pull *p, hub_selection *sel, cmf_err *err) {
    char *path = hub_cache_join(p->out->snapshot_dir, "model.safetensors.index.json", NULL);
    if (!path) return cmf_err_set(err, CMF_E_NOMEM, p->repo, "out of memory");
    size_t len;
    char *text = cq_read_file(path, &len);
    cmf_status st = text ? hub_select_index_shards(p->l, text, sel, err)
                         : cmf_err_set(err, CMF_E_IO, path, "cannot read");
    free(text);
    free(path);
    return st;
}

static cmf_status fill_result(pull *p, const char *repo, const hub_selection *sel, cmf_err *err) {
    cortiq_hub_result *r = p->out;
    char *snaps = hub_cache_join(p->repo_dir, "snapshots", p->l->commit);
    r->repo = strdup(repo);
    r->commit = strdup(p->l->commit);
    r->snapshot_dir = snaps;
    r->files = (unsigned)sel->n;
    if (!r->repo || !r->commit || !r->snapshot_dir)
        return cmf_err_set(err, CMF_E_NOMEM, repo, "out of memory");
    return CMF_OK;
}

cmf_status cortiq_hub_pull(const char *repo, const cortiq_hub_opts *opts, cortiq_hub_result *out,
                           cmf_err *err) {
    memset(out, 0, sizeof *out);
    cortiq_hub_opts dflt;
    if (!opts) {
        cortiq_hub_opts_default(&dflt);
        opts = &dflt;
    }
    cortiq_hub_ref ref;
    if (!cortiq_hub_ref_parse(repo, &ref) || ref.revision[0] || ref.file[0])
        return cmf_err_set(err, CMF_E_INVALID_ARG, repo ? repo : "(null)",
                           "not a repo id: want OWNER/NAME (letters, digits, '-', '_', '.')");
    if (opts->revision && (!hub_path_ok(opts->revision) || strlen(opts->revision) > 255))
        return cmf_err_set(err, CMF_E_INVALID_ARG, repo, "revision '%s' is not a safe name",
                           opts->revision);
    if (opts->file && !hub_path_ok(opts->file))
        return cmf_err_set(err, CMF_E_INVALID_ARG, repo, "file '%s' is not a safe repo path",
                           opts->file);
    if (opts->parallel > MAX_PARALLEL)
        return cmf_err_set(err, CMF_E_INVALID_ARG, repo, "parallel %u: at most %d", opts->parallel,
                           MAX_PARALLEL);
    hub_env env;
    cmf_status st = hub_env_resolve(opts, &env, err);
    if (st) return st;
    hub_listing l = {0};
    hub_selection sel = {0};
    char *repo_dir = hub_cache_repo_dir(env.cache_dir, repo);
    if (!repo_dir) {
        st = cmf_err_set(err, CMF_E_NOMEM, repo, "out of memory");
        goto done;
    }
    char dir[512] = "";
    if (opts->file && strrchr(opts->file, '/')) {
        size_t dl = (size_t)(strrchr(opts->file, '/') - opts->file);
        if (dl < sizeof dir) memcpy(dir, opts->file, dl), dir[dl] = 0;
    }
    long stall = opts->timeout_s > 0 ? opts->timeout_s : 60;
    bool unreachable = false;
    /* libcurl is loaded only when the hub is asked: an offline pull reads the cache alone */
    if (offline_mode())
        st = hub_list_cached(repo_dir, repo, opts->revision, dir, &l, err);
    else if (!(st = hub_curl_load(err)) &&
             (st = hub_list(&env, repo, opts->revision, dir, stall, &l, &unreachable, err)) &&
             unreachable) {
        /* like huggingface_hub: without a network, the cached snapshot of the revision */
        cmf_err first = err ? *err : (cmf_err){0};
        if (!hub_list_cached(repo_dir, repo, opts->revision, dir, &l, NULL))
            st = CMF_OK;
        else if (err)
            *err = first;
    }
    if (st) goto done;
    out->offline = offline_mode() || unreachable;
    if ((st = hub_select(&l, repo, opts->file, opts->want, &sel, err))) goto done;
    pull p = {&env,
              repo,
              &l,
              repo_dir,
              opts->parallel ? opts->parallel : DEFAULT_PARALLEL,
              stall,
              {.fn = opts->progress, .user = opts->progress_user, .t0 = hub_now()},
              out};
    if ((st = fill_result(&p, repo, &sel, err))) goto done;
    /* refs/<revision> first: the snapshot is findable by name even if a download fails */
    const char *rev = opts->revision ? opts->revision : "main";
    if (!out->offline && strcmp(rev, l.commit) &&
        (st = hub_cache_write_ref(repo_dir, rev, l.commit, err)))
        goto done;
    size_t first = sel.n;
    if ((st = fetch_batch(&p, &sel, 0, err))) goto done;
    if (sel.sharded_index) {
        if ((st = add_index_shards(&p, &sel, err))) goto done;
        out->files = (unsigned)sel.n;
        if ((st = fetch_batch(&p, &sel, first, err))) goto done;
    }
    if (sel.gguf) {
        out->gguf_path = hub_cache_join(out->snapshot_dir, l.files[sel.idx[0]].path, NULL);
        if (!out->gguf_path) st = cmf_err_set(err, CMF_E_NOMEM, repo, "out of memory");
    }
done:
    if (st) cortiq_hub_result_free(out);
    hub_selection_free(&sel);
    hub_listing_free(&l);
    free(repo_dir);
    hub_env_free(&env);
    return st;
}
