/* jinja_eval.c - evaluate the AST: scopes (jinja2's: a for loop, macro, with or block-set body
 * gets its own; if does not), expressions with Python semantics, statements, macros/callers. */
#include <math.h>
#include <string.h>

#include "text/jinja_internal.h"

/* ---- scopes ---- */
static jscope *scope_new(jrt *rt, jscope *parent) {
    jscope *s = jx_alloc(rt->c, sizeof *s);
    s->parent = parent;
    return s;
}
static void scope_set(jrt *rt, jscope *s, const char *name, jv v) {
    for (size_t i = 0; i < s->n; i++)
        if (!strcmp(s->names[i], name)) {
            s->vals[i] = v;
            return;
        }
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 8;
        const char **nn = jx_alloc(rt->c, cap * sizeof *nn);
        jv *nv = jx_alloc(rt->c, cap * sizeof *nv);
        if (s->n) {
            memcpy(nn, s->names, s->n * sizeof *nn);
            memcpy(nv, s->vals, s->n * sizeof *nv);
        }
        s->names = nn;
        s->vals = nv;
        s->cap = cap;
    }
    s->names[s->n] = name;
    s->vals[s->n] = v;
    s->n++;
}
static bool scope_get(jscope *s, const char *name, jv *out) {
    for (; s; s = s->parent)
        for (size_t i = s->n; i-- > 0;)
            if (!strcmp(s->names[i], name)) {
                *out = s->vals[i];
                return true;
            }
    return false;
}

static jv mkfunc(jrt *rt, int kind, const char *name, jv self) {
    jfunc *f = jx_alloc(rt->c, sizeof *f);
    f->kind = kind;
    f->name = name;
    f->self = self;
    jv v = {.t = JV_FUNC};
    v.u.fn = f;
    return v;
}

static jv lookup(jrt *rt, jscope *sc, const char *name) {
    jv v;
    if (scope_get(sc, name, &v)) return v;
    if (scope_get(rt->globals, name, &v)) return v;
    static const struct {
        const char *n;
        int k;
    } builtins[] = {{"range", FN_RANGE},
                    {"namespace", FN_NAMESPACE},
                    {"dict", FN_DICT},
                    {"raise_exception", FN_RAISE},
                    {"strftime_now", FN_STRFTIME},
                    /* jinja2 globals that exist (so `is defined` holds); calling one is refused
                       with an error */
                    {"lipsum", FN_UNSUPPORTED},
                    {"cycler", FN_UNSUPPORTED},
                    {"joiner", FN_UNSUPPORTED}};
    for (size_t i = 0; i < sizeof builtins / sizeof builtins[0]; i++)
        if (!strcmp(name, builtins[i].n))
            return mkfunc(rt, builtins[i].k, builtins[i].n, jv_none());
    return jv_undef(name);
}

void jx_step(jrt *rt, int line) {
    if (++rt->steps > rt->max_steps)
        jx_fail(rt->c, CMF_E_LIMIT, line, "more than %llu loop iterations/calls",
                (unsigned long long)rt->max_steps);
}

_Noreturn static void undefined_error(jrt *rt, int line, jv u) {
    jx_fail(rt->c, CMF_E_PARSE, line, "'%s' is undefined", u.u.uname ? u.u.uname : "value");
}

/* ---- attribute and item access (sandboxed: dict keys, loop fields, safe methods) ---- */
static jv loop_attr(jrt *rt, jv lv, const char *name) {
    jloop *lp = lv.u.lp;
    int64_t n = (int64_t)lp->items->n, i = (int64_t)lp->idx;
    if (!strcmp(name, "index")) return jv_int(i + 1);
    if (!strcmp(name, "index0")) return jv_int(i);
    if (!strcmp(name, "revindex")) return jv_int(n - i);
    if (!strcmp(name, "revindex0")) return jv_int(n - i - 1);
    if (!strcmp(name, "first")) return jv_bool(i == 0);
    if (!strcmp(name, "last")) return jv_bool(i == n - 1);
    if (!strcmp(name, "length")) return jv_int(n);
    if (!strcmp(name, "depth")) return jv_int(1);
    if (!strcmp(name, "depth0")) return jv_int(0);
    if (!strcmp(name, "previtem")) return i > 0 ? lp->items->v[i - 1] : jv_undef("previtem");
    if (!strcmp(name, "nextitem")) return i + 1 < n ? lp->items->v[i + 1] : jv_undef("nextitem");
    if (!strcmp(name, "cycle")) return mkfunc(rt, FN_LOOP_CYCLE, "cycle", lv);
    if (!strcmp(name, "changed")) return mkfunc(rt, FN_LOOP_CHANGED, "changed", lv);
    return jv_undef(name);
}

