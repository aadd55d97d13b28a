/* hf_names.h - a checkpoint's tensors under the names a CMF file keeps. Text checkpoints keep
 * their names 1:1. A multimodal wrapper (transformers' *ForConditionalGeneration, e.g.
 * Qwen3_5ForConditionalGeneration: tensors under model.language_model.*) gives its text model:
 * model.language_model.X is kept as the canonical model.X, every other model.* tensor (the vision
 * tower model.visual.*, a projector) is left out, and names outside model.* (lm_head.weight,
 * mtp.*) stay as they are. */
#ifndef CORTIQ_CONVERT_HF_NAMES_H
#define CORTIQ_CONVERT_HF_NAMES_H

#include <stddef.h>

#include "common/err.h"
#include "cortiq/safetensors.h"

typedef struct hf_names {
    size_t n;                     /* tensors kept */
    const cmf_st_tensor **tensor; /* [n] */
    char **name;                  /* [n] the name each is kept under */
    size_t left_out;              /* tensors of the other towers, left out */
    char left_what[256];          /* their prefixes, "model.visual.*, ..." ("" when none) */
} hf_names;

/* CMF_E_NOMEM the only failure (no two kept names can coincide: model.* outside the text model
 * is left out). */
cmf_status hf_names_build(const cmf_st *st, const char *dir, hf_names *out, cmf_err *err);
/* The tensor kept under name, NULL when none. */
const cmf_st_tensor *hf_names_find(const hf_names *h, const char *name);
void hf_names_free(hf_names *h);

#endif
