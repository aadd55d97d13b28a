/* shards.c - a model in N files (spec §10): naming and opening the whole set from any member. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/err.h"
#include "format/file_impl.h"

cmf_status cmf__open_paths(const char *display, char **paths, size_t n, unsigned flags,
                           cmf_file **out, cmf_err *err);

int cmf_shard_name(char *out, size_t cap, const char *base, unsigned no, unsigned count) {
    return snprintf(out, cap, "%s-%05u-of-%05u.cmf", base, no, count);
}

bool cmf_shard_parse_name(const char *path, char *base, size_t cap, unsigned *no, unsigned *count) {
    /* suffix: "-NNNNN-of-MMMMM.cmf" = 19 characters */
    size_t len = strlen(path);
    const size_t suf = 19;
    if (len <= suf) return false;
    const char *s = path + len - suf;
    if (s[0] != '-' || strncmp(s + 6, "-of-", 4) != 0 || strcmp(s + 15, ".cmf") != 0) return false;
    unsigned a = 0, b = 0;
    for (int i = 1; i <= 5; i++) {
        if (s[i] < '0' || s[i] > '9' || s[9 + i] < '0' || s[9 + i] > '9') return false;
        a = a * 10 + (unsigned)(s[i] - '0');
        b = b * 10 + (unsigned)(s[9 + i] - '0');
    }
    if (a < 1 || b < 1 || a > b) return false;
    if (len - suf + 1 > cap) return false;
    memcpy(base, path, len - suf);
    base[len - suf] = '\0';
    *no = a;
    *count = b;
    return true;
}

cmf_status cmf_open_model(const char *path, unsigned flags, cmf_file **out, cmf_err *err) {
    *out = NULL;
    size_t plen = strlen(path);
    char *base = malloc(plen + 1);
    if (!base) return cmf_err_set(err, CMF_E_NOMEM, path, "opening");
    unsigned no, count;
    if ((flags & CMF_OPEN_NO_SHARDS) || !cmf_shard_parse_name(path, base, plen + 1, &no, &count)) {
        free(base);
        cmf_status st = cmf_open(path, flags, out, err);
        if (st) return st;
        const cmf_header *h = cmf_file_header(*out);
        if (h->has_shard && h->shard_count > 1 && !(flags & CMF_OPEN_NO_SHARDS)) {
            st = cmf_err_set(
                err, CMF_E_SHARD, path,
                "file is shard %lld of %lld but its name does not follow "
                "{base}-NNNNN-of-MMMMM.cmf, so "
                "its siblings cannot be found%s",
                (long long)h->shard_no, (long long)h->shard_count,
                h->shard_no != 1 ? " (and a non-first shard cannot be opened as a model)" : "");
            cmf_close(*out);
            *out = NULL;
        }
        return st;
    }
    char **paths = calloc(count, sizeof *paths);
    cmf_status st = paths ? CMF_OK : cmf_err_set(err, CMF_E_NOMEM, path, "opening");
    for (unsigned i = 0; i < count && !st; i++) {
        size_t cap = plen + 1;
        paths[i] = malloc(cap);
        if (!paths[i]) {
            st = cmf_err_set(err, CMF_E_NOMEM, path, "opening");
            break;
        }
        cmf_shard_name(paths[i], cap, base, i + 1, count);
        if (access(paths[i], F_OK) != 0)
            st = cmf_err_set(err, CMF_E_SHARD, path, "sibling shard %u of %u is missing: %s", i + 1,
                             count, paths[i]);
    }
    if (!st) {
        char *display = malloc(plen + 1);
        if (!display)
            st = cmf_err_set(err, CMF_E_NOMEM, path, "opening");
        else {
            cmf_shard_name(display, plen + 1, base, 1, count);
            st = cmf__open_paths(display, paths, count, flags, out, err);
            free(display);
        }
    }
    for (unsigned i = 0; paths && i < count; i++)
        free(paths[i]);
    free(paths);
    free(base);
    return st;
}
