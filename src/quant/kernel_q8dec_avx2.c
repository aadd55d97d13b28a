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
 * A row's sum is two accumulators (even and odd groups) added, scaled by the row's factor and
 * reduced 8 rows together (cq_rows_store_avx2); one token steps 2 rows side by side (4 FMA
 * chains; 4 rows ran faster in cache but read DRAM 5-8 % slower, 1 row slower either way),
 * several tokens take each row alone with two accumulators per token. Either way every (row,
 * token) gets the same bits. */
#include <immintrin.h>

#include "quant/hsum_avx2.h"
#include "quant/kernel_i8dec.h"
#include "quant/kernel_impl.h"
#include "quant/quant32_avx2.h"

#define AI static inline __attribute__((always_inline))

/* The prepared token: the codes, 32 bytes a group, then each group's dx (a float a group) and
 * -8 times the sum of its codes (an int32 a group, the 4-bit lanes' offset correction,
 * lanes_avx2.c), padded to 64 bytes (the 4-bit class's token follows it in a cmf_tok8
 * buffer). (dx repeated over 8 lanes, so that the FMA could read it from memory, doubled the
 * token and read the Qwen2.5-0.5B shape's weights 10 % slower from DRAM.) */
size_t cq_avx2_q8dec_tok_bytes(uint64_t cols) {
    return cols % 32 ? 0 : (cols / 32 * (32 + sizeof(float) + sizeof(int32_t)) + 63) / 64 * 64;
}

AI const float *tok_dx(const int8_t *tok, uint64_t cols) {
    return cq_avx2_q8dec_tok_dx(tok, cols);
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

/* Group g's product with its 32 weights w (|w| in aw), as floats scaled by dx, added to acc. */
AI __m256 group_fma(const int8_t *xq, const float *dx, uint64_t g, __m256i w, __m256i aw,
                    __m256 acc) {
    __m256i x = _mm256_load_si256((const __m256i *)(const void *)(xq + 32 * g));
    __m256i p = _mm256_maddubs_epi16(aw, _mm256_sign_epi8(x, w));
    __m256i s = _mm256_madd_epi16(p, _mm256_set1_epi16(1));
    return _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_broadcast_ss(dx + g), acc);
}

AI __m256i row_group(const cmf_qmat *m, uint64_t r, uint64_t g) {
    return _mm256_loadu_si256((const __m256i *)(m->quants + r * m->cols + 32 * g));
}

AI __m256 row_scale(const cmf_qmat *m, uint64_t r, __m256 acc) {
    return _mm256_mul_ps(acc, _mm256_set1_ps(_cvtsh_ss(ld_u16(m->scales + 2 * r))));
}

/* Rows r .. r + R - 1 (R <= 2) for one token, into v[0 .. R): per row two accumulators, the
 * even groups into a, the odd ones into b (two FMA chains), then (a + b) scaled. */
AI void rows_one(const cmf_qmat *m, const int8_t *xq, uint64_t r, const int R, __m256 *v) {
    const uint64_t G = m->cols / 32;
    const float *dx = tok_dx(xq, m->cols);
    __m256 a[2], b[2];
    for (int k = 0; k < R; k++)
        a[k] = b[k] = _mm256_setzero_ps();
    uint64_t g = 0;
    for (; g + 2 <= G; g += 2) {
        cq_prefetch_span(m->quants + r * m->cols, (uint64_t)R, 32 * g, (unsigned)R);
        for (int k = 0; k < R; k++) {
            __m256i w0 = row_group(m, r + (uint64_t)k, g),
                    w1 = row_group(m, r + (uint64_t)k, g + 1);
            a[k] = group_fma(xq, dx, g, w0, _mm256_abs_epi8(w0), a[k]);
            b[k] = group_fma(xq, dx, g + 1, w1, _mm256_abs_epi8(w1), b[k]);
        }
    }
    for (int k = 0; k < R; k++) {
        if (g < G) {
            __m256i w0 = row_group(m, r + (uint64_t)k, g);
            a[k] = group_fma(xq, dx, g, w0, _mm256_abs_epi8(w0), a[k]);
        }
        v[k] = row_scale(m, r + (uint64_t)k, _mm256_add_ps(a[k], b[k]));
    }
}

