/* kv_cache.c - per-layer KV cache storage, conversion on write, and the typed attention loops
 * (see kv_cache.h). */
#include "engine/kv_cache.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/checked.h"
#include "common/f16.h"
#include "common/hugepages.h"
#include "engine/model.h" /* CQ_MAX_HEAD_DIM */

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

/* Bytes of the values of block b, and of its keys (whole tiles). */
static size_t block_bytes(const cq_kv_layer *c, uint32_t b) {
    return (size_t)cq_kv_block_len(c, b) * c->n_kv * c->hd * cq_kv_elem_size(c->type);
}
static size_t key_block_bytes(const cq_kv_layer *c, uint32_t b) {
    return (size_t)cq_kv_block_tiles(c, b) * CQ_KV_TILE * c->n_kv * c->hd *
           cq_kv_elem_size(c->type);
}

bool cq_kv_layer_init(cq_kv_layer *c, cortiq_kv_type type, uint32_t slots, uint32_t n_kv,
                      uint32_t hd) {
    size_t bytes, kbytes = 0;
    if (!layer_tables(c, type, slots, n_kv, hd, &bytes)) return false;
    for (uint32_t b = 0; b < c->n_blocks; b++) /* within bytes + a tile per block: no overflow */
        kbytes += key_block_bytes(c, b);
    uint8_t *k = c->own_k = malloc(kbytes), *v = c->own_v = malloc(bytes);
    if (!k || !v) return false;
    for (uint32_t b = 0; b < c->n_blocks; b++) {
        c->kb[b] = k, c->vb[b] = v;
        k += key_block_bytes(c, b), v += block_bytes(c, b);
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
            if (!ck_add_size(total, line_up(key_block_bytes(&layers[l], b)), &total) ||
                !ck_add_size(total, line_up(block_bytes(&layers[l], b)), &total))
                ok = false;
    }
    if (!ok) return false;
    uint8_t *p = a->base = cq_huge_alloc(total, huge);
    if (!p) return false;
    a->bytes = total;
    for (uint32_t b = 0; b < rows; b++) /* position-first: block b of every layer, then b + 1 */
        for (uint32_t l = 0; l < n; l++) {
            cq_kv_layer *c = &layers[l];
            if (b >= c->n_blocks) continue;
            c->kb[b] = p, p += line_up(key_block_bytes(c, b));
            c->vb[b] = p, p += line_up(block_bytes(c, b));
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

/* One slot's value rows, head by head. */
static void store_values(const cq_kv_layer *c, uint32_t slot, const float *x) {
    for (uint32_t h = 0; h < c->n_kv; h++) {
        const float *xh = x + (size_t)h * c->hd;
        void *dst = (void *)cq_kv_row(c, c->vb, slot, h);
        switch (c->type) {
        case CORTIQ_KV_F32:
            for (uint32_t i = 0; i < c->hd; i++)
                ((float *)dst)[i] = xh[i];
            break;
        case CORTIQ_KV_F16:
            cq_attn_ops_get()->to_f16(xh, (uint16_t *)dst, c->hd);
            break;
        default:
            c->vs[(size_t)slot * c->n_kv + h] = cq_kv_quantize_q8(xh, c->hd, (int8_t *)dst);
            break;
        }
    }
}

/* One slot's keys: each head's converted once, then spread over its tile's lane (element i
 * CQ_KV_TILE elements after element i - 1). */
static void store_keys(const cq_kv_layer *c, uint32_t slot, const float *x) {
    _Static_assert(CQ_MAX_HEAD_DIM <= 1024, "a head vector fits the buffers");
    uint16_t h16[1024];
    int8_t q8[1024];
    for (uint32_t h = 0; h < c->n_kv; h++) {
        const float *xh = x + (size_t)h * c->hd;
        void *dst = (void *)cq_kv_key_at(c, slot, h, 0);
        switch (c->type) {
        case CORTIQ_KV_F32:
            for (uint32_t i = 0; i < c->hd; i++)
                ((float *)dst)[(size_t)i * CQ_KV_TILE] = xh[i];
            break;
        case CORTIQ_KV_F16:
            cq_attn_ops_get()->to_f16(xh, h16, c->hd);
            for (uint32_t i = 0; i < c->hd; i++)
                ((uint16_t *)dst)[(size_t)i * CQ_KV_TILE] = h16[i];
            break;
        default: /* one scale for the head's whole vector */
            c->ks[(size_t)slot * c->n_kv + h] = cq_kv_quantize_q8(xh, c->hd, q8);
            for (uint32_t i = 0; i < c->hd; i++)
                ((int8_t *)dst)[(size_t)i * CQ_KV_TILE] = q8[i];
            break;
        }
    }
}

void cq_kv_store(cq_kv_layer *c, uint32_t slot, const float *k, const float *v) {
    store_keys(c, slot, k);
    store_values(c, slot, v);
}

/* Slots s0 .. s0+n-1 cut where a block ends: the first piece's length. */
static uint32_t in_block(uint32_t s0, uint32_t n) {
    uint32_t left = CQ_KV_BLOCK - (s0 & (CQ_KV_BLOCK - 1));
    return n < left ? n : left;
}

void cq_kv_dots(const cq_kv_layer *c, uint32_t h, const float *q, uint32_t s0, uint32_t n,
                float *out) {
    const size_t step = CQ_KV_TILE * cq_kv_elem_size(c->type);
    for (uint32_t j = 0; j < n; j++) {
        const uint8_t *p = cq_kv_key_at(c, s0 + j, h, 0);
        float d = 0;
        for (uint32_t i = 0; i < c->hd; i++, p += step)
            d += q[i] * (c->type == CORTIQ_KV_F32   ? *(const float *)(const void *)p
                         : c->type == CORTIQ_KV_F16 ? f16_to_f32(*(const uint16_t *)(const void *)p)
                                                    : (float)*(const int8_t *)p);
        out[j] = c->type == CORTIQ_KV_Q8 ? d * c->ks[(size_t)(s0 + j) * c->n_kv + h] : d;
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
