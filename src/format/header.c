/* header.c - header JSON (spec §2, §2.1, §2.2, §6.1, §8.1, §9, §9.1, §10) into typed structs.
 * Unknown fields are ignored; a known field of the wrong type or out of range is a Parse error
 * naming the field. Strings point into the parsed JSON tree kept alive by the header. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "cortiq/format.h"
#include "cortiq/hash.h"
#include "format/json_util.h"

typedef struct header_store {
    json_t *root;
    jsonu_pool pool; /* raw-JSON dumps and arrays */
} header_store;

static cmf_status parse_layer_types(json_t *arr, cmf_arch *a, jsonu_ctx *c) {
    size_t n = json_array_size(arr);
    a->layer_types = jsonu_alloc(c, n * sizeof *a->layer_types);
    a->layer_type_names = jsonu_alloc(c, n * sizeof *a->layer_type_names);
    if (n && (!a->layer_types || !a->layer_type_names)) return jsonu_nomem(c);
    for (size_t i = 0; i < n; i++) {
        json_t *v = json_array_get(arr, i);
        if (!json_is_string(v)) return jsonu_fail(c, "arch.layer_types[%zu] must be a string", i);
        const char *s = json_string_value(v);
        a->layer_type_names[i] = s;
        if (!strcmp(s, "FullAttention") || !strcmp(s, "full_attention"))
            a->layer_types[i] = CMF_LAYER_FULL_ATTENTION;
        else if (!strcmp(s, "SlidingAttention") || !strcmp(s, "sliding_attention"))
            a->layer_types[i] = CMF_LAYER_SLIDING_ATTENTION;
        else if (!strcmp(s, "LinearAttention") || !strcmp(s, "linear_attention"))
            a->layer_types[i] = CMF_LAYER_LINEAR_ATTENTION;
        else
            a->layer_types[i] = CMF_LAYER_OTHER;
    }
    a->n_layer_types = n;
    return CMF_OK;
}

