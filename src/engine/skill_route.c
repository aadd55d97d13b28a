/* skill_route.c - recon-argmin skill routing (spec §9): phi = the mean residual stream after
 * the selection's phi_layer over the prompt, E = |r - B^T B r|^2 / |phi|^2 per skill, least E
 * first. The same definition as the reference implementation's router (docs/FORMAT.md). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cortiq/skill.h"
#include "engine/session.h"

cmf_status cortiq_model_probe_phi(cortiq_model *m, const int32_t *ids, size_t n, uint32_t layer,
                                  float *out, cmf_err *err) {
    if (!n) return cmf_err_set(err, CMF_E_INVALID_ARG, "route", "an empty prompt has no phi");
    if (n > UINT32_MAX) return cmf_err_set(err, CMF_E_LIMIT, "route", "prompt too long");
    cortiq_session *s = NULL;
    cmf_status st = cortiq_session_create_kv(m, (uint32_t)n, CORTIQ_KV_F32, &s, err);
    if (st) return st;
    if (cortiq_session_ctx(s) < n) {
        cortiq_session_free(s);
        return cmf_err_set(err, CMF_E_LIMIT, "route", "prompt of %zu tokens exceeds the context",
                           n);
    }
    double *sum = calloc(m->hidden, sizeof *sum);
    if (!sum) st = cmf_err_set(err, CMF_E_NOMEM, "route", "phi");
    if (!st) st = cq_session_probe(s, ids, n, layer, sum, err);
    for (uint32_t i = 0; !st && i < m->hidden; i++)
        out[i] = (float)(sum[i] / (double)n);
    free(sum);
    cortiq_session_free(s);
    return st;
}

static int by_error(const void *a, const void *b) {
    const cortiq_skill_score *x = a, *y = b;
    return x->error < y->error ? -1 : x->error > y->error;
}

cmf_status cortiq_skill_route(cortiq_model *m, const int32_t *ids, size_t n,
                              cortiq_skill_score *scores, size_t cap, size_t *n_scores,
                              cmf_err *err) {
    const cmf_header *h = cmf_file_header(m->file);
    const char *path = cmf_file_shard_path(m->file, 0);
    *n_scores = 0;
    float *phi = malloc(m->hidden * sizeof *phi);
    uint32_t phi_layer = UINT32_MAX; /* phi is computed once per distinct layer */
    cmf_status st = phi ? CMF_OK : cmf_err_set(err, CMF_E_NOMEM, path, "phi");
    for (size_t i = 0; !st && i < h->n_skills; i++) {
        const cmf_skill *sk = &h->skills[i];
        if (!sk->selection_json) continue;
        char ctx[300];
        snprintf(ctx, sizeof ctx, "%s: skills[%zu] (\"%s\")", path, i, sk->id);
        cmf_skill_selection sel;
        if ((st = cmf_skill_selection_decode(sk->selection_json, m->hidden, ctx, &sel, err))) break;
        if (sel.phi_layer >= m->n_layers)
            st = cmf_err_set(err, CMF_E_PARSE, ctx,
                             "selection.phi_layer=%u but the model has %u "
                             "layers",
                             sel.phi_layer, m->n_layers);
        if (!st && sel.phi_layer != phi_layer) {
            st = cortiq_model_probe_phi(m, ids, n, sel.phi_layer, phi, err);
            phi_layer = st ? UINT32_MAX : sel.phi_layer;
        }
        if (!st && *n_scores < cap) {
            double raw, pp;
            cmf_skill_selection_error(&sel, phi, &raw, &pp);
            cortiq_skill_score *o = &scores[(*n_scores)++];
            o->id = sk->id;
            o->raw = raw;
            o->error = raw / (pp > 1e-12 ? pp : 1e-12);
        }
        cmf_skill_selection_free(&sel);
    }
    free(phi);
    if (!st && !*n_scores)
        st = cmf_err_set(err, CMF_E_NOT_FOUND, path,
                         "no skill of this file has a selection block: nothing to route to");
    if (!st) qsort(scores, *n_scores, sizeof *scores, by_error);
    return st;
}
