/* test_kernel.c - every kernel tier (scalar, AVX2, AVX-512) of every matrix dtype against a
 * double-precision dot product of the scalar dequantized rows, on random valid payloads.
 *
 * Tolerance (f32 activations): |y - ref| <= 2e-5 * sum_i |w_i x_i| (+ the same over the
 * base weights for q1s/q1t, whose SIMD tiers add the overlay as a correction) + 1e-30.
 * Float summation over <= 4096 terms keeps the error near 1e-6 of that sum. */
#include <math.h>

#include "common/cpu.h"
#include "common/hugepages.h"
#include "common/test.h"
#include "common/tier.h"
#include "cortiq/kernels.h"
#include "quant/kernels_engine.h"
#include "quant/kernel_gen.h"
#include "bench/kernel_bench.h"
#include "quant/kernel_impl.h"

/* This program links with -Wl,--wrap=cq_kernel_scratch (tests/CMakeLists.txt): while
 * no_scratch is set every per-call scratch request fails, which sends the kernels down their
 * allocation-free fallback paths (so those are tested too). */
static int no_scratch;
void *__real_cq_kernel_scratch(cq_scratch_slot slot, size_t bytes);
void *__wrap_cq_kernel_scratch(cq_scratch_slot slot, size_t bytes);
void *__wrap_cq_kernel_scratch(cq_scratch_slot slot, size_t bytes) {
    return no_scratch ? NULL : __real_cq_kernel_scratch(slot, bytes);
}

static const cmf_dtype k_all[] = {CMF_DT_F32,      CMF_DT_F16,  CMF_DT_BF16,  CMF_DT_Q8_ROW,
                                  CMF_DT_Q4_BLOCK, CMF_DT_VBIT, CMF_DT_Q8_2F, CMF_DT_VBIT_RO,
                                  CMF_DT_Q4_TILED, CMF_DT_Q1,   CMF_DT_Q1S,   CMF_DT_Q1T,
                                  CMF_DT_Q4TP};
#define N_ALL (sizeof k_all / sizeof k_all[0])

static bool any_cols(cmf_dtype dt) {
    return dt == CMF_DT_F32 || dt == CMF_DT_F16 || dt == CMF_DT_BF16 || dt == CMF_DT_Q8_ROW ||
           dt == CMF_DT_Q8_2F || dt == CMF_DT_Q4_BLOCK;
}

typedef struct {
    uint64_t rows, cols;
} shape_t;

/* {3, 544} and {2, 1248} (17 and 39 groups) have whole 16-group blocks plus a tail; {19, 100}
 * and {37, 48}: 16-row blocks (the one-token stream kernels) plus odd rows, with a masked tail;
 * {11, 59} and {21, 96}: 8-row blocks (the AVX2 one-token kernels) plus odd rows, with an
 * 8-column step and a cols % 8 tail (59) and an odd group count (96, the int8 path). */
static const shape_t k_shapes[] = {{1, 32},   {3, 64},   {7, 96},   {17, 256}, {5, 1024}, {2, 4096},
                                   {33, 160}, {1, 7},    {5, 33},   {9, 100},  {4, 17},   {6, 250},
                                   {3, 544},  {2, 1248}, {19, 100}, {37, 48},  {11, 59},  {21, 96}};
#define N_SHAPES (sizeof k_shapes / sizeof k_shapes[0])

