/* q4tp_ladder_avx2.h - the AVX2 tier's q4tp ladder 2^(lo + c*step) (spec §3.2 q4tp), inline for
 * the kernels that compute rungs: the ladders of kernel_avx2.c (one row, or 8 in the lanes) and
 * the decode copy's per-group rungs (lanes_avx2.c), which apply the same operations per lane
 * and so give the same bits. For files compiled with
 * the AVX2 flags (cmake/CortiqModule.cmake). */
#ifndef CORTIQ_QUANT_Q4TP_LADDER_AVX2_H
#define CORTIQ_QUANT_Q4TP_LADDER_AVX2_H

#include <immintrin.h>
#include <stdbool.h>

#include "quant/q4tp_rung.h"

/* 2^f for f in [-0.5, 0.5]: its Taylor series to degree 7. */
static inline __m256 cq_avx2_exp2_frac(__m256 f) {
    return CQ_EXP2_FRAC(_mm256_fmadd_ps, _mm256_set1_ps, f);
}

/* 2^n as a float for integral n in [-126, 127]. */
static inline __m256 cq_avx2_pow2_int(__m256 n) {
    return _mm256_castsi256_ps(
        _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23));
}

/* 2^x for the q4tp ladder: 2^f (f = x - n in [-0.5, 0.5]) times 2^n built as two
 * exponent-field halves so that overflow gives inf and deep underflow gives 0. */
static inline __m256 cq_avx2_exp2_ps(__m256 x) {
    x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-252.0f)), _mm256_set1_ps(254.0f));
    __m256 n = _mm256_round_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 p = cq_avx2_exp2_frac(_mm256_sub_ps(x, n));
    __m256 n1 = _mm256_floor_ps(_mm256_mul_ps(n, _mm256_set1_ps(0.5f))), n2 = _mm256_sub_ps(n, n1);
    return _mm256_mul_ps(_mm256_mul_ps(p, cq_avx2_pow2_int(n1)), cq_avx2_pow2_int(n2));
}

/* cq_avx2_exp2_ps for |x| <= 120, the same bits: 2^f times 2^n in one step (p * 2^n1 * 2^n2
 * and p * 2^n are both exact while every product is a normal float). */
static inline __m256 cq_avx2_exp2_ps_near(__m256 x) {
    __m256 n = _mm256_round_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    return _mm256_mul_ps(cq_avx2_exp2_frac(_mm256_sub_ps(x, n)), cq_avx2_pow2_int(n));
}

/* The ladder of a lane's row as products, the other implementation's way (docs/FORMAT.md, "q4tp
 * ladder"): a = 2^lo and r = 2^step (two polynomials), rung c = a times powers of r. The
 * reference multiplies by r once a rung; here rungs 0..7 are e[0] = a, e[1] = a r, e[2] = a r^2,
 * e[3] = e[1] r^2, e[4 + j] = e[j] r^4, and f[k] = r^(8 (k + 1)) (r^8, r^16 = r^8 r^8,
 * r^24 = r^16 r^8): 2 polynomials and 12 products for 8 rows instead of 11 polynomials. It
 * serves a lane when every value on the way, 2^(lo + c step) and 2^(k step) for c <= 31 and
 * k <= 24, is a normal float: |lo| + 31 |step| <= 120 (every real row; q4tp_chain_lanes). */
static inline __m256 cq_avx2_q4tp_chain_lanes(__m256 lo, __m256 st) {
    const __m256 abs = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
    const __m256 span =
        _mm256_fmadd_ps(_mm256_set1_ps(31.0f), _mm256_and_ps(st, abs), _mm256_and_ps(lo, abs));
    return _mm256_cmp_ps(span, _mm256_set1_ps(120.0f), _CMP_LE_OQ); /* NaN: not near */
}

static inline __attribute__((always_inline)) void
cq_avx2_q4tp_parts_chain(__m256 lo, __m256 st, __m256 e[8], __m256 f[3]) {
    const __m256 r = cq_avx2_exp2_ps_near(st), r2 = _mm256_mul_ps(r, r), r4 = _mm256_mul_ps(r2, r2);
    e[0] = cq_avx2_exp2_ps_near(lo);
    e[1] = _mm256_mul_ps(e[0], r);
    e[2] = _mm256_mul_ps(e[0], r2);
    e[3] = _mm256_mul_ps(e[1], r2);
    for (int j = 0; j < 4; j++)
        e[4 + j] = _mm256_mul_ps(e[j], r4);
    f[0] = _mm256_mul_ps(r4, r4);
    f[1] = _mm256_mul_ps(f[0], f[0]);
    f[2] = _mm256_mul_ps(f[1], f[0]);
}

