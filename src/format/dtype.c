/* dtype.c - the dtype traits table (spec §3.1) with each dtype's size rule (spec §3.2).
 * The compute side of each dtype (codecs, kernels, int8 policy) is its row in
 * src/quant/dtype_ops.c. */
#include "cortiq/dtype.h"

#include <stdio.h>
#include <string.h>

#include "common/checked.h"
#include "common/err.h"

/* Sum of terms a*b with overflow checks; all our layouts are such sums. */
typedef struct {
    uint64_t v;
    bool ok;
} acc_t;
static void acc_add(acc_t *a, uint64_t x, uint64_t y) {
    uint64_t p;
    if (!a->ok || !ck_mul_u64(x, y, &p) || !ck_add_u64(a->v, p, &a->v)) a->ok = false;
}

/* A shape already checked against the traits: n elements; for matrix dtypes rows x in with
 * gpr = in / 32 groups per row. */
typedef struct {
    uint64_t n, rows, in, gpr;
} dims_t;

/* Size rule of spec §3.2: the exact size into lo (fixed dtypes), or the smallest and largest
 * valid payload into lo and hi (variable dtypes). */
typedef void (*size_fn)(const dims_t *d, acc_t *lo, acc_t *hi);

static void size_f32(const dims_t *d, acc_t *lo, acc_t *hi) {
    (void)hi;
    acc_add(lo, d->n, 4);
}
static void size_half(const dims_t *d, acc_t *lo, acc_t *hi) { /* f16, bf16 */
    (void)hi;
    acc_add(lo, d->n, 2);
}
static void size_q8_row(const dims_t *d, acc_t *lo, acc_t *hi) {
    (void)hi;
    acc_add(lo, d->rows, d->in); /* int8 codes */
    acc_add(lo, d->rows, 2);     /* f16 row scales */
}
static void size_q8_2f(const dims_t *d, acc_t *lo, acc_t *hi) {
    size_q8_row(d, lo, hi);
    acc_add(lo, d->in, 2); /* f16 column field */
}
static void size_q4_block(const dims_t *d, acc_t *lo, acc_t *hi) {
    (void)hi;
    acc_add(lo, (d->n + 31) / 32, 18);
}
static void size_q4_tiled(const dims_t *d, acc_t *lo, acc_t *hi) {
    (void)hi;
    acc_add(lo, d->rows * d->gpr, 18);
}
static void size_q1(const dims_t *d, acc_t *lo, acc_t *hi) {
    (void)hi;
    acc_add(lo, d->rows * d->gpr, 6);
}
static void size_q4tp(const dims_t *d, acc_t *lo, acc_t *hi) {
    (void)hi;
    acc_add(lo, d->rows * d->gpr, 16);          /* nibbles */
    acc_add(lo, d->rows, 4);                    /* f16 (lo, step) per row */
    acc_add(lo, d->rows, (d->gpr * 5 + 7) / 8); /* 5-bit rung codes */
}
/* vbit / vbit_ro: bit widths and group scales, then 3 to 8 bits per weight. */
static void size_vbit_body(const dims_t *d, acc_t *lo, acc_t *hi) {
    acc_add(lo, d->rows, 1);
    acc_add(lo, d->rows * d->gpr, 2);
    *hi = *lo;
    acc_add(lo, d->rows, (3 * d->in + 7) / 8);
    acc_add(hi, d->rows, d->in);
}
static void size_vbit(const dims_t *d, acc_t *lo, acc_t *hi) {
    size_vbit_body(d, lo, hi);
}
static void size_vbit_ro(const dims_t *d, acc_t *lo, acc_t *hi) {
    acc_add(lo, d->rows + 1, 4); /* u32 row offsets */
    size_vbit_body(d, lo, hi);
}
static void size_q1s(const dims_t *d, acc_t *lo, acc_t *hi) {
    acc_add(lo, d->rows * d->gpr, 6); /* q1 tiles */
    acc_add(lo, 1, 4);                /* overlay count */
    *hi = *lo;
    acc_add(hi, d->n, 6); /* at most one {u32 idx, f16 v} per weight */
}
static void size_q1t(const dims_t *d, acc_t *lo, acc_t *hi) {
    acc_add(lo, d->rows * d->gpr, 9); /* base-3 tiles */
    acc_add(lo, d->rows + 1, 4);      /* row_ptr */
    *hi = *lo;
    acc_add(hi, d->n, 4); /* at most one {u16 col, f16 v} per weight */
}

/* One record per id: its public traits and its size rule (NULL: reserved). */
typedef struct dtype_rec {
    cmf_dtype_traits traits;
    size_fn size;
} dtype_rec;

#define MATRIX32 .matrix_only = true, .needs_in_mult32 = true

