/* cortiq/quant.h - encode and decode the tensor payloads of spec §3.2, byte-exact.
 *
 * Every live dtype of spec §3.1 has a scalar reference codec here; these functions ARE the
 * executable definition of each layout (docs/QUANT.md describes the bytes and our reading of
 * every point the spec leaves open). SIMD kernels (cortiq/kernels.h) are tested against them.
 *
 * Conventions shared by all functions below:
 *   - A tensor is row-major float32 with shape[0] = rows (= out) and shape[1] = in for 2-D.
 *   - Payload functions take the payload bytes and the directory's stored `nbytes`. They never read
 *     outside [data, data + nbytes): a malformed payload is CMF_E_PARSE with a message naming
 *     `ctx` (or "tensor" when NULL), the offending value and the rule.
 *   - NaN/inf stored in a scale or value field is not an error; it decodes to NaN/inf.
 *   - Encoders round every scale to its stored precision (f16) BEFORE quantizing against it, so
 *     the reader reconstructs exactly what the writer measured its error against.
 */
#ifndef CORTIQ_QUANT_H
#define CORTIQ_QUANT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cortiq/dtype.h"
#include "cortiq/export.h"
#include "cortiq/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Encoder options. Always start from cmf_quant_opts_default(). */
typedef struct cmf_quant_opts {
    double vbit_mean_bits; /* target mean bits/weight for vbit/vbit_ro allocation; default 4.25 */
    const float *row_weights; /* optional per-row B-field (router frequency) multiplier for vbit
                                 allocation, shape[0] entries, >= 0; NULL = none */
    double outlier_frac;      /* q1s/q1t overlay budget as a fraction of the weights; default 0.01
                                 (1% costs 0.48 bits/weight in q1s, 6 B per entry,
                                 and 0.32 in q1t, 4 B per entry); entries that would not lower
                                 the error are dropped, so the budget is an upper bound */
} cmf_quant_opts;

/* Fill *o with the defaults above. */
CORTIQ_API void cmf_quant_opts_default(cmf_quant_opts *o);

/* Encode float32 `src` (row-major, numel(shape) values) as dtype `dt` into a malloc'd buffer
 * *out of *out_len bytes (caller frees). opts may be NULL (defaults).
 * vbit/vbit_ro allocate per-row bits from opts (cmf_vbit_allocate); use cmf_vbit_encode to
 * supply a bit vector (e.g. from cmf_vbit_allocate_family).
 * Fails with:
 *   CMF_E_UNSUPPORTED  a shape the dtype cannot hold (2-D-only dtypes, in % 32 != 0,
 *                      q1t with in > 65535, q1s with more than 2^32-1 weights, a zero dimension),
 *                      a reserved/unknown dtype, or a non-finite weight for a quantized dtype
 *                      (f32/f16/bf16 copy NaN/inf through). Finite weights beyond the f16
 *                      range saturate: every stored scale is capped at 65504;
 *   CMF_E_INVALID_ARG  NULL pointers or bad option values;
 *   CMF_E_NOMEM        allocation failed. *out is NULL on failure. */
CORTIQ_API CORTIQ_NODISCARD cmf_status cmf_quant_encode(cmf_dtype dt, unsigned ndim,
                                                        const uint64_t *shape, const float *src,
                                                        const cmf_quant_opts *opts, uint8_t **out,
                                                        size_t *out_len, cmf_err *err);

/* Validate a payload fully: the size against the shape (exact for fixed dtypes), and for the
 * variable-length dtypes every internal count, offset, row pointer, index and code against
 * nbytes (vbit bit widths in {3,4,5,6,8}; q1t code bytes <= 242; exact span, no trailing bytes).
 * ctx names the tensor in messages. CMF_OK or CMF_E_PARSE. */
CORTIQ_API CORTIQ_NODISCARD cmf_status cmf_quant_validate(cmf_dtype dt, unsigned ndim,
                                                          const uint64_t *shape,
                                                          const uint8_t *data, uint64_t nbytes,
                                                          const char *ctx, cmf_err *err);

/* Number of rows and the row length that cmf_quant_dequant_row uses: for 2-D, shape[0] rows of
 * shape[1]; otherwise numel/shape[ndim-1] rows of shape[ndim-1] (a scalar is 1 row of 1).
 * Returns false on a zero dimension or overflow. */
CORTIQ_API bool cmf_quant_rows(unsigned ndim, const uint64_t *shape, uint64_t *rows,
                               uint64_t *row_len);

/* Dequantize row `row` (see cmf_quant_rows) into out[row_len]. Checks exactly the parts of the
 * payload it reads (O(1) for fixed dtypes and vbit_ro; vbit scans the bit widths of earlier
 * rows; q1s scans its whole overlay since spec §3.2 fixes no order for it).
 * CMF_E_INVALID_ARG if row is out of range, CMF_E_PARSE on a malformed payload. */
CORTIQ_API CORTIQ_NODISCARD cmf_status cmf_quant_dequant_row(cmf_dtype dt, unsigned ndim,
                                                             const uint64_t *shape,
                                                             const uint8_t *data, uint64_t nbytes,
                                                             uint64_t row, float *out,
                                                             cmf_err *err);

