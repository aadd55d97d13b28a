/* test_matvec_multi.c - cmf_matvec_multi (the batched-decode product: several tokens' one-token
 * products over the same rows) gives each token exactly the bits cmf_matvec gives it alone, for
 * f32, f16 and bf16 (decoded once for all the tokens on the AVX-512 and AVX2 tiers), q8_row (so
 * on AVX2, token by token on AVX-512) and q4_tiled (token by token); row ranges with and without
 * full 16-row blocks, columns with and without a 16- or 32-column tail, 1 to 7 tokens (past the
 * kernels' 4 at a time), f16 and bf16 with either choice of cq_cpu_amd. Run once per tier: the
 * tier in effect picks the kernels on both sides. */
#include <stdlib.h>
#include <string.h>

#include "common/cpu.h"
#include "common/test.h"
#include "common/tier.h"
#include "cortiq/kernels.h"
#include "quant/kernels_engine.h"
#include "quant/kernel_gen.h"

static void check(cmf_dtype dt, uint64_t rows, uint64_t cols, uint64_t r0, uint64_t r1,
                  uint64_t seed) {
    kg_rng r = {seed};
    kg_opts o = {0, 0, 0};
    uint64_t nbytes;
    uint8_t *payload = kg_payload(dt, rows, cols, &r, &o, &nbytes);
    cmf_qmat m;
    CHECK_STATUS(cmf_qmat_init(&m, dt, rows, cols, payload, nbytes, "w", &t_err_), CMF_OK);
    enum { T = 7 };
    float *X = malloc(T * cols * sizeof *X), *alone = calloc(T * rows, sizeof(float)),
          *multi = calloc(T * rows, sizeof(float));
    for (uint64_t i = 0; i < T * cols; i++)
        X[i] = kg_unif(&r, -2.0f, 2.0f);
    for (size_t n = 1; n <= T; n++) {
        const float *xs[T];
        float *ys[T];
        memset(multi, 0, T * rows * sizeof *multi);
        for (size_t t = 0; t < n; t++) {
            cmf_matvec(&m, X + t * cols, alone + t * rows, r0, r1);
            xs[t] = X + t * cols;
            ys[t] = multi + t * rows;
        }
        cmf_matvec_multi(&m, xs, n, ys, r0, r1);
        for (size_t t = 0; t < n; t++)
            CHECK_MSG(memcmp(alone + t * rows, multi + t * rows, (r1 - r0) * sizeof(float)) == 0,
                      "dtype %d, %llu x %llu, rows [%llu, %llu), token %zu of %zu differs", (int)dt,
                      (unsigned long long)rows, (unsigned long long)cols, (unsigned long long)r0,
                      (unsigned long long)r1, t, n);
    }
    free(X), free(alone), free(multi), free(payload);
}

int main(int argc, char **argv) {
    test_tier_select(argc, argv);
    if (t_tier >= 0) cq_cpu_force((cq_isa)t_tier); /* that tier's kernels on both sides */
    static const cmf_dtype dts[] = {CMF_DT_F32, CMF_DT_F16, CMF_DT_BF16, CMF_DT_Q8_ROW,
                                    CMF_DT_Q4_TILED};
    static const uint64_t shapes[][2] = {{48, 64}, {37, 96}, {64, 576}, {20, 200}, {33, 17}};
    uint64_t seed = 1;
    for (size_t d = 0; d < sizeof dts / sizeof *dts; d++) {
        /* f16 / bf16: the rows for other CPUs, then AMD's (cq_cpu_amd), on both sides */
        const bool vendor = dts[d] == CMF_DT_F16 || dts[d] == CMF_DT_BF16;
        for (int amd = 0; amd < (vendor ? 2 : 1); amd++) {
            cq_cpu_force_amd(vendor ? amd : -1);
            for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
                uint64_t rows = shapes[s][0], cols = shapes[s][1];
                if (dts[d] == CMF_DT_Q4_TILED && cols % 32) continue; /* whole groups only */
                check(dts[d], rows, cols, 0, rows, seed++);
                check(dts[d], rows, cols, 16, rows, seed++); /* a piece from a later block */
                check(dts[d], rows, cols, 0, rows < 16 ? rows : 16, seed++);
            }
        }
        cq_cpu_force_amd(-1);
    }
    TEST_DONE();
}
