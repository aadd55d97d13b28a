/* model_prefetch.c - page in the weights every decode step reads, so that a cold start reads
 * the model file while other set-up (the tokenizer) runs instead of faulting it in during the
 * first prefill; then move them onto 2 MiB pages (common/hugepages.h): a decode step streams
 * every weight byte once, and on the 2-vCPU Xeon guest of docs/PERFORMANCE.md a two-thread read
 * ran at 28 GB/s on 4 KiB pages and 34 GB/s on 2 MiB pages. */
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/hugepages.h"
#include "engine/model.h"
#include "engine/pool.h"

/* advice for the pages spanning [p, p + n); a hint, so a failure only costs speed */
static void advise(const uint8_t *p, uint64_t n, int advice) {
    if (!p || !n) return;
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE), a = (uintptr_t)p & ~(page - 1);
    (void)madvise((void *)a, (size_t)(n + ((uintptr_t)p - a)), advice);
}

static void advise_all(const cq_span *spans, size_t n, int advice) {
    for (size_t i = 0; i < n; i++)
        advise(spans[i].p, spans[i].n, advice);
}

/* The decode step's matrices: each layer's seven and the head (the embedding table too when
 * tied; an untied table is read a row per token and stays lazy). out: 7 * n_layers + 1. */
static size_t matrix_spans(const cortiq_model *m, cq_span *out) {
    size_t n = 0;
    for (uint32_t l = 0; l < m->n_layers; l++) {
        const cq_layer *y = &m->layers[l];
        const cmf_qmat *w[7] = {&y->wq, &y->wk, &y->wv, &y->wo, &y->wg, &y->wu, &y->wd};
        for (int k = 0; k < 7; k++)
            out[n++] = (cq_span){w[k]->data, w[k]->nbytes};
    }
    out[n++] = (cq_span){m->head.data, m->head.nbytes};
    return n;
}

typedef struct move_job {
    const uintptr_t *windows;
    size_t n;
    _Atomic uint64_t moved;
} move_job;

/* Thread tid moves windows tid, tid + nthreads, ...: the copy's cost is mostly the kernel
 * zeroing the fresh huge pages, which scales with the threads. */
static void move_some(void *ctx, unsigned tid, unsigned nthreads) {
    move_job *j = ctx;
    uint64_t moved = 0;
    for (size_t i = tid; i < j->n; i += nthreads)
        moved += cq_huge_window_move(j->windows[i]) ? CQ_HUGE_PAGE : 0;
    atomic_fetch_add(&j->moved, moved);
}

/* The windows of every shard that hold the spans, onto 2 MiB pages; the bytes moved. */
static uint64_t move_to_huge_pages(const cortiq_model *m, cq_span *spans, size_t n) {
    uint64_t moved = 0;
    for (size_t s = 0; s < cmf_file_shard_count(m->file); s++) {
        size_t len = 0;
        const uint8_t *base = cmf_file_shard_bytes(m->file, s, &len);
        uintptr_t *w = malloc((len / CQ_HUGE_PAGE + 1) * sizeof *w);
        if (!w) break;
        move_job j = {w, cq_huge_windows(base, len, spans, n, w), 0};
        if (j.n) cq_pool_run(m->pool, move_some, &j);
        moved += atomic_load(&j.moved);
        free(w);
    }
    return moved;
}

uint64_t cortiq_model_prefetch(const cortiq_model *m) {
    if (!m || !m->layers) return 0;
    cq_span *spans = malloc(((size_t)m->n_layers * 7 + 1) * sizeof *spans);
    if (!spans) return 0; /* a hint: without it the pages come in on first use */
    size_t n = matrix_spans(m, spans);
    /* queue read-ahead of everything first (asynchronous), then wait for it range by range */
    advise_all(spans, n, MADV_WILLNEED);
    uint64_t huge = m->huge_pages && cq_thp_available() ? move_to_huge_pages(m, spans, n) : 0;
#ifdef MADV_POPULATE_READ
    advise_all(spans, n, MADV_POPULATE_READ); /* what stayed on file pages */
#endif
    free(spans);
    return huge;
}
