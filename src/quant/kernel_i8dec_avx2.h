/* kernel_i8dec_avx2.h - the prepared token of the AVX2 tier's one-token int8 kernels, shared by
 * the 4-bit class (kernel_i8dec_avx2_rows.h) and vbit (kernel_i8dec_vbit_avx2_rows.h). Internal
 * to src/quant. */
#ifndef CORTIQ_QUANT_KERNEL_I8DEC_AVX2_H
#define CORTIQ_QUANT_KERNEL_I8DEC_AVX2_H

#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include "quant/kernels_engine.h"

/* One pair of groups (2p, 2p + 1) of the prepared token, 128 bytes: xe the even elements of
 * both groups (group 2p in bytes 0-15), xo the odd ones, corr[j] 8 * the sum of elements
 * 8j .. 8j + 7 of the pair's 64 (lanes 0-3 group 2p, 4-7 group 2p + 1), dx each group's
 * activation scale in its four lanes. A missing group 2p + 1 is all zeros. */
typedef struct {
    int8_t xe[32], xo[32];
    int32_t corr[8];
    float dx[8];
} pair8;

/* The scales of one to four groups (n = 2 to 8 bytes of f16, as stored: x86 is little-endian)
 * in one integer, scale i in bits 16i .. 16i + 15: one load, where GCC kept ld_u32's byte
 * loads apart in these loops. cq_avx2_scales_f32 converts them to floats in lanes 0-3. */
static inline __attribute__((always_inline)) uint64_t cq_avx2_scale_bits(const uint8_t *p,
                                                                         size_t n) {
    uint64_t h = 0;
    memcpy(&h, p, n);
    return h;
}
static inline __attribute__((always_inline)) __m256 cq_avx2_scales_f32(uint64_t h) {
    return _mm256_castps128_ps256(_mm_cvtph_ps(_mm_cvtsi64_si128((long long)h)));
}
/* A pair's scales in its lanes from those: [s0 x4 | s1 x4] (lo) and [s2 x4 | s3 x4] (hi). */
static inline __attribute__((always_inline)) __m256 cq_avx2_scales_lo(__m256 s) {
    return _mm256_permutevar8x32_ps(s, _mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1));
}
static inline __attribute__((always_inline)) __m256 cq_avx2_scales_hi(__m256 s) {
    return _mm256_permutevar8x32_ps(s, _mm256_setr_epi32(2, 2, 2, 2, 3, 3, 3, 3));
}

/* Rows [r0, r1) of a vbit / vbit_ro matrix (cols % 32 == 0) against a prepared token
 * (kernel_i8dec_vbit_avx2_rows.h; _avxvnni: its AVX-VNNI build, the same bits). */
void cq_avx2_i8dec_vbit_rows(const cmf_qmat *m, const pair8 *tok, float *y, uint64_t r0,
                             uint64_t r1);
void cq_avxvnni_i8dec_vbit_rows(const cmf_qmat *m, const pair8 *tok, float *y, uint64_t r0,
                                uint64_t r1);
/* The same for n (<= CMF_TOK8_MULTI_MAX) tokens, each weight step unpacked once for up to 4 of
 * them; y[t] gets the bits the one-token rows give tok[t] alone. */
void cq_avx2_i8dec_vbit_rows_multi(const cmf_qmat *m, const pair8 *const *tok, size_t n,
                                   float *const *y, uint64_t r0, uint64_t r1);
void cq_avxvnni_i8dec_vbit_rows_multi(const cmf_qmat *m, const pair8 *const *tok, size_t n,
                                      float *const *y, uint64_t r0, uint64_t r1);

#endif
