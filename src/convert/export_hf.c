/* export_hf.c - a CMF model back into a Hugging Face checkpoint directory: model.safetensors
 * (every tensor dequantized to f32, f16 or bf16, names unchanged: CMF names are HF names),
 * config.json from the arch block, tokenizer.json from the vocab section, tokenizer_config.json
 * and generation_config.json from the chat bundle. Each file is written to a temporary name
 * and renamed into place. */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/bytes.h"
#include "common/err.h"
#include "common/f16.h"
#include "cortiq/converter.h"
#include "cortiq/format.h"
#include "cortiq/quant.h"

/* arch_name (a transformers model_type, or a GGUF architecture) -> model_type, class */
static const struct {
    const char *arch, *model_type, *cls;
} k_families[] = {
    {"llama", "llama", "LlamaForCausalLM"},
    {"mistral", "mistral", "MistralForCausalLM"},
    {"qwen2", "qwen2", "Qwen2ForCausalLM"},
    {"qwen3", "qwen3", "Qwen3ForCausalLM"},
    {"gemma3", "gemma3_text", "Gemma3ForCausalLM"},
    {"gemma3_text", "gemma3_text", "Gemma3ForCausalLM"},
    {"qwen2_moe", "qwen2_moe", "Qwen2MoeForCausalLM"},
    {"qwen3_moe", "qwen3_moe", "Qwen3MoeForCausalLM"},
    {"qwen3_next", "qwen3_next", "Qwen3NextForCausalLM"},
};

typedef struct exporter {
    const char *dir;
    cmf_err *err;
} exporter;

/* Write bytes to dir/name through dir/name.tmp. */
static cmf_status put_file(exporter *x, const char *name, const void *a, size_t alen, FILE **keep) {
    char path[4200], tmp[4300];
    snprintf(path, sizeof path, "%s/%s", x->dir, name);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "wb");
    if (!f || (alen && fwrite(a, 1, alen, f) != alen)) {
        if (f) fclose(f), remove(tmp);
        return cmf_err_set(x->err, CMF_E_IO, tmp, "cannot write: %s", strerror(errno));
    }
    if (keep) { /* the caller appends more, then calls finish_file */
        *keep = f;
        return CMF_OK;
    }
    if (fclose(f) != 0 || rename(tmp, path) != 0) {
        remove(tmp);
        return cmf_err_set(x->err, CMF_E_IO, path, "cannot write: %s", strerror(errno));
    }
    return CMF_OK;
}

static cmf_status finish_file(exporter *x, const char *name, FILE *f, cmf_status st) {
    char path[4200], tmp[4300];
    snprintf(path, sizeof path, "%s/%s", x->dir, name);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    if (fclose(f) != 0 && !st) st = cmf_err_set(x->err, CMF_E_IO, tmp, "%s", strerror(errno));
    if (!st && rename(tmp, path) != 0)
        st = cmf_err_set(x->err, CMF_E_IO, path, "cannot rename: %s", strerror(errno));
    if (st) remove(tmp);
    return st;
}

static cmf_status put_json(exporter *x, const char *name, json_t *j) {
    char *text = json_dumps(j, JSON_INDENT(2) | JSON_REAL_PRECISION(17));
    if (!text) return cmf_err_set(x->err, CMF_E_NOMEM, name, "JSON");
    cmf_status st = put_file(x, name, text, strlen(text), NULL);
    free(text);
    return st;
}

static bool exported(const cmf_tensor *t) {
    return strncmp(t->name, "skill.", 6) != 0; /* skill overlays are not part of the model */
}

