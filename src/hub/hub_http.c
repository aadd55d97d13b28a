/* hub_http.c - the request side of the hub client: handle setup, JSON GETs, and the error
 * messages for every way a request fails. */
#include "hub/hub_http.h"

#include "common/err.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "hub/hub_url.h"

#define MAX_REDIRECTS  10
#define MAX_JSON_BYTES (64u << 20) /* a repo listing page is kilobytes; refuse a runaway body */

/* Copy header value (after "name:") trimmed into dst. */
static void header_value(const char *line, size_t n, size_t name_len, char *dst, size_t cap) {
    const char *v = line + name_len, *e = line + n;
    while (v < e && (*v == ' ' || *v == '\t'))
        v++;
    while (e > v && isspace((unsigned char)e[-1]))
        e--;
    size_t l = (size_t)(e - v) < cap - 1 ? (size_t)(e - v) : cap - 1;
    memcpy(dst, v, l);
    dst[l] = 0;
}

static bool header_is(const char *line, size_t n, const char *name) {
    size_t l = strlen(name);
    return n > l && !strncasecmp(line, name, l);
}

/* "<URL>; rel="next"" somewhere in a Link header value -> URL. */
static void link_next(const char *value, char *dst, size_t cap) {
    for (const char *p = value; (p = strchr(p, '<'));) {
        const char *e = strchr(p, '>');
        if (!e) return;
        const char *params = e + 1, *stop = strchr(params, ',');
        size_t plen = stop ? (size_t)(stop - params) : strlen(params);
        char buf[128];
        size_t bl = plen < sizeof buf - 1 ? plen : sizeof buf - 1;
        memcpy(buf, params, bl);
        buf[bl] = 0;
        if (strstr(buf, "rel=\"next\"") || strstr(buf, "rel=next")) {
            size_t ul = (size_t)(e - p - 1);
            if (ul < cap) {
                memcpy(dst, p + 1, ul);
                dst[ul] = 0;
            }
            return;
        }
        p = e + 1;
    }
}

static size_t on_header(char *line, size_t size, size_t nitems, void *user) {
    size_t n = size * nitems;
    hub_http_headers *hh = user;
    if (!hh) return n;
    if (!strncmp(line, "HTTP/", 5)) /* a new response (after a 100 or a redirect) starts */
        memset(hh, 0, sizeof *hh);
    else if (header_is(line, n, "x-error-code:"))
        header_value(line, n, 13, hh->error_code, sizeof hh->error_code);
    else if (header_is(line, n, "x-error-message:"))
        header_value(line, n, 16, hh->error_msg, sizeof hh->error_msg);
    else if (header_is(line, n, "content-range:"))
        header_value(line, n, 14, hh->content_range, sizeof hh->content_range);
    else if (header_is(line, n, "link:")) {
        char v[2048];
        header_value(line, n, 5, v, sizeof v);
        link_next(v, hh->next, sizeof hh->next);
    }
    return n;
}

