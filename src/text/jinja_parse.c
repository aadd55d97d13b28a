/* jinja_parse.c - recursive-descent parser from tokens to the AST, following jinja2's
 * grammar and operator precedence (or < and < not < comparisons < + - < ~ < * / // % < **
 * < unary; postfix . [] () then filters | and tests `is`). */
#include <string.h>

#include "text/jinja_internal.h"

#define MAX_NEST 200

typedef struct parser {
    jx_ctx *c;
    jtok *t;
    size_t n, i;
    int loop_depth;
    int nest;
} parser;

static jtok *cur(parser *P) {
    return &P->t[P->i];
}
static jtok *peek(parser *P, size_t k) {
    return &P->t[P->i + k < P->n ? P->i + k : P->n - 1];
}
static void adv(parser *P) {
    if (P->i + 1 < P->n) P->i++;
}
static bool is_op(jtok *t, int op) {
    return t->type == TK_OP && t->op == op;
}
static bool is_name(jtok *t, const char *name) {
    return t->type == TK_NAME && !strcmp(t->s, name);
}

static const char *tok_desc(jtok *t) {
    switch (t->type) {
    case TK_TEXT:
        return "template data";
    case TK_VAR_BEGIN:
        return "'{{'";
    case TK_VAR_END:
        return "'}}'";
    case TK_BLOCK_BEGIN:
        return "'{%'";
    case TK_BLOCK_END:
        return "'%}'";
    case TK_NAME:
        return t->s;
    case TK_STRING:
        return "string";
    case TK_INT:
        return "integer";
    case TK_FLOAT:
        return "float";
    case TK_OP:
        return "operator";
    default:
        return "end of template";
    }
}
_Noreturn static void perr(parser *P, const char *what) {
    jx_fail(P->c, CMF_E_PARSE, cur(P)->line, "expected %s, got %s", what, tok_desc(cur(P)));
}
static void expect_op(parser *P, int op, const char *what) {
    if (!is_op(cur(P), op)) perr(P, what);
    adv(P);
}
static void expect_block_end(parser *P) {
    if (cur(P)->type != TK_BLOCK_END) perr(P, "end of statement '%}'");
    adv(P);
}

static jnode *mk(parser *P, jnode_kind k, int line) {
    jnode *n = jx_alloc(P->c, sizeof *n);
    n->kind = (uint8_t)k;
    n->line = line;
    return n;
}

/* growable node-pointer vector in the arena */
typedef struct nvec {
    jnode **v;
    size_t n, cap;
} nvec;
static void nv_push(parser *P, nvec *a, jnode *x) {
    if (a->n == a->cap) {
        size_t cap = a->cap ? a->cap * 2 : 4;
        jnode **nv = jx_alloc(P->c, cap * sizeof *nv);
        if (a->n) memcpy(nv, a->v, a->n * sizeof *nv);
        a->v = nv;
        a->cap = cap;
    }
    a->v[a->n++] = x;
}
typedef struct svec {
    const char **v;
    size_t n, cap;
} svec;
static void sv_push(parser *P, svec *a, const char *x) {
    if (a->n == a->cap) {
        size_t cap = a->cap ? a->cap * 2 : 4;
        const char **nv = jx_alloc(P->c, cap * sizeof *nv);
        if (a->n) memcpy(nv, a->v, a->n * sizeof *nv);
        a->v = nv;
        a->cap = cap;
    }
    a->v[a->n++] = x;
}

static jnode *parse_expression(parser *P, bool with_condexpr);
static jnode *parse_or(parser *P);
static jnode *parse_unary(parser *P, bool with_filter);
static jnode *parse_primary(parser *P);
static jnode *parse_postfix(parser *P, jnode *node);
static jnode *parse_filter_expr(parser *P, jnode *node);

static void enter(parser *P) {
    if (++P->nest > MAX_NEST)
        jx_fail(P->c, CMF_E_LIMIT, cur(P)->line, "expression nests deeper than %d", MAX_NEST);
}
static void leave(parser *P) {
    P->nest--;
}

