/* test_gemm_qact.c - the integer prefill GEMM (cmf_qact + cmf_matmul_qact):
 *  - activation codes: the AVX-512 and AVX2 quantizers give the scalar tier's codes byte for
 *    byte, NaN / inf / zero blocks included;
 *  - AVX-512 VNNI and AVX2 tiers vs scalar tier: the integer block sums are exact in all, so
 *    results differ only by f32 accumulation order (checked at 1e-5 of sum |w x|);
 *  - the AVX2 tier's AVX-VNNI passes (where the CPU has them) vs its vpmaddubsw ones: the same
 *    bits;
 *  - the AMX tier (tile products over the VNNI tier's panels) vs the VNNI tier: the same bits,
 *    whole token groups and a partial last one alike, Y's padding untouched;
 *  - vs the exact f32 product of the dequantized weights and the unquantized activations:
 *    within the documented bound sum_b sum|w| * absmax_b / 254 (+ f32 slack);
 *  - partial panels (rows not a multiple of 16), token counts 1..30, row sub-ranges, q8_row
 *    with cols not a multiple of 32; vbit / vbit_ro of random widths (their exact integer sums:
 *    test_gemm_qact_vbit.c). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/cpu.h"
#include "common/test.h"
#include "common/tier.h"
#include "cortiq/kernels.h"
#include "quant/kernels_engine.h"
#include "quant/kernel_gen.h"

static void *amalloc(size_t n) {
    return aligned_alloc(64, (n + 63) / 64 * 64);
}

static void fill_acts(kg_rng *r, float *X, size_t n, size_t cols) {
    for (size_t i = 0; i < n * cols; i++) {
        float v = kg_unif(r, -1.0f, 1.0f);
        if (kg_u32(r, 50) == 0) v *= 40.0f; /* outliers */
        if (kg_u32(r, 9) == 0) v = 0.0f;
        X[i] = v;
    }
    if (n * cols >= 64) /* one all-zero block */
        memset(X, 0, 32 * sizeof *X);
}

/* The AVX-512 checks run in this process (its tier, and a CPU that has it). */
static bool avx512_on(void) {
    return test_tier_on(CQ_ISA_AVX512) && cq_cpu_detect()->avx512f;
}
static bool vnni_on(void) {
    return test_tier_on(CQ_ISA_AVX512) && cq_cpu_detect()->avx512vnni;
}
static bool avx2_on(void) {
    return test_tier_on(CQ_ISA_AVX2) && cq_cpu_detect()->avx2 && cq_cpu_detect()->fma;
}
static bool amx_on(void) {
    return test_tier_on(CQ_ISA_AMX) && test_cpu_has_tier(CQ_ISA_AMX) && cq_cpu_detect()->amx_int8 &&
           cq_cpu_detect()->avx512vnni;
}

/* The quantizer of tier `tier` gives the scalar tier's codes, scales and sums. */
static int quantize_matches(cq_isa tier, size_t n, size_t cols, const float *X) {
    size_t sz = cmf_qact_bytes(n, cols);
    void *m1 = amalloc(sz), *m2 = amalloc(sz);
    cmf_qact a, b;
    cmf_qact_bind(&a, m1, n, cols);
    cmf_qact_bind(&b, m2, n, cols);
    cq_cpu_force(CQ_ISA_SCALAR);
    cmf_qact_quantize(&a, X, cols);
    cq_cpu_force(tier);
    cmf_qact_quantize(&b, X, cols);
    int ok = 1;
    for (size_t t = 0; t < n; t++)
        for (size_t k = 0; k < a.nb; k++) {
            size_t e = cmf_qact_index(&a, t, k);
            ok &= memcmp(a.q + 32 * e, b.q + 32 * e, 32) == 0 &&
                  memcmp(&a.scale[e], &b.scale[e], 4) == 0 && a.c128[e] == b.c128[e] &&
                  a.c8[e] == b.c8[e] && a.c127[e] == b.c127[e];
        }
    free(m1), free(m2);
    return ok;
}

