/* test_kernel_codec.c - two independent readings of spec §3.2 must agree: the kernels'
 * scalar dequant (src/quant/kernel_scalar.c) against the codec's cmf_quant_dequant_row
 * (include/cortiq/quant.h), on random valid payloads of every dtype, and on payloads the
 * codec's own encoder wrote. Both must also accept the same payloads.
 * Equality is exact except q4tp, whose 2^x ladder may differ by float rounding (rel 1e-6). */
#include <math.h>

#include "common/test.h"
#include "cortiq/kernels.h"
#include "cortiq/quant.h"
#include "quant/kernel_gen.h"

static const cmf_dtype k_all[] = {CMF_DT_F32,      CMF_DT_F16,  CMF_DT_BF16,  CMF_DT_Q8_ROW,
                                  CMF_DT_Q4_BLOCK, CMF_DT_VBIT, CMF_DT_Q8_2F, CMF_DT_VBIT_RO,
                                  CMF_DT_Q4_TILED, CMF_DT_Q1,   CMF_DT_Q1S,   CMF_DT_Q1T,
                                  CMF_DT_Q4TP};
#define N_ALL (sizeof k_all / sizeof k_all[0])

static bool same(float a, float b, cmf_dtype dt) {
    if (a == b || (isnan(a) && isnan(b))) return true;
    return dt == CMF_DT_Q4TP && fabsf(a - b) <= 1e-6f * fabsf(b);
}

/* Compare every row of one payload; returns the number of differing rows (reports the first). */
static int compare(cmf_dtype dt, uint64_t rows, uint64_t cols, const uint8_t *p, uint64_t nb,
                   const char *what) {
    uint64_t shape[2] = {rows, cols};
    cmf_qmat m;
    cmf_err e1, e2;
    cmf_status s1 = cmf_qmat_init(&m, dt, rows, cols, p, nb, what, &e1);
    cmf_status s2 = cmf_quant_validate(dt, 2, shape, p, nb, what, &e2);
    CHECK_MSG(s1 == CMF_OK, "kernels refuse %s %s: %s", cmf_dtype_name(dt), what, e1.msg);
    CHECK_MSG(s2 == CMF_OK, "codec refuses %s %s: %s", cmf_dtype_name(dt), what, e2.msg);
    if (s1 != CMF_OK || s2 != CMF_OK) {
        if (s1 == CMF_OK) cmf_qmat_free(&m);
        return 1;
    }
    float *a = malloc(cols * sizeof *a), *b = malloc(cols * sizeof *b);
    int bad = 0;
    for (uint64_t r = 0; r < rows; r++) {
        cmf_qmat_dequant_row(&m, r, a);
        cmf_status st = cmf_quant_dequant_row(dt, 2, shape, p, nb, r, b, &e2);
        CHECK_MSG(st == CMF_OK, "%s", e2.msg);
        for (uint64_t i = 0; i < cols && st == CMF_OK; i++)
            if (!same(a[i], b[i], dt)) {
                if (!bad)
                    fprintf(stderr,
                            "  %s [%llu x %llu] %s: row %llu col %llu: kernels %.9g, codec %.9g\n",
                            cmf_dtype_name(dt), (unsigned long long)rows, (unsigned long long)cols,
                            what, (unsigned long long)r, (unsigned long long)i, a[i], b[i]);
                bad++;
                break;
            }
    }
    free(a);
    free(b);
    cmf_qmat_free(&m);
    return bad;
}

static void test_random_payloads(void) {
    static const uint64_t shapes[][2] = {{1, 32}, {5, 64}, {9, 160}, {3, 1024}, {4, 33}, {7, 100}};
    kg_rng rng = {2026};
    for (size_t d = 0; d < N_ALL; d++)
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
            for (int unsorted = 0; unsorted < 2; unsorted++) {
                cmf_dtype dt = k_all[d];
                uint64_t rows = shapes[s][0], cols = shapes[s][1];
                const cmf_dtype_traits *t = cmf_dtype_get(dt);
                if ((t->needs_in_mult32 || dt == CMF_DT_Q4TP) && cols % 32) continue;
                if (unsorted && dt != CMF_DT_Q1S && dt != CMF_DT_Q1T) continue;
                kg_opts o = {unsorted, 3, 0};
                uint64_t nb;
                uint8_t *p = kg_payload(dt, rows, cols, &rng, &o, &nb);
                int bad =
                    compare(dt, rows, cols, p, nb, unsorted ? "random unsorted overlay" : "random");
                CHECK_MSG(bad == 0, "%s [%llu x %llu]: %d rows differ", cmf_dtype_name(dt),
                          (unsigned long long)rows, (unsigned long long)cols, bad);
                free(p);
            }
}

static void test_encoded_payloads(void) {
    kg_rng rng = {99};
    uint64_t rows = 6, cols = 256, shape[2] = {rows, cols};
    float *src = malloc(rows * cols * sizeof *src);
    for (uint64_t i = 0; i < rows * cols; i++) {
        float u = kg_unif(&rng, -1, 1);
        src[i] = u * u * u * (i % 97 == 0 ? 20.0f : 1.0f); /* heavy-ish tail and outliers */
    }
    for (size_t d = 0; d < N_ALL; d++) {
        uint8_t *p = NULL;
        size_t nb = 0;
        cmf_err err;
        cmf_status st = cmf_quant_encode(k_all[d], 2, shape, src, NULL, &p, &nb, &err);
        CHECK_MSG(st == CMF_OK, "encode %s: %s", cmf_dtype_name(k_all[d]), err.msg);
        if (st != CMF_OK) continue;
        int bad = compare(k_all[d], rows, cols, p, nb, "encoded");
        CHECK_MSG(bad == 0, "%s encoded: %d rows differ", cmf_dtype_name(k_all[d]), bad);
        free(p);
    }
    free(src);
}

int main(void) {
    test_random_payloads();
    test_encoded_payloads();
    TEST_DONE();
}
