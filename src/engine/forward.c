/* forward.c - the forward pass of a chunk of tokens: embeddings, then per layer
 *   x += attention(rmsnorm(x))    RoPE, q/k norms, GQA, sliding window
 *   x += ffn(rmsnorm(x))          gated MLP, or a mixture of experts (moe.h)
 * then the final norm and the output head. Each step reads as one call, in the order of the
 * computation; the parallel work behind a call (matrix products split over the thread pool,
 * per-token steps split by tokens: matmul_sched.h; attention: attention.h) stays out of sight.
 * A batch of tokens (prefill) decodes each weight once per batch. The session's buffers are
 * described in session.h. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/act_ops.h"
#include "engine/session.h"

/* ---- elementwise ops ---- */
void cq_rmsnorm(float *out, const float *x, const float *w, uint32_t n, float eps) {
    double ss = cq_act_ops_get()->sum_squares(x, n); /* act_ops.h: the same bits on every tier */
    float r = 1.0f / sqrtf((float)(ss / n) + eps);
    for (uint32_t i = 0; i < n; i++)
        out[i] = x[i] * r * w[i];
}

/* rmsnorm of each of n_heads heads of v in place. */
static void head_norms(float *v, uint32_t n_heads, uint32_t head_dim, const float *w, float eps) {
    for (uint32_t h = 0; h < n_heads; h++)
        cq_rmsnorm(v + h * head_dim, v + h * head_dim, w, head_dim, eps);
}

static void add_bias(float *v, const float *b, size_t n) {
    for (size_t i = 0; i < n; i++)
        v[i] += b[i];
}

/* Rotate each of n_heads heads of v: pair (i, i + half) by (c[i], s[i]), i < half. */
static void rotate_heads(float *v, uint32_t n_heads, uint32_t head_dim, uint32_t half,
                         const float *restrict c, const float *restrict s) {
    for (uint32_t h = 0; h < n_heads; h++) {
        float *restrict x = v + (size_t)h * head_dim, *restrict y = x + half;
        for (uint32_t i = 0; i < half; i++) {
            float a = x[i], b = y[i];
            x[i] = a * c[i] - b * s[i];
            y[i] = b * c[i] + a * s[i];
        }
    }
}

/* The cos then the sin (times mscale) of chunk row t's position pos for layer y's table: the
 * row's cached ones when an earlier layer of this step computed them (session.h). A decode
 * step's serial work before attention took ~5,000 cycles a layer for these 2 x rot_dim / 2
 * libm calls and the rotations when every layer made its own. */
static const float *rope_cs(cortiq_session *s, size_t t, const cq_layer *y, uint32_t pos) {
    size_t e = t * CQ_ROPE_SLOTS + y->rope_slot;
    float *cs = s->rope_cs + e * s->m->head_dim;
    if (s->rope_inv[e] != y->inv_freq || s->rope_pos[e] != pos) {
        uint32_t half = y->rot_dim / 2;
        for (uint32_t i = 0; i < half; i++) {
            float f = (float)pos * y->inv_freq[i];
            cs[i] = cosf(f) * y->rope_mscale;
            cs[half + i] = sinf(f) * y->rope_mscale;
        }
        s->rope_inv[e] = y->inv_freq, s->rope_pos[e] = pos;
    }
    return cs;
}

/* RoPE of one token's queries (nq heads) and keys (nk heads) with its cos / sin cs. */
static void rope(float *q, uint32_t nq, float *k, uint32_t nk, uint32_t head_dim, uint32_t rot,
                 const float *cs) {
    uint32_t half = rot / 2;
    rotate_heads(q, nq, head_dim, half, cs, cs + half);
    rotate_heads(k, nk, head_dim, half, cs, cs + half);
}

/* ---- per-token steps of a layer (cq_token_fn: token t of the chunk) ---- */

/* What the steps of one layer over one chunk read. */
typedef struct layer_pass {
    cortiq_session *s;
    const cq_layer *y;
    cq_kv_layer *kv;
    size_t n;                /* tokens in the chunk */
    uint32_t pos0;           /* position of its first token */
    const cq_layer_task *tm; /* the session's task for this layer (task_mask.h); NULL = dense */
    uint32_t l;              /* the layer's index */
    /* non-NULL: a batched decode step (cortiq_session_eval_batch): token t is the next token of
     * session rows[t], at its position, in its KV cache; s (rows[0]) lends its scratch */
    cortiq_session *const *rows;
    /* a speculative verify (cq_session_eval_spec): every product and attention one token at a
     * time, so that each token's result equals its decode step's bit for bit */
    bool each;
} layer_pass;

