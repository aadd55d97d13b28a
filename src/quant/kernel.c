/* kernel.c - dispatching the kernels of a cmf_qmat to the best tier the CPU allows (its
 * binding and validation are qmat.c). */
#include "common/cpu.h"
#include "quant/dtype_ops.h"
#include "quant/gemm_impl.h"
#include "quant/kernel_i8dec.h"
#include "quant/kernel_impl.h"

void cmf_qmat_dequant_row(const cmf_qmat *m, uint64_t row, float *out) {
    uint64_t ngroups = (m->cols + 31) / 32;
    if (cmf_qmat_lanes_rows(m)) /* the batched-decode copy (its file pages may be handed back) */
        cq_lanes_decode_row(m, row, out);
    else
        for (uint64_t g = 0; g < ngroups; g++)
            cq_ref_decode_group(m, row, g, out + 32 * g);
    const uint8_t *e;
    uint64_t n;
    unsigned stride;
    cq_ovl_row(m, row, &e, &n, &stride);
    for (uint64_t k = 0; k < n; k++, e += stride)
        out[cq_ovl_col(m, row, e)] = cq_ovl_val(m, e);
}

/* The matmul kernel of each tier per dtype (NULL: the next lower tier's). */
static const cq_kernel_table *const k_tiers[CQ_ISA_COUNT] = {
    [CQ_ISA_SCALAR] = &cq_kernels_scalar,
    [CQ_ISA_AVX2] = &cq_kernels_avx2,
    [CQ_ISA_AVX512] = &cq_kernels_avx512,
};

/* CQ_ISA_SELECT's rule per dtype: the best tier in effect that has a kernel for dt. */
static cq_mm_fn pick(cmf_dtype dt) {
    for (int i = (int)cq_cpu_isa(); i > CQ_ISA_SCALAR; i--)
        if (k_tiers[i] && k_tiers[i]->mm[dt]) return k_tiers[i]->mm[dt];
    return k_tiers[CQ_ISA_SCALAR]->mm[dt];
}

/* Prefill blocking: the tier kernels walk rows and, per row, every token they are given, so
 * those tokens' activations must stay in L1 and the rows' weights in L2. Split the call into
 * tiles of ~256 KiB of weights and, within a tile, blocks of at most 4 tokens (2 when four
 * f32 activation rows would not fit in 32 KiB); weights come from memory once per tile. */
#define TILE_BYTES (256u << 10)

/* Batches from this many tokens take the float panel GEMM on AVX-512, from 2 tokens below it
 * the few-token rows (gemm_few_avx512.c): each weight read and widened once for every token, where
 * a panel's conversion and transposes cost about a cycle per weight, as much as its
 * multiply-adds at 4 tokens. Zen 4, Qwen2.5-0.5B shape f16, `cortiq bench -p P -n 0`: with the
 * panels from 8 / 12 / 16 tokens, prompts of 8 tokens ran at 115-125 / 157-182 / 151-175 tok/s,
 * 12 tokens 143-151 / 141-147 / 168-171, 16 tokens 176 / 157-171 / 161 (docs/KERNELS.md,
 * "Few-token products"). */
#define CQ_FLOAT_GEMM_MIN 16

/* The same for the AVX2 panels (two 8 x 8 transposes per 8 columns of a panel), whose few-token
 * rows are gemm_few_avx2.c: forced AVX2 on Zen 4, the Qwen shape f16 at 12 tokens 129-162 tok/s
 * with the panels from 10 tokens, 191 with them from 16. */
#define CQ_FLOAT_GEMM_MIN_AVX2 16

/* Batches from this many tokens on bf16 weights with CMF_KF_BF16_ACT take the AVX-512 BF16 dot
 * products (gemm_bf16dot_avx512.c); below, the few-token rows (5-20 % faster than the dot
 * products at 8 and 10 tokens, slower from 12 in whole prefills: docs/KERNELS.md). `bench_gemm
 * --tokens N bf16`, one thread, the dot products against the f32 panels over the Qwen2.5-0.5B
 * shapes: 4 tokens 0.80-0.90x, 8 tokens 1.0-1.3x, 16 tokens 1.4-1.8x, 64-128 tokens 1.7-1.9x. */
