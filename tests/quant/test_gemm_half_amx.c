/* test_gemm_half_amx.c - the AMX-BF16 batched product for f16 / bf16 weights
 * (gemm_half_amx.c) against a double-precision reference, over the shapes its blocking has
 * edges in: several 32-token pairs with a partial last one, several 192-column blocks with a
 * partial last step (cols % 32 != 0), several passes over the columns, row ranges that start and
 * end inside a 32-row pair, padded ldx / ldy. The bound, 2e-6 of sum |w x|, is ten times tighter
 * than the tiers' common one (2e-5, tests/quant/test_kernel.c): the split bf16 products must be as
 * exact as f32 arithmetic (seen: 2.7e-7), which a split that drops a part does not reach. With
 * CMF_KF_BF16_ACT the same bound holds against the reference on the activations rounded to bf16
 * (nearest even): the products of the bf16 parts are exact, only the rounding of x is allowed
 * (quant/gemm_case.h). Y outside the requested rows and tokens must be left as it was. Through
 * cmf_matmul_ex on the AMX tier the tiles take bf16 weights with the flag from 12 tokens (rounded
 * activations), f16 weights (the flag ignored) and flagless bf16 from 32, the few-token rows the
 * batches below up to 15 tokens. Skipped on CPUs without AMX-BF16. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/cpu.h"
#include "common/f16.h"
#include "common/test.h"
#include "common/tier.h"
#include "cortiq/kernels.h"
#include "quant/gemm_case.h"
#include "quant/gemm_impl.h"
#include "quant/kernel_gen.h"

static uint16_t to_half(cmf_dtype dt, float v) {
    return dt == CMF_DT_F16 ? f32_to_f16(v) : f32_to_bf16(v);
}

static bool tiles_exact(const cmf_qmat *m, const float *X, size_t n, size_t ldx, float *Y,
                        size_t ldy, uint64_t r0, uint64_t r1) {
    return cq_gemm_half_amx(m, X, n, ldx, Y, ldy, r0, r1, 0);
}

static bool tiles_bf16_act(const cmf_qmat *m, const float *X, size_t n, size_t ldx, float *Y,
                           size_t ldy, uint64_t r0, uint64_t r1) {
    return cq_gemm_half_amx(m, X, n, ldx, Y, ldy, r0, r1, CMF_KF_BF16_ACT);
}

/* Returns the number of outputs outside the bound (printing the first few). */
static int check(cmf_dtype dt, uint64_t rows, uint64_t cols, size_t n, uint64_t r0, uint64_t r1,
                 unsigned flags, kg_rng *rng) {
    uint64_t nb;
    uint8_t *w = gemm_case_weights(dt, rows, cols, rng, &nb);
    cmf_qmat m;
    CHECK(cmf_qmat_init(&m, dt, rows, cols, w, nb, "t", NULL) == CMF_OK);
    const gemm_bound b = {2e-6, flags != 0};
    int bad = gemm_case_check_with(flags ? tiles_bf16_act : tiles_exact, &m, n, r0, r1, b, rng);
    cmf_qmat_free(&m);
    free(w);
    return bad;
}

/* inf and NaN stay non-finite (the f32 tiers give inf or NaN there too). */
static void test_non_finite(cmf_dtype dt) {
    uint64_t rows = 32, cols = 64;
    uint16_t *w = calloc(rows * cols, 2);
    float X[64 * 40], Y[40 * 32];
    for (uint64_t i = 0; i < rows * cols; i++)
        w[i] = to_half(dt, 0.25f);
    w[3 * cols + 5] = to_half(dt, INFINITY);
    w[7 * cols + 9] = dt == CMF_DT_F16 ? 0x7E00 : 0x7FC0; /* NaN */
    for (int i = 0; i < 64 * 40; i++)
        X[i] = 1.0f;
    cmf_qmat m;
    CHECK(cmf_qmat_init(&m, dt, rows, cols, (const uint8_t *)w, rows * cols * 2, "t", NULL) ==
          CMF_OK);
    CHECK(cq_gemm_half_amx(&m, X, 40, 64, Y, 32, 0, 32, 0));
    for (int t = 0; t < 40; t++) {
        CHECK_MSG(!isfinite(Y[t * 32 + 3]) && isnan(Y[t * 32 + 7]), "%s tok %d: %g %g",
                  cmf_dtype_name(dt), t, Y[t * 32 + 3], Y[t * 32 + 7]);
        CHECK(Y[t * 32 + 0] == 16.0f); /* 64 x 0.25: the other rows are untouched by them */
    }
    cmf_qmat_free(&m);
    free(w);
}

