/* respond.c - replies and shared JSON pieces (see respond.h). */
#include "server/respond.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void srv_add_headers(const srv_ctx *c, struct MHD_Response *r) {
    if (c->cfg.cors) {
        MHD_add_response_header(r, "Access-Control-Allow-Origin", c->cfg.cors);
        MHD_add_response_header(r, "Vary", "Origin");
    }
}

enum MHD_Result srv_reply_text(struct MHD_Connection *conn, const srv_ctx *c, unsigned code,
                               const char *content_type, char *body, size_t len) {
    struct MHD_Response *r = MHD_create_response_from_buffer(
        len, body ? body : (char *)"", body ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_PERSISTENT);
    if (!r) {
        free(body);
        return MHD_NO;
    }
    MHD_add_response_header(r, "Content-Type", content_type);
    srv_add_headers(c, r);
    enum MHD_Result ok = MHD_queue_response(conn, code, r);
    MHD_destroy_response(r);
    return ok;
}

enum MHD_Result srv_reply_json(struct MHD_Connection *conn, const srv_ctx *c, unsigned code,
                               json_t *j) {
    char *s = json_dumps(j, JSON_COMPACT);
    json_decref(j);
    if (!s) return MHD_NO;
    return srv_reply_text(conn, c, code, "application/json", s, strlen(s));
}

json_t *srv_error_json(const srv_error *e) {
    char code[16];
    snprintf(code, sizeof code, "%d", e->http);
    return json_pack("{s:{s:s,s:s,s:o,s:s}}", "error", "message", e->message, "type", e->type,
                     "param", e->param[0] ? json_string(e->param) : json_null(), "code", code);
}

enum MHD_Result srv_reply_error(struct MHD_Connection *conn, const srv_ctx *c, const srv_error *e,
                                const char *retry_after) {
    json_t *j = srv_error_json(e);
    char *s = json_dumps(j, JSON_COMPACT);
    json_decref(j);
    if (!s) return MHD_NO;
    struct MHD_Response *r = MHD_create_response_from_buffer(strlen(s), s, MHD_RESPMEM_MUST_FREE);
    if (!r) {
        free(s);
        return MHD_NO;
    }
    MHD_add_response_header(r, "Content-Type", "application/json");
    if (retry_after) MHD_add_response_header(r, "Retry-After", retry_after);
    if (e->http == 401) MHD_add_response_header(r, "WWW-Authenticate", "Bearer");
    srv_add_headers(c, r);
    enum MHD_Result ok = MHD_queue_response(conn, (unsigned)e->http, r);
    MHD_destroy_response(r);
    return ok;
}

static json_t *bytes_of(const char *s, size_t n) {
    json_t *a = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(a, json_integer((unsigned char)s[i]));
    return a;
}

static json_t *lp_entry(const srv_ctx *c, int32_t id, float lp) {
    size_t n;
    char *t = srv_token_text(c, id, &n);
    json_t *o = json_pack("{s:s%,s:f,s:o}", "token", t ? t : "", t ? n : 0, "logprob", (double)lp,
                          "bytes", bytes_of(t ? t : "", t ? n : 0));
    free(t);
    return o;
}

json_t *srv_logprobs_chat(const srv_ctx *c, const srv_tok_lp *lp, size_t n) {
    json_t *content = json_array();
    for (size_t i = 0; i < n; i++) {
        json_t *e = lp_entry(c, lp[i].id, lp[i].lp);
        json_t *top = json_array();
        for (uint32_t k = 0; k < lp[i].n_top; k++)
            json_array_append_new(top, lp_entry(c, lp[i].top[k].id, lp[i].top[k].lp));
        json_object_set_new(e, "top_logprobs", top);
        json_array_append_new(content, e);
    }
    return json_pack("{s:o}", "content", content);
}

json_t *srv_logprobs_completion(const srv_ctx *c, const srv_tok_lp *lp, size_t n,
                                size_t text_base) {
    json_t *tokens = json_array(), *lps = json_array(), *tops = json_array(), *offs = json_array();
    size_t off = text_base;
    for (size_t i = 0; i < n; i++) {
        size_t len;
        char *t = srv_token_text(c, lp[i].id, &len);
        json_array_append_new(tokens, json_stringn(t ? t : "", t ? len : 0));
        json_array_append_new(lps, json_real(lp[i].lp));
        json_array_append_new(offs, json_integer((json_int_t)off));
        off += t ? len : 0;
        free(t);
        json_t *top = json_object();
        for (uint32_t k = 0; k < lp[i].n_top; k++) {
            char *a = srv_token_text(c, lp[i].top[k].id, &len);
            if (a) json_object_set_new(top, a, json_real(lp[i].top[k].lp));
            free(a);
        }
        json_array_append_new(tops, top);
    }
    return json_pack("{s:o,s:o,s:o,s:o}", "tokens", tokens, "token_logprobs", lps, "top_logprobs",
                     tops, "text_offset", offs);
}

json_t *srv_usage(size_t prompt, size_t completion) {
    return json_pack("{s:I,s:I,s:I}", "prompt_tokens", (json_int_t)prompt, "completion_tokens",
                     (json_int_t)completion, "total_tokens", (json_int_t)(prompt + completion));
}

void srv_new_id(char *buf, size_t len, const char *prefix) {
    static unsigned long counter;
    unsigned long k = __atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    snprintf(buf, len, "%s%08lx%08lx%06lx", prefix, (unsigned long)ts.tv_sec,
             (unsigned long)ts.tv_nsec, k & 0xffffff);
}
