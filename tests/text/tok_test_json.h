/* tok_test_json.h - small tokenizer.json documents built in code, shared by the tokenizer tests
 * and fuzz targets (so they need no fixture file). The caller frees the result. */
#ifndef CORTIQ_TOK_TEST_JSON_H
#define CORTIQ_TOK_TEST_JSON_H

#include <stdio.h>
#include <stdlib.h>

/* Byte-level BPE over the 256 byte chars plus a few merges and added tokens. */
static inline char *tok_test_byte_level_json(void) {
    size_t cap = 1 << 16, n = 0;
    char *j = malloc(cap);
    if (!j) return NULL;
    n += (size_t)snprintf(
        j + n, cap - n,
        "{\"version\":\"1.0\",\"added_tokens\":["
        "{\"id\":300,\"content\":\"<s>\",\"special\":true,\"normalized\":false},"
        "{\"id\":301,\"content\":\"<L>\",\"special\":false,\"lstrip\":true,\"normalized\":false},"
        "{\"id\":302,\"content\":\"<R>\",\"special\":false,\"rstrip\":true,\"normalized\":false},"
        "{\"id\":303,\"content\":\"cat\",\"special\":false,\"single_word\":true,\"normalized\":false}],"
        "\"normalizer\":null,"
        "\"pre_tokenizer\":{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"use_regex\":true},"
        "\"post_processor\":{\"type\":\"TemplateProcessing\",\"single\":[{\"SpecialToken\":{\"id\":\"<s>\","
        "\"type_id\":0}},{\"Sequence\":{\"id\":\"A\",\"type_id\":0}}],\"special_tokens\":{\"<s>\":{\"id\":"
        "\"<s>\",\"ids\":[300],\"tokens\":[\"<s>\"]}}},"
        "\"decoder\":{\"type\":\"ByteLevel\"},"
        "\"model\":{\"type\":\"BPE\",\"vocab\":{");
    for (int b = 0; b < 256; b++) {
        unsigned c = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174 ? (unsigned)b
                     : b <= 32  ? 256u + (unsigned)b
                     : b <= 160 ? 256u + 33u + (unsigned)(b - 127)
                                : 256u + 67u;
        char u[8];
        if (c < 0x80)
            snprintf(u, sizeof u, "%s%c", c == '"' || c == '\\' ? "\\" : "", (char)c);
        else
            snprintf(u, sizeof u, "\\u%04x", c);
        n += (size_t)snprintf(j + n, cap - n, "%s\"%s\":%d", b ? "," : "", u, b);
    }
    n +=
        (size_t)snprintf(j + n, cap - n,
                         ",\"he\":256,\"ll\":257,\"hell\":258,\"hello\":259,\"\\u0120w\":260},"
                         "\"merges\":[\"h e\",\"l l\",\"he ll\",[\"hell\",\"o\"],\"\\u0120 w\"]}}");
    return j;
}

/* SentencePiece-style: NFKC + Lowercase, Metaspace (prepend first, split), byte_fallback,
 * unk with fuse_unk, BOS/EOS template, Replace/ByteFallback/Fuse/Strip decoders. */
static inline char *tok_test_sentencepiece_json(void) {
    size_t cap = 1 << 15, n = 0;
    char *j = malloc(cap);
    if (!j) return NULL;
    n += (size_t)snprintf(
        j + n, cap - n,
        "{\"added_tokens\":[{\"id\":0,\"content\":\"<unk>\",\"special\":true},"
        "{\"id\":1,\"content\":\"<s>\",\"special\":true},{\"id\":2,\"content\":\"</s>\",\"special\":true}],"
        "\"normalizer\":{\"type\":\"Sequence\",\"normalizers\":[{\"type\":\"NFKC\"},{\"type\":\"Lowercase\"}]},"
        "\"pre_tokenizer\":{\"type\":\"Metaspace\",\"replacement\":\"\\u2581\",\"prepend_scheme\":\"first\","
        "\"split\":true},"
        "\"post_processor\":{\"type\":\"TemplateProcessing\",\"single\":[{\"SpecialToken\":{\"id\":\"<s>\"}},"
        "{\"Sequence\":{\"id\":\"A\"}},{\"SpecialToken\":{\"id\":\"</s>\"}}],\"special_tokens\":{"
        "\"<s>\":{\"id\":\"<s>\",\"ids\":[1]},\"</s>\":{\"id\":\"</s>\",\"ids\":[2]}}},"
        "\"decoder\":{\"type\":\"Sequence\",\"decoders\":[{\"type\":\"Replace\",\"pattern\":{\"String\":"
        "\"\\u2581\"},\"content\":\" \"},{\"type\":\"ByteFallback\"},{\"type\":\"Fuse\"},{\"type\":\"Strip\","
        "\"content\":\" \",\"start\":1,\"stop\":0}]},"
        "\"model\":{\"type\":\"BPE\",\"unk_token\":\"<unk>\",\"fuse_unk\":true,\"byte_fallback\":true,"
        "\"vocab\":{\"<unk>\":0,\"<s>\":1,\"</s>\":2");
    for (int b = 0; b < 256; b++)
        n += (size_t)snprintf(j + n, cap - n, ",\"<0x%02X>\":%d", b, 3 + b);
    for (int c = 0; c < 26; c++)
        n += (size_t)snprintf(j + n, cap - n, ",\"%c\":%d", 'a' + c, 259 + c);
    n += (size_t)snprintf(
        j + n, cap - n,
        ",\"\\u2581\":285,\"\\u2581t\":286,\"th\":287,\"\\u2581th\":288,\"\\u2581the\":289},"
        "\"merges\":[[\"\\u2581\",\"t\"],[\"t\",\"h\"],[\"\\u2581t\",\"h\"],[\"\\u2581th\",\"e\"]]}}");
    return j;
}

#endif
