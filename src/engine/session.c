/* session.c - sessions (include/cortiq/engine.h): the KV cache and scratch a model's forward
 * pass needs, their accessors, and the names of the KV cache types. */
#include "engine/session.h"

#include <stdlib.h>
#include <string.h>

const char *cortiq_kv_type_name(cortiq_kv_type t) {
    return t == CORTIQ_KV_F16 ? "f16" : t == CORTIQ_KV_Q8 ? "q8" : t == CORTIQ_KV_F32 ? "f32" : "?";
}

bool cortiq_kv_type_from_name(const char *name, cortiq_kv_type *out) {
    for (int t = 0; t < CORTIQ_KV_COUNT; t++)
        if (!strcmp(name, cortiq_kv_type_name((cortiq_kv_type)t)))
            return *out = (cortiq_kv_type)t, true;
    return false;
}

cmf_status cortiq_session_create(cortiq_model *m, uint32_t ctx, cortiq_session **out,
                                 cmf_err *err) {
    return cortiq_session_create_kv(m, ctx, m->kv, out, err);
}

/* The KV cache: every layer's rows in one arena; a sliding layer keeps a ring of its window
 * plus one chunk (the chunk's own keys are stored before its attention reads them); a
 * LinearAttention layer stores none (one unused row). */
static bool kv_init(cortiq_session *s) {
    const cortiq_model *m = s->m;
    s->kv = calloc(m->n_layers, sizeof *s->kv);
    uint32_t *slots = malloc(m->n_layers * sizeof *slots);
    bool ok = s->kv && slots;
    for (uint32_t l = 0; ok && l < m->n_layers; l++) {
        slots[l] = s->ctx;
        if (m->layers[l].sliding && (uint64_t)m->sliding_window + CQ_BATCH < s->ctx)
            slots[l] = m->sliding_window + CQ_BATCH;
        if (m->layers[l].gdn) slots[l] = 1; /* no keys: its state is in s->gdn */
    }
    ok = ok && cq_kv_arena_init(&s->kv_arena, s->kv, m->n_layers, s->kv_type, slots, m->n_kv,
                                m->head_dim, m->huge_pages);
    free(slots);
    return ok;
}

/* The activations of one chunk (session.h). */
static bool activations_init(cortiq_session *s) {
    const cortiq_model *m = s->m;
    size_t B = CQ_BATCH, H = m->hidden, kvd = (size_t)m->n_kv * m->head_dim;
    s->x = malloc(B * H * sizeof(float));
    s->xn = malloc(B * H * sizeof(float));
    s->o = malloc(B * H * sizeof(float));
    s->q = malloc(B * s->max_qd * sizeof(float));
    s->att = malloc(B * s->max_qd * sizeof(float));
    s->k = malloc(B * kvd * sizeof(float));
    s->v = malloc(B * kvd * sizeof(float));
    s->g = malloc(B * s->max_ffn * sizeof(float));
    s->u = malloc(B * s->max_ffn * sizeof(float));
    s->logits = malloc((size_t)m->vocab * sizeof(float));
    s->qgate = malloc(B * 2 * s->max_qd * sizeof(float)); /* used by gated-attention layers */
    size_t og = 0; /* the widest attention output gate (g_proj rows) */
    for (uint32_t l = 0; l < m->n_layers; l++)
        if (m->layers[l].out_gate && m->layers[l].wgp.rows > og) og = m->layers[l].wgp.rows;
    s->ogate = og ? malloc(B * og * sizeof(float)) : NULL;
    s->rope_cs = malloc(B * CQ_ROPE_SLOTS * m->head_dim * sizeof(float));
    s->rope_inv = calloc(B * CQ_ROPE_SLOTS, sizeof *s->rope_inv); /* none holds values yet */
    s->rope_pos = malloc(B * CQ_ROPE_SLOTS * sizeof *s->rope_pos);
    return s->x && s->xn && s->o && s->q && s->att && s->k && s->v && s->g && s->u && s->logits &&
           s->qgate && (!og || s->ogate) && s->rope_cs && s->rope_inv && s->rope_pos;
}

