/* test_tok_json.c - the tokenizer's JSON reader (tok_json.h) on its load fast paths: strings
 * with and without escapes (the escape-free prefix is scanned without copying), \uXXXX and
 * surrogate pairs, invalid UTF-8 before and after an escape, integers (parsed without strtoll)
 * against independently written values, malformed input, and duplicate vocabulary keys and
 * batched vocabulary inserts through cmf_tokenizer_load. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/test.h"
#include "cortiq/tokenizer.h"
#include "text/tok_json.h"

/* Parse `json` (an object {"k": value}) and check that value is the string want[0..wlen). */
static void expect_str(const char *json, const char *want, size_t wlen) {
    tj_doc d;
    cmf_err err;
    cmf_err_clear(&err);
    cmf_status st = tj_parse(json, strlen(json), &d, &err);
    CHECK_MSG(st == CMF_OK, "%s: %s", json, err.msg);
    if (st) return;
    size_t n = 0;
    const char *s = tj_str(tj_get(tj_root(&d), "k"), &n);
    CHECK_MSG(s && n == wlen && memcmp(s, want, wlen) == 0, "%s: got %zu bytes", json, s ? n : 0);
    tj_free(&d);
}

static void expect_bad(const char *json, size_t len, const char *needle) {
    tj_doc d;
    cmf_err err;
    cmf_err_clear(&err);
    cmf_status st = tj_parse(json, len, &d, &err);
    CHECK_MSG(st == CMF_E_PARSE, "%.40s: got %s", json, cmf_status_name(st));
    CHECK_MSG(strstr(err.msg, needle) != NULL, "%.40s: message \"%s\" lacks \"%s\"", json, err.msg,
              needle);
}

static void test_strings(void) {
    expect_str("{\"k\":\"\"}", "", 0);
    expect_str("{\"k\":\"plain ascii\"}", "plain ascii", 11);
    /* escapes at the start, in the middle and at the end of the escape-free prefix */
    expect_str("{\"k\":\"\\nabc\"}", "\nabc", 4);
    expect_str("{\"k\":\"ab\\\"cd\"}", "ab\"cd", 5);
    expect_str("{\"k\":\"abcd\\\\\"}", "abcd\\", 5);
    expect_str("{\"k\":\"a\\/b\\b\\f\\r\\t\"}", "a/b\b\f\r\t", 7);
    /* \u escapes: one, two and three UTF-8 bytes, U+0000, and a surrogate pair (U+1F600) */
    expect_str("{\"k\":\"x\\u0041\\u00e9\\u20AC\"}", "xA\xC3\xA9\xE2\x82\xAC", 7);
    expect_str("{\"k\":\"\\u0000z\"}", "\0z", 2);
    expect_str("{\"k\":\"pre\\ud83d\\ude00post\"}", "pre\xF0\x9F\x98\x80post", 11);
    /* raw UTF-8 before and after an escape */
    expect_str("{\"k\":\"\xC3\xA9\\t\xE2\x82\xAC\"}", "\xC3\xA9\t\xE2\x82\xAC", 6);
    /* the first member of a repeated key is the one tj_get returns */
    expect_str("{\"k\":\"first\",\"k\":\"second\"}", "first", 5);
}

static void test_malformed(void) {
    expect_bad("{\"k\":\"\\ud800\"}", 14, "lone surrogate");
    expect_bad("{\"k\":\"\\udc00x\"}", 15, "lone surrogate");
    expect_bad("{\"k\":\"\\ud83d\\u0041\"}", 20, "lone surrogate");
    expect_bad("{\"k\":\"\\u12G4\"}", 14, "bad \\u escape");
    expect_bad("{\"k\":\"\\u12\"}", 12, "escape");
    expect_bad("{\"k\":\"\\q\"}", 10, "bad escape");
    expect_bad("{\"k\":\"abc", 9, "unterminated string");
    expect_bad("{\"k\":\"abc\\", 10, "unterminated escape");
    expect_bad("{\"k\":\"a\tb\"}", 11, "control character");
    /* invalid UTF-8 in the escape-free prefix, and after an escape */
    expect_bad("{\"k\":\"ab\xFF\"}", 11, "invalid UTF-8");
    expect_bad("{\"k\":\"\\n\xC3\"}", 11, "invalid UTF-8");
    expect_bad("{\"k\":1.}", 8, "bad number");
    expect_bad("{\"k\":-}", 7, "bad number");
    expect_bad("{\"k\":[1,]}", 10, "bad number");
    expect_bad("{\"k\":tru}", 9, "invalid literal");
    expect_bad("{\"k\":1} x", 9, "trailing characters");
    expect_bad("{\"k\" 1}", 7, "expected ':'");
    expect_bad("{\"k\":1", 6, "unterminated container");
    /* an embedded NUL ends nothing: it is a bad value, not the end of the input */
    expect_bad("{\"k\":1}\0", 8, "trailing characters");
}

