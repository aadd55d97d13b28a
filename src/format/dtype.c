/* dtype.c - the dtype traits table (spec §3.1) and the size rules of spec §3.2. */
#include "cortiq/dtype.h"

#include <stdio.h>
#include <string.h>

#include "common/checked.h"
#include "common/err.h"

static const cmf_dtype_traits k_traits[CMF_DT_COUNT] = {
    [CMF_DT_F32] = {"f32", CMF_DTK_FIXED, false, false, false},
    [CMF_DT_F16] = {"f16", CMF_DTK_FIXED, false, false, false},
    [CMF_DT_BF16] = {"bf16", CMF_DTK_FIXED, false, false, false},
    [CMF_DT_Q8_ROW] = {"q8_row", CMF_DTK_FIXED, true, false, false},
    [CMF_DT_Q4_BLOCK] = {"q4_block", CMF_DTK_FIXED, false, false, false},
    [CMF_DT_MIX8_4] = {"mix8_4", CMF_DTK_RESERVED, false, false, false},
    [CMF_DT_U8] = {"u8", CMF_DTK_RESERVED, false, false, false},
    [CMF_DT_Q4_COL] = {"q4_col", CMF_DTK_RESERVED, false, false, false},
    [CMF_DT_VBIT] = {"vbit", CMF_DTK_VARIABLE, true, true, true},
    [CMF_DT_Q8_2F] = {"q8_2f", CMF_DTK_FIXED, true, false, true},
    [CMF_DT_VBIT_RO] = {"vbit_ro", CMF_DTK_VARIABLE, true, true, false},
    [CMF_DT_Q4_TILED] = {"q4_tiled", CMF_DTK_FIXED, true, true, false},
    [CMF_DT_Q1] = {"q1", CMF_DTK_FIXED, true, true, false},
    [CMF_DT_Q1S] = {"q1s", CMF_DTK_VARIABLE, true, true, false},
    [CMF_DT_Q1T] = {"q1t", CMF_DTK_VARIABLE, true, true, false},
    [CMF_DT_Q4TP] = {"q4tp", CMF_DTK_FIXED, true, true, false},
};

const cmf_dtype_traits *cmf_dtype_get(unsigned id) {
    return id < CMF_DT_COUNT ? &k_traits[id] : NULL;
}

const char *cmf_dtype_name(unsigned id) {
    return id < CMF_DT_COUNT ? k_traits[id].name : "unknown";
}

bool cmf_dtype_from_name(const char *name, cmf_dtype *out) {
    for (unsigned i = 0; i < CMF_DT_COUNT; i++) {
        if (k_traits[i].kind != CMF_DTK_RESERVED && !strcmp(k_traits[i].name, name)) {
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

/* Sum of terms a*b with overflow checks; all our layouts are such sums. */
typedef struct {
    uint64_t v;
    bool ok;
} acc_t;
static void acc_add(acc_t *a, uint64_t x, uint64_t y) {
    uint64_t p;
    if (!a->ok || !ck_mul_u64(x, y, &p) || !ck_add_u64(a->v, p, &a->v)) a->ok = false;
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
    uint64_t rows = 0, in = 0, gpr = 0;
    if (t->matrix_only) {
        if (ndim != 2)
            return cmf_err_set(err, CMF_E_PARSE, ctx, "dtype %s needs a 2-D shape, got ndim=%u",
                               t->name, ndim);
        rows = shape[0];
        in = shape[1];
        if (t->needs_in_mult32 && in % 32 != 0)
            return cmf_err_set(err, CMF_E_PARSE, ctx, "dtype %s needs in %% 32 == 0, got in=%llu",
                               t->name, (unsigned long long)in);
        gpr = in / 32;
    }
    acc_t lo = {0, true}, hi = {0, true};
    switch ((cmf_dtype)id) {
    case CMF_DT_F32:
        acc_add(&lo, n, 4);
        break;
    case CMF_DT_F16:
    case CMF_DT_BF16:
        acc_add(&lo, n, 2);
        break;
    case CMF_DT_Q8_ROW:
        acc_add(&lo, rows, in);
        acc_add(&lo, rows, 2);
        break;
    case CMF_DT_Q4_BLOCK:
        acc_add(&lo, (n + 31) / 32, 18);
        break;
    case CMF_DT_Q8_2F:
        acc_add(&lo, rows, in);
        acc_add(&lo, rows, 2);
        acc_add(&lo, in, 2);
        break;
    case CMF_DT_Q4_TILED:
        acc_add(&lo, rows * gpr, 18);
        break;
    case CMF_DT_Q1:
        acc_add(&lo, rows * gpr, 6);
        break;
    case CMF_DT_Q4TP:
        acc_add(&lo, rows * gpr, 16);
        acc_add(&lo, rows, 4);
        acc_add(&lo, rows, (gpr * 5 + 7) / 8);
        break;
    case CMF_DT_VBIT:
    case CMF_DT_VBIT_RO:
        acc_add(&lo, rows, 1);
        acc_add(&lo, rows * gpr, 2);
        if (id == CMF_DT_VBIT_RO) acc_add(&lo, rows + 1, 4);
        hi = lo;
        acc_add(&lo, rows, (3 * in + 7) / 8);
        acc_add(&hi, rows, in);
        break;
    case CMF_DT_Q1S:
        acc_add(&lo, rows * gpr, 6);
        acc_add(&lo, 1, 4);
        hi = lo;
        acc_add(&hi, n, 6);
        break;
    case CMF_DT_Q1T:
        if (in > 65535)
            return cmf_err_set(err, CMF_E_PARSE, ctx, "dtype q1t needs in <= 65535, got in=%llu",
                               (unsigned long long)in);
        acc_add(&lo, rows * gpr, 9);
        acc_add(&lo, rows + 1, 4);
        hi = lo;
        acc_add(&hi, n, 4);
        break;
    default:
        return cmf_err_set(err, CMF_E_PARSE, ctx, "dtype %u has no size rule", id);
    }
    if (t->kind == CMF_DTK_FIXED) hi = lo;
    if (!lo.ok || !hi.ok) return cmf_err_set(err, CMF_E_PARSE, ctx, "byte size of shape overflows");
    if (min_nbytes) *min_nbytes = lo.v;
    if (max_nbytes) *max_nbytes = hi.v;
    return CMF_OK;
}
