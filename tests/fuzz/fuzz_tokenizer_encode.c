/* fuzz_tokenizer_encode.c - encode/decode/stream arbitrary text with two built-in tokenizers
 * (byte-level BPE, SentencePiece-style). The first input byte picks the tokenizer and flags.
 * Checks: the byte-level tokenizer round-trips ASCII text without added tokens exactly and any
 * text stably (decode . encode is idempotent), and streaming yields a prefix of the decode. Text
 * over 8 KiB is ignored. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../text/tok_test_json.h"
#include "cortiq/tokenizer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static cmf_tokenizer *toks[2];

static void init(void) {
    char *j[2] = {tok_test_byte_level_json(), tok_test_sentencepiece_json()};
    for (int i = 0; i < 2; i++) {
        cmf_err err;
        if (!j[i] || cmf_tokenizer_load(j[i], strlen(j[i]), &toks[i], &err) != CMF_OK) {
            fprintf(stderr, "fuzz_tokenizer_encode: built-in tokenizer %d does not load\n", i);
            abort();
        }
        free(j[i]);
    }
}

/* A library call that fails on valid text is a bug: say which and why before aborting. */
static void must(cmf_status st, const char *what, const cmf_err *err) {
    if (st == CMF_OK) return;
    fprintf(stderr, "fuzz_tokenizer_encode: %s failed: %s\n", what, err->msg);
    abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1 || size > 8192) return 0;
    if (!toks[0]) init();
    int which = data[0] & 1;
    bool special = data[0] & 2, skip = data[0] & 4;
    const char *text = (const char *)data + 1;
    size_t len = size - 1;
    cmf_tokenizer *tok = toks[which];
    cmf_err err;
    int32_t *ids = NULL;
    size_t n = 0;
    must(cmf_tokenizer_encode(tok, text, len, special, &ids, &n, &err), "encode", &err);
    char *txt = NULL;
    size_t tl = 0;
    must(cmf_tokenizer_decode(tok, ids, n, skip, &txt, &tl, &err), "decode", &err);
    if (which == 0) {
        /* byte-level round trip: ASCII text comes back exactly, and re-encoding is stable */
        char *back = NULL, *again = NULL;
        size_t bl = 0, al = 0, n2 = 0;
        int32_t *ids2 = NULL;
        /* '<' could start an added token (special ones are skipped, <L>/<R> strip spaces): such
         * texts are exempt from both checks */
        bool plain = memchr(text, '<', len) == NULL, ascii = plain;
        for (size_t i = 0; i < len; i++)
            ascii = ascii && (unsigned char)text[i] < 0x80;
        if (cmf_tokenizer_decode(tok, ids, n, true, &back, &bl, &err) != CMF_OK) abort();
        if (ascii && (bl != len || memcmp(back, text, len) != 0)) abort();
        if (cmf_tokenizer_encode(tok, back, bl, false, &ids2, &n2, &err) != CMF_OK ||
            cmf_tokenizer_decode(tok, ids2, n2, true, &again, &al, &err) != CMF_OK)
            abort();
        if (plain && (al != bl || memcmp(again, back, bl) != 0)) abort();
        free(back);
        free(again);
        free(ids2);
    }
    cmf_detok_stream *s = NULL;
    if (cmf_detok_stream_create(tok, skip, &s, &err) != CMF_OK) abort();
    size_t got = 0;
    for (size_t k = 0; k < n; k++) {
        const char *p;
        size_t pl;
        if (cmf_detok_stream_push(s, ids[k], &p, &pl, &err) != CMF_OK) break;
        if (got + pl > tl || memcmp(txt + got, p, pl) != 0) abort();
        got += pl;
    }
    cmf_detok_stream_free(s);
    free(txt);
    free(ids);
    return 0;
}
