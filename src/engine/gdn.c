/* gdn.c - the Gated DeltaNet block (gdn.h): projections on the pool, then per token the conv,
 * the q/k normalisation and the gates (split by tokens), the delta rule (split by value heads:
 * chunked or token after token), the gated output norm (by tokens) and the output product. */
#include "engine/gdn.h"
#include "engine/gdn_chunk.h"
#include "engine/gdn_step.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- the session's state ---- */

bool cq_gdn_state_init(cq_gdn_state *st, const cortiq_model *m, size_t batch) {
    memset(st, 0, sizeof *st);
    for (uint32_t l = 0; l < m->n_layers; l++) {
        const cq_gdn *g = m->layers[l].gdn;
        if (!g) continue;
        st->floats += cq_gdn_state_floats(g); /* layer l's at g->state_off (gdn_load.c) */
        size_t p1 = g->fused ? (size_t)g->conv_dim + g->value_dim : g->conv_dim;
        size_t p2 = g->fused ? 2 * (size_t)g->nv : 0;
        if (p1 > st->proj_w) st->proj_w = p1;
        if (p2 > st->proj2_w) st->proj2_w = p2;
        if (g->conv_dim > st->max_conv) st->max_conv = g->conv_dim;
        if (g->value_dim > st->max_value) st->max_value = g->value_dim;
        if (g->nv > st->max_nv) st->max_nv = g->nv;
        size_t cw = cq_gdn_chunk_work(g->dk, g->dv);
        if (cw > st->chunk_floats) st->chunk_floats = cw;
    }
    if (!st->floats) return true;
    st->chunk_min = CQ_GDN_CHUNK_MIN;
    const char *env = getenv("CORTIQ_GDN_CHUNK_MIN"); /* for comparing the two forms */
    if (env && *env) st->chunk_min = strtoull(env, NULL, 10);
    if (st->chunk_min < 1) st->chunk_min = 1;
    bool ok = (st->live = calloc(st->floats, sizeof(float))) != NULL;
    for (int c = 0; c < CQ_GDN_CHECKPOINTS; c++)
        ok = (st->ckpt[c] = malloc(st->floats * sizeof(float))) && ok;
    ok = (st->proj = malloc(batch * st->proj_w * sizeof(float))) && ok;
    ok = (st->proj2 = malloc(batch * (st->proj2_w ? st->proj2_w : 1) * sizeof(float))) && ok;
    ok = (st->qkv = malloc(batch * st->max_conv * sizeof(float))) && ok;
    ok = (st->conv = malloc(batch * st->max_conv * sizeof(float))) && ok;
    ok = (st->z = malloc(batch * st->max_value * sizeof(float))) && ok;
    ok = (st->core = malloc(batch * st->max_value * sizeof(float))) && ok;
    ok = (st->beta = malloc(batch * st->max_nv * sizeof(float))) && ok;
    ok = (st->g = malloc(batch * st->max_nv * sizeof(float))) && ok;
    if (batch >= st->chunk_min)
        ok = (st->chunk_work = malloc(st->max_nv * st->chunk_floats * sizeof(float))) && ok;
    return ok;
}

void cq_gdn_state_free(cq_gdn_state *st) {
    free(st->live);
    for (int c = 0; c < CQ_GDN_CHECKPOINTS; c++)
        free(st->ckpt[c]);
    free(st->proj), free(st->proj2), free(st->qkv), free(st->conv), free(st->z), free(st->core);
    free(st->beta), free(st->g), free(st->chunk_work);
    memset(st, 0, sizeof *st);
}

void cq_gdn_state_reset(cq_gdn_state *st) {
    if (st->live) memset(st->live, 0, st->floats * sizeof(float));
    for (int c = 0; c < CQ_GDN_CHECKPOINTS; c++)
        st->ckpt_ok[c] = false;
}

void cq_gdn_checkpoint(cq_gdn_state *st, uint32_t pos) {
    if (!st->floats) return;
    int slot = 0; /* a free slot, else the one at the lower position */
    for (int c = 0; c < CQ_GDN_CHECKPOINTS; c++) {
        if (st->ckpt_ok[c] && st->ckpt_pos[c] == pos) return; /* already there */
        if (!st->ckpt_ok[c]) {
            slot = c;
            break;
        }
        if (st->ckpt_pos[c] < st->ckpt_pos[slot]) slot = c;
    }
    memcpy(st->ckpt[slot], st->live, st->floats * sizeof(float));
    st->ckpt_pos[slot] = pos;
    st->ckpt_ok[slot] = true;
}

uint32_t cq_gdn_rewind(cq_gdn_state *st, uint32_t pos) {
    int best = -1;
    for (int c = 0; c < CQ_GDN_CHECKPOINTS; c++) {
        if (!st->ckpt_ok[c]) continue;
        if (st->ckpt_pos[c] > pos)
            st->ckpt_ok[c] = false; /* its tokens are being dropped */
        else if (best < 0 || st->ckpt_pos[c] > st->ckpt_pos[best])
            best = c;
    }
    if (best < 0) {
        cq_gdn_state_reset(st);
        return 0;
    }
    memcpy(st->live, st->ckpt[best], st->floats * sizeof(float));
    return st->ckpt_pos[best];
}