static void check_dtype(cmf_dtype dt, uint64_t rows, uint64_t cols, uint64_t seed) {
    kg_rng r = {seed};
    kg_opts o = {0, 0, 0};
    uint64_t nbytes;
    uint8_t *payload = kg_payload(dt, rows, cols, &r, &o, &nbytes);
    cmf_qmat m;
    CHECK_STATUS(cmf_qmat_init(&m, dt, rows, cols, payload, nbytes, "w", &t_err_), CMF_OK);
    CHECK(cmf_qact_supports(&m));
    float *W = malloc(rows * cols * sizeof *W);
    for (uint64_t i = 0; i < rows; i++)
        cmf_qmat_dequant_row(&m, i, W + i * cols);
    static const size_t ns[] = {1, 2, 5, 12, 13, 25, 30};
    void *scratch = amalloc(cmf_qact_scratch_bytes(cols));
    for (size_t ni = 0; ni < sizeof ns / sizeof ns[0]; ni++) {
        size_t n = ns[ni];
        float *X = malloc(n * cols * sizeof *X);
        fill_acts(&r, X, n, cols);
        void *am = amalloc(cmf_qact_bytes(n, cols));
        cmf_qact a;
        cmf_qact_bind(&a, am, n, cols);
        cmf_qact_quantize(&a, X, cols);
        size_t ldy = rows + 3;
        float *Ys = calloc(n * ldy, sizeof *Ys), *Yv = calloc(n * ldy, sizeof *Yv),
              *Y2 = calloc(n * ldy, sizeof *Y2), *Ya = calloc(n * ldy, sizeof *Ya),
              *Yr = calloc(n * ldy, sizeof *Yr), *Yn = calloc(n * ldy, sizeof *Yn);
        /* row sub-ranges that start on a panel boundary (16 rows; 8 for AVX2), one that starts
         * and ends mid-panel (AVX2: rows 16..19 are a partial panel), and one to the end */
        uint64_t splits[4] = {0, rows > 16 ? 16 : rows, rows > 20 ? 20 : rows, rows};
        for (int part = 0; part < 3; part++) {
            uint64_t r0 = splits[part], r1 = splits[part + 1];
            if (r0 >= r1) continue;
            cq_cpu_force(CQ_ISA_SCALAR);
            cmf_matmul_qact(&m, &a, Ys + r0, ldy, r0, r1, scratch);
            if (vnni_on()) {
                cq_cpu_force(CQ_ISA_AVX512);
                CHECK(cmf_qact_fast());
                cmf_matmul_qact(&m, &a, Yv + r0, ldy, r0, r1, scratch);
            }
            if (avx2_on()) {
                cq_cpu_force(CQ_ISA_AVX2);
                CHECK(cmf_qact_simd() && !cmf_qact_fast());
                cq_cpu_force_avxvnni(0);
                cmf_matmul_qact(&m, &a, Y2 + r0, ldy, r0, r1, scratch);
                if (cq_cpu_detect()->avxvnni) { /* the vpdpbusd passes: the same bits */
                    cq_cpu_force_avxvnni(1);
                    cmf_matmul_qact(&m, &a, Yn + r0, ldy, r0, r1, scratch);
                }
                cq_cpu_force_avxvnni(-1);
            }
            if (amx_on()) { /* against the VNNI tier's bits */
                cq_cpu_force(CQ_ISA_AVX512);
                cmf_matmul_qact(&m, &a, Yr + r0, ldy, r0, r1, scratch);
                cq_cpu_force(CQ_ISA_AMX);
                CHECK(cmf_qact_fast());
                cmf_matmul_qact(&m, &a, Ya + r0, ldy, r0, r1, scratch);
            }
        }
        if (avx2_on() && cq_cpu_detect()->avxvnni)
            CHECK_MSG(!memcmp(Yn, Y2, n * ldy * sizeof *Yn),
                      "%s [%llu x %llu] n=%zu: avx2 with AVX-VNNI not the vpmaddubsw bits",
                      cmf_dtype_get(dt)->name, (unsigned long long)rows, (unsigned long long)cols,
                      n);
        if (amx_on())
            CHECK_MSG(!memcmp(Ya, Yr, n * ldy * sizeof *Ya),
                      "%s [%llu x %llu] n=%zu: amx not the avx512 tier's bits",
                      cmf_dtype_get(dt)->name, (unsigned long long)rows, (unsigned long long)cols,
                      n);
        size_t nb = a.kpad / 32;
        for (size_t t = 0; t < n; t++)
            for (uint64_t i = 0; i < rows; i++) {
                double exact = 0, mag = 0, bound = 0;
                for (size_t b = 0; b < nb; b++) {
                    double sw = 0, amax = 0;
                    for (uint64_t c = 32 * b; c < cols && c < 32 * b + 32; c++) {
                        double w = W[i * cols + c], x = X[t * cols + c];
                        exact += w * x;
                        mag += fabs(w * x);
                        sw += fabs(w);
                        if (fabs(x) > amax) amax = fabs(x);
                    }
                    bound += sw * amax / 254.0;
                }
                double ys = Ys[t * ldy + i];
                CHECK_MSG(fabs(ys - exact) <= bound * 1.001 + 1e-5 * mag + 1e-6,
                          "%s scalar row %llu tok %zu: %g vs exact %g (bound %g)",
                          cmf_dtype_get(dt)->name, (unsigned long long)i, t, ys, exact, bound);
                if (vnni_on())
                    CHECK_MSG(fabs(Yv[t * ldy + i] - ys) <= 1e-5 * (mag + bound) + 1e-6,
                              "%s avx512 row %llu tok %zu: %g vs scalar %g",
                              cmf_dtype_get(dt)->name, (unsigned long long)i, t, Yv[t * ldy + i],
                              ys);
                if (avx2_on())
                    CHECK_MSG(fabs(Y2[t * ldy + i] - ys) <= 1e-5 * (mag + bound) + 1e-6,
                              "%s avx2 row %llu tok %zu: %g vs scalar %g", cmf_dtype_get(dt)->name,
                              (unsigned long long)i, t, Y2[t * ldy + i], ys);
            }
        /* the padding columns of Y (ldy > rows) are never written */
        for (size_t t = 0; t < n; t++)
            for (size_t i = rows; i < ldy && t + 1 < n; i++)
                CHECK(Ys[t * ldy + i] == 0 && Yv[t * ldy + i] == 0 && Y2[t * ldy + i] == 0);
        free(Ys), free(Yv), free(Y2), free(Ya), free(Yr), free(Yn), free(am), free(X);
    }
    free(scratch), free(W), free(payload);
    cmf_qmat_free(&m);
}

