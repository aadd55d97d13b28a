/* test_gguf_arch.c - GGUF metadata -> header arch / tokenizer_config JSON, llama.cpp -> HF
 * tensor names, and the HF value fix-ups (Q/K row un-permutation, Gemma norm shift), on
 * hand-built files: what the real-model test checks, without needing the models. */
#include <jansson.h>
#include <math.h>

#include "common/test.h"
#include "gguf_builder.h"

static cmf_gguf *open_w(const gw *w) {
    cmf_gguf *g = NULL;
    cmf_err err;
    cmf_status st = cmf_gguf_open_memory(w->b, w->n, "arch.gguf", &g, &err);
    CHECK_MSG(st == CMF_OK, "%s", err.msg);
    return g;
}

static json_t *arch_of(const gw *w, cmf_status want) {
    cmf_gguf *g = open_w(w);
    if (!g) return NULL;
    char *text = NULL;
    cmf_err err;
    cmf_status st = cmf_gguf_arch_json(g, &text, &err);
    CHECK_MSG(st == want, "got %s (%s)", cmf_status_name(st), err.msg);
    json_t *j = text ? json_loads(text, 0, NULL) : NULL;
    free(text);
    cmf_gguf_close(g);
    return j;
}

static int64_t geti(json_t *j, const char *k) {
    return json_integer_value(json_object_get(j, k));
}
static double getr(json_t *j, const char *k) {
    return json_number_value(json_object_get(j, k));
}
static const char *gets(json_t *j, const char *k) {
    const char *s = json_string_value(json_object_get(j, k));
    return s ? s : "";
}
static const char *layer(json_t *j, size_t i) {
    const char *s = json_string_value(json_array_get(json_object_get(j, "layer_types"), i));
    return s ? s : "";
}

static void base_kvs(gw *w, const char *arch, uint32_t layers) {
    char k[128];
    w_begin(w);
    kv_str(w, "general.architecture", arch);
    snprintf(k, sizeof k, "%s.block_count", arch);
    kv_u32(w, k, layers);
    snprintf(k, sizeof k, "%s.embedding_length", arch);
    kv_u32(w, k, 256);
    snprintf(k, sizeof k, "%s.attention.head_count", arch);
    kv_u32(w, k, 4);
    snprintf(k, sizeof k, "%s.feed_forward_length", arch);
    kv_u32(w, k, 512);
}

