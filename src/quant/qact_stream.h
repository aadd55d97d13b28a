/* qact_stream.h - the SIMD quantizers' driver over a token range (gemm_i8_avx512.c,
 * gemm_i8_avx2.c): whole token groups of the cmf_qact layout written as whole lines with
 * non-temporal stores, other tokens one by one with plain stores. Both threads' products read
 * every group; a plain store waits for ownership of a line the other core still holds from the
 * previous product, which made the quantizer 3x slower than on lines it owned. Internal to
 * src/quant (AVX2 files and up). */
#ifndef CORTIQ_QUANT_QACT_STREAM_H
#define CORTIQ_QUANT_QACT_STREAM_H

#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>

#include "quant/kernels_engine.h"

/* A tier's quantizer of one entry: the 32 codes of the len (<= 32) floats at x, their max |x|
 * and the sum of the codes. */
typedef __m256i (*cq_qact_entry_fn)(const float *x, size_t len, float *amax, int32_t *sum);

/* Entry i of the per-entry arrays: the scale and the code sum's three offset corrections. */
static inline __attribute__((always_inline)) void cq_qact_put(float *scale, int32_t *c128,
                                                              int32_t *c8, int32_t *c127, size_t i,
                                                              float amax, int32_t sum) {
    scale[i] = amax / 127.0f;
    c128[i] = -128 * sum;
    c8[i] = -8 * sum;
    c127[i] = -127 * sum;
}

/* Group gi (its cnt tokens from 12 gi on): per block, the tokens' codes back to back (6 lines)
 * and the 12 entries of each per-entry array (48 bytes, 16-byte aligned; zero past cnt). */
static inline __attribute__((always_inline)) void cq_qact_stream_group(cmf_qact *a, const float *X,
                                                                       size_t ldx, size_t gi,
                                                                       size_t cnt,
                                                                       cq_qact_entry_fn entry) {
    enum { G = CMF_QACT_GROUP };
    _Static_assert(G % 4 == 0, "a group's entries are whole 16-byte stores");
    for (size_t b = 0; b < a->nb; b++) {
        const size_t c0 = 32 * b, len = a->cols - c0 < 32 ? a->cols - c0 : 32;
        const size_t e0 = cmf_qact_index(a, gi * G, b);
        _Alignas(16) float scale[G] = {0};
        _Alignas(16) int32_t c128[G] = {0}, c8[G] = {0}, c127[G] = {0};
        for (size_t i = 0; i < cnt; i++) {
            float amax;
            int32_t sum;
            __m256i q = entry(X + (gi * G + i) * ldx + c0, len, &amax, &sum);
            _mm256_stream_si256((__m256i *)(void *)(a->q + 32 * (e0 + i)), q);
            cq_qact_put(scale, c128, c8, c127, i, amax, sum);
        }
        for (size_t k = 0; k < G; k += 4) {
            _mm_stream_ps(a->scale + e0 + k, _mm_load_ps(scale + k));
            _mm_stream_si128((__m128i *)(void *)(a->c128 + e0 + k),
                             _mm_load_si128((const __m128i *)(const void *)(c128 + k)));
            _mm_stream_si128((__m128i *)(void *)(a->c8 + e0 + k),
                             _mm_load_si128((const __m128i *)(const void *)(c8 + k)));
            _mm_stream_si128((__m128i *)(void *)(a->c127 + e0 + k),
                             _mm_load_si128((const __m128i *)(const void *)(c127 + k)));
        }
    }
}

/* Tokens [t0, t1): the groups that start in the range and end in it (or at the batch's end)
 * streamed, the rest token by token; fenced before returning, since other threads read it
 * next. */
static inline __attribute__((always_inline)) void cq_qact_quantize_range(cmf_qact *a,
                                                                         const float *X, size_t ldx,
                                                                         size_t t0, size_t t1,
                                                                         cq_qact_entry_fn entry) {
    enum { G = CMF_QACT_GROUP };
    for (size_t t = t0; t < t1;) {
        const size_t cnt = a->n - t < G ? a->n - t : G;
        if (t % G == 0 && t + cnt <= t1) {
            cq_qact_stream_group(a, X, ldx, t / G, cnt, entry);
            t += cnt;
            continue;
        }
        const float *x = X + t * ldx;
        for (size_t b = 0; b < a->nb; b++) {
            const size_t e = cmf_qact_index(a, t, b), c0 = 32 * b,
                         len = a->cols - c0 < 32 ? a->cols - c0 : 32;
            float amax;
            int32_t sum;
            __m256i q = entry(x + c0, len, &amax, &sum);
            _mm256_storeu_si256((__m256i *)(void *)(a->q + 32 * e), q);
            cq_qact_put(a->scale, a->c128, a->c8, a->c127, e, amax, sum);
        }
        t++;
    }
    _mm_sfence();
}

#endif
