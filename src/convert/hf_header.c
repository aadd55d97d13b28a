/* hf_header.c - a Hugging Face config.json (+ tokenizer files) into the CMF header (spec §2,
 * §2.1, §2.2, §6.1): arch, tokenizer_config, quant_type, provenance. */
#include <jansson.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "common/fileio.h"
#include "convert/arch_interop.h"
#include "convert/hf_header.h"
#include "cortiq/converter.h"
#include "cortiq/version.h"

static const char *const k_supported[] = {
    "llama",       "mistral",     "qwen2",        "qwen3",           "gemma3",
    "gemma3_text", "qwen2_moe",   "qwen3_moe",    "qwen3_next",      "qwen3_5",
    "laguna",      "qwen3_5_moe", "qwen3_5_text", "qwen3_5_moe_text"};

/* After a JSON_DECODE_INT_AS_REAL parse: turn integral reals that fit back into integers. */
static json_t *ints_back(json_t *v) {
    if (json_is_real(v)) {
        double d = json_real_value(v);
        if (d == floor(d) && fabs(d) < 9007199254740992.0) return json_integer((json_int_t)d);
        return json_incref(v);
    }
    if (json_is_array(v)) {
        json_t *a = json_array();
        size_t i;
        json_t *e;
        json_array_foreach(v, i, e) json_array_append_new(a, ints_back(e));
        return a;
    }
    if (json_is_object(v)) {
        json_t *o = json_object();
        const char *k;
        json_t *e;
        json_object_foreach(v, k, e) json_object_set_new(o, k, ints_back(e));
        return o;
    }
    return json_incref(v);
}

json_t *hf_load_json(const char *dir, const char *file, cmf_err *err, int required) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    FILE *fp = fopen(path, "rb");
    if (!fp) {
        if (required) cmf_err_set(err, CMF_E_NOT_FOUND, path, "missing (needed by the converter)");
        return NULL;
    }
    fclose(fp);
    json_error_t je;
    json_t *j = json_load_file(path, JSON_DECODE_ANY, &je);
    if (!j) {
        /* transformers writes integers beyond 64 bits (model_max_length = 1e30): read every
         * number as a double, then restore the integers that fit */
        json_t *r = json_load_file(path, JSON_DECODE_ANY | JSON_DECODE_INT_AS_REAL, NULL);
        if (r) {
            j = ints_back(r);
            json_decref(r);
        }
    }
    if (!j) cmf_err_set(err, CMF_E_PARSE, path, "invalid JSON at line %d: %s", je.line, je.text);
    return j;
}

static json_t *get(json_t *o, const char *k) {
    json_t *v = json_object_get(o, k);
    return (v && !json_is_null(v)) ? v : NULL;
}

static int copy_num(json_t *dst, const char *dk, json_t *src, const char *sk) {
    json_t *v = get(src, sk);
    if (!v || !json_is_number(v)) return 0;
    json_object_set(dst, dk, v);
    return 1;
}

static int64_t int_of(json_t *o, const char *k, int64_t dflt) {
    json_t *v = get(o, k);
    return v && json_is_integer(v) ? json_integer_value(v) : dflt;
}

/* rope_theta lives at the top level (transformers 4) or in rope_parameters (transformers 5). */
static json_t *rope_params(json_t *cfg) {
    json_t *rp = get(cfg, "rope_parameters");
    if (rp && json_is_object(rp)) {
        json_t *full = get(rp, "full_attention"); /* gemma3 in v5: per layer-type parameters */
        return full && json_is_object(full) ? full : rp;
    }
    return get(cfg, "rope_scaling");
}

