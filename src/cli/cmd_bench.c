/* cmd_bench.c - `cortiq bench quant`: for every matrix dtype, on the same test matrices,
 * the storage cost (bits per weight), the encode->dequant error (relative RMSE) and the
 * matrix-vector throughput against the read bandwidth measured in the same run.
 * argv[1] selects the benchmark: `quant`, or a model file (src/cli/bench_model.c). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/bench_quant_real.h"
#include "cli/cli.h"
#include "common/cpu.h"
#include "common/err.h"
#include "common/hugepages.h"
#include "cortiq/kernels.h"
#include "quant/kernels_engine.h"
#include "cortiq/quant.h"
#include "bench/kernel_bench.h"

static void usage(void) {
    printf(
        "usage: cortiq bench quant [--rows R] [--cols C] [--mb N] [--threads T] [--reps N]\n"
        "                          [--dtypes a,b,...] [--seed S] [--bw-mb N] [--model FILE|none]\n"
        "                          [--pages 2m|4k]\n"
        "  Encodes two R x C float matrices (default 1024 x 4096) -- Gaussian, and heavy-tailed\n"
        "  (Student-t, 3 d.o.f.) with 1%% outlier input channels x8 -- in every matrix dtype and "
        "prints,\n"
        "  as a Markdown table: bits per weight, relative RMSE of encode->dequant, and matvec\n"
        "  throughput in GB/s of weight bytes on a copy tiled to N MiB (default 512, beyond the\n"
        "  caches) with T threads (default 2), also as %% of the read bandwidth (T threads\n"
        "  summing 1 GiB) probed just before and after each timing. The int8 column is the\n"
        "  CMF_KF_INT8_ACT path (q8_row, q4_*, vbit*); the decode copy column the same through\n"
        "  the copy the runtime's decode reads on this tier (q4_*, vbit*). Real matrices follow:\n"
        "  layer 0 attention q/o and MLP gate/down of each --model (CMF or GGUF, repeatable;\n"
        "  default: every *.cmf / *.gguf in ~/.cache/cortiq/models),\n"
        "  dequantized to f32 and encoded like the random ones. --model none: random ones only.\n"
        "  --dtypes  comma-separated subset (default: all 13)   --reps  timed runs, best kept (3)\n"
        "  --bw-mb   size of the bandwidth buffer in MiB (1024)  --seed  matrix seed (1)\n"
        "  --pages   the probe's and the tiled copies' pages: 2m (default where the kernel offers\n"
        "            transparent huge pages; the runtime keeps its weights so) or 4k\n"
        "\n"
        "usage: cortiq bench MODEL.cmf [-p 512] [-n 128] [-t N] [-r 5] [--json]\n"
        "  Prefill and decode throughput of a model (cortiq bench MODEL.cmf --help).\n");
}

#define BQ_MAX_MODELS 8

typedef struct bench_opts {
    uint64_t rows, cols, mb, seed, bw_mb;
    unsigned threads, reps;
    cmf_dtype dtypes[CMF_DT_COUNT];
    size_t ndtypes;
    const char *models[BQ_MAX_MODELS];
    size_t nmodels;
    bool no_models, models_given;
    bool huge; /* probe and tiled copies on 2 MiB pages */
} bench_opts;

static const cmf_dtype k_all[] = {CMF_DT_F32,   CMF_DT_F16,      CMF_DT_BF16,     CMF_DT_Q8_ROW,
                                  CMF_DT_Q8_2F, CMF_DT_Q4_BLOCK, CMF_DT_Q4_TILED, CMF_DT_Q4TP,
                                  CMF_DT_VBIT,  CMF_DT_VBIT_RO,  CMF_DT_Q1,       CMF_DT_Q1S,
                                  CMF_DT_Q1T};

/* ---- test matrices ---- */

