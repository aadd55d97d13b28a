/* q4tp_ladder_avx512.h - a q4tp row's 32-rung scale ladder 2^(lo + i*step) in two vectors
 * (spec §3.2 q4tp), inline for the kernels that build one per row and for the decode copy,
 * which takes each group's 16 rungs per lane: a q4tp row of 576-896 columns carries only
 * 18-28 groups, so the rungs are a large part of a decode matvec's work. Rung c is 2^lo times
 * powers of 2^step as the format's reference builds it (two polynomials a row, a masked
 * product per bit of c), within ~40 ulp of the reference's at rung 31 (test_lanes holds
 * every tier to it); rows far out of range take a polynomial per rung instead. For files
 * compiled with the AVX-512 flags (cmake/CortiqModule.cmake). */
#ifndef CORTIQ_QUANT_Q4TP_LADDER_AVX512_H
#define CORTIQ_QUANT_Q4TP_LADDER_AVX512_H

#include <immintrin.h>
#include <stdint.h>

#include "cortiq/kernels.h"
#include "quant/q4tp_rung.h"

/* 2^x for |x| well inside the float exponent range: round to the nearest integer n, a
 * degree-7 polynomial on the remainder, scaled by 2^n */
static inline __m512 cq_exp2_ps_avx512(__m512 x) {
    __m512 n = _mm512_roundscale_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 f = _mm512_sub_ps(x, n);
    __m512 p = CQ_EXP2_FRAC(_mm512_fmadd_ps, _mm512_set1_ps, f);
    return _mm512_scalef_ps(p, n);
}

/* A lane's ladder as products, the other implementation's way (docs/FORMAT.md, "q4tp ladder"):
 * a = 2^lo and r = 2^step, rung c = a times r, r^2, r^4, r^8, r^16 (each the square of the one
 * before) for the bits of c from the lowest, one masked product a bit (a product by 1 left
 * out is exact either way). It serves a lane where every value on the way, 2^(lo + c step)
 * and 2^(k step) for c <= 31, k <= 16, is a normal float: |lo| + 31 |step| <= 120 (every real
 * row); a lane outside takes the direct form, 2^(lo + (c & 15) step) times qq for c >= 16. */
typedef struct {
    __m512 a, r, r2, r4, r8, r16;
} cq_q4tp_pow16;

static inline __mmask16 cq_q4tp_near_avx512(__m512 lo, __m512 st) {
    const __m512 span =
        _mm512_fmadd_ps(_mm512_set1_ps(31.0f), _mm512_abs_ps(st), _mm512_abs_ps(lo));
    return _mm512_cmp_ps_mask(span, _mm512_set1_ps(120.0f), _CMP_LE_OQ); /* NaN: not near */
}

static inline cq_q4tp_pow16 cq_q4tp_pow_avx512(__m512 lo, __m512 st) {
    cq_q4tp_pow16 p;
    p.a = cq_exp2_ps_avx512(lo);
    p.r = cq_exp2_ps_avx512(st);
    p.r2 = _mm512_mul_ps(p.r, p.r);
    p.r4 = _mm512_mul_ps(p.r2, p.r2);
    p.r8 = _mm512_mul_ps(p.r4, p.r4);
    p.r16 = _mm512_mul_ps(p.r8, p.r8);
    return p;
}

/* Rung c (0..31 per lane) of each near lane's ladder. */
static inline __m512 cq_q4tp_chain_avx512(const cq_q4tp_pow16 *p, __m512i c) {
    __m512 v = p->a;
    v = _mm512_mask_mul_ps(v, _mm512_test_epi32_mask(c, _mm512_set1_epi32(1)), v, p->r);
    v = _mm512_mask_mul_ps(v, _mm512_test_epi32_mask(c, _mm512_set1_epi32(2)), v, p->r2);
    v = _mm512_mask_mul_ps(v, _mm512_test_epi32_mask(c, _mm512_set1_epi32(4)), v, p->r4);
    v = _mm512_mask_mul_ps(v, _mm512_test_epi32_mask(c, _mm512_set1_epi32(8)), v, p->r8);
    return _mm512_mask_mul_ps(v, _mm512_test_epi32_mask(c, _mm512_set1_epi32(16)), v, p->r16);
}

