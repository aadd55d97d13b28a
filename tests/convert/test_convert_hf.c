/* `cortiq convert` on tiny random checkpoints of every supported family (made by
 * tools/make_tiny_checkpoints.py with transformers): header mapping, tensors 1:1 with the
 * source, dequantization within each dtype's bound, tokenizer verbatim, masks, shards, and
 * bad input that fails with a clear error and leaves no output file. */
#include <jansson.h>
#include <math.h>
#include <unistd.h>

#include "cortiq/safetensors.h"
#include "cortiq/converter.h"
#include "cortiq/format.h"
#include "cortiq/quant.h"
#include "test.h"

#define TINY CORTIQ_SOURCE_DIR "/tests/fixtures/tiny/"

static const char *k_families[] = {"llama",       "mistral",   "qwen2",     "qwen3",
                                   "gemma3_text", "qwen2_moe", "qwen3_moe", "qwen3_next"};

/* relative RMSE of every tensor of out against the checkpoint; returns the worst */
static double worst_error(const char *dir, const char *out, int *n_checked) {
    cmf_st *st;
    cmf_file *f;
    cmf_err err;
    double worst = 0;
    *n_checked = 0;
    if (cmf_st_open(dir, &st, &err) != CMF_OK || cmf_open(out, 0, &f, &err) != CMF_OK) {
        CHECK_MSG(0, "%s", err.msg);
        return 1e9;
    }
    CHECK(cmf_file_tensor_count(f) == cmf_st_tensor_count(st)); /* names 1:1 */
    for (size_t i = 0; i < cmf_st_tensor_count(st); i++) {
        const cmf_st_tensor *t = cmf_st_tensor_at(st, i);
        const cmf_tensor *c = cmf_file_find(f, t->name);
        CHECK_MSG(c != NULL, "%s missing from %s", t->name, out);
        if (!c) continue;
        CHECK(c->ndim == t->ndim);
        for (unsigned k = 0; k < t->ndim; k++)
            CHECK(c->shape[k] == t->shape[k]);
        float *a = malloc(t->nelem * sizeof *a), *b = malloc(t->nelem * sizeof *b);
        CHECK(cmf_st_rows_f32(st, t, 0, t->nrows, a, &err) == CMF_OK);
        CHECK_MSG(cmf_quant_dequant(c->dtype, c->ndim, c->shape, c->data, c->nbytes, b, &err) ==
                      CMF_OK,
                  "%s", err.msg);
        double num = 0, den = 0;
        for (uint64_t k = 0; k < t->nelem; k++) {
            num += (double)(a[k] - b[k]) * (a[k] - b[k]);
            den += (double)a[k] * a[k];
        }
        double rel = den > 0 ? sqrt(num / den) : sqrt(num);
        if (rel > worst) worst = rel;
        (*n_checked)++;
        free(a);
        free(b);
    }
    cmf_close(f);
    cmf_st_close(st);
    return worst;
}

