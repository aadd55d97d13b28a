/* Load-time checks of a mixture-of-experts file (spec §2.2), on variants of the tiny qwen3_moe
 * file: the router has one row per expert present (a clear error naming the file, the layer
 * and both numbers otherwise); experts are numbered 0 .. n-1; experts need a router; top_k
 * larger than the experts present (fewer than arch.moe.num_experts) clamps to their count. */
#include "common/test.h"
#include "cortiq/engine.h"
#include "engine/moe_rewrite.h"
#include "engine/tiny_fixture.h"

#define BASE "moe_load_base.cmf"

/* Loading path fails with a message containing every one of want[0..n). */
static void expect_error(const char *path, const char *const *want, size_t n) {
    cortiq_model *m = NULL;
    cmf_err err = {0};
    cmf_status st = cortiq_model_load(path, NULL, &m, &err);
    CHECK_MSG(st != CMF_OK && !m, "%s loaded", path);
    printf("%s: %s\n", path, err.msg);
    for (size_t i = 0; i < n; i++)
        CHECK_MSG(strstr(err.msg, want[i]), "'%s' not in: %s", want[i], err.msg);
    cortiq_model_free(m);
}

int main(void) {
    size_t nt = 0;
    int32_t *tokens = tiny_convert("qwen3_moe", "f32", BASE, &nt);
    if (!tokens) TEST_DONE();

    /* expert 3 of layer 1 gone: its router still has 4 rows */
    const char *no_e3[] = {"model.layers.1.mlp.experts.3."};
    CHECK(moe_rewrite(BASE, "moe_load_rows.cmf", no_e3, 1, NULL, NULL, 0, NULL, 0));
    const char *rows[] = {"moe_load_rows.cmf", "layer 1", "router", "4 rows", "3 experts"};
    expect_error("moe_load_rows.cmf", rows, 5);

    /* expert 1 of layer 0 gone, 2 and 3 present: not a prefix */
    const char *no_e1[] = {"model.layers.0.mlp.experts.1."};
    CHECK(moe_rewrite(BASE, "moe_load_gap.cmf", no_e1, 1, NULL, NULL, 0, NULL, 0));
    const char *gap[] = {"layer 0", "expert 2 is present but expert 1 is absent"};
    expect_error("moe_load_gap.cmf", gap, 2);

    /* experts without a router */
    const char *no_router[] = {"model.layers.0.mlp.gate.weight"};
    CHECK(moe_rewrite(BASE, "moe_load_norouter.cmf", no_router, 1, NULL, NULL, 0, NULL, 0));
    const char *norouter[] = {"layer 0", "no router"};
    expect_error("moe_load_norouter.cmf", norouter, 2);

    /* experts 0..2 present of num_experts=4 (a defragged file), top_k 4: clamps to 3, the
     * same as a file that says num_experts=3, top_k=3 */
    cmf_file *base = NULL;
    cmf_err err;
    CHECK(cmf_open(BASE, 0, &base, &err) == CMF_OK);
    if (!base) TEST_DONE();
    const char *no_e3_all[] = {"model.layers.0.mlp.experts.3.", "model.layers.1.mlp.experts.3.",
                               "model.layers.0.mlp.gate.", "model.layers.1.mlp.gate."};
    extra_tensor routers[2];
    for (int l = 0; l < 2; l++) {
        static const char *name[] = {"model.layers.0.mlp.gate.weight",
                                     "model.layers.1.mlp.gate.weight"};
        const cmf_tensor *r = cmf_file_find(base, name[l]);
        CHECK(r && r->dtype == CMF_DT_F32 && r->shape[0] == 4);
        if (!r) TEST_DONE();
        routers[l] = (extra_tensor){name[l],          CMF_DT_F32, 2,
                                    {3, r->shape[1]}, r->data,    3 * r->shape[1] * sizeof(float)};
    }
    const char *from[] = {"\"top_k\":2"}, *to4[] = {"\"top_k\":4"};
    const char *from3[] = {"\"top_k\":2", "\"num_experts\":4"},
               *to3[] = {"\"top_k\":3", "\"num_experts\":3"};
    CHECK(moe_rewrite(BASE, "moe_load_k4.cmf", no_e3_all, 4, from, to4, 1, routers, 2));
    CHECK(moe_rewrite(BASE, "moe_load_k3.cmf", no_e3_all, 4, from3, to3, 2, routers, 2));
    cmf_close(base);
    cortiq_load_opts lo = {.threads = 2, .kv = CORTIQ_KV_F32};
    uint32_t V = 0;
    float *k4 = tiny_logits("moe_load_k4.cmf", &lo, 64, tokens, 16, 0, &V);
    float *k3 = tiny_logits("moe_load_k3.cmf", &lo, 64, tokens, 16, 0, &V);
    CHECK(k4 && k3);
    if (k4 && k3) CHECK(!memcmp(k4, k3, 16 * (size_t)V * sizeof(float)));
    free(k4), free(k3), free(tokens);
    TEST_DONE();
}
