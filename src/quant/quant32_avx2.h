/* quant32_avx2.h - one group of 32 activations to int8 the way every int8-activation path of
 * the AVX2 tier does it (kernel_i8_avx2.c, kernel_i8dec_avx2.c): dx = absmax / 127, codes
 * rounded to nearest. AVX2 files only. */
#ifndef CORTIQ_QUANT_QUANT32_AVX2_H
#define CORTIQ_QUANT_QUANT32_AVX2_H

#include <immintrin.h>

static inline float cq_avx2_hmax8(__m256 v) {
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    s = _mm_max_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* The 32 codes of x[0..32) in natural order, *dx their scale: the two saturating packs
 * interleave 4-element pieces, one vpermd puts them back in order. */
static inline __m256i cq_avx2_quant32(const float *x, float *dx) {
    const __m256 sign = _mm256_set1_ps(-0.0f);
    __m256 mx = _mm256_setzero_ps();
    for (int i = 0; i < 32; i += 8)
        mx = _mm256_max_ps(mx, _mm256_andnot_ps(sign, _mm256_loadu_ps(x + i)));
    float amax = cq_avx2_hmax8(mx);
    __m256 vi = _mm256_set1_ps(amax > 0 ? 127.0f / amax : 0.0f);
    __m256i c[4];
    for (int i = 0; i < 4; i++)
        c[i] = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 8 * i), vi));
    /* dwords: lane 0 = elements 0-3, 8-11, 16-19, 24-27; lane 1 = 4-7, 12-15, 20-23, 28-31 */
    __m256i b = _mm256_packs_epi16(_mm256_packs_epi32(c[0], c[1]), _mm256_packs_epi32(c[2], c[3]));
    *dx = amax / 127.0f;
    return _mm256_permutevar8x32_epi32(b, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

#endif