#define CQ_BF16DOT_GEMM_MIN 12

/* Batches from this many tokens take the AMX tiles for f16 / bf16 weights (below, converting
 * every weight per call costs more than the tile products save: docs/KERNELS.md), from
 * CQ_AMX_BF16ACT_MIN on bf16 weights with bf16 activations (one tile product per step instead
 * of three, and the weights copied as they are); below both, the few-token rows. Xeon-B,
 * `bench_float_paths 4 8 10 12 16 24 32`, one thread over the Qwen2.5-0.5B shapes: the bf16
 * activation tiles 0.4-0.7x the few rows at 4 tokens, 0.8x at 8, 0.8-1.1x at 10, 1.0-1.3x at 12,
 * 1.4-3x at 16; the exact tiles on f16 0.8-1.0x the panels at 24 tokens, 1.2-1.3x at 32. Whole
 * prefills of the Qwen shape bf16 with the tiles from 4 tokens / from 12: 4-token prompts 49 / 86
 * tok/s, 8 tokens 99 / 123, 10 tokens 120 / 122. */
#define CQ_AMX_GEMM_MIN    32
#define CQ_AMX_BF16ACT_MIN 12

static size_t amx_min(const cmf_qmat *m, unsigned flags) {
    return m->dtype == CMF_DT_BF16 && (flags & CMF_KF_BF16_ACT) ? CQ_AMX_BF16ACT_MIN
                                                                : CQ_AMX_GEMM_MIN;
}

/* The AVX-512 tier only (on the AMX tier the tiles take these batches), and only where
 * vdpbf16ps outruns the f32 FMAs (cq_cpu_features.bf16dot_fast: AMD). The Intel cores that
 * have it run it at half the f32 FMA's flops (bench_peak), and on Xeon-A at CORTIQ_CPU=avx512
 * the f32 panels' prefill was 1.2-1.3x these dot products' (Qwen shape 248 -> 333 tok/s). */
bool cq_bf16dot_takes(const cmf_qmat *m, size_t n) {
    if (m->dtype != CMF_DT_BF16 || n < CQ_BF16DOT_GEMM_MIN || !cq_cpu_detect()->bf16dot_fast)
        return false;
    return cq_isa_pick(cq_dtype_ops_get(m->dtype)->gemm_tiers) == CQ_ISA_AVX512;
}

bool cq_float_avx512_takes(const cmf_qmat *m, size_t n, unsigned flags) {
    const cq_dtype_ops *o = cq_dtype_ops_get(m->dtype);
    const cq_isa gemm = o ? cq_isa_pick(o->gemm_tiers) : CQ_ISA_SCALAR;
    if (n < CQ_FLOAT_GEMM_MIN || gemm < CQ_ISA_AVX512) return false;
    if (gemm >= CQ_ISA_AMX && n >= amx_min(m, flags)) return false; /* the tiles (f16, bf16) */
    return !((flags & CMF_KF_BF16_ACT) && cq_bf16dot_takes(m, n));
}

bool cq_float_avx2_takes(const cmf_qmat *m, size_t n) {
    const cq_dtype_ops *o = cq_dtype_ops_get(m->dtype);
    return o && n >= CQ_FLOAT_GEMM_MIN_AVX2 && cq_isa_pick(o->gemm_tiers) == CQ_ISA_AVX2;
}

/* A batch of 2 or more float weights' tokens below the panel GEMM's floor of gemm, the dtype's
 * GEMM tier in effect (and, on AMX, below its tiles' own) takes the few-token rows. The AMX and
 * dot-product tests repeat cmf_matmul_ex's: where those kernels refuse a batch they take (no
 * scratch), the panels, not these rows, keep its bits. */
