/* cortiq/engine.h - run a CMF model: load, evaluate tokens, sample.
 *
 * A cortiq_model is the immutable part (the mapped file, weight views pointing into it, the
 * configuration, a thread pool); a cortiq_session holds one conversation's KV cache and
 * scratch buffers. Operators are chosen by tensor presence and header fields (spec §2),
 * never by model name: q/k/v biases, q/k norms, Gemma-style pre/post feed-forward norms,
 * norm_style, GQA, partial rotary, YaRN / llama3 / linear rope scaling, sliding-window layers,
 * tied embeddings, logit soft-capping.
 *
 * Supported here: decoder models of the llama, mistral, qwen2, qwen3 and gemma3 families and
 * anything with the same tensor set; mixture-of-experts FFNs (a router present, spec §2.2);
 * Gated DeltaNet (LinearAttention) layers and gated full attention (qwen3_next, qwen3_5;
 * docs/HYBRID.md); task masks (spec §5) and skills (spec §9) over one file. A file needing an
 * operator this runtime lacks (e.g. a Laguna g_proj gate, looped masks) or a SKILL_FILE is
 * refused at load with a message naming it.
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
     *    vbit_ro: decode, and batches where the GEMM does not run; q8_row: those batches, and
     *    one token where the CPU has AVX-512 VNNI) uses int8 activations (CMF_KF_INT8_ACT, the
     *    int8 matvec kernels; a decode step of several sessions then loads each weight once
     *    for all of them, with each session's bits as alone);
     *  - batched products on bf16 weights round their input to bf16 (nearest even) and use
     *    the AVX-512 BF16 dot product where it outruns the f32 FMAs (AMD's; on AMX CPUs the
     *    bf16 tiles) (CMF_KF_BF16_ACT): twice the f32 FMA rate, as llama.cpp does for BF16,
     *    each output within 2^-8 of sum |w x| of the f32 product (SmolLM2-135M and Gemma 3
     *    270M at bf16: logits within 1.3e-2 of the largest, perplexity within 0.1 % of f32
     *    activations');
     *  - one token through q8_row weights without AVX-512 VNNI, and every other product on
     *    float weights (f16, f32; bf16 one token at a time or without those), keep f32
     *    activations (for q8_row there as fast or faster than int8).
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
    /* Skill overlay (spec §9): NULL or "none" = the backbone; an id of the file's "skills"
     * registry = every tensor is read from skill.ID.<name> where the file has it, the backbone
     * entry otherwise (views into the same mapping, nothing copied). An unknown id fails with
     * CMF_E_NOT_FOUND listing the ids. One overlay per loaded model: a server that serves
     * several skills loads one model per skill (the mapping's pages are shared). */
    const char *skill;
    /* Soft superposition (spec §9, claim 14): when n_blend > 0, `skill` is ignored and every
     * tensor some member replaces becomes the f32 working tensor sum_i w_i T_i (T_i = member
     * i's replacement, or the backbone tensor where it has none), allocated at load and owned
     * by the model; the other tensors stay views. Weights are normalized to sum 1. */
    const struct cortiq_skill_weight *blend;
    size_t n_blend;
    /* The decode copies (docs/KERNELS.md, "Batched decode lanes"): where this CPU has the layout
     * (the AVX2 and AVX-512 VNNI tiers, int8 activations), the integer matrices a decode step
     * reads are copied at load into panels of 8 rows, one int32 lane per row, and their file
     * pages released, so memory holds the weights once. Every product of such a matrix with
     * int8 activations then reads the copy: one token, batched decode and the prefill GEMM, with
     * the GEMM's bits whichever sessions share a step. 0 (default): the 4-bit and vbit matrices,
     * whose copy keeps about the file's size (q4_tiled and q4_block; q4tp 4-5 % more, vbit 2-5 %),
     * where the one-token kernels on it are the faster; positive: every integer matrix, q8_row
     * too, for servers with several slots (batched steps then cost about half the arithmetic;
     * one session loses speed on q8_row, whose one-token kernel is the faster); negative: none,
     * every product reads the file. */
    int batch_lanes;
} cortiq_load_opts;

/* A member of a skill blend. */
typedef struct cortiq_skill_weight {
    const char *id;
    float weight;
} cortiq_skill_weight;

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
/* Bytes of the decode copies cortiq_load_opts.batch_lanes made (0: none). */
CORTIQ_API uint64_t cortiq_model_lanes_bytes(const cortiq_model *m);