/* (a, b) / a, b tuples; returns a single expression when there is no comma. */
static bool tuple_end(parser *P, const char *extra) {
    jtok *t = cur(P);
    if (t->type == TK_VAR_END || t->type == TK_BLOCK_END || is_op(t, OP_RPAREN) ||
        t->type == TK_EOF)
        return true;
    return extra && is_name(t, extra);
}
static jnode *parse_tuple(parser *P, bool with_condexpr, bool explicit_parens,
                          const char *extra_end) {
    int line = cur(P)->line;
    nvec items = {0};
    bool is_tuple = false;
    for (;;) {
        if (items.n) expect_op(P, OP_COMMA, "','");
        if (tuple_end(P, extra_end)) break;
        nv_push(P, &items, parse_expression(P, with_condexpr));
        if (is_op(cur(P), OP_COMMA))
            is_tuple = true;
        else
            break;
    }
    if (!is_tuple) {
        if (items.n) return items.v[0];
        if (!explicit_parens) perr(P, "an expression");
    }
    jnode *t = mk(P, N_TUPLE, line);
    t->args = items.v;
    t->nargs = items.n;
    return t;
}

static void parse_call_args(parser *P, jnode *call) {
    nvec args = {0}, vals = {0};
    svec names = {0};
    expect_op(P, OP_LPAREN, "'('");
    while (!is_op(cur(P), OP_RPAREN)) {
        if (args.n || names.n) {
            expect_op(P, OP_COMMA, "','");
            if (is_op(cur(P), OP_RPAREN)) break;
        }
        if (is_op(cur(P), OP_MUL) || is_op(cur(P), OP_POW))
            jx_fail(P->c, CMF_E_UNSUPPORTED, cur(P)->line,
                    "*args / **kwargs in calls are not supported");
        if (cur(P)->type == TK_NAME && is_op(peek(P, 1), OP_ASSIGN)) {
            sv_push(P, &names, cur(P)->s);
            adv(P);
            adv(P);
            nv_push(P, &vals, parse_expression(P, true));
        } else {
            if (names.n)
                jx_fail(P->c, CMF_E_PARSE, cur(P)->line,
                        "positional argument follows keyword argument");
            nv_push(P, &args, parse_expression(P, true));
        }
    }
    adv(P);
    call->args = args.v;
    call->nargs = args.n;
    call->kwnames = names.v;
    call->vals = vals.v;
    call->nkw = names.n;
}

static const char *parse_dotted_name(parser *P) {
    if (cur(P)->type != TK_NAME) perr(P, "a name");
    const char *name = cur(P)->s;
    adv(P);
    while (is_op(cur(P), OP_DOT) && peek(P, 1)->type == TK_NAME) {
        adv(P);
        size_t a = strlen(name), b = strlen(cur(P)->s);
        char *j = jx_alloc(P->c, a + b + 2);
        memcpy(j, name, a);
        j[a] = '.';
        memcpy(j + a + 1, cur(P)->s, b);
        name = j;
        adv(P);
    }
    return name;
}

static jnode *parse_filter(parser *P, jnode *input) {
    /* current token is after '|' */
    int line = cur(P)->line;
    jnode *f = mk(P, N_FILTER, line);
    f->a = input;
    f->name = parse_dotted_name(P);
    if (is_op(cur(P), OP_LPAREN)) parse_call_args(P, f);
    return f;
}

static jnode *parse_test(parser *P, jnode *input) {
    int line = cur(P)->line;
    adv(P); /* 'is' */
    bool neg = false;
    if (is_name(cur(P), "not")) {
        neg = true;
        adv(P);
    }
    jnode *t = mk(P, N_TEST, line);
    t->a = input;
    t->neg = neg;
    t->name = parse_dotted_name(P);
    jtok *c = cur(P);
    if (is_op(c, OP_LPAREN))
        parse_call_args(P, t);
    else if ((c->type == TK_NAME || c->type == TK_STRING || c->type == TK_INT ||
              c->type == TK_FLOAT || is_op(c, OP_LBRACKET) || is_op(c, OP_LBRACE)) &&
             !is_name(c, "else") && !is_name(c, "or") && !is_name(c, "and")) {
        if (is_name(c, "is"))
            jx_fail(P->c, CMF_E_PARSE, c->line, "you cannot chain multiple tests with is");
        jnode *arg = parse_postfix(P, parse_primary(P));
        t->args = jx_alloc(P->c, sizeof(jnode *));
        t->args[0] = arg;
        t->nargs = 1;
    }
    return t;
}

static jnode *parse_filter_expr(parser *P, jnode *node) {
    for (;;) {
        if (is_op(cur(P), OP_PIPE)) {
            adv(P);
            node = parse_filter(P, node);
        } else if (is_name(cur(P), "is"))
            node = parse_test(P, node);
        else if (is_op(cur(P), OP_LPAREN)) {
            jnode *call = mk(P, N_CALL, cur(P)->line);
            call->a = node;
            parse_call_args(P, call);
            node = call;
        } else
            return node;
    }
}

