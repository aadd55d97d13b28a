/* test_gemm_few.c - the few-token rows of the float weight dtypes (f32, f16, bf16):
 * gemm_few_avx2.c (tier avx2) and gemm_few_avx512.c (tier avx512), called directly, against a
 * double-precision reference within test_kernel.c's 2e-5 of sum |w x|, for 2 .. CQ_FEW_MAX
 * tokens (one pass, and the balanced passes over row tiles past a pass's tokens), row ranges
 * that start and end inside a block of rows (8 AVX2, 16 AVX-512) and span several tiles, column
 * counts below one vector, odd, and with a partial last step, padded ldx / ldy (left untouched).
 * A token's outputs must be the same bits whatever the batch size, the token's place in it and
 * the row range (the engine's exact chunks rely on the first); a NaN activation or an infinite
 * weight must reach exactly its own outputs. Other dtypes and token counts are refused with Y
 * untouched, and cmf_matmul_ex takes these rows from 2 tokens up to the panel GEMM's floor,
 * which cmf_matmul_exact_min reports (tier amx: up to the panels' or the AMX tiles' floor). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/cpu.h"
#include "common/test.h"
#include "common/tier.h"
#include "cortiq/kernels.h"
#include "quant/gemm_case.h"
#include "quant/gemm_impl.h"
#include "quant/kernel_gen.h"
#include "quant/kernels_engine.h"

static const cmf_dtype k_dts[] = {CMF_DT_F32, CMF_DT_F16, CMF_DT_BF16};
#define NDT (sizeof k_dts / sizeof k_dts[0])

static cmf_qmat make_mat(cmf_dtype dt, uint64_t rows, uint64_t cols, kg_rng *rng, uint8_t **p) {
    uint64_t nb;
    *p = gemm_case_weights(dt, rows, cols, rng, &nb);
    cmf_qmat m;
    CHECK(cmf_qmat_init(&m, dt, rows, cols, *p, nb, "t", NULL) == CMF_OK);
    return m;
}

static void test_shapes(gemm_case_fn few, const char *tier) {
    /* {rows, cols}: one row and column, a lone last row of a pair, partial blocks, cols below
     * one vector / odd / a partial last step, and 300 x 1030 f32 (1.2 MB: several 128 KiB row
     * tiles for the passes) */
    static const uint64_t shapes[][2] = {{1, 1},  {3, 15},  {16, 8},  {17, 17},   {33, 600},
                                         {40, 9}, {7, 255}, {24, 64}, {300, 1030}};
    kg_rng rng = {2025};
    for (size_t d = 0; d < NDT; d++)
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
            uint64_t rows = shapes[s][0], cols = shapes[s][1];
            uint8_t *p;
            cmf_qmat m = make_mat(k_dts[d], rows, cols, &rng, &p);
            int bad = 0;
            for (size_t n = 2; n <= CQ_FEW_MAX; n++) {
                if (rows * cols > 100000 && n % 5 != 1) continue; /* the large shape: 6, 11, 16 */
                bad += gemm_case_check(few, &m, n, 0, rows, &rng);
                if (rows >= 4) bad += gemm_case_check(few, &m, n, 1, rows - 1, &rng);
                if (rows >= 20)
                    bad += gemm_case_check(few, &m, n, 3, 19, &rng); /* inside 2 blocks */
            }
            CHECK_MSG(bad == 0, "%s %s [%llu x %llu]: %d mismatches", tier,
                      cmf_dtype_name(k_dts[d]), (unsigned long long)rows, (unsigned long long)cols,
                      bad);
            cmf_qmat_free(&m);
            free(p);
        }
}

/* Token k of X through batches of every size n, at every place in them (tokens o .. o + n - 1
 * of the same activations), and through row ranges cut anywhere: the bits of the largest batch
 * over all rows. */
static void test_invariance(gemm_case_fn few, const char *tier) {
    const uint64_t rows = 45, cols = 530;
    const size_t nmax = CQ_FEW_MAX;
    kg_rng rng = {7};
    for (size_t d = 0; d < NDT; d++) {
        uint8_t *p;
        cmf_qmat m = make_mat(k_dts[d], rows, cols, &rng, &p);
        float *X = malloc(nmax * cols * sizeof *X), *ref = malloc(nmax * rows * sizeof *ref),
              *Y = malloc(nmax * rows * sizeof *Y);
        for (size_t i = 0; i < nmax * cols; i++)
            X[i] = kg_unif(&rng, -1, 1) * exp2f(kg_unif(&rng, -4, 4));
        CHECK(few(&m, X, nmax, cols, ref, rows, 0, rows));
        int bad = 0;
        for (size_t n = 2; n < nmax; n++)
            for (size_t o = 0; o + n <= nmax; o += (nmax - n) / 2 + 1) {
                CHECK(few(&m, X + o * cols, n, cols, Y, rows, 0, rows));
                if (memcmp(Y, ref + o * rows, n * rows * sizeof *Y) && bad++ < 3)
                    fprintf(stderr, "  %s %s: tokens %zu..%zu differ in a batch of %zu\n", tier,
                            cmf_dtype_name(k_dts[d]), o, o + n - 1, n);
            }
        static const uint64_t cuts[] = {0, 1, 2, 9, 17, 30, 31, 44, 45};
        for (size_t c = 0; c + 1 < sizeof cuts / sizeof *cuts; c++)
            for (size_t n = 3; n <= nmax; n += nmax - 3) {
                const uint64_t r0 = cuts[c], r1 = cuts[c + 1];
                CHECK(few(&m, X, n, cols, Y, r1 - r0, r0, r1));
                for (size_t t = 0; t < n; t++)
                    if (memcmp(Y + t * (r1 - r0), ref + t * rows + r0, (r1 - r0) * sizeof *Y) &&
                        bad++ < 3)
                        fprintf(stderr, "  %s %s: rows %llu..%llu of token %zu differ\n", tier,
                                cmf_dtype_name(k_dts[d]), (unsigned long long)r0,
                                (unsigned long long)r1, t);
            }
        CHECK_MSG(bad == 0, "%s %s: results depend on the batch or the row range", tier,
                  cmf_dtype_name(k_dts[d]));
        free(X), free(ref), free(Y), free(p);
        cmf_qmat_free(&m);
    }
}

