/* cortiq/sign.h - detached signatures (spec §8.2): who made a file, not only whether it is intact.
 *
 * The hash chain (§8, §8.1) proves integrity against accidents; anyone can recompute it. A
 * signature proves authorship: Ed25519 (libsodium) over the SHA-256 of the WHOLE file, every byte
 * including the envelope and padding that hash64 does not cover. The container is never rewritten:
 * the signature lives in `<model>.sig` next to it. A shard set has one .sig per shard file.
 *
 * Key file: the 32-byte Ed25519 seed as 64 lowercase hex digits and one '\n' (65 bytes), mode 0600.
 * The seed is the private key; this library never prints it and wipes it from memory after use.
 *
 * .sig file, exactly these bytes (key order as in the spec, lowercase hex, one trailing '\n'):
 *   {"alg": "ed25519-sha256", "pubkey": "<64 hex>", "sha256": "<64 hex>", "sig": "<128 hex>"}\n
 * where sha256 = SHA-256(file) and sig = Ed25519-sign(seed, the 32 raw digest bytes).
 * On reading, any JSON object with exactly those four string members is accepted (whitespace and
 * member order free), but hex must be lowercase and of the exact length; a .sig is at most 4 KiB.
 *
 * Status codes: a malformed key or .sig is CMF_E_PARSE; a signature that does not match (bad
 * signature, file digest differs, other signer than required) is CMF_E_HASH; a missing .sig or
 * key is CMF_E_NOT_FOUND; an oversized one CMF_E_LIMIT; a key file others may read, an existing
 * key without overwrite, or a FILE that is not a regular file CMF_E_INVALID_ARG; the OS refusing
 * is CMF_E_IO. Messages name the file and the rule.
 */
#ifndef CORTIQ_SIGN_H
#define CORTIQ_SIGN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cortiq/export.h"
#include "cortiq/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define CMF_SIG_ALG          "ed25519-sha256"
#define CMF_SIG_SEED_BYTES   32
#define CMF_SIG_PUBKEY_BYTES 32
#define CMF_SIG_SHA256_BYTES 32
#define CMF_SIG_SIG_BYTES    64
#define CMF_SIG_FILE_MAX     4096 /* a .sig longer than this is refused before parsing */
/* A buffer this large holds the canonical .sig text (321 bytes) and a NUL. */
#define CMF_SIG_JSON_MAX 384

/* A parsed (or freshly made) signature record. */
typedef struct cmf_signature {
    uint8_t pubkey[CMF_SIG_PUBKEY_BYTES];
    uint8_t sha256[CMF_SIG_SHA256_BYTES];
    uint8_t sig[CMF_SIG_SIG_BYTES];
} cmf_signature;

/* Create a new random key and write it to key_path (0600, temp file + rename/link, so the path
 * never holds a partial key). Fails with CMF_E_INVALID_ARG if key_path exists and !overwrite
 * (checked atomically: link(2) refuses an existing name). If pubkey_out is non-NULL it receives
 * the public key (safe to print). CMF_E_IO when the directory cannot be written. */
CORTIQ_API CORTIQ_NODISCARD cmf_status cmf_sign_keygen(const char *key_path, bool overwrite,
                                                       uint8_t pubkey_out[CMF_SIG_PUBKEY_BYTES],
                                                       cmf_err *err);

/* Public key of the key file (parses it as cmf_sign_keygen writes it; refuses a key file that
 * group or others may read, with CMF_E_INVALID_ARG, like ssh does). */
CORTIQ_API CORTIQ_NODISCARD cmf_status cmf_sign_key_pubkey(const char *key_path,
                                                           uint8_t pubkey_out[CMF_SIG_PUBKEY_BYTES],
                                                           cmf_err *err);

/* SHA-256 of a regular file, read in 1 MiB chunks (constant memory at any file size). */
CORTIQ_API CORTIQ_NODISCARD cmf_status cmf_sha256_file(const char *path,
                                                       uint8_t out[CMF_SIG_SHA256_BYTES],
                                                       cmf_err *err);

/* Sign file_path with the key in key_path and write the .sig to sig_path (NULL: "<file_path>.sig"),
 * atomically (temp + rename). out (may be NULL) receives the record. */
CORTIQ_API CORTIQ_NODISCARD cmf_status cmf_sign_file(const char *file_path, const char *key_path,
                                                     const char *sig_path, cmf_signature *out,
                                                     cmf_err *err);

/* Check a signature against a file: the .sig at sig_path (NULL: "<file_path>.sig") must parse,
 * its Ed25519 signature must be valid for its sha256 under its pubkey, the file's SHA-256 must
 * equal that sha256, and, if want_pubkey is non-NULL, the pubkey must be that one. Returns
 * CMF_E_NOT_FOUND (and a message) if the .sig does not exist, so callers can treat absence as
 * "unsigned". out (may be NULL) receives the parsed record when it parsed. */
CORTIQ_API CORTIQ_NODISCARD cmf_status cmf_sign_verify_file(
    const char *file_path, const char *sig_path, const uint8_t want_pubkey[CMF_SIG_PUBKEY_BYTES],
    cmf_signature *out, cmf_err *err);

/* The canonical .sig text of s (format above; 321 bytes) into buf; returns its length, or 0 if
 * cap is too small (CMF_SIG_JSON_MAX always suffices). */
CORTIQ_API size_t cmf_sig_format(const cmf_signature *s, char *buf, size_t cap);

/* Parse .sig text (len bytes, need not be NUL-terminated). ctx names the file in messages.
 * Each rule has its own message: not JSON / not an object, missing or unknown member, member not
 * a string, wrong alg, bad hex digit, wrong hex length. */
CORTIQ_API CORTIQ_NODISCARD cmf_status cmf_sig_parse(const char *text, size_t len, const char *ctx,
                                                     cmf_signature *out, cmf_err *err);

/* Lowercase hex of n bytes into out (2n+1 chars with NUL). */
CORTIQ_API void cmf_hex_encode(const uint8_t *in, size_t n, char *out);
/* Parse exactly 2n lowercase hex digits (len must be 2n) into out; false on any other input. */
CORTIQ_API bool cmf_hex_decode(const char *hex, size_t len, uint8_t *out, size_t n);

#ifdef __cplusplus
}
#endif
#endif