/* Dequantize the whole tensor into out[numel]. Runs cmf_quant_validate first. */
CORTIQ_API CORTIQ_NODISCARD cmf_status cmf_quant_dequant(cmf_dtype dt, unsigned ndim,
                                                         const uint64_t *shape, const uint8_t *data,
                                                         uint64_t nbytes, float *out, cmf_err *err);

/* The dtype a writer should store for `wanted` (spec §3.2): 1-D tensors and tensors with fewer
 * than 32 elements are always f16, whatever was wanted; a shape the wanted dtype cannot hold
 * (not 2-D for a 2-D-only dtype, in % 32 != 0, q1t with in > 65535, q1s with more than 2^32-1
 * weights) also falls back to f16.
 * Reserved/unknown ids are returned unchanged (cmf_quant_encode refuses them). */
CORTIQ_API cmf_dtype cmf_quant_policy_dtype(cmf_dtype wanted, unsigned ndim, const uint64_t *shape);

/* ---- vbit: per-row bit allocation (spec §3.2, vbit) ---------------------------------------- */

/* The bit widths vbit rows may use, ascending; the floor is the first. */
#define CMF_VBIT_LEVELS                                                                            \
    { 3, 4, 5, 6, 8 }
#define CMF_VBIT_NLEVELS      5
#define CMF_VBIT_FLOOR        3
#define CMF_VBIT_DEFAULT_MEAN 4.25

/* One tensor of an allocation family: rows x in float32 weights (in % 32 == 0) and an optional
 * per-row B-field multiplier (router selection frequency of the rows' expert, >= 0; NULL = 1). */
typedef struct cmf_vbit_member {
    uint64_t rows, in;
    const float *src;
    const float *row_weights;
} cmf_vbit_member;

/* Row amplitude used by the allocator: sqrt(mean over the row's 32-groups of absmax(group)^2),
 * i.e. the RMS of the row's ideal group scales, times the row's B-field when given.
 * The quantization noise of a row at b bits is proportional to amplitude^2 * 4^-b. */
CORTIQ_API double cmf_vbit_row_amplitude(const float *row, uint64_t in, double b_field);

/* Allocate bits for one tensor: discrete water-filling over log2 amplitude. Every row starts at
 * the floor (3); bits go, one upgrade at a time, to the row whose next level removes the most
 * noise per added bit, until the next upgrade would push the mean above mean_bits. Result:
 * bits_out[rows] in {3,4,5,6,8}, mean <= max(mean_bits, 3). Deterministic (ties: lower row).
 * CMF_E_INVALID_ARG for in % 32 != 0, NULL pointers, or a non-finite mean_bits. */
CORTIQ_API CORTIQ_NODISCARD cmf_status cmf_vbit_allocate(uint64_t rows, uint64_t in,
                                                         const float *src, const float *row_weights,
                                                         double mean_bits, uint8_t *bits_out,
                                                         cmf_err *err);

/* Family variant (MoE experts of one layer x projection): ONE budget of mean_bits x (all weights
 * of all members) is water-filled jointly over every row of every member, so a loud expert gets
 * more bits and a quiet one is pinned to the floor. bits_out[m] must hold members[m].rows bytes. */
CORTIQ_API CORTIQ_NODISCARD cmf_status cmf_vbit_allocate_family(size_t n_members,
                                                                const cmf_vbit_member *members,
                                                                double mean_bits,
                                                                uint8_t *const *bits_out,
                                                                cmf_err *err);

/* Encode rows x in float32 as vbit or vbit_ro (dt) with the given per-row bit widths
 * (each in {3,4,5,6,8}). Per 32-group, with L = 2^(b-1) - 1 and codes u - L in [-L, L+1]:
 * scale = f16(max(max_pos / (L+1), max_neg / L)) (the smallest scale covering the group),
 * u = clamp(round(w / scale) + L, 0, 2^b - 1). *out malloc'd.
 * CMF_E_INVALID_ARG for a bad bit width; otherwise as cmf_quant_encode. */
CORTIQ_API CORTIQ_NODISCARD cmf_status cmf_vbit_encode(cmf_dtype dt, uint64_t rows, uint64_t in,
                                                       const float *src, const uint8_t *bits,
                                                       uint8_t **out, size_t *out_len,
                                                       cmf_err *err);

/* Packed bytes of one vbit row of `in` weights at `bits` bits (each row padded to a byte). */
static inline uint64_t cmf_vbit_row_bytes(unsigned bits, uint64_t in) {
    return (in * bits + 7) / 8;
}

/* ---- q1t helper ------------------------------------------------------------------------------ */

/* Unpack one q1t code byte (<= 242) into 5 ternary digits, least significant first
 * (digit i is weight 5*byte_index + i of the group): 0 -> 0, 1 -> +s, 2 -> -s.
 * Returns false (digits untouched) for a byte > 242. */
CORTIQ_API bool cmf_q1t_unpack_byte(uint8_t byte, uint8_t digits[5]);

#ifdef __cplusplus
}
#endif
#endif