jv jx_getattr(jrt *rt, int line, jv obj, const char *name, size_t len) {
    switch (obj.t) {
    case JV_UNDEF:
        undefined_error(rt, line, obj);
    case JV_DICT:
        if (jx_has_method(obj, name)) return mkfunc(rt, FN_METHOD, name, obj);
        /* fall through */
    case JV_NS: {
        jv k = jv_str(rt->c, name, len), v;
        jdict d = *obj.u.d;
        if (jd_get(&d, k, &v)) return v;
        return jv_undef(name);
    }
    case JV_LOOP:
        return loop_attr(rt, obj, name);
    case JV_STR:
    case JV_LIST:
        if (jx_has_method(obj, name)) return mkfunc(rt, FN_METHOD, name, obj);
        return jv_undef(name);
    default:
        return jv_undef(name);
    }
}

static int64_t norm_index(int64_t i, int64_t n) {
    return i < 0 ? i + n : i;
}

static jv slice_value(jrt *rt, int line, jv obj, jv a, jv b, jv c) {
    int64_t step = 1;
    if (c.t != JV_NONE) {
        if (c.t != JV_INT && c.t != JV_BOOL) return jv_undef("slice");
        step = c.t == JV_BOOL ? c.u.b : c.u.i;
        if (step == 0) jx_fail(rt->c, CMF_E_PARSE, line, "slice step cannot be zero");
    }
    /* sequence of elements: list items, or code-point offsets of a string */
    size_t *offs = NULL;
    int64_t n;
    if (obj.t == JV_STR) {
        n = (int64_t)jx_utf8_len(obj.u.s->s, obj.u.s->len);
        offs = jx_alloc(rt->c, ((size_t)n + 1) * sizeof *offs);
        size_t i = 0, k = 0;
        while (i < obj.u.s->len) {
            offs[k++] = i;
            jx_utf8_next(obj.u.s->s, obj.u.s->len, &i);
        }
        offs[k] = obj.u.s->len;
    } else
        n = (int64_t)obj.u.l->n;
    int64_t lo, hi;
    jv bounds[2] = {a, b};
    int64_t out[2];
    for (int k = 0; k < 2; k++) {
        jv x = bounds[k];
        if (x.t == JV_NONE) {
            out[k] = step > 0 ? (k == 0 ? 0 : n) : (k == 0 ? n - 1 : -1);
            continue;
        }
        if (x.t != JV_INT && x.t != JV_BOOL)
            return jv_undef("slice"); /* jinja2 turns the TypeError into undefined */
        int64_t v = x.t == JV_BOOL ? x.u.b : x.u.i;
        if (v < 0) {
            v += n;
            if (v < 0) v = step > 0 ? 0 : -1;
        } else if (v >= n)
            v = step > 0 ? n : n - 1;
        out[k] = v;
    }
    lo = out[0];
    hi = out[1];
    if (obj.t == JV_STR) {
        if (step == 1) {
            if (hi < lo) hi = lo;
            return jv_str(rt->c, obj.u.s->s + offs[lo], offs[hi] - offs[lo]);
        }
        jbuf buf = {0};
        for (int64_t i = lo; step > 0 ? i < hi : i > hi; i += step)
            jb_put(rt->c, &buf, obj.u.s->s + offs[i], offs[i + 1] - offs[i]);
        return jv_buf_str(rt->c, &buf);
    }
    jv r = jv_list(rt->c, 0);
    r.u.l->tuple = obj.u.l->tuple;
    for (int64_t i = lo; step > 0 ? i < hi : i > hi; i += step)
        jl_push(rt->c, r.u.l, obj.u.l->v[i]);
    return r;
}

jv jx_getitem(jrt *rt, int line, jv obj, jv key) {
    if (obj.t == JV_UNDEF) undefined_error(rt, line, obj);
    switch (obj.t) {
    case JV_DICT:
    case JV_NS: {
        jv v;
        if (jd_get(obj.u.d, key, &v)) return v;
        if (key.t == JV_STR && obj.t == JV_DICT && jx_has_method(obj, key.u.s->s))
            return mkfunc(rt, FN_METHOD, key.u.s->s, obj);
        return jv_undef(key.t == JV_STR ? key.u.s->s : "item");
    }
    case JV_LIST:
        if (obj.u.l->view) return jv_undef("item"); /* dict views are not subscriptable */
        if (key.t == JV_INT || key.t == JV_BOOL) {
            int64_t i = norm_index(key.t == JV_BOOL ? key.u.b : key.u.i, (int64_t)obj.u.l->n);
            if (i < 0 || i >= (int64_t)obj.u.l->n) return jv_undef("item");
            return obj.u.l->v[i];
        }
        if (key.t == JV_STR) return jx_getattr(rt, line, obj, key.u.s->s, key.u.s->len);
        return jv_undef("item");
    case JV_STR:
        if (key.t == JV_INT || key.t == JV_BOOL) {
            int64_t n = (int64_t)jx_utf8_len(obj.u.s->s, obj.u.s->len);
            int64_t i = norm_index(key.t == JV_BOOL ? key.u.b : key.u.i, n);
            if (i < 0 || i >= n) return jv_undef("item");
            size_t p = 0;
            for (int64_t k = 0; k < i; k++)
                jx_utf8_next(obj.u.s->s, obj.u.s->len, &p);
            size_t st = p;
            jx_utf8_next(obj.u.s->s, obj.u.s->len, &p);
            return jv_str(rt->c, obj.u.s->s + st, p - st);
        }
        if (key.t == JV_STR) return jx_getattr(rt, line, obj, key.u.s->s, key.u.s->len);
        return jv_undef("item");
    case JV_LOOP:
        if (key.t == JV_STR) return loop_attr(rt, obj, key.u.s->s);
        return jv_undef("item");
    default:
        return jv_undef("item");
    }
}

