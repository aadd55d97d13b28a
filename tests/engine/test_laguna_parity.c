/* Laguna's attention features (spec §2) against the reference of
 * tools/make_laguna_reference.py (numpy, from transformers' Laguna definitions; the same code
 * reproduces transformers' llama logits), on tests/fixtures/tiny/laguna: an irregular sliding
 * schedule [S, S, F, S, F, F] with window 8, its own RoPE base and partial rotary factor (0.5)
 * on the sliding layers and YaRN with 0.75 on the full ones, query heads per layer
 * [4, 2, 4, 4, 2, 4] over 2 kv heads, q/k norms, and the softplus output gate g_proj per head
 * (layers 0, 3, 4), per channel (layer 2) or absent (1, 5).
 *  - convert writes the header fields and the loader picks the per-layer operators from them;
 *  - f32: logits over 64 positions (8 windows) within 1e-4 (max |diff| / max |logit|), 32
 *    greedy tokens identical; token by token, uneven chunks and a 160-token prefill (past the
 *    128-token chunk and around the sliding ring) equal to one batch within 1e-5;
 *  - batched decode of sessions at different positions equal to decoding each alone;
 *  - f16 (the weights are f16-exact): the same logits within 1e-4;
 *  - without a layer's g_proj the logits change; a g_proj of neither width is refused. */
#include <math.h>

#include "common/test.h"
#include "cortiq/engine.h"
#include "cortiq/writer.h"
#include "engine/logits_cmp.h"
#include "engine/model.h"
#include "engine/tiny_fixture.h"

#define NT  64
#define CTX 256

static const cortiq_load_opts k_opts = {.threads = 2, .kv = CORTIQ_KV_F32, .act = CORTIQ_ACT_F32};

/* What the loader made of each layer: tags, heads, RoPE and gates from the header and shapes. */
static void check_layers(const cortiq_model *m) {
    static const bool sliding[6] = {true, true, false, true, false, false};
    static const uint32_t heads[6] = {4, 2, 4, 4, 2, 4};
    static const cq_out_gate gates[6] = {CQ_OUT_GATE_HEAD, CQ_OUT_GATE_NONE, CQ_OUT_GATE_CHANNEL,
                                         CQ_OUT_GATE_HEAD, CQ_OUT_GATE_HEAD, CQ_OUT_GATE_NONE};
    CHECK(m->n_layers == 6 && m->n_kv == 2 && m->head_dim == 16 && m->sliding_window == 8);
    float yarn_mscale = (float)(0.1 * log(4.0) + 1.0);
    for (uint32_t l = 0; l < 6 && l < m->n_layers; l++) {
        const cq_layer *y = &m->layers[l];
        CHECK_MSG(y->sliding == sliding[l], "layer %u sliding %d", l, y->sliding);
        CHECK_MSG(y->n_heads == heads[l], "layer %u: %u heads", l, y->n_heads);
        CHECK_MSG(y->out_gate == gates[l], "layer %u gate kind %d", l, (int)y->out_gate);
        CHECK_MSG(y->rot_dim == (sliding[l] ? 8u : 12u), "layer %u rotates %u dims", l, y->rot_dim);
        CHECK_MSG(y->rope_theta == (sliding[l] ? 1000.0f : 500000.0f), "layer %u theta %g", l,
                  y->rope_theta);
        CHECK_MSG(fabsf(y->rope_mscale - (sliding[l] ? 1.0f : yarn_mscale)) < 1e-6f,
                  "layer %u rope mscale %g", l, y->rope_mscale);
        CHECK(y->wq.rows == heads[l] * 16u && y->wo.cols == heads[l] * 16u);
    }
}

/* Logits of tokens fed in evals of the given sizes (summing to NT) on one session. */
static float *chunked(cortiq_model *m, const int32_t *tokens, const size_t *sizes, uint32_t V) {
    cortiq_session *s = NULL;
    cmf_err err;
    float *out = malloc(NT * (size_t)V * sizeof(float));
    CHECK(out && cortiq_session_create(m, CTX, &s, &err) == CMF_OK);
    for (size_t done = 0, i = 0; s && out && done < NT; done += sizes[i++])
        CHECK_MSG(cortiq_session_eval(s, tokens + done, sizes[i], out + done * V, &err) == CMF_OK,
                  "%s", err.msg);
    cortiq_session_free(s);
    return out;
}