/* Reference y and sum|w x| (over final and, for overlays, base weights) in double. */
static void reference(const cmf_qmat *m, const float *X, size_t n, size_t ldx, double *ref,
                      double *mag) {
    float *w = malloc(m->cols * sizeof *w), base[32];
    for (uint64_t r = 0; r < m->rows; r++) {
        cmf_qmat_dequant_row(m, r, w);
        for (size_t t = 0; t < n; t++) {
            double s = 0, a = 0;
            for (uint64_t i = 0; i < m->cols; i++) {
                s += (double)w[i] * X[t * ldx + i];
                a += fabs((double)w[i] * X[t * ldx + i]);
            }
            if (m->dtype == CMF_DT_Q1S || m->dtype == CMF_DT_Q1T)
                for (uint64_t g = 0; g < m->groups; g++) {
                    cq_ref_decode_group(m, r, g, base);
                    for (unsigned i = 0; i < 32; i++)
                        a += fabs((double)base[i] * X[t * ldx + 32 * g + i]);
                }
            ref[t * m->rows + r] = s;
            mag[t * m->rows + r] = a;
        }
    }
    free(w);
}

static int check_tier(const cmf_qmat *m, cq_isa isa, kg_rng *rng) {
    static const size_t k_tokens[] = {1, 2, 3, 4, 5, 9, 13, 27, 40}; /* 40: AMX batches */
    int bad = 0;
    if (!test_tier_on(isa)) return 0; /* not this run's tier */
    cq_cpu_force(isa);
    if (cq_cpu_isa() != isa) return 0; /* the CPU lacks this tier */
    for (size_t ti = 0; ti < sizeof k_tokens / sizeof k_tokens[0]; ti++) {
        size_t n = k_tokens[ti], ldx = m->cols + (ti & 1 ? 3 : 0);
        float *X = malloc(n * ldx * sizeof *X), *Y = malloc(n * m->rows * sizeof *Y);
        double *ref = malloc(n * m->rows * sizeof *ref), *mag = malloc(n * m->rows * sizeof *mag);
        for (size_t i = 0; i < n * ldx; i++)
            X[i] = kg_unif(rng, -1, 1);
        reference(m, X, n, ldx, ref, mag);
        /* full range, then a sub-range written at Y + 0 */
        uint64_t r0 = 0, r1 = m->rows;
        for (int pass = 0; pass < 2; pass++) {
            if (pass == 1) {
                if (m->rows < 3) break;
                r0 = 1;
                r1 = m->rows - 1;
            }
            for (size_t i = 0; i < n * m->rows; i++)
                Y[i] = NAN;
            if (n == 1 && ldx == m->cols)
                cmf_matvec(m, X, Y, r0, r1);
            else
                cmf_matmul_ex(m, X, n, ldx, Y, m->rows, r0, r1, 0);
            for (size_t t = 0; t < n; t++)
                for (uint64_t r = r0; r < r1; r++) {
                    double got = Y[t * m->rows + (r - r0)], want = ref[t * m->rows + r];
                    double tol = 2e-5 * mag[t * m->rows + r] + 1e-30;
                    if (!(fabs(got - want) <= tol)) {
                        if (bad++ < 5)
                            fprintf(stderr,
                                    "  %s [%llu x %llu] tier %s n=%zu row %llu tok %zu: got %.9g "
                                    "want %.9g tol %.3g\n",
                                    cmf_dtype_name(m->dtype), (unsigned long long)m->rows,
                                    (unsigned long long)m->cols, cq_isa_name(isa), n,
                                    (unsigned long long)r, t, got, want, tol);
                    }
                }
        }
        free(X);
        free(Y);
        free(ref);
        free(mag);
    }
    return bad;
}

/* CMF_KF_INT8_ACT: activations rounded to int8 per 32-group, so the bound grows by
 * sum_g sum_{i in g} |w_i| * absmax_g(x) / 254 (half a quantization step per value). */
