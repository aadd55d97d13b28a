/* Runtime parity with transformers on tiny random checkpoints of every dense family
 * (tests/fixtures/tiny, made by tools/make_tiny_checkpoints.py): the f32 CMF's logits over a
 * 64-token sequence within 1e-4 (max |diff| / max |logit|) of transformers', and the first 32
 * greedy tokens identical; the same at f16 and bf16 against transformers running the same
 * rounded weights; prefill in one batch and token by token agree. The KV cache is pinned to f32
 * here (test_kv_tiny checks the f16 and q8 caches against it), and so are the activations of the
 * bf16 files (CORTIQ_ACT_F32). Their default mode, whose batches round the activations to bf16
 * where the CPU has AVX-512 BF16 (CMF_KF_BF16_ACT), is held to that rounding's bound instead:
 * 2e-2 of the largest logit, batch and token by token alike. */
#include <math.h>

#include "cortiq/converter.h"
#include "cortiq/engine.h"
#include "logits_cmp.h"
#include "npy.h"
#include "test.h"

#define TINY CORTIQ_SOURCE_DIR "/tests/fixtures/tiny/"

static void run_family(const char *fam, const char *quant, double tol, cortiq_act_mode act) {
    const bool exact = tol <= 1e-4; /* else bf16 activations: no bit-level or greedy checks */
    char dir[512], path[600], out[256];
    snprintf(dir, sizeof dir, TINY "%s", fam);
    snprintf(out, sizeof out, "parity_%s_%s.cmf", fam, quant);
    cmf_convert_opts o;
    cmf_convert_opts_default(&o);
    CHECK(cmf_convert_quant_from_name(quant, &o.quant));
    cmf_err err;
    CHECK_MSG(cmf_convert_hf(dir, out, NULL, &o, NULL, &err) == CMF_OK, "%s", err.msg);
    size_t nt = 0, nl = 0, ng = 0;
    char dt;
    snprintf(path, sizeof path, "%s/tokens.npy", dir);
    int32_t *tokens = npy_load(path, &nt, &dt);
    const char *sfx = strcmp(quant, "f32") ? quant : "";
    snprintf(path, sizeof path, "%s/logits%s%s.npy", dir, *sfx ? "_" : "", sfx);
    float *ref = npy_load(path, &nl, &dt);
    snprintf(path, sizeof path, "%s/greedy%s%s.npy", dir, *sfx ? "_" : "", sfx);
    int32_t *greedy = npy_load(path, &ng, &dt);
    CHECK(tokens && ref && greedy && nt == 64 && ng == 32);
    if (!tokens || !ref || !greedy) return;
    cortiq_model *m = NULL;
    cortiq_load_opts lo = {.threads = 2,
                           .kv = CORTIQ_KV_F32, /* exact cache: the 1e-4 bound is on weights */
                           .act = act};
    CHECK_MSG(cortiq_model_load(out, &lo, &m, &err) == CMF_OK, "%s", err.msg);
    if (!m) return;
    uint32_t V = cortiq_model_vocab(m);
    CHECK(nl == 64 * (size_t)V);
    cortiq_session *s;
    CHECK(cortiq_session_create(m, 128, &s, &err) == CMF_OK);
    float *logits = malloc(64 * (size_t)V * sizeof(float));
    CHECK(cortiq_session_eval(s, tokens, 64, logits, &err) == CMF_OK);
    double rel = max_rel_diff(logits, ref, 64 * (size_t)V);
    if (tol > 0)
        CHECK_MSG(rel <= tol, "%s %s: logits max relative difference %.3g > %.0e", fam, quant, rel,
                  tol);
    const char *mode = exact ? "" : " (bf16 act)";
    printf("%-12s %-5s logits max rel diff %.3g%s\n", fam, quant, rel, mode);
    /* token by token gives the same last logits as the batch */
    cortiq_session_reset(s);
    for (int i = 0; i < 64; i++)
        CHECK(cortiq_session_eval(s, &tokens[i], 1, NULL, &err) == CMF_OK);
    double tbt = max_rel_diff(cortiq_session_logits(s), logits + 63 * (size_t)V, V);
    printf("%-12s %-5s batch vs token by token %.3g%s\n", fam, quant, tbt, mode);
    CHECK_MSG(tbt < (exact ? 1e-5 : tol), "%s %s%s: batch vs token by token %.3g", fam, quant, mode,
              tbt);
    if (!exact) goto done;
    /* greedy continuation of the first 8 tokens */
    cortiq_session_reset(s);
    CHECK(cortiq_session_eval(s, tokens, 8, NULL, &err) == CMF_OK);
    int same = 0;
    for (int i = 0; i < 32; i++) {
        int32_t t = cortiq_argmax(cortiq_session_logits(s), V);
        if (t == greedy[i])
            same++;
        else if (same == i)
            printf("%s %s: greedy diverges at %d: %d vs %d\n", fam, quant, i, t, greedy[i]);
        CHECK(cortiq_session_eval(s, &t, 1, NULL, &err) == CMF_OK);
    }
    CHECK_MSG(same == 32, "%s %s: %d/32 greedy tokens equal", fam, quant, same);
done:
    free(logits);
    cortiq_session_free(s);
    cortiq_model_free(m);
    free(tokens);
    free(ref);
    free(greedy);
}

int main(void) {
    const char *fams[] = {"llama", "llama_yarn", "llama_rope3", "mistral",
                          "qwen2", "qwen3",      "gemma3_text"};
    const char *quants[] = {"f32", "f16", "bf16"};
    for (size_t i = 0; i < sizeof fams / sizeof fams[0]; i++)
        for (size_t q = 0; q < 3; q++) {
            bool bf16 = !strcmp(quants[q], "bf16");
            run_family(fams[i], quants[q], 1e-4, bf16 ? CORTIQ_ACT_F32 : CORTIQ_ACT_DEFAULT);
            if (bf16) run_family(fams[i], quants[q], 2e-2, CORTIQ_ACT_DEFAULT);
        }
    TEST_DONE();
}
