/* moe_stats.c - route statistics files (CMF_MOE_STATS, spec §11.1) and the expert set they
 * select at a cover (cortiq/moe.h). */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/durable_io.h"
#include "common/err.h"
#include "common/fileio.h"
#include "cortiq/hash.h"
#include "cortiq/moe.h"

cmf_status cmf_moe_stats_write(const char *path, uint32_t n_layers, const uint64_t *const *counts,
                               const uint32_t *n_experts, cmf_err *err) {
    /* {"L":[c,...],...} in layer order, the layout the other implementation writes */
    size_t cap = 64, len = 0;
    for (uint32_t l = 0; l < n_layers; l++)
        if (counts[l]) cap += 16 + (size_t)n_experts[l] * 21;
    char *buf = malloc(cap);
    if (!buf) return cmf_err_set(err, CMF_E_NOMEM, path, "route statistics");
    buf[len++] = '{';
    bool first = true;
    for (uint32_t l = 0; l < n_layers; l++) {
        if (!counts[l]) continue;
        len += (size_t)snprintf(buf + len, cap - len, "%s\"%u\":[", first ? "" : ",", l);
        for (uint32_t e = 0; e < n_experts[l]; e++)
            len += (size_t)snprintf(buf + len, cap - len, "%s%llu", e ? "," : "",
                                    (unsigned long long)counts[l][e]);
        buf[len++] = ']';
        first = false;
    }
    buf[len++] = '}';
    buf[len++] = '\n';
    int fd = -1;
    char *tmp = NULL;
    cmf_status st = io_create_temp(path, &fd, &tmp, err);
    if (!st) st = io_pwrite_all(fd, buf, len, 0, path, err);
    if (!st) st = io_fsync(fd, path, err);
    if (fd >= 0) close(fd);
    if (!st) st = io_commit_rename(tmp, path, err);
    if (st && tmp) unlink(tmp);
    free(tmp);
    free(buf);
    return st;
}

void cmf_moe_keep_free(cmf_moe_keep *k) {
    if (!k) return;
    if (k->counts)
        for (uint32_t l = 0; l < k->n_layers; l++)
            free(k->counts[l]);
    free(k->counts), free(k->present), free(k->kept), free(k->bits);
    memset(k, 0, sizeof *k);
}

/* Experts present in layer l of f: its router's rows (the load-time invariant of §11.1), 0
 * when the layer has no router. */
static uint32_t experts_present(const cmf_file *f, uint32_t l) {
    char name[96];
    snprintf(name, sizeof name, "model.layers.%u.mlp.gate.weight", l);
    const cmf_tensor *r = cmf_file_find(f, name);
    return r && r->ndim == 2 ? (uint32_t)r->shape[0] : 0;
}

/* Layer l's set: experts by decreasing count (ties to the lower index) until their sum reaches
 * cover of the total. */
static uint32_t choose(const uint64_t *c, uint32_t n, uint64_t total, double cover, uint8_t *bits) {
    uint32_t *order = malloc(n * sizeof *order);
    if (!order) return 0;
    for (uint32_t e = 0; e < n; e++) { /* insertion sort: stable, n is at most a few hundred */
        uint32_t j = e;
        while (j > 0 && c[order[j - 1]] < c[e]) {
            order[j] = order[j - 1];
            j--;
        }
        order[j] = e;
    }
    uint64_t acc = 0;
    uint32_t kept = 0;
    while (kept < n) {
        uint32_t e = order[kept++];
        bits[e >> 3] |= (uint8_t)(1u << (e & 7));
        acc += c[e];
        if ((double)acc >= cover * (double)total) break;
    }
    free(order);
    return kept;
}

/* Parse the stats object into k->counts, checking it against f. */
static cmf_status read_counts(const cmf_file *f, const char *sp, json_t *root, cmf_moe_keep *k,
                              cmf_err *err) {
    const char *fp = cmf_file_path(f);
    if (!json_is_object(root))
        return cmf_err_set(err, CMF_E_PARSE, sp,
                           "not CMF_MOE_STATS: want a JSON object {\"layer\": [count per "
                           "expert], ...}");
    const char *key;
    json_t *val;
    json_object_foreach(root, key, val) {
        char *end;
        errno = 0;
        unsigned long l = strtoul(key, &end, 10);
        if (!*key || *end || key[0] == '-' || key[0] == '+' || errno)
            return cmf_err_set(err, CMF_E_PARSE, sp, "key '%s' is not a layer index", key);
        if (l >= k->n_layers)
            return cmf_err_set(err, CMF_E_PARSE, sp,
                               "layer %lu: %s has %u layers (stats of another model?)", l, fp,
                               k->n_layers);
        if (!k->present[l])
            return cmf_err_set(err, CMF_E_PARSE, sp,
                               "layer %lu has counts but layer %lu of %s has no router (a dense "
                               "layer; stats of another model?)",
                               l, l, fp);
        if (!json_is_array(val) || json_array_size(val) != k->present[l])
            return cmf_err_set(err, CMF_E_PARSE, sp,
                               "layer %lu: %zu counts, but layer %lu of %s has %u experts "
                               "(router rows; stats of another model?)",
                               l, json_is_array(val) ? json_array_size(val) : 0, l, fp,
                               k->present[l]);
        uint64_t *c = calloc(k->present[l], sizeof *c);
        if (!c) return cmf_err_set(err, CMF_E_NOMEM, sp, "counts");
        k->counts[l] = c;
        for (uint32_t e = 0; e < k->present[l]; e++) {
            json_t *v = json_array_get(val, e);
            if (!json_is_integer(v) || json_integer_value(v) < 0)
                return cmf_err_set(err, CMF_E_PARSE, sp,
                                   "layer %lu, expert %u: a count is a non-negative integer", l, e);
            c[e] = (uint64_t)json_integer_value(v);
        }
    }
    for (uint32_t l = 0; l < k->n_layers; l++)
        if (k->present[l] && !k->counts[l])
            return cmf_err_set(err, CMF_E_PARSE, sp,
                               "no counts for layer %u, a MoE layer of %s (stats of another "
                               "model?)",
                               l, fp);
    return CMF_OK;
}