static void add_yarn_or_scaling(json_t *arch, json_t *cfg) {
    json_t *rs = get(cfg, "rope_scaling");
    json_t *rp = get(cfg, "rope_parameters");
    if (!rs && rp && json_is_object(rp)) {
        json_t *full = get(rp, "full_attention");
        rs = full && json_is_object(full) ? full : rp;
    }
    if (!rs || !json_is_object(rs)) return;
    json_t *type = get(rs, "rope_type");
    if (!type) type = get(rs, "type");
    const char *t = type && json_is_string(type) ? json_string_value(type) : "default";
    if (!strcmp(t, "default")) return;
    if (!strcmp(t, "yarn")) {
        json_t *y = json_object();
        copy_num(y, "factor", rs, "factor");
        if (!copy_num(y, "original_max_position_embeddings", rs,
                      "original_max_position_embeddings"))
            copy_num(y, "original_max_position_embeddings", cfg, "max_position_embeddings");
        copy_num(y, "beta_fast", rs, "beta_fast");
        copy_num(y, "beta_slow", rs, "beta_slow");
        copy_num(y, "attention_factor", rs, "attention_factor");
        json_object_set_new(arch, "yarn", y);
        return;
    }
    /* llama3 / linear / dynamic scaling: carried as-is for the runtime (not a spec field) */
    json_t *copy = json_deep_copy(rs);
    json_object_del(copy, "rope_theta");
    json_object_set_new(arch, "rope_scaling", copy);
}

static json_t *layer_types(json_t *cfg, const char *mt, int64_t n_layers) {
    json_t *lt = get(cfg, "layer_types");
    json_t *out = json_array();
    if (lt && json_is_array(lt) && (int64_t)json_array_size(lt) == n_layers) {
        size_t i;
        json_t *v;
        json_array_foreach(lt, i, v) {
            const char *s = json_is_string(v) ? json_string_value(v) : "";
            const char *tag = !strcmp(s, "sliding_attention")  ? "SlidingAttention"
                              : !strcmp(s, "linear_attention") ? "LinearAttention"
                                                               : "FullAttention";
            json_array_append_new(out, json_string(tag));
        }
        return out;
    }
    int64_t pattern = int_of(cfg, "sliding_window_pattern", 0);
    int64_t interval = int_of(cfg, "full_attention_interval", 0);
    int sliding = json_is_true(get(cfg, "use_sliding_window"));
    int64_t max_window_layers = int_of(cfg, "max_window_layers", n_layers);
    for (int64_t i = 0; i < n_layers; i++) {
        const char *tag = "FullAttention";
        if (!strncmp(mt, "gemma3", 6))
            tag = ((i + 1) % (pattern ? pattern : 6)) ? "SlidingAttention" : "FullAttention";
        else if (!strncmp(mt, "qwen3_next", 10) || !strncmp(mt, "qwen3_5", 7))
            tag = ((i + 1) % (interval ? interval : 4)) ? "LinearAttention" : "FullAttention";
        else if (!strcmp(mt, "mistral") && json_is_integer(get(cfg, "sliding_window")))
            tag = "SlidingAttention";
        else if (sliding && get(cfg, "sliding_window") && i >= max_window_layers)
            tag = "SlidingAttention";
        json_array_append_new(out, json_string(tag));
    }
    return out;
}