cmf_status cortiq_session_create_kv(cortiq_model *m, uint32_t ctx, cortiq_kv_type kv,
                                    cortiq_session **out, cmf_err *err) {
    *out = NULL;
    if (ctx < 1) return cmf_err_set(err, CMF_E_INVALID_ARG, "session", "ctx must be >= 1");
    if ((unsigned)kv >= CORTIQ_KV_COUNT)
        return cmf_err_set(err, CMF_E_INVALID_ARG, "session",
                           "KV cache type %u: known are 0 (f16), 1 (q8), 2 (f32)", (unsigned)kv);
    if (m->max_pos && ctx > m->max_pos) ctx = m->max_pos;
    cortiq_session *s = calloc(1, sizeof *s);
    if (!s) return cmf_err_set(err, CMF_E_NOMEM, "session", "state");
    s->m = m;
    s->ctx = ctx;
    s->kv_type = kv;
    uint32_t n_blocks = m->n_layers + (m->mtp ? 1 : 0); /* the MTP block runs on this scratch */
    for (uint32_t l = 0; l < n_blocks; l++) {
        if (m->layers[l].ffn > s->max_ffn) s->max_ffn = m->layers[l].ffn;
        uint32_t qd = m->layers[l].n_heads * m->head_dim;
        if (qd > s->max_qd) s->max_qd = qd;
    }
    uint32_t moe_ffn = cq_moe_max_ffn(m);
    if (moe_ffn > s->max_ffn) s->max_ffn = moe_ffn;
    size_t in_cols = m->hidden > s->max_qd ? m->hidden : s->max_qd; /* widest product input */
    if (s->max_ffn > in_cols) in_cols = s->max_ffn;
    if (m->mtp && 2 * (size_t)m->hidden > in_cols) in_cols = 2 * (size_t)m->hidden; /* eh_proj */
    for (uint32_t l = 0; l < m->n_layers; l++)
        if (m->layers[l].gdn && m->layers[l].gdn->value_dim > in_cols)
            in_cols = m->layers[l].gdn->value_dim;
    /* every part runs even after a failure: cortiq_session_free needs their pointers set */
    bool ok = kv_init(s);
    ok = activations_init(s) && ok;
    ok = cq_attention_init(&s->attn, m, ctx) && ok;
    ok = cq_sched_init(&s->sched, m, CQ_BATCH, in_cols) && ok;
    ok = cq_moe_scratch_init(&s->moe, m, CQ_BATCH) && ok;
    ok = cq_gdn_state_init(&s->gdn, m, CQ_BATCH) && ok;
    if (!ok) {
        cortiq_session_free(s);
        return cmf_err_set(err, CMF_E_NOMEM, "session", "KV cache for %u positions", ctx);
    }
    *out = s;
    return CMF_OK;
}

void cortiq_session_free(cortiq_session *s) {
    if (!s) return;
    cq_kv_arena_free(&s->kv_arena, s->kv, s->kv ? s->m->n_layers : 0);
    free(s->kv);
    free(s->x), free(s->xn), free(s->o), free(s->q), free(s->att), free(s->k), free(s->v);
    free(s->g), free(s->u), free(s->logits), free(s->qgate), free(s->ogate);
    free(s->rope_cs), free(s->rope_inv), free(s->rope_pos);
    cq_gdn_state_free(&s->gdn);
    cq_attention_free(&s->attn);
    cq_sched_free(&s->sched);
    cq_moe_scratch_free(&s->moe);
    cq_task_free(s->task, s->m->n_layers);
    free(s);
}

void cortiq_session_reset(cortiq_session *s) {
    s->pos = 0;
    cq_gdn_state_reset(&s->gdn);
}
uint32_t cortiq_session_pos(const cortiq_session *s) {
    return s->pos;
}
uint32_t cortiq_session_ctx(const cortiq_session *s) {
    return s->ctx;
}
cortiq_kv_type cortiq_session_kv_type(const cortiq_session *s) {
    return s->kv_type;
}
uint64_t cortiq_session_kv_bytes(const cortiq_session *s) {
    uint64_t b = 0;
    for (uint32_t l = 0; l < s->m->n_layers; l++)
        b += cq_kv_layer_bytes(&s->kv[l]);
    return b;
}
const float *cortiq_session_logits(const cortiq_session *s) {
    return s->logits;
}
/* The KV cache drops positions by moving pos; a recurrent (Gated DeltaNet) state goes back to
 * its latest checkpoint at or below pos, which may be earlier (gdn.h). */
void cortiq_session_truncate(cortiq_session *s, uint32_t pos) {
    if (pos >= s->pos) return;
    s->pos = s->gdn.floats ? cq_gdn_rewind(&s->gdn, pos) : pos;
}
