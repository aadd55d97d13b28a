/* model_load.c - bind a CMF file to the runtime: header fields and tensor presence decide the
 * operators (spec §2); every dimension is capped and checked against the tensors before any
 * allocation, and every tensor the model needs is named when missing. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/f16.h"
#include "cortiq/quant.h"
#include "engine/gdn.h"
#include "engine/model.h"
#include "engine/mtp.h"
#include "engine/skill_overlay.h"

typedef struct loader {
    cortiq_model *m;
    const char *path;
    cmf_err *err;
    cmf_status overlay_st; /* a blended tensor that could not be built */
} loader;

/* The MTP head's block (spec §2.1) loads as layer n_layers: its tensors are named
 * model.mtp.layers.0.* where the main layers' are model.layers.{l}.* */
static const char *block_name(const cortiq_model *m, const char *name, char *buf, size_t size) {
    unsigned long l;
    int used = 0;
    if (!m->mtp || sscanf(name, "model.layers.%lu.%n", &l, &used) != 1 || !used || l != m->n_layers)
        return name;
    snprintf(buf, size, "model.mtp.layers.0.%s", name + used);
    return buf;
}

/* Every tensor goes through the skill overlay (spec §9 tensor-source indirection). */
static const cmf_tensor *lookup(loader *L, const char *name) {
    cmf_status st;
    char buf[320];
    name = block_name(L->m, name, buf, sizeof buf);
    const cmf_tensor *t = cq_overlay_find(L->m, name, &st, L->overlay_st ? NULL : L->err);
    if (st && !L->overlay_st) L->overlay_st = st;
    return t;
}

static const cmf_tensor *find(loader *L, const char *fmt, int layer) {
    char name[256];
    snprintf(name, sizeof name, fmt, layer);
    return lookup(L, name);
}

static cmf_status missing(loader *L, const char *fmt, int layer) {
    if (L->overlay_st) return L->overlay_st;
    char name[256], buf[320];
    snprintf(name, sizeof name, fmt, layer);
    return cmf_err_set(L->err, CMF_E_NOT_FOUND, L->path,
                       "tensor '%s' is required by this model but absent",
                       block_name(L->m, name, buf, sizeof buf));
}

/* A matrix view [rows, cols] with the expected shape (rows 0 = any). */
static cmf_status bind_mat(loader *L, cmf_qmat *q, const cmf_tensor *t, uint64_t rows,
                           uint64_t cols) {
    if (t->ndim != 2 || (rows && t->shape[0] != rows) || t->shape[1] != cols)
        return cmf_err_set(L->err, CMF_E_PARSE, L->path,
                           "tensor '%s' shape [%llu, %llu] but the header implies [%llu, %llu]",
                           t->name, (unsigned long long)t->shape[0],
                           (unsigned long long)(t->ndim > 1 ? t->shape[1] : 0),
                           (unsigned long long)rows, (unsigned long long)cols);
    cmf_status st = cmf_qmat_init(q, (cmf_dtype)t->dtype, t->shape[0], t->shape[1], t->data,
                                  t->nbytes, t->name, L->err);
    if (!st) L->m->weight_bytes += t->nbytes;
    return st;
}

cmf_status cq_load_floats(const cmf_tensor *t, uint64_t n, const char *path, float **out,
                          cmf_err *err) {
    uint64_t numel = 1;
    for (unsigned i = 0; i < t->ndim; i++)
        numel *= t->shape[i];
    if (numel != n)
        return cmf_err_set(err, CMF_E_PARSE, path,
                           "tensor '%s' has %llu elements, the header implies %llu", t->name,
                           (unsigned long long)numel, (unsigned long long)n);
    float *v = malloc(n * sizeof *v);
    if (!v) return cmf_err_set(err, CMF_E_NOMEM, path, "tensor '%s'", t->name);
    cmf_status st =
        cmf_quant_dequant((cmf_dtype)t->dtype, t->ndim, t->shape, t->data, t->nbytes, v, err);
    if (st) {
        free(v);
        return st;
    }
    *out = v;
    return CMF_OK;
}

/* A vector of n floats (1-D tensor, any dtype), plus `add` to every element (gemma's 1+w). */
static cmf_status load_vec(loader *L, const cmf_tensor *t, uint64_t n, float add, float **out) {
    cmf_status st = cq_load_floats(t, n, L->path, out, L->err);
    if (st) return st;
    for (uint64_t i = 0; i < n; i++)
        (*out)[i] += add;
    return CMF_OK;
}

static cmf_status opt_vec(loader *L, const char *fmt, int layer, uint64_t n, float add,
                          float **out) {
    const cmf_tensor *t = find(L, fmt, layer);
    *out = NULL;
    return t ? load_vec(L, t, n, add, out) : CMF_OK;
}