/* model.safetensors: an 8-aligned JSON header, then each tensor's values in directory order. */
static cmf_status put_weights(exporter *x, const cmf_file *f, cmf_dtype dt) {
    const char *st_name = dt == CMF_DT_F32 ? "F32" : dt == CMF_DT_F16 ? "F16" : "BF16";
    size_t esize = dt == CMF_DT_F32 ? 4 : 2;
    json_t *h = json_object(), *meta = json_object();
    json_object_set_new(meta, "format", json_string("pt"));
    json_object_set_new(h, "__metadata__", meta);
    uint64_t off = 0, largest = 0;
    size_t n = cmf_file_tensor_count(f);
    for (size_t i = 0; i < n; i++) {
        const cmf_tensor *t = cmf_file_tensor_at(f, i);
        if (!exported(t)) continue;
        uint64_t numel = 1;
        json_t *shape = json_array();
        for (unsigned d = 0; d < t->ndim; d++) {
            numel *= t->shape[d];
            json_array_append_new(shape, json_integer((json_int_t)t->shape[d]));
        }
        json_t *e = json_object();
        json_object_set_new(e, "dtype", json_string(st_name));
        json_object_set_new(e, "shape", shape);
        json_t *offs = json_array();
        json_array_append_new(offs, json_integer((json_int_t)off));
        json_array_append_new(offs, json_integer((json_int_t)(off + numel * esize)));
        json_object_set_new(e, "data_offsets", offs);
        json_object_set_new(h, t->name, e);
        off += numel * esize;
        if (numel > largest) largest = numel;
    }
    char *text = json_dumps(h, JSON_COMPACT);
    json_decref(h);
    if (!text) return cmf_err_set(x->err, CMF_E_NOMEM, "model.safetensors", "header");
    size_t hl = strlen(text), padded = (hl + 7) / 8 * 8;
    uint8_t *head = malloc(8 + padded);
    float *vals = malloc((size_t)largest * sizeof *vals);
    if (!head || !vals) {
        free(text), free(head), free(vals);
        return cmf_err_set(x->err, CMF_E_NOMEM, "model.safetensors", "%llu values",
                           (unsigned long long)largest);
    }
    st_u64(head, padded);
    memcpy(head + 8, text, hl);
    memset(head + 8 + hl, ' ', padded - hl);
    free(text);
    FILE *out = NULL;
    cmf_status st = put_file(x, "model.safetensors", head, 8 + padded, &out);
    free(head);
    if (st) {
        free(vals);
        return st;
    }
    for (size_t i = 0; i < n && !st; i++) {
        const cmf_tensor *t = cmf_file_tensor_at(f, i);
        if (!exported(t)) continue;
        uint64_t numel = 1;
        for (unsigned d = 0; d < t->ndim; d++)
            numel *= t->shape[d];
        st = cmf_quant_dequant((cmf_dtype)t->dtype, t->ndim, t->shape, t->data, t->nbytes, vals,
                               x->err);
        for (uint64_t k = 0; !st && k < numel; k++) { /* little-endian on any host */
            uint8_t b[4];
            if (dt == CMF_DT_F32)
                st_u32(b, f32_bits(vals[k]));
            else
                st_u16(b, dt == CMF_DT_F16 ? f32_to_f16(vals[k]) : f32_to_bf16(vals[k]));
            if (fwrite(b, 1, esize, out) != esize)
                st =
                    cmf_err_set(x->err, CMF_E_IO, x->dir, "model.safetensors: %s", strerror(errno));
        }
    }
    free(vals);
    return finish_file(x, "model.safetensors", out, st);
}

static void copy_key(json_t *dst, const char *dk, json_t *src, const char *sk) {
    json_t *v = json_object_get(src, sk);
    if (v && !json_is_null(v)) json_object_set(dst, dk, v);
}

static const char *hf_layer_type(const char *tag) {
    return !strcmp(tag, "SlidingAttention")  ? "sliding_attention"
           : !strcmp(tag, "LinearAttention") ? "linear_attention"
                                             : "full_attention";
}

