/* The server's clock: deadlines split into whole seconds and nanoseconds, and a condition variable
 * from srv_cond_init times out on the monotonic clock (its deadline from srv_now, not the wall
 * clock, so the wait lasts what was asked: a wall-clock deadline on it would be decades off). */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>

#include "server/clock.h"
#include "test.h"

static void test_deadline(void) {
    struct timespec ts = srv_deadline(12.25);
    CHECK(ts.tv_sec == 12 && ts.tv_nsec == 250000000L);
    ts = srv_deadline(3.0);
    CHECK(ts.tv_sec == 3 && ts.tv_nsec == 0);
    ts = srv_deadline(7.9999999999); /* rounding never yields a nanosecond count of a second */
    CHECK(ts.tv_sec == 7 && ts.tv_nsec < 1000000000L);
}

static void test_timed_wait(void) {
    pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    pthread_cond_t cv;
    CHECK(srv_cond_init(&cv) == 0);
    double t0 = srv_now();
    struct timespec until = srv_deadline(t0 + 0.05);
    pthread_mutex_lock(&mu);
    int rc;
    do /* a spurious wake-up waits again */
        rc = pthread_cond_timedwait(&cv, &mu, &until);
    while (rc == 0);
    pthread_mutex_unlock(&mu);
    double waited = srv_now() - t0;
    CHECK(rc == ETIMEDOUT);
    CHECK_MSG(waited >= 0.05 && waited < 5.0, "waited %.3f s for a 0.05 s deadline", waited);
    pthread_cond_destroy(&cv);
}

int main(void) {
    test_deadline();
    test_timed_wait();
    printf("%d checks, %d failures\n", t_checks, t_failures);
    return t_failures;
}
