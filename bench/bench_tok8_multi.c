/* bench_tok8_multi - one thread's CPU time for the products of a batched decode step: n tokens
 * over the same pieces of rows, either token after token (the weights of a piece re-read from
 * cache) or all at once (each weight step loaded and decoded once), on prepared int8 tokens
 * (cmf_matvec_tok8 against cmf_matvec_tok8_multi) where the CPU has them for the dtype, and
 * with f32 activations (cmf_matvec against cmf_matvec_multi) for q8_row, f16 and bf16, the
 * engine's path where the int8 one is absent; q8_row and the 4-bit class also from their
 * batched-decode copy (cmf_qmat_build_lanes, rows "+lanes") where the tier has one. Thread CPU
 * time, best of the rounds, so that other processes' load weighs less. usage: bench_tok8_multi
 * [rows] [cols] [reps] [rounds] [dtype ...]  (default 1536 576 200 5: SmolLM2's gate/up shape;
 * the dtypes given, or all; vbit / vbit_ro:B gives every row width B, :45 SmolLM2's mix of 3-,
 * 4- and 5-bit rows, else widths 3-8 mixed) */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../tests/quant/kernel_gen.h"
#include "cortiq/kernels.h"
#include "cortiq/quant.h"
#include "quant/kernels_engine.h"

#define PIECE 64 /* rows per piece, as decode's claimed pieces run them */
#define MAXN  8

static double cpu_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

enum { ALONE, MULTI, F32_ALONE, F32_MULTI, HOWS };

static double run(const cmf_qmat *m, const void *const *tok, const float *const *x, size_t n,
                  float *const *y, int how, int reps) {
    double t0 = cpu_now();
    for (int k = 0; k < reps; k++)
        for (uint64_t r0 = 0; r0 < m->rows; r0 += PIECE) {
            uint64_t r1 = r0 + PIECE < m->rows ? r0 + PIECE : m->rows;
            float *ys[MAXN];
            for (size_t t = 0; t < n; t++)
                ys[t] = y[t] + r0;
            if (how == MULTI)
                cmf_matvec_tok8_multi(m, tok, n, ys, r0, r1);
            else if (how == F32_MULTI)
                cmf_matvec_multi(m, x, n, ys, r0, r1);
            else if (how == F32_ALONE)
                for (size_t t = 0; t < n; t++)
                    cmf_matvec(m, x[t], ys[t], r0, r1);
            else
                for (size_t t = 0; t < n; t++)
                    cmf_matvec_tok8(m, tok[t], ys[t], r0, r1);
        }
    return (cpu_now() - t0) / reps;
}

