/* Each expert keeps its own dtype (spec §2.2): a qwen3_moe file whose experts mix f32, f16, q8
 * and q4 (taken from conversions of the same checkpoint) gives, with f32 activations, the
 * logits of the f32 file whose experts hold those same weights dequantized (within 1e-5: the
 * kernels are exact to the dequantized weights up to summation order). */
#include "common/test.h"
#include "cortiq/engine.h"
#include "cortiq/quant.h"
#include "engine/logits_cmp.h"
#include "engine/moe_rewrite.h"
#include "engine/tiny_fixture.h"

static const char *const k_src[] = {"moe_dt_f32.cmf", "moe_dt_f16.cmf", "moe_dt_q8.cmf",
                                    "moe_dt_q4.cmf"};

int main(void) {
    size_t nt = 0;
    int32_t *tokens = tiny_convert("qwen3_moe", "f32", k_src[0], &nt);
    free(tiny_convert("qwen3_moe", "f16", k_src[1], &nt));
    free(tiny_convert("qwen3_moe", "q8", k_src[2], &nt));
    free(tiny_convert("qwen3_moe", "q4", k_src[3], &nt));
    if (!tokens) TEST_DONE();
    cmf_file *f[4] = {0};
    cmf_err err;
    for (int i = 0; i < 4; i++)
        CHECK(cmf_open(k_src[i], 0, &f[i], &err) == CMF_OK);
    /* expert e of every layer from source e % 4: mixed keeps the payloads, deq their f32 */
    enum { N = 2 * 4 * 3 };
    extra_tensor mixed[N], deq[N];
    char names[N][80];
    float *bufs[N] = {0};
    const char *drop[] = {"model.layers.0.mlp.experts.", "model.layers.1.mlp.experts."};
    static const char *role[] = {"gate_proj", "up_proj", "down_proj"};
    size_t k = 0;
    bool ok = f[0] && f[1] && f[2] && f[3];
    for (int l = 0; ok && l < 2; l++)
        for (int e = 0; ok && e < 4; e++)
            for (int r = 0; ok && r < 3; r++, k++) {
                snprintf(names[k], 80, "model.layers.%d.mlp.experts.%d.%s.weight", l, e, role[r]);
                const cmf_tensor *t = cmf_file_find(f[e % 4], names[k]);
                CHECK_MSG(t, "%s", names[k]);
                if (!(ok = t != NULL)) break;
                mixed[k] = (extra_tensor){names[k], (cmf_dtype)t->dtype,
                                          2,        {t->shape[0], t->shape[1]},
                                          t->data,  t->nbytes};
                size_t n = t->shape[0] * t->shape[1];
                bufs[k] = malloc(n * sizeof(float));
                ok = bufs[k] && cmf_quant_dequant((cmf_dtype)t->dtype, t->ndim, t->shape, t->data,
                                                  t->nbytes, bufs[k], &err) == CMF_OK;
                deq[k] = (extra_tensor){names[k], CMF_DT_F32,       2, {t->shape[0], t->shape[1]},
                                        bufs[k],  n * sizeof(float)};
            }
    CHECK(ok);
    ok = ok && moe_rewrite(k_src[0], "moe_dt_mixed.cmf", drop, 2, NULL, NULL, 0, mixed, N) &&
         moe_rewrite(k_src[0], "moe_dt_deq.cmf", drop, 2, NULL, NULL, 0, deq, N);
    for (int i = 0; i < 4; i++)
        cmf_close(f[i]);
    for (size_t i = 0; i < N; i++)
        free(bufs[i]);
    if (ok) {
        cortiq_load_opts lo = {.threads = 2, .kv = CORTIQ_KV_F32, .act = CORTIQ_ACT_F32};
        uint32_t V = 0;
        float *a = tiny_logits("moe_dt_mixed.cmf", &lo, 128, tokens, 64, 0, &V);
        float *b = tiny_logits("moe_dt_deq.cmf", &lo, 128, tokens, 64, 0, &V);
        float *c = tiny_logits("moe_dt_mixed.cmf", &lo, 128, tokens, 64, 1, &V);
        CHECK(a && b && c);
        if (a && b && c) {
            double rel = max_rel_diff(a, b, 64 * (size_t)V),
                   tbt = max_rel_diff(c, a, 64 * (size_t)V);
            printf("experts f32/f16/q8/q4 vs their dequantized f32: %.3g; token by token %.3g\n",
                   rel, tbt);
            CHECK(rel <= 1e-5);
            CHECK(tbt <= 1e-5);
        }
        free(a), free(b), free(c);
    }
    free(tokens);
    TEST_DONE();
}