/* ---- the block ---- */

typedef struct gdn_pass {
    const cq_gdn_io *io;
    const cq_gdn *g;
    size_t n;
    float *tail; /* the conv's last kernel - 1 inputs before the chunk [kernel - 1, conv_dim] */
    float *S;    /* [nv, dk, dv] */
    cq_gdn_step_fn step;
    cq_gdn_chunk_fn chunk;
} gdn_pass;

static float sigmoidf(float x) {
    return 1.0f / (1.0f + expf(-x));
}

static float softplusf(float x) {
    return x > 20.0f ? x : log1pf(expf(x)); /* torch's threshold 20 */
}

/* Fused projections (Qwen3-Next): rows grouped per key head into the canonical order
 * qkv = [q (nk*dk); k (nk*dk); v (nv*dv)], z [nv*dv], and b, a [nv]. */
static void unfuse(const void *ctx, size_t t) {
    const gdn_pass *P = ctx;
    const cq_gdn *g = P->g;
    cq_gdn_state *st = P->io->st;
    uint32_t r = g->nv / g->nk, rv = r * g->dv;
    const float *row = st->proj + t * (g->conv_dim + (size_t)g->value_dim);
    const float *ba = st->proj2 + t * 2 * (size_t)g->nv;
    float *qkv = st->qkv + t * g->conv_dim, *z = st->z + t * g->value_dim;
    float *b = st->beta + t * g->nv, *a = st->g + t * g->nv;
    for (uint32_t h = 0; h < g->nk; h++) {
        const float *grp = row + (size_t)h * (2 * g->dk + 2 * rv);
        memcpy(qkv + (size_t)h * g->dk, grp, g->dk * sizeof(float));
        memcpy(qkv + g->key_dim + (size_t)h * g->dk, grp + g->dk, g->dk * sizeof(float));
        memcpy(qkv + 2 * g->key_dim + (size_t)h * rv, grp + 2 * g->dk, rv * sizeof(float));
        memcpy(z + (size_t)h * rv, grp + 2 * g->dk + rv, rv * sizeof(float));
        memcpy(b + (size_t)h * r, ba + (size_t)h * 2 * r, r * sizeof(float));
        memcpy(a + (size_t)h * r, ba + (size_t)h * 2 * r + r, r * sizeof(float));
    }
}

static void l2norm(float *x, uint32_t n, float scale) {
    double ss = 0;
    for (uint32_t i = 0; i < n; i++)
        ss += (double)x[i] * x[i];
    float r = scale / sqrtf((float)ss + 1e-6f);
    for (uint32_t i = 0; i < n; i++)
        x[i] *= r;
}

/* Token t: causal conv + silu of qkv into conv, q/k l2-normalised (q also by 1/sqrt(dk)), and
 * beta = sigmoid(b), g = -exp(A_log) softplus(a + dt_bias) in place of b and a. */
static void conv_gates(const void *ctx, size_t t) {
    const gdn_pass *P = ctx;
    const cq_gdn *g = P->g;
    cq_gdn_state *st = P->io->st;
    const size_t C = g->conv_dim, K = g->kernel;
    float *out = st->conv + t * C;
    for (size_t c = 0; c < C; c++) {
        float acc = 0;
        for (size_t j = 0; j < K; j++) { /* input t - (K - 1) + j */
            ptrdiff_t src = (ptrdiff_t)t - (ptrdiff_t)(K - 1) + (ptrdiff_t)j;
            float x = src >= 0 ? st->qkv[(size_t)src * C + c]
                               : P->tail[(size_t)((ptrdiff_t)(K - 1) + src) * C + c];
            acc += g->conv_w[c * K + j] * x;
        }
        out[c] = acc * sigmoidf(acc);
    }
    float qscale = 1.0f / sqrtf((float)g->dk);
    for (uint32_t h = 0; h < g->nk; h++) {
        l2norm(out + (size_t)h * g->dk, g->dk, qscale);
        l2norm(out + g->key_dim + (size_t)h * g->dk, g->dk, 1.0f);
    }
    float *beta = st->beta + t * g->nv, *gate = st->g + t * g->nv;
    for (uint32_t h = 0; h < g->nv; h++) {
        beta[h] = sigmoidf(beta[h]);
        gate[h] = g->neg_a[h] * softplusf(gate[h] + g->dt_bias[h]);
    }
}

/* Value head h over the chunk's tokens in order (the step per SIMD tier: gdn_step.h). */
static void recur_head(const void *ctx, size_t h) {
    const gdn_pass *P = ctx;
    const cq_gdn *g = P->g;
    cq_gdn_state *st = P->io->st;
    const uint32_t dk = g->dk, dv = g->dv, kh = (uint32_t)h / (g->nv / g->nk);
    float *S = P->S + h * dk * dv;
    float mem[CQ_MAX_HEAD_DIM];
    for (size_t t = 0; t < P->n; t++) {
        const float *row = st->conv + t * g->conv_dim;
        const float *q = row + (size_t)kh * dk, *k = row + g->key_dim + (size_t)kh * dk;
        const float *v = row + 2 * g->key_dim + h * dv;
        P->step(S, q, k, v, expf(st->g[t * g->nv + h]), st->beta[t * g->nv + h],
                st->core + t * g->value_dim + h * dv, mem, dk, dv);
    }
}

