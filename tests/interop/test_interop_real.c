/* Interop on the real models (SmolLM2-135M-Instruct, Gemma 3 270M; scripts/fetch-models puts
 * their GGUFs in the model cache) with the other CMF implementation (shared/tools/ref-oracle):
 *  - `cortiq import-gguf --quant f16`: `cmfref verify --deep` accepts the file, and
 *    `cmfeng gen --chat` and our runtime, fed the same prompt ids (the ones cmfeng rendered and
 *    tokenized; its tokenizer is not the judge), produce the same 32 greedy tokens;
 *  - its `import-gguf --quant f16`: verified here, the same 32 greedy tokens in both engines -
 *    or, where its writer breaks the format, both readers refuse the file;
 *  - q8 from both importers: each engine gives the same 32 tokens on either file (across the
 *    engines q8 tokens may part: cmfeng rounds activations to int8, we compute in f32);
 *  - `convert` from a Hugging Face checkpoint of the same model (the GGUF imported at f32 and
 *    written back with `cortiq export-hf`), by `cortiq convert` and by its `convert`, at f16:
 *    the same 32 greedy tokens in both engines.
 * Prints one line per model x writer x dtype (docs/FORMAT.md "Interop matrix"). */
#include <sys/stat.h>

#include "common/model_cache.h"
#include "common/test.h"
#include "cortiq/engine.h"
#include "cortiq/format.h"
#include "interop/oracle.h"

#define N_GEN  32
#define PROMPT "Write a short story about a robot who learns to paint."

static size_t parse_list(const char *text, const char *key, int32_t *ids, size_t cap) {
    const char *p = strstr(text, key);
    if (!p || !(p = strchr(p, '['))) return 0;
    size_t n = 0;
    for (p++; *p && *p != ']' && n < cap;) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p) break;
        ids[n++] = (int32_t)v;
        p = end;
        while (*p == ',' || *p == ' ')
            p++;
    }
    return n;
}

/* cmfeng gen --chat: the prompt ids it used and the tokens it generated. False if it failed. */
static bool ref_gen(const char *path, int32_t *prompt, size_t *n_prompt, int32_t *gen,
                    size_t *n_gen) {
    static char out[1 << 16];
    int rc = sh(out, sizeof out,
                "CMF_THREADS=2 %s/cmfeng gen '%s' --prompt '" PROMPT "' --n %d --chat 2>&1",
                g_oracle, path, N_GEN);
    *n_prompt = parse_list(out, "prompt ids", prompt, 4096);
    const char *finish = strstr(out, "finish:");
    const char *line = finish ? strchr(finish, '\n') : NULL;
    *n_gen = 0;
    while (line && *line && *n_gen < N_GEN) {
        char *end;
        long v = strtol(line, &end, 10);
        if (end == line) break;
        gen[(*n_gen)++] = (int32_t)v;
        line = end;
        while (*line == ' ')
            line++;
        if (*line == '\n') break;
    }
    if (rc != 0 || !*n_prompt) printf("  cmfeng gen %s: %.300s\n", path, out);
    return rc == 0 && *n_prompt > 0;
}

/* Our greedy continuation of the prompt ids, f32 activations and KV cache. */
static bool our_gen(const char *path, const int32_t *prompt, size_t n_prompt, int32_t *gen) {
    cortiq_load_opts lo = {.threads = 2, .kv = CORTIQ_KV_F32, .act = CORTIQ_ACT_F32};
    cortiq_model *m = NULL;
    cortiq_session *s = NULL;
    cmf_err err;
    cmf_status st = cortiq_model_load(path, &lo, &m, &err);
    if (!st) st = cortiq_session_create(m, (uint32_t)(n_prompt + N_GEN), &s, &err);
    if (!st) st = cortiq_session_eval(s, prompt, n_prompt, NULL, &err);
    for (int i = 0; !st && i < N_GEN; i++) {
        gen[i] = cortiq_argmax(cortiq_session_logits(s), cortiq_model_vocab(m));
        if (i + 1 < N_GEN) st = cortiq_session_eval(s, &gen[i], 1, NULL, &err);
    }
    CHECK_MSG(st == CMF_OK, "%s: %s", path, err.msg);
    cortiq_session_free(s);
    cortiq_model_free(m);
    return st == CMF_OK;
}

