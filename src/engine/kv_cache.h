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

/* Slots per block. A layer's rows are stored in blocks of this many slots, and the blocks of
 * one layer need not be adjacent: a session lays its layers' blocks out position-first (block 0
 * of every layer, then block 1, ...) in one region on 2 MiB pages, so that a short conversation
 * in a long context touches only the first blocks of that region (see cq_kv_arena_init).
 * Within a block the values are head-major ([n_kv][slots of the block][hd]), so the rows one
 * kv head's attention reads lie back to back; the keys come in tiles of CQ_KV_TILE slots,
 * [n_kv][tiles of the block][hd][CQ_KV_TILE], so that element i of 16 consecutive keys is one
 * vector: decode attention takes the keys in the lanes and needs no horizontal sums. */
#define CQ_KV_BLOCK_SHIFT 8
#define CQ_KV_BLOCK       (1u << CQ_KV_BLOCK_SHIFT)
#define CQ_KV_TILE        16u /* key slots per tile (a block's last tile may be partly unused) */

typedef struct cq_kv_layer {
    cortiq_kv_type type;
    uint32_t slots;      /* ctx, or window + chunk for sliding layers (a ring) */
    uint32_t n_kv, hd;   /* a slot holds n_kv head vectors of hd values, for keys and for values */
    uint32_t n_blocks;   /* ceil(slots / CQ_KV_BLOCK) */
    uint8_t **kb, **vb;  /* [n_blocks] the key / value blocks (above) in elements of type (the
                            last block holds what is left of slots, its keys whole tiles) */
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

/* The value row (hd elements) of kv head h in slot `slot`; blk is c->vb. */
static inline const uint8_t *cq_kv_row(const cq_kv_layer *c, uint8_t *const *blk, uint32_t slot,
                                       uint32_t h) {
    uint32_t b = slot >> CQ_KV_BLOCK_SHIFT;
    size_t in = (size_t)h * cq_kv_block_len(c, b) + (slot & (CQ_KV_BLOCK - 1));
    return blk[b] + in * cq_kv_stride(c);
}

/* The same place, `off` bytes into the value row, in the slot after *slot (the ring wraps at
 * c->slots): p + one row within a block, else looked up at a block's start. p is the place in
 * *slot's row; *slot advances. */
static inline const uint8_t *cq_kv_next(const cq_kv_layer *c, uint8_t *const *blk, uint32_t *slot,
                                        uint32_t h, const uint8_t *p, size_t off) {
    if (++*slot == c->slots) *slot = 0;
    if (*slot & (CQ_KV_BLOCK - 1)) return p + cq_kv_stride(c);
    return cq_kv_row(c, blk, *slot, h) + off;
}

/* Tiles of keys in block b (its slots rounded up to whole tiles). */
static inline uint32_t cq_kv_block_tiles(const cq_kv_layer *c, uint32_t b) {
    return (cq_kv_block_len(c, b) + CQ_KV_TILE - 1) / CQ_KV_TILE;
}

/* The key tile of kv head h that holds slot `slot`, in lane slot % CQ_KV_TILE: element i of
 * that key at (i * CQ_KV_TILE + lane) elements from it. */
static inline const uint8_t *cq_kv_key_tile(const cq_kv_layer *c, uint32_t slot, uint32_t h) {
    uint32_t b = slot >> CQ_KV_BLOCK_SHIFT, t = (slot & (CQ_KV_BLOCK - 1)) / CQ_KV_TILE;
    size_t tile = (size_t)h * cq_kv_block_tiles(c, b) + t;
    return c->kb[b] + tile * CQ_KV_TILE * cq_kv_stride(c);
}

/* Element i of the key of kv head h in slot `slot`. */
static inline const uint8_t *cq_kv_key_at(const cq_kv_layer *c, uint32_t slot, uint32_t h,
                                          uint32_t i) {
    size_t e = (size_t)i * CQ_KV_TILE + slot % CQ_KV_TILE;
    return cq_kv_key_tile(c, slot, h) + e * cq_kv_elem_size(c->type);
}

/* Keys from slot `slot` on that share its tile: up to the tile's end, the ring's end (c->slots)
 * or `left`. */
static inline uint32_t cq_kv_tile_run(const cq_kv_layer *c, uint32_t slot, uint32_t left) {
    uint32_t n = CQ_KV_TILE - slot % CQ_KV_TILE;
    if (n > c->slots - slot) n = c->slots - slot;
    return n < left ? n : left;
}

/* Write one position: k and v are n_kv * hd floats each. */
void cq_kv_store(cq_kv_layer *c, uint32_t slot, const float *k, const float *v);

/* Scores of the query head vector q against the keys of kv head h in slots s0 .. s0+n-1 (one
 * sum per key, elements in order; the q8 scale after it), n within the ring (s0 + n <= slots). */
void cq_kv_dots(const cq_kv_layer *c, uint32_t h, const float *q, uint32_t s0, uint32_t n,
                float *out);
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
