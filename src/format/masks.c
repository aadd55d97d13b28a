/* masks.c - the masks section (spec §5, §5.1): JSON meta + bit-packed blobs whose sizes come
 * from the header arch. Tail bits past each dimension must be zero. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/bytes.h"
#include "common/checked.h"
#include "common/err.h"
#include "format/file_impl.h"
#include "format/json_util.h"

typedef struct masks_store {
    cmf_masks m;
    json_t *root;
    jsonu_pool pool;
} masks_store;

uint32_t cmf_popcount(const uint8_t *bits, uint32_t nbits) {
    uint32_t n = 0, full = nbits / 8;
    for (uint32_t i = 0; i < full; i++)
        n += (uint32_t)__builtin_popcount(bits[i]);
    if (nbits % 8) n += (uint32_t)__builtin_popcount(bits[full] & ((1u << (nbits % 8)) - 1));
    return n;
}

uint32_t cmf_mask_ffn_active(const cmf_masks *m, const cmf_mask *k, uint32_t layer) {
    return layer < m->n_layers
               ? cmf_popcount(k->ffn + (size_t)layer * m->ffn_bytes, m->intermediate)
               : 0;
}
uint32_t cmf_mask_heads_active(const cmf_masks *m, const cmf_mask *k, uint32_t layer) {
    return layer < m->n_layers ? cmf_popcount(k->heads + (size_t)layer * m->head_bytes, m->n_heads)
                               : 0;
}
uint32_t cmf_mask_layers_active(const cmf_masks *m, const cmf_mask *k) {
    return cmf_popcount(k->gates, m->n_layers);
}
uint32_t cmf_mask_experts_active(const cmf_masks *m, const cmf_mask *k, uint32_t layer) {
    if (!k->experts) return m->n_experts;
    return layer < m->n_layers
               ? cmf_popcount(k->experts + (size_t)layer * m->expert_bytes, m->n_experts)
               : 0;
}

const cmf_mask *cmf_masks_find(const cmf_masks *m, const char *name) {
    for (size_t i = 0; i < m->n_masks; i++)
        if (m->masks[i].name && !strcmp(m->masks[i].name, name)) return &m->masks[i];
    return NULL;
}

/* Rows of `rows` bitfields of `bytes` each, `dim` bits used: the rest must be zero. */
static bool tail_bits_zero(const uint8_t *p, uint32_t rows, uint32_t bytes, uint32_t dim,
                           uint32_t *bad_row) {
    if (dim % 8 == 0) return true;
    uint8_t mask = (uint8_t)(0xFF << (dim % 8));
    for (uint32_t r = 0; r < rows; r++) {
        if (p[(size_t)r * bytes + bytes - 1] & mask) {
            *bad_row = r;
            return false;
        }
    }
    return true;
}

static cmf_status dim_u32(jsonu_ctx *c, int64_t v, const char *name, uint32_t *out) {
    if (v < 1 || v > (int64_t)UINT32_MAX)
        return jsonu_fail(c, "masks need arch.%s in [1, 2^32), header has %lld", name,
                          (long long)v);
    *out = (uint32_t)v;
    return CMF_OK;
}

