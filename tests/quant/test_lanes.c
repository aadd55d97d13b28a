/* test_lanes.c - the batched-decode copy (cmf_qmat_build_lanes, lanes_avx2.c) as the AVX2 tier
 * and the AVX-512 VNNI tier (lanes_avx512.c, two panels per vector) read it: q8_row, q4_tiled,
 * q4_block, q4tp, and vbit and vbit_ro (lanes_vbit*.c: every width, mixed in windows and pairs;
 * several windows, a partial last one), 1 to CMF_TOK8_MULTI_MAX tokens, row ranges that start
 * and end off the 8-row panels, the 16-row pairs and the 64-row windows, partial last panels,
 * an odd number of panels. Every token's rows must be
 *  - bit for bit the scalar computation the layout promises: per row and 32-group the exact
 *    integer sum of codes times the token's int8 codes, minus 8 times the codes' sum, converted,
 *    then acc = fma(sum, scale * dx, acc) group after group (so a token's bits cannot depend on
 *    which tokens share a pass), and
 *  - within float summation error of the double-precision product with the quantized token
 *    (i8dec_ref.h), an independent check of the layout's nibble and scale placement.
 * The prefill GEMM (cmf_matmul_qact), which reads the copy once it exists, must give the bits it
 * gives from the file's layout and, token by token, the bits of the copy's kernels on the same
 * int8 activations (short batches run those instead, so a prompt's bits cannot depend on its
 * chunks' sizes: test_chunk_exact.c), and rows decoded from the copy (cmf_qmat_dequant_row, a tied
 * embedding's lookups) the file's floats. Skipped on other tiers (scalar, AVX-512 without VNNI). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/f16.h"
#include "common/test.h"
#include "common/tier.h"
#include "cortiq/kernels.h"
#include "i8dec_ref.h"
#include "common/cpu.h"
#include "quant/kernel_gen.h"
#include "quant/kernel_i8dec.h"
#include "quant/kernel_impl.h"
#include "quant/kernels_engine.h"
#include "quant/q4tp_rung.h"

/* Row r's code and scale of group g, read from the matrix as stored. */
static unsigned code_of(const cmf_qmat *m, uint64_t r, uint64_t c) {
    const uint64_t g = c / 32, j = c % 32;
    const uint8_t *nib = m->dtype == CMF_DT_Q4_TILED
                             ? m->quants + (r * m->groups + g) * CQ_Q4T_TILE + 2
                             : m->quants + (r * m->groups + g) * 16;
    return j % 2 ? nib[j / 2] >> 4 : nib[j / 2] & 15u;
}

static float scale_of(const cmf_qmat *m, uint64_t r, uint64_t g) {
    if (m->dtype == CMF_DT_Q4TP) {
        float lad[32];
        cq_lanes_q4tp_ladder(m, r, lad);
        return lad[cq_q4tp_code(m, r, g)];
    }
    const uint8_t *h = m->dtype == CMF_DT_Q4_TILED ? m->quants + (r * m->groups + g) * CQ_Q4T_TILE
                                                   : m->scales + 2 * (r * m->groups + g);
    return f16_to_f32((uint16_t)(h[0] | h[1] << 8));
}

/* q8_row: per group the exact sum of codes times weights, acc = fma(sum, dx, acc) group after
 * group, then times the row's scale. */
static float row_ref_q8(const cmf_qmat *m, uint64_t r, const int8_t *xq, const float *dx) {
    const int8_t *w = (const int8_t *)m->quants + r * m->cols;
    float acc = 0;
    for (uint64_t g = 0; g < m->groups; g++) {
        int32_t s = 0;
        for (uint64_t j = 0; j < 32; j++)
            s += (int32_t)xq[32 * g + j] * w[32 * g + j];
        acc = fmaf((float)s, dx[g], acc);
    }
    const uint8_t *h = m->scales + 2 * r;
    return acc * f16_to_f32((uint16_t)(h[0] | h[1] << 8));
}

static bool is_vbit(cmf_dtype dt) {
    return dt == CMF_DT_VBIT || dt == CMF_DT_VBIT_RO;
}

