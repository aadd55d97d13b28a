/* attn_math_avx2.h - the cache loads and the vectorized exp and tanh of the AVX2 attention kernels
 * (attn_batch_avx2.c, attn_decode_avx2.c); include only from files built for AVX2 + FMA. */
#ifndef CORTIQ_ENGINE_ATTN_MATH_AVX2_H
#define CORTIQ_ENGINE_ATTN_MATH_AVX2_H

#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>

/* 8 cache values at element i of row p as floats */
static inline __m256 ld_f32(const void *p, size_t i) {
    return _mm256_loadu_ps((const float *)p + i);
}
static inline __m256 ld_f16(const void *p, size_t i) {
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)p + i)));
}
static inline __m256 ld_q8(const void *p, size_t i) {
    return _mm256_cvtepi32_ps(
        _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)((const int8_t *)p + i))));
}
typedef __m256 (*ld_fn)(const void *, size_t);

/* exp as exp16 in attn_math_avx512.h (bound in attn_batch.h) */
static inline __m256 exp8(__m256 x) {
    const __m256 lo = _mm256_set1_ps(-87.33654f), hi = _mm256_set1_ps(88.0f);
    __m256 nan = _mm256_cmp_ps(x, x, _CMP_UNORD_Q), tiny = _mm256_cmp_ps(x, lo, _CMP_LT_OQ);
    __m256 xc = _mm256_min_ps(_mm256_max_ps(x, lo), hi);
    __m256 n = _mm256_round_ps(_mm256_mul_ps(xc, _mm256_set1_ps(1.44269504088896341f)),
                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), xc); /* ln2 in two parts */
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 p = _mm256_set1_ps(1.0f / 5040);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 720));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    __m256i e =
        _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    __m256 y = _mm256_mul_ps(p, _mm256_castsi256_ps(e));
    y = _mm256_blendv_ps(y, _mm256_setzero_ps(), tiny);
    return _mm256_blendv_ps(y, x, nan);
}

/* tanh(y) = sign(y) (1 - 2 / (e^{2|y|} + 1)) */
static inline __m256 tanh8(__m256 y) {
    __m256 sign = _mm256_set1_ps(-0.0f);
    __m256 ay = _mm256_andnot_ps(sign, y);
    __m256 e = exp8(_mm256_min_ps(_mm256_add_ps(ay, ay), _mm256_set1_ps(88.0f)));
    __m256 t =
        _mm256_sub_ps(_mm256_set1_ps(1.0f),
                      _mm256_div_ps(_mm256_set1_ps(2.0f), _mm256_add_ps(e, _mm256_set1_ps(1.0f))));
    return _mm256_or_ps(t, _mm256_and_ps(sign, y));
}

#endif