/* xn = rmsnorm(x), the attention's input. */
static void attn_norm(const void *ctx, size_t t) {
    const layer_pass *L = ctx;
    const cortiq_model *m = L->s->m;
    size_t H = m->hidden;
    cq_rmsnorm(L->s->xn + t * H, L->s->x + t * H, L->y->attn_norm, m->hidden, m->eps);
}

/* q, k, v of the token as attention reads them: biases, q/k norms, RoPE at its position; then
 * k and v into the cache (converted once, to the cache's type). */
static void qkv_finish(const void *ctx, size_t t) {
    const layer_pass *L = ctx;
    const cortiq_model *m = L->s->m;
    const cq_layer *y = L->y;
    uint32_t hd = m->head_dim, pos = L->rows ? L->rows[t]->pos : L->pos0 + (uint32_t)t;
    cq_kv_layer *kv = L->rows ? &L->rows[t]->kv[L->l] : L->kv;
    bool packed = L->tm && L->tm->q_packed; /* q holds the task's active heads only */
    uint32_t nq = packed ? L->tm->n_heads_on : y->n_heads;
    const float *bq = packed ? L->tm->bq : y->bq;
    size_t qd = (size_t)nq * hd, kvd = (size_t)m->n_kv * hd;
    float *q = L->s->q + t * qd, *k = L->s->k + t * kvd, *v = L->s->v + t * kvd;
    if (y->attn_gate) /* the query halves of [query; gate] per head */
        for (uint32_t h = 0; h < y->n_heads; h++)
            memcpy(q + (size_t)h * hd, L->s->qgate + t * 2 * qd + (size_t)h * 2 * hd,
                   hd * sizeof(float));
    if (bq) add_bias(q, bq, qd);
    if (y->bk) add_bias(k, y->bk, kvd);
    if (y->bv) add_bias(v, y->bv, kvd);
    if (y->q_norm) head_norms(q, nq, hd, y->q_norm, m->eps);
    if (y->k_norm) head_norms(k, m->n_kv, hd, y->k_norm, m->eps);
    rope(q, nq, k, m->n_kv, hd, y->rot_dim, rope_cs(L->s, t, y, pos));
    cq_kv_store(kv, pos % kv->slots, k, v);
}

/* att *= sigmoid(gate), the gate halves of a gated layer's q_proj. */
static void attn_gate(const void *ctx, size_t t) {
    const layer_pass *L = ctx;
    uint32_t hd = L->s->m->head_dim;
    size_t qd = (size_t)L->y->n_heads * hd;
    float *att = L->s->att + t * qd;
    const float *gate = L->s->qgate + t * 2 * qd + hd;
    for (uint32_t h = 0; h < L->y->n_heads; h++)
        for (uint32_t i = 0; i < hd; i++)
            att[h * hd + i] *= 1.0f / (1.0f + expf(-gate[h * 2 * hd + i]));
}

/* softplus as torch computes it (beta 1, threshold 20: the input itself above 20). */
static float softplus(float x) {
    return x > 20.0f ? x : log1pf(expf(x));
}

/* att *= softplus(g_proj xn) (spec §2), one gate per head or per channel. With a task's packed
 * queries (task_mask.h) att holds the active heads only, in order. */
static void out_gate(const void *ctx, size_t t) {
    const layer_pass *L = ctx;
    const cq_layer *y = L->y;
    uint32_t hd = L->s->m->head_dim;
    bool packed = L->tm && L->tm->q_packed;
    uint32_t nq = packed ? L->tm->n_heads_on : y->n_heads;
    float *att = L->s->att + t * (size_t)nq * hd;
    const float *g = L->s->ogate + t * y->wgp.rows;
    for (uint32_t j = 0; j < nq; j++) {
        uint32_t h = packed ? L->tm->head_on[j] : j;
        float *a = att + (size_t)j * hd;
        if (y->out_gate == CQ_OUT_GATE_HEAD) {
            float gh = softplus(g[h]);
            for (uint32_t i = 0; i < hd; i++)
                a[i] *= gh;
        } else {
            for (uint32_t i = 0; i < hd; i++)
                a[i] *= softplus(g[(size_t)h * hd + i]);
        }
    }
}

