/* kernel_bench_avx512.c - the read-bandwidth loop with 64-byte loads and a software prefetch
 * CQ_PF_DIST ahead, as the matrix kernels stream their weights, so the probe is the best rate
 * they could reach rather than one they can beat. */
#include <immintrin.h>

#include "bench/kernel_bench.h"
#include "quant/kernel_impl.h"

uint64_t cq_bench_sum_avx512(const uint8_t *p, size_t n) {
    __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0;
    for (size_t i = 0; i < n; i += 256) {
        for (int k = 0; k < 256; k += 64)
            _mm_prefetch((const char *)p + i + k + CQ_PF_DIST, _MM_HINT_T0);
        a0 = _mm512_add_epi64(a0, _mm512_load_si512((const void *)(p + i)));
        a1 = _mm512_add_epi64(a1, _mm512_load_si512((const void *)(p + i + 64)));
        a2 = _mm512_add_epi64(a2, _mm512_load_si512((const void *)(p + i + 128)));
        a3 = _mm512_add_epi64(a3, _mm512_load_si512((const void *)(p + i + 192)));
    }
    /* lanes added as unsigned: the sums wrap by design (GCC's _mm512_reduce_add_epi64 adds
     * them as signed long long, which UBSan reports once they overflow) */
    _Alignas(64) uint64_t v[8];
    _mm512_store_si512(v, _mm512_add_epi64(_mm512_add_epi64(a0, a1), _mm512_add_epi64(a2, a3)));
    uint64_t s = 0;
    for (int k = 0; k < 8; k++)
        s += v[k];
    return s;
}