static void test_family(const char *fam) {
    char dir[512], out[512];
    snprintf(dir, sizeof dir, TINY "%s", fam);
    struct {
        const char *q;
        double bound;
    } quants[] = {{"f32", 0},    {"f16", 1e-3},  {"bf16", 8e-3}, {"q8", 0.01}, {"q8_2f", 0.01},
                  {"q4t", 0.12}, {"q4tp", 0.14}, {"vbit", 0.12}, {"q1t", 0.6}};
    for (size_t k = 0; k < sizeof quants / sizeof quants[0]; k++) {
        cmf_convert_opts o;
        cmf_convert_opts_default(&o);
        CHECK(cmf_convert_quant_from_name(quants[k].q, &o.quant));
        o.threads = 2;
        snprintf(out, sizeof out, "conv_%s_%s.cmf", fam, quants[k].q);
        cmf_err err;
        cmf_convert_stats s;
        cmf_status st = cmf_convert_hf(dir, out, NULL, &o, &s, &err);
        CHECK_MSG(st == CMF_OK, "%s %s: %s", fam, quants[k].q, err.msg);
        if (st) continue;
        int n;
        double w = worst_error(dir, out, &n);
        /* bf16 sources converted to f32/f16 are exact or within f16 rounding */
        CHECK_MSG(w <= quants[k].bound + 1e-7, "%s %s: worst relative RMSE %.5f > %.5f", fam,
                  quants[k].q, w, quants[k].bound);
        cmf_file *f;
        CHECK(cmf_open(out, 0, &f, &err) == CMF_OK);
        CHECK(cmf_verify(f, 1, NULL, NULL, NULL) == CMF_OK);
        size_t vlen;
        const uint8_t *v = cmf_file_vocab(f, &vlen);
        char tpath[600];
        snprintf(tpath, sizeof tpath, "%s/tokenizer.json", dir);
        FILE *fp = fopen(tpath, "rb");
        fseek(fp, 0, SEEK_END);
        size_t tl = (size_t)ftell(fp);
        fseek(fp, 0, SEEK_SET);
        char *tb = malloc(tl);
        CHECK(fread(tb, 1, tl, fp) == tl);
        fclose(fp);
        CHECK(v && vlen == tl &&
              !memcmp(v, tb, tl)); /* tokenizer section = tokenizer.json verbatim */
        free(tb);
        const cmf_header *h = cmf_file_header(f);
        CHECK(h->arch.num_layers == 2 && h->arch.hidden_size == 64 && h->arch.vocab_size == 320);
        CHECK(h->tokenizer_config.present && h->tokenizer_config.chat_template &&
              h->tokenizer_config.n_eos >= 1 && h->tokenizer_config.eos_token_ids[0] == 2 &&
              h->tokenizer_config.bos_token_id == 1);
        CHECK(h->provenance_json && strstr(h->provenance_json, "\"tool\":\"cortiq\""));
        /* Gemma and Qwen3-Next store zero-centred norm weights: x * (1 + w) */
        bool zero_centred = !strncmp(fam, "gemma", 5) || !strncmp(fam, "qwen3_next", 10);
        CHECK(h->arch.norm_style == (zero_centred ? CMF_NORM_GEMMA : CMF_NORM_QWEN));
        /* every reader needs these (docs/FORMAT.md "Header fields") */
        CHECK(h->arch.n_layer_types == 2 && h->quant_type &&
              strspn(h->quant_type, "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_") ==
                  strlen(h->quant_type));
        CHECK(h->arch.has_embed_multiplier == !strncmp(fam, "gemma", 5));
        CHECK(!h->arch.hidden_act || !strcmp(h->arch.hidden_act, "silu") ||
              !strcmp(h->arch.hidden_act, "gelu_tanh"));
        if (!strcmp(fam, "gemma3_text")) {
            CHECK(h->arch.layer_types[0] == CMF_LAYER_SLIDING_ATTENTION &&
                  h->arch.sliding_window == 8 && h->arch.has_rope_local_base_freq &&
                  h->arch.rope_local_base_freq == 10000.0 && h->arch.tie_word_embeddings &&
                  h->arch.has_query_pre_attn_scalar);
        }
        if (strstr(fam, "moe") || !strcmp(fam, "qwen3_next")) {
            CHECK(h->arch.moe.present && h->arch.moe.num_experts == 4 && h->arch.moe.top_k == 2);
            CHECK(cmf_file_find(f, "model.layers.1.mlp.experts.3.down_proj.weight") ||
                  cmf_file_find(f, "model.layers.1.mlp.experts.gate_up_proj"));
        }
        if (!strcmp(fam, "qwen3_next")) CHECK(h->arch.layer_types[0] == CMF_LAYER_LINEAR_ATTENTION);
        /* 1-D tensors are always f16 */
        for (size_t i = 0; i < cmf_file_tensor_count(f); i++) {
            const cmf_tensor *t = cmf_file_tensor_at(f, i);
            if (t->ndim == 1)
                CHECK_MSG(t->dtype == CMF_DT_F16, "%s is %s", t->name, cmf_dtype_name(t->dtype));
        }
        cmf_close(f);
        unlink(out);
    }
}

static int exists(const char *p) {
    return access(p, F_OK) == 0;
}

static void copy_dir(const char *from, const char *to) {
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "rm -rf %s && cp -r %s %s", to, from, to);
    CHECK(system(cmd) == 0);
}