/* x += o, after the block's own norm of o when it has one (gemma). */
static void residual(const layer_pass *L, size_t t, const float *post_norm) {
    const cortiq_model *m = L->s->m;
    float *o = L->s->o + t * m->hidden, *x = L->s->x + t * m->hidden;
    if (post_norm) cq_rmsnorm(o, o, post_norm, m->hidden, m->eps);
    for (uint32_t i = 0; i < m->hidden; i++)
        x[i] += o[i];
}

static void attn_residual(const void *ctx, size_t t) {
    const layer_pass *L = ctx;
    residual(L, t, L->y->post_attn_norm);
}

/* xn = rmsnorm(x), the FFN's input. */
static void ffn_norm(const void *ctx, size_t t) {
    const layer_pass *L = ctx;
    const cortiq_model *m = L->s->m;
    size_t H = m->hidden;
    cq_rmsnorm(L->s->xn + t * H, L->s->x + t * H, L->y->ffn_norm, m->hidden, m->eps);
}

/* The attention's residual add and the FFN's norm as one step, so that they share a parallel
 * region (each region costs a wake-up and a barrier, which other work on the cores makes dear). */
static void attn_residual_ffn_norm(const void *ctx, size_t t) {
    attn_residual(ctx, t);
    ffn_norm(ctx, t);
}

static void ffn_residual(const void *ctx, size_t t) {
    const layer_pass *L = ctx;
    residual(L, t, L->y->post_ffn_norm);
}

/* Task masks: the activations act(gate) * up of the neurons computed but not active, zeroed
 * (the gathered FFN's group widening, or every inactive neuron of a densely computed one). */
static void ffn_zero(const void *ctx, size_t t) {
    const layer_pass *L = ctx;
    float *g = L->s->g + t * L->tm->ffn_kept;
    for (uint32_t i = 0; i < L->tm->n_ffn_zero; i++)
        g[L->tm->ffn_zero[i]] = 0.0f;
}

/* Task masks: the attention output of the inactive heads, zeroed. */
static void heads_zero(const void *ctx, size_t t) {
    const layer_pass *L = ctx;
    uint32_t hd = L->s->m->head_dim;
    float *att = L->s->att + t * (size_t)L->y->n_heads * hd;
    for (uint32_t i = 0; i < L->tm->n_heads_off; i++)
        memset(att + (size_t)L->tm->head_off[i] * hd, 0, hd * sizeof(float));
}

/* Task masks: the active heads' attention outputs packed together, token after token, as the
 * gathered output projection reads them. In place: every destination lies at or before its
 * source, and a source is read before any later destination reaches it. */
static void heads_pack(const layer_pass *L) {
    size_t hd = L->s->m->head_dim, qd = L->y->n_heads * hd, pd = L->tm->n_heads_on * hd;
    float *att = L->s->att;
    for (size_t t = 0; t < L->n; t++)
        for (uint32_t j = 0; j < L->tm->n_heads_on; j++)
            memmove(att + t * pd + j * hd, att + t * qd + L->tm->head_on[j] * hd,
                    hd * sizeof(float));
}

/* ---- the parallel work of a layer (matmul_sched.h, attention.h) ---- */

static void each_token(const layer_pass *L, cq_token_fn step) {
    cq_each_token(&L->s->sched, L->n, step, L);
}

/* y = W x for every token of the chunk. */
static void matmul(const layer_pass *L, const cmf_qmat *w, const float *x, float *y) {
    cq_matmul mm = {
        .p = {{.w = w, .y = y}}, .np = 1, .x = x, .n = L->n, .each = L->rows || L->each};
    cq_matmul_after(&L->s->sched, NULL, NULL, &mm);
}