static jnode *parse_subscribed(parser *P) {
    int line = cur(P)->line;
    jnode *parts[3] = {0};
    if (is_op(cur(P), OP_COLON)) {
        adv(P);
    } else {
        jnode *e = parse_expression(P, true);
        if (!is_op(cur(P), OP_COLON)) return e;
        adv(P);
        parts[0] = e;
    }
    if (!is_op(cur(P), OP_COLON) && !is_op(cur(P), OP_RBRACKET) && !is_op(cur(P), OP_COMMA))
        parts[1] = parse_expression(P, true);
    if (is_op(cur(P), OP_COLON)) {
        adv(P);
        if (!is_op(cur(P), OP_RBRACKET) && !is_op(cur(P), OP_COMMA))
            parts[2] = parse_expression(P, true);
    }
    jnode *s = mk(P, N_SLICE, line);
    s->a = parts[0];
    s->b = parts[1];
    s->c = parts[2];
    return s;
}

static jnode *parse_postfix(parser *P, jnode *node) {
    for (;;) {
        jtok *t = cur(P);
        if (is_op(t, OP_DOT)) {
            adv(P);
            jtok *a = cur(P);
            if (a->type == TK_NAME) {
                jnode *g = mk(P, N_GETATTR, a->line);
                g->a = node;
                g->name = a->s;
                g->name_len = a->len;
                adv(P);
                node = g;
            } else if (a->type == TK_INT) {
                jnode *g = mk(P, N_GETITEM, a->line);
                g->a = node;
                g->b = mk(P, N_CONST, a->line);
                g->b->val = jv_int(a->i);
                adv(P);
                node = g;
            } else
                perr(P, "name or number after '.'");
        } else if (is_op(t, OP_LBRACKET)) {
            adv(P);
            nvec idx = {0};
            while (!is_op(cur(P), OP_RBRACKET)) {
                if (idx.n) {
                    expect_op(P, OP_COMMA, "','");
                    if (is_op(cur(P), OP_RBRACKET)) break;
                }
                nv_push(P, &idx, parse_subscribed(P));
            }
            expect_op(P, OP_RBRACKET, "']'");
            if (!idx.n) jx_fail(P->c, CMF_E_PARSE, t->line, "expected subscript expression");
            jnode *g = mk(P, N_GETITEM, t->line);
            g->a = node;
            if (idx.n == 1)
                g->b = idx.v[0];
            else {
                g->b = mk(P, N_TUPLE, t->line);
                g->b->args = idx.v;
                g->b->nargs = idx.n;
            }
            node = g;
        } else if (is_op(t, OP_LPAREN)) {
            jnode *call = mk(P, N_CALL, t->line);
            call->a = node;
            parse_call_args(P, call);
            node = call;
        } else
            return node;
    }
}

static jnode *parse_primary(parser *P) {
    jtok *t = cur(P);
    jnode *n;
    switch (t->type) {
    case TK_NAME:
        if (!strcmp(t->s, "true") || !strcmp(t->s, "True") || !strcmp(t->s, "false") ||
            !strcmp(t->s, "False")) {
            n = mk(P, N_CONST, t->line);
            n->val = jv_bool(t->s[0] == 't' || t->s[0] == 'T');
        } else if (!strcmp(t->s, "none") || !strcmp(t->s, "None")) {
            n = mk(P, N_CONST, t->line);
            n->val = jv_none();
        } else {
            n = mk(P, N_NAME, t->line);
            n->name = t->s;
            n->name_len = t->len;
        }
        adv(P);
        return n;
    case TK_STRING: {
        n = mk(P, N_CONST, t->line);
        jbuf b = {0};
        while (cur(P)->type == TK_STRING) {
            jb_put(P->c, &b, cur(P)->s, cur(P)->len);
            adv(P);
        }
        n->val = jv_str(P->c, b.p ? b.p : "", b.n);
        return n;
    }
    case TK_INT:
        n = mk(P, N_CONST, t->line);
        n->val = jv_int(t->i);
        adv(P);
        return n;
    case TK_FLOAT:
        n = mk(P, N_CONST, t->line);
        n->val = jv_float(t->f);
        adv(P);
        return n;
    case TK_OP:
        if (t->op == OP_LPAREN) {
            adv(P);
            n = parse_tuple(P, true, true, NULL);
            expect_op(P, OP_RPAREN, "')'");
            return n;
        }
        if (t->op == OP_LBRACKET) {
            adv(P);
            nvec items = {0};
            while (!is_op(cur(P), OP_RBRACKET)) {
                if (items.n) {
                    expect_op(P, OP_COMMA, "','");
                    if (is_op(cur(P), OP_RBRACKET)) break;
                }
                nv_push(P, &items, parse_expression(P, true));
            }
            adv(P);
            n = mk(P, N_LIST, t->line);
            n->args = items.v;
            n->nargs = items.n;
            return n;
        }
        if (t->op == OP_LBRACE) {
            adv(P);
            nvec keys = {0}, vals = {0};
            while (!is_op(cur(P), OP_RBRACE)) {
                if (keys.n) {
                    expect_op(P, OP_COMMA, "','");
                    if (is_op(cur(P), OP_RBRACE)) break;
                }
                nv_push(P, &keys, parse_expression(P, true));
                expect_op(P, OP_COLON, "':'");
                nv_push(P, &vals, parse_expression(P, true));
            }
            adv(P);
            n = mk(P, N_DICT, t->line);
            n->args = keys.v;
            n->vals = vals.v;
            n->nargs = keys.n;
            return n;
        }
        break;
    default:
        break;
    }
    perr(P, "an expression");
}

