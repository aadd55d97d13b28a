/* bench_matvec.c - matrix-vector throughput of every matrix dtype against the machine's
 * read bandwidth.
 *
 *   bench_matvec [--mb N] [--threads T] [--reps R] [--batch B] [--cols C] [--vendor-ab K]
 *                [dtype ...]
 *
 * Measures the read bandwidth (T threads summing a 1 GiB buffer with vector loads), then for
 * each dtype builds a random valid payload of about N MiB (default 512, far beyond the
 * caches), times the fastest of R full matvecs split over T threads (default 2) and prints
 * the weight bytes streamed per second and that rate as a percentage of the bandwidth.
 * With CMF_KF_INT8_ACT the same for the int8-activation paths, and a B-token matmul
 * (default 8) for prefill, reported as its time relative to B separate matvecs.
 * --vendor-ab K: instead, K rounds of the one-token matvec with the kernels for other CPUs and
 * those tuned for AMD's cores (cq_cpu_force_amd 0, then 1), alternating in this process so
 * that the host's drift hits both alike: each round's GB/s as % of the probe around it, and
 * the median of the rounds' ratios (q8_row with int8 activations, as decode runs it). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../tests/quant/kernel_gen.h"
#include "common/cpu.h"
#include "cortiq/kernels.h"
#include "bench/kernel_bench.h"
#include "quant/kernels_engine.h"

static const cmf_dtype k_default[] = {
    CMF_DT_Q8_ROW, CMF_DT_Q4_TILED, CMF_DT_Q4TP,  CMF_DT_VBIT_RO, CMF_DT_F16,
    CMF_DT_BF16,   CMF_DT_Q4_BLOCK, CMF_DT_Q8_2F, CMF_DT_VBIT,    CMF_DT_Q1,
    CMF_DT_Q1S,    CMF_DT_Q1T,      CMF_DT_F32};

static int has_i8_path(cmf_dtype dt) {
    return dt == CMF_DT_Q8_ROW || dt == CMF_DT_Q4_TILED || dt == CMF_DT_Q4TP ||
           dt == CMF_DT_Q4_BLOCK || dt == CMF_DT_VBIT || dt == CMF_DT_VBIT_RO;
}

/* Approximate payload bytes per row of 4096 columns, to size the matrix. */
static double row_bytes(cmf_dtype dt, uint64_t cols) {
    switch (dt) {
    case CMF_DT_F32:
        return 4.0 * cols;
    case CMF_DT_F16:
    case CMF_DT_BF16:
        return 2.0 * cols;
    case CMF_DT_Q8_ROW:
    case CMF_DT_Q8_2F:
        return cols + 2.0;
    case CMF_DT_Q1:
    case CMF_DT_Q1S:
        return cols / 32 * 6.0;
    case CMF_DT_Q1T:
        return cols / 32 * 9.0;
    case CMF_DT_VBIT:
    case CMF_DT_VBIT_RO:
        return cols * 5.2 / 8 + cols / 16.0;
    default:
        return cols / 32 * 18.0;
    }
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* --vendor-ab: rounds of the one-token matvec alternating the two kernel choices. */
static int vendor_ab(const cmf_qmat *m, const float *X, float *Y, uint64_t nb, unsigned threads,
                     unsigned reps, unsigned rounds, cq_bench_bw *probe) {
    double *ratio = malloc(rounds * sizeof *ratio);
    if (!ratio) {
        fprintf(stderr, "bench_matvec: out of memory\n");
        return 3;
    }
    printf("%-9s", cmf_dtype_name(m->dtype));
    for (unsigned k = 0; k < rounds; k++) {
        double pct[2];
        for (int amd = 0; amd < 2; amd++) {
            double cpu, nbw, nbwc;
            cq_cpu_force_amd(amd);
            unsigned flags = m->dtype == CMF_DT_Q8_ROW ? CMF_KF_INT8_ACT : 0;
            double t =
                cq_bench_matmul_near_bw(m, X, 1, Y, threads, reps, flags, &cpu, probe, &nbw, &nbwc);
            if (t <= 0) {
                fprintf(stderr, "bench_matvec: cannot start threads\n");
                cq_cpu_force_amd(-1);
                free(ratio);
                return 3;
            }
            pct[amd] = 100 * (double)nb / t / 1e9 / nbw;
        }
        ratio[k] = pct[1] / pct[0];
        printf(" | %3.0f%% %3.0f%%", pct[0], pct[1]);
    }
    cq_cpu_force_amd(-1);
    qsort(ratio, rounds, sizeof *ratio, cmp_double);
    printf(" | amd/other %.3f (%.2f-%.2f)\n", ratio[rounds / 2], ratio[0], ratio[rounds - 1]);
    free(ratio);
    return 0;
}

/* The plain report of one dtype: matvec GB/s against the probe, the int8 path where the dtype
 * has one, and a batch-token matmul against as many matvecs. */
static int report(const cmf_qmat *m, const float *X, float *Y, uint64_t nb, unsigned threads,
                  unsigned reps, unsigned batch, cq_bench_bw *probe) {
    double cpu, cpu8, nbw, nbwc, nbw8 = 0, nbwc8;
    double t = cq_bench_matmul_near_bw(m, X, 1, Y, threads, reps, 0, &cpu, probe, &nbw, &nbwc);
    if (t <= 0) {
        fprintf(stderr, "bench_matvec: cannot start threads\n");
        return 3;
    }
    double gbs = (double)nb / t / 1e9;
    printf("%-9s %7.1f %9.2f %7.1f %4.0f%% %7.1f [%3.0f%%] |", cmf_dtype_name(m->dtype),
           nb / 1048576.0, t * 1e3, gbs, 100 * gbs / nbw, (double)nb / cpu / 1e9,
           100 * (double)nb / cpu / 1e9 / nbwc);
    if (has_i8_path(m->dtype)) {
        double t8 = cq_bench_matmul_near_bw(m, X, 1, Y, threads, reps, CMF_KF_INT8_ACT, &cpu8,
                                            probe, &nbw8, &nbwc8);
        if (t8 <= 0) {
            fprintf(stderr, "bench_matvec: cannot start threads\n");
            return 3;
        }
        double g8 = (double)nb / t8 / 1e9;
        printf(" %9.1f %4.0f%% %7.1f [%3.0f%%] |", g8, 100 * g8 / nbw8, (double)nb / cpu8 / 1e9,
               100 * (double)nb / cpu8 / 1e9 / nbwc8);
    } else {
        printf(" %9s %5s %7s %6s |", "-", "-", "-", "");
    }
    double tb = cq_bench_matmul(m, X, batch, Y, threads, reps > 2 ? 2 : reps, 0, NULL);
    printf(" %u tokens %.1f ms = %.2fx one matvec (%.1fx faster than %u matvecs) | bw %.1f", batch,
           tb * 1e3, tb / t, batch * t / tb, batch, nbw);
    if (nbw8 > 0) printf(" / %.1f", nbw8);
    printf("\n");
    return 0;
}

int main(int argc, char **argv) {
    uint64_t mb = 512, cols = 4096;
    unsigned threads = 2, reps = 5, batch = 8, ab = 0;
    cmf_dtype list[CMF_DT_COUNT];
    size_t nlist = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--mb") && i + 1 < argc)
            mb = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc)
            threads = (unsigned)atoi(argv[++i]);
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc)
            reps = (unsigned)atoi(argv[++i]);
        else if (!strcmp(argv[i], "--batch") && i + 1 < argc)
            batch = (unsigned)atoi(argv[++i]);
        else if (!strcmp(argv[i], "--cols") && i + 1 < argc)
            cols = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--vendor-ab") && i + 1 < argc)
            ab = (unsigned)atoi(argv[++i]);
        else if (nlist < CMF_DT_COUNT && cmf_dtype_from_name(argv[i], &list[nlist]))
            nlist++;
        else {
            fprintf(stderr,
                    "usage: bench_matvec [--mb N] [--threads T] [--reps R] [--batch B] [--cols C] "
                    "[--vendor-ab K] [dtype ...]\n"
                    "  --cols: columns of the matrices (default 4096; a multiple of 32 for the\n"
                    "  dtypes that need it, e.g. 576 for SmolLM2-135M's attention)\n");
            return 2;
        }
    }
    if (!nlist) {
        nlist = sizeof k_default / sizeof k_default[0];
        memcpy(list, k_default, sizeof k_default);
    }
    if (threads < 1 || reps < 1 || batch < 1 || mb < 1 || cols < 32 || cols % 32 || cols > 65504 ||
        ab > 1000) {
        fprintf(stderr, "bench_matvec: bad option value (--cols: a multiple of 32 up to 65504; "
                        "--vendor-ab: up to 1000 rounds)\n");
        return 2;
    }
    cq_bench_bw *probe = cq_bench_bw_new((size_t)1 << 30, threads, false);
    double bw_cpu = 0, bw = probe ? cq_bench_bw_run(probe, 3, &bw_cpu) : -1;
    if (bw <= 0) {
        fprintf(stderr, "bench_matvec: cannot measure bandwidth (out of memory?)\n");
        return 3;
    }
    printf("tier %s, %u threads, read bandwidth %.1f GB/s, cpu %.1f GB/s (1 GiB buffer)\n",
           cq_isa_name(cq_cpu_isa()), threads, bw, bw_cpu);
    printf("(cpu: GB/s from the slowest thread's CPU time = the rate with a core per thread;\n"
           " %%bw is of the wall bandwidth, [%%] of the cpu bandwidth, both probed again just\n"
           " before and after each timing, the higher side counting: see `bw` at the end)\n");
    if (ab)
        printf("%-9s | per round: %%bw of the kernels for other CPUs, then of AMD's\n", "dtype");
    else
        printf("%-9s %7s %9s %7s %5s %14s | %9s %5s %14s | %s\n", "dtype", "MiB", "matvec ms",
               "GB/s", "%bw", "cpu [%cpu bw]", "int8 GB/s", "%bw", "cpu [%cpu bw]",
               "matmul B tokens vs B matvecs");
    kg_rng rng = {1};
    kg_opts o = {0, 10, 0};
    for (size_t d = 0; d < nlist; d++) {
        cmf_dtype dt = list[d];
        uint64_t rows = (uint64_t)((double)mb * 1048576.0 / row_bytes(dt, cols));
        if (rows < threads) rows = threads;
        uint64_t nb;
        uint8_t *p = kg_payload(dt, rows, cols, &rng, &o, &nb);
        float *X = malloc(batch * cols * sizeof *X), *Y = malloc(batch * rows * sizeof *Y);
        if (!p || !X || !Y) {
            fprintf(stderr, "bench_matvec: out of memory\n");
            return 3;
        }
        for (uint64_t i = 0; i < batch * cols; i++)
            X[i] = kg_unif(&rng, -1, 1);
        cmf_qmat m;
        cmf_err err;
        if (cmf_qmat_init(&m, dt, rows, cols, p, nb, cmf_dtype_name(dt), &err) != CMF_OK) {
            fprintf(stderr, "%s\n", err.msg);
            return 1;
        }
        int rc = ab ? vendor_ab(&m, X, Y, nb, threads, reps, ab, probe)
                    : report(&m, X, Y, nb, threads, reps, batch, probe);
        if (rc) return rc;
        fflush(stdout);
        cmf_qmat_free(&m);
        free(p);
        free(X);
        free(Y);
    }
    cq_bench_bw_free(probe);
    return 0;
}
