/* attn_ops_avx512.c - attention loops with AVX-512 (16 lanes, masked tails; four keys per
 * pass so each query vector load is reused). */
#include <immintrin.h>

#include "engine/attn_ops.h"

static float dot1(const float *q, const float *k, uint32_t hd) {
    __m512 a = _mm512_setzero_ps();
    uint32_t i = 0;
    for (; i + 16 <= hd; i += 16) a = _mm512_fmadd_ps(_mm512_loadu_ps(q + i), _mm512_loadu_ps(k + i), a);
    if (i < hd) {
        __mmask16 mk = (__mmask16)((1u << (hd - i)) - 1);
        a = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(mk, q + i), _mm512_maskz_loadu_ps(mk, k + i), a);
    }
    return _mm512_reduce_add_ps(a);
}

static void dots(const float *q, const float *K, size_t ld, uint32_t n, uint32_t hd, float *out) {
    uint32_t j = 0;
    if (hd % 16 == 0)
        for (; j + 4 <= n; j += 4) {
            const float *k0 = K + (size_t)j * ld, *k1 = k0 + ld, *k2 = k1 + ld, *k3 = k2 + ld;
            __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
            for (uint32_t i = 0; i < hd; i += 16) {
                __m512 x = _mm512_loadu_ps(q + i);
                a0 = _mm512_fmadd_ps(x, _mm512_loadu_ps(k0 + i), a0);
                a1 = _mm512_fmadd_ps(x, _mm512_loadu_ps(k1 + i), a1);
                a2 = _mm512_fmadd_ps(x, _mm512_loadu_ps(k2 + i), a2);
                a3 = _mm512_fmadd_ps(x, _mm512_loadu_ps(k3 + i), a3);
            }
            out[j] = _mm512_reduce_add_ps(a0), out[j + 1] = _mm512_reduce_add_ps(a1);
            out[j + 2] = _mm512_reduce_add_ps(a2), out[j + 3] = _mm512_reduce_add_ps(a3);
        }
    for (; j < n; j++) out[j] = dot1(q, K + (size_t)j * ld, hd);
}

static void axpys(float *out, const float *w, const float *V, size_t ld, uint32_t n, uint32_t hd) {
    uint32_t i = 0;
    for (; i + 64 <= hd; i += 64) { /* 64 outputs held in registers across all n values */
        __m512 o0 = _mm512_loadu_ps(out + i), o1 = _mm512_loadu_ps(out + i + 16);
        __m512 o2 = _mm512_loadu_ps(out + i + 32), o3 = _mm512_loadu_ps(out + i + 48);
        for (uint32_t j = 0; j < n; j++) {
            const float *v = V + (size_t)j * ld + i;
            __m512 a = _mm512_set1_ps(w[j]);
            o0 = _mm512_fmadd_ps(a, _mm512_loadu_ps(v), o0);
            o1 = _mm512_fmadd_ps(a, _mm512_loadu_ps(v + 16), o1);
            o2 = _mm512_fmadd_ps(a, _mm512_loadu_ps(v + 32), o2);
            o3 = _mm512_fmadd_ps(a, _mm512_loadu_ps(v + 48), o3);
        }
        _mm512_storeu_ps(out + i, o0), _mm512_storeu_ps(out + i + 16, o1);
        _mm512_storeu_ps(out + i + 32, o2), _mm512_storeu_ps(out + i + 48, o3);
    }
    for (; i < hd; i += 16) {
        __mmask16 mk = hd - i >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (hd - i)) - 1);
        __m512 o = _mm512_maskz_loadu_ps(mk, out + i);
        for (uint32_t j = 0; j < n; j++)
            o = _mm512_fmadd_ps(_mm512_set1_ps(w[j]), _mm512_maskz_loadu_ps(mk, V + (size_t)j * ld + i), o);
        _mm512_mask_storeu_ps(out + i, mk, o);
    }
}

const cq_attn_ops cq_attn_ops_avx512 = {dots, axpys};
