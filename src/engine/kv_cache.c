/* kv_cache.c - per-layer KV cache storage, conversion on write, and the typed attention loops
 * (see kv_cache.h). */
#include "engine/kv_cache.h"

#include <math.h>
#include <stdlib.h>

#include "common/checked.h"
#include "common/f16.h"
#include "common/hugepages.h"

/* Room for the block tables and, for q8, the scales of a layer of `slots` slots; *bytes gets
 * the size of its keys (and of its values). A context the address space cannot hold counts as
 * out of memory. */
static bool layer_tables(cq_kv_layer *c, cortiq_kv_type type, uint32_t slots, uint32_t n_kv,
                         uint32_t hd, size_t *bytes) {
    *c = (cq_kv_layer){.type = type, .slots = slots, .n_kv = n_kv, .hd = hd};
    size_t vecs;
    if (!ck_mul_size(slots, n_kv, &vecs) ||
        !ck_mul_size(vecs, (size_t)hd * cq_kv_elem_size(type), bytes))
        return false;
    c->n_blocks = (uint32_t)(((uint64_t)slots + CQ_KV_BLOCK - 1) >> CQ_KV_BLOCK_SHIFT);
    c->kb = calloc(c->n_blocks, sizeof *c->kb);
    c->vb = calloc(c->n_blocks, sizeof *c->vb);
    if (!c->kb || !c->vb) return false;
    if (type != CORTIQ_KV_Q8) return true;
    size_t sbytes;
    if (!ck_mul_size(vecs, sizeof(float), &sbytes)) return false;
    c->ks = malloc(sbytes);
    c->vs = malloc(sbytes);
    return c->ks && c->vs;
}

/* Bytes of the keys (or the values) of block b. */
static size_t block_bytes(const cq_kv_layer *c, uint32_t b) {
    uint32_t first = b << CQ_KV_BLOCK_SHIFT, n = c->slots - first;
    if (n > CQ_KV_BLOCK) n = CQ_KV_BLOCK;
    return (size_t)n * c->n_kv * c->hd * cq_kv_elem_size(c->type);
}

bool cq_kv_layer_init(cq_kv_layer *c, cortiq_kv_type type, uint32_t slots, uint32_t n_kv,
                      uint32_t hd) {
    size_t bytes;
    if (!layer_tables(c, type, slots, n_kv, hd, &bytes)) return false;
    uint8_t *k = c->own_k = malloc(bytes), *v = c->own_v = malloc(bytes);
    if (!k || !v) return false;
    for (uint32_t b = 0; b < c->n_blocks; b++) {
        c->kb[b] = k, c->vb[b] = v;
        k += block_bytes(c, b), v += block_bytes(c, b);
    }
    return true;
}

void cq_kv_layer_free(cq_kv_layer *c) {
    free(c->own_k), free(c->own_v), free(c->kb), free(c->vb), free(c->ks), free(c->vs);
    *c = (cq_kv_layer){0};
}

/* A block starts on a cache line, so that a row never straddles one more line than it must. */
static size_t line_up(size_t n) {
    return (n + 63) & ~(size_t)63;
}

bool cq_kv_arena_init(cq_kv_arena *a, cq_kv_layer *layers, uint32_t n, cortiq_kv_type type,
                      const uint32_t *slots, uint32_t n_kv, uint32_t hd, bool huge) {
    *a = (cq_kv_arena){0};
    uint32_t rows = 0; /* block rows: the most blocks of any layer */
    size_t total = 0;
    bool ok = true;
    for (uint32_t l = 0; l < n; l++) {
        size_t bytes;
        if (!layer_tables(&layers[l], type, slots[l], n_kv, hd, &bytes)) {
            ok = false;
            continue;
        }
        if (layers[l].n_blocks > rows) rows = layers[l].n_blocks;
        for (uint32_t b = 0; b < layers[l].n_blocks; b++)
            if (!ck_add_size(total, 2 * line_up(block_bytes(&layers[l], b)), &total)) ok = false;
    }
    if (!ok) return false;
    uint8_t *p = a->base = cq_huge_alloc(total, huge);
    if (!p) return false;
    a->bytes = total;
    for (uint32_t b = 0; b < rows; b++) /* position-first: block b of every layer, then b + 1 */
        for (uint32_t l = 0; l < n; l++) {
            cq_kv_layer *c = &layers[l];
            if (b >= c->n_blocks) continue;
            size_t sz = line_up(block_bytes(c, b));
            c->kb[b] = p, p += sz;
            c->vb[b] = p, p += sz;
        }
    return true;
}

