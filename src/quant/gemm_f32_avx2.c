/* gemm_f32_avx2.c - batched products (prefill) for the float weight dtypes (f32, f16, bf16)
 * with AVX2 + FMA + F16C: the panel scheme of gemm_f32_avx512.c sized for 16 ymm registers.
 *
 * A 16-row panel is converted to f32 once per call and transposed so that two 32-byte vectors
 * hold column k of its 16 rows; the tokens' activations are regrouped 6 tokens at a time so that
 * column k of those tokens sits in 6 consecutive floats. The micro-kernel is 16 rows x 6 tokens:
 * per column two panel loads, six broadcasts from memory and twelve FMAs into twelve
 * accumulators (15 of the 16 registers), so 2 FMAs per cycle need 1.33 loads per cycle, within
 * the two load ports (8 rows x 12 tokens would need 13 loads per 12 FMAs: load-bound).
 * The columns are walked in blocks of KB so that a block of the panel (16 KiB) stays in L1
 * while every token group passes over it, and the rows in tiles of panels with the blocks
 * outside them (gemm_float_walk.c, shared with the AVX-512 tier).
 * Results differ from the scalar tier only by the f32 summation order. */
#include <immintrin.h>
#include <string.h>

#include "quant/gemm_impl.h"
#include "quant/kernel_impl.h"
#include "quant/load_float_avx2.h"

#define PR      16  /* rows per panel */
#define TG      6   /* tokens per pass: 12 accumulators + 2 panel vectors + 1 broadcast */
#define KB      256 /* columns per block: 16 KiB of panel in f32 */
#define PF_STEP 32  /* columns of the kernel's loop per step of the next block's prefetch */
_Static_assert(TG == CQ_FACT2_GROUP, "the prepared groups are the kernel's passes");

/* Columns c .. c + 7 of row `row` (es bytes per weight) as f32; past cols: zero. */
static inline __attribute__((always_inline)) __m256 load8(cmf_dtype dt, const cmf_qmat *m,
                                                          uint64_t row, uint64_t c, size_t es) {
    const uint64_t C = m->cols;
    const uint8_t *p = m->data + (row * C + c) * es;
    if (C - c >= 8) return cq_load8_float(dt, p);
    _Alignas(32) uint8_t tail[32] = {0}; /* the last, partial step */
    memcpy(tail, p, (size_t)(C - c) * es);
    return cq_load8_float(dt, tail);
}

/* The 8 x 8 transpose: on return r[j] lane i = r[i] lane j on entry. */
static inline void transpose8(__m256 r[8]) {
    __m256 t[8], s[8];
    for (int i = 0; i < 8; i += 2) {
        t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
    }
    for (int i = 0; i < 8; i += 4) {
        s[i] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(1, 0, 1, 0));
        s[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(3, 2, 3, 2));
        s[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(1, 0, 1, 0));
        s[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(3, 2, 3, 2));
    }
    for (int j = 0; j < 4; j++) {
        r[j] = _mm256_permute2f128_ps(s[j], s[j + 4], 0x20);
        r[j + 4] = _mm256_permute2f128_ps(s[j], s[j + 4], 0x31);
    }
}

/* Rows [r, r + nr) of W, columns [k0, k0 + kw) (kw % 8 == 0), as f32, transposed:
 * panel[k * 16 + i] = W[r + i][k0 + k] (zero past cols and for rows past nr). One copy per
 * dtype, so that the conversion is chosen once per panel, not per load. */
static inline __attribute__((always_inline)) void pack_panel_dt(cmf_dtype dt, const cmf_qmat *m,
                                                                uint64_t r, unsigned nr, size_t k0,
                                                                size_t kw, float *panel,
                                                                size_t es) {
    const uint64_t C = m->cols;
    for (size_t c = k0; c < k0 + kw; c += 8) {
        float *dst = panel + (c - k0) * PR;
        const bool whole = nr == PR && C - c >= 8; /* the common step: no row or column test */
        for (unsigned h = 0; h < PR; h += 8) {     /* rows 0..7, then 8..15 */
            __m256 v[8];
            if (whole)
                for (unsigned i = 0; i < 8; i++)
                    v[i] = cq_load8_float(dt, m->data + ((r + h + i) * C + c) * es);
            else
                for (unsigned i = 0; i < 8; i++)
                    v[i] = h + i < nr ? load8(dt, m, r + h + i, c, es) : _mm256_setzero_ps();
            transpose8(v);
            for (unsigned j = 0; j < 8; j++)
                _mm256_store_ps(dst + j * PR + h, v[j]);
        }
    }
}

