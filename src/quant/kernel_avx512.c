/* kernel_avx512.c - AVX-512 (F/BW/VL/DQ) tier of the matrix kernels. Each dtype decodes
 * 16 or 32 weights into f32 lanes and multiplies them into up to 4 tokens at once, so a
 * prefill batch reads every weight once per row. Tested against kernel_scalar.c. */
#include <immintrin.h>
#include <stdlib.h>

#include "common/cpu.h"
#include "quant/kernel_i8dec.h"
#include "common/hsum16_avx512.h"
#include "quant/kernel_impl.h"
#include "quant/load_float_avx512.h"
#include "quant/q4tp_ladder_avx512.h"

static inline float h16(const uint8_t *p) {
    return _cvtsh_ss(ld_u16(p));
}

/* ---- activations of up to 4 tokens against one decoded chunk ---- */

#define ZERO _mm512_setzero_ps()

/* bf16 values p[0..15] (mask k) as f32, each half of 8 widened on its own (LD_BF16_HALVES). */
static inline __attribute__((always_inline)) __m512 ld_bf16_halves(const uint8_t *p, __mmask16 k) {
    __m256i lo = _mm256_cvtepu16_epi32(_mm_maskz_loadu_epi16((__mmask8)k, p)),
            hi = _mm256_cvtepu16_epi32(_mm_maskz_loadu_epi16((__mmask8)(k >> 8), p + 16));
    return _mm512_castsi512_ps(_mm512_inserti64x4(_mm512_castsi256_si512(_mm256_slli_epi32(lo, 16)),
                                                  _mm256_slli_epi32(hi, 16), 1));
}

/* f16 values p[0..15] (mask k) as f32, each half of 8 converted on its own (LD_F16_HALVES). */
static inline __attribute__((always_inline)) __m512 ld_f16_halves(const uint8_t *p, __mmask16 k) {
    __m256 lo = _mm256_cvtph_ps(_mm_maskz_loadu_epi16((__mmask8)k, p)),
           hi = _mm256_cvtph_ps(_mm_maskz_loadu_epi16((__mmask8)(k >> 8), p + 16));
    return _mm512_insertf32x8(_mm512_castps256_ps512(lo), hi, 1);
}

/* ======== stream dtypes: f32, f16, bf16, q8_row, q8_2f (any cols) ======== */

#define LD_F32(i, k)  cq_load16_float(CMF_DT_F32, row + 4 * (i), k)
#define LD_F16(i, k)  cq_load16_float(CMF_DT_F16, row + 2 * (i), k)
#define LD_BF16(i, k) cq_load16_float(CMF_DT_BF16, row + 2 * (i), k)
/* The same 16 values widened 8 at a time: a 512-bit vpmovzxwd (vcvtph2ps) from memory held a
 * Zen 4 thread's one-token bf16 (f16) stream to ~24 GB/s from DRAM, the 256-bit halves reach
 * ~28-30 */
#define LD_BF16_HALVES(i, k) ld_bf16_halves(row + 2 * (i), k)
#define LD_F16_HALVES(i, k)  ld_f16_halves(row + 2 * (i), k)
#define LD_Q8(i, k)          _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_maskz_loadu_epi8(k, row + (i))))
#define LD_Q8_2F(i, k)                                                                             \
    _mm512_mul_ps(LD_Q8(i, k), _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(k, colf + 2 * (i))))

/* PRE runs once per call (q8_2f: defines `colf`); ROW(r) is the first byte of row r, RS(r)
 * the factor applied to its sum. LOADW(i, k) returns weights i..i+15 of `row` under mask k
 * (zero elsewhere). One token (decode) takes rows 16 at a time and reduces their 16 sums with
 * one cq_hsum16_avx512 (a horizontal sum per row left most of the core idle on short rows:
 * in cache, f16 +40 % at 576 columns, +22-25 % at 640-896, +7 % at 4096).
 * Rows of 2- and 4-byte weights are read one after the other, so that a thread's weights
 * arrive as one sequential stream; stepping 4 rows together (4 streams a row apart) left 5-15 %
 * of the Intel guest's two-core DRAM bandwidth unused (from DRAM, 576-896 columns: f16 94-96
 * -> 108-114 % of the read probe, bf16 89-94 -> 108-111 %, f32 91 -> 98-99 %; Qwen2.5-0.5B-
 * shape f16 decode +9 to +12 %). Each row keeps the two accumulators the 4-row step gave it,
 * so the sums are the same bits. 1-byte rows (q8) keep the 4-row step: a row at a time read
 * 12-16 % less from DRAM. */
