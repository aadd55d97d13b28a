/* defrag_file.c - `cortiq defrag FILE --task NAME`: bake one task mask into the weights (spec
 * §11). Live FFN neurons (gate/up rows, down columns) and live attention heads (q rows, o
 * columns) are gathered and re-encoded at the smaller shape; every other tensor is copied
 * byte for byte; the masks section and the sparse index are left out. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/err.h"
#include "convert/defrag_plan.h"
#include "convert/recode.h"
#include "cortiq/converter.h"
#include "cortiq/writer.h"

typedef struct job {
    cq_recode r;
    cmf_status st;
} job;

static cmf_status produce(void *user, cmf_sink *sink, cmf_err *err) {
    job *j = user;
    uint8_t *buf;
    size_t len;
    cmf_status st = cq_recode_run(&j->r, &buf, &len, err);
    if (!st) st = cmf_sink_write(sink, buf, len, err);
    free(buf);
    return st;
}

/* Layer index and the rest of a "model.layers.{l}.{rest}" name, or false. */
static bool layer_name(const char *name, uint32_t *l, const char **rest) {
    if (strncmp(name, "model.layers.", 13)) return false;
    char *end;
    unsigned long v = strtoul(name + 13, &end, 10);
    if (end == name + 13 || *end != '.' || v > 0xffffffffu) return false;
    *l = (uint32_t)v;
    *rest = end + 1;
    return true;
}

static const cmf_tensor *find_l(const cmf_file *f, uint32_t l, const char *suffix) {
    char name[256];
    snprintf(name, sizeof name, "model.layers.%u.%s", l, suffix);
    return cmf_file_find(f, name);
}

/* Whether bits [from, to) of a row are all set / all clear. */
static bool bits_all(const uint8_t *row, uint32_t from, uint32_t to, bool set) {
    for (uint32_t i = from; i < to; i++)
        if (cmf_bit(row, i) != set) return false;
    return true;
}

typedef struct ctx {
    const char *path;
    const cmf_file *f;
    const cmf_masks *ms;
    const cmf_mask *mk;
    cq_defrag_plan p;
    uint8_t *flags; /* scratch, one byte per neuron / head */
    cmf_err *err;
} ctx;

static cmf_status plan_ffn(ctx *c, uint32_t l) {
    cq_defrag_layer *y = &c->p.layers[l];
    const uint8_t *row = c->mk->ffn + (size_t)l * c->ms->ffn_bytes;
    const cmf_tensor *g = find_l(c->f, l, "mlp.gate_proj.weight"),
                     *u = find_l(c->f, l, "mlp.up_proj.weight"),
                     *d = find_l(c->f, l, "mlp.down_proj.weight");
    if (!g || !u || !d) {
        if (find_l(c->f, l, "mlp.gate.weight") && !bits_all(row, 0, c->ms->intermediate, true))
            return cmf_err_set(c->err, CMF_E_UNSUPPORTED, c->path,
                               "task '%s' masks FFN neurons of MoE layer %u: spec §11 prunes "
                               "dense FFNs; experts are dropped by `moe-defrag` (§11.1)",
                               c->mk->name, l);
        if (!bits_all(row, 0, c->ms->intermediate, true) && !find_l(c->f, l, "mlp.gate.weight"))
            return cmf_err_set(c->err, CMF_E_UNSUPPORTED, c->path,
                               "task '%s' masks FFN neurons of layer %u, which has no "
                               "mlp.{gate,up,down}_proj",
                               c->mk->name, l);
        return CMF_OK;
    }
    if (g->ndim != 2 || u->ndim != 2 || d->ndim != 2 || u->shape[0] != g->shape[0] ||
        d->shape[1] != g->shape[0])
        return cmf_err_set(c->err, CMF_E_PARSE, c->path,
                           "layer %u: gate_proj rows, up_proj rows and down_proj columns differ "
                           "(spec §11 per-layer triple)",
                           l);
    y->dense = true;
    y->ffn = (uint32_t)g->shape[0];
    y->n_keep = y->ffn;
    if (y->ffn > c->ms->intermediate)
        return cmf_err_set(c->err, CMF_E_PARSE, c->path,
                           "layer %u has %u FFN neurons, more than the masks' intermediate_size %u",
                           l, y->ffn, c->ms->intermediate);
    if (!bits_all(row, y->ffn, c->ms->intermediate, false))
        return cmf_err_set(c->err, CMF_E_PARSE, c->path,
                           "task '%s' sets FFN bits past layer %u's %u neurons", c->mk->name, l,
                           y->ffn);
    for (uint32_t i = 0; i < y->ffn; i++)
        c->flags[i] = cmf_bit(row, i);
    return cq_defrag_set_ffn(&c->p, l, c->flags, c->path, c->err);
}