jlist *jx_iterate(jrt *rt, int line, jv v) {
    switch (v.t) {
    case JV_LIST:
        return v.u.l;
    case JV_UNDEF:
        return jv_list(rt->c, 0).u.l;
    case JV_DICT: {
        jv l = jv_list(rt->c, v.u.d->n);
        for (size_t i = 0; i < v.u.d->n; i++)
            jl_push(rt->c, l.u.l, v.u.d->k[i]);
        return l.u.l;
    }
    case JV_STR: {
        jv l = jv_list(rt->c, 0);
        size_t i = 0;
        while (i < v.u.s->len) {
            size_t st = i;
            jx_utf8_next(v.u.s->s, v.u.s->len, &i);
            jl_push(rt->c, l.u.l, jv_str(rt->c, v.u.s->s + st, i - st));
        }
        return l.u.l;
    }
    default:
        jx_fail(rt->c, CMF_E_PARSE, line, "'%s' object is not iterable", jv_type_name(v));
    }
}

/* ---- arithmetic ---- */
_Noreturn static void bad_operands(jrt *rt, int line, const char *op, jv a, jv b) {
    if (a.t == JV_UNDEF) undefined_error(rt, line, a);
    if (b.t == JV_UNDEF) undefined_error(rt, line, b);
    jx_fail(rt->c, CMF_E_PARSE, line, "unsupported operand type(s) for %s: '%s' and '%s'", op,
            jv_type_name(a), jv_type_name(b));
}
static bool is_intlike(jv v) {
    return v.t == JV_INT || v.t == JV_BOOL;
}
static int64_t ival(jv v) {
    return v.t == JV_BOOL ? v.u.b : v.u.i;
}

static jv repeat(jrt *rt, int line, jv seq, int64_t times) {
    if (times < 0) times = 0;
    if (seq.t == JV_STR) {
        if (seq.u.s->len && (uint64_t)times > rt->c->mem_limit / seq.u.s->len)
            jx_fail(rt->c, CMF_E_LIMIT, line, "string repetition too large");
        jbuf b = {0};
        for (int64_t i = 0; i < times; i++)
            jb_put(rt->c, &b, seq.u.s->s, seq.u.s->len);
        return jv_buf_str(rt->c, &b);
    }
    if (seq.u.l->n && (uint64_t)times > rt->c->mem_limit / (seq.u.l->n * sizeof(jv)))
        jx_fail(rt->c, CMF_E_LIMIT, line, "list repetition too large");
    jv r = jv_list(rt->c, 0);
    r.u.l->tuple = seq.u.l->tuple;
    for (int64_t i = 0; i < times; i++)
        for (size_t k = 0; k < seq.u.l->n; k++)
            jl_push(rt->c, r.u.l, seq.u.l->v[k]);
    return r;
}

