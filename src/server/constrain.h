/* constrain.h - the logits mask of constrained decoding: each token's bytes (as they appear in
 * the middle of a text, computed once per model) tested against the grammar's state. */
#ifndef CQ_SERVER_CONSTRAIN_H
#define CQ_SERVER_CONSTRAIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "server/json_grammar.h"

typedef struct srv_ctx srv_ctx;

/* Every token's text; length 0 for a token never allowed (special, or not whole UTF-8). */
typedef struct srv_tok_table {
    char *blob;
    uint32_t *off, *len;
    uint32_t n;
} srv_tok_table;

/* The model's table, built on first use (thread-safe). NULL on memory failure. */
const srv_tok_table *srv_tok_table_get(srv_ctx *c);
void srv_tok_table_free(srv_tok_table *t);

typedef struct srv_mask_params {
    float temperature;
    int top_k;
    bool penalised; /* the sampler reorders logits (repetition penalty): test every token */
} srv_mask_params;

/* out[t] = logits[t] for the tokens the sampler may pick under the grammar, -inf for the others
 * (an end-of-sequence token is allowed only where the value is complete). When the sampler
 * looks only at its top_k (or, greedy, at the best one), the candidates are tested in logit
 * order until that many are allowed; otherwise, or if too few are, every token is. Returns the
 * number of tokens allowed (0: none; the grammar is stuck). scratch: 2 x vocab floats. */
uint32_t srv_constrain_mask(const srv_tok_table *tt, const jg_grammar *g, const jg_state *st,
                            const int32_t *eos, size_t n_eos, const srv_mask_params *p,
                            const float *logits, uint32_t vocab, float *out, float *scratch);

#endif
