/* quant/kernels_engine.h - the kernel entry points the engine drives beyond cortiq/kernels.h:
 * kernel flags (int8 activations), the prepared one-token int8 path, and the integer prefill
 * GEMM over a batch quantized once. Their layouts and policies follow the engine's scheduling,
 * so they stay inside the library (engine, tests, benchmarks) rather than in the public ABI. */
#ifndef CORTIQ_QUANT_KERNELS_ENGINE_H
#define CORTIQ_QUANT_KERNELS_ENGINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cortiq/kernels.h"

/* Flags for the _ex variants. */
enum {
    /* Allow the kernel to quantize activations to int8 (one f32 scale per 32 values,
     * round to nearest) and use integer dot products (AVX-512 VNNI / AVX2 maddubs) where
     * that is faster: q8_row, q4_tiled, q4tp, q4_block (cols % 32 == 0); for one token also
     * vbit and vbit_ro (AVX-512 with VBMI and GFNI, kernel_i8dec_avx512.c). The result then
     * carries the activation rounding error, bounded per group by
     * sum|w|·absmax(x_group)/254. Ignored by dtypes and tiers without such a path. */
    CMF_KF_INT8_ACT = 1u << 0,
    /* Allow a batch on bf16 weights to round its activations to bf16 (nearest even): on the
     * AMX tier from 4 tokens, one tile product per step instead of three (gemm_half_amx.c); on
     * the AVX-512 tier from 12 tokens where the CPU's vdpbf16ps is fast, the dot product
     * vdpbf16ps (twice the multiply-adds of an f32 FMA on Zen 4; gemm_bf16dot_avx512.c). Each
     * output then carries the activation rounding, at most 2^-8 of sum |w x|. Ignored by other
     * dtypes, tiers and batch sizes. */
    CMF_KF_BF16_ACT = 1u << 1,
};

/* cmf_matmul with flags (0 = cmf_matmul). ldx: stride of X in floats (>= cols). */
void cmf_matmul_ex(const cmf_qmat *m, const float *X, size_t n, size_t ldx, float *Y, size_t ldy,
                   uint64_t row_begin, uint64_t row_end, unsigned flags);

/* ---- Decode: one token's int8 activations, quantized once for many row ranges ----
 *
 * cmf_matmul_ex(m, x, 1, ..., CMF_KF_INT8_ACT) quantizes x on every call. A decode step that
 * splits its products into row pieces claimed by threads as they go would pay that once per
 * piece; here each thread quantizes the token once (cmf_tok8_prepare) and runs any number of
 * row ranges of any supported matrices with that many columns on it.
 *
 * cmf_tok8_bytes(cols): bytes of a prepared token, or 0 when this CPU (as CORTIQ_CPU leaves
 * it) has no such path: use cmf_matmul_ex then. cmf_tok8_supports(m): 0 when m does not take
 * the path, else the layout it reads (AVX-512 tier: q8_row: CMF_TOK8_Q8; with VBMI and GFNI the
 * 4-bit class and vbit / vbit_ro: CMF_TOK8_I8DEC, a matrix with a batched-decode copy:
 * CMF_TOK8_LANES (the AVX2 q8_row layout, after the others); AVX2 tier: q8_row: CMF_TOK8_Q8, the
 * 4-bit class and vbit / vbit_ro: CMF_TOK8_I8DEC, a matrix with a batched-decode copy
 * (cmf_qmat_build_lanes): CMF_TOK8_Q8; cols % 32 == 0). cmf_tok8_prepare: x (cols floats) into
 * buf (cmf_tok8_bytes(cols) bytes, 64-byte aligned) in the layouts OR-ed in `layouts`.
 * cmf_matvec_tok8: y[r - row_begin] for r in [row_begin, row_end) of a supported m with
 * m->cols == cols whose layout was prepared; bit-identical to
 * cmf_matmul_ex(m, x, 1, cols, y, 1, row_begin, row_end, CMF_KF_INT8_ACT). */
enum { CMF_TOK8_Q8 = 1, CMF_TOK8_I8DEC = 2, CMF_TOK8_LANES = 4 };
/* Batched decode's copy of m (m->lanes): on the AVX2 and AVX-512 VNNI tiers q8_row and the 4-bit
 * class (q4_tiled, q4_block, q4tp), on the AVX-512 VNNI tier vbit and vbit_ro too (lanes_vbit.c),
 * cols % 32 == 0, repacked so that each row's sum runs in its own int32 lane (lanes_avx2.c,
 * lanes_avx512.c, lanes_vbit_avx512.c); from then on every int8-activation product of
 * m reads the copy (cmf_matvec_tok8 and _multi with the layout cmf_tok8_supports names,
 * cmf_matmul_ex, the integer GEMM), one token or several with the GEMM's bits. Returns whether m
 * has the copy (false: another tier or dtype, or out of memory, and m unchanged).
 * cmf_qmat_free releases it. */
