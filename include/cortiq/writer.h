/* cortiq/writer.h - build CMF v2 files (spec §1-§10), append to them (§9), compact them.
 *
 * A writer collects tensor descriptions (bytes, borrowed bytes, or a producer callback that
 * streams the payload), the header JSON and the optional masks / vocab sections, then
 * cmf_writer_finish() lays the file out as
 *   envelope -> header -> directory -> weight blob (4096-aligned, tensors 64-aligned)
 *   -> masks -> vocab -> sparse index
 * computing every hash64 on the way. Producers are called one at a time in add order, so
 * memory stays bounded by the directory, whatever the size of the model.
 * The output is written to a temporary file beside the target, re-opened and validated,
 * fsynced and renamed: the target name never holds a half-written file.
 */
#ifndef CORTIQ_WRITER_H
#define CORTIQ_WRITER_H

#include <stddef.h>
#include <stdint.h>

#include "cortiq/export.h"
#include "cortiq/format.h"
#include "cortiq/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cmf_writer cmf_writer;
typedef struct cmf_sink cmf_sink;

/* Producers write a tensor's payload through the sink, in as many pieces as they like. */
CORTIQ_API CORTIQ_NODISCARD cmf_status cmf_sink_write(cmf_sink *sink, const void *data, size_t len,
                                                      cmf_err *err);
typedef cmf_status (*cmf_tensor_producer)(void *user, cmf_sink *sink, cmf_err *err);

typedef struct cmf_writer_opts {
    /* Split into shards (spec §10) when the summed rough f32 size (elements x 4) of the
     * tensors exceeds this many bytes; 0 = one file. */
    uint64_t shard_max_bytes;
    /* Called after each tensor is written (may be NULL). */
    void (*progress)(void *user, size_t done, size_t total, uint64_t bytes_written);
    void *progress_user;
} cmf_writer_opts;

/* path: the target file, or for a sharded write the base ("model.cmf" ->
 * "model-00001-of-00003.cmf"). */
CORTIQ_API CORTIQ_NODISCARD cmf_status cmf_writer_create(const char *path,
                                                         const cmf_writer_opts *opts,
                                                         cmf_writer **out, cmf_err *err);

/* Header JSON object (spec §2). The writer fills "section_hashes" and, for shards, "shard";
 * required_features are derived from the content (masks -> BINARY_MASKS, vbit/q8_2f ->
 * QUANT_2F, a skill record with base_dir_hash -> SKILL_FILE). */
CORTIQ_API CORTIQ_NODISCARD cmf_status cmf_writer_set_header(cmf_writer *w, const char *json,
                                                             size_t len, cmf_err *err);

/* Add a tensor whose payload is given now (copied). */
CORTIQ_API CORTIQ_NODISCARD cmf_status cmf_writer_add_tensor(cmf_writer *w, const char *name,
                                                             cmf_dtype dtype, unsigned ndim,
                                                             const uint64_t *shape,
                                                             const void *data, size_t nbytes,
                                                             cmf_err *err);
/* Same, but data is borrowed and must stay valid until cmf_writer_finish() returns. */
CORTIQ_API CORTIQ_NODISCARD cmf_status cmf_writer_add_tensor_ref(cmf_writer *w, const char *name,
                                                                 cmf_dtype dtype, unsigned ndim,
                                                                 const uint64_t *shape,
                                                                 const void *data, size_t nbytes,
                                                                 cmf_err *err);
/* Payload produced at finish time by producer(user, sink). Its length is whatever it writes;
 * it must be valid for dtype and shape (checked when the file is re-opened). */
CORTIQ_API CORTIQ_NODISCARD cmf_status cmf_writer_add_tensor_stream(cmf_writer *w, const char *name,
                                                                    cmf_dtype dtype, unsigned ndim,
                                                                    const uint64_t *shape,
                                                                    cmf_tensor_producer producer,
                                                                    void *user, cmf_err *err);

/* Optional sections, raw bytes (copied). Masks: see cmf_masks_builder below. The sparse index
 * is deprecation-pending (spec §7): only for tools that must carry one through. */
CORTIQ_API CORTIQ_NODISCARD cmf_status cmf_writer_set_masks(cmf_writer *w, const void *bytes,
                                                            size_t len, cmf_err *err);
CORTIQ_API CORTIQ_NODISCARD cmf_status cmf_writer_set_vocab(cmf_writer *w, const void *bytes,
                                                            size_t len, cmf_err *err);
