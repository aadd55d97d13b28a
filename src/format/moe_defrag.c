/* moe_defrag.c - `cortiq moe-defrag` (spec §11.1, cortiq/moe.h): a model file rewritten with
 * only the experts a route-statistics set keeps. Kept experts are renumbered into a prefix in
 * their order and copied byte for byte, a layer's bank laid out role-contiguously; routers and
 * expert biases are gathered to match; the header records the cut. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/err.h"
#include "cortiq/hash.h"
#include "cortiq/version.h"
#include "format/moe_masks.h"

/* "model.layers.L.mlp.experts.E.REST" -> L, E, REST. */
static bool expert_name(const char *name, uint32_t *l, uint32_t *e, const char **rest) {
    unsigned ul, ue;
    int n = 0;
    if (sscanf(name, "model.layers.%u.mlp.experts.%u.%n", &ul, &ue, &n) != 2 || !n) return false;
    *l = ul, *e = ue, *rest = name + n;
    return true;
}

/* "model.layers.L.mlp.SUFFIX" exactly -> L. */
static bool layer_tensor(const char *name, const char *suffix, uint32_t *l) {
    unsigned ul;
    int n = 0;
    if (sscanf(name, "model.layers.%u.mlp.%n", &ul, &n) != 1 || !n) return false;
    *l = ul;
    return !strcmp(name + n, suffix);
}

/* The i-th kept expert (0-based) of layer l, in index order. */
static uint32_t kept_at(const cmf_moe_keep *k, uint32_t l, uint32_t i) {
    const uint8_t *b = k->bits + (size_t)l * k->expert_bytes;
    for (uint32_t e = 0; e < k->present[l]; e++)
        if (cmf_bit(b, e) && i-- == 0) return e;
    return UINT32_MAX;
}

/* Rows (2-D) or entries (1-D) of t at k's kept experts of layer l, as a new tensor. */
static cmf_status add_gathered(cmf_writer *w, const char *fp, const cmf_tensor *t,
                               const cmf_moe_keep *k, uint32_t l, cmf_err *err) {
    size_t el = t->dtype == CMF_DT_F32                              ? 4
                : t->dtype == CMF_DT_F16 || t->dtype == CMF_DT_BF16 ? 2
                                                                    : 0;
    if (!el)
        return cmf_err_set(err, CMF_E_UNSUPPORTED, fp,
                           "%s is %s: moe-defrag gathers rows of f32, f16 or bf16 routers and "
                           "biases only (a quantized layout keeps rows apart from their scales)",
                           t->name, cmf_dtype_name((cmf_dtype)t->dtype));
    if (t->shape[0] != k->present[l] || t->ndim > 2)
        return cmf_err_set(err, CMF_E_PARSE, fp, "%s: %llu rows, but layer %u has %u experts",
                           t->name, (unsigned long long)t->shape[0], l, k->present[l]);
    size_t row = el * (t->ndim == 2 ? (size_t)t->shape[1] : 1);
    uint8_t *buf = malloc(k->kept[l] * row + 1);
    if (!buf) return cmf_err_set(err, CMF_E_NOMEM, fp, "%s", t->name);
    for (uint32_t j = 0; j < k->kept[l]; j++)
        memcpy(buf + j * row, t->data + (size_t)kept_at(k, l, j) * row, row);
    uint64_t shape[2] = {k->kept[l], t->ndim == 2 ? t->shape[1] : 0};
    cmf_status st = cmf_writer_add_tensor(w, t->name, (cmf_dtype)t->dtype, t->ndim, shape, buf,
                                          k->kept[l] * row, err);
    free(buf);
    return st;
}

static int role_rank(const char *rest) {
    return !strncmp(rest, "gate_proj", 9)   ? 0
           : !strncmp(rest, "up_proj", 7)   ? 1
           : !strncmp(rest, "down_proj", 9) ? 2
                                            : 3;
}

/* Layer l's kept experts under their new numbers, role by role (gate_proj of every expert,
 * then up_proj, then down_proj, then any other per-expert tensor), payloads borrowed. */
