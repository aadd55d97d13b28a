/* load_float_avx512.h - 16 float weights (f32, f16 or bf16) as 16 f32 lanes, masked: the one
 * conversion the AVX-512 float kernels share (kernel_avx512.c's one-token streams,
 * gemm_few_avx512.c's few-token rows, gemm_f32_avx512.c's panels, gemm_half_amx.c's splits).
 * AVX-512 files only. */
#ifndef CORTIQ_QUANT_LOAD_FLOAT_AVX512_H
#define CORTIQ_QUANT_LOAD_FLOAT_AVX512_H

#include <immintrin.h>
#include <stdint.h>

#include "cortiq/kernels.h"

/* 16 bf16 values as f32: each the high half of an f32, so exact. */
static inline __attribute__((always_inline)) __m512 cq_bf16x16_to_f32(__m256i h) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

/* Values p[0 .. 15] of dtype dt (f32, f16 or bf16; a constant where the caller is specialised)
 * in the lanes of mask k, zero in the others. */
static inline __attribute__((always_inline)) __m512 cq_load16_float(cmf_dtype dt, const uint8_t *p,
                                                                    __mmask16 k) {
    if (dt == CMF_DT_F32) return _mm512_maskz_loadu_ps(k, p);
    __m256i h = _mm256_maskz_loadu_epi16(k, p);
    return dt == CMF_DT_F16 ? _mm512_cvtph_ps(h) : cq_bf16x16_to_f32(h);
}

#endif
