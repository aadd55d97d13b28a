/* cortiq/gguf.h - read GGUF files (v2, v3), one of the converter's inputs: metadata, tensors
 * dequantized to f32, and the Hugging Face names, layout, header and tokenizer they map to.
 *
 * The reader maps its file(s) read-only and validates every count, size and offset before
 * allocating anything or touching payload bytes: a handle that opened is a file whose every
 * tensor span lies inside it, whose element counts match its byte counts and whose tensors do
 * not overlap. Tensor payloads are then turned into f32 a row range at a time into a caller
 * buffer, so a converter's memory stays bounded by one chunk.
 *
 * Everything a handle hands out (names, strings, tensor records, data pointers) lives until
 * its close function. Handles are immutable after open and may be read from many threads.
 *
 * Shapes: GGUF stores ggml order (ne[0] = the contiguous row length). The records below
 * also give `shape[]` in HF/PyTorch order (shape[ndim-1] = row length), the order CMF uses.
 */
#ifndef CORTIQ_GGUF_H
#define CORTIQ_GGUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cortiq/export.h"
#include "cortiq/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define CMF_GGUF_MAX_DIMS          4
#define CMF_GGUF_DEFAULT_ALIGNMENT 32

/* Metadata value types (GGUF numbering). */
typedef enum cmf_gguf_vtype {
    CMF_GGUF_U8 = 0,
    CMF_GGUF_I8 = 1,
    CMF_GGUF_U16 = 2,
    CMF_GGUF_I16 = 3,
    CMF_GGUF_U32 = 4,
    CMF_GGUF_I32 = 5,
    CMF_GGUF_F32 = 6,
    CMF_GGUF_BOOL = 7,
    CMF_GGUF_STRING = 8,
    CMF_GGUF_ARRAY = 9,
    CMF_GGUF_U64 = 10,
    CMF_GGUF_I64 = 11,
    CMF_GGUF_F64 = 12,
    CMF_GGUF_VTYPE_COUNT
} cmf_gguf_vtype;

/* Tensor types (ggml numbering; ids never move). Only the ones listed here dequantize;
 * any other id opens (when its size is known) and fails at dequantization, naming it. */
typedef enum cmf_ggml_type {
    CMF_GGML_F32 = 0,
    CMF_GGML_F16 = 1,
    CMF_GGML_Q4_0 = 2,
    CMF_GGML_Q4_1 = 3,
    CMF_GGML_Q5_0 = 6,
    CMF_GGML_Q5_1 = 7,
    CMF_GGML_Q8_0 = 8,
    CMF_GGML_Q8_1 = 9,
    CMF_GGML_Q2_K = 10,
    CMF_GGML_Q3_K = 11,
    CMF_GGML_Q4_K = 12,
    CMF_GGML_Q5_K = 13,
    CMF_GGML_Q6_K = 14,
    CMF_GGML_Q8_K = 15,
    CMF_GGML_BF16 = 30,
} cmf_ggml_type;

/* A string inside the mapped file: NOT NUL-terminated, len bytes. */
typedef struct cmf_gguf_str {
    const char *ptr;
    uint64_t len;
} cmf_gguf_str;

typedef struct cmf_gguf_kv {
    const char *key; /* NUL-terminated copy */
    cmf_gguf_vtype type;
    /* Scalars, widened: integers and bool in u64/i64 (both filled, sign-extended for signed
     * types), floats in f64. STRING: str points into the map and cstr is a NUL-terminated
     * copy (strings with embedded NUL bytes are cut there in cstr only). */
    uint64_t u64;
    int64_t i64;
    double f64;
    cmf_gguf_str str;
    const char *cstr;
    /* ARRAY: element type and count. Numeric arrays: arr_data points at arr_len packed LE
     * elements in the map. String arrays: arr_str[arr_len]. Nested arrays are refused. */
    cmf_gguf_vtype arr_type;
    uint64_t arr_len;
    const uint8_t *arr_data;
    const cmf_gguf_str *arr_str;
} cmf_gguf_kv;

typedef struct cmf_gguf_tensor {
    const char *name;               /* NUL-terminated copy */
    uint32_t type;                  /* cmf_ggml_type (may be an id this reader cannot dequantize) */
    uint32_t ndim;                  /* 1..4 */
    uint64_t ne[CMF_GGUF_MAX_DIMS]; /* ggml order, unused dims = 1 */
    uint64_t shape[CMF_GGUF_MAX_DIMS]; /* HF order: shape[i] = ne[ndim-1-i] */
    uint64_t nelem;                    /* product of ne */
    uint64_t row_len;                  /* ne[0] */
    uint64_t nrows;                    /* nelem / ne[0] */
    uint64_t off;                      /* absolute file offset of the payload */
    uint64_t nbytes;                   /* payload size from the type's block layout */
    const uint8_t *data;               /* payload in the map */
} cmf_gguf_tensor;