static cmf_status cap(loader *L, const char *field, int64_t v, int64_t lo, int64_t hi,
                      uint32_t *out) {
    if (v < lo || v > hi)
        return cmf_err_set(L->err, v < lo ? CMF_E_PARSE : CMF_E_LIMIT, L->path,
                           "arch.%s=%lld outside the supported range [%lld, %lld]", field,
                           (long long)v, (long long)lo, (long long)hi);
    *out = (uint32_t)v;
    return CMF_OK;
}

/* inv_freq for rot_dim dims with theta, adjusted by the header's rope scaling. */
static void rope_freqs(const cmf_arch *a, float theta, uint32_t rot_dim, bool global, float *inv,
                       float *mscale) {
    uint32_t half = rot_dim / 2;
    *mscale = 1.0f;
    for (uint32_t i = 0; i < half; i++)
        inv[i] = (float)(1.0 / pow((double)theta, (double)(2 * i) / (double)rot_dim));
    if (!global) return;
    if (a->yarn.present) {
        double factor = a->yarn.factor, orig = a->yarn.original_max_position_embeddings;
        double bf = a->yarn.beta_fast, bs = a->yarn.beta_slow, dim = rot_dim;
        double att = a->yarn.has_attention_factor ? a->yarn.attention_factor
                                                  : (factor <= 1 ? 1.0 : 0.1 * log(factor) + 1.0);
        double lo = floor(dim * log(orig / (bf * 2 * M_PI)) / (2 * log(theta)));
        double hi = ceil(dim * log(orig / (bs * 2 * M_PI)) / (2 * log(theta)));
        if (lo < 0) lo = 0;
        if (hi > dim - 1) hi = dim - 1;
        if (lo == hi) hi += 0.001;
        for (uint32_t i = 0; i < half; i++) {
            double pos_freq = pow(theta, (double)(2 * i) / dim);
            double extra = 1.0 / pos_freq, inter = 1.0 / (factor * pos_freq);
            double ramp = ((double)i - lo) / (hi - lo);
            ramp = ramp < 0 ? 0 : ramp > 1 ? 1 : ramp;
            double ef = 1.0 - ramp;
            inv[i] = (float)(inter * (1 - ef) + extra * ef);
        }
        *mscale = (float)att;
        return;
    }
    const cmf_rope_scaling *r = &a->rope_scaling;
    if (!r->present || !r->type || !strcmp(r->type, "default")) return;
    if (!strcmp(r->type, "linear")) {
        for (uint32_t i = 0; i < half; i++)
            inv[i] = (float)(inv[i] / r->factor);
    } else if (!strcmp(r->type, "llama3")) {
        double orig = r->original_max_position_embeddings, lff = r->low_freq_factor,
               hff = r->high_freq_factor;
        double lo_wl = orig / lff, hi_wl = orig / hff;
        for (uint32_t i = 0; i < half; i++) {
            double f = inv[i], wl = 2 * M_PI / f;
            double scaled = wl > lo_wl ? f / r->factor : f;
            if (!(wl < hi_wl) && !(wl > lo_wl)) {
                double smooth = (orig / wl - lff) / (hff - lff);
                scaled = (1 - smooth) * scaled / r->factor + smooth * scaled;
            }
            inv[i] = (float)scaled;
        }
    }
}

/* A gated MLP gate/up/down = t[0..2]; its width comes from the tensors (defragged files shrink
 * it per layer, spec §11). */
static cmf_status bind_ffn(loader *L, const cmf_tensor *const *t, cmf_qmat *wg, cmf_qmat *wu,
                           cmf_qmat *wd, uint32_t *width) {
    cmf_status st;
    uint64_t ffn = t[0]->ndim == 2 ? t[0]->shape[0] : 0;
    if (ffn < 1 || ffn > CQ_MAX_FFN)
        return cmf_err_set(L->err, CMF_E_LIMIT, L->path,
                           "tensor '%s' FFN width %llu outside [1, %u]", t[0]->name,
                           (unsigned long long)ffn, CQ_MAX_FFN);
    *width = (uint32_t)ffn;
    if ((st = bind_mat(L, wg, t[0], ffn, L->m->hidden))) return st;
    if ((st = bind_mat(L, wu, t[1], ffn, L->m->hidden))) return st;
    return bind_mat(L, wd, t[2], L->m->hidden, ffn);
}

/* The gated MLP named base.{gate,up,down}_proj.weight. present NULL: required; else false in
 *present when gate_proj is absent (a missing up/down then is an error). */