static void attention(const layer_pass *L) {
    cortiq_session *s = L->s;
    bool packed = L->tm && L->tm->q_packed; /* the task's active heads only (task_mask.h) */
    uint32_t nq = packed ? L->tm->n_heads_on : L->y->n_heads;
    const uint32_t *kv_first = packed ? L->tm->kv_first : NULL;
    if (!L->rows && !L->each) {
        cq_attention_run(&s->attn, s->m, L->y, L->kv, s->q, s->att, L->n, L->pos0, nq, kv_first);
        return;
    }
    size_t qd = (size_t)nq * s->m->head_dim;
    if (L->rows) { /* a batched decode step: each token over its own session's cache, alone */
        for (size_t t0 = 0; t0 < L->n; t0 += CQ_ATTN_SESSIONS_PER_RUN) {
            cq_attention *as[CQ_ATTN_SESSIONS_PER_RUN];
            const cq_kv_layer *kvs[CQ_ATTN_SESSIONS_PER_RUN];
            uint32_t pos[CQ_ATTN_SESSIONS_PER_RUN];
            size_t n = L->n - t0 < CQ_ATTN_SESSIONS_PER_RUN ? L->n - t0 : CQ_ATTN_SESSIONS_PER_RUN;
            for (size_t k = 0; k < n; k++) {
                cortiq_session *r = L->rows[t0 + k];
                as[k] = &r->attn, kvs[k] = &r->kv[L->l], pos[k] = r->pos;
            }
            cq_attention_run_sessions(as, s->m, L->y, kvs, s->q + t0 * qd, s->att + t0 * qd, n, pos,
                                      nq, kv_first);
        }
        return;
    }
    /* a verify: each token at its position in this cache, as it would run alone */
    for (size_t t = 0; t < L->n; t++)
        cq_attention_run(&s->attn, s->m, L->y, L->kv, s->q + t * qd, s->att + t * qd, 1,
                         L->pos0 + (uint32_t)t, nq, kv_first);
}

/* step (which writes xn), then q, k, v = Wq xn, Wk xn, Wv xn (and the output gate's g_proj xn),
 * in one parallel region. */
static void qkv_after(const layer_pass *L, cq_token_fn step) {
    cortiq_session *s = L->s;
    const cq_layer *y = L->y;
    const cmf_qmat *wq = L->tm && L->tm->q_packed ? &L->tm->wq : &y->wq;
    cq_matmul qkv = {.p = {{.w = wq, .y = y->attn_gate ? s->qgate : s->q},
                           {.w = &y->wk, .y = s->k},
                           {.w = &y->wv, .y = s->v},
                           {.w = &y->wgp, .y = s->ogate}},
                     .np = y->out_gate ? 4 : 3,
                     .x = s->xn,
                     .n = L->n,
                     .each = L->rows || L->each};
    cq_matmul_after(&s->sched, step, L, &qkv);
}

/* step (which writes xn), then g = act(Wg xn) * (Wu xn), in one parallel region. */
static void gate_up_after(const layer_pass *L, cq_token_fn step, const cmf_qmat *wg,
                          const cmf_qmat *wu) {
    cortiq_session *s = L->s;
    cq_matmul gate_up = {.p = {{.w = wg, .y = s->g}, {.w = wu, .y = s->u}},
                         .np = 2,
                         .x = s->xn,
                         .n = L->n,
                         .glu = true,
                         .each = L->rows || L->each};
    cq_matmul_after(&s->sched, step, L, &gate_up);
}

/* ---- blocks ----
 * A block maps the chunk's xn to o. Its first argument after L is the per-token step that
 * writes xn (the norm, and before it the previous block's residual add): it runs in the
 * parallel region of the block's first product. Another token mixer (a linear-attention layer
 * such as Gated DeltaNet) is a sibling of attention_block, another FFN (mixture of experts) a
 * sibling of ffn_block; layer_forward picks them per layer. */

/* o = attention(xn): multi-head attention with GQA, RoPE and the layer's sliding window; a
 * q_proj twice as wide gates the result per channel by sigmoid, a g_proj per head or per
 * channel by softplus. */
static void attention_block(const layer_pass *L, cq_token_fn make_input) {
    cortiq_session *s = L->s;
    qkv_after(L, make_input);  /* q, k, v = Wq xn, Wk xn, Wv xn */
    each_token(L, qkv_finish); /* biases, q/k norms, RoPE; k, v into the cache */
    attention(L);              /* att = softmax(scale q K^T) V, per query head */
    if (L->y->attn_gate) each_token(L, attn_gate); /* att *= sigmoid(gate) */
    if (L->y->out_gate) each_token(L, out_gate);   /* att *= softplus(g_proj xn) */
    if (s->stats && !s->task) cq_stats_heads(s, L->l, L->n);
    const cq_layer_task *tm = L->tm;
    if (tm && tm->wo_packed) { /* o = Wo att over the active heads only */
        if (!tm->q_packed) heads_pack(L);
        matmul(L, &tm->wo, s->att, s->o);
        return;
    }
    if (tm && tm->heads_masked) each_token(L, heads_zero);
    matmul(L, &L->y->wo, s->att, s->o); /* o = Wo att */
}