static bool few_takes(const cmf_qmat *m, size_t n, unsigned flags, cq_isa gemm) {
    if (m->dtype != CMF_DT_F32 && m->dtype != CMF_DT_F16 && m->dtype != CMF_DT_BF16) return false;
    if (gemm >= CQ_ISA_AMX && n >= amx_min(m, flags)) return false;
    if ((flags & CMF_KF_BF16_ACT) && cq_bf16dot_takes(m, n)) return false;
    return gemm >= CQ_ISA_AVX512 ? n < CQ_FLOAT_GEMM_MIN
           : gemm == CQ_ISA_AVX2 ? n < CQ_FLOAT_GEMM_MIN_AVX2
                                 : false;
}

size_t cmf_matmul_exact_min(const cmf_qmat *m, int qact, unsigned flags) {
    /* with the batched-decode copy every batch of 2 or more gets the GEMM's bits (one token
     * takes the decode pass, whose attention rounds otherwise) */
    if (qact && cmf_qact_supports(m)) return m->lanes ? 2 : cmf_qact_min_tokens();
    const cq_dtype_ops *o = cq_dtype_ops_get(m->dtype);
    const cq_isa gemm = o ? cq_isa_pick(o->gemm_tiers) : CQ_ISA_SCALAR;
    /* bf16 with bf16 activations: the few-token rows below CQ_BF16DOT_GEMM_MIN, dot products
     * from it; AMX: the tiles from CQ_AMX_BF16ACT_MIN with them, from CQ_AMX_GEMM_MIN without
     * (asked for or not, the larger size holds for both) */
    const bool dot = (flags & CMF_KF_BF16_ACT) && cq_bf16dot_takes(m, CQ_BF16DOT_GEMM_MIN);
    return gemm >= CQ_ISA_AMX      ? CQ_AMX_GEMM_MIN
           : dot                   ? CQ_BF16DOT_GEMM_MIN
           : gemm >= CQ_ISA_AVX512 ? CQ_FLOAT_GEMM_MIN
           : gemm == CQ_ISA_AVX2   ? CQ_FLOAT_GEMM_MIN_AVX2
                                   : 0;
}

/* The prepared-token path is the one-token int8 kernels of the tier in effect (CORTIQ_CPU may
 * lower it). AVX-512: its VNNI test (try_i8 in kernel_avx512.c); a prepared token holds q8_row's
 * layout (kernel_i8_avx512.c) and, where the CPU has VBMI and GFNI, the 4-bit class's and
 * vbit's after it (kernel_i8dec_avx512.c). AVX2: q8_row's natural-order layout
 * (kernel_q8dec_avx2.c), then the 4-bit class's pair layout, which vbit reads too
 * (kernel_i8dec_avx2.c, kernel_i8dec_vbit_avx2_rows.h). */
static bool tok8_tier(void) {
    return cq_vnni_tier();
}

static bool tok8_avx2(void) {
    return cq_cpu_isa() == CQ_ISA_AVX2;
}

/* AVX-512: where the copy's layout (CMF_TOK8_LANES, cq_avx2_q8dec_tok_prepare's) starts in a
 * prepared token, after q8_row's and the 4-bit class's. */
static size_t lanes_tok_off(uint64_t cols) {
    return (cq_avx512_q8_tok_bytes(cols) + cq_avx512_i8dec_tok_bytes(cols) + 63) / 64 * 64;
}

const void *cq_tok8_lanes_part(const void *tok, uint64_t cols) {
    return tok8_avx2() ? tok : (const uint8_t *)tok + lanes_tok_off(cols);
}

/* n <= CMF_TOK8_MULTI_MAX tokens through the tier's kernels of the copy, each given as the
 * copy's layout (AVX2: a CMF_TOK8_Q8 token; AVX-512: the CMF_TOK8_LANES part of one). */
static void lanes_multi(const cmf_qmat *m, const void *const *tok, size_t n, float *const *y,
                        uint64_t r0, uint64_t r1) {
    if (cq_gemm_vbit(m))
        (tok8_avx2() ? cq_avx2_lanes_vbit_matvec_multi
                     : cq_avx512_lanes_vbit_matvec_multi)(m, tok, n, y, r0, r1);
    else
        (tok8_avx2() ? cq_avx2_lanes_matvec_multi : cq_avx512_lanes_matvec_multi)(m, tok, n, y, r0,
                                                                                  r1);
}

