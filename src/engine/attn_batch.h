/* attn_batch.h - causal attention for a block of query tokens (prompt prefill), all query heads
 * of one kv head at once, over the KV cache read as stored (f32, f16 or q8; kv_cache.h).
 *
 * Semantics are those of the scalar tier's per-(token, head) loop: token t of the chunk sits at
 * position pos0 + t and attends keys lo .. p with p = pos0 + t, lo = 0 or, when window > 0 and
 * p + 1 > window, lo = p + 1 - window. Position x lives in slot x % slots of the ring.
 * score = (q . k) * scale, then tanh(score / softcap) * softcap when softcap > 0, softmax over
 * lo .. p, and out = sum of weight * value. Every cached position lo(t_begin) .. pos0 + t_end - 1
 * must be present in the ring (slots >= window + chunk tokens, as session.c allocates).
 *
 * Design (docs/KERNELS.md "Batched prefill attention"): rows (token, head) are taken 32 (AVX-512,
 * two vectors) or 8 (AVX2) at a time, one row per vector lane; each key row is converted once per
 * row block and broadcast against the transposed queries, so a score vector holds one key for
 * every row. Softmax runs across lanes with a vectorized exp; the weighted value sum is
 * register-blocked over 4 rows x 64 (AVX-512) or 16 (AVX2) outputs, each value row converted
 * once per 4 rows. */
#ifndef CORTIQ_ENGINE_ATTN_BATCH_H
#define CORTIQ_ENGINE_ATTN_BATCH_H

#include <stddef.h>
#include <stdint.h>

#include "engine/attn_heads.h"
#include "engine/kv_cache.h"

typedef struct cq_attn_batch_args {
    const cq_kv_layer *kv;    /* the layer's cache: type, slots, n_kv, hd and the stored rows */
    const float *q;           /* [tokens][n_heads * hd] queries of the chunk (after RoPE) */
    float *out;               /* [tokens][n_heads * hd] results, same layout; rows written whole */
    uint32_t n_heads;         /* query heads; a multiple of kv->n_kv (group = n_heads / n_kv) */
    uint32_t pos0;            /* position of chunk token 0 */
    uint32_t window;          /* sliding window in positions; 0 = full causal */
    float scale;              /* multiplies q . k */
    float softcap;            /* > 0: tanh soft-cap of the scaled score */
    const uint32_t *kv_first; /* NULL, or the packed heads of each kv head (attn_heads.h) */
} cq_attn_batch_args;

/* Rows (query vectors) a block holds at most (the AVX-512 tier's block). */
#define CQ_ATTN_BATCH_ROWS 32

/* Scratch bytes one call needs (per thread): max_keys is the most keys one row block can span,
 * at most kv->slots (pass slots, or min(slots, pos0 + tokens) when the chunk is known). The
 * score block is max_keys x 32 floats, so this grows with the context: 512 KiB at 4096 slots.
 * Layout: 40 * hd floats for the transposed queries and converted keys, then the scores. */
size_t cq_attn_batch_scratch_bytes(uint32_t hd, uint32_t max_keys);

/* For kv head kvh and chunk tokens [t_begin, t_end): out rows of every query head h with
 * h / group == kvh (of its packed heads, attn_heads.h). Threads may run disjoint (kvh, token range)
 * pairs concurrently, each with its own scratch. Ranges of at least 32 / group tokens fill the
 * AVX-512 row blocks; a single token (decode) leaves most lanes idle: attention.c uses
 * attn_decode.h for it. */
void cq_attn_batch(const cq_attn_batch_args *a, uint32_t kvh, uint32_t t_begin, uint32_t t_end,
                   float *scratch);

/* The tiers, for tests and benchmarks; cq_attn_batch picks with CQ_ISA_SELECT (common/cpu.h). A
 * tier whose lane width does not divide hd (AVX-512: 16, AVX2: 8) hands the call to the next lower
 * tier. The scalar tier is the reference: one row at a time (cq_attn_ops loops, expf, tanhf). */
void cq_attn_batch_scalar(const cq_attn_batch_args *a, uint32_t kvh, uint32_t t_begin,
                          uint32_t t_end, float *scratch);
void cq_attn_batch_avx2(const cq_attn_batch_args *a, uint32_t kvh, uint32_t t_begin, uint32_t t_end,
                        float *scratch);
void cq_attn_batch_avx512(const cq_attn_batch_args *a, uint32_t kvh, uint32_t t_begin,
                          uint32_t t_end, float *scratch);

/* The vectorized exp of the AVX2 / AVX-512 tiers, in place over n floats (tests). For x in
 * [-87.33, 88] the relative error is at most 2 ulp (Cody-Waite reduction to |r| <= ln2 / 2,
 * degree-7 Taylor polynomial whose truncation is 5e-9, Horner rounding); below -87.33
 * (including -inf) the result is 0 (the true value is under FLT_MIN); x > 88 is taken as 88
 * (attention only passes x <= 0); NaN stays NaN. */
void cq_attn_exp_avx2(float *x, size_t n);
void cq_attn_exp_avx512(float *x, size_t n);

/* Geometry shared by the tiers: the first attended position of position p. */
static inline uint32_t cq_attn_first_key(const cq_attn_batch_args *a, uint32_t p) {
    return a->window && p + 1 > a->window ? p + 1 - a->window : 0;
}

#endif
