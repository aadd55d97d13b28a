/* defrag_plan.c - keep-sets of a physical defrag (spec §11) and the header that records them. */
#include "convert/defrag_plan.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "convert/recode.h"

cmf_status cq_defrag_set_ffn(cq_defrag_plan *p, uint32_t l, const uint8_t *flags, const char *ctx,
                             cmf_err *err) {
    cq_defrag_layer *y = &p->layers[l];
    uint32_t n = 0;
    for (uint32_t i = 0; i < y->ffn; i++)
        n += flags[i] != 0;
    if (!n)
        return cmf_err_set(err, CMF_E_INVALID_ARG, ctx,
                           "layer %u keeps no FFN neuron: a tensor cannot have a zero dimension "
                           "(spec §3)",
                           l);
    free(y->keep);
    y->keep = NULL;
    y->n_keep = y->ffn;
    if (n == y->ffn) return CMF_OK;
    y->keep = malloc(n * sizeof *y->keep);
    if (!y->keep) return cmf_err_set(err, CMF_E_NOMEM, ctx, "keep-set");
    n = 0;
    for (uint32_t i = 0; i < y->ffn; i++)
        if (flags[i]) y->keep[n++] = i;
    y->n_keep = n;
    return CMF_OK;
}

cmf_status cq_defrag_set_heads(cq_defrag_plan *p, uint32_t l, const uint8_t *flags, const char *ctx,
                               cmf_err *err) {
    cq_defrag_layer *y = &p->layers[l];
    uint32_t H = y->heads, kv = p->n_kv, hd = p->head_dim;
    if (!kv || H % kv)
        return cmf_err_set(err, CMF_E_PARSE, ctx, "layer %u: %u query heads over %u kv heads", l, H,
                           kv);
    uint32_t group = H / kv, c = 0, live = 0;
    for (uint32_t g = 0; g < kv; g++) {
        uint32_t n = 0;
        for (uint32_t i = 0; i < group; i++)
            n += flags[g * group + i] != 0;
        if (n > c) c = n;
        live += n;
    }
    if (live == H) return CMF_OK;
    if (!c) c = 1; /* no live head: one zeroed head per group keeps the shapes valid */
    y->heads_out = c * kv;
    y->q_rows = malloc((size_t)y->heads_out * hd * sizeof *y->q_rows);
    y->o_cols = malloc((size_t)y->heads_out * hd * sizeof *y->o_cols);
    y->head_list = malloc((size_t)y->heads_out * sizeof *y->head_list);
    if (!y->q_rows || !y->o_cols || !y->head_list)
        return cmf_err_set(err, CMF_E_NOMEM, ctx, "head lists");
    uint32_t k = 0;
    y->n_dead_padded = 0;
    for (uint32_t g = 0; g < kv; g++) {
        uint32_t n = 0;
        for (uint32_t i = 0; i < group; i++)
            n += flags[g * group + i] != 0;
        uint32_t pad = c - n; /* the lowest dead heads of the group fill it up */
        for (uint32_t i = 0; i < group; i++) {
            uint32_t h = g * group + i;
            bool alive = flags[h] != 0;
            if (!alive && !pad) continue;
            if (!alive) pad--, y->n_dead_padded++;
            y->head_list[k] = h;
            for (uint32_t d = 0; d < hd; d++) {
                y->q_rows[k * hd + d] = h * hd + d;
                y->o_cols[k * hd + d] = (h * hd + d) | (alive ? 0 : CQ_GATHER_ZERO);
            }
            k++;
        }
    }
    return CMF_OK;
}

bool cq_defrag_layer_changed(const cq_defrag_layer *y) {
    return y->keep || y->q_rows;
}

static json_t *obj_get_or_add(json_t *o, const char *k) {
    json_t *v = json_object_get(o, k);
    if (json_is_object(v)) return v;
    v = json_object();
    json_object_set_new(o, k, v);
    return v;
}

cmf_status cq_defrag_header(const cq_defrag_plan *p, json_t *h, const char *source, const char *ctx,
                            cmf_err *err) {
    json_t *arch = json_object_get(h, "arch");
    if (!json_is_object(arch)) return cmf_err_set(err, CMF_E_PARSE, ctx, "header has no arch");
    uint64_t pre = 0, post = 0;
    uint32_t post_max = 0;
    bool heads_changed = false;
    json_t *kept = json_array(), *heads = json_array();
    for (uint32_t l = 0; l < p->n_layers; l++) {
        const cq_defrag_layer *y = &p->layers[l];
        if (y->dense) {
            pre += y->ffn;
            post += y->n_keep;
            if (y->n_keep > post_max) post_max = y->n_keep;
            json_array_append_new(kept, json_integer(y->n_keep));
        } else {
            json_array_append_new(kept, json_null()); /* MoE / FFN-less layer: not pruned here */
        }
        uint32_t hn = y->q_rows ? y->heads_out : y->heads;
        heads_changed |= y->q_rows != NULL;
        json_array_append_new(heads, json_integer(hn));
    }
    if (post_max) json_object_set_new(arch, "intermediate_size", json_integer(post_max));
    json_t *d = json_object();
    json_object_set_new(d, "source_skill", source ? json_string(source) : json_null());
    json_object_set_new(d, "pre_intermediate", json_integer(p->pre_intermediate));
    json_object_set_new(d, "post_intermediate_max", json_integer(post_max));
    json_object_set_new(d, "kept_per_layer", kept);
    double ratio = pre ? 1.0 - (double)post / (double)pre : 0.0;
    json_object_set_new(d, "pruned_ratio", json_real(round(ratio * 10000.0) / 10000.0));
    if (heads_changed) {
        uint32_t max_heads = 0;
        size_t i;
        json_t *v;
        json_array_foreach(heads, i, v) {
            if ((uint32_t)json_integer_value(v) > max_heads)
                max_heads = (uint32_t)json_integer_value(v);
        }
        json_object_set(arch, "attention_heads_per_layer", heads);
        json_object_set_new(arch, "num_attention_heads", json_integer(max_heads));
        json_object_set_new(arch, "head_dim", json_integer(p->head_dim));
        json_object_set_new(d, "heads_per_layer", heads);
    } else {
        json_decref(heads);
    }
    json_object_set_new(obj_get_or_add(h, "provenance"), "defrag", d);
    json_object_del(h, "section_hashes");
    return CMF_OK;
}

void cq_defrag_plan_free(cq_defrag_plan *p) {
    if (!p || !p->layers) return;
    for (uint32_t l = 0; l < p->n_layers; l++) {
        free(p->layers[l].keep);
        free(p->layers[l].q_rows);
        free(p->layers[l].o_cols);
        free(p->layers[l].head_list);
    }
    free(p->layers);
    p->layers = NULL;
}
