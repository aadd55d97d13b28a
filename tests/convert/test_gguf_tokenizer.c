/* test_gguf_tokenizer.c - tokenizer.json built from GGUF tokenizer metadata.
 *
 * Unit part: a hand-built SentencePiece-style vocabulary gives the expected merges, added
 * tokens and components; unknown models / pre-tokenizers and invalid UTF-8 are refused.
 * Equivalence part (each skipped with a message when its input is absent): GGUF metadata is
 * written from the real HF tokenizer.json of Qwen3 and Llama 3.1 (shared/tokenizers, the way
 * llama.cpp's converter writes it), and the real Gemma 3 GGUF from scripts/fetch-models is
 * used as is; the generated tokenizer.json must encode sample texts to the same ids as the
 * real HF tokenizer.json, both loaded in cortiq's tokenizer. */
#include <jansson.h>

#include "common/test.h"
#include "convert_test_util.h"
#include "gguf_builder.h"
#include "cortiq/gguf.h"
#include "cortiq/tokenizer.h"

static json_t *gen_json(const gw *w, cmf_status want, const char *want_msg) {
    cmf_gguf *g = NULL;
    cmf_err err;
    CHECK_STATUS(cmf_gguf_open_memory(w->b, w->n, "tok.gguf", &g, &t_err_), CMF_OK);
    if (!g) return NULL;
    char *text = NULL;
    size_t len = 0;
    cmf_status st = cmf_gguf_tokenizer_json(g, &text, &len, &err);
    CHECK_MSG(st == want, "got %s (%s)", cmf_status_name(st), err.msg);
    if (want_msg)
        CHECK_MSG(st && strstr(err.msg, want_msg), "message '%s' lacks '%s'", err.msg, want_msg);
    cmf_gguf_close(g);
    json_t *j = NULL;
    if (text) {
        json_error_t je;
        j = json_loadb(text, len, 0, &je);
        CHECK_MSG(j != NULL, "generated JSON does not parse: %s", je.text);
    }
    free(text);
    return j;
}