static int check_int8(const cmf_qmat *m, cq_isa isa, kg_rng *rng) {
    if (!test_tier_on(isa)) return 0;
    cq_cpu_force(isa);
    if (cq_cpu_isa() != isa) return 0;
    size_t n = 5, ldx = m->cols + 1;
    float *X = malloc(n * ldx * sizeof *X), *Y = malloc(n * m->rows * sizeof *Y),
          *w = malloc(m->cols * sizeof *w);
    double *ref = malloc(n * m->rows * sizeof *ref), *mag = malloc(n * m->rows * sizeof *mag);
    for (size_t i = 0; i < n * ldx; i++)
        X[i] = kg_unif(rng, -1, 1) * (i % 37 == 0 ? 30.0f : 1.0f);
    reference(m, X, n, ldx, ref, mag);
    int bad = 0;
    for (size_t k = 1; k <= n; k += 3) { /* 1 token, then 4 + 1 */
        cmf_matmul_ex(m, X, k, ldx, Y, m->rows, 0, m->rows, CMF_KF_INT8_ACT);
        for (uint64_t r = 0; r < m->rows; r++) {
            cmf_qmat_dequant_row(m, r, w);
            for (size_t t = 0; t < k; t++) {
                double bound = 2e-5 * mag[t * m->rows + r] + 1e-30;
                for (uint64_t g = 0; g < m->cols / 32; g++) {
                    double amax = 0, sw = 0;
                    for (int i = 0; i < 32; i++) {
                        amax = fmax(amax, fabs(X[t * ldx + 32 * g + i]));
                        sw += fabs(w[32 * g + i]);
                    }
                    bound += 1.001 * sw * amax / 254;
                }
                double got = Y[t * m->rows + r], want = ref[t * m->rows + r];
                if (!(fabs(got - want) <= bound) && bad++ < 3)
                    fprintf(stderr,
                            "  int8 %s [%llu x %llu] tier %s row %llu tok %zu: got %.9g want %.9g "
                            "bound %.3g\n",
                            cmf_dtype_name(m->dtype), (unsigned long long)m->rows,
                            (unsigned long long)m->cols, cq_isa_name(isa), (unsigned long long)r, t,
                            got, want, bound);
            }
        }
    }
    free(X);
    free(Y);
    free(w);
    free(ref);
    free(mag);
    return bad;
}

static void test_all_tiers(void) {
    kg_rng rng = {42};
    for (size_t d = 0; d < N_ALL; d++) {
        for (size_t s = 0; s < N_SHAPES; s++) {
            cmf_dtype dt = k_all[d];
            shape_t sh = k_shapes[s];
            if (sh.cols % 32 && !any_cols(dt)) continue;
            for (int unsorted = 0; unsorted < 2; unsorted++) {
                if (unsorted && dt != CMF_DT_Q1S && dt != CMF_DT_Q1T) break;
                kg_opts o = {unsorted, 3, 0};
                uint64_t nb;
                uint8_t *p = kg_payload(dt, sh.rows, sh.cols, &rng, &o, &nb);
                cmf_qmat m;
                cmf_err err;
                cmf_status st = cmf_qmat_init(&m, dt, sh.rows, sh.cols, p, nb, "t", &err);
                CHECK_MSG(st == CMF_OK, "%s [%llu x %llu]: %s", cmf_dtype_name(dt),
                          (unsigned long long)sh.rows, (unsigned long long)sh.cols, err.msg);
                if (st == CMF_OK) {
                    for (int isa = CQ_ISA_SCALAR; isa <= CQ_ISA_AMX; isa++) {
                        int bad = 0;
                        /* f16 / bf16 on AVX-512: the rows for other CPUs, then AMD's
                         * (cq_cpu_amd) */
                        const bool vendor = dt == CMF_DT_F16 || dt == CMF_DT_BF16;
                        for (int amd = 0; amd < (vendor ? 2 : 1); amd++) {
                            cq_cpu_force_amd(vendor ? amd : -1);
                            bad += check_tier(&m, (cq_isa)isa, &rng);
                        }
                        cq_cpu_force_amd(-1);
                        if (sh.cols % 32 == 0) bad += check_int8(&m, (cq_isa)isa, &rng);
                        CHECK_MSG(bad == 0, "%s [%llu x %llu] tier %s: %d mismatches",
                                  cmf_dtype_name(dt), (unsigned long long)sh.rows,
                                  (unsigned long long)sh.cols, cq_isa_name((cq_isa)isa), bad);
                    }
                    cmf_qmat_free(&m);
                }
                free(p);
            }
        }
    }
}

