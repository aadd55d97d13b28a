/* Header fields that change what a model computes (docs/FORMAT.md "Header fields"), on the tiny
 * checkpoints: embed_multiplier and logit_multiplier are honoured exactly as written;
 * sliding_window_pattern without sliding tags gives the same logits as the tags it stands for;
 * a Gemma file without embed_multiplier (written before the field) still gets sqrt(hidden);
 * hidden_act spellings map to the right function and an unknown one is refused; every field of
 * the other implementation that this runtime does not implement is refused by name. Each case
 * rewrites the header of a converted file (append-only, spec §9) and loads it again. */
#include <jansson.h>

#include "common/test.h"
#include "cortiq/format.h"
#include "cortiq/writer.h"
#include "engine/tiny_fixture.h"

#define N 24

/* Copy `src` to `dst` with arch edited by `edit` (a JSON object merged into arch; a null
 * value deletes the key). */
static void with_arch(const char *src, const char *dst, const char *edit) {
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "cp '%s' '%s'", src, dst);
    CHECK(system(cmd) == 0);
    cmf_file *f = NULL;
    cmf_err err;
    CHECK(cmf_open(dst, 0, &f, &err) == CMF_OK);
    if (!f) return;
    json_t *h = json_loads(cmf_file_header(f)->json, 0, NULL);
    cmf_close(f);
    json_t *arch = json_object_get(h, "arch"), *e = json_loads(edit, 0, NULL);
    const char *k;
    json_t *v;
    json_object_foreach(e, k, v) {
        if (json_is_null(v))
            json_object_del(arch, k);
        else
            json_object_set(arch, k, v);
    }
    char *text = json_dumps(h, JSON_COMPACT);
    cmf_appender *a = NULL;
    CHECK(cmf_append_begin(dst, &a, &err) == CMF_OK);
    CHECK(cmf_append_set_header(a, text, strlen(text), &err) == CMF_OK);
    CHECK_MSG(cmf_append_commit(a, &err) == CMF_OK, "%s", err.msg);
    cmf_append_free(a);
    free(text);
    json_decref(e);
    json_decref(h);
}

static float *logits_of(const char *path, const int32_t *tokens, uint32_t *V) {
    cortiq_load_opts lo = {.threads = 2, .kv = CORTIQ_KV_F32, .act = CORTIQ_ACT_F32};
    return tiny_logits(path, &lo, 64, tokens, N, 0, V);
}

static double max_abs_diff(const float *a, const float *b, size_t n) {
    double d = 0;
    for (size_t i = 0; i < n; i++)
        d = fmax(d, fabs((double)a[i] - (double)b[i]));
    return d;
}

static void refused(const char *src, const char *edit, const char *needle) {
    with_arch(src, "af_refused.cmf", edit);
    cortiq_model *m = NULL;
    cmf_err err;
    cmf_status st = cortiq_model_load("af_refused.cmf", NULL, &m, &err);
    CHECK_MSG(st == CMF_E_UNSUPPORTED && strstr(err.msg, needle), "%s: got %s: %s", edit,
              cmf_status_name(st), st ? err.msg : "loaded");
    cortiq_model_free(m);
}