typedef struct cmf_gguf cmf_gguf;

/* Resource caps applied while parsing (an untrusted count above a cap fails with
 * CMF_E_LIMIT before anything is allocated for it). */
#define CMF_GGUF_MAX_TENSORS (1u << 20)
#define CMF_GGUF_MAX_KV      (1u << 16)
#define CMF_GGUF_MAX_NAME    4096 /* tensor name and key length */

/* Open and validate a GGUF file (mmap). Fails with:
 *  CMF_E_INVALID_MAGIC   not "GGUF";  CMF_E_UNSUPPORTED_VERSION  version not 2 or 3;
 *  CMF_E_BOUNDS          any string, array, info table or tensor payload past EOF;
 *  CMF_E_LIMIT           a count or length above the caps (e.g. n_tensors = 2^64-1);
 *  CMF_E_PARSE           unknown value type, nested array, duplicate key or tensor name,
 *                        zero/too many dims, element count overflow, bad alignment
 *                        (general.alignment not a power of two, or 0, or > 1 GiB), a tensor
 *                        offset not a multiple of the alignment, overlapping tensors,
 *                        a row length not a multiple of the type's block size;
 *  CMF_E_UNSUPPORTED     a tensor type id whose block size is unknown (size not computable);
 *  CMF_E_IO / CMF_E_NOMEM. */
CORTIQ_API CORTIQ_NODISCARD cmf_status cmf_gguf_open(const char *path, cmf_gguf **out,
                                                     cmf_err *err);
/* Same on a memory image; buf must outlive the handle. name is used in messages. */
CORTIQ_API CORTIQ_NODISCARD cmf_status cmf_gguf_open_memory(const void *buf, size_t len,
                                                            const char *name, cmf_gguf **out,
                                                            cmf_err *err);
CORTIQ_API void cmf_gguf_close(cmf_gguf *g); /* NULL allowed */

CORTIQ_API uint32_t cmf_gguf_version(const cmf_gguf *g);
CORTIQ_API uint64_t cmf_gguf_alignment(const cmf_gguf *g);
CORTIQ_API uint64_t
cmf_gguf_data_offset(const cmf_gguf *g); /* absolute start of the tensor data area */
CORTIQ_API const char *cmf_gguf_name(const cmf_gguf *g); /* path or the name given */

CORTIQ_API size_t cmf_gguf_kv_count(const cmf_gguf *g);
CORTIQ_API const cmf_gguf_kv *cmf_gguf_kv_at(const cmf_gguf *g, size_t i);
CORTIQ_API const cmf_gguf_kv *cmf_gguf_find_kv(const cmf_gguf *g,
                                               const char *key); /* NULL if absent */

/* Typed look-ups. Each returns false when the key is absent or of another kind:
 * get_int accepts any integer type (and bool), get_float any float or integer type. */
CORTIQ_API bool cmf_gguf_get_int(const cmf_gguf *g, const char *key, int64_t *out);
CORTIQ_API bool cmf_gguf_get_float(const cmf_gguf *g, const char *key, double *out);
CORTIQ_API bool cmf_gguf_get_bool(const cmf_gguf *g, const char *key, bool *out);
CORTIQ_API const char *cmf_gguf_get_str(const cmf_gguf *g,
                                        const char *key); /* NUL-terminated or NULL */
/* Element i of a numeric array as i64 / f64 (false if out of range or not numeric). */
CORTIQ_API bool cmf_gguf_arr_int(const cmf_gguf_kv *kv, uint64_t i, int64_t *out);
CORTIQ_API bool cmf_gguf_arr_float(const cmf_gguf_kv *kv, uint64_t i, double *out);

CORTIQ_API size_t cmf_gguf_tensor_count(const cmf_gguf *g);
CORTIQ_API const cmf_gguf_tensor *cmf_gguf_tensor_at(const cmf_gguf *g, size_t i); /* file order */
CORTIQ_API const cmf_gguf_tensor *cmf_gguf_find_tensor(const cmf_gguf *g,
                                                       const char *name); /* NULL if absent */

/* ggml type traits: name ("Q4_K", ... or NULL for an unknown id), block size in elements and
 * bytes per block (false for an id whose layout is unknown), and whether it dequantizes. */
CORTIQ_API const char *cmf_ggml_type_name(uint32_t type);
CORTIQ_API bool cmf_ggml_type_size(uint32_t type, uint32_t *block_elems, uint32_t *block_bytes);
CORTIQ_API bool cmf_ggml_type_can_dequantize(uint32_t type);

/* Dequantize n elements (a multiple of the block size) from src (src_len bytes, at least
 * the n elements' blocks) into dst. Results are bit-identical to the `gguf` Python package's
 * dequantize (same f32 operation order). Fails CMF_E_UNSUPPORTED naming the type for a type
 * not listed in the enum above as dequantizable, CMF_E_INVALID_ARG for n not a multiple of the
 * block size or src_len too small. */
