/* attention.c - a layer's attention over the thread pool (attention.h). */
#include "engine/attention.h"

#include <stdlib.h>
#include <string.h>

#include "engine/attn_batch.h"
#include "engine/attn_decode.h"

bool cq_attention_init(cq_attention *a, const cortiq_model *m, uint32_t ctx) {
    memset(a, 0, sizeof *a);
    unsigned nt = cq_pool_size(m->pool);
    uint32_t max_heads = 0, max_group = 1;
    for (uint32_t l = 0; l < m->n_layers; l++) {
        uint32_t heads = m->layers[l].n_heads;
        if (heads > max_heads) max_heads = heads;
        if (heads / m->n_kv > max_group) max_group = heads / m->n_kv;
    }
    a->batch_stride = (cq_attn_batch_scratch_bytes(m->head_dim, ctx) + 63) / 64 * 16;
    a->batch_scratch = aligned_alloc(64, nt * a->batch_stride * sizeof(float));
    a->decode_stride = (cq_attn_decode_scratch_floats(max_group, ctx) + 15) / 16 * 16;
    a->decode_scratch = aligned_alloc(64, nt * a->decode_stride * sizeof(float));
    a->decode_part = malloc(cq_attn_decode_part_floats(max_heads, m->head_dim) * sizeof(float));
    a->decode_done = malloc(m->n_kv * sizeof *a->decode_done);
    return a->batch_scratch && a->decode_scratch && a->decode_part && a->decode_done;
}

void cq_attention_free(cq_attention *a) {
    free(a->batch_scratch), free(a->decode_scratch), free(a->decode_part), free(a->decode_done);
}

/* Tokens per unit of a batch: the fewest whose rows (tokens x group) fill whole row blocks, so no
 * block runs mostly empty lanes. With 32 / group rounded up instead, a group of 3 made units of
 * 33 rows, a block of 32 and one of a single row, which still cost about half a full one. */
static uint32_t batch_range(uint32_t group) {
    uint32_t a = CQ_ATTN_BATCH_ROWS, b = group ? group : 1;
    while (b) { /* gcd(32, group) */
        uint32_t t = a % b;
        a = b, b = t;
    }
    return CQ_ATTN_BATCH_ROWS / a;
}

typedef struct batch_job {
    cq_attn_batch_args args;
    uint32_t n_kv, range, n_ranges;
    size_t n;
    float *scratch;
    size_t stride;
    atomic_uint next;
} batch_job;

static void batch_task(void *ctx, unsigned tid, unsigned nt) {
    (void)nt;
    batch_job *j = ctx;
    float *scratch = j->scratch + tid * j->stride;
    for (;;) {
        unsigned u = atomic_fetch_add(&j->next, 1);
        if (u >= j->n_kv * j->n_ranges) break;
        /* the last tokens attend the most keys: they go first, the short ranges fill in */
        uint32_t kvh = u % j->n_kv, r = j->n_ranges - 1 - u / j->n_kv;
        size_t t0 = (size_t)r * j->range, t1 = t0 + j->range < j->n ? t0 + j->range : j->n;
        cq_attn_batch(&j->args, kvh, (uint32_t)t0, (uint32_t)t1, scratch);
    }
}

typedef struct decode_job {
    cq_attn_decode_args args;
    uint32_t n_kv, n_chunks;
    float *scratch;
    size_t stride;
    atomic_uint next;
    atomic_uint *done; /* per kv head: chunks finished */
} decode_job;

static void decode_job_init(decode_job *j, cq_attention *a, const cortiq_model *m,
                            const cq_layer *y, const cq_kv_layer *kv, const float *q, float *att,
                            uint32_t pos, uint32_t n_heads, const uint32_t *kv_first) {
    /* the compound literal zeroes the rest, next included */
    *j = (decode_job){.args = {.kv = kv,
                               .q = q,
                               .out = att,
                               .part = a->decode_part,
                               .n_heads = n_heads,
                               .pos = pos,
                               .window = y->sliding ? m->sliding_window : 0,
                               .scale = m->attn_scale,
                               .softcap = m->attn_softcap,
                               .kv_first = kv_first},
                      .n_kv = m->n_kv,
                      .scratch = a->decode_scratch,
                      .stride = a->decode_stride,
                      .done = a->decode_done};
    uint32_t keys = pos + 1 - cq_attn_decode_first_key(&j->args);
    j->args.chunk = cq_attn_decode_chunk(keys, m->n_kv, cq_pool_size(m->pool));
    j->n_chunks = cq_attn_decode_chunks(&j->args);
    for (uint32_t h = 0; h < m->n_kv; h++)
        atomic_store(&a->decode_done[h], 0);
}

