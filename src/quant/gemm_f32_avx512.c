/* gemm_f32_avx512.c - batched products (prefill) for the float weight dtypes (f32, f16, bf16)
 * with AVX-512: the panel scheme of gemm_f32_avx2.c in 512-bit vectors.
 *
 * A 32-row panel is converted to f32 once per call and transposed so that two 64-byte vectors
 * hold column k of its 32 rows; the tokens' activations are regrouped 12 tokens at a time so that
 * column k of those tokens sits in 12 consecutive floats. The micro-kernel is 32 rows x 12
 * tokens: per column two panel loads, twelve broadcasts and 24 FMAs into 24 accumulators, so
 * two FMA ports need 1.08 loads per cycle (16 rows x 12 tokens needed 13 loads per 12 FMAs and
 * ran at 62-77 % of the 2-port FMA roof, 32 x 12 at 81-91 %, one thread of an Intel Xeon). The
 * columns go in blocks of KB so that a block of the panel (16 KiB) stays in L1 while every token
 * group passes over it, the rows in tiles of panels with the blocks outside them
 * (gemm_float_walk.c, shared with the AVX2 tier).
 * Results differ from the scalar tier only by the f32 summation order. */
#include <immintrin.h>
#include <stdlib.h>

#include "quant/gemm_impl.h"
#include "quant/kernel_impl.h"
#include "quant/load_float_avx512.h"
#include "quant/transpose_avx512.h"

#define PH      16            /* rows per half panel: one 16 x 16 transpose */
#define PR      32            /* rows per panel */
#define TG      CQ_FACT_GROUP /* tokens per pass: 24 accumulators + 2 panel vectors + 1 */
#define KB      128           /* columns per block: 16 KiB of panel in f32 */
#define PF_STEP 16 /* columns of the kernel's loop per step of the next block's prefetch */

/* 16 values of row `row`, columns c0 .. c0 + 15 (masked past cols), as f32. */
static inline __m512 load16(const cmf_qmat *m, uint64_t row, uint64_t c0, __mmask16 k) {
    const size_t es = m->dtype == CMF_DT_F32 ? 4 : 2;
    return cq_load16_float(m->dtype, m->data + (row * m->cols + c0) * es, k);
}

/* Rows [r, r + nr) of W, columns [k0, k0 + kw) (kw % 16 == 0), as f32, transposed:
 * panel[k * 32 + i] = W[r + i][k0 + k] (zero past cols and for rows past nr). */
static void pack_panel(const cmf_qmat *m, uint64_t r, unsigned nr, size_t k0, size_t kw,
                       float *panel) {
    const uint64_t C = m->cols;
    for (size_t c0 = k0; c0 < k0 + kw; c0 += 16) {
        __mmask16 k = C - c0 >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (C - c0)) - 1);
        for (unsigned h = 0; h < PR; h += PH) {
            __m512i v[PH];
#pragma GCC unroll 16
            for (unsigned i = 0; i < PH; i++) /* rows past nr: a load of nothing, zeros */
                v[i] = _mm512_castps_si512(
                    load16(m, r + (h + i < nr ? h + i : 0), c0, h + i < nr ? k : 0));
            cq_transpose16_store_at(v, panel + (c0 - k0) * PR + h, PR * sizeof(float));
        }
    }
}

/* The 16 columns' 12 tokens of blk (blk[16 j + t]) as the 12 whole vectors they fill in xg
 * (float 12 j + t), streamed: per 4 columns, three vectors, each the tail of one column's
 * tokens and the head of the next's. */
static void stream_columns(const float *blk, float *xg) {
    const __m512i i0 = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 16, 17, 18, 19),
                  i1 = _mm512_setr_epi32(4, 5, 6, 7, 8, 9, 10, 11, 16, 17, 18, 19, 20, 21, 22, 23),
                  i2 = _mm512_setr_epi32(8, 9, 10, 11, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26,
                                         27);
    for (size_t j = 0; j < 16; j += 4) {
        __m512 a = _mm512_load_ps(blk + 16 * j), b = _mm512_load_ps(blk + 16 * (j + 1)),
               c = _mm512_load_ps(blk + 16 * (j + 2)), d = _mm512_load_ps(blk + 16 * (j + 3));
        float *o = xg + j * TG;
        _mm512_stream_ps(o, _mm512_permutex2var_ps(a, i0, b));
        _mm512_stream_ps(o + 16, _mm512_permutex2var_ps(b, i1, c));
        _mm512_stream_ps(o + 32, _mm512_permutex2var_ps(c, i2, d));
    }
}

/* Activations of tokens [TG g, TG g + TG) regrouped: xg[k * TG + t] (zero past n and cols),
 * 16 columns at a time through one 16 x 16 transpose (the 12 tokens' rows and 4 zero rows).
 * Every thread regroups the whole batch, and element by element this was 4 % of an f16
 * prefill profile. With `stream` (gemm_impl.h) the 16 columns are 12 whole lines. */
void cq_fact_group_avx512(const float *X, size_t n, size_t ldx, uint64_t C, size_t kp16, size_t g,
                          float *xg, bool stream) {
    _Static_assert(TG == 12, "stream_columns packs 12 tokens per column");
    size_t t0 = g * TG, nt = n - t0 < TG ? n - t0 : TG;
    _Alignas(64) float blk[16 * 16];
    for (size_t c0 = 0; c0 < kp16; c0 += 16) {
        __mmask16 k = C - c0 >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (C - c0)) - 1);
        __m512i r[16];
        for (size_t t = 0; t < 16; t++)
            r[t] = t < nt ? _mm512_castps_si512(_mm512_maskz_loadu_ps(k, X + (t0 + t) * ldx + c0))
                          : _mm512_setzero_si512();
        cq_transpose16_store(r, blk); /* blk[16 j + t] = token t, column c0 + j */
        if (stream) {
            stream_columns(blk, xg + c0 * TG);
            continue;
        }
        for (size_t j = 0; j < 16; j++)
            _mm512_mask_storeu_ps(xg + (c0 + j) * TG, (__mmask16)((1u << TG) - 1),
                                  _mm512_load_ps(blk + 16 * j));
    }
}

