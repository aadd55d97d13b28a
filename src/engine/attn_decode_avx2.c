/* attn_decode_avx2.c - decode attention units with AVX2 + FMA + F16C (attn_decode.h): the
 * AVX-512 tier's design (attn_decode_avx512.c) with 8 lanes. Key blocks of 8 rows widened once
 * to f32; per head 8 accumulators (one per key) over hd, three horizontal-add levels turning
 * them into a vector of 8 dots; softmax with exp8; values in slices of 32 (groups up to 2), 16
 * (up to 6) or 8 (up to 8) outputs, one accumulator per (head, 8 outputs), each value row
 * widened once for every head. Needs hd % 8 == 0; otherwise the generic tier with the AVX2 ops
 * runs. */
#include <immintrin.h>
#include <math.h>

#include "engine/attn_decode.h"
#include "engine/attn_math_avx2.h"

#define VW      8  /* floats per vector; keys per score block */
#define PF_ROWS 24 /* cache rows fetched ahead (cq_kv_prefetch_row); see attn_decode_avx512.c */
#define AI      static inline __attribute__((always_inline))

/* Integer lane mask: lanes below n set. */
static inline __m256i lanes_below(uint32_t n) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)(n < VW ? n : VW)),
                              _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/* Lane k of the result = the sum of the lanes of v[k]. */
AI __m256 transpose_add(const __m256 *v) {
    __m256 a = _mm256_hadd_ps(_mm256_hadd_ps(v[0], v[1]), _mm256_hadd_ps(v[2], v[3]));
    __m256 b = _mm256_hadd_ps(_mm256_hadd_ps(v[4], v[5]), _mm256_hadd_ps(v[6], v[7]));
    /* a: sums of v0..v3 over the low 128-bit half, then over the high half; b likewise */
    return _mm256_add_ps(_mm256_permute2f128_ps(a, b, 0x20), _mm256_permute2f128_ps(a, b, 0x31));
}

static inline float hmax(__m256 v) {
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    return _mm_cvtss_f32(_mm_max_ss(m, _mm_movehdup_ps(m)));
}

static inline float hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
}

/* The unit's keys: positions x0 .. x0 + cnt - 1 of kv head kvh, starting at ring slot s0. */
typedef struct span {
    uint32_t kvh, cnt, s0;
} span;

/* Final scores of the chunk, sc[g * chunk + j] for head g of the group and key j. */
AI void scores(const cq_attn_decode_args *a, span sp, float *sc, float *kbuf, ld_fn ld,
               const uint32_t hd) {
    const cq_kv_layer *c = a->kv;
    uint32_t group = a->n_heads / c->n_kv, slot = sp.s0;
    uint32_t hd32 = hd / 32 * 32;
    const __m256 scale = _mm256_set1_ps(a->scale), cap = _mm256_set1_ps(a->softcap);
    for (uint32_t j0 = 0; j0 < sp.cnt; j0 += VW) {
        uint32_t kc = sp.cnt - j0 < VW ? sp.cnt - j0 : VW;
        float ks[VW];
        for (uint32_t k = 0; k < VW; k++) {
            float *dst = kbuf + (size_t)k * hd;
            if (k >= kc) { /* past the chunk: zeros, discarded by the masked store */
                for (uint32_t i = 0; i < hd; i += VW)
                    _mm256_storeu_ps(dst + i, _mm256_setzero_ps());
                ks[k] = 1.0f;
                continue;
            }
            ks[k] = c->type == CORTIQ_KV_Q8 ? c->ks[(size_t)slot * c->n_kv + sp.kvh] : 1.0f;
            const uint8_t *row = cq_kv_row(c, c->kb, slot, sp.kvh);
            if (j0 + k + PF_ROWS < sp.cnt)
                cq_kv_prefetch_row(c, c->kb, sp.kvh, sp.s0, j0 + k + PF_ROWS);
            for (uint32_t i = 0; i < hd; i += VW)
                _mm256_storeu_ps(dst + i, ld(row, i));
            if (++slot == c->slots) slot = 0;
        }
        __m256 kscale = _mm256_mul_ps(_mm256_loadu_ps(ks), scale); /* q8: scale after the dot */
        for (uint32_t g = 0; g < group; g++) {
            const float *q = a->q + (size_t)(sp.kvh * group + g) * hd;
            __m256 acc[VW];
            for (int k = 0; k < VW; k++)
                acc[k] = _mm256_setzero_ps();
            uint32_t i0 = 0;
            for (; i0 < hd32; i0 += 4 * VW) {
                __m256 q0 = _mm256_loadu_ps(q + i0), q1 = _mm256_loadu_ps(q + i0 + VW),
                       q2 = _mm256_loadu_ps(q + i0 + 2 * VW), q3 = _mm256_loadu_ps(q + i0 + 3 * VW);
                const float *kr = kbuf + i0;
                for (int k = 0; k < VW; k++, kr += hd) {
                    __m256 t = _mm256_fmadd_ps(q0, _mm256_loadu_ps(kr), acc[k]);
                    t = _mm256_fmadd_ps(q1, _mm256_loadu_ps(kr + VW), t);
                    t = _mm256_fmadd_ps(q2, _mm256_loadu_ps(kr + 2 * VW), t);
                    acc[k] = _mm256_fmadd_ps(q3, _mm256_loadu_ps(kr + 3 * VW), t);
                }
            }
            for (; i0 < hd; i0 += VW) {
                __m256 q0 = _mm256_loadu_ps(q + i0);
                const float *kr = kbuf + i0;
                for (int k = 0; k < VW; k++, kr += hd)
                    acc[k] = _mm256_fmadd_ps(q0, _mm256_loadu_ps(kr), acc[k]);
            }
            __m256 s = _mm256_mul_ps(transpose_add(acc), kscale);
            if (a->softcap > 0) s = _mm256_mul_ps(tanh8(_mm256_div_ps(s, cap)), cap);
            _mm256_maskstore_ps(sc + (size_t)g * a->chunk + j0, lanes_below(kc), s);
        }
    }
}

