/* gemm_impl.h - what the prefill GEMM tiers share (see cmf_matmul_qact in quant/kernels_engine.h):
 * the weight code form of each integer dtype, the panels' prefetch. Internal to src/quant. */
#ifndef CORTIQ_QUANT_GEMM_IMPL_H
#define CORTIQ_QUANT_GEMM_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "quant/kernels_engine.h"

/* Every supported dtype stores w = (code - off) * scale with an unsigned byte code:
 * q8_row as (q XOR 0x80) with off 128 and one scale per row; the q4 family as the nibble
 * with off 8 and vbit / vbit_ro as u - L + 127 (v = u - L in [-127, 128] for every width) with
 * off 127, both with one scale per 32 columns. (The AVX2 tier holds |w| and its sign instead
 * for q8_row and vbit: gemm_i8_avx2.c.) */
typedef enum { CQ_GEMM_ROWSCALE, CQ_GEMM_BLOCKSCALE } cq_gemm_kind;

static inline cq_gemm_kind cq_gemm_kind_of(const cmf_qmat *m) {
    return m->dtype == CMF_DT_Q8_ROW ? CQ_GEMM_ROWSCALE : CQ_GEMM_BLOCKSCALE;
}

static inline bool cq_gemm_vbit(const cmf_qmat *m) {
    return m->dtype == CMF_DT_VBIT || m->dtype == CMF_DT_VBIT_RO;
}

/* The offset of m's unsigned codes (code = weight code + off). */
static inline unsigned cq_gemm_off(const cmf_qmat *m) {
    return m->dtype == CMF_DT_Q8_ROW ? 128 : cq_gemm_vbit(m) ? 127 : 8;
}

/* -off * (sum of activation codes) of token t, block b: the offset correction. */
static inline const int32_t *cq_gemm_corr(const cmf_qmat *m, const cmf_qact *a) {
    const unsigned off = cq_gemm_off(m);
    return off == 128 ? a->c128 : off == 127 ? a->c127 : a->c8;
}

/* The panel GEMMs pack `pr` rows per panel, i.e. read that many short row streams, which the
 * hardware prefetchers leave waiting on DRAM; they prefetch the next panel's rows into L2 (the
 * AVX2 integer panels while packing, at the same byte offsets; the others spread over the
 * products, cq_next_block; docs/KERNELS.md, "Prefill panels"). The rows of the panel after the
 * one at r, within [r, r1): 0 for the last panel. */
static inline unsigned cq_next_panel_rows(uint64_t r, uint64_t r1, unsigned pr) {
    uint64_t s = r + pr;
    return s < r1 ? (unsigned)(r1 - s < pr ? r1 - s : pr) : 0;
}

/* Into L2: the line at byte `off` of each of nn rows, row_bytes apart from `next`. */
static inline void cq_prefetch_panel_rows(const uint8_t *next, unsigned nn, uint64_t row_bytes,
                                          uint64_t off) {
    for (unsigned i = 0; i < nn; i++)
        __builtin_prefetch(next + i * row_bytes + off, 0, 2);
}

/* The float panels' walk (gemm_f32_avx2.c, gemm_f32_avx512.c): row tiles of panels of pr rows,
 * column blocks of kb inside a tile, the tile's panels inside a block. The weights the next pack
 * reads are brought into L2 while the micro-kernel runs, a few lines per step of its column
 * loop: issued in one burst as the pack read the panel before, the prefetches stalled the core
 * waiting for fill buffers. A cursor over them: line `line` of row `row`, `left` to go. */
typedef struct {
    const uint8_t *base;
    uint64_t row_bytes;
    size_t lines_per_row, row, line, left;
} cq_next_block;

/* The block packed after rows [r, r + pr) at columns [k0, k0 + kb) (kp columns in all, es bytes
 * per weight) of the tile [rt, rt1) of the call's rows [., r1): the tile's next panel, else the
 * tile's first panel at the next block, else the next tile's first. */
static inline cq_next_block cq_next_block_at(const uint8_t *data, uint64_t cols, size_t es,
                                             uint64_t r, uint64_t rt, uint64_t rt1, uint64_t r1,
                                             size_t k0, size_t kp, unsigned pr, size_t kb) {
    uint64_t nr = r + pr, nk = k0;
    if (nr >= rt1) {
        nr = rt, nk = k0 + kb;
        if (nk >= kp) nr = rt1, nk = 0;
    }
    cq_next_block b = {NULL, cols * es, 0, 0, 0, 0};
    if (nr >= r1) return b;
    const uint64_t rows = r1 - nr < pr ? r1 - nr : pr;
    const uint64_t bytes = ((cols < nk + kb ? cols : nk + kb) - nk) * es;
    b.base = data + (nr * cols + nk) * es;
    b.lines_per_row = (size_t)((bytes + 63) / 64);
    b.left = (size_t)rows * b.lines_per_row;
    return b;
}

