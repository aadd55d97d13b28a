/* fuzz_sig: any bytes as a detached .sig (spec §8.2) -> cmf_sig_parse. A record that parses must
 * survive the canonical round trip (format -> parse gives the same record, and the text is the
 * fixed 321 bytes), and the signature check verify runs on it (Ed25519 over the stated digest,
 * the required-signer comparison) must return without touching memory it does not own. */
#include <sodium.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cortiq/sign.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static int sodium_ok;
    if (!sodium_ok) sodium_ok = sodium_init() >= 0 ? 1 : -1;
    cmf_signature s;
    cmf_err err;
    if (cmf_sig_parse((const char *)data, size, "fuzz.sig", &s, &err) != CMF_OK) return 0;
    char text[CMF_SIG_JSON_MAX];
    size_t n = cmf_sig_format(&s, text, sizeof text);
    cmf_signature again;
    if (n != 321 || cmf_sig_parse(text, n, "fuzz.sig", &again, &err) != CMF_OK ||
        memcmp(&s, &again, sizeof s) != 0)
        abort(); /* the canonical text of a parsed record must parse back to it */
    char hex[2 * CMF_SIG_SIG_BYTES + 1];
    uint8_t back[CMF_SIG_SIG_BYTES];
    cmf_hex_encode(s.sig, sizeof s.sig, hex);
    if (!cmf_hex_decode(hex, 2 * sizeof s.sig, back, sizeof back) ||
        memcmp(back, s.sig, sizeof back))
        abort();
    if (sodium_ok > 0) {
        volatile int v = crypto_sign_verify_detached(s.sig, s.sha256, sizeof s.sha256, s.pubkey);
        v += sodium_memcmp(s.pubkey, again.pubkey, sizeof s.pubkey);
        (void)v;
    }
    return 0;
}
