/* bench_pool.c - the thread pool's cost per parallel region: the mean wall time of an empty
 * cq_pool_run (every thread calls a task that returns at once), back to back, so the threads
 * meet while spinning, as in a decode step's 150-180 regions per token.
 *
 *   bench_pool [--threads T] [--runs N] [--reps R]
 *
 * Prints the best of R (default 5) means over N runs (default 100000) with T threads
 * (default 2), in microseconds. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/pool.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void empty(void *ctx, unsigned tid, unsigned nt) {
    (void)ctx, (void)tid, (void)nt;
}

int main(int argc, char **argv) {
    unsigned threads = 2, runs = 100000, reps = 5;
    for (int i = 1; i + 1 < argc; i += 2) {
        unsigned v = (unsigned)strtoul(argv[i + 1], NULL, 10);
        if (!strcmp(argv[i], "--threads") && v >= 1 && v <= 256)
            threads = v;
        else if (!strcmp(argv[i], "--runs") && v >= 1)
            runs = v;
        else if (!strcmp(argv[i], "--reps") && v >= 1)
            reps = v;
        else {
            fprintf(stderr, "usage: bench_pool [--threads T] [--runs N] [--reps R]\n");
            return 2;
        }
    }
    cq_pool *p = cq_pool_create(threads);
    if (!p) return 3;
    double best = 1e30;
    for (unsigned r = 0; r < reps; r++) {
        double t0 = now_s();
        for (unsigned i = 0; i < runs; i++)
            cq_pool_run(p, empty, NULL);
        double per = (now_s() - t0) / runs;
        if (per < best) best = per;
    }
    printf("%u threads: %.3f us per empty run (best of %u means over %u runs)\n", cq_pool_size(p),
           best * 1e6, reps, runs);
    cq_pool_free(p);
    return 0;
}