static cmf_status build_arch(json_t *cfg, const char *mt, json_t **out, const char *ctx,
                             cmf_err *err) {
    json_t *a = json_object();
    json_object_set_new(a, "arch_name", json_string(mt));
    int64_t hidden = int_of(cfg, "hidden_size", -1), heads = int_of(cfg, "num_attention_heads", -1);
    int64_t layers = int_of(cfg, "num_hidden_layers", -1);
    if (hidden <= 0 || heads <= 0 || layers <= 0) {
        json_decref(a);
        return cmf_err_set(
            err, CMF_E_PARSE, ctx,
            "config.json needs positive hidden_size, num_attention_heads, num_hidden_layers");
    }
    if (layers > CQ_ARCH_MAX_LAYERS) {
        json_decref(a);
        return cmf_err_set(err, CMF_E_LIMIT, ctx,
                           "config.json num_hidden_layers=%lld outside [1, %d]", (long long)layers,
                           CQ_ARCH_MAX_LAYERS);
    }
    json_object_set_new(a, "hidden_size", json_integer(hidden));
    if (get(cfg, "intermediate_size")) copy_num(a, "intermediate_size", cfg, "intermediate_size");
    json_object_set_new(a, "num_layers", json_integer(layers));
    json_object_set_new(a, "num_attention_heads", json_integer(heads));
    json_object_set_new(a, "num_kv_heads", json_integer(int_of(cfg, "num_key_value_heads", heads)));
    json_object_set_new(a, "head_dim", json_integer(int_of(cfg, "head_dim", hidden / heads)));
    copy_num(a, "vocab_size", cfg, "vocab_size");
    copy_num(a, "max_position_embeddings", cfg, "max_position_embeddings");
    copy_num(a, "rms_norm_eps", cfg, "rms_norm_eps");
    int gemma = !strncmp(mt, "gemma", 5);
    /* Qwen3-Next and Qwen3.5 store zero-centred norm weights, applied as x*(1+w) like Gemma's */
    int zero_centred = gemma || !strncmp(mt, "qwen3_next", 10) || !strncmp(mt, "qwen3_5", 7);
    json_object_set_new(a, "norm_style", json_string(zero_centred ? "gemma" : "qwen"));
    json_t *rp = rope_params(cfg);
    if (!copy_num(a, "rope_theta", cfg, "rope_theta") && rp)
        copy_num(a, "rope_theta", rp, "rope_theta");
    if (!get(a, "rope_theta"))
        json_object_set_new(a, "rope_theta", json_real(gemma ? 1000000.0 : 10000.0));
    copy_num(a, "partial_rotary_factor", cfg, "partial_rotary_factor");
    if (rp && !get(a, "partial_rotary_factor"))
        copy_num(a, "partial_rotary_factor", rp, "partial_rotary_factor");
    add_yarn_or_scaling(a, cfg);
    json_t *types = layer_types(cfg, mt, layers);
    json_object_set_new(a, "layer_types", types);
    bool tagged = false; /* an explicit sliding layer (Laguna: an irregular schedule) */
    for (size_t i = 0; i < json_array_size(types); i++)
        tagged |= !strcmp(json_string_value(json_array_get(types, i)), "SlidingAttention");
    json_t *sw = get(cfg, "sliding_window");
    /* Mistral applies its window to every layer; Qwen2 only with use_sliding_window */
    if (sw && json_is_integer(sw) &&
        (gemma || tagged || !strcmp(mt, "mistral") || json_is_true(get(cfg, "use_sliding_window"))))
        json_object_set(a, "sliding_window", sw);
    /* per layer-type RoPE (transformers 5: rope_parameters.sliding_attention) for the sliding
     * layers; Laguna also overrides the query heads per layer (spec §2) */
    json_t *sliding_rp = get(get(cfg, "rope_parameters"), "sliding_attention");
    if (!gemma && sliding_rp && json_is_object(sliding_rp)) {
        json_t *rt = get(sliding_rp, "rope_type");
        const char *t = rt && json_is_string(rt) ? json_string_value(rt) : "default";
        if (strcmp(t, "default")) { /* spec §2: yarn and scaling belong to the full layers */
            json_decref(a);
            return cmf_err_set(err, CMF_E_UNSUPPORTED, ctx,
                               "rope_parameters.sliding_attention.rope_type is \"%s\": a CMF "
                               "header scales the RoPE of full-attention layers only",
                               t);
        }
        copy_num(a, "rope_local_base_freq", sliding_rp, "rope_theta");
        copy_num(a, "local_partial_rotary_factor", sliding_rp, "partial_rotary_factor");
    }
    json_t *hpl = get(cfg, "num_attention_heads_per_layer");
    if (hpl && json_is_array(hpl)) json_object_set(a, "attention_heads_per_layer", hpl);
    /* Laguna's sparse layers keep their experts fused (mlp.experts.gate_up_proj) behind a
     * sigmoid router with a selection bias: not mapped here, so refused rather than written
     * into a file that cannot run; its dense layers are ordinary gated MLPs */
    bool laguna = !strcmp(mt, "laguna");
    json_t *mlp_types = get(cfg, "mlp_layer_types");
    for (size_t i = 0; laguna && i < json_array_size(mlp_types); i++) {
        const char *t = json_string_value(json_array_get(mlp_types, i));
        if (t && strcmp(t, "dense")) {
            json_decref(a);
            return cmf_err_set(
                err, CMF_E_UNSUPPORTED, ctx,
                "mlp_layer_types[%zu] is \"%s\": Laguna's fused experts "
                "(mlp.experts.gate_up_proj) are not converted; only dense layers are",
                i, t);
        }
    }
    if (gemma) {
        json_t *local = get(get(cfg, "rope_parameters"), "sliding_attention");
        if (!copy_num(a, "rope_local_base_freq", cfg, "rope_local_base_freq") &&
            !(local && copy_num(a, "rope_local_base_freq", local, "rope_theta")))
            json_object_set_new(a, "rope_local_base_freq", json_real(10000.0));
        copy_num(a, "query_pre_attn_scalar", cfg, "query_pre_attn_scalar");
        copy_num(a, "final_logit_softcapping", cfg, "final_logit_softcapping");
        copy_num(a, "attn_logit_softcapping", cfg, "attn_logit_softcapping");
    }
    json_t *act = get(cfg, "hidden_activation");
    if (!act) act = get(cfg, "hidden_act");
    if (act && json_is_string(act)) json_object_set(a, "hidden_act", act);
    json_t *tie = get(cfg, "tie_word_embeddings");
    /* transformers' defaults when the key is absent: Gemma ties, the others do not */
    json_object_set_new(a, "tie_word_embeddings", json_boolean(tie ? json_is_true(tie) : gemma));
    copy_num(a, "linear_conv_kernel_dim", cfg, "linear_conv_kernel_dim");
    copy_num(a, "linear_num_key_heads", cfg, "linear_num_key_heads");
    copy_num(a, "linear_num_value_heads", cfg, "linear_num_value_heads");
    copy_num(a, "linear_key_head_dim", cfg, "linear_key_head_dim");
    copy_num(a, "linear_value_head_dim", cfg, "linear_value_head_dim");
    /* the expert count is "num_experts" (qwen2_moe, qwen3_next) or "num_local_experts" (qwen3_moe
     * in v5) */
    const char *ne_key = int_of(cfg, "num_experts", 0) > 0 ? "num_experts" : "num_local_experts";
    if (int_of(cfg, ne_key, 0) > 0 && !laguna) { /* a dense Laguna still names num_experts */
        json_t *m = json_object();
        copy_num(m, "num_experts", cfg, ne_key);
        copy_num(m, "top_k", cfg, "num_experts_per_tok");
        copy_num(m, "moe_intermediate_size", cfg, "moe_intermediate_size");
        /* absent: the family's rule; Qwen3.5-MoE's router always renormalises the top k (its
         * config has no such field), the others default to not */
        json_t *ntp = get(cfg, "norm_topk_prob");
        bool ntp_default = mt && !strncmp(mt, "qwen3_5_moe", 11);
        json_object_set_new(m, "norm_topk_prob",
                            json_boolean(ntp ? json_is_true(ntp) : ntp_default));
        if (int_of(cfg, "shared_expert_intermediate_size", 0) > 0)
            copy_num(m, "shared_expert_intermediate_size", cfg, "shared_expert_intermediate_size");
        copy_num(m, "routed_scaling_factor", cfg, "routed_scaling_factor");
        json_object_set_new(a, "moe", m);
    }
    cq_arch_complete(a);
    *out = a;
    return CMF_OK;
}

