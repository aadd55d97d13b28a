/* attn_ops.c - portable attention loops (eight independent partial sums so the compiler can
 * keep them in vector lanes) and the tier dispatch. */
#include "engine/attn_ops.h"

#include "common/cpu.h"

static float dot_portable(const float *a, const float *b, uint32_t n) {
    float acc[8] = {0};
    uint32_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (uint32_t l = 0; l < 8; l++) acc[l] += a[i + l] * b[i + l];
    float d = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
    for (; i < n; i++) d += a[i] * b[i];
    return d;
}

static void dots_portable(const float *q, const float *K, size_t ld, uint32_t n, uint32_t hd, float *out) {
    for (uint32_t j = 0; j < n; j++) out[j] = dot_portable(q, K + (size_t)j * ld, hd);
}

static void axpys_portable(float *out, const float *w, const float *V, size_t ld, uint32_t n, uint32_t hd) {
    for (uint32_t j = 0; j < n; j++) {
        const float *v = V + (size_t)j * ld;
        float a = w[j];
        for (uint32_t i = 0; i < hd; i++) out[i] += a * v[i];
    }
}

static const cq_attn_ops portable_ops = {dots_portable, axpys_portable};

const cq_attn_ops *cq_attn_ops_get(void) {
#if defined(__x86_64__) || defined(__i386__)
    cq_isa isa = cq_cpu_isa();
    if (isa >= CQ_ISA_AVX512) return &cq_attn_ops_avx512;
    if (isa >= CQ_ISA_AVX2) return &cq_attn_ops_avx2;
#endif
    return &portable_ops;
}
