/* moe.c - the mixture-of-experts FFN (moe.h): routing, tokens grouped by expert, each selected
 * expert's gated MLP as one batched product over its tokens, the weighted sum, the shared
 * expert. */
#include "engine/moe.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

uint32_t cq_moe_max_ffn(const cortiq_model *m) {
    uint32_t w = 0;
    for (uint32_t l = 0; l < m->n_layers; l++) {
        const cq_moe *moe = m->layers[l].moe;
        if (!moe) continue;
        for (uint32_t e = 0; e < moe->n_experts; e++)
            if (moe->experts[e].ffn > w) w = moe->experts[e].ffn;
        if (moe->has_shared && moe->shared.ffn > w) w = moe->shared.ffn;
    }
    return w;
}

bool cq_moe_scratch_init(cq_moe_scratch *ms, const cortiq_model *m, size_t batch) {
    memset(ms, 0, sizeof *ms);
    for (uint32_t l = 0; l < m->n_layers; l++) {
        const cq_moe *moe = m->layers[l].moe;
        if (!moe) continue;
        if (moe->n_experts > ms->max_experts) ms->max_experts = moe->n_experts;
        if (moe->top_k > ms->max_k) ms->max_k = moe->top_k;
    }
    if (!ms->max_experts) return true; /* a dense model */
    size_t E = ms->max_experts, K = ms->max_k, H = m->hidden;
    ms->logits = malloc(batch * E * sizeof(float));
    ms->sgate = malloc(batch * sizeof(float));
    ms->sel = malloc(batch * K * sizeof(uint32_t));
    ms->w = malloc(batch * K * sizeof(float));
    ms->count = malloc(E * sizeof(uint32_t));
    ms->start = malloc((E + 1) * sizeof(uint32_t));
    ms->order = malloc(batch * K * sizeof(uint32_t));
    ms->xe = malloc(batch * H * sizeof(float));
    ms->ye = malloc(batch * H * sizeof(float));
    return ms->logits && ms->sgate && ms->sel && ms->w && ms->count && ms->start && ms->order &&
           ms->xe && ms->ye;
}

void cq_moe_scratch_free(cq_moe_scratch *ms) {
    free(ms->logits), free(ms->sgate), free(ms->sel), free(ms->w), free(ms->count);
    free(ms->start), free(ms->order), free(ms->xe), free(ms->ye);
    free(ms->allow_rows), free(ms->allow_bits), free(ms->counts), free(ms->count_store);
    memset(ms, 0, sizeof *ms);
}

static float sigmoid(float v) {
    return 1.0f / (1.0f + expf(-v));
}

static bool routable(const uint8_t *allow, uint32_t e) {
    return !allow || ((allow[e >> 3] >> (e & 7)) & 1);
}

uint32_t cq_moe_routable(const cq_moe *moe, const uint8_t *allow) {
    uint32_t n = 0;
    for (uint32_t e = 0; e < moe->n_experts; e++)
        n += routable(allow, e);
    return n;
}

/* One token's routing over the routable experts: r (the router logits, overwritten by the
 * scores) -> the K experts sel[] and their weights w[] (K <= the routable count). Without a
 * restriction every expert is routable and this is the plain rule of spec §2.2; with one, the
 * softmax runs over the routable logits only, in the same order, so a layer restricted to a
 * set computes exactly what a file holding only that set (its router rows gathered) does. */
