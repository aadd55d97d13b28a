/* cortiq/format.h - open, validate and read CMF v2 files (spec §1-§10).
 *
 * Opening IS validation: cmf_open() either returns a file whose every section,
 * directory record, header field, mask and sparse-index entry obeys the spec, or
 * an error naming the file, the value and the rule. There is no third state.
 * Tensor payload hashes are checked on demand (cmf_verify, or CMF_OPEN_VERIFY_TENSORS),
 * because mmap pages are read lazily. Header and directory hashes (spec §8.1) are
 * checked at open; they are small.
 *
 * Everything a cmf_file hands out (names, header structs, tensor data pointers)
 * lives until cmf_close(). A cmf_file is immutable after open: any number of
 * threads may read it concurrently.
 */
#ifndef CORTIQ_FORMAT_H
#define CORTIQ_FORMAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cortiq/dtype.h"
#include "cortiq/export.h"
#include "cortiq/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define CMF_MAGIC           "CMF\x01"
#define CMF_VERSION         2
#define CMF_ENVELOPE_SIZE   128
#define CMF_DATA_ALIGN      4096
#define CMF_TENSOR_ALIGN    64
#define CMF_DIR_RECORD_SIZE 56

/* required_features bits (spec §1.1). */
enum {
    CMF_FEAT_TENSOR_DIR = 1u << 0,
    CMF_FEAT_BINARY_MASKS = 1u << 1,
    CMF_FEAT_QUANT_2F = 1u << 2,
    CMF_FEAT_DELTA_MASKS = 1u << 3, /* reserved: refused */
    CMF_FEAT_HOT_PACKS = 1u << 4,   /* reserved: refused */
    CMF_FEAT_LOOP_MASKS = 1u << 5,  /* refused: no header field gives the loop count */
    CMF_FEAT_SKILL_FILE = 1u << 6,
};
/* Bits this reader accepts. */
#define CMF_FEAT_KNOWN                                                                             \
    (CMF_FEAT_TENSOR_DIR | CMF_FEAT_BINARY_MASKS | CMF_FEAT_QUANT_2F | CMF_FEAT_SKILL_FILE)

/* Name of feature bit `bit` (0..31): "TENSOR_DIR", ... or NULL if never assigned. */
CORTIQ_API const char *cmf_feature_name(unsigned bit);

typedef struct cmf_envelope {
    uint32_t version, flags, required_features;
    uint64_t header_off, header_len;
    uint64_t dir_off, dir_len;
    uint64_t data_off, data_len;
    uint64_t masks_off, masks_len; /* off 0 = absent */
    uint64_t vocab_off, vocab_len;
    uint64_t index_off, index_len;
    uint64_t header_hash; /* [0x70] hash64(header JSON); 0 = absent */
    uint64_t dir_hash;    /* [0x78] hash64(directory);   0 = absent */
} cmf_envelope;

/* Parse the 128-byte envelope (no bounds against a file size; see cmf_open). */
CORTIQ_API CORTIQ_NODISCARD cmf_status cmf_envelope_parse(const uint8_t bytes[CMF_ENVELOPE_SIZE],
                                                          cmf_envelope *out, const char *ctx,
                                                          cmf_err *err);
/* Serialize an envelope (magic and version written from the constants). */
CORTIQ_API void cmf_envelope_write(const cmf_envelope *env, uint8_t out[CMF_ENVELOPE_SIZE]);

/* ---- directory (spec §3) ---- */
typedef struct cmf_tensor {
    const char *name; /* NUL-terminated copy of the pool entry */
    uint32_t name_len;
    uint8_t dtype; /* cmf_dtype */
    uint8_t ndim;
    uint64_t shape[CMF_MAX_DIMS]; /* shape[0] = rows (out) for 2-D */
    uint64_t off;                 /* relative to data_off of its shard */
    uint64_t nbytes;
    uint64_t hash;       /* stored hash64 of the payload */
    uint32_t shard;      /* 0-based shard index (runtime only, never on disk) */
    const uint8_t *data; /* payload in the mmap: nbytes bytes, 64-byte aligned */
} cmf_tensor;

/* ---- header JSON (spec §2) ---- */
typedef enum cmf_layer_type {
    CMF_LAYER_FULL_ATTENTION = 0,
    CMF_LAYER_SLIDING_ATTENTION = 1,
    CMF_LAYER_LINEAR_ATTENTION = 2,
    CMF_LAYER_OTHER = 3, /* any other tag; text kept in layer_type_names */
} cmf_layer_type;

