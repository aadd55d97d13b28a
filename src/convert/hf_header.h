/* hf_header.h - Hugging Face checkpoint metadata into the CMF header (internal to convert). */
#ifndef CORTIQ_CONVERT_HF_HEADER_H
#define CORTIQ_CONVERT_HF_HEADER_H

#include <jansson.h>

#include "cortiq/dtype.h"
#include "cortiq/status.h"

/* Load dir/file as JSON; NULL when absent (an error only if required) or invalid (Parse). */
json_t *hf_load_json(const char *dir, const char *file, cmf_err *err, int required);
/* The header object and, if config is non-NULL, the (text) config it came from. quant_name is
 * the CLI's name (provenance), quant the matrices' dtype (the spec's quant_type label). */
cmf_status hf_build_header(const char *dir, const char *quant_name, cmf_dtype quant, json_t **out,
                           json_t **config, cmf_err *err);

#endif
