/* hub_cache.h - the huggingface_hub cache layout:
 *   <cache>/models--OWNER--NAME/blobs/<blob name>[.incomplete]
 *   <cache>/models--OWNER--NAME/snapshots/<commit>/<repo path>  -> ../../blobs/<blob name>
 *   <cache>/models--OWNER--NAME/refs/<revision>                  (the commit, no newline) */
#ifndef CORTIQ_HUB_CACHE_H
#define CORTIQ_HUB_CACHE_H

#include <stdbool.h>
#include <stdint.h>

#include "cortiq/status.h"

/* malloc'd "<cache>/models--OWNER--NAME". */
char *hub_cache_repo_dir(const char *cache, const char *repo);
/* malloc'd a + "/" + b (+ "/" + c when c is non-NULL). */
char *hub_cache_join(const char *a, const char *b, const char *c);

/* mkdir -p dir. */
cmf_status hub_cache_mkdirs(const char *dir, cmf_err *err);

/* True when snapshots/<commit>/<path> leads to a regular file of the given size. */
bool hub_cache_has_file(const char *repo_dir, const char *commit, const char *path, uint64_t size);
/* True when blobs/<blob> is a regular file of the given size. */
bool hub_cache_has_blob(const char *repo_dir, const char *blob, uint64_t size);

/* Point snapshots/<commit>/<path> at blobs/<blob> with a relative symlink (replaced
 * atomically if one is there). */
cmf_status hub_cache_link(const char *repo_dir, const char *commit, const char *path,
                          const char *blob, cmf_err *err);

/* Write refs/<revision> = commit atomically. */
cmf_status hub_cache_write_ref(const char *repo_dir, const char *revision, const char *commit,
                               cmf_err *err);

#endif