cmf_status hub_http_setup(CURL *h, const hub_env *env, const char *url, long stall_s,
                          struct curl_slist **hdrs, hub_http_headers *hh, cmf_err *err) {
    hub_curl.slist_free_all(*hdrs);
    *hdrs = NULL;
    if (hh) memset(hh, 0, sizeof *hh);
    struct curl_slist *l = hub_curl.slist_append(NULL, "Accept: */*");
    if (l && env->token && hub_url_same_origin(url, env->endpoint)) {
        size_t n = strlen(env->token) + 32;
        char *a = malloc(n);
        if (!a) {
            hub_curl.slist_free_all(l);
            return cmf_err_set(err, CMF_E_NOMEM, "hub", "out of memory");
        }
        snprintf(a, n, "Authorization: Bearer %s", env->token);
        struct curl_slist *l2 = hub_curl.slist_append(l, a);
        memset(a, 0, n);
        free(a);
        if (!l2) hub_curl.slist_free_all(l);
        l = l2;
    }
    if (!l) return cmf_err_set(err, CMF_E_NOMEM, "hub", "out of memory");
    *hdrs = l;
    CURLcode rc = CURLE_OK;
#define SET(opt, val)                                                                              \
    if (rc == CURLE_OK) rc = hub_curl.easy_setopt(h, opt, val)
    SET(CURLOPT_URL, url);
    SET(CURLOPT_HTTPHEADER, l);
    SET(CURLOPT_USERAGENT, "cortiq/0.1.0");
    /* redirects are followed by the caller, which decides per hop whether the token goes */
    SET(CURLOPT_FOLLOWLOCATION, 0L);
    SET(CURLOPT_CONNECTTIMEOUT, 30L);
    SET(CURLOPT_LOW_SPEED_LIMIT, 1L);
    SET(CURLOPT_LOW_SPEED_TIME, stall_s > 0 ? stall_s : 60L);
    SET(CURLOPT_NOSIGNAL, 1L);
    SET(CURLOPT_ACCEPT_ENCODING, "");
    SET(CURLOPT_HEADERFUNCTION, on_header);
    SET(CURLOPT_HEADERDATA, hh);
    SET(CURLOPT_PROTOCOLS_STR, "http,https");
#undef SET
    if (rc != CURLE_OK)
        return cmf_err_set(err, CMF_E_NETWORK, url, "libcurl refused an option: %s",
                           hub_curl.easy_strerror(rc));
    return CMF_OK;
}

char *hub_http_redirect_target(CURL *h) {
    long code = 0;
    char *loc = NULL;
    hub_curl.easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
    if (code < 300 || code > 399) return NULL;
    if (hub_curl.easy_getinfo(h, CURLINFO_REDIRECT_URL, &loc) != CURLE_OK || !loc) return NULL;
    return strdup(loc);
}

bool hub_http_unreachable(CURLcode cc) {
    return cc == CURLE_COULDNT_RESOLVE_HOST || cc == CURLE_COULDNT_RESOLVE_PROXY ||
           cc == CURLE_COULDNT_CONNECT || cc == CURLE_OPERATION_TIMEDOUT ||
           cc == CURLE_SSL_CONNECT_ERROR;
}

cmf_status hub_http_fail(cmf_err *err, const char *url, const char *what, CURLcode cc,
                         const char *curl_detail, long http, const hub_http_headers *hh,
                         bool token_sent) {
    const char *detail = curl_detail && *curl_detail ? curl_detail : hub_curl.easy_strerror(cc);
    if (cc != CURLE_OK && hub_http_unreachable(cc))
        return cmf_err_set(err, CMF_E_NETWORK, url,
                           "the endpoint could not be reached (%s): check the network, or set "
                           "HF_ENDPOINT to a mirror",
                           detail);
    if (cc != CURLE_OK)
        return cmf_err_set(err, CMF_E_NETWORK, url,
                           "transfer of %s failed (%s): run the command again to resume", what,
                           detail);
    char hub[300] = "";
    if (hh && (hh->error_code[0] || hh->error_msg[0]))
        snprintf(hub, sizeof hub, " [hub: %s%s%s]", hh->error_code,
                 hh->error_code[0] && hh->error_msg[0] ? ": " : "", hh->error_msg);
    if (http == 401 || http == 403)
        return cmf_err_set(err, CMF_E_NETWORK, url, "HTTP %ld: %s is gated or private%s: %s%s",
                           http, what, http == 401 ? " (or does not exist)" : "",
                           token_sent ? "the token in HF_TOKEN was refused: check that it can "
                                        "read this repo and that its terms are accepted"
                                      : "set HF_TOKEN to a token that can read it (and accept "
                                        "the repo's terms on its web page)",
                           hub);
    if (http == 404)
        return cmf_err_set(err, CMF_E_NOT_FOUND, url,
                           "HTTP 404: %s not found: check the repo id, the revision and the "
                           "file name%s",
                           what, hub);
    if (http == 429)
        return cmf_err_set(err, CMF_E_NETWORK, url,
                           "HTTP 429: the hub is rate-limiting requests: wait and run again%s%s",
                           token_sent ? "" : " (a token in HF_TOKEN raises the limit)", hub);
    return cmf_err_set(err, CMF_E_NETWORK, url, "HTTP %ld for %s%s", http, what, hub);
}

