/* test_codec_edge.c - shapes and values at the edges: all-zero tensors encode to finite scales and
 * decode to zeros; N-D / 1-D row access (q4_block groups crossing rows); constant and extreme rows.
 */
#include <stdint.h>
#include <stdlib.h>

#include "common/test.h"
#include "cortiq/quant.h"
#include "quant/quant_matrix.h"

static const cmf_dtype k_all[] = {CMF_DT_F32,   CMF_DT_F16,      CMF_DT_BF16,     CMF_DT_Q8_ROW,
                                  CMF_DT_Q8_2F, CMF_DT_Q4_BLOCK, CMF_DT_Q4_TILED, CMF_DT_Q4TP,
                                  CMF_DT_VBIT,  CMF_DT_VBIT_RO,  CMF_DT_Q1,       CMF_DT_Q1S,
                                  CMF_DT_Q1T};
#define NDT (sizeof k_all / sizeof k_all[0])

/* encode + whole decode + every row decode; returns the decoded tensor (caller frees). */
static float *roundtrip(cmf_dtype dt, unsigned ndim, const uint64_t *shape, const float *src,
                        uint64_t n) {
    uint8_t *out = NULL;
    size_t len = 0;
    cmf_err err;
    float *dec = calloc(n, sizeof *dec);
    if (cmf_quant_encode(dt, ndim, shape, src, NULL, &out, &len, &err) != CMF_OK) {
        CHECK_MSG(0, "%s: encode: %s", cmf_dtype_name(dt), err.msg);
        return dec;
    }
    CHECK_MSG(cmf_quant_dequant(dt, ndim, shape, out, len, dec, &err) == CMF_OK, "%s: %s",
              cmf_dtype_name(dt), err.msg);
    uint64_t rows, cols;
    CHECK(cmf_quant_rows(ndim, shape, &rows, &cols));
    float *row = calloc(cols, sizeof *row);
    for (uint64_t r = 0; r < rows; r++) {
        CHECK(cmf_quant_dequant_row(dt, ndim, shape, out, len, r, row, &err) == CMF_OK);
        CHECK_MSG(!memcmp(row, dec + r * cols, cols * sizeof *row), "%s row %llu",
                  cmf_dtype_name(dt), (unsigned long long)r);
    }
    CHECK_STATUS(cmf_quant_dequant_row(dt, ndim, shape, out, len, rows, row, &t_err_),
                 CMF_E_INVALID_ARG);
    free(row);
    free(out);
    return dec;
}

static void test_zeros(void) {
    const uint64_t shape[2] = {4, 64};
    float src[256] = {0};
    src[70] = -0.0f;
    for (size_t k = 0; k < NDT; k++) {
        float *dec = roundtrip(k_all[k], 2, shape, src, 256);
        int ok = 1;
        for (int i = 0; i < 256; i++)
            ok &= dec[i] == 0.0f;
        /* q1 cannot express 0: a zero group decodes to +-0 scale, which is 0 */
        CHECK_MSG(ok, "%s: zero tensor does not decode to zeros", cmf_dtype_name(k_all[k]));
        free(dec);
    }
}

static void test_nd_rows(void) {
    /* q4_block over [3,5,7]: rows of 7 cross 32-groups; compare with a 1-D view of the same data */
    const uint64_t shape[3] = {3, 5, 7}, flat[1] = {105};
    float src[105];
    qm_gaussian(src, 1, 105, 3);
    for (int dt = 0; dt < 3; dt++) {
        cmf_dtype d = dt == 0 ? CMF_DT_Q4_BLOCK : dt == 1 ? CMF_DT_F16 : CMF_DT_BF16;
        float *a = roundtrip(d, 3, shape, src, 105);
        float *b = roundtrip(d, 1, flat, src, 105);
        CHECK(!memcmp(a, b, sizeof src));
        CHECK(qm_rel_rmse(src, a, 105) < (d == CMF_DT_Q4_BLOCK ? 0.15 : 0.01));
        free(a);
        free(b);
    }
    /* scalar */
    const float one = 0.25f;
    float *s = roundtrip(CMF_DT_F16, 0, NULL, &one, 1);
    CHECK(s[0] == 0.25f);
    free(s);
}

static void test_extremes(void) {
    /* constant rows, a row of huge values (scale clamped to the f16 range), tiny values */
    const uint64_t shape[2] = {3, 32};
    float src[96];
    for (int j = 0; j < 32; j++) {
        src[j] = 0.5f;
        src[32 + j] = j % 2 ? 3.0e6f : -3.0e6f;
        src[64 + j] = (float)(j - 16) * 1e-9f;
    }
    for (size_t k = 0; k < NDT; k++) {
        cmf_dtype dt = k_all[k];
        float *dec = roundtrip(dt, 2, shape, src, 96);
        int finite = 1;
        for (int i = 0; i < 96; i++)
            finite &= isfinite(dec[i]) || dt == CMF_DT_F16;
        CHECK_MSG(finite, "%s: non-finite decode of finite input", cmf_dtype_name(dt));
        if (dt != CMF_DT_Q1T && dt != CMF_DT_Q1S)
            CHECK_MSG(fabsf(dec[0] - 0.5f) < 0.01f, "%s: constant row decodes to %g",
                      cmf_dtype_name(dt), dec[0]);
        free(dec);
    }
}

/* weights near FLT_MAX: scales saturate at the f16 maximum instead of decoding to inf/NaN
 * (regressions: q4tp's ladder overflowed, q1s/q1t outlier gains became inf - inf) */
static void test_huge(void) {
    const uint64_t shape[2] = {2, 64};
    float src[128];
    /* row 0: a tile of huge values next to a tile holding one near-denormal (a 143-octave ladder);
     * row 1: mixed huge and small values */
    memset(src, 0, sizeof src);
    for (int j = 0; j < 21; j++)
        src[j] = -6.5158231e35f;
    src[23] = 2.3509886e-38f;
    src[24] = 2.5916551e-37f;
    src[25] = -3.3570603e38f;
    src[32] = 4.0217e-43f;
    for (int j = 64; j < 128; j++)
        src[j] = j % 7 == 0 ? 3.35e38f : (float)(j % 5) * 1e-3f;
    src[100] = -3.4e38f;
    static const cmf_dtype dts[] = {CMF_DT_Q4_BLOCK, CMF_DT_Q4_TILED, CMF_DT_Q4TP, CMF_DT_VBIT,
                                    CMF_DT_VBIT_RO,  CMF_DT_Q1,       CMF_DT_Q1S,  CMF_DT_Q1T};
    for (size_t k = 0; k < sizeof dts / sizeof dts[0]; k++) {
        float *dec = roundtrip(dts[k], 2, shape, src, 128);
        int finite = 1;
        for (int i = 0; i < 128; i++)
            finite &= isfinite(dec[i]);
        CHECK_MSG(finite, "%s: non-finite decode of huge finite input", cmf_dtype_name(dts[k]));
        free(dec);
    }
}

int main(void) {
    test_huge();
    test_zeros();
    test_nd_rows();
    test_extremes();
    TEST_DONE();
}