/* id of a token string, from tokenizer.json added_tokens then model.vocab; -1 if unknown */
static int64_t token_id(json_t *tok, const char *s) {
    size_t i;
    json_t *v;
    json_array_foreach(get(tok, "added_tokens"), i, v) {
        json_t *c = get(v, "content");
        if (c && json_is_string(c) && !strcmp(json_string_value(c), s)) return int_of(v, "id", -1);
    }
    json_t *vocab = get(get(tok, "model"), "vocab");
    if (vocab && json_is_object(vocab)) return int_of(vocab, s, -1);
    return -1;
}

static const char *token_text(json_t *v) {
    if (v && json_is_string(v)) return json_string_value(v);
    json_t *c = get(v, "content"); /* {"content": "<eos>", ...} form */
    return c && json_is_string(c) ? json_string_value(c) : NULL;
}

static void add_ids(json_t *arr, json_t *v) {
    if (!v) return;
    json_t *list = json_is_array(v) ? v : NULL;
    size_t n = list ? json_array_size(list) : 1;
    for (size_t i = 0; i < n; i++) {
        json_t *e = list ? json_array_get(list, i) : v;
        if (!json_is_integer(e)) continue;
        int dup = 0;
        size_t k;
        json_t *x;
        json_array_foreach(arr, k, x) dup |= json_integer_value(x) == json_integer_value(e);
        if (!dup) json_array_append(arr, e);
    }
}

