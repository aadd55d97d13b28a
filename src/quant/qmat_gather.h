/* quant/qmat_gather.h - gathered copies of a matrix: some of its rows, or some of its columns,
 * in the same dtype with the same weight values, so the ordinary kernels (matvec, tok8, the
 * integer GEMM) run on the smaller matrix. The task masks build them once when a task is
 * selected (engine/task_mask.h): the FFN rows of the active neurons, the down-projection
 * columns of the active neurons, the output-projection columns of the active heads.
 *
 * Exact copies only (bytes moved, nothing re-encoded): a product over the gathered matrix
 * equals the product over the original with the dropped inputs zeroed, up to float summation
 * order. Which columns can be taken depends on the dtype (cq_qmat_gather_unit):
 *   f32, f16, bf16, q8_row (one scale per row): any column (unit 1);
 *   q4_block, q4_tiled, q1, q4tp with cols % 32 == 0: whole aligned groups of 32 (unit 32);
 *   others (vbit, vbit_ro, q8_2f, q1s, q1t): none (0): the caller computes densely.
 * Internal to the library. */
#ifndef CORTIQ_QUANT_QMAT_GATHER_H
#define CORTIQ_QUANT_QMAT_GATHER_H

#include <stdint.h>

#include "common/err.h"
#include "cortiq/kernels.h"

/* 1, 32 or 0 (see above). Rows gather whenever this is nonzero. */
unsigned cq_qmat_gather_unit(const cmf_qmat *m);

/* *out = rows rows[0..n) of m (any order, repeats allowed). ctx names the tensor in errors.
 * Fails CMF_E_UNSUPPORTED (unit 0), CMF_E_INVALID_ARG (n 0), CMF_E_NOMEM. */
cmf_status cq_qmat_gather_rows(const cmf_qmat *m, const uint32_t *rows, uint64_t n, cmf_qmat *out,
                               const char *ctx, cmf_err *err);
/* *out = columns cols[0..n) of m; with unit 32 they must come as whole aligned groups
 * (cols[32k .. 32k+31] = 32g .. 32g+31). */
cmf_status cq_qmat_gather_cols(const cmf_qmat *m, const uint32_t *cols, uint64_t n, cmf_qmat *out,
                               const char *ctx, cmf_err *err);
/* Frees a gathered matrix (its payload included); NULL or a zeroed one allowed. */
void cq_qmat_gather_free(cmf_qmat *m);

#endif