/* Refused (Y untouched): one token, more than CQ_FEW_MAX, a dtype that is not a float. Through
 * cmf_matmul_ex: these rows' bits from 2 tokens up to the panel GEMM's floor (without flags and,
 * for bf16, with bf16 activations allowed where the dot products do not take the batch), the
 * panels' from the floor, which is cmf_matmul_exact_min. */
static void test_dispatch(gemm_case_fn few, cq_isa isa, const char *tier) {
    const uint64_t rows = 40, cols = 96;
    const size_t nmax = CQ_FEW_MAX + 1;
    kg_rng rng = {5};
    float *X = malloc(nmax * cols * sizeof *X), *Y = malloc(nmax * rows * sizeof *Y),
          *Z = malloc(nmax * rows * sizeof *Z);
    for (size_t i = 0; i < nmax * cols; i++)
        X[i] = kg_unif(&rng, -1, 1);
    uint64_t nb;
    uint8_t *q = kg_payload(CMF_DT_Q8_ROW, rows, cols, &rng, &(kg_opts){0, 0, 0}, &nb);
    cmf_qmat q8;
    CHECK(cmf_qmat_init(&q8, CMF_DT_Q8_ROW, rows, cols, q, nb, "t", NULL) == CMF_OK);
    for (size_t d = 0; d < NDT; d++) {
        for (size_t i = 0; i < nmax * rows; i++)
            Y[i] = GEMM_SENTINEL;
        if (d == 0) CHECK(!few(&q8, X, 4, cols, Y, rows, 0, rows));
        uint8_t *p;
        cmf_qmat m = make_mat(k_dts[d], rows, cols, &rng, &p);
        CHECK(!few(&m, X, 1, cols, Y, rows, 0, rows));
        CHECK(!few(&m, X, CQ_FEW_MAX + 1, cols, Y, rows, 0, rows));
        CHECK_MSG(Y[0] == GEMM_SENTINEL && Y[nmax * rows - 1] == GEMM_SENTINEL,
                  "%s: a refused call wrote to Y", tier);
        const size_t floor = cmf_matmul_exact_min(&m, 0, 0);
        CHECK_MSG(floor >= 2 && floor <= CQ_FEW_MAX + 1, "%s %s: exact min %zu", tier,
                  cmf_dtype_name(k_dts[d]), floor);
        for (size_t n = 2; n <= floor && n <= CQ_FEW_MAX; n++) {
            cmf_matmul_ex(&m, X, n, cols, Y, rows, 0, rows, 0);
            CHECK(few(&m, X, n, cols, Z, rows, 0, rows));
            const bool same = !memcmp(Y, Z, n * rows * sizeof *Y);
            CHECK_MSG(same == (n < floor), "%s %s n=%zu: cmf_matmul_ex %s the few-token rows", tier,
                      cmf_dtype_name(k_dts[d]), n, same ? "took" : "did not take");
            if (k_dts[d] == CMF_DT_BF16 && !cq_bf16dot_takes(&m, n) && n < floor) {
                cmf_matmul_ex(&m, X, n, cols, Y, rows, 0, rows, CMF_KF_BF16_ACT);
                CHECK_MSG(!memcmp(Y, Z, n * rows * sizeof *Y),
                          "%s bf16 n=%zu with the flag: not the few-token rows", tier, n);
            }
        }
        if (floor <= CQ_FEW_MAX) { /* the floor's batch: the panels' bits */
            cmf_matmul_ex(&m, X, floor, cols, Y, rows, 0, rows, 0);
            CHECK((isa == CQ_ISA_AVX2 ? cq_gemm_float_avx2 : cq_gemm_float_avx512)(
                &m, X, floor, cols, Z, rows, 0, rows));
            CHECK_MSG(!memcmp(Y, Z, floor * rows * sizeof *Y), "%s %s n=%zu: not the panels", tier,
                      cmf_dtype_name(k_dts[d]), floor);
        }
        cmf_qmat_free(&m);
        free(p);
    }
    cmf_qmat_free(&q8);
    free(q), free(X), free(Y), free(Z);
}

