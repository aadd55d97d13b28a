/* complete.c - chat and text completions, whole or streamed (see complete.h). */
#include "server/complete.h"

#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "server/clock.h"
#include "server/gen.h"
#include "server/respond.h"
#include "server/tools.h"

bool srv_client_gone(struct MHD_Connection *conn) {
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (!ci) return false;
    struct pollfd p = {.fd = ci->connect_fd, .events = POLLIN | POLLRDHUP};
    if (poll(&p, 1, 0) <= 0) return false;
    if (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) return true;
    char b;
    return (p.revents & POLLIN) && recv(ci->connect_fd, &b, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
}

typedef struct job {
    srv_ctx *c;
    srv_request rq;
    int32_t *prompt;
    size_t n_prompt;
    uint32_t max_tokens;
    srv_slot *slot;
    cortiq_model *model;  /* the skill's instance, pinned (server/skills.h) */
    const char *skill_id; /* the registry's id; NULL: the backbone */
    const char *task;     /* the task mask it runs; NULL: dense */
    char id[64];
    long created;
    double t0;
    srv_ep ep;
    size_t completion_tokens;
} job;

static void job_free(job *j) {
    if (j->slot) srv_slots_release(&j->c->slots, j->slot);
    srv_skills_unpin(&j->c->skills, j->model); /* after the slot: an unpinned one may go */
    srv_request_free(&j->rq);
    free(j->prompt);
    free(j);
}

/* The prompt's ids: the chat rendered with the file's template (which writes BOS and the other
 * special tokens itself), or the completion text with the tokenizer's own specials. */
static bool tokenize(job *j, srv_error *e) {
    srv_ctx *c = j->c;
    cmf_err err;
    char *text = NULL;
    bool specials = j->rq.kind == SRV_COMPLETION;
    if (j->rq.kind == SRV_CHAT) {
        if (cortiq_render_chat_ex(c->rt, j->rq.messages_json, j->rq.tools_json, j->rq.kwargs_json,
                                  true, &text, &err)) {
            srv_error_set(e, 400, "messages", "the chat template refused the messages: %s",
                          err.msg);
            return false;
        }
    }
    const char *src = text ? text : j->rq.prompt;
    cmf_status st =
        cmf_tokenizer_encode(c->tok, src, strlen(src), specials, &j->prompt, &j->n_prompt, &err);
    free(text);
    if (st) {
        srv_error_set(e, 400, j->rq.kind == SRV_CHAT ? "messages" : "prompt", "%s", err.msg);
        return false;
    }
    if (j->n_prompt == 0) {
        srv_error_set(e, 400, "prompt", "the prompt is empty (0 tokens)");
        return false;
    }
    /* never a silent truncation: a prompt that does not fit is refused with the numbers */
    if (j->n_prompt >= c->ctx) {
        srv_error_set(e, 400, "messages",
                      "the prompt has %zu tokens; the context holds %u positions (--ctx), which "
                      "leaves no room for an answer",
                      j->n_prompt, c->ctx);
        return false;
    }
    if (j->rq.has_max_tokens && j->n_prompt + j->rq.max_tokens > c->ctx) {
        srv_error_set(e, 400, "max_tokens",
                      "the prompt's %zu tokens + max_tokens %u = %zu exceed the context of %u "
                      "positions (--ctx)",
                      j->n_prompt, j->rq.max_tokens, j->n_prompt + j->rq.max_tokens, c->ctx);
        return false;
    }
    for (size_t i = 0; i < j->rq.n_bias; i++)
        if (j->rq.bias_ids[i] >= c->vocab) {
            srv_error_set(e, 400, "logit_bias",
                          "logit_bias: token id %lld is outside the %u of "
                          "the vocabulary",
                          (long long)j->rq.bias_ids[i], c->vocab);
            return false;
        }
    j->max_tokens = j->rq.has_max_tokens ? j->rq.max_tokens : c->ctx - (uint32_t)j->n_prompt;
    return true;
}

/* CMF extension in every answer: the skill and the task mask that ran. */
static json_t *cmf_info(const job *j) {
    return json_pack("{s:s,s:s}", "skill", j->skill_id ? j->skill_id : "none", "task",
                     j->task ? j->task : "none");
}

/* What "skill": "auto" routes on, as `cortiq run --prompt TEXT --skill auto` does on TEXT: the
 * last user message of a chat, a completion's prompt. A malloc'd copy; NULL when out of memory. */
static char *route_text(const srv_request *rq) {
    if (rq->kind != SRV_CHAT) return strdup(rq->prompt ? rq->prompt : "");
    json_t *msgs = json_loads(rq->messages_json, 0, NULL), *m;
    const char *text = "";
    size_t i;
    json_array_foreach(msgs, i, m) {
        const char *role = json_string_value(json_object_get(m, "role"));
        const char *content = json_string_value(json_object_get(m, "content"));
        if (role && content && !strcmp(role, "user")) text = content;
    }
    char *out = strdup(text);
    json_decref(msgs);
    return out;
}

static void record(job *j, const srv_gen *g) {
    double decode =
        g->t_end > g->t_first && g->n_gen > 1 ? (g->n_gen - 1) / (g->t_end - g->t_first) : 0;
    srv_metrics_tokens(&j->c->metrics, g->n_prompt, g->cached, g->n_gen,
                       g->t_first ? g->t_first - j->t0 : -1, decode);
    j->completion_tokens += g->n_gen;
}

/* A finished chat choice's message: content, and the tool calls parsed out of it. */
static json_t *chat_message(job *j, const srv_gen *g, const char **finish, size_t *content_end) {
    json_t *calls = NULL;
    size_t ce = g->len;
    if (j->rq.has_tools)
        calls =
            srv_parse_tool_calls(g->text ? g->text : "", g->len, &ce,
                                 (unsigned long)srv_now() * 1000003ul + (unsigned long)g->n_gen);
    json_t *msg = json_pack("{s:s}", "role", "assistant");
    json_object_set_new(msg, "content",
                        calls && ce == 0 ? json_null() : json_stringn(g->text ? g->text : "", ce));
    if (calls) {
        json_object_set_new(msg, "tool_calls", calls);
        *finish = "tool_calls";
    }
    if (content_end) *content_end = ce;
    return msg;
}

/* ---- whole answers ---- */

static enum MHD_Result whole(struct MHD_Connection *conn, job *j) {
    srv_ctx *c = j->c;
    json_t *choices = json_array();
    char why[512] = "";
    bool cancelled = false, failed = false;
    for (uint32_t i = 0; i < j->rq.n && !cancelled && !failed; i++) {
        srv_gen g;
        if (srv_gen_start(&g, c, j->slot, &j->rq, j->prompt, j->n_prompt, j->max_tokens,
                          j->rq.seed + i, why, sizeof why)) {
            failed = true;
            srv_gen_free(&g);
            break;
        }
        size_t from, to;
        for (unsigned step = 0; !g.done; step++) {
            if (srv_gen_step(&g, &from, &to, why, sizeof why)) {
                failed = true;
                break;
            }
            if (step % 16 == 15 && srv_client_gone(conn)) {
                cancelled = true;
                break;
            }
        }
        if (!failed && !cancelled) {
            record(j, &g);
            const char *finish = g.finish;
            json_t *ch = json_pack("{s:I}", "index", (json_int_t)i);
            json_t *lp = !j->rq.logprobs          ? json_null()
                         : j->rq.kind == SRV_CHAT ? srv_logprobs_chat(c, g.lps, g.n_lps)
                                                  : srv_logprobs_completion(c, g.lps, g.n_lps, 0);
            if (j->rq.kind == SRV_CHAT)
                json_object_set_new(ch, "message", chat_message(j, &g, &finish, NULL));
            else
                json_object_set_new(ch, "text", json_stringn(g.text ? g.text : "", g.len));
            json_object_set_new(ch, "logprobs", lp);
            json_object_set_new(ch, "finish_reason", json_string(finish));
            json_array_append_new(choices, ch);
        }
        srv_gen_free(&g);
    }
    double dt = srv_now() - j->t0;
    if (cancelled || failed) {
        json_decref(choices);
        srv_metrics_request(&c->metrics, j->ep, cancelled ? SRV_OUT_CANCELLED : SRV_OUT_5XX, dt);
        srv_error e;
        srv_error_set(&e, 500, NULL, "generation failed: %s", cancelled ? "cancelled" : why);
        enum MHD_Result r = cancelled ? MHD_NO : srv_reply_error(conn, c, &e, NULL);
        job_free(j);
        return r;
    }
    json_t *out = json_pack("{s:s,s:s,s:I,s:s,s:o,s:o}", "id", j->id, "object",
                            j->rq.kind == SRV_CHAT ? "chat.completion" : "text_completion",
                            "created", (json_int_t)j->created, "model", c->cfg.model_id, "choices",
                            choices, "usage", srv_usage(j->n_prompt, j->completion_tokens));
    json_object_set_new(out, "cmf", cmf_info(j));
    srv_metrics_request(&c->metrics, j->ep, SRV_OUT_OK, dt);
    job_free(j);
    return srv_reply_json(conn, c, 200, out);
}

/* ---- streamed answers (server-sent events) ---- */

typedef struct stream {
    job *j;
    srv_gen g;
    bool live, all_done, finished;
    uint32_t choice;
    char *buf;
    size_t len, off, cap;
    size_t text_base; /* completions logprobs: text handed out so far in this choice */
} stream;

static void put(stream *s, const char *p, size_t n) {
    if (s->len + n > s->cap) {
        size_t cap = (s->len + n) * 2 + 256;
        char *b = realloc(s->buf, cap);
        if (!b) return;
        s->buf = b;
        s->cap = cap;
    }
    memcpy(s->buf + s->len, p, n);
    s->len += n;
}

static void event(stream *s, json_t *o) {
    char *t = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    if (!t) return;
    put(s, "data: ", 6);
    put(s, t, strlen(t));
    put(s, "\n\n", 2);
    free(t);
}

/* A chunk around one choice entry. */
static void chunk(stream *s, json_t *choice) {
    job *j = s->j;
    json_t *o =
        json_pack("{s:s,s:s,s:I,s:s,s:[o]}", "id", j->id, "object",
                  j->rq.kind == SRV_CHAT ? "chat.completion.chunk" : "text_completion", "created",
                  (json_int_t)j->created, "model", j->c->cfg.model_id, "choices", choice);
    if (j->rq.include_usage) json_object_set_new(o, "usage", json_null());
    json_object_set_new(o, "cmf", cmf_info(j));
    event(s, o);
}

static json_t *choice_entry(stream *s, const char *text, size_t n, const char *finish,
                            json_t *delta_extra) {
    job *j = s->j;
    json_t *ch = json_pack("{s:I}", "index", (json_int_t)s->choice);
    if (j->rq.kind == SRV_CHAT) {
        json_t *delta = delta_extra ? delta_extra : json_object();
        if (n) json_object_set_new(delta, "content", json_stringn(text, n));
        json_object_set_new(ch, "delta", delta);
    } else
        json_object_set_new(ch, "text", json_stringn(text, n));
    size_t nl = s->g.n_lps - s->g.lps_emitted;
    json_t *lp = json_null();
    if (j->rq.logprobs && nl)
        lp = j->rq.kind == SRV_CHAT
                 ? srv_logprobs_chat(j->c, s->g.lps + s->g.lps_emitted, nl)
                 : srv_logprobs_completion(j->c, s->g.lps + s->g.lps_emitted, nl, s->text_base);
    json_object_set_new(ch, "logprobs", lp);
    json_object_set_new(ch, "finish_reason", finish ? json_string(finish) : json_null());
    return ch;
}

static void error_event(stream *s, const char *why) {
    srv_error e;
    srv_error_set(&e, 500, NULL, "generation failed: %s", why);
    event(s, srv_error_json(&e));
    put(s, "data: [DONE]\n\n", 14);
    s->all_done = true;
}

/* Produce the next events into the buffer. */
static void advance(stream *s) {
    job *j = s->j;
    char why[512] = "";
    if (!s->live) {
        if (s->choice >= j->rq.n) {
            if (j->rq.include_usage) {
                json_t *o =
                    json_pack("{s:s,s:s,s:I,s:s,s:[],s:o}", "id", j->id, "object",
                              j->rq.kind == SRV_CHAT ? "chat.completion.chunk" : "text_completion",
                              "created", (json_int_t)j->created, "model", j->c->cfg.model_id,
                              "choices", "usage", srv_usage(j->n_prompt, j->completion_tokens));
                event(s, o);
            }
            put(s, "data: [DONE]\n\n", 14);
            s->all_done = s->finished = true;
            return;
        }
        if (srv_gen_start(&s->g, j->c, j->slot, &j->rq, j->prompt, j->n_prompt, j->max_tokens,
                          j->rq.seed + s->choice, why, sizeof why)) {
            srv_gen_free(&s->g);
            error_event(s, why);
            return;
        }
        s->live = true;
        s->text_base = 0;
        if (j->rq.kind == SRV_CHAT)
            chunk(s, choice_entry(s, "", 0, NULL,
                                  json_pack("{s:s,s:s}", "role", "assistant", "content", "")));
        return;
    }
    size_t from, to;
    if (srv_gen_step(&s->g, &from, &to, why, sizeof why)) {
        srv_gen_free(&s->g);
        s->live = false;
        error_event(s, why);
        return;
    }
    srv_gen *g = &s->g;
    if (!g->done) {
        if (to > from || (j->rq.logprobs && g->n_lps > g->lps_emitted))
            chunk(s, choice_entry(s, g->text + from, to - from, NULL, NULL));
        s->text_base += to - from;
        return;
    }
    record(j, g);
    const char *finish = g->finish;
    if (j->rq.kind == SRV_CHAT && j->rq.has_tools) {
        size_t ce;
        json_t *msg = chat_message(j, g, &finish, &ce);
        json_t *calls = json_object_get(msg, "tool_calls");
        size_t upto = calls ? (ce > from ? (ce < to ? ce : to) : from) : to;
        if (upto > from) chunk(s, choice_entry(s, g->text + from, upto - from, NULL, NULL));
        if (calls) {
            size_t i;
            json_t *call;
            json_array_foreach(calls, i, call)
                json_object_set_new(call, "index", json_integer((json_int_t)i));
            json_t *delta = json_pack("{s:O}", "tool_calls", calls);
            chunk(s, choice_entry(s, "", 0, NULL, delta));
        }
        json_decref(msg);
        g->lps_emitted = g->n_lps;
        chunk(s, choice_entry(s, "", 0, finish, NULL));
    } else
        chunk(s, choice_entry(s, g->text + from, to - from, finish, NULL));
    srv_gen_free(g);
    s->live = false;
    s->choice++;
}

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max) {
    (void)pos;
    stream *s = cls;
    while (s->off == s->len) {
        if (s->all_done) return MHD_CONTENT_READER_END_OF_STREAM;
        s->off = s->len = 0;
        advance(s);
    }
    size_t n = s->len - s->off < max ? s->len - s->off : max;
    memcpy(buf, s->buf + s->off, n);
    s->off += n;
    return (ssize_t)n;
}