static void test_arch(void) {
    gw w;
    /* llama: defaults for kv heads / head_dim / rope / eps, f32 eps written short, tied */
    base_kvs(&w, "llama", 2);
    kv_f32(&w, "llama.attention.layer_norm_rms_epsilon", 1e-5f);
    kv_u32(&w, "llama.context_length", 4096);
    const char *toks[] = {"a", "b", "c"};
    kv_strs(&w, "tokenizer.ggml.tokens", toks, 3);
    w_end(&w);
    json_t *j = arch_of(&w, CMF_OK);
    if (j) {
        CHECK(strcmp(gets(j, "arch_name"), "llama") == 0 && geti(j, "num_layers") == 2 &&
              geti(j, "hidden_size") == 256);
        CHECK(geti(j, "num_kv_heads") == 4 && geti(j, "head_dim") == 64 &&
              geti(j, "intermediate_size") == 512);
        CHECK(geti(j, "vocab_size") == 3 && geti(j, "max_position_embeddings") == 4096);
        CHECK(getr(j, "rms_norm_eps") == 1e-5 && getr(j, "rope_theta") == 10000.0);
        CHECK(strcmp(gets(j, "norm_style"), "qwen") == 0 &&
              strcmp(gets(j, "hidden_act"), "silu") == 0);
        CHECK(json_is_true(json_object_get(j, "tie_word_embeddings")));
        /* layer_types always (other readers require it), here all full attention */
        json_t *lt = json_object_get(j, "layer_types");
        CHECK(json_array_size(lt) == 2 &&
              !strcmp(json_string_value(json_array_get(lt, 1)), "FullAttention"));
        CHECK(json_object_get(j, "partial_rotary_factor") == NULL &&
              json_object_get(j, "embed_multiplier") == NULL);
        json_decref(j);
    }
    free(w.b);
    /* qwen2: explicit kv heads and key_length, partial rotary, yarn, an output head */
    base_kvs(&w, "qwen2", 2);
    kv_u32(&w, "qwen2.attention.head_count_kv", 2);
    kv_u32(&w, "qwen2.attention.key_length", 128);
    kv_u32(&w, "qwen2.rope.dimension_count", 64);
    kv_f32(&w, "qwen2.rope.freq_base", 1000000.0f);
    kv_str(&w, "qwen2.rope.scaling.type", "yarn");
    kv_f32(&w, "qwen2.rope.scaling.factor", 4.0f);
    kv_u32(&w, "qwen2.rope.scaling.original_context_length", 32768);
    const char *out_names[] = {"output.weight"};
    w_f32_tensors(&w, out_names, NULL, 1);
    w_end(&w);
    j = arch_of(&w, CMF_OK);
    if (j) {
        CHECK(geti(j, "num_kv_heads") == 2 && geti(j, "head_dim") == 128 &&
              getr(j, "partial_rotary_factor") == 0.5);
        CHECK(getr(j, "rope_theta") == 1e6);
        json_t *y = json_object_get(j, "yarn");
        CHECK(getr(y, "factor") == 4.0 && geti(y, "original_max_position_embeddings") == 32768);
        CHECK(json_is_false(json_object_get(j, "tie_word_embeddings")));
        json_decref(j);
    }
    free(w.b);
    /* a block_count no model has: refused before per-layer arrays are built from it (a fuzzed
     * file with 2^24 layers once took 2 GB here) */
    base_kvs(&w, "llama", 1u << 24);
    w_end(&w);
    json_decref(arch_of(&w, CMF_E_LIMIT));
    free(w.b);
    /* gemma3: sandwich norms style, layer pattern every 6th global, local rope base */
    base_kvs(&w, "gemma3", 12);
    kv_u32(&w, "gemma3.attention.key_length", 256);
    kv_u32(&w, "gemma3.attention.sliding_window", 512);
    w_end(&w);
    j = arch_of(&w, CMF_OK);
    if (j) {
        CHECK(strcmp(gets(j, "norm_style"), "gemma") == 0 &&
              strcmp(gets(j, "hidden_act"), "gelu_tanh") == 0);
        CHECK(getr(j, "embed_multiplier") == sqrt((double)geti(j, "hidden_size")));
        CHECK(geti(j, "sliding_window_pattern") == 6);
        CHECK(getr(j, "query_pre_attn_scalar") == 256.0 &&
              getr(j, "rope_local_base_freq") == 10000.0);
        CHECK(json_array_size(json_object_get(j, "layer_types")) == 12);
        CHECK(strcmp(layer(j, 4), "SlidingAttention") == 0 &&
              strcmp(layer(j, 5), "FullAttention") == 0 &&
              strcmp(layer(j, 11), "FullAttention") == 0 &&
              strcmp(layer(j, 6), "SlidingAttention") == 0);
        CHECK(geti(j, "sliding_window") == 512);
        json_decref(j);
    }
    free(w.b);
    /* gemma3 27B (62 layers): query scale from hidden/heads */
    base_kvs(&w, "gemma3", 62);
    kv_u32(&w, "gemma3.attention.key_length", 128);
    w_end(&w);
    j = arch_of(&w, CMF_OK);
    if (j) CHECK(getr(j, "query_pre_attn_scalar") == 64.0);
    json_decref(j);
    free(w.b);
    /* an explicit per-layer pattern wins */
    base_kvs(&w, "gemma3", 3);
    kv_u32(&w, "gemma3.attention.sliding_window", 512);
    bool pat[3] = {false, true, false};
    kv_bools(&w, "gemma3.attention.sliding_window_pattern", pat, 3);
    w_end(&w);
    j = arch_of(&w, CMF_OK);
    if (j)
        CHECK(strcmp(layer(j, 0), "FullAttention") == 0 &&
              strcmp(layer(j, 1), "SlidingAttention") == 0 &&
              strcmp(layer(j, 2), "FullAttention") == 0);
    json_decref(j);
    free(w.b);
    /* gemma2: alternating, soft-caps */
    base_kvs(&w, "gemma2", 4);
    kv_u32(&w, "gemma2.attention.sliding_window", 4096);
    kv_f32(&w, "gemma2.attn_logit_softcapping", 50.0f);
    kv_f32(&w, "gemma2.final_logit_softcapping", 30.0f);
    w_end(&w);
    j = arch_of(&w, CMF_OK);
    if (j) {
        CHECK(getr(j, "attn_logit_softcapping") == 50.0 &&
              getr(j, "final_logit_softcapping") == 30.0);
        CHECK(strcmp(layer(j, 0), "SlidingAttention") == 0 &&
              strcmp(layer(j, 1), "FullAttention") == 0);
        json_decref(j);
    }
    free(w.b);
    /* required keys */
    w_begin(&w);
    kv_str(&w, "general.architecture", "llama");
    w_end(&w);
    arch_of(&w, CMF_E_NOT_FOUND);
    free(w.b);
    w_begin(&w);
    w_end(&w);
    arch_of(&w, CMF_E_NOT_FOUND);
    free(w.b);
}

