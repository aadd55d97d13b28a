/* hub_digest.c - stream a download through the checksum it must match, so a resumed or
 * corrupted file is caught before it is renamed into blobs/. */
#include "hub/hub_digest.h"

#include <stdio.h>
#include <string.h>

void hub_digest_init(hub_digest *d, const hub_file *f) {
    d->lfs = f->sha256[0] != 0;
    if (d->lfs) {
        crypto_hash_sha256_init(&d->sha256);
        return;
    }
    char head[32];
    int n = snprintf(head, sizeof head, "blob %llu", (unsigned long long)f->size);
    hub_sha1_init(&d->sha1);
    hub_sha1_update(&d->sha1, head, (size_t)n + 1); /* the NUL belongs to git's header */
}

void hub_digest_update(hub_digest *d, const void *data, size_t n) {
    if (d->lfs)
        crypto_hash_sha256_update(&d->sha256, data, n);
    else
        hub_sha1_update(&d->sha1, data, n);
}

bool hub_digest_matches(hub_digest *d, const hub_file *f, char hex[65]) {
    uint8_t out[32];
    size_t n = d->lfs ? 32 : 20;
    if (d->lfs)
        crypto_hash_sha256_final(&d->sha256, out);
    else
        hub_sha1_final(&d->sha1, out);
    sodium_bin2hex(hex, 65, out, n);
    return !strcmp(hex, d->lfs ? f->sha256 : f->oid);
}

bool hub_digest_file_prefix(hub_digest *d, const char *path, uint64_t n) {
    FILE *fp = fopen(path, "rb");
    if (!fp) return false;
    static _Thread_local unsigned char buf[1 << 16];
    while (n > 0) {
        size_t want = n < sizeof buf ? (size_t)n : sizeof buf;
        size_t got = fread(buf, 1, want, fp);
        if (got != want) {
            fclose(fp);
            return false;
        }
        hub_digest_update(d, buf, got);
        n -= got;
    }
    fclose(fp);
    return true;
}