jv jx_binop(jrt *rt, int line, int op, jv a, jv b) {
    bool nums = jv_is_num(a) && jv_is_num(b);
    bool ints = is_intlike(a) && is_intlike(b);
    int64_t r;
    switch (op) {
    case OP_ADD:
        if (ints) {
            if (__builtin_add_overflow(ival(a), ival(b), &r))
                jx_fail(rt->c, CMF_E_LIMIT, line, "integer overflow");
            return jv_int(r);
        }
        if (nums) return jv_float(jv_num(a) + jv_num(b));
        if (a.t == JV_STR && b.t == JV_STR) {
            jbuf buf = {0};
            jb_put(rt->c, &buf, a.u.s->s, a.u.s->len);
            jb_put(rt->c, &buf, b.u.s->s, b.u.s->len);
            return jv_buf_str(rt->c, &buf);
        }
        if (a.t == JV_LIST && b.t == JV_LIST && a.u.l->tuple == b.u.l->tuple && !a.u.l->view &&
            !b.u.l->view) {
            jv l = jv_list(rt->c, a.u.l->n + b.u.l->n);
            l.u.l->tuple = a.u.l->tuple;
            for (size_t i = 0; i < a.u.l->n; i++)
                jl_push(rt->c, l.u.l, a.u.l->v[i]);
            for (size_t i = 0; i < b.u.l->n; i++)
                jl_push(rt->c, l.u.l, b.u.l->v[i]);
            return l;
        }
        bad_operands(rt, line, "+", a, b);
    case OP_SUB:
        if (ints) {
            if (__builtin_sub_overflow(ival(a), ival(b), &r))
                jx_fail(rt->c, CMF_E_LIMIT, line, "integer overflow");
            return jv_int(r);
        }
        if (nums) return jv_float(jv_num(a) - jv_num(b));
        bad_operands(rt, line, "-", a, b);
    case OP_MUL:
        if (ints) {
            if (__builtin_mul_overflow(ival(a), ival(b), &r))
                jx_fail(rt->c, CMF_E_LIMIT, line, "integer overflow");
            return jv_int(r);
        }
        if (nums) return jv_float(jv_num(a) * jv_num(b));
        if ((a.t == JV_STR || (a.t == JV_LIST && !a.u.l->view)) && is_intlike(b))
            return repeat(rt, line, a, ival(b));
        if ((b.t == JV_STR || (b.t == JV_LIST && !b.u.l->view)) && is_intlike(a))
            return repeat(rt, line, b, ival(a));
        bad_operands(rt, line, "*", a, b);
    case OP_DIV:
        if (nums) {
            if (jv_num(b) == 0) jx_fail(rt->c, CMF_E_PARSE, line, "division by zero");
            return jv_float(jv_num(a) / jv_num(b));
        }
        bad_operands(rt, line, "/", a, b);
    case OP_FLOORDIV:
    case OP_MOD:
        if (nums) {
            if (jv_num(b) == 0)
                jx_fail(rt->c, CMF_E_PARSE, line,
                        op == OP_MOD ? "modulo by zero" : "integer division or modulo by zero");
            if (ints) {
                int64_t x = ival(a), y = ival(b);
                if (x == INT64_MIN && y == -1)
                    jx_fail(rt->c, CMF_E_LIMIT, line, "integer overflow");
                int64_t q = x / y, m = x % y;
                if (m != 0 && ((m < 0) != (y < 0))) {
                    q--;
                    m += y;
                }
                return jv_int(op == OP_MOD ? m : q);
            }
            double x = jv_num(a), y = jv_num(b);
            double m = fmod(x, y);
            if (m != 0 && ((m < 0) != (y < 0))) m += y;
            if (op == OP_MOD) return jv_float(m);
            return jv_float(floor(x / y));
        }
        if (op == OP_MOD && a.t == JV_STR) return jx_percent_format(rt, line, a, b);
        bad_operands(rt, line, op == OP_MOD ? "%" : "//", a, b);
    case OP_POW:
        if (ints && ival(b) >= 0) {
            int64_t base = ival(a), e = ival(b), acc = 1;
            while (e > 0) {
                if (__builtin_mul_overflow(acc, base, &acc))
                    jx_fail(rt->c, CMF_E_LIMIT, line, "integer overflow");
                e--;
            }
            return jv_int(acc);
        }
        if (nums) return jv_float(pow(jv_num(a), jv_num(b)));
        bad_operands(rt, line, "**", a, b);
    default:
        jx_fail(rt->c, CMF_E_PARSE, line, "bad operator");
    }
}

static bool contains(jrt *rt, int line, jv hay, jv needle) {
    switch (hay.t) {
    case JV_STR:
        if (needle.t != JV_STR)
            jx_fail(rt->c, CMF_E_PARSE, line,
                    "'in <string>' requires string as left operand, not %s", jv_type_name(needle));
        if (!needle.u.s->len) return true;
        if (needle.u.s->len > hay.u.s->len) return false;
        for (size_t i = 0; i + needle.u.s->len <= hay.u.s->len; i++)
            if (!memcmp(hay.u.s->s + i, needle.u.s->s, needle.u.s->len)) return true;
        return false;
    case JV_LIST:
        for (size_t i = 0; i < hay.u.l->n; i++)
            if (jv_eq(hay.u.l->v[i], needle)) return true;
        return false;
    case JV_DICT:
    case JV_NS: {
        jv v;
        return jd_get(hay.u.d, needle, &v);
    }
    case JV_UNDEF:
        return false;
    default:
        jx_fail(rt->c, CMF_E_PARSE, line, "argument of type '%s' is not iterable",
                jv_type_name(hay));
    }
}

