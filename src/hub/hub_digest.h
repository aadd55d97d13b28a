/* hub_digest.h - the checksum a downloaded file must match: SHA-256 for LFS files (the hub's
 * lfs.oid), the git blob id for the others (the tree's oid, which is also their ETag). */
#ifndef CORTIQ_HUB_DIGEST_H
#define CORTIQ_HUB_DIGEST_H

#include <sodium.h>
#include <stdbool.h>

#include "hub/hub_listing.h"
#include "hub/hub_sha1.h"

typedef struct hub_digest {
    bool lfs;
    crypto_hash_sha256_state sha256;
    hub_sha1 sha1;
} hub_digest;

/* Start the digest of file f (a git blob id hashes "blob <size>\0" first). */
void hub_digest_init(hub_digest *d, const hub_file *f);
void hub_digest_update(hub_digest *d, const void *data, size_t n);
/* Finish and compare with f's published checksum; hex gets the computed value. */
bool hub_digest_matches(hub_digest *d, const hub_file *f, char hex[65]);
/* Feed the first n bytes of the file at path (a partial download being resumed). */
bool hub_digest_file_prefix(hub_digest *d, const char *path, uint64_t n);

#endif
