/* sign.c - sign a file (SHA-256 streamed, Ed25519 over the digest) and check a detached .sig. */
#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/err.h"
#include "cortiq/sign.h"
#include "trust/keyfile.h"
#include "trust/trust_io.h"

#define HASH_CHUNK (1u << 20)

cmf_status cmf_sha256_file(const char *path, uint8_t out[CMF_SIG_SHA256_BYTES], cmf_err *err) {
    cmf_status st = trust_sodium_ready(err);
    if (st) return st;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0)
        return cmf_err_set(err, errno == ENOENT ? CMF_E_NOT_FOUND : CMF_E_IO, path,
                           "cannot open: %s", strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        return cmf_err_set(err, CMF_E_INVALID_ARG, path,
                           "only a regular file can be hashed and signed");
    }
    uint8_t *buf = malloc(HASH_CHUNK);
    if (!buf) {
        close(fd);
        return cmf_err_set(err, CMF_E_NOMEM, path, "SHA-256 buffer");
    }
    crypto_hash_sha256_state h;
    crypto_hash_sha256_init(&h);
    for (;;) {
        ssize_t n = read(fd, buf, HASH_CHUNK);
        if (n < 0) {
            if (errno == EINTR) continue;
            st = cmf_err_set(err, CMF_E_IO, path, "read failed while hashing: %s", strerror(errno));
            break;
        }
        if (n == 0) break;
        crypto_hash_sha256_update(&h, buf, (unsigned long long)n);
    }
    free(buf);
    close(fd);
    if (!st) crypto_hash_sha256_final(&h, out);
    return st;
}

cmf_status cmf_sign_file(const char *file_path, const char *key_path, const char *sig_path,
                         cmf_signature *out, cmf_err *err) {
    cmf_status st = trust_sodium_ready(err);
    if (st) return st;
    cmf_signature s;
    if ((st = cmf_sha256_file(file_path, s.sha256, err))) return st;
    uint8_t seed[CMF_SIG_SEED_BYTES], sk[crypto_sign_SECRETKEYBYTES];
    if ((st = trust_key_load_seed(key_path, seed, err))) return st;
    crypto_sign_seed_keypair(s.pubkey, sk, seed);
    crypto_sign_detached(s.sig, NULL, s.sha256, sizeof s.sha256, sk);
    sodium_memzero(seed, sizeof seed);
    sodium_memzero(sk, sizeof sk);
    char text[CMF_SIG_JSON_MAX];
    size_t len = cmf_sig_format(&s, text, sizeof text);
    if (!len)
        return cmf_err_set(err, CMF_E_INVALID_ARG, file_path, "signature text buffer too small");
    char *def = sig_path ? NULL : trust_sig_path(file_path);
    if (!sig_path && !def) return cmf_err_set(err, CMF_E_NOMEM, file_path, "signature path");
    st = trust_write_atomic(sig_path ? sig_path : def, text, len, 0644, true, err);
    free(def);
    if (!st && out) *out = s;
    return st;
}

static cmf_status verify_with(const char *file_path, const char *sig, const uint8_t *want_pubkey,
                              cmf_signature *out, cmf_err *err) {
    char text[CMF_SIG_FILE_MAX + 1];
    size_t len;
    cmf_status st = trust_read_small(sig, "signature", text, CMF_SIG_FILE_MAX, &len, NULL, err);
    if (st) return st;
    cmf_signature s;
    if ((st = cmf_sig_parse(text, len, sig, &s, err))) return st;
    if (out) *out = s;
    char hex[2 * CMF_SIG_SIG_BYTES + 1];
    if (want_pubkey && sodium_memcmp(want_pubkey, s.pubkey, CMF_SIG_PUBKEY_BYTES) != 0) {
        cmf_hex_encode(s.pubkey, sizeof s.pubkey, hex);
        return cmf_err_set(err, CMF_E_HASH, sig,
                           "signature: signed by pubkey %s, not by the required one", hex);
    }
    if (crypto_sign_verify_detached(s.sig, s.sha256, sizeof s.sha256, s.pubkey) != 0)
        return cmf_err_set(
            err, CMF_E_HASH, sig,
            "signature: bad signature: \"sig\" is not a valid Ed25519 signature of \"sha256\" "
            "under \"pubkey\"");
    uint8_t digest[CMF_SIG_SHA256_BYTES];
    if ((st = cmf_sha256_file(file_path, digest, err))) return st;
    if (sodium_memcmp(digest, s.sha256, sizeof digest) != 0) {
        cmf_hex_encode(digest, sizeof digest, hex);
        return cmf_err_set(
            err, CMF_E_HASH, file_path,
            "signature: digest mismatch: the file's SHA-256 is %s, %s signed another one "
            "(the file changed after signing)",
            hex, sig);
    }
    return CMF_OK;
}

cmf_status cmf_sign_verify_file(const char *file_path, const char *sig_path,
                                const uint8_t want_pubkey[CMF_SIG_PUBKEY_BYTES], cmf_signature *out,
                                cmf_err *err) {
    cmf_status st = trust_sodium_ready(err);
    if (st) return st;
    char *def = sig_path ? NULL : trust_sig_path(file_path);
    if (!sig_path && !def) return cmf_err_set(err, CMF_E_NOMEM, file_path, "signature path");
    st = verify_with(file_path, sig_path ? sig_path : def, want_pubkey, out, err);
    free(def);
    return st;
}
