/* test_tok_parity.c - ids and decoded text must equal the Python `tokenizers` package's on every
 * case of tests/fixtures/tokenizer/<name>.cases.jsonl.gz (made by tools/make_tokenizer_cases.py).
 * The tokenizer.json files are read xz-compressed from the same folder (decompressed with
 * `xz -dc` / `gzip -dc` through popen); a tokenizer whose .json.xz is absent is read from
 * ../shared/tokenizers/<name>/tokenizer.json when present and reported skipped otherwise. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "common/test.h"
#include "cortiq/tokenizer.h"

static const char *const NAMES[] = {
    "qwen3",
    "llama3_1",
    "gemma3",
    "smollm2",
    "synth_gpt2",
    "synth_sentencepiece",
    "synth_components",
    "synth_whitespace",
    "synth_nfc_metaspace_never",
    "synth_split_removed",
    "synth_split_isolated_inv",
    "synth_split_prev",
    "synth_split_next",
    "synth_split_contig",
    "synth_wordpiece",
    "synth_wordpiece_cased",
    "synth_unigram",
    "synth_unigram_bytes",
    "synth_wordlevel",
};

static char *read_cmd(const char *cmd, size_t *len) {
    FILE *p = popen(cmd, "r");
    if (!p) return NULL;
    size_t cap = 1 << 20, n = 0;
    char *buf = malloc(cap);
    size_t k;
    while (buf && (k = fread(buf + n, 1, cap - n - 1, p)) > 0) {
        n += k;
        if (cap - n < 2) {
            char *q = realloc(buf, cap * 2);
            if (!q) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = q;
            cap *= 2;
        }
    }
    int rc = pclose(p);
    if (!buf || rc != 0) {
        free(buf);
        return NULL;
    }
    buf[n] = 0;
    *len = n;
    return buf;
}

static bool exists(const char *p) {
    struct stat st;
    return stat(p, &st) == 0;
}

static bool ids_equal(const json_t *want, const int32_t *got, size_t n) {
    if (!json_is_array(want) || json_array_size(want) != n) return false;
    for (size_t i = 0; i < n; i++)
        if (json_integer_value(json_array_get(want, i)) != got[i]) return false;
    return true;
}

static void show_ids(const char *label, const int32_t *v, size_t n) {
    fprintf(stderr, "  %s (%zu):", label, n);
    for (size_t i = 0; i < n && i < 40; i++)
        fprintf(stderr, " %d", v[i]);
    fprintf(stderr, "\n");
}

static int run_one(const char *name) {
    char path[1024], cmd[1200];
    size_t jlen = 0;
    char *json = NULL;
    snprintf(path, sizeof path, "%s/tests/fixtures/tokenizer/%s.tokenizer.json.xz",
             CORTIQ_SOURCE_DIR, name);
    if (exists(path)) {
        snprintf(cmd, sizeof cmd, "xz -dc '%s'", path);
        json = read_cmd(cmd, &jlen);
    } else {
        snprintf(path, sizeof path, "%s/../shared/tokenizers/%s/tokenizer.json", CORTIQ_SOURCE_DIR,
                 name);
        if (!exists(path)) {
            printf("%s: SKIPPED (no tokenizer.json.xz fixture and no %s)\n", name, path);
            return 0;
        }
        snprintf(cmd, sizeof cmd, "cat '%s'", path);
        json = read_cmd(cmd, &jlen);
    }
    CHECK_MSG(json != NULL, "%s: cannot read the tokenizer", name);
    if (!json) return 1;
    cmf_tokenizer *tok = NULL;
    cmf_err err;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    cmf_status st = cmf_tokenizer_load(json, jlen, &tok, &err);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    free(json);
    CHECK_MSG(st == CMF_OK, "%s: load failed: %s", name, err.msg);
    if (st) return 1;
    double ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;

    snprintf(cmd, sizeof cmd, "gzip -dc '%s/tests/fixtures/tokenizer/%s.cases.jsonl.gz'",
             CORTIQ_SOURCE_DIR, name);
    size_t clen;
    char *cases = read_cmd(cmd, &clen);
    CHECK_MSG(cases != NULL, "%s: cannot read the cases", name);
    int ncase = 0, bad = 0;
    for (char *line = cases; cases && line && *line;) {
        char *nl = strchr(line, '\n');
        if (nl) *nl = 0;
        json_error_t je;
        json_t *c = json_loads(line, JSON_ALLOW_NUL, &je);
        CHECK_MSG(c != NULL, "%s: bad case line: %s", name, je.text);
        if (c) {
            const json_t *jt = json_object_get(c, "text");
            const char *text = json_string_value(jt);
            size_t tlen = json_string_length(jt);
            const char *keys[2] = {"ids", "ids_plain"};
            int32_t *ids[2] = {NULL, NULL};
            size_t n[2] = {0, 0};
            for (int k = 0; k < 2; k++) {
                st = cmf_tokenizer_encode(tok, text, tlen, k == 0, &ids[k], &n[k], &err);
                CHECK_MSG(st == CMF_OK, "%s: encode failed: %s", name, err.msg);
                bool eq = st == CMF_OK && ids_equal(json_object_get(c, keys[k]), ids[k], n[k]);
                CHECK_MSG(eq, "%s case %d %s differ for text \"%.80s\"", name, ncase, keys[k],
                          text);
                if (!eq) {
                    bad++;
                    show_ids("got", ids[k], n[k]);
                    const json_t *w = json_object_get(c, keys[k]);
                    fprintf(stderr, "  want (%zu):", json_array_size(w));
                    for (size_t i = 0; i < json_array_size(w) && i < 40; i++)
                        fprintf(stderr, " %lld",
                                (long long)json_integer_value(json_array_get(w, i)));
                    fprintf(stderr, "\n");
                }
            }
            /* decode the reference ids (so a decode check does not depend on encode) */
            const json_t *want_ids = json_object_get(c, "ids");
            size_t wn = json_array_size(want_ids);
            int32_t *wv = malloc((wn ? wn : 1) * sizeof *wv);
            for (size_t i = 0; wv && i < wn; i++)
                wv[i] = (int32_t)json_integer_value(json_array_get(want_ids, i));
            const char *dkeys[2] = {"decoded", "decoded_skip"};
            for (int k = 0; wv && k < 2; k++) {
                char *txt = NULL;
                size_t tl = 0;
                st = cmf_tokenizer_decode(tok, wv, wn, k == 1, &txt, &tl, &err);
                const json_t *dw = json_object_get(c, dkeys[k]);
                bool eq = st == CMF_OK && tl == json_string_length(dw) &&
                          memcmp(txt, json_string_value(dw), tl) == 0;
                CHECK_MSG(eq, "%s case %d %s differs: got \"%.80s\" want \"%.80s\"", name, ncase,
                          dkeys[k], txt ? txt : "(null)", json_string_value(dw));
                if (!eq) bad++;
                free(txt);
            }
            /* streaming decode of the plain ids concatenates to the full decode's text */
            if (wv && n[1] > 0) {
                cmf_detok_stream *s = NULL;
                CHECK(cmf_detok_stream_create(tok, false, &s, &err) == CMF_OK);
                size_t cap = 64, sl = 0;
                char *acc = malloc(cap);
                for (size_t i = 0; s && acc && i < n[1]; i++) {
                    const char *piece;
                    size_t pl;
                    if (cmf_detok_stream_push(s, ids[1][i], &piece, &pl, &err) != CMF_OK) {
                        CHECK_MSG(0, "%s: stream push failed: %s", name, err.msg);
                        break;
                    }
                    if (sl + pl + 1 > cap) {
                        cap = (sl + pl + 1) * 2;
                        char *q = realloc(acc, cap);
                        if (!q) break;
                        acc = q;
                    }
                    memcpy(acc + sl, piece, pl);
                    sl += pl;
                }
                char *full = NULL;
                size_t fl = 0;
                CHECK(cmf_tokenizer_decode(tok, ids[1], n[1], false, &full, &fl, &err) == CMF_OK);
                /* the stream may hold back a trailing incomplete character */
                bool pre = full && acc && sl <= fl && memcmp(acc, full, sl) == 0;
                bool whole =
                    pre && (sl == fl || (fl >= 3 && !memcmp(full + fl - 3, "\xEF\xBF\xBD", 3)));
                CHECK_MSG(whole, "%s case %d: stream text \"%.60s\" is not the decode \"%.60s\"",
                          name, ncase, acc ? acc : "", full ? full : "");
                free(full);
                free(acc);
                cmf_detok_stream_free(s);
            }
            free(wv);
            free(ids[0]);
            free(ids[1]);
            json_decref(c);
        }
        ncase++;
        line = nl ? nl + 1 : NULL;
    }
    free(cases);
    printf("%s: %d cases, %d mismatches, load %.1f ms, vocab_size %zu\n", name, ncase, bad, ms,
           cmf_tokenizer_vocab_size(tok));
    CHECK_MSG(ncase > 0, "%s: no cases", name);
    cmf_tokenizer_free(tok);
    return bad;
}

int main(int argc, char **argv) {
    for (size_t i = 0; i < sizeof NAMES / sizeof NAMES[0]; i++) {
        if (argc > 1 && strcmp(argv[1], NAMES[i]) != 0) continue;
        run_one(NAMES[i]);
    }
    TEST_DONE();
}