static cmf_status parse_arch(json_t *o, cmf_arch *a, jsonu_ctx *c) {
    static const struct {
        const char *key;
        size_t off;
    } ints[] = {
        {"hidden_size", offsetof(cmf_arch, hidden_size)},
        {"intermediate_size", offsetof(cmf_arch, intermediate_size)},
        {"num_layers", offsetof(cmf_arch, num_layers)},
        {"num_attention_heads", offsetof(cmf_arch, num_attention_heads)},
        {"num_kv_heads", offsetof(cmf_arch, num_kv_heads)},
        {"head_dim", offsetof(cmf_arch, head_dim)},
        {"vocab_size", offsetof(cmf_arch, vocab_size)},
        {"max_position_embeddings", offsetof(cmf_arch, max_position_embeddings)},
        {"sliding_window", offsetof(cmf_arch, sliding_window)},
        {"sliding_window_pattern", offsetof(cmf_arch, sliding_window_pattern)},
        {"linear_conv_kernel_dim", offsetof(cmf_arch, linear_conv_kernel_dim)},
        {"linear_num_key_heads", offsetof(cmf_arch, linear_num_key_heads)},
        {"linear_num_value_heads", offsetof(cmf_arch, linear_num_value_heads)},
        {"linear_key_head_dim", offsetof(cmf_arch, linear_key_head_dim)},
        {"linear_value_head_dim", offsetof(cmf_arch, linear_value_head_dim)},
    };
    cmf_status st;
    a->present = true;
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) {
        int64_t *dst = (int64_t *)((char *)a + ints[i].off);
        *dst = -1;
        /* sliding_window may be null in HF configs: treat as absent */
        if ((st = jsonu_opt_pos_int(c, o, "arch", ints[i].key, dst))) return st;
    }
    if ((st = jsonu_opt_string(c, o, "arch", "arch_name", &a->arch_name))) return st;
    if ((st = jsonu_opt_string(c, o, "arch", "hidden_act", &a->hidden_act))) return st;
    if ((st = jsonu_opt_number(c, o, "arch", "rms_norm_eps", &a->rms_norm_eps,
                               &a->has_rms_norm_eps)))
        return st;
    if ((st = jsonu_opt_number(c, o, "arch", "rope_theta", &a->rope_theta, &a->has_rope_theta)))
        return st;
    if ((st = jsonu_opt_number(c, o, "arch", "rope_local_base_freq", &a->rope_local_base_freq,
                               &a->has_rope_local_base_freq)))
        return st;
    bool has;
    a->partial_rotary_factor = 1.0;
    if ((st = jsonu_opt_number(c, o, "arch", "partial_rotary_factor", &a->partial_rotary_factor,
                               &has)))
        return st;
    a->local_partial_rotary_factor = 1.0;
    if ((st = jsonu_opt_number(c, o, "arch", "local_partial_rotary_factor",
                               &a->local_partial_rotary_factor, &has)))
        return st;
    if ((st = jsonu_opt_number(c, o, "arch", "query_pre_attn_scalar", &a->query_pre_attn_scalar,
                               &a->has_query_pre_attn_scalar)))
        return st;
    if ((st = jsonu_opt_number(c, o, "arch", "final_logit_softcapping", &a->final_logit_softcapping,
                               &a->has_final_logit_softcapping)))
        return st;
    if ((st = jsonu_opt_number(c, o, "arch", "attn_logit_softcapping", &a->attn_logit_softcapping,
                               &a->has_attn_logit_softcapping)))
        return st;
    if ((st = jsonu_opt_number(c, o, "arch", "embed_multiplier", &a->embed_multiplier,
                               &a->has_embed_multiplier)))
        return st;
    if ((st = jsonu_opt_number(c, o, "arch", "logit_multiplier", &a->logit_multiplier,
                               &a->has_logit_multiplier)))
        return st;
    if ((st = jsonu_opt_bool(c, o, "arch", "tie_word_embeddings", &a->tie_word_embeddings)))
        return st;

    const char *ns = NULL;
    if ((st = jsonu_opt_string(c, o, "arch", "norm_style", &ns))) return st;
    if (ns) {
        if (!strcmp(ns, "qwen"))
            a->norm_style = CMF_NORM_QWEN;
        else if (!strcmp(ns, "gemma"))
            a->norm_style = CMF_NORM_GEMMA;
        else
            return jsonu_fail(c, "arch.norm_style=\"%s\" is neither \"qwen\" nor \"gemma\"", ns);
    }

    json_t *v = json_object_get(o, "layer_types");
    if (v && !json_is_null(v)) {
        if (!json_is_array(v)) return jsonu_fail(c, "arch.layer_types must be an array");
        if ((st = parse_layer_types(v, a, c))) return st;
        if (a->num_layers >= 0 && (int64_t)a->n_layer_types != a->num_layers)
            return jsonu_fail(c, "arch.layer_types has %zu entries but num_layers=%lld",
                              a->n_layer_types, (long long)a->num_layers);
    }
    v = json_object_get(o, "attention_heads_per_layer");
    if (v && !json_is_null(v)) {
        if ((st = jsonu_int_array(c, v, "arch.attention_heads_per_layer", true,
                                  &a->attention_heads_per_layer, &a->n_heads_per_layer)))
            return st;
        if (a->num_layers >= 0 && (int64_t)a->n_heads_per_layer != a->num_layers)
            return jsonu_fail(c,
                              "arch.attention_heads_per_layer has %zu entries but num_layers=%lld",
                              a->n_heads_per_layer, (long long)a->num_layers);
    }

    v = json_object_get(o, "yarn");
    if (v && !json_is_null(v)) {
        if (!json_is_object(v)) return jsonu_fail(c, "arch.yarn must be an object");
        cmf_yarn *y = &a->yarn;
        y->present = true;
        bool h1, h2, h3, h4;
        if ((st = jsonu_opt_number(c, v, "arch.yarn", "factor", &y->factor, &h1))) return st;
        if ((st = jsonu_opt_number(c, v, "arch.yarn", "original_max_position_embeddings",
                                   &y->original_max_position_embeddings, &h2)))
            return st;
        if ((st = jsonu_opt_number(c, v, "arch.yarn", "beta_fast", &y->beta_fast, &h3))) return st;
        if ((st = jsonu_opt_number(c, v, "arch.yarn", "beta_slow", &y->beta_slow, &h4))) return st;
        if ((st = jsonu_opt_number(c, v, "arch.yarn", "attention_factor", &y->attention_factor,
                                   &y->has_attention_factor)))
            return st;
        if (!h1 || !h2)
            return jsonu_fail(c, "arch.yarn needs factor and original_max_position_embeddings");
        if (!h3) y->beta_fast = 32.0;
        if (!h4) y->beta_slow = 1.0;
        if (!(y->factor > 0)) return jsonu_fail(c, "arch.yarn.factor=%g must be > 0", y->factor);
    }

    v = json_object_get(o, "rope_scaling");
    if (v && !json_is_null(v)) {
        if (!json_is_object(v)) return jsonu_fail(c, "arch.rope_scaling must be an object");
        cmf_rope_scaling *r = &a->rope_scaling;
        r->present = true;
        r->factor = 1.0;
        r->low_freq_factor = 1.0;
        r->high_freq_factor = 4.0;
        r->original_max_position_embeddings = 8192.0;
        if ((st = jsonu_opt_string(c, v, "arch.rope_scaling", "rope_type", &r->type))) return st;
        if (!r->type && (st = jsonu_opt_string(c, v, "arch.rope_scaling", "type", &r->type)))
            return st;
        if ((st = jsonu_opt_number(c, v, "arch.rope_scaling", "factor", &r->factor, &has)))
            return st;
        if ((st = jsonu_opt_number(c, v, "arch.rope_scaling", "low_freq_factor",
                                   &r->low_freq_factor, &has)))
            return st;
        if ((st = jsonu_opt_number(c, v, "arch.rope_scaling", "high_freq_factor",
                                   &r->high_freq_factor, &has)))
            return st;
        if ((st = jsonu_opt_number(c, v, "arch.rope_scaling", "original_max_position_embeddings",
                                   &r->original_max_position_embeddings, &has)))
            return st;
        if (!(r->factor > 0) || !(r->high_freq_factor > r->low_freq_factor))
            return jsonu_fail(
                c, "arch.rope_scaling needs factor > 0 and high_freq_factor > low_freq_factor");
    }

    v = json_object_get(o, "mtp");
    if (v && !json_is_null(v)) {
        if (!json_is_object(v)) return jsonu_fail(c, "arch.mtp must be an object");
        a->mtp.present = true;
        a->mtp.num_layers = -1;
        if ((st = jsonu_opt_pos_int(c, v, "arch.mtp", "num_layers", &a->mtp.num_layers))) return st;
        if (a->mtp.num_layers < 1)
            return jsonu_fail(c, "arch.mtp.num_layers must be present and >= 1");
        if ((st = jsonu_opt_bool(c, v, "arch.mtp", "share_lm_head", &a->mtp.share_lm_head)))
            return st;
        if ((st = jsonu_opt_bool(c, v, "arch.mtp", "share_embed", &a->mtp.share_embed))) return st;
    }

    v = json_object_get(o, "moe");
    if (v && !json_is_null(v)) {
        if (!json_is_object(v)) return jsonu_fail(c, "arch.moe must be an object");
        cmf_moe *m = &a->moe;
        m->present = true;
        m->num_experts = m->top_k = m->moe_intermediate_size = m->shared_expert_intermediate_size =
            -1;
        if ((st = jsonu_opt_pos_int(c, v, "arch.moe", "num_experts", &m->num_experts))) return st;
        if ((st = jsonu_opt_pos_int(c, v, "arch.moe", "top_k", &m->top_k))) return st;
        if ((st = jsonu_opt_pos_int(c, v, "arch.moe", "moe_intermediate_size",
                                    &m->moe_intermediate_size)))
            return st;
        if ((st = jsonu_opt_pos_int(c, v, "arch.moe", "shared_expert_intermediate_size",
                                    &m->shared_expert_intermediate_size)))
            return st;
        m->has_shared_expert = m->shared_expert_intermediate_size > 0;
        if ((st = jsonu_opt_bool(c, v, "arch.moe", "norm_topk_prob", &m->norm_topk_prob)))
            return st;
        if ((st = jsonu_opt_bool(c, v, "arch.moe", "router_sigmoid", &m->router_sigmoid)))
            return st;
        m->routed_scaling_factor = 1.0;
        if ((st = jsonu_opt_number(c, v, "arch.moe", "routed_scaling_factor",
                                   &m->routed_scaling_factor, &has)))
            return st;
        if (m->num_experts < 1 || m->top_k < 1)
            return jsonu_fail(c, "arch.moe needs num_experts >= 1 and top_k >= 1");
        if (m->top_k > m->num_experts)
            return jsonu_fail(c, "arch.moe.top_k=%lld exceeds num_experts=%lld",
                              (long long)m->top_k, (long long)m->num_experts);
    }
    return CMF_OK;
}