CORTIQ_API const cmf_file *cortiq_model_file(const cortiq_model *m);
CORTIQ_API uint32_t cortiq_model_vocab(const cortiq_model *m);  /* rows of the output projection */
CORTIQ_API uint32_t cortiq_model_hidden(const cortiq_model *m); /* width of the residual stream */
CORTIQ_API uint32_t
cortiq_model_max_context(const cortiq_model *m); /* max_position_embeddings or 0 */
CORTIQ_API unsigned cortiq_model_threads(const cortiq_model *m);
/* Bytes of weights one decode step reads (for roofline figures). */
CORTIQ_API uint64_t cortiq_model_weight_bytes(const cortiq_model *m);
/* Multiply-adds one token takes in the layers' matrix products: rows x cols of every layer
 * matrix (a MoE layer's routed experts: top_k times their mean), without the output head and
 * the embedding. A prefill at r tok/s does 2 * this * r flops per second in them (an integer
 * multiply-add counted as two; `cortiq bench` prints it, for comparison with the machine's peak:
 * docs/PERFORMANCE.md, "Compute roof"). */
CORTIQ_API uint64_t cortiq_model_token_macs(const cortiq_model *m);
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
/* cortiq_session_eval runs its tokens in chunks of at most this many, counted from the call's
 * first token, and a token's logits can depend on the size of its chunk (fewer than 4 tokens
 * take the one-token kernels, whose rounding differs from the batched ones). A caller that
 * reuses a cached prefix and wants the result a fresh evaluation gives starts at a multiple of
 * it, or see cortiq_model_exact_chunk. */
#define CORTIQ_EVAL_CHUNK 128
/* The chunk size from which a token's results (logits, KV cache) do not depend on how its
 * prompt was cut into chunks, as the model is loaded on the CPU tier in effect (for instance 6
 * for integer-coded weights on AVX2, 2 when they have the batched-decode copy of
 * cortiq_load_opts.batch_lanes, 10 for f16 there); 0 when no size gives that (mixtures of
 * experts, Gated DeltaNet layers, dtypes without such a GEMM). cortiq_session_eval then cuts
 * n >= that many tokens into chunks of at least that many (the last two share the rest rather
 * than leave a shorter one), so a caller that cached a prefix evaluated that way may evaluate
 * the rest, if it is at least that long, and get exactly a fresh evaluation's result. */
CORTIQ_API uint32_t cortiq_model_exact_chunk(const cortiq_model *m);
CORTIQ_API CORTIQ_NODISCARD cmf_status cortiq_session_eval(cortiq_session *s, const int32_t *tokens,
                                                           size_t n, float *all_logits,
                                                           cmf_err *err);
/* Like cortiq_session_eval (the KV cache advances by n), and also fills
 * hidden[n x cortiq_model_hidden] with each token's final hidden state: the residual stream
 * after the final norm, the vector the output head multiplies (transformers' last_hidden_state).
 * cortiq_session_logits() holds the last token's logits as after cortiq_session_eval.
 * Mean-pooled over the tokens, it is a text embedding. */
CORTIQ_API CORTIQ_NODISCARD cmf_status cortiq_session_eval_hidden(cortiq_session *s,
                                                                  const int32_t *tokens, size_t n,
                                                                  float *hidden, cmf_err *err);
CORTIQ_API const float *cortiq_session_logits(const cortiq_session *s);
/* cortiq_session_eval that also adds each token's final hidden state (after the final norm: the
 * output head's input) into pooled[cortiq_model_hidden(m)], for mean-pooled embeddings. */
CORTIQ_API CORTIQ_NODISCARD cmf_status cortiq_session_eval_pooled(cortiq_session *s,
                                                                  const int32_t *tokens, size_t n,
                                                                  float *pooled, cmf_err *err);
/* One decode step of several sessions of one model in one pass over the weights: session i
 * evaluates tokens[i] at its own position (n <= 16, each session once; a model with
 * linear-attention or gated-attention layers or a mixture of experts with more than 16 experts
 * per token (top_k, plus the shared one), or a
 * session running a task mask, restricting experts or counting routes, is refused with
 * CMF_E_UNSUPPORTED; a mixture of experts runs each token's selected experts as that token
 * alone would, sharing the attention and router products). Every session's
 * logits are exactly those cortiq_session_eval of its token alone gives: the same one-token kernels
 * on the same rows, but each piece of weights is read from memory once for all the tokens (decode
 * is bound by memory bandwidth, so n streams cost little more than one). Runs on sessions[0]'s
 * scratch. */
