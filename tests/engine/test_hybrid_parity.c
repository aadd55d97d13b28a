/* Hybrid models (Gated DeltaNet LinearAttention layers + gated full attention) against
 * transformers, on the tiny checkpoints of tests/fixtures/tiny (references from
 * tools/make_hybrid_references.py):
 *  - qwen3_next_dense: Qwen3-Next's fused in_proj_qkvz / in_proj_ba, dense MLPs;
 *  - qwen3_5_text: Qwen3.5's separate in_proj_qkv / z / b / a;
 *  - qwen3_5_moe_text: the same with MoE FFNs (a gated shared expert, the router that always
 *    renormalises its top k);
 *  - qwen3_next: Qwen3-Next with MoE FFNs (bf16 weights, exact at f32).
 * Converted at f32: logits over 64 tokens within 1e-4 (max |diff| / max |logit|) of
 * transformers, 32 greedy tokens identical; the same logits fed token by token and in uneven
 * chunks (the recurrent state carried across evals, a chat continuation); truncation back into
 * a prompt (the state returns to a checkpoint) and re-evaluation give the same logits; a
 * 160-token prefill (crossing the CQ_BATCH chunk boundary) equal to token by token; and the
 * chunked form of the delta rule (gdn_chunk.h) against the recurrence on prompts of 64 and 160
 * tokens (not multiples of CQ_GDN_CHUNK; 160 crosses chunk boundaries): logits, the recurrent
 * state after the prompt and 8 decode steps after it within 1e-4 relative. */
#include "common/test.h"
#include "cortiq/engine.h"
#include "engine/gdn_chunk.h"
#include "engine/logits_cmp.h"
#include "engine/session.h"
#include "engine/tiny_fixture.h"

#define NT 64

/* Logits of tokens fed in evals of the given sizes (summing to NT) on one session. */
static float *chunked(cortiq_model *m, const int32_t *tokens, const size_t *sizes, uint32_t V) {
    cortiq_session *s = NULL;
    cmf_err err;
    float *out = malloc(NT * (size_t)V * sizeof(float));
    CHECK(out && cortiq_session_create(m, 256, &s, &err) == CMF_OK);
    for (size_t done = 0, i = 0; s && out && done < NT; done += sizes[i++])
        CHECK_MSG(cortiq_session_eval(s, tokens + done, sizes[i], out + done * V, &err) == CMF_OK,
                  "%s", err.msg);
    cortiq_session_free(s);
    return out;
}

/* Truncation into a prompt after decode steps: the session rewinds to a checkpoint at or
 * below the position asked for; evaluating from there gives the reference's last logits. */
static void truncate_reuse(cortiq_model *m, const int32_t *tokens, const float *ref, uint32_t V,
                           const char *fam) {
    cortiq_session *s = NULL;
    cmf_err err;
    CHECK(cortiq_session_create(m, 256, &s, &err) == CMF_OK);
    if (!s) return;
    static const uint32_t cuts[] = {45, 39, 20, 0};
    for (size_t c = 0; c < sizeof cuts / sizeof cuts[0]; c++) {
        cortiq_session_reset(s);
        CHECK(cortiq_session_eval(s, tokens, 40, NULL, &err) == CMF_OK); /* a prompt */
        for (int i = 40; i < 50; i++) /* answer tokens, one by one */
            CHECK(cortiq_session_eval(s, &tokens[i], 1, NULL, &err) == CMF_OK);
        cortiq_session_truncate(s, cuts[c]);
        uint32_t p = cortiq_session_pos(s);
        CHECK_MSG(p <= cuts[c], "%s: truncate(%u) left pos %u", fam, cuts[c], p);
        /* the checkpoints of the prompt: its start (0) and its last token (39) */
        uint32_t want = cuts[c] >= 39 ? 39 : 0;
        CHECK_MSG(p == want, "%s: truncate(%u) returned to %u, expected %u", fam, cuts[c], p, want);
        CHECK(cortiq_session_eval(s, tokens + p, NT - p, NULL, &err) == CMF_OK);
        double d = max_rel_diff(cortiq_session_logits(s), ref + (NT - 1) * (size_t)V, V);
        CHECK_MSG(d <= 1e-4, "%s: truncate(%u) then re-eval: last logits off by %.3g", fam, cuts[c],
                  d);
    }
    cortiq_session_free(s);
}

/* The prompt seq[0, n) then 8 decode steps (seq[n, n + 8)) with the delta rule in the chunked
 * form for evals of 2 tokens or more (decode stays recurrent), against the recurrence only. */
