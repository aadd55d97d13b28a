/* Task masks executed (spec §5): the masked forward pass equals the dense one with the inactive
 * neurons' activations zeroed, the inactive heads' outputs zeroed and gated-off layers skipped.
 * The reference is the dense engine on a copy of the file whose weights make those zeros
 * (down_proj columns of inactive neurons, o_proj columns of inactive heads, both whole for a
 * gated-off layer) - computed at f32 on the tiny llama fixture. Quantized files compare the
 * gathered path against the dense-with-zeros path (cq_session_set_task no_gather). */
#include <stdlib.h>
#include <string.h>

#include "cortiq/writer.h"
#include "engine/session.h"
#include "test.h"
#include "tiny_fixture.h"

#define L_    2
#define FFN_  128
#define HEADS 4
#define HD    16

typedef struct spec_mask {
    const char *name;
    uint8_t ffn[L_][FFN_ / 8], heads[L_][1], gates[1];
    const char *quality;
} spec_mask;

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static unsigned rnd(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (unsigned)(rng >> 11);
}

/* keep_pct of the neurons of each layer, at random (block = 0) or in random 32-groups. */
static void fill_ffn(spec_mask *k, unsigned keep_pct, int block) {
    memset(k->ffn, 0, sizeof k->ffn);
    for (int l = 0; l < L_; l++)
        for (int g = 0; g < FFN_; g += block ? 32 : 1) {
            if (rnd() % 100 >= keep_pct) continue;
            for (int i = g; i < g + (block ? 32 : 1); i++)
                k->ffn[l][i / 8] |= (uint8_t)(1u << (i % 8));
        }
}

#define N_MASKS 5
static spec_mask k_masks[N_MASKS];

static void make_masks(void) {
    spec_mask *k = k_masks;
    k[0] = (spec_mask){.name = "half", .quality = NULL};
    fill_ffn(&k[0], 50, 0);
    memset(k[0].heads, 0x0F, sizeof k[0].heads);
    k[0].gates[0] = 0x03;
    k[1] =
        (spec_mask){.name = "heads", .quality = "{\"metric\":\"heldout_ppl_ratio\",\"value\":1.1}"};
    fill_ffn(&k[1], 25, 0);
    k[1].heads[0][0] = 0x05, k[1].heads[1][0] = 0x0E;
    k[1].gates[0] = 0x03;
    k[2] = (spec_mask){.name = "gated", .quality = NULL};
    fill_ffn(&k[2], 75, 0);
    memset(k[2].heads, 0x0F, sizeof k[2].heads);
    k[2].gates[0] = 0x01; /* layer 1 off */
    k[3] = (spec_mask){.name = "blocks", .quality = NULL};
    fill_ffn(&k[3], 50, 1);
    k[3].ffn[0][0] |= 1, k[3].ffn[1][0] |= 1; /* at least one group per layer */
    memset(k[3].heads, 0x0F, sizeof k[3].heads);
    k[3].gates[0] = 0x03;
    /* heads only, whole kv groups off (2 kv heads of 2 query heads): layer 0 keeps kv head 1's
     * two heads, layer 1 kv head 0's first head alone */
    k[4] = (spec_mask){.name = "kvoff", .quality = NULL};
    memset(k[4].ffn, 0xFF, sizeof k[4].ffn);
    k[4].heads[0][0] = 0x0C, k[4].heads[1][0] = 0x01;
    k[4].gates[0] = 0x03;
}

static void append_masks(const char *path) {
    cmf_err err;
    cmf_masks_builder *b = NULL;
    CHECK(cmf_masks_builder_create(L_, FFN_, HEADS, 0, &b, &err) == CMF_OK);
    for (int i = 0; i < N_MASKS; i++)
        CHECK_MSG(cmf_masks_builder_add(b, k_masks[i].name, NULL, &k_masks[i].ffn[0][0],
                                        &k_masks[i].heads[0][0], k_masks[i].gates, NULL,
                                        k_masks[i].quality, &err) == CMF_OK,
                  "%s", err.msg);
    CHECK(cmf_masks_builder_set_default(b, "heads", &err) == CMF_OK);
    uint8_t *bytes = NULL;
    size_t len = 0;
    CHECK(cmf_masks_builder_build(b, &bytes, &len, &err) == CMF_OK);
    cmf_masks_builder_free(b);
    cmf_appender *a = NULL;
    CHECK_MSG(cmf_append_begin(path, &a, &err) == CMF_OK, "%s", err.msg);
    CHECK(cmf_append_set_masks(a, bytes, len, &err) == CMF_OK);
    CHECK_MSG(cmf_append_commit(a, &err) == CMF_OK, "%s", err.msg);
    cmf_append_free(a);
    free(bytes);
}

