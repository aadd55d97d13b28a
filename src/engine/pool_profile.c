/* pool_profile.c - the timing table of pool_profile.h (compiled empty unless
 * CORTIQ_POOL_PROFILE is defined). */
#include "engine/pool_profile.h"

#ifdef CORTIQ_POOL_PROFILE
#include <dlfcn.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

enum { SLOTS = 32 };

typedef struct slot {
    cq_task_fn fn;
    unsigned long long runs;
    double start, caller, worker, total; /* ns after publishing, summed over the runs */
    double gap; /* ns from the previous run's return to this one's publishing (the caller's own
                   work in between, for runs less than a millisecond apart) */
} slot;

static slot slots[SLOTS];
static atomic_llong worker_start, worker_end; /* the latest of any worker, this run */
static long long last_return;

long long cq_pool_prof_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void store_max(atomic_llong *a, long long v) {
    long long cur = atomic_load(a);
    while (cur < v && !atomic_compare_exchange_weak(a, &cur, v)) {
    }
}

void cq_pool_prof_worker(int end) {
    store_max(end ? &worker_end : &worker_start, cq_pool_prof_now());
}

void cq_pool_prof_publish(void) {
    atomic_store(&worker_start, 0);
    atomic_store(&worker_end, 0);
}

void cq_pool_prof_run(cq_task_fn fn, long long t0, long long t_caller) {
    long long t_done = cq_pool_prof_now(); /* the workers' end times are visible: pending hit 0 */
    long long gap = last_return && t0 - last_return < 1000000 ? t0 - last_return : 0;
    last_return = t_done;
    for (int i = 0; i < SLOTS; i++) {
        slot *s = &slots[i];
        if (s->fn && s->fn != fn) continue;
        s->fn = fn;
        s->runs++;
        s->start += (double)(atomic_load(&worker_start) - t0);
        s->caller += (double)(t_caller - t0);
        s->worker += (double)(atomic_load(&worker_end) - t0);
        s->total += (double)(t_done - t0);
        s->gap += (double)gap;
        return;
    }
}

__attribute__((destructor)) static void report(void) {
    if (!slots[0].fn) return;
    fprintf(stderr, "pool profile (mean us after publishing a run):\n"
                    "  task offset    runs  worker start  caller end  worker end  return  total ms"
                    "  gap before\n");
    for (int i = 0; i < SLOTS && slots[i].fn; i++) {
        const slot *s = &slots[i];
        Dl_info info = {0};
        uintptr_t off = (uintptr_t)s->fn;
        if (dladdr((void *)(uintptr_t)s->fn, &info) && info.dli_fbase)
            off -= (uintptr_t)info.dli_fbase;
        double n = (double)s->runs;
        fprintf(stderr, "  %#10lx %9llu %13.2f %11.2f %11.2f %7.2f %9.1f %11.2f\n",
                (unsigned long)off, s->runs, s->start / n / 1e3, s->caller / n / 1e3,
                s->worker / n / 1e3, s->total / n / 1e3, s->total / 1e6, s->gap / n / 1e3);
    }
}
#else
typedef int cq_pool_profile_unused; /* ISO C wants a translation unit to declare something */
#endif