static cmf_status parse_one(jsonu_ctx *c, json_t *o, size_t i, cmf_masks *m, const uint8_t *sec,
                            uint64_t sec_len, uint64_t blobs_start, const cmf_arch *arch) {
    cmf_status st;
    cmf_mask *k = &m->masks[i];
    char where[32];
    snprintf(where, sizeof where, "masks[%zu]", i);
    if (!json_is_object(o)) return jsonu_fail(c, "masks meta %s must be an object", where);
    int64_t task_id = -1, blob_off = -1, blob_len = -1;
    if ((st = jsonu_opt_pos_int(c, o, where, "task_id", &task_id))) return st;
    if ((st = jsonu_opt_pos_int(c, o, where, "blob_off", &blob_off))) return st;
    if ((st = jsonu_opt_pos_int(c, o, where, "blob_len", &blob_len))) return st;
    if ((st = jsonu_opt_string(c, o, where, "name", &k->name))) return st;
    if ((st = jsonu_opt_string(c, o, where, "description", &k->description))) return st;
    if ((st = jsonu_opt_string(c, o, where, "parent", &k->parent))) return st;
    if ((st = jsonu_opt_string(c, o, where, "priority", &k->priority))) return st;
    if ((st = jsonu_opt_number(c, o, where, "sparsity", &k->sparsity, &k->has_sparsity))) return st;
    if ((st = jsonu_opt_bool(c, o, where, "has_hot_pack", &k->has_hot_pack))) return st;
    if ((st = jsonu_opt_bool(c, o, where, "has_expert_fields", &k->has_expert_fields))) return st;
    if ((st = jsonu_opt_raw(c, o, "quality", &k->quality_json))) return st;
    if (task_id < 0 || task_id > (int64_t)UINT32_MAX)
        return jsonu_fail(c, "masks meta %s.task_id missing", where);
    if (!k->name || !*k->name)
        return jsonu_fail(c, "masks meta %s.name must be a non-empty string", where);
    if (blob_off < 0 || blob_len < 0)
        return jsonu_fail(c, "masks meta %s needs blob_off and blob_len", where);
    k->task_id = (uint32_t)task_id;
    k->blob_off = (uint64_t)blob_off;
    k->blob_len = (uint64_t)blob_len;
    for (size_t j = 0; j < i; j++) {
        if (!strcmp(m->masks[j].name, k->name))
            return jsonu_fail(c, "masks meta %s.name \"%s\" duplicates masks[%zu]", where, k->name,
                              j);
        if (m->masks[j].task_id == k->task_id)
            return jsonu_fail(c, "masks meta %s.task_id=%u duplicates masks[%zu]", where,
                              k->task_id, j);
    }
    if (k->blob_off % 8)
        return cmf_err_set(c->err, CMF_E_BOUNDS, c->ctx,
                           "mask '%s' blob_off=%llu is not a multiple of 8", k->name,
                           (unsigned long long)k->blob_off);
    if (k->blob_off < blobs_start || !ck_span_within(k->blob_off, k->blob_len, sec_len))
        return cmf_err_set(
            c->err, CMF_E_BOUNDS, c->ctx,
            "mask '%s' blob [%llu, +%llu) outside the blob area [%llu, masks_len=%llu)", k->name,
            (unsigned long long)k->blob_off, (unsigned long long)k->blob_len,
            (unsigned long long)blobs_start, (unsigned long long)sec_len);
    /* sizes: L*ffn + L*head + gates [+ L*expert] */
    uint64_t need = (uint64_t)m->n_layers * m->ffn_bytes + (uint64_t)m->n_layers * m->head_bytes +
                    m->gates_bytes;
    if (k->has_expert_fields) {
        if (!arch->moe.present)
            return jsonu_fail(c, "mask '%s' has_expert_fields but arch.moe is absent", k->name);
        need += (uint64_t)m->n_layers * m->expert_bytes;
    }
    if (k->blob_len < need)
        return cmf_err_set(c->err, CMF_E_BOUNDS, c->ctx,
                           "mask '%s' blob_len=%llu < %llu bytes its fields need", k->name,
                           (unsigned long long)k->blob_len, (unsigned long long)need);
    const uint8_t *b = sec + k->blob_off;
    k->ffn = b;
    k->heads = k->ffn + (size_t)m->n_layers * m->ffn_bytes;
    k->gates = k->heads + (size_t)m->n_layers * m->head_bytes;
    k->experts = k->has_expert_fields ? k->gates + m->gates_bytes : NULL;
    uint32_t row;
    if (!tail_bits_zero(k->ffn, m->n_layers, m->ffn_bytes, m->intermediate, &row))
        return jsonu_fail(c,
                          "mask '%s' layer %u FFN bitfield has bits set past intermediate_size=%u",
                          k->name, row, m->intermediate);
    if (!tail_bits_zero(k->heads, m->n_layers, m->head_bytes, m->n_heads, &row))
        return jsonu_fail(
            c, "mask '%s' layer %u head bitfield has bits set past num_attention_heads=%u", k->name,
            row, m->n_heads);
    if (!tail_bits_zero(k->gates, 1, m->gates_bytes, m->n_layers, &row))
        return jsonu_fail(c, "mask '%s' layer gates have bits set past num_layers=%u", k->name,
                          m->n_layers);
    if (k->experts && !tail_bits_zero(k->experts, m->n_layers, m->expert_bytes, m->n_experts, &row))
        return jsonu_fail(c, "mask '%s' layer %u expert bitfield has bits set past num_experts=%u",
                          k->name, row, m->n_experts);
    return CMF_OK;
}