/* Replace tensor `name` of the f32 file at path by its copy with column j zeroed where
 * zero_col(j) (cols columns). */
static void zero_cols(const char *path, const char *name, const uint8_t *zero, uint64_t cols) {
    cmf_err err;
    cmf_file *f = NULL;
    CHECK(cmf_open(path, 0, &f, &err) == CMF_OK);
    const cmf_tensor *t = cmf_file_find(f, name);
    CHECK_MSG(t && t->dtype == CMF_DT_F32 && t->shape[1] == cols, "%s", name);
    float *w = malloc(t->nbytes);
    memcpy(w, t->data, t->nbytes);
    for (uint64_t r = 0; r < t->shape[0]; r++)
        for (uint64_t c = 0; c < cols; c++)
            if (zero[c]) w[r * cols + c] = 0.0f;
    uint64_t shape[2] = {t->shape[0], t->shape[1]};
    size_t nb = t->nbytes;
    cmf_close(f);
    cmf_appender *a = NULL;
    CHECK(cmf_append_begin(path, &a, &err) == CMF_OK);
    CHECK_MSG(cmf_append_add_tensor(a, name, CMF_DT_F32, 2, shape, w, nb, 1, &err) == CMF_OK, "%s",
              err.msg);
    CHECK(cmf_append_commit(a, &err) == CMF_OK);
    cmf_append_free(a);
    free(w);
}

static void copy_file(const char *from, const char *to) {
    FILE *a = fopen(from, "rb"), *b = fopen(to, "wb");
    CHECK(a && b);
    char buf[65536];
    size_t n;
    while (a && b && (n = fread(buf, 1, sizeof buf, a)) > 0)
        CHECK(fwrite(buf, 1, n, b) == n);
    if (a) fclose(a);
    if (b) fclose(b);
}

/* The reference file of mask k: base with the zeros the mask means. */
static void make_reference(const char *base, const spec_mask *k, const char *out) {
    copy_file(base, out);
    for (int l = 0; l < L_; l++) {
        uint8_t zf[FFN_], zh[HEADS * HD];
        int off = !((k->gates[0] >> l) & 1);
        for (int i = 0; i < FFN_; i++)
            zf[i] = off || !((k->ffn[l][i / 8] >> (i % 8)) & 1);
        for (int i = 0; i < HEADS * HD; i++)
            zh[i] = off || !((k->heads[l][0] >> (i / HD)) & 1);
        char name[128];
        snprintf(name, sizeof name, "model.layers.%d.mlp.down_proj.weight", l);
        zero_cols(out, name, zf, FFN_);
        snprintf(name, sizeof name, "model.layers.%d.self_attn.o_proj.weight", l);
        zero_cols(out, name, zh, HEADS * HD);
    }
}

