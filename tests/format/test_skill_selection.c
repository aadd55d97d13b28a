/* The skills registry's selection block (spec §9): base64 against RFC 4648's vectors, the f16
 * round trip of mean and basis, every malformed field refused by name, and the reconstruction
 * error E against a hand computation. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cortiq/skill.h"
#include "test.h"

static void base64_vectors(void) {
    static const char *plain[] = {"", "f", "fo", "foo", "foob", "fooba", "foobar"};
    static const char *coded[] = {"", "Zg==", "Zm8=", "Zm9v", "Zm9vYg==", "Zm9vYmE=", "Zm9vYmFy"};
    for (int i = 0; i < 7; i++) {
        char *e = cmf_base64_encode(plain[i], strlen(plain[i]));
        CHECK_MSG(e && !strcmp(e, coded[i]), "encode '%s' -> '%s'", plain[i], e ? e : "(null)");
        free(e);
        uint8_t *d;
        size_t n;
        CHECK(cmf_base64_decode(coded[i], strlen(coded[i]), &d, &n));
        CHECK(n == strlen(plain[i]) && !memcmp(d, plain[i], n));
        free(d);
    }
    static const char *junk[] = {"Zg=", "Z===", "Zm9v!A==", "=Zm9", "Zg==Zg=="};
    for (int i = 0; i < 5; i++) {
        uint8_t *d;
        size_t n;
        CHECK_MSG(!cmf_base64_decode(junk[i], strlen(junk[i]), &d, &n), "accepted '%s'", junk[i]);
    }
}

static void round_trip_and_error(void) {
    enum { H = 8 };
    float mean[H], basis[2 * H] = {0};
    for (int i = 0; i < H; i++)
        mean[i] = 0.25f * (float)i - 1.0f; /* f16-exact */
    basis[0] = 1.0f;                       /* e0 */
    basis[H + 1] = 1.0f;                   /* e1 */
    cmf_skill_selection s = {.phi_layer = 3, .rank = 2, .hidden = H, .mean = mean, .basis = basis};
    char *json = cmf_skill_selection_encode(&s);
    CHECK(json != NULL);
    cmf_skill_selection d;
    CHECK_STATUS(cmf_skill_selection_decode(json, H, "t", &d, &t_err_), CMF_OK);
    CHECK(d.phi_layer == 3 && d.rank == 2 && !d.unit);
    CHECK(d.mean && !memcmp(d.mean, mean, sizeof mean));
    CHECK(d.basis && !memcmp(d.basis, basis, sizeof basis));
    /* phi = mean + (1, 2, 3, 0...): the basis spans the first two, so E = 9 / |phi|^2 */
    float phi[H];
    double pp = 0;
    for (int i = 0; i < H; i++)
        phi[i] = mean[i] + (i == 0   ? 1.0f
                            : i == 1 ? 2.0f
                            : i == 2 ? 3.0f
                                     : 0.0f),
        pp += phi[i] * phi[i];
    double raw, got_pp;
    cmf_skill_selection_error(&d, phi, &raw, &got_pp);
    CHECK_MSG(fabs(raw - 9.0) < 1e-9 && fabs(got_pp - pp) < 1e-9, "raw %g pp %g", raw, got_pp);
    cmf_skill_selection_free(&d);
    /* the wrong hidden size, an unknown metric, a bad payload, a missing rank: refused */
    CHECK_STATUS(cmf_skill_selection_decode(json, H + 1, "t", &d, &t_err_), CMF_E_PARSE);
    free(json);
    static const char *bad[] = {
        "{\"metric\":\"cosine\",\"phi_layer\":0,\"rank\":0,\"mean\":\"\",\"basis\":\"\"}",
        "{\"metric\":\"mse\",\"phi_layer\":0,\"rank\":0,\"mean\":\"!!!!\",\"basis\":\"\"}",
        "{\"metric\":\"mse\",\"phi_layer\":0,\"mean\":\"AAA=\",\"basis\":\"AAA=AAA=\"}",
        "{\"metric\":\"mse\",\"phi_layer\":-1,\"rank\":0,\"mean\":\"AAA=\",\"basis\":\"\"}", "[]"};
    for (int i = 0; i < 5; i++)
        CHECK_STATUS(cmf_skill_selection_decode(bad[i], 1, "t", &d, &t_err_), CMF_E_PARSE);
    /* one f16 value of hidden 1: accepted ("AAA=" = 0x0000) */
    CHECK_STATUS(cmf_skill_selection_decode("{\"phi_layer\":0,\"rank\":0,\"mean\":\"AAA=\","
                                            "\"basis\":\"\"}",
                                            1, "t", &d, &t_err_),
                 CMF_OK);
    cmf_skill_selection_free(&d);
    /* without "rank" (the spec's example) the basis' length gives it: 2 rows of hidden 1 */
    CHECK_STATUS(cmf_skill_selection_decode("{\"phi_layer\":0,\"mean\":\"AAA=\","
                                            "\"basis\":\"AAAAAA==\"}",
                                            1, "t", &d, &t_err_),
                 CMF_OK);
    CHECK(d.rank == 2);
    cmf_skill_selection_free(&d);
}

int main(void) {
    base64_vectors();
    round_trip_and_error();
    TEST_DONE();
}