static cmf_status bind_expert(loader *L, const char *base, cq_expert *ex, bool *present) {
    static const char *roles[] = {"gate_proj", "up_proj", "down_proj"};
    const cmf_tensor *t[3];
    for (int k = 0; k < 3; k++) {
        char name[320];
        snprintf(name, sizeof name, "%s.%s.weight", base, roles[k]);
        t[k] = lookup(L, name);
        if (!t[k] && (k || !present))
            return cmf_err_set(L->err, CMF_E_NOT_FOUND, L->path,
                               "tensor '%s' is required by this model but absent", name);
        if (!t[k]) return *present = false, CMF_OK;
    }
    if (present) *present = true;
    return bind_ffn(L, t, &ex->wg, &ex->wu, &ex->wd, &ex->ffn);
}

/* Layer l's mixture-of-experts FFN (spec §2.2): the experts are those present, a prefix
 * 0 .. n-1 of arch.moe.num_experts, and the router has exactly one row per expert present. */
static cmf_status load_moe(loader *L, const cmf_arch *a, uint32_t l, cq_layer *y) {
    cortiq_model *m = L->m;
    const cmf_moe *mc = &a->moe;
    int li = (int)l;
    cmf_status st;
    if (!mc->present || mc->num_experts < 1 || mc->num_experts > CQ_MAX_EXPERTS)
        return cmf_err_set(L->err, CMF_E_PARSE, L->path,
                           "layer %u has a MoE router (mlp.gate.weight) but arch.moe.num_experts "
                           "is absent or outside [1, %d]",
                           l, CQ_MAX_EXPERTS);
    if (mc->top_k < 1)
        return cmf_err_set(L->err, CMF_E_PARSE, L->path, "arch.moe.top_k is absent or < 1");
    /* the experts present: a prefix 0 .. n-1 (counted first, so the allocation follows the
     * file's tensors rather than the header's number) */
    uint32_t n = 0;
    for (uint32_t e = 0; e < (uint32_t)mc->num_experts; e++) {
        char name[160];
        snprintf(name, sizeof name, "model.layers.%u.mlp.experts.%u.gate_proj.weight", l, e);
        if (!lookup(L, name)) continue;
        if (e != n)
            return cmf_err_set(L->err, CMF_E_PARSE, L->path,
                               "layer %u: expert %u is present but expert %u is absent (experts "
                               "must be numbered 0 .. n-1)",
                               l, e, n);
        n++;
    }
    cq_moe *moe = y->moe = calloc(1, sizeof *moe);
    if (moe && n) moe->experts = calloc(n, sizeof *moe->experts);
    if (!moe || (n && !moe->experts)) return cmf_err_set(L->err, CMF_E_NOMEM, L->path, "experts");
    uint64_t expert_bytes = 0;
    for (uint32_t e = 0; e < n; e++) {
        char base[128];
        snprintf(base, sizeof base, "model.layers.%u.mlp.experts.%u", l, e);
        cq_expert *ex = &moe->experts[e];
        moe->n_experts = e + 1; /* freed with the model, also on an error */
        if ((st = bind_expert(L, base, ex, NULL))) return st;
        expert_bytes += ex->wg.nbytes + ex->wu.nbytes + ex->wd.nbytes;
    }
    const cmf_tensor *r = find(L, "model.layers.%d.mlp.gate.weight", li);
    if (!moe->n_experts || r->ndim != 2 || r->shape[0] != moe->n_experts)
        return cmf_err_set(L->err, CMF_E_PARSE, L->path,
                           "layer %u: router 'model.layers.%u.mlp.gate.weight' has %llu rows but "
                           "%u experts are present (arch.moe.num_experts=%lld)",
                           l, l, (unsigned long long)r->shape[0], moe->n_experts,
                           (long long)mc->num_experts);
    if ((st = bind_mat(L, &moe->router, r, moe->n_experts, m->hidden))) return st;
    moe->top_k = mc->top_k < moe->n_experts ? (uint32_t)mc->top_k : moe->n_experts;
    /* a decode step reads top_k of the experts */
    m->weight_bytes -= expert_bytes - expert_bytes / moe->n_experts * moe->top_k;
    if ((st = opt_vec(L, "model.layers.%d.mlp.expert_bias", li, moe->n_experts, 0,
                      &moe->expert_bias)))
        return st;
    char base[128];
    snprintf(base, sizeof base, "model.layers.%u.mlp.shared_expert", l);
    if ((st = bind_expert(L, base, &moe->shared, &moe->has_shared))) return st;
    const cmf_tensor *sg = find(L, "model.layers.%d.mlp.shared_expert_gate.weight", li);
    if (sg) {
        if ((st = bind_mat(L, &moe->shared_gate, sg, 1, m->hidden))) return st;
        moe->has_shared_gate = true;
    }
    moe->norm_topk_prob = mc->norm_topk_prob;
    moe->router_sigmoid = mc->router_sigmoid;
    moe->routed_scaling = (float)mc->routed_scaling_factor;
    return CMF_OK;
}

