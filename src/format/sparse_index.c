/* sparse_index.c - the deprecation-pending sparse index (spec §7), parsed and validated for
 * display only: every count against the section, sorted indices, zero padding, no trailing bytes.
 */
#include <stdlib.h>
#include <string.h>

#include "common/bytes.h"
#include "common/err.h"
#include "format/file_impl.h"

cmf_status cmf__parse_sparse_index(const cmf_shard *sh, const cmf_masks *masks,
                                   cmf_sparse_index **out, cmf_err *err) {
    const char *ctx = sh->path;
    const uint8_t *p = sh->base + sh->env.index_off;
    uint64_t len = sh->env.index_len;
    const cmf_arch *a = &sh->header.arch;
    *out = NULL;
    if (len < 8)
        return cmf_err_set(err, CMF_E_BOUNDS, ctx,
                           "index_len=%llu is smaller than the 8-byte index head",
                           (unsigned long long)len);
    uint32_t n = ld_u32(p), reserved = ld_u32(p + 4);
    if (reserved != 0)
        return cmf_err_set(err, CMF_E_PARSE, ctx, "sparse index reserved field=%u, must be 0",
                           reserved);
    if (n > (len - 8) / 16)
        return cmf_err_set(err, CMF_E_BOUNDS, ctx,
                           "sparse index n_entries=%u cannot fit in index_len=%llu", n,
                           (unsigned long long)len);
    cmf_sparse_index *ix = calloc(1, sizeof *ix);
    cmf_index_entry *ents = calloc(n ? n : 1, sizeof *ents);
    if (!ix || !ents) {
        free(ix);
        free(ents);
        return cmf_err_set(err, CMF_E_NOMEM, ctx, "sparse index");
    }
    ix->entries = ents;
    ix->n_entries = n;
    uint64_t pos = 8;
    int64_t n_groups_max = a->intermediate_size > 0 ? (a->intermediate_size + 31) / 32 : -1;
    cmf_status st = CMF_OK;
    for (uint32_t i = 0; i < n && !st; i++) {
        cmf_index_entry *e = &ents[i];
        if (len - pos < 16) {
            st = cmf_err_set(err, CMF_E_BOUNDS, ctx,
                             "sparse index entry %u head past index_len=%llu", i,
                             (unsigned long long)len);
            break;
        }
        e->task_id = ld_u32(p + pos);
        e->layer = ld_u32(p + pos + 4);
        e->n_groups = ld_u32(p + pos + 8);
        e->n_heads = ld_u32(p + pos + 12);
        pos += 16;
        uint64_t body = 2 * (uint64_t)e->n_groups + e->n_heads;
        uint64_t padded = (body + 3) / 4 * 4;
        if (padded > len - pos) {
            st = cmf_err_set(
                err, CMF_E_BOUNDS, ctx,
                "sparse index entry %u (n_groups=%u, n_heads=%u) runs past index_len=%llu", i,
                e->n_groups, e->n_heads, (unsigned long long)len);
            break;
        }
        e->groups = p + pos;
        e->heads = p + pos + 2 * (uint64_t)e->n_groups;
        if (a->num_layers > 0 && e->layer >= (uint64_t)a->num_layers)
            st = cmf_err_set(err, CMF_E_PARSE, ctx,
                             "sparse index entry %u layer=%u >= num_layers=%lld", i, e->layer,
                             (long long)a->num_layers);
        else if (masks && !st) {
            bool found = false;
            for (size_t k = 0; k < masks->n_masks; k++)
                found |= masks->masks[k].task_id == e->task_id;
            if (!found)
                st = cmf_err_set(err, CMF_E_PARSE, ctx,
                                 "sparse index entry %u task_id=%u names no mask", i, e->task_id);
        }
        for (uint32_t g = 0; g < e->n_groups && !st; g++) {
            uint16_t v = ld_u16(e->groups + 2 * g);
            if (g && v <= ld_u16(e->groups + 2 * (g - 1)))
                st = cmf_err_set(err, CMF_E_PARSE, ctx,
                                 "sparse index entry %u FFN groups not strictly ascending at %u", i,
                                 g);
            else if (n_groups_max >= 0 && v >= n_groups_max)
                st = cmf_err_set(err, CMF_E_PARSE, ctx,
                                 "sparse index entry %u group %u >= %lld groups", i, v,
                                 (long long)n_groups_max);
        }
        for (uint32_t h = 0; h < e->n_heads && !st; h++) {
            uint8_t v = e->heads[h];
            if (h && v <= e->heads[h - 1])
                st = cmf_err_set(err, CMF_E_PARSE, ctx,
                                 "sparse index entry %u heads not strictly ascending at %u", i, h);
            else if (a->num_attention_heads > 0 && v >= a->num_attention_heads)
                st = cmf_err_set(err, CMF_E_PARSE, ctx,
                                 "sparse index entry %u head %u >= num_attention_heads=%lld", i, v,
                                 (long long)a->num_attention_heads);
        }
        for (uint64_t z = body; z < padded && !st; z++)
            if (p[pos + z])
                st = cmf_err_set(err, CMF_E_PARSE, ctx, "sparse index entry %u padding is not zero",
                                 i);
        pos += padded;
    }
    if (!st && pos != len)
        st = cmf_err_set(err, CMF_E_PARSE, ctx,
                         "sparse index has %llu trailing bytes after %u entries",
                         (unsigned long long)(len - pos), n);
    if (st) {
        cmf__free_sparse_index(ix);
        return st;
    }
    *out = ix;
    return CMF_OK;
}

void cmf__free_sparse_index(cmf_sparse_index *ix) {
    if (!ix) return;
    free(ix->entries);
    free(ix);
}
