/* test_kernel_i8dec_avx2.c - the AVX2 tier's one-token int8-activation kernels for the 4-bit
 * class, vbit and q8_row (kernel_i8dec_avx2.c, kernel_i8dec_vbit_avx2.c, kernel_q8dec_avx2.c and,
 * with AVX-VNNI, kernel_i8dec_avxvnni.c, kernel_i8dec_vbit_avxvnni.c and kernel_q8dec_avxvnni.c)
 * against a double-precision
 * reference that quantizes the activations the same way (dx = absmax/127 per 32-group, round to
 * nearest even). With the activation rounding taken out of the comparison, the kernels must match
 * within float summation error, so a wrong offset, scale, lane or nibble order shows even where the
 * looser CMF_KF_INT8_ACT bound of test_kernel.c would hide it. The dispatcher (cmf_matmul_ex) and
 * the prepared token (cmf_tok8_*) on the AVX2 tier must give the same bits, over any row chunks. */
#include <math.h>
#include <string.h>

#include "common/cpu.h"
#include "common/test.h"
#include "common/tier.h"
#include "cortiq/kernels.h"
#include "cortiq/quant.h"
#include "quant/i8dec_ref.h"
#include "quant/kernel_gen.h"
#include "quant/kernel_i8dec.h"
#include "quant/kernel_impl.h"
#include "quant/kernels_engine.h"

/* vbit rows get random widths (3, 4, 5, 6, 8) with random codes, so 0 and 2^b - 1 occur and
 * the last groups of a payload take the zero-padded copy */
static const cmf_dtype k_dts[] = {CMF_DT_Q4_TILED, CMF_DT_Q4_BLOCK, CMF_DT_Q4TP,
                                  CMF_DT_VBIT,     CMF_DT_VBIT_RO,  CMF_DT_Q8_ROW};
/* group counts: tails of 1-3 groups after 0, 1 or more steps of 4, codes words of q4tp (8
 * groups) cut at every phase, the widths of real models (576, 896, 4864 columns) */
static const uint64_t k_groups[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 15, 17, 18, 28, 39, 152};

/* The kernel on a random m of dt against the reference; the count of mismatches. */
static int check(cmf_dtype dt, uint64_t rows, uint64_t cols, kg_rng *rng) {
    kg_opts o = {0, 0, 0};
    uint64_t nb;
    uint8_t *p = kg_payload(dt, rows, cols, rng, &o, &nb);
    cmf_qmat m;
    CHECK(cmf_qmat_init(&m, dt, rows, cols, p, nb, "t", NULL) == CMF_OK);
    float *x = malloc(cols * sizeof *x), *y = malloc(rows * sizeof *y),
          *y2 = malloc(rows * sizeof *y2);
    double *xd = malloc(cols * sizeof *xd);
    i8ref_token(rng, cols, x, xd);
    int bad = 0;
    const bool q8 = dt == CMF_DT_Q8_ROW;
    CHECK(q8 ? cq_avx2_q8dec_matvec(&m, x, y, 0, rows) : cq_avx2_i8dec_matvec(&m, x, y, 0, rows));
    i8ref_check_rows(&m, y, xd, &bad);
    if (!q8 && cq_cpu_avxvnni()) { /* the 4-bit and vbit vpdpbusd rows: the plain rows' bits */
        cq_cpu_force_avxvnni(0);
        CHECK(cq_avx2_i8dec_matvec(&m, x, y2, 0, rows));
        cq_cpu_force_avxvnni(1);
        for (uint64_t r = 0; r < rows; r++)
            if (memcmp(&y2[r], &y[r], sizeof *y) != 0 && bad++ < 3)
                fprintf(stderr, "  %s: plain rows gave %.9g, the AVX-VNNI rows %.9g\n",
                        cmf_dtype_name(dt), y2[r], y[r]);
    }
    /* the dispatcher takes this kernel for one token on the AVX2 tier */
    cmf_matmul_ex(&m, x, 1, cols, y2, rows, 0, rows, CMF_KF_INT8_ACT);
    for (uint64_t r = 0; r < rows; r++)
        if (y2[r] != y[r] && bad++ < 3)
            fprintf(stderr, "  %s: cmf_matmul_ex gave %.9g, the decode kernel %.9g\n",
                    cmf_dtype_name(dt), y2[r], y[r]);
    /* the prepared token: prepared once, run over chunks of 1, 3, 8 and 13 rows (rows reduced
     * 8 together or one by one give the same bits) */
    const int layout = q8 ? CMF_TOK8_Q8 : CMF_TOK8_I8DEC;
    CHECK(cmf_tok8_supports(&m) == layout);
    size_t tb = cmf_tok8_bytes(cols);
    CHECK(tb == cq_avx2_q8dec_tok_bytes(cols) + cq_avx2_i8dec_tok_bytes(cols) && tb > 0);
    void *tok = aligned_alloc(64, (tb + 63) / 64 * 64);
    cmf_tok8_prepare(tok, x, cols, layout);
    static const uint64_t chunks[] = {1, 3, 8, 13};
    for (size_t c = 0; c < sizeof chunks / sizeof chunks[0]; c++) {
        for (uint64_t r0 = 0; r0 < rows; r0 += chunks[c])
            cmf_matvec_tok8(&m, tok, y2 + r0, r0, r0 + chunks[c] < rows ? r0 + chunks[c] : rows);
        for (uint64_t r = 0; r < rows; r++)
            if (y2[r] != y[r] && bad++ < 3)
                fprintf(stderr, "  %s: chunks of %llu, row %llu: %.9g vs %.9g\n",
                        cmf_dtype_name(dt), (unsigned long long)chunks[c], (unsigned long long)r,
                        y2[r], y[r]);
    }
    free(tok);
    cmf_qmat_free(&m);
    free(p);
    free(x);
    free(y);
    free(y2);
    free(xd);
    return bad;
}