bool cmf_qmat_build_lanes(cmf_qmat *m);
/* The same copy made in parts into memory the caller owns (the engine puts a model's copies in
 * one allocation and hands file pages back as their rows are copied): _bytes: its size, 0
 * where cmf_qmat_build_lanes would make none (or m has one); _fill: rows [r0, r1) (r0 and r1
 * multiples of 64 or r1 the last row; any order, from several threads) into buf (zeroed,
 * _bytes long); _source: where in m->data those rows are, part by part (*n bytes from the
 * result; part 0 their codes, 1 the scales stored apart from them, 2 q4tp's 5-bit codes; NULL
 * past the dtype's parts). Setting m->lanes = buf once every row is in makes m read the copy;
 * the owner sets it back to NULL before cmf_qmat_free (which frees only copies
 * cmf_qmat_build_lanes made). */
uint64_t cmf_qmat_lanes_bytes(const cmf_qmat *m);
void cmf_qmat_lanes_fill(const cmf_qmat *m, void *buf, uint64_t r0, uint64_t r1);
const uint8_t *cmf_qmat_lanes_source(const cmf_qmat *m, uint64_t r0, uint64_t r1, unsigned part,
                                     uint64_t *n);
/* Whether cmf_qmat_dequant_row reads m's rows from the copy (the file's floats exactly: every
 * copy keeps each row's codes and scales, q4tp's its codes and the file's lo and step) rather
 * than from m->data. */
bool cmf_qmat_lanes_rows(const cmf_qmat *m);
/* Whether a copy of m made now keeps about the file's bits per weight (q4_tiled and q4_block:
 * the same bytes; q4tp: codes and ladder numbers, 4-5 % more; vbit: its rows sorted by width,
 * 2-5 % more; not q8_row, whose copy has its size but whose one-token kernel is the faster):
 * the engine's default copies. */
bool cmf_qmat_lanes_compact(const cmf_qmat *m);
/* Rows whose results m's kernels compute together: 16 (a pair of panels), 64 with a vbit copy,
 * whose rows are sorted by width within windows of 64 (lanes_vbit.c). A row range on these
 * blocks computes no row twice; other ranges are exact too, but pay for whole blocks. */
uint64_t cmf_qmat_lanes_block(const cmf_qmat *m);
size_t cmf_tok8_bytes(uint64_t cols);
int cmf_tok8_supports(const cmf_qmat *m);
/* One-token products (f32 activations, flags 0) of n tokens over the same rows: y[t] as
 * cmf_matvec(m, x[t], y[t], row_begin, row_end) gives it, bit for bit; on the AVX-512 tier
 * f32, f16 and bf16 weights are decoded once for all the tokens (batched decode); other
 * dtypes run token after token. */
void cmf_matvec_multi(const cmf_qmat *m, const float *const *x, size_t n, float *const *y,
                      uint64_t row_begin, uint64_t row_end);
void cmf_tok8_prepare(void *buf, const float *x, uint64_t cols, int layouts);
void cmf_matvec_tok8(const cmf_qmat *m, const void *tok, float *y, uint64_t row_begin,
                     uint64_t row_end);
/* n (<= CMF_TOK8_MULTI_MAX) prepared tokens over the same rows (batched decode): y[t] as
 * cmf_matvec_tok8(m, tok[t], y[t], row_begin, row_end) gives it, bit for bit, each weight
 * vector loaded (and its codes decoded) once for several tokens instead of once per token. */
#define CMF_TOK8_MULTI_MAX 16
void cmf_matvec_tok8_multi(const cmf_qmat *m, const void *const *tok, size_t n, float *const *y,
                           uint64_t row_begin, uint64_t row_end);

