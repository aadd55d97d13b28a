/* model_lanes.c - the batched-decode copies of a model's q8 / 4-bit matrices (cortiq_load_opts.
 * batch_lanes, cmf_qmat_build_lanes): made once at load, on the model's threads, for the
 * matrices a decode step streams; each matrix's file pages are then handed back to the kernel
 * (they refault if something still reads them: a task mask's gathered rows, a skill instance
 * of the same file), so the resident set holds the weights about once. A tied head's table
 * rows are read from its copy too (cq_embed_token), except q4tp's, whose pages stay. */
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "engine/model.h"
#include "engine/pool.h"

typedef struct lanes_job {
    cmf_qmat **mats;
    size_t n;
    const uint8_t *table; /* the embedding table: a tied head's rows are read per token */
    _Atomic size_t next;
    _Atomic uint64_t bytes;
} lanes_job;

/* The whole pages inside [p, p + n) handed back (MADV_PAGEOUT: clean file pages are dropped,
 * anonymous ones never lost, so it is safe whatever backs them). */
static void page_out(const uint8_t *p, uint64_t n) {
#ifdef MADV_PAGEOUT
    const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t a = ((uintptr_t)p + page - 1) & ~(page - 1), e = ((uintptr_t)p + n) & ~(page - 1);
    if (e > a) (void)madvise((void *)a, (size_t)(e - a), MADV_PAGEOUT);
#else
    (void)p, (void)n;
#endif
}

static void build_some(void *ctx, unsigned tid, unsigned nt) {
    (void)tid, (void)nt;
    lanes_job *j = ctx;
    for (size_t i; (i = atomic_fetch_add(&j->next, 1)) < j->n;) {
        cmf_qmat *w = j->mats[i];
        if (!w->data || w->lanes || !cmf_qmat_build_lanes(w)) continue;
        atomic_fetch_add(&j->bytes, w->lanes_bytes);
        if (w->data != j->table || cmf_qmat_lanes_rows(w)) page_out(w->data, w->nbytes);
    }
}

uint64_t cq_model_build_lanes(cortiq_model *m) {
    if (!m->layers || !(m->q4flags & CMF_KF_INT8_ACT)) return 0;
    cmf_qmat **mats =
        malloc(((size_t)(m->n_layers + 1) * CQ_DECODE_MATS_PER_LAYER + 1) * sizeof *mats);
    if (!mats) return 0; /* the copies are an optimisation: without them decode reads the file */
    lanes_job j = {mats, cq_decode_mats(m, true, mats), m->embed.data, 0, 0};
    cq_pool_run(m->pool, build_some, &j);
    free(mats);
    return atomic_load(&j.bytes);
}
