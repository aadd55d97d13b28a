/* codec_q4.c - the three 4-bit layouts of spec §3.2 sharing one nibble rule:
 *   q4_block  [u8 nibbles: ceil(n/32)*16][f16 scale: ceil(n/32)]   (flattened, zero-padded)
 *   q4_tiled  per row, per 32-group: [f16 scale][16B nibbles]      (18-byte tiles)
 *   q4tp      [nibbles: rows*gpr*16][rows x (f16 lo, f16 step)][rows x ceil(gpr*5/8) 5-bit codes]
 * Nibble of element 2k is the low half of byte k, 2k+1 the high half; w = (q - 8) * scale. */
#include <stdlib.h>

#include "common/bytes.h"
#include "quant/q4tp_rung.h"
#include "quant/quant_internal.h"

/* Nibbles of up to 32 weights (missing ones are zero padding -> code 8) against scale s;
 * returns the squared reconstruction error. */
static double q4_pack(const float *w, unsigned count, float s, uint8_t nib[16]) {
    double sse = 0.0;
    for (unsigned k = 0; k < 16; k++)
        nib[k] = 0;
    for (unsigned j = 0; j < 32; j++) {
        float x = j < count ? w[j] : 0.0f;
        int q = q_code(x, s, -8, 7);
        double e = (double)x - (double)q * (double)s;
        sse += e * e;
        nib[j / 2] |= (uint8_t)((unsigned)(q + 8) << (4 * (j & 1)));
    }
    return sse;
}

/* f16 scale absmax/7 of a group, and its nibbles quantized against the rounded value. */
static uint16_t q4_group(const float *w, unsigned count, uint8_t nib[16]) {
    uint16_t h = q_scale_f16(q_absmax(w, count) / 7.0f);
    q4_pack(w, count, f16_to_f32(h), nib);
    return h;
}

static inline float q4_nib(const uint8_t *nib, unsigned j) {
    return (float)((int)((nib[j / 2] >> (4 * (j & 1))) & 15) - 8);
}

/* ---- q4_block ---- */
cmf_status qc_q4_block_encode(const qshape *s, const float *src, const cmf_quant_opts *o,
                              uint8_t **out, size_t *len, cmf_err *err) {
    (void)o;
    uint64_t ng = (s->n + 31) / 32;
    size_t n;
    cmf_status st = q_size(ng * 18, &n, err);
    if (st == CMF_OK) st = q_alloc_out(n, out, len, err);
    if (st != CMF_OK) return st;
    for (uint64_t g = 0; g < ng; g++) {
        uint64_t first = g * 32;
        unsigned count = (unsigned)(s->n - first < 32 ? s->n - first : 32);
        st_u16(*out + ng * 16 + 2 * g, q4_group(src + first, count, *out + g * 16));
    }
    return CMF_OK;
}

void qc_q4_block_row(const qshape *s, const uint8_t *d, uint64_t row, float *out) {
    uint64_t ng = (s->n + 31) / 32;
    for (uint64_t i = 0; i < s->cols; i++) {
        uint64_t e = row * s->cols + i, g = e / 32;
        out[i] = q4_nib(d + g * 16, (unsigned)(e % 32)) * f16_to_f32(ld_u16(d + ng * 16 + 2 * g));
    }
}

/* ---- q4_tiled ---- */
cmf_status qc_q4_tiled_encode(const qshape *s, const float *src, const cmf_quant_opts *o,
                              uint8_t **out, size_t *len, cmf_err *err) {
    (void)o;
    size_t n;
    cmf_status st = q_size(s->rows * s->gpr * 18, &n, err);
    if (st == CMF_OK) st = q_alloc_out(n, out, len, err);
    if (st != CMF_OK) return st;
    for (uint64_t t = 0; t < s->rows * s->gpr; t++) {
        uint8_t *tile = *out + t * 18;
        st_u16(tile, q4_group(src + t * 32, 32, tile + 2));
    }
    return CMF_OK;
}

void qc_q4_tiled_row(const qshape *s, const uint8_t *d, uint64_t row, float *out) {
    for (uint64_t g = 0; g < s->gpr; g++) {
        const uint8_t *tile = d + (row * s->gpr + g) * 18;
        float scale = f16_to_f32(ld_u16(tile));
        for (unsigned j = 0; j < 32; j++)
            out[g * 32 + j] = q4_nib(tile + 2, j) * scale;
    }
}

/* ---- q4tp ---- */
/* The reader's scale for rung `code`; the encoder uses the very same ladder. */
static inline float q4tp_scale(float lo, float step, unsigned code) {
    return cq_q4tp_rung(lo, step, code);
}

static uint64_t q4tp_code_bytes(uint64_t gpr) {
    return (gpr * 5 + 7) / 8;
}