/* n <= CMF_TOK8_MULTI_MAX tokens of X through the copy, each prepared in its layout; false
 * (nothing written) when the scratch cannot be had. */
static bool lanes_matmul(const cmf_qmat *m, const float *X, size_t n, size_t ldx, float *Y,
                         size_t ldy, uint64_t r0, uint64_t r1) {
    const size_t tb = (cq_avx2_q8dec_tok_bytes(m->cols) + 63) / 64 * 64;
    uint8_t *mem = cq_kernel_scratch(CQ_SCRATCH_ACT, n * tb);
    if (!mem) return false;
    const void *tok[CMF_TOK8_MULTI_MAX];
    float *y[CMF_TOK8_MULTI_MAX];
    for (size_t t = 0; t < n; t++) {
        cq_avx2_q8dec_tok_prepare(mem + t * tb, X + t * ldx, m->cols);
        tok[t] = mem + t * tb;
        y[t] = Y + t * ldy;
    }
    lanes_multi(m, tok, n, y, r0, r1);
    return true;
}

void cmf_matmul_ex(const cmf_qmat *m, const float *X, size_t n, size_t ldx, float *Y, size_t ldy,
                   uint64_t row_begin, uint64_t row_end, unsigned flags) {
    if (n == 0 || row_begin >= row_end) return;
    cq_mm_fn fn = pick(m->dtype);
    /* a batched-decode copy: every int8-activation product reads it (so the file's pages it
     * replaces are never read again), up to CMF_TOK8_MULTI_MAX tokens per walk over its panels;
     * the tier's kernels take what is left only when no scratch could be had */
    if (m->lanes && (flags & CMF_KF_INT8_ACT)) {
        for (size_t nt; n > 0; n -= nt, X += nt * ldx, Y += nt * ldy) {
            nt = n < CMF_TOK8_MULTI_MAX ? n : CMF_TOK8_MULTI_MAX;
            if (!lanes_matmul(m, X, nt, ldx, Y, ldy, row_begin, row_end)) break;
        }
        if (n == 0) return;
    }
    if (n >= 2) { /* a batch: the dtype's GEMM of the best tier in effect */
        const cq_isa gemm = cq_isa_pick(cq_dtype_ops_get(m->dtype)->gemm_tiers);
        /* half-precision weights, AMX: tile products (split bf16, as exact as f32; bf16 weights
         * with bf16 activations allowed: those alone) */
        if (gemm >= CQ_ISA_AMX && n >= amx_min(m, flags) &&
            cq_gemm_half_amx(m, X, n, ldx, Y, ldy, row_begin, row_end,
                             m->dtype == CMF_DT_BF16 ? flags & CMF_KF_BF16_ACT : 0))
            return;
        /* bf16 weights, bf16 activations allowed: the BF16 dot products */
        if ((flags & CMF_KF_BF16_ACT) && cq_bf16dot_takes(m, n) &&
            cq_gemm_bf16dot_avx512(m, X, n, ldx, Y, ldy, row_begin, row_end))
            return;
        /* float weights, a few tokens: each weight read and widened once for all of them */
        if (few_takes(m, n, flags, gemm) && (gemm >= CQ_ISA_AVX512 ? cq_few_avx512 : cq_few_avx2)(
                                                m, X, n, ldx, Y, ldy, row_begin, row_end))
            return;
        /* float weights: the panel GEMM (each weight converted once per call) */
        if (gemm >= CQ_ISA_AVX512 && n >= CQ_FLOAT_GEMM_MIN &&
            cq_gemm_float_avx512(m, X, n, ldx, Y, ldy, row_begin, row_end))
            return;
        if (cq_float_avx2_takes(m, n) &&
            cq_gemm_float_avx2(m, X, n, ldx, Y, ldy, row_begin, row_end))
            return;
    }
    if (n <= 2) {
        fn(m, X, n, ldx, Y, ldy, row_begin, row_end, flags);
        return;
    }
    uint64_t row_bytes = m->nbytes / m->rows + 1, tile = TILE_BYTES / row_bytes;
    if (tile < 16) tile = 16;
    size_t tb = (flags & CMF_KF_INT8_ACT) || cq_fits_l1(4, 4 * m->cols) ? 4 : 2;
    for (uint64_t r = row_begin; r < row_end; r += tile) {
        uint64_t re = row_end - r < tile ? row_end : r + tile;
        for (size_t t = 0; t < n; t += tb) {
            size_t nt = n - t < tb ? n - t : tb;
            fn(m, X + t * ldx, nt, ldx, Y + t * ldy + (r - row_begin), ldy, r, re, flags);
        }
    }
}

