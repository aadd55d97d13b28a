/* attn_ops_avx512.c - attention loops with AVX-512 (16 lanes, masked tails; four keys per
 * pass so each query vector load is reused). f16 rows widen with vcvtph2ps, int8 rows with
 * vpmovsxbd; one loop body per cache type, instantiated from the macros below. */
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

/* dots over raw rows of type T (no scale) */
#define DEF_DOTS(NAME, T, LD)                                                                      \
    static float NAME##_1(const float *q, const T *k, uint32_t hd) {                               \
        __m512 a = _mm512_setzero_ps();                                                            \
        for (uint32_t i = 0; i < hd; i += 16) {                                                    \
            __mmask16 mk = tail_mask(hd - i);                                                      \
            a = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(mk, q + i), LD(k + i, mk), a);               \
        }                                                                                          \
        return _mm512_reduce_add_ps(a);                                                            \
    }                                                                                              \
    static void NAME(const float *q, const T *K, size_t ld, uint32_t n, uint32_t hd, float *out) { \
        uint32_t j = 0;                                                                            \
        if (hd % 16 == 0)                                                                          \
            for (; j + 4 <= n; j += 4) {                                                           \
                const T *k0 = K + (size_t)j * ld, *k1 = k0 + ld, *k2 = k1 + ld, *k3 = k2 + ld;     \
                __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;                        \
                for (uint32_t i = 0; i < hd; i += 16) {                                            \
                    __m512 x = _mm512_loadu_ps(q + i);                                             \
                    a0 = _mm512_fmadd_ps(x, LD(k0 + i, ALL), a0);                                  \
                    a1 = _mm512_fmadd_ps(x, LD(k1 + i, ALL), a1);                                  \
                    a2 = _mm512_fmadd_ps(x, LD(k2 + i, ALL), a2);                                  \
                    a3 = _mm512_fmadd_ps(x, LD(k3 + i, ALL), a3);                                  \
                }                                                                                  \
                out[j] = _mm512_reduce_add_ps(a0), out[j + 1] = _mm512_reduce_add_ps(a1);          \
                out[j + 2] = _mm512_reduce_add_ps(a2), out[j + 3] = _mm512_reduce_add_ps(a3);      \
            }                                                                                      \
        for (; j < n; j++)                                                                         \
            out[j] = NAME##_1(q, K + (size_t)j * ld, hd);                                          \
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

DEF_DOTS(dots, float, ld16_f32)
DEF_DOTS(dots_f16, uint16_t, ld16_f16)
DEF_DOTS(dots_i8, int8_t, ld16_q8)
DEF_AXPYS(axpys, float, ld16_f32, w[j], )
DEF_AXPYS(axpys_f16, uint16_t, ld16_f16, w[j], )
DEF_AXPYS(axpys_q8, int8_t, ld16_q8, w[j] * vs[(size_t)j * lds], const float *vs, size_t lds, )

static void dots_q8(const float *q, const int8_t *K, size_t ld, const float *ks, size_t lds,
                    uint32_t n, uint32_t hd, float *out) {
    dots_i8(q, K, ld, n, hd, out);
    for (uint32_t j = 0; j < n; j++)
        out[j] *= ks[(size_t)j * lds];
}

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

const cq_attn_ops cq_attn_ops_avx512 = {dots,    axpys,    dots_f16, axpys_f16,
                                        dots_q8, axpys_q8, to_f16};
