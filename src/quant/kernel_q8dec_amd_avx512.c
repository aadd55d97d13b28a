/* kernel_q8dec_amd_avx512.c - q8_row's one-token rows for AMD's AVX-512 cores (cq_avx512_q8_amd):
 * the AVX2 tier's rows (kernel_q8dec_avx2.c) with their integer step done by a 256-bit
 * vpdpbusd, so the same bits as that tier.
 *
 * On Zen 4 the AVX2 rows (2 rows side by side, 32 weights a step) read a thread's weights from
 * DRAM 10-25 % faster than the VNNI rows of kernel_i8_avx512.c (4 rows, 64 weights a step), but
 * with several tokens they are the slower ones: vpsignb, vpmaddubsw and vpmaddwd per token and
 * group where the VNNI rows share one weight vector among the tokens' vpdpbusd. Here the token's
 * codes are stored as x + 128 (unsigned, as vpdpbusd takes them), and each group's sums start
 * from -128 times its weights' sum, computed once for all the tokens: vpdpbusd then gives the
 * exact int32 sums of w * x per 4 columns that the AVX2 rows get, and the conversion, the FMA by
 * the token's scale, the two accumulators per row and the reduction are theirs, in their order. */
#include <immintrin.h>

#include "quant/hsum_avx2.h"
#include "quant/kernel_i8dec.h"
#include "quant/kernel_impl.h"

#define AI    static inline __attribute__((always_inline))
#define MULTI 4

/* The AVX2 tier's token (cq_avx2_q8dec_tok_prepare), its codes then moved to x + 128. */
void cq_amd_q8dec_tok_prepare(void *buf, const float *x, uint64_t cols) {
    cq_avx2_q8dec_tok_prepare(buf, x, cols);
    const __m256i flip = _mm256_set1_epi8((char)0x80);
    for (uint64_t i = 0; i < cols; i += 32) {
        __m256i *p = (__m256i *)(void *)((uint8_t *)buf + i);
        _mm256_store_si256(p, _mm256_xor_si256(_mm256_load_si256(p), flip));
    }
}

AI __m256i row_group(const cmf_qmat *m, uint64_t r, uint64_t g) {
    return _mm256_loadu_si256((const __m256i *)(const void *)(m->quants + r * m->cols + 32 * g));
}

/* -128 times the sum of each 4 weights of w: where a group's sums start */
AI __m256i start_of(__m256i w) {
    return _mm256_sub_epi32(
        _mm256_setzero_si256(),
        _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_set1_epi8((char)0x80), w));
}

/* Group g of the token (codes u = x + 128, scales dx) against its weights w, added to acc. */
AI __m256 group_fma(const uint8_t *u, const float *dx, uint64_t g, __m256i w, __m256i start,
                    __m256 acc) {
    __m256i x = _mm256_load_si256((const __m256i *)(const void *)(u + 32 * g));
    __m256i s = _mm256_dpbusd_epi32(start, x, w);
    return _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_broadcast_ss(dx + g), acc);
}

AI __m256 row_scale(const cmf_qmat *m, uint64_t r, __m256 acc) {
    return _mm256_mul_ps(acc, _mm256_set1_ps(_cvtsh_ss(ld_u16(m->scales + 2 * r))));
}

/* Rows r .. r + R - 1 (R <= 2) for one token: even groups into a, odd ones into b. */
AI void rows_one(const cmf_qmat *m, const uint8_t *u, uint64_t r, const int R, __m256 *v) {
    const uint64_t G = m->cols / 32;
    const float *dx = cq_avx2_q8dec_tok_dx(u, m->cols);
    __m256 a[2], b[2];
    for (int k = 0; k < R; k++)
        a[k] = b[k] = _mm256_setzero_ps();
    uint64_t g = 0;
    for (; g + 2 <= G; g += 2) {
        cq_prefetch_span(m->quants + r * m->cols, (uint64_t)R, 32 * g, (unsigned)R);
        for (int k = 0; k < R; k++) {
            __m256i w0 = row_group(m, r + (uint64_t)k, g),
                    w1 = row_group(m, r + (uint64_t)k, g + 1);
            a[k] = group_fma(u, dx, g, w0, start_of(w0), a[k]);
            b[k] = group_fma(u, dx, g + 1, w1, start_of(w1), b[k]);
        }
    }
    for (int k = 0; k < R; k++) {
        if (g < G) {
            __m256i w0 = row_group(m, r + (uint64_t)k, g);
            a[k] = group_fma(u, dx, g, w0, start_of(w0), a[k]);
        }
        v[k] = row_scale(m, r + (uint64_t)k, _mm256_add_ps(a[k], b[k]));
    }
}

