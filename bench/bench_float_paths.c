/* bench_float_paths.c - every batched kernel of float weights timed on its own at a token count,
 * whatever cmf_matmul_ex would pick there: the data behind kernel.c's floors (CQ_FLOAT_GEMM_MIN,
 * CQ_BF16DOT_GEMM_MIN, CQ_AMX_GEMM_MIN, ...), which differ between CPUs. One thread, the
 * Qwen2.5-0.5B layer's shapes (or --shape), the kernels alternating call by call so that the
 * machine's drift hits them alike; the best of R calls each, in weight.token multiply-adds per
 * second of the thread's CPU time. Columns the CPU lacks (or the token count excludes: the few
 * rows take 2 .. CQ_FEW_MAX tokens) print "-".
 *
 *   bench_float_paths [--reps R] [--shape ROWSxCOLS]... TOKENS... [-- dtype...]
 *
 * (default dtypes f16 bf16; f32 too when named). Columns: few = the few-token rows
 * (gemm_few_avx512.c; AVX2: gemm_few_avx2.c), panels = the FMA panels (gemm_f32_avx512.c; AVX2:
 * gemm_f32_avx2.c), amx = the AMX-BF16 tiles as exact as f32 (f16 / bf16), amx-b = the tiles
 * with bf16 activations (bf16), dot = the AVX-512 BF16 dot products (bf16). CORTIQ_CPU=avx2
 * times the AVX2 tier's few rows and panels. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/cpu.h"
#include "cortiq/kernels.h"
#include "quant/gemm_impl.h"
#include "quant/kernels_engine.h"
#include "bench_mat.h"

enum { P_FEW, P_PANELS, P_AMX, P_AMX_B, P_DOT, P_COUNT };
static const char *const path_name[P_COUNT] = {"few", "panels", "amx", "amx-b", "dot"};

/* One call of path p; false where the CPU, dtype or token count rules it out. */
static bool call(int p, bool avx2, const cmf_qmat *m, const float *X, size_t n, float *Y) {
    const cq_cpu_features *f = cq_cpu_detect();
    const uint64_t rows = m->rows;
    const size_t cols = m->cols;
    switch (p) {
    case P_FEW:
        return (avx2 ? cq_few_avx2 : cq_few_avx512)(m, X, n, cols, Y, rows, 0, rows);
    case P_PANELS:
        return (avx2 ? cq_gemm_float_avx2 : cq_gemm_float_avx512)(m, X, n, cols, Y, rows, 0, rows);
    case P_AMX:
        return !avx2 && f->amx_bf16 && m->dtype != CMF_DT_F32 &&
               cq_gemm_half_amx(m, X, n, cols, Y, rows, 0, rows, 0);
    case P_AMX_B:
        return !avx2 && f->amx_bf16 && m->dtype == CMF_DT_BF16 &&
               cq_gemm_half_amx(m, X, n, cols, Y, rows, 0, rows, CMF_KF_BF16_ACT);
    default:
        return !avx2 && f->avx512bf16 && m->dtype == CMF_DT_BF16 &&
               cq_gemm_bf16dot_avx512(m, X, n, cols, Y, rows, 0, rows);
    }
}

static void run(cmf_dtype dt, uint64_t rows, uint64_t cols, size_t n, int reps, bool avx2) {
    cmf_qmat m;
    float *X;
    uint8_t *p = bench_mat(dt, rows, cols, n, &m, &X);
    float *Y = malloc(n * rows * sizeof *Y);
    double best[P_COUNT];
    bool ran[P_COUNT];
    for (int k = 0; k < P_COUNT; k++)
        best[k] = 1e30, ran[k] = false;
    for (int rep = 0; rep < reps; rep++)
        for (int k = 0; k < P_COUNT; k++) {
            const double t0 = bench_cpu_now();
            ran[k] = call(k, avx2, &m, X, n, Y);
            const double t = bench_cpu_now() - t0;
            if (ran[k] && t < best[k]) best[k] = t;
        }
    const double macs = (double)rows * (double)cols * (double)n;
    printf("%-5s %5llu x %-5llu n=%-3zu", cmf_dtype_get(dt)->name, (unsigned long long)rows,
           (unsigned long long)cols, n);
    for (int k = 0; k < P_COUNT; k++)
        if (ran[k])
            printf("  %s %6.1f", path_name[k], macs / best[k] * 1e-9);
        else
            printf("  %s %6s", path_name[k], "-");
    printf("  GMAC/s\n");
    free(X), free(Y), free(p);
    cmf_qmat_free(&m);
}

int main(int argc, char **argv) {
    int reps = 10;
    size_t ntok = 0, nd = 0, ns = 0, toks[32];
    cmf_dtype dts[8];
    uint64_t shapes[BENCH_SHAPES_MAX][2];
    bool dtypes = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--")) {
            dtypes = true;
        } else if (!strcmp(argv[i], "--reps") && i + 1 < argc) {
            reps = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--shape") && i + 1 < argc) {
            if (!bench_shape_arg(argv[++i], shapes, &ns)) return 2;
        } else if (dtypes) {
            if (nd == 8 || !cmf_dtype_from_name(argv[i], &dts[nd]) ||
                (dts[nd] != CMF_DT_F32 && dts[nd] != CMF_DT_F16 && dts[nd] != CMF_DT_BF16)) {
                fprintf(stderr, "%s: want f32, f16 or bf16 (at most 8)\n", argv[i]);
                return 2;
            }
            nd++;
        } else {
            const int t = atoi(argv[i]);
            if (ntok == 32 || t < 1 || t > 4096) {
                fprintf(stderr, "%s: want a token count 1 to 4096 (at most 32)\n", argv[i]);
                return 2;
            }
            toks[ntok++] = (size_t)t;
        }
    }
    if (!ntok || reps < 1) {
        fprintf(stderr, "usage: bench_float_paths [--reps R] [--shape RxC]... TOKENS... "
                        "[-- dtype...]\n");
        return 2;
    }
    if (!nd) dts[nd++] = CMF_DT_F16, dts[nd++] = CMF_DT_BF16;
    bench_default_shapes(shapes, &ns);
    const bool avx2 = cq_cpu_isa() < CQ_ISA_AVX512;
    if (cq_cpu_isa() < CQ_ISA_AVX2) {
        fprintf(stderr, "bench_float_paths: the CPU (or CORTIQ_CPU) has no AVX2 tier\n");
        return 2;
    }
    printf("tier: %s\n", avx2 ? "AVX2 (few rows, panels)" : "AVX-512 (+ AMX, BF16 where present)");
    for (size_t d = 0; d < nd; d++)
        for (size_t t = 0; t < ntok; t++)
            for (size_t s = 0; s < ns; s++)
                run(dts[d], shapes[s][0], shapes[s][1], toks[t], reps, avx2);
    return 0;
}
