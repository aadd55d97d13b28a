/* cortiq_model_token_macs against a count made from the file's tensor table: rows x cols of
 * every 2-D matrix of the layers (Gated DeltaNet's convolution excluded: not a product), a MoE
 * layer's routed experts top_k times their mean, never the embedding or the output head. On
 * the tiny dense, Gemma 3, hybrid (dense and MoE) and both MoE families (shared expert and gate
 * or not). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/test.h"
#include "cortiq/engine.h"
#include "engine/tiny_fixture.h"

#define MAX_LAYERS 64

/* The expected count, from the tensor names and shapes alone. */
static uint64_t count_from_table(const cmf_file *f) {
    uint64_t macs = 0, experts[MAX_LAYERS] = {0};
    uint32_t n_experts[MAX_LAYERS] = {0};
    for (size_t i = 0; i < cmf_file_tensor_count(f); i++) {
        const cmf_tensor *t = cmf_file_tensor_at(f, i);
        unsigned layer, expert;
        int at = 0;
        if (t->ndim != 2 || sscanf(t->name, "model.layers.%u.%n", &layer, &at) != 1 || !at ||
            strstr(t->name, "conv1d"))
            continue;
        CHECK_MSG(layer < MAX_LAYERS, "%s: layer %u", t->name, layer);
        if (layer >= MAX_LAYERS) continue;
        uint64_t rc = t->shape[0] * t->shape[1];
        if (sscanf(t->name + at, "mlp.experts.%u.", &expert) == 1) {
            experts[layer] += rc;
            if (expert + 1 > n_experts[layer]) n_experts[layer] = expert + 1;
        } else
            macs += rc;
    }
    int64_t top_k = cmf_file_header(f)->arch.moe.top_k;
    for (unsigned l = 0; l < MAX_LAYERS; l++)
        if (n_experts[l]) macs += experts[l] / n_experts[l] * (uint64_t)top_k;
    return macs;
}

static void check_family(const char *fam) {
    char out[128];
    snprintf(out, sizeof out, "token_macs_%s.cmf", fam);
    size_t n = 0;
    int32_t *tokens = tiny_convert(fam, "f32", out, &n);
    free(tokens);
    cmf_file *f = NULL;
    cmf_err err;
    CHECK_MSG(cmf_open(out, 0, &f, &err) == CMF_OK, "%s", err.msg);
    cortiq_model *m = NULL;
    CHECK_MSG(cortiq_model_load(out, NULL, &m, &err) == CMF_OK, "%s", err.msg);
    if (f && m) {
        uint64_t want = count_from_table(f), got = cortiq_model_token_macs(m);
        printf("%s: %llu multiply-adds per token\n", fam, (unsigned long long)got);
        CHECK_MSG(want > 0 && got == want, "%s: cortiq_model_token_macs %llu, the table %llu", fam,
                  (unsigned long long)got, (unsigned long long)want);
    }
    cortiq_model_free(m);
    cmf_close(f);
}

int main(void) {
    check_family("qwen2");
    check_family("gemma3_text");
    check_family("qwen3_next_dense");
    check_family("qwen3_moe");
    check_family("qwen2_moe");
    check_family("qwen3_next");
    TEST_DONE();
}