size_t cmf_tok8_bytes(uint64_t cols) {
    if (tok8_avx2()) return cq_avx2_q8dec_tok_bytes(cols) + cq_avx2_i8dec_tok_bytes(cols);
    return tok8_tier() && cols % 32 == 0 ? lanes_tok_off(cols) + cq_avx2_q8dec_tok_bytes(cols) : 0;
}

bool cmf_qmat_lanes_rows(const cmf_qmat *m) {
    return m->lanes != NULL;
}

bool cmf_qmat_lanes_compact(const cmf_qmat *m) {
    return m->dtype == CMF_DT_Q4_TILED || m->dtype == CMF_DT_Q4_BLOCK || m->dtype == CMF_DT_Q4TP ||
           cq_gemm_vbit(m);
}

uint64_t cmf_qmat_lanes_block(const cmf_qmat *m) {
    return cq_lanes_block(m);
}

/* a tier whose kernels read the copy (lanes_avx2.c, lanes_avx512.c) */
static bool lanes_tier(void) {
    return tok8_avx2() || tok8_tier();
}

bool cmf_qmat_build_lanes(cmf_qmat *m) {
    return lanes_tier() && cq_lanes_build(m);
}

uint64_t cmf_qmat_lanes_bytes(const cmf_qmat *m) {
    return lanes_tier() && !m->lanes ? cq_lanes_bytes(m) : 0;
}

void cmf_qmat_lanes_fill(const cmf_qmat *m, void *buf, uint64_t r0, uint64_t r1) {
    cq_lanes_fill(m, buf, r0, r1);
}

const uint8_t *cmf_qmat_lanes_source(const cmf_qmat *m, uint64_t r0, uint64_t r1, unsigned part,
                                     uint64_t *n) {
    return cq_lanes_source(m, r0, r1, part, n);
}

int cmf_tok8_supports(const cmf_qmat *m) {
    if (tok8_avx2())
        return m->lanes || cq_avx2_q8dec_supports(m) ? CMF_TOK8_Q8
               : cq_avx2_i8dec_supports(m)           ? CMF_TOK8_I8DEC
                                                     : 0;
    if (!tok8_tier() || m->cols % 32) return 0;
    return m->lanes                      ? CMF_TOK8_LANES
           : m->dtype == CMF_DT_Q8_ROW   ? CMF_TOK8_Q8
           : cq_avx512_i8dec_supports(m) ? CMF_TOK8_I8DEC
                                         : 0;
}

void cmf_tok8_prepare(void *buf, const float *x, uint64_t cols, int layouts) {
    if (tok8_avx2()) {
        if (layouts & CMF_TOK8_Q8) cq_avx2_q8dec_tok_prepare(buf, x, cols);
        if (layouts & CMF_TOK8_I8DEC)
            cq_avx2_i8dec_tok_prepare((uint8_t *)buf + cq_avx2_q8dec_tok_bytes(cols), x, cols);
        return;
    }
    if (layouts & CMF_TOK8_Q8) cq_avx512_q8_tok_prepare(buf, x, cols);
    if ((layouts & CMF_TOK8_I8DEC) && cq_avx512_i8dec_tok_bytes(cols))
        cq_avx512_i8dec_tok_prepare((uint8_t *)buf + cq_avx512_q8_tok_bytes(cols), x, cols);
    if (layouts & CMF_TOK8_LANES)
        cq_avx2_q8dec_tok_prepare((uint8_t *)buf + lanes_tok_off(cols), x, cols);
}