/* The dequantized row must follow the layout: spot values computed by hand here. */
static void test_layout_spots(void) {
    cmf_qmat m;
    float w[64];
    /* q4_tiled: element 2k is the low nibble, scale first in the tile */
    uint8_t t[18] = {0};
    st_u16(t, f32_to_f16(0.5f));
    t[2] = 0x3A; /* element 0 = 0xA - 8 = 2, element 1 = 0x3 - 8 = -5 */
    CHECK(cmf_qmat_init(&m, CMF_DT_Q4_TILED, 1, 32, t, 18, "t", NULL) == CMF_OK);
    cmf_qmat_dequant_row(&m, 0, w);
    CHECK(w[0] == 1.0f && w[1] == -2.5f && w[2] == -4.0f);
    /* vbit 3 bits MSB-first: bytes 0b101'011'00 ... -> u0 = 5, u1 = 3; L = 3 */
    uint8_t v[1 + 2 + 12] = {3};
    st_u16(v + 1, f32_to_f16(2.0f));
    v[3] = 0xAC; /* 1010 1100: u0 = 101 = 5, u1 = 011 = 3, u2 starts 00.. */
    CHECK(cmf_qmat_init(&m, CMF_DT_VBIT, 1, 32, v, sizeof v, "t", NULL) == CMF_OK);
    cmf_qmat_dequant_row(&m, 0, w);
    CHECK(w[0] == 4.0f && w[1] == 0.0f && w[2] == -6.0f);
    cmf_qmat_free(&m);
    /* q1: bit k of byte j (LSB-first) is weight 8j + k */
    uint8_t q[6] = {0};
    st_u16(q, f32_to_f16(0.25f));
    q[2] = 0x02;
    q[5] = 0x80;
    CHECK(cmf_qmat_init(&m, CMF_DT_Q1, 1, 32, q, 6, "t", NULL) == CMF_OK);
    cmf_qmat_dequant_row(&m, 0, w);
    CHECK(w[0] == -0.25f && w[1] == 0.25f && w[30] == -0.25f && w[31] == 0.25f);
    /* q1t: byte = d0 + 3 d1 + 9 d2 ..., 1 -> +s, 2 -> -s; then one overlay entry */
    uint8_t r3[9 + 8 + 4] = {0};
    st_u16(r3, f32_to_f16(1.0f));
    r3[2] = 1 + 3 * 2 + 9 * 0 + 27 * 1; /* digits 1,2,0,1,0 */
    st_u32(r3 + 13, 1);                 /* row_ptr = {0, 1} */
    st_u16(r3 + 17, 31);
    st_u16(r3 + 19, f32_to_f16(-3.0f));
    CHECK(cmf_qmat_init(&m, CMF_DT_Q1T, 1, 32, r3, sizeof r3, "t", NULL) == CMF_OK);
    cmf_qmat_dequant_row(&m, 0, w);
    CHECK(w[0] == 1.0f && w[1] == -1.0f && w[2] == 0.0f && w[3] == 1.0f && w[4] == 0.0f &&
          w[31] == -3.0f);
    cmf_qmat_free(&m);
    /* q4tp: scale = 2^(lo + code * step); code of group 1 sits in bits 5..9 of the codes */
    uint8_t tp[32 + 4 + 2] = {0};
    memset(tp, 0x99, 32); /* every nibble 9 -> q - 8 = 1 */
    st_u16(tp + 32, f32_to_f16(-2.0f));
    st_u16(tp + 34, f32_to_f16(0.5f));
    tp[36] = (uint8_t)(2 | (4 << 5)); /* group 0 code 2, group 1 code 4 (bits 5..9) */
    tp[37] = 0;
    CHECK(cmf_qmat_init(&m, CMF_DT_Q4TP, 1, 64, tp, sizeof tp, "t", NULL) == CMF_OK);
    cmf_qmat_dequant_row(&m, 0, w);
    /* the ladder in f32 as the format's readers evaluate it: exp2(lo) times exp2(step) per rung */
    float ratio = exp2f(0.5f), s2 = exp2f(-2.0f) * ratio * ratio, s4 = s2 * ratio * ratio;
    CHECK(fabsf(s2 - 0.5f) < 1e-6f && fabsf(s4 - 1.0f) < 1e-6f);
    CHECK(w[0] == s2 && w[31] == s2 && w[32] == s4 && w[63] == s4);
}

