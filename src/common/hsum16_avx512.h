/* hsum16_avx512.h - horizontal sums and maxima of 16 vectors at once, and on them the int8
 * activation scales of 16 groups, for the one-token kernels (quant/kernel_i8dec_avx512.c,
 * quant/kernel_i8_avx512.c) and the decode attention (engine/attn_decode_avx512.c). AVX-512
 * files only. */
#ifndef CORTIQ_COMMON_HSUM16_AVX512_H
#define CORTIQ_COMMON_HSUM16_AVX512_H

#include <immintrin.h>

/* Lane k of the result = OP over the 16 lanes of v[k] (v is clobbered), in four rounds that
 * each combine pairs of vectors with two in-lane or 128-bit shuffles and one OP: 32-bit
 * unpacks (each 128-bit lane of pair k then holds partials of v[2k] and v[2k + 1]), 64-bit
 * unpacks (lane L of vector i: the lane-L results of v[4i .. 4i + 3]), then two rounds of
 * vshuff32x4 across the 128-bit lanes, which leaves v[k]'s result in lane k. ~3 operations
 * per vector instead of a ~9-deep reduction of each. The same count as two vpermt2ps per pair
 * (the earlier form), but cheaper shuffles: -2 to -5 % per decode attention layer on Zen 5. */
#define CQ_FOLD16_AVX512(v, OP)                                                                    \
    do {                                                                                           \
        for (int k_ = 0; k_ < 8; k_++)                                                             \
            (v)[k_] = OP(_mm512_unpacklo_ps((v)[2 * k_], (v)[2 * k_ + 1]),                         \
                         _mm512_unpackhi_ps((v)[2 * k_], (v)[2 * k_ + 1]));                        \
        for (int k_ = 0; k_ < 4; k_++)                                                             \
            (v)[k_] = OP(_mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd((v)[2 * k_]),        \
                                                             _mm512_castps_pd((v)[2 * k_ + 1]))),  \
                         _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd((v)[2 * k_]),        \
                                                             _mm512_castps_pd((v)[2 * k_ + 1])))); \
        for (int k_ = 0; k_ < 2; k_++)                                                             \
            (v)[k_] = OP(_mm512_shuffle_f32x4((v)[2 * k_], (v)[2 * k_ + 1], 0x44),                 \
                         _mm512_shuffle_f32x4((v)[2 * k_], (v)[2 * k_ + 1], 0xEE));                \
        (v)[0] = OP(_mm512_shuffle_f32x4((v)[0], (v)[1], 0x88),                                    \
                    _mm512_shuffle_f32x4((v)[0], (v)[1], 0xDD));                                   \
    } while (0)

/* Lane k of the result = the sum of the 16 lanes of v[k]. */
static inline __attribute__((always_inline)) __m512 cq_hsum16_avx512(const __m512 *v) {
    __m512 w[16];
    for (int k = 0; k < 16; k++)
        w[k] = v[k];
    CQ_FOLD16_AVX512(w, _mm512_add_ps);
    return w[0];
}

/* Lane k of the result = the largest of the 16 lanes of v[k] (v is clobbered). */
static inline __attribute__((always_inline)) __m512 cq_hmax16_avx512(__m512 *v) {
    CQ_FOLD16_AVX512(v, _mm512_max_ps);
    return v[0];
}

/* The int8 activation scales of 16 groups of 32 floats (group k at x + 32 k): lane k of the
 * result = the group's absolute maximum, inv[k] = 127 / that (0 for an all-zero group). Their
 * maxima come out of one fold, so each scale is one lane of a vector division. */
static inline __attribute__((always_inline)) __m512 cq_absmax16_avx512(const float *x, float *inv) {
    __m512 mx[16];
    for (int k = 0; k < 16; k++)
        mx[k] = _mm512_max_ps(_mm512_abs_ps(_mm512_loadu_ps(x + 32 * k)),
                              _mm512_abs_ps(_mm512_loadu_ps(x + 32 * k + 16)));
    __m512 amax = cq_hmax16_avx512(mx);
    __mmask16 nz = _mm512_cmp_ps_mask(amax, _mm512_setzero_ps(), _CMP_GT_OQ);
    _mm512_storeu_ps(inv, _mm512_maskz_div_ps(nz, _mm512_set1_ps(127.0f), amax));
    return amax;
}

#endif
