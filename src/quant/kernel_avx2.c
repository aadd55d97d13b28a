/* kernel_avx2.c - AVX2 + FMA + F16C tier of the matrix kernels (same structure as the
 * AVX-512 tier: decode 8 or 32 weights into f32 lanes, apply them to up to 4 tokens).
 * Tested against kernel_scalar.c. */
#include <immintrin.h>
#include <stdlib.h>

#include "quant/gemm_vbit_codes.h"
#include "quant/hsum_avx2.h"
#include "quant/kernel_i8dec.h"
#include "quant/kernel_impl.h"
#include "quant/load_float_avx2.h"
#include "quant/q4tp_ladder_avx2.h"

static inline float h16(const uint8_t *p) {
    return _cvtsh_ss(ld_u16(p));
}

static inline float hsum8(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

#define ZERO _mm256_setzero_ps()

/* ======== stream dtypes: f32, f16, bf16, q8_row, q8_2f (any cols) ======== */

#define LD_F32(i)  cq_load8_float(CMF_DT_F32, row + 4 * (i))
#define LD_F16(i)  cq_load8_float(CMF_DT_F16, row + 2 * (i))
#define LD_BF16(i) cq_load8_float(CMF_DT_BF16, row + 2 * (i))
#define LD_Q8(i)                                                                                   \
    _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(row + (i)))))
#define LD_Q8_2F(i)                                                                                \
    _mm256_mul_ps(LD_Q8(i), _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(colf + 2 * (i)))))

/* Scalar weight i, for the cols % 8 tail. */
#define S_F32(i)   f32_from_bits(ld_u32(row + 4 * (i)))
#define S_F16(i)   h16(row + 2 * (i))
#define S_BF16(i)  bf16_to_f32(ld_u16(row + 2 * (i)))
#define S_Q8(i)    ((float)(int8_t)row[i])
#define S_Q8_2F(i) ((float)(int8_t)row[i] * h16(colf + 2 * (i)))

/* PRE runs once per call (q8_2f: defines `colf`); ROW(r) is the first byte of row r, RS(r)
 * the factor applied to its sum. LOADW(i) returns weights i..i+7 of `row`, LOADS(i) weight i
 * (the cols % 8 tail). One token (decode) takes rows 8 at a time, reduced by
 * cq_hsum8x8_avx2 (a horizontal sum per row left the core idle on short rows). Rows of 2- and
 * 4-byte weights are read one after the other with two accumulators each, one sequential
 * stream per thread (Intel guest, CORTIQ_CPU=avx2, from DRAM: f16 +6 to +24 %, Qwen2.5-0.5B-
 * shape f16 decode +20 %; see the AVX-512 tier); 1-byte rows STREAM_ROWS step by step
 * together. */