static void test_spm_small(void) {
    /* pieces: "ab" = a+b, "abc" = ab+c, "▁▁" user-defined (written with spaces by llama.cpp) */
    const char *toks[] = {"<unk>", "<s>", "</s>", "<0x41>",       "a",    "b", "c",
                          "ab",    "abc", "  ",   "\xe2\x96\x81", "<ctl>"};
    const int32_t types[] = {2, 3, 3, 6, 1, 1, 1, 1, 1, 4, 1, 3};
    size_t n = sizeof toks / sizeof *toks;
    gw w;
    w_begin(&w);
    kv_str(&w, "tokenizer.ggml.model", "llama");
    kv_strs(&w, "tokenizer.ggml.tokens", toks, n);
    kv_i32s(&w, "tokenizer.ggml.token_type", types, n);
    kv_f32s(&w, "tokenizer.ggml.scores", n);
    kv_u32(&w, "tokenizer.ggml.bos_token_id", 1);
    kv_u32(&w, "tokenizer.ggml.unknown_token_id", 0);
    kv_bool(&w, "tokenizer.ggml.add_space_prefix", false);
    w_end(&w);
    json_t *j = gen_json(&w, CMF_OK, NULL);
    if (j) {
        json_t *model = json_object_get(j, "model"), *merges = json_object_get(model, "merges");
        CHECK(strcmp(json_string_value(json_object_get(model, "type")), "BPE") == 0);
        CHECK(json_is_true(json_object_get(model, "byte_fallback")));
        CHECK(strcmp(json_string_value(json_object_get(model, "unk_token")), "<unk>") == 0);
        CHECK(json_integer_value(json_object_get(json_object_get(model, "vocab"),
                                                 "\xe2\x96\x81\xe2\x96\x81")) == 9);
        /* user-defined first, then in merged-piece order: (▁,▁) (a,b) (ab,c) */
        CHECK_MSG(json_array_size(merges) == 3, "%zu merges", json_array_size(merges));
        const char *want[3][2] = {{"\xe2\x96\x81", "\xe2\x96\x81"}, {"a", "b"}, {"ab", "c"}};
        for (size_t i = 0; i < 3 && i < json_array_size(merges); i++) {
            json_t *m = json_array_get(merges, i);
            CHECK_MSG(strcmp(json_string_value(json_array_get(m, 0)), want[i][0]) == 0 &&
                          strcmp(json_string_value(json_array_get(m, 1)), want[i][1]) == 0,
                      "merge %zu", i);
        }
        json_t *added = json_object_get(j, "added_tokens");
        CHECK(json_array_size(added) == 5); /* unk, s, /s, user-defined, ctl */
        CHECK(json_is_true(json_object_get(json_array_get(added, 0), "special")));
        CHECK(json_is_false(json_object_get(json_array_get(added, 3), "special")));
        CHECK(strcmp(json_string_value(json_object_get(json_object_get(j, "normalizer"), "type")),
                     "Replace") == 0);
        json_t *single = json_object_get(json_object_get(j, "post_processor"), "single");
        CHECK(json_array_size(single) == 2); /* <s> A: add_bos_token defaults to true */
        cmf_tokenizer *tok = NULL;
        char *text = json_dumps(j, 0);
        CHECK_STATUS(cmf_tokenizer_load(text, strlen(text), &tok, &t_err_), CMF_OK);
        if (tok) {
            int32_t *ids = NULL;
            size_t nid = 0;
            CHECK_STATUS(cmf_tokenizer_encode(tok, "abc  ab", 7, true, &ids, &nid, &t_err_),
                         CMF_OK);
            int32_t expect[] = {1, 8, 9, 7};
            CHECK_MSG(nid == 4 && ids && memcmp(ids, expect, sizeof expect) == 0,
                      "encoded to %zu ids", nid);
            free(ids);
        }
        cmf_tokenizer_free(tok);
        free(text);
        json_decref(j);
    }
    free(w.b);

    /* refusals: unknown model, unknown pre, invalid UTF-8, missing merges */
    w_begin(&w);
    kv_str(&w, "tokenizer.ggml.model", "bert");
    w_end(&w);
    gen_json(&w, CMF_E_UNSUPPORTED, "bert");
    free(w.b);
    const char *bad[] = {"a", "\xff"};
    w_begin(&w);
    kv_str(&w, "tokenizer.ggml.model", "llama");
    kv_strs(&w, "tokenizer.ggml.tokens", bad, 2);
    w_end(&w);
    gen_json(&w, CMF_E_PARSE, "token 1");
    free(w.b);
    w_begin(&w);
    kv_str(&w, "tokenizer.ggml.model", "gpt2");
    kv_str(&w, "tokenizer.ggml.pre", "mystery-pre");
    kv_strs(&w, "tokenizer.ggml.tokens", bad, 1);
    w_end(&w);
    gen_json(&w, CMF_E_UNSUPPORTED, "mystery-pre");
    free(w.b);
    w_begin(&w);
    kv_str(&w, "tokenizer.ggml.model", "gpt2");
    kv_strs(&w, "tokenizer.ggml.tokens", bad, 1);
    w_end(&w);
    gen_json(&w, CMF_E_NOT_FOUND, "merges");
    free(w.b);
}

static const char *k_texts[] = {
    "Hello world!",
    "  two  spaces   three    four",
    "\n\n\nnewlines\t\ttabs\r\n",
    "\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e\xe3\x81\xae\xe3\x83\x86\xe3\x82\xad\xe3\x82\xb9\xe3\x83\x88",
    "emoji \xf0\x9f\xa4\x96\xf0\x9f\x9a\x80 done",
    "na\xc3\xafve caf\xc3\xa9 r\xc3\xa9sum\xc3\xa9",
    "1234567890 3.14159 2026-11-30",
    "def f(x):\n    return x*2  # comment\n",
    "I'm, you're, they'll; DON'T won't",
    "<|im_start|>user\nWhat's 2+2?<|im_end|>\n<|im_start|>assistant\n",
    "<start_of_turn>user\nhi<end_of_turn>\n<start_of_turn>model\n",
    "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nhey<|eot_id|>",
    "   ",
    "trailing   ",
    "\xce\xa9\xe2\x89\x88\xc3\xa7\xe2\x88\x9a\xe2\x88\xab \xc2\xb5\xe2\x89\xa4\xe2\x89\xa5\xc3\xb7",
    "The quick brown fox jumps over the lazy dog. THE QUICK BROWN FOX!!! ...",
    "https://example.com/path?query=1&x=y#frag",
};