/* Up to n more lines of b into L2. */
static inline void cq_next_block_fetch(cq_next_block *b, size_t n) {
    for (n = n < b->left ? n : b->left, b->left -= n; n; n--) {
        __builtin_prefetch(b->base + b->row * b->row_bytes + b->line * 64, 0, 2);
        if (++b->line == b->lines_per_row) b->line = 0, b->row++;
    }
}

/* A float panel GEMM tier's pieces for cq_float_walk_run (gemm_float_walk.c). Its panels hold
 * pr rows, its blocks kb columns, its groups tg tokens (span: group g's first token and count).
 * pack: rows [r, r + nr) and columns [k0, k0 + kw) of m into panel (zero past nr); tokens[cnt]:
 * the micro-kernel for a group of cnt tokens, acc[t * pr + i] = (add: acc +) panel row i . token
 * t over the block's kw columns (xg: the group's block), `lines` of pf prefetched on the way;
 * store: one token's `rows` outputs from a row tile's sums, panel p's pr floats at
 * o + p * stride. */
typedef struct cq_float_walk cq_float_walk;
typedef void (*cq_float_tokens_fn)(const float *panel, const float *xg, size_t kw, float *acc,
                                   bool add, cq_next_block *pf, size_t lines);
typedef struct {
    unsigned pr;
    size_t tg, kb;
    void (*pack)(const cmf_qmat *m, uint64_t r, unsigned nr, size_t k0, size_t kw, float *panel);
    const cq_float_tokens_fn *tokens;
    void (*store)(const float *o, size_t stride, float *y, uint64_t rows);
    void (*span)(size_t n, size_t g, size_t *t0, size_t *cnt);
} cq_float_tier;
/* One call: m over n tokens regrouped at xg (group g's at xg + g * gs), kp columns (padded). */
struct cq_float_walk {
    const cq_float_tier *tier;
    const cmf_qmat *m;
    const float *xg;
    size_t n, gs, kp;
};
/* Y[t * ldy + r - r0] for rows [r0, r1) of w->m; false (nothing written) without scratch. */
bool cq_float_walk_run(const cq_float_walk *w, float *Y, size_t ldy, uint64_t r0, uint64_t r1);

/* The AVX-512 VNNI tier (gemm_i8_avx512.c) and its activation quantizer (same codes as the
 * scalar tier: round to nearest even, NaN -> 0). */
void cq_gemm_avx512(const cmf_qmat *m, const cmf_qact *a, float *Y, size_t ldy, uint64_t r0,
                    uint64_t r1, void *scratch);
void cq_qact_quantize_avx512(cmf_qact *a, const float *X, size_t ldx, size_t t0, size_t t1);

/* Its 16-row panels, which the AMX tier reads too: bound to a call's scratch
 * (cmf_qact_scratch_bytes), packed per panel of rows [r, min(r + 16, r1)), then multiplied by
 * one token group g of a at a time into Y (the panel's first row at Y[0]). codes: per 64
 * columns c, 16 vectors of 64 bytes, vector j holding columns 64c + 4j .. +3 of the 16 rows as
 * unsigned codes (so block b's 8 vectors start at codes + 512 b); bs[block][16] the block
 * scales (q4 family, vbit), rs[16] the row scales (q8_row); corr the offset correction per
 * activation entry (cq_gemm_corr). */
typedef struct {
    size_t k64;
    uint8_t *codes;
    float *bs, *rs;
    int rowscale, vbit;
    const int32_t *corr;
    const void *tabs; /* vbit: the unpack tables */
    unsigned nr;      /* rows in the panel packed last */
} cq_i8_panel;
void cq_i8_panel_bind(cq_i8_panel *p, const cmf_qmat *m, const cmf_qact *a, void *scratch);
void cq_i8_panel_pack(cq_i8_panel *p, const cmf_qmat *m, uint64_t r, uint64_t r1);
void cq_i8_panel_group(const cq_i8_panel *p, const cmf_qact *a, size_t g, float *Y, size_t ldy,
                       cq_next_block *pf, size_t per);