/* The direct form's rungs 0..15 of a row whose lo and step fill *lo and *st (the result), and
 * qq = (rung 8 / rung 0)^2, its factor of rungs 16..31, in every lane of *qq. */
static inline __m512 cq_q4tp_direct_avx512(__m512 lo, __m512 st, __m512 *qq) {
    const __m512 i16 = _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    __m512 v = cq_exp2_ps_avx512(_mm512_fmadd_ps(i16, st, lo));
    __m512 q = _mm512_div_ps(_mm512_permutexvar_ps(_mm512_set1_epi32(8), v),
                             _mm512_permutexvar_ps(_mm512_setzero_si512(), v));
    *qq = _mm512_mul_ps(q, q);
    return v;
}

/* Row r's lo and step (the file's f16 as floats) in every lane of *lo and *st. */
static inline void cq_q4tp_row_avx512(const cmf_qmat *m, uint64_t r, __m512 *lo, __m512 *st) {
    uint32_t params;
    __builtin_memcpy(&params, m->scales + 4 * r, 4); /* f16 lo, f16 step */
    __m512 ls = _mm512_cvtph_ps(_mm256_castsi128_si256(_mm_cvtsi32_si128((int)params)));
    *lo = _mm512_permutexvar_ps(_mm512_setzero_si512(), ls);
    *st = _mm512_permutexvar_ps(_mm512_set1_epi32(1), ls);
}

/* One row's ladder, rungs 0..15 in *l0 and 16..31 in *l1: a near row's from its powers (each
 * in every lane) by cq_q4tp_chain_avx512 with c = the lane, so the copy's bits; a far row's
 * from its lo and step (in every lane) in the direct form. */
static inline void cq_q4tp_ladder_near_avx512(const cq_q4tp_pow16 *p, __m512 *l0, __m512 *l1) {
    *l0 = cq_q4tp_chain_avx512(
        p, _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15));
    *l1 = _mm512_mul_ps(*l0, p->r16);
}

static inline void cq_q4tp_ladder_far_avx512(__m512 lo, __m512 st, __m512 *l0, __m512 *l1) {
    __m512 qq;
    *l0 = cq_q4tp_direct_avx512(lo, st, &qq);
    *l1 = _mm512_mul_ps(*l0, qq);
}

/* Row r's ladder: rungs 0..15 in *l0, 16..31 in *l1. */
static inline void cq_q4tp_ladder_avx512(const cmf_qmat *m, uint64_t r, __m512 *l0, __m512 *l1) {
    __m512 lo, st;
    cq_q4tp_row_avx512(m, r, &lo, &st);
    if (cq_q4tp_near_avx512(lo, st) & 1) {
        const cq_q4tp_pow16 p = cq_q4tp_pow_avx512(lo, st);
        cq_q4tp_ladder_near_avx512(&p, l0, l1);
    } else {
        cq_q4tp_ladder_far_avx512(lo, st, l0, l1);
    }
}

/* Row r's ladder numbers for the decode copy (lanes_avx512.c): lo, step and the direct form's
 * qq, from which a pass computes either form per lane. */
static inline void cq_q4tp_params_avx512(const cmf_qmat *m, uint64_t r, float p[3]) {
    __m512 lo, st, qq;
    cq_q4tp_row_avx512(m, r, &lo, &st);
    (void)cq_q4tp_direct_avx512(lo, st, &qq);
    p[0] = _mm512_cvtss_f32(lo);
    p[1] = _mm512_cvtss_f32(st);
    p[2] = _mm512_cvtss_f32(qq);
}

#endif