#define STREAM_KERNEL(NAME, ES, PRE, ROW, RS, LOADW, LOADS)                                        \
    static void NAME(const cmf_qmat *m, const float *X, size_t n, size_t ldx, float *Y,            \
                     size_t ldy, uint64_t r0, uint64_t r1, unsigned flags) {                       \
        (void)flags;                                                                               \
        PRE;                                                                                       \
        const uint64_t C = m->cols, CF = C & ~(uint64_t)7;                                         \
        uint64_t r = r0;                                                                           \
        for (; n == 1 && r + 8 <= r1; r += 8) {                                                    \
            __m256 v[8];                                                                           \
            float tail[8], rsv[8];                                                                 \
            for (uint64_t q = 0; (ES) >= 2 && q < 8; q++) {                                        \
                const uint8_t *row = ROW(r + q);                                                   \
                __m256 a = ZERO, b = ZERO;                                                         \
                uint64_t i = 0;                                                                    \
                /* 32 columns a step, so that each step prefetches whole lines (one 16-column      \
                 * loop with a conditional prefetch: f32 -20 %, f16 -5 % from DRAM) */             \
                for (; i + 32 <= CF; i += 32) {                                                    \
                    for (unsigned pf = 0; 2 * pf < (ES); pf++) /* ES / 2 lines */                  \
                        cq_prefetch_weights(row + ES * i + 64 * pf);                               \
                    a = _mm256_fmadd_ps(LOADW(i), _mm256_loadu_ps(X + i), a);                      \
                    b = _mm256_fmadd_ps(LOADW(i + 8), _mm256_loadu_ps(X + i + 8), b);              \
                    a = _mm256_fmadd_ps(LOADW(i + 16), _mm256_loadu_ps(X + i + 16), a);            \
                    b = _mm256_fmadd_ps(LOADW(i + 24), _mm256_loadu_ps(X + i + 24), b);            \
                }                                                                                  \
                for (; i + 16 <= CF; i += 16) {                                                    \
                    a = _mm256_fmadd_ps(LOADW(i), _mm256_loadu_ps(X + i), a);                      \
                    b = _mm256_fmadd_ps(LOADW(i + 8), _mm256_loadu_ps(X + i + 8), b);              \
                }                                                                                  \
                if (i < CF) a = _mm256_fmadd_ps(LOADW(i), _mm256_loadu_ps(X + i), a);              \
                float s = 0.0f;                                                                    \
                for (uint64_t j = CF; j < C; j++)                                                  \
                    s += LOADS(j) * X[j];                                                          \
                v[q] = _mm256_add_ps(a, b);                                                        \
                tail[q] = s;                                                                       \
                rsv[q] = RS(r + q);                                                                \
            }                                                                                      \
            for (uint64_t q = 0; (ES) < 2 && q < 8; q += STREAM_ROWS) {                            \
                const uint8_t *rowsN[STREAM_ROWS];                                                 \
                __m256 a[STREAM_ROWS], b[STREAM_ROWS];                                             \
                for (unsigned k = 0; k < STREAM_ROWS; k++) {                                       \
                    rowsN[k] = ROW(r + q + k);                                                     \
                    a[k] = b[k] = ZERO;                                                            \
                }                                                                                  \
                uint64_t i = 0;                                                                    \
                for (; i + 16 <= CF; i += 16) {                                                    \
                    __m256 xa = _mm256_loadu_ps(X + i), xb = _mm256_loadu_ps(X + i + 8);           \
                    /* 4 rows x 16 weights: the span's next ES lines */                            \
                    cq_prefetch_span(rowsN[0], STREAM_ROWS, i *(ES), ES);                          \
                    for (unsigned k = 0; k < STREAM_ROWS; k++) {                                   \
                        const uint8_t *row = rowsN[k];                                             \
                        a[k] = _mm256_fmadd_ps(LOADW(i), xa, a[k]);                                \
                        b[k] = _mm256_fmadd_ps(LOADW(i + 8), xb, b[k]);                            \
                    }                                                                              \
                }                                                                                  \
                if (i < CF) {                                                                      \
                    __m256 xa = _mm256_loadu_ps(X + i);                                            \
                    for (unsigned k = 0; k < STREAM_ROWS; k++) {                                   \
                        const uint8_t *row = rowsN[k];                                             \
                        a[k] = _mm256_fmadd_ps(LOADW(i), xa, a[k]);                                \
                    }                                                                              \
                }                                                                                  \
                for (unsigned k = 0; k < STREAM_ROWS; k++) {                                       \
                    const uint8_t *row = rowsN[k];                                                 \
                    float s = 0.0f;                                                                \
                    for (uint64_t j = CF; j < C; j++)                                              \
                        s += LOADS(j) * X[j];                                                      \
                    v[q + k] = _mm256_add_ps(a[k], b[k]);                                          \
                    tail[q + k] = s;                                                               \
                    rsv[q + k] = RS(r + q + k);                                                    \
                }                                                                                  \
            }                                                                                      \
            __m256 y = cq_hsum8x8_avx2(v);                                                         \
            if (CF < C) y = _mm256_add_ps(y, _mm256_loadu_ps(tail));                               \
            _mm256_storeu_ps(Y + (r - r0), _mm256_mul_ps(y, _mm256_loadu_ps(rsv)));                \
        }                                                                                          \
        for (; r < r1; r++) {                                                                      \
            const uint8_t *row = ROW(r);                                                           \
            const float rs = RS(r);                                                                \
            size_t t = 0;                                                                          \
            for (; t + 4 <= n && cq_fits_l1(4, 4 * m->cols); t += 4) {                             \
                const float *x0 = X + t * ldx, *x1 = x0 + ldx, *x2 = x1 + ldx, *x3 = x2 + ldx;     \
                __m256 a0 = ZERO, a1 = ZERO, a2 = ZERO, a3 = ZERO;                                 \
                for (uint64_t i = 0; i < CF; i += 8) {                                             \
                    __m256 w = LOADW(i);                                                           \
                    a0 = _mm256_fmadd_ps(w, _mm256_loadu_ps(x0 + i), a0);                          \
                    a1 = _mm256_fmadd_ps(w, _mm256_loadu_ps(x1 + i), a1);                          \
                    a2 = _mm256_fmadd_ps(w, _mm256_loadu_ps(x2 + i), a2);                          \
                    a3 = _mm256_fmadd_ps(w, _mm256_loadu_ps(x3 + i), a3);                          \
                }                                                                                  \
                float s0 = hsum8(a0), s1 = hsum8(a1), s2 = hsum8(a2), s3 = hsum8(a3);              \
                for (uint64_t i = CF; i < C; i++) {                                                \
                    float w = LOADS(i);                                                            \
                    s0 += w * x0[i];                                                               \
                    s1 += w * x1[i];                                                               \
                    s2 += w * x2[i];                                                               \
                    s3 += w * x3[i];                                                               \
                }                                                                                  \
                Y[(t + 0) * ldy + (r - r0)] = s0 * rs;                                             \
                Y[(t + 1) * ldy + (r - r0)] = s1 * rs;                                             \
                Y[(t + 2) * ldy + (r - r0)] = s2 * rs;                                             \
                Y[(t + 3) * ldy + (r - r0)] = s3 * rs;                                             \
            }                                                                                      \
            for (; t < n; t++) {                                                                   \
                const float *x0 = X + t * ldx;                                                     \
                __m256 a0 = ZERO, a1 = ZERO, a2 = ZERO, a3 = ZERO;                                 \
                uint64_t i = 0;                                                                    \
                for (; i + 32 <= CF; i += 32) {                                                    \
                    for (unsigned pf = 0; pf < ES; pf++)                                           \
                        _mm_prefetch((const char *)row + ES * i + 32 * pf + CQ_PF_DIST,            \
                                     _MM_HINT_T0);                                                 \
                    a0 = _mm256_fmadd_ps(LOADW(i), _mm256_loadu_ps(x0 + i), a0);                   \
                    a1 = _mm256_fmadd_ps(LOADW(i + 8), _mm256_loadu_ps(x0 + i + 8), a1);           \
                    a2 = _mm256_fmadd_ps(LOADW(i + 16), _mm256_loadu_ps(x0 + i + 16), a2);         \
                    a3 = _mm256_fmadd_ps(LOADW(i + 24), _mm256_loadu_ps(x0 + i + 24), a3);         \
                }                                                                                  \
                for (; i < CF; i += 8)                                                             \
                    a0 = _mm256_fmadd_ps(LOADW(i), _mm256_loadu_ps(x0 + i), a0);                   \
                float s0 = hsum8(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));     \
                for (; i < C; i++)                                                                 \
                    s0 += LOADS(i) * x0[i];                                                        \
                Y[t * ldy + (r - r0)] = s0 * rs;                                                   \
            }                                                                                      \
        }                                                                                          \
    }

