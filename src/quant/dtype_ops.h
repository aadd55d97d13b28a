/* quant/dtype_ops.h - the compute side of each dtype, one record per id (the format side, name
 * and size rule, is its row in src/format/dtype.c): codec entry points, how cmf_qmat_init lays
 * a payload out, the int8-activation policy and the batch kernels beyond the per-tier matmul
 * tables. A new dtype fills one record here; quant_api.c, qmat.c and kernel.c only look it up.
 * Internal to src/quant (and the engine, through cq_dtype_int8_act in kernels_engine.h). */
#ifndef CORTIQ_QUANT_DTYPE_OPS_H
#define CORTIQ_QUANT_DTYPE_OPS_H

#include <stdbool.h>
#include <stdint.h>

#include "common/cpu.h"
#include "quant/kernels_engine.h"
#include "quant/quant_internal.h"

/* When the engine asks a dtype for int8 activations (cq_dtype_int8_act). */
typedef enum cq_int8_policy {
    CQ_INT8_NEVER = 0,
    CQ_INT8_BATCH,  /* from 2 tokens: one token streams faster in f32 */
    CQ_INT8_ALWAYS, /* one token and batches */
    /* batches, and one token where the prepared-token path runs (AVX-512 VNNI or the AVX2
     * tier in effect: cmf_tok8_*), so that a decode step of several sessions shares each
     * weight load (cmf_matvec_tok8_multi) with the arithmetic each session gets alone;
     * elsewhere one token streams faster in f32 */
    CQ_INT8_TOK8,

} cq_int8_policy;

/* Which shapes a kernel path takes. */
typedef enum cq_cols_rule {
    CQ_COLS_NONE = 0, /* no such path */
    CQ_COLS_ANY,
    CQ_COLS_32, /* cols % 32 == 0 */
} cq_cols_rule;

typedef struct cq_dtype_ops {
    /* Codec (src/quant/codec_*.c; the scalar reference of the layout). */
    cmf_status (*encode)(const qshape *s, const float *src, const cmf_quant_opts *o, uint8_t **out,
                         size_t *len, cmf_err *err);
    bool quantized;     /* encode refuses NaN/inf (the float dtypes carry them) */
    uint64_t max_numel; /* largest tensor the layout can index (q1s: u32 flat index); 0: any */
    /* Fixed dtypes: one row of a payload whose size was checked. */
    void (*decode_row)(const qshape *s, const uint8_t *d, uint64_t row, float *out);
    /* Variable dtypes: full validation, a row decode checking what it reads, and a faster
     * whole-tensor decode of a validated payload (NULL: row by row). */
    cmf_status (*validate)(const qshape *s, const uint8_t *d, uint64_t nbytes, const char *ctx,
                           cmf_err *err);
    cmf_status (*decode_row_checked)(const qshape *s, const uint8_t *d, uint64_t nbytes,
                                     uint64_t row, float *out, const char *ctx, cmf_err *err);
    void (*decode_all)(const qshape *s, const uint8_t *d, float *out);

    /* Kernels. bind sets the layout pointers of a cmf_qmat whose size rule holds (qmat.c;
     * NULL: quants at data, nothing else). */
    cmf_status (*bind)(cmf_qmat *m, const char *ctx, cmf_err *err);
    cq_int8_policy int8_act;
    cq_cols_rule qact;   /* integer prefill GEMM, cmf_matmul_qact (qact.c, gemm_i8_avx512.c) */
    unsigned gemm_tiers; /* CQ_ISA_BIT bits of the batch GEMMs of f32 activations: AVX2 and
                            AVX512 (float panels, gemm_f32_avx2.c / gemm_f32_avx512.c), AMX
                            (half tiles, gemm_half_amx.c) */
} cq_dtype_ops;

/* The record of a live dtype; NULL for reserved and unknown ids. */
const cq_dtype_ops *cq_dtype_ops_get(cmf_dtype dt);

/* Layouts of cmf_qmat_init (qmat.c). */
cmf_status cq_bind_q8_row(cmf_qmat *m, const char *ctx, cmf_err *err);
cmf_status cq_bind_q8_2f(cmf_qmat *m, const char *ctx, cmf_err *err);
cmf_status cq_bind_q4_block(cmf_qmat *m, const char *ctx, cmf_err *err);
cmf_status cq_bind_q4tp(cmf_qmat *m, const char *ctx, cmf_err *err);
cmf_status cq_bind_vbit(cmf_qmat *m, const char *ctx, cmf_err *err);
cmf_status cq_bind_q1s(cmf_qmat *m, const char *ctx, cmf_err *err);
cmf_status cq_bind_q1t(cmf_qmat *m, const char *ctx, cmf_err *err);

#endif