typedef struct membuf {
    char *data;
    size_t len, cap;
    bool too_big;
} membuf;

static size_t on_body(char *p, size_t size, size_t n, void *user) {
    membuf *b = user;
    size_t add = size * n;
    if (b->len + add + 1 > MAX_JSON_BYTES) {
        b->too_big = true;
        return 0;
    }
    if (b->len + add + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 16384;
        while (cap < b->len + add + 1)
            cap *= 2;
        char *d = realloc(b->data, cap);
        if (!d) return 0;
        b->data = d;
        b->cap = cap;
    }
    memcpy(b->data + b->len, p, add);
    b->len += add;
    b->data[b->len] = 0;
    return add;
}

cmf_status hub_http_get_json(const hub_env *env, const char *url, const char *what, long stall_s,
                             json_t **out, char **next, bool *unreachable, cmf_err *err) {
    *out = NULL;
    if (unreachable) *unreachable = false;
    if (next) *next = NULL;
    CURL *h = hub_curl.easy_init();
    if (!h) return cmf_err_set(err, CMF_E_NOMEM, url, "libcurl: no handle");
    struct curl_slist *hdrs = NULL;
    hub_http_headers hh;
    membuf body = {0};
    char errbuf[CURL_ERROR_SIZE];
    char *cur = strdup(url);
    cmf_status st = cur ? CMF_OK : cmf_err_set(err, CMF_E_NOMEM, url, "out of memory");
    for (int hop = 0; !st; hop++) {
        if (hop > MAX_REDIRECTS) {
            st = cmf_err_set(err, CMF_E_NETWORK, url, "more than %d redirects", MAX_REDIRECTS);
            break;
        }
        if ((st = hub_http_setup(h, env, cur, stall_s, &hdrs, &hh, err))) break;
        body.len = 0;
        errbuf[0] = 0;
        hub_curl.easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
        hub_curl.easy_setopt(h, CURLOPT_WRITEDATA, &body);
        hub_curl.easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
        CURLcode cc = hub_curl.easy_perform(h);
        long code = 0;
        hub_curl.easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
        bool sent = env->token && hub_url_same_origin(cur, env->endpoint);
        if (cc != CURLE_OK) {
            if (unreachable) *unreachable = hub_http_unreachable(cc);
            st = body.too_big ? cmf_err_set(err, CMF_E_LIMIT, cur, "answer for %s is over %u MiB",
                                            what, MAX_JSON_BYTES >> 20)
                              : hub_http_fail(err, cur, what, cc, errbuf, 0, NULL, sent);
            break;
        }
        char *target = hub_http_redirect_target(h);
        if (target) {
            free(cur);
            cur = target;
            continue;
        }
        if (code >= 400 || code < 200) {
            st = hub_http_fail(err, cur, what, CURLE_OK, NULL, code, &hh, sent);
            break;
        }
        json_error_t je;
        *out = json_loadb(body.data ? body.data : "", body.len, 0, &je);
        if (!*out) {
            st = cmf_err_set(err, CMF_E_PARSE, cur, "answer for %s is not JSON: %s (line %d)", what,
                             je.text, je.line);
            break;
        }
        if (next && hh.next[0] && !(*next = strdup(hh.next))) {
            json_decref(*out);
            *out = NULL;
            st = cmf_err_set(err, CMF_E_NOMEM, cur, "out of memory");
        }
        break;
    }
    hub_curl.slist_free_all(hdrs);
    hub_curl.easy_cleanup(h);
    free(body.data);
    free(cur);
    return st;
}
