/* gguf_arch.c - GGUF metadata -> the header "arch" (spec §2) and "tokenizer_config" (§6.1)
 * objects. Hyper-parameters come from "<arch>.*" keys; family facts the GGUF does not carry
 * (Gemma's activation, local rope base and layer pattern) come from the family's HF config
 * defaults, listed in docs/CONVERT.md. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "convert/arch_interop.h"
#include "cortiq/gguf.h"

/* The shortest decimal that reads back as the same f32: hyper-parameters stored as f32
 * (1e-05 is 9.99999974737875e-06 as f32) come out as the number their author wrote. */
static double f32_shortest(double v) {
    float f = (float)v;
    char buf[64];
    for (int prec = 6; prec <= 9; prec++) {
        snprintf(buf, sizeof buf, "%.*g", prec, (double)f);
        if ((float)strtod(buf, NULL) == f) return strtod(buf, NULL);
    }
    return v;
}

typedef struct arch_ctx {
    const cmf_gguf *g;
    const char *arch;
    json_t *obj;
} arch_ctx;

static const cmf_gguf_kv *akv(const arch_ctx *c, const char *suffix) {
    char key[256];
    snprintf(key, sizeof key, "%s.%s", c->arch, suffix);
    return cmf_gguf_find_kv(c->g, key);
}

static bool aint(const arch_ctx *c, const char *suffix, int64_t *out) {
    char key[256];
    snprintf(key, sizeof key, "%s.%s", c->arch, suffix);
    return cmf_gguf_get_int(c->g, key, out);
}

static bool afloat(const arch_ctx *c, const char *suffix, double *out) {
    const cmf_gguf_kv *kv = akv(c, suffix);
    char key[256];
    snprintf(key, sizeof key, "%s.%s", c->arch, suffix);
    if (!cmf_gguf_get_float(c->g, key, out)) return false;
    if (kv->type == CMF_GGUF_F32) *out = f32_shortest(*out);
    return true;
}

static void set_int(arch_ctx *c, const char *field, int64_t v) {
    json_object_set_new(c->obj, field, json_integer(v));
}
static void set_real(arch_ctx *c, const char *field, double v) {
    json_object_set_new(c->obj, field, json_real(v));
}

static bool copy_int(arch_ctx *c, const char *suffix, const char *field, int64_t *out) {
    int64_t v;
    if (!aint(c, suffix, &v)) {
        /* some files give per-layer arrays (e.g. feed_forward_length): take the first */
        const cmf_gguf_kv *kv = akv(c, suffix);
        if (!kv || !cmf_gguf_arr_int(kv, 0, &v)) return false;
    }
    set_int(c, field, v);
    if (out) *out = v;
    return true;
}

static bool copy_real(arch_ctx *c, const char *suffix, const char *field) {
    double v;
    if (!afloat(c, suffix, &v)) return false;
    set_real(c, field, v);
    return true;
}

/* layer_types: Gemma 3 is 5 sliding layers then 1 global; Gemma 2 alternates starting with
 * a sliding one. */
static void set_layer_pattern(arch_ctx *c, int64_t n_layers, int period) {
    json_t *a = json_array();
    for (int64_t i = 0; i < n_layers; i++)
        json_array_append_new(
            a, json_string((i + 1) % period == 0 ? "FullAttention" : "SlidingAttention"));
    json_object_set_new(c->obj, "layer_types", a);
}

/* <arch>.attention.sliding_window_pattern, when the file has it: an integer period (every
 * period-th layer global) or one bool per layer (true = sliding). Returns false if absent. */
static bool explicit_pattern(arch_ctx *c, int64_t n_layers) {
    const cmf_gguf_kv *kv = akv(c, "attention.sliding_window_pattern");
    if (!kv) return false;
    int64_t period;
    if (kv->type != CMF_GGUF_ARRAY && aint(c, "attention.sliding_window_pattern", &period) &&
        period > 0) {
        set_layer_pattern(c, n_layers, (int)(period < 1000000 ? period : 1000000));
        return true;
    }
    if (kv->type != CMF_GGUF_ARRAY || n_layers < 0 || kv->arr_len != (uint64_t)n_layers)
        return false;
    json_t *a = json_array();
    for (uint64_t i = 0; i < kv->arr_len; i++) {
        int64_t swa = 0;
        cmf_gguf_arr_int(kv, i, &swa);
        json_array_append_new(a, json_string(swa ? "SlidingAttention" : "FullAttention"));
    }
    json_object_set_new(c->obj, "layer_types", a);
    return true;
}

static int64_t vocab_size(const cmf_gguf *g, const arch_ctx *c) {
    int64_t v;
    if (aint(c, "vocab_size", &v)) return v;
    const cmf_gguf_kv *toks = cmf_gguf_find_kv(g, "tokenizer.ggml.tokens");
    if (toks && toks->type == CMF_GGUF_ARRAY) return (int64_t)toks->arr_len;
    const cmf_gguf_tensor *e = cmf_gguf_find_tensor(g, "token_embd.weight");
    return e ? (int64_t)e->ne[1] : -1;
}