/* A cursor over the codes the pack of the panel after rows [r, r + 16) reads (one contiguous
 * range: the payloads keep a row's codes together and rows in order; empty at r1), and in *per
 * the lines to fetch at each of `steps` block steps so that all are fetched within the first
 * three quarters of them. */
cq_next_block cq_i8_next_codes(const cmf_qmat *m, uint64_t r, uint64_t r1, size_t steps,
                               size_t *per);

/* The AMX-INT8 tier (gemm_i8_amx.c): the AVX-512 tier's panels, each whole token group's
 * products as tile products (the same bits as cq_gemm_avx512). */
void cq_gemm_amx(const cmf_qmat *m, const cmf_qact *a, float *Y, size_t ldy, uint64_t r0,
                 uint64_t r1, void *scratch);

/* The AVX2 tier (gemm_i8_avx2.c; also AVX-512 CPUs without VNNI) and its quantizer (the
 * scalar tier's codes). */
void cq_gemm_avx2(const cmf_qmat *m, const cmf_qact *a, float *Y, size_t ldy, uint64_t r0,
                  uint64_t r1, void *scratch);
void cq_qact_quantize_avx2(cmf_qact *a, const float *X, size_t ldx, size_t t0, size_t t1);

/* Products of 2 .. CQ_FEW_MAX tokens with f32 / f16 / bf16 weights, each weight loaded and widened
 * once for every token (gemm_few_avx512.c, gemm_few_avx2.c): cmf_matmul_ex's batches below the
 * panel GEMM's floor. A (row, token) result does not depend on the batch size, the token's place
 * in it or the row range. false (nothing written) for other dtypes or token counts. */
#define CQ_FEW_MAX 16
bool cq_few_avx512(const cmf_qmat *m, const float *X, size_t n, size_t ldx, float *Y, size_t ldy,
                   uint64_t r0, uint64_t r1);
bool cq_few_avx2(const cmf_qmat *m, const float *X, size_t n, size_t ldx, float *Y, size_t ldy,
                 uint64_t r0, uint64_t r1);
typedef void (*cq_few_fn)(const cmf_qmat *m, const float *X, size_t T, size_t ldx, float *Y,
                          size_t ldy, uint64_t r0, uint64_t r1);
/* A tier's entry: the rows of m's dtype (fns: f32, f16, bf16; at most pass_max tokens a call)
 * over n tokens in one call, or in balanced passes (9 tokens by 4 = 3 + 3 + 3) over row tiles
 * of about 128 KiB of weights in whole blocks of `block` rows, so that the passes after the
 * first read the tile from L2. false (nothing written) for other dtypes and token counts. */
static inline bool cq_few_run(const cq_few_fn fns[3], size_t pass_max, uint64_t block,
                              const cmf_qmat *m, const float *X, size_t n, size_t ldx, float *Y,
                              size_t ldy, uint64_t r0, uint64_t r1) {
    const cq_few_fn fn = m->dtype == CMF_DT_F32    ? fns[0]
                         : m->dtype == CMF_DT_F16  ? fns[1]
                         : m->dtype == CMF_DT_BF16 ? fns[2]
                                                   : NULL;
    if (!fn || n < 2 || n > CQ_FEW_MAX) return false;
    const size_t passes = (n + pass_max - 1) / pass_max;
    if (passes == 1) {
        fn(m, X, n, ldx, Y, ldy, r0, r1);
        return true;
    }
    const uint64_t row_bytes = m->cols * (m->dtype == CMF_DT_F32 ? 4 : 2);
    uint64_t tile = (128u << 10) / row_bytes / block * block;
    if (tile < block) tile = block;
    for (uint64_t r = r0; r < r1; r += tile) {
        const uint64_t re = r1 - r < tile ? r1 : r + tile;
        for (size_t p = 0, t = 0; p < passes; p++) {
            const size_t k = (n - t) / (passes - p);
            fn(m, X + t * ldx, k, ldx, Y + t * ldy + (r - r0), ldy, r, re);
            t += k;
        }
    }
    return true;
}

/* A tier's rows ROWS(m, dt, X, ldx, Y, ldy, r0, r1, K) for T tokens, 1 <= T <= PASS_MAX <= 8,
 * with K a constant in each branch so that the accumulators stay in registers; the branches
 * past PASS_MAX fold away before the rows are inlined. */