CORTIQ_API CORTIQ_NODISCARD cmf_status cortiq_session_eval_batch(cortiq_session *const *sessions,
                                                                 const int32_t *tokens, size_t n,
                                                                 cmf_err *err);
/* Drop positions >= pos (e.g. to re-run a prompt suffix). pos <= cortiq_session_pos(). A model
 * with recurrent (LinearAttention) layers may drop more: its session returns to the latest
 * state it kept at or below pos (the start and the last token of its latest multi-token eval,
 * else 0). Read cortiq_session_pos() afterwards for the position to continue from. */
CORTIQ_API void cortiq_session_truncate(cortiq_session *s, uint32_t pos);

/* ---- task masks (spec §5) ----
 * A session runs dense until a task is selected. Selecting one builds, once, what its mask
 * leaves active: gated-off layers are skipped, the FFN computes only the active neurons'
 * gate/up rows and reads only their down columns, the output projection reads only the
 * active heads' columns (gathered copies of those rows and columns, same dtype, same values;
 * docs/MASKS_SKILLS.md), and the mask's expert area restricts MoE routing. The result equals
 * the dense model with the inactive activations zeroed, up to float summation order. */
typedef struct cortiq_task_stats {
    uint32_t layers, layers_on;   /* layers, and those the gates leave on */
    uint64_t ffn_neurons;         /* FFN neurons of the dense layers that are on */
    uint64_t ffn_active;          /* of which the mask leaves active */
    uint64_t ffn_computed;        /* of which are computed (active + group/SIMD widening) */
    uint64_t heads, heads_active; /* attention heads of the layers that are on */
    uint32_t dense_layers;        /* masked layers whose dtype has no gather: computed
                                   * densely with the inactive activations zeroed */
    uint64_t gathered_bytes;      /* memory held by the gathered matrices */
} cortiq_task_stats;

/* The task a session of m runs when none is named: the active skill's input_mask_task when
 * its registry record names one (spec §9; a blend has no single skill), else the file's
 * default_task (spec §5.1), or NULL when it names none or has no masks. */
CORTIQ_API const char *cortiq_model_default_task(const cortiq_model *m);
/* Select task `name` for this session; NULL or "none" = dense. Only between conversations
 * (cortiq_session_pos() == 0): the KV cache of earlier positions belongs to their task.
 * Warns on stderr when switching to a mask whose quality is null (not measured, spec §5.1).
 * Fails CMF_E_NOT_FOUND (no such task: the message lists the file's tasks), CMF_E_INVALID_ARG
 * (position not 0), CMF_E_PARSE (mask dimensions that disagree with the model), CMF_E_NOMEM. */
CORTIQ_API CORTIQ_NODISCARD cmf_status cortiq_session_set_task(cortiq_session *s, const char *name,
                                                               cmf_err *err);
/* The selected task's name, or NULL when dense. */
CORTIQ_API const char *cortiq_session_task(const cortiq_session *s);
/* What the selected task computes (all zero when dense). */
CORTIQ_API void cortiq_session_task_stats(const cortiq_session *s, cortiq_task_stats *out);
/* Select a mask that need not be in the file (e.g. a candidate being measured): dims gives
 * the row sizes (n_layers, intermediate, n_heads, n_experts and their byte counts, as
 * cmf_file_masks fills them), mask its bits and name. Both must outlive the selection. No
 * quality warning. Otherwise as cortiq_session_set_task. */
CORTIQ_API CORTIQ_NODISCARD cmf_status cortiq_session_set_mask(cortiq_session *s,
                                                               const cmf_masks *dims,
                                                               const cmf_mask *mask, cmf_err *err);

/* Activation statistics for deriving masks (`cortiq mask derive`). While a session collects
 * (and runs dense: no task), every evaluated token adds, in each dense-FFN layer l, |act(gate)
 * * up| of neuron i to ffn[l * ffn_stride + i], and with heads non-NULL the L2 norm of head h's
 * attention output to heads[l * heads_stride + h]; tokens counts them. The caller owns and
 * zeroes the arrays. */
typedef struct cortiq_act_stats {
    double *ffn;
    size_t ffn_stride;
    double *heads; /* NULL: not collected */
    size_t heads_stride;
    uint64_t tokens;
} cortiq_act_stats;
/* Start collecting into st (NULL stops). st must outlive the collection. */
CORTIQ_API void cortiq_session_collect_stats(cortiq_session *s, cortiq_act_stats *st);

