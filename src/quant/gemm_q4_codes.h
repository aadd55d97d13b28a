/* gemm_q4_codes.h - reading the q4 family's nibble codes for the integer GEMMs' panel packing
 * (gemm_i8_avx512.c, gemm_i8_avx2.c). Included only by files built with AVX2 or higher. */
#ifndef CORTIQ_QUANT_GEMM_Q4_CODES_H
#define CORTIQ_QUANT_GEMM_Q4_CODES_H

#include <immintrin.h>
#include <stdint.h>

#include "quant/kernel_impl.h"

/* 16 nibble bytes -> 32 codes in element order (low nibble first), as a 256-bit vector. */
static inline __m256i cq_unpack_nibbles(const uint8_t *nib) {
    __m128i b = _mm_loadu_si128((const __m128i *)nib), m = _mm_set1_epi8(15);
    __m128i lo = _mm_and_si128(b, m), hi = _mm_and_si128(_mm_srli_epi16(b, 4), m);
    return _mm256_set_m128i(_mm_unpackhi_epi8(lo, hi), _mm_unpacklo_epi8(lo, hi));
}

#endif