cmf_status cmf_moe_keep_from_stats(const cmf_file *f, const char *sp, double cover, cmf_moe_keep *k,
                                   cmf_err *err) {
    memset(k, 0, sizeof *k);
    if (!(cover > 0 && cover <= 1))
        return cmf_err_set(err, CMF_E_INVALID_ARG, sp,
                           "cover %g is outside (0, 1] (the fraction of each layer's routing "
                           "mass to keep)",
                           cover);
    const cmf_arch *a = &cmf_file_header(f)->arch;
    if (!a->moe.present || a->moe.num_experts < 1 || a->num_layers < 1)
        return cmf_err_set(err, CMF_E_UNSUPPORTED, cmf_file_path(f),
                           "not a mixture-of-experts model (no arch.moe)");
    k->n_layers = (uint32_t)a->num_layers;
    k->num_experts = (uint32_t)a->moe.num_experts;
    k->expert_bytes = (k->num_experts + 7) / 8;
    k->cover = cover;
    k->present = calloc(k->n_layers, sizeof *k->present);
    k->kept = calloc(k->n_layers, sizeof *k->kept);
    k->counts = calloc(k->n_layers, sizeof *k->counts);
    k->bits = calloc(k->n_layers, k->expert_bytes);
    if (!k->present || !k->kept || !k->counts || !k->bits) {
        cmf_moe_keep_free(k);
        return cmf_err_set(err, CMF_E_NOMEM, sp, "expert sets");
    }
    uint32_t n_moe = 0;
    for (uint32_t l = 0; l < k->n_layers; l++) {
        k->present[l] = experts_present(f, l);
        n_moe += k->present[l] > 0;
        if (k->present[l] > k->num_experts) {
            cmf_moe_keep_free(k);
            return cmf_err_set(err, CMF_E_PARSE, cmf_file_path(f),
                               "layer %u: router has %u rows, more than arch.moe.num_experts=%u", l,
                               experts_present(f, l), (uint32_t)a->moe.num_experts);
        }
    }
    if (!n_moe) {
        cmf_moe_keep_free(k);
        return cmf_err_set(err, CMF_E_UNSUPPORTED, cmf_file_path(f),
                           "no layer has a MoE router (mlp.gate.weight)");
    }
    size_t len;
    char *text = cq_read_file(sp, &len);
    if (!text) {
        cmf_status st = cmf_err_set(err, CMF_E_IO, sp, "cannot read: %s", strerror(errno));
        cmf_moe_keep_free(k);
        return st;
    }
    k->stats_hash = cmf_hash64(text, len);
    json_error_t jerr;
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
    free(text);
    cmf_status st =
        root ? read_counts(f, sp, root, k, err)
             : cmf_err_set(err, CMF_E_PARSE, sp, "not JSON (line %d: %s)", jerr.line, jerr.text);
    json_decref(root);
    for (uint32_t l = 0; !st && l < k->n_layers; l++) {
        uint8_t *row = k->bits + (size_t)l * k->expert_bytes;
        if (!k->present[l]) { /* a dense layer: all ones, tail bits zero */
            for (uint32_t e = 0; e < k->num_experts; e++)
                row[e >> 3] |= (uint8_t)(1u << (e & 7));
            continue;
        }
        uint64_t total = 0;
        bool overflow = false;
        for (uint32_t e = 0; e < k->present[l]; e++) {
            overflow |= total + k->counts[l][e] < total;
            total += k->counts[l][e];
        }
        if (overflow)
            st = cmf_err_set(err, CMF_E_PARSE, sp, "layer %u: the counts sum past 2^64", l);
        else if (!total)
            st = cmf_err_set(err, CMF_E_PARSE, sp,
                             "layer %u: every count is 0 (no routing recorded), so no cover "
                             "selects an expert and the layer would keep none (a MoE layer "
                             "keeps at least one)",
                             l);
        else if (!(k->kept[l] = choose(k->counts[l], k->present[l], total, cover, row)))
            st = cmf_err_set(err, CMF_E_NOMEM, sp, "expert order");
    }
    if (st) cmf_moe_keep_free(k);
    return st;
}
