/* act_ops.c - scalar (libm) gated activations, the reference argmax, and the tier dispatch. */
#include "engine/act_ops.h"

#include <math.h>

#include "common/cpu.h"

static void silu_mul(float *g, const float *u, size_t n) {
    for (size_t i = 0; i < n; i++)
        g[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
}

static void gelu_tanh_mul(float *g, const float *u, size_t n) {
    const float c = 0.7978845608028654f; /* sqrt(2/pi) */
    for (size_t i = 0; i < n; i++) {
        float x = g[i];
        g[i] = 0.5f * x * (1.0f + tanhf(c * (x + 0.044715f * x * x * x))) * u[i];
    }
}

static uint32_t argmax(const float *x, uint32_t n) {
    uint32_t best = 0;
    for (uint32_t i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return best;
}

static double sum_squares(const float *x, uint32_t n) {
    double s[8] = {0};
    uint32_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (uint32_t j = 0; j < 8; j++)
            s[j] += (double)x[i + j] * x[i + j];
    for (uint32_t j = 0; i < n; i++, j++)
        s[j] += (double)x[i] * x[i];
    return ((s[0] + s[4]) + (s[1] + s[5])) + ((s[2] + s[6]) + (s[3] + s[7]));
}

const cq_act_ops cq_act_ops_scalar = {silu_mul, gelu_tanh_mul, argmax, sum_squares};

static const cq_act_ops *const k_tiers[CQ_ISA_COUNT] = {
    [CQ_ISA_SCALAR] = &cq_act_ops_scalar,
    [CQ_ISA_AVX2] = &cq_act_ops_avx2,
    [CQ_ISA_AVX512] = &cq_act_ops_avx512,
};

const cq_act_ops *cq_act_ops_get(void) {
    return CQ_ISA_SELECT(k_tiers);
}
