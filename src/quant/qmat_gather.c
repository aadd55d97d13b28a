/* qmat_gather.c - a new matrix made of some rows, or some columns, of a matrix, in the same
 * dtype and with the same weight values (qmat_gather.h). Bytes are copied, never re-encoded:
 * a row keeps its codes and scales; a column group keeps its codes and its group scale. */
#include "quant/qmat_gather.h"

#include <stdlib.h>
#include <string.h>

#include "common/err.h"

/* Bytes per group of 32 weights of the tile dtypes (scale and codes side by side). */
static unsigned tile_bytes(cmf_dtype dt) {
    switch (dt) {
    case CMF_DT_Q4_TILED:
        return 18;
    case CMF_DT_Q1:
        return 6;
    default:
        return 0;
    }
}

static unsigned elem_bytes(cmf_dtype dt) {
    switch (dt) {
    case CMF_DT_F32:
        return 4;
    case CMF_DT_F16:
    case CMF_DT_BF16:
        return 2;
    case CMF_DT_Q8_ROW:
        return 1;
    default:
        return 0;
    }
}

/* q4_block, q4_tiled, q1 and q4tp keep whole 32-column groups inside a row only when the row
 * is a whole number of groups (q4_block's groups run over the flattened tensor). */
static bool grouped(cmf_dtype dt) {
    return dt == CMF_DT_Q4_BLOCK || dt == CMF_DT_Q4TP || tile_bytes(dt);
}

unsigned cq_qmat_gather_unit(const cmf_qmat *m) {
    if (elem_bytes(m->dtype)) return 1;
    if (grouped(m->dtype) && m->cols % 32 == 0) return 32;
    return 0;
}

static uint64_t q4tp_code_bytes(uint64_t groups) {
    return (groups * 5 + 7) / 8;
}

static unsigned get5(const uint8_t *p, uint64_t i) {
    uint64_t bit = i * 5;
    unsigned v = p[bit / 8];
    if (bit % 8 > 3) v |= (unsigned)p[bit / 8 + 1] << 8; /* the code spans two bytes */
    return (v >> (bit % 8)) & 31;
}

static void put5(uint8_t *p, uint64_t i, unsigned v) {
    uint64_t bit = i * 5;
    unsigned w = v << (bit % 8);
    p[bit / 8] |= (uint8_t)w;
    if ((bit % 8) + 5 > 8) p[bit / 8 + 1] |= (uint8_t)(w >> 8);
}

/* Payload size of a rows x cols matrix of m's dtype (the gathered ones are fixed-size). */
static uint64_t payload_bytes(cmf_dtype dt, uint64_t rows, uint64_t cols) {
    uint64_t g = cols / 32;
    if (elem_bytes(dt)) return rows * cols * elem_bytes(dt) + (dt == CMF_DT_Q8_ROW ? rows * 2 : 0);
    if (dt == CMF_DT_Q4_BLOCK) return rows * g * 18;
    if (dt == CMF_DT_Q4TP) return rows * (g * 16 + 4 + q4tp_code_bytes(g));
    return rows * g * tile_bytes(dt);
}

/* Copies the pieces of row r of src (all columns, or the groups/columns in idx) to row o of
 * dst. n_out: dst's columns; idx NULL = every column. */
