/* act_ops.h - elementwise work on activation vectors, per SIMD tier.
 *
 * The MLP's gated activations over a row range: g[i] = act(g[i]) * u[i] with act = SiLU
 * (x / (1 + e^-x)) or GELU-tanh (0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))). The SIMD
 * tiers use a polynomial e^x (range reduction by ln 2, degree-6 minimax-style Taylor tail:
 * within 2e-7 relative of expf for |x| < 87, saturating beyond), so they match the scalar tier
 * to ~1e-6 relative.
 *
 * The greedy pick over logits: the index of the first maximum, exactly as the scalar scan
 * `if (x[i] > x[best]) best = i` finds it (a NaN never wins; a NaN at index 0 wins by default,
 * since nothing compares greater). Every tier returns the same index.
 *
 * The sum of squares of a row (RMSNorm's), in double: each square is exact there, and the sum
 * runs in 8 partial sums, lane j taking the elements i = j (mod 8) of the whole groups of 8 and
 * then the tail's elements in turn, combined as ((s0 + s4) + (s1 + s5)) + ((s2 + s6) + (s3 +
 * s7)). One running sum is a chain of dependent adds (~4 cycles an element); the 8 lanes are one
 * zmm or two ymm of doubles, so every tier returns the same bits. */
#ifndef CORTIQ_ENGINE_ACT_OPS_H
#define CORTIQ_ENGINE_ACT_OPS_H

#include <stddef.h>
#include <stdint.h>

typedef void (*cq_glu_fn)(float *g, const float *u, size_t n);
typedef uint32_t (*cq_argmax_fn)(const float *x, uint32_t n); /* n >= 1 */
typedef double (*cq_sum_squares_fn)(const float *x, uint32_t n);

typedef struct cq_act_ops {
    cq_glu_fn silu_mul;
    cq_glu_fn gelu_tanh_mul;
    cq_argmax_fn argmax;
    cq_sum_squares_fn sum_squares;
} cq_act_ops;

/* The ops of the tier in effect (src/common/cpu.h). */
const cq_act_ops *cq_act_ops_get(void);

extern const cq_act_ops cq_act_ops_scalar; /* libm reference */
extern const cq_act_ops cq_act_ops_avx2;
extern const cq_act_ops cq_act_ops_avx512;

#endif