/* Head g's scores become e^(score - m) (times the value scale for q8, vs[j]); m and the sum
 * of the exponentials go to the partial. A NaN score does not raise m, as in the scalar
 * reference. */
AI void softmax(const cq_attn_decode_args *a, uint32_t cnt, float *s, const float *vs,
                float *part) {
    const __m256 ninf = _mm256_set1_ps(-INFINITY);
    __m256 mx = ninf;
    for (uint32_t j = 0; j < cnt; j += VW) {
        __m256i mk = lanes_below(cnt - j);
        __m256 x = _mm256_blendv_ps(ninf, _mm256_maskload_ps(s + j, mk), _mm256_castsi256_ps(mk));
        mx = _mm256_max_ps(x, mx); /* a NaN x leaves mx */
    }
    float m = hmax(mx);
    __m256 mv = _mm256_set1_ps(m), sum = _mm256_setzero_ps();
    for (uint32_t j = 0; j < cnt; j += VW) {
        __m256i mk = lanes_below(cnt - j);
        __m256 e = exp8(_mm256_sub_ps(_mm256_maskload_ps(s + j, mk), mv));
        e = _mm256_and_ps(e, _mm256_castsi256_ps(mk));
        sum = _mm256_add_ps(sum, e);
        if (vs) e = _mm256_mul_ps(e, _mm256_maskload_ps(vs + j, mk));
        _mm256_maskstore_ps(s + j, mk, e);
    }
    part[a->kv->hd] = m, part[a->kv->hd + 1] = hsum(sum);
}

/* acc of heads g0 .. g0 + G - 1, outputs i_begin .. i_end - 1 (a multiple of NV * 8 of them):
 * sum over the chunk's keys of w[g][j] * value j. */