static bool compare(jrt *rt, int line, int op, jv a, jv b) {
    switch (op) {
    case CMP_EQ:
        return jv_eq(a, b);
    case CMP_NE:
        return !jv_eq(a, b);
    case CMP_LT:
        return jv_cmp(rt->c, line, a, b, false) < 0;
    case CMP_LE:
        return jv_cmp(rt->c, line, a, b, false) <= 0;
    case CMP_GT:
        return jv_cmp(rt->c, line, a, b, false) > 0;
    case CMP_GE:
        return jv_cmp(rt->c, line, a, b, false) >= 0;
    case CMP_IN:
        return contains(rt, line, b, a);
    default:
        return !contains(rt, line, b, a);
    }
}

/* ---- calls ---- */
typedef struct argpack {
    jv *args;
    size_t nargs;
    const char **kwn;
    jv *kwv;
    size_t nkw;
} argpack;

static argpack eval_args(jrt *rt, jscope *sc, const jnode *call) {
    argpack p = {0};
    p.nargs = call->nargs;
    p.nkw = call->nkw;
    if (p.nargs) p.args = jx_alloc(rt->c, p.nargs * sizeof(jv));
    if (p.nkw) p.kwv = jx_alloc(rt->c, (p.nkw + 1) * sizeof(jv));
    for (size_t i = 0; i < p.nargs; i++)
        p.args[i] = jx_eval(rt, sc, call->args[i]);
    for (size_t i = 0; i < p.nkw; i++)
        p.kwv[i] = jx_eval(rt, sc, call->vals[i]);
    p.kwn = call->kwnames;
    return p;
}

static jv call_macro(jrt *rt, int line, jmacro *m, jv *args, size_t nargs, const char **kwn,
                     jv *kwv, size_t nkw) {
    const jnode *def = m->def;
    if (++rt->depth > rt->max_depth)
        jx_fail(rt->c, CMF_E_LIMIT, line, "macro calls nest deeper than %d", rt->max_depth);
    jx_step(rt, line);
    jscope *ms = scope_new(rt, m->closure);
    jv varargs = jv_list(rt->c, 0), kwargs = jv_dict(rt->c, 0), caller = m->caller;
    varargs.u.l->tuple = true;
    bool catch_varargs = def->op & 1, catch_kwargs = def->op & 2;
    const char *mname = def->kind == N_MACRO ? def->name : "caller";
    if (nargs > def->nkw && !catch_varargs)
        jx_fail(rt->c, CMF_E_PARSE, line, "macro '%s' takes not more than %zu argument(s)", mname,
                def->nkw);
    for (size_t i = 0; i < nargs; i++) {
        if (i < def->nkw)
            scope_set(rt, ms, def->kwnames[i], args[i]);
        else
            jl_push(rt->c, varargs.u.l, args[i]);
    }
    for (size_t k = 0; k < nkw; k++) {
        if (!strcmp(kwn[k], "caller")) {
            caller = kwv[k];
            continue;
        }
        bool found = false;
        for (size_t i = 0; i < def->nkw; i++)
            if (!strcmp(def->kwnames[i], kwn[k])) {
                if (i < nargs)
                    jx_fail(rt->c, CMF_E_PARSE, line, "macro got multiple values for argument '%s'",
                            kwn[k]);
                scope_set(rt, ms, def->kwnames[i], kwv[k]);
                found = true;
            }
        if (!found && !catch_kwargs)
            jx_fail(rt->c, CMF_E_PARSE, line, "macro '%s' takes no keyword argument '%s'", mname,
                    kwn[k]);
        if (!found) jd_set(rt->c, kwargs.u.d, jv_cstr(rt->c, kwn[k]), kwv[k]);
    }
    for (size_t i = 0; i < def->nkw; i++) {
        jv tmp;
        bool bound = false;
        for (size_t j = 0; j < ms->n; j++)
            if (!strcmp(ms->names[j], def->kwnames[i])) bound = true;
        if (bound) continue;
        tmp = def->vals && def->vals[i] ? jx_eval(rt, ms, def->vals[i]) : jv_undef(def->kwnames[i]);
        scope_set(rt, ms, def->kwnames[i], tmp);
    }
    scope_set(rt, ms, "varargs", varargs);
    scope_set(rt, ms, "kwargs", kwargs);
    if (caller.t != JV_UNDEF) scope_set(rt, ms, "caller", caller);
    jbuf out = {0}, *saved = rt->out;
    out.limit = saved->limit;
    rt->out = &out;
    int saved_ctl = rt->ctl;
    rt->ctl = 0;
    jx_exec_body(rt, ms, def->body, def->nbody);
    rt->ctl = saved_ctl;
    rt->out = saved;
    rt->depth--;
    return jv_buf_str(rt->c, &out);
}