static const dtype_rec k_dtypes[CMF_DT_COUNT] = {
    [CMF_DT_F32] = {{.name = "f32", .kind = CMF_DTK_FIXED}, size_f32},
    [CMF_DT_F16] = {{.name = "f16", .kind = CMF_DTK_FIXED}, size_half},
    [CMF_DT_BF16] = {{.name = "bf16", .kind = CMF_DTK_FIXED}, size_half},
    [CMF_DT_Q8_ROW] = {{.name = "q8_row", .kind = CMF_DTK_FIXED, .matrix_only = true}, size_q8_row},
    [CMF_DT_Q4_BLOCK] = {{.name = "q4_block", .kind = CMF_DTK_FIXED}, size_q4_block},
    [CMF_DT_MIX8_4] = {{.name = "mix8_4", .kind = CMF_DTK_RESERVED}, NULL},
    [CMF_DT_U8] = {{.name = "u8", .kind = CMF_DTK_RESERVED}, NULL},
    [CMF_DT_Q4_COL] = {{.name = "q4_col", .kind = CMF_DTK_RESERVED}, NULL},
    [CMF_DT_VBIT] = {{.name = "vbit", .kind = CMF_DTK_VARIABLE, MATRIX32, .quant_2f = true},
                     size_vbit},
    [CMF_DT_Q8_2F] =
        {{.name = "q8_2f", .kind = CMF_DTK_FIXED, .matrix_only = true, .quant_2f = true},
         size_q8_2f},
    [CMF_DT_VBIT_RO] = {{.name = "vbit_ro", .kind = CMF_DTK_VARIABLE, MATRIX32}, size_vbit_ro},
    [CMF_DT_Q4_TILED] = {{.name = "q4_tiled", .kind = CMF_DTK_FIXED, MATRIX32}, size_q4_tiled},
    [CMF_DT_Q1] = {{.name = "q1", .kind = CMF_DTK_FIXED, MATRIX32}, size_q1},
    [CMF_DT_Q1S] = {{.name = "q1s", .kind = CMF_DTK_VARIABLE, MATRIX32}, size_q1s},
    [CMF_DT_Q1T] = {{.name = "q1t", .kind = CMF_DTK_VARIABLE, MATRIX32, .max_in = 65535}, size_q1t},
    [CMF_DT_Q4TP] = {{.name = "q4tp", .kind = CMF_DTK_FIXED, MATRIX32}, size_q4tp},
};

const cmf_dtype_traits *cmf_dtype_get(unsigned id) {
    return id < CMF_DT_COUNT ? &k_dtypes[id].traits : NULL;
}

const char *cmf_dtype_name(unsigned id) {
    return id < CMF_DT_COUNT ? k_dtypes[id].traits.name : "unknown";
}

bool cmf_dtype_from_name(const char *name, cmf_dtype *out) {
    for (unsigned i = 0; i < CMF_DT_COUNT; i++) {
        const cmf_dtype_traits *t = &k_dtypes[i].traits;
        if (t->kind != CMF_DTK_RESERVED && !strcmp(t->name, name)) {
            *out = (cmf_dtype)i;
            return true;
        }
    }
    return false;
}

#define NUMEL_CAP (UINT64_C(1) << 62)

bool cmf_shape_numel(unsigned ndim, const uint64_t *shape, uint64_t *numel) {
    uint64_t n = 1;
    if (ndim > CMF_MAX_DIMS) return false;
    for (unsigned i = 0; i < ndim; i++) {
        if (shape[i] == 0 || !ck_mul_u64(n, shape[i], &n) || n > NUMEL_CAP) return false;
    }
    *numel = n;
    return true;
}

cmf_status cmf_dtype_nbytes(unsigned id, unsigned ndim, const uint64_t *shape, uint64_t *min_nbytes,
                            uint64_t *max_nbytes, const char *ctx, cmf_err *err) {
    const cmf_dtype_traits *t = cmf_dtype_get(id);
    if (!t || t->kind == CMF_DTK_UNKNOWN)
        return cmf_err_set(err, CMF_E_PARSE, ctx, "unknown dtype id %u", id);
    if (t->kind == CMF_DTK_RESERVED)
        return cmf_err_set(err, CMF_E_PARSE, ctx, "dtype %u (%s) is reserved in CMF v2", id,
                           t->name);
    uint64_t n;
    if (!cmf_shape_numel(ndim, shape, &n))
        return cmf_err_set(err, CMF_E_PARSE, ctx,
                           "shape has a zero dimension or its element count overflows");
    dims_t d = {.n = n};
    if (t->matrix_only) {
        if (ndim != 2)
            return cmf_err_set(err, CMF_E_PARSE, ctx, "dtype %s needs a 2-D shape, got ndim=%u",
                               t->name, ndim);
        d.rows = shape[0];
        d.in = shape[1];
        if (t->needs_in_mult32 && d.in % 32 != 0)
            return cmf_err_set(err, CMF_E_PARSE, ctx, "dtype %s needs in %% 32 == 0, got in=%llu",
                               t->name, (unsigned long long)d.in);
        if (t->max_in && d.in > t->max_in)
            return cmf_err_set(err, CMF_E_PARSE, ctx, "dtype %s needs in <= %u, got in=%llu",
                               t->name, (unsigned)t->max_in, (unsigned long long)d.in);
        d.gpr = d.in / 32;
    }
    acc_t lo = {0, true}, hi = {0, true};
    k_dtypes[id].size(&d, &lo, &hi);
    if (t->kind == CMF_DTK_FIXED) hi = lo;
    if (!lo.ok || !hi.ok) return cmf_err_set(err, CMF_E_PARSE, ctx, "byte size of shape overflows");
    if (min_nbytes) *min_nbytes = lo.v;
    if (max_nbytes) *max_nbytes = hi.v;
    return CMF_OK;
}