/* self_attn.g_proj (spec §2), when present: its rows choose the gate's kind, one per head
 * [n_heads, hidden] or one per channel [n_heads * head_dim, hidden]. */
static cmf_status bind_out_gate(loader *L, uint32_t l, cq_layer *y) {
    const cmf_tensor *t = find(L, "model.layers.%d.self_attn.g_proj.weight", (int)l);
    if (!t) return CMF_OK;
    const cortiq_model *m = L->m;
    uint64_t per_head = y->n_heads, per_channel = (uint64_t)y->n_heads * m->head_dim;
    uint64_t rows = t->ndim == 2 ? t->shape[0] : 0;
    if (rows != per_head && rows != per_channel)
        return cmf_err_set(L->err, CMF_E_PARSE, L->path,
                           "tensor '%s' has %llu rows: layer %u's %u heads of %u dims need %llu "
                           "(a gate per head) or %llu (a gate per channel)",
                           t->name, (unsigned long long)rows, l, y->n_heads, m->head_dim,
                           (unsigned long long)per_head, (unsigned long long)per_channel);
    y->out_gate = rows == per_head ? CQ_OUT_GATE_HEAD : CQ_OUT_GATE_CHANNEL;
    return bind_mat(L, &y->wgp, t, rows, m->hidden);
}