#define STREAM_KERNEL(NAME, ES, PRE, ROW, RS, LOADW)                                               \
    static void NAME(const cmf_qmat *m, const float *X, size_t n, size_t ldx, float *Y,            \
                     size_t ldy, uint64_t r0, uint64_t r1, unsigned flags) {                       \
        (void)flags;                                                                               \
        PRE;                                                                                       \
        const uint64_t C = m->cols, CF = C & ~(uint64_t)15;                                        \
        const __mmask16 kt = (__mmask16)((1u << (C - CF)) - 1u), kf = 0xFFFF;                      \
        uint64_t r = r0;                                                                           \
        for (; n == 1 && r + 16 <= r1; r += 16) {                                                  \
            __m512 v[16];                                                                          \
            for (uint64_t q = 0; (ES) >= 2 && q < 16; q++) {                                       \
                const uint8_t *row = ROW(r + q);                                                   \
                __m512 a = ZERO, b = ZERO;                                                         \
                uint64_t i = 0;                                                                    \
                for (; i + 32 <= C; i += 32) {                                                     \
                    for (unsigned pf = 0; 2 * pf < (ES); pf++) /* ES / 2 lines */                  \
                        cq_prefetch_weights(row + ES * i + 64 * pf);                               \
                    a = _mm512_fmadd_ps(LOADW(i, kf), _mm512_loadu_ps(X + i), a);                  \
                    b = _mm512_fmadd_ps(LOADW(i + 16, kf), _mm512_loadu_ps(X + i + 16), b);        \
                }                                                                                  \
                for (; i < C; i += 16) {                                                           \
                    __mmask16 kk = i < CF ? kf : kt;                                               \
                    a = _mm512_fmadd_ps(LOADW(i, kk), _mm512_maskz_loadu_ps(kk, X + i), a);        \
                }                                                                                  \
                v[q] = _mm512_mul_ps(_mm512_add_ps(a, b), _mm512_set1_ps(RS(r + q)));              \
            }                                                                                      \
            for (uint64_t q = 0; (ES) < 2 && q < 16; q += 4) {                                     \
                const uint8_t *rows4[4];                                                           \
                __m512 a[4], b[4];                                                                 \
                for (unsigned k = 0; k < 4; k++) {                                                 \
                    rows4[k] = ROW(r + q + k);                                                     \
                    a[k] = b[k] = ZERO;                                                            \
                }                                                                                  \
                uint64_t i = 0;                                                                    \
                for (; i + 32 <= C; i += 32) {                                                     \
                    __m512 xa = _mm512_loadu_ps(X + i), xb = _mm512_loadu_ps(X + i + 16);          \
                    cq_prefetch_span(rows4[0], 4, i *(ES), 2 * ES);                                \
                    for (unsigned k = 0; k < 4; k++) {                                             \
                        const uint8_t *row = rows4[k];                                             \
                        a[k] = _mm512_fmadd_ps(LOADW(i, kf), xa, a[k]);                            \
                        b[k] = _mm512_fmadd_ps(LOADW(i + 16, kf), xb, b[k]);                       \
                    }                                                                              \
                }                                                                                  \
                for (; i < C; i += 16) {                                                           \
                    __mmask16 kk = i < CF ? kf : kt;                                               \
                    __m512 xa = _mm512_maskz_loadu_ps(kk, X + i);                                  \
                    for (unsigned k = 0; k < 4; k++) {                                             \
                        const uint8_t *row = rows4[k];                                             \
                        a[k] = _mm512_fmadd_ps(LOADW(i, kk), xa, a[k]);                            \
                    }                                                                              \
                }                                                                                  \
                for (unsigned k = 0; k < 4; k++)                                                   \
                    v[q + k] =                                                                     \
                        _mm512_mul_ps(_mm512_add_ps(a[k], b[k]), _mm512_set1_ps(RS(r + q + k)));   \
            }                                                                                      \
            _mm512_storeu_ps(Y + (r - r0), cq_hsum16_avx512(v));                                   \
        }                                                                                          \
        for (; r < r1; r++) {                                                                      \
            const uint8_t *row = ROW(r);                                                           \
            const float rs = RS(r);                                                                \
            size_t t = 0;                                                                          \
            for (; t + 4 <= n && cq_fits_l1(4, 4 * m->cols); t += 4) {                             \
                const float *x0 = X + t * ldx, *x1 = x0 + ldx, *x2 = x1 + ldx, *x3 = x2 + ldx;     \
                __m512 a0 = ZERO, a1 = ZERO, a2 = ZERO, a3 = ZERO;                                 \
                __m512 b0 = ZERO, b1 = ZERO, b2 = ZERO, b3 = ZERO;                                 \
                uint64_t i = 0;                                                                    \
                for (; i + 32 <= C; i += 32) { /* two chunks: 8 FMA chains */                      \
                    _mm_prefetch((const char *)row + ES * i + CQ_PF_DIST, _MM_HINT_T0);            \
                    __m512 w = LOADW(i, kf), v = LOADW(i + 16, kf);                                \
                    a0 = _mm512_fmadd_ps(w, _mm512_loadu_ps(x0 + i), a0);                          \
                    a1 = _mm512_fmadd_ps(w, _mm512_loadu_ps(x1 + i), a1);                          \
                    a2 = _mm512_fmadd_ps(w, _mm512_loadu_ps(x2 + i), a2);                          \
                    a3 = _mm512_fmadd_ps(w, _mm512_loadu_ps(x3 + i), a3);                          \
                    b0 = _mm512_fmadd_ps(v, _mm512_loadu_ps(x0 + i + 16), b0);                     \
                    b1 = _mm512_fmadd_ps(v, _mm512_loadu_ps(x1 + i + 16), b1);                     \
                    b2 = _mm512_fmadd_ps(v, _mm512_loadu_ps(x2 + i + 16), b2);                     \
                    b3 = _mm512_fmadd_ps(v, _mm512_loadu_ps(x3 + i + 16), b3);                     \
                }                                                                                  \
                for (; i < C; i += 16) {                                                           \
                    __mmask16 k = i < CF ? kf : kt;                                                \
                    __m512 w = LOADW(i, k);                                                        \
                    a0 = _mm512_fmadd_ps(w, _mm512_maskz_loadu_ps(k, x0 + i), a0);                 \
                    a1 = _mm512_fmadd_ps(w, _mm512_maskz_loadu_ps(k, x1 + i), a1);                 \
                    a2 = _mm512_fmadd_ps(w, _mm512_maskz_loadu_ps(k, x2 + i), a2);                 \
                    a3 = _mm512_fmadd_ps(w, _mm512_maskz_loadu_ps(k, x3 + i), a3);                 \
                }                                                                                  \
                Y[(t + 0) * ldy + (r - r0)] = _mm512_reduce_add_ps(_mm512_add_ps(a0, b0)) * rs;    \
                Y[(t + 1) * ldy + (r - r0)] = _mm512_reduce_add_ps(_mm512_add_ps(a1, b1)) * rs;    \
                Y[(t + 2) * ldy + (r - r0)] = _mm512_reduce_add_ps(_mm512_add_ps(a2, b2)) * rs;    \
                Y[(t + 3) * ldy + (r - r0)] = _mm512_reduce_add_ps(_mm512_add_ps(a3, b3)) * rs;    \
            }                                                                                      \
            for (; t < n; t++) {                                                                   \
                const float *x0 = X + t * ldx;                                                     \
                __m512 a0 = ZERO, a1 = ZERO, a2 = ZERO, a3 = ZERO;                                 \
                uint64_t i = 0;                                                                    \
                for (; i + 64 <= C; i += 64) {                                                     \
                    for (unsigned pf = 0; pf < ES; pf++)                                           \
                        _mm_prefetch((const char *)row + ES * i + 64 * pf + CQ_PF_DIST,            \
                                     _MM_HINT_T0);                                                 \
                    a0 = _mm512_fmadd_ps(LOADW(i, kf), _mm512_loadu_ps(x0 + i), a0);               \
                    a1 = _mm512_fmadd_ps(LOADW(i + 16, kf), _mm512_loadu_ps(x0 + i + 16), a1);     \
                    a2 = _mm512_fmadd_ps(LOADW(i + 32, kf), _mm512_loadu_ps(x0 + i + 32), a2);     \
                    a3 = _mm512_fmadd_ps(LOADW(i + 48, kf), _mm512_loadu_ps(x0 + i + 48), a3);     \
                }                                                                                  \
                for (; i < C; i += 16) {                                                           \
                    __mmask16 k = i < CF ? kf : kt;                                                \
                    a0 = _mm512_fmadd_ps(LOADW(i, k), _mm512_maskz_loadu_ps(k, x0 + i), a0);       \
                }                                                                                  \
                a0 = _mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3));                  \
                Y[t * ldy + (r - r0)] = _mm512_reduce_add_ps(a0) * rs;                             \
            }                                                                                      \
        }                                                                                          \
    }