void cmf_matvec_tok8(const cmf_qmat *m, const void *tok, float *y, uint64_t row_begin,
                     uint64_t row_end) {
    if (row_begin >= row_end) return;
    if (m->lanes) {
        cmf_matvec_tok8_multi(m, &tok, 1, &y, row_begin, row_end);
    } else if (tok8_avx2()) {
        if (m->dtype == CMF_DT_Q8_ROW)
            cq_avx2_q8dec_rows()->tok_matvec(m, tok, y, row_begin, row_end);
        else
            cq_avx2_i8dec_tok_matvec(m, (const uint8_t *)tok + cq_avx2_q8dec_tok_bytes(m->cols), y,
                                     row_begin, row_end);
    } else if (m->dtype == CMF_DT_Q8_ROW)
        cq_avx512_q8_tok_matvec(m, tok, y, row_begin, row_end);
    else
        cq_avx512_i8dec_tok_matvec(m, (const uint8_t *)tok + cq_avx512_q8_tok_bytes(m->cols), y,
                                   row_begin, row_end);
}

void cmf_matvec_tok8_multi(const cmf_qmat *m, const void *const *tok, size_t n, float *const *y,
                           uint64_t row_begin, uint64_t row_end) {
    if (n == 0 || row_begin >= row_end) return;
    const bool avx2 = tok8_avx2();
    if (m->lanes) {
        const void *lt[CMF_TOK8_MULTI_MAX];
        for (size_t t = 0; t < n; t++)
            lt[t] = cq_tok8_lanes_part(tok[t], m->cols);
        lanes_multi(m, lt, n, y, row_begin, row_end);
        return;
    }
    if (m->dtype == CMF_DT_Q8_ROW) {
        (avx2 ? cq_avx2_q8dec_rows()->tok_matvec_multi
              : cq_avx512_q8_tok_matvec_multi)(m, tok, n, y, row_begin, row_end);
        return;
    }
    const size_t off = avx2 ? cq_avx2_q8dec_tok_bytes(m->cols) : cq_avx512_q8_tok_bytes(m->cols);
    const void *at[CMF_TOK8_MULTI_MAX];
    for (size_t t = 0; t < n; t++)
        at[t] = (const uint8_t *)tok[t] + off;
    (avx2 ? cq_avx2_i8dec_tok_matvec_multi : cq_avx512_i8dec_tok_matvec_multi)(m, at, n, y,
                                                                               row_begin, row_end);
}

void cmf_matvec_multi(const cmf_qmat *m, const float *const *x, size_t n, float *const *y,
                      uint64_t row_begin, uint64_t row_end) {
    if (n == 0 || row_begin >= row_end) return;
    /* the shared-decode kernel where the tier's one-token kernel would run, up to
     * CQ_MATVEC_MULTI_MAX tokens a call */
    const cq_isa isa = cq_cpu_isa();
    bool (*multi)(const cmf_qmat *, const float *const *, size_t, float *const *, uint64_t,
                  uint64_t) = NULL;
    if (n > 1 && isa >= CQ_ISA_AVX512 && pick(m->dtype) == cq_kernels_avx512.mm[m->dtype])
        multi = cq_avx512_matvec_multi;
    else if (n > 1 && isa == CQ_ISA_AVX2 && pick(m->dtype) == cq_kernels_avx2.mm[m->dtype])
        multi = cq_avx2_matvec_multi;
    for (size_t t = 0; t < n;) {
        size_t k = n - t < CQ_MATVEC_MULTI_MAX ? n - t : CQ_MATVEC_MULTI_MAX;
        if (multi && multi(m, x + t, k, y + t, row_begin, row_end)) {
            t += k;
            continue;
        }
        cmf_matvec(m, x[t], y[t], row_begin, row_end);
        t++;
    }
}

void cmf_matvec(const cmf_qmat *m, const float *x, float *y, uint64_t row_begin, uint64_t row_end) {
    cmf_matmul_ex(m, x, 1, m->cols, y, row_end - row_begin, row_begin, row_end, 0);
}

void cmf_matmul(const cmf_qmat *m, const float *X, size_t n, float *Y, size_t ldy,
                uint64_t row_begin, uint64_t row_end) {
    cmf_matmul_ex(m, X, n, m->cols, Y, ldy, row_begin, row_end, 0);
}