/* Row r's value of column c: vbit's u - L (MSB-first b-bit codes), the 4-bit class's code - 8. */
static int32_t value_of(const cmf_qmat *m, uint64_t r, uint64_t c) {
    if (!is_vbit(m->dtype)) return (int32_t)code_of(m, r, c) - 8;
    const unsigned b = cq_vbit_bits(m, r);
    const uint8_t *p = cq_vbit_row(m, r);
    int32_t u = 0;
    for (uint64_t k = c * b; k < (c + 1) * b; k++)
        u = u << 1 | (p[k / 8] >> (7 - k % 8) & 1);
    return u - ((1 << (b - 1)) - 1);
}

/* The layout's promised arithmetic for row r and a token prepared in the q8_row layout. */
static float row_ref(const cmf_qmat *m, uint64_t r, const void *tok) {
    const int8_t *xq = tok;
    const float *dx = (const float *)(const void *)(xq + m->cols);
    if (m->dtype == CMF_DT_Q8_ROW) return row_ref_q8(m, r, xq, dx);
    float acc = 0;
    for (uint64_t g = 0; g < m->groups; g++) {
        int32_t s = 0;
        for (uint64_t j = 0; j < 32; j++)
            s += (int32_t)xq[32 * g + j] * value_of(m, r, 32 * g + j);
        const float f = (is_vbit(m->dtype) ? cq_vbit_scale(m, r, g) : scale_of(m, r, g)) * dx[g];
        acc = fmaf((float)s, f, acc);
    }
    return acc;
}

static void *amalloc(size_t n) {
    return aligned_alloc(64, (n + 63) / 64 * 64);
}

/* The integer GEMM over 13 tokens of x (rows [r0, rows)) from m as stored and from lanes. */
static void check_gemm(const cmf_qmat *plain, const cmf_qmat *lanes, uint64_t r0, kg_rng *rng) {
    const size_t n = 13, cols = (size_t)plain->cols, rows = (size_t)plain->rows;
    float *x = malloc(n * cols * sizeof *x), *ya = malloc(n * rows * sizeof *ya),
          *yb = malloc(n * rows * sizeof *yb);
    for (size_t i = 0; i < n * cols; i++)
        x[i] = kg_unif(rng, -1, 1);
    cmf_qact a;
    void *am = amalloc(cmf_qact_bytes(n, cols)), *scratch = amalloc(cmf_qact_scratch_bytes(cols));
    cmf_qact_bind(&a, am, n, cols);
    cmf_qact_quantize(&a, x, cols);
    memset(ya, 0, n * rows * sizeof *ya);
    memset(yb, 0, n * rows * sizeof *yb);
    cmf_matmul_qact(plain, &a, ya + r0, rows, r0, rows, scratch);
    cmf_matmul_qact(lanes, &a, yb + r0, rows, r0, rows, scratch);
    CHECK_MSG(memcmp(ya, yb, n * rows * sizeof *ya) == 0,
              "%s %zu x %zu from row %llu: the GEMM "
              "from the lanes differs",
              cmf_dtype_name(plain->dtype), rows, cols, (unsigned long long)r0);
    /* the copy's own kernels on int8 activations (what a short batch runs instead of the GEMM,
     * matmul_sched.c): each token the GEMM's bits, whatever the batch's size */
    static const size_t ks[] = {1, 3, 6, 8, 13};
    for (size_t i = 0; i < sizeof ks / sizeof *ks; i++) {
        memset(yb, 0xff, n * rows * sizeof *yb);
        cmf_matmul_ex(lanes, x, ks[i], cols, yb + r0, rows, r0, rows, CMF_KF_INT8_ACT);
        int off = 0;
        for (size_t t = 0; t < ks[i]; t++)
            off += memcmp(ya + t * rows + r0, yb + t * rows + r0, (rows - r0) * sizeof *ya) != 0;
        CHECK_MSG(off == 0,
                  "%s %zu x %zu from row %llu: %d of %zu tokens through the lanes "
                  "differ from the GEMM",
                  cmf_dtype_name(plain->dtype), rows, cols, (unsigned long long)r0, off, ks[i]);
    }
    free(x), free(ya), free(yb), free(am), free(scratch);
}

/* q4tp rows whose ladders leave the normal floats (the AVX2 exp2 that scales in two steps):
 * every third row 2^(-125 - 0.5 c), or 2^(20 - 6 c), both reaching denormals and zero */
