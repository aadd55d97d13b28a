/* codec_vbit.c - vbit and vbit_ro, spec §3.2:
 *   vbit     [u8 bits: rows][f16 scales: rows*in/32][packed rows]
 *   vbit_ro  [u8 bits: rows][f16 scales: rows*in/32][u32 offsets: rows+1][packed rows]
 * A row of b bits holds `in` codes u in [0, 2^b - 1], MSB-first, padded to a byte;
 * w = (u - L) * scale[r, g], L = 2^(b-1) - 1, b in {3,4,5,6,8}.
 * vbit_ro offsets are relative to the packed area; our reading: offsets[0] = 0 and each row's
 * span is exactly its packed size (the packed area is byte-identical to vbit's). */
#include <stdlib.h>

#include "common/bytes.h"
#include "common/checked.h"
#include "quant/quant_internal.h"

static bool valid_bits(unsigned b) {
    return b == 3 || b == 4 || b == 5 || b == 6 || b == 8;
}

/* Bytes before the packed area. */
static uint64_t vbit_header(bool ro, const qshape *s) {
    return s->rows + s->rows * s->gpr * 2 + (ro ? (s->rows + 1) * 4 : 0);
}

static void put_bits(uint8_t *row, uint64_t pos, unsigned bits, unsigned v) {
    for (unsigned k = 0; k < bits; k++, pos++)
        if (v >> (bits - 1 - k) & 1u) row[pos / 8] |= (uint8_t)(0x80u >> (pos % 8));
}

static unsigned get_bits(const uint8_t *row, uint64_t pos, unsigned bits) {
    unsigned v = 0;
    for (unsigned k = 0; k < bits; k++, pos++)
        v = v << 1 | (row[pos / 8] >> (7 - pos % 8) & 1u);
    return v;
}

/* Smallest scale whose code range [-L, L+1] covers the group: the positive side has one more
 * level, so max(pos_max/(L+1), neg_max/L) (absmax/L when the largest magnitude is negative). */
static float vbit_scale(const float *w, int L) {
    float pos = 0.0f, neg = 0.0f;
    for (unsigned j = 0; j < 32; j++) {
        if (w[j] > pos) pos = w[j];
        if (-w[j] > neg) neg = -w[j];
    }
    float a = pos / (float)(L + 1), b = neg / (float)L;
    return a > b ? a : b;
}

cmf_status cmf_vbit_encode(cmf_dtype dt, uint64_t rows, uint64_t in, const float *src,
                           const uint8_t *bits, uint8_t **out, size_t *out_len, cmf_err *err) {
    if (!out || !out_len || !src || !bits)
        return cmf_err_set(err, CMF_E_INVALID_ARG, "encode", "NULL argument");
    *out = NULL;
    *out_len = 0;
    if (dt != CMF_DT_VBIT && dt != CMF_DT_VBIT_RO)
        return cmf_err_set(err, CMF_E_INVALID_ARG, "encode",
                           "cmf_vbit_encode needs vbit or vbit_ro, got %s",
                           cmf_dtype_name((unsigned)dt));
    uint64_t shape[2] = {rows, in}, n;
    if (!cmf_shape_numel(2, shape, &n) || in % 32)
        return cmf_err_set(err, CMF_E_UNSUPPORTED, "encode",
                           "%s needs rows, in > 0 and in %% 32 == 0, got %llux%llu",
                           cmf_dtype_name((unsigned)dt), (unsigned long long)rows,
                           (unsigned long long)in);
    qshape s = {
        .dt = dt, .ndim = 2, .shape = shape, .n = n, .rows = rows, .cols = in, .gpr = in / 32};
    bool ro = dt == CMF_DT_VBIT_RO;
    uint64_t packed = 0;
    for (uint64_t r = 0; r < rows; r++) {
        if (!valid_bits(bits[r]))
            return cmf_err_set(err, CMF_E_INVALID_ARG, "encode",
                               "row %llu: bit width %u not in {3,4,5,6,8}", (unsigned long long)r,
                               bits[r]);
        packed += cmf_vbit_row_bytes(bits[r], in);
    }
    for (uint64_t i = 0; i < n; i++)
        if (!isfinite(src[i]))
            return cmf_err_set(err, CMF_E_UNSUPPORTED, "encode", "weight %llu is not finite",
                               (unsigned long long)i);
    uint64_t hdr = vbit_header(ro, &s);
    size_t len;
    cmf_status st = q_size(hdr + packed, &len, err);
    if (st == CMF_OK) st = q_alloc_out(len, out, out_len, err);
    if (st != CMF_OK) return st;
    uint8_t *scales = *out + rows, *offsets = scales + rows * s.gpr * 2, *area = *out + hdr;
    uint64_t off = 0;
    for (uint64_t r = 0; r < rows; r++) {
        unsigned b = bits[r];
        int L = (1 << (b - 1)) - 1;
        (*out)[r] = (uint8_t)b;
        if (ro) st_u32(offsets + 4 * r, (uint32_t)off);
        for (uint64_t g = 0; g < s.gpr; g++) {
            const float *w = src + r * in + g * 32;
            uint16_t h = q_scale_f16(vbit_scale(w, L));
            st_u16(scales + 2 * (r * s.gpr + g), h);
            float sc = f16_to_f32(h);
            for (unsigned j = 0; j < 32; j++)
                put_bits(area + off, (g * 32 + j) * b, b,
                         (unsigned)(q_code(w[j], sc, -L, L + 1) + L));
        }
        off += cmf_vbit_row_bytes(b, in);
    }
    if (ro) {
        if (off > UINT32_MAX) {
            free(*out);
            *out = NULL;
            *out_len = 0;
            return cmf_err_set(err, CMF_E_UNSUPPORTED, "encode",
                               "vbit_ro packed area of %llu bytes exceeds u32 offsets",
                               (unsigned long long)off);
        }
        st_u32(offsets + 4 * rows, (uint32_t)off);
    }
    return CMF_OK;
}

