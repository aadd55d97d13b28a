/* test_kernel_i8dec.c - the one-token int8-activation kernels (kernel_i8dec_avx512.c)
 * against a double-precision reference that quantizes the activations the same way
 * (dx = absmax/127 per 32-group, xq = round-to-nearest-even(x * 127/absmax)). With the
 * activation rounding taken out of the comparison, the kernels must match within float
 * summation error, so a wrong bias, scale or code order shows even where the looser
 * CMF_KF_INT8_ACT bound of test_kernel.c would hide it. The prepared-token entry points
 * (cmf_tok8_*) must give the same bits over row chunks. Skipped without VNNI + VBMI + GFNI. */
#include <math.h>

#include "common/cpu.h"
#include "common/test.h"
#include "common/tier.h"
#include "cortiq/kernels.h"
#include "quant/kernels_engine.h"
#include "cortiq/quant.h"
#include "quant/i8dec_ref.h"
#include "quant/kernel_gen.h"
#include "quant/kernel_i8dec.h"
#include "quant/kernel_impl.h"

static const cmf_dtype k_dts[] = {CMF_DT_Q4_TILED, CMF_DT_Q4_BLOCK, CMF_DT_Q4TP, CMF_DT_VBIT,
                                  CMF_DT_VBIT_RO};
/* group counts: tails only, whole 16-group blocks, blocks plus tails of every phase */
static const uint64_t k_groups[] = {1, 2, 3, 4, 5, 7, 8, 15, 16, 17, 21, 32, 39, 128};

/* The kernel on payload p (freed here) against the reference; the count of mismatches. */
static int check_payload(cmf_dtype dt, uint8_t *p, uint64_t nb, uint64_t rows, uint64_t cols,
                         kg_rng *rng) {
    cmf_qmat m;
    CHECK(cmf_qmat_init(&m, dt, rows, cols, p, nb, "t", NULL) == CMF_OK);
    float *x = malloc(cols * sizeof *x), *y = malloc(rows * sizeof *y),
          *y2 = malloc(rows * sizeof *y2);
    double *xd = malloc(cols * sizeof *xd);
    i8ref_token(rng, cols, x, xd);
    int bad = 0;
    CHECK(cq_avx512_i8dec_matvec(&m, x, y, 0, rows));
    cq_cpu_force(CQ_ISA_AVX512); /* CORTIQ_CPU may cap it: then only the kernel is checked */
    bool dispatch = cq_cpu_isa() == CQ_ISA_AVX512;
    if (dispatch) cmf_matmul_ex(&m, x, 1, cols, y2, rows, 0, rows, CMF_KF_INT8_ACT);
    i8ref_check_rows(&m, y, xd, &bad);
    for (uint64_t r = 0; r < rows; r++) /* the dispatcher must take this path for one token */
        if (dispatch && y2[r] != y[r] && bad++ < 3)
            fprintf(stderr, "  %s: cmf_matmul_ex gave %.9g, the decode kernel %.9g\n",
                    cmf_dtype_name(dt), y2[r], y[r]);
    /* the prepared token (cmf_tok8_*, decode's row chunks): prepared once, run over chunks of
     * 16 and of 32 rows, bit for bit the one-call result (chunks start on 16-row blocks) */
    if (dispatch) {
        CHECK(cmf_tok8_supports(&m));
        size_t tb = cmf_tok8_bytes(cols);
        CHECK(tb > 0);
        void *tok = aligned_alloc(64, (tb + 63) / 64 * 64);
        cmf_tok8_prepare(tok, x, cols, cmf_tok8_supports(&m));
        for (uint64_t c = 16; c <= 32; c += 16) {
            for (uint64_t r0 = 0; r0 < rows; r0 += c)
                cmf_matvec_tok8(&m, tok, y2 + r0, r0, r0 + c < rows ? r0 + c : rows);
            for (uint64_t r = 0; r < rows; r++)
                if (y2[r] != y[r] && bad++ < 3)
                    fprintf(stderr, "  %s: chunks of %llu, row %llu: %.9g vs %.9g\n",
                            cmf_dtype_name(dt), (unsigned long long)c, (unsigned long long)r, y2[r],
                            y[r]);
        }
        free(tok);
    }
    /* a sub-range of rows lands at y[0]; bit for bit only where both calls reduce row 1 on
     * its own (from 16 rows on, rows are reduced 16 together, in another summation order) */
    if (rows > 2 && rows < 16) {
        float first = 0;
        CHECK(cq_avx512_i8dec_matvec(&m, x, &first, 1, 2));
        CHECK_MSG(first == y[1], "%s sub-range row 1: %.9g vs %.9g", cmf_dtype_name(dt), first,
                  y[1]);
    }
    cmf_qmat_free(&m);
    free(p);
    free(x);
    free(y);
    free(y2);
    free(xd);
    return bad;
}