/* Other dtypes and widths are refused, writing nothing. */
/* The 8-row q4tp ladders (cq_avx2_q4tp_ladders8, the decode kernels') must be the one-row
 * ladder's bits (cq_avx2_q4tp_ladder, the GEMM's and the batched-decode copy's) for every
 * block length and start row, across the f16 range: rungs that overflow to inf, underflow
 * to 0 or are denormal included. */
static void test_ladders8_bits(void) {
    enum { ROWS = 21 };
    uint8_t p[ROWS * 16 + ROWS * 4 + ROWS] = {0};
    kg_rng rng = {77};
    for (int round = 0; round < 200; round++) {
        uint8_t *par = p + ROWS * 16;
        for (int r = 0; r < ROWS; r++) {
            uint16_t h[2];
            for (int k = 0; k < 2; k++) {
                h[k] = (uint16_t)kg_u32(&rng, 0x10000);
                if ((h[k] & 0x7C00) == 0x7C00) h[k] &= 0xBFFF; /* no inf / NaN: finite f16 */
                if (round % 2) h[k] &= 0xC7FF;                 /* half the rounds: |v| < 16 */
            }
            memcpy(par + 4 * r, h, 4);
        }
        cmf_qmat m;
        CHECK(cmf_qmat_init(&m, CMF_DT_Q4TP, ROWS, 32, p, sizeof p, "t", NULL) == CMF_OK);
        for (uint64_t r0 = 0; r0 < ROWS; r0++)
            for (unsigned n = 1; n <= 8 && r0 + n <= ROWS; n++) {
                float blk[32][8], one[32];
                cq_avx2_q4tp_ladders8(&m, r0, n, blk);
                for (unsigned k = 0; k < n; k++) {
                    cq_avx2_q4tp_ladder(&m, r0 + k, one);
                    for (int c = 0; c < 32; c++)
                        CHECK_MSG(memcmp(&blk[c][k], &one[c], 4) == 0 ||
                                      (isnan(blk[c][k]) && isnan(one[c])),
                                  "row %llu rung %d: %g against %g", (unsigned long long)(r0 + k),
                                  c, (double)blk[c][k], (double)one[c]);
                }
            }
        cmf_qmat_free(&m);
    }
}