int main(int argc, char **argv) {
    uint64_t rows = argc > 1 ? strtoull(argv[1], NULL, 10) : 1536,
             cols = argc > 2 ? strtoull(argv[2], NULL, 10) : 576;
    int reps = argc > 3 ? atoi(argv[3]) : 200, rounds = argc > 4 ? atoi(argv[4]) : 5;
    static const cmf_dtype all[] = {CMF_DT_Q8_ROW,  CMF_DT_Q4_TILED, CMF_DT_Q4TP, CMF_DT_Q4_BLOCK,
                                    CMF_DT_VBIT_RO, CMF_DT_F16,      CMF_DT_BF16};
    cmf_dtype dts[CMF_DT_COUNT];
    unsigned widths[CMF_DT_COUNT] = {0};
    size_t ndt = 0;
    for (int i = 5; i < argc; i++) {
        char name[32];
        const char *colon = strchr(argv[i], ':');
        size_t len = colon ? (size_t)(colon - argv[i]) : strlen(argv[i]);
        snprintf(name, sizeof name, "%.*s", (int)len, argv[i]);
        if (ndt == CMF_DT_COUNT || !cmf_dtype_from_name(name, &dts[ndt])) {
            fprintf(stderr, "bench_tok8_multi: '%s' is not a dtype name\n", argv[i]);
            return 2;
        }
        if (colon) {
            static const unsigned levels[CMF_VBIT_NLEVELS] = CMF_VBIT_LEVELS;
            bool ok = dts[ndt] == CMF_DT_VBIT || dts[ndt] == CMF_DT_VBIT_RO, level = false;
            widths[ndt] = (unsigned)atoi(colon + 1);
            for (int l = 0; l < CMF_VBIT_NLEVELS; l++)
                level |= widths[ndt] == levels[l];
            level |= widths[ndt] == KG_VBIT_REAL;
            if (!ok || !level) {
                fprintf(
                    stderr,
                    "bench_tok8_multi: '%s': a width is vbit's or vbit_ro's, one of 3, 4, 5, 6, 8 (45: a real mix)\n",
                    argv[i]);
                return 2;
            }
        }
        ndt++;
    }
    if (ndt == 0)
        for (; ndt < sizeof all / sizeof *all; ndt++)
            dts[ndt] = all[ndt];
    size_t tb = (cmf_tok8_bytes(cols) + 63) / 64 * 64 + 64;
    uint8_t *tokmem = aligned_alloc(64, MAXN * tb);
    float *xmem = malloc(MAXN * cols * sizeof(float)), *ymem = malloc(MAXN * rows * sizeof(float));
    const void *tok[MAXN];
    const float *x[MAXN];
    float *y[MAXN];
    kg_rng rng = {7};
    for (size_t t = 0; t < MAXN; t++) {
        for (uint64_t i = 0; i < cols; i++)
            xmem[t * cols + i] = kg_unif(&rng, -1, 1);
        x[t] = xmem + t * cols;
        y[t] = ymem + t * rows;
        tok[t] = tokmem + t * tb;
        if (cmf_tok8_bytes(cols))
            cmf_tok8_prepare(tokmem + t * tb, x[t], cols,
                             CMF_TOK8_Q8 | CMF_TOK8_I8DEC | CMF_TOK8_LANES);
    }
    printf("%llu x %llu, pieces of %d rows, us per step (thread CPU, best of %d)\n",
           (unsigned long long)rows, (unsigned long long)cols, PIECE, rounds);
    printf("dtype          tokens  int8 alone  int8 multi  multi/alone   f32 alone   f32 multi  "
           "multi/alone\n");
    for (size_t d = 0; d < 2 * ndt; d++) {
        const bool lanes = d % 2; /* each dtype plain, then with the batched-decode copy */
        kg_opts o = {0, 0, widths[d / 2]};
        uint64_t nb;
        const cmf_dtype dt = dts[d / 2];
        uint8_t *p = kg_payload(dt, rows, cols, &rng, &o, &nb);
        cmf_qmat m;
        cmf_err err;
        if (cmf_qmat_init(&m, dt, rows, cols, p, nb, "w", &err) != CMF_OK) {
            free(p);
            continue;
        }
        if (lanes && !cmf_qmat_build_lanes(&m)) {
            cmf_qmat_free(&m);
            free(p);
            continue;
        }
        bool int8 = cmf_tok8_supports(&m) != 0,
             f32 = !lanes && (dt == CMF_DT_Q8_ROW || dt == CMF_DT_F16 || dt == CMF_DT_BF16);
        for (size_t n = 1; f32 || int8 ? n <= MAXN : 0; n = n < 4 ? 2 * n : n + 2) {
            double best[HOWS] = {1e9, 1e9, 1e9, 1e9};
            for (int r = 0; r < rounds; r++)
                for (int how = 0; how < HOWS; how++) {
                    if ((how <= MULTI && !int8) || (how >= F32_ALONE && !f32)) continue;
                    double s = run(&m, tok, x, n, y, how, reps);
                    if (s < best[how]) best[how] = s;
                }
            char name[32];
            char wb[16] = "";
            if (widths[d / 2]) snprintf(wb, sizeof wb, ":%u", widths[d / 2]);
            snprintf(name, sizeof name, "%s%s%s", cmf_dtype_name(dt), wb, lanes ? "+lanes" : "");
            printf("%-14s %6zu", name, n);
            for (int h = 0; h < HOWS; h += 2)
                if ((h == ALONE && int8) || (h == F32_ALONE && f32))
                    printf("  %10.1f  %10.1f  %11.2f", 1e6 * best[h], 1e6 * best[h + 1],
                           best[h + 1] / best[h]);
                else
                    printf("  %10s  %10s  %11s", "-", "-", "-");
            printf("\n");
        }
        cmf_qmat_free(&m);
        free(p);
    }
    free(tokmem), free(xmem), free(ymem);
    return 0;
}