CORTIQ_API CORTIQ_NODISCARD cmf_status cmf_ggml_dequantize(uint32_t type, const uint8_t *src,
                                                           size_t src_len, uint64_t n, float *dst,
                                                           cmf_err *err);

/* Rows [row0, row0 + nrows) of tensor t (a row = t->row_len elements) as f32 into dst
 * (nrows * row_len floats). Fails CMF_E_INVALID_ARG for a range past t->nrows, CMF_E_UNSUPPORTED
 * for a type that does not dequantize (message names tensor and type). */
CORTIQ_API CORTIQ_NODISCARD cmf_status cmf_gguf_tensor_rows_f32(const cmf_gguf *g,
                                                                const cmf_gguf_tensor *t,
                                                                uint64_t row0, uint64_t nrows,
                                                                float *dst, cmf_err *err);

/* ------------------------------------------------------------ GGUF -> HF naming and layout */

/* HF name of a llama.cpp tensor name for the given general.architecture:
 * token_embd -> model.embed_tokens, blk.N.attn_q -> model.layers.N.self_attn.q_proj, ... (the
 * table is in docs/CONVERT.md). Writes into out (cap bytes) and returns true; returns false
 * for a name without a mapping (the caller decides: skip or fail) or when out is too small. */
CORTIQ_API bool cmf_gguf_hf_name(const char *arch, const char *gguf_name, char *out, size_t cap);

/* Per-tensor value fix-ups HF needs on top of the plain dequantization. */
typedef struct cmf_gguf_fixup {
    bool unpermute_rows; /* llama.cpp permuted Q/K rows for rotary: undo with n_head groups */
    uint64_t n_head;     /* heads of that projection (num_attention_heads for q, kv for k) */
    bool minus_one;      /* Gemma norms are stored as (1 + w): subtract 1 */
} cmf_gguf_fixup;

/* What HF-equivalence needs for tensor `gguf_name` of this file (all false = nothing). */
CORTIQ_API cmf_gguf_fixup cmf_gguf_tensor_fixup(const cmf_gguf *g, const char *gguf_name);

/* Undo llama.cpp's rotary row permutation of a [n_head*head_dim, cols] f32 matrix in place
 * (HF row h*hd + p*hd/2 + i = GGUF row h*hd + 2i + p). scratch holds rows*cols floats.
 * CMF_E_INVALID_ARG when rows is not a multiple of 2*n_head. */
CORTIQ_API CORTIQ_NODISCARD cmf_status cmf_gguf_unpermute_rows(float *w, uint64_t rows,
                                                               uint64_t cols, uint64_t n_head,
                                                               float *scratch, cmf_err *err);

/* Dequantize a whole tensor in HF form: HF shape, row permutation undone, Gemma norm shift
 * applied. dst holds t->nelem floats. */
CORTIQ_API CORTIQ_NODISCARD cmf_status cmf_gguf_tensor_hf_f32(const cmf_gguf *g,
                                                              const cmf_gguf_tensor *t, float *dst,
                                                              cmf_err *err);

/* The header "arch" object (spec §2) from the GGUF metadata, as JSON text in a malloc'd
 * NUL-terminated buffer (*out; free() it). Families: llama (incl. SmolLM), qwen2, qwen3,
 * gemma3 (layer_types every 6th FullAttention, rope_local_base_freq 10000, norm_style "gemma"),
 * gemma2; others fill the generic fields. CMF_E_NOT_FOUND when general.architecture or a
 * required hyper-parameter (block_count, embedding_length, head_count) is absent. */
CORTIQ_API CORTIQ_NODISCARD cmf_status cmf_gguf_arch_json(const cmf_gguf *g, char **out,
                                                          cmf_err *err);

/* The header "tokenizer_config" object (spec §6.1): chat_template, eos_token_ids,
 * bos_token_id, pad_token_id (null where absent), as malloc'd JSON text. */
CORTIQ_API CORTIQ_NODISCARD cmf_status cmf_gguf_tokenizer_config_json(const cmf_gguf *g, char **out,
                                                                      cmf_err *err);

/* An HF tokenizer.json equivalent to the GGUF tokenizer metadata, malloc'd JSON text.
 * tokenizer.ggml.model "gpt2": byte-level BPE, pre-tokenizer regex from tokenizer.ggml.pre;
 * "llama" (SentencePiece): BPE with byte_fallback, merges rebuilt from scores, Metaspace-style
 * normalizer/decoder. CMF_E_UNSUPPORTED for another model or pre-tokenizer name (named). */
CORTIQ_API CORTIQ_NODISCARD cmf_status cmf_gguf_tokenizer_json(const cmf_gguf *g, char **out,
                                                               size_t *len, cmf_err *err);

#ifdef __cplusplus
}
#endif
#endif
