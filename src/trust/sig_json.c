/* sig_json.c - the .sig record: canonical text out, strict parse in (spec §8.2). */
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "common/err.h"
#include "cortiq/sign.h"

size_t cmf_sig_format(const cmf_signature *s, char *buf, size_t cap) {
    char pk[2 * CMF_SIG_PUBKEY_BYTES + 1], dg[2 * CMF_SIG_SHA256_BYTES + 1],
        sg[2 * CMF_SIG_SIG_BYTES + 1];
    cmf_hex_encode(s->pubkey, sizeof s->pubkey, pk);
    cmf_hex_encode(s->sha256, sizeof s->sha256, dg);
    cmf_hex_encode(s->sig, sizeof s->sig, sg);
    int n = snprintf(buf, cap,
                     "{\"alg\": \"%s\", \"pubkey\": \"%s\", \"sha256\": \"%s\", \"sig\": \"%s\"}\n",
                     CMF_SIG_ALG, pk, dg, sg);
    return n < 0 || (size_t)n >= cap ? 0 : (size_t)n;
}

/* One hex member: present, a string, exactly 2n lowercase hex digits. */
static cmf_status hex_member(json_t *obj, const char *key, uint8_t *out, size_t n, const char *ctx,
                             cmf_err *err) {
    json_t *v = json_object_get(obj, key);
    if (!v) return cmf_err_set(err, CMF_E_PARSE, ctx, "signature: member \"%s\" is missing", key);
    if (!json_is_string(v))
        return cmf_err_set(err, CMF_E_PARSE, ctx, "signature: \"%s\" must be a string", key);
    const char *s = json_string_value(v);
    size_t len = json_string_length(v);
    if (len != 2 * n)
        return cmf_err_set(err, CMF_E_PARSE, ctx,
                           "signature: \"%s\" has %zu hex digits, must have %zu (%zu bytes)", key,
                           len, 2 * n, n);
    if (!cmf_hex_decode(s, len, out, n)) {
        size_t bad = 0;
        while (bad < len && ((s[bad] >= '0' && s[bad] <= '9') || (s[bad] >= 'a' && s[bad] <= 'f')))
            bad++;
        return cmf_err_set(
            err, CMF_E_PARSE, ctx,
            "signature: \"%s\" has a bad hex digit at position %zu (only 0-9 and lowercase a-f)",
            key, bad);
    }
    return CMF_OK;
}

cmf_status cmf_sig_parse(const char *text, size_t len, const char *ctx, cmf_signature *out,
                         cmf_err *err) {
    if (len > CMF_SIG_FILE_MAX)
        return cmf_err_set(err, CMF_E_LIMIT, ctx, "signature: %zu bytes, a .sig is at most %d", len,
                           CMF_SIG_FILE_MAX);
    json_error_t je;
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
    if (!root)
        return cmf_err_set(err, CMF_E_PARSE, ctx, "signature: not valid JSON (line %d: %s)",
                           je.line, je.text);
    cmf_status st = CMF_OK;
    if (!json_is_object(root)) {
        st = cmf_err_set(err, CMF_E_PARSE, ctx,
                         "signature: the JSON must be an object {alg, pubkey, sha256, sig}");
        goto done;
    }
    const char *key;
    json_t *val;
    json_object_foreach(root, key, val) {
        if (strcmp(key, "alg") && strcmp(key, "pubkey") && strcmp(key, "sha256") &&
            strcmp(key, "sig")) {
            st = cmf_err_set(err, CMF_E_PARSE, ctx,
                             "signature: unknown member \"%.64s\" (only alg, pubkey, sha256, sig)",
                             key);
            goto done;
        }
    }
    json_t *alg = json_object_get(root, "alg");
    if (!alg) {
        st = cmf_err_set(err, CMF_E_PARSE, ctx, "signature: member \"alg\" is missing");
        goto done;
    }
    if (!json_is_string(alg) || strcmp(json_string_value(alg), CMF_SIG_ALG) ||
        json_string_length(alg) != strlen(CMF_SIG_ALG)) {
        st = cmf_err_set(err, CMF_E_PARSE, ctx,
                         "signature: alg is %s%.40s%s, only \"%s\" is supported",
                         json_is_string(alg) ? "\"" : "",
                         json_is_string(alg) ? json_string_value(alg) : "not a string",
                         json_is_string(alg) ? "\"" : "", CMF_SIG_ALG);
        goto done;
    }
    cmf_signature s;
    if ((st = hex_member(root, "pubkey", s.pubkey, sizeof s.pubkey, ctx, err))) goto done;
    if ((st = hex_member(root, "sha256", s.sha256, sizeof s.sha256, ctx, err))) goto done;
    if ((st = hex_member(root, "sig", s.sig, sizeof s.sig, ctx, err))) goto done;
    if (out) *out = s;
done:
    json_decref(root);
    return st;
}
