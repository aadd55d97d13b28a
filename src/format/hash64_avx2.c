/* hash64_avx2.c - hash64 word fold, 4 words per step. AVX2 has no 64-bit multiply,
 * so fmix64's multiplies are built from three 32x32->64 products. */
#include <immintrin.h>

#include "format/hash64_impl.h"

static inline __m256i mul64(__m256i a, __m256i b) {
    __m256i lo = _mm256_mul_epu32(a, b);
    __m256i a_hi = _mm256_srli_epi64(a, 32), b_hi = _mm256_srli_epi64(b, 32);
    __m256i cross = _mm256_add_epi64(_mm256_mul_epu32(a_hi, b), _mm256_mul_epu32(a, b_hi));
    return _mm256_add_epi64(lo, _mm256_slli_epi64(cross, 32));
}

static inline __m256i fmix4(__m256i k, __m256i c1, __m256i c2) {
    k = _mm256_xor_si256(k, _mm256_srli_epi64(k, 33));
    k = mul64(k, c1);
    k = _mm256_xor_si256(k, _mm256_srli_epi64(k, 33));
    k = mul64(k, c2);
    return _mm256_xor_si256(k, _mm256_srli_epi64(k, 33));
}

uint64_t hash64_fold_avx2(const uint8_t *p, size_t n, uint64_t first) {
    const __m256i c1 = _mm256_set1_epi64x((long long)0xff51afd7ed558ccdULL);
    const __m256i c2 = _mm256_set1_epi64x((long long)0xc4ceb9fe1a85ec53ULL);
    __m256i acc0 = _mm256_setzero_si256(), acc1 = _mm256_setzero_si256();
    /* salts (first+j)*SALT per lane, advanced by addition */
    const uint64_t f = first * HASH64_SALT;
    __m256i s0 =
        _mm256_set_epi64x((long long)(f + 3 * HASH64_SALT), (long long)(f + 2 * HASH64_SALT),
                          (long long)(f + HASH64_SALT), (long long)f);
    __m256i s1 = _mm256_add_epi64(s0, _mm256_set1_epi64x((long long)(4 * HASH64_SALT)));
    const __m256i step = _mm256_set1_epi64x((long long)(8 * HASH64_SALT));
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        _mm_prefetch((const char *)(p + 8 * i + 4096), _MM_HINT_T0); /* see hash64_avx512.c */
        __m256i w0 = _mm256_loadu_si256((const __m256i *)(p + 8 * i));
        __m256i w1 = _mm256_loadu_si256((const __m256i *)(p + 8 * i + 32));
        acc0 = _mm256_xor_si256(acc0, fmix4(w0, c1, c2));
        acc1 = _mm256_xor_si256(acc1, fmix4(w1, c1, c2));
        acc0 = _mm256_xor_si256(acc0, s0);
        acc1 = _mm256_xor_si256(acc1, s1);
        s0 = _mm256_add_epi64(s0, step);
        s1 = _mm256_add_epi64(s1, step);
    }
    acc0 = _mm256_xor_si256(acc0, acc1);
    uint64_t lanes[4];
    _mm256_storeu_si256((__m256i *)lanes, acc0);
    uint64_t acc = lanes[0] ^ lanes[1] ^ lanes[2] ^ lanes[3];
    return acc ^ hash64_fold_scalar(p + 8 * i, n - i, first + i);
}