/* acc[t * 32 + i] = (add: acc +) the products of panel row i and token t over the kw columns of
 * the block, with `lines` of the next block prefetched along the way. The sums start from the
 * tile's buffer and go back to it: a separate block sum added there afterwards was 1.8 % of an
 * f16 prefill profile. */
static inline __attribute__((always_inline)) void panel_tokens(const float *panel, const float *xg,
                                                               size_t kw, const int T, float *acc,
                                                               bool add, cq_next_block *pf,
                                                               size_t lines) {
    __m512 a0[TG], a1[TG];
#pragma GCC unroll 12
    for (int t = 0; t < T; t++) {
        a0[t] = add ? _mm512_load_ps(acc + PR * t) : _mm512_setzero_ps();
        a1[t] = add ? _mm512_load_ps(acc + PR * t + PH) : _mm512_setzero_ps();
    }
    const size_t steps = (kw + PF_STEP - 1) / PF_STEP, per = (lines + steps - 1) / steps;
    for (size_t k0 = 0; k0 < kw; k0 += PF_STEP) {
        cq_next_block_fetch(pf, per);
        for (size_t k = k0, ke = kw - k0 < PF_STEP ? kw : k0 + PF_STEP; k < ke; k++) {
            __m512 w0 = _mm512_load_ps(panel + PR * k), w1 = _mm512_load_ps(panel + PR * k + PH);
            const float *x = xg + k * TG;
#pragma GCC unroll 12
            for (int t = 0; t < T; t++) {
                __m512 b = _mm512_set1_ps(x[t]);
                a0[t] = _mm512_fmadd_ps(w0, b, a0[t]);
                a1[t] = _mm512_fmadd_ps(w1, b, a1[t]);
            }
        }
    }
#pragma GCC unroll 12
    for (int t = 0; t < T; t++) {
        _mm512_store_ps(acc + PR * t, a0[t]);
        _mm512_store_ps(acc + PR * t + PH, a1[t]);
    }
}

#define DEF_TOKENS(T)                                                                              \
    static void tokens_##T(const float *p, const float *xg, size_t kw, float *acc, bool add,       \
                           cq_next_block *pf, size_t lines) {                                      \
        panel_tokens(p, xg, kw, T, acc, add, pf, lines);                                           \
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

static const cq_float_tokens_fn tokens_by_count[TG + 1] = {
    NULL,     tokens_1, tokens_2, tokens_3,  tokens_4,  tokens_5, tokens_6,
    tokens_7, tokens_8, tokens_9, tokens_10, tokens_11, tokens_12};

/* One token's outputs for `rows` rows of a row tile: y[0 .. rows) from the panels' sums, panel
 * p's 32 at o + p * stride, as one run. */
static void store_row(const float *o, size_t stride, float *y, uint64_t rows) {
    for (uint64_t i = 0; i < rows; i += PR, o += stride) {
        uint64_t left = rows - i;
        __mmask16 m0 = left >= PH ? (__mmask16)0xFFFF : (__mmask16)((1u << left) - 1);
        __mmask16 m1 = left >= PR  ? (__mmask16)0xFFFF
                       : left > PH ? (__mmask16)((1u << (left - PH)) - 1)
                                   : (__mmask16)0;
        _mm512_mask_storeu_ps(y + i, m0, _mm512_load_ps(o));
        _mm512_mask_storeu_ps(y + i + PH, m1, _mm512_load_ps(o + PH));
    }
}

/* Group g of the n tokens: TG each, the last what is left. */
static void group_span(size_t n, size_t g, size_t *t0, size_t *cnt) {
    *t0 = g * TG;
    *cnt = n - *t0 < TG ? n - *t0 : TG;
}

static const cq_float_tier k_tier = {PR,        TG,        KB, pack_panel, tokens_by_count,
                                     store_row, group_span};

bool cq_gemm_float_rows_avx512(const cmf_qmat *m, const float *xg, size_t n, float *Y, size_t ldy,
                               uint64_t r0, uint64_t r1) {
    const size_t kp = CQ_FACT_COLS(m->cols);
    const cq_float_walk w = {&k_tier, m, xg, n, kp * TG, kp};
    return cq_float_walk_run(&w, Y, ldy, r0, r1);
}

bool cq_gemm_float_avx512(const cmf_qmat *m, const float *X, size_t n, size_t ldx, float *Y,
                          size_t ldy, uint64_t r0, uint64_t r1) {
    const size_t kp16 = CQ_FACT_COLS(m->cols), groups = (n + TG - 1) / TG;
    float *xg = cq_kernel_scratch(CQ_SCRATCH_ACT, groups * kp16 * TG * sizeof(float));
    if (!xg) return false;
    for (size_t g = 0; g < groups; g++)
        cq_fact_group_avx512(X, n, ldx, m->cols, kp16, g, xg + g * kp16 * TG, false);
    return cq_gemm_float_rows_avx512(m, xg, n, Y, ldy, r0, r1);
}