static void decode_row(const qshape *s, const uint8_t *d, unsigned b, uint64_t row,
                       const uint8_t *packed, float *out) {
    const uint8_t *scales = d + s->rows + row * s->gpr * 2;
    int L = (1 << (b - 1)) - 1;
    for (uint64_t g = 0; g < s->gpr; g++) {
        float sc = f16_to_f32(ld_u16(scales + 2 * g));
        for (unsigned j = 0; j < 32; j++)
            out[g * 32 + j] = (float)((int)get_bits(packed, (g * 32 + j) * b, b) - L) * sc;
    }
}

static cmf_status check_header(bool ro, const qshape *s, uint64_t nbytes, uint64_t *hdr,
                               const char *ctx, cmf_err *err) {
    const char *name = ro ? "vbit_ro" : "vbit";
    uint64_t h = 0, t;
    if (!ck_mul_u64(s->rows, s->gpr * 2, &t) || !ck_add_u64(s->rows, t, &h) ||
        (ro && (!ck_mul_u64(s->rows + 1, 4, &t) || !ck_add_u64(h, t, &h))) || nbytes < h)
        return cmf_err_set(err, CMF_E_PARSE, ctx,
                           "%s payload is %llu bytes, its bits/scales%s need %llu", name,
                           (unsigned long long)nbytes, ro ? "/offsets" : "", (unsigned long long)h);
    *hdr = h;
    return CMF_OK;
}

static cmf_status check_bits(const uint8_t *d, uint64_t row, const char *ctx, cmf_err *err) {
    if (!valid_bits(d[row]))
        return cmf_err_set(err, CMF_E_PARSE, ctx, "vbit row %llu: bit width %u not in {3,4,5,6,8}",
                           (unsigned long long)row, d[row]);
    return CMF_OK;
}

