/* matmul_sched.c - matrix products and per-token steps on the model's thread pool
 * (matmul_sched.h): a batch by equal row ranges, one token by claimed pieces. */
#include "engine/matmul_sched.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "common/pieces.h"
#include "engine/act_ops.h"

/* A thread's share of a decode product: per part, how many rows of its range are claimed, as
 * job << 32 | rows (a value left by an earlier job counts as none claimed, so nobody has to
 * reset it: the owner's line stays in its own cache until another thread takes from it). */
struct cq_claim {
    _Alignas(64) atomic_ullong taken[CQ_MM_PRODUCTS];
};

/* Bytes of the largest input a batch of the model's layers prepares once (cmf_pact: a float
 * matrix whose kernel for such a batch takes it, bf16 activations unless pinned to f32). */
static size_t prepared_bytes(const cortiq_model *m, size_t batch, size_t in_cols) {
    size_t most = 0;
    for (uint32_t l = 0; m->layers && l < m->n_layers; l++) {
        const cq_layer *y = &m->layers[l];
        const cmf_qmat *w[8] = {&y->wq, &y->wk, &y->wv, &y->wo, &y->wgp, &y->wg, &y->wu, &y->wd};
        for (int i = 0; i < 8; i++) {
            if (!w[i]->rows) continue;
            for (size_t n = batch; n >= 2; n /= 2) { /* a kind can start below the batch size */
                size_t b = cmf_pact_bytes(cmf_pact_for(w[i], n, m->bf16flags), batch, in_cols);
                most = b > most ? b : most;
            }
        }
    }
    return most;
}

bool cq_sched_init(cq_sched *sc, const cortiq_model *m, size_t batch, size_t in_cols) {
    memset(sc, 0, sizeof *sc);
    sc->m = m;
    unsigned nt = cq_pool_size(m->pool);
    sc->claim = aligned_alloc(64, nt * sizeof *sc->claim);
    if (!sc->claim) return false;
    /* tag 0 is no job's: memory reused from another session may hold its tags */
    memset(sc->claim, 0, nt * sizeof *sc->claim);
    sc->tok8_stride = (cmf_tok8_bytes(in_cols) + 63) / 64 * 64;
    if (sc->tok8_stride) { /* CQ_DECODE_MAX prepared tokens per thread (cq_matmul.each) */
        sc->tok8 = aligned_alloc(64, (size_t)nt * CQ_DECODE_MAX * sc->tok8_stride);
        if (!sc->tok8) return false;
    }
    sc->pa_bytes = (prepared_bytes(m, batch, in_cols) + 63) / 64 * 64;
    if (sc->pa_bytes && !(sc->pa_mem = aligned_alloc(64, sc->pa_bytes))) return false;
    if (m->prefill_qact) {
        sc->qa_stride = (cmf_qact_scratch_bytes(in_cols) + 63) / 64 * 64;
        sc->qa_mem = aligned_alloc(64, (cmf_qact_bytes(batch, in_cols) + 63) / 64 * 64);
        sc->qa_scratch = aligned_alloc(64, nt * sc->qa_stride);
        if (!sc->qa_mem || !sc->qa_scratch) return false;
    }
    return true;
}

void cq_sched_free(cq_sched *sc) {
    free(sc->qa_mem), free(sc->qa_scratch), free(sc->pa_mem);
    free(sc->tok8), free(sc->claim);
}

/* ---- products ---- */

/* One product of a job. tok8: one token, the prepared-token layout this part reads (0: none). */
typedef struct mm_part {
    const cmf_qmat *w;
    float *y;
    size_t ldy;
    int tok8;
} mm_part;

/* A cq_matmul with what its threads share. */
typedef struct mm_job {
    mm_part p[CQ_MM_PRODUCTS];
    unsigned np;
    const float *x;
    size_t n;
    bool glu, each; /* each: n one-token products (cq_matmul.each) */
    cq_act act;
    unsigned flags;     /* model->kflags: forces int8 activations for every supported product */
    unsigned q4flags;   /* added for integer-coded weights that take int8 activations by default */
    unsigned bf16flags; /* added for a batch on bf16 weights (bf16 activations allowed) */
    const cmf_qact *qa; /* non-NULL: x quantized for the integer GEMM */
    const cmf_pact *pa; /* non-NULL: x rounded or regrouped for every part's kernel */
    uint8_t *scratch;   /* its per-thread panels, stride bytes each */
    size_t stride;
    /* one token (decode_task): the parts that hand out rows (a glu job's pieces cover gate and
     * up rows together), per-thread prepared tokens (NULL: no part takes them) and claims */
    unsigned nclaim;
    uint32_t tag;
    int tok8_layouts; /* what cmf_tok8_prepare must lay out for the job's matrices */
    uint8_t *tok8;
    size_t tok8_stride;
    cq_claim *claim;
} mm_job;

