/* gdn_chunk.h - the chunked form of the gated delta rule (gdn.h) for one value head, per SIMD
 * tier: up to CQ_GDN_CHUNK tokens at once as matrix products, with the same result as that many
 * gdn_step.h steps (to float rounding). With G_t = g_1 + ... + g_t the cumulative log decay of
 * the chunk, S0 the state before it and row vectors per token:
 *   L[i,j] = beta_i (k_i . k_j) exp(G_i - G_j)  (j < i),  T = (I + L)^-1 (row by row)
 *   X_i = beta_i (v_i - exp(G_i) k_i S0),  D = T X                 (D_i: token i's delta)
 *   o_i = exp(G_i) q_i S0 + sum_{j <= i} exp(G_i - G_j) (q_i . k_j) D_j
 *   S   = exp(G_n) S0 + sum_j exp(G_n - G_j) k_j^T D_j
 * This is transformers' torch_chunk_gated_delta_rule (the WY / UT-transform form: its
 * U - W S0 = T (beta v) - T (beta exp(G) k) S0 is T X), with T applied once to X instead of to
 * both U and W. The products run on the tier's register tiles; without FMA (the scalar tier) they
 * lose to the recurrence, so that tier keeps it. Each tier compiles the same C body
 * (gdn_chunk_body.h) with its ISA flags. */
#ifndef CORTIQ_ENGINE_GDN_CHUNK_H
#define CORTIQ_ENGINE_GDN_CHUNK_H

#include <stddef.h>
#include <stdint.h>

#define CQ_GDN_CHUNK 64 /* tokens per chunk, transformers' chunk_size */

/* One head's chunk: token t's q, k at q + t * stride, k + t * stride (dk floats), v at
 * v + t * stride (dv), its log decay g[t * gstride] and beta[t * gstride]; its output is
 * written to o + t * ostride (dv floats). */
typedef struct cq_gdn_chunk_in {
    const float *q, *k, *v, *g, *beta;
    float *o;
    size_t stride, gstride, ostride;
    uint32_t n, dk, dv; /* n in [1, CQ_GDN_CHUNK] */
} cq_gdn_chunk_in;

/* S [dk, dv] row-major, advanced over the chunk; work: cq_gdn_chunk_work(dk, dv) floats. */
typedef void (*cq_gdn_chunk_fn)(float *S, const cq_gdn_chunk_in *in, float *work);

size_t cq_gdn_chunk_work(uint32_t dk, uint32_t dv);

/* The kernel of the tier in effect (src/common/cpu.h); NULL on the scalar tier, where the
 * recurrence is faster (the scalar kernel stays for the tests). */
cq_gdn_chunk_fn cq_gdn_chunk_get(void);

void cq_gdn_chunk_scalar(float *S, const cq_gdn_chunk_in *in, float *work);
void cq_gdn_chunk_avx2(float *S, const cq_gdn_chunk_in *in, float *work);
void cq_gdn_chunk_avx512(float *S, const cq_gdn_chunk_in *in, float *work);

#endif
