/* model_prefetch.c - page in the weights every decode step reads, so that a cold start reads
 * the model file while other set-up (the tokenizer) runs instead of faulting it in during the
 * first prefill; then move them onto 2 MiB pages (common/hugepages.h), all at once or a few
 * windows at a time between tokens: a decode step streams every weight byte once, and on the
 * 2-vCPU Xeon guest of docs/PERFORMANCE.md a two-thread read ran at 28 GB/s on 4 KiB pages and
 * 34 GB/s on 2 MiB pages. */
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/hugepages.h"
#include "engine/gdn.h"
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

size_t cq_decode_mats(cortiq_model *m, bool with_mtp, cmf_qmat **out) {
    size_t n = 0;
    for (uint32_t l = 0; l < m->n_layers + (with_mtp && m->mtp ? 1 : 0); l++) {
        cq_layer *y = &m->layers[l];
        cmf_qmat *w[8] = {&y->wq, &y->wk, &y->wv, &y->wo, &y->wgp, &y->wg, &y->wu, &y->wd};
        for (int k = 0; k < 8; k++)
            out[n++] = w[k];
        cq_gdn *g = y->gdn; /* a LinearAttention layer: its projections instead of q/k/v/o */
        if (g) {
            cmf_qmat *gw[7] = {&g->qkvz, &g->ba, &g->qkv, &g->z, &g->b, &g->a, &g->out};
            for (int k = 0; k < 7; k++)
                out[n++] = gw[k];
        }
        cq_moe *moe = y->moe;
        if (!moe) continue;
        cmf_qmat *mw[5] = {&moe->router, &moe->shared_gate, &moe->shared.wg, &moe->shared.wu,
                           &moe->shared.wd};
        for (int k = 0; k < 5; k++)
            out[n++] = mw[k];
    }
    out[n++] = &m->head;
    return n;
}

/* The decode step's matrices as spans of the file (none for a matrix with a batched-decode copy,
 * model_lanes.c: it is no longer read from the file). out: CQ_DECODE_MATS_PER_LAYER *
 * n_layers + 1. */
static size_t matrix_spans(cortiq_model *m, cq_span *out) {
    cmf_qmat **w = malloc(((size_t)m->n_layers * CQ_DECODE_MATS_PER_LAYER + 1) * sizeof *w);
    if (!w) return 0;
    size_t n = cq_decode_mats(m, false, w);
    for (size_t i = 0; i < n; i++)
        out[i] = w[i]->lanes ? (cq_span){NULL, 0} : (cq_span){w[i]->data, w[i]->nbytes};
    free(w);
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

/* The windows of every shard that hold the spans, in m->moves (nothing on allocation failure:
 * the weights then stay on file pages). */
static void list_windows(cortiq_model *m, cq_span *spans, size_t n) {
    size_t cap = 0;
    for (size_t s = 0; s < cmf_file_shard_count(m->file); s++) {
        size_t len = 0;
        cmf_file_shard_bytes(m->file, s, &len);
        cap += len / CQ_HUGE_PAGE + 1;
    }
    free(m->moves);
    m->n_moves = m->moved = 0;
    if (!(m->moves = malloc(cap * sizeof *m->moves))) return;
    for (size_t s = 0; s < cmf_file_shard_count(m->file); s++) {
        size_t len = 0;
        const uint8_t *base = cmf_file_shard_bytes(m->file, s, &len);
        m->n_moves += cq_huge_windows(base, len, spans, n, m->moves + m->n_moves);
    }
}

uint64_t cortiq_model_page_in(cortiq_model *m) {
    if (!m || !m->layers) return 0;
    cq_span *spans = malloc(((size_t)m->n_layers * CQ_DECODE_MATS_PER_LAYER + 1) * sizeof *spans);
    if (!spans) return 0; /* a hint: without it the pages come in on first use */
    size_t n = matrix_spans(m, spans);
    /* queue read-ahead of everything first (asynchronous), then wait for it */
    advise_all(spans, n, MADV_WILLNEED);
#ifdef MADV_POPULATE_READ
    advise_all(spans, n, MADV_POPULATE_READ);
#endif
    if (m->huge_pages && cq_thp_available()) list_windows(m, spans, n);
    free(spans);
    return (uint64_t)(m->n_moves - m->moved) * CQ_HUGE_PAGE;
}

uint64_t cortiq_model_move_step(cortiq_model *m, uint64_t max_bytes) {
    if (!m || m->moved >= m->n_moves) return 0;
    size_t k = m->n_moves - m->moved, most = (size_t)(max_bytes / CQ_HUGE_PAGE);
    if (most < 1) most = 1;
    if (k > most) k = most;
    move_job j = {m->moves + m->moved, k, 0};
    cq_pool_run(m->pool, move_some, &j);
    m->moved += k;
    if (m->moved == m->n_moves) { /* done: the list is not needed again */
        free(m->moves);
        m->moves = NULL;
        m->n_moves = m->moved = 0;
    }
    return atomic_load(&j.moved);
}

uint64_t cortiq_model_moves_left(const cortiq_model *m) {
    return m ? (uint64_t)(m->n_moves - m->moved) * CQ_HUGE_PAGE : 0;
}

uint64_t cortiq_model_prefetch(cortiq_model *m) {
    cortiq_model_page_in(m);
    return cortiq_model_move_step(m, UINT64_MAX);
}
