/* attn_ops.h - the value loop of attention over the KV cache, per SIMD tier and per cache
 * element type: the weighted sum of n cached values (the keys lie in tiles, which the tiers'
 * attention kernels read themselves: kv_cache.h), and the f16 cache's write.
 * The cache is read as stored (f32, IEEE half, or int8 with one f32 scale per head vector per
 * position); nothing converts the whole cache. Half -> float is exact in every tier, so only
 * the float summation order differs between tiers. */
#ifndef CORTIQ_ENGINE_ATTN_OPS_H
#define CORTIQ_ENGINE_ATTN_OPS_H

#include <stddef.h>
#include <stdint.h>

typedef struct cq_attn_ops {
    /* out[i] += sum_j w[j] * V[j*ld + i] for i < hd, j < n */
    void (*axpys)(float *out, const float *w, const float *V, size_t ld, uint32_t n, uint32_t hd);
    /* the same with V as IEEE half bits */
    void (*axpys_f16)(float *out, const float *w, const uint16_t *V, size_t ld, uint32_t n,
                      uint32_t hd);
    /* int8 rows with scales: out[i] += sum_j (w[j] * vs[j*lds]) * V[j*ld + i] */
    void (*axpys_q8)(float *out, const float *w, const int8_t *V, size_t ld, const float *vs,
                     size_t lds, uint32_t n, uint32_t hd);
    /* out[i] = IEEE half of x[i] clamped to +-65504 (round to nearest even), for i < n: the f16
     * cache's write. Every tier gives the same bits (NaN stays a NaN). */
    void (*to_f16)(const float *x, uint16_t *out, size_t n);
} cq_attn_ops;

/* The ops for the tier in effect (src/common/cpu.h), chosen on every call (cheap). */
const cq_attn_ops *cq_attn_ops_get(void);

extern const cq_attn_ops cq_attn_ops_scalar; /* the reference every tier is tested against */
extern const cq_attn_ops cq_attn_ops_avx2;
extern const cq_attn_ops cq_attn_ops_avx512;

#endif