/* Logits [n][V] of the tokens through `path` with task `task` (NULL: dense). */
static float *run(const char *path, const char *task, int no_gather, cortiq_act_mode act,
                  const int32_t *tok, size_t n, int one_by_one, uint32_t *V,
                  cortiq_task_stats *st) {
    cortiq_load_opts lo = {.threads = 2, .kv = CORTIQ_KV_F32, .act = act};
    cortiq_model *m = NULL;
    cmf_err err;
    CHECK_MSG(cortiq_model_load(path, &lo, &m, &err) == CMF_OK, "%s", err.msg);
    if (!m) return NULL;
    *V = cortiq_model_vocab(m);
    cortiq_session *s = NULL;
    CHECK(cortiq_session_create(m, 64, &s, &err) == CMF_OK);
    CHECK_MSG(cq_session_set_task(s, task, no_gather, &err) == CMF_OK, "%s", err.msg);
    if (st) cortiq_session_task_stats(s, st);
    float *lg = malloc(n * (size_t)*V * sizeof(float));
    if (one_by_one)
        for (size_t i = 0; i < n; i++) {
            CHECK(cortiq_session_eval(s, &tok[i], 1, NULL, &err) == CMF_OK);
            memcpy(lg + i * *V, cortiq_session_logits(s), *V * sizeof(float));
        }
    else
        CHECK(cortiq_session_eval(s, tok, n, lg, &err) == CMF_OK);
    cortiq_session_free(s);
    cortiq_model_free(m);
    return lg;
}

static double max_diff(const float *a, const float *b, size_t n, double *scale) {
    double d = 0, s = 0;
    for (size_t i = 0; i < n; i++) {
        double e = a[i] - b[i];
        if (e < 0) e = -e;
        if (e > d) d = e;
        if ((a[i] < 0 ? -a[i] : a[i]) > s) s = a[i] < 0 ? -a[i] : a[i];
    }
    *scale = s;
    return d;
}

static void expect_close(const char *what, const float *a, const float *b, size_t n, double rel) {
    double s, d = max_diff(a, b, n, &s);
    CHECK_MSG(d <= rel * (s > 1 ? s : 1), "%s: max |diff| %.3g (scale %.3g)", what, d, s);
}

static void test_f32_reference(const char *base, const int32_t *tok, size_t n) {
    for (int i = 0; i < N_MASKS; i++) {
        const spec_mask *k = &k_masks[i];
        const char *ref = "task_mask_ref.cmf";
        make_reference(base, k, ref);
        uint32_t V;
        float *want = run(ref, NULL, 0, CORTIQ_ACT_F32, tok, n, 0, &V, NULL);
        for (int obo = 0; obo < 2; obo++) {
            cortiq_task_stats st;
            float *got = run(base, k->name, 0, CORTIQ_ACT_F32, tok, n, obo, &V, &st);
            float *dense0 = run(base, k->name, 1, CORTIQ_ACT_F32, tok, n, obo, &V, NULL);
            char what[96];
            snprintf(what, sizeof what, "f32 %s gathered (%s)", k->name, obo ? "decode" : "batch");
            expect_close(what, got, want, n * V, 2e-5);
            snprintf(what, sizeof what, "f32 %s zeroed (%s)", k->name, obo ? "decode" : "batch");
            expect_close(what, dense0, want, n * V, 2e-5);
            /* f32 weights gather by the neuron: nothing is computed beyond the padding to 32 */
            CHECK_MSG(st.dense_layers == 0 && st.gathered_bytes > 0, "%s", k->name);
            CHECK(st.ffn_computed < st.ffn_neurons || st.ffn_active == st.ffn_neurons);
            CHECK(st.ffn_computed - st.ffn_active < 32 * (uint64_t)st.layers_on);
            free(got), free(dense0);
        }
        free(want);
        remove(ref);
    }
}

