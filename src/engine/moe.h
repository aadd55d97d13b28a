/* moe.h - the mixture-of-experts FFN (spec §2.2), a sibling of the dense gated MLP in a layer.
 *
 * Routing per token: router logits r = R x; scores softmax(r) over all experts (sigmoid(r_e)
 * each when router_sigmoid); the top_k experts by score + expert_bias (ties to the lower
 * index) are selected, their scores renormalised to sum 1 when norm_topk_prob, then scaled by
 * routed_scaling_factor. o = sum w_e expert_e(x) + g shared(x), g = sigmoid(shared_gate x) or 1.
 *
 * A chunk of tokens is grouped by expert: each selected expert runs its gate/up/down over the
 * rows of its tokens as one batched product, so its weights are read once per chunk and an
 * expert no token selected is never touched (the file's pages of unselected experts stay
 * unread). Internal to src/engine. */
#ifndef CORTIQ_ENGINE_MOE_H
#define CORTIQ_ENGINE_MOE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/matmul_sched.h"
#include "engine/model.h"

/* A session's MoE scratch for chunks of up to `batch` tokens. */
typedef struct cq_moe_scratch {
    float *logits;   /* [batch, max_experts] router logits */
    float *sgate;    /* [batch] shared_gate x */
    uint32_t *sel;   /* [batch, max_k] selected experts per token */
    float *w;        /* [batch, max_k] their weights */
    uint32_t *count; /* [max_experts] tokens per expert in the chunk */
    uint32_t *start; /* [max_experts + 1] first slot of an expert's tokens in order */
    uint32_t *order; /* [batch * max_k] token-slot pairs grouped by expert (t * max_k + j) */
    float *xe, *ye;  /* [batch, hidden] an expert's gathered inputs, its outputs */
    uint32_t max_experts, max_k;
} cq_moe_scratch;

/* Widest intermediate size of the model's MoE layers' experts (0 without MoE layers). */
uint32_t cq_moe_max_ffn(const cortiq_model *m);

/* False when out of memory (cq_moe_scratch_free then releases what was allocated). */
bool cq_moe_scratch_init(cq_moe_scratch *ms, const cortiq_model *m, size_t batch);
void cq_moe_scratch_free(cq_moe_scratch *ms);

/* The buffers one MoE FFN call works in: xn [n, hidden] its input, o [n, hidden] its output,
 * g, u [n, max_ffn] the experts' gate/up scratch. */
typedef struct cq_moe_io {
    cq_sched *sched;
    cq_moe_scratch *ms;
    const float *xn;
    float *o, *g, *u;
    uint32_t hidden;
} cq_moe_io;

/* o = moe(xn) for n tokens. make_input(ctx, t) writes row t of xn first (the norm, and the
 * previous block's residual add); it runs in the parallel region of the router's product. */
void cq_moe_ffn(const cq_moe_io *io, const cq_moe *moe, size_t n, cq_token_fn make_input,
                const void *ctx);

#endif