/* Overlays out of order and with a repeated position: a later entry wins. */
static void test_overlay_order(void) {
    uint64_t base = 2 * 1 * 6; /* 2 rows x 1 group */
    uint8_t p[12 + 4 + 4 * 6];
    memset(p, 0, sizeof p);
    st_u16(p, f32_to_f16(1.0f));
    st_u16(p + 6, f32_to_f16(1.0f));
    st_u32(p + base, 4);
    uint32_t idx[4] = {40, 3, 40, 5};
    float val[4] = {7, 8, 9, 10};
    for (int k = 0; k < 4; k++) {
        st_u32(p + base + 4 + 6 * k, idx[k]);
        st_u16(p + base + 8 + 6 * k, f32_to_f16(val[k]));
    }
    cmf_qmat m;
    CHECK(cmf_qmat_init(&m, CMF_DT_Q1S, 2, 32, p, sizeof p, "t", NULL) == CMF_OK);
    CHECK(m.owned != NULL && m.ovl_count == 3);
    float w[32];
    cmf_qmat_dequant_row(&m, 0, w);
    CHECK(w[3] == 8.0f && w[5] == 10.0f && w[4] == -1.0f);
    cmf_qmat_dequant_row(&m, 1, w);
    CHECK(w[8] == 9.0f && w[9] == -1.0f);
    float x[32], y[2];
    for (int i = 0; i < 32; i++)
        x[i] = (float)(i % 5) - 2.0f;
    for (int isa = CQ_ISA_SCALAR; isa <= CQ_ISA_AMX; isa++) {
        if (!test_tier_on((cq_isa)isa)) continue;
        cq_cpu_force((cq_isa)isa);
        cmf_matvec(&m, x, y, 1, 2);
        double want = 0;
        for (int i = 0; i < 32; i++)
            want += (double)w[i] * x[i];
        CHECK_MSG(fabs(y[0] - want) < 1e-4, "tier %d: %g vs %g", isa, y[0], want);
    }
    cmf_qmat_free(&m);
}

