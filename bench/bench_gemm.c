/* bench_gemm.c - prefill matrix products on one thread: the integer GEMM (cmf_matmul_qact,
 * activations quantized once; its AMX tiles where that tier is in effect) against the
 * f32-activation batched kernel (cmf_matmul), in weight.token multiply-adds per second, and
 * against the int8-activation batched kernels (CMF_KF_INT8_ACT), for the matrix shapes of a
 * Qwen2.5-0.5B layer. Float dtypes (f16, bf16, f32) have no integer path: their cmf_matmul is
 * timed on the AVX-512 FMA panels and, on the AMX tier, for f16 / bf16 on its tiles too, the two
 * alternating call
 * by call in this process so that the machine's drift hits both alike; bf16 also with its
 * activations rounded to bf16 (CMF_KF_BF16_ACT: the AVX-512 BF16 dot products where the CPU has
 * them, and on AMX the tiles with one product per step). CORTIQ_CPU=avx2 times the AVX2 tier
 * instead (its FMA panels, gemm_f32_avx2.c, from 10 tokens).
 *
 *   bench_gemm [--tokens N] [--reps R] [--shape ROWSxCOLS]... [dtype...]
 *
 * (default dtypes q8_row q4_tiled q4tp; default shapes the Qwen2.5-0.5B layer's, each --shape
 * replaces them: --shape 576x576 --shape 1536x576 --shape 576x1536 are SmolLM2-135M's)
 *
 * CPU time of the calling thread is used, so other load on the machine changes the figure
 * little. The weights are random valid payloads (tests/quant/kernel_gen.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/cpu.h"
#include "cortiq/kernels.h"
#include "quant/kernels_engine.h"
#include "bench_mat.h"

static void run(cmf_dtype dt, uint64_t rows, uint64_t cols, size_t n, int reps) {
    cmf_qmat m;
    float *X;
    uint8_t *p = bench_mat(dt, rows, cols, n, &m, &X);
    float *Y = malloc(n * rows * sizeof *Y);
    void *am = aligned_alloc(64, (cmf_qact_bytes(n, cols) + 63) / 64 * 64);
    void *sc = aligned_alloc(64, (cmf_qact_scratch_bytes(cols) + 63) / 64 * 64);
    cmf_qact a;
    cmf_qact_bind(&a, am, n, cols);
    double best_i = 1e30, best_f = 1e30, best_q = 1e30, best_amx = 1e30, best_8 = 1e30,
           best_h = 1e30, best_amxh = 1e30;
    const cq_isa tier = cq_cpu_isa(); /* CORTIQ_CPU may lower it */
    const bool amx = (dt == CMF_DT_F16 || dt == CMF_DT_BF16) && tier >= CQ_ISA_AMX;
    for (int k = 0; k < reps; k++) {
        if (amx) { /* the AMX tile GEMM, then (below) the FMA panels */
            cq_cpu_force(CQ_ISA_AMX);
            double a0 = bench_cpu_now();
            cmf_matmul(&m, X, n, Y, rows, 0, rows);
            double a1 = bench_cpu_now() - a0;
            if (a1 < best_amx) best_amx = a1;
            if (dt == CMF_DT_BF16) {
                a0 = bench_cpu_now();
                cmf_matmul_ex(&m, X, n, cols, Y, rows, 0, rows, CMF_KF_BF16_ACT);
                a1 = bench_cpu_now() - a0;
                if (a1 < best_amxh) best_amxh = a1;
            }
            cq_cpu_force(CQ_ISA_AVX512);
        }
        double t0 = bench_cpu_now();
        cmf_qact_quantize(&a, X, cols);
        double t1 = bench_cpu_now();
        if (cmf_qact_supports(&m)) cmf_matmul_qact(&m, &a, Y, rows, 0, rows, sc);
        double t2 = bench_cpu_now();
        cmf_matmul(&m, X, n, Y, rows, 0, rows);
        double t3 = bench_cpu_now();
        /* the int8-activation batched kernels (CMF_KF_INT8_ACT): the engine's batches where
         * it takes no integer GEMM */
        if (cmf_qact_supports(&m)) cmf_matmul_ex(&m, X, n, cols, Y, rows, 0, rows, CMF_KF_INT8_ACT);
        double t4 = bench_cpu_now();
        if (dt == CMF_DT_BF16) cmf_matmul_ex(&m, X, n, cols, Y, rows, 0, rows, CMF_KF_BF16_ACT);
        double t5 = bench_cpu_now();
        if (t5 - t4 < best_h) best_h = t5 - t4;
        if (t4 - t3 < best_8) best_8 = t4 - t3;
        if (t1 - t0 < best_q) best_q = t1 - t0;
        if (t2 - t1 < best_i) best_i = t2 - t1;
        if (t3 - t2 < best_f) best_f = t3 - t2;
    }
    cq_cpu_force(tier);
    double macs = (double)rows * (double)cols * (double)n;
    if (cmf_qact_supports(&m))
        printf("%-9s %5llu x %-5llu n=%-3zu  int8 GEMM %6.1f GMAC/s  f32 matmul %6.1f GMAC/s  "
               "(%.2fx)  int8-act matmul %6.1f GMAC/s (%.2fx)  quantize %.1f us\n",
               cmf_dtype_get(dt)->name, (unsigned long long)rows, (unsigned long long)cols, n,
               macs / best_i * 1e-9, macs / best_f * 1e-9, best_f / best_i, macs / best_8 * 1e-9,
               best_8 / best_i, best_q * 1e6);
    else if (amx && dt == CMF_DT_BF16)
        printf("%-9s %5llu x %-5llu n=%-3zu  AVX-512 FMA panels %6.1f GMAC/s  AMX tiles %6.1f "
               "GMAC/s  (%.2fx)  bf16-activation tiles %6.1f GMAC/s (%.2fx)\n",
               cmf_dtype_get(dt)->name, (unsigned long long)rows, (unsigned long long)cols, n,
               macs / best_f * 1e-9, macs / best_amx * 1e-9, best_f / best_amx,
               macs / best_amxh * 1e-9, best_f / best_amxh);
    else if (amx)
        printf("%-9s %5llu x %-5llu n=%-3zu  AVX-512 FMA panels %6.1f GMAC/s  AMX tiles %6.1f "
               "GMAC/s  (%.2fx)\n",
               cmf_dtype_get(dt)->name, (unsigned long long)rows, (unsigned long long)cols, n,
               macs / best_f * 1e-9, macs / best_amx * 1e-9, best_f / best_amx);
    else if (dt == CMF_DT_BF16)
        printf("%-9s %5llu x %-5llu n=%-3zu  f32-activation matmul %6.1f GMAC/s  "
               "bf16-activation matmul %6.1f GMAC/s (%.2fx)\n",
               cmf_dtype_get(dt)->name, (unsigned long long)rows, (unsigned long long)cols, n,
               macs / best_f * 1e-9, macs / best_h * 1e-9, best_f / best_h);
    else
        printf("%-9s %5llu x %-5llu n=%-3zu  f32-activation matmul %6.1f GMAC/s\n",
               cmf_dtype_get(dt)->name, (unsigned long long)rows, (unsigned long long)cols, n,
               macs / best_f * 1e-9);
    free(X), free(Y), free(am), free(sc), free(p);
    cmf_qmat_free(&m);
}

