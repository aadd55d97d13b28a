/* jinja_api.c - public entry points of cortiq/chat_template.h: compile once (lex + parse into
 * the template's arena), render many times (each render in its own arena). */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "cortiq/chat_template.h"
#include "text/jinja_internal.h"

#define CTX                "chat_template"
#define MAX_SOURCE         (16u << 20)
#define DEFAULT_MAX_OUTPUT ((size_t)64 << 20)
#define RENDER_MEM_LIMIT   ((size_t)1 << 30)
#define MAX_STEPS          10000000ull
#define MAX_DEPTH          256

struct cmf_chat_template {
    jx_ctx ctx; /* owns tokens and AST */
    jnode **body;
    size_t nbody;
    int64_t now;
    size_t max_output;
};

static cmf_status report(jx_ctx *c, cmf_err *err) {
    if (c->line > 0) return cmf_err_set(err, c->status, CTX, "line %d: %s", c->line, c->msg);
    return cmf_err_set(err, c->status, CTX, "%s", c->msg);
}

cmf_status cmf_chat_template_compile(const char *src, size_t len, cmf_chat_template **out,
                                     cmf_err *err) {
    if (!out || (!src && len)) return cmf_err_set(err, CMF_E_INVALID_ARG, CTX, "NULL argument");
    *out = NULL;
    if (len > MAX_SOURCE)
        return cmf_err_set(err, CMF_E_LIMIT, CTX, "template source %zu bytes > %u", len,
                           MAX_SOURCE);
    cmf_chat_template *t = calloc(1, sizeof *t);
    if (!t) return cmf_err_set(err, CMF_E_NOMEM, CTX, "out of memory");
    jx_ctx_init(&t->ctx, (size_t)MAX_SOURCE * 64);
    t->now = -1;
    t->max_output = DEFAULT_MAX_OUTPUT;
    if (setjmp(t->ctx.jb)) {
        cmf_status st = report(&t->ctx, err);
        jx_ctx_release(&t->ctx);
        free(t);
        return st;
    }
    size_t ntok;
    jtok *toks = jx_lex(&t->ctx, src ? src : "", len, &ntok);
    t->body = jx_parse(&t->ctx, toks, ntok, &t->nbody);
    *out = t;
    return CMF_OK;
}

void cmf_chat_template_set_now(cmf_chat_template *tpl, int64_t unix_seconds) {
    if (tpl) tpl->now = unix_seconds < 0 ? -1 : unix_seconds;
}

void cmf_chat_template_set_max_output(cmf_chat_template *tpl, size_t max_bytes) {
    if (tpl) tpl->max_output = max_bytes ? max_bytes : DEFAULT_MAX_OUTPUT;
}

void cmf_chat_template_free(cmf_chat_template *tpl) {
    if (!tpl) return;
    jx_ctx_release(&tpl->ctx);
    free(tpl);
}

/* parse one JSON input into a value; NULL text gives none */
static jv load_json(jx_ctx *c, const char *what, const char *text, int want) {
    if (!text) return jv_none();
    json_error_t je;
    json_t *j = json_loads(text, JSON_DECODE_ANY | JSON_ALLOW_NUL, &je);
    if (!j)
        jx_fail(c, CMF_E_PARSE, -1, "%s: invalid JSON at line %d column %d: %s", what, je.line,
                je.column, je.text);
    if (want >= 0 && json_typeof(j) != (json_type)want) {
        json_decref(j);
        jx_fail(c, CMF_E_PARSE, -1, "%s: expected a JSON %s", what,
                want == JSON_ARRAY ? "array" : "object");
    }
    /* convert, then free the jansson tree even if conversion unwinds */
    jmp_buf saved;
    memcpy(saved, c->jb, sizeof saved);
    jv v;
    if (setjmp(c->jb)) {
        memcpy(c->jb, saved, sizeof saved);
        json_decref(j);
        longjmp(c->jb, 1);
    }
    v = jv_from_json(c, j, 0);
    memcpy(c->jb, saved, sizeof saved);
    json_decref(j);
    return v;
}