CORTIQ_API CORTIQ_NODISCARD cmf_status cmf_writer_set_sparse_index(cmf_writer *w, const void *bytes,
                                                                   size_t len, cmf_err *err);

/* Write, validate, fsync, rename. On failure nothing is left under the target name. */
CORTIQ_API CORTIQ_NODISCARD cmf_status cmf_writer_finish(cmf_writer *w, cmf_err *err);
/* Free; if finish was not reached the temporary file is removed. NULL allowed. */
CORTIQ_API void cmf_writer_free(cmf_writer *w);

/* ---- masks section builder (spec §5) ---- */
typedef struct cmf_masks_builder cmf_masks_builder;

/* Dimensions come from the header arch: num_layers, intermediate_size, num_attention_heads,
 * and moe.num_experts (0 when the masks carry no expert fields). */
CORTIQ_API CORTIQ_NODISCARD cmf_status
cmf_masks_builder_create(uint32_t n_layers, uint32_t intermediate, uint32_t n_heads,
                         uint32_t n_experts, cmf_masks_builder **out, cmf_err *err);
/* One task. ffn: n_layers rows of ceil(intermediate/8) bytes; heads: n_layers rows of
 * ceil(n_heads/8); gates: ceil(n_layers/8) bytes; experts may be NULL (no expert area).
 * Tail bits past each dimension must be zero. quality_json NULL writes `null` (not measured). */
CORTIQ_API CORTIQ_NODISCARD cmf_status
cmf_masks_builder_add(cmf_masks_builder *b, const char *name, const char *description,
                      const uint8_t *ffn, const uint8_t *heads, const uint8_t *gates,
                      const uint8_t *experts, const char *quality_json, cmf_err *err);
CORTIQ_API CORTIQ_NODISCARD cmf_status cmf_masks_builder_set_default(cmf_masks_builder *b,
                                                                     const char *task_name,
                                                                     cmf_err *err);
/* Serialize; *out is malloc'd (free it). */
CORTIQ_API CORTIQ_NODISCARD cmf_status cmf_masks_builder_build(cmf_masks_builder *b, uint8_t **out,
                                                               size_t *len, cmf_err *err);
CORTIQ_API void cmf_masks_builder_free(cmf_masks_builder *b);

/* ---- append-only growth (spec §9) ----
 * New tensors go after the current end of the file, then the header and directory are
 * re-emitted at the tail and, as the very last step, the 128-byte envelope is rewritten in
 * place. No earlier byte changes, so a crash at any point leaves the old file or the new one. */
typedef struct cmf_appender cmf_appender;

CORTIQ_API CORTIQ_NODISCARD cmf_status cmf_append_begin(const char *path, cmf_appender **out,
                                                        cmf_err *err);
/* replace != 0 lets the new tensor take over an existing name (the old bytes become dead). */
CORTIQ_API CORTIQ_NODISCARD cmf_status cmf_append_add_tensor(cmf_appender *a, const char *name,
                                                             cmf_dtype dtype, unsigned ndim,
                                                             const uint64_t *shape,
                                                             const void *data, size_t nbytes,
                                                             int replace, cmf_err *err);
/* Leave an existing tensor out of the new directory (its bytes stay, dead, until compaction):
 * `cortiq skill rm`. CMF_E_NOT_FOUND when the file has no such tensor. */
CORTIQ_API CORTIQ_NODISCARD cmf_status cmf_append_drop_tensor(cmf_appender *a, const char *name,
                                                              cmf_err *err);
/* Replace the header JSON (e.g. to register a skill); default keeps the current one. */
CORTIQ_API CORTIQ_NODISCARD cmf_status cmf_append_set_header(cmf_appender *a, const char *json,
                                                             size_t len, cmf_err *err);
/* Replace the masks section (written at the tail); default keeps the current one. A replaced
 * masks section drops the deprecated sparse index (spec §7: it names the old task ids). */
CORTIQ_API CORTIQ_NODISCARD cmf_status cmf_append_set_masks(cmf_appender *a, const void *bytes,
                                                            size_t len, cmf_err *err);
CORTIQ_API CORTIQ_NODISCARD cmf_status cmf_append_commit(cmf_appender *a, cmf_err *err);
CORTIQ_API void cmf_append_free(cmf_appender *a);

/* Rewrite a file tightly (drops dead bytes left by appends); atomic like the writer.
 * drop_index != 0 omits the deprecated sparse index. */
CORTIQ_API CORTIQ_NODISCARD cmf_status cmf_compact(const char *in_path, const char *out_path,
                                                   int drop_index, cmf_err *err);

#ifdef __cplusplus
}
#endif
#endif
