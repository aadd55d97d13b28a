/* test_pool.c - the thread pool's hand-offs: every run reaches every thread exactly once and
 * cq_pool_run returns only after all of them finished, whether the threads meet while spinning
 * (back-to-back runs), after the workers went to sleep (gaps longer than the spin), or after the
 * caller went to sleep (a worker slower than the spin). A lost wake-up hangs the test (CTest's
 * alarm below); a run that returned early shows as a missing count. */
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "engine/pool.h"
#include "test.h"

enum { THREADS = 3 };

typedef struct job {
    atomic_uint calls[THREADS];
    atomic_uint done;
    unsigned worker_sleep_us; /* threads other than the caller sleep this long */
    unsigned bad_nt;
} job;

static void nap_us(unsigned us) {
    struct timespec ts = {0, (long)us * 1000L};
    nanosleep(&ts, NULL);
}

static void task(void *ctx, unsigned tid, unsigned nt) {
    job *j = ctx;
    if (nt != THREADS || tid >= THREADS) {
        j->bad_nt++;
        return;
    }
    if (tid && j->worker_sleep_us) nap_us(j->worker_sleep_us);
    atomic_fetch_add(&j->calls[tid], 1);
    atomic_fetch_add(&j->done, 1);
}

static void record(void *ctx, unsigned tid, unsigned nt) {
    unsigned *seen = ctx;
    seen[0] = tid, seen[1] = nt;
}

/* runs runs, with gap_us between them and workers taking worker_sleep_us each */
static void phase(cq_pool *p, const char *name, unsigned runs, unsigned gap_us,
                  unsigned worker_sleep_us) {
    job j = {.worker_sleep_us = worker_sleep_us};
    unsigned short_returns = 0;
    for (unsigned r = 0; r < runs; r++) {
        cq_pool_run(p, task, &j);
        if (atomic_load(&j.done) != (r + 1) * THREADS) short_returns++;
        if (gap_us) nap_us(gap_us);
    }
    CHECK_MSG(short_returns == 0, "%s: %u of %u runs returned before every thread finished", name,
              short_returns, runs);
    for (unsigned t = 0; t < THREADS; t++)
        CHECK_MSG(atomic_load(&j.calls[t]) == runs, "%s: thread %u ran %u of %u times", name, t,
                  atomic_load(&j.calls[t]), runs);
    CHECK_MSG(j.bad_nt == 0, "%s: a task saw a wrong thread count or id", name);
}

static void hung(int sig) {
    (void)sig;
    static const char msg[] = "test_pool: no progress in 60 s: a lost wake-up\n";
    ssize_t w = write(2, msg, sizeof msg - 1);
    (void)w;
    _exit(1);
}

int main(void) {
    signal(SIGALRM, hung);
    alarm(60); /* the phases take about 2 s */
    cq_pool *p = cq_pool_create(THREADS);
    CHECK(p && cq_pool_size(p) == THREADS);
    if (!p) TEST_DONE();
    phase(p, "back to back", 20000, 0, 0);
    phase(p, "workers asleep between runs", 300, 200, 0); /* gaps of 10 spins */
    phase(p, "caller asleep during runs", 300, 0, 200);
    phase(p, "both, alternating", 300, 100, 100);
    phase(p, "back to back again", 20000, 0, 0);
    cq_pool_free(p);
    /* one thread: the caller runs the task itself, as thread 0 of 1 */
    cq_pool *one = cq_pool_create(1);
    CHECK(one && cq_pool_size(one) == 1);
    unsigned seen[2] = {9, 9};
    if (one) cq_pool_run(one, record, seen);
    CHECK(seen[0] == 0 && seen[1] == 1);
    cq_pool_free(one);
    TEST_DONE();
}
