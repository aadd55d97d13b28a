/* bench_gdn_chunk.c - the gated delta rule of one value head on one thread, per SIMD tier: the
 * recurrence token by token (gdn_step.h) against the chunked form (gdn_chunk.h, CQ_GDN_CHUNK
 * tokens per call), over a prompt of T tokens at Qwen3.5's head shape (dk = dv = 128).
 *
 *   bench_gdn_chunk [--reps R] [--tokens T]
 *
 * Prints the best thread-CPU time of R runs (default 20) of each form in nanoseconds per token
 * and head, the speedup, and the largest relative difference of the outputs (a sanity check;
 * engine.test_gdn_chunk bounds it). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/cpu.h"
#include "engine/gdn_chunk.h"
#include "engine/gdn_step.h"

static double cpu_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static uint64_t rng = 0x2545F4914F6CDD1DULL;
static float frand(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (float)((rng >> 40) * (1.0 / 16777216.0)) * 2.0f - 1.0f;
}

static void unit(float *x, uint32_t n, float scale) {
    double ss = 0;
    for (uint32_t i = 0; i < n; i++)
        ss += (double)x[i] * x[i];
    for (uint32_t i = 0; i < n; i++)
        x[i] = (float)(x[i] * scale / sqrt(ss));
}

int main(int argc, char **argv) {
    int reps = 20;
    size_t T = 512;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--reps")) reps = atoi(argv[i + 1]);
        if (!strcmp(argv[i], "--tokens")) T = (size_t)atol(argv[i + 1]);
    }
    const uint32_t dk = 128, dv = 128;
    const size_t stride = 2 * (size_t)dk + dv, sn = (size_t)dk * dv;
    float *rows = malloc(T * stride * sizeof(float)), *g = malloc(T * sizeof(float));
    float *beta = malloc(T * sizeof(float)), *o1 = malloc(T * dv * sizeof(float));
    float *o2 = malloc(T * dv * sizeof(float)), *S = malloc(sn * sizeof(float));
    float *work = malloc(cq_gdn_chunk_work(dk, dv) * sizeof(float)), mem[128];
    if (!rows || !g || !beta || !o1 || !o2 || !S || !work) return 1;
    for (size_t t = 0; t < T; t++) {
        float *r = rows + t * stride;
        for (size_t i = 0; i < stride; i++)
            r[i] = frand();
        unit(r, dk, 1.0f / sqrtf((float)dk)), unit(r + dk, dk, 1.0f);
        g[t] = -0.02f - 0.5f * (frand() + 1.0f), beta[t] = (frand() + 1.0f) / 2.0f;
    }
    static const struct {
        cq_isa isa;
        cq_gdn_step_fn step;
        cq_gdn_chunk_fn chunk;
        const char *name;
    } tiers[] = {{CQ_ISA_SCALAR, cq_gdn_step_scalar, cq_gdn_chunk_scalar, "scalar"},
                 {CQ_ISA_AVX2, cq_gdn_step_avx2, cq_gdn_chunk_avx2, "avx2"},
                 {CQ_ISA_AVX512, cq_gdn_step_avx512, cq_gdn_chunk_avx512, "avx512"}};
    printf("one head, dk = dv = %u, %zu tokens, best of %d: ns per token and head\n", dk, T, reps);
    for (size_t k = 0; k < 3; k++) {
        if (cq_cpu_isa() < tiers[k].isa) continue;
        double best[2] = {1e30, 1e30};
        for (int r = 0; r < reps; r++) {
            memset(S, 0, sn * sizeof(float));
            double t0 = cpu_now();
            for (size_t t = 0; t < T; t++) {
                const float *row = rows + t * stride;
                tiers[k].step(S, row, row + dk, row + 2 * dk, expf(g[t]), beta[t], o1 + t * dv, mem,
                              dk, dv);
            }
            double t1 = cpu_now();
            memset(S, 0, sn * sizeof(float));
            for (size_t t = 0; t < T; t += CQ_GDN_CHUNK) {
                const cq_gdn_chunk_in in = {
                    .q = rows + t * stride,
                    .k = rows + t * stride + dk,
                    .v = rows + t * stride + 2 * dk,
                    .g = g + t,
                    .beta = beta + t,
                    .o = o2 + t * dv,
                    .stride = stride,
                    .gstride = 1,
                    .ostride = dv,
                    .n = (uint32_t)(T - t < CQ_GDN_CHUNK ? T - t : CQ_GDN_CHUNK),
                    .dk = dk,
                    .dv = dv};
                tiers[k].chunk(S, &in, work);
            }
            double t2 = cpu_now();
            if (t1 - t0 < best[0]) best[0] = t1 - t0;
            if (t2 - t1 < best[1]) best[1] = t2 - t1;
        }
        double md = 0, mo = 0;
        for (size_t i = 0; i < T * dv; i++)
            md = fmax(md, fabs(o1[i] - o2[i])), mo = fmax(mo, fabs(o1[i]));
        printf("%-7s recurrent %8.1f  chunked %8.1f  speedup %.2fx  (outputs differ by %.2g)\n",
               tiers[k].name, best[0] * 1e9 / T, best[1] * 1e9 / T, best[0] / best[1], md / mo);
    }
    free(rows), free(g), free(beta), free(o1), free(o2), free(S), free(work);
    return 0;
}