static cmf_status load_layers(loader *L, const cmf_arch *a) {
    cortiq_model *m = L->m;
    cmf_status st;
    float add = a->norm_style == CMF_NORM_GEMMA ? 1.0f : 0.0f;
    uint32_t full_rot = (uint32_t)(m->head_dim * a->partial_rotary_factor) & ~1u;
    uint32_t local_rot = (uint32_t)(m->head_dim * a->local_partial_rotary_factor) & ~1u;
    uint32_t n_blocks = m->n_layers + (m->mtp ? 1 : 0); /* the MTP block last (mtp.h) */
    m->freq_store = calloc((size_t)n_blocks * m->head_dim, sizeof(float));
    if (!m->freq_store) return cmf_err_set(L->err, CMF_E_NOMEM, L->path, "rope tables");
    uint32_t n_tables = 0; /* distinct RoPE tables so far */
    bool tagged_sliding = false;
    for (size_t l = 0; l < a->n_layer_types; l++)
        tagged_sliding |= a->layer_types[l] == CMF_LAYER_SLIDING_ATTENTION;
    for (uint32_t l = 0; l < n_blocks; l++) {
        cq_layer *y = &m->layers[l];
        int li = (int)l;
        bool is_main = l < m->n_layers; /* else the MTP block: full attention, the model's heads */
        /* sliding_window_pattern P without sliding tags: every P-th layer is global */
        if (is_main && !tagged_sliding && a->sliding_window_pattern > 0 && m->sliding_window)
            y->sliding = (l + 1) % (uint64_t)a->sliding_window_pattern != 0;
        if (is_main && a->n_layer_types) {
            cmf_layer_type t = a->layer_types[l];
            if (t == CMF_LAYER_OTHER)
                return cmf_err_set(L->err, CMF_E_UNSUPPORTED, L->path,
                                   "layer %u is %s: this runtime runs full, sliding and linear "
                                   "(Gated DeltaNet) attention layers only",
                                   l, a->layer_type_names[l]);
            if (t == CMF_LAYER_LINEAR_ATTENTION &&
                (st = cq_gdn_load(m, a, l, L->path, &y->gdn, L->err)))
                return st;
            if (tagged_sliding) y->sliding = t == CMF_LAYER_SLIDING_ATTENTION;
        }
        if (y->sliding && !m->sliding_window)
            return cmf_err_set(L->err, CMF_E_PARSE, L->path,
                               "layer %u is SlidingAttention but arch.sliding_window is absent", l);
        y->n_heads = m->n_heads;
        if (is_main && a->n_heads_per_layer) {
            if ((st = cap(L, "attention_heads_per_layer[]", a->attention_heads_per_layer[l], 1,
                          CQ_MAX_HEADS, &y->n_heads)))
                return st;
        }
        if (y->n_heads % m->n_kv)
            return cmf_err_set(L->err, CMF_E_PARSE, L->path,
                               "layer %u: %u query heads not a multiple of %u kv heads", l,
                               y->n_heads, m->n_kv);
        y->rope_theta = y->sliding && a->has_rope_local_base_freq ? (float)a->rope_local_base_freq
                                                                  : (float)a->rope_theta;
        y->rot_dim = y->sliding ? local_rot : full_rot;
        if (y->rot_dim > m->head_dim) y->rot_dim = m->head_dim & ~1u;
        float *inv = m->freq_store + (size_t)l * m->head_dim;
        rope_freqs(a, y->rope_theta, y->rot_dim, !y->sliding, inv, &y->rope_mscale);
        y->inv_freq = inv;
        y->rope_slot = n_tables % CQ_ROPE_SLOTS;
        /* an earlier layer's equal table is this one's: the sessions' cos / sin of a position
         * are kept per table (forward.c rope_cs), so layers that share one compute them once */
        for (uint32_t e = 0; e < l; e++) {
            const cq_layer *p = &m->layers[e];
            if (p->inv_freq && p->rot_dim == y->rot_dim && p->rope_mscale == y->rope_mscale &&
                !memcmp(p->inv_freq, inv, y->rot_dim / 2 * sizeof *inv)) {
                y->inv_freq = p->inv_freq;
                y->rope_slot = p->rope_slot;
                break;
            }
        }
        if (y->inv_freq == inv) n_tables++;

        const uint64_t qd = (uint64_t)y->n_heads * m->head_dim,
                       kvd = (uint64_t)m->n_kv * m->head_dim;
        static const char *names[] = {
            "model.layers.%d.self_attn.q_proj.weight", "model.layers.%d.self_attn.k_proj.weight",
            "model.layers.%d.self_attn.v_proj.weight", "model.layers.%d.self_attn.o_proj.weight",
            "model.layers.%d.mlp.gate_proj.weight",    "model.layers.%d.mlp.up_proj.weight",
            "model.layers.%d.mlp.down_proj.weight"};
        /* a router makes the layer's FFN a mixture of experts (spec §2.2) */
        bool moe = find(L, "model.layers.%d.mlp.gate.weight", li) != NULL;
        if (!moe && find(L, "model.layers.%d.mlp.experts.0.gate_proj.weight", li))
            return cmf_err_set(
                L->err, CMF_E_PARSE, L->path,
                "layer %u has experts but no router 'model.layers.%u.mlp.gate.weight'", l, l);
        const cmf_tensor *t[7];
        for (int k = y->gdn ? 4 : 0; k < (moe ? 4 : 7); k++)
            if (!(t[k] = find(L, names[k], li))) return missing(L, names[k], li);
        /* a q_proj twice as wide holds a gate per head (spec §2: chosen by the width) */
        y->attn_gate = !y->gdn && t[0]->ndim == 2 && t[0]->shape[0] == 2 * qd;
        if (!y->gdn) {
            if ((st = bind_mat(L, &y->wq, t[0], y->attn_gate ? 2 * qd : qd, m->hidden))) return st;
            if ((st = bind_mat(L, &y->wk, t[1], kvd, m->hidden))) return st;
            if ((st = bind_mat(L, &y->wv, t[2], kvd, m->hidden))) return st;
            if ((st = bind_mat(L, &y->wo, t[3], m->hidden, qd))) return st;
            if ((st = bind_out_gate(L, l, y))) return st;
        }
        if (moe) {
            if ((st = load_moe(L, a, l, y))) return st;
        } else {
            if ((st = bind_ffn(L, t + 4, &y->wg, &y->wu, &y->wd, &y->ffn))) return st;
        }

        if ((st = opt_vec(L, "model.layers.%d.self_attn.q_proj.bias", li, qd, 0, &y->bq)))
            return st;
        if ((st = opt_vec(L, "model.layers.%d.self_attn.k_proj.bias", li, kvd, 0, &y->bk)))
            return st;
        if ((st = opt_vec(L, "model.layers.%d.self_attn.v_proj.bias", li, kvd, 0, &y->bv)))
            return st;
        if ((st = opt_vec(L, "model.layers.%d.self_attn.q_norm.weight", li, m->head_dim, add,
                          &y->q_norm)))
            return st;
        if ((st = opt_vec(L, "model.layers.%d.self_attn.k_norm.weight", li, m->head_dim, add,
                          &y->k_norm)))
            return st;
        if (!find(L, "model.layers.%d.input_layernorm.weight", li))
            return missing(L, "model.layers.%d.input_layernorm.weight", li);
        if ((st = opt_vec(L, "model.layers.%d.input_layernorm.weight", li, m->hidden, add,
                          &y->attn_norm)))
            return st;
        /* Gemma layout: post_attention_layernorm follows attention and pre_feedforward_layernorm
         * precedes the MLP; llama layout: post_attention_layernorm precedes the MLP. */
        if (find(L, "model.layers.%d.pre_feedforward_layernorm.weight", li)) {
            if ((st = opt_vec(L, "model.layers.%d.pre_feedforward_layernorm.weight", li, m->hidden,
                              add, &y->ffn_norm)))
                return st;
            if ((st = opt_vec(L, "model.layers.%d.post_attention_layernorm.weight", li, m->hidden,
                              add, &y->post_attn_norm)))
                return st;
            if ((st = opt_vec(L, "model.layers.%d.post_feedforward_layernorm.weight", li, m->hidden,
                              add, &y->post_ffn_norm)))
                return st;
        } else {
            if (!find(L, "model.layers.%d.post_attention_layernorm.weight", li))
                return missing(L, "model.layers.%d.post_attention_layernorm.weight", li);
            if ((st = opt_vec(L, "model.layers.%d.post_attention_layernorm.weight", li, m->hidden,
                              add, &y->ffn_norm)))
                return st;
        }
    }
    return CMF_OK;
}