static unsigned get5(const uint8_t *codes, uint64_t cb, uint64_t g) {
    uint64_t bit = g * 5, byte = bit / 8;
    unsigned v = codes[byte];
    if (byte + 1 < cb) v |= (unsigned)codes[byte + 1] << 8;
    return (v >> (bit % 8)) & 31u;
}

static void put5(uint8_t *codes, uint64_t g, unsigned code) {
    for (unsigned b = 0; b < 5; b++)
        if (code >> b & 1u) codes[(g * 5 + b) / 8] |= (uint8_t)(1u << ((g * 5 + b) % 8));
}

/* One row: ladder from the exact min/max log2 ideal scale, lo/step rounded to f16 first, then per
 * tile the rung (floor or ceil of the exact position) with the smaller error. */
static void q4tp_encode_row(const float *w, uint64_t gpr, uint8_t *nibs, uint8_t *params,
                            uint8_t *codes, float *logs) {
    float lo = INFINITY, hi = -INFINITY;
    for (uint64_t g = 0; g < gpr; g++) {
        float ideal = q_absmax(w + g * 32, 32) / 7.0f;
        if (ideal > F16_MAX) ideal = F16_MAX; /* the same scale cap as every f16-scaled dtype */
        logs[g] = ideal > 0.0f ? log2f(ideal) : -INFINITY;
        if (ideal > 0.0f) {
            if (logs[g] < lo) lo = logs[g];
            if (logs[g] > hi) hi = logs[g];
        }
    }
    if (lo > hi) lo = hi = 0.0f; /* all-zero row */
    uint16_t lo_h = f32_to_f16(lo), step_h = f32_to_f16((hi - lo) / 31.0f);
    st_u16(params, lo_h);
    st_u16(params + 2, step_h);
    float lo_f = f16_to_f32(lo_h), step_f = f16_to_f32(step_h);
    for (uint64_t g = 0; g < gpr; g++) {
        unsigned best = 0;
        if (logs[g] > -INFINITY && step_f > 0.0f) {
            float pos = (logs[g] - lo_f) / step_f;
            float fl = floorf(pos);
            unsigned c0 = fl < 0.0f ? 0u : fl > 31.0f ? 31u : (unsigned)fl;
            unsigned c1 = c0 < 31u ? c0 + 1 : c0;
            uint8_t tmp[16];
            double e0 = q4_pack(w + g * 32, 32, q4tp_scale(lo_f, step_f, c0), tmp);
            double e1 = q4_pack(w + g * 32, 32, q4tp_scale(lo_f, step_f, c1), tmp);
            best = e1 < e0 ? c1 : c0;
        }
        float scale = logs[g] > -INFINITY ? q4tp_scale(lo_f, step_f, best) : 0.0f;
        q4_pack(w + g * 32, 32, scale, nibs + g * 16);
        put5(codes, g, best);
    }
}

cmf_status qc_q4tp_encode(const qshape *s, const float *src, const cmf_quant_opts *o, uint8_t **out,
                          size_t *len, cmf_err *err) {
    (void)o;
    uint64_t cb = q4tp_code_bytes(s->gpr);
    size_t n;
    cmf_status st = q_size(s->rows * (s->gpr * 16 + 4 + cb), &n, err);
    if (st != CMF_OK) return st;
    float *logs = malloc(s->gpr * sizeof *logs);
    if (!logs) return cmf_err_set(err, CMF_E_NOMEM, "encode", "cannot allocate q4tp scratch");
    st = q_alloc_out(n, out, len, err);
    if (st != CMF_OK) {
        free(logs);
        return st;
    }
    uint8_t *params = *out + s->rows * s->gpr * 16, *codes = params + 4 * s->rows;
    for (uint64_t r = 0; r < s->rows; r++)
        q4tp_encode_row(src + r * s->cols, s->gpr, *out + r * s->gpr * 16, params + 4 * r,
                        codes + r * cb, logs);
    free(logs);
    return CMF_OK;
}

void qc_q4tp_row(const qshape *s, const uint8_t *d, uint64_t row, float *out) {
    uint64_t cb = q4tp_code_bytes(s->gpr);
    const uint8_t *nibs = d + row * s->gpr * 16;
    const uint8_t *params = d + s->rows * s->gpr * 16 + 4 * row;
    const uint8_t *codes = d + s->rows * s->gpr * 16 + 4 * s->rows + row * cb;
    float lo = f16_to_f32(ld_u16(params)), step = f16_to_f32(ld_u16(params + 2));
    float ladder[32];
    cq_q4tp_ladder_f32(lo, step, ladder);
    for (uint64_t g = 0; g < s->gpr; g++) {
        float scale = ladder[get5(codes, cb, g)];
        for (unsigned j = 0; j < 32; j++)
            out[g * 32 + j] = q4_nib(nibs + g * 16, j) * scale;
    }
}