static void pack_panel(const cmf_qmat *m, uint64_t r, unsigned nr, size_t k0, size_t kw,
                       float *panel) {
    switch (m->dtype) {
    case CMF_DT_F32:
        pack_panel_dt(CMF_DT_F32, m, r, nr, k0, kw, panel, 4);
        break;
    case CMF_DT_F16:
        pack_panel_dt(CMF_DT_F16, m, r, nr, k0, kw, panel, 2);
        break;
    default:
        pack_panel_dt(CMF_DT_BF16, m, r, nr, k0, kw, panel, 2);
    }
}

/* Columns j .. j + 3 of a transpose (v[j] lane t = token t, 6 of 8 lanes used) as the 3 whole
 * vectors their 24 floats fill at o, streamed: each the tail of one column and the head of the
 * next. */
static inline void stream_columns4(const __m256 *v, float *o) {
    const __m256i h0 = _mm256_setr_epi32(0, 0, 0, 0, 0, 0, 0, 1),
                  t1 = _mm256_setr_epi32(2, 3, 4, 5, 0, 0, 0, 0),
                  h1 = _mm256_setr_epi32(0, 0, 0, 0, 0, 1, 2, 3),
                  t2 = _mm256_setr_epi32(4, 5, 0, 0, 0, 0, 0, 0),
                  h2 = _mm256_setr_epi32(0, 0, 0, 1, 2, 3, 4, 5);
    _mm256_stream_ps(o, _mm256_blend_ps(v[0], _mm256_permutevar8x32_ps(v[1], h0), 0xC0));
    _mm256_stream_ps(o + 8, _mm256_blend_ps(_mm256_permutevar8x32_ps(v[1], t1),
                                            _mm256_permutevar8x32_ps(v[2], h1), 0xF0));
    _mm256_stream_ps(o + 16, _mm256_blend_ps(_mm256_permutevar8x32_ps(v[2], t2),
                                             _mm256_permutevar8x32_ps(v[3], h2), 0xFC));
}

/* Activations of tokens [t0, t0 + nt) (nt <= TG) regrouped: xg[k * TG + t], k < kp (zero past n
 * and cols), 8 columns at a time through one 8 x 8 transpose. Each column's 8-float store spills
 * 2 floats (zero rows) into the next column's slot, which the next store overwrites; the last
 * one spills 2 floats past the group, into the group's padding (CQ_FACT2_STRIDE). With `stream`
 * (gemm_impl.h) the 8 columns are 3 whole lines instead. */
static void group_acts(const float *X, size_t t0, size_t nt, size_t ldx, uint64_t C, size_t kp,
                       float *xg, bool stream) {
    _Static_assert(TG == 6, "stream_columns4 packs 6 tokens per column");
    for (size_t c = 0; c < kp; c += 8) {
        __m256 v[8];
        for (size_t t = 0; t < 8; t++) {
            if (t >= nt)
                v[t] = _mm256_setzero_ps();
            else if (C - c >= 8)
                v[t] = _mm256_loadu_ps(X + (t0 + t) * ldx + c);
            else {
                _Alignas(32) float tail[8] = {0};
                memcpy(tail, X + (t0 + t) * ldx + c, (size_t)(C - c) * sizeof(float));
                v[t] = _mm256_load_ps(tail);
            }
        }
        transpose8(v);
        if (stream) {
            stream_columns4(v, xg + c * TG);
            stream_columns4(v + 4, xg + (c + 4) * TG);
            continue;
        }
        for (size_t j = 0; j < 8; j++)
            _mm256_storeu_ps(xg + (c + j) * TG, v[j]);
    }
}

/* acc[t * 16 + i] = (add: acc +) the products of panel row i and token t over the kw columns of
 * the block; the sums start from the tile's aligned buffer and go back to it. They reach Y only
 * from there: with the masked stores of Y in the same function, GCC kept the accumulators in
 * memory, storing all twelve every column. */
