/* hub_select.c - from a repo's file list to the files a conversion needs. A transformers
 * checkpoint is its config, tokenizer and chat-template files plus the weights (the index's
 * shards, or model.safetensors); a GGUF repo holds many quants of one model, of which one is
 * enough. */
#include "hub/hub_select.h"

#include "common/err.h"

#include <ctype.h>
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* Top-level files a conversion reads besides the weights (those absent are skipped). */
static const char *const k_meta[] = {
    "config.json",        "generation_config.json",
    "tokenizer.json",     "tokenizer_config.json",
    "tokenizer.model",    "special_tokens_map.json",
    "added_tokens.json",  "vocab.json",
    "merges.txt",         "chat_template.jinja",
    "chat_template.json", "model.safetensors.index.json",
};

/* GGUF quants in the order a default is chosen. cortiq re-encodes every tensor, so the source
 * with the least loss comes first: Q8_0 is near-lossless at half the size of F16; the K-quants
 * follow by quality; F16/BF16/F32 come last because they are 2-4x the download. */
static const char *const k_gguf_order[] = {
    "Q8_0", "Q6_K", "Q5_K_M", "Q5_K_S", "Q5_K", "Q4_K_M", "Q4_K_S", "Q4_K",
    "Q5_1", "Q5_0", "Q4_1",   "Q4_0",   "F16",  "BF16",   "F32",
};

static bool ends_with(const char *s, const char *suffix) {
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && !strcmp(s + a - b, suffix);
}

static bool alnum_at(const char *s, size_t i) {
    return isalnum((unsigned char)s[i]);
}

/* True when quant appears in name (case-insensitive) with no letter or digit on either side. */
static bool has_quant_token(const char *name, const char *quant) {
    size_t n = strlen(name), q = strlen(quant);
    for (size_t i = 0; i + q <= n; i++) {
        if (strncasecmp(name + i, quant, q)) continue;
        if ((i == 0 || !alnum_at(name, i - 1)) && (i + q == n || !alnum_at(name, i + q)))
            return true;
    }
    return false;
}

/* "model-00001-of-00003.gguf": a part of a split GGUF, which one file cannot stand for. */
static bool is_split_part(const char *name) {
    const char *p = strstr(name, "-of-");
    return p && p - name >= 6 && isdigit((unsigned char)p[-1]) && isdigit((unsigned char)p[4]);
}

size_t hub_select_gguf(const char *const *names, size_t n) {
    size_t best = SIZE_MAX, best_rank = SIZE_MAX;
    const size_t n_order = sizeof k_gguf_order / sizeof k_gguf_order[0];
    for (size_t i = 0; i < n; i++) {
        const char *s = names[i];
        if (!ends_with(s, ".gguf") || strchr(s, '/') || !strncasecmp(s, "mmproj", 6) ||
            is_split_part(s))
            continue;
        size_t rank = n_order;
        for (size_t k = 0; k < n_order; k++)
            if (has_quant_token(s, k_gguf_order[k])) {
                rank = k;
                break;
            }
        if (rank < best_rank || (rank == best_rank && strcmp(s, names[best]) < 0)) {
            best = i;
            best_rank = rank;
        }
    }
    return best;
}

static cmf_status add(hub_selection *s, size_t i, cmf_err *err) {
    for (size_t k = 0; k < s->n; k++)
        if (s->idx[k] == i) return CMF_OK;
    if (s->n == s->cap) {
        size_t nc = s->cap ? s->cap * 2 : 16;
        size_t *ni = realloc(s->idx, nc * sizeof *ni);
        if (!ni) return cmf_err_set(err, CMF_E_NOMEM, "hub", "out of memory");
        s->idx = ni;
        s->cap = nc;
    }
    s->idx[s->n++] = i;
    return CMF_OK;
}

void hub_selection_free(hub_selection *s) {
    if (!s) return;
    free(s->idx);
    memset(s, 0, sizeof *s);
}

static bool top_level_safetensors(const char *p) {
    return !strchr(p, '/') && ends_with(p, ".safetensors");
}