/* Called when the response is done with: sent in full, or the client went away. */
static void stream_free(void *cls) {
    stream *s = cls;
    job *j = s->j;
    if (s->live) srv_gen_free(&s->g);
    srv_metrics_request(&j->c->metrics, j->ep, s->finished ? SRV_OUT_OK : SRV_OUT_CANCELLED,
                        srv_now() - j->t0);
    job_free(j);
    free(s->buf);
    free(s);
}

static enum MHD_Result streamed(struct MHD_Connection *conn, job *j) {
    stream *s = calloc(1, sizeof *s);
    if (!s) {
        job_free(j);
        return MHD_NO;
    }
    s->j = j;
    struct MHD_Response *r =
        MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16 * 1024, stream_read, s, stream_free);
    if (!r) {
        stream_free(s);
        return MHD_NO;
    }
    MHD_add_response_header(r, "Content-Type", "text/event-stream");
    MHD_add_response_header(r, "Cache-Control", "no-cache");
    srv_add_headers(j->c, r);
    enum MHD_Result ok = MHD_queue_response(conn, 200, r);
    MHD_destroy_response(r);
    return ok;
}

enum MHD_Result srv_handle_generate(struct MHD_Connection *conn, srv_ctx *c, srv_kind kind,
                                    const char *body, size_t len, double t0) {
    srv_ep ep = kind == SRV_CHAT ? SRV_EP_CHAT : SRV_EP_COMPLETION;
    srv_error e = {0};
    job *j = calloc(1, sizeof *j);
    if (!j) return MHD_NO;
    j->c = c;
    j->t0 = t0;
    j->ep = ep;
    j->created = (long)time(NULL);
    srv_new_id(j->id, sizeof j->id, kind == SRV_CHAT ? "chatcmpl-" : "cmpl-");
    if (!srv_request_parse(kind, body, len, &j->rq, &e) || !tokenize(j, &e)) {
        srv_metrics_request(&c->metrics, ep, srv_outcome_of(e.http), srv_now() - t0);
        job_free(j);
        return srv_reply_error(conn, c, &e, NULL);
    }
    const char *skill = j->rq.skill ? j->rq.skill : c->cfg.default_skill;
    char *rt = skill && !strcmp(skill, "auto") ? route_text(&j->rq) : NULL;
    bool have = (rt || !skill || strcmp(skill, "auto")) &&
                srv_request_skill(c, &j->rq, rt, &j->model, &j->skill_id, &e);
    free(rt);
    if (!have) {
        if (!e.http) srv_error_set(&e, 500, NULL, "out of memory");
        srv_metrics_request(&c->metrics, ep, srv_outcome_of(e.http), srv_now() - t0);
        job_free(j);
        return srv_reply_error(conn, c, &e, e.http == 503 ? "5" : NULL);
    }
    const char *task = j->task = srv_request_task(j->model, &j->rq);
    srv_slot_wait w = srv_slots_acquire(&c->slots, j->prompt, j->n_prompt, j->model, task,
                                        c->cfg.queue_timeout, &c->stopping, &j->slot);
    if (w != SRV_SLOT_OK) {
        if (w == SRV_SLOT_QUEUE_FULL)
            srv_error_set(&e, 429, NULL,
                          "all %u slots are busy and %u requests are waiting (the queue's limit)",
                          c->slots.n, c->cfg.max_queue);
        else
            srv_error_set(&e, 503, NULL, "%s",
                          w == SRV_SLOT_STOPPING ? "the server is shutting down"
                                                 : "no slot became free in time; try again");
        srv_metrics_request(&c->metrics, ep, srv_outcome_of(e.http), srv_now() - t0);
        job_free(j);
        return srv_reply_error(conn, c, &e, w == SRV_SLOT_QUEUE_FULL ? "1" : "5");
    }
    char why[CMF_ERR_MSG_MAX];
    if (srv_slot_bind(&c->slots, j->slot, j->model, why, sizeof why)) {
        srv_error_set(&e, 500, NULL, "%s", why);
        srv_metrics_request(&c->metrics, ep, srv_outcome_of(e.http), srv_now() - t0);
        job_free(j);
        return srv_reply_error(conn, c, &e, NULL);
    }
    if (srv_slot_use_task(&c->slots, j->slot, task, why, sizeof why)) {
        srv_error_set(&e, 400, "task", "task '%.64s': %s", task ? task : "none", why);
        srv_metrics_request(&c->metrics, ep, srv_outcome_of(e.http), srv_now() - t0);
        job_free(j); /* releases the slot */
        return srv_reply_error(conn, c, &e, NULL);
    }
    return j->rq.stream ? streamed(conn, j) : whole(conn, j);
}