static void far_ladders(uint8_t *payload, uint64_t rows, uint64_t cols) {
    uint8_t *ls = payload + rows * cols / 2;
    for (uint64_t r = 0; r < rows; r += 3) {
        st_u16(ls + 4 * r, f32_to_f16(r % 2 ? -125.0f : 20.0f));
        st_u16(ls + 4 * r + 2, f32_to_f16(r % 2 ? -0.5f : -6.0f));
    }
}

static void check(cmf_dtype dt, uint64_t rows, uint64_t cols, uint64_t seed, unsigned width) {
    kg_rng rng = {seed};
    kg_opts o = {0, 0, width};
    uint64_t nbytes;
    uint8_t *payload = kg_payload(dt, rows, cols, &rng, &o, &nbytes);
    if (dt == CMF_DT_Q4TP && seed % 2) far_ladders(payload, rows, cols);
    cmf_qmat m, plain;
    CHECK_STATUS(cmf_qmat_init(&m, dt, rows, cols, payload, nbytes, "w", &t_err_), CMF_OK);
    CHECK_STATUS(cmf_qmat_init(&plain, dt, rows, cols, payload, nbytes, "w", &t_err_), CMF_OK);
    CHECK(m.lanes == NULL);
    CHECK(cmf_qmat_build_lanes(&m));
    CHECK(m.lanes != NULL);
    CHECK(cmf_qmat_build_lanes(&m)); /* a second call keeps the copy */
    /* the layout the copy's kernels read: AVX2's q8_row one, which AVX-512 adds as its own */
    const int lay = cq_cpu_isa() >= CQ_ISA_AVX512 ? CMF_TOK8_LANES : CMF_TOK8_Q8;
    CHECK(cmf_tok8_supports(&m) == lay);
    /* rows read from the copy (a tied embedding) are the file's floats, bit for bit, with the
     * file's bytes gone */
    CHECK(cmf_qmat_lanes_rows(&m));
    uint8_t *dup = malloc(nbytes);
    memcpy(dup, payload, nbytes);
    cmf_qmat rm;
    CHECK_STATUS(cmf_qmat_init(&rm, dt, rows, cols, dup, nbytes, "w", &t_err_), CMF_OK);
    CHECK(cmf_qmat_build_lanes(&rm));
    memset(dup, 0x55, nbytes);
    float *ra = malloc(cols * sizeof *ra), *rb = malloc(cols * sizeof *rb);
    int rows_off = 0;
    for (uint64_t r = 0; r < rows; r++) {
        cmf_qmat_dequant_row(&plain, r, ra);
        memset(rb, 0xff, cols * sizeof *rb);
        cmf_qmat_dequant_row(&rm, r, rb);
        rows_off += memcmp(ra, rb, cols * sizeof *ra) != 0;
    }
    CHECK_MSG(rows_off == 0, "%s %llu x %llu: %d rows decoded from the copy differ",
              cmf_dtype_name(dt), (unsigned long long)rows, (unsigned long long)cols, rows_off);
    cmf_qmat_free(&rm);
    free(ra), free(rb), free(dup);
    enum { T = CMF_TOK8_MULTI_MAX };
    const size_t tb = (cmf_tok8_bytes(cols) + 63) / 64 * 64;
    uint8_t *toks = aligned_alloc(64, T * tb);
    float *x = malloc(cols * sizeof *x), *want = malloc(T * rows * sizeof(float)),
          *got = malloc(T * rows * sizeof(float));
    double *xd = malloc(cols * sizeof *xd);
    float *x3 = malloc(3 * cols * sizeof *x3); /* the first 3 tokens, for cmf_matmul_ex */
    const void *tp[T];
    int bad = 0;
    for (size_t t = 0; t < T; t++) {
        i8ref_token(&rng, cols, x, xd);
        cmf_tok8_prepare(toks + t * tb, x, cols, lay);
        if (t < 3) memcpy(x3 + t * cols, x, cols * sizeof *x);
        tp[t] = toks + t * tb;
        for (uint64_t r = 0; r < rows; r++)
            want[t * rows + r] = row_ref(&m, r, cq_tok8_lanes_part(tp[t], cols));
        if (t == 0) { /* the whole matrix, one token, against the double product */
            cmf_matvec_tok8(&m, tp[0], got, 0, rows);
            i8ref_check_rows(&m, got, xd, &bad);
            CHECK_MSG(bad == 0, "%s %llu x %llu: %d rows off the double product",
                      cmf_dtype_name(dt), (unsigned long long)rows, (unsigned long long)cols, bad);
        }
    }
    /* a small batch with int8 activations (a short prompt) reads the copy the same way */
    memset(got, 0xff, T * rows * sizeof *got);
    cmf_matmul_ex(&m, x3, 3, cols, got, rows, 0, rows, CMF_KF_INT8_ACT);
    CHECK_MSG(memcmp(want, got, 3 * rows * sizeof *got) == 0,
              "%s %llu x %llu: cmf_matmul_ex of 3 "
              "tokens differs",
              cmf_dtype_name(dt), (unsigned long long)rows, (unsigned long long)cols);
    const uint64_t ranges[][2] = {{0, rows},
                                  {16, rows},
                                  {3, rows},
                                  {5, rows > 13 ? 13 : rows},
                                  {rows - 1, rows},
                                  {8, rows},
                                  {20, rows > 29 ? 29 : rows},
                                  {64, rows},
                                  {rows > 70 ? 70 : 0, rows > 140 ? 140 : rows}};
    for (size_t q = 0; q < sizeof ranges / sizeof *ranges; q++) {
        const uint64_t r0 = ranges[q][0], r1 = ranges[q][1];
        if (r0 >= r1) continue;
        for (size_t n = 1; n <= T; n++) {
            float *ys[T];
            const void *tq[T];
            memset(got, 0xff, T * rows * sizeof *got);
            for (size_t t = 0; t < n; t++) { /* another order than prepared */
                tq[t] = tp[(t + n) % T];
                ys[t] = got + t * rows;
            }
            if (n == 1)
                cmf_matvec_tok8(&m, tq[0], ys[0], r0, r1);
            else
                cmf_matvec_tok8_multi(&m, tq, n, ys, r0, r1);
            for (size_t t = 0; t < n; t++)
                CHECK_MSG(
                    memcmp(want + ((t + n) % T) * rows + r0, ys[t], (r1 - r0) * sizeof(float)) == 0,
                    "%s %llu x %llu, rows [%llu, %llu), token %zu of %zu differs",
                    cmf_dtype_name(dt), (unsigned long long)rows, (unsigned long long)cols,
                    (unsigned long long)r0, (unsigned long long)r1, t, n);
        }
    }
    check_gemm(&plain, &m, 0, &rng);
    check_gemm(&plain, &m, rows > 16 ? 16 : 0, &rng);
    check_gemm(&plain, &m, rows > 64 ? 64 : 0, &rng); /* vbit: from its second window */
    check_gemm(&plain, &m, rows > 3 ? 3 : 0, &rng);   /* off the panels: packed from the file */
    cmf_qmat_free(&m);
    cmf_qmat_free(&plain);
    CHECK(m.lanes == NULL);
    free(toks), free(x), free(x3), free(xd), free(want), free(got), free(payload);
}