static jnode *parse_unary(parser *P, bool with_filter) {
    enter(P);
    jtok *t = cur(P);
    jnode *node;
    if (is_op(t, OP_SUB) || is_op(t, OP_ADD)) {
        adv(P);
        node = mk(P, t->op == OP_SUB ? N_NEG : N_POS, t->line);
        node->a = parse_unary(P, false);
    } else
        node = parse_primary(P);
    node = parse_postfix(P, node);
    if (with_filter) node = parse_filter_expr(P, node);
    leave(P);
    return node;
}

static jnode *binop(parser *P, int op, jnode *l, jnode *r, int line) {
    jnode *b = mk(P, N_BINOP, line);
    b->op = (uint8_t)op;
    b->a = l;
    b->b = r;
    return b;
}
static jnode *parse_pow(parser *P) {
    jnode *l = parse_unary(P, true);
    while (is_op(cur(P), OP_POW)) {
        int line = cur(P)->line;
        adv(P);
        l = binop(P, OP_POW, l, parse_unary(P, true), line);
    }
    return l;
}
static jnode *parse_math2(parser *P) {
    jnode *l = parse_pow(P);
    for (;;) {
        jtok *t = cur(P);
        if (!(is_op(t, OP_MUL) || is_op(t, OP_DIV) || is_op(t, OP_FLOORDIV) || is_op(t, OP_MOD)))
            return l;
        adv(P);
        l = binop(P, t->op, l, parse_pow(P), t->line);
    }
}
static jnode *parse_concat(parser *P) {
    int line = cur(P)->line;
    jnode *first = parse_math2(P);
    if (!is_op(cur(P), OP_TILDE)) return first;
    nvec parts = {0};
    nv_push(P, &parts, first);
    while (is_op(cur(P), OP_TILDE)) {
        adv(P);
        nv_push(P, &parts, parse_math2(P));
    }
    jnode *c = mk(P, N_CONCAT, line);
    c->args = parts.v;
    c->nargs = parts.n;
    return c;
}
static jnode *parse_math1(parser *P) {
    jnode *l = parse_concat(P);
    for (;;) {
        jtok *t = cur(P);
        if (!(is_op(t, OP_ADD) || is_op(t, OP_SUB))) return l;
        adv(P);
        l = binop(P, t->op, l, parse_concat(P), t->line);
    }
}
static jnode *parse_compare(parser *P) {
    int line = cur(P)->line;
    jnode *expr = parse_math1(P);
    nvec ops = {0};
    uint8_t opv[64];
    for (;;) {
        jtok *t = cur(P);
        int op = -1;
        if (t->type == TK_OP) {
            switch (t->op) {
            case OP_EQ:
                op = CMP_EQ;
                break;
            case OP_NE:
                op = CMP_NE;
                break;
            case OP_LT:
                op = CMP_LT;
                break;
            case OP_LE:
                op = CMP_LE;
                break;
            case OP_GT:
                op = CMP_GT;
                break;
            case OP_GE:
                op = CMP_GE;
                break;
            default:
                break;
            }
            if (op >= 0) adv(P);
        } else if (is_name(t, "in")) {
            op = CMP_IN;
            adv(P);
        } else if (is_name(t, "not") && is_name(peek(P, 1), "in")) {
            op = CMP_NOTIN;
            adv(P);
            adv(P);
        }
        if (op < 0) break;
        if (ops.n >= sizeof opv) jx_fail(P->c, CMF_E_LIMIT, t->line, "comparison chain too long");
        opv[ops.n] = (uint8_t)op;
        nv_push(P, &ops, parse_math1(P));
    }
    if (!ops.n) return expr;
    jnode *c = mk(P, N_COMPARE, line);
    c->a = expr;
    c->args = ops.v;
    c->nargs = ops.n;
    c->cmpops = jx_alloc(P->c, ops.n);
    memcpy(c->cmpops, opv, ops.n);
    return c;
}
static jnode *parse_not(parser *P) {
    if (is_name(cur(P), "not")) {
        int line = cur(P)->line;
        adv(P);
        enter(P);
        jnode *n = mk(P, N_NOT, line);
        n->a = parse_not(P);
        leave(P);
        return n;
    }
    return parse_compare(P);
}
static jnode *parse_and(parser *P) {
    jnode *l = parse_not(P);
    while (is_name(cur(P), "and")) {
        jnode *n = mk(P, N_AND, cur(P)->line);
        adv(P);
        n->a = l;
        n->b = parse_not(P);
        l = n;
    }
    return l;
}
static jnode *parse_or(parser *P) {
    jnode *l = parse_and(P);
    while (is_name(cur(P), "or")) {
        jnode *n = mk(P, N_OR, cur(P)->line);
        adv(P);
        n->a = l;
        n->b = parse_and(P);
        l = n;
    }
    return l;
}
static jnode *parse_condexpr(parser *P) {
    enter(P);
    jnode *e1 = parse_or(P);
    while (is_name(cur(P), "if")) {
        int line = cur(P)->line;
        adv(P);
        jnode *c = mk(P, N_COND, line);
        c->a = parse_or(P);
        c->b = e1;
        if (is_name(cur(P), "else")) {
            adv(P);
            c->c = parse_condexpr(P);
        }
        e1 = c;
    }
    leave(P);
    return e1;
}
static jnode *parse_expression(parser *P, bool with_condexpr) {
    return with_condexpr ? parse_condexpr(P) : parse_or(P);
}

