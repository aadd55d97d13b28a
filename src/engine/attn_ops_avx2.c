/* attn_ops_avx2.c - attention value loops with AVX2 + FMA (8 lanes). f16 rows widen with F16C,
 * int8 rows with vpmovsxbd; one loop body per cache type, instantiated from the macro below. */
#include <immintrin.h>

#include "common/f16.h"
#include "engine/attn_ops.h"

/* eight cache values at p as floats, and one */
static inline __m256 ld8_f32(const float *p) {
    return _mm256_loadu_ps(p);
}
static inline __m256 ld8_f16(const uint16_t *p) {
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
}
static inline __m256 ld8_q8(const int8_t *p) {
    return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)p)));
}
static inline float ld1_f32(const float *p) {
    return *p;
}
static inline float ld1_f16(const uint16_t *p) {
    return f16_to_f32(*p);
}
static inline float ld1_q8(const int8_t *p) {
    return (float)*p;
}

/* out[i] += sum_j WEIGHT(j) * V[j*ld + i]; WEIGHT may read w, j and the extra arguments */
#define DEF_AXPYS(NAME, T, LD8, LD1, WEIGHT, ...)                                                  \
    static void NAME(float *out, const float *w, const T *V, size_t ld, __VA_ARGS__ uint32_t n,    \
                     uint32_t hd) {                                                                \
        uint32_t i = 0;                                                                            \
        for (; i + 32 <= hd; i += 32) { /* 32 outputs held in registers across all n values */     \
            __m256 o0 = _mm256_loadu_ps(out + i), o1 = _mm256_loadu_ps(out + i + 8);               \
            __m256 o2 = _mm256_loadu_ps(out + i + 16), o3 = _mm256_loadu_ps(out + i + 24);         \
            for (uint32_t j = 0; j < n; j++) {                                                     \
                const T *v = V + (size_t)j * ld + i;                                               \
                __m256 a = _mm256_set1_ps(WEIGHT);                                                 \
                o0 = _mm256_fmadd_ps(a, LD8(v), o0);                                               \
                o1 = _mm256_fmadd_ps(a, LD8(v + 8), o1);                                           \
                o2 = _mm256_fmadd_ps(a, LD8(v + 16), o2);                                          \
                o3 = _mm256_fmadd_ps(a, LD8(v + 24), o3);                                          \
            }                                                                                      \
            _mm256_storeu_ps(out + i, o0), _mm256_storeu_ps(out + i + 8, o1);                      \
            _mm256_storeu_ps(out + i + 16, o2), _mm256_storeu_ps(out + i + 24, o3);                \
        }                                                                                          \
        for (; i + 8 <= hd; i += 8) {                                                              \
            __m256 o = _mm256_loadu_ps(out + i);                                                   \
            for (uint32_t j = 0; j < n; j++)                                                       \
                o = _mm256_fmadd_ps(_mm256_set1_ps(WEIGHT), LD8(V + (size_t)j * ld + i), o);       \
            _mm256_storeu_ps(out + i, o);                                                          \
        }                                                                                          \
        for (; i < hd; i++) {                                                                      \
            float o = out[i];                                                                      \
            for (uint32_t j = 0; j < n; j++)                                                       \
                o += (WEIGHT)*LD1(V + (size_t)j * ld + i);                                         \
            out[i] = o;                                                                            \
        }                                                                                          \
    }

DEF_AXPYS(axpys, float, ld8_f32, ld1_f32, w[j], )
DEF_AXPYS(axpys_f16, uint16_t, ld8_f16, ld1_f16, w[j], )
DEF_AXPYS(axpys_q8, int8_t, ld8_q8, ld1_q8, w[j] * vs[(size_t)j * lds], const float *vs,
          size_t lds, )

static void to_f16(const float *x, uint16_t *out, size_t n) {
    const __m256 hi = _mm256_set1_ps(65504.0f), lo = _mm256_set1_ps(-65504.0f);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 x0 = _mm256_loadu_ps(x + i);
        __m256 v = _mm256_max_ps(_mm256_min_ps(x0, hi), lo);
        v = _mm256_blendv_ps(v, x0, _mm256_cmp_ps(x0, x0, _CMP_UNORD_Q)); /* NaN stays NaN */
        _mm_storeu_si128((__m128i *)(out + i),
                         _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    }
    if (i < n) cq_attn_ops_scalar.to_f16(x + i, out + i, n - i);
}

const cq_attn_ops cq_attn_ops_avx2 = {axpys, axpys_f16, axpys_q8, to_f16};
