/* test_gemm_float.c - the FMA panel GEMMs of the float weight dtypes (f32, f16, bf16):
 * gemm_f32_avx2.c (tier avx2) and gemm_f32_avx512.c (tier avx512), called directly, against a
 * double-precision reference over the shapes their blocking has edges in: 1 .. 30 tokens (whole
 * and partial token groups of 6 and 12), row ranges that start and end inside a panel (16 rows
 * AVX2, 32 AVX-512) and span several row tiles, column counts that are odd, below one vector,
 * and past one or more K blocks (256 columns AVX2, 128 AVX-512; their partial sums add up in the
 * tile's buffer), padded ldx / ldy. Bound: test_kernel.c's
 * 2e-5 of sum |w x|. Y outside the requested rows and tokens must be left as it was, and a NaN
 * activation or an infinite weight must reach exactly its own outputs (zero padding must not
 * spread it to other rows or tokens). A token's outputs must also be the same bits whatever the
 * batch size and the token's group in it (the engine's exact prefix reuse relies on it), and a
 * batch prepared once (cmf_pact, the tier's kind: two "threads" each preparing the groups of its
 * own tokens up to a cmf_pact_cut, the later range first, each seeing only its own tokens) and
 * read by row ranges gives cmf_matmul_ex's bits. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/cpu.h"
#include "common/f16.h"
#include "common/test.h"
#include "common/tier.h"
#include "cortiq/kernels.h"
#include "quant/gemm_impl.h"
#include "quant/gemm_case.h"
#include "quant/kernel_gen.h"

static void test_shapes(gemm_case_fn gemm, const char *tier) {
    static const cmf_dtype dts[] = {CMF_DT_F32, CMF_DT_F16, CMF_DT_BF16};
    /* {rows, cols}: partial panels, cols below 8 / odd / past 1 and 2 K blocks (AVX2 256,
     * AVX-512 128 columns), and rows past one row tile (16 panels: AVX2 256, AVX-512 512 rows,
     * the first block's panels all packed before the second block's) */
    static const uint64_t shapes[][2] = {{5, 1},    {16, 8},  {17, 257},  {33, 600}, {40, 9},
                                         {31, 513}, {7, 255}, {18, 1030}, {600, 140}};
    kg_rng rng = {2024};
    for (size_t d = 0; d < sizeof dts / sizeof dts[0]; d++)
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
            uint64_t rows = shapes[s][0], cols = shapes[s][1], nb;
            uint8_t *p = gemm_case_weights(dts[d], rows, cols, &rng, &nb);
            cmf_qmat m;
            CHECK(cmf_qmat_init(&m, dts[d], rows, cols, p, nb, "t", NULL) == CMF_OK);
            int bad = 0;
            for (size_t n = 1; n <= 30; n++) {
                bad += gemm_case_check(gemm, &m, n, 0, rows, &rng);
                if (rows >= 4) bad += gemm_case_check(gemm, &m, n, 1, rows - 1, &rng);
                if (rows >= 20)
                    bad += gemm_case_check(gemm, &m, n, 3, 19, &rng); /* inside 2 panels */
            }
            CHECK_MSG(bad == 0, "%s %s [%llu x %llu]: %d mismatches", tier, cmf_dtype_name(dts[d]),
                      (unsigned long long)rows, (unsigned long long)cols, bad);
            cmf_qmat_free(&m);
            free(p);
        }
}

/* Tokens 0 .. 9 of batches of 10 .. 32 tokens (the same activations): bit-identical outputs,
 * though the batch's token groups differ (full, split remainders, the last ones). */
static void test_batch_invariance(gemm_case_fn gemm, const char *tier) {
    static const cmf_dtype dts[] = {CMF_DT_F32, CMF_DT_F16, CMF_DT_BF16};
    const uint64_t rows = 37, cols = 530; /* a partial panel and three K blocks */
    const size_t nmax = 32, keep = 10;
    kg_rng rng = {7};
    for (size_t d = 0; d < 3; d++) {
        uint64_t nb;
        uint8_t *p = gemm_case_weights(dts[d], rows, cols, &rng, &nb);
        cmf_qmat m;
        CHECK(cmf_qmat_init(&m, dts[d], rows, cols, p, nb, "t", NULL) == CMF_OK);
        float *X = malloc(nmax * cols * sizeof *X), *Y = malloc(nmax * rows * sizeof *Y);
        float *first = malloc(keep * rows * sizeof *first);
        for (size_t i = 0; i < nmax * cols; i++)
            X[i] = kg_unif(&rng, -1, 1) * exp2f(kg_unif(&rng, -4, 4));
        int bad = 0;
        for (size_t n = keep; n <= nmax; n++) {
            CHECK(gemm(&m, X, n, cols, Y, rows, 0, rows));
            if (n == keep)
                memcpy(first, Y, keep * rows * sizeof *Y);
            else if (memcmp(first, Y, keep * rows * sizeof *Y) && bad++ < 3)
                fprintf(stderr, "  %s %s: tokens 0..9 differ between batches of 10 and %zu\n", tier,
                        cmf_dtype_name(dts[d]), n);
        }
        CHECK_MSG(bad == 0, "%s %s: results depend on the batch size", tier,
                  cmf_dtype_name(dts[d]));
        free(X), free(Y), free(first), free(p);
        cmf_qmat_free(&m);
    }
}