/* The tier's q4tp ladder (the copy's rungs) against the format's (q4tp_rung.h: exp2f(lo) times
 * exp2f(step) per rung) on rows like real ones (lo in [-24, 4], step in [0, 1]): both tiers
 * build it from 2^lo and powers of 2^step, which carry the polynomial's error of 2^step up the
 * ladder as the format's chain carries exp2f's, so rung 31 may sit ~40 ulp from it; a rung
 * off by one power of 2^step is far outside. */
static void check_ladder_accuracy(void) {
    kg_rng rng = {91};
    uint8_t p[16 + 4 + 1] = {0};
    double worst = 0;
    for (int round = 0; round < 4000; round++) {
        const uint16_t lo = f32_to_f16(kg_unif(&rng, -24.0f, 4.0f)),
                       st = f32_to_f16(kg_unif(&rng, 0.0f, 1.0f));
        memcpy(p + 16, &lo, 2);
        memcpy(p + 18, &st, 2);
        cmf_qmat m;
        CHECK(cmf_qmat_init(&m, CMF_DT_Q4TP, 1, 32, p, sizeof p, "t", NULL) == CMF_OK);
        float got[32], want[32];
        cq_lanes_q4tp_ladder(&m, 0, got);
        cq_q4tp_ladder_f32(f16_to_f32(lo), f16_to_f32(st), want);
        for (int c = 0; c < 32; c++) {
            const double rel = fabs((double)got[c] - want[c]) / want[c];
            worst = rel > worst ? rel : worst;
        }
        cmf_qmat_free(&m);
    }
    CHECK_MSG(worst < 8e-6, "q4tp ladder %.3g from the format's (relative)", worst);
}