/* Rows of a batch's row ranges and pieces: a multiple of every batched kernel's panel (the
 * AVX-512 float panels hold 32 rows, the others 16 or 8), so no thread computes a panel's zero
 * rows; a decode step's kernels go by 16 at most. */
#define BATCH_ROW_UNIT  32
#define DECODE_ROW_UNIT 16

/* The job's row unit: base, or the larger blocks whose rows a part's kernels compute together
 * (a vbit copy's windows, cmf_qmat_lanes_block); one for all parts, so a glu's gate and up
 * rows split alike. */
static uint64_t job_unit(const mm_job *j, uint64_t base) {
    for (unsigned k = 0; k < j->np; k++) {
        const uint64_t b = cmf_qmat_lanes_block(j->p[k].w);
        if (b > base) base = b;
    }
    return base;
}

static void rows_of(uint64_t rows, unsigned tid, unsigned nt, uint64_t unit, uint64_t *r0,
                    uint64_t *r1) {
    uint64_t per = (rows + nt - 1) / nt;
    per = (per + unit - 1) / unit * unit;
    *r0 = (uint64_t)tid * per;
    *r1 = *r0 + per < rows ? *r0 + per : rows;
}

/* The kernel flags of part p's product: j->flags forces int8 for every supported one; otherwise
 * the dtype's policy (its traits record, cq_dtype_int8_act) decides, unless j->q4flags is 0
 * (f32 activations asked for). A batch on bf16 weights may round its activations to bf16
 * (j->bf16flags); one token, and the tokens of an `each` job, keep f32. */
static unsigned part_flags(const mm_job *j, const mm_part *p) {
    unsigned half = p->w->dtype == CMF_DT_BF16 && !j->each && j->n > 1 ? j->bf16flags : 0;
    return j->flags | half | (cq_dtype_int8_act(p->w->dtype, j->each ? 1 : j->n) ? j->q4flags : 0);
}

/* Rows [r0, r1) of part p (r0 < r1); tok: this thread's prepared token, or NULL; scratch:
 * this thread's integer-GEMM panels (a batch with j->qa); b: the token of an `each` job (its
 * input and output rows), else 0. */
static void part_rows(const mm_job *j, const mm_part *p, uint64_t r0, uint64_t r1, const void *tok,
                      uint8_t *scratch, size_t b) {
    unsigned f = part_flags(j, p);
    size_t cols = (size_t)p->w->cols, n = j->each ? 1 : j->n;
    const float *x = j->x + b * cols;
    float *y = p->y + b * p->ldy + r0;
    if (tok && p->tok8)
        cmf_matvec_tok8(p->w, tok, y, r0, r1);
    else if (j->qa && cmf_qact_supports(p->w))
        cmf_matmul_qact(p->w, j->qa, y, p->ldy, r0, r1, scratch);
    else if (j->pa && cmf_matmul_pact(p->w, j->pa, y, p->ldy, r0, r1))
        return; /* (no scratch for it: the same product from x below) */
    else if (f)
        cmf_matmul_ex(p->w, x, n, cols, y, p->ldy, r0, r1, f);
    else if (n == 1)
        cmf_matvec(p->w, x, y, r0, r1);
    else
        cmf_matmul(p->w, x, n, y, p->ldy, r0, r1);
}

/* The glu of rows [r0, r1) of every token: gate (part 0) becomes act(gate) * up (part 1). */
static void glu_rows(const mm_job *j, uint64_t r0, uint64_t r1) {
    const cq_act_ops *ops = cq_act_ops_get();
    cq_glu_fn glu = j->act == CQ_ACT_SILU ? ops->silu_mul : ops->gelu_tanh_mul;
    for (size_t t = 0; r0 < r1 && t < j->n; t++)
        glu(j->p[0].y + t * j->p[0].ldy + r0, j->p[1].y + t * j->p[1].ldy + r0, (size_t)(r1 - r0));
}