/* ---- statements ---- */
static jnode **parse_body(parser *P, const char *const *ends, size_t nends, size_t *nbody,
                          const char **which);

static jnode *parse_assign_target(parser *P, bool allow_ns, const char *extra_end) {
    int line = cur(P)->line;
    bool paren = false;
    if (is_op(cur(P), OP_LPAREN)) {
        paren = true;
        adv(P);
    }
    nvec names = {0};
    for (;;) {
        if (cur(P)->type != TK_NAME) perr(P, "a name to assign to");
        jnode *n = mk(P, N_NAME, cur(P)->line);
        n->name = cur(P)->s;
        n->name_len = cur(P)->len;
        adv(P);
        if (allow_ns && !names.n && is_op(cur(P), OP_DOT) && peek(P, 1)->type == TK_NAME) {
            adv(P);
            jnode *g = mk(P, N_GETATTR, cur(P)->line);
            g->a = n;
            g->name = cur(P)->s;
            g->name_len = cur(P)->len;
            adv(P);
            return g;
        }
        nv_push(P, &names, n);
        if (!is_op(cur(P), OP_COMMA)) break;
        adv(P);
        if (extra_end && is_name(cur(P), extra_end)) break;
        if (paren && is_op(cur(P), OP_RPAREN)) break;
    }
    if (paren) expect_op(P, OP_RPAREN, "')'");
    if (names.n == 1 && !paren) return names.v[0];
    jnode *t = mk(P, N_TUPLE, line);
    t->args = names.v;
    t->nargs = names.n;
    return t;
}

/* Parse a filter chain applied to a placeholder (for {% filter %} and {% set x | f %}). */
static jnode *parse_filter_chain(parser *P, int line) {
    jnode *node = mk(P, N_PLACEHOLDER, line);
    bool first = true;
    while (first || is_op(cur(P), OP_PIPE)) {
        if (!first) adv(P);
        first = false;
        node = parse_filter(P, node);
    }
    return node;
}

static void parse_params(parser *P, jnode *def) {
    svec names = {0};
    nvec defaults = {0};
    expect_op(P, OP_LPAREN, "'('");
    while (!is_op(cur(P), OP_RPAREN)) {
        if (names.n) expect_op(P, OP_COMMA, "','");
        if (is_op(cur(P), OP_RPAREN)) break;
        if (cur(P)->type != TK_NAME) perr(P, "a parameter name");
        sv_push(P, &names, cur(P)->s);
        adv(P);
        if (is_op(cur(P), OP_ASSIGN)) {
            adv(P);
            nv_push(P, &defaults, parse_expression(P, true));
        } else {
            if (defaults.n && defaults.v[defaults.n - 1])
                jx_fail(P->c, CMF_E_PARSE, cur(P)->line,
                        "non-default argument follows default argument");
            nv_push(P, &defaults, NULL);
        }
    }
    adv(P);
    def->kwnames = names.v;
    def->vals = defaults.v;
    def->nkw = names.n;
}

