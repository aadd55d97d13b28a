/* test_codec_error.c - encode -> decode error bounds of every live dtype on a Gaussian and a
 * heavy-tailed matrix with outlier channels (64x256). The bounds sit ~15% above the values that
 * bench/bench_quant_error measures at this size (docs/QUANT.md lists both sizes). */
#include <stdint.h>
#include <stdlib.h>

#include "common/test.h"
#include "cortiq/quant.h"
#include "quant/quant_matrix.h"

#define ROWS 64
#define IN   256

typedef struct {
    cmf_dtype dt;
    double gauss, heavy; /* relative RMSE bound */
} bound;

static const bound k_bounds[] = {
    {CMF_DT_F32, 0.0, 0.0},          {CMF_DT_F16, 0.0003, 0.0003},
    {CMF_DT_BF16, 0.0019, 0.0019},   {CMF_DT_Q8_ROW, 0.0078, 0.028},
    {CMF_DT_Q8_2F, 0.0074, 0.0100},  {CMF_DT_Q4_BLOCK, 0.110, 0.187},
    {CMF_DT_Q4_TILED, 0.110, 0.187}, {CMF_DT_Q4TP, 0.109, 0.186},
    {CMF_DT_VBIT, 0.081, 0.122},     {CMF_DT_VBIT_RO, 0.081, 0.122},
    {CMF_DT_Q1, 0.68, 0.98},         {CMF_DT_Q1S, 0.615, 0.453},
    {CMF_DT_Q1T, 0.428, 0.385},
};

static double measure(cmf_dtype dt, const float *src, double *bits_per_weight) {
    const uint64_t shape[2] = {ROWS, IN};
    uint8_t *out = NULL, *again = NULL;
    size_t len = 0, len2 = 0;
    cmf_err err;
    float *dec = malloc(ROWS * IN * sizeof *dec);
    double e = 1e9;
    if (cmf_quant_encode(dt, 2, shape, src, NULL, &out, &len, &err) != CMF_OK) {
        CHECK_MSG(0, "%s encode: %s", cmf_dtype_name(dt), err.msg);
        goto done;
    }
    /* size rule of spec §3.2 */
    uint64_t lo = 0, hi = 0;
    CHECK(cmf_dtype_nbytes(dt, 2, shape, &lo, &hi, "t", &err) == CMF_OK);
    CHECK_MSG(len >= lo && len <= hi, "%s: %zu bytes outside [%llu, %llu]", cmf_dtype_name(dt), len,
              (unsigned long long)lo, (unsigned long long)hi);
    /* deterministic */
    CHECK(cmf_quant_encode(dt, 2, shape, src, NULL, &again, &len2, &err) == CMF_OK);
    CHECK_MSG(len2 == len && !memcmp(out, again, len), "%s encode is not deterministic",
              cmf_dtype_name(dt));
    if (cmf_quant_dequant(dt, 2, shape, out, len, dec, &err) != CMF_OK) {
        CHECK_MSG(0, "%s dequant: %s", cmf_dtype_name(dt), err.msg);
        goto done;
    }
    e = qm_rel_rmse(src, dec, ROWS * IN);
    *bits_per_weight = 8.0 * (double)len / (ROWS * IN);
done:
    free(out);
    free(again);
    free(dec);
    return e;
}

int main(void) {
    float *g = malloc(ROWS * IN * sizeof *g), *h = malloc(ROWS * IN * sizeof *h);
    qm_gaussian(g, ROWS, IN, 1);
    qm_heavy(h, ROWS, IN, 2);
    double eg[CMF_DT_COUNT] = {0}, eh[CMF_DT_COUNT] = {0}, bits[CMF_DT_COUNT] = {0};
    for (size_t k = 0; k < sizeof k_bounds / sizeof k_bounds[0]; k++) {
        const bound *b = &k_bounds[k];
        eg[b->dt] = measure(b->dt, g, &bits[b->dt]);
        eh[b->dt] = measure(b->dt, h, &bits[b->dt]);
        printf("%-9s %6.3f bits  gauss %.4f  heavy %.4f\n", cmf_dtype_name(b->dt), bits[b->dt],
               eg[b->dt], eh[b->dt]);
        CHECK_MSG(eg[b->dt] <= b->gauss, "%s gaussian rel RMSE %.4f > %.4f", cmf_dtype_name(b->dt),
                  eg[b->dt], b->gauss);
        CHECK_MSG(eh[b->dt] <= b->heavy, "%s heavy rel RMSE %.4f > %.4f", cmf_dtype_name(b->dt),
                  eh[b->dt], b->heavy);
    }
    /* the relations each layout exists for */
    CHECK(eh[CMF_DT_Q8_2F] < 0.5 * eh[CMF_DT_Q8_ROW]); /* 2F absorbs outlier channels */
    CHECK(eg[CMF_DT_Q4_TILED] == eg[CMF_DT_Q4_BLOCK]); /* same values, other placement */
    CHECK(bits[CMF_DT_Q4TP] < bits[CMF_DT_Q4_TILED]);
    CHECK(eg[CMF_DT_Q4TP] < 1.05 * eg[CMF_DT_Q4_TILED]); /* 5-bit ladder costs ~nothing */
    CHECK(eg[CMF_DT_VBIT] < eg[CMF_DT_Q4_TILED]);        /* 4.25 mean bits beat flat 4 */
    CHECK(eh[CMF_DT_Q1S] < 0.6 * eh[CMF_DT_Q1]);         /* the overlay rescues heavy tails */
    CHECK(eh[CMF_DT_Q1T] < eh[CMF_DT_Q1S]);
    CHECK(bits[CMF_DT_Q1] == 1.5);
    free(g);
    free(h);
    TEST_DONE();
}
