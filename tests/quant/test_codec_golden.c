/* test_codec_golden.c - byte-exact layouts of every live dtype (spec §3.2) on small tensors whose
 * bytes can be derived by hand; each expected payload is written out literally, then decoded back.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/test.h"
#include "cortiq/quant.h"

static void dump(const uint8_t *p, size_t n) {
    for (size_t i = 0; i < n; i++)
        fprintf(stderr, "%02X%s", p[i], (i + 1) % 16 ? " " : "\n");
    fputc('\n', stderr);
}

/* Encode src as dt and compare with want[want_len]; then validate and dequantize, and compare
 * with the expected reconstruction `back` (exact float equality; NULL skips). */
static void golden(const char *what, cmf_dtype dt, unsigned ndim, const uint64_t *shape,
                   const float *src, const cmf_quant_opts *opts, const uint8_t *want,
                   size_t want_len, const float *back) {
    uint8_t *out = NULL;
    size_t len = 0;
    cmf_err err;
    cmf_err_clear(&err);
    cmf_status st = cmf_quant_encode(dt, ndim, shape, src, opts, &out, &len, &err);
    CHECK_MSG(st == CMF_OK, "%s: encode: %s", what, err.msg);
    if (st != CMF_OK) return;
    CHECK_MSG(len == want_len && !memcmp(out, want, want_len),
              "%s: %zu bytes differ from the golden %zu", what, len, want_len);
    if (len != want_len || memcmp(out, want, want_len)) dump(out, len);
    st = cmf_quant_validate(dt, ndim, shape, out, len, what, &err);
    CHECK_MSG(st == CMF_OK, "%s: validate: %s", what, err.msg);
    uint64_t n = 1;
    for (unsigned i = 0; i < ndim; i++)
        n *= shape[i];
    float *dec = calloc(n, sizeof *dec);
    st = cmf_quant_dequant(dt, ndim, shape, out, len, dec, &err);
    CHECK_MSG(st == CMF_OK, "%s: dequant: %s", what, err.msg);
    if (back)
        for (uint64_t i = 0; i < n; i++)
            CHECK_MSG(dec[i] == back[i], "%s: [%llu] %g != %g", what, (unsigned long long)i, dec[i],
                      back[i]);
    /* row decode agrees with the whole-tensor decode */
    uint64_t rows, cols;
    CHECK(cmf_quant_rows(ndim, shape, &rows, &cols));
    float *row = calloc(cols, sizeof *row);
    for (uint64_t r = 0; r < rows; r++) {
        st = cmf_quant_dequant_row(dt, ndim, shape, out, len, r, row, &err);
        CHECK_MSG(st == CMF_OK && !memcmp(row, dec + r * cols, cols * sizeof *row), "%s: row %llu",
                  what, (unsigned long long)r);
    }
    free(row);
    free(dec);
    free(out);
}

static void test_floats(void) {
    const uint64_t sh[1] = {3};
    const float src[3] = {1.0f, -2.0f, 0.5f};
    const uint8_t f32[] = {0x00, 0x00, 0x80, 0x3F, 0x00, 0x00, 0x00, 0xC0, 0x00, 0x00, 0x00, 0x3F};
    const uint8_t f16[] = {0x00, 0x3C, 0x00, 0xC0, 0x00, 0x38};
    const uint8_t bf16[] = {0x80, 0x3F, 0x00, 0xC0, 0x00, 0x3F};
    golden("f32", CMF_DT_F32, 1, sh, src, NULL, f32, sizeof f32, src);
    golden("f16", CMF_DT_F16, 1, sh, src, NULL, f16, sizeof f16, src);
    golden("bf16", CMF_DT_BF16, 1, sh, src, NULL, bf16, sizeof bf16, src);
}

static void test_q8_row(void) {
    /* row 0: absmax 127 -> scale 1.0; -63.5 and 2.5 round half to even; row 1 all zero -> scale 0
     */
    const uint64_t sh[2] = {2, 4};
    const float src[8] = {127, -63.5f, 2.5f, 1, 0, 0, 0, 0};
    const uint8_t want[] = {0x7F, 0xC0, 0x02, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x3C, 0x00, 0x00};
    const float back[8] = {127, -64, 2, 1, 0, 0, 0, 0};
    golden("q8_row", CMF_DT_Q8_ROW, 2, sh, src, NULL, want, sizeof want, back);
}