#define NO_PRE         (void)0
#define COLF_PRE       const uint8_t *colf = m->extra
#define ROW_F32(r)     (m->data + 4 * (r)*C)
#define ROW_F16(r)     (m->data + 2 * (r)*C)
#define ROW_Q8(r)      (m->quants + (r)*C)
#define RS_ONE(r)      1.0f
#define RS_ROWSCALE(r) h16(m->scales + 2 * (r))
STREAM_KERNEL(mm_f32, 4, NO_PRE, ROW_F32, RS_ONE, LD_F32)
STREAM_KERNEL(mm_f16_whole, 2, NO_PRE, ROW_F16, RS_ONE, LD_F16)
STREAM_KERNEL(mm_bf16_whole, 2, NO_PRE, ROW_F16, RS_ONE, LD_BF16)
STREAM_KERNEL(mm_q8_row_f32, 1, NO_PRE, ROW_Q8, RS_ROWSCALE, LD_Q8)
STREAM_KERNEL(mm_q8_2f, 1, COLF_PRE, ROW_Q8, RS_ROWSCALE, LD_Q8_2F)
/* AMD's cores: f16 and bf16 widened in halves (LD_F16_HALVES, LD_BF16_HALVES), the same values
 * in the same lanes, so the same bits (docs/KERNELS.md, "Rows on AMD"). */
STREAM_KERNEL(mm_bf16_halves, 2, NO_PRE, ROW_F16, RS_ONE, LD_BF16_HALVES)
STREAM_KERNEL(mm_f16_halves, 2, NO_PRE, ROW_F16, RS_ONE, LD_F16_HALVES)

static void mm_f16(const cmf_qmat *m, const float *X, size_t n, size_t ldx, float *Y, size_t ldy,
                   uint64_t r0, uint64_t r1, unsigned flags) {
    (cq_cpu_amd() ? mm_f16_halves : mm_f16_whole)(m, X, n, ldx, Y, ldy, r0, r1, flags);
}

static void mm_bf16(const cmf_qmat *m, const float *X, size_t n, size_t ldx, float *Y, size_t ldy,
                    uint64_t r0, uint64_t r1, unsigned flags) {
    (cq_cpu_amd() ? mm_bf16_halves : mm_bf16_whole)(m, X, n, ldx, Y, ldy, r0, r1, flags);
}

/* ---- one decode step of several tokens (batched decode of independent sessions) ----
 * Each token's rows get exactly the one-token kernel's arithmetic above (per row the same two
 * accumulators over 32-column steps, the same tail, the row factor, the same 16-row
 * cq_hsum16_avx512), so every token's results are the bits it gets alone; what the tokens
 * share is each 32-column step's decoded weights (f32, f16, bf16: 1.3x the one-token kernel's
 * speed at 2 tokens, 1.5x at 4, 1536 x 576 f16 in L2). q8_row is not among them: with R = 2
 * rows per step its shared decode still ran 0.8x the one-token kernel's 4-row step. Rows past
 * the last full block of 16 take the one-token kernel per token. The rows' weights are
 * prefetched (without, Zen 4, bench_batch_decode of the Qwen2.5-0.5B shape at 4 streams: f16
 * 59-68 against 95-97 tok/s, bf16 73 against 98-101), a step's R rows as one span
 * (cq_prefetch_span; each row on its own: 4 streams f16 101-103 against 132-144, bf16 103-108
 * against 115-140); f16 on AMD and bf16 step two rows at a time (R = 2: +3-10 %, the same bits). */
#define MULTI_MAX CQ_MATVEC_MULTI_MAX
#define STREAM_MULTI(NAME, ONE, R, ES, PRE, ROW, RS, LOADW)                                        \
    static inline __attribute__((always_inline)) void NAME##_t(                                    \
        const cmf_qmat *m, const float *const *X, const size_t T, float *const *Y, uint64_t r0,    \
        uint64_t r1) {                                                                             \
        PRE;                                                                                       \
        const uint64_t C = m->cols, CF = C & ~(uint64_t)15;                                        \
        const __mmask16 kt = (__mmask16)((1u << (C - CF)) - 1u), kf = 0xFFFF;                      \
        uint64_t r = r0;                                                                           \
        for (; r + 16 <= r1; r += 16) {                                                            \
            __m512 v[MULTI_MAX][16];                                                               \
            for (uint64_t q = 0; q < 16; q += (R)) { /* R rows at a time, each its own sums */     \
                const uint8_t *rows[R];                                                            \
                __m512 a[R][MULTI_MAX], b[R][MULTI_MAX];                                           \
                _Pragma("GCC unroll 2") for (unsigned k = 0; k < (R); k++) {                       \
                    rows[k] = ROW(r + q + k);                                                      \
                    _Pragma("GCC unroll 4") for (size_t t = 0; t < T; t++) a[k][t] = b[k][t] =     \
                        ZERO;                                                                      \
                }                                                                                  \
                uint64_t i = 0;                                                                    \
                for (; i + 32 <= C; i += 32) { /* the tokens' x once, for the R rows */            \
                    __m512 xa[MULTI_MAX], xb[MULTI_MAX];                                           \
                    _Pragma("GCC unroll 4") for (size_t t = 0; t < T; t++) {                       \
                        xa[t] = _mm512_loadu_ps(X[t] + i);                                         \
                        xb[t] = _mm512_loadu_ps(X[t] + i + 16);                                    \
                    }                                                                              \
                    /* the R adjacent rows are one span: ES / 2 lines of each a step */            \
                    cq_prefetch_span(rows[0], (R), (ES)*i, (R) * (ES) / 2);                        \
                    _Pragma("GCC unroll 2") for (unsigned k = 0; k < (R); k++) {                   \
                        const uint8_t *row = rows[k];                                              \
                        __m512 w0 = LOADW(i, kf), w1 = LOADW(i + 16, kf);                          \
                        _Pragma("GCC unroll 4") for (size_t t = 0; t < T; t++) {                   \
                            a[k][t] = _mm512_fmadd_ps(w0, xa[t], a[k][t]);                         \
                            b[k][t] = _mm512_fmadd_ps(w1, xb[t], b[k][t]);                         \
                        }                                                                          \
                    }                                                                              \
                }                                                                                  \
                for (; i < C; i += 16) {                                                           \
                    __mmask16 kk = i < CF ? kf : kt;                                               \
                    _Pragma("GCC unroll 2") for (unsigned k = 0; k < (R); k++) {                   \
                        const uint8_t *row = rows[k];                                              \
                        __m512 w0 = LOADW(i, kk);                                                  \
                        _Pragma("GCC unroll 4") for (size_t t = 0; t < T; t++) a[k][t] =           \
                            _mm512_fmadd_ps(w0, _mm512_maskz_loadu_ps(kk, X[t] + i), a[k][t]);     \
                    }                                                                              \
                }                                                                                  \
                _Pragma("GCC unroll 2") for (unsigned k = 0; k < (R); k++) {                       \
                    __m512 rs = _mm512_set1_ps(RS(r + q + k));                                     \
                    _Pragma("GCC unroll 4") for (size_t t = 0; t < T; t++) v[t][q + k] =           \
                        _mm512_mul_ps(_mm512_add_ps(a[k][t], b[k][t]), rs);                        \
                }                                                                                  \
            }                                                                                      \
            _Pragma("GCC unroll 4") for (size_t t = 0; t < T; t++)                                 \
                _mm512_storeu_ps(Y[t] + (r - r0), cq_hsum16_avx512(v[t]));                         \
        }                                                                                          \
        for (size_t t = 0; r < r1 && t < T; t++)                                                   \
            ONE(m, X[t], 1, C, Y[t] + (r - r0), 1, r, r1, 0);                                      \
    }                                                                                              \
    /* T a constant in each call: the tokens' accumulators stay in registers */                    \
    static void NAME(const cmf_qmat *m, const float *const *X, size_t T, float *const *Y,          \
                     uint64_t r0, uint64_t r1) {                                                   \
        switch (T) {                                                                               \
        case 1:                                                                                    \
            NAME##_t(m, X, 1, Y, r0, r1);                                                          \
            break;                                                                                 \
        case 2:                                                                                    \
            NAME##_t(m, X, 2, Y, r0, r1);                                                          \
            break;                                                                                 \
        case 3:                                                                                    \
            NAME##_t(m, X, 3, Y, r0, r1);                                                          \
            break;                                                                                 \
        default:                                                                                   \
            NAME##_t(m, X, 4, Y, r0, r1);                                                          \
            break;                                                                                 \
        }                                                                                          \
    }

