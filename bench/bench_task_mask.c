/* bench_task_mask.c - what a task mask saves: prefill and decode of the same file, dense and
 * under each task named, in one process (one load, the same pages) with the tasks alternating
 * rep after rep so a shared machine's drift falls on all of them alike.
 *
 *   bench_task_mask MODEL.cmf [-p 64] [-n 16] [-r 5] [-t 1] TASK...    (TASK "none" = dense)
 *
 * Prints, per task, the best-of-r wall time of the prefill (p tokens) and of the decode (n
 * tokens after it), and their speed-up over the first task. Under callgrind
 * (valgrind --tool=callgrind --collect-atstart=no bench_task_mask ...) each phase of the first
 * rep is collected on its own and dumped as "TASK.prefill" / "TASK.decode": instruction counts,
 * which a busy machine does not disturb (callgrind_annotate each dump, or read its summary). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "cortiq/engine.h"

#if __has_include(<valgrind/callgrind.h>)
#include <valgrind/callgrind.h>
/* one collected phase: toggled on before it, off and dumped under its name after it */
#define CG_START() CALLGRIND_START_INSTRUMENTATION
#define CG_BEGIN() CALLGRIND_TOGGLE_COLLECT
#define CG_END(name)                                                                               \
    do {                                                                                           \
        CALLGRIND_TOGGLE_COLLECT;                                                                  \
        CALLGRIND_DUMP_STATS_AT(name);                                                             \
    } while (0)
#else
#define CG_START()   ((void)0)
#define CG_BEGIN()   ((void)0)
#define CG_END(name) ((void)(name))
#endif

static int fail(const cmf_err *e) {
    fprintf(stderr, "bench_task_mask: %s\n", e->msg);
    return 1;
}

int main(int argc, char **argv) {
    const char *path = NULL, *tasks[16];
    int n_tasks = 0;
    unsigned p = 64, n = 16, r = 5, t = 1;
    for (int i = 1; i < argc; i++) {
        if (i + 1 < argc && argv[i][0] == '-' && strchr("pnrt", argv[i][1]) && !argv[i][2]) {
            unsigned v = (unsigned)atoi(argv[++i]);
            *(argv[i - 1][1] == 'p'   ? &p
              : argv[i - 1][1] == 'n' ? &n
              : argv[i - 1][1] == 'r' ? &r
                                      : &t) = v;
        } else if (!path)
            path = argv[i];
        else if (n_tasks < 16)
            tasks[n_tasks++] = argv[i];
    }
    if (!path || !n_tasks || !p || !r) {
        fprintf(stderr, "usage: bench_task_mask MODEL.cmf [-p 64] [-n 16] [-r 5] [-t 1] TASK...\n");
        return 2;
    }
    cmf_err err;
    cortiq_model *m = NULL;
    cortiq_load_opts lo = {.threads = t, .no_huge_pages = 1};
    if (cortiq_model_load(path, &lo, &m, &err)) return fail(&err);
    cortiq_model_page_in(m);
    cortiq_session *s = NULL;
    if (cortiq_session_create(m, p + n + 1, &s, &err)) return fail(&err);
    uint32_t V = cortiq_model_vocab(m);
    int32_t *prompt = malloc(p * sizeof *prompt);
    uint64_t x = 12345;
    for (unsigned i = 0; i < p; i++) {
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
        prompt[i] = (int32_t)((x >> 33) % V);
    }
    double best[16][2];
    for (int k = 0; k < n_tasks; k++)
        best[k][0] = best[k][1] = 1e30;
    CG_START();
    for (unsigned rep = 0; rep < r; rep++)
        for (int k = 0; k < n_tasks; k++) {
            cortiq_session_reset(s);
            if (cortiq_session_set_task(s, tasks[k], &err)) return fail(&err);
            char name[96];
            snprintf(name, sizeof name, "%s.prefill", tasks[k]);
            if (!rep) CG_BEGIN();
            double t0 = bench_now();
            if (cortiq_session_eval(s, prompt, p, NULL, &err)) return fail(&err);
            double t1 = bench_now();
            if (!rep) CG_END(name);
            snprintf(name, sizeof name, "%s.decode", tasks[k]);
            if (!rep) CG_BEGIN();
            for (unsigned j = 0; j < n; j++) {
                int32_t tok = cortiq_argmax(cortiq_session_logits(s), V);
                if (cortiq_session_eval(s, &tok, 1, NULL, &err)) return fail(&err);
            }
            double t2 = bench_now();
            if (!rep) CG_END(name);
            if (t1 - t0 < best[k][0]) best[k][0] = t1 - t0;
            if (t2 - t1 < best[k][1]) best[k][1] = t2 - t1;
        }
    printf("%s: %u threads, prefill %u tokens, decode %u tokens, best of %u (tasks alternating)\n",
           path, cortiq_model_threads(m), p, n, r);
    for (int k = 0; k < n_tasks; k++) {
        cortiq_session_reset(s);
        cortiq_task_stats ts;
        if (cortiq_session_set_task(s, tasks[k], &err)) return fail(&err);
        cortiq_session_task_stats(s, &ts);
        double active = ts.ffn_neurons ? (double)ts.ffn_computed / (double)ts.ffn_neurons : 1.0;
        printf("  %-10s FFN computed %5.1f %%  prefill %8.1f ms (x%.2f)  decode %7.2f ms/token "
               "(x%.2f)\n",
               tasks[k], 100 * active, best[k][0] * 1e3, best[0][0] / best[k][0],
               best[k][1] * 1e3 / (n ? n : 1), best[0][1] / best[k][1]);
    }
    free(prompt);
    cortiq_session_free(s);
    cortiq_model_free(m);
    return 0;
}