/* Which kernel cmf_matmul_ex picks on the AMX tier (forced: CORTIQ_CPU may have lowered it):
 * its bits against direct calls. */
static void test_dispatch(cmf_dtype dt) {
    const cq_isa saved = cq_cpu_isa();
    cq_cpu_force(CQ_ISA_AMX);
    const uint64_t rows = 40, cols = 96;
    const size_t ns[] = {4, 11, 12, 31, 32};
    kg_rng rng = {77};
    uint16_t *w = malloc(rows * cols * 2);
    float X[32 * 96], Y[32 * 40], Z[32 * 40];
    for (uint64_t i = 0; i < rows * cols; i++)
        w[i] = to_half(dt, kg_unif(&rng, -1, 1));
    for (size_t i = 0; i < 32 * cols; i++)
        X[i] = kg_unif(&rng, -1, 1);
    cmf_qmat m;
    CHECK(cmf_qmat_init(&m, dt, rows, cols, (const uint8_t *)w, rows * cols * 2, "t", NULL) ==
          CMF_OK);
    for (size_t i = 0; i < sizeof ns / sizeof *ns; i++) {
        const size_t n = ns[i];
        for (unsigned flags = 0; flags <= CMF_KF_BF16_ACT; flags += CMF_KF_BF16_ACT) {
            /* the tiles: bf16 with the flag from 12 tokens, the rest from 32; below them the
             * few-token rows up to 15 tokens, then the f32 panels */
            const bool tiles = n >= 32 || (dt == CMF_DT_BF16 && flags && n >= 12),
                       few = !tiles && n <= 15;
            const unsigned kf = dt == CMF_DT_BF16 ? flags : 0;
            cmf_matmul_ex(&m, X, n, cols, Y, rows, 0, rows, flags);
            if (tiles)
                CHECK(cq_gemm_half_amx(&m, X, n, cols, Z, rows, 0, rows, kf));
            else if (few)
                CHECK(cq_few_avx512(&m, X, n, cols, Z, rows, 0, rows));
            else
                CHECK(cq_gemm_float_avx512(&m, X, n, cols, Z, rows, 0, rows));
            CHECK_MSG(!memcmp(Y, Z, n * rows * sizeof *Y), "%s n=%zu flags %u: not the %s",
                      cmf_dtype_name(dt), n, flags,
                      tiles ? "tiles"
                      : few ? "few-token rows"
                            : "f32 panels");
        }
    }
    cmf_qmat_free(&m);
    free(w);
    cq_cpu_force(saved);
}

int main(int argc, char **argv) {
    test_tier_select(argc, argv); /* registered for the amx tier only */
    const cq_cpu_features *f = cq_cpu_detect();
    if (!f->amx_bf16 || !f->avx512bf16) {
        printf("SKIP: CPU or OS without AMX-BF16\n");
        return 77;
    }
    static const cmf_dtype dts[] = {CMF_DT_F16, CMF_DT_BF16};
    static const struct {
        uint64_t rows, cols;
        size_t n;
        uint64_t r0, r1;
    } cases[] = {
        {32, 32, 32, 0, 32},     /* one tile pair, one step */
        {16, 64, 4, 0, 16},      /* a half row pair, a quarter token pair */
        {70, 200, 45, 3, 69},    /* rows start and end inside pairs; 7 steps, the last partial */
        {40, 416, 70, 0, 40},    /* 3 column blocks (192 + 192 + 32), 3 token pairs */
        {96, 1000, 64, 16, 93},  /* 6 column blocks, the last partial step */
        {33, 4096, 33, 1, 33},   /* long rows: 22 column blocks in 2 passes (L2-sized) */
        {100, 2500, 128, 5, 99}, /* 3 passes x 3 row pairs: C kept per pair between passes */
        {128, 96, 128, 32, 128}, /* a prefill chunk */
    };
    kg_rng rng = {4242};
    for (unsigned flags = 0; flags <= CMF_KF_BF16_ACT; flags += CMF_KF_BF16_ACT)
        for (size_t d = 0; d < 2; d++)
            for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
                int bad = check(dts[d], cases[c].rows, cases[c].cols, cases[c].n, cases[c].r0,
                                cases[c].r1, flags, &rng);
                CHECK_MSG(bad == 0, "%s%s [%llu x %llu] n=%zu: %d mismatches",
                          cmf_dtype_name(dts[d]), flags ? " bf16-act" : "",
                          (unsigned long long)cases[c].rows, (unsigned long long)cases[c].cols,
                          cases[c].n, bad);
            }
    test_non_finite(CMF_DT_F16);
    test_non_finite(CMF_DT_BF16);
    test_dispatch(CMF_DT_F16);
    test_dispatch(CMF_DT_BF16);
    TEST_DONE();
}
