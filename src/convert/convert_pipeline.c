/* convert_pipeline.c - the converter's engine: dtype policy per tensor, encoder threads that
 * run a bounded window ahead of the writer, streaming into cmf_writer, progress reports. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/err.h"
#include "cortiq/converter.h"
#include "cortiq/quant.h"
#include "cortiq/writer.h"

static const struct {
    const char *name;
    cmf_dtype dt;
} k_quant_names[] = {
    {"f32", CMF_DT_F32},      {"f16", CMF_DT_F16},     {"bf16", CMF_DT_BF16},
    {"q8", CMF_DT_Q8_ROW},    {"q8_2f", CMF_DT_Q8_2F}, {"q4", CMF_DT_Q4_BLOCK},
    {"q4t", CMF_DT_Q4_TILED}, {"q4tp", CMF_DT_Q4TP},   {"vbit", CMF_DT_VBIT_RO},
    {"q1s", CMF_DT_Q1S},      {"q1t", CMF_DT_Q1T},     {"q1", CMF_DT_Q1},
};

bool cmf_convert_quant_from_name(const char *name, cmf_dtype *out) {
    for (size_t i = 0; i < sizeof k_quant_names / sizeof k_quant_names[0]; i++)
        if (!strcmp(name, k_quant_names[i].name)) return *out = k_quant_names[i].dt, true;
    return cmf_dtype_from_name(name, out);
}

void cmf_convert_opts_default(cmf_convert_opts *o) {
    memset(o, 0, sizeof *o);
    o->quant = CMF_DT_Q8_ROW;
    o->vbit_mean_bits = 4.25;
}

static bool is_embedding(const char *name) {
    size_t n = strlen(name);
    const char *suf = "embed_tokens.weight";
    return n >= strlen(suf) && !strcmp(name + n - strlen(suf), suf);
}

static bool is_head(const char *name) {
    return !strcmp(name, "lm_head.weight");
}

cmf_dtype cmf_convert_pick_dtype(const cmf_convert_opts *o, const char *name, unsigned ndim,
                                 const uint64_t *shape, bool *fell_back) {
    *fell_back = false;
    cmf_dtype want = o->quant;
    if (is_embedding(name) && o->has_embed_quant) want = o->embed_quant;
    if (is_head(name) && o->has_head_quant) want = o->head_quant;
    uint64_t numel = 1;
    for (unsigned i = 0; i < ndim; i++)
        numel *= shape[i];
    if (ndim <= 1 || numel < 32) return CMF_DT_F16; /* spec §3.2: 1-D and tiny tensors */
    const cmf_dtype_traits *t = cmf_dtype_get(want);
    bool ok = t != NULL;
    if (ok && t->matrix_only && ndim != 2) ok = false;
    if (ok && t->needs_in_mult32 && shape[ndim - 1] % 32) ok = false;
    if (ok && want == CMF_DT_Q1T && shape[1] > 65535) ok = false;
    if (ok) return cmf_quant_policy_dtype(want, ndim, shape);
    *fell_back = true;
    return ndim == 2 ? CMF_DT_Q8_ROW : CMF_DT_F16;
}

/* ---- encoder threads ---- */
typedef struct slot {
    uint8_t *buf;
    size_t len;
    cmf_status st;
    char msg[CMF_ERR_MSG_MAX];
    int done;
} slot;

typedef struct pipeline {
    const cmf_convert_source *src;
    const cmf_dtype *dtypes;
    size_t n;
    cmf_quant_opts qopts;
    slot *slots;
    size_t next;    /* next tensor a worker takes */
    size_t written; /* tensors the writer consumed */
    size_t window;
    int abort;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    uint64_t out_bytes;
    /* progress */
    cmf_convert_progress_fn on_progress;
    void *progress_user;
    double t0;
    uint64_t source_total, source_done;
} pipeline;

typedef struct producer_arg {
    pipeline *p;
    size_t k;
} producer_arg;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void encode_one(pipeline *p, size_t k, slot *s) {
    const cmf_convert_source *src = &p->src[k];
    uint64_t numel = 1;
    for (unsigned i = 0; i < src->ndim; i++)
        numel *= src->shape[i];
    cmf_err err;
    cmf_err_clear(&err);
    float *f = malloc((numel ? numel : 1) * sizeof *f);
    if (!f) {
        s->st = cmf_err_set(&err, CMF_E_NOMEM, src->name, "%llu floats", (unsigned long long)numel);
    } else {
        s->st = src->read_f32(src->user, src, f, &err);
        if (!s->st)
            s->st = cmf_quant_encode(p->dtypes[k], src->ndim, src->shape, f, &p->qopts, &s->buf,
                                     &s->len, &err);
        free(f);
    }
    if (s->st) snprintf(s->msg, sizeof s->msg, "%s", err.msg);
}