typedef struct render_state {
    jx_ctx ctx;
    jrt rt;
    jbuf out;
    jscope globals, root;
} render_state;

cmf_status cmf_chat_template_render(const cmf_chat_template *tpl, const char *messages_json,
                                    const char *tools_json, const char *documents_json,
                                    bool add_generation_prompt, const char *extra_kwargs_json,
                                    char **out, size_t *out_len, cmf_err *err) {
    if (!tpl || !messages_json || !out || !out_len)
        return cmf_err_set(err, CMF_E_INVALID_ARG, CTX, "NULL argument");
    *out = NULL;
    *out_len = 0;
    render_state *rs = calloc(1, sizeof *rs);
    if (!rs) return cmf_err_set(err, CMF_E_NOMEM, CTX, "out of memory");
    jx_ctx_init(&rs->ctx, RENDER_MEM_LIMIT);
    if (setjmp(rs->ctx.jb)) {
        cmf_status st;
        if (rs->ctx.line < 0)
            st = cmf_err_set(err, rs->ctx.status, CTX, "%s", rs->ctx.msg);
        else
            st = report(&rs->ctx, err);
        jx_ctx_release(&rs->ctx);
        free(rs);
        return st;
    }
    jx_ctx *c = &rs->ctx;
    jrt *rt = &rs->rt;
    rt->c = c;
    rt->globals = &rs->globals;
    rt->root = &rs->root;
    rs->root.parent = NULL;
    rt->max_depth = MAX_DEPTH;
    char stack_mark;
    rt->stack_base = (uintptr_t)&stack_mark;
    rt->max_steps = MAX_STEPS;
    rt->now = tpl->now;
    rs->out.limit = tpl->max_output;
    rt->out = &rs->out;

    jv messages = load_json(c, "messages", messages_json, JSON_ARRAY);
    jv tools = load_json(c, "tools", tools_json, JSON_ARRAY);
    jv documents = load_json(c, "documents", documents_json, JSON_ARRAY);
    jv extra = load_json(c, "kwargs", extra_kwargs_json, JSON_OBJECT);

    /* the variables transformers passes to render() */
    jv g = jv_dict(c, 8);
    jd_set(c, g.u.d, jv_cstr(c, "messages"), messages);
    jd_set(c, g.u.d, jv_cstr(c, "tools"), tools);
    jd_set(c, g.u.d, jv_cstr(c, "documents"), documents);
    jd_set(c, g.u.d, jv_cstr(c, "add_generation_prompt"), jv_bool(add_generation_prompt));
    if (extra.t == JV_DICT)
        for (size_t i = 0; i < extra.u.d->n; i++)
            jd_set(c, g.u.d, extra.u.d->k[i], extra.u.d->v[i]);
    rs->globals.n = rs->globals.cap = g.u.d->n;
    rs->globals.names = jx_alloc(c, g.u.d->n * sizeof(char *));
    rs->globals.vals = jx_alloc(c, g.u.d->n * sizeof(jv));
    for (size_t i = 0; i < g.u.d->n; i++) {
        rs->globals.names[i] = g.u.d->k[i].u.s->s;
        rs->globals.vals[i] = g.u.d->v[i];
    }
    c->line = 0;
    jx_exec_body(rt, rt->root, tpl->body, tpl->nbody);

    char *res = malloc(rs->out.n + 1);
    if (!res) jx_fail(c, CMF_E_NOMEM, -1, "out of memory for the %zu-byte result", rs->out.n);
    if (rs->out.n) memcpy(res, rs->out.p, rs->out.n);
    res[rs->out.n] = 0;
    *out = res;
    *out_len = rs->out.n;
    jx_ctx_release(c);
    free(rs);
    return CMF_OK;
}
