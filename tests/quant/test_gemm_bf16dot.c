/* test_gemm_bf16dot.c - the bf16 dot-product GEMM (gemm_bf16dot_avx512.c, CMF_KF_BF16_ACT):
 * called directly against a double-precision sum of the weights times the activations rounded
 * to bf16 (nearest even), over the shapes its blocking has edges in: 1 .. 40 tokens (whole and
 * partial groups of 16, last groups of 8 or fewer on 256-bit vectors), row ranges that start and
 * end inside a 16-row panel, column counts that are odd, below one pair group of 32, and past one
 * and two blocks of 256, padded ldx / ldy. Bound: 2e-5 of sum |w x'| (f32 summation), and the
 * products' distance from the f32 ones within the activation rounding (2^-8 of sum |w x|). Y
 * outside the rows and tokens asked for stays as it was; a NaN activation or an infinite weight
 * reaches exactly its own outputs; a token's outputs are the same bits whatever the batch size;
 * other dtypes are refused. Through cmf_matmul_ex, the flag takes this kernel on the AVX-512
 * tier only, from 12 tokens, where vdpbf16ps is fast (AMD; elsewhere the f32 rows); prepared once
 * (cmf_pact, also the f32 panels' kind) and read by row ranges, the same bits. On an AMX CPU the
 * AVX-512 tier is forced (the AMX tier's bf16 batches take the tiles: test_gemm_half_amx.c).
 * Skipped (77) on a CPU without AVX-512 BF16. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/cpu.h"
#include "common/f16.h"
#include "common/test.h"
#include "cortiq/kernels.h"
#include "quant/gemm_case.h"
#include "quant/gemm_impl.h"
#include "quant/kernel_gen.h"
#include "quant/kernels_engine.h"

/* The outputs of rows [r0, r1) for n tokens outside the bounds or changed outside the range. */
static int check(const cmf_qmat *m, size_t n, uint64_t r0, uint64_t r1, kg_rng *rng) {
    return gemm_case_check_with(cq_gemm_bf16dot_avx512, m, n, r0, r1, (gemm_bound){2e-5, true},
                                rng);
}

/* A bf16 matrix of random weights, n tokens' activations (stride cols) and two outputs (stride
 * rows), Y filled with the sentinel. */
typedef struct dot_case {
    uint8_t *p;
    cmf_qmat m;
    float *X, *Y, *Z;
} dot_case;

static dot_case dot_case_make(uint64_t rows, uint64_t cols, size_t n, kg_rng *rng) {
    dot_case d = {0};
    uint64_t nb;
    d.p = gemm_case_weights(CMF_DT_BF16, rows, cols, rng, &nb);
    CHECK(cmf_qmat_init(&d.m, CMF_DT_BF16, rows, cols, d.p, nb, "t", NULL) == CMF_OK);
    d.X = malloc(n * cols * sizeof *d.X);
    d.Y = malloc(n * rows * sizeof *d.Y);
    d.Z = malloc(n * rows * sizeof *d.Z);
    for (size_t i = 0; i < n * cols; i++)
        d.X[i] = kg_unif(rng, -1, 1) * exp2f(kg_unif(rng, -4, 4));
    for (size_t i = 0; i < n * rows; i++)
        d.Y[i] = GEMM_SENTINEL;
    return d;
}

static void dot_case_free(dot_case *d) {
    free(d->X), free(d->Y), free(d->Z), free(d->p);
    cmf_qmat_free(&d->m);
}

static void test_shapes(void) {
    /* {rows, cols}: partial panels, cols below 32 / odd / past 1 and 2 blocks of 256 */
    static const uint64_t shapes[][2] = {{5, 1},   {16, 8},   {17, 257}, {33, 600},
                                         {40, 31}, {31, 513}, {7, 255},  {18, 1030}};
    kg_rng rng = {2025};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        uint64_t rows = shapes[s][0], cols = shapes[s][1], nb;
        uint8_t *p = gemm_case_weights(CMF_DT_BF16, rows, cols, &rng, &nb);
        cmf_qmat m;
        CHECK(cmf_qmat_init(&m, CMF_DT_BF16, rows, cols, p, nb, "t", NULL) == CMF_OK);
        int bad = 0;
        for (size_t n = 1; n <= 40; n++) {
            bad += check(&m, n, 0, rows, &rng);
            if (rows >= 4) bad += check(&m, n, 1, rows - 1, &rng);
            if (rows >= 20) bad += check(&m, n, 3, 19, &rng); /* inside 2 panels */
        }
        CHECK_MSG(bad == 0, "[%llu x %llu]: %d mismatches", (unsigned long long)rows,
                  (unsigned long long)cols, bad);
        cmf_qmat_free(&m);
        free(p);
    }
}

