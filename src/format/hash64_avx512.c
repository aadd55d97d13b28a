/* hash64_avx512.c - hash64 word fold, 16 words per step with native 64-bit multiplies. */
#include <immintrin.h>

#include "format/hash64_impl.h"

#ifndef PF_DIST
#define PF_DIST 4096
#endif

static inline __m512i fmix8(__m512i k, __m512i c1, __m512i c2) {
    k = _mm512_xor_si512(k, _mm512_srli_epi64(k, 33));
    k = _mm512_mullo_epi64(k, c1);
    k = _mm512_xor_si512(k, _mm512_srli_epi64(k, 33));
    k = _mm512_mullo_epi64(k, c2);
    return _mm512_xor_si512(k, _mm512_srli_epi64(k, 33));
}

uint64_t hash64_fold_avx512(const uint8_t *p, size_t n, uint64_t first) {
    const __m512i c1 = _mm512_set1_epi64((long long)0xff51afd7ed558ccdULL);
    const __m512i c2 = _mm512_set1_epi64((long long)0xc4ceb9fe1a85ec53ULL);
    __m512i acc0 = _mm512_setzero_si512(), acc1 = _mm512_setzero_si512();
    /* salts (first+j)*SALT per lane, advanced by addition */
    __m512i lane = _mm512_set_epi64(7, 6, 5, 4, 3, 2, 1, 0);
    __m512i s0 = _mm512_mullo_epi64(_mm512_add_epi64(_mm512_set1_epi64((long long)first), lane),
                                    _mm512_set1_epi64((long long)HASH64_SALT));
    __m512i s1 = _mm512_add_epi64(s0, _mm512_set1_epi64((long long)(8 * HASH64_SALT)));
    const __m512i step = _mm512_set1_epi64((long long)(16 * HASH64_SALT));
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        /* streaming from DRAM: ask for the lines 4 KiB ahead so the multiplies overlap the loads
         * (measured best of 1-8 KiB on a 2-core Xeon) */
        _mm_prefetch((const char *)(p + 8 * i + PF_DIST), _MM_HINT_T0);
        _mm_prefetch((const char *)(p + 8 * i + PF_DIST + 64), _MM_HINT_T0);
        __m512i w0 = _mm512_loadu_si512((const void *)(p + 8 * i));
        __m512i w1 = _mm512_loadu_si512((const void *)(p + 8 * i + 64));
        acc0 = _mm512_xor_si512(acc0, fmix8(w0, c1, c2));
        acc1 = _mm512_xor_si512(acc1, fmix8(w1, c1, c2));
        acc0 = _mm512_xor_si512(acc0, s0);
        acc1 = _mm512_xor_si512(acc1, s1);
        s0 = _mm512_add_epi64(s0, step);
        s1 = _mm512_add_epi64(s1, step);
    }
    uint64_t lanes[8];
    _mm512_storeu_si512((void *)lanes, _mm512_xor_si512(acc0, acc1));
    uint64_t acc = 0;
    for (int l = 0; l < 8; l++)
        acc ^= lanes[l];
    return acc ^ hash64_fold_scalar(p + 8 * i, n - i, first + i);
}