/* jinja2 lets a macro take extra positional / keyword arguments only when its body
 * mentions `varargs` / `kwargs`: bit 0 / bit 1. */
static int catch_flags(parser *P, size_t from, size_t to) {
    int f = 0;
    for (size_t k = from; k < to && k < P->n; k++)
        if (P->t[k].type == TK_NAME) {
            if (!strcmp(P->t[k].s, "varargs")) f |= 1;
            if (!strcmp(P->t[k].s, "kwargs")) f |= 2;
        }
    return f;
}

static jnode *parse_statement(parser *P) {
    jtok *t = cur(P); /* the tag name */
    int line = t->line;
    if (t->type != TK_NAME) perr(P, "a statement name");
    const char *kw = t->s;
    if (!strcmp(kw, "if")) {
        adv(P);
        jnode *root = mk(P, N_IF, line), *node = root;
        for (;;) {
            node->a = parse_tuple(P, false, false, NULL);
            expect_block_end(P);
            static const char *const ends[] = {"elif", "else", "endif"};
            const char *which;
            node->body = parse_body(P, ends, 3, &node->nbody, &which);
            if (!strcmp(which, "elif")) {
                jnode *e = mk(P, N_IF, cur(P)->line);
                node->ebody = jx_alloc(P->c, sizeof(jnode *));
                node->ebody[0] = e;
                node->nebody = 1;
                node = e;
                continue;
            }
            if (!strcmp(which, "else")) {
                expect_block_end(P);
                static const char *const ends2[] = {"endif"};
                node->ebody = parse_body(P, ends2, 1, &node->nebody, &which);
            }
            expect_block_end(P);
            return root;
        }
    }
    if (!strcmp(kw, "for")) {
        adv(P);
        jnode *f = mk(P, N_FOR, line);
        f->a = parse_assign_target(P, false, "in");
        if (!is_name(cur(P), "in")) perr(P, "'in'");
        adv(P);
        f->b = parse_tuple(P, false, false, "recursive");
        if (is_name(cur(P), "if")) {
            adv(P);
            f->c = parse_expression(P, true);
        }
        if (is_name(cur(P), "recursive"))
            jx_fail(P->c, CMF_E_UNSUPPORTED, cur(P)->line, "recursive for loops are not supported");
        expect_block_end(P);
        static const char *const ends[] = {"endfor", "else"};
        const char *which;
        P->loop_depth++;
        f->body = parse_body(P, ends, 2, &f->nbody, &which);
        P->loop_depth--;
        if (!strcmp(which, "else")) {
            expect_block_end(P);
            static const char *const ends2[] = {"endfor"};
            f->ebody = parse_body(P, ends2, 1, &f->nebody, &which);
        }
        expect_block_end(P);
        return f;
    }
    if (!strcmp(kw, "set")) {
        adv(P);
        jnode *target = parse_assign_target(P, true, NULL);
        if (is_op(cur(P), OP_ASSIGN)) {
            adv(P);
            jnode *s = mk(P, N_SET, line);
            s->a = target;
            s->b = parse_tuple(P, true, false, NULL);
            expect_block_end(P);
            return s;
        }
        if (target->kind != N_NAME) perr(P, "'=' (block set needs a plain name)");
        jnode *s = mk(P, N_SETBLOCK, line);
        s->a = target;
        if (is_op(cur(P), OP_PIPE)) {
            adv(P);
            s->b = parse_filter_chain(P, line);
        }
        expect_block_end(P);
        static const char *const ends[] = {"endset"};
        const char *which;
        s->body = parse_body(P, ends, 1, &s->nbody, &which);
        expect_block_end(P);
        return s;
    }
    if (!strcmp(kw, "macro")) {
        adv(P);
        jnode *m = mk(P, N_MACRO, line);
        if (cur(P)->type != TK_NAME) perr(P, "a macro name");
        m->name = cur(P)->s;
        m->name_len = cur(P)->len;
        adv(P);
        parse_params(P, m);
        expect_block_end(P);
        static const char *const ends[] = {"endmacro"};
        const char *which;
        int saved = P->loop_depth;
        P->loop_depth = 0;
        size_t body_start = P->i;
        m->body = parse_body(P, ends, 1, &m->nbody, &which);
        P->loop_depth = saved;
        m->op = (uint8_t)catch_flags(P, body_start, P->i);
        if (cur(P)->type == TK_NAME) adv(P); /* {% endmacro name %} */
        expect_block_end(P);
        return m;
    }
    if (!strcmp(kw, "call")) {
        adv(P);
        jnode *cb = mk(P, N_CALLBLOCK, line);
        if (is_op(cur(P), OP_LPAREN)) parse_params(P, cb);
        jnode *call = parse_expression(P, true);
        if (call->kind != N_CALL)
            jx_fail(P->c, CMF_E_PARSE, line, "expected a call after {%% call %%}");
        cb->a = call;
        expect_block_end(P);
        static const char *const ends[] = {"endcall"};
        const char *which;
        int saved = P->loop_depth;
        P->loop_depth = 0;
        size_t body_start = P->i;
        cb->body = parse_body(P, ends, 1, &cb->nbody, &which);
        P->loop_depth = saved;
        cb->op = (uint8_t)catch_flags(P, body_start, P->i);
        expect_block_end(P);
        return cb;
    }
    if (!strcmp(kw, "filter")) {
        adv(P);
        jnode *fb = mk(P, N_FILTERBLOCK, line);
        fb->a = parse_filter_chain(P, line);
        expect_block_end(P);
        static const char *const ends[] = {"endfilter"};
        const char *which;
        fb->body = parse_body(P, ends, 1, &fb->nbody, &which);
        expect_block_end(P);
        return fb;
    }
    if (!strcmp(kw, "break") || !strcmp(kw, "continue")) {
        if (!P->loop_depth) jx_fail(P->c, CMF_E_PARSE, line, "'%s' outside of a for loop", kw);
        adv(P);
        expect_block_end(P);
        return mk(P, kw[0] == 'b' ? N_BREAK : N_CONTINUE, line);
    }
    if (!strcmp(kw, "with")) {
        adv(P);
        jnode *w = mk(P, N_WITH, line);
        nvec targets = {0}, vals = {0};
        while (cur(P)->type != TK_BLOCK_END) {
            if (targets.n) expect_op(P, OP_COMMA, "','");
            nv_push(P, &targets, parse_assign_target(P, false, NULL));
            expect_op(P, OP_ASSIGN, "'='");
            nv_push(P, &vals, parse_expression(P, true));
        }
        w->args = targets.v;
        w->vals = vals.v;
        w->nargs = targets.n;
        expect_block_end(P);
        static const char *const ends[] = {"endwith"};
        const char *which;
        w->body = parse_body(P, ends, 1, &w->nbody, &which);
        expect_block_end(P);
        return w;
    }
    if (!strcmp(kw, "generation")) { /* transformers' AssistantTracker tag: body renders as is */
        adv(P);
        expect_block_end(P);
        jnode *s = mk(P, N_SCOPE, line);
        static const char *const ends[] = {"endgeneration"};
        const char *which;
        s->body = parse_body(P, ends, 1, &s->nbody, &which);
        expect_block_end(P);
        return s;
    }
    if (!strcmp(kw, "include") || !strcmp(kw, "import") || !strcmp(kw, "from") ||
        !strcmp(kw, "extends") || !strcmp(kw, "block"))
        jx_fail(P->c, CMF_E_UNSUPPORTED, line,
                "'%s' is not allowed in chat templates (no file access)", kw);
    jx_fail(P->c, CMF_E_UNSUPPORTED, line, "encountered unknown tag '%s'", kw);
}

