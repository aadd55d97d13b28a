/* attn_decode_avx512.c - decode attention units with AVX-512 (attn_decode.h). Scores: blocks of
 * 16 keys are widened once to f32 (f16 / q8; f32 rows are read in place), then for each head of
 * the group 16 accumulators (one per key) run over hd and one transpose-add turns them into a
 * vector of 16 dots. Softmax over the chunk with the vectorized exp. Values: outputs in slices
 * of 64 (groups up to 4) or 32 (up to 8) floats, one accumulator per (head, 16 outputs), each
 * value row widened once and used by every head. */
#include <immintrin.h>
#include <math.h>

#include "engine/attn_decode.h"
#include "engine/attn_math_avx512.h"
#include "common/hsum16_avx512.h"

#define VW 16 /* floats per vector; keys per score block */
/* Cache rows fetched ahead (cq_kv_prefetch_row): decode reads this layer's cache from L3 or
 * DRAM (the weights stream evicts it). On the Zen 5 guest 48 beat 16 (SmolLM2 at 512-640
 * positions: +1 to +2 % decode for q8, +0.6 to +5 % for q4tp); on the Intel guest 24 took 7 to
 * 8 % less time per attention job than 48 for SmolLM2 and Qwen2.5-0.5B-shape, 2 to 4 % for
 * Gemma 3 (no prefetch: +40 %). */
#define PF_ROWS 24
#define AI      static inline __attribute__((always_inline))
#define ALL     ((__mmask16)0xFFFF)

static inline __mmask16 first_lanes(uint32_t n) {
    return n >= VW ? ALL : (__mmask16)((1u << n) - 1);
}

/* Lane k of the result = the sum of the lanes of v[k] (v is clobbered). */
AI __m512 transpose_add(__m512 *v) {
    CQ_FOLD16_AVX512(v, _mm512_add_ps);
    return v[0];
}

/* The unit's keys: positions x0 .. x0 + cnt - 1 of kv head kvh, starting at ring slot s0. */
typedef struct span {
    uint32_t kvh, cnt, s0;
} span;

/* Final scores of the chunk, sc[g * chunk + j] for head g of the group and key j. Each block
 * of 16 keys is widened into kbuf[16][hd] (f32 rows are copied, so that one pointer walks the
 * block); per head, 64 query values stay in registers while the 16 accumulators run down the
 * block's rows. */
AI void scores(const cq_attn_decode_args *a, span sp, float *sc, float *kbuf, ld_fn ld,
               const uint32_t hd) {
    const cq_kv_layer *c = a->kv;
    uint32_t group = a->n_heads / c->n_kv, slot = sp.s0;
    const __m512 scale = _mm512_set1_ps(a->scale), cap = _mm512_set1_ps(a->softcap);
    /* the unit's first rows (the loop below fetches PF_ROWS ahead from there on) */
    for (uint32_t j = 0; j < PF_ROWS && j < sp.cnt; j++)
        cq_kv_prefetch_row(c, c->kb, sp.kvh, sp.s0, j);
    for (uint32_t j0 = 0; j0 < sp.cnt; j0 += VW) {
        uint32_t kc = sp.cnt - j0 < VW ? sp.cnt - j0 : VW;
        float ks[VW];
        for (uint32_t k = 0; k < VW; k++) {
            float *dst = kbuf + (size_t)k * hd;
            if (k >= kc) { /* past the chunk: zeros, discarded by the masked store */
                for (uint32_t i = 0; i < hd; i += VW)
                    _mm512_storeu_ps(dst + i, _mm512_setzero_ps());
                ks[k] = 1.0f;
                continue;
            }
            ks[k] = c->type == CORTIQ_KV_Q8 ? c->ks[(size_t)slot * c->n_kv + sp.kvh] : 1.0f;
            const uint8_t *row = cq_kv_row(c, c->kb, slot, sp.kvh);
            /* one stream: past the last key the values pass's first rows */
            if (j0 + k + PF_ROWS < sp.cnt)
                cq_kv_prefetch_row(c, c->kb, sp.kvh, sp.s0, j0 + k + PF_ROWS);
            else if (j0 + k + PF_ROWS - sp.cnt < sp.cnt)
                cq_kv_prefetch_row(c, c->vb, sp.kvh, sp.s0, j0 + k + PF_ROWS - sp.cnt);
            for (uint32_t i = 0; i < hd; i += VW)
                _mm512_storeu_ps(dst + i, ld(row, i, ALL));
            if (++slot == c->slots) slot = 0;
        }
        __m512 kscale = _mm512_mul_ps(_mm512_loadu_ps(ks), scale); /* q8: scale after the dot */
        for (uint32_t g = 0; g < group; g++) {
            const float *q = a->q + (size_t)(sp.kvh * group + g) * hd;
            /* an empty asm makes the block's address opaque to each head: otherwise GCC hoists
             * the 64 row addresses out of this loop, spills them and reloads one per FMA at
             * hd 64; with it, +7 to +12 % per layer there */
            const float *kb = kbuf;
            __asm__("" : "+r"(kb));
            /* unrolled so that the 16 accumulators stay in registers: as a loop GCC kept them
             * in a stack array (zeroed by rep stos, every FMA through memory); +4 to +14 % */
            __m512 acc[VW];
#pragma GCC unroll 16
            for (int k = 0; k < VW; k++)
                acc[k] = _mm512_setzero_ps();
            for (uint32_t i0 = 0; i0 < hd; i0 += 4 * VW) {
                __mmask16 m1 = i0 + VW < hd ? ALL : 0, m2 = i0 + 2 * VW < hd ? ALL : 0,
                          m3 = i0 + 3 * VW < hd ? ALL : 0;
                __m512 q0 = _mm512_loadu_ps(q + i0), q1 = _mm512_maskz_loadu_ps(m1, q + i0 + VW),
                       q2 = _mm512_maskz_loadu_ps(m2, q + i0 + 2 * VW),
                       q3 = _mm512_maskz_loadu_ps(m3, q + i0 + 3 * VW);
                const float *kr = kb + i0;
#pragma GCC unroll 16
                for (int k = 0; k < VW; k++, kr += hd) {
                    __m512 t = _mm512_fmadd_ps(q0, _mm512_loadu_ps(kr), acc[k]);
                    t = _mm512_fmadd_ps(q1, _mm512_maskz_loadu_ps(m1, kr + VW), t);
                    t = _mm512_fmadd_ps(q2, _mm512_maskz_loadu_ps(m2, kr + 2 * VW), t);
                    acc[k] = _mm512_fmadd_ps(q3, _mm512_maskz_loadu_ps(m3, kr + 3 * VW), t);
                }
            }
            __m512 s = _mm512_mul_ps(transpose_add(acc), kscale);
            if (a->softcap > 0) s = _mm512_mul_ps(tanh16(_mm512_div_ps(s, cap)), cap);
            _mm512_mask_storeu_ps(sc + (size_t)g * a->chunk + j0, first_lanes(kc), s);
        }
    }
}

