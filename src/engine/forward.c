/* forward.c - sessions and the forward pass: embeddings, per layer RMSNorm -> attention (GQA,
 * RoPE, q/k norms, sliding window) -> MLP, final norm and head. Matrix products go through
 * cortiq/kernels.h, split by rows over the model's thread pool; a batch of tokens (prefill)
 * uses the batched kernels so each weight is decoded once per batch. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/attn_ops.h"
#include "engine/model.h"

#define CQ_BATCH 64 /* tokens per prefill chunk */

typedef struct kv_layer {
    float *k, *v;  /* [slots][n_kv * head_dim] */
    uint32_t slots; /* ctx, or window + CQ_BATCH for sliding layers (a ring) */
} kv_layer;

struct cortiq_session {
    cortiq_model *m;
    uint32_t ctx, pos;
    kv_layer *kv;
    /* scratch for one chunk of up to CQ_BATCH tokens */
    float *x, *xn, *q, *k, *v, *att, *o, *g, *u, *scores, *logits;
    uint32_t max_ffn, max_qd;
};

cmf_status cortiq_session_create(cortiq_model *m, uint32_t ctx, cortiq_session **out, cmf_err *err) {
    *out = NULL;
    if (ctx < 1) return cmf_err_set(err, CMF_E_INVALID_ARG, "session", "ctx must be >= 1");
    if (m->max_pos && ctx > m->max_pos) ctx = m->max_pos;
    cortiq_session *s = calloc(1, sizeof *s);
    if (!s) return cmf_err_set(err, CMF_E_NOMEM, "session", "state");
    s->m = m;
    s->ctx = ctx;
    for (uint32_t l = 0; l < m->n_layers; l++) {
        if (m->layers[l].ffn > s->max_ffn) s->max_ffn = m->layers[l].ffn;
        uint32_t qd = m->layers[l].n_heads * m->head_dim;
        if (qd > s->max_qd) s->max_qd = qd;
    }
    size_t kvd = (size_t)m->n_kv * m->head_dim, B = CQ_BATCH;
    s->kv = calloc(m->n_layers, sizeof *s->kv);
    int ok = s->kv != NULL;
    for (uint32_t l = 0; ok && l < m->n_layers; l++) {
        kv_layer *c = &s->kv[l];
        c->slots = ctx;
        if (m->layers[l].sliding && (uint64_t)m->sliding_window + B < ctx) c->slots = m->sliding_window + (uint32_t)B;
        c->k = malloc((size_t)c->slots * kvd * sizeof(float));
        c->v = malloc((size_t)c->slots * kvd * sizeof(float));
        ok = c->k && c->v;
    }
    size_t H = m->hidden;
    s->x = malloc(B * H * sizeof(float));
    s->xn = malloc(B * H * sizeof(float));
    s->o = malloc(B * H * sizeof(float));
    s->q = malloc(B * s->max_qd * sizeof(float));
    s->att = malloc(B * s->max_qd * sizeof(float));
    s->k = malloc(B * kvd * sizeof(float));
    s->v = malloc(B * kvd * sizeof(float));
    s->g = malloc(B * s->max_ffn * sizeof(float));
    s->u = malloc(B * s->max_ffn * sizeof(float));
    s->scores = malloc((size_t)cq_pool_size(m->pool) * ctx * sizeof(float));
    s->logits = malloc((size_t)m->vocab * sizeof(float));
    if (!ok || !s->x || !s->xn || !s->o || !s->q || !s->att || !s->k || !s->v || !s->g || !s->u || !s->scores ||
        !s->logits) {
        cortiq_session_free(s);
        return cmf_err_set(err, CMF_E_NOMEM, "session", "KV cache for %u positions", ctx);
    }
    *out = s;
    return CMF_OK;
}

void cortiq_session_free(cortiq_session *s) {
    if (!s) return;
    for (uint32_t l = 0; s->kv && l < s->m->n_layers; l++) {
        free(s->kv[l].k);
        free(s->kv[l].v);
    }
    free(s->kv);
    free(s->x), free(s->xn), free(s->o), free(s->q), free(s->att), free(s->k), free(s->v);
    free(s->g), free(s->u), free(s->scores), free(s->logits);
    free(s);
}