/* A batch: each part split over the threads in equal row ranges. */
static void batch_task(void *ctx, unsigned tid, unsigned nt) {
    const mm_job *j = ctx;
    uint8_t *scratch = j->qa ? j->scratch + tid * j->stride : NULL;
    const uint64_t unit = job_unit(j, BATCH_ROW_UNIT);
    for (unsigned k = 0; k < j->np; k++) {
        uint64_t r0, r1;
        rows_of(j->p[k].w->rows, tid, nt, unit, &r0, &r1);
        if (r0 < r1) part_rows(j, &j->p[k], r0, r1, NULL, scratch, 0);
    }
    if (!j->glu) return;
    uint64_t r0, r1;
    rows_of(j->p[0].w->rows, tid, nt, unit, &r0, &r1);
    glu_rows(j, r0, r1);
}

/* A batch whose products all read activations prepared once for the whole job (the integer
 * GEMM's quantized batch, the float kernels' regrouped one): no call regroups anything, so the
 * rows can go in claimed pieces as in decode_task, and the threads end within a small piece of
 * each other. With equal ranges (batch_task) the faster thread waited for the other, and often
 * slept through the rest of the region: a q8 prefill's products returned 100 us after their
 * threads' mean end, 5 % of each. */
static void run_pieces(const mm_job *j, unsigned tid, unsigned nt, const void *const *tok,
                       size_t ntok, uint8_t *scratch);

static void batch_pieces_task(void *ctx, unsigned tid, unsigned nt) {
    const mm_job *j = ctx;
    run_pieces(j, tid, nt, NULL, 0, j->qa ? j->scratch + tid * j->stride : NULL);
}

/* Whether every product of batch j reads the activations prepared for the job. */
static bool prepared_batch(const mm_job *j) {
    if (j->pa) return true; /* use_prepared took it for every part */
    if (!j->qa) return false;
    for (unsigned k = 0; k < j->np; k++)
        if (!cmf_qact_supports(j->p[k].w)) return false;
    return true;
}

_Static_assert(CQ_DECODE_MAX <= CMF_TOK8_MULTI_MAX, "a decode job's tokens fit one multi call");

/* Rows [r0, r1) of part p for the ntok tokens of a decode job: the one-token kernels of all
 * the tokens at once, each weight loaded and decoded once and every token's bits as alone:
 * prepared int8 tokens through cmf_matvec_tok8_multi, f32 activations through
 * cmf_matvec_multi. */
static void piece_rows(const mm_job *j, const mm_part *p, uint64_t r0, uint64_t r1,
                       const void *const *tok, size_t ntok) {
    if (ntok > 1 && tok[0] && p->tok8) {
        float *ys[CQ_DECODE_MAX];
        for (size_t b = 0; b < ntok; b++)
            ys[b] = p->y + b * p->ldy + r0;
        cmf_matvec_tok8_multi(p->w, tok, ntok, ys, r0, r1);
        return;
    }
    if (ntok > 1 && !(tok[0] && p->tok8) && !part_flags(j, p)) {
        const float *xs[CQ_DECODE_MAX];
        float *ys[CQ_DECODE_MAX];
        size_t cols = (size_t)p->w->cols;
        for (size_t b = 0; b < ntok; b++) {
            xs[b] = j->x + b * cols;
            ys[b] = p->y + b * p->ldy + r0;
        }
        cmf_matvec_multi(p->w, xs, ntok, ys, r0, r1);
        return;
    }
    for (size_t b = 0; b < ntok; b++)
        part_rows(j, p, r0, r1, tok[b], NULL, b);
}

/* One token. Thread t owns the rows a static split gives it (rows_of) and takes them in
 * pieces of half what is left of its range (common/pieces.h); once done it takes pieces of
 * the others' ranges the same way, so the threads finish within one small piece of each other,
 * whichever a hypervisor or a late wake-up slowed. Pieces start on 16-row blocks, so every row's
 * result is the static split's (the kernels reduce rows 16 at a time). Each thread quantizes the
 * token once for the whole job (cmf_tok8_prepare) where the kernels would do it per call. */