static cmf_status parse_token_id(jsonu_ctx *c, json_t *o, const char *key, int64_t *out) {
    json_t *v = json_object_get(o, key);
    *out = -1;
    if (!v || json_is_null(v)) return CMF_OK;
    if (!json_is_integer(v) || json_integer_value(v) < 0)
        return jsonu_fail(c, "tokenizer_config.%s must be a non-negative integer or null", key);
    *out = json_integer_value(v);
    return CMF_OK;
}

static cmf_status parse_tokenizer_config(json_t *o, cmf_tokenizer_config *t, jsonu_ctx *c) {
    cmf_status st;
    t->present = true;
    if ((st = jsonu_opt_string(c, o, "tokenizer_config", "chat_template", &t->chat_template)))
        return st;
    json_t *v = json_object_get(o, "eos_token_ids");
    if (v && !json_is_null(v)) {
        if (json_is_integer(v)) {
            /* a single id written as a number: accept, it has one meaning */
            t->eos_token_ids = jsonu_alloc(c, sizeof(int64_t));
            if (!t->eos_token_ids) return jsonu_nomem(c);
            t->eos_token_ids[0] = json_integer_value(v);
            t->n_eos = 1;
            if (t->eos_token_ids[0] < 0)
                return jsonu_fail(c, "tokenizer_config.eos_token_ids is negative");
        } else if ((st = jsonu_int_array(c, v, "tokenizer_config.eos_token_ids", false,
                                         &t->eos_token_ids, &t->n_eos))) {
            return st;
        }
    }
    if ((st = parse_token_id(c, o, "bos_token_id", &t->bos_token_id))) return st;
    if ((st = parse_token_id(c, o, "pad_token_id", &t->pad_token_id))) return st;
    return CMF_OK;
}