static cmf_status add_bank(cmf_writer *w, const cmf_file *f, const cmf_moe_keep *k, uint32_t l,
                           uint32_t *n_added, cmf_err *err) {
    char prefix[64];
    snprintf(prefix, sizeof prefix, "model.layers.%u.mlp.experts.", l);
    size_t first, count;
    cmf_file_prefix(f, prefix, &first, &count);
    const char **roles = malloc((count + 1) * sizeof *roles);
    if (!roles) return cmf_err_set(err, CMF_E_NOMEM, cmf_file_path(f), "roles");
    size_t nr = 0;
    for (size_t i = 0; i < count; i++) { /* distinct roles, ordered by rank then name */
        uint32_t tl, te;
        const char *rest;
        if (!expert_name(cmf_file_sorted_at(f, first + i)->name, &tl, &te, &rest) || tl != l)
            continue;
        size_t j = 0;
        while (j < nr && strcmp(roles[j], rest))
            j++;
        if (j < nr) continue;
        j = nr++;
        while (j > 0 &&
               (role_rank(roles[j - 1]) > role_rank(rest) ||
                (role_rank(roles[j - 1]) == role_rank(rest) && strcmp(roles[j - 1], rest) > 0))) {
            roles[j] = roles[j - 1];
            j--;
        }
        roles[j] = rest;
    }
    cmf_status st = CMF_OK;
    char name[256];
    for (size_t r = 0; r < nr && !st; r++)
        for (uint32_t j = 0; j < k->kept[l] && !st; j++) {
            snprintf(name, sizeof name, "%s%u.%s", prefix, kept_at(k, l, j), roles[r]);
            const cmf_tensor *t = cmf_file_find(f, name);
            if (!t) continue; /* absent in the source, absent here */
            snprintf(name, sizeof name, "%s%u.%s", prefix, j, roles[r]);
            st = cmf_writer_add_tensor_ref(w, name, (cmf_dtype)t->dtype, t->ndim, t->shape, t->data,
                                           t->nbytes, err);
            ++*n_added;
        }
    free(roles);
    return st;
}

/* The header with provenance.moe_defrag: what was cut, from which stats, at which cover. */
static char *defrag_header(const cmf_header *h, const cmf_moe_keep *k, const char *fp,
                           cmf_err *err) {
    json_error_t jerr;
    json_t *root = json_loadb(h->json, h->json_len, 0, &jerr);
    json_t *prov = root ? json_object_get(root, "provenance") : NULL;
    if (root && !json_is_object(prov)) {
        prov = json_object();
        json_object_set_new(root, "provenance", prov);
    }
    json_t *layers = json_array(), *kept = json_array(), *kept_ids = json_object(),
           *counts = json_object();
    for (uint32_t l = 0; l < k->n_layers; l++) {
        if (!k->present[l]) continue;
        char key[16];
        snprintf(key, sizeof key, "%u", l);
        json_array_append_new(layers, json_integer(l));
        json_array_append_new(kept, json_integer(k->kept[l]));
        json_t *ids = json_array(), *c = json_array();
        for (uint32_t j = 0; j < k->kept[l]; j++) {
            uint32_t e = kept_at(k, l, j);
            json_array_append_new(ids, json_integer(e));
            json_array_append_new(c, json_integer((json_int_t)k->counts[l][e]));
        }
        json_object_set_new(kept_ids, key, ids);
        json_object_set_new(counts, key, c);
    }
    char hex[17];
    cmf_hash64_to_hex(k->stats_hash, hex);
    json_t *d =
        json_pack("{s:s,s:f,s:s,s:I,s:o,s:o,s:o,s:o}", "tool",
                  "cortiq moe-defrag " CORTIQ_VERSION_STRING, "cover", k->cover, "stats_hash64",
                  hex, "num_experts_pre", (json_int_t)k->num_experts, "layers", layers,
                  "kept_per_layer", kept, "kept_experts", kept_ids, "routing_counts", counts);
    char *text = NULL;
    if (root && prov && d && !json_object_set_new(prov, "moe_defrag", d))
        text = json_dumps(root, JSON_COMPACT | JSON_PRESERVE_ORDER);
    else
        json_decref(d);
    json_decref(root);
    if (!text) cmf_err_set(err, CMF_E_NOMEM, fp, "header");
    return text;
}

