/* test_sign.c - detached signatures (spec §8.2): keys, sign/verify, every tamper has its own error,
 * and a flipped byte anywhere in the file (also padding that hash64 does not cover) is caught. */
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/test.h"
#include "cortiq/sign.h"
#include "format/sample.h"

static const char *MODEL = "trust_sample.cmf", *KEY = "trust_test.key",
                  *SIG = "trust_sample.cmf.sig";

static cmf_status verify_msg(const char *sig_path, const uint8_t *want, cmf_err *err) {
    cmf_err_clear(err);
    return cmf_sign_verify_file(MODEL, sig_path, want, NULL, err);
}

/* Write a .sig whose text is the canonical one with `from` replaced by `to`, check the error. */
static void tamper_sig(const char *canon, const char *from, const char *to, cmf_status want,
                       const char *msg_part) {
    char text[1024];
    const char *at = strstr(canon, from);
    CHECK_MSG(at != NULL, "'%s' not in the canonical text", from);
    if (!at) return;
    snprintf(text, sizeof text, "%.*s%s%s", (int)(at - canon), canon, to, at + strlen(from));
    CHECK(spit("tampered.sig", text, strlen(text)) == 0);
    cmf_err err;
    cmf_status st = verify_msg("tampered.sig", NULL, &err);
    CHECK_MSG(st == want && strstr(err.msg, msg_part) && strstr(err.msg, "tampered.sig"),
              "replace '%.20s' -> '%.20s': got %s '%s', want %s '%s'", from, to,
              cmf_status_name(st), err.msg, cmf_status_name(want), msg_part);
}

static void test_hex(void) {
    uint8_t b[3] = {0x00, 0xAB, 0xFF}, back[3];
    char h[7];
    cmf_hex_encode(b, 3, h);
    CHECK(!strcmp(h, "00abff"));
    CHECK(cmf_hex_decode(h, 6, back, 3) && !memcmp(b, back, 3));
    CHECK(!cmf_hex_decode("00ABff", 6, back, 3)); /* lowercase only */
    CHECK(!cmf_hex_decode("00abf", 5, back, 3));
    CHECK(!cmf_hex_decode("00abfg", 6, back, 3));
}