STREAM_MULTI(mv_multi_f32, mm_f32, 1, 4, NO_PRE, ROW_F32, RS_ONE, LD_F32)
STREAM_MULTI(mv_multi_f16_whole, mm_f16, 1, 2, NO_PRE, ROW_F16, RS_ONE, LD_F16)
/* AMD: f16 in halves here too (two tokens a weight load, one thread: 24.3 -> 31 tok/s); bf16's
 * several-token rows measured slower in halves and keep the 512-bit widening */
STREAM_MULTI(mv_multi_f16_halves, mm_f16, 2, 2, NO_PRE, ROW_F16, RS_ONE, LD_F16_HALVES)
STREAM_MULTI(mv_multi_bf16, mm_bf16, 2, 2, NO_PRE, ROW_F16, RS_ONE, LD_BF16)

bool cq_avx512_matvec_multi(const cmf_qmat *m, const float *const *X, size_t T, float *const *Y,
                            uint64_t r0, uint64_t r1) {
    void (*fn)(const cmf_qmat *, const float *const *, size_t, float *const *, uint64_t, uint64_t) =
        m->dtype == CMF_DT_F32    ? mv_multi_f32
        : m->dtype == CMF_DT_F16  ? (cq_cpu_amd() ? mv_multi_f16_halves : mv_multi_f16_whole)
        : m->dtype == CMF_DT_BF16 ? mv_multi_bf16
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
    mm_q8_row_f32(m, xs, n, C, Y, ldy, r0, r1, 0);
}

/* ======== group dtypes: 32 weights per step, decoded into (w0, w1) ======== */

/* 16 bytes of nibbles (element 2k low, 2k+1 high), values q - 8, times s. */
static inline void dec_q4(const uint8_t *p, __m512 s, __m512 *w0, __m512 *w1) {
    const __m128i m4 = _mm_set1_epi8(15), eight = _mm_set1_epi8(8);
    __m128i b = _mm_loadu_si128((const __m128i *)p);
    __m128i lo = _mm_and_si128(b, m4), hi = _mm_and_si128(_mm_srli_epi16(b, 4), m4);
    __m128i v0 = _mm_sub_epi8(_mm_unpacklo_epi8(lo, hi), eight);
    __m128i v1 = _mm_sub_epi8(_mm_unpackhi_epi8(lo, hi), eight);
    *w0 = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(v0)), s);
    *w1 = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(v1)), s);
}

/* q1: bit i of the 32-bit word selects +s (1) or -s (0). */
static inline void dec_q1(const uint8_t *t, __m512 *w0, __m512 *w1) {
    __m512 s = _mm512_set1_ps(h16(t)), ns = _mm512_sub_ps(ZERO, s);
    uint32_t bits = ld_u32(t + 2);
    *w0 = _mm512_mask_blend_ps((__mmask16)bits, ns, s);
    *w1 = _mm512_mask_blend_ps((__mmask16)(bits >> 16), ns, s);
}

/* q1t: 16 ternary digits from their code bytes (lane j holds byte j/5, divisor 3^(j%5));
 * digit d in {0,1,2} maps to d*(2.5 - 1.5d) in {0, +1, -1}. Float floor division is exact
 * here: every quotient sits at least 1/81 away from the next integer. */
static inline __m512 trits16(__m512i bytes, __m512i idx, __m512 inv, __m512 s) {
    const __m512 eps = _mm512_set1_ps(0.005f), third = _mm512_set1_ps(1.0f / 3.0f),
                 three = _mm512_set1_ps(3.0f);
    __m512 v = _mm512_cvtepi32_ps(_mm512_permutexvar_epi32(idx, bytes));
    __m512 q = _mm512_roundscale_ps(_mm512_fmadd_ps(v, inv, eps),
                                    _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
    __m512 q3 = _mm512_roundscale_ps(_mm512_fmadd_ps(q, third, eps),
                                     _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
    __m512 d = _mm512_fnmadd_ps(q3, three, q);
    __m512 f = _mm512_mul_ps(d, _mm512_fnmadd_ps(_mm512_set1_ps(1.5f), d, _mm512_set1_ps(2.5f)));
    return _mm512_mul_ps(f, s);
}

typedef struct {
    __m512i idx0, idx1;
    __m512 inv0, inv1;
} q1t_tab;

static void q1t_tab_init(q1t_tab *tb) {
    static const float inv[5] = {1.0f, 1.0f / 3, 1.0f / 9, 1.0f / 27, 1.0f / 81};
    int32_t i0[16], i1[16];
    float f0[16], f1[16];
    for (int j = 0; j < 16; j++) {
        i0[j] = j / 5;
        i1[j] = (j + 16) / 5;
        f0[j] = inv[j % 5];
        f1[j] = inv[(j + 16) % 5];
    }
    tb->idx0 = _mm512_loadu_si512(i0);
    tb->idx1 = _mm512_loadu_si512(i1);
    tb->inv0 = _mm512_loadu_ps(f0);
    tb->inv1 = _mm512_loadu_ps(f1);
}

/* Reads 8 bytes at t + 2: the 7 code bytes and one more, which exists because a q1t
 * payload always continues with its row_ptr table after the last tile. */
static inline void dec_q1t(const uint8_t *t, const q1t_tab *tb, __m512 *w0, __m512 *w1) {
    __m512 s = _mm512_set1_ps(h16(t));
    __m512i bytes = _mm512_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(t + 2)));
    *w0 = trits16(bytes, tb->idx0, tb->inv0, s);
    *w1 = trits16(bytes, tb->idx1, tb->inv1, s);
}