/* Sessions at different positions, one decode step each in one batch, against the same steps
 * alone: bit for bit (the gate's product rides in the q/k/v region, per session row). */
static void batch_decode(cortiq_model *m, const int32_t *tokens, uint32_t V) {
    enum { NS = 3, STEPS = 12 };
    cortiq_session *alone[NS] = {NULL}, *batched[NS] = {NULL};
    cmf_err err;
    int ok = 1, differ = 0;
    for (int i = 0; i < NS; i++) {
        ok &= cortiq_session_create(m, CTX, &alone[i], &err) == CMF_OK;
        ok &= cortiq_session_create(m, CTX, &batched[i], &err) == CMF_OK;
        if (!ok) break;
        size_t np = 3 + (size_t)i * 9; /* 3, 12, 21: inside and past the window */
        ok &= cortiq_session_eval(alone[i], tokens, np, NULL, &err) == CMF_OK;
        ok &= cortiq_session_eval(batched[i], tokens, np, NULL, &err) == CMF_OK;
    }
    CHECK(ok);
    for (int step = 0; ok && step < STEPS; step++) {
        int32_t next[NS];
        for (int i = 0; i < NS; i++) {
            next[i] = tokens[(step * 5 + i * 11) % NT];
            CHECK(cortiq_session_eval(alone[i], &next[i], 1, NULL, &err) == CMF_OK);
        }
        CHECK_MSG(cortiq_session_eval_batch(batched, next, NS, &err) == CMF_OK, "%s", err.msg);
        for (int i = 0; i < NS; i++)
            differ += memcmp(cortiq_session_logits(alone[i]), cortiq_session_logits(batched[i]),
                             V * sizeof(float)) != 0;
    }
    CHECK_MSG(differ == 0, "batched decode: %d session steps differ from decoding alone", differ);
    for (int i = 0; i < NS; i++)
        cortiq_session_free(alone[i]), cortiq_session_free(batched[i]);
}

/* Tensor presence chooses the operator: a copy of the file without layer 2's g_proj computes
 * something else, and a g_proj of neither width is refused, naming the widths it could have. */
static void gate_presence(const char *path, const int32_t *tokens, const float *ref, size_t nl) {
    static const char *const copy = "laguna_edit.cmf";
    char cmd[600];
    cmf_appender *a = NULL;
    cmf_err err;
    snprintf(cmd, sizeof cmd, "cp '%s' '%s'", path, copy);
    CHECK(system(cmd) == 0);
    CHECK(cmf_append_begin(copy, &a, &err) == CMF_OK);
    CHECK(a && cmf_append_drop_tensor(a, "model.layers.2.self_attn.g_proj.weight", &err) == CMF_OK);
    CHECK_MSG(a && cmf_append_commit(a, &err) == CMF_OK, "%s", err.msg);
    cmf_append_free(a);
    uint32_t V = 0;
    float *l = tiny_logits(copy, &k_opts, CTX, tokens, NT, 0, &V);
    double d = l && nl == NT * (size_t)V ? max_rel_diff(l, ref, nl) : 0;
    CHECK_MSG(d > 1e-3, "without layer 2's g_proj the logits moved only %.3g", d);
    free(l);
    float bad[3 * 64] = {0};
    const uint64_t shape[2] = {3, 64};
    CHECK(cmf_append_begin(copy, &a, &err) == CMF_OK);
    CHECK(a && cmf_append_add_tensor(a, "model.layers.0.self_attn.g_proj.weight", CMF_DT_F32, 2,
                                     shape, bad, sizeof bad, 1, &err) == CMF_OK);
    CHECK_MSG(a && cmf_append_commit(a, &err) == CMF_OK, "%s", err.msg);
    cmf_append_free(a);
    cortiq_model *m = NULL;
    cmf_status st = cortiq_model_load(copy, &k_opts, &m, &err);
    CHECK_MSG(st == CMF_E_PARSE && strstr(err.msg, "g_proj") && strstr(err.msg, "need 4") &&
                  strstr(err.msg, "or 64"),
              "a 3-row g_proj: %s: %s", cmf_status_name(st), st ? err.msg : "loaded");
    cortiq_model_free(m);
    remove(copy);
}

