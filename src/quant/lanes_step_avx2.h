/* lanes_step_avx2.h - the pieces the AVX2 integer kernels step with (the batched-decode copies'
 * passes, lanes_avx2_pass.h and lanes_vbit_avx2.c, and the prefill GEMM's, gemm_i8_avx2_pass.h):
 * a token's 4 codes broadcast, four u8 x s8 products added into each int32 lane (vpdpbusd in a
 * file built with AVX-VNNI), and the sign form's step for the int8 weights of q8_row and vbit's
 * wide rows. */
#ifndef CORTIQ_QUANT_LANES_STEP_AVX2_H
#define CORTIQ_QUANT_LANES_STEP_AVX2_H

#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>

typedef int32_t cq_i32_unaligned __attribute__((may_alias, aligned(1)));

/* The 4 codes at p (one int32) in every lane. */
static inline __attribute__((always_inline)) __m256i cq_lanes_bcast4(const int8_t *p) {
    return _mm256_set1_epi32(*(const cq_i32_unaligned *)p);
}

/* acc + the four products of u8 w and s8 x in each int32 lane: vpdpbusd with AVX-VNNI, else
 * vpmaddubsw and vpmaddwd, the same sums where no pair reaches int16's limit (every caller's). */
static inline __attribute__((always_inline)) __m256i cq_avx2_dot4(__m256i acc, __m256i w,
                                                                  __m256i x) {
#ifdef __AVXVNNI__
    return _mm256_dpbusd_avx_epi32(acc, w, x);
#else
    return _mm256_add_epi32(acc,
                            _mm256_madd_epi16(_mm256_maddubs_epi16(w, x), _mm256_set1_epi16(1)));
#endif
}

/* One sign-form step for T tokens: v holds 4 int8 weights of each of 8 rows (an int32 lane per
 * row); token t's 4 matching codes at xq[t] + off. vpmaddubsw multiplies |w| (<= 128 as u8) by
 * the codes with w's sign (a pair at most 2 * 128 * 127 = 32512), vpmaddwd widens at once; in a
 * file built with AVX-VNNI, vpdpbusd adds the same products into the int32 lanes. */
static inline __attribute__((always_inline)) void
cq_lanes_sign_step(__m256i v, const int8_t *const *xq, size_t off, const int T, __m256i *s) {
    const __m256i a = _mm256_abs_epi8(v);
    for (int t = 0; t < T; t++)
        s[t] = cq_avx2_dot4(s[t], a, _mm256_sign_epi8(cq_lanes_bcast4(xq[t] + off), v));
}

#endif