/* The AMX tier (tiles for f16 / bf16 batches from their own floors): cmf_matmul_ex takes these
 * rows from 2 tokens, for f32 / f16 up to the AVX-512 panels' floor (the panels' bits from it,
 * up to CQ_FEW_MAX), for bf16 with bf16 activations up to the tiles' floor: past it the
 * tiles' bits, and the switch happens once, below CQ_FEW_MAX (the rows beat the tiles only at a
 * few tokens). */
static void test_dispatch_amx(void) {
    const uint64_t rows = 40, cols = 96;
    const size_t nmax = CQ_FEW_MAX;
    kg_rng rng = {9};
    float *X = malloc(nmax * cols * sizeof *X), *Y = malloc(nmax * rows * sizeof *Y),
          *Z = malloc(nmax * rows * sizeof *Z), *T = malloc(nmax * rows * sizeof *T);
    for (size_t i = 0; i < nmax * cols; i++)
        X[i] = kg_unif(&rng, -1, 1);
    for (size_t d = 0; d < NDT; d++) {
        uint8_t *p;
        cmf_qmat m = make_mat(k_dts[d], rows, cols, &rng, &p);
        const cmf_dtype dt = k_dts[d];
        size_t panels = 0; /* the first batch that takes the panels (f32 / f16) */
        for (size_t n = 2; n <= nmax; n++) {
            cmf_matmul_ex(&m, X, n, cols, Y, rows, 0, rows, 0);
            CHECK(cq_few_avx512(&m, X, n, cols, Z, rows, 0, rows));
            if (!memcmp(Y, Z, n * rows * sizeof *Y)) {
                CHECK_MSG(!panels, "amx %s n=%zu: the few-token rows after the panels at %zu",
                          cmf_dtype_name(dt), n, panels);
                continue;
            }
            CHECK(cq_gemm_float_avx512(&m, X, n, cols, Z, rows, 0, rows));
            CHECK_MSG(!memcmp(Y, Z, n * rows * sizeof *Y),
                      "amx %s n=%zu: neither the few-token rows nor the panels", cmf_dtype_name(dt),
                      n);
            if (!panels) panels = n;
        }
        CHECK_MSG(panels != 2, "amx %s: the panels from 2 tokens", cmf_dtype_name(dt));
        if (dt == CMF_DT_BF16) {
            size_t tiles = 0; /* with bf16 activations: the first batch on the tiles */
            for (size_t n = 2; n <= nmax; n++) {
                cmf_matmul_ex(&m, X, n, cols, Y, rows, 0, rows, CMF_KF_BF16_ACT);
                CHECK(cq_few_avx512(&m, X, n, cols, Z, rows, 0, rows));
                CHECK(cq_gemm_half_amx(&m, X, n, cols, T, rows, 0, rows, CMF_KF_BF16_ACT));
                const bool few = !memcmp(Y, Z, n * rows * sizeof *Y),
                           tile = !memcmp(Y, T, n * rows * sizeof *Y);
                CHECK_MSG(few != tile, "amx bf16 n=%zu with the flag: %s", n,
                          few ? "the rows' and the tiles' bits agree" : "neither kernel's bits");
                CHECK_MSG(!(few && tiles), "amx bf16 n=%zu: the rows after the tiles at %zu", n,
                          tiles);
                if (tile && !tiles) tiles = n;
            }
            CHECK_MSG(tiles > 2 && tiles < nmax,
                      "amx bf16 with the flag: the tiles from %zu tokens (want 3 .. %d)", tiles,
                      CQ_FEW_MAX - 1);
        }
        cmf_qmat_free(&m);
        free(p);
    }
    free(X), free(Y), free(Z), free(T);
}

int main(int argc, char **argv) {
    test_tier_select(argc, argv);
    static const struct {
        cq_isa isa;
        gemm_case_fn fn;
        const char *name;
    } k_tiers[] = {{CQ_ISA_AVX2, cq_few_avx2, "avx2"}, {CQ_ISA_AVX512, cq_few_avx512, "avx512"}};
    for (size_t i = 0; i < sizeof k_tiers / sizeof k_tiers[0]; i++) {
        if (!test_tier_on(k_tiers[i].isa)) continue;
        cq_cpu_force(k_tiers[i].isa);
        if (cq_cpu_isa() < k_tiers[i].isa) continue; /* a run by hand on a smaller CPU */
        test_shapes(k_tiers[i].fn, k_tiers[i].name);
        test_invariance(k_tiers[i].fn, k_tiers[i].name);
        gemm_case_nonfinite(k_tiers[i].fn, k_tiers[i].name); /* 9 tokens: two passes */
        test_dispatch(k_tiers[i].fn, k_tiers[i].isa, k_tiers[i].name);
    }
    if (test_tier_on(CQ_ISA_AMX) && test_cpu_has_tier(CQ_ISA_AMX)) {
        cq_cpu_force(CQ_ISA_AMX);
        test_dispatch_amx();
    }
    TEST_DONE();
}
