/* attn_ops_avx2.c - attention loops with AVX2 + FMA (8 lanes; four keys per pass so each
 * query vector load is reused). */
#include <immintrin.h>

#include "engine/attn_ops.h"

static inline float hsum8(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

static float dot1(const float *q, const float *k, uint32_t hd) {
    __m256 a = _mm256_setzero_ps();
    uint32_t i = 0;
    for (; i + 8 <= hd; i += 8) a = _mm256_fmadd_ps(_mm256_loadu_ps(q + i), _mm256_loadu_ps(k + i), a);
    float d = hsum8(a);
    for (; i < hd; i++) d += q[i] * k[i];
    return d;
}

static void dots(const float *q, const float *K, size_t ld, uint32_t n, uint32_t hd, float *out) {
    uint32_t j = 0;
    if (hd % 8 == 0)
        for (; j + 4 <= n; j += 4) {
            const float *k0 = K + (size_t)j * ld, *k1 = k0 + ld, *k2 = k1 + ld, *k3 = k2 + ld;
            __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
            for (uint32_t i = 0; i < hd; i += 8) {
                __m256 x = _mm256_loadu_ps(q + i);
                a0 = _mm256_fmadd_ps(x, _mm256_loadu_ps(k0 + i), a0);
                a1 = _mm256_fmadd_ps(x, _mm256_loadu_ps(k1 + i), a1);
                a2 = _mm256_fmadd_ps(x, _mm256_loadu_ps(k2 + i), a2);
                a3 = _mm256_fmadd_ps(x, _mm256_loadu_ps(k3 + i), a3);
            }
            out[j] = hsum8(a0), out[j + 1] = hsum8(a1), out[j + 2] = hsum8(a2), out[j + 3] = hsum8(a3);
        }
    for (; j < n; j++) out[j] = dot1(q, K + (size_t)j * ld, hd);
}

static void axpys(float *out, const float *w, const float *V, size_t ld, uint32_t n, uint32_t hd) {
    uint32_t i = 0;
    for (; i + 32 <= hd; i += 32) { /* 32 outputs held in registers across all n values */
        __m256 o0 = _mm256_loadu_ps(out + i), o1 = _mm256_loadu_ps(out + i + 8);
        __m256 o2 = _mm256_loadu_ps(out + i + 16), o3 = _mm256_loadu_ps(out + i + 24);
        for (uint32_t j = 0; j < n; j++) {
            const float *v = V + (size_t)j * ld + i;
            __m256 a = _mm256_set1_ps(w[j]);
            o0 = _mm256_fmadd_ps(a, _mm256_loadu_ps(v), o0);
            o1 = _mm256_fmadd_ps(a, _mm256_loadu_ps(v + 8), o1);
            o2 = _mm256_fmadd_ps(a, _mm256_loadu_ps(v + 16), o2);
            o3 = _mm256_fmadd_ps(a, _mm256_loadu_ps(v + 24), o3);
        }
        _mm256_storeu_ps(out + i, o0), _mm256_storeu_ps(out + i + 8, o1);
        _mm256_storeu_ps(out + i + 16, o2), _mm256_storeu_ps(out + i + 24, o3);
    }
    for (; i + 8 <= hd; i += 8) {
        __m256 o = _mm256_loadu_ps(out + i);
        for (uint32_t j = 0; j < n; j++) o = _mm256_fmadd_ps(_mm256_set1_ps(w[j]), _mm256_loadu_ps(V + (size_t)j * ld + i), o);
        _mm256_storeu_ps(out + i, o);
    }
    for (; i < hd; i++) {
        float o = out[i];
        for (uint32_t j = 0; j < n; j++) o += w[j] * V[(size_t)j * ld + i];
        out[i] = o;
    }
}

const cq_attn_ops cq_attn_ops_avx2 = {dots, axpys};