/* vbit: 32 b-bit values packed MSB-first (4b bytes). Each 128-bit lane L decodes values
 * 8L..8L+7 from the 16 bytes at p + L*b: a shuffle forms each value's big-endian byte
 * pair, a variable shift and a mask isolate it. */
typedef struct {
    __m512i shuf, shift, mask, bias;
    unsigned b;
} vbit_tab;

static void vbit_tab_init(vbit_tab *tb, unsigned b) {
    uint8_t shuf[64];
    uint16_t shift[32];
    for (unsigned j = 0; j < 32; j++) {
        unsigned lane = j / 8, bit = j * b, k = bit >> 3, rel = k - lane * b;
        shuf[2 * j] = (uint8_t)(rel + 1);
        shuf[2 * j + 1] = (uint8_t)rel;
        shift[j] = (uint16_t)(16 - (bit & 7) - b);
    }
    tb->shuf = _mm512_loadu_si512(shuf);
    tb->shift = _mm512_loadu_si512(shift);
    tb->mask = _mm512_set1_epi16((short)((1 << b) - 1));
    tb->bias = _mm512_set1_epi16((short)((1 << (b - 1)) - 1));
    tb->b = b;
}

static inline void dec_vbit(const uint8_t *p, const vbit_tab *tb, __m512 s, __m512 *w0,
                            __m512 *w1) {
    unsigned b = tb->b;
    __m512i v = _mm512_castsi128_si512(_mm_loadu_si128((const __m128i *)p));
    v = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)(p + b)), 1);
    v = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)(p + 2 * b)), 2);
    v = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)(p + 3 * b)), 3);
    v = _mm512_shuffle_epi8(v, tb->shuf);
    v = _mm512_and_si512(_mm512_srlv_epi16(v, tb->shift), tb->mask);
    v = _mm512_sub_epi16(v, tb->bias);
    *w0 = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi16_epi32(_mm512_castsi512_si256(v))), s);
    *w1 = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi16_epi32(_mm512_extracti64x4_epi64(v, 1))),
                        s);
}

/* Row r's q4tp ladder (q4tp_ladder_avx512.h: 2^lo and 2^step from an exp2 polynomial scaled by
 * vscalefps, then their products). */
void cq_avx512_q4tp_ladder(const cmf_qmat *m, uint64_t r, float lad[32]) {
    __m512 l0, l1;
    cq_q4tp_ladder_avx512(m, r, &l0, &l1);
    _mm512_storeu_ps(lad, l0);
    _mm512_storeu_ps(lad + 16, l1);
}

void cq_avx512_q4tp_params(const cmf_qmat *m, uint64_t r, float p[3]) {
    cq_q4tp_params_avx512(m, r, p);
}

/* A group kernel: SETUP runs once per row, DECODE(g) sets w0/w1 for group g, POST(res, nt, x)
 * may adjust the nt finished sums (overlay corrections). */
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
                __m512 a0 = ZERO, b0 = ZERO, a1 = ZERO, b1 = ZERO, a2 = ZERO, b2 = ZERO,           \
                       a3 = ZERO, b3 = ZERO;                                                       \
                for (uint64_t g = 0; g < G; g++) {                                                 \
                    __m512 w0, w1;                                                                 \
                    DECODE;                                                                        \
                    const uint64_t i = 32 * g;                                                     \
                    a0 = _mm512_fmadd_ps(w0, _mm512_loadu_ps(x0 + i), a0);                         \
                    b0 = _mm512_fmadd_ps(w1, _mm512_loadu_ps(x0 + i + 16), b0);                    \
                    a1 = _mm512_fmadd_ps(w0, _mm512_loadu_ps(x1 + i), a1);                         \
                    b1 = _mm512_fmadd_ps(w1, _mm512_loadu_ps(x1 + i + 16), b1);                    \
                    a2 = _mm512_fmadd_ps(w0, _mm512_loadu_ps(x2 + i), a2);                         \
                    b2 = _mm512_fmadd_ps(w1, _mm512_loadu_ps(x2 + i + 16), b2);                    \
                    a3 = _mm512_fmadd_ps(w0, _mm512_loadu_ps(x3 + i), a3);                         \
                    b3 = _mm512_fmadd_ps(w1, _mm512_loadu_ps(x3 + i + 16), b3);                    \
                }                                                                                  \
                float res[4] = {_mm512_reduce_add_ps(_mm512_add_ps(a0, b0)),                       \
                                _mm512_reduce_add_ps(_mm512_add_ps(a1, b1)),                       \
                                _mm512_reduce_add_ps(_mm512_add_ps(a2, b2)),                       \
                                _mm512_reduce_add_ps(_mm512_add_ps(a3, b3))};                      \
                POST(res, 4, x0);                                                                  \
                for (int k = 0; k < 4; k++)                                                        \
                    Y[(t + k) * ldy + (r - r0)] = res[k];                                          \
            }                                                                                      \
            for (; t < n; t++) { /* two groups per step: four FMA chains hide the FMA latency */   \
                const float *x0 = X + t * ldx;                                                     \
                __m512 a0 = ZERO, b0 = ZERO, a1 = ZERO, b1 = ZERO;                                 \
                uint64_t g = 0;                                                                    \
                for (; g + 2 <= G; g += 2) {                                                       \
                    __m512 w0, w1;                                                                 \
                    DECODE;                                                                        \
                    a0 = _mm512_fmadd_ps(w0, _mm512_loadu_ps(x0 + 32 * g), a0);                    \
                    b0 = _mm512_fmadd_ps(w1, _mm512_loadu_ps(x0 + 32 * g + 16), b0);               \
                    g++;                                                                           \
                    DECODE;                                                                        \
                    g--;                                                                           \
                    a1 = _mm512_fmadd_ps(w0, _mm512_loadu_ps(x0 + 32 * g + 32), a1);               \
                    b1 = _mm512_fmadd_ps(w1, _mm512_loadu_ps(x0 + 32 * g + 48), b1);               \
                }                                                                                  \
                if (g < G) {                                                                       \
                    __m512 w0, w1;                                                                 \
                    DECODE;                                                                        \
                    a0 = _mm512_fmadd_ps(w0, _mm512_loadu_ps(x0 + 32 * g), a0);                    \
                    b0 = _mm512_fmadd_ps(w1, _mm512_loadu_ps(x0 + 32 * g + 16), b0);               \
                }                                                                                  \
                float res[1] = {_mm512_reduce_add_ps(                                              \
                    _mm512_add_ps(_mm512_add_ps(a0, b0), _mm512_add_ps(a1, b1)))};                 \
                POST(res, 1, x0);                                                                  \
                Y[t * ldy + (r - r0)] = res[0];                                                    \
            }                                                                                      \
        }                                                                                          \
    }

