/* masks_build.c - serialize a masks section (spec §5, §5.1) from per-task bitfields. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/bytes.h"
#include "common/err.h"
#include "cortiq/writer.h"

typedef struct mb_mask {
    char *name, *description, *quality;
    uint8_t *blob;
    size_t blob_len;
    int has_experts;
    double sparsity;
} mb_mask;

struct cmf_masks_builder {
    uint32_t n_layers, intermediate, n_heads, n_experts;
    size_t ffn_bytes, head_bytes, gates_bytes, expert_bytes;
    mb_mask *m;
    size_t n, cap;
    char *default_task;
};

cmf_status cmf_masks_builder_create(uint32_t n_layers, uint32_t intermediate, uint32_t n_heads,
                                    uint32_t n_experts, cmf_masks_builder **out, cmf_err *err) {
    *out = NULL;
    if (!n_layers || !intermediate || !n_heads)
        return cmf_err_set(err, CMF_E_INVALID_ARG, "masks",
                           "n_layers, intermediate and n_heads must be >= 1");
    cmf_masks_builder *b = calloc(1, sizeof *b);
    if (!b) return cmf_err_set(err, CMF_E_NOMEM, "masks", "builder");
    b->n_layers = n_layers;
    b->intermediate = intermediate;
    b->n_heads = n_heads;
    b->n_experts = n_experts;
    b->ffn_bytes = (intermediate + 7) / 8;
    b->head_bytes = (n_heads + 7) / 8;
    b->gates_bytes = (n_layers + 7) / 8;
    b->expert_bytes = (n_experts + 7) / 8;
    *out = b;
    return CMF_OK;
}

static int tail_clear(const uint8_t *p, size_t rows, size_t bytes, uint32_t dim) {
    if (dim % 8 == 0) return 1;
    uint8_t mask = (uint8_t)(0xFF << (dim % 8));
    for (size_t r = 0; r < rows; r++)
        if (p[r * bytes + bytes - 1] & mask) return 0;
    return 1;
}

static char *dup_or_null(const char *s) {
    return s ? strdup(s) : NULL;
}

cmf_status cmf_masks_builder_add(cmf_masks_builder *b, const char *name, const char *description,
                                 const uint8_t *ffn, const uint8_t *heads, const uint8_t *gates,
                                 const uint8_t *experts, const char *quality_json, cmf_err *err) {
    if (!name || !*name || !ffn || !heads || !gates)
        return cmf_err_set(err, CMF_E_INVALID_ARG, "masks",
                           "a mask needs a name, ffn, heads and gates");
    for (size_t i = 0; i < b->n; i++)
        if (!strcmp(b->m[i].name, name))
            return cmf_err_set(err, CMF_E_INVALID_ARG, "masks", "mask '%s' added twice", name);
    if (experts && !b->n_experts)
        return cmf_err_set(err, CMF_E_INVALID_ARG, "masks",
                           "mask '%s' has expert bits but n_experts=0", name);
    if (!tail_clear(ffn, b->n_layers, b->ffn_bytes, b->intermediate) ||
        !tail_clear(heads, b->n_layers, b->head_bytes, b->n_heads) ||
        !tail_clear(gates, 1, b->gates_bytes, b->n_layers) ||
        (experts && !tail_clear(experts, b->n_layers, b->expert_bytes, b->n_experts)))
        return cmf_err_set(err, CMF_E_INVALID_ARG, "masks",
                           "mask '%s' has bits set past a dimension", name);
    if (quality_json) {
        json_t *q = json_loads(quality_json, JSON_DECODE_ANY, NULL);
        int ok = q && (json_is_object(q) || json_is_null(q));
        json_decref(q);
        if (!ok)
            return cmf_err_set(err, CMF_E_INVALID_ARG, "masks",
                               "mask '%s' quality must be a JSON object", name);
    }
    if (b->n == b->cap) {
        size_t cap = b->cap ? 2 * b->cap : 8;
        mb_mask *nm = realloc(b->m, cap * sizeof *nm);
        if (!nm) return cmf_err_set(err, CMF_E_NOMEM, "masks", "builder");
        b->m = nm;
        b->cap = cap;
    }
    mb_mask *m = &b->m[b->n];
    memset(m, 0, sizeof *m);
    size_t L = b->n_layers;
    m->blob_len =
        L * b->ffn_bytes + L * b->head_bytes + b->gates_bytes + (experts ? L * b->expert_bytes : 0);
    m->blob = malloc(m->blob_len);
    m->name = strdup(name);
    m->description = dup_or_null(description);
    m->quality = dup_or_null(quality_json);
    if (!m->blob || !m->name || (description && !m->description) || (quality_json && !m->quality)) {
        free(m->blob);
        free(m->name);
        free(m->description);
        free(m->quality);
        return cmf_err_set(err, CMF_E_NOMEM, "masks", "mask '%s'", name);
    }
    uint8_t *p = m->blob;
    memcpy(p, ffn, L * b->ffn_bytes);
    p += L * b->ffn_bytes;
    memcpy(p, heads, L * b->head_bytes);
    p += L * b->head_bytes;
    memcpy(p, gates, b->gates_bytes);
    p += b->gates_bytes;
    if (experts) memcpy(p, experts, L * b->expert_bytes);
    m->has_experts = experts != NULL;
    /* sparsity = fraction of FFN neurons masked out, over all layers */
    uint64_t on = 0;
    for (size_t i = 0; i < L * b->ffn_bytes; i++)
        on += (uint64_t)__builtin_popcount(ffn[i]);
    m->sparsity = 1.0 - (double)on / ((double)L * b->intermediate);
    b->n++;
    return CMF_OK;
}

