/* codec_q1t.c - q1t, spec §3.2: per 32-group [f16 scale][7B base-3 codes] (9-byte tiles), then
 * [u32 row_ptr[rows+1]] and row_ptr[rows] x {[u16 col][f16 value]} entries grouped by row.
 * Our reading of the digit order: weight 5*j+i of a group is base-3 digit i of code byte j, least
 * significant digit first (byte = d0 + 3*d1 + 9*d2 + 27*d3 + 81*d4); the last byte holds weights
 * 30 and 31 and three zero digits. Digit 0 -> 0, 1 -> +scale, 2 -> -scale. */
#include <stdlib.h>
#include <string.h>

#include "common/bytes.h"
#include "common/checked.h"
#include "quant/quant_internal.h"

#define Q1T_TILE 9u

bool cmf_q1t_unpack_byte(uint8_t byte, uint8_t digits[5]) {
    if (byte > 242) return false;
    unsigned v = byte;
    for (unsigned i = 0; i < 5; i++) {
        digits[i] = (uint8_t)(v % 3);
        v /= 3;
    }
    return true;
}

/* Descending insertion sort: faster than qsort for 32 values. */
static void sort_desc(float *a, unsigned n) {
    for (unsigned i = 1; i < n; i++) {
        float v = a[i];
        unsigned j = i;
        while (j > 0 && a[j - 1] < v) {
            a[j] = a[j - 1];
            j--;
        }
        a[j] = v;
    }
}

/* One tile from 32 weights, ignoring those with skip[j] (coded 0). The support size m is chosen
 * to minimise the L2 error with the optimal level (mean of the m largest |w|); that level is
 * rounded to f16 and every weight is then coded against the rounded level (nonzero iff
 * |w| > s/2, the error-minimising threshold for that s). */
static void q1t_tile_encode(const float *w, const bool *skip, uint8_t *tile) {
    float a[32];
    unsigned cnt = 0;
    for (unsigned j = 0; j < 32; j++)
        if (!skip || !skip[j]) a[cnt++] = fabsf(w[j]);
    sort_desc(a, cnt);
    double prefix = 0.0, best_score = 0.0;
    float level = 0.0f;
    for (unsigned m = 1; m <= cnt; m++) {
        prefix += a[m - 1];
        double score = prefix * prefix / m; /* error = sum(a^2) - score */
        if (score > best_score) {
            best_score = score;
            level = (float)(prefix / m);
        }
    }
    uint16_t h = q_scale_f16(level);
    float s = f16_to_f32(h);
    st_u16(tile, h);
    static const uint8_t pow3[5] = {1, 3, 9, 27, 81};
    for (unsigned b = 0; b < 7; b++)
        tile[2 + b] = 0;
    for (unsigned j = 0; j < 32; j++) {
        unsigned digit = 0;
        if ((!skip || !skip[j]) && s > 0.0f && fabsf(w[j]) > 0.5f * s)
            digit = w[j] > 0.0f ? 1u : 2u;
        tile[2 + j / 5] = (uint8_t)(tile[2 + j / 5] + digit * pow3[j % 5]);
    }
}

static void q1t_tile_decode(const uint8_t *tile, float *out) {
    float s = f16_to_f32(ld_u16(tile));
    for (unsigned b = 0; b < 7; b++) {
        uint8_t dg[5] = {0, 0, 0, 0, 0};
        cmf_q1t_unpack_byte(tile[2 + b], dg);
        for (unsigned i = 0; i < 5 && b * 5 + i < 32; i++)
            out[b * 5 + i] = dg[i] == 0 ? 0.0f : dg[i] == 1 ? s : -s;
    }
}

cmf_status qc_q1t_encode(const qshape *s, const float *src, const cmf_quant_opts *o, uint8_t **out,
                         size_t *len, cmf_err *err) {
    const double frac = o->outlier_frac;
    static const q_tile_codec codec = {Q1T_TILE, q1t_tile_encode, q1t_tile_decode};
    uint64_t base = s->rows * s->gpr * Q1T_TILE, k = q_outlier_budget(frac, s->n), count = 0;
    if (k > UINT32_MAX) k = UINT32_MAX;
    uint8_t *tiles = malloc(base);
    bool *skip = calloc(s->n, 1);
    uint64_t *idx = malloc((k ? k : 1) * sizeof *idx);
    cmf_status st = CMF_OK;
    size_t n;
    if (!tiles || !skip || !idx) {
        st = cmf_err_set(err, CMF_E_NOMEM, "encode", "cannot allocate q1t scratch");
        goto done;
    }
    st = q_overlay_encode(&codec, src, s->n, k, tiles, skip, idx, &count, err);
    if (st == CMF_OK) st = q_size(base + 4 * (s->rows + 1) + 4 * count, &n, err);
    if (st == CMF_OK) st = q_alloc_out(n, out, len, err);
    if (st != CMF_OK) goto done;
    memcpy(*out, tiles, base);
    /* idx is ascending, so entries come out grouped by row and sorted by column */
    uint8_t *rp = *out + base, *ent = rp + 4 * (s->rows + 1);
    uint64_t e = 0;
    for (uint64_t r = 0; r <= s->rows; r++) {
        while (e < count && idx[e] < r * s->cols)
            e++;
        st_u32(rp + 4 * r, (uint32_t)e);
    }
    for (uint64_t i = 0; i < count; i++) {
        st_u16(ent + 4 * i, (uint16_t)(idx[i] % s->cols));
        st_u16(ent + 4 * i + 2, f32_to_f16(q_clamp_f16_range(src[idx[i]])));
    }
done:
    free(tiles);
    free(skip);
    free(idx);
    return st;
}