static void check_all(void);

int main(int argc, char **argv) {
    test_tier_select(argc, argv);
    if (t_tier >= 0) cq_cpu_force((cq_isa)t_tier); /* that tier's copy and kernels throughout */
    cmf_qmat probe;
    uint64_t nb;
    kg_rng r = {1};
    kg_opts o = {0, 0, 0};
    uint8_t *p = kg_payload(CMF_DT_Q4_TILED, 8, 32, &r, &o, &nb);
    CHECK_STATUS(cmf_qmat_init(&probe, CMF_DT_Q4_TILED, 8, 32, p, nb, "p", &t_err_), CMF_OK);
    const bool avx2 = cmf_qmat_build_lanes(&probe);
    cmf_qmat_free(&probe);
    free(p);
    if (!avx2) {
        printf("SKIP: the copy is read by the AVX2 and AVX-512 VNNI tiers\n");
        return 77;
    }
    p = kg_payload(CMF_DT_VBIT_RO, 8, 64, &r, &o, &nb);
    CHECK_STATUS(cmf_qmat_init(&probe, CMF_DT_VBIT_RO, 8, 64, p, nb, "p", &t_err_), CMF_OK);
    CHECK(cmf_qmat_build_lanes(&probe) && probe.lanes != NULL);
    cmf_qmat_free(&probe);
    free(p);
    check_ladder_accuracy();
    /* the AVX2 tier's passes twice where the CPU has AVX-VNNI: vpmaddubsw and vpdpbusd builds */
    const int vnni_runs = cq_cpu_isa() == CQ_ISA_AVX2 && cq_cpu_detect()->avxvnni ? 2 : 1;
    if (cq_cpu_isa() == CQ_ISA_AVX2 && vnni_runs == 1)
        printf("note: no AVX-VNNI on this CPU, the AVX2 tier's vpdpbusd passes not checked\n");
    for (int vnni = 0; vnni < vnni_runs; vnni++) {
        cq_cpu_force_avxvnni(vnni_runs == 2 ? vnni : -1);
        check_all();
    }
    cq_cpu_force_avxvnni(-1);
    TEST_DONE();
}

/* Every dtype and shape of the copy, on the tier in effect. */
static void check_all(void) {
    static const cmf_dtype dts[] = {CMF_DT_Q8_ROW, CMF_DT_Q4_TILED, CMF_DT_Q4_BLOCK, CMF_DT_Q4TP};
    /* 1056 columns: 33 groups, a long row of an odd group count */
    static const uint64_t cols[] = {32, 96, 576, 896, 1056};
    static const uint64_t rows[] = {8, 5, 37, 64, 24};
    uint64_t seed = 7;
    for (size_t d = 0; d < sizeof dts / sizeof *dts; d++)
        /* q4tp both ways the AVX2 tier takes its rungs (lanes_avx2.c: a gather where gathers
         * are fast, else blends), whichever CPU runs the test */
        for (int fast = 0; fast < (dts[d] == CMF_DT_Q4TP ? 2 : 1); fast++) {
            cq_cpu_force_gather_fast(dts[d] == CMF_DT_Q4TP ? fast : -1);
            for (size_t c = 0; c < sizeof cols / sizeof *cols; c++)
                for (size_t k = 0; k < sizeof rows / sizeof *rows; k++)
                    check(dts[d], rows[k], cols[c], seed++, 0);
        }
    cq_cpu_force_gather_fast(-1);
    /* vbit: every width (each row one of 3-8: all three forms, mixed in windows and pairs), the
     * real files' mix, one width throughout; several windows, a partial last one */
    static const uint64_t vrows[] = {8, 37, 64, 150, 203};
    static const unsigned widths[] = {0, KG_VBIT_REAL, 4, 5, 8};
    for (size_t d = 0; d < 2; d++)
        for (size_t c = 0; c < 3; c++)
            for (size_t k = 0; k < sizeof vrows / sizeof *vrows; k++)
                for (size_t w = 0; w < sizeof widths / sizeof *widths; w++)
                    check(d ? CMF_DT_VBIT_RO : CMF_DT_VBIT, vrows[k], cols[c], seed++, widths[w]);
}
