/* A task mask (spec §5) over layers with a softplus output gate (self_attn.g_proj, spec §2):
 * with heads switched off, the gathered path packs the active heads' queries, so the gate of
 * packed head j is that of the j-th active head. The tiny llama (f32) gets g_proj per head in
 * layer 0 and per channel in layer 1; the masked forward pass, gathered and dense-with-zeros,
 * must equal the dense pass of a copy whose o_proj columns of the inactive heads are zero. */
#include <stdlib.h>
#include <string.h>

#include "cortiq/writer.h"
#include "engine/logits_cmp.h"
#include "engine/session.h"
#include "test.h"
#include "tiny_fixture.h"

#define L_     2
#define HEADS  4
#define HD     16
#define HIDDEN 64
#define FFN_   128
#define N      24

static const uint8_t k_heads[L_] = {0x0D, 0x06}; /* layer 0: heads 0, 2, 3; layer 1: 1, 2 */

static void append(const char *path, const char *name, const uint64_t *shape, const float *w) {
    cmf_err err;
    cmf_appender *a = NULL;
    CHECK(cmf_append_begin(path, &a, &err) == CMF_OK);
    CHECK_MSG(a && cmf_append_add_tensor(a, name, CMF_DT_F32, 2, shape, w,
                                         shape[0] * shape[1] * sizeof(float), 1, &err) == CMF_OK,
              "%s", err.msg);
    CHECK_MSG(a && cmf_append_commit(a, &err) == CMF_OK, "%s", err.msg);
    cmf_append_free(a);
}

/* g_proj of layer 0 per head, of layer 1 per channel, values in [-0.3, 0.3). */
static void add_gates(const char *path) {
    static float w[HEADS * HD * HIDDEN];
    uint64_t x = 0x9E3779B97F4A7C15ull;
    for (size_t i = 0; i < sizeof w / sizeof w[0]; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        w[i] = (float)((x >> 11) % 6000) / 10000.0f - 0.3f;
    }
    const uint64_t head[2] = {HEADS, HIDDEN}, channel[2] = {HEADS * HD, HIDDEN};
    append(path, "model.layers.0.self_attn.g_proj.weight", head, w);
    append(path, "model.layers.1.self_attn.g_proj.weight", channel, w);
}

static void add_mask(const char *path) {
    cmf_err err;
    cmf_masks_builder *b = NULL;
    uint8_t ffn[L_][FFN_ / 8], gates = 0x03;
    memset(ffn, 0xFF, sizeof ffn);
    CHECK(cmf_masks_builder_create(L_, FFN_, HEADS, 0, &b, &err) == CMF_OK);
    CHECK(b && cmf_masks_builder_add(b, "heads", NULL, &ffn[0][0], k_heads, &gates, NULL, NULL,
                                     &err) == CMF_OK);
    uint8_t *bytes = NULL;
    size_t len = 0;
    CHECK(b && cmf_masks_builder_build(b, &bytes, &len, &err) == CMF_OK);
    cmf_masks_builder_free(b);
    cmf_appender *a = NULL;
    CHECK(cmf_append_begin(path, &a, &err) == CMF_OK);
    CHECK(a && cmf_append_set_masks(a, bytes, len, &err) == CMF_OK);
    CHECK_MSG(a && cmf_append_commit(a, &err) == CMF_OK, "%s", err.msg);
    cmf_append_free(a);
    free(bytes);
}