/* m->token_macs: rows x cols of every layer matrix a decode step reads (cq_decode_mats), without
 * the output head (a prefill runs it for its last token only), and of a MoE layer's routed
 * experts top_k times their mean. */
static uint64_t qmat_macs(const cmf_qmat *q) {
    return q->rows * q->cols;
}

static cmf_status count_token_macs(cortiq_model *m, const char *path, cmf_err *err) {
    cmf_qmat **w = malloc(((size_t)m->n_layers * CQ_DECODE_MATS_PER_LAYER + 1) * sizeof *w);
    if (!w) return cmf_err_set(err, CMF_E_NOMEM, path, "the list of the model's matrices");
    size_t n = cq_decode_mats(m, false, w);
    uint64_t macs = 0;
    for (size_t i = 0; i < n; i++)
        if (w[i] != &m->head) macs += qmat_macs(w[i]);
    free(w);
    for (uint32_t l = 0; l < m->n_layers; l++) {
        const cq_moe *moe = m->layers[l].moe;
        if (!moe || !moe->n_experts) continue;
        uint64_t all = 0;
        for (const cq_expert *x = moe->experts; x < moe->experts + moe->n_experts; x++)
            all += qmat_macs(&x->wg) + qmat_macs(&x->wu) + qmat_macs(&x->wd);
        macs += all / moe->n_experts * moe->top_k;
    }
    m->token_macs = macs;
    return CMF_OK;
}

