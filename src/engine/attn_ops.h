/* attn_ops.h - the two inner loops of attention over the KV cache, per SIMD tier:
 * scores (q against n cached keys) and the weighted sum of n cached values.
 * Only the float summation order differs between tiers. */
#ifndef CORTIQ_ENGINE_ATTN_OPS_H
#define CORTIQ_ENGINE_ATTN_OPS_H

#include <stddef.h>
#include <stdint.h>

typedef struct cq_attn_ops {
    /* out[j] = dot(q, K + j*ld) over hd values, for j < n */
    void (*dots)(const float *q, const float *K, size_t ld, uint32_t n, uint32_t hd, float *out);
    /* out[i] += sum_j w[j] * V[j*ld + i] for i < hd, j < n */
    void (*axpys)(float *out, const float *w, const float *V, size_t ld, uint32_t n, uint32_t hd);
} cq_attn_ops;

/* The ops for the tier in effect (src/common/cpu.h), chosen on every call (cheap). */
const cq_attn_ops *cq_attn_ops_get(void);

extern const cq_attn_ops cq_attn_ops_avx2;
extern const cq_attn_ops cq_attn_ops_avx512;

#endif
