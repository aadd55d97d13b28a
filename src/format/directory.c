/* directory.c - the binary tensor directory (spec §3) and O(1) name lookup. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/bytes.h"
#include "common/checked.h"
#include "common/err.h"
#include "cortiq/hash.h"
#include "format/file_impl.h"
#include "format/utf8.h"

cmf_status cmf__parse_directory(cmf_file *f, cmf_shard *sh, size_t shard_idx, cmf_err *err) {
    const char *ctx = sh->path;
    const cmf_envelope *e = &sh->env;
    const uint8_t *d = sh->base + e->dir_off;
    uint64_t dlen = e->dir_len;
    if (dlen < 16)
        return cmf_err_set(err, CMF_E_BOUNDS, ctx,
                           "dir_len=%llu is smaller than the 16-byte directory head",
                           (unsigned long long)dlen);
    uint64_t count = ld_u64(d), pool_off = ld_u64(d + 8);
    uint64_t records_end;
    if (count > (dlen - 16) / CMF_DIR_RECORD_SIZE)
        return cmf_err_set(err, CMF_E_BOUNDS, ctx,
                           "directory count=%llu needs more than dir_len=%llu bytes",
                           (unsigned long long)count, (unsigned long long)dlen);
    if (count > CMF_MAX_TENSORS)
        return cmf_err_set(err, CMF_E_LIMIT, ctx,
                           "directory count=%llu exceeds the cap of %llu tensors",
                           (unsigned long long)count, (unsigned long long)CMF_MAX_TENSORS);
    records_end = 16 + count * CMF_DIR_RECORD_SIZE;
    if (pool_off < records_end || pool_off > dlen)
        return cmf_err_set(err, CMF_E_BOUNDS, ctx,
                           "directory pool_off=%llu outside [%llu, dir_len=%llu]",
                           (unsigned long long)pool_off, (unsigned long long)records_end,
                           (unsigned long long)dlen);
    uint64_t pool_len = dlen - pool_off;
    const uint8_t *pool = d + pool_off;

    /* names may share pool bytes (a corrupt or deduplicating writer), so size the arena
     * from the records, not from the pool */
    uint64_t arena = 1;
    for (uint64_t i = 0; i < count; i++) {
        const uint8_t *r = d + 16 + i * CMF_DIR_RECORD_SIZE;
        uint32_t name_off = ld_u32(r);
        uint16_t name_len = ld_u16(r + 4);
        if (!ck_span_within(name_off, name_len, pool_len))
            return cmf_err_set(
                err, CMF_E_BOUNDS, ctx,
                "tensor #%llu name_off=%u + name_len=%u exceeds name pool of %llu bytes",
                (unsigned long long)i, name_off, name_len, (unsigned long long)pool_len);
        arena += (uint64_t)name_len + 1;
    }
    size_t base_idx = f->n_tensors;
    cmf_tensor *nt = realloc(f->tensors, (base_idx + count + 1) * sizeof *nt);
    char *names = malloc((size_t)arena);
    if (!nt || !names) {
        if (nt) f->tensors = nt;
        free(names);
        return cmf_err_set(err, CMF_E_NOMEM, ctx, "directory of %llu tensors",
                           (unsigned long long)count);
    }
    f->tensors = nt;
    f->name_blocks[shard_idx] = names;
    size_t name_pos = 0;
    const uint64_t data_len = e->data_len;

    for (uint64_t i = 0; i < count; i++) {
        const uint8_t *r = d + 16 + i * CMF_DIR_RECORD_SIZE;
        cmf_tensor *t = &nt[base_idx + i];
        memset(t, 0, sizeof *t);
        uint32_t name_off = ld_u32(r);
        uint16_t name_len = ld_u16(r + 4);
        if (name_len == 0)
            return cmf_err_set(err, CMF_E_PARSE, ctx, "tensor #%llu has an empty name",
                               (unsigned long long)i);
        if (!utf8_valid_no_nul(pool + name_off, name_len))
            return cmf_err_set(err, CMF_E_PARSE, ctx,
                               "tensor #%llu name is not valid UTF-8 (or holds NUL)",
                               (unsigned long long)i);
        memcpy(names + name_pos, pool + name_off, name_len);
        names[name_pos + name_len] = '\0';
        t->name = names + name_pos;
        t->name_len = name_len;
        name_pos += (size_t)name_len + 1;
        f->n_tensors = base_idx + i + 1; /* names stay valid for messages of later checks */

        t->dtype = r[6];
        t->ndim = r[7];
        t->off = ld_u64(r + 32);
        t->nbytes = ld_u64(r + 40);
        t->hash = ld_u64(r + 48);
        t->shard = (uint32_t)shard_idx;
        const cmf_dtype_traits *tr = cmf_dtype_get(t->dtype);
        if (!tr || tr->kind == CMF_DTK_UNKNOWN)
            return cmf_err_set(err, CMF_E_PARSE, ctx, "tensor '%s': unknown dtype id %u", t->name,
                               t->dtype);
        if (tr->kind == CMF_DTK_RESERVED)
            return cmf_err_set(err, CMF_E_PARSE, ctx,
                               "tensor '%s': dtype %u (%s) is reserved, not readable in v2",
                               t->name, t->dtype, tr->name);
        if (t->ndim > CMF_MAX_DIMS)
            return cmf_err_set(err, CMF_E_PARSE, ctx, "tensor '%s': ndim=%u > %d", t->name, t->ndim,
                               CMF_MAX_DIMS);
        for (unsigned k = 0; k < CMF_MAX_DIMS; k++) {
            uint32_t dim = ld_u32(r + 8 + 4 * k);
            if (k >= t->ndim && dim != 0)
                return cmf_err_set(err, CMF_E_PARSE, ctx,
                                   "tensor '%s': shape[%u]=%u past ndim=%u must be 0", t->name, k,
                                   dim, t->ndim);
            t->shape[k] = dim;
        }
        char what[96];
        snprintf(what, sizeof what, "%s: tensor '%.60s'", ctx, t->name);
        uint64_t lo, hi;
        cmf_status st = cmf_dtype_nbytes(t->dtype, t->ndim, t->shape, &lo, &hi, what, err);
        if (st) return st;
        if (t->nbytes < lo || t->nbytes > hi) {
            if (lo == hi)
                return cmf_err_set(err, CMF_E_PARSE, ctx,
                                   "tensor '%s': nbytes=%llu but %s of this shape is %llu bytes",
                                   t->name, (unsigned long long)t->nbytes, tr->name,
                                   (unsigned long long)lo);
            return cmf_err_set(err, CMF_E_PARSE, ctx,
                               "tensor '%s': nbytes=%llu outside [%llu, %llu] for %s of this shape",
                               t->name, (unsigned long long)t->nbytes, (unsigned long long)lo,
                               (unsigned long long)hi, tr->name);
        }
        if (t->off % CMF_TENSOR_ALIGN)
            return cmf_err_set(err, CMF_E_BOUNDS, ctx,
                               "tensor '%s': off=%llu is not a multiple of %d", t->name,
                               (unsigned long long)t->off, CMF_TENSOR_ALIGN);
        if (!ck_span_within(t->off, t->nbytes, data_len))
            return cmf_err_set(err, CMF_E_BOUNDS, ctx,
                               "tensor '%s': off+nbytes=%llu+%llu > data_len=%llu", t->name,
                               (unsigned long long)t->off, (unsigned long long)t->nbytes,
                               (unsigned long long)data_len);
        t->data = sh->base + e->data_off + t->off;
    }
    sh->first_tensor = base_idx;
    sh->n_tensors = (size_t)count;
    return CMF_OK;
}