/* A lane outside that range: each part its own polynomial, e[j] = 2^(lo + j step) and
 * f[k] = 2^(8 (k + 1) step), in two exponent steps so that overflow gives inf and deep
 * underflow 0 (rung 8 (k + 1) + j is still e[j] f[k]). */
static inline __attribute__((always_inline)) void cq_avx2_q4tp_parts_far(__m256 lo, __m256 st,
                                                                         __m256 e[8], __m256 f[3]) {
    for (int k = 0; k < 3; k++)
        f[k] = cq_avx2_exp2_ps(_mm256_mul_ps(_mm256_set1_ps((float)(8 * (k + 1))), st));
    for (int j = 0; j < 8; j++)
        e[j] = cq_avx2_exp2_ps(_mm256_fmadd_ps(_mm256_set1_ps((float)j), st, lo));
}

/* The parts of the ladders of the rows in the lanes (lo and step per lane): e[j] = rung j
 * (j < 8) and f[k], rung 8 (k + 1) + j being e[j] * f[k]; each lane by its own range. */
static inline __attribute__((always_inline)) void cq_avx2_q4tp_parts(__m256 lo, __m256 st,
                                                                     __m256 e[8], __m256 f[3]) {
    const __m256 near = cq_avx2_q4tp_chain_lanes(lo, st);
    const int mask = _mm256_movemask_ps(near);
    if (mask == 0xFF) {
        cq_avx2_q4tp_parts_chain(lo, st, e, f);
        return;
    }
    cq_avx2_q4tp_parts_far(lo, st, e, f);
    if (mask == 0) return;
    __m256 ce[8], cf[3];
    cq_avx2_q4tp_parts_chain(lo, st, ce, cf);
    for (int j = 0; j < 8; j++)
        e[j] = _mm256_blendv_ps(e[j], ce[j], near);
    for (int k = 0; k < 3; k++)
        f[k] = _mm256_blendv_ps(f[k], cf[k], near);
}

/* The whole ladders: lad[c][k] rung c of lane k's row, the bits of cq_avx2_q4tp_ladder. */
static inline void cq_avx2_q4tp_ladders_lanes(__m256 lo, __m256 st, float lad[32][8]) {
    __m256 e[8], f[3];
    cq_avx2_q4tp_parts(lo, st, e, f);
    for (int j = 0; j < 8; j++) {
        _mm256_storeu_ps(lad[j], e[j]);
        for (int k = 0; k < 3; k++)
            _mm256_storeu_ps(lad[8 * (k + 1) + j], _mm256_mul_ps(e[j], f[k]));
    }
}

/* Rung c of each lane's ladder (c 0..31 per lane, from its parts): a tree of blends on the
 * bits of c picks e[c & 7] and 1 or f[(c >> 3) - 1], whose product it is (e * 1 is e). */
static inline __m256 cq_avx2_q4tp_pick(__m256i c, const __m256 e[8], const __m256 f[3]) {
    const __m256 b0 = _mm256_castsi256_ps(_mm256_slli_epi32(c, 31)),
                 b1 = _mm256_castsi256_ps(_mm256_slli_epi32(c, 30)),
                 b2 = _mm256_castsi256_ps(_mm256_slli_epi32(c, 29)),
                 b3 = _mm256_castsi256_ps(_mm256_slli_epi32(c, 28)),
                 b4 = _mm256_castsi256_ps(_mm256_slli_epi32(c, 27));
    const __m256 e03 = _mm256_blendv_ps(_mm256_blendv_ps(e[0], e[1], b0),
                                        _mm256_blendv_ps(e[2], e[3], b0), b1),
                 e47 = _mm256_blendv_ps(_mm256_blendv_ps(e[4], e[5], b0),
                                        _mm256_blendv_ps(e[6], e[7], b0), b1),
                 fk = _mm256_blendv_ps(_mm256_blendv_ps(_mm256_set1_ps(1.0f), f[0], b3),
                                       _mm256_blendv_ps(f[1], f[2], b3), b4);
    return _mm256_mul_ps(_mm256_blendv_ps(e03, e47, b2), fk);
}

#endif