/* ---- Integer prefill GEMM (int8 activations x integer weight codes) ----
 *
 * For a batch of tokens the products are compute-bound, and integer dot products (AVX-512
 * VNNI: 64 multiply-adds per instruction) do four times the work of f32 FMAs. The
 * activations are quantized ONCE per batch into a cmf_qact (per token, per 32 columns:
 * int8 codes q = round(x / s), s = absmax / 127, plus the sum of the codes), then any
 * number of matrices sharing that input (q/k/v, gate/up) run cmf_matmul_qact on it.
 *
 * The weights must be integer codes times a scale: q8_row, q4_tiled, q4tp, and q4_block,
 * vbit and vbit_ro with cols % 32 == 0 (cmf_qact_supports; the code form of each per tier:
 * gemm_impl.h, docs/KERNELS.md). Per 32-column block the integer dot product is
 * exact; it is scaled by s (activation) x the weight's scale in f32. The result therefore
 * carries only the activation rounding error, bounded per block by sum|w| * absmax / 254
 * (the same arithmetic as llama.cpp's Q8_0 activations).
 *
 * Tiers: AVX-512 VNNI (panels of 16 weight rows repacked so one vpdpbusd feeds 16 rows,
 * up to 12 tokens per pass), AVX2 (8-row panels, vpmaddubsw), and a portable scalar tier computing
 * the same integer sums (the reference the tests compare against). cmf_qact_fast() says whether the
 * fast tier runs in this process (callers with an f32 path of their own use it only when it does).
 */
/* Storage is grouped by CMF_QACT_GROUP tokens so the kernels address a group's tokens at
 * constant offsets: the entry of token t, block b is at index
 *   cmf_qact_index(a, t, b) = ((t / G) * nblocks + b) * G + t % G      (G = CMF_QACT_GROUP)
 * in scale / c128 / c8 / c127, and its 32 codes start at q + 32 * cmf_qact_index(a, t, b). */
#define CMF_QACT_GROUP 12
typedef struct cmf_qact {
    size_t n;      /* tokens */
    size_t cols;   /* columns of the source activations */
    size_t kpad;   /* cols rounded up to 32 (padding codes are 0) */
    size_t nb;     /* blocks per token: kpad / 32 */
    int8_t *q;     /* codes, 32 per entry */
    float *scale;  /* s of each entry */
    int32_t *c128; /* -128 * (sum of the entry's codes) */
    int32_t *c8;   /* -8 * (sum of the entry's codes) */
    int32_t *c127; /* -127 * (sum of the entry's codes) */
} cmf_qact;

static inline size_t cmf_qact_index(const cmf_qact *a, size_t t, size_t b) {
    return ((t / CMF_QACT_GROUP) * a->nb + b) * CMF_QACT_GROUP + t % CMF_QACT_GROUP;
}

/* Bytes of memory cmf_qact_bind needs for n tokens of cols columns (64-byte aligned parts). */
size_t cmf_qact_bytes(size_t n, size_t cols);

/* Lay a cmf_qact over mem (cmf_qact_bytes(n, cols) bytes, 64-byte aligned). */
void cmf_qact_bind(cmf_qact *a, void *mem, size_t n, size_t cols);

/* Quantize X (n rows of a->cols floats, row stride ldx) into a (bound for n tokens).
 * NaN inputs give code 0, +-inf +-127 (with a finite scale). */
void cmf_qact_quantize(cmf_qact *a, const float *X, size_t ldx);

/* The same for tokens [t_begin, t_end) only (X still points at token 0), so threads can
 * quantize disjoint token ranges of one batch concurrently. The SIMD tiers write the token
 * groups that lie whole in the range with non-temporal stores (fenced before returning):
 * ranges cut at cmf_qact_cut keep every group whole. */
void cmf_qact_quantize_rows(cmf_qact *a, const float *X, size_t ldx, size_t t_begin, size_t t_end);

/* The token group boundary nearest t (a->n at or past the end). */
size_t cmf_qact_cut(const cmf_qact *a, size_t t);

/* True when cmf_matmul_qact accepts this matrix (dtype and shape; any tier). */
int cmf_qact_supports(const cmf_qmat *m);

/* True when the AVX-512 VNNI tier is in effect (CPU support, not lowered by CORTIQ_CPU). */
int cmf_qact_fast(void);

/* True when a SIMD tier of cmf_matmul_qact is in effect (AVX-512 VNNI or AVX2): the integer
 * GEMM beats the f32 and int8-activation batched kernels (the engine's prefill_qact). */
int cmf_qact_simd(void);

/* The fewest tokens for which cmf_matmul_qact beats the int8-activation batched kernels
 * (CMF_KF_INT8_ACT) on the tier in effect: below it, repacking each panel costs more than
 * the GEMM gains (bench_gemm --tokens N). */
size_t cmf_qact_min_tokens(void);