static int check(cmf_dtype dt, uint64_t rows, uint64_t cols, kg_rng *rng) {
    kg_opts o = {0, 0, 0};
    uint64_t nb;
    uint8_t *p = kg_payload(dt, rows, cols, rng, &o, &nb);
    return check_payload(dt, p, nb, rows, cols, rng);
}

/* vbit rows of a real allocation are mostly 4 bits wide, and adjacent 4-bit rows take a
 * two-row path: runs of 4-bit rows broken by other widths, at row counts that leave odd rows
 * and a remainder after the 16-row blocks. */
static void test_vbit_width_runs(void) {
    kg_rng rng = {77};
    static const uint64_t cols_l[] = {576, 640, 4096};
    for (int ro = 0; ro < 2; ro++)
        for (size_t c = 0; c < sizeof cols_l / sizeof cols_l[0]; c++) {
            uint64_t rows = 35, cols = cols_l[c];
            uint8_t bits[35];
            for (uint64_t r = 0; r < rows; r++)
                bits[r] = r % 7 == 3 ? 5 : r % 11 == 5 ? 3 : r % 13 == 12 ? 8 : 4;
            float *w = malloc(rows * cols * sizeof *w);
            for (uint64_t i = 0; i < rows * cols; i++)
                w[i] = kg_unif(&rng, -1, 1);
            uint8_t *p = NULL;
            size_t nb = 0;
            cmf_err err;
            cmf_dtype dt = ro ? CMF_DT_VBIT_RO : CMF_DT_VBIT;
            CHECK(cmf_vbit_encode(dt, rows, cols, w, bits, &p, &nb, &err) == CMF_OK);
            free(w);
            if (!p) continue;
            int bad = check_payload(dt, p, nb, rows, cols, &rng);
            CHECK_MSG(bad == 0, "%s width runs [%llu x %llu]: %d mismatches", cmf_dtype_name(dt),
                      (unsigned long long)rows, (unsigned long long)cols, bad);
        }
}

/* q8_row's prepared token (kernel_i8_avx512.c, shared with the 4-bit class's in one buffer):
 * over chunks of 16 and 32 rows, bit for bit cmf_matmul_ex with CMF_KF_INT8_ACT over all rows;
 * with AMD's choice (cq_avx512_q8_amd) both are also the AVX2 tier's rows bit for bit. */
static void test_q8_row_tok8(kg_rng *rng, int amd) {
    cq_cpu_force(CQ_ISA_AVX512);
    if (cq_cpu_isa() < CQ_ISA_AVX512) return; /* CORTIQ_CPU capped the tier */
    cq_cpu_force_amd(amd);
    static const uint64_t shapes[][2] = {{16, 32}, {35, 576}, {100, 640}, {67, 4864}};
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
        uint64_t rows = shapes[k][0], cols = shapes[k][1], nb;
        kg_opts o = {0, 0, 0};
        uint8_t *p = kg_payload(CMF_DT_Q8_ROW, rows, cols, rng, &o, &nb);
        cmf_qmat m;
        CHECK(cmf_qmat_init(&m, CMF_DT_Q8_ROW, rows, cols, p, nb, "t", NULL) == CMF_OK);
        float *x = malloc(cols * sizeof *x), *want = malloc(rows * sizeof *want),
              *got = malloc(rows * sizeof *got);
        for (uint64_t i = 0; i < cols; i++)
            x[i] = kg_unif(rng, -1, 1) * (i % 29 == 0 ? 20.0f : 1.0f);
        cmf_matmul_ex(&m, x, 1, cols, want, rows, 0, rows, CMF_KF_INT8_ACT);
        if (amd) {
            CHECK(cq_avx2_q8dec_matvec(&m, x, got, 0, rows));
            CHECK_MSG(!memcmp(got, want, rows * sizeof *got),
                      "q8_row [%llu x %llu]: AMD's rows are not the AVX2 tier's",
                      (unsigned long long)rows, (unsigned long long)cols);
        }
        CHECK(cmf_tok8_supports(&m));
        void *tok = aligned_alloc(64, (cmf_tok8_bytes(cols) + 63) / 64 * 64);
        cmf_tok8_prepare(tok, x, cols, cmf_tok8_supports(&m));
        for (uint64_t c = 16; c <= 32; c += 16) {
            for (uint64_t r0 = 0; r0 < rows; r0 += c)
                cmf_matvec_tok8(&m, tok, got + r0, r0, r0 + c < rows ? r0 + c : rows);
            CHECK_MSG(!memcmp(got, want, rows * sizeof *got),
                      "q8_row [%llu x %llu] chunks of %llu (amd %d)", (unsigned long long)rows,
                      (unsigned long long)cols, (unsigned long long)c, amd);
        }
        cmf_qmat_free(&m);
        free(tok), free(p), free(x), free(want), free(got);
    }
    cq_cpu_force_amd(-1);
}

