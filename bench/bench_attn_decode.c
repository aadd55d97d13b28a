/* bench_attn_decode.c - decode attention (one query token) on one thread: the former
 * per-(token, head) loop of attention.c (cq_attn_ops dots / axpys of the best tier, scalar expf)
 * against cq_attn_decode (all units of the chunk rule for 2 threads, then the combine), for the
 * attention shapes of three small models, keys 0 .. pos, each KV cache type. A run goes over
 * the caches of `layers` layers in turn, so that with the default 30 the cache is read from
 * L3 / memory as in a model's decode step rather than from L2.
 *
 *   bench_attn_decode [--reps R] [--pos P] [--layers L] [--shape NAME] [--cold 1]
 *
 * --shape runs only the shapes whose name starts with NAME (e.g. SmolLM2). --cold 1 reads 64 MiB
 * before each timed pass over the layers, so that every cache comes from memory, as in a decode
 * step whose weight stream has gone through the last-level cache since the layer's last visit.
 *
 * Prints the best thread-CPU time of R runs (default 50) of each path in microseconds per
 * layer, the speedup, the largest output difference (a sanity check; the tests bound it) and
 * the new path's nanoseconds per key and kv head. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/cpu.h"
#include "engine/attn_decode.h"
#include "engine/kv_cache.h"

typedef struct shape {
    const char *name;
    uint32_t n_heads, n_kv, hd;
} shape;

static const shape shapes[] = {
    {"SmolLM2-135M", 9, 3, 64},
    {"Qwen2.5-0.5B", 14, 2, 64},
    {"Gemma3-270M", 4, 1, 256},
};

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

/* the per-head loop (causal, the ring not wrapped) */
static void old_path(const cq_attn_decode_args *a, float *sc) {
    const cq_attn_ops *ops = cq_attn_ops_get();
    const cq_kv_layer *c = a->kv;
    uint32_t hd = c->hd, group = a->n_heads / c->n_kv, cnt = a->pos + 1;
    for (uint32_t h = 0; h < a->n_heads; h++) {
        const float *q = a->q + (size_t)h * hd;
        cq_kv_dots(c, h / group, q, 0, cnt, sc);
        float mx = -INFINITY;
        for (uint32_t k = 0; k < cnt; k++) {
            sc[k] *= a->scale;
            if (sc[k] > mx) mx = sc[k];
        }
        float sum = 0;
        for (uint32_t k = 0; k < cnt; k++)
            sum += sc[k] = expf(sc[k] - mx);
        for (uint32_t k = 0; k < cnt; k++)
            sc[k] /= sum;
        float *out = a->out + (size_t)h * hd;
        memset(out, 0, hd * sizeof(float));
        cq_kv_axpys(ops, c, h / group, out, sc, 0, cnt);
    }
}

/* Evict the caches: read a buffer larger than any last-level cache. It is written once first:
 * the untouched pages of a fresh allocation all map one zero page, which evicts nothing. */
static void flush_caches(void) {
    enum { FLUSH_BYTES = 64 << 20 };
    static volatile uint64_t *buf;
    if (!buf) {
        uint64_t *b = malloc(FLUSH_BYTES);
        if (!b) return;
        memset(b, 1, FLUSH_BYTES);
        buf = b;
    }
    for (size_t i = 0; i < FLUSH_BYTES / 8; i += 8) /* one read per 64-byte line */
        (void)buf[i];
}

static void new_path(const cq_attn_decode_args *a, float *scratch) {
    uint32_t nc = cq_attn_decode_chunks(a);
    for (uint32_t h = 0; h < a->kv->n_kv; h++) {
        for (uint32_t ch = 0; ch < nc; ch++)
            cq_attn_decode_unit(a, h, ch, scratch);
        cq_attn_decode_combine(a, h);
    }
}

