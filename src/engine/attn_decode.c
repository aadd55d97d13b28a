/* attn_decode.c - decode attention (attn_decode.h): the chunk geometry, the generic tier (one
 * head at a time through cq_attn_ops loops; with the scalar ops, the reference), the combine
 * step and the tier dispatch. */
#include "engine/attn_decode.h"

#include <math.h>
#include <string.h>

#include "common/cpu.h"

static uint32_t round16(uint64_t x) {
    return (uint32_t)((x + 15) / 16 * 16);
}

uint32_t cq_attn_decode_chunk(uint32_t keys, uint32_t n_kv, unsigned threads) {
    uint64_t units = 4 * (uint64_t)(threads ? threads : 1);
    uint32_t c = round16(((uint64_t)keys * n_kv + units - 1) / units);
    if (c < CQ_ATTN_DECODE_MIN_CHUNK) c = CQ_ATTN_DECODE_MIN_CHUNK;
    if (c > CQ_ATTN_DECODE_MAX_CHUNK) c = CQ_ATTN_DECODE_MAX_CHUNK;
    uint32_t least =
        round16(((uint64_t)keys + CQ_ATTN_DECODE_MAX_CHUNKS - 1) / CQ_ATTN_DECODE_MAX_CHUNKS);
    return c > least ? c : least;
}

uint32_t cq_attn_decode_chunks(const cq_attn_decode_args *a) {
    uint32_t keys = a->pos + 1 - cq_attn_decode_first_key(a);
    return (keys + a->chunk - 1) / a->chunk;
}

size_t cq_attn_decode_scratch_floats(uint32_t group, uint32_t max_keys) {
    uint32_t least =
        round16(((uint64_t)max_keys + CQ_ATTN_DECODE_MAX_CHUNKS - 1) / CQ_ATTN_DECODE_MAX_CHUNKS);
    size_t chunk = least > CQ_ATTN_DECODE_MAX_CHUNK ? least : CQ_ATTN_DECODE_MAX_CHUNK;
    /* scores of the group, the q8 value scales */
    return (size_t)group * chunk + chunk;
}

size_t cq_attn_decode_part_floats(uint32_t n_heads, uint32_t hd) {
    return (size_t)n_heads * CQ_ATTN_DECODE_MAX_CHUNKS * (hd + 16);
}

void cq_attn_decode_unit_generic(const cq_attn_decode_args *a, uint32_t kvh, uint32_t ch,
                                 float *scratch, const cq_attn_ops *ops) {
    const cq_kv_layer *c = a->kv;
    uint32_t hd = c->hd, slots = c->slots, group = cq_attn_decode_group(a, kvh);
    uint32_t h0 = cq_attn_decode_head0(a, kvh);
    uint32_t x0 = cq_attn_decode_first_key(a) + ch * a->chunk;
    uint32_t cnt = a->pos + 1 - x0 < a->chunk ? a->pos + 1 - x0 : a->chunk, s0 = x0 % slots;
    /* the chunk's keys sit in at most two contiguous runs of the ring */
    uint32_t run1 = cnt < slots - s0 ? cnt : slots - s0, run2 = cnt - run1;
    float *sc = scratch;
    for (uint32_t g = 0; g < group; g++) {
        const float *q = a->q + (size_t)(h0 + g) * hd;
        cq_kv_dots(c, kvh, q, s0, run1, sc);
        if (run2) cq_kv_dots(c, kvh, q, 0, run2, sc + run1);
        float mx = -INFINITY;
        for (uint32_t k = 0; k < cnt; k++) {
            float d = sc[k] * a->scale;
            if (a->softcap > 0) d = tanhf(d / a->softcap) * a->softcap;
            sc[k] = d;
            if (d > mx) mx = d;
        }
        float sum = 0;
        for (uint32_t k = 0; k < cnt; k++)
            sum += sc[k] = expf(sc[k] - mx);
        float *acc = cq_attn_decode_part_at(a, kvh, ch, g);
        memset(acc, 0, hd * sizeof(float));
        cq_kv_axpys(ops, c, kvh, acc, sc, s0, run1);
        if (run2) cq_kv_axpys(ops, c, kvh, acc, sc + run1, 0, run2);
        acc[hd] = mx, acc[hd + 1] = sum;
    }
}

void cq_attn_decode_combine(const cq_attn_decode_args *a, uint32_t kvh) {
    uint32_t hd = a->kv->hd, group = cq_attn_decode_group(a, kvh), nc = cq_attn_decode_chunks(a);
    uint32_t h0 = cq_attn_decode_head0(a, kvh);
    size_t stride = (size_t)group * (hd + 16); /* from one chunk's partial to the next's */
    for (uint32_t g = 0; g < group; g++) {
        float *out = a->out + (size_t)(h0 + g) * hd;
        const float *p0 = cq_attn_decode_part_at(a, kvh, 0, g);
        float mx = -INFINITY, sum = 0;
        for (uint32_t ch = 0; ch < nc; ch++) {
            float m = p0[ch * stride + hd];
            if (m > mx) mx = m;
        }
        for (uint32_t ch = 0; ch < nc; ch++) {
            const float *p = p0 + ch * stride;
            sum += expf(p[hd] - mx) * p[hd + 1];
        }
        float inv = 1.0f / sum;
        memset(out, 0, hd * sizeof(float));
        for (uint32_t ch = 0; ch < nc; ch++) {
            const float *p = p0 + ch * stride;
            float f = expf(p[hd] - mx) * inv;
            for (uint32_t i = 0; i < hd; i++)
                out[i] += f * p[i];
        }
    }
}

/* The scalar tier: the generic body over the portable operations. */
static void unit_scalar(const cq_attn_decode_args *a, uint32_t kvh, uint32_t ch, float *scratch) {
    cq_attn_decode_unit_generic(a, kvh, ch, scratch, &cq_attn_ops_scalar);
}

typedef void (*attn_decode_fn)(const cq_attn_decode_args *a, uint32_t kvh, uint32_t ch,
                               float *scratch);
static const attn_decode_fn k_tiers[CQ_ISA_COUNT] = {
    [CQ_ISA_SCALAR] = unit_scalar,
    [CQ_ISA_AVX2] = cq_attn_decode_unit_avx2,
    [CQ_ISA_AVX512] = cq_attn_decode_unit_avx512,
};

void cq_attn_decode_unit(const cq_attn_decode_args *a, uint32_t kvh, uint32_t ch, float *scratch) {
    CQ_ISA_SELECT(k_tiers)(a, kvh, ch, scratch);
}