#define NO_POST(res, nt, x) ((void)0)
CQ_DEFINE_OVL_APPLY(ovl_apply, h16)
#define OVL_POST(res, nt, x) ovl_apply(m, r, ovl_e, ovl_n, x, nt, ldx, res)

GROUP_KERNEL(mm_q4_tiled_f32, (void)0, const uint8_t *row = m->quants + r * G * CQ_Q4T_TILE,
             dec_q4(row + g * CQ_Q4T_TILE + 2, _mm512_set1_ps(h16(row + g * CQ_Q4T_TILE)), &w0,
                    &w1),
             NO_POST)

GROUP_KERNEL(mm_q4_block_f32, (void)0, const uint8_t *nib = m->quants + r * G * 16;
             const uint8_t *sc = m->scales + r * G * 2,
             dec_q4(nib + 16 * g, _mm512_set1_ps(h16(sc + 2 * g)), &w0, &w1), NO_POST)

GROUP_KERNEL(mm_q4tp_f32, float lad[32], const uint8_t *nib = m->quants + r * G * 16;
             cq_avx512_q4tp_ladder(m, r, lad),
             dec_q4(nib + 16 * g, _mm512_set1_ps(lad[cq_q4tp_code(m, r, g)]), &w0, &w1), NO_POST)

GROUP_KERNEL(mm_q1, (void)0, const uint8_t *row = m->quants + r * G * CQ_Q1_TILE,
             dec_q1(row + g * CQ_Q1_TILE, &w0, &w1), NO_POST)
GROUP_KERNEL(mm_q1s, uint64_t ovl_k = cq_ovl_seek(m, r0),
             const uint8_t *row = m->quants + r * G * CQ_Q1_TILE;
             const uint8_t *ovl_e; uint64_t ovl_n; cq_ovl_next(m, r, &ovl_k, &ovl_e, &ovl_n),
                                                   dec_q1(row + g * CQ_Q1_TILE, &w0, &w1), OVL_POST)
GROUP_KERNEL(mm_q1t, q1t_tab tb; q1t_tab_init(&tb);
             uint64_t ovl_k = 0, const uint8_t *row = m->quants + r * G * CQ_Q1T_TILE;
             const uint8_t *ovl_e; uint64_t ovl_n;
             cq_ovl_next(m, r, &ovl_k, &ovl_e, &ovl_n),
             dec_q1t(row + g * CQ_Q1T_TILE, &tb, &w0, &w1), OVL_POST)

/* vbit: the decode tables follow the row's bit width; the last groups of the payload are
 * decoded from a copy so the 16-byte lane loads never leave it. */
CQ_DEFINE_VBIT_TABS(vbit_tabs, vbit_tab, vbit_tab_init)
GROUP_KERNEL(mm_vbit_generic, const vbit_tab *tabs = vbit_tabs(); uint8_t bounce[48];
             const uint8_t *end = m->data + m->nbytes, const unsigned b = cq_vbit_bits(m, r);
             const vbit_tab *tb = &tabs[b]; const uint8_t *row = cq_vbit_row(m, r);
             const uint8_t *sc = m->scales + 2 * r * G,
             dec_vbit(cq_vbit_group_src(row + 4 * b * g, b, end, bounce), tb,
                      _mm512_set1_ps(h16(sc + 2 * g)), &w0, &w1),
             NO_POST)

/* ---- q4 family, f32 activations, with the activations de-interleaved once per call ----
 * Each group's 16 nibble bytes are widened to 16 dword lanes; vpermps looks the low nibble
 * up in a 16-entry table of (q - 8) * scale (it only reads the index's low 4 bits), and the
 * high nibble after a 4-bit shift. That yields the even and the odd weights of the group,
 * which meet activations stored as [x0 x2 .. x30 | x1 x3 .. x31]. Cheaper than widening
 * and converting each nibble (2 permutes replace 2 sign-extends, 2 converts, 2 multiplies
 * and the byte unpacking). */

#define ALWAYS_INLINE static inline __attribute__((always_inline))

/* Weights of group g as two vectors: even elements (we) and odd elements (wo); lad is the
 * q4tp ladder of row r. */
ALWAYS_INLINE void q4_lut_group(const cmf_qmat *m, uint64_t r, uint64_t g, const float *lad,
                                uint64_t *cw, __m512 *we, __m512 *wo) {
    const __m512 base = _mm512_setr_ps(-8, -7, -6, -5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7);
    const uint8_t *nib;
    float s;
    if (m->dtype == CMF_DT_Q4TP) { /* 8 codes per 5 bytes, LSB-first */
        if ((g & 7) == 0) *cw = cq_q4tp_codes8(m, r, g);
        nib = m->quants + (r * m->groups + g) * 16;
        s = lad[*cw & 31];
        *cw >>= 5;
    } else {
        const uint64_t G = m->groups;
        if (m->dtype == CMF_DT_Q4_TILED) {
            nib = m->quants + (r * G + g) * CQ_Q4T_TILE;
            s = h16(nib);
            nib += 2;
        } else {
            nib = m->quants + (r * G + g) * 16;
            s = h16(m->scales + 2 * (r * G + g));
        }
    }
    _mm_prefetch((const char *)nib + CQ_PF_DIST, _MM_HINT_T0);
    __m512i bd = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)nib));
    __m512 lut = _mm512_mul_ps(base, _mm512_set1_ps(s));
    *we = _mm512_permutexvar_ps(bd, lut);
    *wo = _mm512_permutexvar_ps(_mm512_srli_epi32(bd, 4), lut);
}