/* Head g's scores become e^(score - m) (times the value scale for q8, vs[j]); m and the sum
 * of the exponentials go to the partial. A NaN score does not raise m, as in the scalar
 * reference. */
AI void softmax(const cq_attn_decode_args *a, uint32_t cnt, float *s, const float *vs,
                float *part) {
    __m512 mx = _mm512_set1_ps(-INFINITY);
    for (uint32_t j = 0; j < cnt; j += VW)
        mx = _mm512_max_ps(_mm512_mask_loadu_ps(mx, first_lanes(cnt - j), s + j), mx);
    float m = _mm512_reduce_max_ps(mx);
    __m512 mv = _mm512_set1_ps(m), sum = _mm512_setzero_ps();
    for (uint32_t j = 0; j < cnt; j += VW) {
        __mmask16 mk = first_lanes(cnt - j);
        __m512 e = exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(mk, s + j), mv));
        sum = _mm512_mask_add_ps(sum, mk, sum, e);
        if (vs) e = _mm512_mul_ps(e, _mm512_maskz_loadu_ps(mk, vs + j));
        _mm512_mask_storeu_ps(s + j, mk, e);
    }
    part[a->kv->hd] = m, part[a->kv->hd + 1] = _mm512_reduce_add_ps(sum);
}

/* acc of heads g0 .. g0 + G - 1: sum over the chunk's keys of w[g][j] * value j, NV vectors of
 * outputs per pass (G * NV <= 16 accumulators). */
