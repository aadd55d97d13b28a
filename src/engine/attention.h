/* attention.h - a layer's attention for a chunk of tokens, spread over the model's thread pool:
 * att = softmax(q K^T * scale) V for every query head, the keys and values read from the
 * layer's KV cache as stored (up to the chunk's own tokens, which must be stored first).
 *
 * A batch (prefill) runs cq_attn_batch on units of (kv head, token range) handed out
 * dynamically, since later tokens attend more keys; each range holds enough tokens that the
 * group's rows fill a CQ_ATTN_BATCH_ROWS block. One token (decode) runs cq_attn_decode on
 * units of (kv head, key chunk), so even one kv head keeps every thread busy; the thread that
 * finishes the last chunk of a kv head merges that head's chunks. Internal to src/engine. */
#ifndef CORTIQ_ENGINE_ATTENTION_H
#define CORTIQ_ENGINE_ATTENTION_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/kv_cache.h"
#include "engine/model.h"

/* A session's attention scratch: per thread, and the decode chunks' partials. */
typedef struct cq_attention {
    float *batch_scratch;
    size_t batch_stride; /* floats per thread */
    float *decode_scratch, *decode_part;
    size_t decode_stride;     /* floats per thread */
    atomic_uint *decode_done; /* per kv head: chunks finished */
} cq_attention;

/* Scratch for contexts of up to ctx positions. False when out of memory (cq_attention_free
 * then releases what was allocated). */
bool cq_attention_init(cq_attention *a, const cortiq_model *m, uint32_t ctx);
void cq_attention_free(cq_attention *a);

/* att = attention of the n tokens at positions pos0 .. pos0 + n - 1 (queries q, rows of
 * n_heads * head_dim floats, after RoPE) over the cache kv of layer y. kv_first NULL: every
 * head of the layer (n_heads = y->n_heads); else the active heads of a task mask, packed
 * (attn_heads.h), the only ones computed. */
void cq_attention_run(cq_attention *a, const cortiq_model *m, const cq_layer *y,
                      const cq_kv_layer *kv, const float *q, float *att, size_t n, uint32_t pos0,
                      uint32_t n_heads, const uint32_t *kv_first);

/* A batched decode step's attention: token t < n <= CQ_ATTN_SESSIONS_PER_RUN (query rows
 * q + t * n_heads * head_dim, output likewise in att) over its own session's cache kvs[t] at
 * position pos[t], with that session's scratch as[t] (n different sessions); the same bits as
 * cq_attention_run of each token alone, all the units in one pool run (one barrier, not n). */
#define CQ_ATTN_SESSIONS_PER_RUN 16
void cq_attention_run_sessions(cq_attention *const *as, const cortiq_model *m, const cq_layer *y,
                               const cq_kv_layer *const *kvs, const float *q, float *att, size_t n,
                               const uint32_t *pos, uint32_t n_heads, const uint32_t *kv_first);

#endif