ALWAYS_INLINE void q4_lut_nt(const cmf_qmat *m, const float *xd, size_t t0, const size_t NT,
                             float *Y, size_t ldy, uint64_t r0, uint64_t r1) {
    const uint64_t G = m->groups, C = m->cols;
    float lad[32];
    for (uint64_t r = r0; r < r1; r++) {
        if (m->dtype == CMF_DT_Q4TP) cq_avx512_q4tp_ladder(m, r, lad);
        /* even and odd groups accumulate separately: more chains than the FMA latency */
        __m512 ae0[4], ao0[4], ae1[4], ao1[4];
        for (size_t k = 0; k < NT; k++)
            ae0[k] = ao0[k] = ae1[k] = ao1[k] = ZERO;
        uint64_t cw = 0, g = 0;
        __m512 we, wo;
        for (; g + 2 <= G; g += 2) {
            q4_lut_group(m, r, g, lad, &cw, &we, &wo);
            for (size_t k = 0; k < NT; k++) {
                const float *x = xd + (t0 + k) * C + 32 * g;
                ae0[k] = _mm512_fmadd_ps(we, _mm512_loadu_ps(x), ae0[k]);
                ao0[k] = _mm512_fmadd_ps(wo, _mm512_loadu_ps(x + 16), ao0[k]);
            }
            q4_lut_group(m, r, g + 1, lad, &cw, &we, &wo);
            for (size_t k = 0; k < NT; k++) {
                const float *x = xd + (t0 + k) * C + 32 * g + 32;
                ae1[k] = _mm512_fmadd_ps(we, _mm512_loadu_ps(x), ae1[k]);
                ao1[k] = _mm512_fmadd_ps(wo, _mm512_loadu_ps(x + 16), ao1[k]);
            }
        }
        if (g < G) {
            q4_lut_group(m, r, g, lad, &cw, &we, &wo);
            for (size_t k = 0; k < NT; k++) {
                const float *x = xd + (t0 + k) * C + 32 * g;
                ae0[k] = _mm512_fmadd_ps(we, _mm512_loadu_ps(x), ae0[k]);
                ao0[k] = _mm512_fmadd_ps(wo, _mm512_loadu_ps(x + 16), ao0[k]);
            }
        }
        for (size_t k = 0; k < NT; k++)
            Y[(t0 + k) * ldy + (r - r0)] = _mm512_reduce_add_ps(
                _mm512_add_ps(_mm512_add_ps(ae0[k], ao0[k]), _mm512_add_ps(ae1[k], ao1[k])));
    }
}

/* A copy of the n token rows of X (stride ldx) with every 32-group reordered to
 * [x0 x2 .. x30 | x1 x3 .. x31]; NULL when out of memory. cols % 32 == 0. */
static float *deinterleave(const float *X, size_t n, size_t ldx, uint64_t C) {
    float *xd = cq_kernel_scratch(CQ_SCRATCH_ACT, n * C * sizeof *xd);
    if (!xd) return NULL;
    const __m512i ie = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const __m512i io = _mm512_add_epi32(ie, _mm512_set1_epi32(1));
    for (size_t t = 0; t < n; t++)
        for (uint64_t i = 0; i < C; i += 32) {
            __m512 a = _mm512_loadu_ps(X + t * ldx + i), b = _mm512_loadu_ps(X + t * ldx + i + 16);
            _mm512_storeu_ps(xd + t * C + i, _mm512_permutex2var_ps(a, ie, b));
            _mm512_storeu_ps(xd + t * C + i + 16, _mm512_permutex2var_ps(a, io, b));
        }
    return xd;
}

/* ---- vbit rows by width: 4 bits by table lookup on de-interleaved activations (the high
 * nibble is the even element: MSB-first), 8 bits by plain widening, others generic ---- */

/* A 4-bit vbit group: the high nibble is the even element (MSB-first), value u - 7. */
ALWAYS_INLINE void vbit4_group(const uint8_t *row, const uint8_t *sc, uint64_t g, __m512 base4,
                               __m512 *we, __m512 *wo) {
    _mm_prefetch((const char *)row + 16 * g + CQ_PF_DIST, _MM_HINT_T0);
    __m512i bd = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(row + 16 * g)));
    __m512 lut = _mm512_mul_ps(base4, _mm512_set1_ps(h16(sc + 2 * g)));
    *we = _mm512_permutexvar_ps(_mm512_srli_epi32(bd, 4), lut);
    *wo = _mm512_permutexvar_ps(bd, lut);
}

ALWAYS_INLINE void vbit_nt(const cmf_qmat *m, const float *X, size_t ldx, const float *xd,
                           const vbit_tab *tabs, size_t t0, const size_t NT, float *Y, size_t ldy,
                           uint64_t r0, uint64_t r1) {
    const uint64_t G = m->groups, C = m->cols;
    const uint8_t *end = m->data + m->nbytes;
    const __m512 base4 = _mm512_setr_ps(-7, -6, -5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7, 8);
    uint8_t bounce[48];
    for (uint64_t r = r0; r < r1; r++) {
        const unsigned b = cq_vbit_bits(m, r);
        const uint8_t *row = cq_vbit_row(m, r), *sc = m->scales + 2 * r * G;
        __m512 a0[4], a1[4];
        for (size_t k = 0; k < NT; k++)
            a0[k] = a1[k] = ZERO;
        if (b == 4) {
            /* groups g (into a0/a1) and g + 1 (into c0/c1): four FMA chains per token */
            __m512 c0[4], c1[4];
            for (size_t k = 0; k < NT; k++)
                c0[k] = c1[k] = ZERO;
            uint64_t g = 0;
            for (; g + 2 <= G; g += 2) {
                __m512 we, wo;
                vbit4_group(row, sc, g, base4, &we, &wo);
                for (size_t k = 0; k < NT; k++) {
                    const float *x = xd + (t0 + k) * C + 32 * g;
                    a0[k] = _mm512_fmadd_ps(we, _mm512_loadu_ps(x), a0[k]);
                    a1[k] = _mm512_fmadd_ps(wo, _mm512_loadu_ps(x + 16), a1[k]);
                }
                vbit4_group(row, sc, g + 1, base4, &we, &wo);
                for (size_t k = 0; k < NT; k++) {
                    const float *x = xd + (t0 + k) * C + 32 * g + 32;
                    c0[k] = _mm512_fmadd_ps(we, _mm512_loadu_ps(x), c0[k]);
                    c1[k] = _mm512_fmadd_ps(wo, _mm512_loadu_ps(x + 16), c1[k]);
                }
            }
            if (g < G) {
                __m512 we, wo;
                vbit4_group(row, sc, g, base4, &we, &wo);
                for (size_t k = 0; k < NT; k++) {
                    const float *x = xd + (t0 + k) * C + 32 * g;
                    a0[k] = _mm512_fmadd_ps(we, _mm512_loadu_ps(x), a0[k]);
                    a1[k] = _mm512_fmadd_ps(wo, _mm512_loadu_ps(x + 16), a1[k]);
                }
            }
            for (size_t k = 0; k < NT; k++) {
                a0[k] = _mm512_add_ps(a0[k], c0[k]);
                a1[k] = _mm512_add_ps(a1[k], c1[k]);
            }
        } else {
            const vbit_tab *tb = &tabs[b];
            for (uint64_t g = 0; g < G; g++) {
                _mm_prefetch((const char *)row + 4 * b * g + CQ_PF_DIST, _MM_HINT_T0);
                __m512 w0, w1, s = _mm512_set1_ps(h16(sc + 2 * g));
                if (b == 8) {
                    const __m512 l8 = _mm512_set1_ps(127.0f);
                    const uint8_t *p = row + 32 * g;
                    w0 = _mm512_cvtepi32_ps(
                        _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)p)));
                    w1 = _mm512_cvtepi32_ps(
                        _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(p + 16))));
                    w0 = _mm512_mul_ps(_mm512_sub_ps(w0, l8), s);
                    w1 = _mm512_mul_ps(_mm512_sub_ps(w1, l8), s);
                } else {
                    dec_vbit(cq_vbit_group_src(row + 4 * b * g, b, end, bounce), tb, s, &w0, &w1);
                }
                for (size_t k = 0; k < NT; k++) {
                    const float *x = X + (t0 + k) * ldx + 32 * g;
                    a0[k] = _mm512_fmadd_ps(w0, _mm512_loadu_ps(x), a0[k]);
                    a1[k] = _mm512_fmadd_ps(w1, _mm512_loadu_ps(x + 16), a1[k]);
                }
            }
        }
        for (size_t k = 0; k < NT; k++)
            Y[(t0 + k) * ldy + (r - r0)] = _mm512_reduce_add_ps(_mm512_add_ps(a0[k], a1[k]));
    }
}