jv jx_call_value(jrt *rt, jscope *sc, int line, jv fn, jv *args, size_t nargs, const char **kwn,
                 jv *kwv, size_t nkw) {
    (void)sc;
    switch (fn.t) {
    case JV_MACRO:
        return call_macro(rt, line, fn.u.m, args, nargs, kwn, kwv, nkw);
    case JV_FUNC:
        if (fn.u.fn->kind == FN_METHOD)
            return jx_method(rt, line, fn.u.fn->self, fn.u.fn->name, args, nargs, kwn, kwv, nkw);
        if (fn.u.fn->kind == FN_LOOP_CYCLE) {
            if (!nargs) jx_fail(rt->c, CMF_E_PARSE, line, "no items for cycling given");
            return args[fn.u.fn->self.u.lp->idx % nargs];
        }
        if (fn.u.fn->kind == FN_LOOP_CHANGED) {
            jloop *lp = fn.u.fn->self.u.lp;
            jv now = jv_list(rt->c, nargs);
            for (size_t i = 0; i < nargs; i++)
                jl_push(rt->c, now.u.l, args[i]);
            jv prev = {.t = JV_LIST};
            prev.u.l = lp->cycle_last;
            bool changed = !lp->has_changed || !jv_eq(prev, now);
            lp->cycle_last = now.u.l;
            lp->has_changed = true;
            return jv_bool(changed);
        }
        return jx_call_global(rt, line, fn.u.fn, args, nargs, kwn, kwv, nkw);
    case JV_UNDEF:
        undefined_error(rt, line, fn);
    default:
        jx_fail(rt->c, CMF_E_PARSE, line, "'%s' object is not callable", jv_type_name(fn));
    }
}

/* ---- expressions ---- */
static jv eval_filter(jrt *rt, jscope *sc, const jnode *e) {
    jv in = e->a->kind == N_PLACEHOLDER ? rt->placeholder : jx_eval(rt, sc, e->a);
    argpack p = eval_args(rt, sc, e);
    return jx_filter(rt, sc, e->line, e->name, in, p.args, p.nargs, p.kwn, p.kwv, p.nkw);
}

