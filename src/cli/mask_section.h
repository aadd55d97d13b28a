/* mask_section.h - rewriting a file's masks section (spec §5) for `cortiq mask derive|rm`: the
 * existing masks are carried over (bits, name, description, quality) with one added or one
 * removed, and the new section is appended in place (spec §9: earlier bytes never change). */
#ifndef CORTIQ_CLI_MASK_SECTION_H
#define CORTIQ_CLI_MASK_SECTION_H

#include <stdint.h>

#include "cortiq/format.h"

/* One mask to add: rows as cmf_masks_builder_add takes them. */
typedef struct mask_new {
    const char *name, *description, *quality_json;
    const uint8_t *ffn, *heads, *gates;
} mask_new;

/* Serialize the masks of `old` (may be NULL) except the one named drop (may be NULL), plus add
 * (may be NULL), with the given dimensions. default_task: kept when it still names a mask,
 * else dropped (set_default non-NULL sets it). *out is malloc'd. */
cmf_status mask_section_build(const cmf_masks *old, uint32_t n_layers, uint32_t intermediate,
                              uint32_t n_heads, const char *drop, const mask_new *add,
                              const char *set_default, uint8_t **out, size_t *len, cmf_err *err);

/* Append the section to the file at path in place (cmf_append_*). */
cmf_status mask_section_append(const char *path, const uint8_t *bytes, size_t len, cmf_err *err);

#endif
