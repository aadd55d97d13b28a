/* cortiq/kernels.h - compute kernels over the matrix dtypes of spec §3.2.
 *
 * A cmf_qmat is a read-only view of one weight matrix W[rows][cols] stored in any
 * live dtype (f32, f16, bf16, q8_row, q4_block, vbit, q8_2f, vbit_ro, q4_tiled, q1,
 * q1s, q1t, q4tp). cmf_qmat_init() validates the payload once (sizes for fixed
 * dtypes, the whole variable part for vbit / vbit_ro / q1s / q1t), after which the
 * kernels do no checking and never read outside [data, data + nbytes).
 *
 * Kernels, all against f32 activations, results in f32:
 *   cmf_qmat_dequant_row  one row of W as floats (exactly the spec's w formula)
 *   cmf_matvec            y = W x over a row range (callers split rows across threads)
 *   cmf_matmul            Y = X W^T for a small batch of token vectors (prefill),
 *                         each weight decoded once per row and reused for every token
 *
 * The implementation is chosen per call from src/common/cpu.h (scalar, AVX2, AVX-512, and
 * AMX for batches of f16 / bf16 weights; env CORTIQ_CPU forces a lower tier). The scalar
 * tier is the reference; the SIMD tiers
 * differ from it by float summation order and operation order (scale applied per group,
 * overlays added as corrections, the q4tp ladder from a vector exp2 within ~2 ulp of
 * exp2f): within 2e-5 of sum|w·x| in the tests, typically ~1e-6. CMF_KF_INT8_ACT adds
 * the activation rounding error (see cmf_matmul_ex). docs/KERNELS.md describes each path.
 *
 * Thread safety: an initialised cmf_qmat is immutable; any number of threads may run
 * kernels on it at once (on disjoint output rows).
 */
#ifndef CORTIQ_KERNELS_H
#define CORTIQ_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "cortiq/dtype.h"
#include "cortiq/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cmf_qmat {
    cmf_dtype dtype;
    uint64_t rows, cols;
    const uint8_t *data; /* the tensor payload (spec §3.2 layout), nbytes long */
    uint64_t nbytes;

    /* Derived by cmf_qmat_init (read-only for callers; layout-specific meaning). */
    uint64_t groups;          /* 32-column groups per row (cols / 32) for group dtypes */
    const uint8_t *quants;    /* first byte of the quant area (int8, nibbles, tiles, packed bits) */
    const uint8_t *scales;    /* f16 scales (per row or per group); q4tp: (lo, step) per row */
    const uint8_t *extra;     /* q8_2f: f16 col field; q4tp: 5-bit codes; vbit*: u8 bits per row */
    const uint8_t *row_off32; /* vbit_ro: u32 row offsets in the file */
    const uint64_t *row_off;  /* vbit: row offsets computed at init (owned) */
    uint64_t code_bytes;      /* q4tp: bytes of 5-bit codes per row */
    const uint8_t *ovl;       /* q1s: {u32 idx, f16 v} entries; q1t: {u16 col, f16 v} entries */
    const uint8_t *ovl_ptr;   /* q1t: u32 row_ptr[rows + 1] */
    uint64_t ovl_count;       /* number of overlay entries */
    void *owned;              /* memory allocated by init; released by cmf_qmat_free */
} cmf_qmat;

/* Bind a view to a payload and validate it against spec §3.2.
 * dt must be a live dtype; rows, cols >= 1 (pass rows = 1, cols = n for a 1-D tensor).
 * Fixed-size dtypes: nbytes must equal the exact size of the shape (cmf_dtype_nbytes).
 * vbit / vbit_ro: every per-row bit width must be in {3,4,5,6,8} and the packed rows must
 *   fill the payload exactly; vbit_ro row offsets must be the canonical running sums
 *   (offset[0] = 0, offset[r+1] = offset[r] + bits[r]·cols/8, offset[rows] = packed size).
 *   vbit gets a row-offset table computed here (allocated).
 * q1s: count must match nbytes exactly, every flat index < rows·cols.
 * q1t: cols <= 65535, every code byte <= 242 (5 base-3 digits), row_ptr[0] = 0,
 *   non-decreasing, row_ptr[rows] matches nbytes, every col < cols.
 * q1s / q1t overlays out of order or with repeated positions are accepted;
 *   a later entry for the same position wins (as when dequantizing in file order), and
 *   init then builds a sorted, de-duplicated copy (allocated).
 * Returns CMF_OK; CMF_E_PARSE with a message naming ctx (the tensor), the offending value
 * and the rule; CMF_E_INVALID_ARG for a NULL pointer or zero dimension; CMF_E_NOMEM. On failure *m
 * owns nothing. Always pair a successful init with cmf_qmat_free (a no-op when nothing was
 * allocated). data must outlive *m. */
cmf_status cmf_qmat_init(cmf_qmat *m, cmf_dtype dt, uint64_t rows, uint64_t cols,
                         const uint8_t *data, uint64_t nbytes, const char *ctx, cmf_err *err);

/* Release what init allocated; *m becomes unusable. NULL allowed. */
void cmf_qmat_free(cmf_qmat *m);

/* Bytes of the payload that one full matvec streams (= nbytes; for reporting GB/s). */
uint64_t cmf_qmat_bytes(const cmf_qmat *m);

/* out[0..cols) = row `row` of W (row < rows). Overlay values (q1s, q1t) replace the base. */
void cmf_qmat_dequant_row(const cmf_qmat *m, uint64_t row, float *out);

