/* gemm_few_avx2.c - products of 2 to CQ_FEW_MAX tokens with f32 / f16 / bf16 weights on the AVX2
 * tier (cmf_matmul_ex below the panel GEMM's floor): gemm_few_avx512.c's form in 8 lanes. Two rows
 * at a time and up to 6 tokens a pass (12 accumulators, two weight vectors and an activation
 * vector in the 16 registers; 4 a pass ran 5-15 % slower at 6-14 tokens); more tokens take
 * balanced passes over row tiles that stay in L2, so the weights come from memory once. Every (row,
 * token) sum runs over its columns in 8-column steps, a last partial step zero-padded, and is
 * reduced as the one-token rows reduce theirs (cq_rows_store_avx2), so the results depend neither
 * on the batch size nor on the row range. */
#include <immintrin.h>
#include <string.h>

#include "common/bytes.h"
#include "common/f16.h"
#include "quant/gemm_impl.h"
#include "quant/hsum_avx2.h"
#include "quant/kernel_impl.h"
#include "quant/load_float_avx2.h"

/* x stays in a register for both rows' FMAs, as in gemm_few_avx512.c (folded into each FMA as a
 * memory operand it is loaded twice) */
#define KEEP(x)  __asm__("" : "+v"(x))
#define AI       static inline __attribute__((always_inline))
#define PASS_MAX 6

AI __m256 ld_w(cmf_dtype dt, const uint8_t *row, uint64_t i) {
    return cq_load8_float(dt, row + (dt == CMF_DT_F32 ? 4 : 2) * i);
}

/* weights i .. C - 1 of a row (fewer than 8) as f32, zero after */
static __m256 ld_w_tail(cmf_dtype dt, const uint8_t *row, uint64_t i, uint64_t C) {
    float w[8] = {0};
    for (uint64_t j = i; j < C; j++)
        if (dt == CMF_DT_F32)
            memcpy(&w[j - i], row + 4 * j, 4);
        else
            w[j - i] = dt == CMF_DT_F16 ? f16_to_f32(ld_u16(row + 2 * j))
                                        : bf16_to_f32(ld_u16(row + 2 * j));
    return _mm256_loadu_ps(w);
}

AI void few_rows(const cmf_qmat *m, cmf_dtype dt, const float *X, size_t ldx, float *Y, size_t ldy,
                 uint64_t r0, uint64_t r1, const size_t T) {
    const uint64_t C = m->cols, CF = C & ~(uint64_t)7;
    const size_t es = dt == CMF_DT_F32 ? 4 : 2;
    const __m256i tail = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)(C - CF)),
                                            _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    for (uint64_t r = r0; r < r1; r += 8) {
        const unsigned nr = r1 - r < 8 ? (unsigned)(r1 - r) : 8;
        __m256 v[PASS_MAX][8];
        for (unsigned q = 0; q < nr; q += 2) {
            const uint8_t *w0 = m->data + es * (r + q) * C,
                          *w1 = q + 1 < nr ? w0 + es * C : w0; /* a lone last row twice */
            __m256 a[PASS_MAX], b[PASS_MAX];
            _Pragma("GCC unroll 6") for (size_t t = 0; t < T; t++) a[t] = b[t] =
                _mm256_setzero_ps();
            uint64_t i = 0;
            for (; i < CF; i += 8) {
                if ((2 * es * i) % 64 == 0) cq_prefetch_span(w0, 2, es * i, 1);
                __m256 wa = ld_w(dt, w0, i), wb = ld_w(dt, w1, i);
                _Pragma("GCC unroll 6") for (size_t t = 0; t < T; t++) {
                    __m256 x = _mm256_loadu_ps(X + t * ldx + i);
                    KEEP(x);
                    a[t] = _mm256_fmadd_ps(wa, x, a[t]);
                    b[t] = _mm256_fmadd_ps(wb, x, b[t]);
                }
            }
            if (i < C) {
                __m256 wa = ld_w_tail(dt, w0, i, C), wb = ld_w_tail(dt, w1, i, C);
                _Pragma("GCC unroll 6") for (size_t t = 0; t < T; t++) {
                    __m256 x = _mm256_maskload_ps(X + t * ldx + i, tail);
                    a[t] = _mm256_fmadd_ps(wa, x, a[t]);
                    b[t] = _mm256_fmadd_ps(wb, x, b[t]);
                }
            }
            _Pragma("GCC unroll 6") for (size_t t = 0; t < T; t++) v[t][q] = a[t],
                                                                   v[t][q + 1] = b[t];
        }
        for (size_t t = 0; t < T; t++)
            cq_rows_store_avx2(v[t], nr, Y + t * ldy + (r - r0));
    }
}

CQ_FEW_TIER(cq_few_avx2, few_rows, PASS_MAX, 8)
