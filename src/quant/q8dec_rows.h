/* q8dec_rows.h - q8_row's one-token rows on 256-bit vectors and their several-token form, shared
 * by the AVX2 tier (kernel_q8dec_avx2.c; kernel_q8dec_avxvnni.c with AVX-VNNI) and AMD's AVX-512
 * cores (kernel_q8dec_amd_avx512.c), which differ only in how a group's int32 sums are made.
 * All give every (row, token) the same bits: the sums of w * x per 4 columns are exact, and the
 * float steps below are one order.
 *
 * One token steps 2 rows side by side (4 FMA chains; 4 rows ran faster in cache but read DRAM
 * 5-8 % slower, 1 row slower either way); per row two accumulators (even and odd groups) added,
 * scaled by the row's factor and reduced 8 rows together (cq_rows_store_avx2). Several tokens
 * take each row alone, each group's weights loaded (and Q8DEC_PREP run) once for them all.
 *
 * The includer defines, before including it:
 *   Q8DEC_PREP(w)       what the step needs of a group's 32 weights w, once for all tokens
 *   Q8DEC_SUMS(x, w, p) the group's eight int32 sums of w * x per 4 columns, x the token's 32
 *                       codes as its layout stores them, p = Q8DEC_PREP(w)
 *   Q8DEC_TOKEN         the codes' type (int8_t or uint8_t)
 *   Q8DEC_MATVEC, Q8DEC_MULTI  the names of the one- and several-token entry points made
 *   Q8DEC_PREPARE       the layout's token preparation (cq_avx2_q8dec_tok_prepare's bytes)
 *   Q8DEC_FROM_F32      the name of the entry point made that prepares x in the thread's
 *                       scratch and runs Q8DEC_MATVEC (false where q8_row's path cannot run) */
#include <immintrin.h>

#include "quant/hsum_avx2.h"
#include "quant/kernel_i8dec.h"
#include "quant/kernel_impl.h"

#define Q8DEC_AI       static inline __attribute__((always_inline))
#define Q8DEC_MULTI_NT 4

/* Group g of a token (codes xq, scales dx) against its weights w, as floats added to acc. */
Q8DEC_AI __m256 q8dec_group(const Q8DEC_TOKEN *xq, const float *dx, uint64_t g, __m256i w,
                            __m256i p, __m256 acc) {
    __m256i x = _mm256_load_si256((const __m256i *)(const void *)(xq + 32 * g));
    __m256i s = Q8DEC_SUMS(x, w, p);
    return _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_broadcast_ss(dx + g), acc);
}

Q8DEC_AI __m256i q8dec_weights(const cmf_qmat *m, uint64_t r, uint64_t g) {
    return _mm256_loadu_si256((const __m256i *)(const void *)(m->quants + r * m->cols + 32 * g));
}

Q8DEC_AI __m256 q8dec_scale(const cmf_qmat *m, uint64_t r, __m256 acc) {
    return _mm256_mul_ps(acc, _mm256_set1_ps(_cvtsh_ss(ld_u16(m->scales + 2 * r))));
}

/* Rows r .. r + R - 1 (R <= 2) for one token, into v[0 .. R). */
Q8DEC_AI void q8dec_rows_one(const cmf_qmat *m, const Q8DEC_TOKEN *xq, uint64_t r, const int R,
                             __m256 *v) {
    const uint64_t G = m->cols / 32;
    const float *dx = cq_avx2_q8dec_tok_dx(xq, m->cols);
    __m256 a[2], b[2];
    for (int k = 0; k < R; k++)
        a[k] = b[k] = _mm256_setzero_ps();
    uint64_t g = 0;
    for (; g + 2 <= G; g += 2) {
        cq_prefetch_span(m->quants + r * m->cols, (uint64_t)R, 32 * g, (unsigned)R);
        for (int k = 0; k < R; k++) {
            __m256i w0 = q8dec_weights(m, r + (uint64_t)k, g),
                    w1 = q8dec_weights(m, r + (uint64_t)k, g + 1);
            a[k] = q8dec_group(xq, dx, g, w0, Q8DEC_PREP(w0), a[k]);
            b[k] = q8dec_group(xq, dx, g + 1, w1, Q8DEC_PREP(w1), b[k]);
        }
    }
    for (int k = 0; k < R; k++) {
        if (g < G) {
            __m256i w0 = q8dec_weights(m, r + (uint64_t)k, g);
            a[k] = q8dec_group(xq, dx, g, w0, Q8DEC_PREP(w0), a[k]);
        }
        v[k] = q8dec_scale(m, r + (uint64_t)k, _mm256_add_ps(a[k], b[k]));
    }
}