static void test_bad_input(void) {
    cmf_convert_opts o;
    cmf_convert_opts_default(&o);
    cmf_err err;
    /* unknown model_type: error lists the supported ones */
    copy_dir(TINY "llama", "bad_type");
    CHECK(
        system(
            "sed -i 's/\"model_type\": \"llama\"/\"model_type\": \"bert\"/' bad_type/config.json") ==
        0);
    unlink("bad.cmf");
    CHECK(cmf_convert_hf("bad_type", "bad.cmf", NULL, &o, NULL, &err) == CMF_E_UNSUPPORTED);
    CHECK(strstr(err.msg, "\"bert\"") && strstr(err.msg, "qwen3_moe"));
    CHECK(!exists("bad.cmf"));
    /* a shape that contradicts config */
    copy_dir(TINY "qwen3", "bad_shape");
    CHECK(
        system(
            "sed -i 's/\"intermediate_size\": 128/\"intermediate_size\": 96/' bad_shape/config.json") ==
        0);
    CHECK(cmf_convert_hf("bad_shape", "bad.cmf", NULL, &o, NULL, &err) == CMF_E_PARSE);
    CHECK(strstr(err.msg, "mlp.gate_proj.weight") && strstr(err.msg, "contradicts config"));
    CHECK(!exists("bad.cmf"));
    /* Laguna: sparse layers (fused experts) and a scaled sliding-layer RoPE are refused */
    copy_dir(TINY "laguna", "bad_laguna");
    CHECK(system("sed -i '0,/\"dense\"/s//\"sparse\"/' bad_laguna/config.json") == 0);
    CHECK(cmf_convert_hf("bad_laguna", "bad.cmf", NULL, &o, NULL, &err) == CMF_E_UNSUPPORTED);
    CHECK_MSG(strstr(err.msg, "mlp_layer_types[0]") && strstr(err.msg, "sparse"), "%s", err.msg);
    CHECK(!exists("bad.cmf"));
    copy_dir(TINY "laguna", "bad_laguna");
    CHECK(system("sed -i 's/\"rope_type\": \"default\"/\"rope_type\": \"linear\"/' "
                 "bad_laguna/config.json") == 0);
    CHECK(cmf_convert_hf("bad_laguna", "bad.cmf", NULL, &o, NULL, &err) == CMF_E_UNSUPPORTED);
    CHECK_MSG(strstr(err.msg, "sliding_attention.rope_type") && strstr(err.msg, "linear"), "%s",
              err.msg);
    CHECK(!exists("bad.cmf"));
    /* a truncated safetensors file */
    copy_dir(TINY "qwen2", "bad_trunc");
    CHECK(system("truncate -s -100 bad_trunc/model.safetensors") == 0);
    CHECK(cmf_convert_hf("bad_trunc", "bad.cmf", NULL, &o, NULL, &err) != CMF_OK);
    CHECK(!exists("bad.cmf"));
    /* a missing tokenizer */
    copy_dir(TINY "llama", "bad_tok");
    unlink("bad_tok/tokenizer.json");
    CHECK(cmf_convert_hf("bad_tok", "bad.cmf", NULL, &o, NULL, &err) == CMF_E_NOT_FOUND);
    CHECK(!exists("bad.cmf"));
    /* transformers writes model_max_length = 1e30 as an integer: still converts */
    copy_dir(TINY "llama", "big_int");
    CHECK(
        system(
            "sed -i 's/^{/{\"model_max_length\": 1000000000000000019884624838656,/' big_int/tokenizer_config.json") ==
        0);
    CHECK_MSG(cmf_convert_hf("big_int", "big_int.cmf", NULL, &o, NULL, &err) == CMF_OK, "%s",
              err.msg);
    /* q1 needs an explicit opt-in */
    o.quant = CMF_DT_Q1;
    CHECK(cmf_convert_hf(TINY "llama", "bad.cmf", NULL, &o, NULL, &err) == CMF_E_INVALID_ARG);
    o.allow_q1 = true;
    CHECK(cmf_convert_hf(TINY "llama", "q1.cmf", NULL, &o, NULL, &err) == CMF_OK);
}

