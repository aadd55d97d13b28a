/* embed.c - embeddings: mean of the final-normed hidden states, unit length (see embed.h). */
#include "server/embed.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/clock.h"
#include "server/complete.h"
#include "server/request.h"
#include "server/respond.h"

/* One input on the slot's session from position 0; the slot's cache then holds it. */
static int embed_one(srv_ctx *c, srv_slot *sl, const int32_t *ids, size_t n, float *v,
                     srv_error *e) {
    cmf_err err;
    uint32_t dim = cortiq_model_hidden(c->model);
    memset(v, 0, dim * sizeof *v);
    cortiq_session_reset(sl->sess);
    srv_slot_keep(sl, 0);
    srv_turn_take(&c->slots);
    cmf_status st = cortiq_session_eval_pooled(sl->sess, ids, n, v, &err);
    srv_turn_give(&c->slots);
    if (st) {
        cortiq_session_reset(sl->sess);
        srv_error_set(e, 500, NULL, "%s", err.msg);
        return -1;
    }
    srv_slot_append_prompt(sl, ids, n); /* one evaluation from position 0 */
    double norm = 0;
    for (uint32_t i = 0; i < dim; i++) {
        v[i] /= (float)n;
        norm += (double)v[i] * v[i];
    }
    float inv = norm > 0 ? (float)(1 / sqrt(norm)) : 0;
    for (uint32_t i = 0; i < dim; i++)
        v[i] *= inv;
    return 0;
}

enum MHD_Result srv_handle_embeddings(struct MHD_Connection *conn, srv_ctx *c, const char *body,
                                      size_t len, double t0) {
    srv_request rq;
    srv_error e;
    if (!srv_request_parse(SRV_EMBEDDING, body, len, &rq, &e)) {
        srv_metrics_request(&c->metrics, SRV_EP_EMBEDDING, srv_outcome_of(e.http), srv_now() - t0);
        return srv_reply_error(conn, c, &e, NULL);
    }
    size_t n_in = rq.n_inputs, total = 0;
    int32_t **ids = calloc(n_in, sizeof *ids);
    size_t *n = calloc(n_in, sizeof *n);
    uint32_t dim = cortiq_model_hidden(c->model);
    float *v = malloc(dim * sizeof *v);
    json_t *data = json_array();
    bool ok = ids && n && v;
    if (!ok) srv_error_set(&e, 500, NULL, "out of memory");
    for (size_t i = 0; ok && i < n_in; i++) {
        cmf_err err;
        if (cmf_tokenizer_encode(c->tok, rq.inputs[i], strlen(rq.inputs[i]), true, &ids[i], &n[i],
                                 &err)) {
            srv_error_set(&e, 400, "input", "input[%zu]: %s", i, err.msg);
            ok = false;
        } else if (n[i] == 0 || n[i] > c->ctx) {
            srv_error_set(&e, 400, "input", "input[%zu] has %zu tokens; the context holds %u", i,
                          n[i], c->ctx);
            ok = false;
        }
        total += ok ? n[i] : 0;
    }
    srv_slot *sl = NULL;
    cortiq_model *model = NULL;
    const char *skill_id;
    /* a skill as for completions; "auto" routes on the first input */
    if (ok) ok = srv_request_skill(c, &rq, n_in ? rq.inputs[0] : "", &model, &skill_id, &e);
    if (ok) {
        const char *task = srv_request_task(model, &rq);
        srv_slot_wait w = srv_slots_acquire(&c->slots, NULL, 0, model, task, c->cfg.queue_timeout,
                                            &c->stopping, &sl);
        char why[CMF_ERR_MSG_MAX];
        if (w != SRV_SLOT_OK) {
            srv_error_set(&e, w == SRV_SLOT_QUEUE_FULL ? 429 : 503, NULL, "no slot is free");
            ok = false;
        } else if (srv_slot_bind(&c->slots, sl, model, why, sizeof why)) {
            srv_error_set(&e, 500, NULL, "%s", why);
            ok = false;
        } else if (srv_slot_use_task(&c->slots, sl, task, why, sizeof why)) {
            srv_error_set(&e, 400, "task", "task '%.64s': %s", rq.task ? rq.task : "default", why);
            ok = false;
        }
    }
    for (size_t i = 0; ok && i < n_in; i++) {
        if (embed_one(c, sl, ids[i], n[i], v, &e)) {
            ok = false;
            break;
        }
        json_t *arr = json_array();
        for (uint32_t k = 0; k < dim; k++)
            json_array_append_new(arr, json_real(v[k]));
        json_array_append_new(data, json_pack("{s:s,s:I,s:o}", "object", "embedding", "index",
                                              (json_int_t)i, "embedding", arr));
    }
    if (sl) srv_slots_release(&c->slots, sl);
    srv_skills_unpin(&c->skills, model);
    for (size_t i = 0; ids && i < n_in; i++)
        free(ids[i]);
    free(ids);
    free(n);
    free(v);
    srv_request_free(&rq);
    srv_metrics_request(&c->metrics, SRV_EP_EMBEDDING, ok ? SRV_OUT_OK : srv_outcome_of(e.http),
                        srv_now() - t0);
    if (!ok) {
        json_decref(data);
        return srv_reply_error(conn, c, &e, e.http == 429 ? "1" : e.http == 503 ? "5" : NULL);
    }
    if (ok) srv_metrics_tokens(&c->metrics, total, 0, 0, -1, 0);
    json_t *out = json_pack("{s:s,s:o,s:s,s:{s:I,s:I}}", "object", "list", "data", data, "model",
                            c->cfg.model_id, "usage", "prompt_tokens", (json_int_t)total,
                            "total_tokens", (json_int_t)total);
    return srv_reply_json(conn, c, 200, out);
}