static void test_prepared(cq_isa isa, const char *tier) {
    static const cmf_dtype dts[] = {CMF_DT_F32, CMF_DT_F16, CMF_DT_BF16};
    /* last groups of 4, 3, 2 and 1 tokens (AVX2: 1-3 shared by the last two groups) */
    static const size_t ns[] = {16, 45, 128, 19};
    const uint64_t rows = 50, cols = 300;
    const cmf_pact_kind want = isa == CQ_ISA_AVX2 ? CMF_PACT_F32_AVX2 : CMF_PACT_F32;
    kg_rng rng = {11};
    for (size_t d = 0; d < 3; d++)
        for (size_t i = 0; i < sizeof ns / sizeof *ns; i++) {
            const size_t n = ns[i];
            uint64_t nb;
            uint8_t *p = gemm_case_weights(dts[d], rows, cols, &rng, &nb);
            cmf_qmat m;
            CHECK(cmf_qmat_init(&m, dts[d], rows, cols, p, nb, "t", NULL) == CMF_OK);
            float *X = malloc(n * cols * sizeof *X), *Y = malloc(n * rows * sizeof *Y),
                  *Z = malloc(n * rows * sizeof *Z), *Xo = malloc(n * cols * sizeof *Xo);
            for (size_t k = 0; k < n * cols; k++)
                X[k] = kg_unif(&rng, -1, 1) * exp2f(kg_unif(&rng, -4, 4));
            const cmf_pact_kind kind = cmf_pact_for(&m, n, 0);
            CHECK_MSG(kind == want, "%s %s n=%zu: prepared kind %d", tier, cmf_dtype_name(dts[d]),
                      n, (int)kind);
            void *mem = aligned_alloc(64, (cmf_pact_bytes(kind, n, cols) + 63) / 64 * 64);
            cmf_pact a;
            cmf_pact_bind(&a, kind, mem, n, cols);
            cmf_matmul_ex(&m, X, n, cols, Y, rows, 0, rows, 0);
            /* the threads' meeting point asked for in the middle, at the last group's plain
             * start (a cut there would split a shared pair) and just before it */
            const size_t g = cmf_pact_group(kind), last = (n - 1) / g * g;
            const size_t asks[] = {n / 2, last, last ? last - 1 : 0};
            for (size_t q = 0; q < sizeof asks / sizeof *asks; q++) {
                const size_t cut = cmf_pact_cut(&a, asks[q]);
                CHECK_MSG(cut >= asks[q] && (cut % g == 0 || cut == n), "%s n=%zu: cut %zu for %zu",
                          tier, n, cut, asks[q]);
                /* each "thread" sees only its own tokens (the others NaN: not yet computed),
                 * so a group that reads a token of the other range spreads NaN */
                for (size_t k = 0; k < n * cols; k++)
                    Xo[k] = k / cols < cut ? NAN : X[k];
                cmf_pact_prepare(&a, Xo, cols, cut, n); /* the later range first */
                for (size_t k = 0; k < n * cols; k++)
                    Xo[k] = k / cols < cut ? X[k] : NAN;
                cmf_pact_prepare(&a, Xo, cols, 0, cut);
                static const uint64_t cuts[] = {0, 16, 21, 48, 50};
                for (size_t c = 0; c + 1 < sizeof cuts / sizeof *cuts; c++)
                    CHECK(cmf_matmul_pact(&m, &a, Z + cuts[c], rows, cuts[c], cuts[c + 1]));
                CHECK_MSG(!memcmp(Y, Z, n * rows * sizeof *Y),
                          "%s %s n=%zu cut %zu: prepared batch not the bits of cmf_matmul_ex", tier,
                          cmf_dtype_name(dts[d]), n, cut);
            }
            free(mem), free(X), free(Xo), free(Y), free(Z), free(p);
            cmf_qmat_free(&m);
        }
}

int main(int argc, char **argv) {
    test_tier_select(argc, argv);
    static const struct {
        cq_isa isa;
        gemm_case_fn fn;
        const char *name;
    } k_gemms[] = {{CQ_ISA_AVX2, cq_gemm_float_avx2, "avx2"},
                   {CQ_ISA_AVX512, cq_gemm_float_avx512, "avx512"}};
    for (size_t i = 0; i < sizeof k_gemms / sizeof k_gemms[0]; i++) {
        if (!test_tier_on(k_gemms[i].isa)) continue;
        cq_cpu_force(k_gemms[i].isa);
        if (cq_cpu_isa() < k_gemms[i].isa) continue; /* a run by hand on a smaller CPU */
        test_shapes(k_gemms[i].fn, k_gemms[i].name);
        gemm_case_nonfinite(k_gemms[i].fn, k_gemms[i].name);
        test_batch_invariance(k_gemms[i].fn, k_gemms[i].name);
        test_prepared(k_gemms[i].isa, k_gemms[i].name);
    }
    TEST_DONE();
}