int main(int argc, char **argv) {
    int reps = 50;
    uint32_t pos = 511, layers = 30;
    const char *only = "";
    int cold = 0;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--reps"))
            reps = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--pos"))
            pos = (uint32_t)atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--layers"))
            layers = (uint32_t)atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--shape"))
            only = argv[i + 1];
        else if (!strcmp(argv[i], "--cold"))
            cold = atoi(argv[i + 1]);
        else {
            fprintf(stderr, "usage: bench_attn_decode [--reps R] [--pos P] [--layers L] "
                            "[--shape NAME] [--cold 1]\n");
            return 2;
        }
    }
    if (reps < 1 || layers < 1 || layers > 64) return 2;
    printf("tier %s, one token at pos %u, %u layers%s, one thread, best of %d (thread CPU time), "
           "per layer\n",
           cq_isa_name(cq_cpu_isa()), pos, layers, cold ? " from memory" : "", reps);
    printf("%-14s %-4s %6s %10s %10s %8s %10s %12s\n", "shape", "kv", "chunk", "old us", "new us",
           "speedup", "max diff", "new ns/key");
    static const cortiq_kv_type types[] = {CORTIQ_KV_F16, CORTIQ_KV_Q8, CORTIQ_KV_F32};
    for (size_t si = 0; si < sizeof shapes / sizeof *shapes; si++) {
        const shape *sh = &shapes[si];
        if (strncmp(sh->name, only, strlen(only))) continue;
        uint32_t slots = pos + 1, group = sh->n_heads / sh->n_kv;
        size_t kvd = (size_t)sh->n_kv * sh->hd, qd = (size_t)sh->n_heads * sh->hd;
        float *k = malloc(sizeof(float) * kvd), *v = malloc(sizeof(float) * kvd);
        float *q = malloc(sizeof(float) * qd), *o1 = malloc(sizeof(float) * qd);
        float *o2 = malloc(sizeof(float) * qd), *sc = malloc(sizeof(float) * slots);
        float *part = malloc(sizeof(float) * cq_attn_decode_part_floats(sh->n_heads, sh->hd));
        float *scratch =
            aligned_alloc(64, (cq_attn_decode_scratch_floats(group, slots) + 15) / 16 * 16 * 4);
        if (!k || !v || !q || !o1 || !o2 || !sc || !part || !scratch) return 3;
        for (size_t i = 0; i < qd; i++)
            q[i] = 2.0f * frand();
        for (size_t ti = 0; ti < 3; ti++) {
            cq_kv_layer c[64];
            for (uint32_t l = 0; l < layers; l++) {
                if (!cq_kv_layer_init(&c[l], types[ti], slots, sh->n_kv, sh->hd)) return 3;
                for (uint32_t p = 0; p < slots; p++) {
                    for (size_t i = 0; i < kvd; i++)
                        k[i] = frand(), v[i] = frand();
                    cq_kv_store(&c[l], p, k, v);
                }
            }
            cq_attn_decode_args a = {c,
                                     q,
                                     o1,
                                     part,
                                     sh->n_heads,
                                     pos,
                                     0,
                                     cq_attn_decode_chunk(pos + 1, sh->n_kv, 2),
                                     1.0f / sqrtf((float)sh->hd),
                                     0,
                                     NULL};
            double best_old = INFINITY, best_new = INFINITY;
            for (int r = 0; r < reps; r++) {
                a.out = o1;
                if (cold) flush_caches();
                double t0 = cpu_now();
                for (uint32_t l = 0; l < layers; l++)
                    a.kv = &c[l], old_path(&a, sc);
                double t1 = cpu_now();
                a.out = o2;
                if (cold) flush_caches();
                double t1b = cpu_now();
                for (uint32_t l = 0; l < layers; l++)
                    a.kv = &c[l], new_path(&a, scratch);
                double t2 = cpu_now();
                if (t1 - t0 < best_old) best_old = t1 - t0;
                if (t2 - t1b < best_new) best_new = t2 - t1b;
            }
            double diff = 0;
            for (size_t i = 0; i < qd; i++)
                if (!(fabs(o1[i] - o2[i]) <= diff)) diff = fabs(o1[i] - o2[i]);
            printf("%-14s %-4s %6u %10.2f %10.2f %7.2fx %10.2g %12.2f\n", sh->name,
                   cortiq_kv_type_name(types[ti]), a.chunk, best_old * 1e6 / layers,
                   best_new * 1e6 / layers, best_old / best_new, diff,
                   best_new * 1e9 / layers / ((double)(pos + 1) * sh->n_kv));
            for (uint32_t l = 0; l < layers; l++)
                cq_kv_layer_free(&c[l]);
        }
        free(k), free(v), free(q), free(o1), free(o2), free(sc), free(part), free(scratch);
    }
    return 0;
}