static void test_masks_and_shards(void) {
    CHECK(system("rm -rf masks_in && mkdir masks_in") == 0);
    FILE *fp = fopen("masks_in/code.json", "w");
    fprintf(fp,
            "{\"description\": \"code\", \"ffn\": [[0, 1, 2, 127], null], \"heads\": [[0, 3], [1]],"
            " \"layers\": [1], \"default\": true}");
    fclose(fp);
    fp = fopen("masks_in/prose.json", "w");
    fprintf(fp, "{\"quality\": {\"metric\": \"heldout_ppl_ratio\", \"value\": 0.98}}");
    fclose(fp);
    cmf_convert_opts o;
    cmf_convert_opts_default(&o);
    o.shard_max_bytes = 150000;
    cmf_err err;
    CHECK(system("rm -f sharded*.cmf") == 0);
    CHECK_MSG(cmf_convert_hf(TINY "llama", "sharded.cmf", "masks_in", &o, NULL, &err) == CMF_OK,
              "%s", err.msg);
    cmf_file *f = NULL;
    CHECK_MSG(cmf_open_model("sharded-00001-of-00004.cmf", 0, &f, &err) == CMF_OK, "%s", err.msg);
    if (!f) return;
    CHECK(cmf_file_shard_count(f) == 4 && cmf_file_tensor_count(f) == 21);
    const cmf_masks *m = cmf_file_masks(f);
    CHECK(m && m->n_masks == 2 && !strcmp(m->default_task, "code"));
    if (m) {
        const cmf_mask *c = cmf_masks_find(m, "code"), *p = cmf_masks_find(m, "prose");
        CHECK(c && cmf_mask_ffn_active(m, c, 0) == 4 && cmf_mask_ffn_active(m, c, 1) == 128);
        CHECK(c && cmf_mask_heads_active(m, c, 0) == 2 && cmf_mask_layers_active(m, c) == 1 &&
              !c->quality_json);
        CHECK(p && cmf_mask_ffn_active(m, p, 0) == 128 && p->quality_json);
    }
    CHECK(cmf_verify(f, 2, NULL, NULL, NULL) == CMF_OK);
    cmf_close(f);
    /* an index out of range is refused */
    fp = fopen("masks_in/prose.json", "w");
    fprintf(fp, "{\"ffn\": [[128], null]}");
    fclose(fp);
    o.shard_max_bytes = 0;
    CHECK(cmf_convert_hf(TINY "llama", "masked_bad.cmf", "masks_in", &o, NULL, &err) ==
          CMF_E_PARSE);
    CHECK(!exists("masked_bad.cmf"));
}

static void test_policy(void) {
    cmf_convert_opts o;
    cmf_convert_opts_default(&o);
    o.quant = CMF_DT_Q4_TILED;
    o.has_embed_quant = true;
    o.embed_quant = CMF_DT_Q8_ROW;
    bool fb;
    uint64_t s2[2] = {64, 48}, s1[1] = {4096}, s3[3] = {8, 1, 4}, sq[2] = {64, 64};
    CHECK(cmf_convert_pick_dtype(&o, "model.layers.0.mlp.up_proj.weight", 2, sq, &fb) ==
              CMF_DT_Q4_TILED &&
          !fb);
    CHECK(cmf_convert_pick_dtype(&o, "model.layers.0.mlp.up_proj.weight", 2, s2, &fb) ==
              CMF_DT_Q8_ROW &&
          fb);
    CHECK(cmf_convert_pick_dtype(&o, "model.norm.weight", 1, s1, &fb) == CMF_DT_F16 && !fb);
    CHECK(cmf_convert_pick_dtype(&o, "x.conv1d.weight", 3, s3, &fb) == CMF_DT_F16);
    CHECK(cmf_convert_pick_dtype(&o, "model.embed_tokens.weight", 2, sq, &fb) == CMF_DT_Q8_ROW &&
          !fb);
    CHECK(cmf_convert_name_cmp("model.layers.2.x", "model.layers.10.x") < 0);
    CHECK(cmf_convert_name_cmp("a.10", "a.9") > 0 && cmf_convert_name_cmp("a.b", "a.b") == 0);
}

int main(void) {
    for (size_t i = 0; i < sizeof k_families / sizeof k_families[0]; i++)
        test_family(k_families[i]);
    test_bad_input();
    test_masks_and_shards();
    test_policy();
    TEST_DONE();
}