/* 1-byte rows stepped through together (divides 8): 4 measured ahead of 2 and 8. */
#define STREAM_ROWS    4 /* the prefetch above reads ES lines per step: 4 x 16 x ES bytes */
#define NO_PRE         (void)0
#define COLF_PRE       const uint8_t *colf = m->extra
#define ROW_F32(r)     (m->data + 4 * (r)*C)
#define ROW_F16(r)     (m->data + 2 * (r)*C)
#define ROW_Q8(r)      (m->quants + (r)*C)
#define RS_ONE(r)      1.0f
#define RS_ROWSCALE(r) h16(m->scales + 2 * (r))
STREAM_KERNEL(mm_f32, 4, NO_PRE, ROW_F32, RS_ONE, LD_F32, S_F32)
STREAM_KERNEL(mm_f16, 2, NO_PRE, ROW_F16, RS_ONE, LD_F16, S_F16)
STREAM_KERNEL(mm_bf16, 2, NO_PRE, ROW_F16, RS_ONE, LD_BF16, S_BF16)
STREAM_KERNEL(mm_q8_row, 1, NO_PRE, ROW_Q8, RS_ROWSCALE, LD_Q8, S_Q8)
STREAM_KERNEL(mm_q8_2f, 1, COLF_PRE, ROW_Q8, RS_ROWSCALE, LD_Q8_2F, S_Q8_2F)

/* ---- several tokens over the same rows, f32 activations (cmf_matvec_multi) ----
 * A server's decode step of several sessions: each weight vector is loaded and decoded once
 * for up to MULTI_MAX tokens, and each token takes the steps the one-token kernel above takes
 * for it in 8-row blocks (per row: a over columns 16k, b over 16k + 8, a lone last 8 into a,
 * the scalar tail, a + b, the 8 rows reduced together, the tail added, the row scale), so
 * that every token gets the bits it gets alone. Rows past the last whole block go through
 * the one-token kernel token after token. One row at a time: two accumulators per token. */
#define MULTI_MAX CQ_MATVEC_MULTI_MAX

