/* hsum16_avx512.h - horizontal sums and maxima of 16 vectors at once, and on them the int8
 * activation scales of 16 groups, for the one-token kernels (kernel_i8dec_avx512.c,
 * kernel_i8_avx512.c). AVX-512 files only. */
#ifndef CORTIQ_QUANT_HSUM16_AVX512_H
#define CORTIQ_QUANT_HSUM16_AVX512_H

#include <immintrin.h>

/* Lane k of the result = OP over the 16 lanes of v[k] (v is clobbered). Four rounds of
 * "concatenate two vectors, combine adjacent lanes" (2 vpermt2ps + 1 OP per pair): ~3
 * operations per vector instead of a ~9-deep horizontal reduction of each. */
#define CQ_FOLD16_AVX512(v, OP)                                                                    \
    do {                                                                                           \
        const __m512i ie_ =                                                                        \
            _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);          \
        const __m512i io_ = _mm512_add_epi32(ie_, _mm512_set1_epi32(1));                           \
        for (int n_ = 16; n_ > 1; n_ /= 2)                                                         \
            for (int k_ = 0; k_ < n_ / 2; k_++)                                                    \
                (v)[k_] = OP(_mm512_permutex2var_ps((v)[2 * k_], ie_, (v)[2 * k_ + 1]),            \
                             _mm512_permutex2var_ps((v)[2 * k_], io_, (v)[2 * k_ + 1]));           \
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
