/* hub_http.h - libcurl handles set up the one way every hub request needs: redirects followed
 * by hand so the token reaches the endpoint's origin only, timeouts, and error messages that
 * say what to do. */
#ifndef CORTIQ_HUB_HTTP_H
#define CORTIQ_HUB_HTTP_H

#include <jansson.h>

#include "hub/hub_curl.h"
#include "hub/hub_env.h"

/* What a response's headers told: the hub's error text, the next page of a listing. */
typedef struct hub_http_headers {
    char error_code[64];    /* X-Error-Code (e.g. "GatedRepo"), "" if none */
    char error_msg[200];    /* X-Error-Message, "" if none */
    char next[1024];        /* Link: <URL>; rel="next", "" if none */
    char content_range[96]; /* Content-Range, "" if none */
} hub_http_headers;

/* Point h at url: user agent, no automatic redirects, connect and stall timeouts, the
 * Authorization header only when url has the endpoint's origin, the header callback into
 * *hh. *hdrs is replaced (the caller frees it with hub_curl.slist_free_all). */
cmf_status hub_http_setup(CURL *h, const hub_env *env, const char *url, long stall_s,
                          struct curl_slist **hdrs, hub_http_headers *hh, cmf_err *err);

/* A 3xx answer's absolute target (malloc'd), or NULL when h did not get a redirect. */
char *hub_http_redirect_target(CURL *h);

/* GET url as JSON (redirects followed, token scoped as above). *next (may be NULL) gets the
 * Link rel="next" URL, malloc'd, or NULL. what names the object for messages ("repo X").
 * *unreachable (may be NULL) is set when the failure was that no server answered at all. */
cmf_status hub_http_get_json(const hub_env *env, const char *url, const char *what, long stall_s,
                             json_t **out, char **next, bool *unreachable, cmf_err *err);

/* True for the curl errors that mean no server answered (resolve, connect, TLS handshake). */
bool hub_http_unreachable(CURLcode cc);

/* Fill err for a failed request: curl error cc (CURLE_OK when the transfer itself worked) or
 * HTTP status http (>= 400), with the hub's own message when it gave one. */
cmf_status hub_http_fail(cmf_err *err, const char *url, const char *what, CURLcode cc,
                         const char *curl_detail, long http, const hub_http_headers *hh,
                         bool token_sent);

#endif
