/* fuzz_tokenizer_json.c - tokenizer.json loading: any bytes must load or fail cleanly; a loaded
 * tokenizer must then encode, decode and stream a few fixed texts without faults. Inputs over
 * 256 KiB are ignored to keep each run bounded. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cortiq/tokenizer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > (256u << 10)) return 0;
    cmf_tokenizer *tok = NULL;
    cmf_err err;
    if (cmf_tokenizer_load((const char *)data, size, &tok, &err) != CMF_OK) return 0;
    static const char *const texts[] = {"",
                                        " ",
                                        "Hello world, it's 2024!",
                                        "\xE4\xBD\xA0\xE5\xA5\xBD \xF0\x9F\x98\x80",
                                        "a\xff\xfe b",
                                        "<s> x </s>\n\n\t"};
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
        int32_t *ids = NULL;
        size_t n = 0;
        if (cmf_tokenizer_encode(tok, texts[i], strlen(texts[i]), i & 1, &ids, &n, &err) != CMF_OK)
            continue;
        char *txt = NULL;
        size_t tl = 0;
        if (cmf_tokenizer_decode(tok, ids, n, i & 2, &txt, &tl, &err) == CMF_OK) free(txt);
        cmf_detok_stream *s = NULL;
        if (cmf_detok_stream_create(tok, false, &s, &err) == CMF_OK) {
            for (size_t k = 0; k < n; k++) {
                const char *p;
                size_t pl;
                if (cmf_detok_stream_push(s, ids[k], &p, &pl, &err) != CMF_OK) break;
            }
            cmf_detok_stream_free(s);
        }
        free(ids);
    }
    cmf_tokenizer_free(tok);
    return 0;
}