static void test_q8_2f(void) {
    /* column absmax {63.5, 254}, geometric mean 127 -> col field {0.5, 2}; row scales 1 and 0.5 */
    const uint64_t sh[2] = {2, 2};
    const float src[4] = {63.5f, 254, -31.75f, 127};
    const uint8_t want[] = {0x7F, 0x7F, 0x81, 0x7F, 0x00, 0x3C, 0x00, 0x38, 0x00, 0x38, 0x00, 0x40};
    golden("q8_2f", CMF_DT_Q8_2F, 2, sh, src, NULL, want, sizeof want, src);
}

static void test_q4(void) {
    /* 40 weights, 1-D: group 0 absmax 7 -> scale 1 (3.5 -> 4, -3.5 -> -4 half to even);
     * group 1 holds 8 weights + 24 zero padding, absmax 14 -> scale 2. Padding codes are 8. */
    const uint64_t sh[1] = {40};
    float src[40] = {0};
    src[0] = 7;
    src[1] = -7;
    src[2] = 3.5f;
    src[3] = -3.5f;
    src[32] = 14;
    float back[40] = {0};
    memcpy(back, src, sizeof back);
    back[2] = 4;
    back[3] = -4;
    uint8_t want[36];
    memset(want, 0x88, 32);
    want[0] = 0x1F; /* lo: 7+8=15, hi: -7+8=1 */
    want[1] = 0x4C; /* lo: 4+8=12, hi: -4+8=4 */
    want[16] = 0x8F;
    const uint8_t scales[4] = {0x00, 0x3C, 0x00, 0x40};
    memcpy(want + 32, scales, 4);
    golden("q4_block", CMF_DT_Q4_BLOCK, 1, sh, src, NULL, want, sizeof want, back);

    const uint64_t sh2[2] = {1, 32};
    uint8_t tile[18];
    tile[0] = 0x00;
    tile[1] = 0x3C;
    memcpy(tile + 2, want, 16);
    golden("q4_tiled", CMF_DT_Q4_TILED, 2, sh2, src, NULL, tile, sizeof tile, back);
}

static void test_q4tp(void) {
    /* tile 0 absmax 7 (ideal scale 1, log 0), tile 1 absmax 14 (ideal 2, log 1):
     * lo = 0 (0x0000), step = f16(1/31) = 0x2821; codes 0 and 31 (5-bit LSB-first: E0 03). */
    const uint64_t sh[2] = {1, 64};
    float src[64] = {0};
    src[0] = 7;
    src[1] = -3;
    src[32] = 14;
    src[33] = -6;
    uint8_t want[38];
    memset(want, 0x88, 32);
    want[0] = 0x5F;  /* 7 -> 15, -3 -> 5 */
    want[16] = 0x5F; /* 14/1.99996 -> 7 -> 15, -6/1.99996 -> -3 -> 5 */
    const uint8_t tail[6] = {0x00, 0x00, 0x21, 0x28, 0xE0, 0x03};
    memcpy(want + 32, tail, 6);
    golden("q4tp", CMF_DT_Q4TP, 2, sh, src, NULL, want, sizeof want, NULL);
}

static void test_q1(void) {
    /* even weights +1, odd -3: scale mean|w| = 2; bit = (w >= 0) -> 0x55 */
    const uint64_t sh[2] = {1, 32};
    float src[32], back[32];
    for (int j = 0; j < 32; j++) {
        src[j] = j % 2 ? -3.0f : 1.0f;
        back[j] = j % 2 ? -2.0f : 2.0f;
    }
    const uint8_t want[6] = {0x00, 0x40, 0x55, 0x55, 0x55, 0x55};
    golden("q1", CMF_DT_Q1, 2, sh, src, NULL, want, sizeof want, back);
}

