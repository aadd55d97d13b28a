/* quant_api.c - the public entry points of cortiq/quant.h: shape rules, dtype policy, and the
 * dispatch through each dtype's record (quant/dtype_ops.h) to its codec file. */
#include <stdlib.h>
#include <string.h>

#include "common/checked.h"
#include "quant/dtype_ops.h"
#include "quant/quant_internal.h"

void cmf_quant_opts_default(cmf_quant_opts *o) {
    o->vbit_mean_bits = CMF_VBIT_DEFAULT_MEAN;
    o->row_weights = NULL;
    o->outlier_frac = 0.01;
}

cmf_status q_alloc_out(size_t len, uint8_t **out, size_t *out_len, cmf_err *err) {
    *out = calloc(len ? len : 1, 1);
    if (!*out)
        return cmf_err_set(err, CMF_E_NOMEM, NULL, "cannot allocate %zu bytes for a payload", len);
    *out_len = len;
    return CMF_OK;
}

cmf_status q_size(uint64_t v, size_t *out, cmf_err *err) {
    if (v > (uint64_t)SIZE_MAX)
        return cmf_err_set(err, CMF_E_NOMEM, NULL,
                           "payload of %llu bytes exceeds the address space",
                           (unsigned long long)v);
    *out = (size_t)v;
    return CMF_OK;
}

bool cmf_quant_rows(unsigned ndim, const uint64_t *shape, uint64_t *rows, uint64_t *row_len) {
    uint64_t n;
    if (ndim > CMF_MAX_DIMS || (ndim && !shape) || !cmf_shape_numel(ndim, shape, &n)) return false;
    uint64_t cols = ndim ? shape[ndim - 1] : 1;
    *rows = n / cols;
    *row_len = cols;
    return true;
}

/* Build the view of a shape for dtype dt; `code` is the status for a shape the dtype cannot hold
 * (CMF_E_UNSUPPORTED when encoding, CMF_E_PARSE when reading a file). */
static cmf_status make_shape(cmf_dtype dt, unsigned ndim, const uint64_t *shape, qshape *qs,
                             cmf_status code, const char *ctx, cmf_err *err) {
    const cmf_dtype_traits *t = cmf_dtype_get((unsigned)dt);
    if (!t || t->kind == CMF_DTK_UNKNOWN)
        return cmf_err_set(err, code, ctx, "unknown dtype id %u", (unsigned)dt);
    if (t->kind == CMF_DTK_RESERVED)
        return cmf_err_set(err, code, ctx, "dtype %u (%s) is reserved in CMF v2", (unsigned)dt,
                           t->name);
    if (ndim > CMF_MAX_DIMS) return cmf_err_set(err, code, ctx, "ndim=%u > %d", ndim, CMF_MAX_DIMS);
    if (ndim && !shape) return cmf_err_set(err, CMF_E_INVALID_ARG, ctx, "shape is NULL");
    memset(qs, 0, sizeof *qs);
    qs->dt = dt;
    qs->ndim = ndim;
    qs->shape = shape;
    if (!cmf_quant_rows(ndim, shape, &qs->rows, &qs->cols))
        return cmf_err_set(err, code, ctx,
                           "shape has a zero dimension or its element count overflows");
    qs->n = qs->rows * qs->cols;
    if (t->matrix_only && ndim != 2)
        return cmf_err_set(err, code, ctx, "dtype %s holds 2-D tensors only, got ndim=%u", t->name,
                           ndim);
    if (t->needs_in_mult32 && qs->cols % 32 != 0)
        return cmf_err_set(err, code, ctx, "dtype %s needs in %% 32 == 0, got in=%llu", t->name,
                           (unsigned long long)qs->cols);
    if (t->max_in && qs->cols > t->max_in)
        return cmf_err_set(err, code, ctx,
                           "dtype %s needs in <= %u (u16 column index), got in=%llu", t->name,
                           (unsigned)t->max_in, (unsigned long long)qs->cols);
    qs->gpr = qs->cols / 32;
    return CMF_OK;
}

cmf_dtype cmf_quant_policy_dtype(cmf_dtype wanted, unsigned ndim, const uint64_t *shape) {
    const cmf_dtype_traits *t = cmf_dtype_get((unsigned)wanted);
    if (!t || t->kind == CMF_DTK_UNKNOWN || t->kind == CMF_DTK_RESERVED) return wanted;
    uint64_t n;
    if (ndim > CMF_MAX_DIMS || (ndim && !shape) || !cmf_shape_numel(ndim, shape, &n)) return wanted;
    if (ndim <= 1 || n < 32) return CMF_DT_F16;
    qshape qs;
    if (make_shape(wanted, ndim, shape, &qs, CMF_E_UNSUPPORTED, NULL, NULL) != CMF_OK)
        return CMF_DT_F16;
    uint64_t max_numel = cq_dtype_ops_get(wanted)->max_numel;
    if (max_numel && qs.n > max_numel) return CMF_DT_F16; /* q1s: u32 flat indices */
    return wanted;
}

