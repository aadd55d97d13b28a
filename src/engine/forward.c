/* forward.c - sessions and the forward pass: embeddings, per layer RMSNorm -> attention (GQA,
 * RoPE, q/k norms, sliding window) -> MLP, final norm and head. Matrix products go through
 * cortiq/kernels.h, split by rows over the model's thread pool; a batch of tokens (prefill)
 * uses the batched kernels so each weight is decoded once per batch. */
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "common/pieces.h"
#include "engine/act_ops.h"
#include "engine/attn_batch.h"
#include "engine/attn_decode.h"
#include "engine/kv_cache.h"
#include "engine/model.h"

#ifndef CQ_BATCH
#define CQ_BATCH 128 /* tokens per prefill chunk */
#endif

/* A thread's share of a decode product: per part, how many rows of its range are claimed, as
 * job << 32 | rows (a value left by an earlier job counts as none claimed, so nobody has to
 * reset it: the owner's line stays in its own cache until another thread takes from it). */
typedef struct cq_claim {
    _Alignas(64) atomic_ullong taken[3];
} cq_claim;

struct cortiq_session {
    cortiq_model *m;
    uint32_t ctx, pos;
    cortiq_kv_type kv_type;
    cq_kv_layer *kv; /* per layer; slots = ctx, or window + CQ_BATCH for sliding layers (a ring) */
    cq_kv_arena kv_arena; /* their blocks, position-first, on 2 MiB pages unless no_huge_pages */
    /* scratch for one chunk of up to CQ_BATCH tokens */
    float *x, *xn, *q, *k, *v, *att, *o, *g, *u, *logits;
    uint32_t max_ffn, max_qd;
    /* integer prefill GEMM (model->prefill_qact): the quantized batch, per-thread panels */
    void *qa_mem;
    cmf_qact qa;
    uint8_t *qa_scratch;
    size_t qa_stride;
    /* batched prefill attention (attn_batch.h): per-thread scratch */
    float *ab_scratch;
    size_t ab_stride; /* floats per thread */
    /* decode attention (attn_decode.h): per-thread scratch, the chunks' partials, and per kv
     * head the count of finished chunks */
    float *ad_scratch, *ad_part;
    size_t ad_stride; /* floats per thread */
    atomic_uint *ad_done;
    /* decode products (mm_decode_task): per-thread prepared tokens and claims */
    uint8_t *tok8;
    size_t tok8_stride;
    cq_claim *claim;
    uint32_t job; /* decode products run so far (the tag of their claims) */
};

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
    for (uint32_t l = 0; l < m->n_layers; l++) {
        if (m->layers[l].ffn > s->max_ffn) s->max_ffn = m->layers[l].ffn;
        uint32_t qd = m->layers[l].n_heads * m->head_dim;
        if (qd > s->max_qd) s->max_qd = qd;
    }
    size_t kvd = (size_t)m->n_kv * m->head_dim, B = CQ_BATCH;
    s->kv = calloc(m->n_layers, sizeof *s->kv);
    uint32_t *slots = malloc(m->n_layers * sizeof *slots);
    int ok = s->kv && slots;
    for (uint32_t l = 0; ok && l < m->n_layers; l++) {
        slots[l] = ctx;
        if (m->layers[l].sliding && (uint64_t)m->sliding_window + B < ctx)
            slots[l] = m->sliding_window + (uint32_t)B;
    }
    ok = ok && cq_kv_arena_init(&s->kv_arena, s->kv, m->n_layers, kv, slots, m->n_kv, m->head_dim,
                                m->huge_pages);
    free(slots);
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
    s->logits = malloc((size_t)m->vocab * sizeof(float));
    s->ab_stride = (cq_attn_batch_scratch_bytes(m->head_dim, ctx) + 63) / 64 * 16;
    s->ab_scratch = aligned_alloc(64, cq_pool_size(m->pool) * s->ab_stride * sizeof(float));
    ok = ok && s->ab_scratch;
    uint32_t max_group = 1;
    for (uint32_t l = 0; l < m->n_layers; l++)
        if (m->layers[l].n_heads / m->n_kv > max_group) max_group = m->layers[l].n_heads / m->n_kv;
    s->ad_stride = (cq_attn_decode_scratch_floats(m->head_dim, max_group, ctx) + 15) / 16 * 16;
    s->ad_scratch = aligned_alloc(64, cq_pool_size(m->pool) * s->ad_stride * sizeof(float));
    s->ad_part =
        malloc(cq_attn_decode_part_floats(s->max_qd / m->head_dim, m->head_dim) * sizeof(float));
    s->ad_done = malloc(m->n_kv * sizeof *s->ad_done);
    ok = ok && s->ad_scratch && s->ad_part && s->ad_done;
    unsigned nt = cq_pool_size(m->pool);
    s->claim = aligned_alloc(64, nt * sizeof *s->claim);
    ok = ok && s->claim;
    if (s->claim) /* tag 0 is no job's: memory reused from another session may hold its tags */
        memset(s->claim, 0, nt * sizeof *s->claim);
    size_t in_cols = H > s->max_qd ? H : s->max_qd; /* the widest input of a product */
    if (s->max_ffn > in_cols) in_cols = s->max_ffn;
    s->tok8_stride = (cmf_tok8_bytes(in_cols) + 63) / 64 * 64;
    if (s->tok8_stride) {
        s->tok8 = aligned_alloc(64, nt * s->tok8_stride);
        ok = ok && s->tok8;
    }
    if (m->prefill_qact) {
        size_t cols = H > s->max_qd ? H : s->max_qd;
        if (s->max_ffn > cols) cols = s->max_ffn;
        s->qa_stride = (cmf_qact_scratch_bytes(cols) + 63) / 64 * 64;
        s->qa_mem = aligned_alloc(64, (cmf_qact_bytes(B, cols) + 63) / 64 * 64);
        s->qa_scratch = aligned_alloc(64, cq_pool_size(m->pool) * s->qa_stride);
        ok = ok && s->qa_mem && s->qa_scratch;
    }
    if (!ok || !s->x || !s->xn || !s->o || !s->q || !s->att || !s->k || !s->v || !s->g || !s->u ||
        !s->logits) {
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
    free(s->g), free(s->u), free(s->logits);
    free(s->qa_mem), free(s->qa_scratch), free(s->ab_scratch);
    free(s->ad_scratch), free(s->ad_part), free(s->ad_done);
    free(s->tok8), free(s->claim);
    free(s);
}