/* The k token ranges of n random tokens quantized one after the other into zeroed memory give
 * the bytes of the whole batch quantized at once. */
static bool ranges_match(kg_rng *r, size_t n, size_t cols, const size_t (*ranges)[2], size_t k) {
    size_t sz = cmf_qact_bytes(n, cols);
    float *X = malloc(n * cols * sizeof *X);
    fill_acts(r, X, n, cols);
    void *m1 = amalloc(sz), *m2 = amalloc(sz);
    memset(m1, 0, sz), memset(m2, 0, sz);
    cmf_qact a, b;
    cmf_qact_bind(&a, m1, n, cols);
    cmf_qact_bind(&b, m2, n, cols);
    cmf_qact_quantize(&a, X, cols);
    for (size_t i = 0; i < k; i++)
        cmf_qact_quantize_rows(&b, X, cols, ranges[i][0], ranges[i][1]);
    bool same = memcmp(m1, m2, sz) == 0;
    free(m1), free(m2), free(X);
    return same;
}

int main(int argc, char **argv) {
    test_tier_select(argc, argv);
    kg_rng r = {7};
    /* quantizer parity, special values included */
    for (size_t cols = 1; cols <= 200; cols += 33) {
        size_t n = 3;
        float *X = malloc(n * cols * sizeof *X);
        fill_acts(&r, X, n, cols);
        X[0] = NAN;
        if (cols > 5) X[5] = INFINITY, X[cols + 1 < n * cols ? cols + 1 : 0] = -INFINITY;
        X[n * cols - 1] = 1e-30f;
        if (avx512_on())
            CHECK_MSG(quantize_matches(CQ_ISA_AVX512, n, cols, X), "avx512 codes differ, cols %zu",
                      cols);
        if (avx2_on())
            CHECK_MSG(quantize_matches(CQ_ISA_AVX2, n, cols, X), "avx2 codes differ, cols %zu",
                      cols);
        free(X);
    }
    /* quantizing token ranges separately gives the whole-batch result (every tier) */
    static const cq_isa qtiers[] = {CQ_ISA_SCALAR, CQ_ISA_AVX2, CQ_ISA_AVX512};
    for (int tier = 0; tier < 3; tier++) {
        if ((tier == 1 && !avx2_on()) || (tier == 2 && !avx512_on())) continue;
        cq_cpu_force(qtiers[tier]);
        static const size_t odd[][2] = {{13, 29}, {0, 5}, {5, 13}};
        CHECK_MSG(ranges_match(&r, 29, 70, odd, 3), "tier %d: ranged quantization differs", tier);
        /* thread shares cut at cmf_qact_cut: whole groups (the SIMD tiers stream them) */
        for (size_t n = 4; n <= 131; n += 9)
            for (size_t nt = 2; nt <= 3; nt++) {
                const cmf_qact shape = {.n = n}; /* all cmf_qact_cut reads */
                size_t per = (n + nt - 1) / nt, cut[3][2], covered = 0;
                for (size_t k = 0; k < nt; k++) { /* listed later shares first */
                    size_t *c = cut[nt - 1 - k];
                    c[0] = cmf_qact_cut(&shape, k * per),
                    c[1] = cmf_qact_cut(&shape, (k + 1) * per);
                    CHECK_MSG((c[0] % CMF_QACT_GROUP == 0 || c[0] == n) &&
                                  (c[1] % CMF_QACT_GROUP == 0 || c[1] == n) && c[0] <= c[1],
                              "cut of n %zu, share %zu: [%zu, %zu)", n, k, c[0], c[1]);
                    covered += c[1] - c[0];
                }
                CHECK_MSG(covered == n, "shares of n %zu cover %zu tokens", n, covered);
                CHECK_MSG(ranges_match(&r, n, 100, (const size_t(*)[2])cut, nt),
                          "tier %d, n %zu, %zu shares: differs", tier, n, nt);
            }
    }
    /* the scalar codes: round(x / s) with s = absmax / 127, sums */
    {
        float X[32];
        for (int i = 0; i < 32; i++)
            X[i] = (float)(i - 16) * 0.5f;
        void *am = amalloc(cmf_qact_bytes(1, 32));
        cmf_qact a;
        cmf_qact_bind(&a, am, 1, 32);
        cq_cpu_force(CQ_ISA_SCALAR);
        cmf_qact_quantize(&a, X, 32);
        CHECK(a.nb == 1 && cmf_qact_index(&a, 0, 0) == 0);
        CHECK(a.scale[0] == 8.0f / 127.0f);
        CHECK(a.q[0] == -127 && a.q[16] == 0 && a.q[31] == (int8_t)lrintf(7.5f * 127.0f / 8.0f));
        int sum = 0;
        for (int i = 0; i < 32; i++)
            sum += a.q[i];
        CHECK(a.c128[0] == -128 * sum && a.c8[0] == -8 * sum && a.c127[0] == -127 * sum);
        free(am);
    }
    static const cmf_dtype dts[] = {CMF_DT_Q8_ROW,   CMF_DT_Q4_TILED, CMF_DT_Q4TP,
                                    CMF_DT_Q4_BLOCK, CMF_DT_VBIT,     CMF_DT_VBIT_RO};
    for (size_t i = 0; i < sizeof dts / sizeof dts[0]; i++) {
        check_dtype(dts[i], 37, 128, 100 + i);
        check_dtype(dts[i], 16, 96, 200 + i);
        check_dtype(dts[i], 5, 320, 300 + i);
    }
    check_dtype(CMF_DT_Q8_ROW, 20, 100, 400); /* cols % 32 != 0 */
    check_dtype(CMF_DT_Q8_ROW, 33, 17, 401);
    check_dtype(CMF_DT_Q8_ROW, 11, 4, 402);    /* one partial block, one partial panel */
    check_dtype(CMF_DT_Q4_TILED, 27, 32, 403); /* one block, a partial panel */
    check_dtype(CMF_DT_Q8_ROW, 40, 200, 404);  /* 7 blocks */
    check_dtype(CMF_DT_Q4_TILED, 18, 64, 405); /* 2 blocks */
    /* unsupported forms */
    {
        uint64_t nbytes;
        kg_opts o = {0, 0, 0};
        uint8_t *p = kg_payload(CMF_DT_F16, 4, 64, &r, &o, &nbytes);
        cmf_qmat m;
        CHECK_STATUS(cmf_qmat_init(&m, CMF_DT_F16, 4, 64, p, nbytes, "w", &t_err_), CMF_OK);
        CHECK(!cmf_qact_supports(&m));
        cmf_qmat_free(&m);
        free(p);
    }
    if (avx2_on() && !cq_cpu_detect()->avxvnni)
        printf("note: no AVX-VNNI on this CPU, the AVX2 tier's vpdpbusd passes not checked\n");
    TEST_DONE();
}
