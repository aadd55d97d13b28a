/* pool.h - a persistent thread pool for data-parallel loops (matrix rows, attention heads).
 * cq_pool_run blocks until every thread finished; the calling thread works as thread 0. */
#ifndef CORTIQ_ENGINE_POOL_H
#define CORTIQ_ENGINE_POOL_H

typedef struct cq_pool cq_pool;
typedef void (*cq_task_fn)(void *ctx, unsigned tid, unsigned nthreads);

cq_pool *cq_pool_create(unsigned nthreads);
void cq_pool_free(cq_pool *p);
unsigned cq_pool_size(const cq_pool *p);
void cq_pool_run(cq_pool *p, cq_task_fn fn, void *ctx);

#endif
