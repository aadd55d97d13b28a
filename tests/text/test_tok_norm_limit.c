/* test_tok_norm_limit.c - normalized text is capped at TOK_NORM_GROWTH x the input + a base
 * (tok_norm_cap). A tokenizer.json can chain Replace normalizers that each multiply the text:
 * fuzz_tokenizer_json found one that turned "2024" into a request for 8 GiB. Such an encode now
 * fails with CMF_E_LIMIT naming the piece and the cap; real growth (Replace ' ' -> U+2581 on
 * long text, a large but bounded expansion) still encodes; a normalized added token that would
 * grow past the cap fails the load the same way. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/test.h"
#include "cortiq/tokenizer.h"
#include "text/tok_internal.h"
#include "text/tok_test_json.h"

/* The byte-level test tokenizer with `normalizer` in place of its null one (NULL on OOM). */
static char *with_normalizer(const char *normalizer, const char *added) {
    char *j = tok_test_byte_level_json();
    const char *from[2] = {"\"normalizer\":null", "\"added_tokens\":["};
    const char *to[2] = {normalizer, added};
    for (int k = 0; j && k < 2; k++) {
        if (!to[k]) continue;
        char *at = strstr(j, from[k]);
        if (!at) {
            free(j);
            return NULL;
        }
        size_t head = (size_t)(at - j), tail = strlen(at + strlen(from[k])), tl = strlen(to[k]);
        char *out = malloc(head + tl + tail + 1);
        if (out) {
            memcpy(out, j, head);
            memcpy(out + head, to[k], tl);
            memcpy(out + head + tl, at + strlen(from[k]), tail + 1);
        }
        free(j);
        j = out;
    }
    return j;
}

/* "normalizer":{Sequence of `steps` Replace "0" -> `zeros` zeros} (or one Replace if steps == 1).
 */
static char *zero_multiplier(int steps, int zeros) {
    char rep[512], body[8192];
    int n = snprintf(rep, sizeof rep,
                     "{\"type\":\"Replace\",\"pattern\":{\"String\":\"0\"},\"content\":\"");
    for (int i = 0; i < zeros && n + 4 < (int)sizeof rep; i++)
        rep[n++] = '0';
    snprintf(rep + n, sizeof rep - (size_t)n, "\"}");
    int m = snprintf(body, sizeof body, "\"normalizer\":{\"type\":\"Sequence\",\"normalizers\":[");
    for (int s = 0; s < steps; s++)
        m += snprintf(body + m, sizeof body - (size_t)m, "%s%s", s ? "," : "", rep);
    snprintf(body + m, sizeof body - (size_t)m, "]}");
    return with_normalizer(body, NULL);
}

static cmf_status encode(const char *json, const char *text, size_t len, size_t *n_ids,
                         cmf_err *err) {
    cmf_tokenizer *tok = NULL;
    cmf_status st = cmf_tokenizer_load(json, strlen(json), &tok, err);
    if (st != CMF_OK) return st;
    int32_t *ids = NULL;
    st = cmf_tokenizer_encode(tok, text, len, false, &ids, n_ids, err);
    free(ids);
    cmf_tokenizer_free(tok);
    return st;
}

int main(void) {
    cmf_err err;
    size_t n = 0;

    /* the fuzz finding's shape: 6 steps x40 turn each '0' into 40^6 bytes */
    char *json = zero_multiplier(6, 40);
    CHECK(json != NULL);
    cmf_status st = json ? encode(json, "2024", 4, &n, &err) : CMF_E_NOMEM;
    CHECK_MSG(st == CMF_E_LIMIT, "chained Replace: status %d (%s)", (int)st, err.msg);
    CHECK_MSG(strstr(err.msg, "normalized text limit exceeded on a 4-byte piece") != NULL, "%s",
              err.msg);
    /* the same tokenizer on text without a '0' is fine */
    st = json ? encode(json, "1 2 3", 5, &n, &err) : CMF_E_NOMEM;
    CHECK_MSG(st == CMF_OK, "no zeros: %s", err.msg);
    free(json);

    /* one step x40 is within the cap: "2024" -> 2 + 80 bytes */
    json = zero_multiplier(1, 40);
    st = json ? encode(json, "2024", 4, &n, &err) : CMF_E_NOMEM;
    CHECK_MSG(st == CMF_OK && n > 0, "one step: status %d (%s)", (int)st, err.msg);
    free(json);

    /* the boundary: 3000 '0' x 60 = 180,000 bytes <= 64 x 3000 + 65,536 = 257,536 (ok); x 100 =
     * 300,000 > the cap (limit), whether the step is alone or the last of a sequence */
    char *zeros = malloc(3001);
    CHECK(zeros != NULL);
    if (zeros) {
        memset(zeros, '0', 3000);
        zeros[3000] = 0;
        CHECK(tok_norm_cap(3000) == 64u * 3000u + 65536u);
        json = zero_multiplier(1, 60);
        st = json ? encode(json, zeros, 3000, &n, &err) : CMF_E_NOMEM;
        CHECK_MSG(st == CMF_OK, "x60: %s", err.msg);
        free(json);
        json = zero_multiplier(1, 100);
        st = json ? encode(json, zeros, 3000, &n, &err) : CMF_E_NOMEM;
        CHECK_MSG(st == CMF_E_LIMIT, "x100: status %d (%s)", (int)st, err.msg);
        CHECK_MSG(strstr(err.msg, "3000-byte piece") != NULL, "%s", err.msg);
        free(json);
        free(zeros);
    }

    /* real growth: Replace ' ' -> U+2581 (1 -> 3 bytes) and a Prepend on 200 KB of spaces */
    json = with_normalizer("\"normalizer\":{\"type\":\"Sequence\",\"normalizers\":["
                           "{\"type\":\"Prepend\",\"prepend\":\"\\u2581\"},"
                           "{\"type\":\"Replace\",\"pattern\":{\"String\":\" \"},"
                           "\"content\":\"\\u2581\"}]}",
                           NULL);
    char *spaces = malloc(200000);
    CHECK(json != NULL && spaces != NULL);
    if (json && spaces) {
        memset(spaces, ' ', 200000);
        st = encode(json, spaces, 200000, &n, &err);
        CHECK_MSG(st == CMF_OK && n > 0, "spaces: status %d (%s)", (int)st, err.msg);
    }
    free(spaces);
    free(json);

    /* a normalized added token whose normalized form would pass the cap fails the load */
    json = zero_multiplier(6, 40);
    char *j2 = NULL;
    if (json) {
        const char *at = strstr(json, "\"added_tokens\":[");
        const char *add = "{\"id\":310,\"content\":\"x0\",\"special\":false,\"normalized\":true},";
        if (at) {
            size_t head = (size_t)(at - json) + strlen("\"added_tokens\":["), al = strlen(add);
            j2 = malloc(strlen(json) + al + 1);
            if (j2) {
                memcpy(j2, json, head);
                memcpy(j2 + head, add, al);
                strcpy(j2 + head + al, json + head);
            }
        }
    }
    CHECK(j2 != NULL);
    if (j2) {
        cmf_tokenizer *tok = NULL;
        st = cmf_tokenizer_load(j2, strlen(j2), &tok, &err);
        CHECK_MSG(st == CMF_E_LIMIT, "added token: status %d (%s)", (int)st, err.msg);
        CHECK_MSG(tok == NULL, "no tokenizer on failure");
        if (tok) cmf_tokenizer_free(tok);
    }
    free(j2);
    free(json);
    TEST_DONE();
}