typedef enum cmf_norm_style {
    CMF_NORM_UNSET = 0,
    CMF_NORM_QWEN = 1,  /* x_hat * w */
    CMF_NORM_GEMMA = 2, /* x_hat * (1 + w) */
} cmf_norm_style;

typedef struct cmf_yarn {
    bool present;
    double factor, original_max_position_embeddings, beta_fast, beta_slow, attention_factor;
    bool has_attention_factor;
} cmf_yarn;

typedef struct cmf_mtp {
    bool present;
    int64_t num_layers;
    bool share_lm_head, share_embed;
} cmf_mtp;

typedef struct cmf_moe {
    bool present;
    int64_t num_experts, top_k, moe_intermediate_size;
    bool norm_topk_prob;
    bool has_shared_expert;
    int64_t shared_expert_intermediate_size;
    bool router_sigmoid;
    double routed_scaling_factor; /* 1.0 when absent */
} cmf_moe;

/* arch.rope_scaling: a rope-scaling block carried from config.json (llama3, linear, ...), an
 * additive field beside the spec's own `yarn` (docs/FORMAT.md). */
typedef struct cmf_rope_scaling {
    bool present;
    const char *type; /* "rope_type" (or "type"); NULL if absent */
    double factor;    /* 1.0 when absent */
    double low_freq_factor, high_freq_factor,
        original_max_position_embeddings; /* llama3: 1, 4, 8192 */
} cmf_rope_scaling;

/* Integer fields are -1 when absent; doubles have a has_ flag or a documented default. */
typedef struct cmf_arch {
    bool present;
    const char *arch_name; /* NULL if absent */
    int64_t hidden_size, intermediate_size, num_layers, num_attention_heads, num_kv_heads, head_dim,
        vocab_size, max_position_embeddings, sliding_window;
    double rms_norm_eps;
    bool has_rms_norm_eps;
    cmf_norm_style norm_style;
    double rope_theta;
    bool has_rope_theta;
    double partial_rotary_factor; /* 1.0 when absent */
    double rope_local_base_freq;
    bool has_rope_local_base_freq;
    double local_partial_rotary_factor; /* 1.0 when absent */
    bool tie_word_embeddings;           /* false when absent */
    size_t n_layer_types;               /* 0 when absent */
    cmf_layer_type *layer_types;
    const char **layer_type_names;
    size_t n_heads_per_layer; /* 0 when absent */
    int64_t *attention_heads_per_layer;
    int64_t linear_conv_kernel_dim, linear_num_key_heads, linear_num_value_heads,
        linear_key_head_dim, linear_value_head_dim;
    /* Fields beyond the spec's example that real families need; ignored by other readers. */
    const char *hidden_act; /* e.g. "silu", "gelu_tanh"; NULL if absent */
    double query_pre_attn_scalar, final_logit_softcapping, attn_logit_softcapping;
    bool has_query_pre_attn_scalar, has_final_logit_softcapping, has_attn_logit_softcapping;
    /* Input embeddings times embed_multiplier (Gemma: sqrt(hidden)), logits times
     * logit_multiplier; sliding_window_pattern P: layer i is global iff (i + 1) % P == 0 when no
     * layer is tagged SlidingAttention (-1 when absent). */
    double embed_multiplier, logit_multiplier;
    bool has_embed_multiplier, has_logit_multiplier;
    int64_t sliding_window_pattern;
    cmf_yarn yarn;
    cmf_rope_scaling rope_scaling;
    cmf_mtp mtp;
    cmf_moe moe;
} cmf_arch;

typedef struct cmf_tokenizer_config {
    bool present;              /* false when absent or null */
    const char *chat_template; /* NULL if absent */
    size_t n_eos;
    int64_t *eos_token_ids;
    int64_t bos_token_id, pad_token_id; /* -1 = null/absent */
} cmf_tokenizer_config;

typedef struct cmf_skill {
    const char *id;
    const char *name; /* NULL if absent */
    size_t n_layers;  /* integer entries of "layers" (other entries are informative) */
    int64_t *layers;
    const char *input_mask_task; /* NULL if absent/null */
    bool has_base_dir_hash;      /* §9.1 standalone skill key */
    uint64_t base_dir_hash;
    const char *base_arch, *task; /* NULL if absent */
    const char *selection_json;   /* raw JSON text or NULL */
    const char *quality_json;
    const char *provenance_json;
} cmf_skill;

