/* Hybrid models (Gated DeltaNet + gated attention) in both implementations, on the tiny
 * checkpoints of tools/make_hybrid_references.py (qwen3_5_text, qwen3_5_moe_text,
 * qwen3_next_dense) and the MoE qwen3_next of tools/make_tiny_checkpoints.py:
 *  - our `convert` at f32 and f16, and the other implementation's Rust `convert` at F16 (which
 *    splits Qwen3-Next's fused in_proj_qkvz / in_proj_ba into Qwen3.5's four projections);
 *  - every file runs here within 1e-4 of transformers (its f16-rounded reference for f16 files)
 *    over 64 positions;
 *  - `cmfeng logits` on the same file at three prefixes matches ours within 1e-3, except that
 *    its reader knows only the split projections: a file holding the fused ones must be refused
 *    by it (a known gap of the other implementation, docs/HYBRID.md), never computed wrong. */
#include "common/test.h"
#include "cortiq/converter.h"
#include "cortiq/engine.h"
#include "engine/logits_cmp.h"
#include "engine/tiny_fixture.h"
#include "interop/oracle.h"

#define N_TOK 64

static bool has_tensor(const char *path, const char *name) {
    cmf_file *f = NULL;
    cmf_err err;
    if (cmf_open(path, 0, &f, &err)) return false;
    bool has = cmf_file_find(f, name) != NULL;
    cmf_close(f);
    return has;
}

static void check_file(const char *fam, const char *writer, const char *dtype, const char *path,
                       const int32_t *tokens) {
    char ref_path[600];
    snprintf(ref_path, sizeof ref_path, TINY "%s/logits%s.npy", fam,
             strcmp(dtype, "f16") ? "" : "_f16");
    size_t nl = 0;
    char dt;
    float *hf = npy_load(ref_path, &nl, &dt);
    cortiq_load_opts lo = {.threads = 2, .kv = CORTIQ_KV_F32, .act = CORTIQ_ACT_F32};
    uint32_t V = 0;
    float *ours = tiny_logits(path, &lo, 128, tokens, N_TOK, 0, &V);
    CHECK(hf && ours && nl == N_TOK * (size_t)V);
    if (!hf || !ours || nl != N_TOK * (size_t)V) goto out;
    double rel = max_rel_diff(ours, hf, nl);
    CHECK_MSG(rel <= 1e-4, "%s (%s %s): logits vs transformers %.3g", fam, writer, dtype, rel);
    bool fused = has_tensor(path, "model.layers.0.linear_attn.in_proj_qkvz.weight");
    double worst = 0;
    int refused = 0;
    static const size_t prefixes[] = {1, 33, N_TOK};
    for (size_t i = 0; i < 3; i++) {
        size_t n = prefixes[i], rv = 0;
        float *r = ref_logits(path, tokens, n, &rv);
        if (!r) {
            refused++;
            continue;
        }
        CHECK(rv == V);
        double d = rv == V ? max_rel_diff(r, ours + (n - 1) * V, V) : 1;
        if (d > worst) worst = d;
        free(r);
    }
    if (fused)
        CHECK_MSG(refused == 3 || (refused == 0 && worst <= 1e-3),
                  "%s (%s %s): cmfeng on the fused projections: %d refusals, rel %.3g", fam, writer,
                  dtype, refused, worst);
    else
        CHECK_MSG(refused == 0 && worst <= 1e-3, "%s (%s %s): cmfeng %d refusals, rel %.3g", fam,
                  writer, dtype, refused, worst);
    printf("hybrid %-16s %-5s %-6s transformers rel %.1e; cmfeng %s rel %.1e\n", fam, dtype, writer,
           rel, refused ? "refuses (fused in_proj_qkvz)," : "computes,", worst);
out:
    free(hf), free(ours);
}

int main(void) {
    if (!oracle_find()) return TEST_SKIPPED;
    static const char *const fams[] = {"qwen3_5_text", "qwen3_5_moe_text", "qwen3_next_dense",
                                       "qwen3_next"};
    for (size_t f = 0; f < sizeof fams / sizeof *fams; f++) {
        size_t n = 0;
        char path[256], out[4096];
        for (int q = 0; q < 2; q++) {
            const char *dtype = q ? "f16" : "f32";
            snprintf(path, sizeof path, "hyb_ours_%s_%s.cmf", fams[f], dtype);
            int32_t *tokens = tiny_convert(fams[f], dtype, path, &n);
            if (tokens && n == N_TOK) check_file(fams[f], "cortiq", dtype, path, tokens);
            remove(path);
            free(tokens);
        }
        snprintf(path, sizeof path, "hyb_rust_%s_f16.cmf", fams[f]);
        int rc = sh(out, sizeof out,
                    "%s/cortiq-ref convert --model " TINY "%s --quant F16 "
                    "--output '%s' 2>&1",
                    g_oracle, fams[f], path);
        CHECK_MSG(rc == 0, "cortiq-ref convert %s: %s", fams[f], out);
        char tp[600];
        snprintf(tp, sizeof tp, TINY "%s/tokens.npy", fams[f]);
        char dt;
        int32_t *tokens = rc == 0 ? npy_load(tp, &n, &dt) : NULL;
        if (tokens && n == N_TOK) check_file(fams[f], "rust", "f16", path, tokens);
        free(tokens);
        remove(path);
    }
    TEST_DONE();
}