static void route(const cq_moe *moe, const uint8_t *allow, uint32_t K, float *r, uint32_t *sel,
                  float *w) {
    const uint32_t E = moe->n_experts;
    if (moe->router_sigmoid) {
        for (uint32_t e = 0; e < E; e++)
            r[e] = sigmoid(r[e]);
    } else { /* softmax over the routable experts */
        float mx = -INFINITY;
        for (uint32_t e = 0; e < E; e++)
            if (routable(allow, e) && r[e] > mx) mx = r[e];
        double sum = 0;
        for (uint32_t e = 0; e < E; e++)
            if (routable(allow, e))
                sum += r[e] = expf(r[e] - mx);
            else
                r[e] = 0;
        for (uint32_t e = 0; e < E; e++)
            r[e] = (float)(r[e] / sum);
    }
    /* top K by score + bias; strict > keeps the lower index on ties */
    for (uint32_t j = 0; j < K; j++) {
        int64_t best = -1;
        float bv = 0;
        for (uint32_t e = 0; e < E; e++) {
            bool taken = !routable(allow, e);
            for (uint32_t i = 0; i < j && !taken; i++)
                taken = sel[i] == e;
            if (taken) continue;
            float v = r[e] + (moe->expert_bias ? moe->expert_bias[e] : 0.0f);
            if (best < 0 || v > bv) best = e, bv = v;
        }
        sel[j] = (uint32_t)best;
        w[j] = r[best]; /* the bias chose; the weight is the score itself */
    }
    if (moe->norm_topk_prob) {
        float sum = 0;
        for (uint32_t j = 0; j < K; j++)
            sum += w[j];
        if (sum > 0)
            for (uint32_t j = 0; j < K; j++)
                w[j] /= sum;
    }
    if (moe->routed_scaling != 1.0f)
        for (uint32_t j = 0; j < K; j++)
            w[j] *= moe->routed_scaling;
}

/* y = Wd (act(Wg x) * (Wu x)) for c rows of x; with io->each the rows are independent decode
 * steps, each computed exactly as it would be alone. */
static void expert_run(const cq_moe_io *io, const cq_expert *ex, const float *x, size_t c,
                       float *y) {
    bool each = io->each && c > 1;
    cq_matmul gate_up = {.p = {{.w = &ex->wg, .y = io->g}, {.w = &ex->wu, .y = io->u}},
                         .np = 2,
                         .x = x,
                         .n = c,
                         .glu = true,
                         .each = each};
    cq_matmul_after(io->sched, NULL, NULL, &gate_up);
    cq_matmul down = {.p = {{.w = &ex->wd, .y = y}}, .np = 1, .x = io->g, .n = c, .each = each};
    cq_matmul_after(io->sched, NULL, NULL, &down);
}

/* order[] lists the (token, slot) pairs t * K + j grouped by expert, in token order within an
 * expert; start[e] .. start[e + 1] is expert e's range. */
static void group_by_expert(cq_moe_scratch *ms, uint32_t E, uint32_t K, size_t n) {
    memset(ms->count, 0, E * sizeof *ms->count);
    for (size_t i = 0; i < n * K; i++)
        ms->count[ms->sel[i]]++;
    ms->start[0] = 0;
    for (uint32_t e = 0; e < E; e++)
        ms->start[e + 1] = ms->start[e] + ms->count[e];
    memset(ms->count, 0, E * sizeof *ms->count); /* now: tokens placed so far */
    for (size_t i = 0; i < n * K; i++) {
        uint32_t e = ms->sel[i];
        ms->order[ms->start[e] + ms->count[e]++] = (uint32_t)i;
    }
}

/* One token, row t (decode, or one step of a batched decode): the k selected experts' and the
 * shared expert's gate/up products as one parallel region and their downs as another
 * (cq_matmul_group), instead of two small regions per expert; the weighted sum in expert-index
 * order, as the batch path adds them, then the shared expert's. */
static void decode_experts(const cq_moe_io *io, const cq_moe *moe, uint32_t K, size_t t) {
    cq_moe_scratch *ms = io->ms;
    const size_t H = io->hidden;
    const uint32_t *sel = ms->sel + t * K;
    const float *wt = ms->w + t * K;
    float *o = io->o + t * H;
    const uint32_t P = K + (moe->has_shared ? 1 : 0); /* products; the shared expert last */
    uint32_t idx[CQ_GROUP_MAX];
    for (uint32_t j = 0; j < K; j++) { /* slots by expert index (insertion sort, K is small) */
        uint32_t i = j;
        for (; i > 0 && sel[idx[i - 1]] > sel[j]; i--)
            idx[i] = idx[i - 1];
        idx[i] = j;
    }
    const cq_expert *ex[CQ_GROUP_MAX];
    for (uint32_t i = 0; i < K; i++)
        ex[i] = &moe->experts[sel[idx[i]]];
    if (P > K) ex[K] = &moe->shared;
    cq_matmul mm[CQ_GROUP_MAX] = {0};
    size_t goff[CQ_GROUP_MAX], off = 0;
    for (uint32_t i = 0; i < P; i++) {
        mm[i] = (cq_matmul){
            .p = {{.w = &ex[i]->wg, .y = io->g + off}, {.w = &ex[i]->wu, .y = io->u + off}},
            .np = 2,
            .x = io->xn + t * H,
            .n = 1,
            .glu = true};
        goff[i] = off;
        off += ex[i]->ffn;
    }
    cq_matmul_group(io->sched, mm, P);
    for (uint32_t i = 0; i < P; i++)
        mm[i] = (cq_matmul){
            .p = {{.w = &ex[i]->wd, .y = ms->ye + i * H}}, .np = 1, .x = io->g + goff[i], .n = 1};
    cq_matmul_group(io->sched, mm, P);
    memset(o, 0, H * sizeof(float));
    for (uint32_t i = 0; i < P; i++) {
        float w = i < K ? wt[idx[i]] : moe->has_shared_gate ? sigmoid(ms->sgate[t]) : 1.0f;
        const float *y = ms->ye + i * H;
        for (size_t k = 0; k < H; k++)
            o[k] += w * y[k];
    }
}

