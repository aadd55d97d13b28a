/* test_regex_adversarial: pre-tokenizer regexes on adversarial text (regex_adversarial_inputs.h)
 * either encode exactly as a chunked reference or stop with the bounded CMF_E_LIMIT error; they
 * never hang. The reference cuts the (sanitized, normalized) text into chunks of <= 4 KiB at the
 * pre-token boundaries an unlimited Oniguruma search finds, and encodes each chunk on its own.
 * Real patterns (llama3, qwen3, GPT-2 ByteLevel) must always succeed; a quadratic lookahead
 * pattern and an exponential nested one must hit the backtracking budget on long letter runs, and
 * patterns that fail at every start position of a long run without backtracking (quadratic work
 * the budget does not see) must hit the time limit. The callout the time limit adds to every
 * pattern must not change what the patterns match. */
#include <oniguruma.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "regex_adversarial_inputs.h"
#include "test.h"
#include "text/tok_internal.h"
#include "tok_test_json.h"

/* the megabyte runs; a quarter of that under AddressSanitizer, which is ~10x slower here */
#if defined(__SANITIZE_ADDRESS__)
#define ADV_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ADV_ASAN 1
#endif
#endif
#ifdef ADV_ASAN
#define BIG ((size_t)1 << 18)
#else
#define BIG ((size_t)1 << 20)
#endif
#define SMALL ((size_t)1 << 14)
#define CHUNK 4096

typedef struct case_tok {
    const char *name; /* fixture tests/fixtures/tokenizer/<name>.tokenizer.json.xz; NULL: hostile */
    const char *re;   /* its first Split / ByteLevel regex, for the reference cut */
    int must;         /* 1: must succeed on every input; 0: success or CMF_E_LIMIT */
} case_tok;

static const case_tok CASES[] = {
    {"llama3_1",
     "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
     "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
     1},
    {"qwen3",
     "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| "
     "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
     1},
    {"smollm2",
     "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+", 1},
    {"synth_split_isolated_inv", "(?i:'s|'t|'re)|\\p{L}+(?=\\s)|\\p{N}{1,2}|\\s+", 0},
};

static char *read_xz(const char *name, size_t *len) {
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "xz -dc '%s/tests/fixtures/tokenizer/%s.tokenizer.json.xz'",
             CORTIQ_SOURCE_DIR, name);
    FILE *p = popen(cmd, "r");
    if (!p) return NULL;
    size_t cap = 1 << 20, n = 0;
    char *b = malloc(cap);
    size_t r;
    while (b && (r = fread(b + n, 1, cap - n, p)) > 0) {
        n += r;
        if (n == cap) {
            char *nb = realloc(b, cap *= 2);
            if (!nb) free(b);
            b = nb;
        }
    }
    if (pclose(p) != 0 || !b) {
        free(b);
        return NULL;
    }
    *len = n;
    return b;
}

/* The text the pre-tokenizer sees: invalid UTF-8 replaced, then normalized (as encode does). */
static bool pretok_text(const cmf_tokenizer *tok, const char *s, size_t len, tok_buf *out) {
    tok_buf clean = {0};
    bool alloc_ok = true;
    if (!tok_utf8_sanitize(s, len, &clean, &alloc_ok)) {
        if (!alloc_ok) return false;
        s = clean.p;
        len = clean.len;
    }
    bool ok = tok->norm ? tok_normalize(tok->norm, s, len, out) : tok_buf_put(out, s, len);
    tok_buf_free(&clean);
    return ok;
}

static bool ids_push(int32_t **v, size_t *n, size_t *cap, const int32_t *add, size_t k) {
    if (*n + k > *cap) {
        size_t nc = (*n + k) * 2;
        int32_t *nv = realloc(*v, nc * sizeof *nv);
        if (!nv) return false;
        *v = nv;
        *cap = nc;
    }
    memcpy(*v + *n, add, k * sizeof *add);
    *n += k;
    return true;
}

/* Reference ids: cut at unlimited-Oniguruma match boundaries (HF find_iter: every match and every
 * gap is a pre-token) into chunks of <= CHUNK bytes, encode each chunk alone. *limited is set when
 * a chunk stopped at the time limit: a chunk with no cut in it is as long as the text, so it can
 * trip the limit the first encode only came near (thread CPU time varies with a busy machine). */
