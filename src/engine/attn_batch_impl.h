/* attn_batch_impl.h - row-block geometry and cache addressing shared by the attn_batch tiers
 * (internal to src/engine/attn_batch*.c). */
#ifndef CORTIQ_ENGINE_ATTN_BATCH_IMPL_H
#define CORTIQ_ENGINE_ATTN_BATCH_IMPL_H

#include "engine/attn_batch.h"

/* Keys per score pass: a key tile's (kv_cache.h), widened into the key buffer element-major
 * (kt[i * CQ_ATTN_KEYS_PER_PASS + k]) once, then scored 8 at a time, each element of a key one
 * broadcast. */
#define CQ_ATTN_KEYS_PER_PASS CQ_KV_TILE

/* Keys of the pass from ring slot `slot` on, `left` to go: the passes start on tiles (but the
 * first) and stop at the ring's end, so a pass's keys lie in one tile. A key's score does not
 * depend on its pass. */
static inline uint32_t cq_attn_pass_keys(const cq_kv_layer *c, uint32_t slot, uint32_t left) {
    uint32_t n = CQ_ATTN_KEYS_PER_PASS - slot % CQ_ATTN_KEYS_PER_PASS;
    if (n > c->slots - slot) n = c->slots - slot;
    return n < left ? n : left;
}

/* Up to `lanes` rows of the call, one per vector lane. Row r of the call is token
 * t_begin + r / group, head h0 + r % group (attn_heads.h); lanes past the last row repeat it, so
 * every lane computes finite, discarded values. Positions are inclusive. */
typedef struct cq_attn_block {
    uint32_t nr; /* real rows */
    const float *q[CQ_ATTN_BATCH_ROWS];
    float *o[CQ_ATTN_BATCH_ROWS];
    int32_t lo[CQ_ATTN_BATCH_ROWS], hi[CQ_ATTN_BATCH_ROWS];
    uint32_t klo, khi; /* the union of the rows' key ranges */
} cq_attn_block;

static inline void cq_attn_block_fill(cq_attn_block *b, const cq_attn_batch_args *a, uint32_t kvh,
                                      uint32_t t_begin, size_t r0, size_t rows, uint32_t lanes) {
    uint32_t hd = a->kv->hd, group = cq_attn_heads_of(a->kv_first, a->n_heads, a->kv->n_kv, kvh);
    uint32_t h0 = cq_attn_head0(a->kv_first, a->n_heads, a->kv->n_kv, kvh);
    size_t qd = (size_t)a->n_heads * hd;
    b->nr = (uint32_t)(rows - r0 < lanes ? rows - r0 : lanes);
    for (uint32_t l = 0; l < lanes; l++) {
        size_t r = r0 + (l < b->nr ? l : b->nr - 1);
        size_t t = t_begin + r / group;
        uint32_t h = h0 + (uint32_t)(r % group), p = a->pos0 + (uint32_t)t;
        size_t at = t * qd + (size_t)h * hd;
        b->q[l] = a->q + at;
        b->o[l] = a->out + at;
        b->lo[l] = (int32_t)cq_attn_first_key(a, p);
        b->hi[l] = (int32_t)p;
    }
    b->klo = (uint32_t)b->lo[0]; /* lo and hi grow with the row index */
    b->khi = (uint32_t)b->hi[lanes - 1];
}

/* q8 scale of that vector (keys: c->ks, values: c->vs). */
static inline float cq_attn_scale_at(const float *s, const cq_kv_layer *c, uint32_t slot,
                                     uint32_t kvh) {
    return s[(size_t)slot * c->n_kv + kvh];
}

#endif
