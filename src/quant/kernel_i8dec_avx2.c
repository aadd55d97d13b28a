/* kernel_i8dec_avx2.c - one-token matrix-vector products with int8 activations for q4_tiled,
 * q4_block and q4tp on the AVX2 tier (CMF_KF_INT8_ACT, cols % 32 == 0).
 *
 * Decode streams every weight once per token, so what counts is the instructions per weight.
 * The token is quantized once (dx = absmax/127 per 32-group, as kernel_i8_avx2.c does) into a
 * record per pair of groups, in the order one 256-bit load of the pair's 32 nibble bytes
 * gives (group 2p in the low 128-bit lane, 2p+1 in the high one):
 *   xe: the even elements (low nibbles) of both groups, xo: the odd ones (high nibbles),
 *   corr: 8 * the sum of the 8 codes each int32 lane covers (the -8 offset of the nibbles),
 *   dx: each group's scale in its four lanes.
 * Per pair and row: one and and one shift+and split the nibbles, two vpmaddubsw multiply them
 * by xe and xo, and their int16 results are added before one vpmaddwd (each int16 lane then
 * sums 4 products, |4 * 15 * 127| < 2^15), the offset comes off in int32, one cvt and one
 * FMA by [s_2p * dx_2p x4 | s_2p+1 * dx_2p+1 x4] add the pair to the row's accumulator. That
 * is ~7 vector operations per 32 weights where the per-group form (kernel_i8_avx2.c's q4_nt)
 * took ~13. The two scales come from one f16 pair (q4_block), two tile heads (q4_tiled) or
 * the row's ladder (q4tp) and are spread to their lanes with one vpermps / vinsertf128.
 *
 * Where the CPU has AVX-VNNI two vpdpbusd take the place of the two vpmaddubsw, the add and the
 * vpmaddwd (the same sums). The rows, built both ways, are kernel_i8dec_avx2_rows.h's.
 *
 * The token is laid out once per decode job and thread (cmf_tok8_* in kernel.c) or once per
 * call (cq_avx2_i8dec_matvec). Rows run one at a time, 4 groups per step, and are reduced
 * 8 at a time. Batched decode (several sessions' tokens over the same rows) loads and splits
 * each quad once for up to 8 tokens. vbit rows take the same token
 * (kernel_i8dec_vbit_avx2_rows.h). */
#include <immintrin.h>

#include "common/cpu.h"
#include "quant/kernel_i8dec_avx2_rows.h"
#include "quant/quant32_avx2.h"

static uint64_t pairs_of(uint64_t cols) {
    return (cols / 32 + 1) / 2;
}

size_t cq_avx2_i8dec_tok_bytes(uint64_t cols) {
    return cols % 32 ? 0 : pairs_of(cols) * sizeof(pair8);
}

void cq_avx2_i8dec_tok_prepare(void *buf, const float *x, uint64_t cols) {
    const uint64_t G = cols / 32, P = pairs_of(cols);
    pair8 *t = buf;
    const __m256i eo = _mm256_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15, 0, 2,
                                        4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15);
    const __m256i ones8 = _mm256_set1_epi8(1), ones16 = _mm256_set1_epi16(1);
    for (uint64_t p = 0; p < P; p++) {
        float da = 0, db = 0;
        __m256i qa = cq_avx2_quant32(x + 64 * p, &da), qb = _mm256_setzero_si256();
        if (2 * p + 1 < G) qb = cq_avx2_quant32(x + 64 * p + 32, &db); /* else zero padding */
        /* sums of 4 consecutive codes; pairs of them added: lanes [a0-7 a8-15 b0-7 b8-15 |
         * a16-23 a24-31 b16-23 b24-31], put in order by one vpermd */
        __m256i sa = _mm256_madd_epi16(_mm256_maddubs_epi16(ones8, qa), ones16);
        __m256i sb = _mm256_madd_epi16(_mm256_maddubs_epi16(ones8, qb), ones16);
        __m256i c = _mm256_permutevar8x32_epi32(_mm256_hadd_epi32(sa, sb),
                                                _mm256_setr_epi32(0, 1, 4, 5, 2, 3, 6, 7));
        /* each group as [even elements | odd elements] */
        qa = _mm256_permute4x64_epi64(_mm256_shuffle_epi8(qa, eo), _MM_SHUFFLE(3, 1, 2, 0));
        qb = _mm256_permute4x64_epi64(_mm256_shuffle_epi8(qb, eo), _MM_SHUFFLE(3, 1, 2, 0));
        _mm256_store_si256((__m256i *)(void *)t[p].xe, _mm256_permute2x128_si256(qa, qb, 0x20));
        _mm256_store_si256((__m256i *)(void *)t[p].xo, _mm256_permute2x128_si256(qa, qb, 0x31));
        _mm256_store_si256((__m256i *)(void *)t[p].corr, _mm256_slli_epi32(c, 3));
        _mm256_store_ps(t[p].dx, _mm256_set_m128(_mm_set1_ps(db), _mm_set1_ps(da)));
    }
}

/* The rows (kernel_i8dec_avx2_rows.h) with vpmaddubsw; the AVX-VNNI build where the CPU has it. */
static const cq_i8dec_avx2_rows plain =
    CQ_I8DEC_AVX2_ROWS(cq_avx2_i8dec_vbit_rows, cq_avx2_i8dec_vbit_rows_multi);

static const cq_i8dec_avx2_rows *rows_build(void) {
    return cq_cpu_avxvnni() ? &cq_i8dec_avxvnni : &plain;
}

/* the dtype's index in cq_i8dec_avx2_rows; -1: none here */
static int dt_index(cmf_dtype dt) {
    switch (dt) {
    case CMF_DT_Q4_TILED:
        return 0;
    case CMF_DT_Q4_BLOCK:
        return 1;
    case CMF_DT_Q4TP:
        return 2;
    case CMF_DT_VBIT:
    case CMF_DT_VBIT_RO:
        return 3;
    default:
        return -1;
    }
}

bool cq_avx2_i8dec_supports(const cmf_qmat *m) {
    return m->cols % 32 == 0 && dt_index(m->dtype) >= 0;
}

void cq_avx2_i8dec_tok_matvec(const cmf_qmat *m, const void *buf, float *y, uint64_t r0,
                              uint64_t r1) {
    rows_build()->rows[dt_index(m->dtype)](m, buf, y, r0, r1);
}

bool cq_avx2_i8dec_matvec(const cmf_qmat *m, const float *x, float *y, uint64_t r0, uint64_t r1) {
    if (!cq_avx2_i8dec_supports(m)) return false;
    void *tok = cq_kernel_scratch(CQ_SCRATCH_ACT, cq_avx2_i8dec_tok_bytes(m->cols));
    if (!tok) return false;
    cq_avx2_i8dec_tok_prepare(tok, x, m->cols);
    cq_avx2_i8dec_tok_matvec(m, tok, y, r0, r1);
    return true;
}

void cq_avx2_i8dec_tok_matvec_multi(const cmf_qmat *m, const void *const *buf, size_t n,
                                    float *const *y, uint64_t r0, uint64_t r1) {
    if (n == 1) {
        cq_avx2_i8dec_tok_matvec(m, buf[0], y[0], r0, r1);
        return;
    }
    const pair8 *tok[CMF_TOK8_MULTI_MAX];
    for (size_t j = 0; j < n; j++)
        tok[j] = buf[j];
    rows_build()->multi[dt_index(m->dtype)](m, tok, n, y, r0, r1);
}