static json_t *build_config(json_t *arch, json_t *tc, const char *model_type, const char *cls,
                            cmf_dtype dt) {
    json_t *c = json_object(), *classes = json_array();
    json_array_append_new(classes, json_string(cls));
    json_object_set_new(c, "architectures", classes);
    json_object_set_new(c, "model_type", json_string(model_type));
    static const char *const same[] = {"hidden_size",
                                       "intermediate_size",
                                       "num_attention_heads",
                                       "head_dim",
                                       "vocab_size",
                                       "max_position_embeddings",
                                       "rms_norm_eps",
                                       "rope_theta",
                                       "partial_rotary_factor",
                                       "tie_word_embeddings",
                                       "sliding_window",
                                       "sliding_window_pattern",
                                       "rope_local_base_freq",
                                       "query_pre_attn_scalar",
                                       "final_logit_softcapping",
                                       "attn_logit_softcapping",
                                       "linear_conv_kernel_dim",
                                       "linear_num_key_heads",
                                       "linear_num_value_heads",
                                       "linear_key_head_dim",
                                       "linear_value_head_dim"};
    for (size_t i = 0; i < sizeof same / sizeof same[0]; i++)
        copy_key(c, same[i], arch, same[i]);
    copy_key(c, "num_hidden_layers", arch, "num_layers");
    copy_key(c, "num_key_value_heads", arch, "num_kv_heads");
    json_t *act = json_object_get(arch, "hidden_act");
    const char *a = json_is_string(act) ? json_string_value(act) : "silu";
    const char *hf_act = !strcmp(a, "gelu_tanh") ? "gelu_pytorch_tanh" : a;
    json_object_set_new(c, "hidden_act", json_string(hf_act));
    if (!strncmp(model_type, "gemma", 5))
        json_object_set_new(c, "hidden_activation", json_string(hf_act));
    json_t *types = json_object_get(arch, "layer_types");
    if (json_is_array(types)) {
        json_t *lt = json_array();
        size_t i;
        json_t *v;
        json_array_foreach(types, i, v) json_array_append_new(
            lt, json_string(hf_layer_type(json_is_string(v) ? json_string_value(v) : "")));
        json_object_set_new(c, "layer_types", lt);
    }
    /* Qwen2 applies its window only when told to */
    if (!strcmp(model_type, "qwen2") && json_object_get(arch, "sliding_window"))
        json_object_set_new(c, "use_sliding_window", json_true());
    json_t *yarn = json_object_get(arch, "yarn"), *rs = json_object_get(arch, "rope_scaling");
    if (json_is_object(yarn)) {
        json_t *r = json_deep_copy(yarn);
        json_object_set_new(r, "rope_type", json_string("yarn"));
        json_object_set_new(c, "rope_scaling", r);
    } else if (json_is_object(rs)) {
        json_object_set(c, "rope_scaling", rs);
    }
    json_t *moe = json_object_get(arch, "moe");
    if (json_is_object(moe)) {
        copy_key(c, "num_experts", moe, "num_experts");
        copy_key(c, "num_experts_per_tok", moe, "top_k");
        copy_key(c, "moe_intermediate_size", moe, "moe_intermediate_size");
        copy_key(c, "norm_topk_prob", moe, "norm_topk_prob");
        copy_key(c, "shared_expert_intermediate_size", moe, "shared_expert_intermediate_size");
    }
    copy_key(c, "bos_token_id", tc, "bos_token_id");
    copy_key(c, "pad_token_id", tc, "pad_token_id");
    copy_key(c, "eos_token_id", tc, "eos_token_ids");
    json_object_set_new(c, "torch_dtype",
                        json_string(dt == CMF_DT_F32   ? "float32"
                                    : dt == CMF_DT_F16 ? "float16"
                                                       : "bfloat16"));
    return c;
}

/* The text of token id in tokenizer.json (added_tokens first, then model.vocab); NULL if none. */
static const char *token_text(json_t *tok, json_int_t id) {
    size_t i;
    json_t *v;
    json_array_foreach(json_object_get(tok, "added_tokens"), i, v) {
        json_t *tid = json_object_get(v, "id"), *content = json_object_get(v, "content");
        if (json_is_integer(tid) && json_integer_value(tid) == id && json_is_string(content))
            return json_string_value(content);
    }
    const char *k;
    json_object_foreach(json_object_get(json_object_get(tok, "model"), "vocab"), k, v) {
        if (json_is_integer(v) && json_integer_value(v) == id) return k;
    }
    return NULL;
}