/* A quantized file: the gathered path against the dense-with-zeros path, f32 activations. */
static void test_quant(const char *quant, const int32_t *tok, size_t n) {
    char path[64];
    snprintf(path, sizeof path, "task_mask_%s.cmf", quant);
    size_t nt;
    int32_t *t2 = tiny_convert("llama", quant, path, &nt);
    free(t2);
    append_masks(path);
    for (int i = 0; i < N_MASKS; i++) {
        uint32_t V;
        cortiq_task_stats st;
        float *got = run(path, k_masks[i].name, 0, CORTIQ_ACT_F32, tok, n, 0, &V, &st);
        float *want = run(path, k_masks[i].name, 1, CORTIQ_ACT_F32, tok, n, 0, &V, NULL);
        char what[96];
        snprintf(what, sizeof what, "%s %s", quant, k_masks[i].name);
        expect_close(what, got, want, n * V, 5e-5);
        if (!strcmp(quant, "vbit")) /* no exact gather: dense with the zeros, and said so */
            CHECK(st.dense_layers > 0 && st.ffn_computed == st.ffn_neurons);
        else if (!strcmp(k_masks[i].name, "blocks")) /* whole groups: the active neurons */
            CHECK_MSG(st.ffn_computed == st.ffn_active, "%s blocks: %llu computed, %llu active",
                      quant, (unsigned long long)st.ffn_computed,
                      (unsigned long long)st.ffn_active);
        free(got), free(want);
        /* default activations (int8 for the decode kernels and the prefill GEMM): the gathered
         * down projection quantizes other 32-value groups of g, so only close */
        got = run(path, k_masks[i].name, 0, CORTIQ_ACT_DEFAULT, tok, n, i & 1, &V, NULL);
        want = run(path, k_masks[i].name, 1, CORTIQ_ACT_DEFAULT, tok, n, i & 1, &V, NULL);
        snprintf(what, sizeof what, "%s %s int8 activations", quant, k_masks[i].name);
        expect_close(what, got, want, n * V, 3e-2);
        free(got), free(want);
    }
    remove(path);
}

static void test_selection(const char *base) {
    cortiq_model *m = NULL;
    cmf_err err;
    cortiq_load_opts lo = {.threads = 1};
    CHECK(cortiq_model_load(base, &lo, &m, &err) == CMF_OK);
    CHECK(m && cortiq_model_default_task(m) && !strcmp(cortiq_model_default_task(m), "heads"));
    cortiq_session *s = NULL;
    CHECK(cortiq_session_create(m, 16, &s, &err) == CMF_OK);
    CHECK(cortiq_session_set_task(s, "nope", &err) == CMF_E_NOT_FOUND);
    CHECK_MSG(strstr(err.msg, "half, heads, gated, blocks, kvoff") && strstr(err.msg, "'none'"),
              "%s", err.msg);
    CHECK(cortiq_session_task(s) == NULL);
    CHECK(cortiq_session_set_task(s, "gated", &err) == CMF_OK);
    CHECK(!strcmp(cortiq_session_task(s), "gated"));
    int32_t t = 5;
    CHECK(cortiq_session_eval(s, &t, 1, NULL, &err) == CMF_OK);
    CHECK(cortiq_session_set_task(s, "half", &err) == CMF_E_INVALID_ARG);
    cortiq_session_reset(s);
    /* f32 weights gather: q holds the active heads alone, each mapped to its kv head */
    CHECK(cortiq_session_set_task(s, "kvoff", &err) == CMF_OK);
    const cq_layer_task *y0 = s->task ? &s->task->layers[0] : NULL, *y1 = y0 ? y0 + 1 : NULL;
    CHECK(y0 && y0->q_packed && y0->wo_packed && y0->n_heads_on == 2 && y0->wq.rows == 2 * HD);
    CHECK(y0 && y0->kv_first[0] == 0 && y0->kv_first[1] == 0 && y0->kv_first[2] == 2);
    CHECK(y1 && y1->q_packed && y1->n_heads_on == 1 && y1->kv_first[1] == 1 &&
          y1->kv_first[2] == 1);
    CHECK(cortiq_session_set_task(s, "none", &err) == CMF_OK);
    CHECK(cortiq_session_task(s) == NULL);
    cortiq_task_stats st;
    cortiq_session_task_stats(s, &st);
    CHECK(st.layers == 0);
    cortiq_session_free(s);
    cortiq_model_free(m);
}

/* The expert area (spec §5): a restricted layer's row becomes expert_allow[l] (the routing's
 * input, honoured by moe.c); an all-ones row and a mask without the area leave it NULL. */