void cortiq_session_reset(cortiq_session *s) { s->pos = 0; }
uint32_t cortiq_session_pos(const cortiq_session *s) { return s->pos; }
uint32_t cortiq_session_ctx(const cortiq_session *s) { return s->ctx; }
const float *cortiq_session_logits(const cortiq_session *s) { return s->logits; }
void cortiq_session_truncate(cortiq_session *s, uint32_t pos) {
    if (pos < s->pos) s->pos = pos;
}

/* ---- elementwise ops ---- */
static void rmsnorm(float *out, const float *x, const float *w, uint32_t n, float eps) {
    double ss = 0;
    for (uint32_t i = 0; i < n; i++) ss += (double)x[i] * x[i];
    float r = 1.0f / sqrtf((float)(ss / n) + eps);
    for (uint32_t i = 0; i < n; i++) out[i] = x[i] * r * w[i];
}

static float gelu_tanh(float x) {
    const float c = 0.7978845608028654f; /* sqrt(2/pi) */
    return 0.5f * x * (1.0f + tanhf(c * (x + 0.044715f * x * x * x)));
}

static void rope(float *v, uint32_t n_heads, uint32_t head_dim, uint32_t rot, const float *inv, float mscale, uint32_t pos) {
    uint32_t half = rot / 2;
    for (uint32_t i = 0; i < half; i++) {
        float f = (float)pos * inv[i];
        float c = cosf(f) * mscale, s = sinf(f) * mscale;
        for (uint32_t h = 0; h < n_heads; h++) {
            float *x = v + (size_t)h * head_dim;
            float a = x[i], b = x[i + half];
            x[i] = a * c - b * s;
            x[i + half] = b * c + a * s;
        }
    }
}

/* ---- parallel pieces ---- */
/* Up to three matrix products in one parallel region (q/k/v share their input, as do gate/up),
 * each split over the threads by rows; with glu set, parts 0 and 1 are gate and up and each
 * thread applies the activation to the rows it computed, so the MLP input needs no extra
 * round trip. */
typedef struct mm_part {
    const cmf_qmat *w;
    float *Y;
    size_t ldy;
} mm_part;

typedef struct mm_job {
    mm_part p[3];
    unsigned np;
    const float *X;
    size_t n;
    unsigned flags;
    int glu;
    cq_act act;
} mm_job;

static float gelu_tanh(float x);

static void rows_of(uint64_t rows, unsigned tid, unsigned nt, uint64_t *r0, uint64_t *r1) {
    /* split on multiples of 16 rows so SIMD tiles stay whole */
    uint64_t per = (rows + nt - 1) / nt;
    per = (per + 15) / 16 * 16;
    *r0 = (uint64_t)tid * per;
    *r1 = *r0 + per < rows ? *r0 + per : rows;
}

static void mm_task(void *ctx, unsigned tid, unsigned nt) {
    mm_job *j = ctx;
    for (unsigned k = 0; k < j->np; k++) {
        const mm_part *p = &j->p[k];
        uint64_t r0, r1;
        rows_of(p->w->rows, tid, nt, &r0, &r1);
        if (r0 >= r1) continue;
        if (j->flags) cmf_matmul_ex(p->w, j->X, j->n, (size_t)p->w->cols, p->Y + r0, p->ldy, r0, r1, j->flags);
        else if (j->n == 1) cmf_matvec(p->w, j->X, p->Y + r0, r0, r1);
        else cmf_matmul(p->w, j->X, j->n, p->Y + r0, p->ldy, r0, r1);
    }
    if (!j->glu) return;
    uint64_t r0, r1;
    rows_of(j->p[0].w->rows, tid, nt, &r0, &r1);
    for (size_t t = 0; t < j->n; t++) {
        float *g = j->p[0].Y + t * j->p[0].ldy, *u = j->p[1].Y + t * j->p[1].ldy;
        for (uint64_t r = r0; r < r1; r++) {
            float v = g[r];
            v = j->act == CQ_ACT_SILU ? v / (1.0f + expf(-v)) : gelu_tanh(v);
            g[r] = v * u[r];
        }
    }
}

static void matmul(cortiq_model *m, const cmf_qmat *w, const float *X, size_t n, float *Y, size_t ldy) {
    mm_job j = {{{w, Y, ldy}}, 1, X, n, m->kflags, 0, m->act};
    cq_pool_run(m->pool, mm_task, &j);
}