static void set_token(json_t *dst, const char *key, json_t *tc, const char *text_key,
                      const char *id_key, json_t *tok) {
    json_t *text = json_object_get(tc, text_key);
    if (json_is_string(text)) {
        json_object_set(dst, key, text);
        return;
    }
    json_t *id = json_object_get(tc, id_key);
    if (json_is_array(id)) id = json_array_get(id, 0);
    const char *s = json_is_integer(id) ? token_text(tok, json_integer_value(id)) : NULL;
    if (s) json_object_set_new(dst, key, json_string(s));
}

cmf_status cmf_export_hf(const char *cmf_path, const char *out_dir, cmf_dtype dt, cmf_err *err) {
    if (dt != CMF_DT_F32 && dt != CMF_DT_F16 && dt != CMF_DT_BF16)
        return cmf_err_set(err, CMF_E_INVALID_ARG, out_dir,
                           "safetensors dtype %s: want f32, f16 or bf16", cmf_dtype_name(dt));
    cmf_file *f = NULL;
    cmf_status st = cmf_open_model(cmf_path, 0, &f, err);
    if (st) return st;
    exporter x = {out_dir, err};
    json_t *h = json_loads(cmf_file_header(f)->json, 0, NULL);
    json_t *arch = json_object_get(h, "arch"), *tc = json_object_get(h, "tokenizer_config");
    json_t *name = json_object_get(arch, "arch_name");
    const char *an = json_is_string(name) ? json_string_value(name) : "";
    size_t fam = sizeof k_families / sizeof k_families[0];
    for (size_t i = 0; i < sizeof k_families / sizeof k_families[0]; i++)
        if (!strcmp(an, k_families[i].arch)) fam = i;
    size_t vlen = 0;
    const uint8_t *vocab = cmf_file_vocab(f, &vlen);
    json_t *tok = vocab ? json_loadb((const char *)vocab, vlen, 0, NULL) : NULL;
    if (fam == sizeof k_families / sizeof k_families[0])
        st = cmf_err_set(err, CMF_E_UNSUPPORTED, cmf_path,
                         "arch.arch_name \"%s\": no transformers model_type is known for it", an);
    else if (!vocab || !tok)
        st = cmf_err_set(err, CMF_E_NOT_FOUND, cmf_path,
                         "no tokenizer section (spec §6): a checkpoint needs tokenizer.json");
    else if (mkdir(out_dir, 0755) != 0 && errno != EEXIST)
        st = cmf_err_set(err, CMF_E_IO, out_dir, "cannot create: %s", strerror(errno));
    if (!st) st = put_weights(&x, f, dt);
    if (!st) {
        json_t *c = build_config(arch, tc, k_families[fam].model_type, k_families[fam].cls, dt);
        st = put_json(&x, "config.json", c);
        json_decref(c);
    }
    if (!st) st = put_file(&x, "tokenizer.json", vocab, vlen, NULL);
    if (!st) {
        json_t *t = json_object();
        copy_key(t, "chat_template", tc, "chat_template");
        set_token(t, "bos_token", tc, "bos_token", "bos_token_id", tok);
        set_token(t, "eos_token", tc, "eos_token", "eos_token_ids", tok);
        set_token(t, "pad_token", tc, "pad_token", "pad_token_id", tok);
        json_object_set_new(t, "tokenizer_class", json_string("PreTrainedTokenizerFast"));
        st = put_json(&x, "tokenizer_config.json", t);
        json_decref(t);
    }
    if (!st) {
        json_t *g = json_object();
        copy_key(g, "bos_token_id", tc, "bos_token_id");
        copy_key(g, "eos_token_id", tc, "eos_token_ids");
        copy_key(g, "pad_token_id", tc, "pad_token_id");
        st = put_json(&x, "generation_config.json", g);
        json_decref(g);
    }
    json_decref(tok);
    json_decref(h);
    cmf_close(f);
    return st;
}