static void forms(cortiq_model *m, const int32_t *seq, size_t n, uint32_t V, const char *fam) {
    const size_t nl = (n + 8) * (size_t)V;
    float *lg[2] = {malloc(nl * sizeof(float)), malloc(nl * sizeof(float))};
    float *state[2] = {NULL, NULL};
    size_t floats = 0;
    for (int f = 0; f < 2; f++) {
        setenv("CORTIQ_GDN_CHUNK_MIN", f ? "2" : "1000000", 1);
        cortiq_session *s = NULL;
        cmf_err err;
        CHECK(lg[f] && cortiq_session_create(m, 256, &s, &err) == CMF_OK);
        if (!s || !lg[f]) continue;
        CHECK(cortiq_session_eval(s, seq, n, lg[f], &err) == CMF_OK);
        floats = s->gdn.floats;
        if ((state[f] = malloc(floats * sizeof(float))))
            memcpy(state[f], s->gdn.live, floats * sizeof(float));
        for (size_t i = n; i < n + 8; i++)
            CHECK(cortiq_session_eval(s, &seq[i], 1, lg[f] + i * V, &err) == CMF_OK);
        cortiq_session_free(s);
    }
    unsetenv("CORTIQ_GDN_CHUNK_MIN");
    CHECK(state[0] && state[1] && floats);
    if (state[0] && state[1] && lg[0] && lg[1]) {
        double dl = max_rel_diff(lg[1], lg[0], n * (size_t)V);
        double ds = max_rel_diff(state[1], state[0], floats);
        double dd = max_rel_diff(lg[1] + n * V, lg[0] + n * V, 8 * (size_t)V);
        printf("%-18s chunked vs recurrent, %zu tokens: logits %.3g, state %.3g, decode %.3g\n",
               fam, n, dl, ds, dd);
        CHECK_MSG(dl <= 1e-4 && ds <= 1e-4 && dd <= 1e-4,
                  "%s: chunked vs recurrent over %zu tokens: logits %.3g, state %.3g, decode "
                  "%.3g (> 1e-4)",
                  fam, n, dl, ds, dd);
    }
    free(lg[0]), free(lg[1]), free(state[0]), free(state[1]);
}

static void run(const char *fam) {
    char out[128], path[600];
    snprintf(out, sizeof out, "hybrid_parity_%s.cmf", fam);
    size_t nt = 0, nl = 0, ng = 0;
    char dt;
    int32_t *tokens = tiny_convert(fam, "f32", out, &nt);
    snprintf(path, sizeof path, TINY "%s/logits.npy", fam);
    float *ref = npy_load(path, &nl, &dt);
    snprintf(path, sizeof path, TINY "%s/greedy.npy", fam);
    int32_t *greedy = npy_load(path, &ng, &dt);
    CHECK(tokens && ref && greedy && nt == NT && ng == 32);
    if (!tokens || !ref || !greedy) return;
    cortiq_load_opts lo = {.threads = 2, .kv = CORTIQ_KV_F32, .act = CORTIQ_ACT_F32};
    uint32_t V = 0;
    float *batch = tiny_logits(out, &lo, 256, tokens, NT, 0, &V);
    float *tbt = tiny_logits(out, &lo, 256, tokens, NT, 1, &V);
    CHECK(batch && tbt && nl == NT * (size_t)V);
    cortiq_model *m = NULL;
    cmf_err err;
    CHECK_MSG(cortiq_model_load(out, &lo, &m, &err) == CMF_OK, "%s", err.msg);
    if (!batch || !tbt || !m || nl != NT * (size_t)V) goto done;
    double rel = max_rel_diff(batch, ref, nl), bt = max_rel_diff(tbt, batch, nl);
    static const size_t sizes[] = {1, 20, 2, 33, 8};
    float *ch = chunked(m, tokens, sizes, V);
    double cd = ch ? max_rel_diff(ch, batch, nl) : 1;
    free(ch);
    printf("%-18s logits vs transformers %.3g, token by token %.3g, chunked %.3g\n", fam, rel, bt,
           cd);
    CHECK_MSG(rel <= 1e-4, "%s: logits max relative difference %.3g > 1e-4", fam, rel);
    CHECK_MSG(bt <= 1e-5, "%s: batch vs token by token %.3g > 1e-5", fam, bt);
    CHECK_MSG(cd <= 1e-5, "%s: batch vs chunked evals %.3g > 1e-5", fam, cd);
    truncate_reuse(m, tokens, ref, V, fam);
    /* greedy continuation of the first 8 tokens */
    cortiq_session *s = NULL;
    CHECK(cortiq_session_create(m, 256, &s, &err) == CMF_OK);
    if (s) {
        CHECK(cortiq_session_eval(s, tokens, 8, NULL, &err) == CMF_OK);
        int same = 0;
        for (int i = 0; i < 32; i++) {
            int32_t t = cortiq_argmax(cortiq_session_logits(s), V);
            same += t == greedy[i];
            CHECK(cortiq_session_eval(s, &t, 1, NULL, &err) == CMF_OK);
        }
        CHECK_MSG(same == 32, "%s: %d/32 greedy tokens equal", fam, same);
        /* 160 tokens in one eval (two prefill chunks) against one by one */
        enum { LONG = 160 };
        int32_t seq[LONG];
        for (int i = 0; i < LONG; i++)
            seq[i] = tokens[(i * 7) % NT];
        float *lb = tiny_logits(out, &lo, 256, seq, LONG, 0, &V);
        float *lt = tiny_logits(out, &lo, 256, seq, LONG, 1, &V);
        double ld = lb && lt ? max_rel_diff(lb, lt, LONG * (size_t)V) : 1;
        CHECK_MSG(ld <= 1e-5, "%s: 160-token batch vs token by token %.3g", fam, ld);
        free(lb), free(lt);
        _Static_assert((NT - 8) % CQ_GDN_CHUNK && (LONG - 8) > 2 * CQ_GDN_CHUNK,
                       "the prompts are no multiple of the chunk and cross its boundary");
        forms(m, tokens, NT - 8, V, fam);
        forms(m, seq, LONG - 8, V, fam);
    }
    cortiq_session_free(s);
done:
    cortiq_model_free(m);
    free(batch), free(tbt), free(tokens), free(ref), free(greedy);
    remove(out);
}

int main(void) {
    run("qwen3_next_dense");
    run("qwen3_5_text");
    run("qwen3_5_moe_text");
    run("qwen3_next");
    TEST_DONE();
}
