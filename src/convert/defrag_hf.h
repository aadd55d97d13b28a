/* defrag_hf.h - `convert --defrag SKILL_DIR` (spec §11, "Producing it"): baked overlays
 * (SKILL_DIR/tensors/<tensor name>.npy, float) replace checkpoint tensors, and the keep-set
 * (SKILL_DIR/ffn_keep.npy, [num_layers, intermediate_size], nonzero = live; without it, the
 * neurons whose effective down_proj column is not all zero) drops dead FFN neurons at
 * conversion: gate/up rows and down columns are never written. */
#ifndef CORTIQ_CONVERT_DEFRAG_HF_H
#define CORTIQ_CONVERT_DEFRAG_HF_H

#include <jansson.h>
#include <stddef.h>

#include "cortiq/converter.h"

typedef struct cq_defrag_hf cq_defrag_hf;

/* Rewrite the sources in place (overlays, pruned shapes and their readers) and the header
 * (intermediate_size, provenance.defrag). *out owns what the rewritten sources point to: free
 * it with cq_defrag_hf_free after the conversion. */
cmf_status cq_defrag_hf_apply(const char *dir, json_t *header, cmf_convert_source *src, size_t n,
                              cq_defrag_hf **out, cmf_err *err);
void cq_defrag_hf_free(cq_defrag_hf *d);

#endif