/* o_proj columns of the inactive heads zeroed: the dense meaning of the mask. */
static void zero_inactive(const char *path) {
    for (int l = 0; l < L_; l++) {
        cmf_err err;
        cmf_file *f = NULL;
        char name[96];
        snprintf(name, sizeof name, "model.layers.%d.self_attn.o_proj.weight", l);
        CHECK(cmf_open(path, 0, &f, &err) == CMF_OK);
        const cmf_tensor *t = f ? cmf_file_find(f, name) : NULL;
        CHECK(t && t->dtype == CMF_DT_F32 && t->shape[0] == HIDDEN && t->shape[1] == HEADS * HD);
        if (!t) {
            cmf_close(f);
            return;
        }
        float *w = malloc(t->nbytes);
        memcpy(w, t->data, t->nbytes);
        cmf_close(f);
        for (int r = 0; r < HIDDEN; r++)
            for (int c = 0; c < HEADS * HD; c++)
                if (!((k_heads[l] >> (c / HD)) & 1)) w[r * HEADS * HD + c] = 0.0f;
        const uint64_t shape[2] = {HIDDEN, HEADS * HD};
        append(path, name, shape, w);
        free(w);
    }
}

static float *run(const char *path, const char *task, bool no_gather, const int32_t *tok,
                  uint32_t *V, cortiq_task_stats *st) {
    cortiq_load_opts lo = {.threads = 2, .kv = CORTIQ_KV_F32, .act = CORTIQ_ACT_F32};
    cortiq_model *m = NULL;
    cortiq_session *s = NULL;
    cmf_err err;
    CHECK_MSG(cortiq_model_load(path, &lo, &m, &err) == CMF_OK, "%s", err.msg);
    if (!m) return NULL;
    *V = cortiq_model_vocab(m);
    CHECK(m->layers[0].out_gate == CQ_OUT_GATE_HEAD &&
          m->layers[1].out_gate == CQ_OUT_GATE_CHANNEL);
    CHECK(cortiq_session_create(m, 64, &s, &err) == CMF_OK);
    float *lg = s ? malloc(N * (size_t)*V * sizeof(float)) : NULL;
    if (lg) {
        CHECK_MSG(cq_session_set_task(s, task, no_gather, &err) == CMF_OK, "%s", err.msg);
        if (st) cortiq_session_task_stats(s, st);
        CHECK(cortiq_session_eval(s, tok, N, lg, &err) == CMF_OK);
    }
    cortiq_session_free(s);
    cortiq_model_free(m);
    return lg;
}

int main(void) {
    size_t n = 0;
    int32_t *tok = tiny_convert("llama", "f32", "og_base.cmf", &n);
    if (!tok || n < N) TEST_DONE();
    add_gates("og_base.cmf");
    CHECK(system("cp og_base.cmf og_ref.cmf") == 0);
    add_mask("og_base.cmf");
    zero_inactive("og_ref.cmf");
    uint32_t V = 0;
    cortiq_task_stats st;
    memset(&st, 0, sizeof st);
    float *dense = run("og_base.cmf", NULL, false, tok, &V, NULL);
    float *want = run("og_ref.cmf", NULL, false, tok, &V, NULL);
    float *packed = run("og_base.cmf", "heads", false, tok, &V, &st);
    float *zeroed = run("og_base.cmf", "heads", true, tok, &V, NULL);
    size_t nv = N * (size_t)V;
    if (dense && want && packed && zeroed) {
        double dm = max_rel_diff(dense, want, nv), dp = max_rel_diff(packed, want, nv);
        double dz = max_rel_diff(zeroed, want, nv);
        printf("out gate + heads mask: gathered %.3g, dense with zeros %.3g (mask moves the "
               "logits by %.3g); gathered bytes %llu\n",
               dp, dz, dm, (unsigned long long)st.gathered_bytes);
        CHECK_MSG(dm > 1e-3, "the mask changes the logits by only %.3g", dm);
        CHECK_MSG(dp <= 1e-5, "gathered masked pass vs zeroed o_proj columns: %.3g", dp);
        CHECK_MSG(dz <= 1e-5, "dense masked pass vs zeroed o_proj columns: %.3g", dz);
        CHECK_MSG(st.gathered_bytes > 0, "the heads were not gathered");
    }
    free(dense), free(want), free(packed), free(zeroed), free(tok);
    remove("og_base.cmf"), remove("og_ref.cmf");
    TEST_DONE();
}
