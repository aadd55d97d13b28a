/* masks_dir.h - per-task keep-sets from a directory into a masks section (spec §5).
 * Input format: docs/CONVERT.md "Masks input". */
#ifndef CORTIQ_CONVERT_MASKS_DIR_H
#define CORTIQ_CONVERT_MASKS_DIR_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "cortiq/status.h"

/* arch: the header's arch object (num_layers, intermediate_size, num_attention_heads, moe). */
cmf_status cmf_masks_from_dir(const char *dir, json_t *arch, uint8_t **out, size_t *len,
                              cmf_err *err);

#endif
