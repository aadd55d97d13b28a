#include "engine/pool.h"

#include <pthread.h>
#include <stdlib.h>

struct cq_pool {
    unsigned n;
    pthread_t *threads;
    pthread_mutex_t mu;
    pthread_cond_t start, done;
    unsigned long generation;
    unsigned pending;
    int quit;
    cq_task_fn fn;
    void *ctx;
};

typedef struct worker_arg {
    cq_pool *p;
    unsigned tid;
} worker_arg;

static void *worker(void *arg) {
    worker_arg *w = arg;
    cq_pool *p = w->p;
    unsigned tid = w->tid;
    free(w);
    unsigned long seen = 0;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (!p->quit && p->generation == seen) pthread_cond_wait(&p->start, &p->mu);
        if (p->quit) break;
        seen = p->generation;
        cq_task_fn fn = p->fn;
        void *ctx = p->ctx;
        pthread_mutex_unlock(&p->mu);
        fn(ctx, tid, p->n);
        pthread_mutex_lock(&p->mu);
        if (--p->pending == 0) pthread_cond_signal(&p->done);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

cq_pool *cq_pool_create(unsigned n) {
    if (n < 1) n = 1;
    cq_pool *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->threads = calloc(n, sizeof *p->threads);
    if (!p->threads) {
        free(p);
        return NULL;
    }
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->start, NULL);
    pthread_cond_init(&p->done, NULL);
    p->n = 1;
    for (unsigned i = 1; i < n; i++) {
        worker_arg *w = malloc(sizeof *w);
        if (!w) break;
        w->p = p;
        w->tid = i;
        if (pthread_create(&p->threads[i], NULL, worker, w) != 0) {
            free(w);
            break;
        }
        p->n++;
    }
    return p;
}

void cq_pool_free(cq_pool *p) {
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    p->quit = 1;
    pthread_cond_broadcast(&p->start);
    pthread_mutex_unlock(&p->mu);
    for (unsigned i = 1; i < p->n; i++) pthread_join(p->threads[i], NULL);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->start);
    pthread_cond_destroy(&p->done);
    free(p->threads);
    free(p);
}

unsigned cq_pool_size(const cq_pool *p) { return p->n; }

void cq_pool_run(cq_pool *p, cq_task_fn fn, void *ctx) {
    if (p->n == 1) {
        fn(ctx, 0, 1);
        return;
    }
    pthread_mutex_lock(&p->mu);
    p->fn = fn;
    p->ctx = ctx;
    p->pending = p->n - 1;
    p->generation++;
    pthread_cond_broadcast(&p->start);
    pthread_mutex_unlock(&p->mu);
    fn(ctx, 0, p->n);
    pthread_mutex_lock(&p->mu);
    while (p->pending) pthread_cond_wait(&p->done, &p->mu);
    pthread_mutex_unlock(&p->mu);
}