void cq_kv_arena_free(cq_kv_arena *a, cq_kv_layer *layers, uint32_t n) {
    for (uint32_t l = 0; layers && l < n; l++)
        cq_kv_layer_free(&layers[l]);
    if (a->base) cq_huge_free(a->base, a->bytes);
    *a = (cq_kv_arena){0};
}

uint64_t cq_kv_layer_bytes(const cq_kv_layer *c) {
    uint64_t per = (uint64_t)c->n_kv * c->hd * cq_kv_elem_size(c->type);
    if (c->type == CORTIQ_KV_Q8) per += (uint64_t)c->n_kv * sizeof(float);
    return 2 * per * c->slots;
}

float cq_kv_quantize_q8(const float *x, uint32_t n, int8_t *q) {
    float amax = 0;
    for (uint32_t i = 0; i < n; i++) {
        float a = fabsf(x[i]);
        if (isnan(a)) {
            amax = a;
            break;
        }
        if (a > amax) amax = a;
    }
    float scale = amax / 127.0f;
    if (!(scale > 0) || !isfinite(scale)) { /* zeros, or a non-finite value */
        for (uint32_t i = 0; i < n; i++)
            q[i] = 0;
        return scale;
    }
    for (uint32_t i = 0; i < n; i++) {
        long r = lrintf(x[i] / scale); /* |x| <= amax, so |x / scale| <= 127 (+ rounding) */
        q[i] = (int8_t)(r > 127 ? 127 : r < -127 ? -127 : r);
    }
    return scale;
}

static void store_one(const cq_kv_layer *c, uint8_t *const *blk, float *scales, uint32_t slot,
                      const float *x) {
    for (uint32_t h = 0; h < c->n_kv; h++) {
        const float *xh = x + (size_t)h * c->hd;
        void *dst = (void *)cq_kv_row(c, blk, slot, h);
        switch (c->type) {
        case CORTIQ_KV_F32:
            for (uint32_t i = 0; i < c->hd; i++)
                ((float *)dst)[i] = xh[i];
            break;
        case CORTIQ_KV_F16:
            cq_attn_ops_get()->to_f16(xh, (uint16_t *)dst, c->hd);
            break;
        default:
            scales[(size_t)slot * c->n_kv + h] = cq_kv_quantize_q8(xh, c->hd, (int8_t *)dst);
            break;
        }
    }
}

void cq_kv_store(cq_kv_layer *c, uint32_t slot, const float *k, const float *v) {
    store_one(c, c->kb, c->ks, slot, k);
    store_one(c, c->vb, c->vs, slot, v);
}

/* Slots s0 .. s0+n-1 cut where a block ends: the first piece's length. */
static uint32_t in_block(uint32_t s0, uint32_t n) {
    uint32_t left = CQ_KV_BLOCK - (s0 & (CQ_KV_BLOCK - 1));
    return n < left ? n : left;
}

void cq_kv_dots(const cq_attn_ops *ops, const cq_kv_layer *c, uint32_t h, const float *q,
                uint32_t s0, uint32_t n, float *out) {
    const size_t kvd = c->hd; /* elements from one slot's row to the next in a block */
    for (uint32_t r; n; s0 += r, n -= r, out += r) {
        r = in_block(s0, n);
        const void *row = cq_kv_row(c, c->kb, s0, h);
        switch (c->type) {
        case CORTIQ_KV_F32:
            ops->dots(q, row, kvd, r, c->hd, out);
            break;
        case CORTIQ_KV_F16:
            ops->dots_f16(q, row, kvd, r, c->hd, out);
            break;
        default:
            ops->dots_q8(q, row, kvd, c->ks + (size_t)s0 * c->n_kv + h, c->n_kv, r, c->hd, out);
            break;
        }
    }
}

void cq_kv_axpys(const cq_attn_ops *ops, const cq_kv_layer *c, uint32_t h, float *out,
                 const float *w, uint32_t s0, uint32_t n) {
    const size_t kvd = c->hd; /* elements from one slot's row to the next in a block */
    for (uint32_t r; n; s0 += r, n -= r, w += r) {
        r = in_block(s0, n);
        const void *row = cq_kv_row(c, c->vb, s0, h);
        switch (c->type) {
        case CORTIQ_KV_F32:
            ops->axpys(out, w, row, kvd, r, c->hd);
            break;
        case CORTIQ_KV_F16:
            ops->axpys_f16(out, w, row, kvd, r, c->hd);
            break;
        default:
            ops->axpys_q8(out, w, row, kvd, c->vs + (size_t)s0 * c->n_kv + h, c->n_kv, r, c->hd);
            break;
        }
    }
}
