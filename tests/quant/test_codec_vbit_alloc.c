/* test_codec_vbit_alloc.c - vbit water-filling: the budget holds, louder rows get more bits, the
 * family variant shares one budget across experts (a quiet expert is pinned to the floor), the
 * B-field moves bits toward frequently routed rows, and encode with a given bit vector. */
#include <stdint.h>
#include <stdlib.h>

#include "common/test.h"
#include "cortiq/quant.h"
#include "quant/quant_matrix.h"

static double mean_bits(const uint8_t *b, uint64_t n) {
    double s = 0;
    for (uint64_t i = 0; i < n; i++)
        s += b[i];
    return s / (double)n;
}

static bool is_level(unsigned b) {
    return b == 3 || b == 4 || b == 5 || b == 6 || b == 8;
}

static void scale_rows(float *w, uint64_t rows, uint64_t in, uint64_t r0, uint64_t r1, float f) {
    for (uint64_t r = r0; r < r1 && r < rows; r++)
        for (uint64_t j = 0; j < in; j++)
            w[r * in + j] *= f;
}

static void test_single(void) {
    enum { R = 64, IN = 128 };
    float *w = malloc(R * IN * sizeof *w);
    qm_gaussian(w, R, IN, 7);
    scale_rows(w, R, IN, 0, 8, 16.0f);       /* loud rows */
    scale_rows(w, R, IN, 56, 64, 1.0f / 16); /* quiet rows */
    uint8_t bits[R];
    CHECK_STATUS(cmf_vbit_allocate(R, IN, w, NULL, 4.25, bits, &t_err_), CMF_OK);
    double m = mean_bits(bits, R);
    CHECK_MSG(m <= 4.25 && m > 4.0, "mean %.3f", m);
    int ok = 1;
    for (int r = 0; r < R; r++)
        ok &= is_level(bits[r]);
    CHECK(ok);
    for (int r = 0; r < 8; r++)
        CHECK(bits[r] > bits[30]);
    for (int r = 56; r < 64; r++)
        CHECK(bits[r] == 3);
    /* targets below the floor / above the top */
    CHECK_STATUS(cmf_vbit_allocate(R, IN, w, NULL, 2.0, bits, &t_err_), CMF_OK);
    CHECK(mean_bits(bits, R) == 3.0);
    CHECK_STATUS(cmf_vbit_allocate(R, IN, w, NULL, 9.0, bits, &t_err_), CMF_OK);
    CHECK(mean_bits(bits, R) == 8.0);
    CHECK_STATUS(cmf_vbit_allocate(R, IN, w, NULL, NAN, bits, &t_err_), CMF_E_INVALID_ARG);
    CHECK_STATUS(cmf_vbit_allocate(R, 100, w, NULL, 4.25, bits, &t_err_), CMF_E_INVALID_ARG);

    /* B-field: routing weight x64 on rows 30..33 lifts them above their unweighted neighbours */
    float bw[R];
    for (int r = 0; r < R; r++)
        bw[r] = r >= 30 && r < 34 ? 64.0f : 1.0f;
    uint8_t plain[R];
    CHECK_STATUS(cmf_vbit_allocate(R, IN, w, NULL, 4.25, plain, &t_err_), CMF_OK);
    CHECK_STATUS(cmf_vbit_allocate(R, IN, w, bw, 4.25, bits, &t_err_), CMF_OK);
    for (int r = 30; r < 34; r++)
        CHECK_MSG(bits[r] > plain[r], "row %d: %u vs %u", r, bits[r], plain[r]);
    CHECK(mean_bits(bits, R) <= 4.25);

    /* encode through opts uses the same allocation */
    const uint64_t shape[2] = {R, IN};
    cmf_quant_opts o;
    cmf_quant_opts_default(&o);
    o.row_weights = bw;
    uint8_t *out = NULL;
    size_t len = 0;
    CHECK_STATUS(cmf_quant_encode(CMF_DT_VBIT_RO, 2, shape, w, &o, &out, &len, &t_err_), CMF_OK);
    CHECK(out && !memcmp(out, bits, R));
    free(out);
    free(w);
}

