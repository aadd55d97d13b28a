/* mtp_names.h - a checkpoint's multi-token-prediction head under the spec's canonical names
 * (spec §2.1, model.mtp.*), from Qwen3-Next / Qwen3.5 (mtp.*) and DeepSeek-V3 style
 * (model.layers.{num_hidden_layers + i}.*) checkpoints. Internal to convert. */
#ifndef CORTIQ_CONVERT_MTP_NAMES_H
#define CORTIQ_CONVERT_MTP_NAMES_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

/* MTP layers the config declares: mtp_num_hidden_layers (Qwen3-Next, Qwen3.5) or
 * num_nextn_predict_layers (DeepSeek-V3), in cfg or its text_config; 0 when none. */
int64_t cq_mtp_config_layers(json_t *cfg);

/* The canonical name of checkpoint tensor `name` (malloc'd), for a model of n_layers main
 * layers and n_mtp MTP layers; NULL when it is not part of the head. *drop: the tensor is a
 * copy of a shared one (DeepSeek's per-layer embed_tokens and shared_head.head, which the
 * head shares with the model: arch.mtp share_embed / share_lm_head). */
char *cq_mtp_canonical(const char *name, int64_t n_layers, int64_t n_mtp, bool *drop);

#endif