static jnode **parse_body(parser *P, const char *const *ends, size_t nends, size_t *nbody,
                          const char **which) {
    nvec body = {0};
    if (++P->nest > MAX_NEST)
        jx_fail(P->c, CMF_E_LIMIT, cur(P)->line, "blocks nest deeper than %d", MAX_NEST);
    for (;;) {
        jtok *t = cur(P);
        if (t->type == TK_EOF) {
            if (nends)
                jx_fail(P->c, CMF_E_PARSE, t->line, "unexpected end of template, expected '%s'",
                        ends[nends - 1]);
            break;
        }
        if (t->type == TK_TEXT) {
            jnode *n = mk(P, N_TEXT, t->line);
            n->name = t->s;
            n->name_len = t->len;
            nv_push(P, &body, n);
            adv(P);
        } else if (t->type == TK_VAR_BEGIN) {
            adv(P);
            jnode *n = mk(P, N_OUTPUT, t->line);
            n->a = parse_tuple(P, true, false, NULL);
            if (cur(P)->type != TK_VAR_END) perr(P, "end of print statement '}}'");
            adv(P);
            nv_push(P, &body, n);
        } else if (t->type == TK_BLOCK_BEGIN) {
            jtok *name = peek(P, 1);
            if (name->type == TK_NAME)
                for (size_t k = 0; k < nends; k++)
                    if (!strcmp(name->s, ends[k])) {
                        *which = ends[k];
                        adv(P);
                        adv(P);
                        *nbody = body.n;
                        P->nest--;
                        return body.v;
                    }
            adv(P);
            if (cur(P)->type == TK_NAME &&
                (!strncmp(cur(P)->s, "end", 3) || !strcmp(cur(P)->s, "else") ||
                 !strcmp(cur(P)->s, "elif")))
                jx_fail(P->c, CMF_E_PARSE, cur(P)->line, "unexpected '%s'%s%s", cur(P)->s,
                        nends ? ", expected " : "", nends ? ends[nends - 1] : "");
            nv_push(P, &body, parse_statement(P));
        } else
            perr(P, "template data or a tag");
    }
    *nbody = body.n;
    *which = "";
    P->nest--;
    return body.v;
}