/* An infinite weight (row 3, col 5) and a NaN activation (token 2, col 7): non-finite results
 * exactly in row 3 and token 2; every other output finite. Batches of 9 (256-bit) and 20. */
static void test_nonfinite(void) {
    const uint64_t rows = 21, cols = 300;
    kg_rng rng = {99};
    for (size_t n = 9; n <= 20; n += 11) {
        dot_case d = dot_case_make(rows, cols, n, &rng);
        st_u16(d.p + 2 * (3 * cols + 5), f32_to_bf16(INFINITY));
        d.X[2 * cols + 7] = NAN;
        CHECK(cq_gemm_bf16dot_avx512(&d.m, d.X, n, cols, d.Y, rows, 0, rows));
        int bad = 0;
        for (size_t i = 0; i < n * rows; i++)
            if ((i / rows != 2 && i % rows != 3) != (bool)isfinite(d.Y[i]) && bad++ < 5)
                fprintf(stderr, "  n=%zu tok %zu row %zu: %g\n", n, i / rows, i % rows, d.Y[i]);
        CHECK_MSG(bad == 0, "n=%zu: non-finite values misplaced (%d)", n, bad);
        dot_case_free(&d);
    }
}

/* Tokens 0 .. 9 of batches of 10 .. 40 tokens (the same activations): bit-identical outputs,
 * though their groups differ (256- and 512-bit, whole and partial). */
static void test_batch_invariance(void) {
    const uint64_t rows = 37, cols = 530; /* a partial panel and three blocks */
    const size_t nmax = 40, keep = 10;
    kg_rng rng = {7};
    dot_case d = dot_case_make(rows, cols, nmax, &rng);
    int bad = 0;
    for (size_t n = keep; n <= nmax; n++) {
        CHECK(cq_gemm_bf16dot_avx512(&d.m, d.X, n, cols, n == keep ? d.Z : d.Y, rows, 0, rows));
        if (n > keep && memcmp(d.Z, d.Y, keep * rows * sizeof *d.Y) && bad++ < 3)
            fprintf(stderr, "  tokens 0..9 differ between batches of 10 and %zu\n", n);
    }
    CHECK_MSG(bad == 0, "results depend on the batch size");
    dot_case_free(&d);
}

/* Other dtypes are refused, nothing written; through cmf_matmul_ex the flag selects this kernel
 * on the AVX-512 tier (its bits) and is ignored on AVX2 (the f32 GEMM's bits there). */
static void test_dispatch(void) {
    const uint64_t rows = 20, cols = 96;
    const size_t n = 12;
    kg_rng rng = {5};
    dot_case d = dot_case_make(rows, cols, n, &rng);
    float *X = d.X, *Y = d.Y, *Z = d.Z;
    cmf_qmat f16;
    CHECK(cmf_qmat_init(&f16, CMF_DT_F16, rows, cols, d.p, rows * cols * 2, "t", NULL) == CMF_OK);
    CHECK(!cq_gemm_bf16dot_avx512(&f16, X, n, cols, Y, rows, 0, rows));
    CHECK_MSG(Y[0] == GEMM_SENTINEL && Y[n * rows - 1] == GEMM_SENTINEL,
              "a refused call wrote to Y");
    CHECK(cq_gemm_bf16dot_avx512(&d.m, X, n, cols, Y, rows, 0, rows));
    cmf_matmul_ex(&d.m, X, n, cols, Z, rows, 0, rows, CMF_KF_BF16_ACT);
    if (cq_cpu_detect()->bf16dot_fast)
        CHECK_MSG(!memcmp(Y, Z, n * rows * sizeof *Y),
                  "cmf_matmul_ex with the flag: not this kernel");
    else { /* a CPU whose vdpbf16ps is slower than its f32 FMAs: the f32 panels */
        cmf_matmul_ex(&d.m, X, n, cols, Y, rows, 0, rows, 0);
        CHECK_MSG(!memcmp(Y, Z, n * rows * sizeof *Y),
                  "the flag took the dot products where vdpbf16ps is the slower");
    }
    /* below 12 tokens the flag leaves the few-token rows (f32 activations) in charge */
    cmf_matmul_ex(&d.m, X, 6, cols, Y, rows, 0, rows, CMF_KF_BF16_ACT);
    CHECK(cq_few_avx512(&d.m, X, 6, cols, Z, rows, 0, rows));
    CHECK_MSG(!memcmp(Y, Z, 6 * rows * sizeof *Y),
              "6 tokens with the flag: not the few-token rows");
    CHECK(cq_gemm_bf16dot_avx512(&d.m, X, n, cols, Y, rows, 0, rows));
    cq_isa saved = cq_cpu_isa();
    cq_cpu_force(CQ_ISA_AVX2);
    cmf_matmul_ex(&d.m, X, n, cols, Z, rows, 0, rows, CMF_KF_BF16_ACT);
    CHECK_MSG(memcmp(Y, Z, n * rows * sizeof *Y) != 0, "the flag took bf16 activations on AVX2");
    cmf_matmul_ex(&d.m, X, n, cols, Y, rows, 0, rows, 0);
    CHECK_MSG(!memcmp(Y, Z, n * rows * sizeof *Y), "AVX2: the flag changed the f32 GEMM's bits");
    cq_cpu_force(saved);
    cmf_qmat_free(&f16);
    dot_case_free(&d);
}