/* arch.moe (spec §2.2) from llama.cpp's expert keys. Its qwen3moe always renormalises the
 * top-k weights and its qwen2moe never does, unless the file says (expert_weights_norm);
 * expert_gating_func 2 is the sigmoid router. */
static void add_moe(arch_ctx *c) {
    int64_t n_exp, k, w, shared, gating;
    if (!aint(c, "expert_count", &n_exp) || n_exp <= 0) return;
    json_t *m = json_object();
    json_object_set_new(m, "num_experts", json_integer(n_exp));
    if (aint(c, "expert_used_count", &k)) json_object_set_new(m, "top_k", json_integer(k));
    if (aint(c, "expert_feed_forward_length", &w))
        json_object_set_new(m, "moe_intermediate_size", json_integer(w));
    char key[256];
    snprintf(key, sizeof key, "%s.expert_weights_norm", c->arch);
    bool norm = strcmp(c->arch, "qwen3moe") == 0;
    cmf_gguf_get_bool(c->g, key, &norm);
    json_object_set_new(m, "norm_topk_prob", json_boolean(norm));
    if (aint(c, "expert_shared_feed_forward_length", &shared) && shared > 0)
        json_object_set_new(m, "shared_expert_intermediate_size", json_integer(shared));
    double scale;
    if (afloat(c, "expert_weights_scale", &scale) && scale > 0 && scale != 1.0)
        json_object_set_new(m, "routed_scaling_factor", json_real(scale));
    if (aint(c, "expert_gating_func", &gating) && gating == 2)
        json_object_set_new(m, "router_sigmoid", json_true());
    json_object_set_new(c->obj, "moe", m);
}

cmf_status cmf_gguf_arch_json(const cmf_gguf *g, char **out, cmf_err *err) {
    *out = NULL;
    const char *arch = cmf_gguf_get_str(g, "general.architecture");
    if (!arch)
        return cmf_err_set(err, CMF_E_NOT_FOUND, cmf_gguf_name(g), "no general.architecture");
    arch_ctx c = {g, arch, json_object()};
    if (!c.obj) return cmf_err_set(err, CMF_E_NOMEM, cmf_gguf_name(g), "out of memory");
    bool gemma = strncmp(arch, "gemma", 5) == 0;
    json_object_set_new(c.obj, "arch_name", json_string(arch));
    int64_t hidden = -1, layers = -1, heads = -1, kv = -1, head_dim = -1;
    const char *missing = NULL;
    if (!copy_int(&c, "embedding_length", "hidden_size", &hidden)) missing = "embedding_length";
    if (!copy_int(&c, "block_count", "num_layers", &layers)) missing = "block_count";
    if (!copy_int(&c, "attention.head_count", "num_attention_heads", &heads))
        missing = "attention.head_count";
    if (missing) {
        json_decref(c.obj);
        return cmf_err_set(err, CMF_E_NOT_FOUND, cmf_gguf_name(g), "no %s.%s", arch, missing);
    }
    if (layers < 1 || layers > CQ_ARCH_MAX_LAYERS) { /* per-layer arrays are built from it */
        json_decref(c.obj);
        return cmf_err_set(err, CMF_E_LIMIT, cmf_gguf_name(g),
                           "%s.block_count=%lld outside [1, %d]", arch, (long long)layers,
                           CQ_ARCH_MAX_LAYERS);
    }
    copy_int(&c, "feed_forward_length", "intermediate_size", NULL);
    if (!copy_int(&c, "attention.head_count_kv", "num_kv_heads", &kv))
        set_int(&c, "num_kv_heads", kv = heads);
    if (!copy_int(&c, "attention.key_length", "head_dim", &head_dim) && heads > 0)
        set_int(&c, "head_dim", head_dim = hidden / heads);
    set_int(&c, "vocab_size", vocab_size(g, &c));
    if (!copy_real(&c, "attention.layer_norm_rms_epsilon", "rms_norm_eps"))
        set_real(&c, "rms_norm_eps", 1e-6);
    json_object_set_new(c.obj, "norm_style", json_string(gemma ? "gemma" : "qwen"));
    if (!copy_real(&c, "rope.freq_base", "rope_theta")) set_real(&c, "rope_theta", 10000.0);
    int64_t rot;
    if (aint(&c, "rope.dimension_count", &rot) && head_dim > 0 && rot > 0 && rot < head_dim)
        set_real(&c, "partial_rotary_factor", (double)rot / (double)head_dim);
    copy_int(&c, "context_length", "max_position_embeddings", NULL);
    const char *scaling = NULL;
    {
        char key[256];
        snprintf(key, sizeof key, "%s.rope.scaling.type", arch);
        scaling = cmf_gguf_get_str(g, key);
    }
    double factor;
    int64_t orig;
    if (scaling && strcmp(scaling, "yarn") == 0 && afloat(&c, "rope.scaling.factor", &factor) &&
        aint(&c, "rope.scaling.original_context_length", &orig)) {
        json_t *y = json_object();
        json_object_set_new(y, "factor", json_real(factor));
        json_object_set_new(y, "original_max_position_embeddings", json_integer(orig));
        json_object_set_new(y, "beta_fast", json_real(32.0)); /* HF defaults; GGUF has no key */
        json_object_set_new(y, "beta_slow", json_real(1.0));
        json_object_set_new(c.obj, "yarn", y);
    }
    bool has_window = copy_int(&c, "attention.sliding_window", "sliding_window", NULL);
    if (gemma) {
        json_object_set_new(c.obj, "hidden_act", json_string("gelu_pytorch_tanh"));
        /* llama.cpp scales queries by 1/sqrt(hidden/heads) for the 27B models (62 layers for
         * Gemma 3, 46 for Gemma 2) and by 1/sqrt(head_dim) otherwise: the HF configs agree. */
        bool big = (strcmp(arch, "gemma3") == 0 && layers == 62) ||
                   (strcmp(arch, "gemma2") == 0 && layers == 46);
        set_real(&c, "query_pre_attn_scalar",
                 (double)(big && heads > 0 ? hidden / heads : head_dim));
        if (strcmp(arch, "gemma3") == 0) {
            set_real(&c, "rope_local_base_freq", 10000.0);
            if (has_window && !explicit_pattern(&c, layers)) set_layer_pattern(&c, layers, 6);
        } else if (strcmp(arch, "gemma2") == 0) {
            copy_real(&c, "attn_logit_softcapping", "attn_logit_softcapping");
            copy_real(&c, "final_logit_softcapping", "final_logit_softcapping");
            if (has_window) {
                set_real(&c, "rope_local_base_freq",
                         json_real_value(json_object_get(c.obj, "rope_theta")));
                set_layer_pattern(&c, layers, 2);
            }
        }
    } else {
        json_object_set_new(c.obj, "hidden_act", json_string("silu"));
    }
    json_object_set_new(c.obj, "tie_word_embeddings",
                        json_boolean(cmf_gguf_find_tensor(g, "output.weight") == NULL));
    add_moe(&c);
    cq_arch_complete(c.obj);
    *out = json_dumps(c.obj, JSON_COMPACT | JSON_REAL_PRECISION(15));
    json_decref(c.obj);
    if (!*out) return cmf_err_set(err, CMF_E_NOMEM, cmf_gguf_name(g), "out of memory");
    return CMF_OK;
}

