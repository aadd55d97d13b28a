/* test_codec_adversarial.c - malformed payloads of every variable-length dtype (truncated, counts
 * too big, offsets out of range, indices out of range, non-monotonic row_ptr/offsets, bad codes)
 * are CMF_E_PARSE from validate, dequant and the affected dequant_row, and never read outside the
 * span (each payload sits in an exactly-sized heap block, so ASan builds catch any over-read). */
#include <stdint.h>
#include <stdlib.h>

#include "common/bytes.h"
#include "common/test.h"
#include "cortiq/quant.h"
#include "quant/quant_matrix.h"

#define R  4
#define IN 64
static const uint64_t k_shape[2] = {R, IN};
static float g_src[R * IN];

static uint8_t *encode(cmf_dtype dt, double frac, size_t *len) {
    cmf_quant_opts o;
    cmf_quant_opts_default(&o);
    o.outlier_frac = frac;
    uint8_t *out = NULL;
    cmf_err err;
    CHECK_MSG(cmf_quant_encode(dt, 2, k_shape, g_src, &o, &out, len, &err) == CMF_OK, "%s",
              err.msg);
    return out;
}

/* Run every decoder over bytes[0..len) copied to an exact-size block; expect validate and the
 * whole dequant to give `want`, row `bad_row` (if >= 0) to fail too, and no crash anywhere. */
static void expect(const char *what, cmf_dtype dt, const uint8_t *bytes, size_t len,
                   cmf_status want, int bad_row) {
    uint8_t *p = malloc(len ? len : 1);
    memcpy(p, bytes, len);
    float out[R * IN];
    cmf_err err;
    cmf_status st = cmf_quant_validate(dt, 2, k_shape, p, len, what, &err);
    CHECK_MSG(st == want, "%s: validate gave %s (%s)", what, cmf_status_name(st), err.msg);
    st = cmf_quant_dequant(dt, 2, k_shape, p, len, out, &err);
    CHECK_MSG(st == want, "%s: dequant gave %s", what, cmf_status_name(st));
    for (int r = 0; r < R; r++) {
        st = cmf_quant_dequant_row(dt, 2, k_shape, p, len, (uint64_t)r, out, &err);
        if (r == bad_row)
            CHECK_MSG(st == CMF_E_PARSE, "%s: row %d gave %s", what, r, cmf_status_name(st));
        CHECK(st == CMF_OK || st == CMF_E_PARSE);
    }
    free(p);
}

static void test_vbit(cmf_dtype dt) {
    bool ro = dt == CMF_DT_VBIT_RO;
    size_t len;
    uint8_t *v = encode(dt, 0, &len);
    uint8_t *m = malloc(len + 8);
    const size_t offs = R + R * (IN / 32) * 2; /* offsets table of vbit_ro */
    expect("valid", dt, v, len, CMF_OK, -1);
    expect("truncated by one", dt, v, len - 1, CMF_E_PARSE, ro ? R - 1 : R - 1);
    expect("header cut", dt, v, R - 1, CMF_E_PARSE, 0);
    expect("empty", dt, v, 0, CMF_E_PARSE, 0);
    memcpy(m, v, len);
    m[len] = 0;
    expect("trailing byte", dt, m, len + 1, CMF_E_PARSE, -1);
    const uint8_t bad_bits[] = {0, 1, 2, 7, 9, 255};
    for (size_t i = 0; i < sizeof bad_bits; i++) {
        memcpy(m, v, len);
        m[2] = bad_bits[i];
        expect("bit width not a level", dt, m, len, CMF_E_PARSE, 2);
    }
    memcpy(m, v, len);
    m[0] = 8; /* row 0 claims more bytes than the span has */
    for (int r = 1; r < R; r++)
        m[r] = 8;
    expect("bit widths overrun the span", dt, m, len, CMF_E_PARSE, ro ? -1 : R - 1);
    if (ro) {
        memcpy(m, v, len);
        st_u32(m + offs + 4 * 1, 0xFFFFFFF0u);
        expect("offset out of range", dt, m, len, CMF_E_PARSE, 1);
        memcpy(m, v, len);
        uint32_t o1 = ld_u32(m + offs + 4), o2 = ld_u32(m + offs + 8);
        st_u32(m + offs + 4, o2);
        st_u32(m + offs + 8, o1);
        expect("offsets not monotonic", dt, m, len, CMF_E_PARSE, 1);
        memcpy(m, v, len);
        st_u32(m + offs, 1);
        expect("offsets[0] != 0", dt, m, len, CMF_E_PARSE, 0);
        memcpy(m, v, len);
        st_u32(m + offs + 4 * R, ld_u32(m + offs + 4 * R) + 1);
        expect("offsets[rows] past the area", dt, m, len, CMF_E_PARSE, R - 1);
    }
    /* NaN / inf scales decode without error */
    memcpy(m, v, len);
    st_u16(m + R, 0x7E00);
    st_u16(m + R + 2, 0x7C00);
    expect("nan scale", dt, m, len, CMF_OK, -1);
    free(m);
    free(v);
}