void cq_avx2_q8dec_tok_matvec(const cmf_qmat *m, const void *buf, float *y, uint64_t r0,
                              uint64_t r1) {
    __m256 v[8];
    for (uint64_t b = r0; b < r1;) {
        const unsigned n = r1 - b < 8 ? (unsigned)(r1 - b) : 8;
        unsigned k = 0;
        for (; k + 2 <= n; k += 2)
            rows_one(m, buf, b + k, 2, v + k);
        for (; k < n; k++)
            rows_one(m, buf, b + k, 1, v + k);
        cq_rows_store_avx2(v, n, y + (b - r0));
        b += n;
    }
}

/* ---- several prepared tokens over the same rows (cmf_matvec_tok8_multi) ---- */
#define MULTI 4

/* Row r for tokens xq[0 .. nt), nt <= MULTI a constant where inlined: each pair of groups'
 * weights and their magnitudes loaded once, each token's two accumulators as rows_one. */
AI void row_multi(const cmf_qmat *m, const int8_t *const *xq, const int nt, uint64_t r, __m256 *o) {
    const uint64_t G = m->cols / 32;
    const float *dx[MULTI];
    __m256 a[MULTI], b[MULTI];
    for (int k = 0; k < nt; k++) {
        dx[k] = tok_dx(xq[k], m->cols);
        a[k] = b[k] = _mm256_setzero_ps();
    }
    uint64_t g = 0;
    for (; g + 2 <= G; g += 2) {
        cq_prefetch_weights(m->quants + r * m->cols + 32 * g);
        __m256i w0 = row_group(m, r, g), w1 = row_group(m, r, g + 1);
        __m256i a0 = _mm256_abs_epi8(w0), a1 = _mm256_abs_epi8(w1);
        for (int k = 0; k < nt; k++) {
            a[k] = group_fma(xq[k], dx[k], g, w0, a0, a[k]);
            b[k] = group_fma(xq[k], dx[k], g + 1, w1, a1, b[k]);
        }
    }
    if (g < G) { /* an odd last group */
        __m256i w0 = row_group(m, r, g), a0 = _mm256_abs_epi8(w0);
        for (int k = 0; k < nt; k++)
            a[k] = group_fma(xq[k], dx[k], g, w0, a0, a[k]);
    }
    for (int k = 0; k < nt; k++)
        o[k] = row_scale(m, r, _mm256_add_ps(a[k], b[k]));
}

AI void rows_multi_nt(const cmf_qmat *m, const int8_t *const *xq, const int nt, float *const *y,
                      uint64_t r0, uint64_t r1) {
    __m256 v[MULTI][8], o[MULTI];
    for (uint64_t b = r0; b < r1;) {
        const unsigned n = r1 - b < 8 ? (unsigned)(r1 - b) : 8;
        for (unsigned k = 0; k < n; k++) {
            row_multi(m, xq, nt, b + k, o);
            for (int j = 0; j < nt; j++)
                v[j][k] = o[j];
        }
        for (int j = 0; j < nt; j++)
            cq_rows_store_avx2(v[j], n, y[j] + (b - r0));
        b += n;
    }
}

void cq_avx2_q8dec_tok_matvec_multi(const cmf_qmat *m, const void *const *buf, size_t n,
                                    float *const *y, uint64_t r0, uint64_t r1) {
    for (size_t j = 0; j < n; j += MULTI) {
        const size_t nt = n - j < MULTI ? n - j : MULTI;
        const int8_t *xq[MULTI];
        for (size_t k = 0; k < nt; k++)
            xq[k] = buf[j + k];
        if (nt == 4)
            rows_multi_nt(m, xq, 4, y + j, r0, r1);
        else if (nt == 3)
            rows_multi_nt(m, xq, 3, y + j, r0, r1);
        else if (nt == 2)
            rows_multi_nt(m, xq, 2, y + j, r0, r1);
        else
            cq_avx2_q8dec_tok_matvec(m, xq[0], y[j], r0, r1);
    }
}

bool cq_avx2_q8dec_supports(const cmf_qmat *m) {
    return m->dtype == CMF_DT_Q8_ROW && m->cols % 32 == 0;
}

bool cq_avx2_q8dec_matvec(const cmf_qmat *m, const float *x, float *y, uint64_t r0, uint64_t r1) {
    if (!cq_avx2_q8dec_supports(m)) return false;
    if (r0 >= r1) return true;
    void *tok = cq_kernel_scratch(CQ_SCRATCH_ACT, cq_avx2_q8dec_tok_bytes(m->cols));
    if (!tok) return false;
    cq_avx2_q8dec_tok_prepare(tok, x, m->cols);
    cq_avx2_q8dec_tok_matvec(m, tok, y, r0, r1);
    return true;
}
