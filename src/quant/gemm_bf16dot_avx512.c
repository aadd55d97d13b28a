/* gemm_bf16dot_avx512.c - batched products (prefill) on bf16 weights with the AVX-512 BF16 dot
 * product, the activations rounded to bf16 (CMF_KF_BF16_ACT).
 *
 * vdpbf16ps adds to each f32 lane the products of one pair of bf16 values from each operand:
 * 32 multiply-adds per instruction where an f32 FMA does 16, at the same rate (one 512-bit
 * instruction per cycle on Zen 4). Columns 2p and 2p + 1 of a weight row are such a pair as they
 * lie in the file (one 32-bit word), so the weights are broadcast a pair at a time and the
 * tokens sit in the lanes: the activations of 16 tokens are rounded to bf16 (nearest even) and
 * regrouped once per call so that one vector holds pair p of every token. The inner step is one
 * activation load and 16 dot products, one per row of a 16-row panel, each with its weight pair
 * broadcast from memory.
 *
 * The columns go in blocks of KBP pairs. A block of the panel's rows is copied as it is (bf16
 * needs no conversion) into a buffer that stays in L1 while every token group passes over it;
 * the weights in place would be 16 streams a row apart, which share L1 sets when the row length
 * is a power of two. The passes prefetch the next block's weights into L2, spread over their
 * steps. The sums of a panel and group wait in a small buffer between blocks and leave through
 * one transpose into Y.
 *
 * Products of two bf16 values are exact in f32 and every lane adds its pairs in one fixed
 * order, so a token's outputs have the same bits whatever the batch size and the token's group.
 * They differ from the f32-activation products (gemm_f32_avx512.c) by the activation rounding:
 * at most 2^-8 of sum |w x| per output, plus the f32 summation error. */
#include <immintrin.h>
#include <stdlib.h>

#include "common/cpu.h"
#include "quant/gemm_impl.h"
#include "quant/kernel_impl.h"
#include "quant/transpose_avx512.h"

#define PR  16            /* rows per panel: 16 accumulators + the activation vector */
#define TG  CQ_BACT_GROUP /* tokens per group: one vector's lanes */
#define KBP 128           /* column pairs per block: 16 rows x 512 bytes = 8 KiB of panel */

/* The lanes of 16 values from column c on that exist (C columns in all). */
static inline __mmask16 cols_mask(uint64_t C, uint64_t c) {
    return c >= C ? 0 : C - c >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (C - c)) - 1);
}

/* Activations of tokens [TG g, TG g + TG) as bf16 pairs: xb[p * TG + t] = columns 2p (low half)
 * and 2p + 1 of token t, zero past n and cols; kpp pairs (a multiple of 16). Per 32 columns,
 * each token's floats are rounded to 32 bf16 in column order (16 pairs, vcvtne2ps2bf16), then
 * one 16 x 16 transpose of the pairs puts them in place, with non-temporal stores when
 * `stream` (a batch's regroup that both threads' products read, cmf_pact). */
void cq_bact_group_avx512(const float *X, size_t n, size_t ldx, uint64_t C, size_t kpp, size_t g,
                          uint32_t *xb, bool stream) {
    size_t t0 = g * TG, nt = n - t0 < TG ? n - t0 : TG;
    for (size_t c0 = 0; c0 < 2 * kpp; c0 += 32) {
        __mmask16 k0 = cols_mask(C, c0), k1 = cols_mask(C, c0 + 16);
        __m512i r[16];
        for (size_t t = 0; t < 16; t++) {
            if (t >= nt) {
                r[t] = _mm512_setzero_si512();
                continue;
            }
            const float *x = X + (t0 + t) * ldx + c0; /* c0 < C: within the row */
            __m512 lo = _mm512_maskz_loadu_ps(k0, x);
            __m512 hi = k1 ? _mm512_maskz_loadu_ps(k1, x + 16) : _mm512_setzero_ps();
            r[t] = (__m512i)_mm512_cvtne2ps_pbh(hi, lo);
        }
        /* xb[16 p + t]: token t, pair c0 / 2 + p */
        if (stream)
            cq_transpose16_to(r, xb + c0 / 2 * TG, 64, 1);
        else
            cq_transpose16_store(r, xb + c0 / 2 * TG);
    }
}

/* Pairs [p0, p0 + bw) of rows [r, r + nr) into the block buffer: panel[i * KBP + q] = pair p0 + q
 * of row r + i (zero past cols, and for rows past nr); bw is a multiple of 16. */
