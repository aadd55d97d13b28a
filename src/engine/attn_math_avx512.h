/* attn_math_avx512.h - the cache loads and the vectorized exp and tanh of the AVX-512 attention
 * kernels (attn_batch_avx512.c, attn_decode_avx512.c); include only from files built for AVX-512.
 */
#ifndef CORTIQ_ENGINE_ATTN_MATH_AVX512_H
#define CORTIQ_ENGINE_ATTN_MATH_AVX512_H

#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>

/* 16 cache values at element i of row p as floats (lanes outside mk read nothing, give 0) */
static inline __m512 ld_f32(const void *p, size_t i, __mmask16 mk) {
    return _mm512_maskz_loadu_ps(mk, (const float *)p + i);
}
static inline __m512 ld_f16(const void *p, size_t i, __mmask16 mk) {
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(mk, (const uint16_t *)p + i));
}
static inline __m512 ld_q8(const void *p, size_t i, __mmask16 mk) {
    return _mm512_cvtepi32_ps(
        _mm512_cvtepi8_epi32(_mm_maskz_loadu_epi8(mk, (const int8_t *)p + i)));
}
typedef __m512 (*ld_fn)(const void *, size_t, __mmask16);

/* exp with the bound stated in attn_batch.h (cq_attn_exp_avx512): x = n ln2 + r, |r| <= ln2/2, 2^n
 * from the exponent bits, e^r from its degree-7 Taylor polynomial. */
static inline __m512 exp16(__m512 x) {
    const __m512 lo = _mm512_set1_ps(-87.33654f), hi = _mm512_set1_ps(88.0f);
    __mmask16 nan = _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
    __mmask16 tiny = _mm512_cmp_ps_mask(x, lo, _CMP_LT_OQ);
    __m512 xc = _mm512_min_ps(_mm512_max_ps(x, lo), hi);
    __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(xc, _mm512_set1_ps(1.44269504088896341f)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), xc); /* ln2 in two parts */
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
    __m512 p = _mm512_set1_ps(1.0f / 5040);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 720));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    __m512i e =
        _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23);
    __m512 y = _mm512_mul_ps(p, _mm512_castsi512_ps(e));
    y = _mm512_mask_mov_ps(y, tiny, _mm512_setzero_ps());
    return _mm512_mask_mov_ps(y, nan, x);
}

/* tanh(y) = sign(y) (1 - 2 / (e^{2|y|} + 1)); absolute error a few 1e-8 */
static inline __m512 tanh16(__m512 y) {
    __m512 ay = _mm512_abs_ps(y);
    __m512 e = exp16(_mm512_min_ps(_mm512_add_ps(ay, ay), _mm512_set1_ps(88.0f)));
    __m512 t =
        _mm512_sub_ps(_mm512_set1_ps(1.0f),
                      _mm512_div_ps(_mm512_set1_ps(2.0f), _mm512_add_ps(e, _mm512_set1_ps(1.0f))));
    __m512i sign = _mm512_and_si512(_mm512_castps_si512(y), _mm512_set1_epi32((int)0x80000000u));
    return _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(t), sign));
}

#endif