typedef struct cmf_header {
    const char *json; /* the header bytes, NUL-terminated copy */
    size_t json_len;
    const char *format;     /* "cmf" or NULL if absent */
    const char *quant_type; /* informational, NULL if absent */
    cmf_arch arch;
    cmf_tokenizer_config tokenizer_config;
    size_t n_skills;
    cmf_skill *skills;
    bool has_shard;
    int64_t shard_no, shard_count;
    bool has_masks_hash, has_vocab_hash, has_index_hash; /* from "section_hashes"; 0 = absent */
    uint64_t masks_hash, vocab_hash, index_hash;
    const char *provenance_json; /* raw JSON text or NULL */
    void *internal_;             /* owned storage; private */
} cmf_header;

/* Parse and validate header JSON text (len bytes, need not be NUL-terminated).
 * On success *out owns its strings; release with cmf_header_free(). */
CORTIQ_API CORTIQ_NODISCARD cmf_status cmf_header_parse(const char *json, size_t len,
                                                        cmf_header *out, const char *ctx,
                                                        cmf_err *err);
CORTIQ_API void cmf_header_free(cmf_header *h);

/* ---- masks section (spec §5) ---- */
typedef struct cmf_mask {
    uint32_t task_id;
    const char *name;
    const char *description; /* NULL if null */
    double sparsity;
    bool has_sparsity;
    const char *quality_json; /* NULL = not measured */
    const char *parent;       /* NULL if null */
    const char *priority;     /* NULL if absent */
    bool has_hot_pack;
    uint64_t blob_off, blob_len; /* relative to the section start */
    bool has_expert_fields;
    const uint8_t *ffn;     /* [n_layers][ffn_bytes] */
    const uint8_t *heads;   /* [n_layers][head_bytes] */
    const uint8_t *gates;   /* [gates_bytes] */
    const uint8_t *experts; /* [n_layers][expert_bytes] or NULL */
} cmf_mask;

typedef struct cmf_masks {
    const char *default_task; /* NULL if absent */
    uint32_t n_layers, intermediate, n_heads, n_experts;
    uint32_t ffn_bytes, head_bytes, gates_bytes, expert_bytes;
    size_t n_masks;
    cmf_mask *masks;
} cmf_masks;

/* Bit i of a bitfield (LSB-first), and set-bit counts of one row. */
static inline bool cmf_bit(const uint8_t *bits, uint32_t i) {
    return (bits[i >> 3] >> (i & 7)) & 1;
}
CORTIQ_API uint32_t cmf_popcount(const uint8_t *bits, uint32_t nbits);
CORTIQ_API uint32_t cmf_mask_ffn_active(const cmf_masks *m, const cmf_mask *mask, uint32_t layer);
CORTIQ_API uint32_t cmf_mask_heads_active(const cmf_masks *m, const cmf_mask *mask, uint32_t layer);
CORTIQ_API uint32_t cmf_mask_layers_active(const cmf_masks *m, const cmf_mask *mask);
CORTIQ_API uint32_t cmf_mask_experts_active(const cmf_masks *m, const cmf_mask *mask,
                                            uint32_t layer); /* n_experts if no area */
CORTIQ_API const cmf_mask *cmf_masks_find(const cmf_masks *m, const char *name);

/* ---- sparse index (spec §7; parsed for display only) ---- */
typedef struct cmf_index_entry {
    uint32_t task_id, layer, n_groups, n_heads;
    const uint8_t *groups; /* n_groups u16 LE */
    const uint8_t *heads;  /* n_heads u8 */
} cmf_index_entry;

typedef struct cmf_sparse_index {
    size_t n_entries;
    cmf_index_entry *entries;
} cmf_sparse_index;

/* ---- the file ---- */
typedef struct cmf_file cmf_file;

enum {
    CMF_OPEN_SKIP_META_HASH = 1u << 0, /* do not check header/dir hashes at open */
    CMF_OPEN_VERIFY_TENSORS = 1u << 1, /* check every tensor hash at open (reads all pages) */
    CMF_OPEN_NO_SHARDS = 1u << 2,      /* cmf_open_model: open exactly this file */
};

