/* gdn_chunk_avx2.c - the chunked delta rule compiled for AVX2 + FMA (gdn_chunk.h). */
#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>

/* t[4][16] = A[4, kend] B[kend, 16] (rows lda / ldb floats apart) with fused multiply-adds */
static inline void tile_avx2(float t[4][16], const float *a, size_t lda, const float *b, size_t ldb,
                             uint32_t kend) {
    __m256 c[4][2];
    for (int r = 0; r < 4; r++)
        c[r][0] = c[r][1] = _mm256_setzero_ps();
    for (uint32_t k = 0; k < kend; k++) {
        const __m256 b0 = _mm256_loadu_ps(b + k * ldb), b1 = _mm256_loadu_ps(b + k * ldb + 8);
        for (int r = 0; r < 4; r++) {
            const __m256 x = _mm256_broadcast_ss(a + r * lda + k);
            c[r][0] = _mm256_fmadd_ps(x, b0, c[r][0]);
            c[r][1] = _mm256_fmadd_ps(x, b1, c[r][1]);
        }
    }
    for (int r = 0; r < 4; r++)
        _mm256_storeu_ps(t[r], c[r][0]), _mm256_storeu_ps(t[r] + 8, c[r][1]);
}

#define GDN_CHUNK_NAME cq_gdn_chunk_avx2
#define GDN_CHUNK_NB   16
#define GDN_CHUNK_TILE tile_avx2
#include "engine/gdn_chunk_body.h"