#define STREAM_MULTI(NAME, ONE, ES, ROW, RS, LOADW, LOADS)                                         \
    static inline __attribute__((always_inline)) void NAME##_t(                                    \
        const cmf_qmat *m, const float *const *X, const size_t T, float *const *Y, uint64_t r0,    \
        uint64_t r1) {                                                                             \
        const uint64_t C = m->cols, CF = C & ~(uint64_t)7;                                         \
        uint64_t r = r0;                                                                           \
        for (; r + 8 <= r1; r += 8) {                                                              \
            __m256 v[MULTI_MAX][8];                                                                \
            float tail[MULTI_MAX][8], rsv[8];                                                      \
            for (uint64_t q = 0; q < 8; q++) {                                                     \
                const uint8_t *row = ROW(r + q);                                                   \
                __m256 a[MULTI_MAX], b[MULTI_MAX];                                                 \
                for (size_t t = 0; t < T; t++)                                                     \
                    a[t] = b[t] = ZERO;                                                            \
                uint64_t i = 0;                                                                    \
                for (; i + 16 <= CF; i += 16) {                                                    \
                    if (((ES)*i) % 64 == 0) cq_prefetch_weights(row + (ES)*i);                     \
                    __m256 w0 = LOADW(i), w1 = LOADW(i + 8);                                       \
                    for (size_t t = 0; t < T; t++) {                                               \
                        a[t] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(X[t] + i), a[t]);               \
                        b[t] = _mm256_fmadd_ps(w1, _mm256_loadu_ps(X[t] + i + 8), b[t]);           \
                    }                                                                              \
                }                                                                                  \
                if (i < CF) {                                                                      \
                    __m256 w0 = LOADW(i);                                                          \
                    for (size_t t = 0; t < T; t++)                                                 \
                        a[t] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(X[t] + i), a[t]);               \
                }                                                                                  \
                for (size_t t = 0; t < T; t++) {                                                   \
                    const float *x = X[t];                                                         \
                    float s = 0.0f;                                                                \
                    for (uint64_t j = CF; j < C; j++)                                              \
                        s += LOADS(j) * x[j];                                                      \
                    v[t][q] = _mm256_add_ps(a[t], b[t]);                                           \
                    tail[t][q] = s;                                                                \
                }                                                                                  \
                rsv[q] = RS(r + q);                                                                \
            }                                                                                      \
            for (size_t t = 0; t < T; t++) {                                                       \
                __m256 y = cq_hsum8x8_avx2(v[t]);                                                  \
                if (CF < C) y = _mm256_add_ps(y, _mm256_loadu_ps(tail[t]));                        \
                _mm256_storeu_ps(Y[t] + (r - r0), _mm256_mul_ps(y, _mm256_loadu_ps(rsv)));         \
            }                                                                                      \
        }                                                                                          \
        for (size_t t = 0; r < r1 && t < T; t++)                                                   \
            ONE(m, X[t], 1, C, Y[t] + (r - r0), 1, r, r1, 0);                                      \
    }                                                                                              \
    /* T a constant in each call: the tokens' accumulators stay in registers */                    \
    static void NAME(const cmf_qmat *m, const float *const *X, size_t T, float *const *Y,          \
                     uint64_t r0, uint64_t r1) {                                                   \
        if (T == 1)                                                                                \
            NAME##_t(m, X, 1, Y, r0, r1);                                                          \
        else if (T == 2)                                                                           \
            NAME##_t(m, X, 2, Y, r0, r1);                                                          \
        else if (T == 3)                                                                           \
            NAME##_t(m, X, 3, Y, r0, r1);                                                          \
        else                                                                                       \
            NAME##_t(m, X, 4, Y, r0, r1);                                                          \
    }

STREAM_MULTI(mv_multi_f32, mm_f32, 4, ROW_F32, RS_ONE, LD_F32, S_F32)
STREAM_MULTI(mv_multi_f16, mm_f16, 2, ROW_F16, RS_ONE, LD_F16, S_F16)
STREAM_MULTI(mv_multi_bf16, mm_bf16, 2, ROW_F16, RS_ONE, LD_BF16, S_BF16)
STREAM_MULTI(mv_multi_q8_row, mm_q8_row, 1, ROW_Q8, RS_ROWSCALE, LD_Q8, S_Q8)

bool cq_avx2_matvec_multi(const cmf_qmat *m, const float *const *X, size_t T, float *const *Y,
                          uint64_t r0, uint64_t r1) {
    void (*fn)(const cmf_qmat *, const float *const *, size_t, float *const *, uint64_t, uint64_t) =
        m->dtype == CMF_DT_F32      ? mv_multi_f32
        : m->dtype == CMF_DT_F16    ? mv_multi_f16
        : m->dtype == CMF_DT_BF16   ? mv_multi_bf16
        : m->dtype == CMF_DT_Q8_ROW ? mv_multi_q8_row
                                    : NULL;
    if (!fn) return false;
    fn(m, X, T, Y, r0, r1);
    return true;
}