static void test_expert_area(void) {
    const char *path = "task_mask_moe.cmf";
    size_t n;
    int32_t *tok = tiny_convert("qwen2_moe", "f32", path, &n);
    if (!tok) return;
    free(tok);
    cmf_err err;
    cmf_masks_builder *b = NULL;
    CHECK(cmf_masks_builder_create(L_, FFN_, HEADS, 4, &b, &err) == CMF_OK);
    uint8_t ffn[L_][FFN_ / 8], heads[L_] = {0x0F, 0x0F}, gates = 0x03;
    uint8_t experts[L_] = {0x05, 0x0F}; /* layer 0: experts 0 and 2; layer 1: all */
    memset(ffn, 0xFF, sizeof ffn);
    CHECK(cmf_masks_builder_add(b, "exp", NULL, &ffn[0][0], heads, &gates, experts, NULL, &err) ==
          CMF_OK);
    CHECK(cmf_masks_builder_add(b, "plain", NULL, &ffn[0][0], heads, &gates, NULL, NULL, &err) ==
          CMF_OK);
    uint8_t *bytes = NULL;
    size_t len = 0;
    CHECK(cmf_masks_builder_build(b, &bytes, &len, &err) == CMF_OK);
    cmf_masks_builder_free(b);
    cmf_appender *a = NULL;
    CHECK(cmf_append_begin(path, &a, &err) == CMF_OK);
    CHECK(cmf_append_set_masks(a, bytes, len, &err) == CMF_OK);
    CHECK(cmf_append_commit(a, &err) == CMF_OK);
    cmf_append_free(a);
    free(bytes);
    cortiq_load_opts lo = {.threads = 1};
    cortiq_model *m = NULL;
    CHECK_MSG(cortiq_model_load(path, &lo, &m, &err) == CMF_OK, "%s", err.msg);
    cortiq_session *s = NULL;
    if (m) CHECK(cortiq_session_create(m, 16, &s, &err) == CMF_OK);
    if (s) {
        CHECK(cortiq_session_set_task(s, "exp", &err) == CMF_OK);
        CHECK(s->expert_allow && s->expert_allow[0] && s->expert_allow[0][0] == 0x05 &&
              !s->expert_allow[1]);
        int32_t t = 3;
        CHECK(cortiq_session_eval(s, &t, 1, NULL, &err) == CMF_OK);
        cortiq_session_reset(s);
        CHECK(cortiq_session_set_task(s, "plain", &err) == CMF_OK);
        CHECK(s->expert_allow == NULL);
        CHECK(cortiq_session_set_task(s, "none", &err) == CMF_OK && s->expert_allow == NULL);
    }
    cortiq_session_free(s);
    cortiq_model_free(m);
    remove(path);
}

/* A family with a q bias (qwen2) or per-head q norms (qwen3), f32: the packed q path against
 * the dense-with-zeros path, batch and decode. */
static void test_family(const char *fam, const int32_t *tok, size_t n) {
    char path[64];
    snprintf(path, sizeof path, "task_mask_%s.cmf", fam);
    size_t nt;
    int32_t *t2 = tiny_convert(fam, "f32", path, &nt);
    free(t2);
    append_masks(path);
    for (int i = 0; i < N_MASKS; i++)
        for (int obo = 0; obo < 2; obo++) {
            uint32_t V;
            float *got = run(path, k_masks[i].name, 0, CORTIQ_ACT_F32, tok, n, obo, &V, NULL);
            float *want = run(path, k_masks[i].name, 1, CORTIQ_ACT_F32, tok, n, obo, &V, NULL);
            char what[96];
            snprintf(what, sizeof what, "%s %s (%s)", fam, k_masks[i].name,
                     obo ? "decode" : "batch");
            expect_close(what, got, want, n * V, 2e-5);
            free(got), free(want);
        }
    remove(path);
}

int main(void) {
    make_masks();
    const char *base = "task_mask_f32.cmf";
    size_t n;
    int32_t *tok = tiny_convert("llama", "f32", base, &n);
    if (!tok) TEST_DONE();
    if (n > 24) n = 24;
    append_masks(base);
    test_selection(base);
    test_f32_reference(base, tok, n);
    test_quant("q8", tok, n);
    test_quant("q4", tok, n);
    test_quant("q4t", tok, n);
    test_quant("q4tp", tok, n);
    test_quant("vbit", tok, n);
    test_family("qwen2", tok, n);
    test_family("qwen3", tok, n);
    test_expert_area();
    free(tok);
    remove(base);
    TEST_DONE();
}
