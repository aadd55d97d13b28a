/* test_tok_api.c - the tokenizer API beyond parity: lookups, refusals with clear errors, bad
 * JSON, invalid UTF-8 input, the streaming decoder on split multi-byte characters, and the
 * added-token rules (lstrip/rstrip/single_word) on a small hand-written tokenizer. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/test.h"
#include "text/tok_test_json.h"
#include "cortiq/tokenizer.h"

static size_t enc(const cmf_tokenizer *t, const char *s, bool sp, int32_t *out, size_t cap) {
    int32_t *ids = NULL;
    size_t n = 0;
    cmf_err err;
    if (cmf_tokenizer_encode(t, s, strlen(s), sp, &ids, &n, &err) != CMF_OK) return (size_t)-1;
    for (size_t i = 0; i < n && i < cap; i++)
        out[i] = ids[i];
    free(ids);
    return n;
}

static void test_byte_level(void) {
    char *j = tok_test_byte_level_json();
    cmf_tokenizer *t = NULL;
    cmf_err err;
    cmf_status ls = cmf_tokenizer_load(j, strlen(j), &t, &err);
    CHECK_MSG(ls == CMF_OK, "%s", err.msg);
    free(j);
    if (!t) return;
    CHECK_EQ_U64(cmf_tokenizer_vocab_size(t), 304);
    CHECK(cmf_tokenizer_token_to_id(t, "hello", 5) == 259);
    CHECK(cmf_tokenizer_token_to_id(t, "<s>", 3) == 300);
    CHECK(cmf_tokenizer_token_to_id(t, "nope", 4) == -1);
    size_t len = 0;
    const char *s = cmf_tokenizer_id_to_token(t, 258, &len);
    CHECK(s && len == 4 && !memcmp(s, "hell", 4));
    CHECK(cmf_tokenizer_id_to_token(t, 290, &len) == NULL); /* a hole in the id space */
    CHECK(cmf_tokenizer_id_to_token(t, -1, &len) == NULL);
    CHECK(cmf_tokenizer_is_special(t, 300) && !cmf_tokenizer_is_special(t, 301));

    int32_t v[32];
    CHECK(enc(t, "hello", true, v, 32) == 2 && v[0] == 300 && v[1] == 259);
    CHECK(enc(t, "hello", false, v, 32) == 1 && v[0] == 259);
    CHECK(enc(t, "", true, v, 32) == 1 && v[0] == 300);
    CHECK(enc(t, "", false, v, 32) == 0);
    /* " w" merges to Ġw (260); "hello world" = hello Ġw o r l d */
    CHECK(enc(t, "hello world", false, v, 32) == 6 && v[0] == 259 && v[1] == 260);
    /* lstrip eats the spaces before <L>; rstrip those after <R> */
    CHECK(enc(t, "a  <L>b", false, v, 32) == 3 && v[0] == 'a' && v[1] == 301 && v[2] == 'b');
    CHECK(enc(t, "a<R>  b", false, v, 32) == 3 && v[0] == 'a' && v[1] == 302 && v[2] == 'b');
    /* single_word: "cat" only matches as a whole word */
    CHECK(enc(t, "cat", false, v, 32) == 1 && v[0] == 303);
    CHECK(enc(t, "concat", false, v, 32) == 6);
    /* invalid UTF-8 is encoded as U+FFFD (EF BF BD -> ï ¿ ½ byte chars) */
    size_t nb = enc(t, "a\xff", false, v, 32);
    CHECK(nb == 4 && v[0] == 'a' && v[1] == 0xEF && v[2] == 0xBF && v[3] == 0xBD);

    /* decode: special skipping, unknown ids ignored */
    int32_t ids[] = {300, 259, 260, 111, 114, 108, 100, 99999};
    char *txt = NULL;
    size_t tl = 0;
    CHECK(cmf_tokenizer_decode(t, ids, 8, false, &txt, &tl, &err) == CMF_OK);
    CHECK(txt && tl == 14 && !strcmp(txt, "<s>hello world"));
    free(txt);
    CHECK(cmf_tokenizer_decode(t, ids, 8, true, &txt, &tl, &err) == CMF_OK);
    CHECK(txt && !strcmp(txt, "hello world"));
    free(txt);

    /* streaming: "é" = C3 A9 arrives as two byte tokens; text only once complete */
    cmf_detok_stream *st = NULL;
    CHECK(cmf_detok_stream_create(t, false, &st, &err) == CMF_OK);
    const char *piece;
    size_t pl;
    CHECK(cmf_detok_stream_push(st, 259, &piece, &pl, &err) == CMF_OK && pl == 5 &&
          !memcmp(piece, "hello", 5));
    CHECK(cmf_detok_stream_push(st, 0xC3, &piece, &pl, &err) == CMF_OK && pl == 0);
    CHECK(cmf_detok_stream_push(st, 0xA9, &piece, &pl, &err) == CMF_OK && pl == 2 &&
          !memcmp(piece, "\xC3\xA9", 2));
    /* many more ids: the window re-bases and the text stays exact */
    size_t total = 0;
    for (int i = 0; i < 100; i++) {
        CHECK(cmf_detok_stream_push(st, 260, &piece, &pl, &err) == CMF_OK);
        total += pl;
    }
    CHECK_EQ_U64(total, 200);
    cmf_detok_stream_free(st);
    cmf_detok_stream_free(NULL);

    /* API misuse */
    int32_t *o = NULL;
    size_t on = 0;
    CHECK(cmf_tokenizer_encode(NULL, "x", 1, false, &o, &on, &err) == CMF_E_INVALID_ARG);
    CHECK(cmf_tokenizer_encode(t, NULL, 3, false, &o, &on, &err) == CMF_E_INVALID_ARG);
    CHECK(cmf_tokenizer_decode(t, NULL, 2, false, &txt, &tl, &err) == CMF_E_INVALID_ARG);
    cmf_tokenizer_free(t);
    cmf_tokenizer_free(NULL);
}

