/* convert_hf.c - `cortiq convert`: a Hugging Face checkpoint directory into a CMF file. Tensor
 * names stay 1:1 with the checkpoint, except that a multimodal wrapper gives its text model under
 * the canonical names (hf_names.h); shapes are checked against config.json first. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/err.h"
#include "common/fileio.h"
#include "convert/defrag_hf.h"
#include "convert/hf_header.h"
#include "convert/hf_names.h"
#include "convert/mtp_names.h"
#include "convert/masks_dir.h"
#include "cortiq/safetensors.h"
#include "cortiq/converter.h"

static const char *quant_label(const cmf_convert_opts *o) {
    static const char *names[] = {
        [CMF_DT_F32] = "f32",     [CMF_DT_F16] = "f16",      [CMF_DT_BF16] = "bf16",
        [CMF_DT_Q8_ROW] = "q8",   [CMF_DT_Q4_BLOCK] = "q4",  [CMF_DT_VBIT] = "vbit",
        [CMF_DT_Q8_2F] = "q8_2f", [CMF_DT_VBIT_RO] = "vbit", [CMF_DT_Q4_TILED] = "q4t",
        [CMF_DT_Q1] = "q1",       [CMF_DT_Q1S] = "q1s",      [CMF_DT_Q1T] = "q1t",
        [CMF_DT_Q4TP] = "q4tp"};
    return (unsigned)o->quant < CMF_DT_COUNT && names[o->quant] ? names[o->quant] : "?";
}

cmf_status cmf_convert_hf_header(const char *model_dir, const cmf_convert_opts *opts, char **out,
                                 cmf_err *err) {
    cmf_convert_opts d;
    if (!opts) cmf_convert_opts_default(&d), opts = &d;
    json_t *h;
    cmf_status st = hf_build_header(model_dir, quant_label(opts), opts->quant, &h, NULL, err);
    if (st) return st;
    *out = json_dumps(h, JSON_COMPACT);
    json_decref(h);
    return *out ? CMF_OK : cmf_err_set(err, CMF_E_NOMEM, model_dir, "header");
}

typedef struct st_src {
    const cmf_st *st;
    const cmf_st_tensor *t;
} st_src;

static cmf_status read_st(void *user, const cmf_convert_source *src, float *dst, cmf_err *err) {
    (void)src;
    st_src *s = user;
    cmf_status st = cmf_st_rows_f32(s->st, s->t, 0, s->t->nrows, dst, err);
    /* each source byte is read once: drop its pages from our resident set (the page cache
     * keeps them), so peak RSS tracks the tensors in flight, not the whole checkpoint */
    long page = sysconf(_SC_PAGESIZE);
    uintptr_t a = ((uintptr_t)s->t->data + (uintptr_t)page - 1) & ~(uintptr_t)(page - 1);
    uintptr_t e = ((uintptr_t)s->t->data + s->t->nbytes) & ~(uintptr_t)(page - 1);
    if (e > a) madvise((void *)a, e - a, MADV_DONTNEED);
    return st;
}

static int64_t cfg_int(json_t *o, const char *k, int64_t d) {
    json_t *v = json_object_get(o, k);
    return v && json_is_integer(v) ? json_integer_value(v) : d;
}

typedef struct shape_rule {
    const char *suffix;
    int64_t rows, cols; /* -1 = not checked */
    int64_t alt_rows;   /* a second accepted row count (gated q_proj), -1 none */
} shape_rule;