/* q8_2f as q8_row on activations pre-multiplied by the column field (x'[i] = col[i] * x[i],
 * once per call): w·x = scale[r] * sum q[i] * x'[i]. The quants and row scales sit where
 * q8_row keeps them. Without scratch memory, the per-weight kernel above. */
static void mm_q8_2f_scaled(const cmf_qmat *m, const float *X, size_t n, size_t ldx, float *Y,
                            size_t ldy, uint64_t r0, uint64_t r1, unsigned flags) {
    const uint64_t C = m->cols;
    float *xs = cq_kernel_scratch(CQ_SCRATCH_ACT, n * C * sizeof *xs);
    if (!xs) {
        mm_q8_2f(m, X, n, ldx, Y, ldy, r0, r1, flags);
        return;
    }
    for (size_t t = 0; t < n; t++)
        for (uint64_t i = 0; i < C; i++)
            xs[t * C + i] = h16(m->extra + 2 * i) * X[t * ldx + i];
    mm_q8_row(m, xs, n, C, Y, ldy, r0, r1, 0);
}

/* ======== group dtypes: 32 weights per step, decoded into w[0..3] ======== */

static inline void i8x16_to_ps(__m128i v, __m256 s, __m256 *lo, __m256 *hi) {
    *lo = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(v)), s);
    *hi = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(v, 8))), s);
}

/* 16 bytes of nibbles (element 2k low, 2k+1 high), values q - 8, times s. */
static inline void dec_q4(const uint8_t *p, __m256 s, __m256 w[4]) {
    const __m128i m4 = _mm_set1_epi8(15), eight = _mm_set1_epi8(8);
    _mm_prefetch((const char *)p + CQ_PF_DIST, _MM_HINT_T0);
    __m128i b = _mm_loadu_si128((const __m128i *)p);
    __m128i lo = _mm_and_si128(b, m4), hi = _mm_and_si128(_mm_srli_epi16(b, 4), m4);
    i8x16_to_ps(_mm_sub_epi8(_mm_unpacklo_epi8(lo, hi), eight), s, &w[0], &w[1]);
    i8x16_to_ps(_mm_sub_epi8(_mm_unpackhi_epi8(lo, hi), eight), s, &w[2], &w[3]);
}

/* q1: bit i selects +s (1) or -s (0). */
static inline void dec_q1(const uint8_t *t, __m256 w[4]) {
    const __m256i sel = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
    __m256 s = _mm256_set1_ps(h16(t)), ns = _mm256_sub_ps(ZERO, s);
    uint32_t bits = ld_u32(t + 2);
    for (int k = 0; k < 4; k++) {
        __m256i b = _mm256_and_si256(_mm256_set1_epi32((int)((bits >> (8 * k)) & 255u)), sel);
        w[k] = _mm256_blendv_ps(ns, s, _mm256_castsi256_ps(_mm256_cmpeq_epi32(b, sel)));
    }
}

/* q1t: see the AVX-512 tier; 8 digits per vector. */
typedef struct {
    __m256i idx[4];
    __m256 inv[4];
} q1t_tab;

static void q1t_tab_init(q1t_tab *tb) {
    static const float inv[5] = {1.0f, 1.0f / 3, 1.0f / 9, 1.0f / 27, 1.0f / 81};
    for (int k = 0; k < 4; k++) {
        int32_t idx[8];
        float f[8];
        for (int j = 0; j < 8; j++) {
            idx[j] = (8 * k + j) / 5;
            f[j] = inv[(8 * k + j) % 5];
        }
        tb->idx[k] = _mm256_loadu_si256((const __m256i *)idx);
        tb->inv[k] = _mm256_loadu_ps(f);
    }
}

static inline void dec_q1t(const uint8_t *t, const q1t_tab *tb, __m256 w[4]) {
    const __m256 eps = _mm256_set1_ps(0.005f), third = _mm256_set1_ps(1.0f / 3.0f),
                 three = _mm256_set1_ps(3.0f);
    const __m256 c15 = _mm256_set1_ps(1.5f), c25 = _mm256_set1_ps(2.5f);
    __m256 s = _mm256_set1_ps(h16(t));
    /* 8 bytes at t + 2: the 7 code bytes and the next, which exists (row_ptr follows the tiles) */
    __m256i bytes = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(t + 2)));
    for (int k = 0; k < 4; k++) {
        __m256 v = _mm256_cvtepi32_ps(_mm256_permutevar8x32_epi32(bytes, tb->idx[k]));
        __m256 q = _mm256_floor_ps(_mm256_fmadd_ps(v, tb->inv[k], eps));
        __m256 q3 = _mm256_floor_ps(_mm256_fmadd_ps(q, third, eps));
        __m256 d = _mm256_fnmadd_ps(q3, three, q);
        w[k] = _mm256_mul_ps(_mm256_mul_ps(d, _mm256_fnmadd_ps(c15, d, c25)), s);
    }
}