/* A batch: the tokens grouped by expert, each selected expert in index order over the rows
 * of its tokens, so its weights are decoded once per batch. */
static void batch_experts(const cq_moe_io *io, const cq_moe *moe, uint32_t K, size_t n) {
    cq_moe_scratch *ms = io->ms;
    const uint32_t E = moe->n_experts;
    const size_t H = io->hidden;
    group_by_expert(ms, E, K, n);
    memset(io->o, 0, n * H * sizeof(float));
    for (uint32_t e = 0; e < E; e++) {
        uint32_t c = ms->start[e + 1] - ms->start[e];
        if (!c) continue; /* never touched */
        const uint32_t *slots = ms->order + ms->start[e];
        for (uint32_t i = 0; i < c; i++)
            memcpy(ms->xe + i * H, io->xn + (slots[i] / K) * H, H * sizeof(float));
        expert_run(io, &moe->experts[e], ms->xe, c, ms->ye);
        for (uint32_t i = 0; i < c; i++) {
            float w = ms->w[slots[i]], *o = io->o + (slots[i] / K) * H;
            const float *y = ms->ye + i * H;
            for (size_t k = 0; k < H; k++)
                o[k] += w * y[k];
        }
    }
}

void cq_moe_ffn(const cq_moe_io *io, const cq_moe *moe, size_t n, cq_token_fn make_input,
                const void *ctx) {
    cq_moe_scratch *ms = io->ms;
    const uint32_t E = moe->n_experts;
    uint32_t K = moe->top_k;
    if (io->allow) { /* top_k clamps to the routable count, as it does to the experts present */
        uint32_t n_routable = cq_moe_routable(moe, io->allow);
        if (n_routable < K) K = n_routable;
    }
    const size_t H = io->hidden;
    /* make_input, then the router logits (and the shared expert's gate) in one region */
    cq_matmul router = {.p = {{.w = &moe->router, .y = ms->logits}},
                        .np = 1,
                        .x = io->xn,
                        .n = n,
                        .each = io->each};
    if (moe->has_shared_gate)
        router.p[router.np++] = (cq_product){.w = &moe->shared_gate, .y = ms->sgate};
    cq_matmul_after(io->sched, make_input, ctx, &router);
    for (size_t t = 0; t < n; t++)
        route(moe, io->allow, K, ms->logits + t * E, ms->sel + t * K, ms->w + t * K);
    if (io->counts)
        for (size_t i = 0; i < n * K; i++)
            io->counts[ms->sel[i]]++;
    if ((n == 1 || io->each) && K + moe->has_shared <= CQ_GROUP_MAX) {
        for (size_t t = 0; t < n; t++) /* each token as it would run alone */
            decode_experts(io, moe, K, t);
        return;
    }
    batch_experts(io, moe, K, n);
    if (!moe->has_shared) return;
    expert_run(io, &moe->shared, io->xn, n, ms->ye);
    for (size_t t = 0; t < n; t++) {
        float g = moe->has_shared_gate ? sigmoid(ms->sgate[t]) : 1.0f, *o = io->o + t * H;
        const float *y = ms->ye + t * H;
        for (size_t k = 0; k < H; k++)
            o[k] += g * y[k];
    }
}