static void greedy_check(cortiq_model *m, const int32_t *tokens, const int32_t *greedy,
                         uint32_t V) {
    cortiq_session *s = NULL;
    cmf_err err;
    CHECK(cortiq_session_create(m, CTX, &s, &err) == CMF_OK);
    if (!s) return;
    CHECK(cortiq_session_eval(s, tokens, 8, NULL, &err) == CMF_OK);
    int same = 0;
    for (int i = 0; i < 32; i++) {
        int32_t t = cortiq_argmax(cortiq_session_logits(s), V);
        same += t == greedy[i];
        CHECK(cortiq_session_eval(s, &t, 1, NULL, &err) == CMF_OK);
    }
    CHECK_MSG(same == 32, "%d/32 greedy tokens equal", same);
    cortiq_session_free(s);
}

int main(void) {
    const char *out = "laguna_parity.cmf", *out16 = "laguna_parity_f16.cmf";
    size_t nt = 0, nl = 0, ng = 0;
    char dt;
    int32_t *tokens = tiny_convert("laguna", "f32", out, &nt);
    float *ref = npy_load(TINY "laguna/logits.npy", &nl, &dt);
    int32_t *greedy = npy_load(TINY "laguna/greedy.npy", &ng, &dt);
    CHECK(tokens && ref && greedy && nt == NT && ng == 32);
    if (!tokens || !ref || !greedy || nt != NT || ng != 32) TEST_DONE();
    cortiq_model *m = NULL;
    cmf_err err;
    CHECK_MSG(cortiq_model_load(out, &k_opts, &m, &err) == CMF_OK, "%s", err.msg);
    if (!m) TEST_DONE();
    check_layers(m);
    uint32_t V = cortiq_model_vocab(m);
    CHECK(nl == NT * (size_t)V);
    float *batch = tiny_logits(out, &k_opts, CTX, tokens, NT, 0, &V);
    float *tbt = tiny_logits(out, &k_opts, CTX, tokens, NT, 1, &V);
    static const size_t sizes[] = {1, 7, 2, 9, 30, 15};
    float *ch = chunked(m, tokens, sizes, V);
    if (batch && tbt && ch && nl == NT * (size_t)V) {
        double rel = max_rel_diff(batch, ref, nl), bt = max_rel_diff(tbt, batch, nl);
        double cd = max_rel_diff(ch, batch, nl);
        printf("laguna f32: logits vs reference %.3g, token by token %.3g, chunked %.3g\n", rel, bt,
               cd);
        CHECK_MSG(rel <= 1e-4, "logits max relative difference %.3g > 1e-4", rel);
        CHECK_MSG(bt <= 1e-5, "batch vs token by token %.3g > 1e-5", bt);
        CHECK_MSG(cd <= 1e-5, "batch vs chunked evals %.3g > 1e-5", cd);
    }
    free(ch);
    greedy_check(m, tokens, greedy, V);
    /* 160 tokens in one eval (two prefill chunks) against one by one */
    enum { LONG = 160 };
    int32_t seq[LONG];
    for (int i = 0; i < LONG; i++)
        seq[i] = tokens[(i * 7) % NT];
    float *lb = tiny_logits(out, &k_opts, CTX, seq, LONG, 0, &V);
    float *lt = tiny_logits(out, &k_opts, CTX, seq, LONG, 1, &V);
    double ld = lb && lt ? max_rel_diff(lb, lt, LONG * (size_t)V) : 1;
    CHECK_MSG(ld <= 1e-5, "160-token batch vs token by token %.3g", ld);
    free(lb), free(lt);
    batch_decode(m, tokens, V);
    cortiq_model_free(m);
    gate_presence(out, tokens, ref, nl);
    /* f16 matrices (exact here): the same logits */
    free(tiny_convert("laguna", "f16", out16, &nt));
    cortiq_load_opts o16 = {.threads = 2, .kv = CORTIQ_KV_F32, .act = CORTIQ_ACT_F32};
    float *l16 = tiny_logits(out16, &o16, CTX, tokens, NT, 0, &V);
    double r16 = l16 ? max_rel_diff(l16, ref, nl) : 1;
    printf("laguna f16: logits vs reference %.3g\n", r16);
    CHECK_MSG(r16 <= 1e-4, "f16 file: logits max relative difference %.3g > 1e-4", r16);
    free(l16), free(batch), free(tbt), free(tokens), free(ref), free(greedy);
    remove(out), remove(out16);
    TEST_DONE();
}
