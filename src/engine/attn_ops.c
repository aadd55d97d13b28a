/* attn_ops.c - portable attention value loops and the tier dispatch. The f16 and q8 loops are
 * the reference definitions of how each cache type's values are read. */
#include "engine/attn_ops.h"

#include "common/cpu.h"
#include "common/f16.h"

static void axpys_portable(float *out, const float *w, const float *V, size_t ld, uint32_t n,
                           uint32_t hd) {
    for (uint32_t j = 0; j < n; j++) {
        const float *v = V + (size_t)j * ld;
        float a = w[j];
        for (uint32_t i = 0; i < hd; i++)
            out[i] += a * v[i];
    }
}

static void axpys_f16_portable(float *out, const float *w, const uint16_t *V, size_t ld, uint32_t n,
                               uint32_t hd) {
    for (uint32_t j = 0; j < n; j++) {
        const uint16_t *v = V + (size_t)j * ld;
        float a = w[j];
        for (uint32_t i = 0; i < hd; i++)
            out[i] += a * f16_to_f32(v[i]);
    }
}

static void axpys_q8_portable(float *out, const float *w, const int8_t *V, size_t ld,
                              const float *vs, size_t lds, uint32_t n, uint32_t hd) {
    for (uint32_t j = 0; j < n; j++) {
        const int8_t *v = V + (size_t)j * ld;
        float a = w[j] * vs[(size_t)j * lds];
        for (uint32_t i = 0; i < hd; i++)
            out[i] += a * (float)v[i];
    }
}

static void to_f16_portable(const float *x, uint16_t *out, size_t n) {
    for (size_t i = 0; i < n; i++) {
        float f = x[i];
        f = f > 65504.0f ? 65504.0f : f < -65504.0f ? -65504.0f : f;
        out[i] = f32_to_f16(f);
    }
}

const cq_attn_ops cq_attn_ops_scalar = {axpys_portable, axpys_f16_portable, axpys_q8_portable,
                                        to_f16_portable};

static const cq_attn_ops *const k_tiers[CQ_ISA_COUNT] = {
    [CQ_ISA_SCALAR] = &cq_attn_ops_scalar,
    [CQ_ISA_AVX2] = &cq_attn_ops_avx2,
    [CQ_ISA_AVX512] = &cq_attn_ops_avx512,
};

const cq_attn_ops *cq_attn_ops_get(void) {
    return CQ_ISA_SELECT(k_tiers);
}
