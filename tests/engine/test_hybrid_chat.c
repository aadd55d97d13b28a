/* Chat prefix reuse on a hybrid model (Gated DeltaNet state + KV cache) through the runtime:
 * cortiq_generate truncates its session to the prompt's common prefix with the history, and a
 * recurrent state returns to a checkpoint at or below it (docs/HYBRID.md). Every greedy reply
 * must equal the one a fresh runtime gives for the same prompt, and the reused prefix must be
 * the checkpoint's: a second turn diverging inside the first reply resumes from the first
 * prompt's last token, the same prompt again from its own last token. */
#include "common/test.h"
#include "cortiq/runtime.h"
#include "engine/tiny_fixture.h"

static char *reply_of(cortiq_runtime *rt, const int32_t *prompt, size_t n, size_t *cached) {
    cortiq_generate_params p;
    cortiq_generate_defaults(&p);
    p.sampler.temperature = 0; /* greedy */
    p.max_tokens = 6;
    char *reply = NULL;
    cortiq_generate_stats st;
    cmf_err err;
    CHECK_MSG(cortiq_generate(rt, prompt, n, &p, NULL, NULL, &reply, &st, &err) == CMF_OK, "%s",
              err.msg);
    *cached = st.cached_tokens;
    return reply;
}

static char *fresh_reply(const char *path, const cortiq_runtime_opts *o, const int32_t *prompt,
                         size_t n) {
    cortiq_runtime *rt = NULL;
    cmf_err err;
    CHECK_MSG(cortiq_runtime_open(path, o, &rt, &err) == CMF_OK, "%s", err.msg);
    size_t cached = 0;
    char *r = rt ? reply_of(rt, prompt, n, &cached) : NULL;
    cortiq_runtime_free(rt);
    return r;
}

int main(void) {
    const char *path = "hybrid_chat.cmf";
    size_t n = 0;
    int32_t *tokens = tiny_convert("qwen3_5_text", "f32", path, &n);
    if (!tokens || n < 40) return 1;
    cortiq_runtime_opts o = {.threads = 2, .ctx = 128, .kv = CORTIQ_KV_F32, .act = CORTIQ_ACT_F32};
    cortiq_runtime *rt = NULL;
    cmf_err err;
    CHECK_MSG(cortiq_runtime_open(path, &o, &rt, &err) == CMF_OK, "%s", err.msg);
    if (rt) {
        size_t c1 = 0, c2 = 0, c3 = 0;
        char *r1 = reply_of(rt, tokens, 20, &c1);
        /* the next turn shares the first 20 tokens, then differs from the reply */
        char *r2 = reply_of(rt, tokens, 40, &c2);
        char *r3 = reply_of(rt, tokens, 40, &c3); /* the same prompt again */
        char *f1 = fresh_reply(path, &o, tokens, 20), *f2 = fresh_reply(path, &o, tokens, 40);
        CHECK(r1 && r2 && r3 && f1 && f2);
        if (r1 && r2 && r3 && f1 && f2) {
            CHECK_MSG(!strcmp(r1, f1), "turn 1 differs from a fresh runtime");
            CHECK_MSG(!strcmp(r2, f2), "turn 2 (prefix reused) differs from a fresh runtime");
            CHECK_MSG(!strcmp(r3, f2), "the same prompt again differs from a fresh runtime");
        }
        printf("cached prefixes: %zu, %zu, %zu\n", c1, c2, c3);
        CHECK_MSG(c1 == 0 && c2 == 19 && c3 == 39,
                  "reused prefixes %zu, %zu, %zu: expected 0, 19 (turn 1's last prompt token), "
                  "39 (turn 2's)",
                  c1, c2, c3);
        free(r1), free(r2), free(r3), free(f1), free(f2);
    }
    cortiq_runtime_free(rt);
    free(tokens);
    remove(path);
    TEST_DONE();
}
