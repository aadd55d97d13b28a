/* recode.c - dequantize, gather, encode again: the one path by which defrag and requant change
 * a tensor's bytes. */
#include "convert/recode.h"

#include <stdlib.h>
#include <string.h>

#include "common/err.h"

static bool is_float(cmf_dtype dt) {
    return dt == CMF_DT_F32 || dt == CMF_DT_F16 || dt == CMF_DT_BF16;
}

const char *cq_dtype_shape_rule(cmf_dtype dt, unsigned ndim, const uint64_t *shape) {
    const cmf_dtype_traits *t = cmf_dtype_get(dt);
    if (!t || t->kind == CMF_DTK_RESERVED || t->kind == CMF_DTK_UNKNOWN)
        return "not a live dtype (spec §3.1)";
    if (t->matrix_only && ndim != 2) return "2-D tensors only (spec §3.2)";
    if (t->needs_in_mult32 && shape[ndim - 1] % 32)
        return "the row length (in) must be a multiple of 32 (spec §3.2)";
    if (t->max_in && ndim == 2 && shape[1] > t->max_in)
        return "at most 65535 columns: column indices are u16 (spec §3.2)";
    return NULL;
}

cmf_dtype cq_recode_dtype(cmf_dtype src, unsigned ndim, const uint64_t *shape) {
    uint64_t numel = 0;
    if (!cmf_shape_numel(ndim, shape, &numel) || ndim < 2 || numel < 32)
        return is_float(src) ? src : CMF_DT_F16; /* spec §3.2: 1-D and tiny tensors */
    if (!cq_dtype_shape_rule(src, ndim, shape)) return src;
    return ndim == 2 ? CMF_DT_Q8_2F : CMF_DT_F16; /* spec §11: per-row scale, any width */
}

void cq_recode_shape(const cq_recode *r, uint64_t shape[CMF_MAX_DIMS]) {
    memset(shape, 0, CMF_MAX_DIMS * sizeof *shape);
    for (unsigned i = 0; i < r->src->ndim; i++)
        shape[i] = r->src->shape[i];
    if (r->rows) shape[0] = r->n_rows;
    if (r->cols && r->src->ndim == 2) shape[1] = r->n_cols;
}

cmf_status cq_tensor_f32(const cmf_tensor *t, float **out, cmf_err *err) {
    uint64_t numel;
    *out = NULL;
    if (!cmf_shape_numel(t->ndim, t->shape, &numel))
        return cmf_err_set(err, CMF_E_PARSE, t->name, "bad shape");
    float *f = malloc((size_t)numel * sizeof *f);
    if (!f) return cmf_err_set(err, CMF_E_NOMEM, t->name, "%llu floats", (unsigned long long)numel);
    cmf_status st =
        cmf_quant_dequant((cmf_dtype)t->dtype, t->ndim, t->shape, t->data, t->nbytes, f, err);
    if (st) {
        free(f);
        return st;
    }
    *out = f;
    return CMF_OK;
}

double cq_vbit_mean_bits(const cmf_tensor *t) {
    if ((t->dtype != CMF_DT_VBIT && t->dtype != CMF_DT_VBIT_RO) || t->ndim != 2 || !t->shape[0] ||
        t->nbytes < t->shape[0])
        return 0;
    uint64_t sum = 0;
    for (uint64_t r = 0; r < t->shape[0]; r++)
        sum += t->data[r];
    return (double)sum / (double)t->shape[0];
}

/* The gathered values of r from the source's f32 values. */
static float *gather(const cq_recode *r, const float *src, uint64_t out_numel) {
    float *g = malloc((size_t)out_numel * sizeof *g);
    if (!g) return NULL;
    const cmf_tensor *t = r->src;
    if (t->ndim != 2) { /* 1-D (or a row list over the flattened leading axis) */
        uint64_t inner = 1;
        for (unsigned i = 1; i < t->ndim; i++)
            inner *= t->shape[i];
        uint64_t n_rows = r->rows ? r->n_rows : t->shape[0];
        for (uint64_t i = 0; i < n_rows; i++) {
            uint64_t s = r->rows ? r->rows[i] : i;
            memcpy(g + i * inner, src + s * inner, (size_t)inner * sizeof *g);
        }
        return g;
    }
    uint64_t C = t->shape[1], n_rows = r->rows ? r->n_rows : t->shape[0];
    uint64_t n_cols = r->cols ? r->n_cols : C;
    for (uint64_t i = 0; i < n_rows; i++) {
        const float *row = src + (uint64_t)(r->rows ? r->rows[i] : i) * C;
        float *dst = g + i * n_cols;
        if (!r->cols) {
            memcpy(dst, row, (size_t)C * sizeof *dst);
            continue;
        }
        for (uint64_t j = 0; j < n_cols; j++)
            dst[j] = (r->cols[j] & CQ_GATHER_ZERO) ? 0.0f : row[r->cols[j]];
    }
    return g;
}

cmf_status cq_recode_run(const cq_recode *r, uint8_t **out, size_t *len, cmf_err *err) {
    const cmf_tensor *t = r->src;
    *out = NULL;
    *len = 0;
    uint64_t shape[CMF_MAX_DIMS], numel;
    cq_recode_shape(r, shape);
    if (!cmf_shape_numel(t->ndim, shape, &numel))
        return cmf_err_set(err, CMF_E_INVALID_ARG, t->name, "empty output shape");
    float *src;
    cmf_status st = cq_tensor_f32(t, &src, err);
    if (st) return st;
    float *vals = src;
    if (r->rows || r->cols) {
        vals = gather(r, src, numel);
        free(src);
        if (!vals) return cmf_err_set(err, CMF_E_NOMEM, t->name, "gather");
    }
    bool vbit = r->dtype == CMF_DT_VBIT || r->dtype == CMF_DT_VBIT_RO;
    bool src_vbit = t->dtype == CMF_DT_VBIT || t->dtype == CMF_DT_VBIT_RO;
    if (vbit && src_vbit && !r->cols && t->ndim == 2) {
        /* rows keep the widths the source allocated them */
        uint8_t *bits = malloc((size_t)shape[0]);
        if (!bits) st = cmf_err_set(err, CMF_E_NOMEM, t->name, "bits");
        for (uint64_t i = 0; !st && i < shape[0]; i++)
            bits[i] = t->data[r->rows ? r->rows[i] : i];
        if (!st) st = cmf_vbit_encode(r->dtype, shape[0], shape[1], vals, bits, out, len, err);
        free(bits);
    } else {
        cmf_quant_opts o;
        cmf_quant_opts_default(&o);
        double mean = r->vbit_mean_bits > 0 ? r->vbit_mean_bits : cq_vbit_mean_bits(t);
        if (mean > 0) o.vbit_mean_bits = mean;
        if (r->outlier_frac > 0) o.outlier_frac = r->outlier_frac;
        st = cmf_quant_encode(r->dtype, t->ndim, shape, vals, &o, out, len, err);
    }
    free(vals);
    return st;
}