static void test_tokenizer_config(void) {
    gw w;
    w_begin(&w);
    kv_str(&w, "general.architecture", "gemma3");
    kv_str(&w, "tokenizer.chat_template", "{{ x }}");
    kv_u32(&w, "tokenizer.ggml.eos_token_id", 1);
    kv_u32(&w, "tokenizer.ggml.eot_token_id", 1); /* duplicate: listed once */
    kv_u32(&w, "tokenizer.ggml.bos_token_id", 2);
    const char *toks[] = {"<pad>", "<eos>", "<bos>", "<end_of_turn>"};
    kv_strs(&w, "tokenizer.ggml.tokens", toks, 4);
    w_end(&w);
    cmf_gguf *g = open_w(&w);
    char *text = NULL;
    if (g) CHECK_STATUS(cmf_gguf_tokenizer_config_json(g, &text, &t_err_), CMF_OK);
    json_t *j = text ? json_loads(text, 0, NULL) : NULL;
    CHECK(j != NULL);
    if (j) {
        CHECK(strcmp(gets(j, "chat_template"), "{{ x }}") == 0);
        json_t *eos = json_object_get(j, "eos_token_ids");
        CHECK(json_array_size(eos) == 2 && json_integer_value(json_array_get(eos, 0)) == 1 &&
              json_integer_value(json_array_get(eos, 1)) == 3);
        CHECK(geti(j, "bos_token_id") == 2 && json_is_null(json_object_get(j, "pad_token_id")));
    }
    json_decref(j);
    free(text);
    cmf_gguf_close(g);
    free(w.b);
}

static void test_names(void) {
    static const char *k[][3] = {
        {"llama", "token_embd.weight", "model.embed_tokens.weight"},
        {"llama", "output.weight", "lm_head.weight"},
        {"llama", "output_norm.weight", "model.norm.weight"},
        {"llama", "blk.0.attn_q.weight", "model.layers.0.self_attn.q_proj.weight"},
        {"qwen2", "blk.12.attn_k.bias", "model.layers.12.self_attn.k_proj.bias"},
        {"llama", "blk.3.attn_v.weight", "model.layers.3.self_attn.v_proj.weight"},
        {"llama", "blk.3.attn_output.weight", "model.layers.3.self_attn.o_proj.weight"},
        {"qwen3", "blk.1.attn_q_norm.weight", "model.layers.1.self_attn.q_norm.weight"},
        {"qwen3", "blk.1.attn_k_norm.weight", "model.layers.1.self_attn.k_norm.weight"},
        {"llama", "blk.7.ffn_gate.weight", "model.layers.7.mlp.gate_proj.weight"},
        {"llama", "blk.7.ffn_up.weight", "model.layers.7.mlp.up_proj.weight"},
        {"llama", "blk.7.ffn_down.weight", "model.layers.7.mlp.down_proj.weight"},
        {"llama", "blk.0.attn_norm.weight", "model.layers.0.input_layernorm.weight"},
        {"llama", "blk.0.ffn_norm.weight", "model.layers.0.post_attention_layernorm.weight"},
        {"gemma3", "blk.0.ffn_norm.weight", "model.layers.0.pre_feedforward_layernorm.weight"},
        {"gemma3", "blk.0.post_attention_norm.weight",
         "model.layers.0.post_attention_layernorm.weight"},
        {"gemma3", "blk.0.post_ffw_norm.weight",
         "model.layers.0.post_feedforward_layernorm.weight"},
        {"qwen2moe", "blk.2.ffn_gate_inp.weight", "model.layers.2.mlp.gate.weight"},
        {"qwen2moe", "blk.2.ffn_up_shexp.weight",
         "model.layers.2.mlp.shared_expert.up_proj.weight"},
        {"qwen2moe", "blk.2.ffn_gate_inp_shexp.weight",
         "model.layers.2.mlp.shared_expert_gate.weight"},
    };
    char out[256];
    for (size_t i = 0; i < sizeof k / sizeof *k; i++) {
        bool ok = cmf_gguf_hf_name(k[i][0], k[i][1], out, sizeof out);
        CHECK_MSG(ok && strcmp(out, k[i][2]) == 0, "%s %s -> %s", k[i][0], k[i][1],
                  ok ? out : "(none)");
    }
    static const char *none[][2] = {{"llama", "rope_freqs.weight"},
                                    {"qwen2moe", "blk.0.ffn_up_exps.weight"},
                                    {"llama", "blk.0.post_attention_norm.weight"},
                                    {"llama", "blk.x.attn_q.weight"},
                                    {"llama", "blk.0.attn_q"},
                                    {"llama", "blk..attn_q.weight"},
                                    {"llama", "token_embd.scale"}};
    for (size_t i = 0; i < sizeof none / sizeof *none; i++)
        CHECK_MSG(!cmf_gguf_hf_name(none[i][0], none[i][1], out, sizeof out), "%s mapped to %s",
                  none[i][1], out);
    CHECK(!cmf_gguf_hf_name("llama", "blk.0.attn_q.weight", out, 10)); /* too small */
}

