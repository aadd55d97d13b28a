/* moe_session.c - a session's mixture-of-experts controls (include/cortiq/engine.h): the
 * runtime restriction of routing to a set of experts per layer (spec §5 expert area, §11.1),
 * and the per-expert selection counters behind `--route-stats` (CMF_MOE_STATS). */
#include <stdlib.h>
#include <string.h>

#include "engine/session.h"

cmf_status cq_moe_check_allow(const cortiq_model *m, const uint8_t *const *allow, cmf_err *err) {
    if (!allow) return CMF_OK;
    for (uint32_t l = 0; l < m->n_layers; l++) {
        const cq_moe *moe = m->layers[l].moe;
        if (moe && allow[l] && !cq_moe_routable(moe, allow[l]))
            return cmf_err_set(err, CMF_E_INVALID_ARG, cmf_file_path(m->file),
                               "layer %u: the expert restriction leaves none of its %u experts "
                               "routable (a MoE layer routes to at least one)",
                               l, moe->n_experts);
    }
    return CMF_OK;
}

cmf_status cortiq_session_restrict_experts(cortiq_session *s, const uint8_t *const *allow,
                                           cmf_err *err) {
    const cortiq_model *m = s->m;
    cmf_status st = cq_moe_check_allow(m, allow, err);
    if (st) return st;
    cq_moe_scratch *ms = &s->moe;
    const uint8_t **rows = NULL;
    uint8_t *bits = NULL;
    if (allow) {
        size_t total = 0; /* one row per restricted MoE layer, its experts' bits */
        for (uint32_t l = 0; l < m->n_layers; l++)
            if (m->layers[l].moe && allow[l]) total += (m->layers[l].moe->n_experts + 7) / 8;
        rows = calloc(m->n_layers, sizeof *rows);
        bits = malloc(total ? total : 1);
        if (!rows || !bits) {
            free(rows), free(bits);
            return cmf_err_set(err, CMF_E_NOMEM, "session", "expert restriction");
        }
        uint8_t *p = bits;
        for (uint32_t l = 0; l < m->n_layers; l++) {
            const cq_moe *moe = m->layers[l].moe;
            if (!moe || !allow[l]) continue;
            size_t nb = (moe->n_experts + 7) / 8;
            memcpy(p, allow[l], nb);
            rows[l] = p;
            p += nb;
        }
    }
    free(ms->allow_rows), free(ms->allow_bits);
    ms->allow_rows = rows;
    ms->allow_bits = bits;
    s->expert_allow = rows;
    return CMF_OK;
}

cmf_status cortiq_session_count_routes(cortiq_session *s, cmf_err *err) {
    const cortiq_model *m = s->m;
    cq_moe_scratch *ms = &s->moe;
    if (!ms->counts) {
        size_t total = 0;
        for (uint32_t l = 0; l < m->n_layers; l++)
            if (m->layers[l].moe) total += m->layers[l].moe->n_experts;
        uint64_t **counts = calloc(m->n_layers ? m->n_layers : 1, sizeof *counts);
        uint64_t *store = malloc((total ? total : 1) * sizeof *store);
        if (!counts || !store) {
            free(counts), free(store);
            return cmf_err_set(err, CMF_E_NOMEM, "session", "route counters");
        }
        uint64_t *p = store;
        for (uint32_t l = 0; l < m->n_layers; l++)
            if (m->layers[l].moe) counts[l] = p, p += m->layers[l].moe->n_experts;
        ms->counts = counts;
        ms->count_store = store;
    }
    for (uint32_t l = 0; l < m->n_layers; l++)
        if (ms->counts[l]) memset(ms->counts[l], 0, m->layers[l].moe->n_experts * sizeof(uint64_t));
    return CMF_OK;
}

const uint64_t *cortiq_session_route_counts(const cortiq_session *s, uint32_t l,
                                            uint32_t *n_experts) {
    if (n_experts) *n_experts = 0;
    if (!s->moe.counts || l >= s->m->n_layers || !s->moe.counts[l]) return NULL;
    if (n_experts) *n_experts = s->m->layers[l].moe->n_experts;
    return s->moe.counts[l];
}