static bool vbit_by_width(const cmf_qmat *m, const float *X, size_t n, size_t ldx, float *Y,
                          size_t ldy, uint64_t r0, uint64_t r1) {
    float *xd = deinterleave(X, n, ldx, m->cols);
    if (!xd) return false;
    const vbit_tab *tabs = vbit_tabs();
    size_t t = 0;
    for (; t + 4 <= n && cq_fits_l1(4, 4 * m->cols); t += 4)
        vbit_nt(m, X, ldx, xd, tabs, t, 4, Y, ldy, r0, r1);
    for (; t + 2 <= n && cq_fits_l1(2, 4 * m->cols); t += 2)
        vbit_nt(m, X, ldx, xd, tabs, t, 2, Y, ldy, r0, r1);
    for (; t < n; t++)
        vbit_nt(m, X, ldx, xd, tabs, t, 1, Y, ldy, r0, r1);
    return true;
}

/* Returns false when the activation copy cannot be allocated. */
static bool q4_lut(const cmf_qmat *m, const float *X, size_t n, size_t ldx, float *Y, size_t ldy,
                   uint64_t r0, uint64_t r1) {
    float *xd = deinterleave(X, n, ldx, m->cols);
    if (!xd) return false;
    size_t t = 0;
    for (; t + 4 <= n && cq_fits_l1(4, 4 * m->cols); t += 4)
        q4_lut_nt(m, xd, t, 4, Y, ldy, r0, r1);
    for (; t + 2 <= n && cq_fits_l1(2, 4 * m->cols); t += 2)
        q4_lut_nt(m, xd, t, 2, Y, ldy, r0, r1);
    for (; t < n; t++)
        q4_lut_nt(m, xd, t, 1, Y, ldy, r0, r1);
    return true;
}

static void mm_vbit(const cmf_qmat *m, const float *X, size_t n, size_t ldx, float *Y, size_t ldy,
                    uint64_t r0, uint64_t r1, unsigned flags) {
    if (n == 1 && (flags & CMF_KF_INT8_ACT) && cq_cpu_detect()->avx512vnni &&
        cq_avx512_i8dec_matvec(m, X, Y, r0, r1))
        return; /* decode with int8 activations */
    if (!vbit_by_width(m, X, n, ldx, Y, ldy, r0, r1))
        mm_vbit_generic(m, X, n, ldx, Y, ldy, r0, r1, flags);
}

/* The int8-activation path when asked for and the CPU has VNNI. */
static bool try_i8(const cmf_qmat *m, const float *X, size_t n, size_t ldx, float *Y, size_t ldy,
                   uint64_t r0, uint64_t r1, unsigned flags) {
    return (flags & CMF_KF_INT8_ACT) && cq_cpu_detect()->avx512vnni &&
           cq_avx512_i8_matmul(m, X, n, ldx, Y, ldy, r0, r1);
}

static void mm_q4_block(const cmf_qmat *m, const float *X, size_t n, size_t ldx, float *Y,
                        size_t ldy, uint64_t r0, uint64_t r1, unsigned flags) {
    if (m->cols % 32)
        cq_ref_matmul(m, X, n, ldx, Y, ldy, r0, r1, flags); /* rows start mid-group */
    else if (!try_i8(m, X, n, ldx, Y, ldy, r0, r1, flags) && !q4_lut(m, X, n, ldx, Y, ldy, r0, r1))
        mm_q4_block_f32(m, X, n, ldx, Y, ldy, r0, r1, flags);
}
static void mm_q4_tiled(const cmf_qmat *m, const float *X, size_t n, size_t ldx, float *Y,
                        size_t ldy, uint64_t r0, uint64_t r1, unsigned flags) {
    if (!try_i8(m, X, n, ldx, Y, ldy, r0, r1, flags) && !q4_lut(m, X, n, ldx, Y, ldy, r0, r1))
        mm_q4_tiled_f32(m, X, n, ldx, Y, ldy, r0, r1, flags);
}
static void mm_q4tp(const cmf_qmat *m, const float *X, size_t n, size_t ldx, float *Y, size_t ldy,
                    uint64_t r0, uint64_t r1, unsigned flags) {
    if (!try_i8(m, X, n, ldx, Y, ldy, r0, r1, flags) && !q4_lut(m, X, n, ldx, Y, ldy, r0, r1))
        mm_q4tp_f32(m, X, n, ldx, Y, ldy, r0, r1, flags);
}
static void mm_q8_row(const cmf_qmat *m, const float *X, size_t n, size_t ldx, float *Y, size_t ldy,
                      uint64_t r0, uint64_t r1, unsigned flags) {
    if (!try_i8(m, X, n, ldx, Y, ldy, r0, r1, flags))
        mm_q8_row_f32(m, X, n, ldx, Y, ldy, r0, r1, flags);
}

const cq_kernel_table cq_kernels_avx512 = {
    .mm =
        {
            [CMF_DT_F32] = mm_f32,
            [CMF_DT_F16] = mm_f16,
            [CMF_DT_BF16] = mm_bf16,
            [CMF_DT_Q8_ROW] = mm_q8_row,
            [CMF_DT_Q4_BLOCK] = mm_q4_block,
            [CMF_DT_VBIT] = mm_vbit,
            [CMF_DT_Q8_2F] = mm_q8_2f_scaled,
            [CMF_DT_VBIT_RO] = mm_vbit,
            [CMF_DT_Q4_TILED] = mm_q4_tiled,
            [CMF_DT_Q1] = mm_q1,
            [CMF_DT_Q1S] = mm_q1s,
            [CMF_DT_Q1T] = mm_q1t,
            [CMF_DT_Q4TP] = mm_q4tp,
        },
};