#define CQ_FEW_ROWS_FOR(ROWS, PASS_MAX, T, ...)                                                    \
    do {                                                                                           \
        _Static_assert((PASS_MAX) >= 2 && (PASS_MAX) <= 8, "a pass holds 2 to 8 tokens");          \
        const size_t k_ = (T) < (PASS_MAX) ? (T) : (PASS_MAX);                                     \
        if (k_ <= 1)                                                                               \
            ROWS(__VA_ARGS__, 1);                                                                  \
        else if (k_ == 2)                                                                          \
            ROWS(__VA_ARGS__, 2);                                                                  \
        else if ((PASS_MAX) >= 3 && k_ == 3)                                                       \
            ROWS(__VA_ARGS__, 3);                                                                  \
        else if ((PASS_MAX) >= 4 && k_ == 4)                                                       \
            ROWS(__VA_ARGS__, 4);                                                                  \
        else if ((PASS_MAX) >= 5 && k_ == 5)                                                       \
            ROWS(__VA_ARGS__, 5);                                                                  \
        else if ((PASS_MAX) >= 6 && k_ == 6)                                                       \
            ROWS(__VA_ARGS__, 6);                                                                  \
        else if ((PASS_MAX) >= 7 && k_ == 7)                                                       \
            ROWS(__VA_ARGS__, 7);                                                                  \
        else if ((PASS_MAX) >= 8)                                                                  \
            ROWS(__VA_ARGS__, 8);                                                                  \
    } while (0)

/* A tier's entry NAME (cq_few_avx512, cq_few_avx2) over its rows (CQ_FEW_ROWS_FOR): one copy per
 * dtype, so that the dtype is a constant in each. */