static cmf_status load(loader *L, const char *path, const cortiq_load_opts *o) {
    cortiq_model *m = L->m;
    cmf_status st = cmf_open_model(path, o && o->verify_tensors ? CMF_OPEN_VERIFY_TENSORS : 0,
                                   &m->file, L->err);
    if (st) return st;
    const cmf_masks *ms = cmf_file_masks(m->file);
    if (ms && ms->n_masks && !(m->task_warned = calloc(ms->n_masks, 1)))
        return cmf_err_set(L->err, CMF_E_NOMEM, path, "masks");
    const cmf_header *h = cmf_file_header(m->file);
    const cmf_arch *a = &h->arch;
    if (cmf_file_envelope(m->file)->required_features & CMF_FEAT_SKILL_FILE)
        return cmf_err_set(
            L->err, CMF_E_UNSUPPORTED, path,
            "a standalone skill file (SKILL_FILE) is not a runnable model (spec §9.1): attach it "
            "to the base model whose directory hash it names with `cortiq skill apply BASE.cmf "
            "%s -o OUT.cmf`, then run OUT.cmf",
            path);
    if (!a->present) return cmf_err_set(L->err, CMF_E_PARSE, path, "header has no arch block");
    if (a->norm_style == CMF_NORM_UNSET)
        return cmf_err_set(L->err, CMF_E_PARSE, path,
                           "arch.norm_style is required to run a model (\"qwen\" or \"gemma\")");
    if ((st = cap(L, "hidden_size", a->hidden_size, 1, CQ_MAX_HIDDEN, &m->hidden))) return st;
    if ((st = cap(L, "num_layers", a->num_layers, 1, CQ_MAX_LAYERS, &m->n_layers))) return st;
    if ((st = cap(L, "num_attention_heads", a->num_attention_heads, 1, CQ_MAX_HEADS, &m->n_heads)))
        return st;
    if ((st =
             cap(L, "num_kv_heads", a->num_kv_heads >= 0 ? a->num_kv_heads : a->num_attention_heads,
                 1, CQ_MAX_HEADS, &m->n_kv)))
        return st;
    int64_t hd = a->head_dim >= 0 ? a->head_dim : a->hidden_size / a->num_attention_heads;
    if ((st = cap(L, "head_dim", hd, 2, CQ_MAX_HEAD_DIM, &m->head_dim))) return st;
    if (!a->has_rope_theta)
        return cmf_err_set(L->err, CMF_E_PARSE, path, "arch.rope_theta is required");
    if (a->n_layer_types && a->n_layer_types != m->n_layers)
        return cmf_err_set(L->err, CMF_E_PARSE, path,
                           "arch.layer_types length differs from num_layers");
    if (a->sliding_window > 0)
        m->sliding_window =
            a->sliding_window > UINT32_MAX ? UINT32_MAX : (uint32_t)a->sliding_window;
    m->max_pos = a->max_position_embeddings > 0 && a->max_position_embeddings < UINT32_MAX
                     ? (uint32_t)a->max_position_embeddings
                     : 0;
    m->eps = a->has_rms_norm_eps ? (float)a->rms_norm_eps : 1e-6f;
    if ((st = cq_arch_check(h, path, &m->act, L->err))) return st;
    m->attn_scale = (float)(1.0 / sqrt(a->has_query_pre_attn_scalar ? a->query_pre_attn_scalar
                                                                    : (double)m->head_dim));
    m->final_softcap = a->has_final_logit_softcapping ? (float)a->final_logit_softcapping : 0;
    m->attn_softcap = a->has_attn_logit_softcapping ? (float)a->attn_logit_softcapping : 0;
    /* embeddings: [vocab, hidden]; Gemma scales them by sqrt(hidden) */
    if ((st = cq_overlay_init(m, o, path, L->err))) return st;
    const cmf_tensor *emb = lookup(L, "model.embed_tokens.weight");
    if (!emb) return missing(L, "model.embed_tokens.weight", 0);
    if (emb->ndim != 2 || emb->shape[0] < 1 || emb->shape[0] > CQ_MAX_VOCAB)
        return cmf_err_set(L->err, CMF_E_LIMIT, path,
                           "tensor 'model.embed_tokens.weight' must be [vocab <= %u, hidden]",
                           CQ_MAX_VOCAB);
    if (a->vocab_size > (int64_t)emb->shape[0])
        return cmf_err_set(L->err, CMF_E_PARSE, path,
                           "arch.vocab_size=%lld is larger than the embedding's %llu rows",
                           (long long)a->vocab_size, (unsigned long long)emb->shape[0]);
    if ((st = bind_mat(L, &m->embed, emb, 0, m->hidden))) return st;
    m->weight_bytes -= emb->nbytes; /* a decode step reads one embedding row, not the table */
    /* files written before embed_multiplier was: Gemma's sqrt(hidden) (docs/FORMAT.md) */
    m->embed_scale = a->has_embed_multiplier ? (float)a->embed_multiplier
                     : a->arch_name && !strncmp(a->arch_name, "gemma", 5) ? sqrtf((float)m->hidden)
                                                                          : 1.0f;
    m->logit_scale = a->has_logit_multiplier ? (float)a->logit_multiplier : 1.0f;
    const cmf_tensor *head = lookup(L, "lm_head.weight");
    if (!head) {
        if (!a->tie_word_embeddings) return missing(L, "lm_head.weight", 0);
        head = emb;
    }
    if ((st = bind_mat(L, &m->head, head, 0, m->hidden))) return st;
    m->vocab = (uint32_t)head->shape[0];
    float add = a->norm_style == CMF_NORM_GEMMA ? 1.0f : 0.0f;
    const cmf_tensor *fn = lookup(L, "model.norm.weight");
    if (!fn) return missing(L, "model.norm.weight", 0);
    if ((st = load_vec(L, fn, m->hidden, add, &m->final_norm))) return st;
    if ((st = cq_mtp_load(m, a, path, L->err))) return st;
    m->layers = calloc(m->n_layers + (m->mtp ? 1 : 0), sizeof *m->layers);
    if (!m->layers) return cmf_err_set(L->err, CMF_E_NOMEM, path, "layers");
    const cmf_rope_scaling *rs = &a->rope_scaling;
    if (rs->present && rs->type && strcmp(rs->type, "default") && strcmp(rs->type, "linear") &&
        strcmp(rs->type, "llama3"))
        return cmf_err_set(
            L->err, CMF_E_UNSUPPORTED, path,
            "arch.rope_scaling type \"%s\": this runtime knows linear and llama3 (and arch.yarn)",
            rs->type);
    if ((st = load_layers(L, a))) return st;
    if (L->overlay_st) return L->overlay_st;
    if (m->mtp && (st = cq_mtp_check(m, path, L->err))) return st;
    if ((st = count_token_macs(m, path, L->err))) return st;
    unsigned threads = o && o->threads ? o->threads : 0;
    cortiq_act_mode act = o ? o->act : CORTIQ_ACT_DEFAULT;
    if ((unsigned)act >= CORTIQ_ACT_COUNT)
        return cmf_err_set(L->err, CMF_E_INVALID_ARG, path,
                           "activation mode %u: known are 0 (default), 1 (int8), 2 (f32)",
                           (unsigned)act);
    m->kflags = act == CORTIQ_ACT_INT8 ? CMF_KF_INT8_ACT : 0;
    m->prefill_qact = act != CORTIQ_ACT_F32 && cmf_qact_simd();
    m->q4flags = act == CORTIQ_ACT_F32 ? 0 : CMF_KF_INT8_ACT;
    m->bf16flags = act == CORTIQ_ACT_F32 ? 0 : CMF_KF_BF16_ACT;
    m->huge_pages = !(o && o->no_huge_pages);
    m->kv = o ? o->kv : CORTIQ_KV_F16;
    if ((unsigned)m->kv >= CORTIQ_KV_COUNT)
        return cmf_err_set(L->err, CMF_E_INVALID_ARG, path,
                           "KV cache type %u: known are 0 (f16), 1 (q8), 2 (f32)", (unsigned)m->kv);
    if (!threads) {
        long c = sysconf(_SC_NPROCESSORS_ONLN);
        threads = c > 0 ? (unsigned)c : 1;
    }
    if (threads > 64) threads = 64;
    m->pool = cq_pool_create(threads);
    if (!m->pool) return cmf_err_set(L->err, CMF_E_NOMEM, path, "thread pool");
    cq_model_build_lanes(m, o ? o->batch_lanes : 0);
    return CMF_OK;
}