static bool reference(const cmf_tokenizer *tok, regex_t *re, const char *s, size_t len,
                      int32_t **ids, size_t *n, bool *limited) {
    OnigRegion *rg = onig_region_new();
    size_t cap = 0, chunk_start = 0, pos = 0, last_cut = 0;
    *ids = NULL;
    *n = 0;
    bool ok = rg != NULL;
    const OnigUChar *b = (const OnigUChar *)s, *e = b + len;
    while (ok && chunk_start < len) {
        size_t next_cut = len; /* the boundary after the next pre-token */
        int r = pos < len ? onig_search(re, b, e, b + pos, e, rg, ONIG_OPTION_NONE) : ONIG_MISMATCH;
        if (r >= 0) {
            size_t ms = (size_t)rg->beg[0], me = (size_t)rg->end[0];
            next_cut = ms > last_cut ? ms : me; /* a gap before the match is a pre-token too */
            if (me == ms) next_cut = ms + 1;    /* empty match: step (not hit by these patterns) */
        } else if (r != ONIG_MISMATCH) {
            ok = false;
            break;
        }
        if (next_cut - chunk_start > CHUNK || next_cut >= len) {
            size_t end =
                next_cut - chunk_start > CHUNK && last_cut > chunk_start ? last_cut : next_cut;
            if (end > len) end = len;
            int32_t *part;
            size_t k;
            cmf_err err;
            cmf_status st = cmf_tokenizer_encode(tok, s + chunk_start, end - chunk_start, false,
                                                 &part, &k, &err);
            if (st == CMF_E_LIMIT) *limited = true;
            ok = st == CMF_OK && ids_push(ids, n, &cap, part, k);
            if (ok) free(part);
            chunk_start = end;
        }
        last_cut = next_cut;
        pos = next_cut;
    }
    onig_region_free(rg, 1);
    if (!ok) free(*ids);
    return ok;
}

static void run_case(cmf_tokenizer *tok, const char *tname, const char *re_src, int must,
                     int *limits) {
    regex_t *re = NULL;
    OnigErrorInfo einfo;
    if (re_src)
        CHECK(onig_new(&re, (const OnigUChar *)re_src, (const OnigUChar *)re_src + strlen(re_src),
                       ONIG_OPTION_NONE, ONIG_ENCODING_UTF8, ONIG_SYNTAX_DEFAULT,
                       &einfo) == ONIG_NORMAL);
    for (size_t k = 0; k < ADV_N_INPUTS; k++) {
        /* megabyte runs of letters, digits, punctuation and spaces for llama3 */
        bool big = (k == 0 || k == 3 || k == 4 || k == 5) && !strcmp(tname, "llama3_1");
        size_t want = big ? BIG : SMALL, len;
        char *text = adv_make(k, want, &len);
        if (!text) {
            CHECK(text != NULL);
            continue;
        }
        int32_t *ids = NULL;
        size_t n = 0;
        cmf_err err;
        cmf_status st = cmf_tokenizer_encode(tok, text, len, false, &ids, &n, &err);
        printf("%-26s %-20s %8zu bytes: %s\n", tname, ADV_INPUTS[k].name, len, cmf_status_name(st));
        fflush(stdout);
        if (st == CMF_E_LIMIT) {
            CHECK_MSG(!must, "%s on %s (%zu bytes): %s", tname, ADV_INPUTS[k].name, len, err.msg);
            CHECK_MSG(strstr(err.msg, "budget") || strstr(err.msg, "time limit"), "%s", err.msg);
            (*limits)++;
        } else {
            CHECK_MSG(st == CMF_OK, "%s on %s: %s", tname, ADV_INPUTS[k].name, err.msg);
            CHECK(n > 0);
            if (re) {
                tok_buf pt = {0};
                CHECK(pretok_text(tok, text, len, &pt));
                int32_t *ref;
                size_t rn;
                bool limited = false;
                bool ref_ok = reference(tok, re, pt.p, pt.len, &ref, &rn, &limited);
                /* a pattern that may stop at the limit may stop there in the reference too */
                CHECK_MSG(ref_ok || (limited && !must), "%s on %s: reference failed", tname,
                          ADV_INPUTS[k].name);
                CHECK_MSG(!ref_ok || (rn == n && !memcmp(ref, ids, n * sizeof *ids)),
                          "%s on %s: %zu ids, chunked reference %zu", tname, ADV_INPUTS[k].name, n,
                          rn);
                if (ref_ok) free(ref);
                tok_buf_free(&pt);
            }
            /* decode must survive whatever encode produced */
            char *back;
            size_t blen;
            st = cmf_tokenizer_decode(tok, ids, n, false, &back, &blen, &err);
            CHECK_MSG(st == CMF_OK, "%s decode after %s: %s", tname, ADV_INPUTS[k].name, err.msg);
            if (st == CMF_OK) free(back);
        }
        free(ids);
        free(text);
    }
    onig_free(re);
}

/* A tokenizer.json whose pre-tokenizer is Split(pattern_json, Isolated) then ByteLevel without
 * its regex; pattern_json is the pattern as a JSON string body. */
