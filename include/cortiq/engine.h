/* cortiq/engine.h - run a CMF model: load, evaluate tokens, sample.
 *
 * A cortiq_model is the immutable part (the mapped file, weight views pointing into it, the
 * configuration, a thread pool); a cortiq_session holds one conversation's KV cache and
 * scratch buffers. Operators are chosen by tensor presence and header fields (spec §2),
 * never by model name: q/k/v biases, q/k norms, Gemma-style pre/post feed-forward norms,
 * norm_style, GQA, partial rotary, YaRN / llama3 / linear rope scaling, sliding-window layers,
 * tied embeddings, logit soft-capping.
 *
 * Supported here: dense decoder models (llama, mistral, qwen2, qwen3, gemma3 and anything
 * with the same tensor set). A file needing an operator this runtime lacks (MoE routers,
 * linear-attention layers) or a SKILL_FILE is refused at load with a message naming it.
 */
#ifndef CORTIQ_ENGINE_H
#define CORTIQ_ENGINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cortiq/export.h"
#include "cortiq/format.h"
#include "cortiq/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cortiq_model cortiq_model;
typedef struct cortiq_session cortiq_session;

/* Element type of a session's KV cache (values pinned; 0 is the default). Keys and values are
 * converted once when a position is written and read as stored by the attention loops.
 * Bytes per cached value, with head_dim d: f16 2, q8 1 + 4/d, f32 4. */
typedef enum cortiq_kv_type {
    CORTIQ_KV_F16 = 0, /* IEEE half (values clamped to +-65504): logits within ~1e-3 of f32 */
    CORTIQ_KV_Q8 = 1,  /* int8 with one f32 scale (max |x| / 127) per head vector per position */
    CORTIQ_KV_F32 = 2, /* exact; what the transformers parity tests use */
    CORTIQ_KV_COUNT
} cortiq_kv_type;

/* "f16", "q8", "f32"; "?" for a value out of range. */
CORTIQ_API const char *cortiq_kv_type_name(cortiq_kv_type t);
/* Parse one of those names; false (and *out untouched) otherwise. */
CORTIQ_API bool cortiq_kv_type_from_name(const char *name, cortiq_kv_type *out);

/* Activation precision of the matrix products (values pinned; 0 is the default). */
typedef enum cortiq_act_mode {
    /* By default (docs/KERNELS.md):
     *  - batched products (prompt prefill, cortiq_session_eval with n > 1) quantize their input
     *    to int8 once per batch (per 32 values) and run the integer GEMM (cmf_matmul_qact) on
     *    q8_row / q4_* weights when the CPU has AVX-512 VNNI: several times faster than f32,
     *    with the rounding of llama.cpp's Q8_0 activations (logits within ~2e-2, PPL within
     *    ~0.5 % on the real models measured);
     *  - every other product on integer-coded weights (q4_block, q4_tiled, q4tp, vbit,
     *    vbit_ro: decode, and batches where the GEMM does not run; q8_row: those batches only)
     *    uses int8 activations (CMF_KF_INT8_ACT, the int8 matvec kernels);
     *  - one token through q8_row weights, and products on float weights (f16, bf16, f32),
     *    keep f32 activations (for q8_row as fast or faster from memory than int8).
     * The 12 + 12 real-model greedy chat continuations of tests/engine/test_real_chat.c stay
     * identical to transformers' with these defaults. */
    CORTIQ_ACT_DEFAULT = 0,
    /* int8 activations (per 32 values) and integer dot products for every supported product
     * (CMF_KF_INT8_ACT). Faster on VNNI/AVX2, but the logits then carry the activation
     * rounding error. */
    CORTIQ_ACT_INT8 = 1,
    /* f32 activations everywhere (exact; what the transformers parity tests use for quantized
     * weights). */
    CORTIQ_ACT_F32 = 2,
    CORTIQ_ACT_COUNT
} cortiq_act_mode;