static void test_keys(uint8_t pk[32]) {
    cmf_err err;
    unlink(KEY);
    CHECK_MSG(cmf_sign_keygen(KEY, false, pk, &err) == CMF_OK, "%s", err.msg);
    struct stat sb;
    CHECK(stat(KEY, &sb) == 0 && (sb.st_mode & 07777) == 0600 && sb.st_size == 65);
    uint8_t pk2[32], other[32];
    CHECK(cmf_sign_key_pubkey(KEY, pk2, &err) == CMF_OK && !memcmp(pk, pk2, 32));
    /* an existing key is never replaced without overwrite, and stays intact */
    size_t n1, n2;
    uint8_t *before = slurp(KEY, &n1);
    CHECK(cmf_sign_keygen(KEY, false, other, &err) == CMF_E_INVALID_ARG &&
          strstr(err.msg, "already exists"));
    uint8_t *after = slurp(KEY, &n2);
    CHECK(before && after && n1 == n2 && !memcmp(before, after, n1));
    free(before);
    free(after);
    /* with overwrite: a new key, still 0600 */
    CHECK(cmf_sign_keygen("trust_other.key", true, other, &err) == CMF_OK);
    CHECK(cmf_sign_keygen("trust_other.key", true, other, &err) == CMF_OK && memcmp(other, pk, 32));
    CHECK(stat("trust_other.key", &sb) == 0 && (sb.st_mode & 07777) == 0600);
    /* a world-readable key is refused; a malformed one too */
    CHECK(chmod("trust_other.key", 0644) == 0);
    CHECK(cmf_sign_key_pubkey("trust_other.key", pk2, &err) == CMF_E_INVALID_ARG &&
          strstr(err.msg, "chmod 600"));
    CHECK(spit("trust_bad.key", "abcd\n", 5) == 0 && chmod("trust_bad.key", 0600) == 0);
    CHECK(cmf_sign_key_pubkey("trust_bad.key", pk2, &err) == CMF_E_PARSE &&
          strstr(err.msg, "64 lowercase hex"));
    CHECK(cmf_sign_key_pubkey("trust_missing.key", pk2, &err) == CMF_E_NOT_FOUND);
    /* known answer (RFC 8032 section 7.1, TEST 1): this seed has this public key */
    CHECK(spit("trust_fixed.key",
               "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60\n", 65) == 0 &&
          chmod("trust_fixed.key", 0600) == 0);
    uint8_t a[32];
    char ah[65];
    CHECK(cmf_sign_key_pubkey("trust_fixed.key", a, &err) == CMF_OK);
    cmf_hex_encode(a, 32, ah);
    CHECK_MSG(!strcmp(ah, "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a"), "%s",
              ah);
    /* known answer (FIPS 180-2): SHA-256("abc") */
    CHECK(spit("abc.txt", "abc", 3) == 0 && cmf_sha256_file("abc.txt", a, &err) == CMF_OK);
    cmf_hex_encode(a, 32, ah);
    CHECK_MSG(!strcmp(ah, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"), "%s",
              ah);
}

static void test_sign_verify(const uint8_t pk[32]) {
    cmf_err err;
    cmf_signature s, r;
    unlink(SIG);
    CHECK_STATUS(verify_msg(NULL, NULL, &t_err_),
                 CMF_E_NOT_FOUND); /* unsigned: absence is reported as such */
    CHECK_MSG(cmf_sign_file(MODEL, KEY, NULL, &s, &err) == CMF_OK, "%s", err.msg);
    CHECK(!memcmp(s.pubkey, pk, 32));
    uint8_t d[32];
    CHECK(cmf_sha256_file(MODEL, d, &err) == CMF_OK && !memcmp(d, s.sha256, 32));
    /* the exact bytes of the .sig */
    size_t n;
    char *text = (char *)slurp(SIG, &n);
    char want[CMF_SIG_JSON_MAX];
    size_t wn = cmf_sig_format(&s, want, sizeof want);
    CHECK(text && n == 321 && wn == n && !memcmp(text, want, n));
    CHECK(text && !strncmp(text, "{\"alg\": \"ed25519-sha256\", \"pubkey\": \"", 37) &&
          text[n - 1] == '\n');
    CHECK(cmf_sig_format(&s, want, 321) == 0); /* no room for the NUL */
    CHECK_MSG(verify_msg(NULL, NULL, &err) == CMF_OK, "%s", err.msg);
    CHECK_MSG(cmf_sign_verify_file(MODEL, NULL, pk, &r, &err) == CMF_OK, "%s", err.msg);
    CHECK(!memcmp(&r, &s, sizeof r));
    /* another signer required */
    uint8_t wrong[32];
    memcpy(wrong, pk, 32);
    wrong[31] ^= 1;
    CHECK(verify_msg(NULL, wrong, &err) == CMF_E_HASH &&
          strstr(err.msg, "not by the required one"));
    /* -o elsewhere, and a re-parse with reordered members and spacing is accepted */
    CHECK(cmf_sign_file(MODEL, KEY, "elsewhere.sig", NULL, &err) == CMF_OK);
    CHECK(verify_msg("elsewhere.sig", pk, &err) == CMF_OK);
    char pkh[65], dh[65], sh[129], re[1024];
    cmf_hex_encode(s.pubkey, 32, pkh);
    cmf_hex_encode(s.sha256, 32, dh);
    cmf_hex_encode(s.sig, 64, sh);
    snprintf(
        re, sizeof re,
        "{ \"sig\":\"%s\",\n \"sha256\":\"%s\", \"pubkey\":\"%s\",\"alg\":\"ed25519-sha256\" }", sh,
        dh, pkh);
    CHECK(spit("reordered.sig", re, strlen(re)) == 0);
    CHECK_MSG(verify_msg("reordered.sig", pk, &err) == CMF_OK, "%s", err.msg);

    /* every tampered field has its own message */
    char canon[CMF_SIG_JSON_MAX];
    cmf_sig_format(&s, canon, sizeof canon);
    tamper_sig(canon, "ed25519-sha256", "ed25519-sha512", CMF_E_PARSE, "only \"ed25519-sha256\"");
    tamper_sig(canon, "\"ed25519-sha256\"", "7", CMF_E_PARSE, "alg is not a string");
    tamper_sig(canon, "\"alg\": \"ed25519-sha256\", ", "", CMF_E_PARSE, "\"alg\" is missing");
    tamper_sig(canon, "\"alg\"", "\"Alg\"", CMF_E_PARSE, "unknown member \"Alg\"");
    tamper_sig(canon, pkh, "", CMF_E_PARSE, "\"pubkey\" has 0 hex digits, must have 64");
    tamper_sig(canon, pkh, pkh + 2, CMF_E_PARSE, "\"pubkey\" has 62 hex digits");
    char up[65];
    memcpy(up, dh, 65);
    up[5] = (char)(up[5] >= 'a' ? up[5] - 32 : 'g');
    tamper_sig(canon, dh, up, CMF_E_PARSE, "\"sha256\" has a bad hex digit at position 5");
    tamper_sig(canon, "\"sig\": ", "\"sig\": 1, \"x\": ", CMF_E_PARSE, "unknown member \"x\"");
    tamper_sig(canon, "\"sig\": ", "\"sig\": 5, \"sig\": ", CMF_E_PARSE, "not valid JSON");
    tamper_sig(canon, "{", "[", CMF_E_PARSE, "not valid JSON");
    tamper_sig(canon, sh, "00", CMF_E_PARSE, "\"sig\" has 2 hex digits, must have 128");
    /* well-formed but wrong: one flipped bit in each of sig, sha256, pubkey */
    char flip[129];
    memcpy(flip, sh, 129);
    flip[10] = flip[10] == '0' ? '1' : '0';
    tamper_sig(canon, sh, flip, CMF_E_HASH, "bad signature");
    memcpy(flip, dh, 65);
    flip[63] = flip[63] == '0' ? '1' : '0';
    tamper_sig(canon, dh, flip, CMF_E_HASH, "bad signature");
    memcpy(flip, pkh, 65);
    flip[0] = flip[0] == '0' ? '1' : '0';
    tamper_sig(canon, pkh, flip, CMF_E_HASH, "bad signature");
    /* a consistent signature by another key over the right digest is valid, but not the required
     * signer */
    cmf_signature o;
    CHECK(cmf_sign_file(MODEL, "trust_fixed.key", "other_signer.sig", &o, &err) == CMF_OK);
    CHECK(verify_msg("other_signer.sig", NULL, &err) == CMF_OK);
    CHECK(verify_msg("other_signer.sig", pk, &err) == CMF_E_HASH &&
          strstr(err.msg, "not by the required one"));
    /* an oversized .sig is refused before parsing */
    char *big = malloc(CMF_SIG_FILE_MAX + 2);
    memset(big, ' ', CMF_SIG_FILE_MAX + 1);
    CHECK(big && spit("big.sig", big, CMF_SIG_FILE_MAX + 1) == 0);
    free(big);
    CHECK(verify_msg("big.sig", NULL, &err) == CMF_E_LIMIT);
    free(text);
}

/* Flip bytes across the whole file; each flip must fail with a digest mismatch. Padding after
 * tensor payloads (not covered by any hash64) is flipped in full. */
static void test_byteflips(void) {
    size_t n;
    uint8_t *orig = slurp(MODEL, &n);
    CHECK(orig && n > 4096);
    if (!orig) return;
    cmf_file *f;
    cmf_err err;
    CHECK(cmf_open(MODEL, 0, &f, &err) == CMF_OK);
    const cmf_envelope *env = cmf_file_envelope(f);
    size_t pos[2048], np = 0;
    for (size_t i = 0; i < CMF_ENVELOPE_SIZE && np < 2048; i += 3)
        pos[np++] = i; /* envelope */
    for (size_t i = 0; i < 300 && np < 2048; i++)
        pos[np++] = (size_t)((uint64_t)i * 7919u % n); /* everywhere */
    for (size_t i = 0; i < 16; i++) {                  /* header, directory, data starts */
        pos[np++] = (size_t)env->header_off + i;
        pos[np++] = (size_t)env->dir_off + i;
        pos[np++] = (size_t)env->data_off + i;
    }
    size_t pad_first = np;
    for (size_t k = 0; k < cmf_file_tensor_count(f); k++) { /* padding after each payload */
        const cmf_tensor *t = cmf_file_tensor_at(f, k);
        uint64_t end = env->data_off + t->off + t->nbytes, next = (end + 63) / 64 * 64;
        for (uint64_t p = end; p < next && p < n && np < 2048; p++)
            pos[np++] = (size_t)p;
    }
    size_t npad = np - pad_first;
    cmf_close(f);
    CHECK_MSG(npad > 0, "the sample file should have padding between payloads");
    size_t caught = 0, chain_missed = 0;
    for (size_t i = 0; i < np; i++) {
        orig[pos[i]] ^= 0x40;
        CHECK(spit(MODEL, orig, n) == 0);
        cmf_status st = verify_msg(NULL, NULL, &err);
        if (st == CMF_E_HASH && strstr(err.msg, "digest mismatch") && strstr(err.msg, MODEL))
            caught++;
        else
            fprintf(stderr, "flip at %zu not caught: %s %s\n", pos[i], cmf_status_name(st),
                    err.msg);
        if (i >= pad_first) { /* would the hash chain alone have noticed? */
            cmf_file *g;
            if (cmf_open(MODEL, 0, &g, NULL) == CMF_OK) {
                if (cmf_verify(g, 1, NULL, NULL, NULL) == CMF_OK) chain_missed++;
                cmf_close(g);
            }
        }
        orig[pos[i]] ^= 0x40;
    }
    CHECK(spit(MODEL, orig, n) == 0);
    CHECK_MSG(caught == np, "signature caught %zu of %zu flips", caught, np);
    printf("byte flips: %zu positions (%zu padding bytes), signature caught %zu; hash chain alone "
           "missed %zu of "
           "the padding flips\n",
           np, npad, caught, chain_missed);
    CHECK(verify_msg(NULL, NULL, &err) == CMF_OK);
    /* a truncated or grown file fails too */
    CHECK(spit(MODEL, orig, n - 1) == 0);
    CHECK(verify_msg(NULL, NULL, &err) == CMF_E_HASH);
    CHECK(spit(MODEL, orig, n) == 0);
    free(orig);
}

static void test_shards(void) {
    cmf_writer_opts o = {.shard_max_bytes = 12000};
    cmf_err err;
    CHECK(system("rm -f trust_shardy*") == 0);
    CHECK_MSG(sample_write("trust_shardy.cmf", &o, &err) == CMF_OK, "%s", err.msg);
    cmf_file *m;
    char first[256];
    unsigned count = 0;
    for (unsigned c = 2; c < 20 && !count; c++) {
        cmf_shard_name(first, sizeof first, "trust_shardy", 1, c);
        if (access(first, F_OK) == 0) count = c;
    }
    CHECK(count >= 2);
    CHECK(cmf_open_model(first, 0, &m, &err) == CMF_OK);
    if (!count) return;
    for (size_t i = 0; i < cmf_file_shard_count(m); i++) {
        const char *p = cmf_file_shard_path(m, i);
        CHECK_MSG(cmf_sign_file(p, KEY, NULL, NULL, &err) == CMF_OK, "%s", err.msg);
        CHECK_MSG(cmf_sign_verify_file(p, NULL, NULL, NULL, &err) == CMF_OK, "%s", err.msg);
    }
    /* each .sig binds its own shard: shard 1's .sig does not verify shard 2 */
    const char *p1 = cmf_file_shard_path(m, 0), *p2 = cmf_file_shard_path(m, 1);
    char s1[300];
    snprintf(s1, sizeof s1, "%s.sig", p1);
    CHECK(cmf_sign_verify_file(p2, s1, NULL, NULL, &err) == CMF_E_HASH &&
          strstr(err.msg, "digest mismatch"));
    cmf_close(m);
}

int main(void) {
    cmf_err err;
    unlink(MODEL);
    CHECK_MSG(sample_write(MODEL, NULL, &err) == CMF_OK, "%s", err.msg);
    uint8_t pk[32];
    test_hex();
    test_keys(pk);
    test_sign_verify(pk);
    test_byteflips();
    test_shards();
    uint8_t d[32];
    CHECK(cmf_sha256_file(".", d, &err) == CMF_E_INVALID_ARG); /* not a regular file */
    CHECK(cmf_sign_file(MODEL, "trust_missing.key", NULL, NULL, &err) == CMF_E_NOT_FOUND);
    TEST_DONE();
}
