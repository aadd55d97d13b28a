/* moe.h - the mixture-of-experts FFN (spec §2.2), a sibling of the dense gated MLP in a layer.
 *
 * Routing per token: router logits r = R x; scores softmax(r) over the routable experts
 * (sigmoid(r_e) each when router_sigmoid); the top_k experts by score + expert_bias (ties to
 * the lower index) among the routable ones are selected, their scores renormalised to sum 1
 * when norm_topk_prob, then scaled by routed_scaling_factor.
 * o = sum w_e expert_e(x) + g shared(x), g = sigmoid(shared_gate x) or 1.
 * The routable set is every expert present unless the session restricts it (expert_allow: a
 * task mask's expert area or a runtime restriction, spec §5 and §11.1); top_k then clamps to
 * the routable count, so a restricted layer computes what the file with only those experts
 * (moe-defrag) computes.
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
    /* a runtime restriction's own copy (moe_session.c): rows[l] -> bits, NULL for dense layers */
    const uint8_t **allow_rows;
    uint8_t *allow_bits;
    /* selection counters when counting (cortiq_session_count_routes): counts[l] has one entry
     * per expert present of MoE layer l, NULL for a dense layer; NULL array = not counting */
    uint64_t **counts;
    uint64_t *count_store;
} cq_moe_scratch;

/* Widest intermediate size of the model's MoE layers' experts (0 without MoE layers). */
uint32_t cq_moe_max_ffn(const cortiq_model *m);

/* False when out of memory (cq_moe_scratch_free then releases what was allocated). */
bool cq_moe_scratch_init(cq_moe_scratch *ms, const cortiq_model *m, size_t batch);
void cq_moe_scratch_free(cq_moe_scratch *ms);

/* The buffers one MoE FFN call works in: xn [n, hidden] its input, o [n, hidden] its output,
 * g, u [n, max_ffn] the experts' gate/up scratch; allow the layer's routable-expert bits
 * (LSB-first, NULL = every expert present), counts its selection counters (NULL = none). */
typedef struct cq_moe_io {
    cq_sched *sched;
    cq_moe_scratch *ms;
    const float *xn;
    float *o, *g, *u;
    uint32_t hidden;
    const uint8_t *allow;
    uint64_t *counts;
    /* the n tokens are computed as decode steps (cortiq_session_eval_batch, a speculative
     * verify): each is computed
     * bit for bit as it would be alone (needs top_k + the shared expert <= CQ_GROUP_MAX) */
    bool each;
} cq_moe_io;

/* Experts of `moe` that `allow` leaves routable (all present when allow is NULL). */
uint32_t cq_moe_routable(const cq_moe *moe, const uint8_t *allow);

/* CMF_OK when every MoE layer of m keeps at least one routable expert under allow (n_layers
 * rows, NULL array or entry = unrestricted); else CMF_E_INVALID_ARG naming the model's file
 * and the layer. Whoever sets cortiq_session.expert_allow checks it with this first. */
cmf_status cq_moe_check_allow(const cortiq_model *m, const uint8_t *const *allow, cmf_err *err);

/* o = moe(xn) for n tokens. make_input(ctx, t) writes row t of xn first (the norm, and the
 * previous block's residual add); it runs in the parallel region of the router's product. */
void cq_moe_ffn(const cq_moe_io *io, const cq_moe *moe, size_t n, cq_token_fn make_input,
                const void *ctx);

#endif
