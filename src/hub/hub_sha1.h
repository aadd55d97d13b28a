/* hub_sha1.h - SHA-1 (FIPS 180-4), streaming. Used for one thing only: the git blob id the hub
 * publishes for files not stored in LFS, which is not a security check (the LFS files that
 * hold the weights are checked with SHA-256). */
#ifndef CORTIQ_HUB_SHA1_H
#define CORTIQ_HUB_SHA1_H

#include <stddef.h>
#include <stdint.h>

typedef struct hub_sha1 {
    uint32_t h[5];
    uint64_t len; /* bytes hashed */
    uint8_t block[64];
    size_t used;
} hub_sha1;

void hub_sha1_init(hub_sha1 *s);
void hub_sha1_update(hub_sha1 *s, const void *data, size_t n);
void hub_sha1_final(hub_sha1 *s, uint8_t out[20]);

#endif