static int same_prefix(const int32_t *a, const int32_t *b, size_t n) {
    size_t k = 0;
    while (k < n && a[k] == b[k])
        k++;
    return (int)k;
}

/* Both engines on one file: the same N_GEN greedy tokens. Fills ours/theirs for the caller. */
static void both_engines(const char *model, const char *writer, const char *dtype, const char *path,
                         int32_t *ours, int32_t *theirs, bool expect_equal) {
    static int32_t prompt[4096];
    size_t np = 0, ng = 0;
    bool ran = ref_gen(path, prompt, &np, theirs, &ng);
    CHECK_MSG(ran && ng == N_GEN, "%s: cmfeng gen gave %zu tokens", path, ng);
    bool mine = ran && our_gen(path, prompt, np, ours);
    int agree = mine && ng == N_GEN ? same_prefix(ours, theirs, N_GEN) : 0;
    if (expect_equal)
        CHECK_MSG(agree == N_GEN, "%s: greedy tokens part at %d of %d", path, agree, N_GEN);
    printf("interop %-8s %-22s %-4s  %s  greedy tokens equal %d/%d (prompt %zu ids)%s\n", model,
           writer, dtype,
           !expect_equal    ? "info"
           : agree == N_GEN ? "ok  "
                            : "FAIL",
           agree, N_GEN, np, expect_equal ? "" : ", cmfeng rounds activations to int8");
}

static bool verify_here(const char *path, char *msg, size_t cap) {
    cmf_file *f = NULL;
    cmf_err err;
    cmf_status st = cmf_open(path, 0, &f, &err);
    if (st) {
        snprintf(msg, cap, "%s", err.msg);
    } else {
        st = cmf_verify(f, 2, NULL, NULL, NULL);
        snprintf(msg, cap, "%s", st ? cmf_status_name(st) : "OK");
    }
    cmf_close(f);
    return st == CMF_OK;
}

/* A file its importer wrote: true when it verifies here; otherwise its own reader must refuse
 * it as well (a writer bug on that side, reported, not a disagreement between the readers). */
static bool usable_theirs(const char *model, const char *dtype, const char *path) {
    char msg[600], out[4096];
    if (verify_here(path, msg, sizeof msg)) return true;
    int rc = sh(out, sizeof out, "%s/cmfref verify %s 2>&1", g_oracle, path);
    CHECK_MSG(rc != 0, "%s: refused here (%s) but cmfref accepts it: %s", path, msg, out);
    printf("interop %-8s %-22s %-4s  refused by both readers: %s\n", model,
           "cortiq-ref import-gguf", dtype, msg);
    return false;
}

/* The `convert` path: the GGUF imported at f32, written back as a Hugging Face checkpoint
 * (`cortiq export-hf`), then converted to f16 by each implementation's `convert`. */
static void from_checkpoint(const char *model, const char *gguf) {
    char f32[128], hf[128], conv[128], refconv[128], out[4096];
    const char *bin = getenv("CORTIQ_BIN");
    bin = bin ? bin : "cortiq";
    snprintf(f32, sizeof f32, "ireal_%s_f32.cmf", model);
    snprintf(hf, sizeof hf, "ireal_%s_hf", model);
    snprintf(conv, sizeof conv, "ireal_%s_convert_f16.cmf", model);
    snprintf(refconv, sizeof refconv, "ireal_%s_refconvert_f16.cmf", model);
    int rc = sh(out, sizeof out,
                "%s import-gguf '%s' --quant f32 -o %s -q && %s export-hf %s %s && "
                "%s convert --model %s --quant f16 --output %s -q 2>&1",
                bin, gguf, f32, bin, f32, hf, bin, hf, conv);
    CHECK_MSG(rc == 0, "import-gguf / export-hf / convert: %s", out);
    remove(f32);
    rc = sh(out, sizeof out, "%s/cortiq-ref convert --model %s --quant f16 --output %s 2>&1",
            g_oracle, hf, refconv);
    CHECK_MSG(rc == 0, "cortiq-ref convert %s: %s", hf, out);
    rc = sh(out, sizeof out, "%s/cmfref verify --deep %s 2>&1", g_oracle, conv);
    CHECK_MSG(rc == 0 && !strncmp(out, "OK:", 3), "cmfref verify %s: %s", conv, out);
    static int32_t a[N_GEN], b[N_GEN];
    both_engines(model, "cortiq convert", "f16", conv, a, b, true);
    if (usable_theirs(model, "f16", refconv))
        both_engines(model, "cortiq-ref convert", "f16", refconv, a, b, true);
    sh(NULL, 0, "rm -rf %s %s %s", hf, conv, refconv);
}

