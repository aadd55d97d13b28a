/* arch_interop.h - the header fields every CMF reader needs, filled in the same way for both
 * writers (convert from Hugging Face, import-gguf), so that a file computes the same in any
 * implementation without guessing from arch_name (docs/FORMAT.md, "Header fields"). */
#ifndef CORTIQ_CONVERT_ARCH_INTEROP_H
#define CORTIQ_CONVERT_ARCH_INTEROP_H

#include <jansson.h>

#include "cortiq/dtype.h"

/* The informational `quant_type` label for a file whose matrices default to dt, in the spec's
 * vocabulary (§2): F32 F16 BF16 Q8_ROW Q8_2F Q4_BLOCK VBIT. The q4 family (q4_block, q4_tiled,
 * q4tp) is Q4_BLOCK and the variable-bit family (vbit, vbit_ro, q1, q1s, q1t) is VBIT: the
 * directory holds each tensor's real dtype. */
const char *cq_quant_type_label(cmf_dtype dt);

/* The most layers a source config may declare: per-layer header arrays are built from it. */
#define CQ_ARCH_MAX_LAYERS 65536

/* Complete an arch object built from a source config: layer_types for every layer,
 * embed_multiplier (Gemma: sqrt(hidden)), hidden_act in the canonical spelling ("silu" or
 * "gelu_tanh"), sliding_window_pattern when the sliding schedule is periodic, linear_core for
 * Gated DeltaNet layers, intermediate_size for all-MoE models, yarn.attention_factor (its
 * default where the source leaves it out). Fields already set are kept,
 * except hidden_act, which is respelled. */
void cq_arch_complete(json_t *arch);

#endif