static cmf_status parse_skill(json_t *o, size_t idx, cmf_skill *s, jsonu_ctx *c) {
    cmf_status st;
    char where[48];
    snprintf(where, sizeof where, "skills[%zu]", idx);
    if (!json_is_object(o)) return jsonu_fail(c, "%s must be an object", where);
    if ((st = jsonu_opt_string(c, o, where, "id", &s->id))) return st;
    if (!s->id || !*s->id) return jsonu_fail(c, "%s.id must be a non-empty string", where);
    if ((st = jsonu_opt_string(c, o, where, "name", &s->name))) return st;
    if ((st = jsonu_opt_string(c, o, where, "input_mask_task", &s->input_mask_task))) return st;
    if ((st = jsonu_opt_string(c, o, where, "base_arch", &s->base_arch))) return st;
    if ((st = jsonu_opt_string(c, o, where, "task", &s->task))) return st;
    json_t *v = json_object_get(o, "layers");
    if (v && !json_is_null(v)) {
        if (!json_is_array(v)) return jsonu_fail(c, "%s.layers must be an array", where);
        size_t n = json_array_size(v), k = 0;
        s->layers = jsonu_alloc(c, (n ? n : 1) * sizeof(int64_t));
        if (!s->layers) return jsonu_nomem(c);
        for (size_t i = 0; i < n; i++) {
            json_t *e = json_array_get(v, i);
            if (json_is_integer(e)) {
                if (json_integer_value(e) < 0)
                    return jsonu_fail(c, "%s.layers[%zu] is negative", where, i);
                s->layers[k++] = json_integer_value(e);
            } else if (!json_is_string(e)) { /* "..." style placeholders are informative */
                return jsonu_fail(c, "%s.layers[%zu] must be an integer", where, i);
            }
        }
        s->n_layers = k;
    }
    const char *h = NULL;
    if ((st = jsonu_opt_string(c, o, where, "base_dir_hash", &h))) return st;
    if (h) {
        if (!cmf_hash64_from_hex(h, &s->base_dir_hash))
            return jsonu_fail(c, "%s.base_dir_hash=\"%s\" is not 1-16 hex digits", where, h);
        s->has_base_dir_hash = true;
    }
    if ((st = jsonu_opt_raw(c, o, "selection", &s->selection_json))) return st;
    if ((st = jsonu_opt_raw(c, o, "quality", &s->quality_json))) return st;
    if ((st = jsonu_opt_raw(c, o, "provenance", &s->provenance_json))) return st;
    return CMF_OK;
}

static cmf_status parse_hash_field(jsonu_ctx *c, json_t *o, const char *key, bool *has,
                                   uint64_t *out) {
    const char *h = NULL;
    cmf_status st = jsonu_opt_string(c, o, "section_hashes", key, &h);
    if (st) return st;
    if (!h) return CMF_OK;
    if (!cmf_hash64_from_hex(h, out))
        return jsonu_fail(c, "section_hashes.%s=\"%s\" is not 1-16 hex digits", key, h);
    *has = *out != 0;
    return CMF_OK;
}

