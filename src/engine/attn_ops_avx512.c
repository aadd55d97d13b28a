/* attn_ops_avx512.c - attention value loops with AVX-512 (16 lanes, masked tails). f16 rows
 * widen with vcvtph2ps, int8 rows with vpmovsxbd; one loop body per cache type, instantiated
 * from the macro below. */
#include <immintrin.h>

#include "engine/attn_ops.h"

/* sixteen cache values at p as floats; the masked form reads only the lanes in mk */
static inline __m512 ld16_f32(const float *p, __mmask16 mk) {
    return _mm512_maskz_loadu_ps(mk, p);
}
static inline __m512 ld16_f16(const uint16_t *p, __mmask16 mk) {
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(mk, p));
}
static inline __m512 ld16_q8(const int8_t *p, __mmask16 mk) {
    return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_maskz_loadu_epi8(mk, p)));
}

#define ALL ((__mmask16)0xFFFF)
static inline __mmask16 tail_mask(uint32_t left) {
    return left >= 16 ? ALL : (__mmask16)((1u << left) - 1);
}

/* out[i] += sum_j WEIGHT(j) * V[j*ld + i]; WEIGHT may read w, j and the extra arguments */
#define DEF_AXPYS(NAME, T, LD, WEIGHT, ...)                                                        \
    static void NAME(float *out, const float *w, const T *V, size_t ld, __VA_ARGS__ uint32_t n,    \
                     uint32_t hd) {                                                                \
        uint32_t i = 0;                                                                            \
        for (; i + 64 <= hd; i += 64) { /* 64 outputs held in registers across all n values */     \
            __m512 o0 = _mm512_loadu_ps(out + i), o1 = _mm512_loadu_ps(out + i + 16);              \
            __m512 o2 = _mm512_loadu_ps(out + i + 32), o3 = _mm512_loadu_ps(out + i + 48);         \
            for (uint32_t j = 0; j < n; j++) {                                                     \
                const T *v = V + (size_t)j * ld + i;                                               \
                __m512 a = _mm512_set1_ps(WEIGHT);                                                 \
                o0 = _mm512_fmadd_ps(a, LD(v, ALL), o0);                                           \
                o1 = _mm512_fmadd_ps(a, LD(v + 16, ALL), o1);                                      \
                o2 = _mm512_fmadd_ps(a, LD(v + 32, ALL), o2);                                      \
                o3 = _mm512_fmadd_ps(a, LD(v + 48, ALL), o3);                                      \
            }                                                                                      \
            _mm512_storeu_ps(out + i, o0), _mm512_storeu_ps(out + i + 16, o1);                     \
            _mm512_storeu_ps(out + i + 32, o2), _mm512_storeu_ps(out + i + 48, o3);                \
        }                                                                                          \
        for (; i < hd; i += 16) {                                                                  \
            __mmask16 mk = tail_mask(hd - i);                                                      \
            __m512 o = _mm512_maskz_loadu_ps(mk, out + i);                                         \
            for (uint32_t j = 0; j < n; j++)                                                       \
                o = _mm512_fmadd_ps(_mm512_set1_ps(WEIGHT), LD(V + (size_t)j * ld + i, mk), o);    \
            _mm512_mask_storeu_ps(out + i, mk, o);                                                 \
        }                                                                                          \
    }

DEF_AXPYS(axpys, float, ld16_f32, w[j], )
DEF_AXPYS(axpys_f16, uint16_t, ld16_f16, w[j], )
DEF_AXPYS(axpys_q8, int8_t, ld16_q8, w[j] * vs[(size_t)j * lds], const float *vs, size_t lds, )

static void to_f16(const float *x, uint16_t *out, size_t n) {
    const __m512 hi = _mm512_set1_ps(65504.0f), lo = _mm512_set1_ps(-65504.0f);
    for (size_t i = 0; i < n; i += 16) {
        __mmask16 k = n - i >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (n - i)) - 1);
        __m512 x0 = _mm512_maskz_loadu_ps(k, x + i);
        __m512 v = _mm512_max_ps(_mm512_min_ps(x0, hi), lo);
        v = _mm512_mask_mov_ps(v, _mm512_cmp_ps_mask(x0, x0, _CMP_UNORD_Q), x0); /* NaN stays NaN */
        _mm256_mask_storeu_epi16(out + i, k,
                                 _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    }
}

const cq_attn_ops cq_attn_ops_avx512 = {axpys, axpys_f16, axpys_q8, to_f16};