/* vbit: the group's codes as v = u - L in int16 (gemm_vbit_codes.h), then to f32 and scaled. */
static inline void dec_vbit(const uint8_t *p, const cq_vbit_utab *tb, unsigned b, __m256 s,
                            __m256 w[4]) {
    _mm_prefetch((const char *)p + CQ_PF_DIST, _MM_HINT_T0);
    __m256i v[2];
    cq_vbit_group_v16(p, tb, b, &v[0], &v[1]);
    for (int h = 0; h < 2; h++) {
        w[2 * h] = _mm256_mul_ps(
            _mm256_cvtepi32_ps(_mm256_cvtepi16_epi32(_mm256_castsi256_si128(v[h]))), s);
        w[2 * h + 1] = _mm256_mul_ps(
            _mm256_cvtepi32_ps(_mm256_cvtepi16_epi32(_mm256_extracti128_si256(v[h], 1))), s);
    }
}

/* One row's ladder, rung c at lad[c]: the parts of cq_avx2_q4tp_parts (q4tp_ladder_avx2.h)
 * with the row in every lane, so the bits of each lane of the 8-row ladders and the copy's;
 * rungs 0..7 gathered into one vector by immediate blends. */
void cq_avx2_q4tp_ladder(const cmf_qmat *m, uint64_t r, float lad[32]) {
    __m256 p[8], f[3];
    cq_avx2_q4tp_parts(_mm256_set1_ps(h16(m->scales + 4 * r)),
                       _mm256_set1_ps(h16(m->scales + 4 * r + 2)), p, f);
    __m256 e = p[0];
    e = _mm256_blend_ps(e, p[1], 0x02);
    e = _mm256_blend_ps(e, p[2], 0x04);
    e = _mm256_blend_ps(e, p[3], 0x08);
    e = _mm256_blend_ps(e, p[4], 0x10);
    e = _mm256_blend_ps(e, p[5], 0x20);
    e = _mm256_blend_ps(e, p[6], 0x40);
    e = _mm256_blend_ps(e, p[7], 0x80);
    _mm256_storeu_ps(lad, e);
    for (int k = 0; k < 3; k++)
        _mm256_storeu_ps(lad + 8 * (k + 1), _mm256_mul_ps(e, f[k]));
}

/* The ladders of rows r .. r + n - 1 (n <= 8) with the rows in the lanes: lad[c][k] is rung c
 * of row r + k. Each lane does what cq_avx2_q4tp_ladder does for its row (the same exp2 and
 * products, so the same bits), two polynomials for 8 rows (the one-token decode of a 576-column
 * row spent about a third of its time on its ladder when each row took two). */
void cq_avx2_q4tp_ladders8(const cmf_qmat *m, uint64_t r, unsigned n, float lad[32][8]) {
    const __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    __m256i p = _mm256_maskload_epi32((const int *)(const void *)(m->scales + 4 * r),
                                      _mm256_cmpgt_epi32(_mm256_set1_epi32((int)n), lanes));
    /* dword k = (f16 lo, f16 step) of row r + k: the halves to [lo 0-3 | st 0-3 | lo 4-7 |
     * st 4-7] words, then lo in the low 128 bits and st in the high */
    __m256i w = _mm256_packus_epi32(_mm256_and_si256(p, _mm256_set1_epi32(0xFFFF)),
                                    _mm256_srli_epi32(p, 16));
    w = _mm256_permute4x64_epi64(w, _MM_SHUFFLE(3, 1, 2, 0));
    const __m256 lo = _mm256_cvtph_ps(_mm256_castsi256_si128(w)),
                 st = _mm256_cvtph_ps(_mm256_extracti128_si256(w, 1));
    cq_avx2_q4tp_ladders_lanes(lo, st, lad);
}

#define FMA4(acc, w, x)                                                                            \
    acc = _mm256_fmadd_ps(w[0], _mm256_loadu_ps((x)), acc);                                        \
    acc = _mm256_fmadd_ps(w[1], _mm256_loadu_ps((x) + 8), acc);                                    \
    acc = _mm256_fmadd_ps(w[2], _mm256_loadu_ps((x) + 16), acc);                                   \
    acc = _mm256_fmadd_ps(w[3], _mm256_loadu_ps((x) + 24), acc)

