/* clock.h - the server's one clock for timeouts and durations: CLOCK_MONOTONIC, so a step of the
 * wall clock (NTP, a resumed VM) neither expires a waiting request nor stalls the engine. */
#ifndef CQ_SERVER_CLOCK_H
#define CQ_SERVER_CLOCK_H

#include <pthread.h>
#include <time.h>

/* Seconds on the monotonic clock. */
double srv_now(void);

/* A condition variable whose timed waits count on that clock (0, or pthread's error). */
int srv_cond_init(pthread_cond_t *cv);

/* t (a srv_now() value) as the absolute time pthread_cond_timedwait takes for such a variable. */
struct timespec srv_deadline(double t);

#endif