/* y[r - row_begin] = sum_i W[r][i]·x[i] for r in [row_begin, row_end), row_end <= rows.
 * x has cols floats. y must not alias x. */
void cmf_matvec(const cmf_qmat *m, const float *x, float *y, uint64_t row_begin, uint64_t row_end);

/* Y[t·ldy + (r - row_begin)] = sum_i W[r][i]·X[t·cols + i] for t < n tokens and
 * r in [row_begin, row_end). X is row-major [n][cols]; ldy >= row_end - row_begin.
 * Each weight group is decoded once per row and applied to all n tokens. */
void cmf_matmul(const cmf_qmat *m, const float *X, size_t n, float *Y, size_t ldy,
                uint64_t row_begin, uint64_t row_end);

/* Flags for the _ex variants. */
enum {
    /* Allow the kernel to quantize activations to int8 (one f32 scale per 32 values,
     * round to nearest) and use integer dot products (AVX-512 VNNI / AVX2 maddubs) where
     * that is faster: q8_row, q4_tiled, q4tp, q4_block (cols % 32 == 0); for one token also
     * vbit and vbit_ro (AVX-512 with VBMI and GFNI, kernel_i8dec_avx512.c). The result then
     * carries the activation rounding error, bounded per group by
     * sum|w|·absmax(x_group)/254. Ignored by dtypes and tiers without such a path. */
    CMF_KF_INT8_ACT = 1u << 0,
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
 * the path, else the layout it reads (q8_row: CMF_TOK8_Q8; with VBMI and GFNI the 4-bit class
 * and vbit / vbit_ro: CMF_TOK8_I8DEC; cols % 32 == 0). cmf_tok8_prepare: x (cols floats) into
 * buf (cmf_tok8_bytes(cols) bytes, 64-byte aligned) in the layouts OR-ed in `layouts`.
 * cmf_matvec_tok8: y[r - row_begin] for r in [row_begin, row_end) of a supported m with
 * m->cols == cols whose layout was prepared; bit-identical to
 * cmf_matmul_ex(m, x, 1, cols, y, 1, row_begin, row_end, CMF_KF_INT8_ACT). */
enum { CMF_TOK8_Q8 = 1, CMF_TOK8_I8DEC = 2 };
size_t cmf_tok8_bytes(uint64_t cols);
int cmf_tok8_supports(const cmf_qmat *m);
void cmf_tok8_prepare(void *buf, const float *x, uint64_t cols, int layouts);
void cmf_matvec_tok8(const cmf_qmat *m, const void *tok, float *y, uint64_t row_begin,
                     uint64_t row_end);

/* ---- Integer prefill GEMM (int8 activations x integer weight codes) ----
 *
 * For a batch of tokens the products are compute-bound, and integer dot products (AVX-512
 * VNNI: 64 multiply-adds per instruction) do four times the work of f32 FMAs. The
 * activations are quantized ONCE per batch into a cmf_qact (per token, per 32 columns:
 * int8 codes q = round(x / s), s = absmax / 127, plus the sum of the codes), then any
 * number of matrices sharing that input (q/k/v, gate/up) run cmf_matmul_qact on it.
 *
 * The weights must be integer codes times a scale: q8_row, q4_tiled, q4tp, and q4_block
 * with cols % 32 == 0 (cmf_qact_supports). Per 32-column block the integer dot product is
 * exact; it is scaled by s (activation) x the weight's scale in f32. The result therefore
 * carries only the activation rounding error, bounded per block by sum|w| * absmax / 254
 * (the same arithmetic as llama.cpp's Q8_0 activations).
 *
 * Tiers: AVX-512 VNNI (panels of 16 weight rows repacked so one vpdpbusd feeds 16 rows,
 * up to 12 tokens per pass), and a portable scalar tier computing the same integer sums
 * (the reference the tests compare against). cmf_qact_fast() says whether the fast tier runs
 * in this process (callers with an f32 path of their own use it only when it does). */
/* Storage is grouped by CMF_QACT_GROUP tokens so the kernels address a group's tokens at
 * constant offsets: the entry of token t, block b is at index
 *   cmf_qact_index(a, t, b) = ((t / G) * nblocks + b) * G + t % G      (G = CMF_QACT_GROUP)
 * in scale / c128 / c8, and its 32 codes start at q + 32 * cmf_qact_index(a, t, b). */
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
 * quantize disjoint token ranges of one batch concurrently. */
void cmf_qact_quantize_rows(cmf_qact *a, const float *X, size_t ldx, size_t t_begin, size_t t_end);

/* True when cmf_matmul_qact accepts this matrix (dtype and shape; any tier). */
int cmf_qact_supports(const cmf_qmat *m);

/* True when the AVX-512 VNNI tier is in effect (CPU support, not lowered by CORTIQ_CPU). */
int cmf_qact_fast(void);

/* Scratch bytes cmf_matmul_qact needs per concurrent call for matrices of `cols` columns. */
size_t cmf_qact_scratch_bytes(uint64_t cols);

/* Y[t*ldy + (r - row_begin)] = sum_i W[r][i] * Xq[t][i] for t < a->n, r in [row_begin, row_end),
 * where Xq is the dequantized activation. Requires cmf_qact_supports(m), a->cols == m->cols,
 * scratch of cmf_qact_scratch_bytes(m->cols) bytes, 64-byte aligned, private to the call. */
void cmf_matmul_qact(const cmf_qmat *m, const cmf_qact *a, float *Y, size_t ldy, uint64_t row_begin,
                     uint64_t row_end, void *scratch);

#ifdef __cplusplus
}
#endif
#endif