static void test_fixups(void) {
    /* llama: Q by 2 heads and K by 1 (kv) head; rows of Q: 2 heads x 4; K: 1 head x 4 */
    gw w;
    w_begin(&w);
    kv_str(&w, "general.architecture", "llama");
    kv_u32(&w, "llama.attention.head_count", 2);
    kv_u32(&w, "llama.attention.head_count_kv", 1);
    const char *names[] = {"blk.0.attn_q.weight", "blk.0.attn_k.weight", "blk.0.attn_norm.weight"};
    uint64_t rows[] = {8, 4, 1};
    w_f32_tensors(&w, names, rows, 3);
    w_end(&w);
    /* fill Q with row index r in every column of row r */
    cmf_gguf *g = open_w(&w);
    if (g) {
        cmf_gguf_fixup f = cmf_gguf_tensor_fixup(g, "blk.0.attn_q.weight");
        CHECK(f.unpermute_rows && f.n_head == 2 && !f.minus_one);
        f = cmf_gguf_tensor_fixup(g, "blk.0.attn_k.weight");
        CHECK(f.unpermute_rows && f.n_head == 1);
        f = cmf_gguf_tensor_fixup(g, "blk.0.attn_v.weight");
        CHECK(!f.unpermute_rows && !f.minus_one);
        const cmf_gguf_tensor *q = cmf_gguf_find_tensor(g, "blk.0.attn_q.weight");
        for (uint64_t r = 0; q && r < 8; r++)
            for (int c = 0; c < 32; c++) {
                float v = (float)r;
                memcpy((uint8_t *)w.b + q->off + (r * 32 + (uint64_t)c) * 4, &v, 4);
            }
        float hf[256];
        if (q) CHECK_STATUS(cmf_gguf_tensor_hf_f32(g, q, hf, &t_err_), CMF_OK);
        /* head of 4 rows: GGUF rows (0,1,2,3) = pairs (i0 p0, i0 p1, i1 p0, i1 p1) -> HF (0,2,1,3)
         */
        const float want[8] = {0, 2, 1, 3, 4, 6, 5, 7};
        for (int r = 0; r < 8; r++)
            CHECK_MSG(hf[r * 32 + 31] == want[r], "HF row %d holds GGUF row %g", r, hf[r * 32]);
        cmf_gguf_close(g);
    }
    free(w.b);
    /* the standalone un-permutation agrees, and refuses a row count that does not split */
    float m[8 * 2], scratch[8 * 2];
    for (int i = 0; i < 16; i++)
        m[i] = (float)(i / 2);
    CHECK_STATUS(cmf_gguf_unpermute_rows(m, 8, 2, 2, scratch, &t_err_), CMF_OK);
    CHECK(m[2] == 2 && m[4] == 1 && m[10] == 6);
    CHECK_STATUS(cmf_gguf_unpermute_rows(m, 6, 2, 2, scratch, &t_err_), CMF_E_INVALID_ARG);
    /* gemma: every *norm.weight minus 1; qwen2: nothing */
    w_begin(&w);
    kv_str(&w, "general.architecture", "gemma3");
    const char *gn[] = {"blk.0.attn_q_norm.weight", "blk.0.attn_q.weight"};
    w_f32_tensors(&w, gn, NULL, 2);
    w_end(&w);
    g = open_w(&w);
    if (g) {
        CHECK(cmf_gguf_tensor_fixup(g, "blk.0.attn_q_norm.weight").minus_one);
        CHECK(cmf_gguf_tensor_fixup(g, "output_norm.weight").minus_one);
        cmf_gguf_fixup f = cmf_gguf_tensor_fixup(g, "blk.0.attn_q.weight");
        CHECK(!f.minus_one && !f.unpermute_rows);
        float v[32];
        CHECK_STATUS(cmf_gguf_tensor_hf_f32(g, cmf_gguf_find_tensor(g, "blk.0.attn_q_norm.weight"),
                                            v, &t_err_),
                     CMF_OK);
        CHECK(v[0] == -1.0f && v[31] == -1.0f);
        cmf_gguf_close(g);
    }
    free(w.b);
    w_begin(&w);
    kv_str(&w, "general.architecture", "qwen2");
    kv_u32(&w, "qwen2.attention.head_count", 2);
    w_end(&w);
    g = open_w(&w);
    if (g) {
        cmf_gguf_fixup f = cmf_gguf_tensor_fixup(g, "blk.0.attn_q.weight");
        CHECK(!f.unpermute_rows && !f.minus_one);
        CHECK(!cmf_gguf_tensor_fixup(g, "blk.0.attn_norm.weight").minus_one);
        cmf_gguf_close(g);
    }
    free(w.b);
}

int main(void) {
    test_arch();
    test_tokenizer_config();
    test_names();
    test_fixups();
    TEST_DONE();
}
