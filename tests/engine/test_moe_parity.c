/* Mixture-of-experts parity with transformers (spec §2.2) on the tiny MoE checkpoints of
 * tests/fixtures/tiny, references from tools/make_moe_references.py:
 *  - qwen2_moe: softmax routing without renormalisation, a shared expert with its sigmoid gate;
 *  - qwen3_moe: softmax routing renormalised over the top-k (norm_topk_prob), no shared expert;
 *  - qwen2_moe_mixed: layer 0 dense, layer 1 MoE (the router's presence decides, per layer);
 *  - qwen3_moe with a sigmoid router (router_sigmoid, expert_bias for selection only,
 *    norm_topk_prob, routed_scaling_factor 2.5): the converted file plus those header fields
 *    and bias tensors, against transformers' Qwen3-MoE with that router put in.
 * Converted at f32 (and at bf16, exact for the bf16 checkpoints; f32 activations, which bf16
 * weights otherwise round to bf16 in a batch, CMF_KF_BF16_ACT): logits over 64 tokens within
 * 1e-4 (max |diff| / max |logit|) of transformers, 32 greedy tokens identical, and prefill in
 * one batch (tokens grouped by expert) equal to token by token. */
#include "common/f16.h"
#include "common/test.h"
#include "cortiq/engine.h"
#include "engine/logits_cmp.h"
#include "engine/moe_rewrite.h"
#include "engine/tiny_fixture.h"

static void run(const char *fam, const char *quant) {
    char out[128], path[600];
    snprintf(out, sizeof out, "moe_parity_%s_%s.cmf", fam, quant);
    size_t nt = 0, nl = 0, ng = 0;
    char dt;
    int32_t *tokens = tiny_convert(fam, quant, out, &nt);
    snprintf(path, sizeof path, TINY "%s/logits.npy", fam);
    float *ref = npy_load(path, &nl, &dt);
    snprintf(path, sizeof path, TINY "%s/greedy.npy", fam);
    int32_t *greedy = npy_load(path, &ng, &dt);
    CHECK(tokens && ref && greedy && nt == 64 && ng == 32);
    if (!tokens || !ref || !greedy) return;
    cortiq_load_opts lo = {.threads = 2, .kv = CORTIQ_KV_F32, .act = CORTIQ_ACT_F32};
    uint32_t V = 0;
    float *batch = tiny_logits(out, &lo, 128, tokens, 64, 0, &V);
    float *tbt = tiny_logits(out, &lo, 128, tokens, 64, 1, &V);
    CHECK(batch && tbt && nl == 64 * (size_t)V);
    if (!batch || !tbt || nl != 64 * (size_t)V) return;
    double rel = max_rel_diff(batch, ref, nl), bt = max_rel_diff(tbt, batch, nl);
    printf("%-16s %-5s logits vs transformers %.3g, batch vs token by token %.3g\n", fam, quant,
           rel, bt);
    CHECK_MSG(rel <= 1e-4, "%s %s: logits max relative difference %.3g > 1e-4", fam, quant, rel);
    CHECK_MSG(bt <= 1e-5, "%s %s: batch vs token by token %.3g > 1e-5", fam, quant, bt);
    /* greedy continuation of the first 8 tokens */
    cortiq_model *m = NULL;
    cortiq_session *s = NULL;
    cmf_err err;
    CHECK(cortiq_model_load(out, &lo, &m, &err) == CMF_OK);
    CHECK(m && cortiq_session_create(m, 128, &s, &err) == CMF_OK);
    if (s) {
        CHECK(cortiq_session_eval(s, tokens, 8, NULL, &err) == CMF_OK);
        int same = 0;
        for (int i = 0; i < 32; i++) {
            int32_t t = cortiq_argmax(cortiq_session_logits(s), V);
            same += t == greedy[i];
            CHECK(cortiq_session_eval(s, &t, 1, NULL, &err) == CMF_OK);
        }
        CHECK_MSG(same == 32, "%s %s: %d/32 greedy tokens equal", fam, quant, same);
    }
    cortiq_session_free(s);
    cortiq_model_free(m);
    free(batch), free(tbt), free(tokens), free(ref), free(greedy);
}

/* Logits of `path` over 64 tokens against ref; greedy continuation of the first 8 against
 * greedy (NULL: not checked). Returns the relative difference. */
static double compare(const char *path, const int32_t *tokens, const float *ref,
                      const int32_t *greedy) {
    cortiq_load_opts lo = {.threads = 2, .kv = CORTIQ_KV_F32};
    uint32_t V = 0;
    float *l = tiny_logits(path, &lo, 128, tokens, 64, 0, &V);
    double rel = l ? max_rel_diff(l, ref, 64 * (size_t)V) : 1;
    free(l);
    cortiq_model *m = NULL;
    cortiq_session *s = NULL;
    cmf_err err;
    if (greedy && cortiq_model_load(path, &lo, &m, &err) == CMF_OK &&
        cortiq_session_create(m, 128, &s, &err) == CMF_OK) {
        CHECK(cortiq_session_eval(s, tokens, 8, NULL, &err) == CMF_OK);
        int same = 0;
        for (int i = 0; i < 32; i++) {
            int32_t t = cortiq_argmax(cortiq_session_logits(s), V);
            same += t == greedy[i];
            CHECK(cortiq_session_eval(s, &t, 1, NULL, &err) == CMF_OK);
        }
        CHECK_MSG(same == 32, "%s: %d/32 greedy tokens equal", path, same);
    }
    cortiq_session_free(s);
    cortiq_model_free(m);
    return rel;
}

static void run_sigmoid(void) {
    size_t nt = 0, nl = 0, ng = 0;
    char dt;
    int32_t *tokens = tiny_convert("qwen3_moe", "f32", "moe_sigmoid_base.cmf", &nt);
    float *ref = npy_load(TINY "qwen3_moe/logits_sigmoid.npy", &nl, &dt);
    int32_t *greedy = npy_load(TINY "qwen3_moe/greedy_sigmoid.npy", &ng, &dt);
    CHECK(tokens && ref && greedy && ng == 32);
    if (!tokens || !ref || !greedy) return;
    CHECK(moe_write_sigmoid("moe_sigmoid_base.cmf", "moe_sigmoid.cmf", true));
    CHECK(moe_write_sigmoid("moe_sigmoid_base.cmf", "moe_sigmoid_nobias.cmf", false));
    double rel = compare("moe_sigmoid.cmf", tokens, ref, greedy);
    double nobias = compare("moe_sigmoid_nobias.cmf", tokens, ref, NULL);
    printf("%-16s %-5s logits vs transformers %.3g (without the bias: %.3g)\n", "qwen3_moe_sigmoid",
           "f32", rel, nobias);
    CHECK_MSG(rel <= 1e-4, "sigmoid router: logits max relative difference %.3g > 1e-4", rel);
    CHECK_MSG(nobias > 1e-3, "the expert bias changed no selection (%.3g)", nobias);
    free(tokens), free(ref), free(greedy);
}

int main(void) {
    run("qwen2_moe", "f32");
    run("qwen2_moe", "bf16");
    run("qwen3_moe", "f32");
    run("qwen3_moe", "bf16");
    run("qwen2_moe_mixed", "f32");
    run_sigmoid();
    TEST_DONE();
}