/* jinja2 rejects an unknown filter or test when it compiles the template, unless the use sits
 * inside an {% if %} body or a conditional expression (then only reaching it fails). */
static const char *const k_jinja_filters[] = {
    "abs",    "attr",       "batch",       "capitalize", "center",   "count",
    "d",      "default",    "dictsort",    "e",          "escape",   "filesizeformat",
    "first",  "float",      "forceescape", "format",     "groupby",  "indent",
    "int",    "items",      "join",        "last",       "length",   "list",
    "lower",  "map",        "max",         "min",        "pprint",   "random",
    "reject", "rejectattr", "replace",     "reverse",    "round",    "safe",
    "select", "selectattr", "slice",       "sort",       "string",   "striptags",
    "sum",    "title",      "tojson",      "trim",       "truncate", "unique",
    "upper",  "urlencode",  "urlize",      "wordcount",  "wordwrap", "xmlattr",
    NULL};
static const char *const k_jinja_tests[] = {
    "boolean", "callable", "defined",  "divisibleby", "eq",       "equalto",     "escaped",
    "even",    "false",    "filter",   "float",       "ge",       "greaterthan", "gt",
    "in",      "integer",  "iterable", "le",          "lessthan", "lower",       "lt",
    "mapping", "ne",       "none",     "number",      "odd",      "sameas",      "sequence",
    "string",  "test",     "true",     "undefined",   "upper",    "==",          "!=",
    "<",       "<=",       ">",        ">=",          NULL};

static bool known_name(const char *const *tab, const char *name) {
    for (; *tab; tab++)
        if (!strcmp(*tab, name)) return true;
    return false;
}

static void check_names(parser *P, const jnode *n, bool in_cond, int depth);
static void check_list(parser *P, jnode *const *v, size_t k, bool in_cond, int depth) {
    for (size_t i = 0; i < k; i++)
        if (v[i]) check_names(P, v[i], in_cond, depth);
}
static void check_names(parser *P, const jnode *n, bool in_cond, int depth) {
    if (depth > 4 * MAX_NEST) return; /* the parser already bounds nesting */
    if (!in_cond && n->kind == N_FILTER && !known_name(k_jinja_filters, n->name))
        jx_fail(P->c, CMF_E_PARSE, n->line, "no filter named '%s'", n->name);
    if (!in_cond && n->kind == N_TEST && !known_name(k_jinja_tests, n->name))
        jx_fail(P->c, CMF_E_PARSE, n->line, "no test named '%s'", n->name);
    bool inner = in_cond || n->kind == N_COND;
    if (n->a) check_names(P, n->a, inner, depth + 1);
    if (n->b) check_names(P, n->b, inner, depth + 1);
    if (n->c) check_names(P, n->c, inner, depth + 1);
    check_list(P, n->args, n->nargs, inner, depth + 1);
    if (n->kind == N_DICT || n->kind == N_WITH)
        check_list(P, n->vals, n->nargs, inner, depth + 1);
    else
        check_list(P, n->vals, n->nkw, inner, depth + 1);
    bool body_cond = inner || n->kind == N_IF;
    check_list(P, n->body, n->nbody, body_cond, depth + 1);
    check_list(P, n->ebody, n->nebody, body_cond, depth + 1);
}

jnode **jx_parse(jx_ctx *c, jtok *toks, size_t ntok, size_t *nbody) {
    parser P = {.c = c, .t = toks, .n = ntok};
    const char *which;
    jnode **body = parse_body(&P, NULL, 0, nbody, &which);
    check_list(&P, body, *nbody, false, 0);
    return body;
}
