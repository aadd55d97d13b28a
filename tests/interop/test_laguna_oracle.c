/* The Laguna-like tiny checkpoint (tools/make_laguna_reference.py: an irregular sliding
 * schedule with its own RoPE base and partial rotary factor, YaRN full layers, query heads per
 * layer, softplus output gates per head and per channel) in both implementations:
 *  - our `convert` at f32 and f16, and the other implementation's Rust `convert` at F16 (both
 *    write the same arch fields: attention_heads_per_layer, rope_local_base_freq,
 *    local_partial_rotary_factor, partial_rotary_factor, yarn);
 *  - every file runs here within 1e-4 of the reference over 64 positions (the weights are
 *    f16-exact, so one reference serves every file);
 *  - `cmfeng logits` on every file at four prefixes, inside and past the window of 8, within
 *    1e-4 of the same reference. */
#include "common/test.h"
#include "cortiq/converter.h"
#include "cortiq/engine.h"
#include "engine/logits_cmp.h"
#include "engine/tiny_fixture.h"
#include "interop/oracle.h"

#define N_TOK 64

static void check_file(const char *writer, const char *dtype, const char *path,
                       const int32_t *tokens, const float *ref, size_t nl) {
    cortiq_load_opts lo = {.threads = 2, .kv = CORTIQ_KV_F32, .act = CORTIQ_ACT_F32};
    uint32_t V = 0;
    float *ours = tiny_logits(path, &lo, 128, tokens, N_TOK, 0, &V);
    CHECK(ours && nl == N_TOK * (size_t)V);
    if (!ours || nl != N_TOK * (size_t)V) {
        free(ours);
        return;
    }
    double rel = max_rel_diff(ours, ref, nl), worst = 0;
    CHECK_MSG(rel <= 1e-4, "laguna (%s %s): logits vs reference %.3g", writer, dtype, rel);
    static const size_t prefixes[] = {1, 9, 40, N_TOK};
    int refused = 0;
    for (size_t i = 0; i < 4; i++) {
        size_t n = prefixes[i], rv = 0;
        float *r = ref_logits(path, tokens, n, &rv);
        if (!r || rv != V) {
            refused++;
            free(r);
            continue;
        }
        double d = max_rel_diff(r, ref + (n - 1) * V, V);
        if (d > worst) worst = d;
        free(r);
    }
    CHECK_MSG(refused == 0 && worst <= 1e-4, "laguna (%s %s): cmfeng %d failures, rel %.3g", writer,
              dtype, refused, worst);
    printf("laguna %-5s %-6s ours vs reference %.1e; cmfeng vs reference %.1e\n", dtype, writer,
           rel, worst);
    free(ours);
}

int main(void) {
    if (!oracle_find()) return TEST_SKIPPED;
    size_t nl = 0, n = 0;
    char dt, path[256], out[4096];
    float *ref = npy_load(TINY "laguna/logits.npy", &nl, &dt);
    CHECK(ref != NULL);
    for (int q = 0; ref && q < 2; q++) {
        const char *dtype = q ? "f16" : "f32";
        snprintf(path, sizeof path, "laguna_ours_%s.cmf", dtype);
        int32_t *tokens = tiny_convert("laguna", dtype, path, &n);
        if (tokens && n == N_TOK) check_file("cortiq", dtype, path, tokens, ref, nl);
        remove(path);
        free(tokens);
    }
    snprintf(path, sizeof path, "laguna_rust_f16.cmf");
    int rc = sh(out, sizeof out,
                "%s/cortiq-ref convert --model " TINY "laguna --quant F16 --output '%s' 2>&1",
                g_oracle, path);
    CHECK_MSG(rc == 0, "cortiq-ref convert laguna: %s", out);
    int32_t *tokens = rc == 0 ? npy_load(TINY "laguna/tokens.npy", &n, &dt) : NULL;
    if (ref && tokens && n == N_TOK) check_file("rust", "f16", path, tokens, ref, nl);
    free(tokens), free(ref);
    remove(path);
    TEST_DONE();
}
