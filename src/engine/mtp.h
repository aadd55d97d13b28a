/* mtp.h - the multi-token-prediction head (spec §2.1) and its per-session state.
 *
 * From the main model's final normed hidden state h_p at position p (the output head's input)
 * and the token t_{p+1}, the head drafts t_{p+2}:
 *   x = eh_proj · [enorm(embed(t_{p+1})); hnorm(h_p)]   (embedding first)
 *   x = block(x)       a standard block at position p, over the head's own KV cache
 *   draft = argmax(lm_head(norm(x)))                    (the model's embedding and lm_head)
 * The block is m->layers[m->n_layers] (loaded with the main layers from model.mtp.layers.0.*).
 * Internal to src/engine and src/runtime. */
#ifndef CORTIQ_ENGINE_MTP_H
#define CORTIQ_ENGINE_MTP_H

#include "engine/session.h"

struct cq_mtp_head {
    float *enorm, *hnorm, *norm; /* [hidden] each; gemma's (1 + w) folded in */
    cmf_qmat eh_proj;            /* [hidden, 2 hidden] */
};

/* Bind the head's norms and eh_proj when the header declares arch.mtp with a shared embedding
 * and lm_head and the file has model.mtp.eh_proj.weight (m->mtp stays NULL otherwise: the file
 * runs without its head); the head's other tensors are then required. */
cmf_status cq_mtp_load(cortiq_model *m, const cmf_arch *a, const char *path, cmf_err *err);
/* After the layers are bound: the block is full attention and fits the main layers' MoE
 * scratch. */
cmf_status cq_mtp_check(const cortiq_model *m, const char *path, cmf_err *err);
void cq_mtp_free(cq_mtp_head *h); /* NULL allowed */

/* A session's MTP state: the block's KV cache and how many positions it holds. Entry i was
 * computed from (t_{i+1}, h_i). */
typedef struct cq_mtp_state {
    cq_kv_layer kv;
    cq_kv_arena arena;
    uint32_t pos;
    float *in;     /* [CQ_BATCH, 2 hidden]: [enorm(embed); hnorm(h)] rows */
    float *logits; /* [vocab] of the last draft */
} cq_mtp_state;

cmf_status cq_mtp_state_create(const cortiq_session *s, cq_mtp_state **out, cmf_err *err);
void cq_mtp_state_free(cq_mtp_state *st); /* NULL allowed */
/* Entries pos .. pos + n - 1 from next[i] = t_{pos+i+1} and hidden rows h_{pos+i}; the draft
 * of t_{pos+n+1} (the head's argmax after the last entry) into *draft, its logits in
 * st->logits. Uses s's scratch: call between evaluations of s. */
cmf_status cq_mtp_extend(cq_mtp_state *st, cortiq_session *s, const int32_t *next,
                         const float *hidden, size_t n, int32_t *draft, cmf_err *err);
/* Drop entries >= pos. */
void cq_mtp_truncate(cq_mtp_state *st, uint32_t pos);

#endif