cmf_status cmf__parse_masks(const cmf_shard *sh, cmf_masks **out, cmf_err *err) {
    return cmf__parse_masks_bytes(sh->base + sh->env.masks_off, sh->env.masks_len, &sh->header.arch,
                                  sh->path, out, err);
}

cmf_status cmf__parse_masks_bytes(const uint8_t *sec, uint64_t len, const cmf_arch *arch,
                                  const char *ctx, cmf_masks **out, cmf_err *err) {
    *out = NULL;
    if (len < 8)
        return cmf_err_set(err, CMF_E_BOUNDS, ctx,
                           "masks_len=%llu is smaller than the 8-byte masks head",
                           (unsigned long long)len);
    uint32_t n_masks = ld_u32(sec), meta_len = ld_u32(sec + 4);
    if (meta_len > len - 8)
        return cmf_err_set(err, CMF_E_BOUNDS, ctx, "masks meta_len=%u exceeds masks_len=%llu - 8",
                           meta_len, (unsigned long long)len);
    if (meta_len > CMF_MAX_MASKS_META)
        return cmf_err_set(err, CMF_E_LIMIT, ctx, "masks meta_len=%u exceeds the cap", meta_len);
    masks_store *ms = calloc(1, sizeof *ms);
    if (!ms) return cmf_err_set(err, CMF_E_NOMEM, ctx, "masks");
    cmf_masks *m = &ms->m;
    jsonu_ctx c = {&ms->pool, ctx, err};
    cmf_status st = CMF_OK;
    json_error_t jerr;
    ms->root = json_loadb((const char *)sec + 8, meta_len, JSON_REJECT_DUPLICATES, &jerr);
    if (!ms->root) {
        st = cmf_err_set(err, CMF_E_PARSE, ctx, "masks meta JSON invalid at col %d: %s",
                         jerr.column, jerr.text);
        goto fail;
    }
    if (!json_is_object(ms->root)) {
        st = jsonu_fail(&c, "masks meta must be a JSON object");
        goto fail;
    }
    if (!arch->present) {
        st = jsonu_fail(&c, "masks section present but header has no arch to size the blobs");
        goto fail;
    }
    if ((st = dim_u32(&c, arch->num_layers, "num_layers", &m->n_layers))) goto fail;
    if ((st = dim_u32(&c, arch->intermediate_size, "intermediate_size", &m->intermediate)))
        goto fail;
    if ((st = dim_u32(&c, arch->num_attention_heads, "num_attention_heads", &m->n_heads)))
        goto fail;
    if (arch->moe.present &&
        (st = dim_u32(&c, arch->moe.num_experts, "moe.num_experts", &m->n_experts)))
        goto fail;
    m->ffn_bytes = (m->intermediate + 7) / 8;
    m->head_bytes = (m->n_heads + 7) / 8;
    m->gates_bytes = (m->n_layers + 7) / 8;
    m->expert_bytes = (m->n_experts + 7) / 8;
    if ((st = jsonu_opt_string(&c, ms->root, "masks meta", "default_task", &m->default_task)))
        goto fail;
    json_t *arr = json_object_get(ms->root, "masks");
    if (!json_is_array(arr)) {
        st = jsonu_fail(&c, "masks meta needs a \"masks\" array");
        goto fail;
    }
    if (json_array_size(arr) != n_masks) {
        st = jsonu_fail(&c, "masks section n_masks=%u but meta lists %zu masks", n_masks,
                        json_array_size(arr));
        goto fail;
    }
    m->masks = jsonu_alloc(&c, (n_masks ? n_masks : 1) * sizeof *m->masks);
    if (!m->masks) {
        st = jsonu_nomem(&c);
        goto fail;
    }
    m->n_masks = n_masks;
    for (size_t i = 0; i < n_masks; i++)
        if ((st = parse_one(&c, json_array_get(arr, i), i, m, sec, len, 8 + (uint64_t)meta_len,
                            arch)))
            goto fail;
    /* A default_task naming no mask selects none (the dense model): the other implementation
     * writes "general" into every masks section whether or not such a mask exists. */
    if (m->default_task && !cmf_masks_find(m, m->default_task)) m->default_task = NULL;
    *out = m;
    return CMF_OK;
fail:
    cmf__free_masks(m);
    return st;
}

void cmf__free_masks(cmf_masks *m) {
    if (!m) return;
    masks_store *ms = (masks_store *)m; /* m is the first member */
    json_decref(ms->root);
    jsonu_pool_free(&ms->pool);
    free(ms);
}