static void decode_task(void *ctx, unsigned tid, unsigned nt) {
    const mm_job *j = ctx;
    const void *tok[CQ_DECODE_MAX] = {NULL};
    size_t ntok = j->each ? j->n : 1, cols = (size_t)j->p[0].w->cols;
    if (j->tok8)
        for (size_t b = 0; b < ntok; b++) {
            uint8_t *buf = j->tok8 + ((size_t)tid * CQ_DECODE_MAX + b) * j->tok8_stride;
            cmf_tok8_prepare(buf, j->x + b * cols, j->p[0].w->cols, j->tok8_layouts);
            tok[b] = buf;
        }
    run_pieces(j, tid, nt, tok, ntok, NULL);
}

/* Thread tid's claimed pieces: its own range first, then what is left of the others'. A glu
 * job's pieces cover gate and up rows together. Each piece runs the ntok tokens of a decode
 * job (piece_rows: the tokens over the same rows, read from memory once, then cached), or with
 * ntok 0 the whole prepared batch (part_rows, scratch: this thread's integer-GEMM panels). */
static void run_pieces(const mm_job *j, unsigned tid, unsigned nt, const void *const *tok,
                       size_t ntok, uint8_t *scratch) {
    const uint64_t unit = job_unit(j, ntok ? DECODE_ROW_UNIT : BATCH_ROW_UNIT);
    for (unsigned i = 0; i < nt; i++) {
        unsigned v = (tid + i) % nt;
        for (unsigned k = 0; k < j->nclaim; k++) {
            uint64_t lo, end, r0, r1;
            rows_of(j->p[k].w->rows, v, nt, unit, &lo, &end);
            while (cq_take_piece(&j->claim[v].taken[k], j->tag, lo, end, unit, &r0, &r1)) {
                for (unsigned q = 0; q < (j->glu ? 2u : 1u); q++) {
                    const mm_part *p = &j->p[j->glu ? q : k];
                    if (ntok)
                        piece_rows(j, p, r0, r1, tok, ntok);
                    else
                        part_rows(j, p, r0, r1, NULL, scratch, 0);
                }
                if (j->glu) glu_rows(j, r0, r1);
            }
        }
    }
}

/* Runs job j on the pool: a batch by equal row ranges (by claimed pieces where its activations
 * were prepared for the whole job), one token by claimed pieces. */
static void run_job(cq_sched *sc, mm_job *j) {
    j->nclaim = j->glu ? 1 : j->np;
    j->claim = sc->claim;
    if (j->n != 1 && !j->each) {
        bool pieces = prepared_batch(j);
        if (pieces) j->tag = ++sc->job;
        cq_pool_run(sc->m->pool, pieces ? batch_pieces_task : batch_task, j);
        return;
    }
    j->tok8 = NULL;
    j->tok8_layouts = 0;
    for (unsigned k = 0; k < j->np; k++) {
        mm_part *p = &j->p[k];
        p->tok8 = sc->tok8 && (part_flags(j, p) & CMF_KF_INT8_ACT) ? cmf_tok8_supports(p->w) : 0;
        j->tok8_layouts |= p->tok8;
    }
    if (j->tok8_layouts) j->tok8 = sc->tok8;
    j->tok8_stride = sc->tok8_stride;
    j->tag = ++sc->job; /* after 2^32 jobs a tag repeats; each claim is rewritten every token */
    cq_pool_run(sc->m->pool, decode_task, j);
}

/* Up to CMF_TOK8_MULTI_MAX tokens, a batch whose GEMM weights all have a batched-decode copy
 * (and take int8 activations) runs the copy's kernels instead: the same bits
 * (tests/quant/test_lanes.c, test_chunk_exact.c), no panel unpacked per call. SmolLM2-135M on
 * Zen 3, a chunk of 6 / 10 / 16 tokens after 36: q8 24.8 / 28.8-31.6 / 38.4-45.1 ms ->
 * 16.3-19.5 / 22.8-26.3 / 28.5-36.6, q4t level to 10-25 % less (docs/KERNELS.md). */
static bool lanes_batch(const mm_job *j) {
    if (j->n > CMF_TOK8_MULTI_MAX) return false;
    for (unsigned k = 0; k < j->np; k++) {
        const mm_part *p = &j->p[k];
        if (cmf_qact_supports(p->w) && (!p->w->lanes || !(part_flags(j, p) & CMF_KF_INT8_ACT)))
            return false;
    }
    return true;
}

/* Binds the job to the integer GEMM when its batch is large enough (cmf_qact_min_tokens) and
 * one of its weights has it; returns whether x must be quantized first. */
