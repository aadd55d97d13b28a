/* mtp.c - the multi-token-prediction head (mtp.h, spec §2.1): loading its norms and eh_proj,
 * and drafting the token after next from the main model's hidden state. */
#include "engine/mtp.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const cmf_tensor *tensor(const cortiq_model *m, const char *name) {
    return cmf_file_find(m->file, name);
}

static cmf_status norm_vec(const cortiq_model *m, const char *name, float add, const char *path,
                           float **out, cmf_err *err) {
    const cmf_tensor *t = tensor(m, name);
    if (!t)
        return cmf_err_set(err, CMF_E_NOT_FOUND, path,
                           "tensor '%s' is required by arch.mtp (spec §2.1) but absent", name);
    cmf_status st = cq_load_floats(t, m->hidden, path, out, err);
    for (uint32_t i = 0; !st && i < m->hidden; i++)
        (*out)[i] += add;
    return st;
}

cmf_status cq_mtp_load(cortiq_model *m, const cmf_arch *a, const char *path, cmf_err *err) {
    if (!a->mtp.present || !a->mtp.share_lm_head || !a->mtp.share_embed) return CMF_OK;
    /* a head declared but not under the canonical names (the other implementation's converter
     * keeps DeepSeek's model.layers.{N}.*): the file runs without it, as spec §2.1 allows */
    if (!tensor(m, "model.mtp.eh_proj.weight")) return CMF_OK;
    cq_mtp_head *h = calloc(1, sizeof *h);
    if (!h) return cmf_err_set(err, CMF_E_NOMEM, path, "MTP head");
    m->mtp = h;
    float add = a->norm_style == CMF_NORM_GEMMA ? 1.0f : 0.0f;
    cmf_status st;
    if ((st = norm_vec(m, "model.mtp.enorm.weight", add, path, &h->enorm, err))) return st;
    if ((st = norm_vec(m, "model.mtp.hnorm.weight", add, path, &h->hnorm, err))) return st;
    if ((st = norm_vec(m, "model.mtp.norm.weight", add, path, &h->norm, err))) return st;
    const cmf_tensor *t = tensor(m, "model.mtp.eh_proj.weight");
    if (t->ndim != 2 || t->shape[0] != m->hidden || t->shape[1] != 2 * (uint64_t)m->hidden)
        return cmf_err_set(err, CMF_E_PARSE, path,
                           "tensor 'model.mtp.eh_proj.weight' shape [%llu, %llu]: spec §2.1 "
                           "wants [hidden, 2 hidden] = [%u, %u]",
                           (unsigned long long)t->shape[0],
                           (unsigned long long)(t->ndim > 1 ? t->shape[1] : 0), m->hidden,
                           2 * m->hidden);
    return cmf_qmat_init(&h->eh_proj, (cmf_dtype)t->dtype, t->shape[0], t->shape[1], t->data,
                         t->nbytes, t->name, err);
}

cmf_status cq_mtp_check(const cortiq_model *m, const char *path, cmf_err *err) {
    const cq_layer *y = &m->layers[m->n_layers];
    if (y->gdn) /* load_layers binds it as attention; kept as a guard for the scratch sizes */
        return cmf_err_set(err, CMF_E_PARSE, path, "the MTP block must be full attention");
    if (!y->moe) return CMF_OK;
    uint32_t most = 0;
    for (uint32_t l = 0; l < m->n_layers; l++)
        if (m->layers[l].moe && m->layers[l].moe->n_experts > most)
            most = m->layers[l].moe->n_experts;
    if (y->moe->n_experts > most)
        return cmf_err_set(err, CMF_E_UNSUPPORTED, path,
                           "the MTP block has %u experts, the main layers at most %u: its "
                           "routing would not fit the session's MoE scratch",
                           y->moe->n_experts, most);
    return CMF_OK;
}

void cq_mtp_free(cq_mtp_head *h) {
    if (!h) return;
    free(h->enorm), free(h->hnorm), free(h->norm);
    cmf_qmat_free(&h->eh_proj);
    free(h);
}

cmf_status cq_mtp_state_create(const cortiq_session *s, cq_mtp_state **out, cmf_err *err) {
    const cortiq_model *m = s->m;
    *out = NULL;
    if (!m->mtp) return cmf_err_set(err, CMF_E_INVALID_ARG, "mtp", "the model has no MTP head");
    cq_mtp_state *st = calloc(1, sizeof *st);
    if (!st) return cmf_err_set(err, CMF_E_NOMEM, "mtp", "state");
    uint32_t slots = s->ctx;
    bool ok = cq_kv_arena_init(&st->arena, &st->kv, 1, s->kv_type, &slots, m->n_kv, m->head_dim,
                               m->huge_pages);
    st->in = malloc((size_t)CQ_BATCH * 2 * m->hidden * sizeof(float));
    st->logits = malloc((size_t)m->vocab * sizeof(float));
    if (!ok || !st->in || !st->logits) {
        if (ok) cq_kv_arena_free(&st->arena, &st->kv, 1);
        free(st->in), free(st->logits), free(st);
        return cmf_err_set(err, CMF_E_NOMEM, "mtp", "KV cache for %u positions", s->ctx);
    }
    *out = st;
    return CMF_OK;
}

void cq_mtp_state_free(cq_mtp_state *st) {
    if (!st) return;
    cq_kv_arena_free(&st->arena, &st->kv, 1);
    free(st->in), free(st->logits), free(st);
}

void cq_mtp_truncate(cq_mtp_state *st, uint32_t pos) {
    if (pos < st->pos) st->pos = pos;
}

cmf_status cq_mtp_extend(cq_mtp_state *st, cortiq_session *s, const int32_t *next,
                         const float *hidden, size_t n, int32_t *draft, cmf_err *err) {
    cortiq_model *m = s->m;
    const cq_mtp_head *h = m->mtp;
    uint32_t H = m->hidden;
    if (n == 0) return cmf_err_set(err, CMF_E_INVALID_ARG, "mtp", "no entries to add");
    cmf_status cs = cq_check_context(m, "mtp", st->pos, s->ctx, next, n, err);
    if (cs) return cs;
    for (size_t done = 0; done < n;) {
        size_t b = n - done < CQ_BATCH ? n - done : CQ_BATCH;
        for (size_t t = 0; t < b; t++) {
            float *e = st->in + t * 2 * H, *hn = e + H;
            cq_embed_token(m, next[done + t], e);
            cq_rmsnorm(e, e, h->enorm, H, m->eps);
            cq_rmsnorm(hn, hidden + (done + t) * H, h->hnorm, H, m->eps);
        }
        cq_matmul_one(&s->sched, &h->eh_proj, st->in, b, s->x); /* x = eh_proj [e; h] */
        cq_block_forward(s, &m->layers[m->n_layers], &st->kv, b, st->pos);
        st->pos += (uint32_t)b;
        done += b;
        if (done == n) {
            cq_head_forward(s, s->x + (b - 1) * H, h->norm, st->logits);
            *draft = cortiq_argmax(st->logits, m->vocab);
        }
    }
    return CMF_OK;
}