/* Integers of up to 18 characters (sign included) are exact; longer ones are numbers, not tj_int.
 */
static void test_integers(void) {
    static const struct {
        const char *text;
        int64_t want;
    } cases[] = {
        {"0", 0},
        {"-0", 0},
        {"7", 7},
        {"-42", -42},
        {"262144", 262144},
        {"999999999999999999", 999999999999999999LL},
        {"-99999999999999999", -99999999999999999LL},
        {"123456789012345678", 123456789012345678LL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char json[96];
        snprintf(json, sizeof json, "{\"k\":%s}", cases[i].text);
        tj_doc d;
        CHECK(tj_parse(json, strlen(json), &d, NULL) == CMF_OK);
        int64_t v = 1;
        CHECK_MSG(tj_int(tj_get(tj_root(&d), "k"), &v) && v == cases[i].want, "%s read as %lld",
                  cases[i].text, (long long)v);
        tj_free(&d);
    }
    const char *non_int[] = {"1234567890123456789", "-999999999999999999", "1.0", "1e3", "-0.5"};
    const double want_num[] = {1234567890123456789.0, -999999999999999999.0, 1.0, 1000.0, -0.5};
    for (size_t i = 0; i < sizeof non_int / sizeof non_int[0]; i++) {
        char json[96];
        snprintf(json, sizeof json, "{\"k\":%s}", non_int[i]);
        tj_doc d;
        CHECK(tj_parse(json, strlen(json), &d, NULL) == CMF_OK);
        int64_t v;
        tjv k = tj_get(tj_root(&d), "k");
        CHECK_MSG(!tj_int(k, &v) && tj_num(k) == want_num[i], "%s", non_int[i]);
        tj_free(&d);
    }
}

/* A vocabulary larger than one insert batch, keys with escapes, and a repeated key (the last
 * id wins, as in HF's map). Every token must map to the id written next to it. */
static void test_vocab_load(void) {
    size_t cap = 1 << 16, len = 0;
    char *j = malloc(cap);
    CHECK(j != NULL);
    if (!j) return;
    len += (size_t)snprintf(j + len, cap - len,
                            "{\"model\":{\"type\":\"BPE\",\"merges\":[],\"vocab\":{");
    for (int i = 0; i < 300; i++) /* 300 > one batch; key i is "t<i>", long ones past 8 bytes */
        len += (size_t)snprintf(j + len, cap - len, "\"%st%d\":%d,",
                                i % 3 ? "" : "long-prefix-\\u00e9-", i, i);
    len += (size_t)snprintf(j + len, cap - len, "\"t5\":300,\"\\ud83d\\ude00\":301}}}");
    cmf_tokenizer *t = NULL;
    cmf_err err;
    cmf_err_clear(&err);
    CHECK_MSG(cmf_tokenizer_load(j, len, &t, &err) == CMF_OK, "%s", err.msg);
    free(j);
    if (!t) return;
    for (int i = 0; i < 300; i++) {
        char key[64];
        int n = snprintf(key, sizeof key, "%st%d", i % 3 ? "" : "long-prefix-\xC3\xA9-", i);
        int32_t want = i == 5 ? 300 : i;
        CHECK_MSG(cmf_tokenizer_token_to_id(t, key, (size_t)n) == want, "token %s", key);
    }
    CHECK(cmf_tokenizer_token_to_id(t, "\xF0\x9F\x98\x80", 4) == 301);
    CHECK(cmf_tokenizer_token_to_id(t, "t300", 4) == -1);
    size_t l = 0;
    const char *s = cmf_tokenizer_id_to_token(t, 300, &l);
    CHECK(s && l == 2 && memcmp(s, "t5", 2) == 0);
    CHECK(cmf_tokenizer_id_to_token(t, 5, &l) == NULL); /* its key now maps to 300 */
    cmf_tokenizer_free(t);
}

/* cmf_tokenizer_load_file reads the whole file (sized up front) the same as the bytes given. */
static void test_load_file(void) {
    const char *json = "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":1,\"ab\":2},"
                       "\"merges\":[[\"a\",\"b\"]]}}";
    char path[] = "/tmp/cortiq_tok_json_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    if (fd < 0) return;
    FILE *f = fdopen(fd, "wb");
    CHECK(f && fwrite(json, 1, strlen(json), f) == strlen(json));
    if (f) fclose(f);
    cmf_tokenizer *t = NULL;
    CHECK(cmf_tokenizer_load_file(path, &t, NULL) == CMF_OK);
    remove(path);
    int32_t *ids = NULL;
    size_t n = 0;
    CHECK(t && cmf_tokenizer_encode(t, "ab", 2, false, &ids, &n, NULL) == CMF_OK && n == 1 &&
          ids[0] == 2);
    free(ids);
    cmf_tokenizer_free(t);
}

int main(void) {
    test_strings();
    test_malformed();
    test_integers();
    test_vocab_load();
    test_load_file();
    TEST_DONE();
}
