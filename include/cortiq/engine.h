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

#include "cortiq/format.h"
#include "cortiq/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cortiq_model cortiq_model;
typedef struct cortiq_session cortiq_session;

typedef struct cortiq_load_opts {
    unsigned threads; /* compute threads; 0 = online CPUs */
    /* Nonzero: quantize activations to int8 (per 32 values) before the q8_row/q4_* products
     * and use integer dot products (CMF_KF_INT8_ACT). Faster on VNNI/AVX2, but the logits
     * then carry the activation rounding error; off by default. */
    int int8_act;
} cortiq_load_opts;

/* Open (cmf_open_model: shards are followed), validate the architecture against the tensors
 * actually present (every dimension capped and checked before anything is allocated), and
 * bind weight views into the mmap. Fails: whatever cmf_open_model fails with;
 * CMF_E_UNSUPPORTED (SKILL_FILE, MoE, linear attention, a dtype without kernels);
 * CMF_E_NOT_FOUND (a tensor the model needs, named); CMF_E_PARSE (a header field missing or
 * contradicting a tensor's shape); CMF_E_LIMIT (a dimension over the caps). */
cmf_status cortiq_model_load(const char *path, const cortiq_load_opts *opts, cortiq_model **out, cmf_err *err);
void cortiq_model_free(cortiq_model *m); /* NULL allowed */

const cmf_file *cortiq_model_file(const cortiq_model *m);
uint32_t cortiq_model_vocab(const cortiq_model *m);       /* rows of the output projection */
uint32_t cortiq_model_max_context(const cortiq_model *m); /* max_position_embeddings or 0 */
unsigned cortiq_model_threads(const cortiq_model *m);
/* Bytes of weights one decode step reads (for roofline figures). */
uint64_t cortiq_model_weight_bytes(const cortiq_model *m);

/* A session with room for ctx positions (sliding-window layers keep only their window). */
cmf_status cortiq_session_create(cortiq_model *m, uint32_t ctx, cortiq_session **out, cmf_err *err);
void cortiq_session_free(cortiq_session *s); /* NULL allowed */
/* Forget the conversation (position back to 0). */
void cortiq_session_reset(cortiq_session *s);
uint32_t cortiq_session_pos(const cortiq_session *s);
uint32_t cortiq_session_ctx(const cortiq_session *s);

/* Feed n tokens at the current position (prefill when n > 1). Afterwards
 * cortiq_session_logits() holds the logits of the last token. If all_logits is non-NULL it
 * receives n x vocab logits (one row per token; used by perplexity). Fails CMF_E_LIMIT when
 * the context would overflow, CMF_E_INVALID_ARG for a token id outside the vocabulary. */
cmf_status cortiq_session_eval(cortiq_session *s, const int32_t *tokens, size_t n, float *all_logits,
                               cmf_err *err);
const float *cortiq_session_logits(const cortiq_session *s);
/* Drop positions >= pos (e.g. to re-run a prompt suffix). pos <= cortiq_session_pos(). */
void cortiq_session_truncate(cortiq_session *s, uint32_t pos);

/* ---- sampling ---- */
typedef struct cortiq_sampler_params {
    float temperature;     /* <= 0: greedy */
    int top_k;             /* <= 0: off */
    float top_p;           /* >= 1: off */
    float min_p;           /* <= 0: off */
    float repeat_penalty;  /* 1: off; applied to the last repeat_last_n tokens */
    int repeat_last_n;
    uint64_t seed;
} cortiq_sampler_params;

void cortiq_sampler_defaults(cortiq_sampler_params *p); /* temp 0.7, top_k 40, top_p 0.95, min_p 0.05 */

typedef struct cortiq_sampler cortiq_sampler;
cmf_status cortiq_sampler_create(const cortiq_sampler_params *p, uint32_t vocab, cortiq_sampler **out, cmf_err *err);
void cortiq_sampler_free(cortiq_sampler *s);
/* Pick the next token from logits (not modified). history: tokens so far (for the penalty). */
int32_t cortiq_sampler_sample(cortiq_sampler *s, const float *logits, const int32_t *history, size_t n_history);
/* Argmax, lowest index on ties. */
int32_t cortiq_argmax(const float *logits, uint32_t n);

#ifdef __cplusplus
}
#endif
#endif