static void copy_block(const cmf_qmat *m, uint64_t r, unsigned nr, size_t p0, size_t bw,
                       uint32_t *panel) {
    const uint64_t C = m->cols;
    const uint16_t *w0 = (const uint16_t *)(const void *)m->data;
    for (unsigned i = 0; i < PR; i++)
        for (size_t q = 0; q < bw; q += 16) {
            uint64_t c = 2 * (p0 + q); /* < C: a block starts within the row */
            __mmask32 k = (__mmask32)cols_mask(C, c) | ((__mmask32)cols_mask(C, c + 16) << 16);
            _mm512_store_si512(panel + i * KBP + q,
                               i < nr ? _mm512_maskz_loadu_epi16(k, w0 + (r + i) * C + c)
                                      : _mm512_setzero_si512());
        }
}

/* The next block's weights as 64-byte lines (row-major over its rows) and the share of them one
 * pass prefetches into L2: lines [first, first + count), per_step of them per 16 pairs. */
typedef struct next_block {
    const uint8_t *p;
    size_t stride, row_lines;
    size_t first, count, per_step;
} next_block;

static inline void prefetch_step(next_block *nx) {
    size_t c = nx->count < nx->per_step ? nx->count : nx->per_step;
    for (size_t l = nx->first; l < nx->first + c; l++)
        __builtin_prefetch(nx->p + l / nx->row_lines * nx->stride + l % nx->row_lines * 64, 0, 2);
    nx->first += c, nx->count -= c;
}

/* Y[t][i] for the panel's rows (mask) and the group's nt tokens from acc (lane t of acc[i] =
 * row i, token t), through one transpose. */
static inline void store_tokens(__m512i acc[PR], size_t nt, float *Y, size_t ldy, __mmask16 mask) {
    _Alignas(64) float blk[16 * 16];
    cq_transpose16_store(acc, blk); /* blk[16 t + i] = row i, token t */
    for (size_t t = 0; t < nt; t++)
        _mm512_mask_storeu_ps(Y + t * ldy, mask, _mm512_load_ps(blk + 16 * t));
}

/* One block of a panel against a group's tokens, NAME on VT vectors (16 lanes: __m512, 8:
 * __m256, which Zen 4 issues at the same multiply-add rate, for a last group of at most 8 tokens
 * whose padding lanes 8-15 are not read). The sums start at zero on the first block and continue
 * from `sums` after it; after the last block they go to Y, before it back to sums. */
#define DEF_BLOCK_TOKENS(NAME, VT, BH, ZERO, LOAD, STORE, SET1, DP, WIDEN)                         \
    static void NAME(const uint32_t *panel, const uint32_t *xb, size_t bw, float *sums,            \
                     bool first, bool last, size_t nt, float *Y, size_t ldy, __mmask16 mask,       \
                     next_block *nx) {                                                             \
        VT acc[PR];                                                                                \
        _Pragma("GCC unroll 16") for (int i = 0; i < PR; i++) acc[i] =                             \
            first ? ZERO() : LOAD(sums + 16 * i);                                                  \
        for (size_t q0 = 0; q0 < bw; q0 += 16, panel += 16, xb += 16 * TG) {                       \
            prefetch_step(nx);                                                                     \
            _Pragma("GCC unroll 2") for (int j = 0; j < 16; j++) {                                 \
                BH x = (BH)LOAD((const float *)(const void *)(xb + TG * j));                       \
                _Pragma("GCC unroll 16") for (int i = 0; i < PR; i++) acc[i] =                     \
                    DP(acc[i], (BH)SET1((int)panel[i * KBP + j]), x);                              \
            }                                                                                      \
        }                                                                                          \
        if (!last) {                                                                               \
            _Pragma("GCC unroll 16") for (int i = 0; i < PR; i++) STORE(sums + 16 * i, acc[i]);    \
            return;                                                                                \
        }                                                                                          \
        __m512i v[PR];                                                                             \
        _Pragma("GCC unroll 16") for (int i = 0; i < PR; i++) v[i] = WIDEN(acc[i]);                \
        store_tokens(v, nt, Y, ldy, mask);                                                         \
    }

