/* cortiq_session_eval_hidden: the final hidden states it returns are the output head's input.
 * On the tiny llama and qwen3 checkpoints converted at f32, over 192 tokens (the 64 of
 * tokens.npy three times: two prefill chunks of CQ_BATCH and a partial one), each row times the
 * head's matrix gives cortiq_session_eval's logits of that position within 1e-5 of the largest
 * logit (only the summation order differs); the logits it leaves in the session are exactly
 * eval's last row; the position advances by n; a NULL output is refused. */
#include <math.h>

#include "cortiq/format.h"
#include "test.h"
#include "tiny_fixture.h"

#define N 192

static void run(const char *fam) {
    char out[128];
    snprintf(out, sizeof out, "hidden_%s.cmf", fam);
    size_t nt = 0;
    int32_t *t64 = tiny_convert(fam, "f32", out, &nt);
    if (!t64 || nt != 64) return;
    int32_t tokens[N];
    for (size_t i = 0; i < N; i++)
        tokens[i] = t64[i % 64];
    free(t64);
    cortiq_model *m = NULL;
    cmf_err err;
    cortiq_load_opts lo = {.threads = 2, .kv = CORTIQ_KV_F32, .act = CORTIQ_ACT_F32};
    CHECK_MSG(cortiq_model_load(out, &lo, &m, &err) == CMF_OK, "%s", err.msg);
    if (!m) return;
    uint32_t V = cortiq_model_vocab(m), H = cortiq_model_hidden(m);
    const cmf_file *f = cortiq_model_file(m);
    const cmf_tensor *head = cmf_file_find(f, "lm_head.weight");
    if (!head) head = cmf_file_find(f, "model.embed_tokens.weight"); /* tied */
    CHECK(head && head->dtype == CMF_DT_F32 && head->shape[0] == V && head->shape[1] == H);
    cortiq_session *a = NULL, *b = NULL;
    CHECK(cortiq_session_create(m, 256, &a, &err) == CMF_OK);
    CHECK(cortiq_session_create(m, 256, &b, &err) == CMF_OK);
    float *logits = malloc((size_t)N * V * sizeof(float));
    float *hidden = malloc((size_t)N * H * sizeof(float));
    if (!a || !b || !head || !logits || !hidden) goto out;
    CHECK(cortiq_session_eval(a, tokens, N, logits, &err) == CMF_OK);
    CHECK_STATUS(cortiq_session_eval_hidden(b, tokens, N, NULL, &err), CMF_E_INVALID_ARG);
    CHECK(cortiq_session_pos(b) == 0);
    CHECK_MSG(cortiq_session_eval_hidden(b, tokens, N, hidden, &err) == CMF_OK, "%s", err.msg);
    CHECK(cortiq_session_pos(b) == N);
    CHECK_MSG(!memcmp(cortiq_session_logits(b), logits + (size_t)(N - 1) * V, V * sizeof(float)),
              "%s: the session's logits differ from eval's last row", fam);
    const float *w = (const float *)head->data;
    double worst = 0, top = 0;
    for (size_t i = 0; i < (size_t)N * V; i++)
        top = fmax(top, fabs(logits[i]));
    for (size_t t = 0; t < N; t++)
        for (uint32_t v = 0; v < V; v++) {
            double dot = 0;
            for (uint32_t k = 0; k < H; k++)
                dot += (double)hidden[t * H + k] * w[(size_t)v * H + k];
            worst = fmax(worst, fabs(dot - logits[t * V + v]));
        }
    CHECK_MSG(worst <= 1e-5 * top, "%s: hidden x head vs logits %.3g (max logit %.3g)", fam, worst,
              top);
    printf("%s: hidden x head vs logits max %.3g (max logit %.3g)\n", fam, worst, top);
out:
    free(logits);
    free(hidden);
    cortiq_session_free(a);
    cortiq_session_free(b);
    cortiq_model_free(m);
    remove(out);
}

int main(void) {
    run("llama");
    run("qwen3");
    TEST_DONE();
}
