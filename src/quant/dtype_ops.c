/* dtype_ops.c - the compute record of every live dtype (quant/dtype_ops.h). Reserved ids have
 * no record: their slots stay empty, as their ids stay assigned. */
#include "quant/dtype_ops.h"

#include <stddef.h>

#include "quant/kernel_impl.h"

#define FLOAT_GEMMS (CQ_ISA_BIT(CQ_ISA_AVX2) | CQ_ISA_BIT(CQ_ISA_AVX512))
#define HALF_GEMMS  (FLOAT_GEMMS | CQ_ISA_BIT(CQ_ISA_AMX))
/* vbit and vbit_ro share codec and kernels: cq_bind_vbit reads the row-offset table of vbit_ro
 * from the file and builds it for vbit. */
#define VBIT_OPS                                                                                   \
    {                                                                                              \
        .encode = qc_vbit_encode, .quantized = true, .validate = qc_vbit_validate,                 \
        .decode_row_checked = qc_vbit_row, .decode_all = qc_vbit_all, .bind = cq_bind_vbit,        \
        .int8_act = CQ_INT8_ALWAYS, .qact = CQ_COLS_32                                             \
    }

static const cq_dtype_ops k_ops[CMF_DT_COUNT] = {
    [CMF_DT_F32] = {.encode = qc_float_encode,
                    .decode_row = qc_float_row,
                    .gemm_tiers = FLOAT_GEMMS},
    [CMF_DT_F16] = {.encode = qc_float_encode,
                    .decode_row = qc_float_row,
                    .gemm_tiers = HALF_GEMMS},
    [CMF_DT_BF16] = {.encode = qc_float_encode,
                     .decode_row = qc_float_row,
                     .gemm_tiers = HALF_GEMMS},
    [CMF_DT_Q8_ROW] = {.encode = qc_q8_row_encode,
                       .quantized = true,
                       .decode_row = qc_q8_row_row,
                       .bind = cq_bind_q8_row,
                       .int8_act = CQ_INT8_TOK8,
                       .qact = CQ_COLS_ANY},
    [CMF_DT_Q4_BLOCK] = {.encode = qc_q4_block_encode,
                         .quantized = true,
                         .decode_row = qc_q4_block_row,
                         .bind = cq_bind_q4_block,
                         .int8_act = CQ_INT8_ALWAYS,
                         .qact = CQ_COLS_32},
    [CMF_DT_VBIT] = VBIT_OPS,
    [CMF_DT_Q8_2F] = {.encode = qc_q8_2f_encode,
                      .quantized = true,
                      .decode_row = qc_q8_2f_row,
                      .bind = cq_bind_q8_2f},
    [CMF_DT_VBIT_RO] = VBIT_OPS,
    [CMF_DT_Q4_TILED] = {.encode = qc_q4_tiled_encode,
                         .quantized = true,
                         .decode_row = qc_q4_tiled_row,
                         .int8_act = CQ_INT8_ALWAYS,
                         .qact = CQ_COLS_32},
    [CMF_DT_Q1] = {.encode = qc_q1_encode, .quantized = true, .decode_row = qc_q1_row},
    [CMF_DT_Q1S] = {.encode = qc_q1s_encode,
                    .quantized = true,
                    .max_numel = UINT32_MAX,
                    .validate = qc_q1s_validate,
                    .decode_row_checked = qc_q1s_row,
                    .decode_all = qc_q1s_all,
                    .bind = cq_bind_q1s},
    [CMF_DT_Q1T] = {.encode = qc_q1t_encode,
                    .quantized = true,
                    .validate = qc_q1t_validate,
                    .decode_row_checked = qc_q1t_row,
                    .bind = cq_bind_q1t},
    [CMF_DT_Q4TP] = {.encode = qc_q4tp_encode,
                     .quantized = true,
                     .decode_row = qc_q4tp_row,
                     .bind = cq_bind_q4tp,
                     .int8_act = CQ_INT8_ALWAYS,
                     .qact = CQ_COLS_32},
};

const cq_dtype_ops *cq_dtype_ops_get(cmf_dtype dt) {
    return (unsigned)dt < CMF_DT_COUNT && k_ops[dt].encode ? &k_ops[dt] : NULL;
}

bool cq_dtype_int8_act(cmf_dtype dt, size_t n_tokens) {
    const cq_dtype_ops *o = cq_dtype_ops_get(dt);
    if (!o) return false;
    switch (o->int8_act) {
    case CQ_INT8_ALWAYS:
        return true;
    case CQ_INT8_BATCH:
        return n_tokens > 1;
    case CQ_INT8_TOK8:
        return n_tokens > 1 || cq_vnni_tier() || cq_cpu_isa() == CQ_ISA_AVX2;
    default:
        return false;
    }
}