void cortiq_session_reset(cortiq_session *s) {
    s->pos = 0;
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
void cortiq_session_truncate(cortiq_session *s, uint32_t pos) {
    if (pos < s->pos) s->pos = pos;
}

/* ---- elementwise ops ---- */
static void rmsnorm(float *out, const float *x, const float *w, uint32_t n, float eps) {
    double ss = 0;
    for (uint32_t i = 0; i < n; i++)
        ss += (double)x[i] * x[i];
    float r = 1.0f / sqrtf((float)(ss / n) + eps);
    for (uint32_t i = 0; i < n; i++)
        out[i] = x[i] * r * w[i];
}

/* Rotate pair i of each of n_heads heads of v by (c, s). */
static void rotate_pair(float *v, uint32_t n_heads, uint32_t head_dim, uint32_t i, uint32_t half,
                        float c, float s) {
    for (uint32_t h = 0; h < n_heads; h++) {
        float *x = v + (size_t)h * head_dim;
        float a = x[i], b = x[i + half];
        x[i] = a * c - b * s;
        x[i + half] = b * c + a * s;
    }
}

/* RoPE of one token's queries (nq heads) and keys (nk heads) at position pos: each pair's
 * cos / sin once for both (a decode step's serial work before attention). */
static void rope(float *q, uint32_t nq, float *k, uint32_t nk, uint32_t head_dim, uint32_t rot,
                 const float *inv, float mscale, uint32_t pos) {
    uint32_t half = rot / 2;
    for (uint32_t i = 0; i < half; i++) {
        float f = (float)pos * inv[i];
        float c = cosf(f) * mscale, s = sinf(f) * mscale;
        rotate_pair(q, nq, head_dim, i, half, c, s);
        rotate_pair(k, nk, head_dim, i, half, c, s);
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
    int tok8; /* one token: the prepared-token layout this part reads (0: none; run_job) */
} mm_part;

typedef struct mm_job {
    mm_part p[3];
    unsigned np;
    const float *X;
    size_t n;
    unsigned flags;
    int glu;
    cq_act act;
    const cmf_qact *qa; /* non-NULL: X quantized for the integer GEMM */
    uint8_t *scratch;   /* its per-thread panels, stride bytes each */
    size_t stride;
    unsigned q4flags; /* added to flags for integer-coded weights (int8 activations) */
    /* one token (mm_decode_task): the parts that hand out rows (a glu job's pieces cover gate
     * and up rows together), per-thread prepared tokens (NULL: no part takes them) and
     * claims */
    unsigned nclaim;
    uint32_t job;
    int tok8_layouts; /* what cmf_tok8_prepare must lay out for the job's matrices */
    uint8_t *tok8;
    size_t tok8_stride;
    cq_claim *claim;
} mm_job;

static void rows_of(uint64_t rows, unsigned tid, unsigned nt, uint64_t *r0, uint64_t *r1) {
    /* split on multiples of 16 rows so SIMD tiles stay whole */
    uint64_t per = (rows + nt - 1) / nt;
    per = (per + 15) / 16 * 16;
    *r0 = (uint64_t)tid * per;
    *r1 = *r0 + per < rows ? *r0 + per : rows;
}

/* Whether a product of n tokens on w quantizes its activations to int8 by default
 * (model->q4flags; the arithmetic of llama.cpp's Q8_0 activations): weights stored as integer
 * codes (q8_row, q4_*, vbit*), except one token through q8_row, which keeps f32. From DRAM
 * q8_row's f32 rows ran at 88-98 % of the bandwidth against 81-88 % for the int8 ones, and
 * decode measured Qwen2.5-0.5B-shape q8 +2 to +6 %, Gemma 3 270M q8 +6 to +10 %, SmolLM2 q8
 * within noise (docs/KERNELS.md). */
static int int8_by_default(const cmf_qmat *w, size_t n) {
    switch (w->dtype) {
    case CMF_DT_Q8_ROW:
        return n > 1;
    case CMF_DT_Q4_BLOCK:
    case CMF_DT_Q4_TILED:
    case CMF_DT_Q4TP:
    case CMF_DT_VBIT:
    case CMF_DT_VBIT_RO:
        return 1;
    default:
        return 0;
    }
}

/* The kernel flags of part p's product (j->flags forces int8 for every supported one). */
static unsigned part_flags(const mm_job *j, const mm_part *p) {
    return j->flags | (int8_by_default(p->w, j->n) ? j->q4flags : 0);
}

/* Rows [r0, r1) of part p (r0 < r1); tok: this thread's prepared token, or NULL; scratch:
 * this thread's integer-GEMM panels (a batch with j->qa). */
static void mm_part_rows(const mm_job *j, const mm_part *p, uint64_t r0, uint64_t r1,
                         const void *tok, uint8_t *scratch) {
    unsigned f = part_flags(j, p);
    if (tok && p->tok8)
        cmf_matvec_tok8(p->w, tok, p->Y + r0, r0, r1);
    else if (j->qa && cmf_qact_supports(p->w))
        cmf_matmul_qact(p->w, j->qa, p->Y + r0, p->ldy, r0, r1, scratch);
    else if (f)
        cmf_matmul_ex(p->w, j->X, j->n, (size_t)p->w->cols, p->Y + r0, p->ldy, r0, r1, f);
    else if (j->n == 1)
        cmf_matvec(p->w, j->X, p->Y + r0, r0, r1);
    else
        cmf_matmul(p->w, j->X, j->n, p->Y + r0, p->ldy, r0, r1);
}

/* The glu of rows [r0, r1) of every token: gate (part 0) becomes act(gate) * up (part 1). */
static void mm_glu_rows(const mm_job *j, uint64_t r0, uint64_t r1) {
    const cq_act_ops *ops = cq_act_ops_get();
    cq_glu_fn glu = j->act == CQ_ACT_SILU ? ops->silu_mul : ops->gelu_tanh_mul;
    for (size_t t = 0; r0 < r1 && t < j->n; t++)
        glu(j->p[0].Y + t * j->p[0].ldy + r0, j->p[1].Y + t * j->p[1].ldy + r0, (size_t)(r1 - r0));
}

/* A batch: each part split over the threads in equal row ranges. */
static void mm_task(void *ctx, unsigned tid, unsigned nt) {
    const mm_job *j = ctx;
    uint8_t *scratch = j->qa ? j->scratch + tid * j->stride : NULL;
    for (unsigned k = 0; k < j->np; k++) {
        uint64_t r0, r1;
        rows_of(j->p[k].w->rows, tid, nt, &r0, &r1);
        if (r0 < r1) mm_part_rows(j, &j->p[k], r0, r1, NULL, scratch);
    }
    if (!j->glu) return;
    uint64_t r0, r1;
    rows_of(j->p[0].w->rows, tid, nt, &r0, &r1);
    mm_glu_rows(j, r0, r1);
}

/* One token. Thread t owns the rows a static split gives it (rows_of) and takes them in
 * pieces of half what is left of its range (common/pieces.h); once done it takes pieces of
 * the others' ranges the same way, so the threads finish within one small piece of each other,
 * whichever a hypervisor or a late wake-up slowed. Pieces start on 16-row blocks, so every row's
 * result is the static split's (the kernels reduce rows 16 at a time). Each thread quantizes the
 * token once for the whole job (cmf_tok8_prepare) where the kernels would do it per call. */
static void mm_decode_task(void *ctx, unsigned tid, unsigned nt) {
    const mm_job *j = ctx;
    const void *tok = NULL;
    if (j->tok8) {
        uint8_t *buf = j->tok8 + tid * j->tok8_stride;
        cmf_tok8_prepare(buf, j->X, j->p[0].w->cols, j->tok8_layouts);
        tok = buf;
    }
    for (unsigned i = 0; i < nt; i++) {
        unsigned v = (tid + i) % nt;
        for (unsigned k = 0; k < j->nclaim; k++) {
            uint64_t lo, end, r0, r1;
            rows_of(j->p[k].w->rows, v, nt, &lo, &end);
            while (cq_take_piece(&j->claim[v].taken[k], j->job, lo, end, 16, &r0, &r1)) {
                mm_part_rows(j, &j->p[k], r0, r1, tok, NULL);
                if (j->glu) {
                    mm_part_rows(j, &j->p[1], r0, r1, tok, NULL);
                    mm_glu_rows(j, r0, r1);
                }
            }
        }
    }
}

/* Runs job j on the pool: a batch by equal row ranges, one token by claimed pieces. */
static void run_job(cortiq_session *s, mm_job *j) {
    if (j->n != 1) {
        cq_pool_run(s->m->pool, mm_task, j);
        return;
    }
    j->nclaim = j->glu ? 1 : j->np;
    j->tok8 = NULL;
    j->tok8_layouts = 0;
    for (unsigned k = 0; k < j->np; k++) {
        mm_part *p = &j->p[k];
        p->tok8 = s->tok8 && (part_flags(j, p) & CMF_KF_INT8_ACT) ? cmf_tok8_supports(p->w) : 0;
        j->tok8_layouts |= p->tok8;
    }
    if (j->tok8_layouts) j->tok8 = s->tok8;
    j->tok8_stride = s->tok8_stride;
    j->claim = s->claim;
    j->job = ++s->job; /* after 2^32 jobs a tag repeats; each claim is rewritten every token */
    cq_pool_run(s->m->pool, mm_decode_task, j);
}

/* Batches of at least this many tokens take the integer GEMM (below it, repacking each
 * 16-row panel costs more than the f32 kernels lose). */
#define CQ_QACT_MIN 4

/* One product with f32 activations (the output head: one token). */
static void matmul(cortiq_session *s, const cmf_qmat *w, const float *X, size_t n, float *Y,
                   size_t ldy) {
    mm_job j = {.p = {{.w = w, .Y = Y, .ldy = ldy}},
                .np = 1,
                .X = X,
                .n = n,
                .flags = s->m->kflags,
                .act = s->m->act,
                .q4flags = s->m->q4flags};
    run_job(s, &j);
}

/* ---- per-token work of a layer, split over the threads by tokens for a batch ----
 * Everything between the matrix products is independent per token (norms, biases, rope, the
 * KV store, residual adds, quantizing the next product's input), so a prefill chunk spreads it
 * over the pool instead of leaving the other threads idle; one token (decode) runs it inline. */
typedef enum { TOK_ATTN_IN, TOK_QKV_OUT, TOK_QUANT, TOK_ATTN_OUT, TOK_FFN_OUT } tok_stage;

typedef struct tok_job {
    cortiq_session *s;
    const cq_layer *y;
    cq_kv_layer *c;
    size_t n;
    uint32_t pos0;
    tok_stage stage;
    const float *qx; /* TOK_QUANT / quantizing stages: the rows to quantize into s->qa */
    size_t qcols;
    int quant; /* also quantize this stage's output into s->qa */
} tok_job;

static void tok_range(const tok_job *j, size_t t0, size_t t1) {
    cortiq_session *s = j->s;
    cortiq_model *m = s->m;
    const cq_layer *y = j->y;
    uint32_t H = m->hidden, hd = m->head_dim;
    size_t qd = (size_t)y->n_heads * hd, kvd = (size_t)m->n_kv * hd;
    for (size_t t = t0; t < t1; t++) {
        switch (j->stage) {
        case TOK_ATTN_IN:
            rmsnorm(s->xn + t * H, s->x + t * H, y->attn_norm, H, m->eps);
            break;
        case TOK_QKV_OUT: {
            float *q = s->q + t * qd, *k = s->k + t * kvd, *v = s->v + t * kvd;
            if (y->bq)
                for (size_t i = 0; i < qd; i++)
                    q[i] += y->bq[i];
            if (y->bk)
                for (size_t i = 0; i < kvd; i++)
                    k[i] += y->bk[i];
            if (y->bv)
                for (size_t i = 0; i < kvd; i++)
                    v[i] += y->bv[i];
            if (y->q_norm)
                for (uint32_t h = 0; h < y->n_heads; h++)
                    rmsnorm(q + h * hd, q + h * hd, y->q_norm, hd, m->eps);
            if (y->k_norm)
                for (uint32_t h = 0; h < m->n_kv; h++)
                    rmsnorm(k + h * hd, k + h * hd, y->k_norm, hd, m->eps);
            rope(q, y->n_heads, k, m->n_kv, hd, y->rot_dim, y->inv_freq, y->rope_mscale,
                 j->pos0 + (uint32_t)t);
            uint32_t slot = (j->pos0 + (uint32_t)t) % j->c->slots;
            cq_kv_store(j->c, slot, k, v); /* converted once, to the cache's type */
            break;
        }
        case TOK_QUANT:
            break;
        case TOK_ATTN_OUT: {
            float *o = s->o + t * H, *x = s->x + t * H;
            if (y->post_attn_norm) rmsnorm(o, o, y->post_attn_norm, H, m->eps);
            for (uint32_t i = 0; i < H; i++)
                x[i] += o[i];
            rmsnorm(s->xn + t * H, x, y->ffn_norm, H, m->eps);
            break;
        }
        case TOK_FFN_OUT: {
            float *o = s->o + t * H, *x = s->x + t * H;
            if (y->post_ffn_norm) rmsnorm(o, o, y->post_ffn_norm, H, m->eps);
            for (uint32_t i = 0; i < H; i++)
                x[i] += o[i];
            break;
        }
        }
    }
    if (j->quant) cmf_qact_quantize_rows(&s->qa, j->qx, j->qcols, t0, t1);
}

static void tok_task(void *ctx, unsigned tid, unsigned nt) {
    const tok_job *j = ctx;
    size_t per = (j->n + nt - 1) / nt, t0 = tid * per, t1 = t0 + per < j->n ? t0 + per : j->n;
    if (t0 < t1) tok_range(j, t0, t1);
}

static void run_tokens(tok_job *j) {
    if (j->n == 1)
        tok_range(j, 0, 1);
    else
        cq_pool_run(j->s->m->pool, tok_task, j);
}

/* Whether the job's input should be quantized for the integer GEMM (and bind s->qa for it). */
static int want_qact(cortiq_session *s, mm_job *j) {
    if (!s->qa_mem || j->n < CQ_QACT_MIN) return 0;
    int any = 0;
    for (unsigned k = 0; k < j->np; k++)
        any |= cmf_qact_supports(j->p[k].w);
    if (!any) return 0;
    cmf_qact_bind(&s->qa, s->qa_mem, j->n, (size_t)j->p[0].w->cols);
    j->qa = &s->qa;
    j->scratch = s->qa_scratch;
    j->stride = s->qa_stride;
    return 1;
}

/* Run a per-token stage whose output feeds job j, quantizing that output on the way when the
 * job uses the integer GEMM, then the job itself. */
static void stage_then_job(cortiq_session *s, tok_job *tj, mm_job *j) {
    tj->quant = want_qact(s, j);
    tj->qx = j->X;
    tj->qcols = (size_t)j->p[0].w->cols;
    if (tj->stage != TOK_QUANT || tj->quant) run_tokens(tj);
    run_job(s, j);
}

/* Prefill attention: work units of (kv head, token range) handed out dynamically (later tokens
 * attend more keys); each range holds enough tokens that the group's rows fill a 32-row block. */
typedef struct attn_batch_job {
    cq_attn_batch_args a;
    uint32_t n_kv, range, n_ranges;
    size_t n;
    float *scratch;
    size_t stride;
    atomic_uint next;
} attn_batch_job;

static void attn_batch_task(void *ctx, unsigned tid, unsigned nt) {
    (void)nt;
    attn_batch_job *j = ctx;
    float *scratch = j->scratch + tid * j->stride;
    for (;;) {
        unsigned u = atomic_fetch_add(&j->next, 1);
        if (u >= j->n_kv * j->n_ranges) break;
        uint32_t kvh = u % j->n_kv, r = u / j->n_kv;
        size_t t0 = (size_t)r * j->range, t1 = t0 + j->range < j->n ? t0 + j->range : j->n;
        cq_attn_batch(&j->a, kvh, (uint32_t)t0, (uint32_t)t1, scratch);
    }
}

/* Decode attention: units of (kv head, key chunk) handed out dynamically; the thread that
 * finishes the last chunk of a kv head merges that head's chunks. */
typedef struct attn_decode_job {
    cq_attn_decode_args a;
    uint32_t n_kv, n_chunks;
    float *scratch;
    size_t stride;
    atomic_uint next;
    atomic_uint *done; /* per kv head: chunks finished */
} attn_decode_job;

static void attn_decode_task(void *ctx, unsigned tid, unsigned nt) {
    (void)nt;
    attn_decode_job *j = ctx;
    float *scratch = j->scratch + tid * j->stride;
    for (;;) {
        unsigned u = atomic_fetch_add(&j->next, 1);
        if (u >= j->n_kv * j->n_chunks) break;
        uint32_t kvh = u / j->n_chunks, ch = u % j->n_chunks;
        cq_attn_decode_unit(&j->a, kvh, ch, scratch);
        /* seq_cst: the last finisher sees every other chunk's partials */
        if (atomic_fetch_add(&j->done[kvh], 1) + 1 == j->n_chunks)
            cq_attn_decode_combine(&j->a, kvh);
    }
}

static void attention(cortiq_session *s, const cq_layer *y, cq_kv_layer *c, size_t n,
                      uint32_t pos0) {
    cortiq_model *m = s->m;
    if (n == 1) {
        attn_decode_job j = {{c, s->q, s->att, s->ad_part, y->n_heads, pos0,
                              y->sliding ? m->sliding_window : 0, 0, m->attn_scale,
                              m->attn_softcap},
                             m->n_kv,
                             0,
                             s->ad_scratch,
                             s->ad_stride,
                             0,
                             s->ad_done};
        uint32_t keys = pos0 + 1 - cq_attn_decode_first_key(&j.a);
        j.a.chunk = cq_attn_decode_chunk(keys, m->n_kv, cq_pool_size(m->pool));
        j.n_chunks = cq_attn_decode_chunks(&j.a);
        for (uint32_t h = 0; h < m->n_kv; h++)
            atomic_store(&s->ad_done[h], 0);
        cq_pool_run(m->pool, attn_decode_task, &j);
        return;
    }
    uint32_t group = y->n_heads / m->n_kv, range = (CQ_ATTN_BATCH_ROWS + group - 1) / group;
    attn_batch_job j = {{c, s->q, s->att, y->n_heads, pos0, y->sliding ? m->sliding_window : 0,
                         m->attn_scale, m->attn_softcap},
                        m->n_kv,
                        range,
                        (uint32_t)((n + range - 1) / range),
                        n,
                        s->ab_scratch,
                        s->ab_stride,
                        0};
    cq_pool_run(m->pool, attn_batch_task, &j);
}

static void layer_forward(cortiq_session *s, uint32_t l, size_t n, uint32_t pos0) {
    cortiq_model *m = s->m;
    const cq_layer *y = &m->layers[l];
    cq_kv_layer *c = &s->kv[l];
    uint32_t H = m->hidden, hd = m->head_dim;
    size_t qd = (size_t)y->n_heads * hd, kvd = (size_t)m->n_kv * hd;
    tok_job tj = {s, y, c, n, pos0, TOK_ATTN_IN, NULL, 0, 0};
    mm_job qkv = {.p = {{.w = &y->wq, .Y = s->q, .ldy = qd},
                        {.w = &y->wk, .Y = s->k, .ldy = kvd},
                        {.w = &y->wv, .Y = s->v, .ldy = kvd}},
                  .np = 3,
                  .X = s->xn,
                  .n = n,
                  .flags = m->kflags,
                  .act = m->act,
                  .q4flags = m->q4flags};
    stage_then_job(s, &tj, &qkv);
    tj.stage = TOK_QKV_OUT;
    tj.quant = 0;
    run_tokens(&tj);
    attention(s, y, c, n, pos0);
    mm_job wo = {.p = {{.w = &y->wo, .Y = s->o, .ldy = H}},
                 .np = 1,
                 .X = s->att,
                 .n = n,
                 .flags = m->kflags,
                 .act = m->act,
                 .q4flags = m->q4flags};
    tj.stage = TOK_QUANT;
    stage_then_job(s, &tj, &wo);
    mm_job gu = {
        .p = {{.w = &y->wg, .Y = s->g, .ldy = y->ffn}, {.w = &y->wu, .Y = s->u, .ldy = y->ffn}},
        .np = 2,
        .X = s->xn,
        .n = n,
        .flags = m->kflags,
        .glu = 1,
        .act = m->act,
        .q4flags = m->q4flags};
    tj.stage = TOK_ATTN_OUT;
    stage_then_job(s, &tj, &gu);
    mm_job wd = {.p = {{.w = &y->wd, .Y = s->o, .ldy = H}},
                 .np = 1,
                 .X = s->g,
                 .n = n,
                 .flags = m->kflags,
                 .act = m->act,
                 .q4flags = m->q4flags};
    tj.stage = TOK_QUANT;
    stage_then_job(s, &tj, &wd);
    tj.stage = TOK_FFN_OUT;
    tj.quant = 0;
    run_tokens(&tj);
}

static void head_forward(cortiq_session *s, const float *x, float *logits) {
    cortiq_model *m = s->m;
    rmsnorm(s->xn, x, m->final_norm, m->hidden, m->eps);
    matmul(s, &m->head, s->xn, 1, logits, m->vocab);
    if (m->logit_scale != 1.0f)
        for (uint32_t i = 0; i < m->vocab; i++)
            logits[i] *= m->logit_scale;
    if (m->final_softcap > 0)
        for (uint32_t i = 0; i < m->vocab; i++)
            logits[i] = tanhf(logits[i] / m->final_softcap) * m->final_softcap;
}

cmf_status cortiq_session_eval(cortiq_session *s, const int32_t *tokens, size_t n,
                               float *all_logits, cmf_err *err) {
    cortiq_model *m = s->m;
    if (n == 0) return CMF_OK;
    if ((uint64_t)s->pos + n > s->ctx)
        return cmf_err_set(err, CMF_E_LIMIT, "session", "context full: %u + %zu tokens > ctx %u",
                           s->pos, n, s->ctx);
    for (size_t i = 0; i < n; i++)
        if (tokens[i] < 0 || (uint32_t)tokens[i] >= m->embed.rows)
            return cmf_err_set(err, CMF_E_INVALID_ARG, "session",
                               "token id %d outside the vocabulary [0, %llu)", tokens[i],
                               (unsigned long long)m->embed.rows);
    for (size_t done = 0; done < n;) {
        size_t b = n - done < CQ_BATCH ? n - done : CQ_BATCH;
        for (size_t t = 0; t < b; t++) {
            float *x = s->x + t * m->hidden;
            cmf_qmat_dequant_row(&m->embed, (uint64_t)tokens[done + t], x);
            if (m->embed_scale != 1.0f)
                for (uint32_t i = 0; i < m->hidden; i++)
                    x[i] *= m->embed_scale;
        }
        for (uint32_t l = 0; l < m->n_layers; l++)
            layer_forward(s, l, b, s->pos);
        if (all_logits)
            for (size_t t = 0; t < b; t++)
                head_forward(s, s->x + t * m->hidden, all_logits + (done + t) * m->vocab);
        s->pos += (uint32_t)b;
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