static cmf_status check_shapes(const hf_names *st, json_t *arch, const char *dir, cmf_err *err) {
    int64_t hidden = cfg_int(arch, "hidden_size", -1),
            heads = cfg_int(arch, "num_attention_heads", -1);
    int64_t kv = cfg_int(arch, "num_kv_heads", heads), hd = cfg_int(arch, "head_dim", -1);
    int64_t vocab = cfg_int(arch, "vocab_size", -1), inter = cfg_int(arch, "intermediate_size", -1);
    int64_t layers = cfg_int(arch, "num_layers", -1);
    json_t *lt = json_object_get(arch, "layer_types");
    int tied = json_is_true(json_object_get(arch, "tie_word_embeddings"));
    const cmf_st_tensor *emb = hf_names_find(st, "model.embed_tokens.weight");
    if (!emb)
        return cmf_err_set(err, CMF_E_NOT_FOUND, dir, "missing tensor 'model.embed_tokens.weight'");
    if (emb->ndim != 2 || (int64_t)emb->shape[1] != hidden ||
        (vocab > 0 && (int64_t)emb->shape[0] != vocab))
        return cmf_err_set(err, CMF_E_PARSE, dir,
                           "tensor 'model.embed_tokens.weight' shape [%llu, %llu] contradicts "
                           "config vocab_size=%lld "
                           "hidden_size=%lld",
                           (unsigned long long)emb->shape[0], (unsigned long long)emb->shape[1],
                           (long long)vocab, (long long)hidden);
    if (!tied && !hf_names_find(st, "lm_head.weight"))
        return cmf_err_set(err, CMF_E_NOT_FOUND, dir,
                           "missing tensor 'lm_head.weight' (tie_word_embeddings is false)");
    if (!hf_names_find(st, "model.norm.weight"))
        return cmf_err_set(err, CMF_E_NOT_FOUND, dir, "missing tensor 'model.norm.weight'");
    for (int64_t l = 0; l < layers; l++) {
        const char *tag = json_string_value(json_array_get(lt, (size_t)l));
        int attn = !tag || strcmp(tag, "LinearAttention") != 0;
        char name[256];
        snprintf(name, sizeof name, "model.layers.%lld.input_layernorm.weight", (long long)l);
        const cmf_st_tensor *t = hf_names_find(st, name);
        if (!t) return cmf_err_set(err, CMF_E_NOT_FOUND, dir, "missing tensor '%s'", name);
        if (t->nelem != (uint64_t)hidden)
            return cmf_err_set(err, CMF_E_PARSE, dir,
                               "tensor '%s' has %llu elements, config hidden_size=%lld", name,
                               (unsigned long long)t->nelem, (long long)hidden);
        /* arch.attention_heads_per_layer overrides the query heads of each layer (spec §2) */
        json_t *hl = json_array_get(json_object_get(arch, "attention_heads_per_layer"), (size_t)l);
        int64_t qh = json_is_integer(hl) ? json_integer_value(hl) : heads;
        shape_rule rules[] = {
            {"self_attn.q_proj.weight", qh * hd, hidden, 2 * qh * hd},
            {"self_attn.k_proj.weight", kv * hd, hidden, -1},
            {"self_attn.v_proj.weight", kv * hd, hidden, -1},
            {"self_attn.o_proj.weight", hidden, qh * hd, -1},
            {"mlp.gate_proj.weight", inter, hidden, -1},
            {"mlp.up_proj.weight", inter, hidden, -1},
            {"mlp.down_proj.weight", hidden, inter, -1},
        };
        for (size_t r = 0; r < sizeof rules / sizeof rules[0]; r++) {
            int is_attn = r < 4;
            snprintf(name, sizeof name, "model.layers.%lld.%s", (long long)l, rules[r].suffix);
            t = hf_names_find(st, name);
            if (!t) {
                if (is_attn && attn)
                    return cmf_err_set(err, CMF_E_NOT_FOUND, dir, "missing tensor '%s'", name);
                continue; /* MoE layers have experts instead of mlp.*_proj */
            }
            if (t->ndim != 2 ||
                ((int64_t)t->shape[0] != rules[r].rows &&
                 (int64_t)t->shape[0] != rules[r].alt_rows) ||
                (int64_t)t->shape[1] != rules[r].cols)
                return cmf_err_set(
                    err, CMF_E_PARSE, dir,
                    "tensor '%s' shape [%llu, %llu] contradicts config (want [%lld, %lld])", name,
                    (unsigned long long)t->shape[0],
                    (unsigned long long)(t->ndim > 1 ? t->shape[1] : 0), (long long)rules[r].rows,
                    (long long)rules[r].cols);
        }
    }
    return CMF_OK;
}

/* An MTP head (spec §2.1) under its canonical names model.mtp.*, copies of the shared embedding
 * and lm_head dropped, and arch.mtp declared; *names (NULL-terminated) owns the new names. */
static cmf_status mtp_rename(json_t *cfg, json_t *arch, cmf_convert_source *src, size_t *n,
                             char ***names, const char *dir, cmf_err *err) {
    int64_t n_mtp = cq_mtp_config_layers(cfg), layers = cfg_int(arch, "num_layers", 0);
    if (n_mtp <= 0) return CMF_OK;
    *names = calloc(*n + 1, sizeof **names);
    if (!*names) return cmf_err_set(err, CMF_E_NOMEM, dir, "MTP tensor names");
    size_t kept = 0, renamed = 0;
    bool have_proj = false;
    for (size_t i = 0; i < *n; i++) {
        bool drop;
        char *c = cq_mtp_canonical(src[i].name, layers, n_mtp, &drop);
        if (drop) continue;
        if (c) {
            (*names)[renamed++] = c;
            src[i].name = c;
            have_proj |= !strcmp(c, "model.mtp.eh_proj.weight");
        }
        src[kept++] = src[i];
    }
    *n = kept;
    if (!renamed) return CMF_OK; /* declared but not shipped (a checkpoint without its head) */
    if (!have_proj)
        return cmf_err_set(err, CMF_E_NOT_FOUND, dir,
                           "config declares %lld MTP layer(s) and the checkpoint has MTP tensors, "
                           "but no eh_proj (mtp.fc / eh_proj) among them",
                           (long long)n_mtp);
    json_t *m = json_object();
    json_object_set_new(m, "num_layers", json_integer(n_mtp));
    json_object_set_new(m, "share_lm_head", json_true());
    json_object_set_new(m, "share_embed", json_true());
    json_object_set_new(arch, "mtp", m);
    return CMF_OK;
}

