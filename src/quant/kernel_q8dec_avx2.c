/* kernel_q8dec_avx2.c - one-token matrix-vector products with int8 activations for q8_row on the
 * AVX2 tier (CMF_KF_INT8_ACT, cols % 32 == 0), and the same for up to 4 tokens at once.
 *
 * The token is quantized as every int8 path of the tier does it (quant32_avx2.h: dx = absmax /
 * 127 per 32-group) and kept in natural order. Per group and row: vpsignb moves the weights' signs
 * onto the codes, vpmaddubsw multiplies them by |w| (|2 * 128 * 127| < 2^15: no saturation),
 * vpmaddwd adds the pairs to int32, and one convert and one FMA by dx add the group to the row's
 * accumulator: ~6 operations per 32 weights where the f32 kernel (kernel_avx2.c) takes ~12, and
 * each token of a batched step adds 5 where f32 adds 4 FMAs but shares 8 conversions.
 *
 * The rows themselves (2 side by side for one token, each row alone for several, the same bits
 * either way) are q8dec_rows.h's, which AMD's AVX-512 cores run with vpdpbusd instead
 * (kernel_q8dec_amd_avx512.c). */
#include <immintrin.h>

#include "common/cpu.h"
#include "quant/kernel_i8dec.h"
#include "quant/kernel_impl.h"
#include "quant/quant32_avx2.h"

/* The prepared token: the codes, 32 bytes a group, then each group's dx (a float a group) and
 * -8 times the sum of its codes (an int32 a group, the 4-bit lanes' offset correction,
 * lanes_avx2.c), padded to 64 bytes (the 4-bit class's token follows it in a cmf_tok8
 * buffer). (dx repeated over 8 lanes, so that the FMA could read it from memory, doubled the
 * token and read the Qwen2.5-0.5B shape's weights 10 % slower from DRAM.) */
size_t cq_avx2_q8dec_tok_bytes(uint64_t cols) {
    return cols % 32 ? 0 : (cols / 32 * (32 + sizeof(float) + sizeof(int32_t)) + 63) / 64 * 64;
}

void cq_avx2_q8dec_tok_prepare(void *buf, const float *x, uint64_t cols) {
    int8_t *xq = buf;
    float *dx = (float *)(void *)(xq + cols);
    int32_t *c8 = (int32_t *)(void *)(dx + cols / 32);
    const __m256i ones8 = _mm256_set1_epi8(1), ones16 = _mm256_set1_epi16(1);
    for (uint64_t g = 0; g < cols / 32; g++) {
        __m256i q = cq_avx2_quant32(x + 32 * g, dx + g);
        _mm256_store_si256((__m256i *)(void *)(xq + 32 * g), q);
        /* the codes' sum: |q| <= 127, so the int16 pairs of ones * q cannot saturate */
        __m256i s = _mm256_madd_epi16(_mm256_maddubs_epi16(ones8, q), ones16);
        __m128i h = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
        h = _mm_add_epi32(h, _mm_shuffle_epi32(h, _MM_SHUFFLE(1, 0, 3, 2)));
        h = _mm_add_epi32(h, _mm_shuffle_epi32(h, _MM_SHUFFLE(2, 3, 0, 1)));
        c8[g] = -8 * _mm_cvtsi128_si32(h);
    }
}

/* The rows (q8dec_rows.h): per group, vpsignb moves the weights' signs onto the codes,
 * vpmaddubsw multiplies them by |w| (computed once per group for all the tokens) and vpmaddwd
 * adds the pairs. */
#define Q8DEC_TOKEN   int8_t
#define Q8DEC_PREP(w) _mm256_abs_epi8(w)
#define Q8DEC_SUMS(x, w, p)                                                                        \
    _mm256_madd_epi16(_mm256_maddubs_epi16(p, _mm256_sign_epi8(x, w)), _mm256_set1_epi16(1))
#define Q8DEC_MATVEC   cq_avx2_q8dec_tok_matvec
#define Q8DEC_MULTI    cq_avx2_q8dec_tok_matvec_multi
#define Q8DEC_PREPARE  cq_avx2_q8dec_tok_prepare
#define Q8DEC_FROM_F32 cq_avx2_q8dec_matvec
#include "quant/q8dec_rows.h"

bool cq_avx2_q8dec_supports(const cmf_qmat *m) {
    return m->dtype == CMF_DT_Q8_ROW && m->cols % 32 == 0;
}

const cq_q8dec_rows *cq_avx2_q8dec_rows(void) {
    static const cq_q8dec_rows plain = {cq_avx2_q8dec_tok_matvec, cq_avx2_q8dec_tok_matvec_multi,
                                        cq_avx2_q8dec_matvec},
                               vnni = {cq_avxvnni_q8dec_tok_matvec,
                                       cq_avxvnni_q8dec_tok_matvec_multi, cq_avxvnni_q8dec_matvec};
    return cq_cpu_avxvnni() ? &vnni : &plain;
}