/* The fewest tokens from which a batched product of m with these flags (CMF_KF_BF16_ACT counts)
 * gives every token the bits it gets in any other batch of at least that many (the GEMM of the
 * tier in effect computes each token's outputs alone, in an order that does not depend on the
 * batch): cmf_matmul_qact where qact is set and m takes it (from 2 tokens with the
 * batched-decode copy, whose kernels give every batch the GEMM's bits), else the float panel
 * GEMMs of cmf_matmul_ex (f32 / f16 / bf16; AMX tiles and bf16 dot products from their own
 * thresholds; below, the few-token rows, whose bits differ from the GEMM's). 0 where no batch
 * size gives that (the batched kernels of the other dtypes step tokens in blocks whose
 * remainder rounds differently). */
size_t cmf_matmul_exact_min(const cmf_qmat *m, int qact, unsigned flags);

/* Scratch bytes cmf_matmul_qact needs per concurrent call for matrices of `cols` columns. */
size_t cmf_qact_scratch_bytes(uint64_t cols);

/* Y[t*ldy + (r - row_begin)] = sum_i W[r][i] * Xq[t][i] for t < a->n, r in [row_begin, row_end),
 * where Xq is the dequantized activation. Requires cmf_qact_supports(m), a->cols == m->cols,
 * scratch of cmf_qact_scratch_bytes(m->cols) bytes, 64-byte aligned, private to the call. */
void cmf_matmul_qact(const cmf_qmat *m, const cmf_qact *a, float *Y, size_t ldy, uint64_t row_begin,
                     uint64_t row_end, void *scratch);

/* ---- Batch activations prepared once for all their products (batch_act.c) ----
 *
 * What cmf_matmul_ex(m, X, n, ..., flags) does on its own for float weights, in two steps, so
 * that the activations are rounded or regrouped once for every product and row range that reads
 * them (q / k / v, gate / up, rows in claimed pieces), as cmf_qact does for the integer GEMM;
 * the same bits. cmf_pact_for(m, n, flags): the kind of preparation cmf_matmul_ex's kernel for
 * that batch starts with: CMF_PACT_BF16, the bf16 dot products' (CMF_KF_BF16_ACT, bf16
 * weights, the AVX-512 tier on a CPU whose vdpbf16ps is fast, from 12 tokens),
 * CMF_PACT_F32, the AVX-512 float panels' (f32 / f16 / bf16 weights from 16 tokens, not the AMX
 * tiles), CMF_PACT_F32_AVX2, the AVX2 float panels' (from 16 tokens), or none (the few-token
 * rows below those floors read X as it is). cmf_pact_bytes:
 * memory (64-byte aligned) for n tokens of cols columns; cmf_pact_bind lays a cmf_pact of a kind
 * over it. cmf_pact_cut: the first token at or after t at which one thread's share of the
 * preparation may end and the next one's begin (a multiple of cmf_pact_group(kind), or n).
 * cmf_pact_prepare: tokens [t0, t1) of X (X still points at token 0), t0 and t1 such points
 * (or 0), so that threads each prepare whole groups.
 * cmf_matmul_pact: Y[t * ldy + r - r0] for r in [r0, r1) of an m whose cmf_pact_for was the kind,
 * with m->cols == a->cols; false (nothing written) when its scratch cannot be had. */
typedef enum { CMF_PACT_NONE, CMF_PACT_BF16, CMF_PACT_F32, CMF_PACT_F32_AVX2 } cmf_pact_kind;
typedef struct cmf_pact {
    cmf_pact_kind kind;
    size_t n, cols;
    void *mem; /* groups of tokens back to back, in the kind's kernel's layout */
} cmf_pact;
cmf_pact_kind cmf_pact_for(const cmf_qmat *m, size_t n, unsigned flags);
size_t cmf_pact_group(cmf_pact_kind kind);
size_t cmf_pact_bytes(cmf_pact_kind kind, size_t n, size_t cols);
size_t cmf_pact_cut(const cmf_pact *a, size_t t);
void cmf_pact_bind(cmf_pact *a, cmf_pact_kind kind, void *mem, size_t n, size_t cols);
void cmf_pact_prepare(cmf_pact *a, const float *X, size_t ldx, size_t t0, size_t t1);
bool cmf_matmul_pact(const cmf_qmat *m, const cmf_pact *a, float *Y, size_t ldy, uint64_t r0,
                     uint64_t r1);

/* True when the engine should ask dtype dt for int8 activations (CMF_KF_INT8_ACT) in a product
 * over n_tokens tokens unless told to stay in f32: the dtype's policy in its traits record
 * (quant/dtype_ops.h). */
bool cq_dtype_int8_act(cmf_dtype dt, size_t n_tokens);

#endif