static cmf_status plan_heads(ctx *c, uint32_t l, uint32_t heads_l) {
    cq_defrag_layer *y = &c->p.layers[l];
    const uint8_t *row = c->mk->heads + (size_t)l * c->ms->head_bytes;
    const cmf_tensor *q = find_l(c->f, l, "self_attn.q_proj.weight");
    bool all = bits_all(row, 0, c->ms->n_heads, true);
    y->heads = heads_l;
    if (all) return CMF_OK;
    if (!q)
        return cmf_err_set(c->err, CMF_E_UNSUPPORTED, c->path,
                           "task '%s' masks heads of layer %u, which has no self_attn.q_proj "
                           "(only softmax attention heads are pruned)",
                           c->mk->name, l);
    if (heads_l > c->ms->n_heads)
        return cmf_err_set(c->err, CMF_E_UNSUPPORTED, c->path,
                           "layer %u has %u query heads, more than the %u the masks address "
                           "(num_attention_heads)",
                           l, heads_l, c->ms->n_heads);
    uint32_t hd = c->p.head_dim;
    if (q->ndim != 2 || q->shape[0] != (uint64_t)heads_l * hd)
        return cmf_err_set(c->err, CMF_E_UNSUPPORTED, c->path,
                           "layer %u: q_proj has %llu rows, not %u heads x %u (gated attention "
                           "heads are not pruned)",
                           l, (unsigned long long)q->shape[0], heads_l, hd);
    if (find_l(c->f, l, "self_attn.g_proj.weight"))
        return cmf_err_set(c->err, CMF_E_UNSUPPORTED, c->path,
                           "layer %u has per-head output gating (g_proj): its heads are not pruned",
                           l);
    if (!bits_all(row, heads_l, c->ms->n_heads, false))
        return cmf_err_set(c->err, CMF_E_PARSE, c->path,
                           "task '%s' sets head bits past layer %u's %u heads", c->mk->name, l,
                           heads_l);
    for (uint32_t h = 0; h < heads_l; h++)
        c->flags[h] = cmf_bit(row, h);
    return cq_defrag_set_heads(&c->p, l, c->flags, c->path, c->err);
}

