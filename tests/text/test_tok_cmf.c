/* test_tok_cmf.c - spec §6: a .cmf whose vocab section holds tokenizer.json bytes verbatim is
 * tokenized through cmf_open + cmf_file_vocab exactly as the JSON itself, and `cortiq tokenize`
 * accepts the .cmf as its source. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/test.h"
#include "cortiq/format.h"
#include "cortiq/tokenizer.h"
#include "cortiq/writer.h"
#include "text/tok_test_json.h"

static const char HEADER[] =
    "{\"arch\": {\"arch_name\": \"llama\", \"hidden_size\": 8, \"intermediate_size\": 16, \"num_layers\": 1,"
    " \"num_attention_heads\": 2, \"num_kv_heads\": 1, \"head_dim\": 4, \"vocab_size\": 304,"
    " \"rms_norm_eps\": 1e-6, \"rope_theta\": 10000.0, \"tie_word_embeddings\": true},"
    " \"quant_type\": \"F32\"}";

static cmf_status write_model(const char *path, const char *json, cmf_err *err) {
    cmf_writer *w;
    cmf_status st = cmf_writer_create(path, NULL, &w, err);
    if (st) return st;
    static float emb[304 * 8];
    uint64_t shape[2] = {304, 8};
    st = cmf_writer_set_header(w, HEADER, strlen(HEADER), err);
    if (!st)
        st = cmf_writer_add_tensor(w, "model.embed_tokens.weight", CMF_DT_F32, 2, shape, emb,
                                   sizeof emb, err);
    if (!st) st = cmf_writer_set_vocab(w, json, strlen(json), err);
    if (!st) st = cmf_writer_finish(w, err);
    cmf_writer_free(w);
    return st;
}

int main(void) {
    char *json = tok_test_byte_level_json();
    CHECK(json != NULL);
    if (!json) TEST_DONE();
    char path[512];
    snprintf(path, sizeof path, "%s/test_tok_cmf.cmf", CORTIQ_BINARY_DIR);
    cmf_err err;
    cmf_status st = write_model(path, json, &err);
    CHECK_MSG(st == CMF_OK, "%s", err.msg);
    cmf_file *f = NULL;
    if (!st) {
        st = cmf_open(path, 0, &f, &err);
        CHECK_MSG(st == CMF_OK, "%s", err.msg);
    }
    if (f) {
        size_t len = 0;
        const uint8_t *v = cmf_file_vocab(f, &len);
        CHECK(v != NULL && len == strlen(json) && memcmp(v, json, len) == 0); /* verbatim */
        cmf_tokenizer *a = NULL, *b = NULL;
        CHECK(v && cmf_tokenizer_load((const char *)v, len, &a, &err) == CMF_OK);
        CHECK(cmf_tokenizer_load(json, strlen(json), &b, &err) == CMF_OK);
        const char *text = "hello world <s>hello";
        int32_t *ia = NULL, *ib = NULL;
        size_t na = 0, nb = 0;
        CHECK(a && cmf_tokenizer_encode(a, text, strlen(text), true, &ia, &na, &err) == CMF_OK);
        CHECK(b && cmf_tokenizer_encode(b, text, strlen(text), true, &ib, &nb, &err) == CMF_OK);
        CHECK(na == nb && na > 0 && ia && ib && memcmp(ia, ib, na * sizeof *ia) == 0);
        free(ia);
        free(ib);
        cmf_tokenizer_free(a);
        cmf_tokenizer_free(b);
        cmf_close(f);
    }
    /* the CLI on the .cmf (skipped when the test is run without CORTIQ_BIN) */
    const char *bin = getenv("CORTIQ_BIN");
    if (bin && !st) {
        char cmd[1200], line[256] = {0};
        snprintf(cmd, sizeof cmd, "'%s' tokenize --no-special '%s' 'hello world'", bin, path);
        FILE *p = popen(cmd, "r");
        CHECK(p != NULL);
        if (p) {
            CHECK(fgets(line, sizeof line, p) != NULL);
            CHECK(pclose(p) == 0);
        }
        CHECK_MSG(strcmp(line, "259 260 111 114 108 100\n") == 0, "cortiq tokenize printed \"%s\"",
                  line);
    }
    remove(path);
    free(json);
    TEST_DONE();
}
