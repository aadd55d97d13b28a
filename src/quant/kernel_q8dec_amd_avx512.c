/* kernel_q8dec_amd_avx512.c - q8_row's one-token rows for AMD's AVX-512 cores (cq_avx512_q8_amd):
 * the AVX2 tier's rows (q8dec_rows.h) with a group's integer sums made by a 256-bit vpdpbusd,
 * so the same bits as that tier.
 *
 * On Zen 4 the AVX2 tier's rows (2 rows side by side, 32 weights a step) read a thread's weights
 * from DRAM 10-25 % faster than the VNNI rows of kernel_i8_avx512.c (4 rows, 64 weights a step),
 * but with several tokens they are the slower ones: vpsignb, vpmaddubsw and vpmaddwd per token
 * and group where the VNNI rows give each token one vpdpbusd against a shared weight vector.
 * Here the token's codes are stored as x + 128 (unsigned, as vpdpbusd takes them), and each
 * group's sums start from -128 times the sum of its weights, made once for all the tokens:
 * vpdpbusd then adds the exact int32 sums of w * x per 4 columns that the AVX2 rows get. */
#include <immintrin.h>

#include "quant/kernel_i8dec.h"
#include "quant/kernel_impl.h"

/* The AVX2 tier's token (cq_avx2_q8dec_tok_prepare), its codes then moved to x + 128. */
void cq_amd_q8dec_tok_prepare(void *buf, const float *x, uint64_t cols) {
    cq_avx2_q8dec_tok_prepare(buf, x, cols);
    const __m256i flip = _mm256_set1_epi8((char)0x80);
    for (uint64_t i = 0; i < cols; i += 32) {
        __m256i *p = (__m256i *)(void *)((uint8_t *)buf + i);
        _mm256_store_si256(p, _mm256_xor_si256(_mm256_load_si256(p), flip));
    }
}

/* -128 times the sum of each 4 weights of w: where the group's sums start */
static inline __attribute__((always_inline)) __m256i sums_start(__m256i w) {
    return _mm256_sub_epi32(
        _mm256_setzero_si256(),
        _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_set1_epi8((char)0x80), w));
}

#define Q8DEC_TOKEN         uint8_t
#define Q8DEC_PREP(w)       sums_start(w)
#define Q8DEC_SUMS(x, w, p) _mm256_dpbusd_epi32(p, x, w)
#define Q8DEC_MATVEC        cq_amd_q8dec_tok_matvec
#define Q8DEC_MULTI         cq_amd_q8dec_tok_matvec_multi
#define Q8DEC_PREPARE       cq_amd_q8dec_tok_prepare
#define Q8DEC_FROM_F32      cq_amd_q8dec_matvec
#include "quant/q8dec_rows.h"