int main(void) {
    size_t n = 0;
    int32_t *tokens = tiny_convert("llama", "f32", "af_llama.cmf", &n);
    int32_t *gtok = tiny_convert("gemma3_text", "f32", "af_gemma.cmf", &n);
    if (!tokens || !gtok) TEST_DONE();
    uint32_t V = 0;
    float *base = logits_of("af_llama.cmf", tokens, &V);

    /* logit_multiplier scales every logit */
    with_arch("af_llama.cmf", "af_lm.cmf", "{\"logit_multiplier\": 0.5}");
    float *lm = logits_of("af_lm.cmf", tokens, &V);
    double d = 0;
    for (size_t i = 0; base && lm && i < N * (size_t)V; i++)
        d = fmax(d, fabs((double)lm[i] - 0.5 * (double)base[i]));
    CHECK_MSG(d < 1e-6, "logit_multiplier: %.3g", d);

    /* embed_multiplier: 1 is the identity; 2 changes the output */
    with_arch("af_llama.cmf", "af_em1.cmf", "{\"embed_multiplier\": 1.0}");
    with_arch("af_llama.cmf", "af_em2.cmf", "{\"embed_multiplier\": 2.0}");
    float *em1 = logits_of("af_em1.cmf", tokens, &V), *em2 = logits_of("af_em2.cmf", tokens, &V);
    CHECK(base && em1 && max_abs_diff(base, em1, N * (size_t)V) == 0);
    CHECK(base && em2 && max_abs_diff(base, em2, N * (size_t)V) > 1e-3);

    /* Gemma: the written sqrt(hidden) and an absent field (older files) agree */
    float *g = logits_of("af_gemma.cmf", gtok, &V);
    with_arch("af_gemma.cmf", "af_g_noem.cmf", "{\"embed_multiplier\": null}");
    with_arch("af_gemma.cmf", "af_g_em1.cmf", "{\"embed_multiplier\": 1.0}");
    float *gno = logits_of("af_g_noem.cmf", gtok, &V), *gem1 = logits_of("af_g_em1.cmf", gtok, &V);
    CHECK(g && gno && max_abs_diff(g, gno, N * (size_t)V) == 0);
    CHECK(g && gem1 && max_abs_diff(g, gem1, N * (size_t)V) > 1e-3);

    /* sliding_window_pattern 2 over untagged layers = layer 0 sliding, layer 1 global: the tags
     * the converter writes for this checkpoint (window 8 < N, so the window matters) */
    with_arch("af_gemma.cmf", "af_g_pat.cmf",
              "{\"layer_types\": [\"FullAttention\", \"FullAttention\"], "
              "\"sliding_window_pattern\": 2}");
    with_arch("af_gemma.cmf", "af_g_full.cmf",
              "{\"layer_types\": [\"FullAttention\", \"FullAttention\"], "
              "\"sliding_window_pattern\": null}");
    float *gpat = logits_of("af_g_pat.cmf", gtok, &V),
          *gfull = logits_of("af_g_full.cmf", gtok, &V);
    CHECK(g && gpat && max_abs_diff(g, gpat, N * (size_t)V) == 0);
    CHECK(g && gfull && max_abs_diff(g, gfull, N * (size_t)V) > 1e-4);

    /* activation spellings: gelu_pytorch_tanh (older files) is gelu_tanh; swish is silu */
    with_arch("af_gemma.cmf", "af_g_act.cmf", "{\"hidden_act\": \"gelu_pytorch_tanh\"}");
    float *gact = logits_of("af_g_act.cmf", gtok, &V);
    CHECK(g && gact && max_abs_diff(g, gact, N * (size_t)V) == 0);
    with_arch("af_llama.cmf", "af_swish.cmf", "{\"hidden_act\": \"swish\"}");
    float *sw = logits_of("af_swish.cmf", tokens, &V);
    CHECK(base && sw && max_abs_diff(base, sw, N * (size_t)V) == 0);
    refused("af_llama.cmf", "{\"hidden_act\": \"gelu\"}", "hidden_act=\"gelu\"");
    refused("af_llama.cmf", "{\"hidden_act\": \"relu2\"}", "hidden_act");

    /* the other implementation's fields this runtime does not implement */
    static const char *const fields[][2] = {
        {"{\"mla\": {\"kv_lora_rank\": 8}}", "arch.mla"},
        {"{\"g3n\": {\"laurel_rank\": 4}}", "arch.g3n"},
        {"{\"global_head_dim\": 32}", "arch.global_head_dim"},
        {"{\"attn_v_norm\": true}", "arch.attn_v_norm"},
        {"{\"rope_freq_factors\": [1.0, 2.0]}", "arch.rope_freq_factors"},
        {"{\"head_clusters\": 4}", "arch.head_clusters"},
        {"{\"num_loops\": 2}", "arch.num_loops"},
        {"{\"kda_gate_lower_bound\": -5.0}", "arch.kda_gate_lower_bound"},
        {"{\"yarn\": {\"factor\": 4.0, \"original_max_position_embeddings\": 64, "
         "\"mscale_all_dim\": 1.0}}",
         "mscale_all_dim"},
    };
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
        refused("af_llama.cmf", fields[i][0], fields[i][1]);
    /* their neutral values load */
    with_arch("af_llama.cmf", "af_neutral.cmf",
              "{\"num_loops\": 1, \"attn_v_norm\": false, \"mla\": null}");
    float *neutral = logits_of("af_neutral.cmf", tokens, &V);
    CHECK(base && neutral && max_abs_diff(base, neutral, N * (size_t)V) == 0);

    free(base), free(lm), free(em1), free(em2), free(g), free(gno), free(gem1), free(gpat);
    free(gfull), free(gact), free(sw), free(neutral), free(tokens), free(gtok);
    TEST_DONE();
}