static uint64_t rng_next(uint64_t *s) { /* splitmix64 */
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
static double rng_unit(uint64_t *s) {
    return ((double)(rng_next(s) >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}
static double rng_gauss(uint64_t *s) {
    return sqrt(-2.0 * log(rng_unit(s))) * cos(6.283185307179586 * rng_unit(s));
}

/* kind 0: N(0, 0.02^2); kind 1: Student-t(3) * 0.02 with 1% of input columns scaled x8. */
static void make_matrix(int kind, uint64_t rows, uint64_t cols, uint64_t seed, float *w) {
    uint64_t s = seed * 2 + (uint64_t)kind;
    for (uint64_t i = 0; i < rows * cols; i++) {
        double g = rng_gauss(&s);
        if (kind == 1) {
            double a = rng_gauss(&s), b = rng_gauss(&s), c = rng_gauss(&s);
            g /= sqrt((a * a + b * b + c * c) / 3.0);
            if ((i % cols) % 100 == 37) g *= 8.0;
        }
        w[i] = (float)(0.02 * g);
    }
}

static bool has_i8(cmf_dtype dt) {
    return dt == CMF_DT_Q8_ROW || dt == CMF_DT_Q4_TILED || dt == CMF_DT_Q4TP ||
           dt == CMF_DT_Q4_BLOCK || dt == CMF_DT_VBIT || dt == CMF_DT_VBIT_RO;
}

/* Relative RMSE of the dequantized rows of m against w. */
static double rel_rmse(const cmf_qmat *m, const float *w, float *row) {
    double num = 0, den = 0;
    for (uint64_t r = 0; r < m->rows; r++) {
        cmf_qmat_dequant_row(m, r, row);
        for (uint64_t i = 0; i < m->cols; i++) {
            double d = (double)row[i] - w[r * m->cols + i];
            num += d * d;
            den += (double)w[r * m->cols + i] * w[r * m->cols + i];
        }
    }
    return den > 0 ? sqrt(num / den) : 0.0;
}

/* A kernel's rate and the read bandwidth measured around it (wall and cpu, GB/s). */
typedef struct {
    double gbs, cpu_gbs, bw, bw_cpu;
} rate;

/* GB/s of weight bytes for one matvec over a tiled copy of m (r->gbs < 0 on failure); cpu_gbs
 * the same from the slowest thread's CPU time (the rate with a core per thread); bw / bw_cpu
 * the read bandwidth probed just before and after the timing. lanes: through the tiled
 * matrix's batched-decode copy, which the runtime's decode reads for the 4-bit class
 * (cmf_qmat_build_lanes; r->gbs = 0 where this tier makes none); the rate stays per byte of
 * the file's layout, so it compares with the other columns. */
static void throughput(const cmf_qmat *m, const bench_opts *o, unsigned flags, bool lanes,
                       cq_bench_bw *probe, rate *r, cmf_err *err) {
    *r = (rate){-1, 0, 0, 0};
    uint64_t per_row = m->nbytes / m->rows + 1, rows_out = o->mb * 1048576 / per_row;
    if (rows_out < m->rows) rows_out = m->rows;
    uint8_t *big;
    uint64_t nb;
    /* on the pages the run measures */
    if (cq_qmat_tile_rows(m, rows_out, o->huge, &big, &nb, err) != CMF_OK) return;
    cmf_qmat t;
    if (cmf_qmat_init(&t, m->dtype, rows_out, m->cols, big, nb, "tiled", err) == CMF_OK) {
        const uint64_t lanes_bytes = lanes ? cmf_qmat_lanes_bytes(&t) : 0;
        if (lanes && (lanes_bytes == 0 || !cmf_qmat_build_lanes(&t))) {
            if (lanes_bytes == 0)
                r->gbs = 0; /* this tier makes no copy of the dtype */
            else
                cmf_err_set(err, CMF_E_NOMEM, NULL,
                            "no memory for the %s matrix's batched-decode copy (%llu bytes)",
                            cmf_dtype_name(m->dtype), (unsigned long long)lanes_bytes);
            cmf_qmat_free(&t);
            cq_huge_free(big, nb);
            return;
        }
        float *x = malloc(m->cols * sizeof *x), *y = malloc(rows_out * sizeof *y);
        if (x && y) {
            uint64_t s = 7;
            for (uint64_t i = 0; i < m->cols; i++)
                x[i] = (float)rng_gauss(&s);
            double cpu = 0, sec = cq_bench_matmul_near_bw(&t, x, 1, y, o->threads, o->reps, flags,
                                                          &cpu, probe, &r->bw, &r->bw_cpu);
            if (sec > 0) {
                r->gbs = (double)nb / sec / 1e9;
                r->cpu_gbs = cpu > 0 ? (double)nb / cpu / 1e9 : 0;
            } else {
                cmf_err_set(err, CMF_E_IO, NULL, "cannot start the benchmark threads");
            }
        } else {
            cmf_err_set(err, CMF_E_NOMEM, NULL, "no memory for the activations");
        }
        free(x);
        free(y);
        cmf_qmat_free(&t);
    }
    cq_huge_free(big, nb);
}

/* One table row per dtype for matrix w[rows][cols]; returns a CLI exit code. */
static int bench_matrix(const bench_opts *o, const char *label, const float *w, uint64_t rows,
                        uint64_t cols, cq_bench_bw *probe) {
    uint64_t n = rows * cols, shape[2] = {rows, cols};
    float *row = malloc(cols * sizeof *row);
    if (!row) {
        fprintf(stderr, "cortiq bench: out of memory\n");
        return CLI_EXIT_SYSTEM;
    }
    int rc = CLI_EXIT_OK;
    for (size_t d = 0; d < o->ndtypes && rc == CLI_EXIT_OK; d++) {
        cmf_dtype dt = o->dtypes[d];
        uint8_t *p = NULL;
        size_t nb = 0;
        cmf_err err;
        cmf_qmat m;
        if (cmf_quant_encode(dt, 2, shape, w, NULL, &p, &nb, &err) != CMF_OK ||
            cmf_qmat_init(&m, dt, rows, cols, p, nb, cmf_dtype_name(dt), &err) != CMF_OK) {
            cli_error(&err);
            free(p);
            rc = cli_exit_code(err.code);
            break;
        }
        double rmse = rel_rmse(&m, w, row);
        rate f, q = {0, 0, 0, 0}, c = {0, 0, 0, 0};
        throughput(&m, o, 0, false, probe, &f, &err);
        if (has_i8(dt) && f.gbs >= 0) throughput(&m, o, CMF_KF_INT8_ACT, false, probe, &q, &err);
        if (has_i8(dt) && q.gbs >= 0 && cmf_qmat_lanes_compact(&m))
            throughput(&m, o, CMF_KF_INT8_ACT, true, probe, &c, &err);
        if (f.gbs < 0 || q.gbs < 0 || c.gbs < 0) {
            cli_error(&err);
            rc = cli_exit_code(err.code);
        } else {
            printf("| %s | %s | %.3f | %.5f | %.1f | %.0f%% | %.1f | %.0f%% |", label,
                   cmf_dtype_name(dt), 8.0 * (double)nb / (double)n, rmse, f.gbs,
                   100 * f.gbs / f.bw, f.cpu_gbs, 100 * f.cpu_gbs / f.bw_cpu);
            if (has_i8(dt))
                printf(" %.1f | %.0f%% | %.1f | %.0f%% |", q.gbs, 100 * q.gbs / q.bw, q.cpu_gbs,
                       100 * q.cpu_gbs / q.bw_cpu);
            else
                printf(" - | - | - | - |");
            if (c.gbs > 0)
                printf(" %.1f | %.0f%% | %.1f / %.1f / %.1f |\n", c.gbs, 100 * c.gbs / c.bw, f.bw,
                       q.bw, c.bw);
            else if (has_i8(dt))
                printf(" - | - | %.1f / %.1f |\n", f.bw, q.bw);
            else
                printf(" - | - | %.1f |\n", f.bw);
            fflush(stdout);
        }
        cmf_qmat_free(&m);
        free(p);
    }
    free(row);
    return rc;
}

/* The real matrices of the models asked for (or the cached ones); *n of them. */
static int load_real(const bench_opts *o, bq_matrix *real, size_t *n) {
    char *cached[BQ_MAX_MODELS];
    size_t ncached = 0;
    const char *paths[BQ_MAX_MODELS];
    size_t np = 0;
    *n = 0;
    if (o->no_models) return CLI_EXIT_OK;
    if (o->models_given) {
        for (size_t i = 0; i < o->nmodels; i++)
            paths[np++] = o->models[i];
    } else {
        ncached = bq_cached_models(cached, BQ_MAX_MODELS);
        for (size_t i = 0; i < ncached; i++)
            paths[np++] = cached[i];
    }
    int rc = CLI_EXIT_OK;
    for (size_t i = 0; i < np; i++) {
        cmf_err err;
        if (bq_load_model(paths[i], real, n, &err) != CMF_OK) {
            if (!o->models_given) { /* a cached file we cannot use: say so and go on */
                fprintf(stderr, "cortiq bench: skipping %s: %s\n", paths[i], err.msg);
                continue;
            }
            cli_error(&err);
            rc = cli_exit_code(err.code);
            break;
        }
    }
    for (size_t i = 0; i < ncached; i++)
        free(cached[i]);
    return rc;
}

static int run_quant(const bench_opts *o) {
    bq_matrix real[BQ_MAX_MODELS * BQ_PER_MODEL];
    size_t nreal = 0;
    int rc = load_real(o, real, &nreal);
    if (rc != CLI_EXIT_OK) {
        for (size_t i = 0; i < nreal; i++)
            bq_matrix_free(&real[i]);
        return rc;
    }
    cq_bench_bw *probe = cq_bench_bw_new((size_t)o->bw_mb << 20, o->threads, o->huge);
    double bwc = 0, bw = probe ? cq_bench_bw_run(probe, 3, &bwc) : -1;
    uint64_t n = o->rows * o->cols;
    float *w = bw > 0 && bwc > 0 ? malloc(n * sizeof *w) : NULL;
    if (!w) {
        cq_bench_bw_free(probe);
        for (size_t i = 0; i < nreal; i++)
            bq_matrix_free(&real[i]);
        fprintf(stderr, "cortiq bench: cannot measure the read bandwidth (out of memory?)\n");
        return CLI_EXIT_SYSTEM;
    }
    printf("## cortiq bench quant\n\n");
    printf("%llu x %llu random matrices and %zu real ones; matvec on copies tiled to %llu MiB; %u "
           "threads; kernel tier %s%s; %s pages.\n"
           "Read bandwidth (%u threads summing %llu MiB): %.1f GB/s wall, %.1f GB/s cpu.\n\n",
           (unsigned long long)o->rows, (unsigned long long)o->cols, nreal,
           (unsigned long long)o->mb, o->threads, cq_isa_name(cq_cpu_isa()),
           cq_cpu_isa() >= CQ_ISA_AVX512
               ? (cq_cpu_detect()->avx512vnni ? " (+VNNI)" : "")
               : (cq_cpu_isa() == CQ_ISA_AVX2 && cq_cpu_avxvnni() ? " (+AVX-VNNI)" : ""),
           o->huge ? "2 MiB" : "4 KiB", o->threads, (unsigned long long)o->bw_mb, bw, bwc);
    printf("wall: bytes / elapsed time. cpu: bytes / the slowest thread's CPU time, i.e. the rate\n"
           "when every thread has a core to itself; robust when other processes compete for the\n"
           "cores. Each %% is of the bandwidth measured the same way, probed again just before\n"
           "and just after each timing (the higher side counts; the last column, wall GB/s for\n"
           "the f32 / int8 / decode-copy timings): the bandwidth of a shared or virtual machine\n"
           "drifts. decode copy: the int8 path through the batched-decode copy the runtime\n"
           "makes at load for this dtype and tier (the bytes counted are still the file's).\n\n");
    printf("| matrix | dtype | bits/weight | rel. RMSE | wall GB/s | %% | cpu GB/s | %% |"
           " int8-act wall | %% | int8-act cpu | %% | decode copy wall | %% | read bw nearby |\n");
    printf("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for (int kind = 0; kind < 2 && rc == CLI_EXIT_OK; kind++) {
        make_matrix(kind, o->rows, o->cols, o->seed, w);
        rc = bench_matrix(o, kind ? "heavy-tailed + outlier cols" : "Gaussian", w, o->rows, o->cols,
                          probe);
    }
    free(w);
    for (size_t i = 0; i < nreal; i++) {
        if (rc == CLI_EXIT_OK)
            rc = bench_matrix(o, real[i].label, real[i].w, real[i].rows, real[i].cols, probe);
        bq_matrix_free(&real[i]);
    }
    cq_bench_bw_free(probe);
    return rc;
}

static bool parse_dtypes(char *list, bench_opts *o) {
    o->ndtypes = 0;
    for (char *tok = strtok(list, ","); tok; tok = strtok(NULL, ",")) {
        cmf_dtype dt;
        const cmf_dtype_traits *t;
        if (!cmf_dtype_from_name(tok, &dt) || !(t = cmf_dtype_get(dt)) ||
            o->ndtypes >= CMF_DT_COUNT)
            return false;
        o->dtypes[o->ndtypes++] = dt;
    }
    return o->ndtypes > 0;
}

int cmd_bench(int argc, char **argv) {
    if (argc < 2) {
        usage();
        return CLI_EXIT_USAGE;
    }
    if (strcmp(argv[1], "quant") != 0) /* `cortiq bench --help` is the model benchmark's help */
        return bench_model_main(argc, argv); /* cortiq bench MODEL.cmf */
    bench_opts o = {.rows = 1024,
                    .cols = 4096,
                    .mb = 512,
                    .seed = 1,
                    .bw_mb = 1024,
                    .threads = 2,
                    .reps = 3,
                    .huge = cq_thp_available()};
    memcpy(o.dtypes, k_all, sizeof k_all);
    o.ndtypes = sizeof k_all / sizeof k_all[0];
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        uint64_t v;
        if (cli_is_help(a)) {
            usage();
            return CLI_EXIT_OK;
        }
        if (i + 1 >= argc)
            return cli_usage_error("bench", "option '%s' needs a value or is unknown", a);
        const char *val = argv[++i];
        if (!strcmp(a, "--model")) {
            if (!strcmp(val, "none")) {
                o.no_models = true;
            } else if (o.nmodels < BQ_MAX_MODELS) {
                o.models[o.nmodels++] = val;
                o.models_given = true;
            } else {
                return cli_usage_error("bench", "at most %d --model options", BQ_MAX_MODELS);
            }
            continue;
        }
        if (!strcmp(a, "--pages")) {
            if (strcmp(val, "2m") && strcmp(val, "4k"))
                return cli_usage_error("bench", "--pages takes 2m or 4k, not '%s'", val);
            o.huge = !strcmp(val, "2m");
            continue;
        }
        if (!strcmp(a, "--dtypes")) {
            char buf[512];
            snprintf(buf, sizeof buf, "%s", val);
            if (!parse_dtypes(buf, &o))
                return cli_usage_error("bench", "bad --dtypes list '%s'", val);
            continue;
        }
        if (!cli_parse_u64(val, &v) || v == 0)
            return cli_usage_error("bench", "%s needs a positive integer", a);
        if (!strcmp(a, "--rows"))
            o.rows = v;
        else if (!strcmp(a, "--cols"))
            o.cols = v;
        else if (!strcmp(a, "--mb"))
            o.mb = v;
        else if (!strcmp(a, "--seed"))
            o.seed = v;
        else if (!strcmp(a, "--bw-mb"))
            o.bw_mb = v;
        else if (!strcmp(a, "--threads") && v <= 64)
            o.threads = (unsigned)v;
        else if (!strcmp(a, "--reps") && v <= 1000)
            o.reps = (unsigned)v;
        else
            return cli_usage_error("bench", "unknown option or bad value '%s %s'", a, val);
    }
    if (o.bw_mb > (1u << 20) || o.mb > (1u << 20))
        return cli_usage_error("bench", "--mb and --bw-mb are at most 1048576 (1 TiB)");
    if (o.cols % 32 || o.cols > 65535 || o.rows > (1u << 20))
        return cli_usage_error(
            "bench", "--cols must be a multiple of 32 up to 65504, --rows at most 1048576");
    return run_quant(&o);
}
