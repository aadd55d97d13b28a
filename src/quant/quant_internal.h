/* quant_internal.h - what the codec files of src/quant share: the shape view, rounding, and the
 * per-dtype entry points that quant/dtype_ops.c gathers. */
#ifndef CORTIQ_QUANT_INTERNAL_H
#define CORTIQ_QUANT_INTERNAL_H

#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "common/f16.h"
#include "cortiq/quant.h"

/* A tensor shape seen as rows x cols (cols = shape[ndim-1]; for 2-D rows = shape[0]). */
typedef struct qshape {
    cmf_dtype dt;
    unsigned ndim;
    const uint64_t *shape;
    uint64_t n;    /* numel */
    uint64_t rows; /* n / cols */
    uint64_t cols; /* row length ("in" for 2-D) */
    uint64_t gpr;  /* cols / 32 for the in % 32 == 0 dtypes */
} qshape;

#define F16_MAX 65504.0f

/* w clamped into the finite f16 range (what an f16 overlay value stores). */
static inline float q_clamp_f16_range(float w) {
    return w > F16_MAX ? F16_MAX : w < -F16_MAX ? -F16_MAX : w;
}

/* Round to nearest, ties to even (numpy's np.round), the one rounding rule of every encoder. */
static inline float q_round(float x) {
    return rintf(x);
}

/* f16 bits of a non-negative scale, clamped into the finite f16 range. */
static inline uint16_t q_scale_f16(float s) {
    return f32_to_f16(s > F16_MAX ? F16_MAX : s);
}

/* Integer code round(w / s) clamped to [lo, hi]; 0 when s is 0 (an all-zero group). */
static inline int q_code(float w, float s, int lo, int hi) {
    if (!(s > 0.0f)) return 0;
    float q = q_round(w / s);
    if (q < (float)lo) return lo;
    if (q > (float)hi) return hi;
    return (int)q;
}

static inline float q_absmax(const float *x, uint64_t n) {
    float m = 0.0f;
    for (uint64_t i = 0; i < n; i++) {
        float a = fabsf(x[i]);
        if (a > m) m = a;
    }
    return m;
}

/* malloc'd, zeroed output buffer of len bytes (len 0 allocates 1 byte). */
cmf_status q_alloc_out(size_t len, uint8_t **out, size_t *out_len, cmf_err *err);
/* size_t from a checked u64 byte count. */
cmf_status q_size(uint64_t v, size_t *out, cmf_err *err);

/* ---- per-dtype entry points (src/quant/codec_*.c), gathered in quant/dtype_ops.c ---- */
/* Encoders: s validated for the dtype, src finite (quant dtypes), o filled. */
#define QC_ENCODE(name)                                                                            \
    cmf_status name(const qshape *s, const float *src, const cmf_quant_opts *o, uint8_t **out,     \
                    size_t *len, cmf_err *err)
QC_ENCODE(qc_float_encode); /* f32, f16, bf16 */
QC_ENCODE(qc_q8_row_encode);
QC_ENCODE(qc_q8_2f_encode);
QC_ENCODE(qc_q4_block_encode);
QC_ENCODE(qc_q4_tiled_encode);
QC_ENCODE(qc_q4tp_encode);
QC_ENCODE(qc_q1_encode);
QC_ENCODE(qc_q1s_encode);
QC_ENCODE(qc_q1t_encode);
QC_ENCODE(qc_vbit_encode); /* vbit, vbit_ro: bits from cmf_vbit_allocate */
#undef QC_ENCODE

/* Row decoders of the FIXED dtypes: the caller has checked nbytes == the exact size. */
void qc_float_row(const qshape *s, const uint8_t *d, uint64_t row, float *out);
void qc_q8_row_row(const qshape *s, const uint8_t *d, uint64_t row, float *out);
void qc_q8_2f_row(const qshape *s, const uint8_t *d, uint64_t row, float *out);
void qc_q4_block_row(const qshape *s, const uint8_t *d, uint64_t row, float *out);
void qc_q4_tiled_row(const qshape *s, const uint8_t *d, uint64_t row, float *out);
void qc_q4tp_row(const qshape *s, const uint8_t *d, uint64_t row, float *out);
void qc_q1_row(const qshape *s, const uint8_t *d, uint64_t row, float *out);

/* Variable-length dtypes: full validation, and row decoders that check what they read. */
cmf_status qc_vbit_validate(const qshape *s, const uint8_t *d, uint64_t nbytes, const char *ctx,
                            cmf_err *err);
cmf_status qc_vbit_row(const qshape *s, const uint8_t *d, uint64_t nbytes, uint64_t row, float *out,
                       const char *ctx, cmf_err *err);
/* Whole-tensor vbit/vbit_ro decode of a validated payload (running row offset). */
void qc_vbit_all(const qshape *s, const uint8_t *d, float *out);
cmf_status qc_q1s_validate(const qshape *s, const uint8_t *d, uint64_t nbytes, const char *ctx,
                           cmf_err *err);
cmf_status qc_q1s_row(const qshape *s, const uint8_t *d, uint64_t nbytes, uint64_t row, float *out,
                      const char *ctx, cmf_err *err);
/* Whole-tensor q1s decode of a validated payload (one pass over the overlay). */
void qc_q1s_all(const qshape *s, const uint8_t *d, float *out);
cmf_status qc_q1t_validate(const qshape *s, const uint8_t *d, uint64_t nbytes, const char *ctx,
                           cmf_err *err);
cmf_status qc_q1t_row(const qshape *s, const uint8_t *d, uint64_t nbytes, uint64_t row, float *out,
                      const char *ctx, cmf_err *err);

/* Shared by q1 and q1s: one 6-byte tile from 32 weights, skipping those with skip[i] set (may be
 * NULL) when measuring the scale mean|w|. */
void q1_tile_encode(const float *w, const bool *skip, uint8_t tile[6]);
void q1_tile_decode(const uint8_t tile[6], float *out);

/* Overlay selection (outlier_select.c): indices of the k largest gain[i] (ties: lower index),
 * written ascending into idx[k]. gain is not modified. */
cmf_status q_top_k(const float *gain, uint64_t n, uint64_t k, uint64_t *idx, cmf_err *err);
/* Overlay budget: round(frac * n), clamped to [0, n]. */
uint64_t q_outlier_budget(double frac, uint64_t n);

/* A 32-weight base tile codec (q1, q1t): encode skipping the weights with skip[j] set. */
typedef struct q_tile_codec {
    unsigned tile_bytes;
    void (*encode)(const float *w, const bool *skip, uint8_t *tile);
    void (*decode)(const uint8_t *tile, float *out);
} q_tile_codec;

/* Base tiles + overlay of up to k outliers for n weights (n % 32 == 0): fills tiles[n/32 tiles]
 * (fitted without the outliers), skip[n] (zeroed by the caller; true = outlier) and
 * idx[*count] (ascending flat indices, *count <= k, only entries that lower the error). */
cmf_status q_overlay_encode(const q_tile_codec *c, const float *src, uint64_t n, uint64_t k,
                            uint8_t *tiles, bool *skip, uint64_t *idx, uint64_t *count,
                            cmf_err *err);

#endif
