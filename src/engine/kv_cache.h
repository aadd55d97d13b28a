/* kv_cache.h - one layer's KV cache in the session's chosen element type (f32, f16, or q8 =
 * int8 with one f32 scale per head vector per position). A position is converted once when
 * written; attention reads the stored type directly through cq_attn_ops. */
#ifndef CORTIQ_ENGINE_KV_CACHE_H
#define CORTIQ_ENGINE_KV_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cortiq/engine.h"
#include "engine/attn_ops.h"

/* Slots per block. A layer's rows are stored in blocks of this many slots; within a block
 * they are head-major ([n_kv][slots of the block][hd]), so that the rows one kv head's
 * attention reads lie back to back (decode reads them from L3 or memory, where a contiguous
 * stream is what the hardware prefetchers follow), and the blocks of one layer need not be
 * adjacent: a
 * session lays its layers' blocks out position-first (block 0 of every layer, then block 1, ...)
 * in one region on 2 MiB pages, so that a short conversation in a long context touches only
 * the first blocks of that region (see cq_kv_arena_init). */
#define CQ_KV_BLOCK_SHIFT 8
#define CQ_KV_BLOCK       (1u << CQ_KV_BLOCK_SHIFT)

typedef struct cq_kv_layer {
    cortiq_kv_type type;
    uint32_t slots;      /* ctx, or window + chunk for sliding layers (a ring) */
    uint32_t n_kv, hd;   /* a slot holds n_kv head vectors of hd values, for keys and for values */
    uint32_t n_blocks;   /* ceil(slots / CQ_KV_BLOCK) */
    uint8_t **kb, **vb;  /* [n_blocks] the key / value blocks: [n_kv][CQ_KV_BLOCK][hd] elements
                            of type (the last block holds what is left of slots) */
    float *ks, *vs;      /* q8 only: [slots][n_kv] scales */
    void *own_k, *own_v; /* cq_kv_layer_init's storage (NULL in an arena) */
} cq_kv_layer;

/* Allocate one layer on its own; false when out of memory (the layer is then safe to free). */
bool cq_kv_layer_init(cq_kv_layer *c, cortiq_kv_type type, uint32_t slots, uint32_t n_kv,
                      uint32_t hd);
void cq_kv_layer_free(cq_kv_layer *c);
uint64_t cq_kv_layer_bytes(const cq_kv_layer *c);

/* n layers with slots[l] slots each, their blocks in one region laid out position-first, on
 * 2 MiB pages when huge (where the kernel offers them). Decode reads every layer's rows once
 * per token; on 4 KiB pages that is a TLB miss every few rows (SmolLM2-135M at 512-640
 * positions: +4 to +8 % decode on the Intel guest of docs/KERNELS.md). False when out of
 * memory; the layers and the arena are then safe to free. */
typedef struct cq_kv_arena {
    void *base;
    size_t bytes;
} cq_kv_arena;
bool cq_kv_arena_init(cq_kv_arena *a, cq_kv_layer *layers, uint32_t n, cortiq_kv_type type,
                      const uint32_t *slots, uint32_t n_kv, uint32_t hd, bool huge);
/* Frees the arena and each layer's tables and scales. */
void cq_kv_arena_free(cq_kv_arena *a, cq_kv_layer *layers, uint32_t n);

static inline size_t cq_kv_elem_size(cortiq_kv_type t) {
    return t == CORTIQ_KV_F32 ? 4 : t == CORTIQ_KV_F16 ? 2 : 1;
}

/* Slots in block b: CQ_KV_BLOCK but for the last, which holds what is left of c->slots. */
static inline uint32_t cq_kv_block_len(const cq_kv_layer *c, uint32_t b) {
    uint32_t left = c->slots - (b << CQ_KV_BLOCK_SHIFT);
    return left < CQ_KV_BLOCK ? left : CQ_KV_BLOCK;
}

/* Bytes from one slot's row of a kv head to the next slot's within a block (rows of one head
 * are back to back there). */
static inline size_t cq_kv_stride(const cq_kv_layer *c) {
    return (size_t)c->hd * cq_kv_elem_size(c->type);
}

/* The row (hd elements) of kv head h in slot `slot`; blk is c->kb (keys) or c->vb (values). */
static inline const uint8_t *cq_kv_row(const cq_kv_layer *c, uint8_t *const *blk, uint32_t slot,
                                       uint32_t h) {
    uint32_t b = slot >> CQ_KV_BLOCK_SHIFT;
    size_t in = (size_t)h * cq_kv_block_len(c, b) + (slot & (CQ_KV_BLOCK - 1));
    return blk[b] + in * cq_kv_stride(c);
}

/* The same place, `off` bytes into the row, in the slot after *slot (the ring wraps at
 * c->slots): p + one row within a block, else looked up at a block's start. p is the place in
 * *slot's row; *slot advances. */
static inline const uint8_t *cq_kv_next(const cq_kv_layer *c, uint8_t *const *blk, uint32_t *slot,
                                        uint32_t h, const uint8_t *p, size_t off) {
    if (++*slot == c->slots) *slot = 0;
    if (*slot & (CQ_KV_BLOCK - 1)) return p + cq_kv_stride(c);
    return cq_kv_row(c, blk, *slot, h) + off;
}

/* Write one position: k and v are n_kv * hd floats each. */
void cq_kv_store(cq_kv_layer *c, uint32_t slot, const float *k, const float *v);

/* Scores of the query head vector q against the keys of kv head h in slots s0 .. s0+n-1. */
void cq_kv_dots(const cq_attn_ops *ops, const cq_kv_layer *c, uint32_t h, const float *q,
                uint32_t s0, uint32_t n, float *out);
/* out (hd floats) += sum_j w[j] * value of kv head h in slot s0 + j, for j < n. */
void cq_kv_axpys(const cq_attn_ops *ops, const cq_kv_layer *c, uint32_t h, float *out,
                 const float *w, uint32_t s0, uint32_t n);

/* Prefetch the row of kv head h in the ring slot s0 + j (keys: blk = c->kb, values: c->vb)
 * into L1. Decode attention reads each cache row once, from L3 or memory: the units fetch
 * PF_ROWS rows ahead themselves (AVX-512, old and new units called alternately in one process
 * at pos 576, with the slot-major layout this cache had before: 1-27 % less time per layer).
 * j must be below the span's length. cq_kv_prefetch_at: the row that starts at p. */
static inline void cq_kv_prefetch_at(const cq_kv_layer *c, const uint8_t *p) {
    size_t row = (size_t)c->hd * cq_kv_elem_size(c->type);
    for (size_t b = 0; b < row; b += 64)
        __builtin_prefetch(p + b, 0, 3);
}

static inline void cq_kv_prefetch_row(const cq_kv_layer *c, uint8_t *const *blk, uint32_t h,
                                      uint32_t s0, uint32_t j) {
    uint32_t slot = s0 + j;
    if (slot >= c->slots) slot -= c->slots;
    cq_kv_prefetch_at(c, cq_kv_row(c, blk, slot, h));
}

/* The q8 encoding of one head vector (the reference for the layout): scale = max |x| / 127,
 * q[i] = round(x[i] / scale); a vector of zeros gets scale 0. A non-finite input gives a
 * non-finite scale and zero codes, so it still poisons attention as it would at f32. */
float cq_kv_quantize_q8(const float *x, uint32_t n, int8_t *q);

#endif
