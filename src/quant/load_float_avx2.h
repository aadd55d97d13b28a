/* load_float_avx2.h - 8 float weights (f32, f16 or bf16) as 8 f32 lanes: the one conversion the
 * AVX2 float kernels share (kernel_avx2.c's one-token streams, gemm_few_avx2.c's few-token rows,
 * gemm_f32_avx2.c's panels); load_float_avx512.h is its 16-lane, masked twin. AVX2 files only. */
#ifndef CORTIQ_QUANT_LOAD_FLOAT_AVX2_H
#define CORTIQ_QUANT_LOAD_FLOAT_AVX2_H

#include <immintrin.h>
#include <stdint.h>

#include "cortiq/kernels.h"

/* Values p[0 .. 7] of dtype dt (f32, f16 or bf16; a constant where the caller is specialised);
 * bf16 is the high half of an f32, so exact. */
static inline __attribute__((always_inline)) __m256 cq_load8_float(cmf_dtype dt, const uint8_t *p) {
    if (dt == CMF_DT_F32) return _mm256_loadu_ps((const float *)(const void *)p);
    __m128i h = _mm_loadu_si128((const __m128i *)(const void *)p);
    return dt == CMF_DT_F16 ? _mm256_cvtph_ps(h)
                            : _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

#endif