/* Encode every sample with both tokenizers; count the texts whose ids differ. */
static void compare(const char *what, const char *gen, size_t gen_len, const char *ref_path) {
    cmf_tokenizer *a = NULL, *b = NULL;
    cmf_err err;
    cmf_status st = cmf_tokenizer_load(gen, gen_len, &a, &err);
    CHECK_MSG(st == CMF_OK, "%s: generated tokenizer.json refused: %s", what, err.msg);
    st = cmf_tokenizer_load_file(ref_path, &b, &err);
    CHECK_MSG(st == CMF_OK, "%s: %s", what, err.msg);
    size_t diffs = 0, n = sizeof k_texts / sizeof *k_texts;
    for (size_t i = 0; a && b && i < n; i++)
        for (int sp = 0; sp < 2; sp++) {
            int32_t *x = NULL, *y = NULL;
            size_t nx = 0, ny = 0;
            cmf_status sx =
                cmf_tokenizer_encode(a, k_texts[i], strlen(k_texts[i]), sp, &x, &nx, NULL);
            cmf_status sy =
                cmf_tokenizer_encode(b, k_texts[i], strlen(k_texts[i]), sp, &y, &ny, NULL);
            if (sx != sy || nx != ny || (nx && memcmp(x, y, nx * sizeof *x) != 0)) {
                diffs++;
                fprintf(stderr, "%s: text %zu (special=%d) encodes differently\n", what, i, sp);
            }
            free(x);
            free(y);
        }
    CHECK_MSG(diffs == 0, "%s: %zu encodings differ", what, diffs);
    printf("%s: %zu texts compared, %zu differ\n", what, n * 2, diffs);
    cmf_tokenizer_free(a);
    cmf_tokenizer_free(b);
}