#define CQ_FEW_TIER(NAME, ROWS, PASS_MAX, BLOCK)                                                   \
    static void NAME##_f32(const cmf_qmat *m, const float *X, size_t T, size_t ldx, float *Y,      \
                           size_t ldy, uint64_t r0, uint64_t r1) {                                 \
        CQ_FEW_ROWS_FOR(ROWS, PASS_MAX, T, m, CMF_DT_F32, X, ldx, Y, ldy, r0, r1);                 \
    }                                                                                              \
    static void NAME##_f16(const cmf_qmat *m, const float *X, size_t T, size_t ldx, float *Y,      \
                           size_t ldy, uint64_t r0, uint64_t r1) {                                 \
        CQ_FEW_ROWS_FOR(ROWS, PASS_MAX, T, m, CMF_DT_F16, X, ldx, Y, ldy, r0, r1);                 \
    }                                                                                              \
    static void NAME##_bf16(const cmf_qmat *m, const float *X, size_t T, size_t ldx, float *Y,     \
                            size_t ldy, uint64_t r0, uint64_t r1) {                                \
        CQ_FEW_ROWS_FOR(ROWS, PASS_MAX, T, m, CMF_DT_BF16, X, ldx, Y, ldy, r0, r1);                \
    }                                                                                              \
    bool NAME(const cmf_qmat *m, const float *X, size_t n, size_t ldx, float *Y, size_t ldy,       \
              uint64_t r0, uint64_t r1) {                                                          \
        static const cq_few_fn fns[3] = {NAME##_f32, NAME##_f16, NAME##_bf16};                     \
        return cq_few_run(fns, PASS_MAX, BLOCK, m, X, n, ldx, Y, ldy, r0, r1);                     \
    }

/* Batched product for f32 / f16 / bf16 weights (gemm_f32_avx512.c): false (nothing written)
 * when its scratch cannot be allocated. */
bool cq_gemm_float_avx512(const cmf_qmat *m, const float *X, size_t n, size_t ldx, float *Y,
                          size_t ldy, uint64_t r0, uint64_t r1);
/* Whether cmf_matmul_ex takes it for n tokens of m with these flags (kernel.c). */
bool cq_float_avx512_takes(const cmf_qmat *m, size_t n, unsigned flags);
/* Its two halves (cmf_pact, CMF_PACT_F32): token group g of X (CQ_FACT_GROUP tokens)
 * regrouped into xg (CQ_FACT_COLS(C) * CQ_FACT_GROUP floats), and rows [r0, r1) of m over n
 * tokens so regrouped (groups back to back; false: no scratch, nothing written).
 *
 * The regroups' `stream`: xg is 64-byte aligned and other threads' products read it (a batch's
 * activations prepared once, cmf_pact), so it goes out in whole lines of non-temporal stores,
 * which the caller fences once its groups are done (cmf_pact_prepare). Plain stores wait for
 * ownership of lines the other core still holds from the previous product: in a prefill the
 * regroups took 10-25x as long as the same regroup repeated at once on lines the thread owned
 * (docs/KERNELS.md). */
#define CQ_FACT_GROUP   12
#define CQ_FACT_COLS(C) ((size_t)((C) + 15) / 16 * 16)
void cq_fact_group_avx512(const float *X, size_t n, size_t ldx, uint64_t C, size_t kp16, size_t g,
                          float *xg, bool stream);
bool cq_gemm_float_rows_avx512(const cmf_qmat *m, const float *xg, size_t n, float *Y, size_t ldy,
                               uint64_t r0, uint64_t r1);
/* The same for the AVX2 tier (gemm_f32_avx2.c: 16-row x 6-token FMA panels), and its halves
 * (CMF_PACT_F32_AVX2): token group g (CQ_FACT2_GROUP tokens) regrouped into xg, a group's
 * region CQ_FACT2_STRIDE(C) floats (its columns rounded up to 8, room for the plain regroup's
 * last spill, and whole 64-byte lines for the streamed one), and rows [r0, r1) of m over n
 * tokens so regrouped. */
#define CQ_FACT2_GROUP     6
#define CQ_FACT2_COLS(C)   ((size_t)((C) + 7) / 8 * 8)
#define CQ_FACT2_STRIDE(C) ((CQ_FACT2_COLS(C) * CQ_FACT2_GROUP + 8 + 15) / 16 * 16)
bool cq_gemm_float_avx2(const cmf_qmat *m, const float *X, size_t n, size_t ldx, float *Y,
                        size_t ldy, uint64_t r0, uint64_t r1);
/* Whether cmf_matmul_ex takes it for n tokens of m (kernel.c). */
bool cq_float_avx2_takes(const cmf_qmat *m, size_t n);
void cq_fact2_group_avx2(const float *X, size_t n, size_t ldx, uint64_t C, size_t g, float *xg,
                         bool stream);
/* The first token at or after t where a thread's groups may end: a multiple of the group, or n
 * where that multiple would split the last two groups (a remainder of 1-3 tokens is shared by
 * them, so one regroup reads tokens of both). */
size_t cq_fact2_cut(size_t n, size_t t);
bool cq_gemm_float_rows_avx2(const cmf_qmat *m, const float *xg, size_t n, float *Y, size_t ldy,
                             uint64_t r0, uint64_t r1);

/* Batched product for bf16 weights with bf16-rounded activations (gemm_bf16dot_avx512.c,
 * CMF_KF_BF16_ACT): false (nothing written) for other dtypes, on CPUs without AVX-512 BF16, or
 * when its scratch cannot be allocated. */
bool cq_gemm_bf16dot_avx512(const cmf_qmat *m, const float *X, size_t n, size_t ldx, float *Y,
                            size_t ldy, uint64_t r0, uint64_t r1);
/* Whether a batch of n tokens on m with CMF_KF_BF16_ACT takes it (kernel.c: bf16, the AVX-512
 * tier, a CPU whose vdpbf16ps is fast, at least CQ_BF16DOT_GEMM_MIN tokens). */
bool cq_bf16dot_takes(const cmf_qmat *m, size_t n);
/* Its two halves (cmf_pact, CMF_PACT_BF16): the column pairs of a regrouped token group (cols
 * rounded up to 32), group g of X (CQ_BACT_GROUP tokens) rounded and regrouped into xb
 * (CQ_BACT_PAIRS(C) * CQ_BACT_GROUP words), and rows [r0, r1) of a bf16 m over n tokens so
 * regrouped (groups back to back; false: no scratch, nothing written). */
#define CQ_BACT_GROUP    16
#define CQ_BACT_PAIRS(C) ((size_t)((C) + 31) / 32 * 16)
void cq_bact_group_avx512(const float *X, size_t n, size_t ldx, uint64_t C, size_t kpp, size_t g,
                          uint32_t *xb, bool stream);
bool cq_gemm_bf16dot_rows_avx512(const cmf_qmat *m, const uint32_t *xb, size_t n, float *Y,
                                 size_t ldy, uint64_t r0, uint64_t r1);

/* Batched product for f16 / bf16 weights on AMX-BF16 tiles (gemm_half_amx.c; CQ_ISA_AMX): as
 * exact as f32, or with CMF_KF_BF16_ACT in flags the activations rounded to bf16; false (nothing
 * written) for other dtypes or when its scratch cannot be allocated. */
bool cq_gemm_half_amx(const cmf_qmat *m, const float *X, size_t n, size_t ldx, float *Y, size_t ldy,
                      uint64_t r0, uint64_t r1, unsigned flags);

#endif
