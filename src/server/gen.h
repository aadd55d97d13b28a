/* gen.h - one choice of one request generated on a slot, a token per step: the prompt's
 * uncached suffix evaluated, logits biased and penalised as the request asks, the token
 * sampled (the engine's sampler, as `cortiq run`), its log-probabilities, stop tokens and stop
 * strings (text that may be the start of a stop string is held back until it is not), and the
 * length limits. */
#ifndef CQ_SERVER_GEN_H
#define CQ_SERVER_GEN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "server/constrain.h"
#include "server/ctx.h"
#include "server/request.h"

typedef struct srv_alt {
    int32_t id;
    float lp;
} srv_alt;

/* One generated token's log-probability and its best alternatives. */
typedef struct srv_tok_lp {
    int32_t id;
    float lp;
    uint32_t n_top;
    srv_alt top[SRV_MAX_TOP_LOGPROBS];
} srv_tok_lp;

typedef struct srv_gen {
    srv_ctx *c;
    srv_slot *slot;
    const srv_request *rq;
    const int32_t *prompt;
    size_t n_prompt, cached;
    uint32_t max_tokens;
    cortiq_sampler *smp;
    cmf_detok_stream *ds;
    float *work;
    uint32_t *counts; /* times each token was generated (presence/frequency penalties) */
    char *text;       /* everything generated, cut at a stop string */
    size_t len, cap;
    size_t emitted; /* text[0..emitted) was handed out */
    size_t n_gen;
    srv_decode dec; /* the sampled token's decode step, submitted, not yet waited for */
    bool has_pending, done;
    bool decoding;      /* counted in the slots' decoders (the engine waits for it) */
    const char *finish; /* "stop" or "length" */
    srv_tok_lp *lps;
    size_t n_lps, cap_lps, lps_emitted;
    double t_start, t_first, t_end;
    bool hold_tools; /* tools were offered: a tool call is held back whole */
    /* response_format: the grammar's state, the token texts, the masked logits */
    const srv_tok_table *tt;
    jg_state js;
    float *masked, *scratch;
} srv_gen;

/* Prepare (nothing evaluated yet). Fails only on memory. */
int srv_gen_start(srv_gen *g, srv_ctx *c, srv_slot *slot, const srv_request *rq,
                  const int32_t *prompt, size_t n_prompt, uint32_t max_tokens, uint64_t seed,
                  char *why, size_t why_len);
/* One step: the first evaluates the prompt, each samples one token. Afterwards
 * text[*from..*to) may be handed out (possibly empty) and lps[lps_emitted..n_lps) are new.
 * Returns -1 on an engine error (why set). */
int srv_gen_step(srv_gen *g, size_t *from, size_t *to, char *why, size_t why_len);
void srv_gen_free(srv_gen *g);

/* The token's text (for logprobs), malloc'd. */
char *srv_token_text(const srv_ctx *c, int32_t id, size_t *len);

#endif
