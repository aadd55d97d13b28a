/* codec_q1.c - q1 (per 32-group [f16 scale][4B sign bits], 6-byte tiles) and q1s (the same tiles
 * followed by [u32 count] and count x {[u32 flat-index][f16 value]}), spec §3.2.
 * Bit k of byte j (LSB-first) is weight j*8+k of the group: 1 -> +scale, 0 -> -scale.
 * Encoders set the bit for w >= 0 (so 0.0 and -0.0 read back as +scale). */
#include <stdlib.h>
#include <string.h>

#include "common/bytes.h"
#include "common/checked.h"
#include "quant/quant_internal.h"

void q1_tile_encode(const float *w, const bool *skip, uint8_t tile[6]) {
    double sum = 0.0;
    unsigned cnt = 0;
    for (unsigned j = 0; j < 32; j++)
        if (!skip || !skip[j]) {
            sum += fabs((double)w[j]);
            cnt++;
        }
    st_u16(tile, q_scale_f16(cnt ? (float)(sum / cnt) : 0.0f));
    for (unsigned b = 0; b < 4; b++)
        tile[2 + b] = 0;
    for (unsigned j = 0; j < 32; j++)
        if (w[j] >= 0.0f) tile[2 + j / 8] |= (uint8_t)(1u << (j % 8));
}

void q1_tile_decode(const uint8_t tile[6], float *out) {
    float s = f16_to_f32(ld_u16(tile));
    for (unsigned j = 0; j < 32; j++)
        out[j] = (tile[2 + j / 8] >> (j % 8) & 1u) ? s : -s;
}

cmf_status qc_q1_encode(const qshape *s, const float *src, const cmf_quant_opts *o, uint8_t **out,
                        size_t *len, cmf_err *err) {
    (void)o;
    size_t n;
    cmf_status st = q_size(s->rows * s->gpr * 6, &n, err);
    if (st == CMF_OK) st = q_alloc_out(n, out, len, err);
    if (st != CMF_OK) return st;
    for (uint64_t t = 0; t < s->rows * s->gpr; t++)
        q1_tile_encode(src + t * 32, NULL, *out + t * 6);
    return CMF_OK;
}

void qc_q1_row(const qshape *s, const uint8_t *d, uint64_t row, float *out) {
    for (uint64_t g = 0; g < s->gpr; g++)
        q1_tile_decode(d + (row * s->gpr + g) * 6, out + g * 32);
}

/* ---- q1s ---- */

static void q1_tile_encode_cb(const float *w, const bool *skip, uint8_t *tile) {
    q1_tile_encode(w, skip, tile);
}
static void q1_tile_decode_cb(const uint8_t *tile, float *out) {
    q1_tile_decode(tile, out);
}

cmf_status qc_q1s_encode(const qshape *s, const float *src, const cmf_quant_opts *o, uint8_t **out,
                         size_t *len, cmf_err *err) {
    const double frac = o->outlier_frac;
    if (s->n > UINT32_MAX)
        return cmf_err_set(err, CMF_E_UNSUPPORTED, "encode",
                           "q1s flat indices are u32; tensor has %llu weights",
                           (unsigned long long)s->n);
    static const q_tile_codec codec = {6, q1_tile_encode_cb, q1_tile_decode_cb};
    uint64_t base = s->rows * s->gpr * 6, k = q_outlier_budget(frac, s->n), count = 0;
    uint8_t *tiles = malloc(base);
    bool *skip = calloc(s->n, 1);
    uint64_t *idx = malloc((k ? k : 1) * sizeof *idx);
    cmf_status st = CMF_OK;
    size_t n;
    if (!tiles || !skip || !idx) {
        st = cmf_err_set(err, CMF_E_NOMEM, "encode", "cannot allocate q1s scratch");
        goto done;
    }
    st = q_overlay_encode(&codec, src, s->n, k, tiles, skip, idx, &count, err);
    if (st == CMF_OK) st = q_size(base + 4 + count * 6, &n, err);
    if (st == CMF_OK) st = q_alloc_out(n, out, len, err);
    if (st != CMF_OK) goto done;
    memcpy(*out, tiles, base);
    uint8_t *p = *out + base;
    st_u32(p, (uint32_t)count);
    for (uint64_t i = 0; i < count; i++) {
        st_u32(p + 4 + 6 * i, (uint32_t)idx[i]);
        st_u16(p + 8 + 6 * i, f32_to_f16(q_clamp_f16_range(src[idx[i]])));
    }
done:
    free(tiles);
    free(skip);
    free(idx);
    return st;
}