static cmf_status parse_root(json_t *root, cmf_header *h, jsonu_ctx *c) {
    cmf_status st;
    if (!json_is_object(root)) return jsonu_fail(c, "header JSON must be an object");
    if ((st = jsonu_opt_string(c, root, "header", "format", &h->format))) return st;
    if (h->format && strcmp(h->format, "cmf") != 0)
        return jsonu_fail(c, "header format=\"%s\", want \"cmf\"", h->format);
    json_t *v = json_object_get(root, "version");
    if (v && (!json_is_integer(v) || json_integer_value(v) != CMF_VERSION))
        return jsonu_fail(c, "header version must be the integer %d", CMF_VERSION);
    if ((st = jsonu_opt_string(c, root, "header", "quant_type", &h->quant_type))) return st;

    v = json_object_get(root, "arch");
    if (v && !json_is_null(v)) {
        if (!json_is_object(v)) return jsonu_fail(c, "arch must be an object");
        if ((st = parse_arch(v, &h->arch, c))) return st;
    }
    h->tokenizer_config.bos_token_id = h->tokenizer_config.pad_token_id = -1;
    v = json_object_get(root, "tokenizer_config");
    if (v && !json_is_null(v)) {
        if (!json_is_object(v)) return jsonu_fail(c, "tokenizer_config must be an object or null");
        if ((st = parse_tokenizer_config(v, &h->tokenizer_config, c))) return st;
    }
    v = json_object_get(root, "skills");
    if (v && !json_is_null(v)) {
        if (!json_is_array(v)) return jsonu_fail(c, "skills must be an array");
        size_t n = json_array_size(v);
        h->skills = jsonu_alloc(c, (n ? n : 1) * sizeof *h->skills);
        if (!h->skills) return jsonu_nomem(c);
        memset(h->skills, 0, (n ? n : 1) * sizeof *h->skills);
        for (size_t i = 0; i < n; i++) {
            if ((st = parse_skill(json_array_get(v, i), i, &h->skills[i], c))) return st;
            for (size_t j = 0; j < i; j++)
                if (!strcmp(h->skills[j].id, h->skills[i].id))
                    return jsonu_fail(c, "skills[%zu].id \"%s\" duplicates skills[%zu]", i,
                                      h->skills[i].id, j);
        }
        h->n_skills = n;
    }
    v = json_object_get(root, "shard");
    if (v && !json_is_null(v)) {
        if (!json_is_object(v)) return jsonu_fail(c, "shard must be an object");
        h->shard_no = h->shard_count = -1;
        if ((st = jsonu_opt_pos_int(c, v, "shard", "no", &h->shard_no))) return st;
        if ((st = jsonu_opt_pos_int(c, v, "shard", "count", &h->shard_count))) return st;
        if (h->shard_no < 1 || h->shard_count < 1 || h->shard_no > h->shard_count ||
            h->shard_count > 99999)
            return jsonu_fail(c, "shard {no=%lld, count=%lld} needs 1 <= no <= count <= 99999",
                              (long long)h->shard_no, (long long)h->shard_count);
        h->has_shard = true;
    }
    v = json_object_get(root, "section_hashes");
    if (v && !json_is_null(v)) {
        if (!json_is_object(v)) return jsonu_fail(c, "section_hashes must be an object");
        if ((st = parse_hash_field(c, v, "masks", &h->has_masks_hash, &h->masks_hash))) return st;
        if ((st = parse_hash_field(c, v, "vocab", &h->has_vocab_hash, &h->vocab_hash))) return st;
        if ((st = parse_hash_field(c, v, "index", &h->has_index_hash, &h->index_hash))) return st;
    }
    return jsonu_opt_raw(c, root, "provenance", &h->provenance_json);
}

cmf_status cmf_header_parse(const char *json, size_t len, cmf_header *h, const char *ctx,
                            cmf_err *err) {
    memset(h, 0, sizeof *h);
    h->tokenizer_config.bos_token_id = h->tokenizer_config.pad_token_id = -1;
    header_store *hs = calloc(1, sizeof *hs);
    char *copy = malloc(len + 1);
    if (!hs || !copy) {
        free(hs);
        free(copy);
        return cmf_err_set(err, CMF_E_NOMEM, ctx, "header of %zu bytes", len);
    }
    memcpy(copy, json, len);
    copy[len] = '\0';
    h->json = copy;
    h->json_len = len;
    h->internal_ = hs;
    json_error_t jerr;
    hs->root = json_loadb(json, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!hs->root) {
        cmf_header_free(h);
        return cmf_err_set(err, CMF_E_PARSE, ctx, "header JSON invalid at line %d col %d: %s",
                           jerr.line, jerr.column, jerr.text);
    }
    jsonu_ctx c = {&hs->pool, ctx, err};
    cmf_status st = parse_root(hs->root, h, &c);
    if (st) cmf_header_free(h);
    return st;
}

void cmf_header_free(cmf_header *h) {
    if (!h) return;
    header_store *hs = h->internal_;
    if (hs) {
        json_decref(hs->root);
        jsonu_pool_free(&hs->pool);
        free(hs);
    }
    free((char *)h->json);
    memset(h, 0, sizeof *h);
}
