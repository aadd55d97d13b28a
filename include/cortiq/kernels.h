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
 * exp2f): within 2e-5 of sum|w·x| in the tests, typically ~1e-6. docs/KERNELS.md describes
 * each path.
 *
 * Thread safety: an initialised cmf_qmat is immutable; any number of threads may run
 * kernels on it at once (on disjoint output rows).
 */
#ifndef CORTIQ_KERNELS_H
#define CORTIQ_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "cortiq/dtype.h"
#include "cortiq/export.h"
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
    /* A copy of the weights laid out for batched decode on this CPU (the engine's
     * cortiq_model_build_lanes), NULL when none; released by cmf_qmat_free. */
    void *lanes;
    uint64_t lanes_bytes;
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
CORTIQ_API CORTIQ_NODISCARD cmf_status cmf_qmat_init(cmf_qmat *m, cmf_dtype dt, uint64_t rows,
                                                     uint64_t cols, const uint8_t *data,
                                                     uint64_t nbytes, const char *ctx,
                                                     cmf_err *err);

/* Release what init allocated; *m becomes unusable. NULL allowed. */
CORTIQ_API void cmf_qmat_free(cmf_qmat *m);

/* Bytes of the payload that one full matvec streams (= nbytes; for reporting GB/s). */
CORTIQ_API uint64_t cmf_qmat_bytes(const cmf_qmat *m);

/* out[0..cols) = row `row` of W (row < rows). Overlay values (q1s, q1t) replace the base. */
CORTIQ_API void cmf_qmat_dequant_row(const cmf_qmat *m, uint64_t row, float *out);

/* y[r - row_begin] = sum_i W[r][i]·x[i] for r in [row_begin, row_end), row_end <= rows.
 * x has cols floats. y must not alias x. */
CORTIQ_API void cmf_matvec(const cmf_qmat *m, const float *x, float *y, uint64_t row_begin,
                           uint64_t row_end);

/* Y[t·ldy + (r - row_begin)] = sum_i W[r][i]·X[t·cols + i] for t < n tokens and
 * r in [row_begin, row_end). X is row-major [n][cols]; ldy >= row_end - row_begin.
 * Each weight group is decoded once per row and applied to all n tokens. */
CORTIQ_API void cmf_matmul(const cmf_qmat *m, const float *X, size_t n, float *Y, size_t ldy,
                           uint64_t row_begin, uint64_t row_end);

#ifdef __cplusplus
}
#endif
#endif