static bool use_qact(cq_sched *sc, mm_job *j) {
    if (!sc->qa_mem || j->n < cmf_qact_min_tokens() || j->each || lanes_batch(j)) return false;
    int any = 0;
    for (unsigned k = 0; k < j->np; k++)
        any |= cmf_qact_supports(j->p[k].w);
    if (!any) return false;
    cmf_qact_bind(&sc->qa, sc->qa_mem, j->n, (size_t)j->p[0].w->cols);
    j->qa = &sc->qa;
    j->scratch = sc->qa_scratch;
    j->stride = sc->qa_stride;
    return true;
}

/* Binds the job to float activations prepared once for it where every part's kernel takes the
 * same kind for this batch (cmf_pact_for); returns whether it did. */
static bool use_prepared(cq_sched *sc, mm_job *j) {
    if (!sc->pa_mem || j->qa || j->each || j->n < 2) return false;
    cmf_pact_kind kind = cmf_pact_for(j->p[0].w, j->n, part_flags(j, &j->p[0]));
    for (unsigned k = 1; k < j->np && kind != CMF_PACT_NONE; k++)
        if (cmf_pact_for(j->p[k].w, j->n, part_flags(j, &j->p[k])) != kind) kind = CMF_PACT_NONE;
    size_t cols = (size_t)j->p[0].w->cols;
    if (kind == CMF_PACT_NONE || cmf_pact_bytes(kind, j->n, cols) > sc->pa_bytes) return false;
    cmf_pact_bind(&sc->pa, kind, sc->pa_mem, j->n, cols);
    j->pa = &sc->pa;
    return true;
}

/* ---- per-token steps ---- */

/* A step over n tokens; with qa set, each thread then quantizes rows [t0, t1) of qx (qcols
 * floats each) into qa. */
typedef struct token_pass {
    cq_token_fn step; /* NULL: quantize only */
    const void *ctx;
    size_t n;
    cmf_qact *qa;
    const float *qx;
    size_t qcols;
    cmf_pact *pa; /* prepared as qa is, each thread's tokens ending at a cmf_pact_cut */
} token_pass;

static void token_range(const token_pass *p, size_t t0, size_t t1) {
    if (p->step)
        for (size_t t = t0; t < t1; t++)
            p->step(p->ctx, t);
    if (p->qa) cmf_qact_quantize_rows(p->qa, p->qx, p->qcols, t0, t1);
    if (p->pa) cmf_pact_prepare(p->pa, p->qx, p->qcols, t0, t1);
}

static void token_task(void *ctx, unsigned tid, unsigned nt) {
    const token_pass *p = ctx;
    size_t per = (p->n + nt - 1) / nt;
    size_t t0 = tid * per, t1 = t0 + per < p->n ? t0 + per : p->n;
    /* whole groups, so that each thread's regroup or quantizer streams them (gemm_impl.h) */
    if (p->pa) t0 = cmf_pact_cut(p->pa, t0), t1 = cmf_pact_cut(p->pa, t1);
    if (p->qa) t0 = cmf_qact_cut(p->qa, t0), t1 = cmf_qact_cut(p->qa, t1);
    if (t0 < t1) token_range(p, t0, t1);
}

static void run_tokens(cq_sched *sc, token_pass *p) {
    if (p->n == 1)
        token_range(p, 0, 1);
    else
        cq_pool_run(sc->m->pool, token_task, p);
}

void cq_each_token(cq_sched *sc, size_t n, cq_token_fn step, const void *ctx) {
    token_pass p = {.step = step, .ctx = ctx, .n = n};
    run_tokens(sc, &p);
}

void cq_matmul_after(cq_sched *sc, cq_token_fn step, const void *ctx, const cq_matmul *mm) {
    const cortiq_model *m = sc->m;
    mm_job j = {.np = mm->np,
                .x = mm->x,
                .n = mm->n,
                .glu = mm->glu,
                .each = mm->each && mm->n > 1,
                .act = m->act,
                .flags = m->kflags,
                .q4flags = m->q4flags,
                .bf16flags = m->bf16flags};
    for (unsigned k = 0; k < mm->np; k++)
        j.p[k] = (mm_part){.w = mm->p[k].w, .y = mm->p[k].y, .ldy = (size_t)mm->p[k].w->rows};
    token_pass p = {.step = step, .ctx = ctx, .n = mm->n};
    if (use_qact(sc, &j)) p.qa = &sc->qa;
    p.pa = use_prepared(sc, &j) ? &sc->pa : NULL;
    p.qx = mm->x;
    p.qcols = (size_t)mm->p[0].w->cols;
    if (p.step || p.qa || p.pa) run_tokens(sc, &p);
    run_job(sc, &j);
}