static cmf_status select_checkpoint(const hub_listing *l, hub_selection *out, cmf_err *err) {
    cmf_status st = CMF_OK;
    for (size_t k = 0; !st && k < sizeof k_meta / sizeof k_meta[0]; k++) {
        const hub_file *f = hub_listing_find(l, k_meta[k]);
        if (f) st = add(out, (size_t)(f - l->files), err);
    }
    if (st) return st;
    if (hub_listing_find(l, "model.safetensors.index.json")) {
        out->sharded_index = true; /* the index names the shards: added once it is here */
        return CMF_OK;
    }
    const hub_file *single = hub_listing_find(l, "model.safetensors");
    if (single) return add(out, (size_t)(single - l->files), err);
    for (size_t i = 0; !st && i < l->n; i++)
        if (top_level_safetensors(l->files[i].path)) st = add(out, i, err);
    return st;
}

static bool has_checkpoint(const hub_listing *l) {
    if (!hub_listing_find(l, "config.json")) return false;
    for (size_t i = 0; i < l->n; i++)
        if (top_level_safetensors(l->files[i].path)) return true;
    return false;
}

static size_t default_gguf(const hub_listing *l) {
    const char **names = malloc((l->n ? l->n : 1) * sizeof *names);
    if (!names) return SIZE_MAX;
    for (size_t i = 0; i < l->n; i++)
        names[i] = l->files[i].path;
    size_t k = hub_select_gguf(names, l->n);
    free(names);
    return k;
}

cmf_status hub_select(const hub_listing *l, const char *repo, const char *file,
                      cortiq_hub_want want, hub_selection *out, cmf_err *err) {
    memset(out, 0, sizeof *out);
    if (file) {
        const hub_file *f = hub_listing_find(l, file);
        if (!f)
            return cmf_err_set(err, CMF_E_NOT_FOUND, repo,
                               "no file '%s' at commit %s: check the name (case matters)", file,
                               l->commit);
        out->gguf = ends_with(file, ".gguf");
        return add(out, (size_t)(f - l->files), err);
    }
    if (want != CORTIQ_HUB_WANT_GGUF && has_checkpoint(l)) return select_checkpoint(l, out, err);
    if (want == CORTIQ_HUB_WANT_SAFETENSORS)
        return cmf_err_set(err, CMF_E_NOT_FOUND, repo,
                           "no safetensors checkpoint (config.json + *.safetensors) at commit "
                           "%s%s",
                           l->commit,
                           default_gguf(l) != SIZE_MAX ? ": it holds GGUF files, use "
                                                         "`cortiq import-gguf` for those"
                                                       : "");
    size_t g = default_gguf(l);
    if (g == SIZE_MAX)
        return cmf_err_set(err, CMF_E_NOT_FOUND, repo, "no %s at commit %s: name a file as %s:FILE",
                           want == CORTIQ_HUB_WANT_GGUF
                               ? "top-level .gguf file"
                               : "safetensors checkpoint (config.json + *.safetensors) or "
                                 "top-level .gguf file",
                           l->commit, repo);
    out->gguf = true;
    return add(out, g, err);
}

cmf_status hub_select_index_shards(const hub_listing *l, const char *index_json, hub_selection *sel,
                                   cmf_err *err) {
    json_error_t je;
    json_t *root = json_loads(index_json, 0, &je);
    json_t *map = json_object_get(root, "weight_map");
    if (!json_is_object(map)) {
        json_decref(root);
        return cmf_err_set(err, CMF_E_PARSE, "model.safetensors.index.json",
                           "no \"weight_map\" object");
    }
    cmf_status st = CMF_OK;
    const char *key;
    json_t *v;
    json_object_foreach(map, key, v) {
        const char *shard = json_string_value(v);
        const hub_file *f = shard ? hub_listing_find(l, shard) : NULL;
        if (!f) {
            st = cmf_err_set(err, CMF_E_NOT_FOUND, "model.safetensors.index.json",
                             "tensor '%s' is in shard '%s', which the repo does not have", key,
                             shard ? shard : "?");
            break;
        }
        if ((st = add(sel, (size_t)(f - l->files), err))) break;
    }
    json_decref(root);
    return st;
}
