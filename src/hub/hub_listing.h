/* hub_listing.h - a repo at one revision: the commit it resolves to and its files with the
 * sizes and checksums the hub publishes. */
#ifndef CORTIQ_HUB_LISTING_H
#define CORTIQ_HUB_LISTING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "hub/hub_env.h"

typedef struct hub_file {
    char *path;      /* repo path, checked: relative, no "." or ".." segment */
    uint64_t size;   /* bytes of the file itself (the LFS object's size for LFS files) */
    char oid[41];    /* git blob id (sha1 of "blob <size>\0" + content) */
    char sha256[65]; /* LFS files: sha256 of the content; "" for plain git files */
} hub_file;

typedef struct hub_listing {
    char commit[41];
    hub_file *files;
    size_t n;
} hub_listing;

/* GET /api/models/<repo> (or .../revision/<rev>) for the commit, then every page of
 * /api/models/<repo>/tree/<commit>[/<dir>] for the files of that folder (not recursive).
 * *unreachable is set when the endpoint did not answer at all. */
cmf_status hub_list(const hub_env *env, const char *repo, const char *revision, const char *dir,
                    long stall_s, hub_listing *out, bool *unreachable, cmf_err *err);

/* The same from the cache alone: the commit from refs/<revision> (or the revision itself when
 * it is a cached commit), the files from snapshots/<commit>[/<dir>] with their sizes; no
 * checksums (they were checked when downloaded). CMF_E_NOT_FOUND when nothing is cached. */
cmf_status hub_list_cached(const char *repo_dir, const char *repo, const char *revision,
                           const char *dir, hub_listing *out, cmf_err *err);
/* Append the files of one page of a tree answer (a JSON array; folders skipped). *cap is the
 * allocated length of l->files (0 for an empty listing). url names the answer in messages.
 * Every path, oid and sha256 is checked: they become file names in the cache. */
cmf_status hub_listing_add_page(hub_listing *l, size_t *cap, const json_t *page, const char *url,
                                cmf_err *err);

void hub_listing_free(hub_listing *l);
const hub_file *hub_listing_find(const hub_listing *l, const char *path);

/* The name a file's content has in blobs/: its sha256 for LFS files, else its git oid (what
 * huggingface_hub names it after the ETag). */
const char *hub_file_blob_name(const hub_file *f);

/* True for a string of n lowercase hex digits. */
bool hub_is_hex(const char *s, size_t n);
/* True for a safe relative repo path (no "", ".", ".." segment, no leading '/', no '\\'). */
bool hub_path_ok(const char *path);

#endif
