/* hub_url.c - build the hub's URLs (path parts percent-encoded as huggingface_hub quotes
 * them) and compare origins, so the token never leaves the configured endpoint. */
#include "hub/hub_url.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static bool unreserved(unsigned char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '_' || c == '.' || c == '~';
}

/* Append s percent-encoded to out (sized by the caller at 3x); '/' kept when keep_slash. */
static char *encode_into(char *out, const char *s, bool keep_slash) {
    static const char hex[] = "0123456789ABCDEF";
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (unreserved(*p) || (keep_slash && *p == '/'))
            *out++ = (char)*p;
        else {
            *out++ = '%';
            *out++ = hex[*p >> 4];
            *out++ = hex[*p & 15];
        }
    }
    *out = 0;
    return out;
}

/* Concatenate (text, mode) pairs, mode 0 = literal, 1 = percent-encode all, 2 = encode but
 * keep '/'; the list ends at a NULL text. */
static char *build(const char *first, ...) {
    va_list ap;
    size_t n = 1;
    va_start(ap, first);
    for (const char *t = first; t; t = va_arg(ap, const char *)) {
        int mode = va_arg(ap, int);
        n += mode ? 3 * strlen(t) : strlen(t);
    }
    va_end(ap);
    char *out = malloc(n), *w = out;
    if (!out) return NULL;
    *w = 0;
    va_start(ap, first);
    for (const char *t = first; t; t = va_arg(ap, const char *)) {
        int mode = va_arg(ap, int);
        if (mode)
            w = encode_into(w, t, mode == 2);
        else {
            size_t l = strlen(t);
            memcpy(w, t, l + 1);
            w += l;
        }
    }
    va_end(ap);
    return out;
}

char *hub_url_model_info(const char *endpoint, const char *repo, const char *rev) {
    if (!rev) return build(endpoint, 0, "/api/models/", 0, repo, 2, (char *)NULL);
    return build(endpoint, 0, "/api/models/", 0, repo, 2, "/revision/", 0, rev, 1, (char *)NULL);
}

char *hub_url_tree(const char *endpoint, const char *repo, const char *commit, const char *dir) {
    if (!dir || !*dir)
        return build(endpoint, 0, "/api/models/", 0, repo, 2, "/tree/", 0, commit, 1, (char *)NULL);
    return build(endpoint, 0, "/api/models/", 0, repo, 2, "/tree/", 0, commit, 1, "/", 0, dir, 2,
                 (char *)NULL);
}

char *hub_url_resolve(const char *endpoint, const char *repo, const char *commit,
                      const char *path) {
    return build(endpoint, 0, "/", 0, repo, 2, "/resolve/", 0, commit, 1, "/", 0, path, 2,
                 (char *)NULL);
}

/* Split "scheme://[user@]host[:port]/..." into scheme, host, port (default by scheme). */
static bool origin_of(const char *url, char *scheme, size_t ns, char *host, size_t nh, long *port) {
    const char *sep = strstr(url, "://");
    if (!sep || (size_t)(sep - url) >= ns) return false;
    memcpy(scheme, url, (size_t)(sep - url));
    scheme[sep - url] = 0;
    const char *a = sep + 3;
    size_t alen = strcspn(a, "/?#");
    const char *at = memchr(a, '@', alen);
    if (at) {
        alen -= (size_t)(at + 1 - a);
        a = at + 1;
    }
    const char *hend = a + alen, *colon = NULL;
    if (*a == '[') { /* IPv6 literal */
        const char *rb = memchr(a, ']', alen);
        if (!rb) return false;
        colon = rb + 1 < hend && rb[1] == ':' ? rb + 1 : NULL;
    } else
        colon = memchr(a, ':', alen);
    size_t hl = (size_t)((colon ? colon : hend) - a);
    if (hl == 0 || hl >= nh) return false;
    memcpy(host, a, hl);
    host[hl] = 0;
    if (colon) {
        char *end;
        *port = strtol(colon + 1, &end, 10);
        if (end != hend || *port <= 0 || *port > 65535) return false;
    } else if (!strcasecmp(scheme, "https"))
        *port = 443;
    else if (!strcasecmp(scheme, "http"))
        *port = 80;
    else
        return false;
    return true;
}

bool hub_url_same_origin(const char *a, const char *b) {
    char sa[16], sb[16], ha[256], hb[256];
    long pa, pb;
    if (!origin_of(a, sa, sizeof sa, ha, sizeof ha, &pa) ||
        !origin_of(b, sb, sizeof sb, hb, sizeof hb, &pb))
        return false;
    return !strcasecmp(sa, sb) && !strcasecmp(ha, hb) && pa == pb;
}
