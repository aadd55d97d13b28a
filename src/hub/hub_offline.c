/* hub_offline.c - a repo listing from the cache alone, for HF_HUB_OFFLINE and for an endpoint
 * that cannot be reached: what huggingface_hub falls back to, so a model pulled once keeps
 * working without a network. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/fileio.h"
#include "hub/hub_cache.h"

#include "common/err.h"
#include "hub/hub_listing.h"

static bool is_dir(const char *path) {
    struct stat sb;
    return path && stat(path, &sb) == 0 && S_ISDIR(sb.st_mode);
}

/* refs/<rev> holds the commit (a 40-hex string, maybe with a newline from other tools). */
static cmf_status cached_commit(const char *repo_dir, const char *repo, const char *rev,
                                char commit[41], cmf_err *err) {
    char *snap = hub_cache_join(repo_dir, "snapshots", rev);
    bool direct = hub_is_hex(rev, 40) && is_dir(snap);
    free(snap);
    if (direct) {
        memcpy(commit, rev, 41);
        return CMF_OK;
    }
    char *ref = hub_cache_join(repo_dir, "refs", rev);
    size_t len;
    char *text = ref ? cq_read_file(ref, &len) : NULL;
    free(ref);
    if (text) text[strcspn(text, "\r\n")] = 0;
    bool ok = text && hub_is_hex(text, 40);
    if (ok) memcpy(commit, text, 41);
    free(text);
    if (!ok)
        return cmf_err_set(err, CMF_E_NOT_FOUND, repo,
                           "revision '%s' is not in the cache (%s/refs): pull it once with a "
                           "network",
                           rev, repo_dir);
    return CMF_OK;
}

static cmf_status add_file(hub_listing *l, size_t *cap, const char *path, uint64_t size,
                           cmf_err *err) {
    if (l->n == *cap) {
        size_t nc = *cap ? *cap * 2 : 32;
        hub_file *nf = realloc(l->files, nc * sizeof *nf);
        if (!nf) return cmf_err_set(err, CMF_E_NOMEM, path, "out of memory");
        l->files = nf;
        *cap = nc;
    }
    hub_file f = {.size = size};
    if (!(f.path = strdup(path))) return cmf_err_set(err, CMF_E_NOMEM, path, "out of memory");
    l->files[l->n++] = f;
    return CMF_OK;
}

cmf_status hub_list_cached(const char *repo_dir, const char *repo, const char *revision,
                           const char *dir, hub_listing *out, cmf_err *err) {
    memset(out, 0, sizeof *out);
    cmf_status st = cached_commit(repo_dir, repo, revision ? revision : "main", out->commit, err);
    if (st) return st;
    char *snap = hub_cache_join(repo_dir, "snapshots", out->commit);
    char *where = snap && dir && *dir ? hub_cache_join(snap, dir, NULL) : NULL;
    const char *folder = where ? where : snap;
    DIR *d = folder ? opendir(folder) : NULL;
    if (!d) {
        st = cmf_err_set(err, CMF_E_NOT_FOUND, repo, "no cached snapshot %s", folder ? folder : "");
        goto done;
    }
    size_t cap = 0;
    for (struct dirent *e; !st && (e = readdir(d));) {
        if (e->d_name[0] == '.') continue;
        char *full = hub_cache_join(folder, e->d_name, NULL);
        struct stat sb;
        if (full && stat(full, &sb) == 0 && S_ISREG(sb.st_mode)) {
            char *rel = dir && *dir ? hub_cache_join(dir, e->d_name, NULL) : strdup(e->d_name);
            st = rel ? add_file(out, &cap, rel, (uint64_t)sb.st_size, err)
                     : cmf_err_set(err, CMF_E_NOMEM, repo, "out of memory");
            free(rel);
        }
        free(full);
    }
    closedir(d);
done:
    free(snap);
    free(where);
    if (st) hub_listing_free(out);
    return st;
}