static void run_model(const char *model, const char *gguf_name) {
    char cache[512], gguf[1024], ours16[128], theirs16[128], ours8[128], theirs8[128];
    char out[4096];
    cache_dir(cache, sizeof cache);
    snprintf(gguf, sizeof gguf, "%s/%s", cache, gguf_name);
    if (!file_exists(gguf))
        CHECK_MSG(sh(NULL, 0, "bash %s/scripts/fetch-models >&2", CORTIQ_SOURCE_DIR) == 0,
                  "fetch-models failed");
    CHECK_MSG(file_exists(gguf), "%s missing", gguf);
    const char *bin = getenv("CORTIQ_BIN");
    snprintf(ours16, sizeof ours16, "ireal_%s_ours_f16.cmf", model);
    snprintf(theirs16, sizeof theirs16, "ireal_%s_ref_f16.cmf", model);
    snprintf(ours8, sizeof ours8, "ireal_%s_ours_q8.cmf", model);
    snprintf(theirs8, sizeof theirs8, "ireal_%s_ref_q8.cmf", model);
    static const char *const quants[] = {"f16", "q8"};
    const char *ours_paths[] = {ours16, ours8}, *theirs_paths[] = {theirs16, theirs8};
    for (int q = 0; q < 2; q++) {
        CHECK_MSG(sh(out, sizeof out, "%s import-gguf '%s' --quant %s -o %s -q 2>&1",
                     bin ? bin : "cortiq", gguf, quants[q], ours_paths[q]) == 0,
                  "cortiq import-gguf: %s", out);
        int rc = sh(out, sizeof out, "%s/cmfref verify --deep %s 2>&1", g_oracle, ours_paths[q]);
        CHECK_MSG(rc == 0 && !strncmp(out, "OK:", 3), "cmfref verify %s: %s", ours_paths[q], out);
        CHECK_MSG(sh(out, sizeof out, "%s/cortiq-ref import-gguf '%s' --quant %s --output %s 2>&1",
                     g_oracle, gguf, quants[q], theirs_paths[q]) == 0,
                  "cortiq-ref import-gguf: %s", out);
    }
    static int32_t a[N_GEN], b[N_GEN], c[N_GEN], d[N_GEN];
    /* f16: both engines compute in f32 on the same weights */
    both_engines(model, "cortiq import-gguf", "f16", ours16, a, b, true);
    if (usable_theirs(model, "f16", theirs16))
        both_engines(model, "cortiq-ref import-gguf", "f16", theirs16, a, b, true);
    /* q8: each engine gives the same tokens on the file of either importer */
    both_engines(model, "cortiq import-gguf", "q8", ours8, a, b, false);
    if (usable_theirs(model, "q8", theirs8)) {
        both_engines(model, "cortiq-ref import-gguf", "q8", theirs8, c, d, false);
        int ours_same = same_prefix(a, c, N_GEN), theirs_same = same_prefix(b, d, N_GEN);
        CHECK_MSG(ours_same == N_GEN && theirs_same == N_GEN,
                  "%s q8: our engine agrees on %d tokens across the two files, cmfeng on %d", model,
                  ours_same, theirs_same);
        printf("interop %-8s q8 files of both importers: cortiq %d/%d, cmfeng %d/%d tokens equal\n",
               model, ours_same, N_GEN, theirs_same, N_GEN);
    }
    remove(ours16), remove(theirs16), remove(ours8), remove(theirs8);
    from_checkpoint(model, gguf);
}

int main(void) {
    if (!oracle_find()) return TEST_SKIPPED;
    run_model("smollm2", "smollm2-135m-instruct-q4_1.gguf");
    run_model("gemma3", "gemma3-270m-q4_k_m.gguf");
    TEST_DONE();
}