static void test_other_dtypes_refused(void) {
    kg_rng rng = {5};
    static const cmf_dtype other[] = {CMF_DT_F32, CMF_DT_Q8_ROW, CMF_DT_Q1T};
    for (size_t d = 0; d < sizeof other / sizeof other[0]; d++) {
        kg_opts o = {0, 0, 0};
        uint64_t nb;
        uint8_t *p = kg_payload(other[d], 2, 64, &rng, &o, &nb);
        cmf_qmat m;
        CHECK(cmf_qmat_init(&m, other[d], 2, 64, p, nb, "t", NULL) == CMF_OK);
        float x[64] = {1}, y[2] = {0};
        CHECK(!cq_avx512_i8dec_matvec(&m, x, y, 0, 2));
        CHECK(cmf_tok8_supports(&m) == (other[d] == CMF_DT_Q8_ROW ? CMF_TOK8_Q8 : 0));
        cmf_qmat_free(&m);
        free(p);
    }
}

int main(int argc, char **argv) {
    test_tier_select(argc, argv); /* registered for the avx512 tier only */
    const cq_cpu_features *f = cq_cpu_detect();
    if (!f->avx512bw || !f->avx512vnni || !__builtin_cpu_supports("avx512vbmi") ||
        !__builtin_cpu_supports("gfni")) {
        printf("SKIP: CPU lacks AVX-512 VNNI/VBMI or GFNI\n");
        return 77;
    }
    kg_rng rng = {2024};
    for (size_t d = 0; d < sizeof k_dts / sizeof k_dts[0]; d++)
        for (size_t s = 0; s < sizeof k_groups / sizeof k_groups[0]; s++) {
            uint64_t rows = 1 + (s * 7) % 13, cols = 32 * k_groups[s];
            int bad = check(k_dts[d], rows, cols, &rng);
            CHECK_MSG(bad == 0, "%s [%llu x %llu]: %d mismatches", cmf_dtype_name(k_dts[d]),
                      (unsigned long long)rows, (unsigned long long)cols, bad);
        }
    /* rows of real models (18-48 groups, and 17: a one-group tail) over whole 16-row blocks,
     * four rows per step, reduced together, and odd row counts (rows left after the steps of
     * four, a last block under 16 rows) */
    static const uint64_t short_groups[] = {17, 18, 20, 28, 48}, short_rows[] = {16, 35};
    for (size_t d = 0; d < sizeof k_dts / sizeof k_dts[0]; d++)
        for (size_t s = 0; s < sizeof short_groups / sizeof short_groups[0]; s++)
            for (size_t n = 0; n < sizeof short_rows / sizeof short_rows[0]; n++) {
                int bad = check(k_dts[d], short_rows[n], 32 * short_groups[s], &rng);
                CHECK_MSG(bad == 0, "%s [%llu x %llu]: %d mismatches", cmf_dtype_name(k_dts[d]),
                          (unsigned long long)short_rows[n],
                          (unsigned long long)(32 * short_groups[s]), bad);
            }
    test_vbit_width_runs();
    test_other_dtypes_refused();
    test_q8_row_tok8(&rng, 0);
    test_q8_row_tok8(&rng, 1);
    TEST_DONE();
}
