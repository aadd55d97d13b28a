/* codec_q8.c - q8_row `[int8: out*in][f16 scale: out]` and q8_2f
 * `[int8: out*in][f16 row-scale: out][f16 col-field: in]` (spec §3.2). */
#include <stdlib.h>

#include "common/bytes.h"
#include "quant/quant_internal.h"

/* Quantize one row against per-element divisors scale*col[i] (col NULL = 1), int8 in [-127, 127].
 */
static void q8_quant_row(const float *w, uint64_t in, float scale, const float *col, uint8_t *q) {
    for (uint64_t i = 0; i < in; i++) {
        float div = col ? scale * col[i] : scale;
        q[i] = (uint8_t)(int8_t)q_code(w[i], div, -127, 127);
    }
}

cmf_status qc_q8_row_encode(const qshape *s, const float *src, const cmf_quant_opts *o,
                            uint8_t **out, size_t *len, cmf_err *err) {
    (void)o;
    size_t n;
    cmf_status st = q_size(s->n + 2 * s->rows, &n, err);
    if (st == CMF_OK) st = q_alloc_out(n, out, len, err);
    if (st != CMF_OK) return st;
    uint8_t *scales = *out + s->n;
    for (uint64_t r = 0; r < s->rows; r++) {
        const float *w = src + r * s->cols;
        uint16_t h = q_scale_f16(q_absmax(w, s->cols) / 127.0f);
        st_u16(scales + 2 * r, h);
        q8_quant_row(w, s->cols, f16_to_f32(h), NULL, *out + r * s->cols);
    }
    return CMF_OK;
}

void qc_q8_row_row(const qshape *s, const uint8_t *d, uint64_t row, float *out) {
    const uint8_t *q = d + row * s->cols;
    float scale = f16_to_f32(ld_u16(d + s->n + 2 * row));
    for (uint64_t i = 0; i < s->cols; i++)
        out[i] = (float)(int8_t)q[i] * scale;
}

/* Column field: per-column absmax divided by the geometric mean of the non-zero ones, so the
 * field sits near 1 (full f16 precision) and the row scale carries the magnitude. */
static void q8_2f_col_field(const qshape *s, const float *src, float *col) {
    for (uint64_t i = 0; i < s->cols; i++)
        col[i] = 0.0f;
    for (uint64_t r = 0; r < s->rows; r++)
        for (uint64_t i = 0; i < s->cols; i++) {
            float a = fabsf(src[r * s->cols + i]);
            if (a > col[i]) col[i] = a;
        }
    double log_sum = 0.0;
    uint64_t nz = 0;
    for (uint64_t i = 0; i < s->cols; i++)
        if (col[i] > 0.0f) {
            log_sum += log2((double)col[i]);
            nz++;
        }
    float g = nz ? (float)exp2(log_sum / (double)nz) : 1.0f;
    for (uint64_t i = 0; i < s->cols; i++)
        col[i] = f16_to_f32(q_scale_f16(col[i] / g));
}

cmf_status qc_q8_2f_encode(const qshape *s, const float *src, const cmf_quant_opts *o,
                           uint8_t **out, size_t *len, cmf_err *err) {
    (void)o;
    size_t n;
    cmf_status st = q_size(s->n + 2 * s->rows + 2 * s->cols, &n, err);
    if (st != CMF_OK) return st;
    float *col = malloc(s->cols * sizeof *col);
    if (!col)
        return cmf_err_set(err, CMF_E_NOMEM, "encode", "cannot allocate the q8_2f column field");
    st = q_alloc_out(n, out, len, err);
    if (st != CMF_OK) {
        free(col);
        return st;
    }
    q8_2f_col_field(s, src, col);
    uint8_t *scales = *out + s->n, *cols = scales + 2 * s->rows;
    for (uint64_t i = 0; i < s->cols; i++)
        st_u16(cols + 2 * i, f32_to_f16(col[i]));
    for (uint64_t r = 0; r < s->rows; r++) {
        const float *w = src + r * s->cols;
        float m = 0.0f;
        for (uint64_t i = 0; i < s->cols; i++)
            if (col[i] > 0.0f && fabsf(w[i]) / col[i] > m) m = fabsf(w[i]) / col[i];
        uint16_t h = q_scale_f16(m / 127.0f);
        st_u16(scales + 2 * r, h);
        q8_quant_row(w, s->cols, f16_to_f32(h), col, *out + r * s->cols);
    }
    free(col);
    return CMF_OK;
}

void qc_q8_2f_row(const qshape *s, const uint8_t *d, uint64_t row, float *out) {
    const uint8_t *q = d + row * s->cols, *cols = d + s->n + 2 * s->rows;
    float scale = f16_to_f32(ld_u16(d + s->n + 2 * row));
    for (uint64_t i = 0; i < s->cols; i++)
        out[i] = (float)(int8_t)q[i] * scale * f16_to_f32(ld_u16(cols + 2 * i));
}