/* Malformed payloads are refused at init with CMF_E_PARSE. */
static void test_rejects(void) {
    kg_rng rng = {7};
    kg_opts o = {0, 2, 0};
    cmf_qmat m;
    cmf_err err;
    uint64_t nb;
    uint8_t *p;
    /* wrong size for a fixed dtype */
    p = kg_payload(CMF_DT_Q4_TILED, 4, 64, &rng, &o, &nb);
    CHECK_STATUS(cmf_qmat_init(&m, CMF_DT_Q4_TILED, 4, 64, p, nb - 1, "t", &t_err_), CMF_E_PARSE);
    CHECK_STATUS(cmf_qmat_init(&m, CMF_DT_Q4_TILED, 4, 48, p, nb, "t", &t_err_),
                 CMF_E_PARSE); /* in % 32 */
    CHECK_STATUS(cmf_qmat_init(&m, CMF_DT_MIX8_4, 4, 64, p, nb, "t", &t_err_),
                 CMF_E_PARSE); /* reserved */
    CHECK_STATUS(cmf_qmat_init(&m, CMF_DT_Q4_TILED, 0, 64, p, nb, "t", &t_err_), CMF_E_INVALID_ARG);
    free(p);
    /* vbit: a bit width of 7; a payload one byte short */
    p = kg_payload(CMF_DT_VBIT, 4, 64, &rng, &o, &nb);
    CHECK_STATUS(cmf_qmat_init(&m, CMF_DT_VBIT, 4, 64, p, nb - 1, "t", &t_err_), CMF_E_PARSE);
    uint8_t keep = p[2];
    p[2] = 7;
    CHECK_STATUS(cmf_qmat_init(&m, CMF_DT_VBIT, 4, 64, p, nb, "t", &t_err_), CMF_E_PARSE);
    CHECK(cmf_qmat_init(&m, CMF_DT_VBIT, 4, 64, p, nb, "t", &err) == CMF_E_PARSE &&
          strstr(err.msg, "row 2"));
    p[2] = keep;
    CHECK_STATUS(cmf_qmat_init(&m, CMF_DT_VBIT, 4, 64, p, nb, "t", &t_err_), CMF_OK);
    cmf_qmat_free(&m);
    free(p);
    /* vbit_ro: an offset that is not the running sum */
    p = kg_payload(CMF_DT_VBIT_RO, 4, 64, &rng, &o, &nb);
    uint8_t *offs = p + 4 + 2 * 4 * 2;
    st_u32(offs + 8, ld_u32(offs + 8) + 1);
    CHECK_STATUS(cmf_qmat_init(&m, CMF_DT_VBIT_RO, 4, 64, p, nb, "t", &t_err_), CMF_E_PARSE);
    free(p);
    /* q1s: index out of range, count not matching */
    p = kg_payload(CMF_DT_Q1S, 4, 64, &rng, &o, &nb);
    uint64_t base = 4 * 2 * 6;
    uint32_t cnt = ld_u32(p + base);
    CHECK(cnt > 0);
    st_u32(p + base + 4, 4 * 64);
    CHECK_STATUS(cmf_qmat_init(&m, CMF_DT_Q1S, 4, 64, p, nb, "t", &t_err_), CMF_E_PARSE);
    st_u32(p + base, cnt + 1);
    CHECK_STATUS(cmf_qmat_init(&m, CMF_DT_Q1S, 4, 64, p, nb, "t", &t_err_), CMF_E_PARSE);
    free(p);
    /* q1t: decreasing row_ptr, col out of range, code byte 243 */
    o.ovl_per_row = 4;
    p = kg_payload(CMF_DT_Q1T, 4, 64, &rng, &o, &nb);
    base = 4 * 2 * 9;
    CHECK_STATUS(cmf_qmat_init(&m, CMF_DT_Q1T, 4, 64, p, nb, "t", &t_err_), CMF_OK);
    cmf_qmat_free(&m);
    uint32_t rp1 = ld_u32(p + base + 4), rp2 = ld_u32(p + base + 8);
    st_u32(p + base + 4, rp2 + 1);
    CHECK_STATUS(cmf_qmat_init(&m, CMF_DT_Q1T, 4, 64, p, nb, "t", &t_err_), CMF_E_PARSE);
    st_u32(p + base + 4, rp1);
    if (ld_u32(p + base + 16) > 0) {
        uint8_t *e = p + base + 20;
        uint16_t c = ld_u16(e);
        st_u16(e, 64);
        CHECK_STATUS(cmf_qmat_init(&m, CMF_DT_Q1T, 4, 64, p, nb, "t", &t_err_), CMF_E_PARSE);
        st_u16(e, c);
    }
    p[9 + 3] = 243;
    CHECK_STATUS(cmf_qmat_init(&m, CMF_DT_Q1T, 4, 64, p, nb, "t", &t_err_), CMF_E_PARSE);
    free(p);
}