cmf_status cmf_moe_defrag(const char *in_path, const char *out_path, const cmf_moe_keep *k,
                          cmf_moe_defrag_stats *stats, cmf_err *err) {
    cmf_moe_defrag_stats ds = {0};
    cmf_file *f = NULL;
    cmf_status st = cmf_open_model(in_path, 0, &f, err);
    if (st) return st;
    const cmf_header *h = cmf_file_header(f);
    const char *fp = cmf_file_path(f);
    cmf_writer *w = NULL;
    cmf_masks_builder *mb = NULL;
    uint8_t *sec = NULL, *done = NULL;
    size_t sec_len = 0;
    char *json = NULL;
    if (k->n_layers != (uint64_t)h->arch.num_layers || !h->arch.moe.present ||
        k->num_experts != (uint64_t)h->arch.moe.num_experts) {
        st = cmf_err_set(err, CMF_E_INVALID_ARG, fp,
                         "the expert sets were chosen for another model (%u layers, %u experts)",
                         k->n_layers, k->num_experts);
        goto out;
    }
    for (uint32_t l = 0; l < k->n_layers; l++)
        ds.experts_in += k->present[l], ds.experts_out += k->kept[l];
    if (!(done = calloc(k->n_layers, 1))) {
        st = cmf_err_set(err, CMF_E_NOMEM, fp, "layers");
        goto out;
    }
    if (!(json = defrag_header(h, k, fp, err))) {
        st = CMF_E_NOMEM;
        goto out;
    }
    if ((st = cmf_writer_create(out_path, NULL, &w, err))) goto out;
    if ((st = cmf_writer_set_header(w, json, strlen(json), err))) goto out;
    uint32_t added = 0;
    for (size_t i = 0; i < cmf_file_tensor_count(f) && !st; i++) {
        const cmf_tensor *t = cmf_file_tensor_at(f, i);
        uint32_t l, e;
        const char *rest;
        if (expert_name(t->name, &l, &e, &rest) && l < k->n_layers && k->present[l]) {
            if (!done[l]) st = add_bank(w, f, k, l, &added, err);
            done[l] = 1;
        } else if ((layer_tensor(t->name, "gate.weight", &l) ||
                    layer_tensor(t->name, "expert_bias", &l)) &&
                   l < k->n_layers && k->present[l])
            st = add_gathered(w, fp, t, k, l, err);
        else
            st = cmf_writer_add_tensor_ref(w, t->name, (cmf_dtype)t->dtype, t->ndim, t->shape,
                                           t->data, t->nbytes, err);
    }
    if (st) goto out;
    if (cmf_file_masks(f)) {
        if ((st = cq_moe_masks_carry(f, k, &mb, &ds.masks_kept, &ds.masks_dropped, err))) goto out;
        if (ds.masks_kept && ((st = cmf_masks_builder_build(mb, &sec, &sec_len, err)) ||
                              (st = cmf_writer_set_masks(w, sec, sec_len, err))))
            goto out;
    }
    size_t vlen;
    const uint8_t *vocab = cmf_file_vocab(f, &vlen);
    if (vocab && (st = cmf_writer_set_vocab(w, vocab, vlen, err))) goto out;
    if ((st = cmf_writer_finish(w, err))) goto out;
    struct stat sb;
    for (size_t s = 0; s < cmf_file_shard_count(f); s++)
        if (!stat(cmf_file_shard_path(f, s), &sb)) ds.in_bytes += (uint64_t)sb.st_size;
    if (!stat(out_path, &sb)) ds.out_bytes = (uint64_t)sb.st_size;
out:
    cmf_writer_free(w);
    cmf_masks_builder_free(mb);
    free(sec), free(done), free(json);
    cmf_close(f);
    if (stats) *stats = ds;
    return st;
}