static char *hostile_json(const char *pattern_json) {
    char *j = tok_test_byte_level_json();
    const char *from =
        "\"pre_tokenizer\":{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"use_regex\":true}";
    char to[512];
    snprintf(to, sizeof to,
             "\"pre_tokenizer\":{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Split\","
             "\"pattern\":{\"Regex\":\"%s\"},\"behavior\":\"Isolated\",\"invert\":false},"
             "{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"use_regex\":false}]}",
             pattern_json);
    char *at = j ? strstr(j, from) : NULL;
    if (!at) {
        free(j);
        return NULL;
    }
    size_t head = (size_t)(at - j), tail = strlen(at + strlen(from));
    char *out = malloc(head + strlen(to) + tail + 1);
    if (out) {
        memcpy(out, j, head);
        memcpy(out + head, to, strlen(to));
        memcpy(out + head + strlen(to), at + strlen(from), tail + 1);
    }
    free(j);
    return out;
}

/* Patterns whose failed attempts cost O(n) each without a single retry (the run is scanned
 * possessively and never given back, so the budget never sees it): one search over n bytes costs
 * O(n^2). Unlimited, they take ~30, ~14 and ~11 CPU seconds on these inputs (estimated from
 * 16 and 8 KiB runs); the time limit stops them after 10 us per byte + 100 ms (0.76 s, 0.76 s
 * and 1.41 s).
 * Each pattern is checked on that input, then on every input against the chunked reference (or
 * the limit). */
typedef struct scan_case {
    const char *name, *re, *json; /* the pattern, and as a JSON string body */
    size_t input;                 /* index in ADV_INPUTS of a long run it cannot match */
    size_t bytes;
} scan_case;

static const scan_case SCANS[] = {
    {"hostile_scan", "[ \\t]+x|\\n", "[ \\\\t]+x|\\\\n", 5, (size_t)1 << 16}, /* spaces */
    {"hostile_scan_letters", "[a-z]+[0-9]|\\n", "[a-z]+[0-9]|\\\\n", 0, (size_t)1 << 16},
    {"hostile_scan_pairs", "(?: a)+!|\\n", "(?: a)+!|\\\\n", 14, (size_t)1 << 17}, /* " a" */
};

static void run_scan_case(const scan_case *sc) {
    cmf_err err;
    char *json = hostile_json(sc->json);
    cmf_tokenizer *tok;
    cmf_status st = json ? cmf_tokenizer_load(json, strlen(json), &tok, &err) : CMF_E_NOMEM;
    free(json);
    CHECK_MSG(st == CMF_OK, "%s tokenizer: %s", sc->name, err.msg);
    if (st) return;
    size_t len = 0;
    char *text = adv_make(sc->input, sc->bytes, &len);
    CHECK(text != NULL);
    int32_t *ids = NULL;
    size_t n;
    st = text ? cmf_tokenizer_encode(tok, text, len, false, &ids, &n, &err) : CMF_E_NOMEM;
    printf("%-26s %-20s %8zu bytes: %s\n", sc->name, ADV_INPUTS[sc->input].name, len,
           cmf_status_name(st));
    CHECK_MSG(st == CMF_E_LIMIT, "%s on %s: %s", sc->name, ADV_INPUTS[sc->input].name,
              cmf_status_name(st));
    if (st == CMF_OK) free(ids);
    char want[64];
    snprintf(want, sizeof want, "on a %zu-byte piece", len);
    CHECK_MSG(st != CMF_E_LIMIT || (strstr(err.msg, "time limit") && strstr(err.msg, want)), "%s",
              err.msg);
    free(text);
    /* On the shorter inputs whether the time limit trips depends on the CPU's speed, so each
     * may finish (then it must equal the chunked reference) or stop at the limit; the long run
     * above is the check that the limit works. */
    int limits = 0;
    run_case(tok, sc->name, sc->re, 0, &limits);
    cmf_tokenizer_free(tok);
}

/* The callout prefix must not change what a pattern matches: whole-pattern options (only valid at
 * the head), a trailing extended-mode comment (which would swallow a closing parenthesis), inline
 * options and alternations, against Oniguruma without the prefix. */