static json_t *build_tokenizer_config(const char *dir, json_t *cfg, cmf_err *err) {
    json_t *tc = json_object();
    json_t *tcfg = hf_load_json(dir, "tokenizer_config.json", err, 0);
    json_t *gen = hf_load_json(dir, "generation_config.json", err, 0);
    json_t *tok = hf_load_json(dir, "tokenizer.json", err, 0);
    /* chat template: chat_template.jinja beside the model wins (newer transformers store it there)
     */
    char path[4096];
    snprintf(path, sizeof path, "%s/chat_template.jinja", dir);
    size_t tlen;
    char *tpl = cq_read_file(path, &tlen);
    if (tpl) {
        json_object_set_new(tc, "chat_template", json_stringn(tpl, tlen));
        free(tpl);
    } else {
        json_t *ct = get(tcfg, "chat_template");
        if (ct && json_is_string(ct))
            json_object_set(tc, "chat_template", ct);
        else if (ct && json_is_array(ct)) { /* [{name, template}]: the "default" one */
            size_t i;
            json_t *e;
            json_array_foreach(ct, i, e) {
                json_t *nm = get(e, "name");
                if (nm && json_is_string(nm) && !strcmp(json_string_value(nm), "default"))
                    json_object_set(tc, "chat_template", get(e, "template"));
            }
        }
    }
    json_t *eos = json_array();
    add_ids(eos, get(gen, "eos_token_id"));
    add_ids(eos, get(cfg, "eos_token_id"));
    const char *eos_text = token_text(get(tcfg, "eos_token"));
    if (eos_text && tok) {
        int64_t id = token_id(tok, eos_text);
        if (id >= 0) {
            json_t *v = json_integer(id);
            add_ids(eos, v);
            json_decref(v);
        }
    }
    json_object_set_new(tc, "eos_token_ids", eos);
    int64_t bos = int_of(gen, "bos_token_id", int_of(cfg, "bos_token_id", -1));
    const char *bos_text = token_text(get(tcfg, "bos_token"));
    if (bos < 0 && bos_text && tok) bos = token_id(tok, bos_text);
    json_object_set_new(tc, "bos_token_id", bos >= 0 ? json_integer(bos) : json_null());
    int64_t pad = int_of(gen, "pad_token_id", int_of(cfg, "pad_token_id", -1));
    const char *pad_text = token_text(get(tcfg, "pad_token"));
    if (pad < 0 && pad_text && tok) pad = token_id(tok, pad_text);
    json_object_set_new(tc, "pad_token_id", pad >= 0 ? json_integer(pad) : json_null());
    /* the token strings templates need (bos_token, eos_token) — our own additive fields */
    if (bos_text) json_object_set_new(tc, "bos_token", json_string(bos_text));
    if (eos_text) json_object_set_new(tc, "eos_token", json_string(eos_text));
    json_decref(tcfg);
    json_decref(gen);
    json_decref(tok);
    if (err && err->code == CMF_E_PARSE) {
        json_decref(tc);
        return NULL;
    }
    return tc;
}

