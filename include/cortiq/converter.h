/* cortiq/converter.h - turn a model (Hugging Face checkpoint, or any tensor source) into a
 * CMF v2 file: per-tensor quantization policy, streaming write, progress, both cores.
 *
 * The pipeline takes a list of tensor sources (name, shape, a callback that yields the f32
 * values), decides each tensor's dtype (see cmf_convert_pick_dtype), encodes tensors on
 * worker threads a few ahead of the writer, and streams them into cmf_writer. Peak memory is
 * about (threads + 1) x the largest tensor in f32 plus its encoding, whatever the model size.
 * On any error nothing is left under the output name (the writer's temp-and-rename).
 */
#ifndef CORTIQ_CONVERTER_H
#define CORTIQ_CONVERTER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cortiq/dtype.h"
#include "cortiq/export.h"
#include "cortiq/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The user-facing --quant names: f32 f16 bf16 q8 (q8_row) q8_2f q4 (q4_block) q4t (q4_tiled)
 * q4tp vbit (vbit_ro) q1s q1t q1. Spec names ("q8_row", "q4_tiled", ...) are accepted too. */
CORTIQ_API bool cmf_convert_quant_from_name(const char *name, cmf_dtype *out);

/* Where a conversion stands: reported after each tensor is written (on the thread that called
 * the converter; final is set for the last tensor). */
typedef struct cmf_convert_progress {
    size_t tensors_done, tensors_total;
    uint64_t source_bytes_done, source_bytes_total; /* cmf_convert_source.source_bytes */
    double seconds;                                 /* since the encoders started */
    bool final;
} cmf_convert_progress;
typedef void (*cmf_convert_progress_fn)(void *user, const cmf_convert_progress *p);
/* A tensor whose shape the chosen dtype cannot hold, written as `written` instead (reported
 * before the encoders start). */
typedef void (*cmf_convert_fallback_fn)(void *user, const char *tensor, cmf_dtype wanted,
                                        cmf_dtype written);

typedef struct cmf_convert_opts {
    cmf_dtype quant;       /* dtype of weight matrices */
    cmf_dtype embed_quant; /* model.embed_tokens.weight (default: quant) */
    cmf_dtype head_quant;  /* lm_head.weight (default: quant) */
    bool has_embed_quant, has_head_quant;
    bool allow_q1;            /* q1 is for 1-bit-trained models: explicit opt-in */
    double vbit_mean_bits;    /* default 4.25 */
    uint64_t shard_max_bytes; /* 0 = single file */
    unsigned threads;         /* encoder threads; 0 = online CPUs */
    /* The library prints nothing: a caller that shows progress or the fallbacks passes these
     * (either may be NULL; both get progress_user). */
    cmf_convert_progress_fn on_progress;
    cmf_convert_fallback_fn on_fallback;
    void *progress_user;
    /* cmf_convert_hf only: a skill directory whose baked overlays (tensors/NAME.npy) and keep-set
     * (ffn_keep.npy, or the zero down_proj columns) prune FFN neurons at conversion (spec §11);
     * NULL = none. Excludes masks_dir: a defragged file carries no masks. */
    const char *defrag_dir;
} cmf_convert_opts;

CORTIQ_API void cmf_convert_opts_default(cmf_convert_opts *o);

/* The dtype a tensor gets: 1-D, < 32 elements and norm vectors f16; the embedding and the
 * head their own choice; a shape the chosen dtype cannot hold falls back to q8_row (2-D) or
 * f16, and *fell_back says so. */
CORTIQ_API cmf_dtype cmf_convert_pick_dtype(const cmf_convert_opts *o, const char *name,
                                            unsigned ndim, const uint64_t *shape, bool *fell_back);

/* One input tensor. read_f32 fills dst with all numel values (row-major, shape order). */
typedef struct cmf_convert_source {
    const char *name;
    unsigned ndim;
    uint64_t shape[6];
    cmf_status (*read_f32)(void *user, const struct cmf_convert_source *src, float *dst,
                           cmf_err *err);
    void *user;
    uint64_t source_bytes; /* bytes of the source payload, for throughput figures */
    /* A 2-D shape the chosen dtype cannot hold is written as q8_2f instead of q8_row (spec §11:
     * a defragged down_proj whose width is not a multiple of 32). */
    bool fallback_q8_2f;
} cmf_convert_source;

typedef struct cmf_convert_stats {
    size_t tensors, fallbacks;
    uint64_t source_bytes, output_bytes;
    double seconds;
} cmf_convert_stats;

/* Write out_path from header JSON (object), the sources (in file order) and optional
 * vocab (tokenizer.json bytes) and masks section bytes. */
CORTIQ_API CORTIQ_NODISCARD cmf_status cmf_convert_run(
    const char *out_path, const char *header_json, const cmf_convert_source *src, size_t n,
    const uint8_t *vocab, size_t vocab_len, const uint8_t *masks, size_t masks_len,
    const cmf_convert_opts *opts, cmf_convert_stats *stats, cmf_err *err);

/* `cortiq convert`: a Hugging Face checkpoint directory (config.json, *.safetensors or an
 * index, tokenizer.json, tokenizer_config.json / chat_template.jinja / generation_config.json)
 * into out_path. masks_dir (may be NULL): per-task keep-sets, see docs/CONVERT.md. */