static void test_refused(void) {
    kg_rng rng = {5};
    static const cmf_dtype other[] = {CMF_DT_F32, CMF_DT_Q8_2F, CMF_DT_Q1T};
    volatile uint64_t two = 2; /* not constant: GCC's overflow check misreads kg_payload */
    for (size_t d = 0; d < sizeof other / sizeof other[0]; d++) {
        kg_opts o = {0, 0, 0};
        uint64_t nb;
        uint8_t *p = kg_payload(other[d], two, 64, &rng, &o, &nb);
        cmf_qmat m;
        CHECK(cmf_qmat_init(&m, other[d], 2, 64, p, nb, "t", NULL) == CMF_OK);
        float x[64] = {1}, y[2] = {7, 7};
        CHECK(!cq_avx2_i8dec_matvec(&m, x, y, 0, 2));
        CHECK(!cq_avx2_q8dec_matvec(&m, x, y, 0, 2));
        CHECK(y[0] == 7 && y[1] == 7);
        CHECK(cmf_tok8_supports(&m) == 0);
        cmf_qmat_free(&m);
        free(p);
    }
    CHECK(cq_avx2_i8dec_tok_bytes(48) == 0 && cq_avx2_q8dec_tok_bytes(48) == 0 &&
          cmf_tok8_bytes(48) == 0);
    /* q8_row's 4-bit partner refuses it, and the other way round */
    kg_opts o = {0, 0, 0};
    uint64_t nb;
    uint8_t *p = kg_payload(CMF_DT_Q8_ROW, two, 64, &rng, &o, &nb);
    cmf_qmat m;
    CHECK(cmf_qmat_init(&m, CMF_DT_Q8_ROW, 2, 64, p, nb, "t", NULL) == CMF_OK);
    float x[64] = {1}, y[2] = {7, 7};
    CHECK(!cq_avx2_i8dec_matvec(&m, x, y, 0, 2) && y[0] == 7);
    cmf_qmat_free(&m);
    free(p);
}

int main(int argc, char **argv) {
    test_tier_select(argc, argv); /* registered for the avx2 tier only */
    cq_cpu_force(CQ_ISA_AVX2);    /* also on AVX-512 machines: the tier's dispatch */
    if (cq_cpu_isa() != CQ_ISA_AVX2) {
        printf("SKIP: CPU lacks AVX2\n");
        return 77;
    }
    /* where the CPU has AVX-VNNI, the dispatcher's rows of q8_row, the 4-bit class and vbit are
     * their vpdpbusd builds (kernel_q8dec_avxvnni.c, kernel_i8dec_*avxvnni.c), checked against
     * the plain kernels' bits; then without it */
    const int vnni_runs = cq_cpu_detect()->avxvnni ? 2 : 1;
    if (vnni_runs == 1) printf("note: no AVX-VNNI on this CPU, the vpdpbusd rows not checked\n");
    kg_rng rng = {2025};
    for (int vnni = vnni_runs - 1; vnni >= 0; vnni--) {
        cq_cpu_force_avxvnni(vnni);
        for (size_t d = 0; d < sizeof k_dts / sizeof k_dts[0]; d++)
            for (size_t s = 0; s < sizeof k_groups / sizeof k_groups[0]; s++) {
                uint64_t rows = 1 + (s * 7) % 13, cols = 32 * k_groups[s];
                int bad = check(k_dts[d], rows, cols, &rng);
                CHECK_MSG(bad == 0, "%s [%llu x %llu]: %d mismatches", cmf_dtype_name(k_dts[d]),
                          (unsigned long long)rows, (unsigned long long)cols, bad);
                bad = check(k_dts[d], 19, cols, &rng); /* two blocks of 8 rows and 3 alone */
                CHECK_MSG(bad == 0, "%s [19 x %llu]: %d mismatches", cmf_dtype_name(k_dts[d]),
                          (unsigned long long)cols, bad);
            }
    }
    cq_cpu_force_avxvnni(-1);
    test_refused();
    test_ladders8_bits();
    TEST_DONE();
}
