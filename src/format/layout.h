/* layout.h - serializing the pieces a writer or appender emits: directory bytes, the final
 * header JSON (section_hashes, shard block) and required_features. */
#ifndef CORTIQ_FORMAT_LAYOUT_H
#define CORTIQ_FORMAT_LAYOUT_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cortiq/format.h"

typedef struct dir_entry {
    const char *name;
    uint8_t dtype, ndim;
    uint64_t shape[CMF_MAX_DIMS];
    uint64_t off, nbytes, hash;
} dir_entry;

/* Check a tensor description the caller wants to write (name, dtype, shape). */
cmf_status layout_check_tensor(const char *ctx, const char *name, cmf_dtype dtype, unsigned ndim,
                               const uint64_t *shape, cmf_err *err);
/* Size of the directory for these names (16 + 56 n + pool). */
uint64_t layout_directory_size(const dir_entry *e, size_t n);
/* Serialize into out (layout_directory_size bytes). */
void layout_write_directory(const dir_entry *e, size_t n, uint8_t *out);

typedef struct header_plan {
    uint64_t masks_hash, vocab_hash, index_hash; /* 0 = section absent */
    unsigned shard_no, shard_count;              /* count 0 = leave any "shard" key as given */
    bool strip_shard1_only;                      /* drop tokenizer_config / skills (shards 2..N) */
} header_plan;

/* Serialize the final header from a template object (not modified). *out malloc'd. */
cmf_status layout_header_json(json_t *tmpl, const header_plan *plan, char **out, size_t *len,
                              const char *ctx, cmf_err *err);
/* required_features for a shard holding these tensors, masks (or not) and this header. */
uint32_t layout_features(const dir_entry *e, size_t n, bool has_masks, json_t *header);
/* Parse a caller's header JSON text; must be an object. */
cmf_status layout_parse_header_template(const char *json, size_t len, json_t **out, const char *ctx,
                                        cmf_err *err);

#endif