static void test_force(void) {
    cq_cpu_force(CQ_ISA_SCALAR);
    CHECK(cq_cpu_isa() == CQ_ISA_SCALAR);
    cq_cpu_force(CQ_ISA_AVX512);
    CHECK(cq_cpu_isa() <= CQ_ISA_AVX512);
    const cq_cpu_features *f = cq_cpu_detect();
    if (f->avx2 && f->fma && f->f16c) {
        cq_cpu_force(CQ_ISA_AVX2);
        CHECK(cq_cpu_isa() == CQ_ISA_AVX2);
    }
    cq_cpu_force(CQ_ISA_AMX);
    CHECK(cq_cpu_isa() == CQ_ISA_AMX || !f->amx_bf16);
    printf("tiers tested up to: %s\n", cq_isa_name(f->amx_bf16   ? CQ_ISA_AMX
                                                   : f->avx512bw ? CQ_ISA_AVX512
                                                   : f->avx2     ? CQ_ISA_AVX2
                                                                 : CQ_ISA_SCALAR));
}

/* Tiling rows (used by the benchmarks) keeps every row and the layout valid. */
static void test_tile_rows(void) {
    kg_rng rng = {5};
    for (size_t d = 0; d < N_ALL; d++) {
        kg_opts o = {1, 3, 0};
        uint64_t nb, nb2, rows = 5, cols = 96, rows_out = 13;
        uint8_t *p = kg_payload(k_all[d], rows, cols, &rng, &o, &nb), *q = NULL;
        cmf_qmat m, m2;
        CHECK(cmf_qmat_init(&m, k_all[d], rows, cols, p, nb, "t", NULL) == CMF_OK);
        cmf_err err;
        cmf_status st = cq_qmat_tile_rows(&m, rows_out, d % 2, &q, &nb2, &err);
        CHECK_MSG(st == CMF_OK, "%s: %s", cmf_dtype_name(k_all[d]), err.msg);
        if (st == CMF_OK) {
            st = cmf_qmat_init(&m2, k_all[d], rows_out, cols, q, nb2, "tiled", &err);
            CHECK_MSG(st == CMF_OK, "%s: %s", cmf_dtype_name(k_all[d]), err.msg);
            if (st == CMF_OK) {
                float a[96], b[96];
                int same = 1;
                for (uint64_t r = 0; r < rows_out; r++) {
                    cmf_qmat_dequant_row(&m, r % rows, a);
                    cmf_qmat_dequant_row(&m2, r, b);
                    same &= !memcmp(a, b, sizeof a);
                }
                CHECK_MSG(same, "%s tiled rows differ", cmf_dtype_name(k_all[d]));
                cmf_qmat_free(&m2);
            }
            cq_huge_free(q, nb2);
        }
        cmf_qmat_free(&m);
        free(p);
    }
}

/* The allocation-free fallbacks (taken when a call's scratch cannot be allocated). */
static void test_fallbacks(void) {
    static const cmf_dtype dts[] = {CMF_DT_Q4_TILED, CMF_DT_Q4_BLOCK, CMF_DT_Q4TP, CMF_DT_VBIT,
                                    CMF_DT_VBIT_RO,  CMF_DT_Q8_ROW,   CMF_DT_Q8_2F};
    kg_rng rng = {77};
    no_scratch = 1;
    for (size_t d = 0; d < sizeof dts / sizeof dts[0]; d++) {
        kg_opts o = {0, 3, 0};
        uint64_t nb;
        uint8_t *p = kg_payload(dts[d], 9, 160, &rng, &o, &nb);
        cmf_qmat m;
        CHECK(cmf_qmat_init(&m, dts[d], 9, 160, p, nb, "t", NULL) == CMF_OK);
        for (int isa = CQ_ISA_SCALAR; isa <= CQ_ISA_AMX; isa++) {
            int bad = check_tier(&m, (cq_isa)isa, &rng) + check_int8(&m, (cq_isa)isa, &rng);
            CHECK_MSG(bad == 0, "fallback %s tier %s: %d mismatches", cmf_dtype_name(dts[d]),
                      cq_isa_name((cq_isa)isa), bad);
        }
        cmf_qmat_free(&m);
        free(p);
    }
    no_scratch = 0;
}

