/* bench_batch_decode - aggregate decode tok/s of S concurrent streams on one model: each step
 * decodes one token for every stream, either in one batched pass (cortiq_session_eval_batch,
 * what `cortiq serve --parallel` does) or one session after the other (what slots decoding
 * independently would do). Rounds alternate between the two so that load from other processes
 * hits both alike; the best round of each is printed.
 * usage: bench_batch_decode MODEL.cmf [threads] [steps] [rounds] [act] [lanes] [prompt] [kv]
 *        [only]
 * act: 0 default, 1 int8 activations (CORTIQ_ACT_INT8: q8_row decode through the prepared
 * int8 tokens too), 2 f32 activations; lanes (cortiq_load_opts.batch_lanes): 0 the default
 * decode copies (q4_tiled, q4_block), 1 q8_row's and q4tp's too, as `cortiq serve --parallel N`
 * makes them, -1 none (the file's layout); prompt tokens
 * (default 16): the context each stream's steps start from (a server's slots decode at the
 * prompt's length and on, where attention over the cache weighs more); kv: the sessions' KV
 * cache type, f16 (default), q8 or f32 (`cortiq serve --kv`); only: one stream count (1-8) to
 * run instead of 1, 2, 4 and 8 (for a profile of that count alone; its single-stream ratio is
 * then not printed). */
#include <stdio.h>
#include <stdlib.h>

#include "bench_util.h"
#include "cortiq/engine.h"

#define MAXS 8

#define MAXP 4096

static int n_prompt = 16; /* tokens before the timed steps: the attention's context */

static double run(cortiq_model *m, cortiq_session **s, int ns, int steps, int batched) {
    uint32_t V = cortiq_model_vocab(m);
    static int32_t prompt[MAXP];
    for (int i = 0; i < n_prompt; i++)
        prompt[i] = 100 + i % 1000;
    cmf_err err;
    for (int i = 0; i < ns; i++) {
        cortiq_session_reset(s[i]);
        prompt[0] = 100 + i; /* different streams */
        if (cortiq_session_eval(s[i], prompt, (size_t)n_prompt, NULL, &err)) {
            fprintf(stderr, "%s\n", err.msg);
            exit(1);
        }
    }
    double t0 = bench_now();
    for (int k = 0; k < steps; k++) {
        int32_t next[MAXS];
        for (int i = 0; i < ns; i++)
            next[i] = cortiq_argmax(cortiq_session_logits(s[i]), V);
        cmf_status st = CMF_OK;
        if (batched)
            st = cortiq_session_eval_batch(s, next, (size_t)ns, &err);
        else
            for (int i = 0; i < ns && !st; i++)
                st = cortiq_session_eval(s[i], &next[i], 1, NULL, &err);
        if (st) {
            fprintf(stderr, "%s\n", err.msg);
            exit(1);
        }
    }
    return (double)ns * steps / (bench_now() - t0);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr,
                "usage: %s MODEL.cmf [threads] [steps] [rounds] [act 0|1|2] [lanes 0|1] "
                "[prompt tokens] [kv f16|q8|f32] [only streams]\n",
                argv[0]);
        return 2;
    }
    cortiq_load_opts lo = {.threads = argc > 2 ? (unsigned)atoi(argv[2]) : 0,
                           .act = argc > 5 ? (cortiq_act_mode)atoi(argv[5]) : CORTIQ_ACT_DEFAULT,
                           .batch_lanes = argc > 6 ? atoi(argv[6]) : 0};
    int steps = argc > 3 ? atoi(argv[3]) : 32, rounds = argc > 4 ? atoi(argv[4]) : 3;
    if (argc > 7) n_prompt = atoi(argv[7]);
    if (argc > 8 && !cortiq_kv_type_from_name(argv[8], &lo.kv)) {
        fprintf(stderr, "kv %s: want f16, q8 or f32\n", argv[8]);
        return 2;
    }
    int only = argc > 9 ? atoi(argv[9]) : 0;
    if (only < 0 || only > MAXS) {
        fprintf(stderr, "only %d: want 1 to %d streams\n", only, MAXS);
        return 2;
    }
    if (n_prompt < 1 || n_prompt > MAXP) {
        fprintf(stderr, "prompt tokens %d: want 1 to %d\n", n_prompt, MAXP);
        return 2;
    }
    cortiq_model *m;
    cmf_err err;
    if (cortiq_model_load(argv[1], &lo, &m, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    cortiq_model_prefetch(m);
    cortiq_session *s[MAXS];
    for (int i = 0; i < MAXS; i++)
        if (cortiq_session_create(m, (uint32_t)(n_prompt + steps + 64), &s[i], &err)) {
            fprintf(stderr, "%s\n", err.msg);
            return 1;
        }
    printf("threads %u, %d steps, best of %d rounds, batched-decode copies %.1f MiB\n",
           cortiq_model_threads(m), steps, rounds, (double)cortiq_model_lanes_bytes(m) / (1 << 20));
    printf("streams  batched tok/s  one-by-one tok/s  batched/1-stream\n");
    double single = 0;
    for (int ns = only ? only : 1; ns <= MAXS; ns = only ? MAXS + 1 : 2 * ns) {
        double best_b = 0, best_s = 0;
        for (int r = 0; r < rounds; r++) {
            double b = run(m, s, ns, steps, 1), q = run(m, s, ns, steps, 0);
            if (b > best_b) best_b = b;
            if (q > best_s) best_s = q;
        }
        if (ns == 1) single = best_b > best_s ? best_b : best_s;
        if (single > 0)
            printf("%7d  %13.1f  %16.1f  %16.2f\n", ns, best_b, best_s, best_b / single);
        else
            printf("%7d  %13.1f  %16.1f\n", ns, best_b, best_s);
    }
    for (int i = 0; i < MAXS; i++)
        cortiq_session_free(s[i]);
    cortiq_model_free(m);
    return 0;
}