/* o = gated_delta_net(xn): a LinearAttention layer's token mixer and its recurrent state
 * (gdn.h). */
static void gdn_block(const layer_pass *L, cq_token_fn make_input) {
    cortiq_session *s = L->s;
    const cq_gdn_io io = {
        .sched = &s->sched, .st = &s->gdn, .xn = s->xn, .o = s->o, .eps = s->m->eps};
    cq_gdn_block(&io, L->y->gdn, L->n, make_input, L);
}

/* o = ffn(xn): the gated MLP. */
static void ffn_block(const layer_pass *L, cq_token_fn make_input) {
    cortiq_session *s = L->s;
    const cq_layer_task *tm = L->tm;
    if (tm && tm->ffn_packed) { /* the same over the gathered rows and columns (task_mask.h) */
        gate_up_after(L, make_input, &tm->wg, &tm->wu);
        if (tm->n_ffn_zero) each_token(L, ffn_zero);
        matmul(L, &tm->wd, s->g, s->o);
        return;
    }
    gate_up_after(L, make_input, &L->y->wg, &L->y->wu); /* g = act(Wg xn) * (Wu xn) */
    if (s->stats && !tm) cq_stats_ffn(s, L->l, L->n);
    if (tm && tm->ffn_masked) each_token(L, ffn_zero);
    matmul(L, &L->y->wd, s->g, s->o); /* o = Wd g */
}

/* o = moe(xn): the mixture-of-experts FFN of a layer with a router (moe.h). */
static void moe_block(const layer_pass *L, cq_token_fn make_input) {
    cortiq_session *s = L->s;
    const size_t l = (size_t)(L->y - s->m->layers);
    const cq_moe_io io = {.sched = &s->sched,
                          .ms = &s->moe,
                          .xn = s->xn,
                          .o = s->o,
                          .g = s->g,
                          .u = s->u,
                          .hidden = s->m->hidden,
                          .allow = s->expert_allow ? s->expert_allow[l] : NULL,
                          .counts = s->moe.counts ? s->moe.counts[l] : NULL,
                          .each = L->rows != NULL || L->each};
    cq_moe_ffn(&io, L->y->moe, L->n, make_input, L);
}

/* One block over the chunk: token mixer, FFN, their residual adds. */
static void block_forward(const layer_pass *L) {
    if (L->y->gdn) /* o = token_mixer(rmsnorm(x)) */
        gdn_block(L, attn_norm);
    else
        attention_block(L, attn_norm);
    if (L->y->moe) /* x += post_attn_norm(o); o = ffn(rmsnorm(x)) */
        moe_block(L, attn_residual_ffn_norm);
    else
        ffn_block(L, attn_residual_ffn_norm);
    each_token(L, ffn_residual); /* x += post_ffn_norm(o) */
}

/* Layer l for the chunk's n tokens at positions pos0 .. pos0 + n - 1 (rows of s->x). */
static void layer_forward(cortiq_session *s, uint32_t l, size_t n, uint32_t pos0,
                          cortiq_session *const *rows, bool each) {
    const cq_layer_task *tm = s->task ? &s->task->layers[l] : NULL;
    if (tm && tm->off) return; /* gated off by the task mask: the residual passes through */
    const layer_pass L = {.s = s,
                          .y = &s->m->layers[l],
                          .kv = &s->kv[l],
                          .n = n,
                          .pos0 = pos0,
                          .tm = tm,
                          .l = l,
                          .rows = rows,
                          .each = each};
    block_forward(&L);
}

