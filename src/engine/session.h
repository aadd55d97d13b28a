/* session.h - what a session holds (the engine's view of cortiq_session): the KV cache, the
 * activations of one chunk of tokens, and the scratch of the parallel work. Created and freed
 * by session.c, filled by the forward pass (forward.c). Internal to src/engine. */
#ifndef CORTIQ_ENGINE_SESSION_H
#define CORTIQ_ENGINE_SESSION_H

#include <stdint.h>

#include "engine/attention.h"
#include "engine/gdn.h"
#include "engine/kv_cache.h"
#include "engine/matmul_sched.h"
#include "engine/model.h"
#include "engine/moe.h"
#include "engine/task_mask.h"

#ifndef CQ_BATCH
#define CQ_BATCH CORTIQ_EVAL_CHUNK /* tokens per prefill chunk (cortiq/engine.h) */
#endif

/* The size of the next chunk of a prefill with `rest` tokens to go: CQ_BATCH, or the whole
 * rest when it fits, except that a last chunk would be shorter than `exact` (the model's
 * cortiq_model_exact_chunk; 0: no such rule), when the last two share the rest (eval_chunks.c). */
size_t cq_eval_chunk(size_t rest, uint32_t exact);

struct cortiq_session {
    cortiq_model *m;
    uint32_t ctx, pos;
    cortiq_kv_type kv_type;
    cq_kv_layer *kv; /* per layer; slots = ctx, or window + CQ_BATCH for sliding layers (a ring) */
    cq_kv_arena kv_arena; /* their blocks, position-first, on 2 MiB pages unless no_huge_pages */
    /* activations of one chunk of up to CQ_BATCH tokens, one row per token:
     * x [hidden]      the residual stream
     * xn [hidden]     its norm, the input of a block
     * q, att [max_qd] queries, attention's result
     * k, v [n_kv * head_dim]
     * o [hidden]      a block's output, before the residual add
     * g, u [max_ffn]  gate (then act(gate) * up) and up (of the widest dense or expert MLP)
     * qgate [2 max_qd] a gated-attention layer's q_proj output, [query; gate] per head
     * ogate [g_proj rows] an attention output gate's g_proj xn (NULL when no layer has one) */
    float *x, *xn, *q, *k, *v, *att, *o, *g, *u, *qgate, *ogate;
    /* RoPE per chunk row and rope slot (cq_layer.rope_slot): the cos then the sin (times the
     * table's mscale) of position rope_pos[i] for the table rope_inv[i] (a layer's inv_freq;
     * layers with equal tables share one, model_load.c), rot_dim floats of head_dim, entry
     * i = row * CQ_ROPE_SLOTS + slot; computed by the first layer that needs them */
    float *rope_cs;
    const float **rope_inv;
    uint32_t *rope_pos;
    float *logits; /* [vocab] of the last token evaluated */
    uint32_t max_ffn, max_qd;
    cq_sched sched;     /* matrix products and per-token steps on the pool */
    cq_attention attn;  /* attention's scratch */
    cq_moe_scratch moe; /* the MoE layers' routing and expert scratch (moe.h) */
    cq_gdn_state gdn;   /* the LinearAttention layers' recurrent state and scratch (gdn.h) */
    /* Routable experts per layer (spec §5 expert area): expert_allow[l] holds LSB-first bits
     * over moe.num_experts, bit set = routable; a NULL array or a NULL entry = unrestricted.
     * Set from the session's task mask or a runtime restriction; read by the MoE routing. */
    const uint8_t **expert_allow;
    /* The selected task mask (task_mask.h, cortiq_session_set_task); NULL = dense. */
    cq_task *task;
    cortiq_act_stats *stats; /* activation statistics being collected (act_stats.c); NULL = off */
};

/* Feed n tokens through layers 0 .. last only and add each token's residual stream after
 * layer `last` into sum[hidden] (skill routing's phi, spec §9). The session's later layers'
 * KV entries are left unwritten: reset the session before generating with it. */
cmf_status cq_session_probe(cortiq_session *s, const int32_t *tokens, size_t n, uint32_t last,
                            double *sum, cmf_err *err);
/* cortiq_session_eval that also fills hidden[n x hidden] with each token's final normed hidden
 * state, computing every token as its own decode step would (one-token kernels, bit for bit):
 * the verify step of speculative decoding (src/runtime/spec_decode.c). */
cmf_status cq_session_eval_spec(cortiq_session *s, const int32_t *tokens, size_t n,
                                float *all_logits, float *hidden, cmf_err *err);
/* A block outside the main layers (the MTP head's, mtp.h) over n rows of s->x at positions
 * pos0 .. pos0 + n - 1 with its own KV cache kv; the rows of s->x are updated in place. */
void cq_block_forward(cortiq_session *s, const cq_layer *y, cq_kv_layer *kv, size_t n,
                      uint32_t pos0);
/* out = rmsnorm(x) * w over n floats (out may be x). */
void cq_rmsnorm(float *out, const float *x, const float *w, uint32_t n, float eps);
/* x[hidden] = the embedding row of token (times the model's embedding scale). */
void cq_embed_token(const cortiq_model *m, int32_t token, float *x);
/* n tokens from position pos fit a context of ctx and are ids of m's vocabulary; else
 * CMF_E_LIMIT / CMF_E_INVALID_ARG with `what` as the message's subject. */
cmf_status cq_check_context(const cortiq_model *m, const char *what, uint32_t pos, uint32_t ctx,
                            const int32_t *tokens, size_t n, cmf_err *err);
/* logits[vocab] = output head (rmsnorm(x) * norm), with the model's logit scaling. */
void cq_head_forward(cortiq_session *s, const float *x, const float *norm, float *logits);

/* cortiq_session_set_task with no_gather: every masked layer computed densely with the
 * inactive activations zeroed (tests compare the gathered path against it). */
cmf_status cq_session_set_task(cortiq_session *s, const char *name, bool no_gather, cmf_err *err);

/* Add layer l's activations of the chunk's n tokens to s->stats (act_stats.c): the FFN's g
 * (n rows of ffn floats), the attention output att (n rows of n_heads * head_dim). */
void cq_stats_ffn(cortiq_session *s, uint32_t l, size_t n);
void cq_stats_heads(cortiq_session *s, uint32_t l, size_t n);

#endif