static inline __attribute__((always_inline)) void panel_tokens(const float *panel, const float *xg,
                                                               size_t kw, const int T, float *acc,
                                                               bool add, cq_next_block *pf,
                                                               size_t lines) {
    __m256 a0[TG], a1[TG];
#pragma GCC unroll 6
    for (int t = 0; t < T; t++) {
        a0[t] = add ? _mm256_load_ps(acc + PR * t) : _mm256_setzero_ps();
        a1[t] = add ? _mm256_load_ps(acc + PR * t + 8) : _mm256_setzero_ps();
    }
    /* `lines` of the next block spread over the steps of PF_STEP columns */
    const size_t steps = (kw + PF_STEP - 1) / PF_STEP, per = (lines + steps - 1) / steps;
    for (size_t k0 = 0; k0 < kw; k0 += PF_STEP) {
        cq_next_block_fetch(pf, per);
        for (size_t k = k0, ke = kw - k0 < PF_STEP ? kw : k0 + PF_STEP; k < ke; k++) {
            __m256 w0 = _mm256_load_ps(panel + PR * k), w1 = _mm256_load_ps(panel + PR * k + 8);
            const float *x = xg + k * TG;
#pragma GCC unroll 6
            for (int t = 0; t < T; t++) {
                __m256 b = _mm256_broadcast_ss(x + t);
                a0[t] = _mm256_fmadd_ps(w0, b, a0[t]);
                a1[t] = _mm256_fmadd_ps(w1, b, a1[t]);
            }
        }
    }
#pragma GCC unroll 6
    for (int t = 0; t < T; t++) {
        _mm256_store_ps(acc + PR * t, a0[t]);
        _mm256_store_ps(acc + PR * t + 8, a1[t]);
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

static const cq_float_tokens_fn tokens_by_count[TG + 1] = {NULL,     tokens_1, tokens_2, tokens_3,
                                                           tokens_4, tokens_5, tokens_6};

/* One token's outputs for `rows` rows of a row tile: y[0 .. rows) from the panels' sums, panel
 * p's 16 at o + p * stride. Written as one run per token: storing each panel's 16 floats into
 * every token's row (one cache line, ldy apart) missed the cache on every line. */
static void store_row(const float *o, size_t stride, float *y, uint64_t rows) {
    uint64_t i = 0;
    for (; i + PR <= rows; i += PR, o += stride) {
        _mm256_storeu_ps(y + i, _mm256_load_ps(o));
        _mm256_storeu_ps(y + i + 8, _mm256_load_ps(o + 8));
    }
    for (unsigned k = 0; i < rows; i++, k++)
        y[i] = o[k];
}

/* Group g of the n tokens: TG tokens each, except that a remainder of 1-3 tokens shares the
 * last two groups (7 = 4 + 3, 8 = 4 + 4, 9 = 5 + 4): with 2 tokens the kernel keeps 4 FMA
 * chains, too few for FMA latency x ports, and ran at about half the rate (a 128-token prefill
 * chunk ends in 2). A token's sums do not depend on its group. */
static void group_span(size_t n, size_t g, size_t *t0, size_t *cnt) {
    size_t groups = (n + TG - 1) / TG, r = n % TG;
    *t0 = g * TG;
    *cnt = n - *t0 < TG ? n - *t0 : TG;
    if (groups < 2 || r == 0 || r > 3 || g + 2 < groups) return;
    size_t pair = TG + r, first = (pair + 1) / 2;
    if (g + 2 == groups)
        *cnt = first;
    else {
        *t0 = (g - 1) * TG + first;
        *cnt = pair - first;
    }
}

size_t cq_fact2_cut(size_t n, size_t t) {
    if (t >= n) return n;
    t = (t + TG - 1) / TG * TG;
    size_t last = (n - 1) / TG * TG, r = n % TG; /* the last group's plain start */
    return t >= n || (t == last && last >= TG && r >= 1 && r <= 3) ? n : t;
}

static const cq_float_tier k_tier = {PR,        TG,        KB, pack_panel, tokens_by_count,
                                     store_row, group_span};

/* Rows [r0, r1) of m over n tokens regrouped in groups (group_span) of stride
 * CQ_FACT2_STRIDE(cols) floats. */
static bool float_rows(const cmf_qmat *m, const float *xg, size_t n, float *Y, size_t ldy,
                       uint64_t r0, uint64_t r1) {
    const cq_float_walk w = {&k_tier, m, xg, n, CQ_FACT2_STRIDE(m->cols), CQ_FACT2_COLS(m->cols)};
    return cq_float_walk_run(&w, Y, ldy, r0, r1);
}

void cq_fact2_group_avx2(const float *X, size_t n, size_t ldx, uint64_t C, size_t g, float *xg,
                         bool stream) {
    size_t t0, cnt;
    group_span(n, g, &t0, &cnt);
    group_acts(X, t0, cnt, ldx, C, CQ_FACT2_COLS(C), xg, stream);
}

bool cq_gemm_float_rows_avx2(const cmf_qmat *m, const float *xg, size_t n, float *Y, size_t ldy,
                             uint64_t r0, uint64_t r1) {
    return float_rows(m, xg, n, Y, ldy, r0, r1);
}

bool cq_gemm_float_avx2(const cmf_qmat *m, const float *X, size_t n, size_t ldx, float *Y,
                        size_t ldy, uint64_t r0, uint64_t r1) {
    const size_t gs = CQ_FACT2_STRIDE(m->cols), groups = (n + TG - 1) / TG;
    float *xg = cq_kernel_scratch(CQ_SCRATCH_ACT, groups * gs * sizeof(float));
    if (!xg) return false;
    for (size_t g = 0; g < groups; g++) {
        size_t t0, cnt;
        group_span(n, g, &t0, &cnt);
        group_acts(X, t0, cnt, ldx, m->cols, CQ_FACT2_COLS(m->cols), xg + g * gs, false);
    }
    return float_rows(m, xg, n, Y, ldy, r0, r1);
}