void cq_block_forward(cortiq_session *s, const cq_layer *y, cq_kv_layer *kv, size_t n,
                      uint32_t pos0) {
    /* the per-layer hooks of the main layers (statistics, expert restrictions and counters)
     * are indexed by layer: off for a block outside them */
    cortiq_act_stats *stats = s->stats;
    const uint8_t **allow = s->expert_allow;
    uint64_t **counts = s->moe.counts;
    s->stats = NULL, s->expert_allow = NULL, s->moe.counts = NULL;
    const layer_pass L = {.s = s, .y = y, .kv = kv, .n = n, .pos0 = pos0, .l = s->m->n_layers};
    block_forward(&L);
    s->stats = stats, s->expert_allow = allow, s->moe.counts = counts;
}

/* ---- embeddings and head ---- */

void cq_embed_token(const cortiq_model *m, int32_t token, float *x) {
    /* a tied head's batched-decode copy holds the table too (the same floats; the file's pages
     * of it are handed back, model_lanes.c) */
    const cmf_qmat *e =
        cmf_qmat_lanes_rows(&m->head) && m->head.data == m->embed.data ? &m->head : &m->embed;
    cmf_qmat_dequant_row(e, (uint64_t)token, x);
    if (m->embed_scale != 1.0f)
        for (uint32_t i = 0; i < m->hidden; i++)
            x[i] *= m->embed_scale;
}

static void embed(cortiq_session *s, const int32_t *tokens, size_t n) {
    const cortiq_model *m = s->m;
    for (size_t t = 0; t < n; t++)
        cq_embed_token(m, tokens[t], s->x + t * m->hidden);
}

/* logit scaling and soft-capping of one token's logits */
static void logit_post(const cortiq_model *m, float *logits) {
    if (m->logit_scale != 1.0f)
        for (uint32_t i = 0; i < m->vocab; i++)
            logits[i] *= m->logit_scale;
    if (m->final_softcap > 0)
        for (uint32_t i = 0; i < m->vocab; i++)
            logits[i] = tanhf(logits[i] / m->final_softcap) * m->final_softcap;
}

void cq_head_forward(cortiq_session *s, const float *x, const float *norm, float *logits) {
    cortiq_model *m = s->m;
    cq_rmsnorm(s->xn, x, norm, m->hidden, m->eps);
    cq_matmul_one(&s->sched, &m->head, s->xn, 1, logits);
    logit_post(m, logits);
}

static void head_forward(cortiq_session *s, const float *x, float *logits) {
    cq_head_forward(s, x, s->m->final_norm, logits);
}

cmf_status cq_check_context(const cortiq_model *m, const char *what, uint32_t pos, uint32_t ctx,
                            const int32_t *tokens, size_t n, cmf_err *err) {
    if ((uint64_t)pos + n > ctx)
        return cmf_err_set(err, CMF_E_LIMIT, what, "context full: %u + %zu tokens > ctx %u", pos, n,
                           ctx);
    for (size_t i = 0; i < n; i++)
        if (tokens[i] < 0 || (uint64_t)tokens[i] >= m->embed.rows)
            return cmf_err_set(err, CMF_E_INVALID_ARG, what,
                               "token id %d outside the vocabulary [0, %llu)", tokens[i],
                               (unsigned long long)m->embed.rows);
    return CMF_OK;
}

/* n tokens fit the session's context and are ids of the vocabulary. */
static cmf_status check_tokens(const cortiq_session *s, const int32_t *tokens, size_t n,
                               cmf_err *err) {
    return cq_check_context(s->m, "session", s->pos, s->ctx, tokens, n, err);
}

/* Some MoE layer selects more experts per token (shared included) than one grouped product
 * takes: its tokens cannot run as decode steps inside a batch (moe.h, cq_moe_io.each). */
static bool moe_past_group(const cortiq_model *m) {
    for (uint32_t l = 0; l < m->n_layers; l++) {
        const cq_moe *moe = m->layers[l].moe;
        if (moe && moe->top_k + moe->has_shared > CQ_GROUP_MAX) return true;
    }
    return false;
}

/* The forward pass of cortiq_session_eval. hidden (may be NULL) receives each token's final
 * normed hidden state, the output head's input; pooled (may be NULL) gets their sum added. */
