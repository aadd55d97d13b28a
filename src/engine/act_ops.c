/* act_ops.c - scalar (libm) gated activations and the tier dispatch. */
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

const cq_act_ops cq_act_ops_scalar = {silu_mul, gelu_tanh_mul};

const cq_act_ops *cq_act_ops_get(void) {
    cq_isa isa = cq_cpu_isa();
    if (isa >= CQ_ISA_AVX512) return &cq_act_ops_avx512;
    if (isa >= CQ_ISA_AVX2) return &cq_act_ops_avx2;
    return &cq_act_ops_scalar;
}
