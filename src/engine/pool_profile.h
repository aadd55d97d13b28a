/* pool_profile.h - optional timing of the thread pool's parallel regions, built in with CMake
 * -DCORTIQ_POOL_PROFILE=ON (off by default: every hook below is then an empty inline).
 *
 * Per task function it counts the runs and averages, from the moment a run is published:
 * when the last worker started the task, when the caller and when the last worker finished it,
 * and when cq_pool_run returned; and the gap from the previous run's return to this one's
 * publishing (the caller's serial work before the region: norms, rope, the KV store). At exit the
 * table goes to stderr, each function named by its offset in the binary that holds it (`nm
 * build/src/cortiq | grep <offset>` names it; the engine's are static). One pool runs at a time
 * (the worker times are process-wide). */
#ifndef CORTIQ_ENGINE_POOL_PROFILE_H
#define CORTIQ_ENGINE_POOL_PROFILE_H

#include "engine/pool.h"

#ifdef CORTIQ_POOL_PROFILE
long long cq_pool_prof_now(void);
/* A worker starts (end = 0) or ends (end = 1) the published task. */
void cq_pool_prof_worker(int end);
/* Before publishing a run: clears the worker times. */
void cq_pool_prof_publish(void);
/* After the run: t0 when it was published, t_caller when the caller's share ended. */
void cq_pool_prof_run(cq_task_fn fn, long long t0, long long t_caller);
#else
static inline long long cq_pool_prof_now(void) {
    return 0;
}
static inline void cq_pool_prof_worker(int end) {
    (void)end;
}
static inline void cq_pool_prof_publish(void) {}
static inline void cq_pool_prof_run(cq_task_fn fn, long long t0, long long t_caller) {
    (void)fn, (void)t0, (void)t_caller;
}
#endif

#endif