static void copy_row(const cmf_qmat *src, uint64_t r, uint8_t *dst, uint64_t o, uint64_t n_out,
                     uint64_t dst_rows, const uint32_t *idx) {
    cmf_dtype dt = src->dtype;
    const uint8_t *s = src->data;
    uint64_t C = src->cols, G = C / 32, Go = n_out / 32;
    unsigned e = elem_bytes(dt);
    if (e) {
        const uint8_t *row = s + r * C * e;
        uint8_t *out = dst + o * n_out * e;
        if (!idx)
            memcpy(out, row, C * e);
        else
            for (uint64_t j = 0; j < n_out; j++)
                memcpy(out + j * e, row + (uint64_t)idx[j] * e, e);
        if (dt == CMF_DT_Q8_ROW)
            memcpy(dst + dst_rows * n_out + o * 2, s + src->rows * C + r * 2, 2);
        return;
    }
    if (tile_bytes(dt)) {
        unsigned t = tile_bytes(dt);
        for (uint64_t j = 0; j < Go; j++) {
            uint64_t gi = idx ? idx[j * 32] / 32 : j;
            memcpy(dst + (o * Go + j) * t, s + (r * G + gi) * t, t);
        }
        return;
    }
    if (dt == CMF_DT_Q4_BLOCK) {
        for (uint64_t j = 0; j < Go; j++) {
            uint64_t gi = idx ? idx[j * 32] / 32 : j;
            memcpy(dst + (o * Go + j) * 16, s + (r * G + gi) * 16, 16);
            memcpy(dst + dst_rows * Go * 16 + (o * Go + j) * 2,
                   s + src->rows * G * 16 + (r * G + gi) * 2, 2);
        }
        return;
    }
    /* q4tp: nibbles, then (lo, step) per row, then row-aligned 5-bit codes per group */
    uint64_t cb = q4tp_code_bytes(G), cbo = q4tp_code_bytes(Go);
    const uint8_t *codes = s + src->rows * (G * 16 + 4) + r * cb;
    uint8_t *ocodes = dst + dst_rows * (Go * 16 + 4) + o * cbo;
    for (uint64_t j = 0; j < Go; j++) {
        uint64_t gi = idx ? idx[j * 32] / 32 : j;
        memcpy(dst + (o * Go + j) * 16, s + (r * G + gi) * 16, 16);
        put5(ocodes, j, get5(codes, gi));
    }
    memcpy(dst + dst_rows * Go * 16 + o * 4, s + src->rows * G * 16 + r * 4, 4);
}

static cmf_status gather(const cmf_qmat *m, const uint32_t *rows, uint64_t n_rows,
                         const uint32_t *cols, uint64_t n_cols, cmf_qmat *out, const char *ctx,
                         cmf_err *err) {
    memset(out, 0, sizeof *out);
    unsigned unit = cq_qmat_gather_unit(m);
    if (!unit)
        return cmf_err_set(err, CMF_E_UNSUPPORTED, ctx,
                           "dtype %u (%llu columns) has no exact row/column gather",
                           (unsigned)m->dtype, (unsigned long long)m->cols);
    if (!n_rows || !n_cols || n_cols % unit)
        return cmf_err_set(err, CMF_E_INVALID_ARG, ctx,
                           "gather of %llu rows x %llu columns: need >= 1 of each, columns in "
                           "whole groups of %u",
                           (unsigned long long)n_rows, (unsigned long long)n_cols, unit);
    if (cols && unit > 1)
        for (uint64_t j = 0; j < n_cols; j++)
            if (cols[j] != cols[j - j % 32] + j % 32 || cols[j - j % 32] % 32)
                return cmf_err_set(err, CMF_E_INVALID_ARG, ctx,
                                   "column %u: columns must come in whole aligned groups of 32",
                                   cols[j]);
    uint64_t bytes = payload_bytes(m->dtype, n_rows, n_cols);
    uint8_t *mem = aligned_alloc(64, (bytes + 63) / 64 * 64);
    if (!mem) return cmf_err_set(err, CMF_E_NOMEM, ctx, "%llu bytes", (unsigned long long)bytes);
    memset(mem, 0, bytes); /* q4tp codes are OR-ed in */
    for (uint64_t i = 0; i < n_rows; i++)
        copy_row(m, rows ? rows[i] : i, mem, i, n_cols, n_rows, cols);
    cmf_status st = cmf_qmat_init(out, m->dtype, n_rows, n_cols, mem, bytes, ctx, err);
    if (st != CMF_OK) {
        free(mem);
        return st;
    }
    return CMF_OK;
}

cmf_status cq_qmat_gather_rows(const cmf_qmat *m, const uint32_t *rows, uint64_t n, cmf_qmat *out,
                               const char *ctx, cmf_err *err) {
    return gather(m, rows, n, NULL, m->cols, out, ctx, err);
}

cmf_status cq_qmat_gather_cols(const cmf_qmat *m, const uint32_t *cols, uint64_t n, cmf_qmat *out,
                               const char *ctx, cmf_err *err) {
    return gather(m, NULL, m->rows, cols, n, out, ctx, err);
}

void cq_qmat_gather_free(cmf_qmat *m) {
    if (!m || !m->data) return;
    void *mem = (void *)m->data;
    cmf_qmat_free(m);
    free(mem);
    memset(m, 0, sizeof *m);
}