typedef struct cortiq_load_opts {
    unsigned threads; /* compute threads; 0 = online CPUs */
    /* KV cache type of the sessions cortiq_session_create makes for this model (default f16);
     * a value >= CORTIQ_KV_COUNT fails the load with CMF_E_INVALID_ARG. */
    cortiq_kv_type kv;
    /* Activation precision (default CORTIQ_ACT_DEFAULT); a value >= CORTIQ_ACT_COUNT fails
     * the load with CMF_E_INVALID_ARG. */
    cortiq_act_mode act;
    /* Nonzero: leave the weights on the file mapping's 4 KiB pages. By default
     * cortiq_model_move_step / cortiq_model_prefetch move the matrices a decode step streams
     * onto 2 MiB pages where the kernel offers transparent huge pages (docs/KERNELS.md,
     * "Weights on 2 MiB pages"). */
    int no_huge_pages;
    /* Nonzero: check every tensor's hash64 while the file is opened (CMF_OPEN_VERIFY_TENSORS:
     * it reads every page once) and refuse a mismatch, naming the tensor. By default only the
     * metadata's hashes are checked at open (spec §1.2: tensor hashes are on demand). */
    int verify_tensors;
} cortiq_load_opts;

/* Open (cmf_open_model: shards are followed), validate the architecture against the tensors
 * actually present (every dimension capped and checked before anything is allocated), and
 * bind weight views into the mmap. Fails: whatever cmf_open_model fails with;
 * CMF_E_UNSUPPORTED (SKILL_FILE, MoE, linear attention, a dtype without kernels);
 * CMF_E_NOT_FOUND (a tensor the model needs, named); CMF_E_PARSE (a header field missing or
 * contradicting a tensor's shape); CMF_E_LIMIT (a dimension over the caps). */
CORTIQ_API CORTIQ_NODISCARD cmf_status cortiq_model_load(const char *path,
                                                         const cortiq_load_opts *opts,
                                                         cortiq_model **out, cmf_err *err);
CORTIQ_API void cortiq_model_free(cortiq_model *m); /* NULL allowed */

CORTIQ_API const cmf_file *cortiq_model_file(const cortiq_model *m);
CORTIQ_API uint32_t cortiq_model_vocab(const cortiq_model *m); /* rows of the output projection */
CORTIQ_API uint32_t
cortiq_model_max_context(const cortiq_model *m); /* max_position_embeddings or 0 */
CORTIQ_API unsigned cortiq_model_threads(const cortiq_model *m);
/* Bytes of weights one decode step reads (for roofline figures). */
CORTIQ_API uint64_t cortiq_model_weight_bytes(const cortiq_model *m);
/* Page in the weights every decode step reads (each layer's matrices and the output head; an
 * untied embedding table, of which a token reads one row, stays lazy) and return when they are
 * resident. For a cold start: the file is read in large sequential requests while the caller
 * runs other set-up on another thread (cortiq_runtime_open builds the tokenizer meanwhile),
 * instead of page faults during the first prefill. Unless the load set no_huge_pages, and
 * where transparent huge pages are enabled, it also lists the 2 MiB windows of those matrices
 * for cortiq_model_move_step. Returns the bytes so listed (0: nothing to move). Best effort
 * (hints; never changes results). Meant to be called once per model. NULL allowed. */
CORTIQ_API uint64_t cortiq_model_page_in(cortiq_model *m);
/* Move up to max_bytes (at least one window) of the windows cortiq_model_page_in listed onto
 * anonymous 2 MiB pages, at the same addresses and with the same bytes, on the model's
 * threads: a decode step then streams them faster (fewer TLB misses, prefetchers not stopped
 * at every 4 KiB). They then count as anonymous rather than file pages in the RSS, the same
 * amount. Copying costs time (the kernel zeroes each fresh page, and a virtual machine's host
 * may back it only then), so the runtime moves them only while it waits for its user
 * (cortiq_runtime_idle, between chat turns), never during an answer. Must not run while a session
 * of the model evaluates. Returns the bytes moved (a window that could not move stays on file
 * pages); 0 once none are left. NULL allowed. */
CORTIQ_API uint64_t cortiq_model_move_step(cortiq_model *m, uint64_t max_bytes);
/* Bytes of listed windows not yet moved. NULL allowed (0). */
CORTIQ_API uint64_t cortiq_model_moves_left(const cortiq_model *m);
/* cortiq_model_page_in, then every listed window moved at once (what a benchmark wants before
 * it measures). Returns the bytes moved onto 2 MiB pages. NULL allowed. */
