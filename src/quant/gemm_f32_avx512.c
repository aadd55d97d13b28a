/* gemm_f32_avx512.c - batched products (prefill) for the float weight dtypes (f32, f16, bf16)
 * with AVX-512: the same panel scheme as the integer GEMM, in f32.
 *
 * Each 16-row panel is converted to f32 once and transposed so that one 64-byte vector holds
 * column k of all 16 rows; the tokens' activations are regrouped 12 tokens at a time so that
 * column k of those tokens sits in 12 consecutive floats. The inner step is then one panel load
 * and 12 FMAs, each with an activation broadcast straight from memory: FMA-bound, every weight
 * converted once per call instead of once per token. Results differ from the scalar tier only by
 * the f32 summation order (one running sum per row and token, columns in order). */
#include <immintrin.h>
#include <stdlib.h>

#include "quant/gemm_impl.h"
#include "quant/kernel_impl.h"
#include "quant/transpose_avx512.h"

#define PR 16            /* rows per panel */
#define TG CQ_FACT_GROUP /* tokens per pass: 12 accumulators + the panel vector */

/* 16 values of row `row`, columns c0 .. c0 + 15 (masked past cols), as f32. */
static inline __m512 load16(const cmf_qmat *m, uint64_t row, uint64_t c0, __mmask16 k) {
    const uint8_t *base = m->data;
    uint64_t e = row * m->cols + c0;
    switch (m->dtype) {
    case CMF_DT_F32:
        return _mm512_maskz_loadu_ps(k, (const float *)(const void *)base + e);
    case CMF_DT_F16:
        return _mm512_cvtph_ps(
            _mm256_maskz_loadu_epi16(k, (const uint16_t *)(const void *)base + e));
    default: /* bf16: the high half of an f32 */
        return _mm512_castsi512_ps(
            _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(
                                  k, (const uint16_t *)(const void *)base + e)),
                              16));
    }
}

/* Rows [r, r + nr) of W as f32, transposed: panel[k * 16 + i] = W[r + i][k], k < kp16 (zero past
 * cols and for rows past nr). The next panel's nn rows (es bytes per weight) are prefetched
 * column by column as this one is read (cq_prefetch_panel_rows). */
static void pack_panel(const cmf_qmat *m, uint64_t r, unsigned nr, size_t kp16, float *panel,
                       unsigned nn, size_t es) {
    const uint64_t C = m->cols;
    const uint8_t *next = nn ? m->data + (r + PR) * C * es : NULL; /* the next panel's row 0 */
    for (size_t c0 = 0; c0 < kp16; c0 += 16) {
        if ((c0 * es) % 64 == 0) cq_prefetch_panel_rows(next, nn, C * es, c0 * es);
        __mmask16 k = C - c0 >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (C - c0)) - 1);
        __m512i v[16];
#pragma GCC unroll 16
        for (unsigned i = 0; i < PR; i++)
            v[i] = _mm512_castps_si512(load16(m, r + (i < nr ? i : 0), c0, i < nr ? k : 0));
        cq_transpose16_store(v, panel + c0 * 16);
    }
}

/* Activations of tokens [TG g, TG g + TG) regrouped: xg[k * TG + t] (zero past n and cols),
 * 16 columns at a time through one 16 x 16 transpose (the 12 tokens' rows and 4 zero rows).
 * Every thread regroups the whole batch, and element by element this was 4 % of an f16
 * prefill profile. */
void cq_fact_group_avx512(const float *X, size_t n, size_t ldx, uint64_t C, size_t kp16, size_t g,
                          float *xg) {
    size_t t0 = g * TG, nt = n - t0 < TG ? n - t0 : TG;
    _Alignas(64) float blk[16 * 16];
    for (size_t c0 = 0; c0 < kp16; c0 += 16) {
        __mmask16 k = C - c0 >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (C - c0)) - 1);
        __m512i r[16];
        for (size_t t = 0; t < 16; t++)
            r[t] = t < nt ? _mm512_castps_si512(_mm512_maskz_loadu_ps(k, X + (t0 + t) * ldx + c0))
                          : _mm512_setzero_si512();
        cq_transpose16_store(r, blk); /* blk[16 j + t] = token t, column c0 + j */
        for (size_t j = 0; j < 16; j++)
            _mm512_mask_storeu_ps(xg + (c0 + j) * TG, (__mmask16)((1u << TG) - 1),
                                  _mm512_load_ps(blk + 16 * j));
    }
}

