/* Acceptance on real models (SmolLM2-135M-Instruct, Gemma 3 270M; fetched once into the model
 * cache by scripts/fetch-models): `cortiq import-gguf --quant f32` gives the same weights
 * transformers dequantizes from the GGUF; then for each fixed chat prompt the rendered,
 * tokenized prompt equals transformers' apply_chat_template ids, the first 32 greedy tokens are
 * identical, and `ppl` is within 1 % of transformers' perplexity (tools/make_chat_refs.py
 * wrote the references in tests/fixtures/real/). */
#include <jansson.h>
#include <math.h>
#include <sys/stat.h>

#include "common/hugepages.h"
#include "cortiq/runtime.h"
#include "engine/model.h"
#include "maps.h"
#include "model_cache.h"
#include "test.h"

static void run_model(const char *name, const char *gguf_name, const char *template_file) {
    char cache[512], gguf[1024], cmf[256], cmd[2400], ref_path[512];
    cache_dir(cache, sizeof cache);
    snprintf(gguf, sizeof gguf, "%s/%s", cache, gguf_name);
    if (!file_exists(gguf)) {
        snprintf(cmd, sizeof cmd, "bash %s/scripts/fetch-models", CORTIQ_SOURCE_DIR);
        CHECK_MSG(system(cmd) == 0, "fetch-models failed");
    }
    CHECK_MSG(file_exists(gguf), "%s missing", gguf);
    snprintf(cmf, sizeof cmf, "real_%s_f32.cmf", name);
    const char *bin = getenv("CORTIQ_BIN");
    if (template_file) /* the GGUF carries no template: give it the one the reference used */
        snprintf(cmd, sizeof cmd,
                 "%s import-gguf %s --quant f32 -o %s -q --chat-template %s/tests/fixtures/real/%s",
                 bin ? bin : "cortiq", gguf, cmf, CORTIQ_SOURCE_DIR, template_file);
    else
        snprintf(cmd, sizeof cmd, "%s import-gguf %s --quant f32 -o %s -q", bin ? bin : "cortiq",
                 gguf, cmf);
    CHECK_MSG(system(cmd) == 0, "%s", cmd);
    snprintf(ref_path, sizeof ref_path, CORTIQ_SOURCE_DIR "/tests/fixtures/real/%s.json", name);
    json_t *ref = json_load_file(ref_path, 0, NULL);
    CHECK_MSG(ref != NULL, "cannot read %s", ref_path);
    cortiq_runtime *rt = NULL;
    cmf_err err;
    cortiq_runtime_opts ro = {.threads = 2, .ctx = 512};
    CHECK_MSG(cortiq_runtime_open(cmf, &ro, &rt, &err) == CMF_OK, "%s", err.msg);
    if (!rt || !ref) return;
    cortiq_model *model = cortiq_runtime_model(rt);
    if (cq_thp_available()) {
        /* the runtime reads the weights in but leaves them on file pages: an answer never
         * moves them (a move mid-answer slowed every answer measured); cortiq_runtime_idle, the
         * chat's wait for its user, moves them onto 2 MiB pages, and all that follows here runs
         * on them: the middle of layer 0's MLP up matrix is file-backed before, anonymous after */
        const cmf_qmat *wu = &model->layers[0].wu;
        uintptr_t mid = (uintptr_t)wu->data + wu->nbytes / 2, lo, hi;
        bool fb = false;
        uint64_t left = cortiq_model_moves_left(model);
        CHECK_MSG(left > 0, "%s: nothing to move after cortiq_runtime_open", name);
        CHECK(test_mapping_at(mid, &fb, &lo, &hi) && fb);
        cortiq_generate_params gp;
        cortiq_generate_defaults(&gp);
        gp.sampler.temperature = 0;
        gp.max_tokens = 24;
        char *reply = NULL;
        cortiq_generate_stats st;
        CHECK(cortiq_chat_once(rt, NULL, "Tell me about the sea.", &gp, NULL, NULL, &reply, &st,
                               &err) == CMF_OK);
        CHECK(st.generated_tokens > 1);
        free(reply);
        CHECK_MSG(cortiq_model_moves_left(model) == left, "%s: an answer moved weights", name);
        uint64_t moved = cortiq_runtime_idle(rt);
        printf("%s: %llu MiB moved onto 2 MiB pages while idle\n", name,
               (unsigned long long)(moved >> 20));
        CHECK_MSG(cortiq_model_moves_left(model) == 0, "%s: windows left after the idle move",
                  name);
        CHECK(test_mapping_at(mid, &fb, &lo, &hi));
        CHECK_MSG(!fb, "%s: layer 0 mlp.up still on the file mapping", name);
    }
    cortiq_session *s = cortiq_runtime_session(rt);
    uint32_t V = cortiq_model_vocab(cortiq_runtime_model(rt));
    size_t i, prompts_ok = 0, gen_ok = 0, n_cases = json_array_size(json_object_get(ref, "cases"));
    json_t *c;
    json_array_foreach(json_object_get(ref, "cases"), i, c) {
        const char *p = json_string_value(json_object_get(c, "prompt"));
        json_t *msgs = json_pack("[{s:s,s:s}]", "role", "user", "content", p);
        char *mj = json_dumps(msgs, JSON_COMPACT), *rendered = NULL;
        json_decref(msgs);
        int32_t *ids = NULL;
        size_t n = 0;
        CHECK(cortiq_render_chat(rt, mj, true, &rendered, &err) == CMF_OK);
        CHECK(cmf_tokenizer_encode(cortiq_runtime_tokenizer(rt), rendered, strlen(rendered), false,
                                   &ids, &n, &err) == CMF_OK);
        free(mj);
        free(rendered);
        json_t *want = json_object_get(c, "prompt_ids");
        int same_prompt = n == json_array_size(want);
        for (size_t k = 0; same_prompt && k < n; k++)
            same_prompt = ids[k] == json_integer_value(json_array_get(want, k));
        CHECK_MSG(same_prompt, "%s: prompt ids differ from apply_chat_template for '%s'", name, p);
        prompts_ok += same_prompt;
        /* greedy tokens, compared through the reference's eos token if it has one */
        json_t *greedy = json_object_get(c, "greedy");
        cortiq_session_reset(s);
        CHECK(cortiq_session_eval(s, ids, n, NULL, &err) == CMF_OK);
        size_t k = 0, m = json_array_size(greedy);
        for (; k < m && k < 32; k++) {
            int32_t t = cortiq_argmax(cortiq_session_logits(s), V);
            if (t != json_integer_value(json_array_get(greedy, k))) break;
            if (k + 1 < m && cortiq_session_eval(s, &t, 1, NULL, &err) != CMF_OK) break;
        }
        CHECK_MSG(k == m || k == 32, "%s: '%s' greedy diverges at token %zu of %zu", name, p, k, m);
        gen_ok += k == m || k == 32;
        free(ids);
    }
    printf("%s: %zu/%zu prompts tokenized identically, %zu/%zu greedy continuations identical\n",
           name, prompts_ok, n_cases, gen_ok, n_cases);
    CHECK(n_cases >= 10);
    cortiq_runtime_free(rt);
    /* perplexity through the CLI, as a user runs it */
    json_t *pp = json_object_get(ref, "ppl");
    snprintf(cmd, sizeof cmd,
             "%s ppl %s %s/tests/fixtures/real/ppl_text.txt --ctx %lld --stride %lld -t 2",
             bin ? bin : "cortiq", cmf, CORTIQ_SOURCE_DIR,
             (long long)json_integer_value(json_object_get(pp, "ctx")),
             (long long)json_integer_value(json_object_get(pp, "stride")));
    FILE *out = popen(cmd, "r");
    char line[256];
    double got = -1;
    while (out && fgets(line, sizeof line, out))
        if (!strncmp(line, "PPL = ", 6)) got = atof(line + 6);
    if (out) pclose(out);
    double want_ppl = json_real_value(json_object_get(pp, "value"));
    printf("%s: PPL %.4f, transformers %.4f (%.3f %%)\n", name, got, want_ppl,
           100 * fabs(got - want_ppl) / want_ppl);
    CHECK_MSG(fabs(got - want_ppl) <= 0.01 * want_ppl, "%s: PPL %.4f vs transformers %.4f", name,
              got, want_ppl);
    json_decref(ref);
    remove(cmf);
}

int main(void) {
    run_model("smollm2", "smollm2-135m-instruct-q4_1.gguf", NULL);
    char p[512];
    snprintf(p, sizeof p, CORTIQ_SOURCE_DIR "/tests/fixtures/real/gemma3.json");
    CHECK_MSG(file_exists(p), "missing %s", p);
    if (file_exists(p))
        run_model("gemma3", "gemma3-270m-q4_k_m.gguf", "gemma3_chat_template.jinja");
    TEST_DONE();
}
