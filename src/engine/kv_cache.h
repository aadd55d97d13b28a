/* kv_cache.h - one layer's KV cache in the session's chosen element type (f32, f16, or q8 =
 * int8 with one f32 scale per head vector per position). A position is converted once when
 * written; attention reads the stored type directly through cq_attn_ops. */
#ifndef CORTIQ_ENGINE_KV_CACHE_H
#define CORTIQ_ENGINE_KV_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cortiq/engine.h"
#include "engine/attn_ops.h"

typedef struct cq_kv_layer {
    cortiq_kv_type type;
    uint32_t slots;    /* ctx, or window + chunk for sliding layers (a ring) */
    uint32_t n_kv, hd; /* a slot holds n_kv head vectors of hd values, for keys and for values */
    void *k, *v;       /* [slots][n_kv * hd] elements of type */
    float *ks, *vs;    /* q8 only: [slots][n_kv] scales */
} cq_kv_layer;

/* Allocate room for slots positions; false when out of memory (the layer is then safe to
 * free). */
bool cq_kv_layer_init(cq_kv_layer *c, cortiq_kv_type type, uint32_t slots, uint32_t n_kv,
                      uint32_t hd);
void cq_kv_layer_free(cq_kv_layer *c);
uint64_t cq_kv_layer_bytes(const cq_kv_layer *c);

/* Write one position: k and v are n_kv * hd floats each. */
void cq_kv_store(cq_kv_layer *c, uint32_t slot, const float *k, const float *v);

/* Scores of the query head vector q against the keys of kv head h in slots s0 .. s0+n-1. */
void cq_kv_dots(const cq_attn_ops *ops, const cq_kv_layer *c, uint32_t h, const float *q,
                uint32_t s0, uint32_t n, float *out);
/* out (hd floats) += sum_j w[j] * value of kv head h in slot s0 + j, for j < n. */
void cq_kv_axpys(const cq_attn_ops *ops, const cq_kv_layer *c, uint32_t h, float *out,
                 const float *w, uint32_t s0, uint32_t n);

/* Prefetch the row of kv head h in the ring slot s0 + j (keys: base = c->k, values: c->v) into
 * L1. Decode attention reads each cache row once, from L3 or memory, and one kv head's rows
 * sit n_kv rows apart (the layout is slot-major), a stride the hardware prefetchers follow
 * poorly: the units fetch PF_ROWS rows ahead themselves (AVX-512, old and new units called
 * alternately in one process at pos 576: 1-27 % less time per layer). j must be below the
 * span's length. */
static inline void cq_kv_prefetch_row(const cq_kv_layer *c, const void *base, uint32_t h,
                                      uint32_t s0, uint32_t j) {
    size_t esz = c->type == CORTIQ_KV_F32 ? 4 : c->type == CORTIQ_KV_F16 ? 2 : 1;
    size_t row = (size_t)c->hd * esz;
    uint32_t slot = s0 + j;
    if (slot >= c->slots) slot -= c->slots;
    const char *p = (const char *)base + ((size_t)slot * c->n_kv + h) * row;
    for (size_t b = 0; b < row; b += 64)
        __builtin_prefetch(p + b, 0, 3);
}

/* The q8 encoding of one head vector (the reference for the layout): scale = max |x| / 127,
 * q[i] = round(x[i] / scale); a vector of zeros gets scale 0. A non-finite input gives a
 * non-finite scale and zero codes, so it still poisons attention as it would at f32. */
float cq_kv_quantize_q8(const float *x, uint32_t n, int8_t *q);

#endif