static void test_q1s(void) {
    /* +1 x16 then -1 x16, w[5] = 100; budget 1/32 -> one outlier (index 5, f16 100 = 0x5640),
     * excluded from the scale, which becomes exactly 1. */
    const uint64_t sh[2] = {1, 32};
    float src[32];
    for (int j = 0; j < 32; j++)
        src[j] = j < 16 ? 1.0f : -1.0f;
    src[5] = 100;
    cmf_quant_opts o;
    cmf_quant_opts_default(&o);
    o.outlier_frac = 1.0 / 32;
    const uint8_t want[] = {0x00, 0x3C, 0xFF, 0xFF, 0x00, 0x00, 0x01, 0x00,
                            0x00, 0x00, 0x05, 0x00, 0x00, 0x00, 0x40, 0x56};
    golden("q1s", CMF_DT_Q1S, 2, sh, src, &o, want, sizeof want, src);
}

static void test_q1t(void) {
    /* row 0: j%3 -> {0, +2, -2}: level 2 (0x4000), digits 0,1,2 repeating, 5 per byte LSD first.
     * row 1: 50 at col 7, +1 at col 8, -1 at col 9: level 50 (0x5240) codes col 7; the +-1 fall
     * to 0; budget 1/64 -> one outlier: col 8 (tie with col 9 -> lower index), value 1.0. */
    const uint64_t sh[2] = {2, 32};
    float src[64] = {0};
    for (int j = 0; j < 32; j++)
        src[j] = j % 3 == 0 ? 0.0f : j % 3 == 1 ? 2.0f : -2.0f;
    src[32 + 7] = 50;
    src[32 + 8] = 1;
    src[32 + 9] = -1;
    float back[64];
    memcpy(back, src, sizeof back);
    back[32 + 9] = 0;
    cmf_quant_opts o;
    cmf_quant_opts_default(&o);
    o.outlier_frac = 1.0 / 64;
    const uint8_t want[] = {0x00, 0x40, 0x66, 0x41, 0xC4, 0x66, 0x41, 0xC4, 0x03, /* row 0 tile */
                            0x40, 0x52, 0x00, 0x09, 0x00, 0x00, 0x00, 0x00, 0x00, /* row 1 tile */
                            0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01,
                            0x00, 0x00, 0x00, 0x08, 0x00, 0x00, 0x3C};
    golden("q1t", CMF_DT_Q1T, 2, sh, src, &o, want, sizeof want, back);
    uint8_t d[5];
    CHECK(cmf_q1t_unpack_byte(0x66, d) && d[0] == 0 && d[1] == 1 && d[2] == 2 && d[3] == 0 &&
          d[4] == 1);
    CHECK(!cmf_q1t_unpack_byte(243, d));
}

static void test_vbit(void) {
    /* row 0 at 3 bits (L=3): 3, -3, 1, 0... -> u 6, 0, 4, 3...; row 1 at 4 bits (L=7): 7, -7, 0...
     * -> u 14, 0, 7...; both scales 1.0. MSB-first packing. */
    const uint64_t sh[2] = {2, 32};
    float src[64] = {0};
    src[0] = 3;
    src[1] = -3;
    src[2] = 1;
    src[32] = 7;
    src[33] = -7;
    const uint8_t bits[2] = {3, 4};
    const uint8_t head[6] = {0x03, 0x04, 0x00, 0x3C, 0x00, 0x3C};
    const uint8_t row0[12] = {0xC2, 0x36, 0xDB, 0x6D, 0xB6, 0xDB,
                              0x6D, 0xB6, 0xDB, 0x6D, 0xB6, 0xDB};
    const uint8_t offs[12] = {0, 0, 0, 0, 12, 0, 0, 0, 28, 0, 0, 0};
    uint8_t want[46];
    memcpy(want, head, 6);
    memcpy(want + 6, row0, 12);
    want[18] = 0xE0;
    memset(want + 19, 0x77, 15);
    for (int ro = 0; ro < 2; ro++) {
        uint8_t exp[46];
        size_t n = 0;
        memcpy(exp, want, 6);
        n = 6;
        if (ro) {
            memcpy(exp + n, offs, 12);
            n += 12;
        }
        memcpy(exp + n, want + 6, 28);
        n += 28;
        cmf_dtype dt = ro ? CMF_DT_VBIT_RO : CMF_DT_VBIT;
        uint8_t *out = NULL;
        size_t len = 0;
        cmf_err err;
        CHECK_STATUS(cmf_vbit_encode(dt, 2, 32, src, bits, &out, &len, &t_err_), CMF_OK);
        CHECK_MSG(out && len == n && !memcmp(out, exp, n), "%s golden bytes",
                  ro ? "vbit_ro" : "vbit");
        if (out && (len != n || memcmp(out, exp, n))) dump(out, len);
        float dec[64];
        CHECK(out && cmf_quant_dequant(dt, 2, sh, out, len, dec, &err) == CMF_OK);
        CHECK(out && !memcmp(dec, src, sizeof dec));
        free(out);
    }
}

