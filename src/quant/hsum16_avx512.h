/* hsum16_avx512.h - the horizontal sums of 16 vectors at once, for the one-token kernels that
 * reduce rows 16 at a time (kernel_i8dec_avx512.c, kernel_i8_avx512.c). AVX-512 files only. */
#ifndef CORTIQ_QUANT_HSUM16_AVX512_H
#define CORTIQ_QUANT_HSUM16_AVX512_H

#include <immintrin.h>

/* Lane k of the result = the sum of the 16 lanes of v[k]. Four rounds of "concatenate two
 * vectors, add adjacent lanes" (2 vpermt2ps + 1 add per pair): ~3 operations per row instead
 * of a ~9-deep horizontal reduction at the end of every row. */
static inline __attribute__((always_inline)) __m512 cq_hsum16_avx512(const __m512 *v) {
    const __m512i ie = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const __m512i io = _mm512_add_epi32(ie, _mm512_set1_epi32(1));
    __m512 w[8];
    for (int k = 0; k < 8; k++)
        w[k] = _mm512_add_ps(_mm512_permutex2var_ps(v[2 * k], ie, v[2 * k + 1]),
                             _mm512_permutex2var_ps(v[2 * k], io, v[2 * k + 1]));
    for (int n = 8; n > 1; n /= 2)
        for (int k = 0; k < n / 2; k++)
            w[k] = _mm512_add_ps(_mm512_permutex2var_ps(w[2 * k], ie, w[2 * k + 1]),
                                 _mm512_permutex2var_ps(w[2 * k], io, w[2 * k + 1]));
    return w[0];
}

#endif