#define GROUP_KERNEL(NAME, PRE, SETUP, DECODE, POST)                                               \
    static void NAME(const cmf_qmat *m, const float *X, size_t n, size_t ldx, float *Y,            \
                     size_t ldy, uint64_t r0, uint64_t r1, unsigned flags) {                       \
        (void)flags;                                                                               \
        const uint64_t G = m->groups;                                                              \
        PRE;                                                                                       \
        for (uint64_t r = r0; r < r1; r++) {                                                       \
            SETUP;                                                                                 \
            size_t t = 0;                                                                          \
            for (; t + 4 <= n && cq_fits_l1(4, 4 * m->cols); t += 4) {                             \
                const float *x0 = X + t * ldx, *x1 = x0 + ldx, *x2 = x1 + ldx, *x3 = x2 + ldx;     \
                __m256 a0 = ZERO, a1 = ZERO, a2 = ZERO, a3 = ZERO;                                 \
                for (uint64_t g = 0; g < G; g++) {                                                 \
                    __m256 w[4];                                                                   \
                    DECODE;                                                                        \
                    FMA4(a0, w, x0 + 32 * g);                                                      \
                    FMA4(a1, w, x1 + 32 * g);                                                      \
                    FMA4(a2, w, x2 + 32 * g);                                                      \
                    FMA4(a3, w, x3 + 32 * g);                                                      \
                }                                                                                  \
                float res[4] = {hsum8(a0), hsum8(a1), hsum8(a2), hsum8(a3)};                       \
                POST(res, 4, x0);                                                                  \
                for (int k = 0; k < 4; k++)                                                        \
                    Y[(t + k) * ldy + (r - r0)] = res[k];                                          \
            }                                                                                      \
            for (; t < n; t++) {                                                                   \
                const float *x0 = X + t * ldx;                                                     \
                __m256 a0 = ZERO, a1 = ZERO, a2 = ZERO, a3 = ZERO;                                 \
                for (uint64_t g = 0; g < G; g++) {                                                 \
                    __m256 w[4];                                                                   \
                    DECODE;                                                                        \
                    const float *xg = x0 + 32 * g;                                                 \
                    a0 = _mm256_fmadd_ps(w[0], _mm256_loadu_ps(xg), a0);                           \
                    a1 = _mm256_fmadd_ps(w[1], _mm256_loadu_ps(xg + 8), a1);                       \
                    a2 = _mm256_fmadd_ps(w[2], _mm256_loadu_ps(xg + 16), a2);                      \
                    a3 = _mm256_fmadd_ps(w[3], _mm256_loadu_ps(xg + 24), a3);                      \
                }                                                                                  \
                float res[1] = {                                                                   \
                    hsum8(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)))};           \
                POST(res, 1, x0);                                                                  \
                Y[t * ldy + (r - r0)] = res[0];                                                    \
            }                                                                                      \
        }                                                                                          \
    }

#define NO_POST(res, nt, x) ((void)0)
CQ_DEFINE_OVL_APPLY(ovl_apply, h16)
#define OVL_POST(res, nt, x) ovl_apply(m, r, ovl_e, ovl_n, x, nt, ldx, res)

GROUP_KERNEL(mm_q4_tiled, (void)0, const uint8_t *row = m->quants + r * G * CQ_Q4T_TILE,
             dec_q4(row + g * CQ_Q4T_TILE + 2, _mm256_set1_ps(h16(row + g * CQ_Q4T_TILE)), w),
             NO_POST)

GROUP_KERNEL(mm_q4_block_g, (void)0, const uint8_t *nib = m->quants + r * G * 16;
             const uint8_t *sc = m->scales + r * G * 2,
             dec_q4(nib + 16 * g, _mm256_set1_ps(h16(sc + 2 * g)), w), NO_POST)

GROUP_KERNEL(mm_q4tp, float lad[32], const uint8_t *nib = m->quants + r * G * 16;
             cq_avx2_q4tp_ladder(m, r, lad),
             dec_q4(nib + 16 * g, _mm256_set1_ps(lad[cq_q4tp_code(m, r, g)]), w), NO_POST)

GROUP_KERNEL(mm_q1, (void)0, const uint8_t *row = m->quants + r * G * CQ_Q1_TILE,
             dec_q1(row + g * CQ_Q1_TILE, w), NO_POST)
GROUP_KERNEL(mm_q1s, uint64_t ovl_k = cq_ovl_seek(m, r0),
             const uint8_t *row = m->quants + r * G * CQ_Q1_TILE;
             const uint8_t *ovl_e; uint64_t ovl_n;
             cq_ovl_next(m, r, &ovl_k, &ovl_e, &ovl_n), dec_q1(row + g * CQ_Q1_TILE, w), OVL_POST)