/* Open exactly one file (a shard opens as a standalone file). */
CORTIQ_API CORTIQ_NODISCARD cmf_status cmf_open(const char *path, unsigned flags, cmf_file **out,
                                                cmf_err *err);
/* Open a model: for a shard name `{base}-NNNNN-of-MMMMM.cmf` (any number) open shard 1
 * and all siblings and merge their directories (spec §10). A plain file opens as itself. */
CORTIQ_API CORTIQ_NODISCARD cmf_status cmf_open_model(const char *path, unsigned flags,
                                                      cmf_file **out, cmf_err *err);
/* Validate a file image in memory; buf must outlive the handle. name is used in messages. */
CORTIQ_API CORTIQ_NODISCARD cmf_status cmf_open_memory(const void *buf, size_t len,
                                                       const char *name, unsigned flags,
                                                       cmf_file **out, cmf_err *err);
CORTIQ_API void cmf_close(cmf_file *f); /* NULL allowed */

CORTIQ_API const char *cmf_file_path(const cmf_file *f);
CORTIQ_API const cmf_envelope *cmf_file_envelope(const cmf_file *f); /* shard 1 / the file */
CORTIQ_API const cmf_header *cmf_file_header(const cmf_file *f);

CORTIQ_API size_t cmf_file_tensor_count(const cmf_file *f);
CORTIQ_API const cmf_tensor *cmf_file_tensor_at(const cmf_file *f,
                                                size_t i); /* directory order, shard by shard */
CORTIQ_API const cmf_tensor *cmf_file_find(const cmf_file *f,
                                           const char *name); /* O(1); NULL if absent */
/* Tensors whose name starts with prefix, in byte-wise name order: fills first and count so that
 * cmf_file_sorted_at(f, *first .. *first + *count - 1) are the matches. */
CORTIQ_API void cmf_file_prefix(const cmf_file *f, const char *prefix, size_t *first,
                                size_t *count);
CORTIQ_API const cmf_tensor *cmf_file_sorted_at(const cmf_file *f, size_t k);

CORTIQ_API const cmf_masks *cmf_file_masks(const cmf_file *f);               /* NULL if absent */
CORTIQ_API const uint8_t *cmf_file_vocab(const cmf_file *f, size_t *len);    /* NULL if absent */
CORTIQ_API const cmf_sparse_index *cmf_file_sparse_index(const cmf_file *f); /* NULL if absent */

CORTIQ_API size_t cmf_file_shard_count(const cmf_file *f); /* 1 for a plain file */
CORTIQ_API const char *cmf_file_shard_path(const cmf_file *f, size_t shard);
CORTIQ_API const cmf_envelope *cmf_file_shard_envelope(const cmf_file *f, size_t shard);
CORTIQ_API const cmf_header *cmf_file_shard_header(const cmf_file *f, size_t shard);
/* The whole mapped image of one shard. */
CORTIQ_API const uint8_t *cmf_file_shard_bytes(const cmf_file *f, size_t shard, size_t *len);

/* ---- verification (spec §8, §8.1) ---- */
typedef void (*cmf_problem_fn)(void *user, const char *shard_path, cmf_status code,
                               const char *msg);

typedef struct cmf_verify_stats {
    uint64_t tensors_checked, tensors_bad;
    uint64_t bytes_hashed;
    uint64_t problems;
    double seconds;
} cmf_verify_stats;

/* Check the whole hash chain of every shard: header and directory hashes, section_hashes,
 * every tensor hash, zero padding in the weight blob. Reports EVERY problem through
 * on_problem (may be NULL) and returns CMF_OK only when there is none (else the first
 * problem's code). threads = 0 picks the number of online CPUs. */
CORTIQ_API CORTIQ_NODISCARD cmf_status cmf_verify(const cmf_file *f, unsigned threads,
                                                  cmf_problem_fn on_problem, void *user,
                                                  cmf_verify_stats *stats);

/* Shard naming (spec §10). Writes "{base}-{no:05}-of-{count:05}.cmf" into out. */
CORTIQ_API int cmf_shard_name(char *out, size_t cap, const char *base, unsigned no, unsigned count);
/* If path names a shard, fill base (path without the suffix), no and count. */
CORTIQ_API bool cmf_shard_parse_name(const char *path, char *base, size_t cap, unsigned *no,
                                     unsigned *count);

#ifdef __cplusplus
}
#endif
#endif