cmf_status cmf_quant_encode(cmf_dtype dt, unsigned ndim, const uint64_t *shape, const float *src,
                            const cmf_quant_opts *opts, uint8_t **out, size_t *out_len,
                            cmf_err *err) {
    if (!out || !out_len) return cmf_err_set(err, CMF_E_INVALID_ARG, NULL, "out/out_len is NULL");
    *out = NULL;
    *out_len = 0;
    cmf_quant_opts defaults;
    cmf_quant_opts_default(&defaults);
    if (!opts) opts = &defaults;
    qshape qs;
    cmf_status st = make_shape(dt, ndim, shape, &qs, CMF_E_UNSUPPORTED, "encode", err);
    if (st != CMF_OK) return st;
    if (!src) return cmf_err_set(err, CMF_E_INVALID_ARG, "encode", "src is NULL");
    const cq_dtype_ops *ops = cq_dtype_ops_get(dt);
    if (ops->quantized) {
        for (uint64_t i = 0; i < qs.n; i++)
            if (!isfinite(src[i]))
                return cmf_err_set(err, CMF_E_UNSUPPORTED, "encode",
                                   "weight %llu is not finite; %s cannot quantize NaN/inf",
                                   (unsigned long long)i, cmf_dtype_name((unsigned)dt));
    }
    if (!(opts->outlier_frac >= 0.0 && opts->outlier_frac <= 1.0))
        return cmf_err_set(err, CMF_E_INVALID_ARG, "encode", "outlier_frac=%g is outside [0, 1]",
                           opts->outlier_frac);
    return ops->encode(&qs, src, opts, out, out_len, err);
}

static const char *ctx_or(const char *ctx) {
    return ctx ? ctx : "tensor";
}

/* Size rule of a fixed dtype: nbytes must be exact. */
static cmf_status check_fixed(cmf_dtype dt, const qshape *qs, uint64_t nbytes, const char *ctx,
                              cmf_err *err) {
    uint64_t want;
    cmf_status st = cmf_dtype_nbytes((unsigned)dt, qs->ndim, qs->shape, &want, NULL, ctx, err);
    if (st != CMF_OK) return st;
    if (nbytes != want)
        return cmf_err_set(
            err, CMF_E_PARSE, ctx, "%s payload is %llu bytes, shape needs exactly %llu",
            cmf_dtype_name((unsigned)dt), (unsigned long long)nbytes, (unsigned long long)want);
    return CMF_OK;
}

cmf_status cmf_quant_validate(cmf_dtype dt, unsigned ndim, const uint64_t *shape,
                              const uint8_t *data, uint64_t nbytes, const char *ctx, cmf_err *err) {
    ctx = ctx_or(ctx);
    qshape qs;
    cmf_status st = make_shape(dt, ndim, shape, &qs, CMF_E_PARSE, ctx, err);
    if (st != CMF_OK) return st;
    if (!data && nbytes) return cmf_err_set(err, CMF_E_INVALID_ARG, ctx, "data is NULL");
    const cq_dtype_ops *ops = cq_dtype_ops_get(dt);
    return ops->validate ? ops->validate(&qs, data, nbytes, ctx, err)
                         : check_fixed(dt, &qs, nbytes, ctx, err);
}

/* Row decode after the shape view is built and row checked. */
static cmf_status row_decode(cmf_dtype dt, const qshape *qs, const uint8_t *data, uint64_t nbytes,
                             uint64_t row, float *out, bool size_checked, const char *ctx,
                             cmf_err *err) {
    const cq_dtype_ops *ops = cq_dtype_ops_get(dt);
    if (ops->decode_row_checked)
        return ops->decode_row_checked(qs, data, nbytes, row, out, ctx, err);
    if (!size_checked) {
        cmf_status st = check_fixed(dt, qs, nbytes, ctx, err);
        if (st != CMF_OK) return st;
    }
    ops->decode_row(qs, data, row, out);
    return CMF_OK;
}

cmf_status cmf_quant_dequant_row(cmf_dtype dt, unsigned ndim, const uint64_t *shape,
                                 const uint8_t *data, uint64_t nbytes, uint64_t row, float *out,
                                 cmf_err *err) {
    const char *ctx = "tensor";
    qshape qs;
    cmf_status st = make_shape(dt, ndim, shape, &qs, CMF_E_PARSE, ctx, err);
    if (st != CMF_OK) return st;
    if ((!data && nbytes) || !out)
        return cmf_err_set(err, CMF_E_INVALID_ARG, ctx, "data/out is NULL");
    if (row >= qs.rows)
        return cmf_err_set(err, CMF_E_INVALID_ARG, ctx, "row %llu out of range (%llu rows)",
                           (unsigned long long)row, (unsigned long long)qs.rows);
    return row_decode(dt, &qs, data, nbytes, row, out, false, ctx, err);
}

cmf_status cmf_quant_dequant(cmf_dtype dt, unsigned ndim, const uint64_t *shape,
                             const uint8_t *data, uint64_t nbytes, float *out, cmf_err *err) {
    const char *ctx = "tensor";
    if (!out) return cmf_err_set(err, CMF_E_INVALID_ARG, ctx, "out is NULL");
    cmf_status st = cmf_quant_validate(dt, ndim, shape, data, nbytes, ctx, err);
    if (st != CMF_OK) return st;
    qshape qs;
    st = make_shape(dt, ndim, shape, &qs, CMF_E_PARSE, ctx, err);
    if (st != CMF_OK) return st;
    const cq_dtype_ops *ops = cq_dtype_ops_get(dt);
    if (ops->decode_all) {
        ops->decode_all(&qs, data, out);
        return CMF_OK;
    }
    for (uint64_t r = 0; r < qs.rows; r++) {
        st = row_decode(dt, &qs, data, nbytes, r, out + r * qs.cols, true, ctx, err);
        if (st != CMF_OK) return st;
    }
    return CMF_OK;
}