void Q8DEC_MATVEC(const cmf_qmat *m, const void *buf, float *y, uint64_t r0, uint64_t r1) {
    __m256 v[8];
    for (uint64_t b = r0; b < r1;) {
        const unsigned n = r1 - b < 8 ? (unsigned)(r1 - b) : 8;
        unsigned k = 0;
        for (; k + 2 <= n; k += 2)
            q8dec_rows_one(m, buf, b + k, 2, v + k);
        for (; k < n; k++)
            q8dec_rows_one(m, buf, b + k, 1, v + k);
        cq_rows_store_avx2(v, n, y + (b - r0));
        b += n;
    }
}

/* Row r for tokens xq[0 .. nt), nt <= Q8DEC_MULTI_NT a constant where inlined: each token's
 * two accumulators as q8dec_rows_one's. */
Q8DEC_AI void q8dec_row_multi(const cmf_qmat *m, const Q8DEC_TOKEN *const *xq, const int nt,
                              uint64_t r, __m256 *o) {
    const uint64_t G = m->cols / 32;
    const float *dx[Q8DEC_MULTI_NT];
    __m256 a[Q8DEC_MULTI_NT], b[Q8DEC_MULTI_NT];
    for (int k = 0; k < nt; k++) {
        dx[k] = cq_avx2_q8dec_tok_dx(xq[k], m->cols);
        a[k] = b[k] = _mm256_setzero_ps();
    }
    uint64_t g = 0;
    for (; g + 2 <= G; g += 2) {
        cq_prefetch_weights(m->quants + r * m->cols + 32 * g);
        __m256i w0 = q8dec_weights(m, r, g), w1 = q8dec_weights(m, r, g + 1);
        __m256i p0 = Q8DEC_PREP(w0), p1 = Q8DEC_PREP(w1);
        for (int k = 0; k < nt; k++) {
            a[k] = q8dec_group(xq[k], dx[k], g, w0, p0, a[k]);
            b[k] = q8dec_group(xq[k], dx[k], g + 1, w1, p1, b[k]);
        }
    }
    if (g < G) { /* an odd last group */
        __m256i w0 = q8dec_weights(m, r, g), p0 = Q8DEC_PREP(w0);
        for (int k = 0; k < nt; k++)
            a[k] = q8dec_group(xq[k], dx[k], g, w0, p0, a[k]);
    }
    for (int k = 0; k < nt; k++)
        o[k] = q8dec_scale(m, r, _mm256_add_ps(a[k], b[k]));
}

Q8DEC_AI void q8dec_rows_multi(const cmf_qmat *m, const Q8DEC_TOKEN *const *xq, const int nt,
                               float *const *y, uint64_t r0, uint64_t r1) {
    __m256 v[Q8DEC_MULTI_NT][8], o[Q8DEC_MULTI_NT];
    for (uint64_t b = r0; b < r1;) {
        const unsigned n = r1 - b < 8 ? (unsigned)(r1 - b) : 8;
        for (unsigned k = 0; k < n; k++) {
            q8dec_row_multi(m, xq, nt, b + k, o);
            for (int j = 0; j < nt; j++)
                v[j][k] = o[j];
        }
        for (int j = 0; j < nt; j++)
            cq_rows_store_avx2(v[j], n, y[j] + (b - r0));
        b += n;
    }
}

void Q8DEC_MULTI(const cmf_qmat *m, const void *const *buf, size_t n, float *const *y, uint64_t r0,
                 uint64_t r1) {
    for (size_t j = 0; j < n; j += Q8DEC_MULTI_NT) {
        const size_t nt = n - j < Q8DEC_MULTI_NT ? n - j : Q8DEC_MULTI_NT;
        const Q8DEC_TOKEN *xq[Q8DEC_MULTI_NT];
        for (size_t k = 0; k < nt; k++)
            xq[k] = buf[j + k];
        if (nt == 4)
            q8dec_rows_multi(m, xq, 4, y + j, r0, r1);
        else if (nt == 3)
            q8dec_rows_multi(m, xq, 3, y + j, r0, r1);
        else if (nt == 2)
            q8dec_rows_multi(m, xq, 2, y + j, r0, r1);
        else
            Q8DEC_MATVEC(m, xq[0], y[j], r0, r1);
    }
}

bool Q8DEC_FROM_F32(const cmf_qmat *m, const float *x, float *y, uint64_t r0, uint64_t r1) {
    if (!cq_avx2_q8dec_supports(m)) return false;
    if (r0 >= r1) return true;
    void *tok = cq_kernel_scratch(CQ_SCRATCH_ACT, cq_avx2_q8dec_tok_bytes(m->cols));
    if (!tok) return false;
    Q8DEC_PREPARE(tok, x, m->cols);
    Q8DEC_MATVEC(m, tok, y, r0, r1);
    return true;
}