int main(int argc, char **argv) {
    size_t n = 64;
    int reps = 5;
    cmf_dtype dts[16];
    size_t nd = 0, ns = 0;
    uint64_t shapes[BENCH_SHAPES_MAX][2];
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--tokens") && i + 1 < argc)
            n = (size_t)atoi(argv[++i]);
        else if (!strcmp(argv[i], "--shape") && i + 1 < argc) {
            if (!bench_shape_arg(argv[++i], shapes, &ns)) return 2;
        } else if (!strcmp(argv[i], "--reps") && i + 1 < argc)
            reps = atoi(argv[++i]);
        else if (nd < 16) {
            cmf_dtype d;
            if (!cmf_dtype_from_name(argv[i], &d)) {
                fprintf(stderr, "unknown dtype %s\n", argv[i]);
                return 2;
            }
            dts[nd++] = d;
        }
    }
    if (!nd) dts[nd++] = CMF_DT_Q8_ROW, dts[nd++] = CMF_DT_Q4_TILED, dts[nd++] = CMF_DT_Q4TP;
    cq_isa tier = cq_cpu_isa();
    printf("integer GEMM tier: %s\n", !cmf_qact_fast() ? (cmf_qact_simd() ? "AVX2" : "scalar")
                                      : tier >= CQ_ISA_AMX && cq_cpu_detect()->amx_int8
                                          ? "AMX-INT8 tiles (the VNNI tier's bits)"
                                          : "AVX-512 VNNI");
    bench_default_shapes(shapes, &ns);
    for (size_t d = 0; d < nd; d++)
        for (size_t s = 0; s < ns; s++)
            run(dts[d], shapes[s][0], shapes[s][1], n, reps);
    cq_cpu_force(tier);
    return 0;
}