typedef struct attn_job {
    cortiq_session *s;
    const cq_layer *y;
    const kv_layer *c;
    size_t n;
    uint32_t pos0;
    const cq_attn_ops *ops;
} attn_job;

static void attn_task(void *ctx, unsigned tid, unsigned nt) {
    attn_job *j = ctx;
    cortiq_model *m = j->s->m;
    const cq_layer *y = j->y;
    const cq_attn_ops *ops = j->ops;
    uint32_t hd = m->head_dim, nh = y->n_heads, group = nh / m->n_kv, slots = j->c->slots;
    size_t kvd = (size_t)m->n_kv * hd, qd = (size_t)nh * hd;
    float *sc = j->s->scores + (size_t)tid * j->s->ctx;
    size_t total = j->n * nh;
    for (size_t w = tid; w < total; w += nt) {
        size_t t = w / nh;
        uint32_t h = (uint32_t)(w % nh), kvh = h / group;
        uint32_t p = j->pos0 + (uint32_t)t;
        uint32_t lo = 0;
        if (y->sliding && p + 1 > m->sliding_window) lo = p + 1 - m->sliding_window;
        uint32_t cnt = p + 1 - lo, s0 = lo % slots;
        /* the keys lo..p sit in at most two contiguous runs of the ring */
        uint32_t run1 = cnt < slots - s0 ? cnt : slots - s0, run2 = cnt - run1;
        const float *q = j->s->q + t * qd + (size_t)h * hd;
        const float *K = j->c->k + (size_t)kvh * hd, *V = j->c->v + (size_t)kvh * hd;
        ops->dots(q, K + (size_t)s0 * kvd, kvd, run1, hd, sc);
        if (run2) ops->dots(q, K, kvd, run2, hd, sc + run1);
        float mx = -INFINITY;
        for (uint32_t k = 0; k < cnt; k++) {
            float d = sc[k] * m->attn_scale;
            if (m->attn_softcap > 0) d = tanhf(d / m->attn_softcap) * m->attn_softcap;
            sc[k] = d;
            if (d > mx) mx = d;
        }
        float sum = 0;
        for (uint32_t k = 0; k < cnt; k++) sum += sc[k] = expf(sc[k] - mx);
        float inv = 1.0f / sum;
        for (uint32_t k = 0; k < cnt; k++) sc[k] *= inv;
        float *out = j->s->att + t * qd + (size_t)h * hd;
        memset(out, 0, hd * sizeof(float));
        ops->axpys(out, sc, V + (size_t)s0 * kvd, kvd, run1, hd);
        if (run2) ops->axpys(out, sc + run1, V, kvd, run2, hd);
    }
}

static void add_bias(float *x, const float *b, size_t n, size_t d) {
    if (!b) return;
    for (size_t t = 0; t < n; t++)
        for (size_t i = 0; i < d; i++) x[t * d + i] += b[i];
}