/* The batch prepared once (cmf_pact: two "threads" preparing tokens [0, 32) and [32, 45)) and
 * read by row ranges: the bits of the one-call kernel, for every range split; both kinds, the
 * bf16 dot products' (CMF_KF_BF16_ACT) and the AVX-512 float panels' (no flag). */
static void test_prepared(void) {
    const uint64_t rows = 50, cols = 300;
    const size_t n = 45;
    kg_rng rng = {11};
    dot_case d = dot_case_make(rows, cols, n, &rng);
    CHECK(cmf_pact_for(&d.m, n, CMF_KF_BF16_ACT) ==
          (cq_cpu_detect()->bf16dot_fast ? CMF_PACT_BF16 : CMF_PACT_F32));
    /* the few-token rows below the dot products' floor (and the panels') read X as it is */
    CHECK(cmf_pact_for(&d.m, 7, CMF_KF_BF16_ACT) == CMF_PACT_NONE);
    CHECK(cmf_pact_for(&d.m, 3, CMF_KF_BF16_ACT) == CMF_PACT_NONE);
    for (unsigned flags = 0; flags <= CMF_KF_BF16_ACT; flags += CMF_KF_BF16_ACT) {
        cmf_pact_kind kind = cmf_pact_for(&d.m, n, flags);
        void *mem = aligned_alloc(64, (cmf_pact_bytes(kind, n, cols) + 63) / 64 * 64);
        cmf_matmul_ex(&d.m, d.X, n, cols, d.Y, rows, 0, rows, flags);
        cmf_pact a;
        cmf_pact_bind(&a, kind, mem, n, cols);
        size_t half = 2 * cmf_pact_group(kind);
        cmf_pact_prepare(&a, d.X, cols, half, n);
        cmf_pact_prepare(&a, d.X, cols, 0, half);
        static const uint64_t cuts[] = {0, 16, 32, 48, 50};
        for (size_t c = 0; c + 1 < sizeof cuts / sizeof *cuts; c++)
            CHECK(cmf_matmul_pact(&d.m, &a, d.Z + cuts[c], rows, cuts[c], cuts[c + 1]));
        CHECK_MSG(!memcmp(d.Y, d.Z, n * rows * sizeof *d.Y),
                  "prepared batch (kind %d): not the bits of cmf_matmul_ex", (int)kind);
        free(mem);
    }
    dot_case_free(&d);
}

int main(void) {
    if (cq_cpu_isa() < CQ_ISA_AVX512 || !cq_cpu_detect()->avx512bf16) {
        printf("SKIP: this CPU has no AVX-512 BF16\n");
        return 77;
    }
    if (cq_cpu_isa() > CQ_ISA_AVX512)
        cq_cpu_force(CQ_ISA_AVX512); /* the AMX tier takes the tiles */
    test_shapes();
    test_nonfinite();
    test_batch_invariance();
    test_dispatch();
    test_prepared();
    TEST_DONE();
}
