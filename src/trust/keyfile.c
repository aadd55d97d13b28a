/* keyfile.c - Ed25519 seed files: create (0600, atomic, never printed) and load. */
#include "trust/keyfile.h"

#include <sodium.h>
#include <string.h>
#include <sys/stat.h>

#include "common/err.h"
#include "trust/trust_io.h"

#define KEY_TEXT_MAX 128 /* 64 hex digits plus a line end; anything longer is not a key file */

cmf_status trust_sodium_ready(cmf_err *err) {
    if (sodium_init() < 0)
        return cmf_err_set(err, CMF_E_UNSUPPORTED, "libsodium", "initialisation failed");
    return CMF_OK;
}

cmf_status cmf_sign_keygen(const char *key_path, bool overwrite,
                           uint8_t pubkey_out[CMF_SIG_PUBKEY_BYTES], cmf_err *err) {
    if (!key_path || !*key_path)
        return cmf_err_set(err, CMF_E_INVALID_ARG, NULL, "keygen: no key file path");
    cmf_status st = trust_sodium_ready(err);
    if (st) return st;
    uint8_t seed[CMF_SIG_SEED_BYTES], pk[crypto_sign_PUBLICKEYBYTES],
        sk[crypto_sign_SECRETKEYBYTES];
    char text[2 * CMF_SIG_SEED_BYTES + 2];
    randombytes_buf(seed, sizeof seed);
    cmf_hex_encode(seed, sizeof seed, text);
    text[2 * CMF_SIG_SEED_BYTES] = '\n';
    text[2 * CMF_SIG_SEED_BYTES + 1] = '\0';
    crypto_sign_seed_keypair(pk, sk, seed);
    st = trust_write_atomic(key_path, text, 2 * CMF_SIG_SEED_BYTES + 1, 0600, overwrite, err);
    if (!st && pubkey_out) memcpy(pubkey_out, pk, CMF_SIG_PUBKEY_BYTES);
    sodium_memzero(seed, sizeof seed);
    sodium_memzero(sk, sizeof sk);
    sodium_memzero(text, sizeof text);
    return st;
}

cmf_status trust_key_load_seed(const char *key_path, uint8_t seed[CMF_SIG_SEED_BYTES],
                               cmf_err *err) {
    char text[KEY_TEXT_MAX + 1];
    size_t len;
    mode_t mode;
    cmf_status st = trust_read_small(key_path, "key file", text, KEY_TEXT_MAX, &len, &mode, err);
    if (st) return st;
    if (mode & 077) {
        sodium_memzero(text, sizeof text);
        return cmf_err_set(
            err, CMF_E_INVALID_ARG, key_path,
            "key file has mode %04o: a private key must not be readable by group or others "
            "(chmod 600 it)",
            (unsigned)(mode & 07777));
    }
    while (len && (text[len - 1] == '\n' || text[len - 1] == '\r' || text[len - 1] == ' ' ||
                   text[len - 1] == '\t'))
        len--;
    if (len != 2 * CMF_SIG_SEED_BYTES || !cmf_hex_decode(text, len, seed, CMF_SIG_SEED_BYTES))
        st = cmf_err_set(err, CMF_E_PARSE, key_path,
                         "not a key file: it must hold one 32-byte seed as 64 lowercase hex digits "
                         "(has %zu characters)",
                         len);
    sodium_memzero(text, sizeof text);
    return st;
}

cmf_status cmf_sign_key_pubkey(const char *key_path, uint8_t pubkey_out[CMF_SIG_PUBKEY_BYTES],
                               cmf_err *err) {
    cmf_status st = trust_sodium_ready(err);
    if (st) return st;
    uint8_t seed[CMF_SIG_SEED_BYTES], sk[crypto_sign_SECRETKEYBYTES];
    if ((st = trust_key_load_seed(key_path, seed, err))) return st;
    crypto_sign_seed_keypair(pubkey_out, sk, seed);
    sodium_memzero(seed, sizeof seed);
    sodium_memzero(sk, sizeof sk);
    return CMF_OK;
}
