/* kernel_bench_avx2.c - the read-bandwidth loop with 32-byte loads and a software prefetch
 * CQ_PF_DIST ahead, as the matrix kernels stream their weights, so the probe is the best rate
 * they could reach rather than one they can beat. */
#include <immintrin.h>

#include "bench/kernel_bench.h"
#include "quant/kernel_impl.h"

uint64_t cq_bench_sum_avx2(const uint8_t *p, size_t n) {
    __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
    for (size_t i = 0; i < n; i += 256) {
        for (int k = 0; k < 256; k += 64) /* as the kernels do (kernel_impl.h) */
            _mm_prefetch((const char *)p + i + k + CQ_PF_DIST, _MM_HINT_T0);
        for (size_t j = 0; j < 256; j += 128) {
            a0 = _mm256_add_epi64(a0, _mm256_load_si256((const __m256i *)(p + i + j)));
            a1 = _mm256_add_epi64(a1, _mm256_load_si256((const __m256i *)(p + i + j + 32)));
            a2 = _mm256_add_epi64(a2, _mm256_load_si256((const __m256i *)(p + i + j + 64)));
            a3 = _mm256_add_epi64(a3, _mm256_load_si256((const __m256i *)(p + i + j + 96)));
        }
    }
    __m256i s = _mm256_add_epi64(_mm256_add_epi64(a0, a1), _mm256_add_epi64(a2, a3));
    uint64_t out[4];
    _mm256_storeu_si256((__m256i *)out, s);
    return out[0] + out[1] + out[2] + out[3];
}