AI void values(const cq_attn_decode_args *a, span sp, uint32_t ch, const float *w, uint32_t g0,
               const int G, const int NV, uint32_t i_begin, uint32_t i_end, ld_fn ld) {
    const cq_kv_layer *c = a->kv;
    size_t esz = cq_kv_elem_size(c->type);
    float *part[8];
    for (int g = 0; g < G; g++)
        part[g] = cq_attn_decode_part_at(a, sp.kvh, ch, g0 + (uint32_t)g);
    for (uint32_t i0 = i_begin; i0 < i_end; i0 += (uint32_t)NV * VW) {
        __m256 acc[8][4];
        for (int g = 0; g < G; g++)
            for (int v = 0; v < NV; v++)
                acc[g][v] = _mm256_setzero_ps();
        size_t off = i0 * esz;
        uint32_t slot = sp.s0;
        const uint8_t *row = cq_kv_row(c, c->vb, slot, sp.kvh) + off;
        for (uint32_t j = 0; j < sp.cnt; j++) {
            if (i0 == i_begin && j + PF_ROWS < sp.cnt)
                cq_kv_prefetch_row(c, c->vb, sp.kvh, sp.s0, j + PF_ROWS);
            __m256 x[4];
            for (int v = 0; v < NV; v++)
                x[v] = ld(row, (size_t)v * VW);
            for (int g = 0; g < G; g++) {
                __m256 wv = _mm256_broadcast_ss(w + (size_t)(g0 + (uint32_t)g) * a->chunk + j);
                for (int v = 0; v < NV; v++)
                    acc[g][v] = _mm256_fmadd_ps(wv, x[v], acc[g][v]);
            }
            row = cq_kv_next(c, c->vb, &slot, sp.kvh, row, off);
        }
        for (int g = 0; g < G; g++)
            for (int v = 0; v < NV; v++)
                _mm256_storeu_ps(part[g] + i0 + v * VW, acc[g][v]);
    }
}

/* Heads g0 .. g0 + G - 1 over all hd outputs: whole slices of NV vectors, then single ones. */
AI void values_heads(const cq_attn_decode_args *a, span sp, uint32_t ch, const float *w,
                     uint32_t g0, const int G, const int NV, ld_fn ld, const uint32_t hd) {
    uint32_t whole = hd / (NV * VW) * (NV * VW);
    values(a, sp, ch, w, g0, G, NV, 0, whole, ld);
    if (whole < hd) values(a, sp, ch, w, g0, G, 1, whole, hd, ld);
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
        vs = kbuf + (size_t)16 * hd;
        for (uint32_t j = 0, slot = sp.s0; j < cnt; j++, slot = slot + 1 == c->slots ? 0 : slot + 1)
            vs[j] = c->vs[(size_t)slot * c->n_kv + kvh];
    }
    for (uint32_t g = 0; g < group; g++)
        softmax(a, cnt, sc + (size_t)g * a->chunk, vs, cq_attn_decode_part_at(a, kvh, ch, g));
    for (uint32_t g0 = 0; g0 < group; g0 += 8) {
        switch (group - g0 < 8 ? group - g0 : 8) {
        case 1:
            values_heads(a, sp, ch, sc, g0, 1, 4, ld, hd);
            break;
        case 2:
            values_heads(a, sp, ch, sc, g0, 2, 4, ld, hd);
            break;
        case 3:
            values_heads(a, sp, ch, sc, g0, 3, 2, ld, hd);
            break;
        case 4:
            values_heads(a, sp, ch, sc, g0, 4, 2, ld, hd);
            break;
        case 5:
            values_heads(a, sp, ch, sc, g0, 5, 2, ld, hd);
            break;
        case 6:
            values_heads(a, sp, ch, sc, g0, 6, 2, ld, hd);
            break;
        case 7:
            values_heads(a, sp, ch, sc, g0, 7, 1, ld, hd);
            break;
        default:
            values_heads(a, sp, ch, sc, g0, 8, 1, ld, hd);
            break;
        }
    }
}

/* One copy per cache type, so each ld_* inlines, and per common head size (+5 to +7 % per layer at
 * hd 64; hd 256 measured within noise). */
static void unit_f32(const cq_attn_decode_args *a, uint32_t kvh, uint32_t ch, float *s) {
    CQ_ATTN_UNIT_BY_HD(unit_run, ld_f32)
}
static void unit_f16(const cq_attn_decode_args *a, uint32_t kvh, uint32_t ch, float *s) {
    CQ_ATTN_UNIT_BY_HD(unit_run, ld_f16)
}
static void unit_q8(const cq_attn_decode_args *a, uint32_t kvh, uint32_t ch, float *s) {
    CQ_ATTN_UNIT_BY_HD(unit_run, ld_q8)
}

void cq_attn_decode_unit_avx2(const cq_attn_decode_args *a, uint32_t kvh, uint32_t ch,
                              float *scratch) {
    if (a->kv->hd % VW) {
        cq_attn_decode_unit_generic(a, kvh, ch, scratch, &cq_attn_ops_avx2);
        return;
    }
    cortiq_kv_type t = a->kv->type;
    (t == CORTIQ_KV_F32 ? unit_f32 : t == CORTIQ_KV_F16 ? unit_f16 : unit_q8)(a, kvh, ch, scratch);
}
