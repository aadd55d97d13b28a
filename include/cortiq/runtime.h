/* cortiq/runtime.h - embed the whole runtime: a model file with its own tokenizer and chat
 * template, prompt in, streamed text out.
 *
 *   cortiq_runtime *rt;
 *   cortiq_runtime_open("model.cmf", NULL, &rt, &err);
 *   cortiq_generate_params gp; cortiq_generate_defaults(&gp);
 *   cortiq_chat_once(rt, NULL, "What is 2+2?", &gp, print_piece, NULL, &stats, &err);
 *   cortiq_runtime_free(rt);
 *
 * The tokenizer comes from the file's vocab section (spec §6), the template and stop tokens
 * from the header's tokenizer_config (spec §6.1; ChatML when the file has no template).
 */
#ifndef CORTIQ_RUNTIME_H
#define CORTIQ_RUNTIME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cortiq/engine.h"
#include "cortiq/export.h"
#include "cortiq/status.h"
#include "cortiq/tokenizer.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cortiq_runtime cortiq_runtime;

typedef struct cortiq_runtime_opts {
    unsigned threads;    /* 0 = online CPUs */
    uint32_t ctx;        /* context length; 0 = min(4096, max_position_embeddings) */
    cortiq_kv_type kv;   /* KV cache type (cortiq/engine.h); 0 = CORTIQ_KV_F16 */
    cortiq_act_mode act; /* activation precision (cortiq/engine.h); 0 = CORTIQ_ACT_DEFAULT */
    int no_huge_pages;   /* nonzero: weights stay on 4 KiB file pages (cortiq_load_opts) */
    int verify_tensors;  /* nonzero: every tensor hash checked at load (cortiq_load_opts) */
    /* skill overlay or blend (cortiq_load_opts.skill / .blend, spec §9); NULL / 0 = backbone */
    const char *skill;
    const cortiq_skill_weight *blend;
    size_t n_blend;
    /* decode copies (cortiq_load_opts.batch_lanes): 0 the 4-bit ones near the file's size, >0
     * every integer matrix, <0 none */
    int batch_lanes;
} cortiq_runtime_opts;

CORTIQ_API CORTIQ_NODISCARD cmf_status cortiq_runtime_open(const char *path,
                                                           const cortiq_runtime_opts *opts,
                                                           cortiq_runtime **out, cmf_err *err);
CORTIQ_API void cortiq_runtime_free(cortiq_runtime *rt); /* NULL allowed */

CORTIQ_API cortiq_model *cortiq_runtime_model(cortiq_runtime *rt);
CORTIQ_API cortiq_session *cortiq_runtime_session(cortiq_runtime *rt);
/* Speculative decoding with the file's MTP head (spec §2.1, cortiq/engine.h): on by default
 * where the file has one; greedy generation (temperature <= 0) then evaluates each chosen token
 * with the head's draft and keeps the draft when greedy picks it, so the reply is exactly the
 * one-token decode's. Sampling with temperature > 0 never uses the head. Returns whether the
 * head is in use after the call. */
CORTIQ_API CORTIQ_NODISCARD cmf_status cortiq_runtime_set_mtp(cortiq_runtime *rt, bool on,
                                                              cmf_err *err);
/* Whether the head is in use; its drafts evaluated and accepted so far. */
CORTIQ_API bool cortiq_runtime_mtp_counts(const cortiq_runtime *rt, uint64_t *drafts,
                                          uint64_t *accepted);
CORTIQ_API const cmf_tokenizer *cortiq_runtime_tokenizer(const cortiq_runtime *rt);
CORTIQ_API bool cortiq_runtime_has_template(const cortiq_runtime *rt); /* false: ChatML fallback */

typedef struct cortiq_generate_params {
    cortiq_sampler_params sampler;
    uint32_t max_tokens; /* 0 = until a stop token or the context ends */
} cortiq_generate_params;

CORTIQ_API void cortiq_generate_defaults(cortiq_generate_params *p);

typedef enum cortiq_finish {
    CORTIQ_FINISH_EOS = 0,     /* a token of tokenizer_config.eos_token_ids */
    CORTIQ_FINISH_LENGTH = 1,  /* max_tokens reached */
    CORTIQ_FINISH_CONTEXT = 2, /* the context is full */
    CORTIQ_FINISH_STOPPED = 3, /* the callback asked to stop */
} cortiq_finish;

CORTIQ_API const char *cortiq_finish_name(cortiq_finish f);

typedef struct cortiq_generate_stats {
    size_t prompt_tokens, cached_tokens, generated_tokens;
    double prefill_seconds, decode_seconds;
    cortiq_finish finish;
} cortiq_generate_stats;

/* Called with each piece of text as soon as it forms complete UTF-8; return non-zero to stop. */
typedef int (*cortiq_text_fn)(void *user, const char *text, size_t len);

/* Work a runtime can do while it waits for its user (between chat turns): moves the weights
 * that are still on 4 KiB file pages onto 2 MiB pages (cortiq_model_move_step), which
 * cortiq_generate never does (a move during an answer slows it more than it speeds the rest).
 * Returns the bytes moved. */
CORTIQ_API uint64_t cortiq_runtime_idle(cortiq_runtime *rt);

/* Render messages (a JSON array of {"role", "content"} objects) with the file's chat template
 * and add_generation_prompt; *out malloc'd. */
CORTIQ_API CORTIQ_NODISCARD cmf_status cortiq_render_chat(cortiq_runtime *rt,
                                                          const char *messages_json,
                                                          bool add_generation_prompt, char **out,
                                                          cmf_err *err);

/* cortiq_render_chat with the template's other inputs: tools_json (an array of tool schemas,
 * or NULL: the template's tools branch stays off) and kwargs_json (an object of further template
 * variables such as enable_thinking, or NULL; its keys override the file's special tokens).
 * Renders may run concurrently from many threads. */
CORTIQ_API CORTIQ_NODISCARD cmf_status cortiq_render_chat_ex(
    cortiq_runtime *rt, const char *messages_json, const char *tools_json, const char *kwargs_json,
    bool add_generation_prompt, char **out, cmf_err *err);

/* Generate after `prompt` token ids. The session's KV cache is reused for the longest prefix
 * it already holds (multi-turn chat re-renders the whole conversation cheaply). *reply gets the
 * generated text (malloc'd) when reply is non-NULL. */
CORTIQ_API CORTIQ_NODISCARD cmf_status cortiq_generate(
    cortiq_runtime *rt, const int32_t *prompt, size_t n_prompt, const cortiq_generate_params *p,
    cortiq_text_fn on_text, void *user, char **reply, cortiq_generate_stats *stats, cmf_err *err);

/* One chat turn from scratch: [system,] user -> rendered -> generated. */
CORTIQ_API CORTIQ_NODISCARD cmf_status cortiq_chat_once(
    cortiq_runtime *rt, const char *system, const char *user_text, const cortiq_generate_params *p,
    cortiq_text_fn on_text, void *user, char **reply, cortiq_generate_stats *stats, cmf_err *err);

#ifdef __cplusplus
}
#endif
#endif
