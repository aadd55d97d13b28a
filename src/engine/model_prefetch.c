/* model_prefetch.c - page in the weights every decode step reads, so that a cold start reads
 * the model file while other set-up (the tokenizer) runs instead of faulting it in during the
 * first prefill. */
#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

#include "engine/model.h"

/* advice for the pages spanning [p, p + n); a hint, so a failure only costs speed */
static void advise(const uint8_t *p, uint64_t n, int advice) {
    if (!p || !n) return;
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE), a = (uintptr_t)p & ~(page - 1);
    (void)madvise((void *)a, (size_t)(n + ((uintptr_t)p - a)), advice);
}

static void each_matrix(const cortiq_model *m, int advice) {
    for (uint32_t l = 0; l < m->n_layers; l++) {
        const cq_layer *y = &m->layers[l];
        const cmf_qmat *w[7] = {&y->wq, &y->wk, &y->wv, &y->wo, &y->wg, &y->wu, &y->wd};
        for (int k = 0; k < 7; k++)
            advise(w[k]->data, w[k]->nbytes, advice);
    }
    /* the head (the embedding table too when tied); an untied table is read a row per token */
    advise(m->head.data, m->head.nbytes, advice);
}

uint64_t cortiq_model_prefetch(const cortiq_model *m) {
    if (!m) return 0;
    /* queue read-ahead of everything first (asynchronous), then wait for it range by range */
    each_matrix(m, MADV_WILLNEED);
    uint64_t huge = m->huge_pages ? cq_model_huge_pages(m) : 0;
#ifdef MADV_POPULATE_READ
    each_matrix(m, MADV_POPULATE_READ); /* what stayed on file pages */
#endif
    return huge;
}