static cmf_status session_eval(cortiq_session *s, const int32_t *tokens, size_t n,
                               float *all_logits, float *hidden, float *pooled, bool each,
                               cmf_err *err) {
    cortiq_model *m = s->m;
    if (n == 0) return CMF_OK;
    cmf_status st = check_tokens(s, tokens, n, err);
    if (st != CMF_OK) return st;
    /* a recurrent state cannot be cut back: checkpoint it where a later truncation is likely
     * to return (the start and the last token of a prompt; gdn.h) */
    bool ckpt = s->gdn.floats && n > 1;
    if (ckpt) cq_gdn_checkpoint(&s->gdn, s->pos);
    /* only a prompt longer than one chunk is cut: decode steps skip the model walk */
    const uint32_t exact = each || n <= CQ_BATCH ? 0 : cortiq_model_exact_chunk(m);
    for (size_t done = 0; done < n;) {
        size_t b = cq_eval_chunk(n - done, exact);
        /* a recurrent state steps token by token; experts past one group batch by expert */
        if (each && (s->gdn.floats || moe_past_group(m))) b = 1;
        if (ckpt && done + b == n && b > 1) b--; /* the last token alone, after a checkpoint */
        if (ckpt && done == n - 1) cq_gdn_checkpoint(&s->gdn, s->pos);
        embed(s, tokens + done, b);
        for (uint32_t l = 0; l < m->n_layers; l++)
            layer_forward(s, l, b, s->pos, NULL, each);
        if (all_logits)
            for (size_t t = 0; t < b; t++)
                head_forward(s, s->x + t * m->hidden, all_logits + (done + t) * m->vocab);
        if (hidden)
            for (size_t t = 0; t < b; t++)
                cq_rmsnorm(hidden + (done + t) * m->hidden, s->x + t * m->hidden, m->final_norm,
                           m->hidden, m->eps);
        for (size_t t = 0; pooled && t < b; t++) {
            cq_rmsnorm(s->xn, s->x + t * m->hidden, m->final_norm, m->hidden, m->eps);
            for (uint32_t i = 0; i < m->hidden; i++)
                pooled[i] += s->xn[i];
        }
        s->pos += (uint32_t)b;
        if (s->stats && !s->task) s->stats->tokens += b;
        done += b;
        if (done == n) {
            if (all_logits)
                memcpy(s->logits, all_logits + (n - 1) * m->vocab, m->vocab * sizeof(float));
            else
                head_forward(s, s->x + (b - 1) * m->hidden, s->logits);
        }
    }
    return CMF_OK;
}

cmf_status cortiq_session_eval(cortiq_session *s, const int32_t *tokens, size_t n,
                               float *all_logits, cmf_err *err) {
    return session_eval(s, tokens, n, all_logits, NULL, NULL, false, err);
}

cmf_status cortiq_session_eval_hidden(cortiq_session *s, const int32_t *tokens, size_t n,
                                      float *hidden, cmf_err *err) {
    if (!hidden && n)
        return cmf_err_set(err, CMF_E_INVALID_ARG, "session", "hidden is NULL for %zu tokens", n);
    return session_eval(s, tokens, n, NULL, hidden, NULL, false, err);
}

cmf_status cq_session_probe(cortiq_session *s, const int32_t *tokens, size_t n, uint32_t last,
                            double *sum, cmf_err *err) {
    cortiq_model *m = s->m;
    if (last >= m->n_layers)
        return cmf_err_set(err, CMF_E_INVALID_ARG, "session", "layer %u: the model has %u", last,
                           m->n_layers);
    cmf_status st = check_tokens(s, tokens, n, err);
    if (st != CMF_OK) return st;
    /* chunked as cortiq_session_eval */
    const uint32_t exact = n <= CQ_BATCH ? 0 : cortiq_model_exact_chunk(m);
    for (size_t done = 0; done < n;) {
        size_t b = cq_eval_chunk(n - done, exact);
        embed(s, tokens + done, b);
        for (uint32_t l = 0; l <= last; l++)
            layer_forward(s, l, b, s->pos, NULL, false);
        for (size_t t = 0; t < b; t++)
            for (uint32_t i = 0; i < m->hidden; i++)
                sum[i] += s->x[t * m->hidden + i];
        s->pos += (uint32_t)b;
        done += b;
    }
    return CMF_OK;
}

cmf_status cortiq_session_eval_pooled(cortiq_session *s, const int32_t *tokens, size_t n,
                                      float *pooled, cmf_err *err) {
    return session_eval(s, tokens, n, NULL, NULL, pooled, false, err);
}