cmf_status cmf_masks_builder_set_default(cmf_masks_builder *b, const char *task, cmf_err *err) {
    char *d = strdup(task);
    if (!d) return cmf_err_set(err, CMF_E_NOMEM, "masks", "default task");
    free(b->default_task);
    b->default_task = d;
    return CMF_OK;
}

cmf_status cmf_masks_builder_build(cmf_masks_builder *b, uint8_t **out, size_t *len, cmf_err *err) {
    /* Blob offsets depend on the meta length, which depends on the offsets' digits: iterate
     * until the meta length is stable (converges in <= 3 rounds). */
    json_t *meta = NULL;
    char *text = NULL;
    size_t meta_len = 0, prev = (size_t)-1;
    for (int round = 0; round < 8 && meta_len != prev; round++) {
        prev = meta_len;
        free(text);
        json_decref(meta);
        meta = json_object();
        json_t *arr = json_array();
        if (!meta || !arr) break;
        if (b->default_task)
            json_object_set_new(meta, "default_task", json_string(b->default_task));
        size_t off = (8 + prev + 7) / 8 * 8;
        for (size_t i = 0; i < b->n; i++) {
            mb_mask *m = &b->m[i];
            json_t *q = m->quality ? json_loads(m->quality, JSON_DECODE_ANY, NULL) : json_null();
            json_t *o = json_pack(
                "{s:I,s:s,s:o,s:f,s:o,s:n,s:s,s:b,s:I,s:I,s:b}", "task_id", (json_int_t)i, "name",
                m->name, "description", m->description ? json_string(m->description) : json_null(),
                "sparsity", m->sparsity, "quality", q ? q : json_null(), "parent", "priority",
                "Fallback", "has_hot_pack", 0, "blob_off", (json_int_t)off, "blob_len",
                (json_int_t)m->blob_len, "has_expert_fields", m->has_experts);
            if (!o) break;
            json_array_append_new(arr, o);
            off = (off + m->blob_len + 7) / 8 * 8;
        }
        json_object_set_new(meta, "masks", arr);
        text = json_dumps(meta, JSON_COMPACT);
        if (!text) break;
        meta_len = strlen(text);
    }
    if (!text || meta_len != prev) {
        free(text);
        json_decref(meta);
        return cmf_err_set(err, CMF_E_NOMEM, "masks", "serializing meta");
    }
    size_t total = (8 + meta_len + 7) / 8 * 8;
    for (size_t i = 0; i < b->n; i++)
        total = (total + b->m[i].blob_len + 7) / 8 * 8;
    uint8_t *buf = calloc(1, total);
    if (!buf) {
        free(text);
        json_decref(meta);
        return cmf_err_set(err, CMF_E_NOMEM, "masks", "section of %zu bytes", total);
    }
    st_u32(buf, (uint32_t)b->n);
    st_u32(buf + 4, (uint32_t)meta_len);
    memcpy(buf + 8, text, meta_len);
    size_t off = (8 + meta_len + 7) / 8 * 8;
    for (size_t i = 0; i < b->n; i++) {
        memcpy(buf + off, b->m[i].blob, b->m[i].blob_len);
        off = (off + b->m[i].blob_len + 7) / 8 * 8;
    }
    free(text);
    json_decref(meta);
    *out = buf;
    *len = total;
    return CMF_OK;
}

void cmf_masks_builder_free(cmf_masks_builder *b) {
    if (!b) return;
    for (size_t i = 0; i < b->n; i++) {
        free(b->m[i].name);
        free(b->m[i].description);
        free(b->m[i].quality);
        free(b->m[i].blob);
    }
    free(b->m);
    free(b->default_task);
    free(b);
}
