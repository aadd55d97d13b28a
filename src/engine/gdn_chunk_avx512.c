/* gdn_chunk_avx512.c - the chunked delta rule compiled for AVX-512 (gdn_chunk.h). */
#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>

/* t[4][32] = A[4, kend] B[kend, 32] (rows lda / ldb floats apart) with fused multiply-adds */
static inline void tile_avx512(float t[4][32], const float *a, size_t lda, const float *b,
                               size_t ldb, uint32_t kend) {
    __m512 c[4][2];
    for (int r = 0; r < 4; r++)
        c[r][0] = c[r][1] = _mm512_setzero_ps();
    for (uint32_t k = 0; k < kend; k++) {
        const __m512 b0 = _mm512_loadu_ps(b + k * ldb), b1 = _mm512_loadu_ps(b + k * ldb + 16);
        for (int r = 0; r < 4; r++) {
            const __m512 x = _mm512_set1_ps(a[r * lda + k]);
            c[r][0] = _mm512_fmadd_ps(x, b0, c[r][0]);
            c[r][1] = _mm512_fmadd_ps(x, b1, c[r][1]);
        }
    }
    for (int r = 0; r < 4; r++)
        _mm512_storeu_ps(t[r], c[r][0]), _mm512_storeu_ps(t[r] + 16, c[r][1]);
}

#define GDN_CHUNK_NAME cq_gdn_chunk_avx512
#define GDN_CHUNK_NB   32
#define GDN_CHUNK_TILE tile_avx512
#include "engine/gdn_chunk_body.h"