cmf_status cortiq_model_load(const char *path, const cortiq_load_opts *opts, cortiq_model **out,
                             cmf_err *err) {
    *out = NULL;
    cortiq_model *m = calloc(1, sizeof *m);
    if (!m) return cmf_err_set(err, CMF_E_NOMEM, path, "model");
    loader L = {m, path, err, CMF_OK};
    cmf_status st = load(&L, path, opts);
    if (st) {
        cortiq_model_free(m);
        return st;
    }
    *out = m;
    return CMF_OK;
}

uint64_t cortiq_model_lanes_bytes(const cortiq_model *m) {
    return m ? m->lanes_bytes : 0;
}

void cortiq_model_free(cortiq_model *m) {
    if (!m) return;
    cq_model_free_lanes(m);
    for (uint32_t l = 0; m->layers && l < m->n_layers + (m->mtp ? 1 : 0); l++) {
        cq_layer *y = &m->layers[l];
        cmf_qmat *mats[] = {&y->wq, &y->wk, &y->wv, &y->wo, &y->wgp, &y->wg, &y->wu, &y->wd};
        for (int k = 0; k < 8; k++)
            cmf_qmat_free(mats[k]);
        cq_moe *moe = y->moe;
        for (uint32_t e = 0; moe && e <= moe->n_experts; e++) {
            cq_expert *ex = e < moe->n_experts ? &moe->experts[e] : &moe->shared;
            cmf_qmat_free(&ex->wg), cmf_qmat_free(&ex->wu), cmf_qmat_free(&ex->wd);
        }
        if (moe) {
            cmf_qmat_free(&moe->router), cmf_qmat_free(&moe->shared_gate);
            free(moe->expert_bias), free(moe->experts), free(moe);
        }
        free(y->bq), free(y->bk), free(y->bv), free(y->attn_norm), free(y->q_norm), free(y->k_norm);
        free(y->post_attn_norm), free(y->ffn_norm), free(y->post_ffn_norm);
        cq_gdn_free(y->gdn);
    }
    cmf_qmat_free(&m->embed);
    cmf_qmat_free(&m->head);
    cq_overlay_free(m);
    free(m->moves);
    free(m->task_warned);
    free(m->layers);
    free(m->final_norm);
    cq_mtp_free(m->mtp);
    free(m->freq_store);
    cq_pool_free(m->pool);
    cmf_close(m->file);
    free(m);
}

const cmf_file *cortiq_model_file(const cortiq_model *m) {
    return m->file;
}
uint32_t cortiq_model_vocab(const cortiq_model *m) {
    return m->vocab;
}
uint32_t cortiq_model_hidden(const cortiq_model *m) {
    return m->hidden;
}
uint32_t cortiq_model_max_context(const cortiq_model *m) {
    return m->max_pos;
}
unsigned cortiq_model_threads(const cortiq_model *m) {
    return cq_pool_size(m->pool);
}
uint64_t cortiq_model_weight_bytes(const cortiq_model *m) {
    return m->weight_bytes;
}

uint64_t cortiq_model_token_macs(const cortiq_model *m) {
    return m->token_macs;
}
