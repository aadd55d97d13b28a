/* kv_cache.c - per-layer KV cache storage, conversion on write, and the typed attention loops
 * (see kv_cache.h). */
#include "engine/kv_cache.h"

#include <math.h>
#include <stdlib.h>

#include "common/checked.h"
#include "common/f16.h"

static size_t elem_bytes(cortiq_kv_type t) {
    return t == CORTIQ_KV_F32 ? 4 : t == CORTIQ_KV_F16 ? 2 : 1;
}

bool cq_kv_layer_init(cq_kv_layer *c, cortiq_kv_type type, uint32_t slots, uint32_t n_kv,
                      uint32_t hd) {
    *c = (cq_kv_layer){.type = type, .slots = slots, .n_kv = n_kv, .hd = hd};
    size_t vecs, bytes; /* a context the address space cannot hold counts as out of memory */
    if (!ck_mul_size(slots, n_kv, &vecs) ||
        !ck_mul_size(vecs, (size_t)hd * elem_bytes(type), &bytes))
        return false;
    c->k = malloc(bytes);
    c->v = malloc(bytes);
    size_t sbytes;
    if (type == CORTIQ_KV_Q8) {
        if (!ck_mul_size(vecs, sizeof(float), &sbytes)) return false;
        c->ks = malloc(sbytes);
        c->vs = malloc(sbytes);
        return c->k && c->v && c->ks && c->vs;
    }
    return c->k && c->v;
}

void cq_kv_layer_free(cq_kv_layer *c) {
    free(c->k), free(c->v), free(c->ks), free(c->vs);
    c->k = c->v = NULL;
    c->ks = c->vs = NULL;
}

uint64_t cq_kv_layer_bytes(const cq_kv_layer *c) {
    uint64_t per = (uint64_t)c->n_kv * c->hd * elem_bytes(c->type);
    if (c->type == CORTIQ_KV_Q8) per += (uint64_t)c->n_kv * sizeof(float);
    return 2 * per * c->slots;
}

float cq_kv_quantize_q8(const float *x, uint32_t n, int8_t *q) {
    float amax = 0;
    for (uint32_t i = 0; i < n; i++) {
        float a = fabsf(x[i]);
        if (isnan(a)) {
            amax = a;
            break;
        }
        if (a > amax) amax = a;
    }
    float scale = amax / 127.0f;
    if (!(scale > 0) || !isfinite(scale)) { /* zeros, or a non-finite value */
        for (uint32_t i = 0; i < n; i++)
            q[i] = 0;
        return scale;
    }
    for (uint32_t i = 0; i < n; i++) {
        long r = lrintf(x[i] / scale); /* |x| <= amax, so |x / scale| <= 127 (+ rounding) */
        q[i] = (int8_t)(r > 127 ? 127 : r < -127 ? -127 : r);
    }
    return scale;
}

static void store_one(const cq_kv_layer *c, void *dst, float *scales, uint32_t slot,
                      const float *x) {
    size_t kvd = (size_t)c->n_kv * c->hd, off = (size_t)slot * kvd;
    switch (c->type) {
    case CORTIQ_KV_F32:
        for (size_t i = 0; i < kvd; i++)
            ((float *)dst)[off + i] = x[i];
        break;
    case CORTIQ_KV_F16:
        cq_attn_ops_get()->to_f16(x, (uint16_t *)dst + off, kvd);
        break;
    default:
        for (uint32_t h = 0; h < c->n_kv; h++)
            scales[(size_t)slot * c->n_kv + h] = cq_kv_quantize_q8(
                x + (size_t)h * c->hd, c->hd, (int8_t *)dst + off + (size_t)h * c->hd);
        break;
    }
}

void cq_kv_store(cq_kv_layer *c, uint32_t slot, const float *k, const float *v) {
    store_one(c, c->k, c->ks, slot, k);
    store_one(c, c->v, c->vs, slot, v);
}

void cq_kv_dots(const cq_attn_ops *ops, const cq_kv_layer *c, uint32_t h, const float *q,
                uint32_t s0, uint32_t n, float *out) {
    size_t kvd = (size_t)c->n_kv * c->hd, at = (size_t)s0 * kvd + (size_t)h * c->hd;
    switch (c->type) {
    case CORTIQ_KV_F32:
        ops->dots(q, (const float *)c->k + at, kvd, n, c->hd, out);
        break;
    case CORTIQ_KV_F16:
        ops->dots_f16(q, (const uint16_t *)c->k + at, kvd, n, c->hd, out);
        break;
    default:
        ops->dots_q8(q, (const int8_t *)c->k + at, kvd, c->ks + (size_t)s0 * c->n_kv + h, c->n_kv,
                     n, c->hd, out);
        break;
    }
}

void cq_kv_axpys(const cq_attn_ops *ops, const cq_kv_layer *c, uint32_t h, float *out,
                 const float *w, uint32_t s0, uint32_t n) {
    size_t kvd = (size_t)c->n_kv * c->hd, at = (size_t)s0 * kvd + (size_t)h * c->hd;
    switch (c->type) {
    case CORTIQ_KV_F32:
        ops->axpys(out, w, (const float *)c->v + at, kvd, n, c->hd);
        break;
    case CORTIQ_KV_F16:
        ops->axpys_f16(out, w, (const uint16_t *)c->v + at, kvd, n, c->hd);
        break;
    default:
        ops->axpys_q8(out, w, (const int8_t *)c->v + at, kvd, c->vs + (size_t)s0 * c->n_kv + h,
                      c->n_kv, n, c->hd);
        break;
    }
}