static void layer_forward(cortiq_session *s, uint32_t l, size_t n, uint32_t pos0) {
    cortiq_model *m = s->m;
    const cq_layer *y = &m->layers[l];
    kv_layer *c = &s->kv[l];
    uint32_t H = m->hidden, hd = m->head_dim;
    size_t qd = (size_t)y->n_heads * hd, kvd = (size_t)m->n_kv * hd;
    for (size_t t = 0; t < n; t++) rmsnorm(s->xn + t * H, s->x + t * H, y->attn_norm, H, m->eps);
    mm_job qkv = {{{&y->wq, s->q, qd}, {&y->wk, s->k, kvd}, {&y->wv, s->v, kvd}}, 3, s->xn, n, m->kflags, 0, m->act};
    cq_pool_run(m->pool, mm_task, &qkv);
    add_bias(s->q, y->bq, n, qd);
    add_bias(s->k, y->bk, n, kvd);
    add_bias(s->v, y->bv, n, kvd);
    for (size_t t = 0; t < n; t++) {
        float *q = s->q + t * qd, *k = s->k + t * kvd;
        if (y->q_norm)
            for (uint32_t h = 0; h < y->n_heads; h++) rmsnorm(q + h * hd, q + h * hd, y->q_norm, hd, m->eps);
        if (y->k_norm)
            for (uint32_t h = 0; h < m->n_kv; h++) rmsnorm(k + h * hd, k + h * hd, y->k_norm, hd, m->eps);
        rope(q, y->n_heads, hd, y->rot_dim, y->inv_freq, y->rope_mscale, pos0 + (uint32_t)t);
        rope(k, m->n_kv, hd, y->rot_dim, y->inv_freq, y->rope_mscale, pos0 + (uint32_t)t);
        uint32_t slot = (pos0 + (uint32_t)t) % c->slots;
        memcpy(c->k + (size_t)slot * kvd, k, kvd * sizeof(float));
        memcpy(c->v + (size_t)slot * kvd, s->v + t * kvd, kvd * sizeof(float));
    }
    attn_job aj = {s, y, c, n, pos0, cq_attn_ops_get()};
    cq_pool_run(m->pool, attn_task, &aj);
    matmul(m, &y->wo, s->att, n, s->o, H);
    for (size_t t = 0; t < n; t++) {
        float *o = s->o + t * H, *x = s->x + t * H;
        if (y->post_attn_norm) rmsnorm(o, o, y->post_attn_norm, H, m->eps);
        for (uint32_t i = 0; i < H; i++) x[i] += o[i];
        rmsnorm(s->xn + t * H, x, y->ffn_norm, H, m->eps);
    }
    mm_job gu = {{{&y->wg, s->g, y->ffn}, {&y->wu, s->u, y->ffn}}, 2, s->xn, n, m->kflags, 1, m->act};
    cq_pool_run(m->pool, mm_task, &gu);
    matmul(m, &y->wd, s->g, n, s->o, H);
    for (size_t t = 0; t < n; t++) {
        float *o = s->o + t * H, *x = s->x + t * H;
        if (y->post_ffn_norm) rmsnorm(o, o, y->post_ffn_norm, H, m->eps);
        for (uint32_t i = 0; i < H; i++) x[i] += o[i];
    }
}

static void head_forward(cortiq_session *s, const float *x, float *logits) {
    cortiq_model *m = s->m;
    rmsnorm(s->xn, x, m->final_norm, m->hidden, m->eps);
    matmul(m, &m->head, s->xn, 1, logits, m->vocab);
    if (m->final_softcap > 0)
        for (uint32_t i = 0; i < m->vocab; i++) logits[i] = tanhf(logits[i] / m->final_softcap) * m->final_softcap;
}

cmf_status cortiq_session_eval(cortiq_session *s, const int32_t *tokens, size_t n, float *all_logits, cmf_err *err) {
    cortiq_model *m = s->m;
    if (n == 0) return CMF_OK;
    if ((uint64_t)s->pos + n > s->ctx)
        return cmf_err_set(err, CMF_E_LIMIT, "session", "context full: %u + %zu tokens > ctx %u", s->pos, n, s->ctx);
    for (size_t i = 0; i < n; i++)
        if (tokens[i] < 0 || (uint32_t)tokens[i] >= m->embed.rows)
            return cmf_err_set(err, CMF_E_INVALID_ARG, "session", "token id %d outside the vocabulary [0, %llu)",
                               tokens[i], (unsigned long long)m->embed.rows);
    for (size_t done = 0; done < n;) {
        size_t b = n - done < CQ_BATCH ? n - done : CQ_BATCH;
        for (size_t t = 0; t < b; t++) {
            float *x = s->x + t * m->hidden;
            cmf_qmat_dequant_row(&m->embed, (uint64_t)tokens[done + t], x);
            if (m->embed_scale != 1.0f)
                for (uint32_t i = 0; i < m->hidden; i++) x[i] *= m->embed_scale;
        }
        for (uint32_t l = 0; l < m->n_layers; l++) layer_forward(s, l, b, s->pos);
        if (all_logits)
            for (size_t t = 0; t < b; t++) head_forward(s, s->x + t * m->hidden, all_logits + (done + t) * m->vocab);
        s->pos += (uint32_t)b;
        done += b;
        if (done == n) {
            if (all_logits) memcpy(s->logits, all_logits + (n - 1) * m->vocab, m->vocab * sizeof(float));
            else head_forward(s, s->x + (b - 1) * m->hidden, s->logits);
        }
    }
    return CMF_OK;
}