static cmf_status build_plan(ctx *c) {
    const cmf_arch *a = &cmf_file_header(c->f)->arch;
    if (a->num_layers < 1 || a->num_attention_heads < 1 || a->hidden_size < 1)
        return cmf_err_set(c->err, CMF_E_PARSE, c->path,
                           "arch needs num_layers, num_attention_heads and hidden_size");
    c->p.n_layers = (uint32_t)a->num_layers;
    c->p.head_dim =
        (uint32_t)(a->head_dim > 0 ? a->head_dim : a->hidden_size / a->num_attention_heads);
    c->p.n_kv = (uint32_t)(a->num_kv_heads > 0 ? a->num_kv_heads : a->num_attention_heads);
    c->p.pre_intermediate = a->intermediate_size > 0 ? (uint32_t)a->intermediate_size : 0;
    c->p.layers = calloc(c->p.n_layers, sizeof *c->p.layers);
    size_t nflags = c->ms->intermediate > c->ms->n_heads ? c->ms->intermediate : c->ms->n_heads;
    c->flags = malloc(nflags ? nflags : 1);
    if (!c->p.layers || !c->flags) return cmf_err_set(c->err, CMF_E_NOMEM, c->path, "plan");
    if (c->ms->n_layers != c->p.n_layers)
        return cmf_err_set(c->err, CMF_E_PARSE, c->path, "masks cover %u layers, arch has %u",
                           c->ms->n_layers, c->p.n_layers);
    cmf_status st = CMF_OK;
    for (uint32_t l = 0; l < c->p.n_layers && !st; l++) {
        if (!cmf_bit(c->mk->gates, l))
            return cmf_err_set(c->err, CMF_E_UNSUPPORTED, c->path,
                               "task '%s' gates layer %u off: spec §11 prunes FFN neurons (and "
                               "here heads), not whole layers; run that task with `--task`",
                               c->mk->name, l);
        if (c->mk->experts && c->ms->n_experts &&
            !bits_all(c->mk->experts + (size_t)l * c->ms->expert_bytes, 0, c->ms->n_experts, true))
            return cmf_err_set(c->err, CMF_E_UNSUPPORTED, c->path,
                               "task '%s' restricts the experts of layer %u: experts are dropped "
                               "by `moe-defrag` (spec §11.1)",
                               c->mk->name, l);
        uint32_t heads_l = (uint32_t)a->num_attention_heads;
        if (a->n_heads_per_layer) heads_l = (uint32_t)a->attention_heads_per_layer[l];
        if (!(st = plan_ffn(c, l))) st = plan_heads(c, l, heads_l);
    }
    return st;
}

/* The recode of tensor t under the plan, or false when it is copied as is. */
static bool tensor_recode(const cq_defrag_plan *p, const cmf_tensor *t, cq_recode *r) {
    uint32_t l;
    const char *rest;
    if (!layer_name(t->name, &l, &rest) || l >= p->n_layers) return false;
    const cq_defrag_layer *y = &p->layers[l];
    memset(r, 0, sizeof *r);
    r->src = t;
    if (y->keep && (!strcmp(rest, "mlp.gate_proj.weight") || !strcmp(rest, "mlp.up_proj.weight") ||
                    !strcmp(rest, "mlp.gate_proj.bias") || !strcmp(rest, "mlp.up_proj.bias"))) {
        r->rows = y->keep, r->n_rows = y->n_keep;
    } else if (y->keep && !strcmp(rest, "mlp.down_proj.weight")) {
        r->cols = y->keep, r->n_cols = y->n_keep;
    } else if (y->q_rows && (!strcmp(rest, "self_attn.q_proj.weight") ||
                             !strcmp(rest, "self_attn.q_proj.bias"))) {
        r->rows = y->q_rows, r->n_rows = y->heads_out * p->head_dim;
    } else if (y->q_rows && !strcmp(rest, "self_attn.o_proj.weight")) {
        r->cols = y->o_cols, r->n_cols = y->heads_out * p->head_dim;
    } else {
        return false;
    }
    uint64_t shape[CMF_MAX_DIMS];
    cq_recode_shape(r, shape);
    r->dtype = cq_recode_dtype((cmf_dtype)t->dtype, t->ndim, shape);
    return true;
}