/* Overlay count checked against the span: base + 4 + count*6 == nbytes. */
static cmf_status q1s_overlay(const qshape *s, const uint8_t *d, uint64_t nbytes, uint32_t *count,
                              const char *ctx, cmf_err *err) {
    uint64_t base = s->rows * s->gpr * 6, need;
    if (!ck_add_u64(base, 4, &need) || nbytes < need)
        return cmf_err_set(err, CMF_E_PARSE, ctx,
                           "q1s payload is %llu bytes, base tiles + count need %llu",
                           (unsigned long long)nbytes, (unsigned long long)need);
    *count = ld_u32(d + base);
    if ((nbytes - need) / 6 != *count || (nbytes - need) % 6 != 0)
        return cmf_err_set(err, CMF_E_PARSE, ctx,
                           "q1s overlay count=%u needs %llu bytes after the base, span has %llu",
                           *count, (unsigned long long)*count * 6,
                           (unsigned long long)(nbytes - need));
    return CMF_OK;
}

cmf_status qc_q1s_validate(const qshape *s, const uint8_t *d, uint64_t nbytes, const char *ctx,
                           cmf_err *err) {
    uint32_t count = 0;
    cmf_status st = q1s_overlay(s, d, nbytes, &count, ctx, err);
    if (st != CMF_OK) return st;
    const uint8_t *p = d + s->rows * s->gpr * 6 + 4;
    for (uint32_t i = 0; i < count; i++) {
        uint32_t idx = ld_u32(p + 6 * (uint64_t)i);
        if (idx >= s->n)
            return cmf_err_set(err, CMF_E_PARSE, ctx,
                               "q1s overlay entry %u: flat index %u >= numel %llu", i, idx,
                               (unsigned long long)s->n);
    }
    return CMF_OK;
}

cmf_status qc_q1s_row(const qshape *s, const uint8_t *d, uint64_t nbytes, uint64_t row, float *out,
                      const char *ctx, cmf_err *err) {
    uint32_t count = 0;
    cmf_status st = q1s_overlay(s, d, nbytes, &count, ctx, err);
    if (st != CMF_OK) return st;
    qc_q1_row(s, d, row, out);
    const uint8_t *p = d + s->rows * s->gpr * 6 + 4;
    uint64_t first = row * s->cols;
    for (uint32_t i = 0; i < count; i++) {
        uint32_t idx = ld_u32(p + 6 * (uint64_t)i);
        if (idx >= s->n)
            return cmf_err_set(err, CMF_E_PARSE, ctx,
                               "q1s overlay entry %u: flat index %u >= numel %llu", i, idx,
                               (unsigned long long)s->n);
        if (idx >= first && idx - first < s->cols)
            out[idx - first] = f16_to_f32(ld_u16(p + 6 * (uint64_t)i + 4));
    }
    return CMF_OK;
}

void qc_q1s_all(const qshape *s, const uint8_t *d, float *out) {
    for (uint64_t r = 0; r < s->rows; r++)
        qc_q1_row(s, d, r, out + r * s->cols);
    const uint8_t *p = d + s->rows * s->gpr * 6;
    uint32_t count = ld_u32(p);
    for (uint32_t i = 0; i < count; i++)
        out[ld_u32(p + 4 + 6 * (uint64_t)i)] = f16_to_f32(ld_u16(p + 8 + 6 * (uint64_t)i));
}