static json_t *opt_id(const cmf_gguf *g, const char *key) {
    int64_t v;
    return cmf_gguf_get_int(g, key, &v) ? json_integer(v) : json_null();
}

cmf_status cmf_gguf_tokenizer_config_json(const cmf_gguf *g, char **out, cmf_err *err) {
    *out = NULL;
    json_t *o = json_object();
    const char *tpl = cmf_gguf_get_str(g, "tokenizer.chat_template");
    if (tpl) json_object_set_new(o, "chat_template", json_string(tpl));
    json_t *eos = json_array();
    static const char *eos_keys[] = {"tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id",
                                     "tokenizer.ggml.eom_token_id"};
    for (size_t i = 0; i < 3; i++) {
        int64_t v;
        if (!cmf_gguf_get_int(g, eos_keys[i], &v)) continue;
        bool dup = false;
        for (size_t j = 0; j < json_array_size(eos); j++)
            dup |= json_integer_value(json_array_get(eos, j)) == v;
        if (!dup) json_array_append_new(eos, json_integer(v));
    }
    /* Gemma chat turns end with <end_of_turn>, which HF's generation config lists as an EOS
     * but the GGUF metadata does not */
    const char *arch = cmf_gguf_get_str(g, "general.architecture");
    const cmf_gguf_kv *toks = cmf_gguf_find_kv(g, "tokenizer.ggml.tokens");
    if (arch && strncmp(arch, "gemma", 5) == 0 && toks && toks->type == CMF_GGUF_ARRAY &&
        toks->arr_type == CMF_GGUF_STRING)
        for (uint64_t i = 0; i < toks->arr_len; i++)
            if (toks->arr_str[i].len == 13 &&
                memcmp(toks->arr_str[i].ptr, "<end_of_turn>", 13) == 0) {
                bool dup = false;
                for (size_t j = 0; j < json_array_size(eos); j++)
                    dup |= json_integer_value(json_array_get(eos, j)) == (json_int_t)i;
                if (!dup) json_array_append_new(eos, json_integer((json_int_t)i));
                break;
            }
    json_object_set_new(o, "eos_token_ids", eos);
    json_object_set_new(o, "bos_token_id", opt_id(g, "tokenizer.ggml.bos_token_id"));
    json_object_set_new(o, "pad_token_id", opt_id(g, "tokenizer.ggml.padding_token_id"));
    *out = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    if (!*out) return cmf_err_set(err, CMF_E_NOMEM, cmf_gguf_name(g), "out of memory");
    return CMF_OK;
}
