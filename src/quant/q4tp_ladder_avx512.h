/* q4tp_ladder_avx512.h - a q4tp row's 32-rung scale ladder 2^(lo + i*step) in two vectors
 * (spec §3.2 q4tp), inline for the kernels that build one per row: a q4tp row of 576-896
 * columns carries only 18-28 groups, so a ladder per row is a fifth of a decode matvec's work
 * when it costs two exp2 polynomials and a call. Rungs 0..15 come from one polynomial; rungs
 * 16..31 are those times 2^(16 step) = (rung 8 / rung 0)^2. Relative error against exp2f: the
 * polynomial's ~2 ulp, a few ulp more for the upper half (tests/quant/test_kernel.c and
 * test_kernel_i8dec.c hold every tier to the scalar decode). For files compiled with the
 * AVX-512 flags (cmake/CortiqModule.cmake). */
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

/* Row r's rungs 0..15 (the result), its lo and step in every lane of *lo and *st, and qq =
 * (rung 8 / rung 0)^2, the factor of rungs 16..31, in every lane of *qq. */
static inline __m512 cq_q4tp_rungs_avx512(const cmf_qmat *m, uint64_t r, __m512 *lo, __m512 *st,
                                          __m512 *qq) {
    uint32_t params;
    __builtin_memcpy(&params, m->scales + 4 * r, 4); /* f16 lo, f16 step */
    __m512 ls = _mm512_cvtph_ps(_mm256_castsi128_si256(_mm_cvtsi32_si128((int)params)));
    *lo = _mm512_permutexvar_ps(_mm512_setzero_si512(), ls);
    *st = _mm512_permutexvar_ps(_mm512_set1_epi32(1), ls);
    const __m512 i16 = _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    __m512 v = cq_exp2_ps_avx512(_mm512_fmadd_ps(i16, *st, *lo));
    __m512 q = _mm512_div_ps(_mm512_permutexvar_ps(_mm512_set1_epi32(8), v),
                             _mm512_permutexvar_ps(_mm512_setzero_si512(), v));
    *qq = _mm512_mul_ps(q, q);
    return v;
}

/* Row r's ladder: rungs 0..15 in *l0, 16..31 in *l1. */
static inline void cq_q4tp_ladder_avx512(const cmf_qmat *m, uint64_t r, __m512 *l0, __m512 *l1) {
    __m512 lo, st, qq;
    *l0 = cq_q4tp_rungs_avx512(m, r, &lo, &st, &qq);
    *l1 = _mm512_mul_ps(*l0, qq);
}

/* Row r's ladder as three numbers: lo, step (the file's f16 as floats) and qq. Rung c is
 * 2^(lo + (c & 15) step) [cq_exp2_ps_avx512 of that fma], times qq when c >= 16: the values
 * cq_q4tp_ladder_avx512 gives, by the same operations (the AVX-512 decode copy stores these
 * three and computes its rungs per lane: lanes_avx512.c). */
static inline void cq_q4tp_params_avx512(const cmf_qmat *m, uint64_t r, float p[3]) {
    __m512 lo, st, qq;
    (void)cq_q4tp_rungs_avx512(m, r, &lo, &st, &qq);
    p[0] = _mm512_cvtss_f32(lo);
    p[1] = _mm512_cvtss_f32(st);
    p[2] = _mm512_cvtss_f32(qq);
}

#endif