/* GGUF tokenizer metadata written from an HF tokenizer.json, as llama.cpp's converter does. */
static void from_hf(const char *what, const char *pre, const char *bos, bool add_bos) {
    char path[1024];
    snprintf(path, sizeof path, "%s/../shared/tokenizers/%s/tokenizer.json", CORTIQ_SOURCE_DIR,
             what);
    json_error_t je;
    json_t *t = json_load_file(path, 0, &je);
    if (!t) {
        printf("SKIP: %s unreadable (%s)\n", path, je.text);
        return;
    }
    json_t *vocab = json_object_get(json_object_get(t, "model"), "vocab");
    json_t *merges = json_object_get(json_object_get(t, "model"), "merges");
    json_t *added = json_object_get(t, "added_tokens");
    size_t n = 0;
    const char *k;
    json_t *v;
    json_object_foreach(vocab, k, v) if ((size_t)json_integer_value(v) + 1 > n) n =
        (size_t)json_integer_value(v) + 1;
    size_t i;
    json_array_foreach(added, i, v) {
        size_t id = (size_t)json_integer_value(json_object_get(v, "id"));
        if (id + 1 > n) n = id + 1;
    }
    const char **toks = calloc(n, sizeof *toks);
    int32_t *types = calloc(n, sizeof *types);
    char **pads = calloc(n, sizeof *pads);
    json_object_foreach(vocab, k, v) {
        toks[json_integer_value(v)] = k;
        types[json_integer_value(v)] = 1;
    }
    json_array_foreach(added, i, v) {
        size_t id = (size_t)json_integer_value(json_object_get(v, "id"));
        toks[id] = json_string_value(json_object_get(v, "content"));
        types[id] = json_is_true(json_object_get(v, "special")) ? 3 : 4;
    }
    for (i = 0; i < n; i++)
        if (!toks[i]) {
            pads[i] = malloc(32);
            snprintf(pads[i], 32, "[PAD%zu]", i);
            toks[i] = pads[i];
            types[i] = 5;
        }
    size_t nm = json_array_size(merges);
    const char **ms = calloc(nm ? nm : 1, sizeof *ms);
    char **owned = calloc(nm ? nm : 1, sizeof *owned);
    json_array_foreach(merges, i, v) {
        if (json_is_string(v)) {
            ms[i] = json_string_value(v);
        } else {
            const char *l = json_string_value(json_array_get(v, 0)),
                       *r = json_string_value(json_array_get(v, 1));
            owned[i] = malloc(strlen(l) + strlen(r) + 2);
            sprintf(owned[i], "%s %s", l, r);
            ms[i] = owned[i];
        }
    }
    gw w;
    w_begin(&w);
    kv_str(&w, "tokenizer.ggml.model", "gpt2");
    kv_str(&w, "tokenizer.ggml.pre", pre);
    kv_strs(&w, "tokenizer.ggml.tokens", toks, n);
    kv_i32s(&w, "tokenizer.ggml.token_type", types, n);
    kv_strs(&w, "tokenizer.ggml.merges", ms, nm);
    kv_bool(&w, "tokenizer.ggml.add_bos_token", add_bos);
    json_t *bid = json_object_get(vocab, bos);
    int64_t bos_id = -1;
    json_array_foreach(added, i,
                       v) if (strcmp(json_string_value(json_object_get(v, "content")), bos) == 0)
        bos_id = json_integer_value(json_object_get(v, "id"));
    if (bos_id < 0 && bid) bos_id = json_integer_value(bid);
    if (bos_id >= 0) kv_u32(&w, "tokenizer.ggml.bos_token_id", (uint32_t)bos_id);
    w_end(&w);
    cmf_gguf *g = NULL;
    CHECK_STATUS(cmf_gguf_open_memory(w.b, w.n, what, &g, &t_err_), CMF_OK);
    char *gen = NULL;
    size_t len = 0;
    if (g) CHECK_STATUS(cmf_gguf_tokenizer_json(g, &gen, &len, &t_err_), CMF_OK);
    if (gen) compare(what, gen, len, path);
    free(gen);
    cmf_gguf_close(g);
    free(w.b);
    for (i = 0; i < nm; i++)
        free(owned[i]);
    for (i = 0; i < n; i++)
        free(pads[i]);
    free(owned);
    free(ms);
    free(pads);
    free(toks);
    free(types);
    json_decref(t);
}

static void gemma_real(void) {
    char path[1024], ref[1024];
    const char *env = getenv("CORTIQ_MODEL_CACHE");
    if (env && *env)
        snprintf(path, sizeof path, "%s/gemma3-270m-q4_k_m.gguf", env);
    else
        snprintf(path, sizeof path, "%s/.cache/cortiq/models/gemma3-270m-q4_k_m.gguf",
                 getenv("HOME") ? getenv("HOME") : ".");
    snprintf(ref, sizeof ref, "%s/../shared/tokenizers/gemma3/tokenizer.json", CORTIQ_SOURCE_DIR);
    FILE *f = fopen(path, "rb"), *r = fopen(ref, "rb");
    if (f) fclose(f);
    if (r) fclose(r);
    if (!f || !r) {
        printf("SKIP: gemma3 comparison needs %s (scripts/fetch-models) and %s\n", path, ref);
        return;
    }
    cmf_gguf *g = NULL;
    CHECK_STATUS(cmf_gguf_open(path, &g, &t_err_), CMF_OK);
    char *gen = NULL;
    size_t len = 0;
    if (g) CHECK_STATUS(cmf_gguf_tokenizer_json(g, &gen, &len, &t_err_), CMF_OK);
    if (gen) compare("gemma3", gen, len, ref);
    free(gen);
    cmf_gguf_close(g);
}

int main(void) {
    test_spm_small();
    from_hf("qwen3", "qwen2", "<|endoftext|>", false);
    from_hf("llama3_1", "llama-bpe", "<|begin_of_text|>", true);
    gemma_real();
    TEST_DONE();
}