/* Value head h over the chunk's tokens, CQ_GDN_CHUNK at a time as matrix products. */
static void chunk_head(const void *ctx, size_t h) {
    const gdn_pass *P = ctx;
    const cq_gdn *g = P->g;
    cq_gdn_state *st = P->io->st;
    const size_t kh = h / (g->nv / g->nk), nv = g->nv;
    float *S = P->S + h * g->dk * g->dv, *work = st->chunk_work + h * st->chunk_floats;
    for (size_t t = 0; t < P->n; t += CQ_GDN_CHUNK) {
        const float *row = st->conv + t * g->conv_dim;
        const cq_gdn_chunk_in in = {
            .q = row + kh * g->dk,
            .k = row + g->key_dim + kh * g->dk,
            .v = row + 2 * (size_t)g->key_dim + h * g->dv,
            .g = st->g + t * nv + h,
            .beta = st->beta + t * nv + h,
            .o = st->core + t * g->value_dim + h * g->dv,
            .stride = g->conv_dim,
            .gstride = nv,
            .ostride = g->value_dim,
            .n = (uint32_t)(P->n - t < CQ_GDN_CHUNK ? P->n - t : CQ_GDN_CHUNK),
            .dk = g->dk,
            .dv = g->dv};
        P->chunk(S, &in, work);
    }
}

/* Token t: each value head's output becomes rmsnorm(o) * w * silu(z). */
static void gated_norm(const void *ctx, size_t t) {
    const gdn_pass *P = ctx;
    const cq_gdn *g = P->g;
    cq_gdn_state *st = P->io->st;
    for (uint32_t h = 0; h < g->nv; h++) {
        float *o = st->core + t * g->value_dim + (size_t)h * g->dv;
        const float *z = st->z + t * g->value_dim + (size_t)h * g->dv;
        double ss = 0;
        for (uint32_t j = 0; j < g->dv; j++)
            ss += (double)o[j] * o[j];
        float r = 1.0f / sqrtf((float)(ss / g->dv) + P->io->eps);
        for (uint32_t j = 0; j < g->dv; j++)
            o[j] = o[j] * r * g->norm_w[j] * (z[j] * sigmoidf(z[j]));
    }
}

/* The conv's tail after the chunk: the last kernel - 1 rows of [tail; qkv]. */
static void advance_tail(const gdn_pass *P) {
    const cq_gdn *g = P->g;
    const size_t C = g->conv_dim, keep = g->kernel - 1;
    if (!keep) return;
    if (P->n >= keep) {
        memcpy(P->tail, P->io->st->qkv + (P->n - keep) * C, keep * C * sizeof(float));
        return;
    }
    memmove(P->tail, P->tail + P->n * C, (keep - P->n) * C * sizeof(float));
    memcpy(P->tail + (keep - P->n) * C, P->io->st->qkv, P->n * C * sizeof(float));
}

void cq_gdn_block(const cq_gdn_io *io, const cq_gdn *g, size_t n, cq_token_fn make_input,
                  const void *ctx) {
    cq_gdn_state *st = io->st;
    float *state = st->live + g->state_off;
    const gdn_pass P = {.io = io,
                        .g = g,
                        .n = n,
                        .tail = state,
                        .S = state + (size_t)(g->kernel - 1) * g->conv_dim,
                        .step = cq_gdn_step_get(),
                        .chunk = cq_gdn_chunk_get()};
    if (g->fused) {
        cq_matmul mm = {.p = {{.w = &g->qkvz, .y = st->proj}, {.w = &g->ba, .y = st->proj2}},
                        .np = 2,
                        .x = io->xn,
                        .n = n};
        cq_matmul_after(io->sched, make_input, ctx, &mm);
        cq_each_token(io->sched, n, unfuse, &P);
    } else {
        cq_matmul mm = {.p = {{.w = &g->qkv, .y = st->qkv},
                              {.w = &g->z, .y = st->z},
                              {.w = &g->b, .y = st->beta}},
                        .np = 3,
                        .x = io->xn,
                        .n = n};
        cq_matmul_after(io->sched, make_input, ctx, &mm);
        cq_matmul_one(io->sched, &g->a, io->xn, n, st->g);
    }
    cq_each_token(io->sched, n, conv_gates, &P);
    advance_tail(&P);
    bool chunked = st->chunk_work && P.chunk && n >= st->chunk_min;
    cq_each_token(io->sched, g->nv, chunked ? chunk_head : recur_head, &P);
    cq_each_token(io->sched, n, gated_norm, &P);
    cq_matmul_one(io->sched, &g->out, st->core, n, io->o);
}