static void test_policy(void) {
    const uint64_t v[1] = {4096}, small[2] = {4, 4}, m[2] = {64, 64}, odd[2] = {64, 48},
                   wide[2] = {2, 65536}, cube[3] = {4, 8, 32};
    CHECK(cmf_quant_policy_dtype(CMF_DT_Q4_TILED, 1, v) == CMF_DT_F16);
    CHECK(cmf_quant_policy_dtype(CMF_DT_F32, 1, v) == CMF_DT_F16);
    CHECK(cmf_quant_policy_dtype(CMF_DT_Q8_ROW, 2, small) == CMF_DT_F16);
    CHECK(cmf_quant_policy_dtype(CMF_DT_Q4_TILED, 2, m) == CMF_DT_Q4_TILED);
    CHECK(cmf_quant_policy_dtype(CMF_DT_Q4_TILED, 2, odd) == CMF_DT_F16);
    CHECK(cmf_quant_policy_dtype(CMF_DT_Q8_ROW, 2, odd) == CMF_DT_Q8_ROW);
    CHECK(cmf_quant_policy_dtype(CMF_DT_Q1T, 2, wide) == CMF_DT_F16);
    CHECK(cmf_quant_policy_dtype(CMF_DT_Q1S, 2, wide) == CMF_DT_Q1S);
    CHECK(cmf_quant_policy_dtype(CMF_DT_Q4_BLOCK, 3, cube) == CMF_DT_Q4_BLOCK);
    CHECK(cmf_quant_policy_dtype(CMF_DT_VBIT, 3, cube) == CMF_DT_F16);
}

static void test_refusals(void) {
    const uint64_t odd[2] = {2, 48}, cube[3] = {2, 2, 32}, wide[2] = {1, 65536 + 32},
                   zero[2] = {0, 32};
    float *src = calloc(65536 + 32, sizeof *src);
    uint8_t *out = NULL;
    size_t len;
    CHECK_STATUS(cmf_quant_encode(CMF_DT_Q4_TILED, 2, odd, src, NULL, &out, &len, &t_err_),
                 CMF_E_UNSUPPORTED);
    CHECK_STATUS(cmf_quant_encode(CMF_DT_VBIT, 3, cube, src, NULL, &out, &len, &t_err_),
                 CMF_E_UNSUPPORTED);
    CHECK_STATUS(cmf_quant_encode(CMF_DT_Q1T, 2, wide, src, NULL, &out, &len, &t_err_),
                 CMF_E_UNSUPPORTED);
    CHECK_STATUS(cmf_quant_encode(CMF_DT_Q8_ROW, 2, zero, src, NULL, &out, &len, &t_err_),
                 CMF_E_UNSUPPORTED);
    CHECK_STATUS(cmf_quant_encode(CMF_DT_MIX8_4, 2, odd, src, NULL, &out, &len, &t_err_),
                 CMF_E_UNSUPPORTED);
    src[3] = NAN;
    CHECK_STATUS(cmf_quant_encode(CMF_DT_Q8_ROW, 2, odd, src, NULL, &out, &len, &t_err_),
                 CMF_E_UNSUPPORTED);
    CHECK_STATUS(cmf_quant_encode(CMF_DT_F16, 2, odd, src, NULL, &out, &len, &t_err_), CMF_OK);
    free(out);
    free(src);
}

int main(void) {
    test_floats();
    test_q8_row();
    test_q8_2f();
    test_q4();
    test_q4tp();
    test_q1();
    test_q1s();
    test_q1t();
    test_vbit();
    test_policy();
    test_refusals();
    TEST_DONE();
}