jv jx_eval(jrt *rt, jscope *sc, const jnode *e) {
    rt->c->cur_line = e->line;
    jx_stack_guard(rt, e->line);
    switch (e->kind) {
    case N_CONST:
        return e->val;
    case N_NAME:
        return lookup(rt, sc, e->name);
    case N_GETATTR:
        return jx_getattr(rt, e->line, jx_eval(rt, sc, e->a), e->name, e->name_len);
    case N_GETITEM: {
        jv obj = jx_eval(rt, sc, e->a);
        if (e->b->kind == N_SLICE) {
            const jnode *s = e->b;
            jv a = s->a ? jx_eval(rt, sc, s->a) : jv_none();
            jv b = s->b ? jx_eval(rt, sc, s->b) : jv_none();
            jv c = s->c ? jx_eval(rt, sc, s->c) : jv_none();
            if (obj.t == JV_UNDEF) undefined_error(rt, e->line, obj);
            if ((obj.t != JV_STR && obj.t != JV_LIST) || (obj.t == JV_LIST && obj.u.l->view))
                jx_fail(rt->c, CMF_E_PARSE, e->line, "'%s' object is not subscriptable",
                        jv_type_name(obj));
            return slice_value(rt, e->line, obj, a, b, c);
        }
        return jx_getitem(rt, e->line, obj, jx_eval(rt, sc, e->b));
    }
    case N_CALL: {
        jv fn = jx_eval(rt, sc, e->a);
        argpack p = eval_args(rt, sc, e);
        return jx_call_value(rt, sc, e->line, fn, p.args, p.nargs, p.kwn, p.kwv, p.nkw);
    }
    case N_FILTER:
        return eval_filter(rt, sc, e);
    case N_TEST: {
        jv v = jx_eval(rt, sc, e->a);
        jv *args = NULL;
        if (e->nargs) {
            args = jx_alloc(rt->c, e->nargs * sizeof(jv));
            for (size_t i = 0; i < e->nargs; i++)
                args[i] = jx_eval(rt, sc, e->args[i]);
        }
        bool r = jx_test(rt, sc, e->line, e->name, v, args, e->nargs);
        return jv_bool(e->neg ? !r : r);
    }
    case N_BINOP: {
        jv a = jx_eval(rt, sc, e->a);
        jv b = jx_eval(rt, sc, e->b);
        return jx_binop(rt, e->line, e->op, a, b);
    }
    case N_NEG:
    case N_POS: {
        jv a = jx_eval(rt, sc, e->a);
        if (e->kind == N_POS && jv_is_num(a)) return a.t == JV_BOOL ? jv_int(a.u.b) : a;
        if (a.t == JV_INT) {
            if (a.u.i == INT64_MIN) jx_fail(rt->c, CMF_E_LIMIT, e->line, "integer overflow");
            return jv_int(-a.u.i);
        }
        if (a.t == JV_BOOL) return jv_int(-(int64_t)a.u.b);
        if (a.t == JV_FLOAT) return jv_float(-a.u.f);
        if (a.t == JV_UNDEF) undefined_error(rt, e->line, a);
        jx_fail(rt->c, CMF_E_PARSE, e->line, "bad operand type for unary %c: '%s'",
                e->kind == N_NEG ? '-' : '+', jv_type_name(a));
    }
    case N_NOT:
        return jv_bool(!jv_truthy(jx_eval(rt, sc, e->a)));
    case N_AND: {
        jv a = jx_eval(rt, sc, e->a);
        return jv_truthy(a) ? jx_eval(rt, sc, e->b) : a;
    }
    case N_OR: {
        jv a = jx_eval(rt, sc, e->a);
        return jv_truthy(a) ? a : jx_eval(rt, sc, e->b);
    }
    case N_COMPARE: {
        jv left = jx_eval(rt, sc, e->a);
        for (size_t i = 0; i < e->nargs; i++) {
            jv right = jx_eval(rt, sc, e->args[i]);
            if (!compare(rt, e->line, e->cmpops[i], left, right)) return jv_bool(false);
            left = right;
        }
        return jv_bool(true);
    }
    case N_CONCAT: {
        jbuf b = {0};
        for (size_t i = 0; i < e->nargs; i++)
            jv_write_str(rt->c, &b, jx_eval(rt, sc, e->args[i]));
        return jv_buf_str(rt->c, &b);
    }
    case N_COND:
        if (jv_truthy(jx_eval(rt, sc, e->a))) return jx_eval(rt, sc, e->b);
        return e->c ? jx_eval(rt, sc, e->c) : jv_undef("conditional");
    case N_LIST:
    case N_TUPLE: {
        jv l = jv_list(rt->c, e->nargs);
        l.u.l->tuple = e->kind == N_TUPLE;
        for (size_t i = 0; i < e->nargs; i++)
            jl_push(rt->c, l.u.l, jx_eval(rt, sc, e->args[i]));
        return l;
    }
    case N_DICT: {
        jv d = jv_dict(rt->c, e->nargs);
        for (size_t i = 0; i < e->nargs; i++) {
            jv k = jx_eval(rt, sc, e->args[i]);
            if (k.t == JV_LIST && !k.u.l->tuple)
                jx_fail(rt->c, CMF_E_PARSE, e->line, "unhashable type: 'list'");
            if (k.t == JV_DICT) jx_fail(rt->c, CMF_E_PARSE, e->line, "unhashable type: 'dict'");
            jd_set(rt->c, d.u.d, k, jx_eval(rt, sc, e->vals[i]));
        }
        return d;
    }
    case N_PLACEHOLDER:
        return rt->placeholder;
    default:
        jx_fail(rt->c, CMF_E_PARSE, e->line, "not an expression");
    }
}

/* ---- statements ---- */
static void assign(jrt *rt, jscope *sc, const jnode *target, jv v) {
    if (target->kind == N_NAME) {
        scope_set(rt, sc, target->name, v);
        return;
    }
    if (target->kind == N_GETATTR) {
        jv ns = lookup(rt, sc, target->a->name);
        if (ns.t != JV_NS)
            jx_fail(rt->c, CMF_E_PARSE, target->line,
                    "cannot assign attribute on non-namespace object");
        jd_set(rt->c, ns.u.d, jv_str(rt->c, target->name, target->name_len), v);
        return;
    }
    jlist *items = jx_iterate(rt, target->line, v);
    if (items->n != target->nargs)
        jx_fail(rt->c, CMF_E_PARSE, target->line, "cannot unpack %zu values into %zu names",
                items->n, target->nargs);
    for (size_t i = 0; i < target->nargs; i++)
        assign(rt, sc, target->args[i], items->v[i]);
}

static void exec_for(jrt *rt, jscope *sc, const jnode *s) {
    jlist *items = jx_iterate(rt, s->line, jx_eval(rt, sc, s->b));
    jscope *ls = scope_new(rt, sc);
    if (s->c) {
        jv kept = jv_list(rt->c, 0);
        for (size_t i = 0; i < items->n; i++) {
            jx_step(rt, s->line);
            assign(rt, ls, s->a, items->v[i]);
            if (jv_truthy(jx_eval(rt, ls, s->c))) jl_push(rt->c, kept.u.l, items->v[i]);
        }
        items = kept.u.l;
    }
    if (!items->n) {
        jx_exec_body(rt, sc, s->ebody, s->nebody);
        return;
    }
    jloop *lp = jx_alloc(rt->c, sizeof *lp);
    lp->items = items;
    jv lv = {.t = JV_LOOP};
    lv.u.lp = lp;
    for (size_t i = 0; i < items->n; i++) {
        jx_step(rt, s->line);
        lp->idx = i;
        /* jinja2: names set in a loop body do not survive into the next iteration
         * (the scope's storage is reused, so long loops stay within bounded memory) */
        ls->n = 0;
        scope_set(rt, ls, "loop", lv);
        assign(rt, ls, s->a, items->v[i]);
        jx_exec_body(rt, ls, s->body, s->nbody);
        if (rt->ctl == 1) {
            rt->ctl = 0;
            break;
        }
        rt->ctl = 0;
    }
}