void cq_amd_q8dec_tok_matvec(const cmf_qmat *m, const void *buf, float *y, uint64_t r0,
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

/* Row r for the tokens u[0 .. nt): each group's weights and start computed once. */
AI void row_multi(const cmf_qmat *m, const uint8_t *const *u, const int nt, uint64_t r, __m256 *o) {
    const uint64_t G = m->cols / 32;
    const float *dx[MULTI];
    __m256 a[MULTI], b[MULTI];
    for (int k = 0; k < nt; k++) {
        dx[k] = cq_avx2_q8dec_tok_dx(u[k], m->cols);
        a[k] = b[k] = _mm256_setzero_ps();
    }
    uint64_t g = 0;
    for (; g + 2 <= G; g += 2) {
        cq_prefetch_weights(m->quants + r * m->cols + 32 * g);
        __m256i w0 = row_group(m, r, g), w1 = row_group(m, r, g + 1);
        __m256i s0 = start_of(w0), s1 = start_of(w1);
        for (int k = 0; k < nt; k++) {
            a[k] = group_fma(u[k], dx[k], g, w0, s0, a[k]);
            b[k] = group_fma(u[k], dx[k], g + 1, w1, s1, b[k]);
        }
    }
    if (g < G) { /* an odd last group */
        __m256i w0 = row_group(m, r, g), s0 = start_of(w0);
        for (int k = 0; k < nt; k++)
            a[k] = group_fma(u[k], dx[k], g, w0, s0, a[k]);
    }
    for (int k = 0; k < nt; k++)
        o[k] = row_scale(m, r, _mm256_add_ps(a[k], b[k]));
}

AI void rows_multi_nt(const cmf_qmat *m, const uint8_t *const *u, const int nt, float *const *y,
                      uint64_t r0, uint64_t r1) {
    __m256 v[MULTI][8], o[MULTI];
    for (uint64_t b = r0; b < r1;) {
        const unsigned n = r1 - b < 8 ? (unsigned)(r1 - b) : 8;
        for (unsigned k = 0; k < n; k++) {
            row_multi(m, u, nt, b + k, o);
            for (int j = 0; j < nt; j++)
                v[j][k] = o[j];
        }
        for (int j = 0; j < nt; j++)
            cq_rows_store_avx2(v[j], n, y[j] + (b - r0));
        b += n;
    }
}

void cq_amd_q8dec_tok_matvec_multi(const cmf_qmat *m, const void *const *buf, size_t n,
                                   float *const *y, uint64_t r0, uint64_t r1) {
    for (size_t j = 0; j < n; j += MULTI) {
        const size_t nt = n - j < MULTI ? n - j : MULTI;
        const uint8_t *u[MULTI];
        for (size_t k = 0; k < nt; k++)
            u[k] = buf[j + k];
        if (nt == 4)
            rows_multi_nt(m, u, 4, y + j, r0, r1);
        else if (nt == 3)
            rows_multi_nt(m, u, 3, y + j, r0, r1);
        else if (nt == 2)
            rows_multi_nt(m, u, 2, y + j, r0, r1);
        else
            cq_amd_q8dec_tok_matvec(m, u[0], y[j], r0, r1);
    }
}

bool cq_amd_q8dec_matvec(const cmf_qmat *m, const float *x, float *y, uint64_t r0, uint64_t r1) {
    if (!cq_avx2_q8dec_supports(m)) return false;
    if (r0 >= r1) return true;
    void *tok = cq_kernel_scratch(CQ_SCRATCH_ACT, cq_avx2_q8dec_tok_bytes(m->cols));
    if (!tok) return false;
    cq_amd_q8dec_tok_prepare(tok, x, m->cols);
    cq_amd_q8dec_tok_matvec(m, tok, y, r0, r1);
    return true;
}