static void expect_refusal(const char *json, cmf_status want, const char *needle) {
    cmf_tokenizer *t = NULL;
    cmf_err err;
    cmf_err_clear(&err);
    cmf_status st = cmf_tokenizer_load(json, strlen(json), &t, &err);
    CHECK_MSG(st == want, "got %s (%s) for %.60s", cmf_status_name(st), err.msg, json);
    CHECK_MSG(strstr(err.msg, needle) != NULL, "message \"%s\" lacks \"%s\"", err.msg, needle);
    CHECK(t == NULL);
    cmf_tokenizer_free(t);
}

static void test_refusals(void) {
    expect_refusal("{\"model\":{\"type\":\"Unigram\",\"vocab\":[]}}", CMF_E_PARSE, "Unigram");
    expect_refusal("{\"model\":{\"type\":\"Unigram\",\"unk_id\":5,\"vocab\":[[\"a\",-1.0]]}}",
                   CMF_E_PARSE, "unk_id");
    expect_refusal("{\"model\":{\"type\":\"Hypothetical\",\"vocab\":{}}}", CMF_E_UNSUPPORTED,
                   "Hypothetical");
    expect_refusal("{\"model\":{\"type\":\"WordPiece\",\"vocab\":{\"a\":0}}}", CMF_E_PARSE,
                   "[UNK]");
    expect_refusal("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[]},"
                   "\"normalizer\":{\"type\":\"Precompiled\",\"precompiled_charsmap\":\"\"}}",
                   CMF_E_UNSUPPORTED, "Precompiled");
    expect_refusal("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[]},"
                   "\"pre_tokenizer\":{\"type\":\"UnicodeScripts\"}}",
                   CMF_E_UNSUPPORTED, "UnicodeScripts");
    expect_refusal("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[\"a b\"]}}",
                   CMF_E_PARSE, "not in the vocabulary");
    expect_refusal("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":-3},\"merges\":[]}}", CMF_E_PARSE,
                   "id must be");
    expect_refusal(
        "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[]},"
        "\"pre_tokenizer\":{\"type\":\"Split\",\"pattern\":{\"Regex\":\"(\"},\"behavior\":\"Isolated\"}}",
        CMF_E_PARSE, "does not compile");
    expect_refusal(
        "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[]},"
        "\"pre_tokenizer\":{\"type\":\"Split\",\"pattern\":{\"String\":\"x\"},\"behavior\":\"Sideways\"}}",
        CMF_E_PARSE, "behavior");
    expect_refusal(
        "{\"model\":{\"type\":\"BPE\",\"dropout\":0.1,\"vocab\":{\"a\":0},\"merges\":[]}}",
        CMF_E_UNSUPPORTED, "dropout");
    expect_refusal("{\"model\":", CMF_E_PARSE, "line 1");
    expect_refusal("{\"a\":\"\\ud800\"}", CMF_E_PARSE, "surrogate");
    expect_refusal("[1,2]", CMF_E_PARSE, "object");
    expect_refusal("{\"model\":{\"type\":\"BPE\",\"vocab\":{},\"merges\":[]}}", CMF_E_PARSE,
                   "empty vocabulary");
    cmf_tokenizer *t = NULL;
    CHECK(cmf_tokenizer_load(NULL, 0, &t, NULL) == CMF_E_INVALID_ARG);
    CHECK(cmf_tokenizer_load_file("/nonexistent/tokenizer.json", &t, NULL) == CMF_E_IO);
    /* a vocabulary key with U+0000 loads (jansson could not hold it) */
    const char *nul =
        "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"\\u0000\":0,\"a\":1},\"merges\":[]}}";
    CHECK(cmf_tokenizer_load(nul, strlen(nul), &t, NULL) == CMF_OK);
    int32_t v[4];
    CHECK(t && enc(t, "a", false, v, 4) == 1 && v[0] == 1);
    size_t l = 9;
    CHECK(t && cmf_tokenizer_id_to_token(t, 0, &l) && l == 1);
    cmf_tokenizer_free(t);
}

