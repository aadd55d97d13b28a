/* attn_batch.c - batched prefill attention: the tier dispatch, the scratch size, and the scalar
 * reference tier, which handles one (token, head) row at a time with the scalar cq_attn_ops
 * loops, expf and tanhf (the arithmetic of the former decode loop, now the scalar tier of
 * attn_decode.c). */
#include "engine/attn_batch.h"

#include <math.h>
#include <string.h>

#include "common/cpu.h"
#include "engine/attn_batch_impl.h"

size_t cq_attn_batch_scratch_bytes(uint32_t hd, uint32_t max_keys) {
    return sizeof(float) * ((size_t)(CQ_ATTN_BATCH_ROWS + CQ_ATTN_KEYS_PER_PASS) * hd +
                            (size_t)CQ_ATTN_BATCH_ROWS * max_keys);
}

void cq_attn_batch_scalar(const cq_attn_batch_args *a, uint32_t kvh, uint32_t t_begin,
                          uint32_t t_end, float *scratch) {
    const cq_kv_layer *c = a->kv;
    uint32_t hd = c->hd, slots = c->slots;
    uint32_t h0 = cq_attn_head0(a->kv_first, a->n_heads, c->n_kv, kvh);
    uint32_t h1 = h0 + cq_attn_heads_of(a->kv_first, a->n_heads, c->n_kv, kvh);
    size_t qd = (size_t)a->n_heads * hd;
    float *sc = scratch;
    for (uint32_t t = t_begin; t < t_end; t++)
        for (uint32_t h = h0; h < h1; h++) {
            uint32_t p = a->pos0 + t, lo = cq_attn_first_key(a, p);
            uint32_t cnt = p + 1 - lo, s0 = lo % slots;
            uint32_t run1 = cnt < slots - s0 ? cnt : slots - s0, run2 = cnt - run1;
            const float *q = a->q + t * qd + (size_t)h * hd;
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
            float inv = 1.0f / sum;
            for (uint32_t k = 0; k < cnt; k++)
                sc[k] *= inv;
            float *out = a->out + t * qd + (size_t)h * hd;
            memset(out, 0, hd * sizeof(float));
            cq_kv_axpys(&cq_attn_ops_scalar, c, kvh, out, sc, s0, run1);
            if (run2) cq_kv_axpys(&cq_attn_ops_scalar, c, kvh, out, sc + run1, 0, run2);
        }
}

typedef void (*attn_batch_fn)(const cq_attn_batch_args *a, uint32_t kvh, uint32_t t_begin,
                              uint32_t t_end, float *scratch);
static const attn_batch_fn k_tiers[CQ_ISA_COUNT] = {
    [CQ_ISA_SCALAR] = cq_attn_batch_scalar,
    [CQ_ISA_AVX2] = cq_attn_batch_avx2,
    [CQ_ISA_AVX512] = cq_attn_batch_avx512,
};

void cq_attn_batch(const cq_attn_batch_args *a, uint32_t kvh, uint32_t t_begin, uint32_t t_end,
                   float *scratch) {
    CQ_ISA_SELECT(k_tiers)(a, kvh, t_begin, t_end, scratch);
}
