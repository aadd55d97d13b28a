/* gemm_few_avx512.c - products of 2 to CQ_FEW_MAX tokens with f32 / f16 / bf16 weights
 * (cmf_matmul_ex below the panel GEMM's floor; docs/KERNELS.md, "Few-token products").
 *
 * A short prompt or a follow-up turn of a few tokens is bound by reading the weights, as decode
 * is, but the panel GEMM converts and transposes every weight into a panel first (about a
 * cycle per weight: at 4 tokens as long as its multiply-adds) and the one-token rows re-read
 * and re-convert each row per token. Here each weight is loaded and widened once and meets every
 * token in registers: two rows at a time, one accumulator per row and token (16 for 8 tokens),
 * two weight loads and up to 8 activation loads per 16 multiply-add instructions, the two
 * rows' span prefetched as decode's rows are; more than 8 tokens in balanced passes over row
 * tiles that stay in L2 (cq_few_run). Every (row, token) sum runs over its columns in
 * 16-column steps (the last one masked) and is reduced by cq_hsum16_avx512 for 16 rows at a
 * time, rows past the range's end zero: the same arithmetic for a token whatever the batch
 * size, its position in it or the row range, so the results depend on none of them. */
#include <immintrin.h>

#include "common/hsum16_avx512.h"
#include "quant/gemm_impl.h"
#include "quant/kernel_impl.h"
#include "quant/load_float_avx512.h"

/* x stays in a register for both rows' FMAs: folded into each FMA as a memory operand it was
 * loaded twice, and 7 tokens ran at 60 % of the FMA peak in L1 instead of 95 % */
#define KEEP(x) __asm__("" : "+v"(x))
#define AI      static inline __attribute__((always_inline))

/* weights i .. i + 15 of a row (mask k) as f32 */
AI __m512 ld_w(cmf_dtype dt, const uint8_t *row, uint64_t i, __mmask16 k) {
    return cq_load16_float(dt, row + (dt == CMF_DT_F32 ? 4 : 2) * i, k);
}

/* Rows [r0, r1) of m times T tokens (X, ldx) into Y (ldy), T and the dtype constants. */
AI void few_rows(const cmf_qmat *m, cmf_dtype dt, const float *X, size_t ldx, float *Y, size_t ldy,
                 uint64_t r0, uint64_t r1, const size_t T) {
    const uint64_t C = m->cols, CF = C & ~(uint64_t)15;
    const size_t es = dt == CMF_DT_F32 ? 4 : 2;
    const __mmask16 kt = (__mmask16)((1u << (C - CF)) - 1u), kf = 0xFFFF;
    for (uint64_t r = r0; r < r1; r += 16) {
        const unsigned nr = r1 - r < 16 ? (unsigned)(r1 - r) : 16;
        __m512 v[8][16];
        for (unsigned q = 0; q < 16; q += 2) {
            if (q >= nr) {
                for (size_t t = 0; t < T; t++)
                    v[t][q] = v[t][q + 1] = _mm512_setzero_ps();
                continue;
            }
            /* a lone last row computes twice; its copy's sums are dropped below */
            const uint8_t *w0 = m->data + es * (r + q) * C, *w1 = q + 1 < nr ? w0 + es * C : w0;
            __m512 a[8], b[8];
            _Pragma("GCC unroll 8") for (size_t t = 0; t < T; t++) a[t] = b[t] =
                _mm512_setzero_ps();
            uint64_t i = 0;
            for (; i < CF; i += 16) {
                /* the two rows are one span: its lines from 2 * es * i on (decode's distance) */
                cq_prefetch_span(w0, 2, es * i, (unsigned)es / 2);
                __m512 wa = ld_w(dt, w0, i, kf), wb = ld_w(dt, w1, i, kf);
                _Pragma("GCC unroll 8") for (size_t t = 0; t < T; t++) {
                    __m512 x = _mm512_loadu_ps(X + t * ldx + i);
                    KEEP(x);
                    a[t] = _mm512_fmadd_ps(wa, x, a[t]);
                    b[t] = _mm512_fmadd_ps(wb, x, b[t]);
                }
            }
            if (i < C) {
                __m512 wa = ld_w(dt, w0, i, kt), wb = ld_w(dt, w1, i, kt);
                _Pragma("GCC unroll 8") for (size_t t = 0; t < T; t++) {
                    __m512 x = _mm512_maskz_loadu_ps(kt, X + t * ldx + i);
                    a[t] = _mm512_fmadd_ps(wa, x, a[t]);
                    b[t] = _mm512_fmadd_ps(wb, x, b[t]);
                }
            }
            const bool pair = q + 1 < nr;
            _Pragma("GCC unroll 8") for (size_t t = 0; t < T; t++) {
                v[t][q] = a[t];
                v[t][q + 1] = pair ? b[t] : _mm512_setzero_ps();
            }
        }
        const __mmask16 out = (__mmask16)((1u << nr) - 1u);
        for (size_t t = 0; t < T; t++)
            _mm512_mask_storeu_ps(Y + t * ldy + (r - r0), out, cq_hsum16_avx512(v[t]));
    }
}

CQ_FEW_TIER(cq_few_avx512, few_rows, 8, 16)
