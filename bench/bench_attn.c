/* bench_attn.c - prefill attention on one thread: the per-(token, head) loop of attention.c's
 * attn_task (cq_attn_ops dots / axpys, scalar expf) against the batched cq_attn_batch, for the
 * attention shapes of three small models, one layer, 64 query tokens at pos0 = 448 (keys
 * 0 .. 511), each KV cache type.
 *
 *   bench_attn [--reps R] [--pos0 P] [--tokens N]
 *
 * Prints the best thread-CPU time of R runs (default 30) of each path, the speedup, and the
 * largest output difference between the two (a sanity check; the tests bound it). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/cpu.h"
#include "engine/attn_batch.h"
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

/* attention.c's batch task for all rows on one thread (no window: the shapes' layers are global) */
static void old_path(const cq_attn_batch_args *a, uint32_t n, float *sc) {
    const cq_attn_ops *ops = cq_attn_ops_get();
    const cq_kv_layer *c = a->kv;
    uint32_t hd = c->hd, nh = a->n_heads, group = nh / c->n_kv, slots = c->slots;
    size_t qd = (size_t)nh * hd;
    for (size_t w = 0; w < (size_t)n * nh; w++) {
        size_t t = w / nh;
        uint32_t h = (uint32_t)(w % nh), kvh = h / group, p = a->pos0 + (uint32_t)t, lo = 0;
        uint32_t cnt = p + 1 - lo, s0 = lo % slots;
        uint32_t run1 = cnt < slots - s0 ? cnt : slots - s0, run2 = cnt - run1;
        const float *q = a->q + t * qd + (size_t)h * hd;
        cq_kv_dots(c, kvh, q, s0, run1, sc);
        if (run2) cq_kv_dots(c, kvh, q, 0, run2, sc + run1);
        float mx = -INFINITY;
        for (uint32_t k = 0; k < cnt; k++) {
            float d = sc[k] * a->scale;
            sc[k] = d;
            if (d > mx) mx = d;
        }
        float sum = 0;
        for (uint32_t k = 0; k < cnt; k++)
            sum += sc[k] = expf(sc[k] - mx);
        float inv = 1.0f / sum;
        for (uint32_t k = 0; k < cnt; k++)
            sc[k] *= inv;
        float *out = a->out + t * qd + (size_t)h * hd;
        memset(out, 0, hd * sizeof(float));
        cq_kv_axpys(ops, c, kvh, out, sc, s0, run1);
        if (run2) cq_kv_axpys(ops, c, kvh, out, sc + run1, 0, run2);
    }
}

static void new_path(const cq_attn_batch_args *a, uint32_t n, float *scratch) {
    for (uint32_t h = 0; h < a->kv->n_kv; h++)
        cq_attn_batch(a, h, 0, n, scratch);
}

int main(int argc, char **argv) {
    int reps = 30;
    uint32_t pos0 = 448, n = 64;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--reps"))
            reps = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--pos0"))
            pos0 = (uint32_t)atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--tokens"))
            n = (uint32_t)atoi(argv[i + 1]);
        else {
            fprintf(stderr, "usage: bench_attn [--reps R] [--pos0 P] [--tokens N]\n");
            return 2;
        }
    }
    if (reps < 1 || n < 1) return 2;
    printf("tier %s, %u query tokens at pos0 %u, one layer, one thread, best of %d (thread CPU "
           "time)\n",
           cq_isa_name(cq_cpu_isa()), n, pos0, reps);
    printf("%-14s %-4s %10s %10s %8s %10s\n", "shape", "kv", "old ms", "batch ms", "speedup",
           "max diff");
    static const cortiq_kv_type types[] = {CORTIQ_KV_F16, CORTIQ_KV_Q8, CORTIQ_KV_F32};
    for (size_t si = 0; si < sizeof shapes / sizeof *shapes; si++) {
        const shape *sh = &shapes[si];
        uint32_t slots = pos0 + n;
        size_t kvd = (size_t)sh->n_kv * sh->hd, qd = (size_t)sh->n_heads * sh->hd;
        float *k = malloc(sizeof(float) * kvd), *v = malloc(sizeof(float) * kvd);
        float *q = malloc(sizeof(float) * qd * n), *o1 = malloc(sizeof(float) * qd * n);
        float *o2 = malloc(sizeof(float) * qd * n), *sc = malloc(sizeof(float) * slots);
        float *scratch = malloc(cq_attn_batch_scratch_bytes(sh->hd, slots));
        if (!k || !v || !q || !o1 || !o2 || !sc || !scratch) return 3;
        for (size_t i = 0; i < qd * n; i++)
            q[i] = 2.0f * frand();
        for (size_t ti = 0; ti < 3; ti++) {
            cq_kv_layer c;
            if (!cq_kv_layer_init(&c, types[ti], slots, sh->n_kv, sh->hd)) return 3;
            for (uint32_t p = 0; p < slots; p++) {
                for (size_t i = 0; i < kvd; i++)
                    k[i] = frand(), v[i] = frand();
                cq_kv_store(&c, p, k, v);
            }
            cq_attn_batch_args a = {&c, q,   o1, sh->n_heads, pos0, 0, 1.0f / sqrtf((float)sh->hd),
                                    0,  NULL};
            double best_old = INFINITY, best_new = INFINITY;
            for (int r = 0; r < reps; r++) {
                a.out = o1;
                double t0 = cpu_now();
                old_path(&a, n, sc);
                double t1 = cpu_now();
                a.out = o2;
                new_path(&a, n, scratch);
                double t2 = cpu_now();
                if (t1 - t0 < best_old) best_old = t1 - t0;
                if (t2 - t1 < best_new) best_new = t2 - t1;
            }
            double diff = 0;
            for (size_t i = 0; i < qd * n; i++)
                if (fabs(o1[i] - o2[i]) > diff) diff = fabs(o1[i] - o2[i]);
            printf("%-14s %-4s %10.3f %10.3f %7.2fx %10.2g\n", sh->name,
                   cortiq_kv_type_name(types[ti]), best_old * 1e3, best_new * 1e3,
                   best_old / best_new, diff);
            cq_kv_layer_free(&c);
        }
        free(k), free(v), free(q), free(o1), free(o2), free(sc), free(scratch);
    }
    return 0;
}