static uint64_t name_hash(const char *s, size_t n) {
    return cmf_hash64(s, n);
}

static int cmp_names(const void *a, const void *b, void *ctx) {
    const cmf_tensor *t = ctx;
    const cmf_tensor *x = &t[*(const uint32_t *)a], *y = &t[*(const uint32_t *)b];
    return strcmp(x->name, y->name);
}

cmf_status cmf__index_names(cmf_file *f, cmf_err *err) {
    size_t cap = 16;
    while (cap < f->n_tensors * 2)
        cap *= 2;
    f->table = calloc(cap, sizeof *f->table);
    f->sorted = malloc((f->n_tensors ? f->n_tensors : 1) * sizeof *f->sorted);
    if (!f->table || !f->sorted) return cmf_err_set(err, CMF_E_NOMEM, f->path, "name index");
    f->table_mask = cap - 1;
    for (size_t i = 0; i < f->n_tensors; i++) {
        const cmf_tensor *t = &f->tensors[i];
        size_t slot = name_hash(t->name, t->name_len) & f->table_mask;
        while (f->table[slot]) {
            const cmf_tensor *o = &f->tensors[f->table[slot] - 1];
            if (o->name_len == t->name_len && !memcmp(o->name, t->name, t->name_len)) {
                const char *where = f->shards[t->shard].path;
                return cmf_err_set(err, CMF_E_PARSE, where, "duplicate tensor name '%s'", t->name);
            }
            slot = (slot + 1) & f->table_mask;
        }
        f->table[slot] = (uint32_t)(i + 1);
        f->sorted[i] = (uint32_t)i;
    }
    qsort_r(f->sorted, f->n_tensors, sizeof *f->sorted, cmp_names, f->tensors);
    return CMF_OK;
}

const cmf_tensor *cmf_file_find(const cmf_file *f, const char *name) {
    size_t n = strlen(name);
    size_t slot = name_hash(name, n) & f->table_mask;
    while (f->table[slot]) {
        const cmf_tensor *t = &f->tensors[f->table[slot] - 1];
        if (t->name_len == n && !memcmp(t->name, name, n)) return t;
        slot = (slot + 1) & f->table_mask;
    }
    return NULL;
}

void cmf_file_prefix(const cmf_file *f, const char *prefix, size_t *first, size_t *count) {
    size_t plen = strlen(prefix);
    size_t lo = 0, hi = f->n_tensors;
    while (lo < hi) { /* first name >= prefix */
        size_t mid = (lo + hi) / 2;
        if (strcmp(f->tensors[f->sorted[mid]].name, prefix) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    size_t end = lo;
    while (end < f->n_tensors && !strncmp(f->tensors[f->sorted[end]].name, prefix, plen))
        end++;
    *first = lo;
    *count = end - lo;
}

const cmf_tensor *cmf_file_sorted_at(const cmf_file *f, size_t k) {
    return k < f->n_tensors ? &f->tensors[f->sorted[k]] : NULL;
}