/* Unit u of the job on thread tid; the last chunk of a kv head to finish merges them. */
static void decode_unit(decode_job *j, unsigned u, unsigned tid) {
    uint32_t kvh = u / j->n_chunks, ch = u % j->n_chunks;
    cq_attn_decode_unit(&j->args, kvh, ch, j->scratch + tid * j->stride);
    /* seq_cst: the last finisher sees every other chunk's partials */
    if (atomic_fetch_add(&j->done[kvh], 1) + 1 == j->n_chunks)
        cq_attn_decode_combine(&j->args, kvh);
}

static void decode_task(void *ctx, unsigned tid, unsigned nt) {
    (void)nt;
    decode_job *j = ctx;
    for (unsigned u; (u = atomic_fetch_add(&j->next, 1)) < j->n_kv * j->n_chunks;)
        decode_unit(j, u, tid);
}

/* Several sessions' decode attention in one pool run: units numbered session after session. */
typedef struct decode_jobs {
    decode_job j[CQ_ATTN_SESSIONS_PER_RUN];
    unsigned end[CQ_ATTN_SESSIONS_PER_RUN]; /* one past each job's last unit */
    size_t n;
    atomic_uint next;
} decode_jobs;

static void decode_jobs_task(void *ctx, unsigned tid, unsigned nt) {
    (void)nt;
    decode_jobs *js = ctx;
    size_t t = 0;
    for (unsigned u; (u = atomic_fetch_add(&js->next, 1)) < js->end[js->n - 1];) {
        while (u >= js->end[t]) /* units are taken in increasing order */
            t++;
        decode_unit(&js->j[t], t ? u - js->end[t - 1] : u, tid);
    }
}

void cq_attention_run_sessions(cq_attention *const *as, const cortiq_model *m, const cq_layer *y,
                               const cq_kv_layer *const *kvs, const float *q, float *att, size_t n,
                               const uint32_t *pos, uint32_t n_heads, const uint32_t *kv_first) {
    size_t qd = (size_t)n_heads * m->head_dim;
    decode_jobs js = {.n = n};
    for (size_t t = 0; t < n; t++) {
        decode_job_init(&js.j[t], as[t], m, y, kvs[t], q + t * qd, att + t * qd, pos[t], n_heads,
                        kv_first);
        js.end[t] = (t ? js.end[t - 1] : 0) + js.j[t].n_kv * js.j[t].n_chunks;
    }
    cq_pool_run(m->pool, decode_jobs_task, &js);
}

void cq_attention_run(cq_attention *a, const cortiq_model *m, const cq_layer *y,
                      const cq_kv_layer *kv, const float *q, float *att, size_t n, uint32_t pos0,
                      uint32_t n_heads, const uint32_t *kv_first) {
    uint32_t window = y->sliding ? m->sliding_window : 0;
    if (n == 1) {
        decode_job j;
        decode_job_init(&j, a, m, y, kv, q, att, pos0, n_heads, kv_first);
        cq_pool_run(m->pool, decode_task, &j);
        return;
    }
    uint32_t range = batch_range(y->n_heads / m->n_kv);
    batch_job j = {.args = {.kv = kv,
                            .q = q,
                            .out = att,
                            .n_heads = n_heads,
                            .pos0 = pos0,
                            .window = window,
                            .scale = m->attn_scale,
                            .softcap = m->attn_softcap,
                            .kv_first = kv_first},
                   .n_kv = m->n_kv,
                   .range = range,
                   .n_ranges = (uint32_t)((n + range - 1) / range),
                   .n = n,
                   .scratch = a->batch_scratch,
                   .stride = a->batch_stride};
    cq_pool_run(m->pool, batch_task, &j);
}
