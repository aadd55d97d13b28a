/* hub_cache.c - paths and atomic updates in the huggingface_hub cache. Every change is a
 * rename (blobs, links, refs), so a crash or a second process never sees half a file. */
#include "hub/hub_cache.h"

#include "common/err.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

char *hub_cache_join(const char *a, const char *b, const char *c) {
    size_t n = strlen(a) + strlen(b) + (c ? strlen(c) + 1 : 0) + 2;
    char *out = malloc(n);
    if (!out) return NULL;
    if (c)
        snprintf(out, n, "%s/%s/%s", a, b, c);
    else
        snprintf(out, n, "%s/%s", a, b);
    return out;
}

char *hub_cache_repo_dir(const char *cache, const char *repo) {
    size_t n = strlen(cache) + strlen(repo) + 16;
    char *out = malloc(n);
    if (!out) return NULL;
    int k = snprintf(out, n, "%s/models--", cache);
    for (const char *p = repo; *p; p++) {
        if (*p == '/') {
            out[k++] = '-';
            out[k++] = '-';
        } else
            out[k++] = *p;
    }
    out[k] = 0;
    return out;
}

cmf_status hub_cache_mkdirs(const char *dir, cmf_err *err) {
    char *p = strdup(dir);
    if (!p) return cmf_err_set(err, CMF_E_NOMEM, dir, "out of memory");
    for (char *s = p + 1;; s++) {
        if (*s != '/' && *s) continue;
        char c = *s;
        *s = 0;
        if (mkdir(p, 0777) != 0 && errno != EEXIST) {
            cmf_status st =
                cmf_err_set(err, CMF_E_IO, p, "cannot create directory: %s", strerror(errno));
            free(p);
            return st;
        }
        if (!c) break;
        *s = c;
    }
    struct stat sb;
    cmf_status st = stat(dir, &sb) == 0 && S_ISDIR(sb.st_mode)
                        ? CMF_OK
                        : cmf_err_set(err, CMF_E_IO, dir, "not a directory");
    free(p);
    return st;
}

static bool regular_of_size(const char *path, uint64_t size) {
    struct stat sb;
    return path && stat(path, &sb) == 0 && S_ISREG(sb.st_mode) && (uint64_t)sb.st_size == size;
}

bool hub_cache_has_file(const char *repo_dir, const char *commit, const char *path, uint64_t size) {
    char *snap = hub_cache_join(repo_dir, "snapshots", commit);
    char *p = snap ? hub_cache_join(snap, path, NULL) : NULL;
    bool ok = regular_of_size(p, size);
    free(snap);
    free(p);
    return ok;
}

bool hub_cache_has_blob(const char *repo_dir, const char *blob, uint64_t size) {
    char *p = hub_cache_join(repo_dir, "blobs", blob);
    bool ok = regular_of_size(p, size);
    free(p);
    return ok;
}

/* Write content to path through path.tmp.<pid> and a rename. */
static cmf_status write_atomic(const char *path, const char *content, cmf_err *err) {
    size_t n = strlen(path) + 32;
    char *tmp = malloc(n);
    if (!tmp) return cmf_err_set(err, CMF_E_NOMEM, path, "out of memory");
    snprintf(tmp, n, "%s.tmp.%ld", path, (long)getpid());
    FILE *f = fopen(tmp, "wb");
    bool ok = f && fputs(content, f) >= 0;
    if (f && fclose(f) != 0) ok = false;
    if (ok && rename(tmp, path) != 0) ok = false;
    cmf_status st =
        ok ? CMF_OK : cmf_err_set(err, CMF_E_IO, path, "cannot write: %s", strerror(errno));
    if (!ok) unlink(tmp);
    free(tmp);
    return st;
}

static cmf_status mkdirs_parent(const char *path, cmf_err *err) {
    char *d = strdup(path);
    if (!d) return cmf_err_set(err, CMF_E_NOMEM, path, "out of memory");
    char *slash = strrchr(d, '/');
    cmf_status st = CMF_OK;
    if (slash && slash != d) {
        *slash = 0;
        st = hub_cache_mkdirs(d, err);
    }
    free(d);
    return st;
}

cmf_status hub_cache_link(const char *repo_dir, const char *commit, const char *path,
                          const char *blob, cmf_err *err) {
    char *snap = hub_cache_join(repo_dir, "snapshots", commit);
    char *link = snap ? hub_cache_join(snap, path, NULL) : NULL;
    /* from snapshots/<commit>/<dir...>/ up to the repo dir: two levels plus one per '/' */
    size_t ups = 2;
    for (const char *p = path; *p; p++)
        ups += *p == '/';
    size_t tn = ups * 3 + strlen(blob) + 8;
    char *target = malloc(tn), *tmp = link ? malloc(strlen(link) + 32) : NULL;
    cmf_status st = CMF_OK;
    if (!snap || !link || !target || !tmp) {
        st = cmf_err_set(err, CMF_E_NOMEM, repo_dir, "out of memory");
        goto done;
    }
    target[0] = 0;
    for (size_t i = 0; i < ups; i++)
        strcat(target, "../");
    strcat(target, "blobs/");
    strcat(target, blob);
    sprintf(tmp, "%s.tmp.%ld", link, (long)getpid());
    if ((st = mkdirs_parent(link, err))) goto done;
    unlink(tmp);
    if (symlink(target, tmp) != 0 || rename(tmp, link) != 0) {
        st = cmf_err_set(err, CMF_E_IO, link, "cannot link to %s: %s", target, strerror(errno));
        unlink(tmp);
    }
done:
    free(snap);
    free(link);
    free(target);
    free(tmp);
    return st;
}

cmf_status hub_cache_write_ref(const char *repo_dir, const char *revision, const char *commit,
                               cmf_err *err) {
    char *ref = hub_cache_join(repo_dir, "refs", revision);
    if (!ref) return cmf_err_set(err, CMF_E_NOMEM, repo_dir, "out of memory");
    cmf_status st = mkdirs_parent(ref, err);
    if (!st) st = write_atomic(ref, commit, err);
    free(ref);
    return st;
}