cmf_status cq_session_eval_spec(cortiq_session *s, const int32_t *tokens, size_t n,
                                float *all_logits, float *hidden, cmf_err *err) {
    return session_eval(s, tokens, n, all_logits, hidden, NULL, true, err);
}

/* The final norm of token t of a batched decode step (rows of the lending session). */
static void final_norm_row(const void *ctx, size_t t) {
    const cortiq_session *s = ctx;
    const cortiq_model *m = s->m;
    cq_rmsnorm(s->xn + t * m->hidden, s->x + t * m->hidden, m->final_norm, m->hidden, m->eps);
}

cmf_status cortiq_session_eval_batch(cortiq_session *const *sessions, const int32_t *tokens,
                                     size_t n, cmf_err *err) {
    if (n == 0) return CMF_OK;
    if (n == 1) return cortiq_session_eval(sessions[0], tokens, 1, NULL, err);
    cortiq_session *s = sessions[0];
    cortiq_model *m = s->m;
    if (n > CQ_DECODE_MAX)
        return cmf_err_set(err, CMF_E_INVALID_ARG, "session",
                           "batched decode of %zu sessions: "
                           "at most %d",
                           n, CQ_DECODE_MAX);
    for (uint32_t l = 0; l < m->n_layers; l++) {
        const cq_layer *y = &m->layers[l];
        if (y->gdn || y->attn_gate)
            return cmf_err_set(err, CMF_E_UNSUPPORTED, "session",
                               "batched decode of a model with %s layers (layer %u)",
                               y->gdn ? "linear-attention" : "gated-attention", l);
        if (y->moe && y->moe->top_k + y->moe->has_shared > CQ_GROUP_MAX)
            return cmf_err_set(err, CMF_E_UNSUPPORTED, "session",
                               "batched decode of a mixture of experts with top_k %u%s > %d "
                               "(layer %u)",
                               y->moe->top_k, y->moe->has_shared ? " + a shared expert" : "",
                               CQ_GROUP_MAX, l);
    }
    for (size_t t = 0; t < n; t++) {
        const cortiq_session *r = sessions[t];
        if (r->m != m)
            return cmf_err_set(err, CMF_E_INVALID_ARG, "session",
                               "batched decode: session %zu belongs to another model", t);
        for (size_t u = 0; u < t; u++)
            if (sessions[u] == r)
                return cmf_err_set(err, CMF_E_INVALID_ARG, "session",
                                   "batched decode: session %zu is also session %zu", t, u);
        if (r->task) /* its gathered matrices are its own: evaluate it alone */
            return cmf_err_set(err, CMF_E_UNSUPPORTED, "session",
                               "batched decode of a session running task '%s'",
                               r->task->mask->name);
        if (r->expert_allow || r->moe.counts) /* routing restricted or counted per session */
            return cmf_err_set(err, CMF_E_UNSUPPORTED, "session",
                               "batched decode of a session with %s",
                               r->expert_allow ? "an expert restriction" : "route statistics");
        if (r->pos + 1 > r->ctx)
            return cmf_err_set(err, CMF_E_LIMIT, "session", "context full: %u + 1 tokens > ctx %u",
                               r->pos, r->ctx);
        if (tokens[t] < 0 || (uint32_t)tokens[t] >= m->embed.rows)
            return cmf_err_set(err, CMF_E_INVALID_ARG, "session",
                               "token id %d outside the vocabulary [0, %llu)", tokens[t],
                               (unsigned long long)m->embed.rows);
    }
    float *logits = malloc(n * (size_t)m->vocab * sizeof *logits);
    if (!logits) return cmf_err_set(err, CMF_E_NOMEM, "session", "batched decode logits");
    embed(s, tokens, n);
    for (uint32_t l = 0; l < m->n_layers; l++)
        layer_forward(s, l, n, 0, sessions, false);
    cq_each_token(&s->sched, n, final_norm_row, s);
    cq_matmul head = {
        .p = {{.w = &m->head, .y = logits}}, .np = 1, .x = s->xn, .n = n, .each = true};
    cq_matmul_after(&s->sched, NULL, NULL, &head);
    for (size_t t = 0; t < n; t++) {
        float *row = logits + t * m->vocab;
        logit_post(m, row);
        memcpy(sessions[t]->logits, row, m->vocab * sizeof *row);
        sessions[t]->pos++;
    }
    free(logits);
    return CMF_OK;
}
