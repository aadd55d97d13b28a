/* act_ops_avx2.c - gated activations, 8 lanes (see act_ops.h for the e^x used). */
#include <immintrin.h>

#include "engine/act_ops.h"

/* e^x as in the AVX-512 tier; 2^k built in the exponent bits (k in [-150, 128] after the
 * clamp is split in two halves so that neither overflows the exponent field). */
static inline __m256 exp8(__m256 x) {
    x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-104.0f)), _mm256_set1_ps(88.7f));
    __m256 k = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(k, _mm256_set1_ps(0.693145751953125f), x);
    r = _mm256_fnmadd_ps(k, _mm256_set1_ps(1.428606765330187045e-06f), r);
    __m256 p = _mm256_set1_ps(1.0f / 5040.0f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 720.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    __m256i ki = _mm256_cvtps_epi32(k);
    __m256i k1 = _mm256_srai_epi32(ki, 1), k2 = _mm256_sub_epi32(ki, k1);
    __m256 s1 =
        _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(k1, _mm256_set1_epi32(127)), 23));
    __m256 s2 =
        _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(k2, _mm256_set1_epi32(127)), 23));
    return _mm256_mul_ps(_mm256_mul_ps(p, s1), s2);
}

static void silu_mul(float *g, const float *u, size_t n) {
    const __m256 one = _mm256_set1_ps(1.0f);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 x = _mm256_loadu_ps(g + i);
        __m256 d = _mm256_add_ps(one, exp8(_mm256_sub_ps(_mm256_setzero_ps(), x)));
        _mm256_storeu_ps(g + i, _mm256_mul_ps(_mm256_div_ps(x, d), _mm256_loadu_ps(u + i)));
    }
    if (i < n) cq_act_ops_scalar.silu_mul(g + i, u + i, n - i);
}

static void gelu_tanh_mul(float *g, const float *u, size_t n) {
    const __m256 one = _mm256_set1_ps(1.0f), c = _mm256_set1_ps(0.7978845608028654f),
                 c3 = _mm256_set1_ps(0.044715f);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 x = _mm256_loadu_ps(g + i);
        __m256 y = _mm256_mul_ps(c, _mm256_fmadd_ps(_mm256_mul_ps(c3, x), _mm256_mul_ps(x, x), x));
        __m256 e = exp8(_mm256_sub_ps(_mm256_setzero_ps(), _mm256_add_ps(y, y)));
        __m256 r = _mm256_div_ps(x, _mm256_add_ps(one, e)); /* 0.5 x (1 + tanh y) = x sigmoid(2y) */
        _mm256_storeu_ps(g + i, _mm256_mul_ps(r, _mm256_loadu_ps(u + i)));
    }
    if (i < n) cq_act_ops_scalar.gelu_tanh_mul(g + i, u + i, n - i);
}

/* As in the AVX-512 tier: the maximum (NaNs drop out of max_ps(v, m)), then its first lane. */
static uint32_t argmax(const float *x, uint32_t n) {
    if (n < 32 || x[0] != x[0]) return cq_act_ops_scalar.argmax(x, n);
    __m256 m0 = _mm256_set1_ps(x[0]), m1 = m0, m2 = m0, m3 = m0;
    uint32_t i = 0;
    for (; i + 32 <= n; i += 32) {
        m0 = _mm256_max_ps(_mm256_loadu_ps(x + i), m0);
        m1 = _mm256_max_ps(_mm256_loadu_ps(x + i + 8), m1);
        m2 = _mm256_max_ps(_mm256_loadu_ps(x + i + 16), m2);
        m3 = _mm256_max_ps(_mm256_loadu_ps(x + i + 24), m3);
    }
    __m256 m = _mm256_max_ps(_mm256_max_ps(m0, m1), _mm256_max_ps(m2, m3));
    _Alignas(32) float v[8];
    _mm256_store_ps(v, m);
    float mx = v[0];
    for (int k = 1; k < 8; k++)
        mx = v[k] > mx ? v[k] : mx;
    for (uint32_t j = i; j < n; j++)
        mx = x[j] > mx ? x[j] : mx;
    const __m256 mv = _mm256_set1_ps(mx);
    for (i = 0; i + 8 <= n; i += 8) {
        unsigned hit =
            (unsigned)_mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(x + i), mv, _CMP_EQ_OQ));
        if (hit) return i + (uint32_t)__builtin_ctz(hit);
    }
    while (x[i] != mx) /* the maximum is in the tail */
        i++;
    return i;
}

/* The scalar tier's 8 partial sums as two vectors of 4 (act_ops.h); a square is exact in
 * double, so the FMA adds as the scalar add does. The tail runs as the scalar tier's. */
static double sum_squares(const float *x, uint32_t n) {
    __m256d s0 = _mm256_setzero_pd(), s1 = _mm256_setzero_pd();
    uint32_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256d a = _mm256_cvtps_pd(_mm_loadu_ps(x + i)),
                b = _mm256_cvtps_pd(_mm_loadu_ps(x + i + 4));
        s0 = _mm256_fmadd_pd(a, a, s0);
        s1 = _mm256_fmadd_pd(b, b, s1);
    }
    _Alignas(32) double p[8];
    _mm256_store_pd(p, s0);
    _mm256_store_pd(p + 4, s1);
    for (uint32_t j = 0; i < n; i++, j++)
        p[j] += (double)x[i] * x[i];
    return ((p[0] + p[4]) + (p[1] + p[5])) + ((p[2] + p[6]) + (p[3] + p[7]));
}

const cq_act_ops cq_act_ops_avx2 = {silu_mul, gelu_tanh_mul, argmax, sum_squares};