/* One loaded tokenizer encodes from several threads at once with the same results. */
typedef struct par_job {
    const cmf_tokenizer *tok;
    const int32_t *want;
    size_t nwant;
    int bad;
} par_job;

static const char PAR_TEXT[] =
    "It's 2024: hello world, hello again!\n\n  \xE4\xBD\xA0\xE5\xA5\xBD <s> cat";

static void *par_worker(void *arg) {
    par_job *j = arg;
    for (int r = 0; r < 200; r++) {
        int32_t *ids = NULL;
        size_t n = 0;
        if (cmf_tokenizer_encode(j->tok, PAR_TEXT, strlen(PAR_TEXT), true, &ids, &n, NULL) !=
                CMF_OK ||
            n != j->nwant || memcmp(ids, j->want, n * sizeof *ids) != 0)
            j->bad++;
        free(ids);
    }
    return NULL;
}

static void test_threads(void) {
    char *j = tok_test_byte_level_json();
    cmf_tokenizer *t = NULL;
    CHECK(j && cmf_tokenizer_load(j, strlen(j), &t, NULL) == CMF_OK);
    free(j);
    if (!t) return;
    int32_t *want = NULL;
    size_t nwant = 0;
    CHECK(cmf_tokenizer_encode(t, PAR_TEXT, strlen(PAR_TEXT), true, &want, &nwant, NULL) ==
              CMF_OK &&
          nwant > 10);
    pthread_t th[4];
    par_job jobs[4];
    for (int i = 0; i < 4; i++) {
        jobs[i] = (par_job){t, want, nwant, 0};
        CHECK(pthread_create(&th[i], NULL, par_worker, &jobs[i]) == 0);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        CHECK_MSG(jobs[i].bad == 0, "thread %d: %d encodes differed", i, jobs[i].bad);
    }
    free(want);
    cmf_tokenizer_free(t);
}

int main(void) {
    test_byte_level();
    test_threads();
    test_refusals();
    TEST_DONE();
}
