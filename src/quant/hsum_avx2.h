/* hsum_avx2.h - the horizontal sums of 8 vectors at once, for the one-token kernels of the AVX2
 * tier that reduce rows 8 at a time (kernel_avx2.c, kernel_i8_avx2.c, and the same rows for AMD's
 * AVX-512 cores, kernel_q8dec_amd_avx512.c). AVX2 or AVX-512 files only. */
#ifndef CORTIQ_QUANT_HSUM_AVX2_H
#define CORTIQ_QUANT_HSUM_AVX2_H

#include <immintrin.h>

/* Lane k of the result = the sum of the 8 lanes of v[k]. Two rounds of pairwise horizontal
 * adds leave each row's two 128-bit halves' sums in lane k of the low and high halves; one
 * cross-half add finishes: 9 operations for 8 rows instead of ~5 dependent ones per row. */
static inline __attribute__((always_inline)) __m256 cq_hsum8x8_avx2(const __m256 *v) {
    __m256 t0 = _mm256_hadd_ps(v[0], v[1]), t1 = _mm256_hadd_ps(v[2], v[3]);
    __m256 t2 = _mm256_hadd_ps(v[4], v[5]), t3 = _mm256_hadd_ps(v[6], v[7]);
    __m256 u0 = _mm256_hadd_ps(t0, t1), u1 = _mm256_hadd_ps(t2, t3); /* rows 0-3, rows 4-7 */
    return _mm256_add_ps(_mm256_permute2f128_ps(u0, u1, 0x20),
                         _mm256_permute2f128_ps(u0, u1, 0x31));
}

/* The sums of n <= 8 rows' vectors v[0 .. n) into y[0 .. n) as the AVX2 one-token kernels reduce
 * them: 8 rows together, fewer one by one with the other lanes zero, so that a row gets the same
 * bits whichever block a row range puts it in. */
static inline __attribute__((always_inline)) void cq_rows_store_avx2(const __m256 *v, unsigned n,
                                                                     float *y) {
    if (n == 8) {
        _mm256_storeu_ps(y, cq_hsum8x8_avx2(v));
        return;
    }
    __m256 w[8];
    for (int k = 1; k < 8; k++)
        w[k] = _mm256_setzero_ps();
    for (unsigned k = 0; k < n; k++) {
        w[0] = v[k];
        y[k] = _mm256_cvtss_f32(cq_hsum8x8_avx2(w));
    }
}

#endif