GROUP_KERNEL(mm_q1t, q1t_tab tb; q1t_tab_init(&tb);
             uint64_t ovl_k = 0, const uint8_t *row = m->quants + r * G * CQ_Q1T_TILE;
             const uint8_t *ovl_e; uint64_t ovl_n; cq_ovl_next(m, r, &ovl_k, &ovl_e, &ovl_n),
                                                   dec_q1t(row + g * CQ_Q1T_TILE, &tb, w), OVL_POST)

GROUP_KERNEL(mm_vbit, const cq_vbit_utab *tabs = cq_vbit_utabs(); uint8_t bounce[48];
             const uint8_t *end = m->data + m->nbytes, const unsigned b = cq_vbit_bits(m, r);
             const cq_vbit_utab *tb = &tabs[b]; const uint8_t *row = cq_vbit_row(m, r);
             const uint8_t *sc = m->scales + 2 * r * G,
             dec_vbit(cq_vbit_group_src(row + 4 * b * g, b, end, bounce), tb, b,
                      _mm256_set1_ps(h16(sc + 2 * g)), w),
             NO_POST)

static void mm_q4_block(const cmf_qmat *m, const float *X, size_t n, size_t ldx, float *Y,
                        size_t ldy, uint64_t r0, uint64_t r1, unsigned flags) {
    if (m->cols % 32)
        cq_ref_matmul(m, X, n, ldx, Y, ldy, r0, r1, flags); /* rows start mid-group */
    else if (!(flags & CMF_KF_INT8_ACT) || !cq_avx2_i8_matmul(m, X, n, ldx, Y, ldy, r0, r1))
        mm_q4_block_g(m, X, n, ldx, Y, ldy, r0, r1, flags);
}

/* The f32 kernel F, or the int8-activation path when the flag asks for it. */
#define WITH_I8(NAME, F)                                                                           \
    static void NAME(const cmf_qmat *m, const float *X, size_t n, size_t ldx, float *Y,            \
                     size_t ldy, uint64_t r0, uint64_t r1, unsigned flags) {                       \
        if (!(flags & CMF_KF_INT8_ACT) || !cq_avx2_i8_matmul(m, X, n, ldx, Y, ldy, r0, r1))        \
            F(m, X, n, ldx, Y, ldy, r0, r1, flags);                                                \
    }
/* vbit: int8 activations for one token only (kernel_i8dec_vbit_avx2_rows.h); batches stay in
 * f32. */
static void mm_vbit_x(const cmf_qmat *m, const float *X, size_t n, size_t ldx, float *Y, size_t ldy,
                      uint64_t r0, uint64_t r1, unsigned flags) {
    if (!(flags & CMF_KF_INT8_ACT) || n != 1 || !cq_avx2_i8dec_matvec(m, X, Y, r0, r1))
        mm_vbit(m, X, n, ldx, Y, ldy, r0, r1, flags);
}
WITH_I8(mm_q4_tiled_x, mm_q4_tiled)
WITH_I8(mm_q4tp_x, mm_q4tp)
/* q8_row: one token through the decode kernel (kernel_q8dec_avx2.c), batches the int8 GEMM. */
static void mm_q8_row_x(const cmf_qmat *m, const float *X, size_t n, size_t ldx, float *Y,
                        size_t ldy, uint64_t r0, uint64_t r1, unsigned flags) {
    if (!(flags & CMF_KF_INT8_ACT) || !(n == 1 ? cq_avx2_q8dec_rows()->matvec(m, X, Y, r0, r1)
                                               : cq_avx2_i8_matmul(m, X, n, ldx, Y, ldy, r0, r1)))
        mm_q8_row(m, X, n, ldx, Y, ldy, r0, r1, flags);
}

const cq_kernel_table cq_kernels_avx2 = {
    .mm =
        {
            [CMF_DT_F32] = mm_f32,
            [CMF_DT_F16] = mm_f16,
            [CMF_DT_BF16] = mm_bf16,
            [CMF_DT_Q8_ROW] = mm_q8_row_x,
            [CMF_DT_Q4_BLOCK] = mm_q4_block,
            [CMF_DT_VBIT] = mm_vbit_x,
            [CMF_DT_Q8_2F] = mm_q8_2f_scaled,
            [CMF_DT_VBIT_RO] = mm_vbit_x,
            [CMF_DT_Q4_TILED] = mm_q4_tiled_x,
            [CMF_DT_Q1] = mm_q1,
            [CMF_DT_Q1S] = mm_q1s,
            [CMF_DT_Q1T] = mm_q1t,
            [CMF_DT_Q4TP] = mm_q4tp_x,
        },
};