#define WIDEN16(a) _mm512_castps_si512(a)
#define WIDEN8(a)  _mm512_castps_si512(_mm512_zextps256_ps512(a))
DEF_BLOCK_TOKENS(block_tokens16, __m512, __m512bh, _mm512_setzero_ps, _mm512_load_ps,
                 _mm512_store_ps, _mm512_set1_epi32, _mm512_dpbf16_ps, WIDEN16)
DEF_BLOCK_TOKENS(block_tokens8, __m256, __m256bh, _mm256_setzero_ps, _mm256_load_ps,
                 _mm256_store_ps, _mm256_set1_epi32, _mm256_dpbf16_ps, WIDEN8)

bool cq_gemm_bf16dot_rows_avx512(const cmf_qmat *m, const uint32_t *xb, size_t n, float *Y,
                                 size_t ldy, uint64_t r0, uint64_t r1) {
    const uint64_t C = m->cols;
    const size_t kpp = CQ_BACT_PAIRS(C), groups = (n + TG - 1) / TG;
    size_t panel_bytes = (size_t)KBP * PR * 4, sums_bytes = groups * PR * TG * sizeof(float);
    uint8_t *mem = cq_kernel_scratch(CQ_SCRATCH_AUX, panel_bytes + sums_bytes);
    if (!mem) return false;
    uint32_t *panel = (uint32_t *)(void *)mem;
    float *sums = (float *)(void *)(mem + panel_bytes);
    const size_t row_bytes = (size_t)C * 2;
    for (uint64_t r = r0; r < r1; r += PR) {
        unsigned nr = r1 - r < PR ? (unsigned)(r1 - r) : PR;
        __mmask16 mask = (__mmask16)((1u << nr) - 1);
        for (size_t p0 = 0; p0 < kpp; p0 += KBP) {
            size_t bw = kpp - p0 < KBP ? kpp - p0 : KBP;
            copy_block(m, r, nr, p0, bw, panel);
            /* the block copied next: this panel's next pairs, else the next panel's first */
            uint64_t nrow = r;
            size_t np = p0 + KBP;
            unsigned nn = nr;
            if (np >= kpp) nrow = r + PR, np = 0, nn = cq_next_panel_rows(r, r1, PR);
            size_t nbw = kpp - np < KBP ? kpp - np : KBP;
            size_t nbytes = (2 * (np + nbw) < C ? 2 * nbw : C - 2 * np) * 2;
            size_t row_lines = (nbytes + 63) / 64 + 1; /* + 1: a run that starts mid-line */
            /* spread over the passes' steps but the last pass (the last half of a lone pass),
             * so that the last lines have a pass's time to arrive before the copy */
            size_t lines = nn * row_lines, steps = bw / 16, all = groups * steps;
            size_t usable = groups > 1 ? all - steps : (steps + 1) / 2;
            size_t per_step = (lines + usable - 1) / usable, per_pass = per_step * steps;
            for (size_t g = 0; g < groups; g++) {
                size_t nt = n - g * TG < TG ? n - g * TG : TG, f = g * per_pass;
                next_block nx = {nn ? m->data + nrow * row_bytes + np * 4 : NULL,
                                 row_bytes,
                                 row_lines,
                                 f < lines ? f : lines,
                                 f < lines ? (lines - f < per_pass ? lines - f : per_pass) : 0,
                                 per_step};
                (nt > 8 ? block_tokens16 : block_tokens8)(
                    panel, xb + g * kpp * TG + p0 * TG, bw, sums + g * PR * TG, p0 == 0,
                    p0 + bw == kpp, nt, Y + g * TG * ldy + (r - r0), ldy, mask, &nx);
            }
        }
    }
    return true;
}

bool cq_gemm_bf16dot_avx512(const cmf_qmat *m, const float *X, size_t n, size_t ldx, float *Y,
                            size_t ldy, uint64_t r0, uint64_t r1) {
    if (m->dtype != CMF_DT_BF16 || !cq_cpu_detect()->avx512bf16) return false;
    const size_t kpp = CQ_BACT_PAIRS(m->cols), groups = (n + TG - 1) / TG;
    uint32_t *xb = cq_kernel_scratch(CQ_SCRATCH_ACT, groups * kpp * TG * 4);
    if (!xb) return false;
    for (size_t g = 0; g < groups; g++)
        cq_bact_group_avx512(X, n, ldx, m->cols, kpp, g, xb + g * kpp * TG, false);
    return cq_gemm_bf16dot_rows_avx512(m, xb, n, Y, ldy, r0, r1);
}
