/* ctx.h - what every part of the server shares: the model, its tokenizer and stop tokens, the
 * slots, the metrics and the options. */
#ifndef CQ_SERVER_CTX_H
#define CQ_SERVER_CTX_H

#include <string.h>

#include "cortiq/runtime.h"
#include "server/request.h"
#include "server/metrics.h"
#include "server/server.h"
#include "server/skills.h"
#include "server/slots.h"

typedef struct srv_ctx {
    cortiq_runtime *rt;
    cortiq_model *model; /* the backbone */
    const cmf_tokenizer *tok;
    int32_t *eos;
    size_t n_eos;
    uint32_t vocab, ctx, hidden;
    srv_slots slots;
    srv_skills skills;
    srv_metrics metrics;
    srv_config cfg;
    long created;
    /* the first SIGINT/SIGTERM sets stopping: no new work (503), the requests in flight finish;
     * a second sets aborting: generations end at their next token. Set and read atomically
     * (srv_flag): the signal thread writes them while requests read them. */
    volatile int stopping, aborting;
    int in_flight;                   /* requests being handled (atomic) */
    struct srv_tok_table *tok_table; /* token texts for constrained decoding, built on first use */
} srv_ctx;

/* The task a request runs on model instance m: its "task" ("none": dense, NULL), else the
 * instance's default (its skill's input_mask_task, else the file's default_task). */
static inline const char *srv_request_task(const cortiq_model *m, const srv_request *rq) {
    if (!rq->task) return cortiq_model_default_task(m);
    return strcmp(rq->task, "none") ? rq->task : NULL;
}

/* The skill a request runs: its "skill", else --skill; "auto" routes on route_text. Pins the
 * instance into *model; *id = the registry's id, NULL for the backbone. false with e set. */
bool srv_request_skill(srv_ctx *c, const srv_request *rq, const char *route_text,
                       cortiq_model **model, const char **id, srv_error *e);

#endif
