/* eval_chunks.c - how cortiq_session_eval cuts its tokens into chunks, and from which chunk size a
 * token's results no longer depend on the cut (cortiq_model_exact_chunk).
 *
 * A chunk's products run as one batch. Where every product of a layer takes a GEMM that computes
 * each token alone in a fixed order (cmf_matmul_exact_min), and the rest of the pass is per
 * token (norms, RoPE, the KV cache written before attention reads it back as stored), a token
 * gets the same bits in any chunk of at least that size. Mixtures of experts (each expert's
 * batch is the tokens routed to it) and Gated DeltaNet layers (a chunked scan) have no such
 * size. */
#include "engine/model.h"
#include "engine/session.h"
#include "quant/kernels_engine.h"

static size_t worst(size_t have, const cmf_qmat *w, int qact, unsigned bf16flags) {
    if (!have || !w->rows) return have;
    size_t k = cmf_matmul_exact_min(w, qact, w->dtype == CMF_DT_BF16 ? bf16flags : 0);
    return !k ? 0 : k > have ? k : have;
}

uint32_t cortiq_model_exact_chunk(const cortiq_model *m) {
    if (!m || !m->layers) return 0;
    const int qact = m->prefill_qact;
    size_t k = worst(1, &m->head, qact, m->bf16flags);
    for (uint32_t l = 0; k && l < m->n_layers; l++) {
        const cq_layer *y = &m->layers[l];
        if (y->moe || y->gdn) return 0;
        const cmf_qmat *w[8] = {&y->wq, &y->wk, &y->wv, &y->wo, &y->wgp, &y->wg, &y->wu, &y->wd};
        for (int i = 0; i < 8; i++)
            k = worst(k, w[i], qact, m->bf16flags);
    }
    return k <= CQ_BATCH ? (uint32_t)k : 0;
}

size_t cq_eval_chunk(size_t rest, uint32_t exact) {
    if (rest <= CQ_BATCH) return rest;
    /* a last chunk shorter than `exact` would round differently: share the last two instead */
    if (exact && rest < CQ_BATCH + exact) return rest / 2;
    return CQ_BATCH;
}
