/* attn_decode.h - attention for one query token (decode), shared by all query heads of a kv
 * head (GQA) and split along the keys so that threads share the work even with one kv head.
 *
 * Semantics are those of cq_attn_batch for a single token at position pos: keys lo .. pos with
 * lo = 0 or, when window > 0 and pos + 1 > window, lo = pos + 1 - window; position x lives in
 * slot x % slots of the ring; score = (q . k) * scale (the q8 key scale multiplies the dot),
 * then tanh(score / softcap) * softcap when softcap > 0; softmax over lo .. pos; out = sum of
 * weight * value.
 *
 * Work decomposition: the keys lo .. pos are cut into chunks of `chunk` keys (the last one
 * shorter). A unit is one (kv head, chunk) pair; it computes, for every query head of the
 * group, the chunk's scores, their maximum m, l = sum e^(score - m) and the unnormalized value
 * sum acc = sum e^(score - m) * value, into its own slot of `part`. Units are independent, so
 * threads may run any of them concurrently (each with its own scratch). Once every chunk of a
 * kv head is done, cq_attn_decode_combine merges them (the max / sum rescaling of split
 * softmax) into the group's output rows.
 *
 * The AVX-512 tier (hd a multiple of 16) converts each key block of 16 rows once to f32 for
 * all heads of the group, reduces the 16 dots of a head with one transpose-add, computes the
 * softmax with a vectorized exp and tanh, and accumulates each value row, converted once, into
 * register blocks of every head of the group. The AVX2 tier (hd a multiple of 8) does the same
 * with 8 keys per block and 8 lanes. The generic tier runs each head through cq_attn_ops loops
 * (dots, scalar expf / tanhf, axpys): with the scalar ops it is the reference; with the AVX2 or
 * AVX-512 ops it takes the head sizes those tiers do not. */
#ifndef CORTIQ_ENGINE_ATTN_DECODE_H
#define CORTIQ_ENGINE_ATTN_DECODE_H

#include <stddef.h>
#include <stdint.h>

#include "engine/attn_heads.h"
#include "engine/attn_ops.h"
#include "engine/kv_cache.h"

/* Chunks per kv head at most: bounds the partials (cq_attn_decode_part_floats). */
#define CQ_ATTN_DECODE_MAX_CHUNKS 64
/* Keys per chunk at least / by default at most (a longer context grows the chunk so that
 * MAX_CHUNKS still cover it). */
#define CQ_ATTN_DECODE_MIN_CHUNK 64
#define CQ_ATTN_DECODE_MAX_CHUNK 256

typedef struct cq_attn_decode_args {
    const cq_kv_layer *kv;    /* the layer's cache: type, slots, n_kv, hd and the stored rows */
    const float *q;           /* [n_heads * hd] the token's queries (after RoPE) */
    float *out;               /* [n_heads * hd] results; written by cq_attn_decode_combine */
    float *part;              /* partials, cq_attn_decode_part_floats(n_heads, hd) floats */
    uint32_t n_heads;         /* query heads; a multiple of kv->n_kv (group = n_heads / n_kv) */
    uint32_t pos;             /* the token's position; pos - lo + 1 <= slots */
    uint32_t window;          /* sliding window in positions; 0 = full causal */
    uint32_t chunk;           /* keys per unit: a multiple of 16, from cq_attn_decode_chunk */
    float scale;              /* multiplies q . k */
    float softcap;            /* > 0: tanh soft-cap of the scaled score */
    const uint32_t *kv_first; /* NULL, or the packed heads of each kv head (attn_heads.h) */
} cq_attn_decode_args;

/* The first attended position. */
static inline uint32_t cq_attn_decode_first_key(const cq_attn_decode_args *a) {
    return a->window && a->pos + 1 > a->window ? a->pos + 1 - a->window : 0;
}

/* Keys per chunk for `keys` attended keys: about 4 units per thread over the kv heads, within
 * [MIN_CHUNK, MAX_CHUNK], rounded up to 16, and never so small that more than MAX_CHUNKS
 * chunks are needed. */
uint32_t cq_attn_decode_chunk(uint32_t keys, uint32_t n_kv, unsigned threads);
/* Chunks per kv head for a->chunk. */
uint32_t cq_attn_decode_chunks(const cq_attn_decode_args *a);