static void check_wrapping(void) {
    static const char *pats[] = {
        "(?x) a b # trailing comment",
        "(?x)a#c\\",
        "(?L)a|ab",
        "(?Li)A|AB",
        "(?C)(a)|(b)c",
        "a(?i)B|c",
        "(?i:x)|a(?m:.)b",
        "\\Gab|b",
        "^a|c$",
    };
    static const char text[] = "xaBc ab ABb\na\nbc abababc";
    size_t tl = sizeof text - 1;
    for (size_t i = 0; i < sizeof pats / sizeof pats[0]; i++) {
        tok_regex *mine;
        cmf_err err;
        cmf_status st = tok_regex_new(pats[i], strlen(pats[i]), &mine, &err);
        CHECK_MSG(st == CMF_OK, "/%s/: %s", pats[i], err.msg);
        regex_t *ref;
        OnigErrorInfo einfo;
        int rc =
            onig_new(&ref, (const OnigUChar *)pats[i], (const OnigUChar *)pats[i] + strlen(pats[i]),
                     ONIG_OPTION_NONE, ONIG_ENCODING_UTF8, ONIG_SYNTAX_DEFAULT, &einfo);
        CHECK(rc == ONIG_NORMAL);
        if (st || rc != ONIG_NORMAL) {
            if (!st) tok_regex_free(mine);
            if (rc == ONIG_NORMAL) onig_free(ref);
            continue;
        }
        OnigRegion *rg = onig_region_new();
        const OnigUChar *b = (const OnigUChar *)text;
        for (size_t start = 0; rg && start <= tl; start++) {
            size_t ms = 0, me = 0;
            bool hit = tok_regex_search(mine, text, tl, start, &ms, &me);
            int r = onig_search(ref, b, b + tl, b + start, b + tl, rg, ONIG_OPTION_NONE);
            CHECK_MSG(hit == (r >= 0) &&
                          (!hit || (ms == (size_t)rg->beg[0] && me == (size_t)rg->end[0])),
                      "/%s/ from %zu: %d %zu-%zu, unwrapped %d", pats[i], start, hit, ms, me, r);
        }
        onig_region_free(rg, 1);
        onig_free(ref);
        tok_regex_free(mine);
    }
    /* a pattern that does not compile is reported as written */
    tok_regex *bad;
    cmf_err err;
    CHECK(tok_regex_new("a)b", 3, &bad, &err) == CMF_E_PARSE);
    CHECK_MSG(strstr(err.msg, "/a)b/ does not compile") != NULL, "%s", err.msg);
    /* whole-pattern options in a group with contents cannot take the callout: refused, not run
     * without the time limit */
    CHECK(tok_regex_new("(?L:ab)", 7, &bad, &err) == CMF_E_PARSE);
    CHECK_MSG(strstr(err.msg, "time-limit callout") != NULL, "%s", err.msg);
}

int main(void) {
    cmf_err err;
    int limits = 0;
    for (size_t c = 0; c < sizeof CASES / sizeof CASES[0]; c++) {
        size_t jl;
        char *json = read_xz(CASES[c].name, &jl);
        CHECK_MSG(json != NULL, "fixture %s", CASES[c].name);
        cmf_tokenizer *tok;
        cmf_status st = json ? cmf_tokenizer_load(json, jl, &tok, &err) : CMF_E_IO;
        free(json);
        CHECK_MSG(st == CMF_OK, "%s: %s", CASES[c].name, json ? err.msg : "xz -dc failed");
        if (st) continue;
        run_case(tok, CASES[c].name, CASES[c].re, CASES[c].must, &limits);
        cmf_tokenizer_free(tok);
    }
    CHECK_MSG(limits > 0, "the quadratic lookahead pattern never hit the budget");

    /* exponential: 2^64 paths for 64 letters without the budget */
    char *json = hostile_json("(?:a|a)+b|(?:\\\\s|\\\\s)+x");
    cmf_tokenizer *tok;
    cmf_status st = json ? cmf_tokenizer_load(json, strlen(json), &tok, &err) : CMF_E_NOMEM;
    free(json);
    CHECK_MSG(st == CMF_OK, "hostile tokenizer: %s", err.msg);
    if (st) TEST_DONE();
    char text[65];
    memset(text, 'a', 64);
    text[64] = 0;
    int32_t *ids = NULL;
    size_t n;
    CHECK(cmf_tokenizer_encode(tok, text, 64, false, &ids, &n, &err) == CMF_E_LIMIT);
    CHECK_MSG(strstr(err.msg, "64-byte piece") != NULL, "%s", err.msg);
    /* ... the error does not stick: the next encode on this thread succeeds */
    CHECK_MSG(cmf_tokenizer_encode(tok, "ab", 2, false, &ids, &n, &err) == CMF_OK, "%s", err.msg);
    CHECK(n > 0);
    free(ids);
    limits = 0;
    run_case(tok, "hostile_nested", NULL, 0, &limits);
    CHECK(limits > 0);
    cmf_tokenizer_free(tok);

    for (size_t c = 0; c < sizeof SCANS / sizeof SCANS[0]; c++)
        run_scan_case(&SCANS[c]);
    check_wrapping();
    TEST_DONE();
}