static void *worker(void *arg) {
    pipeline *p = arg;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (!p->abort && p->next < p->n && p->next >= p->written + p->window)
            pthread_cond_wait(&p->cv, &p->mu);
        if (p->abort || p->next >= p->n) break;
        size_t k = p->next++;
        pthread_mutex_unlock(&p->mu);
        slot s;
        memset(&s, 0, sizeof s);
        encode_one(p, k, &s);
        pthread_mutex_lock(&p->mu);
        s.done = 1;
        p->slots[k] = s;
        pthread_cond_broadcast(&p->cv);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

static void report_progress(pipeline *p, size_t done, bool final) {
    if (!p->on_progress) return;
    cmf_convert_progress r = {.tensors_done = done,
                              .tensors_total = p->n,
                              .source_bytes_done = p->source_done,
                              .source_bytes_total = p->source_total,
                              .seconds = now_s() - p->t0,
                              .final = final};
    p->on_progress(p->progress_user, &r);
}

static cmf_status produce(void *user, cmf_sink *sink, cmf_err *err) {
    producer_arg *a = user;
    pipeline *p = a->p;
    pthread_mutex_lock(&p->mu);
    while (!p->slots[a->k].done)
        pthread_cond_wait(&p->cv, &p->mu);
    slot s = p->slots[a->k];
    p->slots[a->k].buf = NULL;
    pthread_mutex_unlock(&p->mu);
    cmf_status st = s.st;
    if (st) {
        if (err) {
            err->code = st;
            snprintf(err->msg, sizeof err->msg, "%s", s.msg);
        }
    } else {
        st = cmf_sink_write(sink, s.buf, s.len, err);
    }
    free(s.buf);
    pthread_mutex_lock(&p->mu);
    p->written++;
    p->out_bytes += s.len;
    p->source_done += p->src[a->k].source_bytes;
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    report_progress(p, a->k + 1, a->k + 1 == p->n);
    return st;
}

cmf_status cmf_convert_run(const char *out_path, const char *header_json,
                           const cmf_convert_source *src, size_t n, const uint8_t *vocab,
                           size_t vocab_len, const uint8_t *masks, size_t masks_len,
                           const cmf_convert_opts *opts, cmf_convert_stats *stats, cmf_err *err) {
    cmf_convert_opts dflt;
    if (!opts) {
        cmf_convert_opts_default(&dflt);
        opts = &dflt;
    }
    if (opts->quant == CMF_DT_Q1 && !opts->allow_q1)
        return cmf_err_set(err, CMF_E_INVALID_ARG, out_path,
                           "q1 is only for 1-bit-trained models: it destroys a normal checkpoint; "
                           "opt in explicitly");
    pipeline p;
    memset(&p, 0, sizeof p);
    p.src = src;
    p.n = n;
    cmf_quant_opts_default(&p.qopts);
    p.qopts.vbit_mean_bits = opts->vbit_mean_bits > 0 ? opts->vbit_mean_bits : 4.25;
    unsigned threads = opts->threads;
    if (!threads) {
        long c = sysconf(_SC_NPROCESSORS_ONLN);
        threads = c > 0 ? (unsigned)c : 1;
    }
    if (threads > 32) threads = 32;
    p.window = threads + 1;
    p.on_progress = opts->on_progress;
    p.progress_user = opts->progress_user;
    cmf_dtype *dtypes = calloc(n ? n : 1, sizeof *dtypes);
    p.slots = calloc(n ? n : 1, sizeof *p.slots);
    producer_arg *args = calloc(n ? n : 1, sizeof *args);
    cmf_status st = (!dtypes || !p.slots || !args)
                        ? cmf_err_set(err, CMF_E_NOMEM, out_path, "converter")
                        : CMF_OK;
    size_t fallbacks = 0;
    for (size_t i = 0; i < n && !st; i++) {
        bool fb;
        dtypes[i] = cmf_convert_pick_dtype(opts, src[i].name, src[i].ndim, src[i].shape, &fb);
        if (fb && src[i].fallback_q8_2f && src[i].ndim == 2) dtypes[i] = CMF_DT_Q8_2F;
        if (fb) {
            fallbacks++;
            if (opts->on_fallback)
                opts->on_fallback(opts->progress_user, src[i].name, opts->quant, dtypes[i]);
        }
        p.source_total += src[i].source_bytes;
    }
    p.dtypes = dtypes;
    pthread_mutex_init(&p.mu, NULL);
    pthread_cond_init(&p.cv, NULL);
    cmf_writer *w = NULL;
    cmf_writer_opts wo = {.shard_max_bytes = opts->shard_max_bytes};
    if (!st) st = cmf_writer_create(out_path, &wo, &w, err);
    if (!st) st = cmf_writer_set_header(w, header_json, strlen(header_json), err);
    for (size_t i = 0; i < n && !st; i++) {
        args[i] = (producer_arg){&p, i};
        st = cmf_writer_add_tensor_stream(w, src[i].name, dtypes[i], src[i].ndim, src[i].shape,
                                          produce, &args[i], err);
    }
    if (!st && vocab) st = cmf_writer_set_vocab(w, vocab, vocab_len, err);
    if (!st && masks) st = cmf_writer_set_masks(w, masks, masks_len, err);
    pthread_t tids[32];
    unsigned started = 0;
    p.t0 = now_s();
    if (!st) {
        for (unsigned t = 0; t < threads; t++)
            if (pthread_create(&tids[started], NULL, worker, &p) == 0) started++;
        if (!started) st = cmf_err_set(err, CMF_E_IO, out_path, "cannot start encoder threads");
    }
    if (!st) st = cmf_writer_finish(w, err);
    pthread_mutex_lock(&p.mu);
    p.abort = 1;
    pthread_cond_broadcast(&p.cv);
    pthread_mutex_unlock(&p.mu);
    for (unsigned t = 0; t < started; t++)
        pthread_join(tids[t], NULL);
    if (stats) {
        stats->tensors = n;
        stats->fallbacks = fallbacks;
        stats->source_bytes = p.source_total;
        stats->output_bytes = p.out_bytes;
        stats->seconds = now_s() - p.t0;
    }
    for (size_t i = 0; p.slots && i < n; i++)
        free(p.slots[i].buf);
    cmf_writer_free(w);
    pthread_mutex_destroy(&p.mu);
    pthread_cond_destroy(&p.cv);
    free(dtypes);
    free(p.slots);
    free(args);
    return st;
}

/* Canonical order: embeddings, the layers in numeric order, the rest (norm, head), each group
 * in natural name order. */
static int group_of(const char *name) {
    if (strstr(name, "embed_tokens")) return 0;
    if (!strncmp(name, "model.layers.", 13)) return 1;
    if (!strcmp(name, "lm_head.weight")) return 3;
    return 2;
}

/* Sort key: a layer's experts role-contiguously (spec §2.2 SHOULD: every gate_proj of experts
 * 0..N-1, then every up_proj, then every down_proj), everything else by name. */
static void sort_key(const char *name, char *key, size_t cap) {
    const char *e = strstr(name, ".mlp.experts.");
    snprintf(key, cap, "%s", name);
    if (!e) return;
    const char *num = e + 13, *dot = strchr(num, '.');
    if (!dot || num == dot) return;
    const char *role = dot + 1;
    int rank = !strncmp(role, "gate_proj", 9)   ? 0
               : !strncmp(role, "up_proj", 7)   ? 1
               : !strncmp(role, "down_proj", 9) ? 2
                                                : 3;
    snprintf(key, cap, "%.*s.mlp.experts.%d.%.*s.%s", (int)(e - name), name, rank, (int)(dot - num),
             num, role);
}

static int cmp_canonical(const void *a, const void *b) {
    const cmf_convert_source *x = a, *y = b;
    int gx = group_of(x->name), gy = group_of(y->name);
    if (gx != gy) return gx - gy;
    char kx[512], ky[512];
    sort_key(x->name, kx, sizeof kx);
    sort_key(y->name, ky, sizeof ky);
    return cmf_convert_name_cmp(kx, ky);
}

void cmf_convert_sort_canonical(cmf_convert_source *src, size_t n) {
    qsort(src, n, sizeof *src, cmp_canonical);
}

int cmf_convert_name_cmp(const char *a, const char *b) {
    while (*a && *b) {
        if (*a >= '0' && *a <= '9' && *b >= '0' && *b <= '9') {
            const char *x = a, *y = b;
            while (*x == '0')
                x++;
            while (*y == '0')
                y++;
            size_t lx = 0, ly = 0;
            while (x[lx] >= '0' && x[lx] <= '9')
                lx++;
            while (y[ly] >= '0' && y[ly] <= '9')
                ly++;
            if (lx != ly) return lx < ly ? -1 : 1;
            int c = strncmp(x, y, lx);
            if (c) return c;
            a = x + lx;
            b = y + ly;
            continue;
        }
        if (*a != *b) return (unsigned char)*a < (unsigned char)*b ? -1 : 1;
        a++, b++;
    }
    return *a ? 1 : (*b ? -1 : 0);
}
