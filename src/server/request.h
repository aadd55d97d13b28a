/* request.h - an OpenAI-style request body parsed and checked before any work is done: every
 * field the server honours, with its range; a bad one becomes an error in OpenAI's shape that
 * names the parameter. Unknown fields are ignored. No model is needed (the fuzz target runs it
 * alone); the checks that need the model (prompt length, token ids) come later. */
#ifndef CQ_SERVER_REQUEST_H
#define CQ_SERVER_REQUEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "server/json_grammar.h"

typedef enum { SRV_CHAT, SRV_COMPLETION, SRV_EMBEDDING } srv_kind;

/* An error for the client: HTTP status, OpenAI error type, the offending parameter (may be
 * empty) and a message naming the value and the rule. */
typedef struct srv_error {
    int http;
    const char *type;
    char param[64];
    char message[512];
} srv_error;

void srv_error_set(srv_error *e, int http, const char *param, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#define SRV_MAX_STOP         16
#define SRV_MAX_N            16
#define SRV_MAX_TOP_LOGPROBS 20
#define SRV_MAX_INPUTS       256
#define SRV_MAX_BIAS         1024

typedef struct srv_request {
    srv_kind kind;
    char *model;         /* as sent; NULL when absent */
    char *messages_json; /* chat: the messages, content parts joined into text */
    char *tools_json;    /* chat: the tools array, or NULL */
    char *kwargs_json;   /* chat: chat_template_kwargs, or NULL */
    char *prompt;        /* completions: the prompt text */
    char **inputs;       /* embeddings: the texts */
    size_t n_inputs;
    bool stream, include_usage;
    bool has_max_tokens;
    uint32_t max_tokens;
    uint32_t n;
    /* sampling; a field not sent keeps `cortiq run`'s default (cortiq_sampler_defaults) */
    float temperature, top_p, min_p;
    int top_k;
    float presence_penalty, frequency_penalty, repetition_penalty;
    bool has_seed;
    uint64_t seed;
    char *stop[SRV_MAX_STOP];
    size_t n_stop;
    int64_t *bias_ids; /* logit_bias: token id -> added to its logit */
    float *bias_vals;
    size_t n_bias;
    bool logprobs;
    uint32_t top_logprobs;
    bool has_tools;
    jg_grammar *grammar; /* response_format json_object / json_schema, or NULL */
    char *task;  /* CMF task mask to run: a name, "none" (dense); NULL = the file's default */
    char *skill; /* CMF skill: an id, "auto" (routed on the prompt), "none"; NULL = --skill's */
} srv_request;

/* Parse body[0..len) as a request of `kind`. false with *e set (400) on anything malformed. */
bool srv_request_parse(srv_kind kind, const char *body, size_t len, srv_request *out, srv_error *e);
void srv_request_free(srv_request *r);

#endif
