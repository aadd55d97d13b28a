/* kv_fixture.h - a KV cache layer for the attention tests, laid out as a session lays it out:
 * the middle one of three layers in one arena, so that its blocks are not adjacent. The other
 * two layers' rows are all ones bits (NaN in f32 and f16, -1 in q8): a kernel that steps over
 * a block's end as if the next block followed reads them and fails its test. */
#ifndef CORTIQ_TESTS_KV_FIXTURE_H
#define CORTIQ_TESTS_KV_FIXTURE_H

#include <string.h>

#include "engine/kv_cache.h"

typedef struct kv_fixture {
    cq_kv_arena arena;
    cq_kv_layer layers[3];
} kv_fixture;

/* The layer (NULL when out of memory; kv_fixture_free either way). */
static inline cq_kv_layer *kv_fixture_init(kv_fixture *f, cortiq_kv_type type, uint32_t slots,
                                           uint32_t n_kv, uint32_t hd) {
    const uint32_t s[3] = {slots + 1, slots, slots + CQ_KV_BLOCK};
    if (!cq_kv_arena_init(&f->arena, f->layers, 3, type, s, n_kv, hd, false)) return NULL;
    for (int l = 0; l < 3; l += 2) {
        const cq_kv_layer *c = &f->layers[l];
        size_t row = (size_t)n_kv * hd * cq_kv_elem_size(type);
        for (uint32_t b = 0; b < c->n_blocks; b++) { /* the keys in whole tiles */
            memset(c->kb[b], 0xFF, cq_kv_block_tiles(c, b) * CQ_KV_TILE * row);
            memset(c->vb[b], 0xFF, cq_kv_block_len(c, b) * row);
        }
    }
    return &f->layers[1];
}

static inline void kv_fixture_free(kv_fixture *f) {
    cq_kv_arena_free(&f->arena, f->layers, 3);
}

#endif
