/* codec_float.c - f32, f16 and bf16 payloads: little-endian element arrays (spec §3.1).
 * f16/bf16 round to nearest even; NaN and inf are carried through. */
#include "common/bytes.h"
#include "quant/quant_internal.h"

static unsigned elem_size(cmf_dtype dt) {
    return dt == CMF_DT_F32 ? 4u : 2u;
}

cmf_status qc_float_encode(const qshape *s, const float *src, const cmf_quant_opts *o,
                           uint8_t **out, size_t *len, cmf_err *err) {
    (void)o;
    const cmf_dtype dt = s->dt;
    size_t n;
    cmf_status st = q_size(s->n * elem_size(dt), &n, err);
    if (st != CMF_OK) return st;
    st = q_alloc_out(n, out, len, err);
    if (st != CMF_OK) return st;
    uint8_t *p = *out;
    for (uint64_t i = 0; i < s->n; i++) {
        if (dt == CMF_DT_F32)
            st_u32(p + 4 * i, f32_bits(src[i]));
        else if (dt == CMF_DT_F16)
            st_u16(p + 2 * i, f32_to_f16(src[i]));
        else
            st_u16(p + 2 * i, f32_to_bf16(src[i]));
    }
    return CMF_OK;
}

void qc_float_row(const qshape *s, const uint8_t *d, uint64_t row, float *out) {
    const cmf_dtype dt = s->dt;
    const uint8_t *p = d + row * s->cols * elem_size(dt);
    for (uint64_t i = 0; i < s->cols; i++) {
        if (dt == CMF_DT_F32)
            out[i] = f32_from_bits(ld_u32(p + 4 * i));
        else if (dt == CMF_DT_F16)
            out[i] = f16_to_f32(ld_u16(p + 2 * i));
        else
            out[i] = bf16_to_f32(ld_u16(p + 2 * i));
    }
}
