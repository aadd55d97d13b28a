/* keyfile.h - loading the private seed (internal: the seed never leaves the trust module). */
#ifndef CORTIQ_TRUST_KEYFILE_H
#define CORTIQ_TRUST_KEYFILE_H

#include <stdint.h>

#include "cortiq/sign.h"

/* Read the 32-byte seed of key_path (format in cortiq/sign.h). Refuses a key that group/others
 * may read (CMF_E_INVALID_ARG), a malformed one (CMF_E_PARSE). The caller wipes seed with
 * sodium_memzero when done. */
cmf_status trust_key_load_seed(const char *key_path, uint8_t seed[CMF_SIG_SEED_BYTES],
                               cmf_err *err);

/* sodium_init(), CMF_E_UNSUPPORTED if libsodium cannot start (no entropy source). */
cmf_status trust_sodium_ready(cmf_err *err);

#endif