/* Enough rows that cmf_matmul_ex splits a prefill call into several row tiles (and, for f32 on
 * the AVX2 and AVX-512 panels, enough columns for several of the AVX2 GEMM's K blocks). */
static void test_row_tiles(void) {
    static const cmf_dtype dts[] = {CMF_DT_F32, CMF_DT_Q4_TILED, CMF_DT_Q1S, CMF_DT_VBIT_RO};
    kg_rng rng = {91};
    for (size_t d = 0; d < sizeof dts / sizeof dts[0]; d++) {
        kg_opts o = {0, 3, 0};
        uint64_t nb;
        uint8_t *p = kg_payload(dts[d], 300, 2048, &rng, &o, &nb);
        cmf_qmat m;
        CHECK(cmf_qmat_init(&m, dts[d], 300, 2048, p, nb, "t", NULL) == CMF_OK);
        int bad = check_tier(&m, CQ_ISA_AVX2, &rng) + check_tier(&m, CQ_ISA_AVX512, &rng);
        CHECK_MSG(bad == 0, "row tiles %s: %d mismatches", cmf_dtype_name(dts[d]), bad);
        cmf_qmat_free(&m);
        free(p);
    }
}

/* The AVX-512 f16 and bf16 rows tuned for AMD (widened in halves) and the others give the same
 * bits: one token and small batches, whole and partial 16-row blocks, column tails. */
static void test_half_amd_same_bits(cmf_dtype dt) {
    if (!test_tier_on(CQ_ISA_AVX512)) return;
    cq_cpu_force(CQ_ISA_AVX512);
    if (cq_cpu_isa() != CQ_ISA_AVX512) return;
    static const shape_t shapes[] = {{16, 576}, {37, 640}, {21, 33}, {48, 1030}, {5, 8}};
    kg_rng rng = {77};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        shape_t sh = shapes[s];
        kg_opts o = {0, 3, 0};
        uint64_t nb;
        uint8_t *p = kg_payload(dt, sh.rows, sh.cols, &rng, &o, &nb);
        cmf_qmat m;
        CHECK(cmf_qmat_init(&m, dt, sh.rows, sh.cols, p, nb, "t", NULL) == CMF_OK);
        for (size_t n = 1; n <= 5; n += 2) {
            float *X = malloc(n * sh.cols * sizeof *X), *Y[2];
            for (size_t i = 0; i < n * sh.cols; i++)
                X[i] = kg_unif(&rng, -2, 2);
            for (int amd = 0; amd < 2; amd++) {
                Y[amd] = malloc(n * sh.rows * sizeof *Y[amd]);
                cq_cpu_force_amd(amd);
                if (n == 1)
                    cmf_matvec(&m, X, Y[amd], 0, sh.rows);
                else
                    cmf_matmul_ex(&m, X, n, sh.cols, Y[amd], sh.rows, 0, sh.rows, 0);
            }
            CHECK_MSG(!memcmp(Y[0], Y[1], n * sh.rows * sizeof *Y[0]),
                      "%s [%llu x %llu] n=%zu: AMD's rows differ in bits", cmf_dtype_name(dt),
                      (unsigned long long)sh.rows, (unsigned long long)sh.cols, n);
            free(X), free(Y[0]), free(Y[1]);
        }
        cq_cpu_force_amd(-1);
        cmf_qmat_free(&m);
        free(p);
    }
}

int main(int argc, char **argv) {
    test_tier_select(argc, argv);
    test_half_amd_same_bits(CMF_DT_F16);
    test_half_amd_same_bits(CMF_DT_BF16);
    test_row_tiles();
    if (test_tier_on(CQ_ISA_SCALAR)) {
        test_fallbacks();
        test_tile_rows();
        test_force();
        test_layout_spots();
        test_rejects();
    }
    test_overlay_order();
    test_all_tiers();
    TEST_DONE();
}