CORTIQ_API uint64_t cortiq_model_prefetch(cortiq_model *m);

/* A session with room for ctx positions (sliding-window layers keep only their window), its
 * KV cache of the type chosen at load (cortiq_load_opts.kv). ctx is capped at the model's
 * max_position_embeddings. Fails CMF_E_INVALID_ARG (ctx 0), CMF_E_NOMEM. */
CORTIQ_API CORTIQ_NODISCARD cmf_status cortiq_session_create(cortiq_model *m, uint32_t ctx,
                                                             cortiq_session **out, cmf_err *err);
/* The same with an explicit KV cache type (CMF_E_INVALID_ARG when out of range). */
CORTIQ_API CORTIQ_NODISCARD cmf_status cortiq_session_create_kv(cortiq_model *m, uint32_t ctx,
                                                                cortiq_kv_type kv,
                                                                cortiq_session **out, cmf_err *err);
CORTIQ_API cortiq_kv_type cortiq_session_kv_type(const cortiq_session *s);
/* Bytes held by the session's KV cache (keys, values and q8 scales, all layers). */
CORTIQ_API uint64_t cortiq_session_kv_bytes(const cortiq_session *s);
CORTIQ_API void cortiq_session_free(cortiq_session *s); /* NULL allowed */
/* Forget the conversation (position back to 0). */
CORTIQ_API void cortiq_session_reset(cortiq_session *s);
CORTIQ_API uint32_t cortiq_session_pos(const cortiq_session *s);
CORTIQ_API uint32_t cortiq_session_ctx(const cortiq_session *s);

/* Feed n tokens at the current position (prefill when n > 1). Afterwards
 * cortiq_session_logits() holds the logits of the last token. If all_logits is non-NULL it
 * receives n x vocab logits (one row per token; used by perplexity). Fails CMF_E_LIMIT when
 * the context would overflow, CMF_E_INVALID_ARG for a token id outside the vocabulary. */
CORTIQ_API CORTIQ_NODISCARD cmf_status cortiq_session_eval(cortiq_session *s, const int32_t *tokens,
                                                           size_t n, float *all_logits,
                                                           cmf_err *err);
CORTIQ_API const float *cortiq_session_logits(const cortiq_session *s);
/* Drop positions >= pos (e.g. to re-run a prompt suffix). pos <= cortiq_session_pos(). A model
 * with recurrent (LinearAttention) layers may drop more: its session returns to the latest
 * state it kept at or below pos (the start and the last token of its latest multi-token eval,
 * else 0). Read cortiq_session_pos() afterwards for the position to continue from. */
CORTIQ_API void cortiq_session_truncate(cortiq_session *s, uint32_t pos);

/* ---- sampling ---- */
typedef struct cortiq_sampler_params {
    float temperature;    /* <= 0: greedy */
    int top_k;            /* <= 0: off */
    float top_p;          /* >= 1: off */
    float min_p;          /* <= 0: off */
    float repeat_penalty; /* 1: off; applied to the last repeat_last_n tokens */
    int repeat_last_n;
    uint64_t seed;
} cortiq_sampler_params;

/* temp 0.7, top_k 40, top_p 0.95, min_p 0.05 */
CORTIQ_API void cortiq_sampler_defaults(cortiq_sampler_params *p);

typedef struct cortiq_sampler cortiq_sampler;
CORTIQ_API CORTIQ_NODISCARD cmf_status cortiq_sampler_create(const cortiq_sampler_params *p,
                                                             uint32_t vocab, cortiq_sampler **out,
                                                             cmf_err *err);
CORTIQ_API void cortiq_sampler_free(cortiq_sampler *s);
/* Pick the next token from logits (not modified). history: tokens so far (for the penalty). */
CORTIQ_API int32_t cortiq_sampler_sample(cortiq_sampler *s, const float *logits,
                                         const int32_t *history, size_t n_history);
/* Argmax, lowest index on ties. */
CORTIQ_API int32_t cortiq_argmax(const float *logits, uint32_t n);

#ifdef __cplusplus
}
#endif
#endif