CORTIQ_API CORTIQ_NODISCARD cmf_status cmf_convert_hf(const char *model_dir, const char *out_path,
                                                      const char *masks_dir,
                                                      const cmf_convert_opts *opts,
                                                      cmf_convert_stats *stats, cmf_err *err);

/* `cortiq export-hf`: the model of a CMF file (any dtype; a shard name opens the set) as a
 * Hugging Face checkpoint directory that transformers and `cmf_convert_hf` load:
 * model.safetensors (every tensor but skill overlays, dequantized to dt = F32, F16 or BF16),
 * config.json (from arch), tokenizer.json (the vocab section), tokenizer_config.json and
 * generation_config.json (from tokenizer_config). out_dir is created if missing; each file is
 * renamed into place once complete. CMF_E_UNSUPPORTED for an arch_name without a transformers
 * model_type. */
CORTIQ_API CORTIQ_NODISCARD cmf_status cmf_export_hf(const char *cmf_path, const char *out_dir,
                                                     cmf_dtype dt, cmf_err *err);

/* The header JSON (arch, tokenizer_config, quant_type, provenance) cmf_convert_hf would write
 * for model_dir, malloc'd. Fails CMF_E_UNSUPPORTED for an unknown model_type, listing the
 * supported ones. */
CORTIQ_API CORTIQ_NODISCARD cmf_status cmf_convert_hf_header(const char *model_dir,
                                                             const cmf_convert_opts *opts,
                                                             char **out, cmf_err *err);

/* Put sources in the canonical file order: embeddings, layers in numeric order (a layer's MoE
 * experts role-contiguously: every gate_proj, then up_proj, then down_proj, spec §2.2), other
 * tensors, lm_head last. */
CORTIQ_API void cmf_convert_sort_canonical(cmf_convert_source *src, size_t n);

/* Natural order of tensor names ("layers.2" before "layers.10"); strcmp-like. */
CORTIQ_API int cmf_convert_name_cmp(const char *a, const char *b);

/* ---- physical defrag (spec §11) and requant ---- */

typedef struct cmf_defrag_opts {
    /* Called for each tensor whose dtype cannot hold its new shape (a down_proj whose new width
     * is not a multiple of 32 becomes q8_2f); may be NULL. */
    cmf_convert_fallback_fn on_fallback;
    void *user;
} cmf_defrag_opts;

typedef struct cmf_defrag_stats {
    uint64_t in_bytes, out_bytes;
    uint64_t neurons_before, neurons_after; /* dense FFN neurons over all layers */
    uint64_t heads_before, heads_after;     /* query heads over all layers */
    uint64_t heads_padded; /* dead heads kept (o_proj columns zeroed) to balance GQA groups */
    size_t recoded, fallbacks;
} cmf_defrag_stats;

/* `cortiq defrag`: bake task mask `task` of in_path into out_path. Live FFN neurons (gate/up
 * rows, down columns) and live attention heads (q rows, o columns; every kv group keeps the same
 * head count) are dequantized, gathered and encoded again in the source tensor's dtype (a shape
 * that dtype cannot hold: q8_2f); other tensors are copied byte for byte. The header records
 * per-layer sizes and provenance.defrag; the masks section and sparse index are left out.
 * Refused: a task that gates a layer off or restricts experts, masked FFN bits of a MoE layer,
 * a layer left without a live neuron, a file with skills, a shard. Atomic like the writer. */
CORTIQ_API CORTIQ_NODISCARD cmf_status cmf_defrag(const char *in_path, const char *task,
                                                  const char *out_path, const cmf_defrag_opts *opts,
                                                  cmf_defrag_stats *stats, cmf_err *err);

typedef struct cmf_requant_opts {
    cmf_dtype to; /* target dtype (default q4tp) */
    /* Tensor name globs (fnmatch, `*` crosses dots); none = every 2-D matrix of 32 elements or
     * more, the tensors the converter quantizes (norms and biases are never selected). */
    const char *const *globs;
    size_t n_globs;
    double
        vbit_mean_bits; /* vbit targets; 0 = the source's own mean for a vbit source, else 4.25 */
    bool allow_q1;      /* q1 is for 1-bit-trained models: explicit opt-in */
} cmf_requant_opts;

CORTIQ_API void cmf_requant_opts_default(cmf_requant_opts *o);

typedef struct cmf_requant_stats {
    size_t selected, recoded; /* selected tensors; those not already in the target dtype */
    uint64_t in_bytes, out_bytes;
} cmf_requant_stats;

/* `cortiq requant`: dequantize the selected tensors of in_path and encode them as o->to into
 * out_path (which may be in_path: the new file is renamed over it once it validates, so the
 * rewrite is atomic). Tensors already in the target dtype and everything unselected are copied
 * byte for byte, with the masks, tokenizer and sparse-index sections and the header's skills;
 * quant_type becomes the label of the dtype holding most matrix weights, provenance.requant
 * records the change. Refused before anything is written, naming the tensor and the rule: a
 * selected tensor the target cannot hold (e.g. q4tp with a row length that is not a multiple of
 * 32), a quantized target for a 1-D tensor, a glob that matches nothing, a shard. */
CORTIQ_API CORTIQ_NODISCARD cmf_status cmf_requant(const char *in_path, const char *out_path,
                                                   const cmf_requant_opts *o,
                                                   cmf_requant_stats *stats, cmf_err *err);

#ifdef __cplusplus
}
#endif
#endif