cmf_status qc_vbit_validate(const qshape *s, const uint8_t *d, uint64_t nbytes, const char *ctx,
                            cmf_err *err) {
    const bool ro = s->dt == CMF_DT_VBIT_RO;
    uint64_t hdr = 0, off = 0;
    cmf_status st = check_header(ro, s, nbytes, &hdr, ctx, err);
    if (st != CMF_OK) return st;
    const uint8_t *offsets = d + s->rows + s->rows * s->gpr * 2;
    for (uint64_t r = 0; r < s->rows; r++) {
        if ((st = check_bits(d, r, ctx, err)) != CMF_OK) return st;
        if (ro && ld_u32(offsets + 4 * r) != off)
            return cmf_err_set(err, CMF_E_PARSE, ctx,
                               "vbit_ro offsets[%llu]=%u, rows before it pack to %llu bytes",
                               (unsigned long long)r, ld_u32(offsets + 4 * r),
                               (unsigned long long)off);
        off += cmf_vbit_row_bytes(d[r], s->cols);
    }
    if (ro && ld_u32(offsets + 4 * s->rows) != off)
        return cmf_err_set(err, CMF_E_PARSE, ctx,
                           "vbit_ro offsets[rows]=%u, rows pack to %llu bytes",
                           ld_u32(offsets + 4 * s->rows), (unsigned long long)off);
    if (nbytes - hdr != off)
        return cmf_err_set(
            err, CMF_E_PARSE, ctx, "%s packed area is %llu bytes, bit widths need exactly %llu",
            ro ? "vbit_ro" : "vbit", (unsigned long long)(nbytes - hdr), (unsigned long long)off);
    return CMF_OK;
}

cmf_status qc_vbit_row(const qshape *s, const uint8_t *d, uint64_t nbytes, uint64_t row, float *out,
                       const char *ctx, cmf_err *err) {
    const bool ro = s->dt == CMF_DT_VBIT_RO;
    uint64_t hdr = 0, off = 0;
    cmf_status st = check_header(ro, s, nbytes, &hdr, ctx, err);
    if (st != CMF_OK) return st;
    if ((st = check_bits(d, row, ctx, err)) != CMF_OK) return st;
    uint64_t rb = cmf_vbit_row_bytes(d[row], s->cols), area = nbytes - hdr;
    if (ro) {
        const uint8_t *offsets = d + s->rows + s->rows * s->gpr * 2;
        uint64_t end = ld_u32(offsets + 4 * (row + 1));
        off = ld_u32(offsets + 4 * row);
        if (end < off || end - off != rb || end > area)
            return cmf_err_set(
                err, CMF_E_PARSE, ctx,
                "vbit_ro row %llu: offsets [%llu, %llu) are not its %llu packed bytes within %llu",
                (unsigned long long)row, (unsigned long long)off, (unsigned long long)end,
                (unsigned long long)rb, (unsigned long long)area);
    } else {
        for (uint64_t r = 0; r < row; r++) {
            if ((st = check_bits(d, r, ctx, err)) != CMF_OK) return st;
            off += cmf_vbit_row_bytes(d[r], s->cols);
        }
        if (!ck_span_within(off, rb, area))
            return cmf_err_set(err, CMF_E_PARSE, ctx,
                               "vbit row %llu: packed bytes [%llu, +%llu) past the %llu-byte area",
                               (unsigned long long)row, (unsigned long long)off,
                               (unsigned long long)rb, (unsigned long long)area);
    }
    decode_row(s, d, d[row], row, d + hdr + off, out);
    return CMF_OK;
}

void qc_vbit_all(const qshape *s, const uint8_t *d, float *out) {
    const bool ro = s->dt == CMF_DT_VBIT_RO;
    const uint8_t *packed = d + vbit_header(ro, s);
    for (uint64_t r = 0; r < s->rows; r++) {
        decode_row(s, d, d[r], r, packed, out + r * s->cols);
        packed += cmf_vbit_row_bytes(d[r], s->cols);
    }
}

cmf_status qc_vbit_encode(const qshape *s, const float *src, const cmf_quant_opts *o, uint8_t **out,
                          size_t *len, cmf_err *err) {
    if (s->rows > (uint64_t)SIZE_MAX)
        return cmf_err_set(err, CMF_E_NOMEM, "encode", "too many rows (%llu)",
                           (unsigned long long)s->rows);
    uint8_t *bits = malloc((size_t)s->rows);
    if (!bits)
        return cmf_err_set(err, CMF_E_NOMEM, "encode", "cannot allocate the vbit bit vector");
    cmf_status st =
        cmf_vbit_allocate(s->rows, s->cols, src, o->row_weights, o->vbit_mean_bits, bits, err);
    if (st == CMF_OK) st = cmf_vbit_encode(s->dt, s->rows, s->cols, src, bits, out, len, err);
    free(bits);
    return st;
}