static void test_family(void) {
    /* 4 experts of one projection: expert 0 loud (x8), expert 3 quiet (x1/8). */
    enum { E = 4, R = 32, IN = 64 };
    float *w[E];
    uint8_t *bits[E];
    cmf_vbit_member mem[E];
    for (int e = 0; e < E; e++) {
        w[e] = malloc(R * IN * sizeof *w[e]);
        bits[e] = malloc(R);
        qm_gaussian(w[e], R, IN, 100 + (uint64_t)e);
        if (e == 0) scale_rows(w[e], R, IN, 0, R, 8.0f);
        if (e == 3) scale_rows(w[e], R, IN, 0, R, 1.0f / 8);
        mem[e] = (cmf_vbit_member){R, IN, w[e], NULL};
    }
    CHECK_STATUS(cmf_vbit_allocate_family(E, mem, 4.25, bits, &t_err_), CMF_OK);
    double total = 0;
    for (int e = 0; e < E; e++)
        total += mean_bits(bits[e], R);
    CHECK_MSG(total / E <= 4.25 && total / E > 4.0, "family mean %.3f", total / E);
    CHECK(mean_bits(bits[0], R) > mean_bits(bits[1], R));
    CHECK(mean_bits(bits[0], R) >= 6.0);
    CHECK(mean_bits(bits[3], R) == 3.0); /* quiet expert pinned to the floor */
    /* independent allocation would give every expert about the target instead */
    uint8_t alone[R];
    CHECK_STATUS(cmf_vbit_allocate(R, IN, w[3], NULL, 4.25, alone, &t_err_), CMF_OK);
    CHECK(mean_bits(alone, R) > 4.0);
    /* the joint result equals allocating the concatenated matrix */
    float *cat = malloc(E * R * IN * sizeof *cat);
    for (int e = 0; e < E; e++)
        memcpy(cat + (size_t)e * R * IN, w[e], R * IN * sizeof *cat);
    uint8_t *cbits = malloc(E * R);
    CHECK_STATUS(cmf_vbit_allocate(E * R, IN, cat, NULL, 4.25, cbits, &t_err_), CMF_OK);
    for (int e = 0; e < E; e++)
        CHECK(!memcmp(cbits + e * R, bits[e], R));
    /* encode each member with its bits; rows decode to the allocated precision */
    const uint64_t shape[2] = {R, IN};
    for (int e = 0; e < E; e++) {
        uint8_t *out = NULL;
        size_t len = 0;
        CHECK_STATUS(cmf_vbit_encode(CMF_DT_VBIT, R, IN, w[e], bits[e], &out, &len, &t_err_),
                     CMF_OK);
        CHECK_STATUS(cmf_quant_validate(CMF_DT_VBIT, 2, shape, out, len, "expert", &t_err_),
                     CMF_OK);
        free(out);
    }
    uint8_t badbits[R];
    memset(badbits, 7, R);
    uint8_t *out = NULL;
    size_t len = 0;
    CHECK_STATUS(cmf_vbit_encode(CMF_DT_VBIT, R, IN, w[0], badbits, &out, &len, &t_err_),
                 CMF_E_INVALID_ARG);
    CHECK(out == NULL);
    free(cat);
    free(cbits);
    for (int e = 0; e < E; e++) {
        free(w[e]);
        free(bits[e]);
    }
}

/* the positive side of [-L, L+1] is used: max 4 at 3 bits (L = 3) gives scale 1, code 7 (0b111) */
static void test_asymmetric_scale(void) {
    float src[32] = {4, -1, 2};
    const uint8_t bits[1] = {3};
    const uint64_t shape[2] = {1, 32};
    uint8_t *out = NULL;
    size_t len = 0;
    CHECK_STATUS(cmf_vbit_encode(CMF_DT_VBIT, 1, 32, src, bits, &out, &len, &t_err_), CMF_OK);
    CHECK(out && len == 1 + 2 + 12 && out[1] == 0x00 && out[2] == 0x3C); /* scale f16 1.0 */
    CHECK(out && out[3] == 0xEA); /* u = 7, 2, 5, 3...: 111 010 10|1 011 ... */
    float dec[32];
    CHECK(out && cmf_quant_dequant(CMF_DT_VBIT, 2, shape, out, len, dec, NULL) == CMF_OK);
    CHECK(out && !memcmp(dec, src, sizeof dec));
    free(out);
}

int main(void) {
    test_asymmetric_scale();
    test_single();
    test_family();
    TEST_DONE();
}
