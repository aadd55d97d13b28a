/* The mixture-of-experts tiny checkpoints (qwen2_moe, qwen3_moe, qwen2_moe_mixed, and qwen3_moe
 * with a sigmoid router, expert_bias and routed scaling) converted at f32 give the same logits here
 * and in the other implementation (`cmfeng logits`, last position, at prefixes of 1, 8, 32 and 64
 * tokens): within 1e-4 of max |logit|. Both engines compute in f32 from the same f32 weights, so
 * only summation order separates them (measured: below 1e-6); 1e-4 is the bound the transformers
 * parity holds too. Skips (77) without the oracle (../shared). */
#include "common/f16.h"
#include "common/test.h"
#include "cortiq/engine.h"
#include "engine/moe_rewrite.h"
#include "engine/tiny_fixture.h"
#include "interop/oracle.h"

/* fam's f32 file; "qwen3_moe_sigmoid": qwen3_moe with the sigmoid router, expert_bias and
 * routed scaling (tests/engine/moe_rewrite.h) */
static void run(const char *fam) {
    char out[128];
    snprintf(out, sizeof out, "interop_moe_%s.cmf", fam);
    bool sigmoid = !strcmp(fam, "qwen3_moe_sigmoid");
    size_t nt = 0;
    int32_t *tokens = tiny_convert(sigmoid ? "qwen3_moe" : fam, "f32", out, &nt);
    if (!tokens || nt < 64) return;
    if (sigmoid) {
        CHECK(moe_write_sigmoid(out, "interop_moe_sigmoid.cmf", true));
        snprintf(out, sizeof out, "interop_moe_sigmoid.cmf");
    }
    cortiq_load_opts lo = {.threads = 2, .kv = CORTIQ_KV_F32, .act = CORTIQ_ACT_F32};
    uint32_t V = 0;
    float *ours = tiny_logits(out, &lo, 128, tokens, 64, 0, &V);
    CHECK(ours);
    static const size_t prefixes[] = {1, 8, 32, 64};
    double worst = 0;
    for (size_t i = 0; ours && i < sizeof prefixes / sizeof prefixes[0]; i++) {
        size_t p = prefixes[i], rv = 0;
        float *r = ref_logits(out, tokens, p, &rv);
        CHECK_MSG(r && rv == V, "%s: cmfeng logits failed at prefix %zu", fam, p);
        if (r && rv == V) {
            double d = rel_diff(r, ours + (p - 1) * V, V);
            if (d > worst) worst = d;
            CHECK_MSG(d <= 1e-4, "%s prefix %zu: %.3g > 1e-4 from cmfeng", fam, p, d);
        }
        free(r);
    }
    printf("%-16s f32 logits vs cmfeng: max rel diff %.3g\n", fam, worst);
    free(ours), free(tokens);
}

int main(void) {
    if (!oracle_find()) return TEST_SKIPPED;
    run("qwen2_moe");
    run("qwen3_moe");
    run("qwen2_moe_mixed");
    run("qwen3_moe_sigmoid");
    TEST_DONE();
}