static jv render_to_string(jrt *rt, jscope *sc, jnode **body, size_t n) {
    jbuf out = {0}, *saved = rt->out;
    out.limit = saved->limit;
    rt->out = &out;
    jx_exec_body(rt, sc, body, n);
    rt->out = saved;
    return jv_buf_str(rt->c, &out);
}

static jv apply_chain(jrt *rt, jscope *sc, const jnode *chain, jv input) {
    jv saved = rt->placeholder;
    rt->placeholder = input;
    jv r = jx_eval(rt, sc, chain);
    rt->placeholder = saved;
    return r;
}

static void exec_stmt(jrt *rt, jscope *sc, const jnode *s) {
    rt->c->cur_line = s->line;
    switch (s->kind) {
    case N_TEXT:
        jb_put(rt->c, rt->out, s->name, s->name_len);
        return;
    case N_OUTPUT:
        jv_write_str(rt->c, rt->out, jx_eval(rt, sc, s->a));
        return;
    case N_IF:
        if (jv_truthy(jx_eval(rt, sc, s->a)))
            jx_exec_body(rt, sc, s->body, s->nbody);
        else
            jx_exec_body(rt, sc, s->ebody, s->nebody);
        return;
    case N_FOR:
        exec_for(rt, sc, s);
        return;
    case N_SET:
        assign(rt, sc, s->a, jx_eval(rt, sc, s->b));
        return;
    case N_SETBLOCK: {
        jv v = render_to_string(rt, scope_new(rt, sc), s->body, s->nbody);
        if (s->b) v = apply_chain(rt, sc, s->b, v);
        assign(rt, sc, s->a, v);
        return;
    }
    case N_MACRO: {
        jmacro *m = jx_alloc(rt->c, sizeof *m);
        m->def = s;
        m->closure = sc;
        m->caller = jv_undef("caller");
        jv mv = {.t = JV_MACRO};
        mv.u.m = m;
        scope_set(rt, sc, s->name, mv);
        return;
    }
    case N_CALLBLOCK: {
        jmacro *cm = jx_alloc(rt->c, sizeof *cm);
        cm->def = s;
        cm->closure = sc;
        cm->caller = jv_undef("caller");
        jv cv = {.t = JV_MACRO};
        cv.u.m = cm;
        const jnode *call = s->a;
        jv fn = jx_eval(rt, sc, call->a);
        argpack p = eval_args(rt, sc, call);
        const char **kwn = jx_alloc(rt->c, (p.nkw + 1) * sizeof *kwn);
        jv *kwv = jx_alloc(rt->c, (p.nkw + 1) * sizeof *kwv);
        for (size_t i = 0; i < p.nkw; i++) {
            kwn[i] = p.kwn[i];
            kwv[i] = p.kwv[i];
        }
        kwn[p.nkw] = "caller";
        kwv[p.nkw] = cv;
        jv r = jx_call_value(rt, sc, s->line, fn, p.args, p.nargs, kwn, kwv, p.nkw + 1);
        jv_write_str(rt->c, rt->out, r);
        return;
    }
    case N_FILTERBLOCK: {
        jv v = render_to_string(rt, sc, s->body, s->nbody);
        jv_write_str(rt->c, rt->out, apply_chain(rt, sc, s->a, v));
        return;
    }
    case N_BREAK:
        rt->ctl = 1;
        return;
    case N_CONTINUE:
        rt->ctl = 2;
        return;
    case N_WITH: {
        jscope *ws = scope_new(rt, sc);
        for (size_t i = 0; i < s->nargs; i++)
            assign(rt, ws, s->args[i], jx_eval(rt, sc, s->vals[i]));
        jx_exec_body(rt, ws, s->body, s->nbody);
        return;
    }
    case N_SCOPE:
        jx_exec_body(rt, scope_new(rt, sc), s->body, s->nbody);
        return;
    default:
        jx_fail(rt->c, CMF_E_PARSE, s->line, "not a statement");
    }
}

void jx_exec_body(jrt *rt, jscope *sc, jnode **body, size_t n) {
    for (size_t i = 0; i < n && !rt->ctl; i++)
        exec_stmt(rt, sc, body[i]);
}