/* ---- one-token products of different inputs in one region ---- */

#define GROUP_PIECE 64 /* rows per unit of work: a multiple of every kernel's blocks (16, 64) */

typedef struct mm_group {
    mm_job job[CQ_GROUP_MAX];
    unsigned count;
    uint32_t ustart[CQ_GROUP_MAX + 1]; /* job i's units are ustart[i] .. ustart[i + 1] */
    uint8_t *tok8;
    size_t tok8_stride;
    _Alignas(64) atomic_uint next; /* the next unit to hand out */
} mm_group;

static void group_task(void *ctx, unsigned tid, unsigned nt) {
    (void)nt;
    mm_group *g = ctx;
    uint8_t *buf = g->tok8 ? g->tok8 + (size_t)tid * CQ_DECODE_MAX * g->tok8_stride : NULL;
    const float *prepared = NULL; /* the input buf holds, in layouts prep_layouts */
    int prep_layouts = 0;
    unsigned i = 0;
    for (;;) {
        unsigned u = atomic_fetch_add_explicit(&g->next, 1, memory_order_relaxed);
        while (i < g->count && u >= g->ustart[i + 1]) /* units go out in increasing order */
            i++;
        if (i >= g->count) return; /* all handed out */
        const mm_job *j = &g->job[i];
        const void *tok = NULL;
        if (j->tok8_layouts && buf) {
            if (prepared != j->x || prep_layouts != j->tok8_layouts) {
                cmf_tok8_prepare(buf, j->x, j->p[0].w->cols, j->tok8_layouts);
                prepared = j->x, prep_layouts = j->tok8_layouts;
            }
            tok = buf;
        }
        uint64_t rows = j->p[0].w->rows, r0 = (uint64_t)(u - g->ustart[i]) * GROUP_PIECE;
        uint64_t r1 = r0 + GROUP_PIECE < rows ? r0 + GROUP_PIECE : rows;
        part_rows(j, &j->p[0], r0, r1, tok, NULL, 0);
        if (j->glu) {
            part_rows(j, &j->p[1], r0, r1, tok, NULL, 0);
            glu_rows(j, r0, r1);
        }
    }
}

void cq_matmul_group(cq_sched *sc, const cq_matmul *mm, unsigned count) {
    const cortiq_model *m = sc->m;
    mm_group g = {.count = count, .tok8 = sc->tok8, .tok8_stride = sc->tok8_stride};
    atomic_init(&g.next, 0);
    uint32_t units = 0;
    for (unsigned i = 0; i < CQ_GROUP_MAX; i++) {
        g.ustart[i] = units;
        if (i >= count) continue;
        mm_job *j = &g.job[i];
        *j = (mm_job){.np = mm[i].np,
                      .x = mm[i].x,
                      .n = 1,
                      .glu = mm[i].glu,
                      .act = m->act,
                      .flags = m->kflags,
                      .q4flags = m->q4flags,
                      .bf16flags = m->bf16flags};
        for (unsigned k = 0; k < j->np; k++) {
            mm_part *p = &j->p[k];
            *p = (mm_part){.w = mm[i].p[k].w, .y = mm[i].p[k].y, .ldy = (size_t)mm[i].p[k].w->rows};
            p->tok8 =
                sc->tok8 && (part_flags(j, p) & CMF_KF_INT8_ACT) ? cmf_tok8_supports(p->w) : 0;
            j->tok8_layouts |= p->tok8;
        }
        units += (uint32_t)((j->p[0].w->rows + GROUP_PIECE - 1) / GROUP_PIECE);
    }
    g.ustart[CQ_GROUP_MAX] = units;
    cq_pool_run(m->pool, group_task, &g);
}

void cq_matmul_one(cq_sched *sc, const cmf_qmat *w, const float *x, size_t n, float *y) {
    cq_matmul mm = {.p = {{.w = w, .y = y}}, .np = 1, .x = x, .n = n};
    cq_matmul_after(sc, NULL, NULL, &mm);
}