static void test_q1s(void) {
    size_t len;
    uint8_t *v = encode(CMF_DT_Q1S, 0.05, &len);
    const size_t base = R * (IN / 32) * 6;
    uint32_t count = ld_u32(v + base);
    CHECK(count == 13); /* round(0.05 * 256) */
    uint8_t *m = malloc(len + 8);
    expect("valid", CMF_DT_Q1S, v, len, CMF_OK, -1);
    expect("truncated by one", CMF_DT_Q1S, v, len - 1, CMF_E_PARSE, 0);
    expect("count cut", CMF_DT_Q1S, v, base + 2, CMF_E_PARSE, 0);
    expect("base cut", CMF_DT_Q1S, v, base - 1, CMF_E_PARSE, 0);
    memcpy(m, v, len);
    memset(m + len, 0, 6);
    expect("trailing entry not counted", CMF_DT_Q1S, m, len + 6, CMF_E_PARSE, 0);
    const uint32_t counts[] = {count + 1, 0xFFFFFFFFu, 0x2AAAAAABu, 0};
    for (size_t i = 0; i < 4; i++) {
        memcpy(m, v, len);
        st_u32(m + base, counts[i]);
        expect("count disagrees with span", CMF_DT_Q1S, m, len, CMF_E_PARSE, 0);
    }
    const uint32_t idxs[] = {R * IN, 0xFFFFFFFFu};
    for (size_t i = 0; i < 2; i++) {
        memcpy(m, v, len);
        st_u32(m + base + 4 + 6 * 3, idxs[i]);
        expect("flat index out of range", CMF_DT_Q1S, m, len, CMF_E_PARSE, 0);
    }
    memcpy(m, v, len);
    st_u16(m + base + 4 + 4, 0x7E00);
    st_u16(m, 0x7C00);
    expect("nan overlay / inf scale", CMF_DT_Q1S, m, len, CMF_OK, -1);
    free(m);
    free(v);
}

static void test_q1t(void) {
    size_t len;
    uint8_t *v = encode(CMF_DT_Q1T, 0.05, &len);
    const size_t base = R * (IN / 32) * 9, rp = base, ent = base + 4 * (R + 1);
    uint32_t total = ld_u32(v + rp + 4 * R);
    CHECK(total == 13);
    uint8_t *m = malloc(len + 8);
    expect("valid", CMF_DT_Q1T, v, len, CMF_OK, -1);
    expect("truncated by one", CMF_DT_Q1T, v, len - 1, CMF_E_PARSE, 0);
    expect("truncated by an entry", CMF_DT_Q1T, v, len - 4, CMF_E_PARSE, -1);
    expect("row_ptr cut", CMF_DT_Q1T, v, ent - 1, CMF_E_PARSE, 0);
    memcpy(m, v, len);
    st_u32(m + rp + 4 * R, 0xFFFFFFFFu);
    expect("row_ptr[rows] too big", CMF_DT_Q1T, m, len, CMF_E_PARSE, R - 1);
    memcpy(m, v, len);
    st_u32(m + rp + 4 * 2, total);
    st_u32(m + rp + 4 * 3, 0);
    expect("row_ptr not monotonic", CMF_DT_Q1T, m, len, CMF_E_PARSE, 2);
    memcpy(m, v, len);
    st_u32(m + rp, 1);
    expect("row_ptr[0] != 0", CMF_DT_Q1T, m, len, CMF_E_PARSE, -1);
    memcpy(m, v, len);
    st_u32(m + rp + 4, 0x7FFFFFFFu);
    expect("row_ptr[1] out of range", CMF_DT_Q1T, m, len, CMF_E_PARSE, 0);
    /* a column index >= in in every entry */
    memcpy(m, v, len);
    for (uint32_t i = 0; i < total; i++)
        st_u16(m + ent + 4 * i, i % 2 ? 0xFFFF : IN);
    expect("col out of range", CMF_DT_Q1T, m, len, CMF_E_PARSE, -1);
    const uint8_t codes[] = {243, 255};
    for (size_t i = 0; i < 2; i++) {
        memcpy(m, v, len);
        m[9 * 5 + 2 + 3] = codes[i]; /* tile 5 = row 2 */
        expect("code byte > 242", CMF_DT_Q1T, m, len, CMF_E_PARSE, 2);
    }
    memcpy(m, v, len);
    st_u16(m, 0x7E00);
    expect("nan scale", CMF_DT_Q1T, m, len, CMF_OK, -1);
    free(m);
    free(v);
}

static void test_fixed(void) {
    static const cmf_dtype dts[] = {CMF_DT_F32,      CMF_DT_F16,   CMF_DT_BF16,
                                    CMF_DT_Q8_ROW,   CMF_DT_Q8_2F, CMF_DT_Q4_BLOCK,
                                    CMF_DT_Q4_TILED, CMF_DT_Q4TP,  CMF_DT_Q1};
    for (size_t k = 0; k < sizeof dts / sizeof dts[0]; k++) {
        size_t len;
        uint8_t *v = encode(dts[k], 0, &len);
        uint8_t *m = calloc(len + 1, 1);
        memcpy(m, v, len);
        expect("fixed valid", dts[k], m, len, CMF_OK, -1);
        expect("fixed short", dts[k], m, len - 1, CMF_E_PARSE, 0);
        expect("fixed long", dts[k], m, len + 1, CMF_E_PARSE, 0);
        free(m);
        free(v);
    }
    /* shapes a dtype cannot hold are Parse errors when reading */
    const uint64_t odd[2] = {2, 48};
    uint8_t b[256] = {0};
    CHECK_STATUS(cmf_quant_validate(CMF_DT_Q4_TILED, 2, odd, b, 108, "t", &t_err_), CMF_E_PARSE);
    CHECK_STATUS(cmf_quant_validate(CMF_DT_U8, 2, odd, b, 96, "t", &t_err_), CMF_E_PARSE);
    CHECK_STATUS(cmf_quant_validate((cmf_dtype)200, 2, odd, b, 96, "t", &t_err_), CMF_E_PARSE);
}

int main(void) {
    qm_heavy(g_src, R, IN, 11);
    test_vbit(CMF_DT_VBIT);
    test_vbit(CMF_DT_VBIT_RO);
    test_q1s();
    test_q1t();
    test_fixed();
    TEST_DONE();
}