cmf_status hf_build_header(const char *dir, const char *quant_name, cmf_dtype quant, json_t **out,
                           json_t **config, cmf_err *err) {
    json_t *cfg = hf_load_json(dir, "config.json", err, 1);
    if (!cfg) return err ? err->code : CMF_E_NOT_FOUND;
    /* multimodal wrappers (gemma3) keep the text model's settings in text_config */
    json_t *text = get(cfg, "text_config");
    const char *mt = json_string_value(get(cfg, "model_type"));
    if (text && json_is_object(text)) {
        json_t *tmt = get(text, "model_type");
        json_t *merged = json_deep_copy(text);
        json_t *eos = get(cfg, "eos_token_id");
        if (eos && !get(merged, "eos_token_id")) json_object_set(merged, "eos_token_id", eos);
        json_t *tie = get(cfg, "tie_word_embeddings");
        if (tie && !get(merged, "tie_word_embeddings"))
            json_object_set(merged, "tie_word_embeddings", tie);
        if (tmt) json_object_set(merged, "model_type", tmt);
        json_decref(cfg);
        cfg = merged;
        mt = json_string_value(get(cfg, "model_type"));
    }
    char ctx[4200];
    snprintf(ctx, sizeof ctx, "%s/config.json", dir);
    int known = 0;
    for (size_t i = 0; mt && i < sizeof k_supported / sizeof k_supported[0]; i++)
        known |= !strcmp(mt, k_supported[i]);
    if (!known) {
        char list[512] = "";
        for (size_t i = 0; i < sizeof k_supported / sizeof k_supported[0]; i++)
            snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? ", " : "",
                     k_supported[i]);
        cmf_status st = cmf_err_set(err, CMF_E_UNSUPPORTED, ctx,
                                    "model_type \"%s\" is not supported (supported: %s)",
                                    mt ? mt : "(missing)", list);
        json_decref(cfg);
        return st;
    }
    json_t *arch = NULL;
    cmf_status st = build_arch(cfg, mt, &arch, ctx, err);
    if (st) {
        json_decref(cfg);
        return st;
    }
    cmf_err_clear(err);
    json_t *tc = build_tokenizer_config(dir, cfg, err);
    if (!tc) {
        json_decref(arch);
        json_decref(cfg);
        return err ? err->code : CMF_E_PARSE;
    }
    json_t *h = json_object();
    json_object_set_new(h, "format", json_string("cmf"));
    json_object_set_new(h, "version", json_integer(2));
    json_object_set_new(h, "arch", arch);
    json_object_set_new(h, "quant_type", json_string(cq_quant_type_label(quant)));
    json_object_set_new(h, "tokenizer_config", tc);
    json_t *prov = json_object();
    json_object_set_new(prov, "tool", json_string("cortiq"));
    json_object_set_new(prov, "version", json_string(cortiq_version()));
    json_object_set_new(prov, "source", json_string(dir));
    json_t *nm = get(cfg, "_name_or_path");
    if (nm) json_object_set(prov, "source_model", nm);
    json_object_set_new(prov, "quant", json_string(quant_name));
    json_object_set_new(h, "provenance", prov);
    *out = h;
    if (config)
        *config = cfg;
    else
        json_decref(cfg);
    return CMF_OK;
}
