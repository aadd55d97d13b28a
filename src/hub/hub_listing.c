/* hub_listing.c - read the hub's model-info and tree answers into a file list. Every value
 * that later becomes a file name (path, oid, sha256) is checked here: a hostile server must
 * not be able to write outside the cache. */
#include "hub/hub_listing.h"

#include "common/err.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hub/hub_curl.h"
#include "hub/hub_http.h"
#include "hub/hub_url.h"

#define MAX_PAGES 1000

bool hub_is_hex(const char *s, size_t n) {
    if (!s || strlen(s) != n) return false;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f'))) return false;
    return true;
}

bool hub_path_ok(const char *path) {
    if (!path || !*path || path[0] == '/' || strlen(path) > 1000) return false;
    for (const char *seg = path;;) {
        size_t n = strcspn(seg, "/");
        if (n == 0 || (n == 1 && seg[0] == '.') || (n == 2 && seg[0] == '.' && seg[1] == '.'))
            return false;
        for (size_t i = 0; i < n; i++)
            if ((unsigned char)seg[i] < ' ' || seg[i] == '\\') return false;
        if (!seg[n]) return true;
        seg += n + 1;
    }
}

const char *hub_file_blob_name(const hub_file *f) {
    return f->sha256[0] ? f->sha256 : f->oid;
}

void hub_listing_free(hub_listing *l) {
    if (!l) return;
    for (size_t i = 0; i < l->n; i++)
        free(l->files[i].path);
    free(l->files);
    memset(l, 0, sizeof *l);
}

const hub_file *hub_listing_find(const hub_listing *l, const char *path) {
    for (size_t i = 0; i < l->n; i++)
        if (!strcmp(l->files[i].path, path)) return &l->files[i];
    return NULL;
}

static cmf_status add_entry(hub_listing *l, const json_t *e, size_t *cap, const char *url,
                            cmf_err *err) {
    const char *type = json_string_value(json_object_get(e, "type"));
    if (type && strcmp(type, "file")) return CMF_OK; /* folders are not descended into */
    const char *path = json_string_value(json_object_get(e, "path"));
    const char *oid = json_string_value(json_object_get(e, "oid"));
    json_t *size = json_object_get(e, "size"), *lfs = json_object_get(e, "lfs");
    if (!hub_path_ok(path) || !hub_is_hex(oid, 40) || !json_is_integer(size) ||
        json_integer_value(size) < 0)
        return cmf_err_set(err, CMF_E_PARSE, url,
                           "tree entry '%s' lacks a safe path, a 40-hex oid or a size",
                           path ? path : "?");
    hub_file f = {.size = (uint64_t)json_integer_value(size)};
    memcpy(f.oid, oid, 41);
    if (lfs && !json_is_null(lfs)) {
        const char *sha = json_string_value(json_object_get(lfs, "oid"));
        if (sha && !strncmp(sha, "sha256:", 7)) sha += 7;
        json_t *ls = json_object_get(lfs, "size");
        if (!hub_is_hex(sha, 64))
            return cmf_err_set(err, CMF_E_PARSE, url, "tree entry '%s': lfs.oid is not a sha256",
                               path);
        memcpy(f.sha256, sha, 65);
        if (json_is_integer(ls) && json_integer_value(ls) >= 0)
            f.size = (uint64_t)json_integer_value(ls);
    }
    if (l->n == *cap) {
        size_t nc = *cap ? *cap * 2 : 64;
        hub_file *nf = realloc(l->files, nc * sizeof *nf);
        if (!nf) return cmf_err_set(err, CMF_E_NOMEM, url, "out of memory");
        l->files = nf;
        *cap = nc;
    }
    if (!(f.path = strdup(path))) return cmf_err_set(err, CMF_E_NOMEM, url, "out of memory");
    l->files[l->n++] = f;
    return CMF_OK;
}

cmf_status hub_listing_add_page(hub_listing *l, size_t *cap, const json_t *page, const char *url,
                                cmf_err *err) {
    if (!json_is_array(page))
        return cmf_err_set(err, CMF_E_PARSE, url, "the file list is not a JSON array");
    cmf_status st = CMF_OK;
    for (size_t i = 0; !st && i < json_array_size(page); i++)
        st = add_entry(l, json_array_get(page, i), cap, url, err);
    return st;
}

static cmf_status resolve_commit(const hub_env *env, const char *repo, const char *revision,
                                 long stall_s, char commit[41], bool *unreachable, cmf_err *err) {
    char *url = hub_url_model_info(env->endpoint, repo, revision);
    if (!url) return cmf_err_set(err, CMF_E_NOMEM, repo, "out of memory");
    char what[600];
    if (revision)
        snprintf(what, sizeof what, "repo %s at revision '%s'", repo, revision);
    else
        snprintf(what, sizeof what, "repo %s", repo);
    json_t *info = NULL;
    cmf_status st = hub_http_get_json(env, url, what, stall_s, &info, NULL, unreachable, err);
    if (!st) {
        const char *sha = json_string_value(json_object_get(info, "sha"));
        if (!hub_is_hex(sha, 40))
            st = cmf_err_set(err, CMF_E_PARSE, url, "model info has no 40-hex \"sha\" commit");
        else
            memcpy(commit, sha, 41);
    }
    json_decref(info);
    free(url);
    return st;
}

/* A Link target resolved against the page it came from (malloc'd; ref is freed). */
static char *absolute(const char *base, char *ref) {
    CURLU *u = hub_curl.url();
    char *out = NULL, *abs = NULL;
    if (u && !hub_curl.url_set(u, CURLUPART_URL, base, 0) &&
        !hub_curl.url_set(u, CURLUPART_URL, ref, 0) && !hub_curl.url_get(u, CURLUPART_URL, &abs, 0))
        out = strdup(abs);
    hub_curl.free(abs);
    hub_curl.url_cleanup(u);
    free(ref);
    return out;
}

cmf_status hub_list(const hub_env *env, const char *repo, const char *revision, const char *dir,
                    long stall_s, hub_listing *out, bool *unreachable, cmf_err *err) {
    memset(out, 0, sizeof *out);
    cmf_status st = resolve_commit(env, repo, revision, stall_s, out->commit, unreachable, err);
    if (st) return st;
    char *url = hub_url_tree(env->endpoint, repo, out->commit, dir);
    if (!url) return cmf_err_set(err, CMF_E_NOMEM, repo, "out of memory");
    char what[600];
    snprintf(what, sizeof what, "the file list of %s at %s%s%s", repo, out->commit,
             dir && *dir ? " in " : "", dir && *dir ? dir : "");
    size_t cap = 0;
    for (int page = 0; url && !st; page++) {
        json_t *arr = NULL;
        char *next = NULL;
        if (page == MAX_PAGES)
            st = cmf_err_set(err, CMF_E_LIMIT, url, "more than %d pages of files", MAX_PAGES);
        else if (!(st = hub_http_get_json(env, url, what, stall_s, &arr, &next, unreachable, err)))
            st = hub_listing_add_page(out, &cap, arr, url, err);
        json_decref(arr);
        if (!st && next && !(next = absolute(url, next)))
            st = cmf_err_set(err, CMF_E_PARSE, url, "the next page's link is not a URL");
        /* a next page elsewhere than the endpoint would receive the token: refuse it */
        if (!st && next && !hub_url_same_origin(next, env->endpoint))
            st = cmf_err_set(err, CMF_E_PARSE, url, "next page %s is not on the endpoint", next);
        free(url);
        url = next;
    }
    free(url);
    if (st) hub_listing_free(out);
    return st;
}