AI void values(const cq_attn_decode_args *a, span sp, uint32_t ch, const float *w, uint32_t g0,
               const int G, const int NV, ld_fn ld, const uint32_t hd) {
    const cq_kv_layer *c = a->kv;
    size_t esz = cq_kv_elem_size(c->type);
    float *part[8];
    for (int g = 0; g < G; g++)
        part[g] = cq_attn_decode_part_at(a, sp.kvh, ch, g0 + (uint32_t)g);
    for (uint32_t i0 = 0; i0 < hd; i0 += (uint32_t)NV * VW) {
        __mmask16 mk[4];
        for (int v = 0; v < NV; v++)
            mk[v] = i0 + (uint32_t)v * VW < hd ? ALL : 0;
        __m512 acc[8][4];
        for (int g = 0; g < G; g++)
            for (int v = 0; v < NV; v++)
                acc[g][v] = _mm512_setzero_ps();
        size_t off = i0 * esz;
        uint32_t slot = sp.s0;
        const uint8_t *row = cq_kv_row(c, c->vb, slot, sp.kvh) + off;
        for (uint32_t j = 0; j < sp.cnt; j++) {
            if (i0 == 0 && j + PF_ROWS < sp.cnt)
                cq_kv_prefetch_row(c, c->vb, sp.kvh, sp.s0, j + PF_ROWS);
            __m512 x[4];
            for (int v = 0; v < NV; v++)
                x[v] = ld(row, (size_t)v * VW, mk[v]);
            for (int g = 0; g < G; g++) {
                __m512 wv = _mm512_set1_ps(w[(size_t)(g0 + (uint32_t)g) * a->chunk + j]);
                for (int v = 0; v < NV; v++)
                    acc[g][v] = _mm512_fmadd_ps(wv, x[v], acc[g][v]);
            }
            row = cq_kv_next(c, c->vb, &slot, sp.kvh, row, off);
        }
        for (int g = 0; g < G; g++)
            for (int v = 0; v < NV; v++)
                _mm512_mask_storeu_ps(part[g] + i0 + v * VW, mk[v], acc[g][v]);
    }
}

AI void unit_run(const cq_attn_decode_args *a, uint32_t kvh, uint32_t ch, float *scratch, ld_fn ld,
                 const uint32_t HD) {
    const cq_kv_layer *c = a->kv;
    const uint32_t hd = HD ? HD : c->hd; /* a constant in the copies per head size */
    uint32_t group = a->n_heads / c->n_kv;
    uint32_t x0 = cq_attn_decode_first_key(a) + ch * a->chunk;
    uint32_t cnt = a->pos + 1 - x0 < a->chunk ? a->pos + 1 - x0 : a->chunk;
    span sp = {kvh, cnt, x0 % c->slots};
    float *sc = scratch, *kbuf = sc + (size_t)group * a->chunk, *vs = NULL;
    scores(a, sp, sc, kbuf, ld, hd);
    if (c->type == CORTIQ_KV_Q8) { /* the value scales of the chunk, gathered once */
        vs = kbuf + (size_t)VW * hd;
        for (uint32_t j = 0, slot = sp.s0; j < cnt; j++, slot = slot + 1 == c->slots ? 0 : slot + 1)
            vs[j] = c->vs[(size_t)slot * c->n_kv + kvh];
    }
    for (uint32_t g = 0; g < group; g++)
        softmax(a, cnt, sc + (size_t)g * a->chunk, vs, cq_attn_decode_part_at(a, kvh, ch, g));
    for (uint32_t g0 = 0; g0 < group; g0 += 8) {
        switch (group - g0 < 8 ? group - g0 : 8) {
        case 1:
            values(a, sp, ch, sc, g0, 1, 4, ld, hd);
            break;
        case 2:
            values(a, sp, ch, sc, g0, 2, 4, ld, hd);
            break;
        case 3:
            values(a, sp, ch, sc, g0, 3, 4, ld, hd);
            break;
        case 4:
            values(a, sp, ch, sc, g0, 4, 4, ld, hd);
            break;
        case 5:
            values(a, sp, ch, sc, g0, 5, 2, ld, hd);
            break;
        case 6:
            values(a, sp, ch, sc, g0, 6, 2, ld, hd);
            break;
        case 7:
            values(a, sp, ch, sc, g0, 7, 2, ld, hd);
            break;
        default:
            values(a, sp, ch, sc, g0, 8, 2, ld, hd);
            break;
        }
    }
}

/* One copy per cache type, so each ld_* inlines, and per common head size (+4 to +25 % per layer at
 * hd 64 and 256). */
static void unit_f32(const cq_attn_decode_args *a, uint32_t kvh, uint32_t ch, float *s) {
    CQ_ATTN_UNIT_BY_HD(unit_run, ld_f32)
}
static void unit_f16(const cq_attn_decode_args *a, uint32_t kvh, uint32_t ch, float *s) {
    CQ_ATTN_UNIT_BY_HD(unit_run, ld_f16)
}
static void unit_q8(const cq_attn_decode_args *a, uint32_t kvh, uint32_t ch, float *s) {
    CQ_ATTN_UNIT_BY_HD(unit_run, ld_q8)
}

void cq_attn_decode_unit_avx512(const cq_attn_decode_args *a, uint32_t kvh, uint32_t ch,
                                float *scratch) {
    if (a->kv->hd % VW) {
        cq_attn_decode_unit_generic(a, kvh, ch, scratch, &cq_attn_ops_avx512);
        return;
    }
    cortiq_kv_type t = a->kv->type;
    (t == CORTIQ_KV_F32 ? unit_f32 : t == CORTIQ_KV_F16 ? unit_f16 : unit_q8)(a, kvh, ch, scratch);
}