cmf_status cmf_defrag(const char *in_path, const char *task, const char *out_path,
                      const cmf_defrag_opts *opts, cmf_defrag_stats *stats, cmf_err *err) {
    cmf_file *f = NULL;
    ctx c = {.path = in_path, .err = err};
    json_t *hdr = NULL;
    char *hjson = NULL;
    job *jobs = NULL;
    cmf_writer *w = NULL;
    if (stats) memset(stats, 0, sizeof *stats);
    cmf_status st = cmf_open(in_path, 0, &f, err);
    if (st) return st;
    c.f = f;
    const cmf_header *h = cmf_file_header(f);
    if (h->has_shard) {
        st = cmf_err_set(err, CMF_E_UNSUPPORTED, in_path,
                         "a shard (spec §10): defrag reads one whole file");
        goto out;
    }
    if (h->n_skills) {
        st = cmf_err_set(err, CMF_E_UNSUPPORTED, in_path,
                         "the file carries %zu skill(s) (spec §9): their overlays are cut against "
                         "the full backbone; defrag a file without skills",
                         h->n_skills);
        goto out;
    }
    c.ms = cmf_file_masks(f);
    if (!c.ms) {
        st = cmf_err_set(err, CMF_E_NOT_FOUND, in_path,
                         "no masks section (spec §5): no task to bake");
        goto out;
    }
    c.mk = task ? cmf_masks_find(c.ms, task) : NULL;
    if (!c.mk) {
        char names[512] = "";
        for (size_t i = 0; i < c.ms->n_masks; i++) {
            size_t n = strlen(names);
            snprintf(names + n, sizeof names - n, "%s%s", i ? ", " : "", c.ms->masks[i].name);
        }
        st = cmf_err_set(err, CMF_E_NOT_FOUND, in_path, "no task '%s' (tasks: %s)",
                         task ? task : "(none)", names);
        goto out;
    }
    if ((st = build_plan(&c))) goto out;
    json_error_t je;
    hdr = json_loadb(h->json, h->json_len, 0, &je);
    if (!hdr) {
        st = cmf_err_set(err, CMF_E_PARSE, in_path, "header: %s", je.text);
        goto out;
    }
    if ((st = cq_defrag_header(&c.p, hdr, task, in_path, err))) goto out;
    hjson = json_dumps(hdr, JSON_COMPACT);
    size_t n = cmf_file_tensor_count(f);
    jobs = calloc(n ? n : 1, sizeof *jobs);
    if (!hjson || !jobs) {
        st = cmf_err_set(err, CMF_E_NOMEM, in_path, "header");
        goto out;
    }
    if ((st = cmf_writer_create(out_path, NULL, &w, err))) goto out;
    if ((st = cmf_writer_set_header(w, hjson, strlen(hjson), err))) goto out;
    for (size_t i = 0; i < n && !st; i++) {
        const cmf_tensor *t = cmf_file_tensor_at(f, i);
        if (!tensor_recode(&c.p, t, &jobs[i].r)) {
            st = cmf_writer_add_tensor_ref(w, t->name, (cmf_dtype)t->dtype, t->ndim, t->shape,
                                           t->data, t->nbytes, err);
            continue;
        }
        uint64_t shape[CMF_MAX_DIMS];
        cq_recode_shape(&jobs[i].r, shape);
        if (jobs[i].r.dtype != t->dtype) {
            if (stats) stats->fallbacks++;
            if (opts && opts->on_fallback)
                opts->on_fallback(opts->user, t->name, (cmf_dtype)t->dtype, jobs[i].r.dtype);
        }
        if (stats) stats->recoded++;
        st = cmf_writer_add_tensor_stream(w, t->name, jobs[i].r.dtype, t->ndim, shape, produce,
                                          &jobs[i], err);
    }
    size_t vlen;
    const uint8_t *vocab = cmf_file_vocab(f, &vlen);
    if (!st && vocab) st = cmf_writer_set_vocab(w, vocab, vlen, err);
    if (!st) st = cmf_writer_finish(w, err);
    if (!st && stats) {
        for (uint32_t l = 0; l < c.p.n_layers; l++) {
            const cq_defrag_layer *y = &c.p.layers[l];
            stats->neurons_before += y->dense ? y->ffn : 0;
            stats->neurons_after += y->dense ? y->n_keep : 0;
            stats->heads_before += y->heads;
            stats->heads_after += y->q_rows ? y->heads_out : y->heads;
            stats->heads_padded += y->n_dead_padded;
        }
        size_t len;
        cmf_file_shard_bytes(f, 0, &len);
        stats->in_bytes = len;
        struct stat sb;
        if (!stat(out_path, &sb)) stats->out_bytes = (uint64_t)sb.st_size;
    }
out:
    cmf_writer_free(w);
    free(jobs);
    free(hjson);
    json_decref(hdr);
    free(c.flags);
    cq_defrag_plan_free(&c.p);
    cmf_close(f);
    return st;
}