cmf_status cmf_convert_hf(const char *dir, const char *out_path, const char *masks_dir,
                          const cmf_convert_opts *opts, cmf_convert_stats *stats, cmf_err *err) {
    cmf_convert_opts d;
    if (!opts) cmf_convert_opts_default(&d), opts = &d;
    json_t *hdr = NULL, *cfg = NULL;
    cmf_st *st = NULL;
    hf_names names = {0};
    cmf_convert_source *src = NULL;
    st_src *ss = NULL;
    cq_defrag_hf *defrag = NULL;
    uint8_t *vocab = NULL, *masks = NULL;
    size_t vocab_len = 0, masks_len = 0;
    char *hjson = NULL;
    char **mtp_names = NULL; /* the canonical names of an MTP head's tensors (owned) */
    cmf_status s = hf_build_header(dir, quant_label(opts), opts->quant, &hdr, &cfg, err);
    if (s) goto out;
    if ((s = cmf_st_open(dir, &st, err))) goto out;
    json_t *arch = json_object_get(hdr, "arch");
    if ((s = hf_names_build(st, dir, &names, err))) goto out;
    if (names.left_out) { /* a multimodal wrapper: its text model only, and the file says so */
        char what[400];
        snprintf(what, sizeof what, "%zu tensors of %s (not the text model)", names.left_out,
                 names.left_what);
        fprintf(stderr, "convert: %s: text model of a multimodal checkpoint; left out %s\n", dir,
                what);
        json_t *prov = json_object_get(hdr, "provenance");
        if (prov) json_object_set_new(prov, "left_out", json_string(what));
    }
    if ((s = check_shapes(&names, arch, dir, err))) goto out;
    char tpath[4096];
    snprintf(tpath, sizeof tpath, "%s/tokenizer.json", dir);
    vocab = (uint8_t *)cq_read_file(tpath, &vocab_len);
    if (!vocab) {
        s = cmf_err_set(err, CMF_E_NOT_FOUND, tpath,
                        "missing: the tokenizer section is tokenizer.json verbatim");
        goto out;
    }
    if (masks_dir && opts->defrag_dir) {
        s = cmf_err_set(err, CMF_E_INVALID_ARG, opts->defrag_dir,
                        "--defrag with --masks: a defragged file carries no masks (spec §11)");
        goto out;
    }
    if (masks_dir && (s = cmf_masks_from_dir(masks_dir, arch, &masks, &masks_len, err))) goto out;
    size_t n = names.n;
    src = calloc(n ? n : 1, sizeof *src);
    ss = calloc(n ? n : 1, sizeof *ss);
    if (!src || !ss) {
        s = cmf_err_set(err, CMF_E_NOMEM, dir, "tensor list");
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        const cmf_st_tensor *t = names.tensor[i];
        if (t->ndim > 6) {
            s = cmf_err_set(err, CMF_E_UNSUPPORTED, dir, "tensor '%s' has %u dims (CMF holds 6)",
                            t->name, t->ndim);
            goto out;
        }
        ss[i] = (st_src){st, t};
        src[i].name = names.name[i];
        src[i].ndim = t->ndim;
        for (unsigned k = 0; k < t->ndim; k++)
            src[i].shape[k] = t->shape[k];
        src[i].read_f32 = read_st;
        src[i].user = &ss[i];
        src[i].source_bytes = t->nbytes;
    }
    if ((s = mtp_rename(cfg, arch, src, &n, &mtp_names, dir, err))) goto out;
    if (opts->defrag_dir && (s = cq_defrag_hf_apply(opts->defrag_dir, hdr, src, n, &defrag, err)))
        goto out;
    cmf_convert_sort_canonical(src, n);
    hjson = json_dumps(hdr, JSON_COMPACT);
    if (!hjson) {
        s = cmf_err_set(err, CMF_E_NOMEM, dir, "header");
        goto out;
    }
    s = cmf_convert_run(out_path, hjson, src, n, vocab, vocab_len, masks, masks_len, opts, stats,
                        err);
out:
    for (size_t i = 0; mtp_names && mtp_names[i]; i++)
        free(mtp_names[i]);
    free(mtp_names);
    free(hjson);
    free(src);
    cq_defrag_hf_free(defrag);
    free(ss);
    hf_names_free(&names);
    free(vocab);
    free(masks);
    cmf_st_close(st);
    json_decref(hdr);
    json_decref(cfg);
    return s;
}