static inline __attribute__((always_inline)) void panel_tokens(const float *panel, const float *xg,
                                                               size_t kp16, const int T, float *Y,
                                                               size_t ldy, __mmask16 mask) {
    __m512 acc[TG];
    for (int t = 0; t < T; t++)
        acc[t] = _mm512_setzero_ps();
    for (size_t k = 0; k < kp16; k++) {
        __m512 w = _mm512_load_ps(panel + 16 * k);
        const float *x = xg + k * TG;
        for (int t = 0; t < T; t++)
            acc[t] = _mm512_fmadd_ps(w, _mm512_set1_ps(x[t]), acc[t]);
    }
    for (int t = 0; t < T; t++)
        _mm512_mask_storeu_ps(Y + (size_t)t * ldy, mask, acc[t]);
}

#define DEF_TOKENS(T)                                                                              \
    static void tokens_##T(const float *p, const float *xg, size_t kp16, float *Y, size_t ldy,     \
                           __mmask16 mask) {                                                       \
        panel_tokens(p, xg, kp16, T, Y, ldy, mask);                                                \
    }
DEF_TOKENS(1)
DEF_TOKENS(2)
DEF_TOKENS(3)
DEF_TOKENS(4)
DEF_TOKENS(5)
DEF_TOKENS(6)
DEF_TOKENS(7)
DEF_TOKENS(8)
DEF_TOKENS(9)
DEF_TOKENS(10)
DEF_TOKENS(11)
DEF_TOKENS(12)

typedef void (*tokens_fn)(const float *, const float *, size_t, float *, size_t, __mmask16);
static const tokens_fn tokens_by_count[TG + 1] = {
    NULL,     tokens_1, tokens_2, tokens_3,  tokens_4,  tokens_5, tokens_6,
    tokens_7, tokens_8, tokens_9, tokens_10, tokens_11, tokens_12};

bool cq_gemm_float_rows_avx512(const cmf_qmat *m, const float *xg, size_t n, float *Y, size_t ldy,
                               uint64_t r0, uint64_t r1) {
    const size_t kp16 = CQ_FACT_COLS(m->cols), groups = (n + TG - 1) / TG;
    float *panel = cq_kernel_scratch(CQ_SCRATCH_AUX, kp16 * PR * sizeof(float));
    if (!panel) return false;
    const size_t es = m->dtype == CMF_DT_F32 ? 4 : 2;
    for (uint64_t r = r0; r < r1; r += PR) {
        unsigned nr = r1 - r < PR ? (unsigned)(r1 - r) : PR;
        pack_panel(m, r, nr, kp16, panel, cq_next_panel_rows(r, r1, PR), es);
        __mmask16 mask = (__mmask16)((1u << nr) - 1);
        for (size_t g = 0; g < groups; g++) {
            size_t cnt = n - g * TG < TG ? n - g * TG : TG;
            tokens_by_count[cnt](panel, xg + g * kp16 * TG, kp16, Y + g * TG * ldy + (r - r0), ldy,
                                 mask);
        }
    }
    return true;
}

bool cq_gemm_float_avx512(const cmf_qmat *m, const float *X, size_t n, size_t ldx, float *Y,
                          size_t ldy, uint64_t r0, uint64_t r1) {
    const size_t kp16 = CQ_FACT_COLS(m->cols), groups = (n + TG - 1) / TG;
    float *xg = cq_kernel_scratch(CQ_SCRATCH_ACT, groups * kp16 * TG * sizeof(float));
    if (!xg) return false;
    for (size_t g = 0; g < groups; g++)
        cq_fact_group_avx512(X, n, ldx, m->cols, kp16, g, xg + g * kp16 * TG);
    return cq_gemm_float_rows_avx512(m, xg, n, Y, ldy, r0, r1);
}