/* Header checks shared by validate and row decode: the row_ptr table fits, and the entry area
 * is a whole number of 4-byte entries. *entries = its entry count. */
static cmf_status q1t_span(const qshape *s, uint64_t nbytes, uint64_t *entries, const char *ctx,
                           cmf_err *err) {
    uint64_t base = s->rows * s->gpr * Q1T_TILE, hdr;
    if (!ck_mul_u64(s->rows + 1, 4, &hdr) || !ck_add_u64(hdr, base, &hdr) || nbytes < hdr)
        return cmf_err_set(err, CMF_E_PARSE, ctx,
                           "q1t payload is %llu bytes, tiles + row_ptr need %llu",
                           (unsigned long long)nbytes, (unsigned long long)hdr);
    if ((nbytes - hdr) % 4)
        return cmf_err_set(err, CMF_E_PARSE, ctx,
                           "q1t overlay area of %llu bytes is not whole 4-byte entries",
                           (unsigned long long)(nbytes - hdr));
    *entries = (nbytes - hdr) / 4;
    return CMF_OK;
}

static cmf_status check_codes(const uint8_t *tiles, uint64_t ntiles, uint64_t first_tile,
                              const char *ctx, cmf_err *err) {
    for (uint64_t t = 0; t < ntiles; t++)
        for (unsigned b = 0; b < 7; b++)
            if (tiles[t * Q1T_TILE + 2 + b] > 242)
                return cmf_err_set(err, CMF_E_PARSE, ctx,
                                   "q1t tile %llu code byte %u = %u > 242 (not 5 base-3 digits)",
                                   (unsigned long long)(first_tile + t), b,
                                   tiles[t * Q1T_TILE + 2 + b]);
    return CMF_OK;
}

static cmf_status check_entries(const qshape *s, const uint8_t *ent, uint64_t lo, uint64_t hi,
                                const char *ctx, cmf_err *err) {
    for (uint64_t i = lo; i < hi; i++) {
        uint16_t col = ld_u16(ent + 4 * i);
        if (col >= s->cols)
            return cmf_err_set(err, CMF_E_PARSE, ctx, "q1t overlay entry %llu: col %u >= in %llu",
                               (unsigned long long)i, col, (unsigned long long)s->cols);
    }
    return CMF_OK;
}

cmf_status qc_q1t_validate(const qshape *s, const uint8_t *d, uint64_t nbytes, const char *ctx,
                           cmf_err *err) {
    uint64_t entries = 0;
    cmf_status st = q1t_span(s, nbytes, &entries, ctx, err);
    if (st != CMF_OK) return st;
    const uint8_t *rp = d + s->rows * s->gpr * Q1T_TILE;
    if (ld_u32(rp) != 0)
        return cmf_err_set(err, CMF_E_PARSE, ctx, "q1t row_ptr[0]=%u, must be 0", ld_u32(rp));
    for (uint64_t r = 0; r < s->rows; r++)
        if (ld_u32(rp + 4 * (r + 1)) < ld_u32(rp + 4 * r))
            return cmf_err_set(err, CMF_E_PARSE, ctx,
                               "q1t row_ptr not monotonic: row_ptr[%llu]=%u < row_ptr[%llu]=%u",
                               (unsigned long long)(r + 1), ld_u32(rp + 4 * (r + 1)),
                               (unsigned long long)r, ld_u32(rp + 4 * r));
    uint32_t last = ld_u32(rp + 4 * s->rows);
    if (last != entries)
        return cmf_err_set(err, CMF_E_PARSE, ctx,
                           "q1t row_ptr[rows]=%u, but the span holds %llu entries", last,
                           (unsigned long long)entries);
    st = check_codes(d, s->rows * s->gpr, 0, ctx, err);
    if (st == CMF_OK) st = check_entries(s, rp + 4 * (s->rows + 1), 0, entries, ctx, err);
    return st;
}

cmf_status qc_q1t_row(const qshape *s, const uint8_t *d, uint64_t nbytes, uint64_t row, float *out,
                      const char *ctx, cmf_err *err) {
    uint64_t entries = 0;
    cmf_status st = q1t_span(s, nbytes, &entries, ctx, err);
    if (st != CMF_OK) return st;
    const uint8_t *tiles = d + row * s->gpr * Q1T_TILE;
    st = check_codes(tiles, s->gpr, row * s->gpr, ctx, err);
    if (st != CMF_OK) return st;
    const uint8_t *rp = d + s->rows * s->gpr * Q1T_TILE, *ent = rp + 4 * (s->rows + 1);
    uint64_t lo = ld_u32(rp + 4 * row), hi = ld_u32(rp + 4 * (row + 1));
    if (lo > hi || hi > entries)
        return cmf_err_set(err, CMF_E_PARSE, ctx,
                           "q1t row %llu: row_ptr [%llu, %llu) not within %llu entries",
                           (unsigned long long)row, (unsigned long long)lo, (unsigned long long)hi,
                           (unsigned long long)entries);
    st = check_entries(s, ent, lo, hi, ctx, err);
    if (st != CMF_OK) return st;
    for (uint64_t g = 0; g < s->gpr; g++)
        q1t_tile_decode(tiles + g * Q1T_TILE, out + g * 32);
    for (uint64_t i = lo; i < hi; i++)
        out[ld_u16(ent + 4 * i)] = f16_to_f32(ld_u16(ent + 4 * i + 2));
    return CMF_OK;
}