/* Floats of scratch one thread needs for any call with at most max_keys keys (the slots). */
size_t cq_attn_decode_scratch_floats(uint32_t group, uint32_t max_keys);
/* Floats of `part`: per (kv head, chunk, query head of the group) hd + 16 floats. */
size_t cq_attn_decode_part_floats(uint32_t n_heads, uint32_t hd);

/* Unit (kvh, ch): chunk ch < cq_attn_decode_chunks(a) of kv head kvh. scratch: see above,
 * 64-byte aligned. Picks the tier with CQ_ISA_SELECT (common/cpu.h). */
void cq_attn_decode_unit(const cq_attn_decode_args *a, uint32_t kvh, uint32_t ch, float *scratch);
/* Writes out rows kvh * group .. (kvh + 1) * group - 1 from the partials of every chunk of kvh
 * (all of which must be done). */
void cq_attn_decode_combine(const cq_attn_decode_args *a, uint32_t kvh);

/* The tiers, for tests and benchmarks. The generic tier runs ops' loops (cq_attn_ops_scalar:
 * the reference); the AVX-512 (AVX2) tier hands a head size that is not a multiple of 16 (8) to
 * the generic tier with the AVX-512 (AVX2) ops. */
void cq_attn_decode_unit_generic(const cq_attn_decode_args *a, uint32_t kvh, uint32_t ch,
                                 float *scratch, const cq_attn_ops *ops);
/* The SIMD tiers' units, once per cache type and per common head size: inside a unit function
 * with parameters (a, kvh, ch, s), calls RUN(a, kvh, ch, s, LD, HD) with HD = 64, 128 or 256 as
 * a constant (so every loop over hd unrolls), or 0 (hd read at run time) for other sizes. */
#define CQ_ATTN_UNIT_BY_HD(RUN, LD)                                                                \
    switch (a->kv->hd) {                                                                           \
    case 64:                                                                                       \
        RUN(a, kvh, ch, s, LD, 64);                                                                \
        return;                                                                                    \
    case 128:                                                                                      \
        RUN(a, kvh, ch, s, LD, 128);                                                               \
        return;                                                                                    \
    case 256:                                                                                      \
        RUN(a, kvh, ch, s, LD, 256);                                                               \
        return;                                                                                    \
    default:                                                                                       \
        RUN(a, kvh, ch, s, LD, 0);                                                                 \
    }

void cq_attn_decode_unit_avx2(const cq_attn_decode_args *a, uint32_t kvh, uint32_t ch,
                              float *scratch);
void cq_attn_decode_unit_avx512(const cq_attn_decode_args *a, uint32_t kvh, uint32_t ch,
                                float *scratch);

/* The first query head of kv head kvh and how many it serves (attn_heads.h). */
static inline uint32_t cq_attn_decode_head0(const cq_attn_decode_args *a, uint32_t kvh) {
    return cq_attn_head0(a->kv_first, a->n_heads, a->kv->n_kv, kvh);
}
static inline uint32_t cq_attn_decode_group(const cq_attn_decode_args *a, uint32_t kvh) {
    return cq_attn_heads_of(a->kv_first, a->n_heads, a->kv->n_kv, kvh);
}

/* Where a unit's partial for head g of the group starts: hd floats of acc, then m and l. Dense,
 * (kv head, chunk)-major; packed heads (kv_first), kv head kvh's MAX_CHUNKS * group slots from
 * MAX_CHUNKS * head0, chunk-major (the same places when every head is active). Either way the
 * partials of one head of kvh lie group * (hd + 16) floats apart from chunk to chunk. */
static inline float *cq_attn_decode_part_at(const cq_attn_decode_args *a, uint32_t kvh, uint32_t ch,
                                            uint32_t g) {
    uint32_t hd = a->kv->hd;
    size_t idx;
    if (!a->kv_first) {
        uint32_t group = a->n_heads / a->kv->n_kv;
        idx = ((size_t)kvh * CQ_ATTN_DECODE_MAX_CHUNKS + ch) * group + g;
    } else {
        uint32_t h0 = a->kv_first[kvh], group = a->kv_first[kvh + 1] - h0;
        idx = (size_t)h0 * CQ_ATTN_DECODE_MAX_CHUNKS + (size_t)ch * group + g;
    }
    return a->part + idx * (hd + 16);
}

#endif
