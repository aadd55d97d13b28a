/* recode.h - re-encode a directory tensor: dequantize, optionally gather rows / columns, and
 * encode again (spec §11 "dequant -> gather live neurons -> requant", and `requant`). */
#ifndef CORTIQ_CONVERT_RECODE_H
#define CORTIQ_CONVERT_RECODE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cortiq/format.h"
#include "cortiq/quant.h"

/* A column index with this bit set is gathered as zeros (a padded dead attention head, whose
 * output projection must contribute nothing). */
#define CQ_GATHER_ZERO 0x80000000u

/* What to write for one tensor. rows / cols: index lists into the source's rows and columns
 * (NULL = all, in order); for a 1-D tensor `rows` gathers its elements. */
typedef struct cq_recode {
    const cmf_tensor *src;
    cmf_dtype dtype; /* target dtype */
    const uint32_t *rows;
    uint32_t n_rows;
    const uint32_t *cols;
    uint32_t n_cols;
    double vbit_mean_bits; /* <= 0: the source's own mean for a vbit source, else the default */
    double outlier_frac;   /* <= 0: the codec default */
} cq_recode;

/* The dtype a tensor of dtype `src` gets at a new shape: its own when its layout (spec §3.2)
 * holds the shape; a 2-D matrix it cannot hold (a width that is not a multiple of 32, q1t past
 * 65535 columns) becomes q8_2f, spec §11; 1-D and tensors under 32 elements keep a float dtype
 * and otherwise become f16. */
cmf_dtype cq_recode_dtype(cmf_dtype src, unsigned ndim, const uint64_t *shape);

/* Why `dt` cannot hold this shape (a short rule text), or NULL when it can. */
const char *cq_dtype_shape_rule(cmf_dtype dt, unsigned ndim, const uint64_t *shape);

/* The output shape of r (ndim = r->src->ndim). */
void cq_recode_shape(const cq_recode *r, uint64_t shape[CMF_MAX_DIMS]);

/* Dequantize the whole tensor into a malloc'd float array. */
cmf_status cq_tensor_f32(const cmf_tensor *t, float **out, cmf_err *err);

/* Run r: the encoded payload in *out (malloc'd) of *len bytes. */
cmf_status cq_recode_run(const cq_recode *r, uint8_t **out, size_t *len, cmf_err *err);

/* Mean bits per weight of a vbit / vbit_ro payload (its per-row widths), 0 for other dtypes. */
double cq_vbit_mean_bits(const cmf_tensor *t);

#endif