/* ---- mixture-of-experts routing (spec §2.2, §5 expert area, §11.1; docs/MOE.md) ---- */
/* Restrict routing to a set of experts per layer: allow[l] holds LSB-first bits over
 * arch.moe.num_experts (bit e set = expert e routable), one row per layer of the model; a NULL
 * entry leaves layer l unrestricted, and allow == NULL lifts every restriction. Selection then
 * runs over the routable experts only, the router softmax renormalised over them, top_k
 * clamped to their count: the same logits as a file holding only those experts
 * (`cortiq moe-defrag`). The bits are copied; bits of dense layers and of experts a layer does
 * not have are ignored. Replaces any restriction set before (a task mask's included). Fails
 * CMF_E_INVALID_ARG, naming the layer, when a MoE layer would have no routable expert; the
 * session keeps its previous restriction then. */
CORTIQ_API CORTIQ_NODISCARD cmf_status cortiq_session_restrict_experts(cortiq_session *s,
                                                                       const uint8_t *const *allow,
                                                                       cmf_err *err);
/* Count from now on how often routing selects each expert of each MoE layer (one count per
 * token and selected expert, prefill and decode alike); restarts from zero when called again.
 * Fails CMF_E_NOMEM. */
CORTIQ_API CORTIQ_NODISCARD cmf_status cortiq_session_count_routes(cortiq_session *s, cmf_err *err);
/* Layer l's counters, one per expert present (*n_experts of them), or NULL for a dense layer,
 * a layer out of range, or a session that is not counting. */
CORTIQ_API const uint64_t *cortiq_session_route_counts(const cortiq_session *s, uint32_t l,
                                                       uint32_t *n_experts);

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

/* ---- speculative decoding with the MTP head (spec §2.1) ----
 * A cortiq_mtp drives one session: every evaluation goes through it (cortiq_mtp_eval for a
 * prompt, cortiq_mtp_decode per generated token) so that the head's own KV cache follows the
 * session. The head drafts the token after next from the model's final normed hidden state
 * (the output head's input) and the next token; cortiq_mtp_decode evaluates [token, draft] in
 * one pass whose every token is computed exactly as its own decode step, keeps the draft when
 * the sampler picks it, else rolls the KV cache and the Gated DeltaNet state back: the tokens
 * chosen are exactly those of one-token decoding with the same deterministic sampler. */
typedef struct cortiq_mtp cortiq_mtp;
CORTIQ_API bool cortiq_model_has_mtp(const cortiq_model *m); /* arch.mtp with its tensors */
CORTIQ_API CORTIQ_NODISCARD cmf_status cortiq_mtp_create(cortiq_session *s, cortiq_mtp **out,
                                                         cmf_err *err);
CORTIQ_API void cortiq_mtp_free(cortiq_mtp *d); /* NULL allowed */
/* cortiq_session_eval of n tokens at the session's position (after any truncation), also
 * feeding the head. */
CORTIQ_API CORTIQ_NODISCARD cmf_status cortiq_mtp_eval(cortiq_mtp *d, const int32_t *tokens,
                                                       size_t n, cmf_err *err);
/* The head's draft of the token after `next` (the token that follows the session's last):
 * *draft, its logits [vocab] in cortiq_mtp_draft_logits. The session is unchanged. */
CORTIQ_API CORTIQ_NODISCARD cmf_status cortiq_mtp_draft(cortiq_mtp *d, int32_t next, int32_t *draft,
                                                        cmf_err *err);
CORTIQ_API const float *cortiq_mtp_draft_logits(const cortiq_mtp *d);
/* One decode step: hist[n_hist - 1] is the token just chosen (hist: every token of the session
 * then that one). With speculate, it and the head's draft are evaluated together (while the
 * recent drafts are mostly rejected, only every 16th step drafts); *accepted
 * is the draft when smp picks it after hist (the session then holds it as well: its logits
 * follow it), else -1 (the session holds the chosen token, its logits follow that). */
CORTIQ_API CORTIQ_NODISCARD cmf_status cortiq_mtp_decode(cortiq_mtp *d, const int32_t *hist,
                                                         size_t n_hist, cortiq_sampler *smp,
                                                         bool speculate, int32_t *accepted,
                                                         cmf_err *err);
/* Drafts evaluated and accepted since cortiq_mtp_create. */
CORTIQ_API void cortiq_mtp_counts(const cortiq_mtp *d, uint64_t *drafts, uint64_t *accepted);

#ifdef __cplusplus
}
#endif
#endif
