/* test_tok_added_norm.c - a `normalized` added token goes through the normalizer when the
 * tokenizer loads; when a Replace pattern of that normalizer runs out of its regex budget on the
 * token's content, the load fails with CMF_E_LIMIT naming the token, instead of keeping a half
 * normalized token (which would then never match the normalized text it stands for). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/test.h"
#include "cortiq/tokenizer.h"
#include "text/tok_test_json.h"

/* The byte-level test tokenizer with a Replace normalizer (pattern (?:a|a)+b -> "", whose
 * backtracking doubles with every 'a' before a missing 'b') and one normalized added token. */
static char *json_with(const char *added_content) {
    char *j = tok_test_byte_level_json();
    const char *norm_from = "\"normalizer\":null";
    char norm_to[512];
    snprintf(norm_to, sizeof norm_to,
             "\"normalizer\":{\"type\":\"Replace\",\"pattern\":{\"Regex\":\"(?:a|a)+b\"},"
             "\"content\":\"\"}");
    const char *added_from = "\"added_tokens\":[";
    char added_to[512];
    snprintf(added_to, sizeof added_to,
             "\"added_tokens\":[{\"id\":310,\"content\":\"%s\",\"special\":false,"
             "\"normalized\":true},",
             added_content);
    const char *from[2] = {norm_from, added_from}, *to[2] = {norm_to, added_to};
    for (int k = 0; j && k < 2; k++) {
        char *at = strstr(j, from[k]);
        if (!at) {
            free(j);
            return NULL;
        }
        size_t head = (size_t)(at - j), tail = strlen(at + strlen(from[k]));
        char *out = malloc(head + strlen(to[k]) + tail + 1);
        if (out) {
            memcpy(out, j, head);
            memcpy(out + head, to[k], strlen(to[k]));
            memcpy(out + head + strlen(to[k]), at + strlen(from[k]), tail + 1);
        }
        free(j);
        j = out;
    }
    return j;
}

int main(void) {
    cmf_err err;
    cmf_tokenizer *tok = NULL;

    /* control: a short token normalizes within the budget ("zaab" -> "z") */
    char *json = json_with("zaab");
    CHECK(json != NULL);
    cmf_status st = json ? cmf_tokenizer_load(json, strlen(json), &tok, &err) : CMF_E_NOMEM;
    free(json);
    CHECK_MSG(st == CMF_OK, "control: %s", err.msg);
    if (st == CMF_OK) {
        size_t len = 0;
        const char *t = cmf_tokenizer_id_to_token(tok, 310, &len);
        CHECK_MSG(t && len == 1 && t[0] == 'z', "id 310 reads back as %.*s", (int)len, t ? t : "");
        cmf_tokenizer_free(tok);
        tok = NULL;
    }

    /* 60 'a' and no 'b': 2^60 paths without the budget */
    char content[61];
    memset(content, 'a', 60);
    content[60] = 0;
    json = json_with(content);
    CHECK(json != NULL);
    st = json ? cmf_tokenizer_load(json, strlen(json), &tok, &err) : CMF_E_NOMEM;
    free(json);
    CHECK_MSG(st == CMF_E_LIMIT, "hostile added token: status %d (%s)", (int)st, err.msg);
    CHECK_MSG(tok == NULL, "no tokenizer is returned on failure");
    CHECK_MSG(strstr(err.msg, "added token id 310") != NULL, "%s", err.msg);
    CHECK_MSG(strstr(err.msg, "60-byte piece") != NULL, "%s", err.msg);
    if (tok) cmf_tokenizer_free(tok);
    TEST_DONE();
}
