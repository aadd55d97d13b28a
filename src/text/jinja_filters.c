/* jinja_filters.c - jinja2's built-in filters and tests that chat templates use, plus
 * transformers' tojson (json.dumps with ensure_ascii=False, indent, separators, sort_keys). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text/jinja_internal.h"

jv jx_arg(jv *args, size_t nargs, const char **kwn, jv *kwv, size_t nkw, size_t pos,
          const char *name, jv dflt) {
    if (pos < nargs) return args[pos];
    for (size_t i = 0; i < nkw; i++)
        if (name && !strcmp(kwn[i], name)) return kwv[i];
    return dflt;
}
#define ARG(pos, name, dflt) jx_arg(args, nargs, kwn, kwv, nkw, (pos), (name), (dflt))

static jv S(jrt *rt, const char *s) {
    return jv_cstr(rt->c, s);
}

static int64_t want_int(jrt *rt, int line, jv v, const char *what) {
    if (v.t == JV_INT) return v.u.i;
    if (v.t == JV_BOOL) return v.u.b;
    if (v.t == JV_FLOAT) return (int64_t)v.u.f;
    jx_fail(rt->c, CMF_E_PARSE, line, "%s must be an integer, not %s", what, jv_type_name(v));
}

/* getter for attribute= arguments: "a.b.0" walks dict keys / indexes like jinja2 */
static jv attr_get(jrt *rt, int line, jv item, jv attr) {
    if (attr.t == JV_INT) return jx_getitem(rt, line, item, attr);
    jv s = jv_to_str(rt->c, attr);
    const char *p = s.u.s->s;
    for (;;) {
        const char *dot = strchr(p, '.');
        size_t n = dot ? (size_t)(dot - p) : strlen(p);
        bool digits = n > 0;
        for (size_t i = 0; i < n; i++)
            if (p[i] < '0' || p[i] > '9') digits = false;
        jv key = digits ? jv_int(strtoll(p, NULL, 10)) : jv_str(rt->c, p, n);
        item = jx_getitem(rt, line, item, key);
        if (!dot) return item;
        p = dot + 1;
    }
}

static size_t jv_len(jrt *rt, int line, jv v) {
    switch (v.t) {
    case JV_STR:
        return jx_utf8_len(v.u.s->s, v.u.s->len);
    case JV_LIST:
        return v.u.l->n;
    case JV_DICT:
    case JV_NS:
        return v.u.d->n;
    case JV_UNDEF:
        return 0;
    default:
        jx_fail(rt->c, CMF_E_PARSE, line, "object of type '%s' has no len()", jv_type_name(v));
    }
}

static jv str_map_case(jrt *rt, jv s, int mode /*0 lower 1 upper 2 capitalize 3 title*/) {
    jbuf b = {0};
    size_t i = 0;
    bool word_start = true, first = true;
    const jstr *x = s.u.s;
    while (i < x->len) {
        uint32_t cp = jx_utf8_next(x->s, x->len, &i);
        uint32_t o = cp;
        if (mode == 0)
            o = jx_lower_cp(cp);
        else if (mode == 1 && cp == 0xDF) {
            jb_puts(rt->c, &b, "SS");
            continue;
        } else if (mode == 1)
            o = jx_upper_cp(cp);
        else if (mode == 2)
            o = first ? jx_upper_cp(cp) : jx_lower_cp(cp);
        else {
            /* jinja2's title filter: words start after spaces, '-', '(', '{', '[', '<' */
            bool sep =
                jx_is_space(cp) || cp == '-' || cp == '(' || cp == '{' || cp == '[' || cp == '<';
            o = sep ? cp : word_start ? jx_upper_cp(cp) : jx_lower_cp(cp);
            word_start = sep;
        }
        first = false;
        jb_put_cp(rt->c, &b, o);
    }
    return jv_buf_str(rt->c, &b);
}

static bool in_set(uint32_t cp, const jstr *chars) {
    size_t i = 0;
    while (i < chars->len)
        if (jx_utf8_next(chars->s, chars->len, &i) == cp) return true;
    return false;
}
/* Python str.strip family: which 1 left, 2 right, 3 both; chars NULL = whitespace */
jv jx_strip(jrt *rt, jv s, const jstr *chars, int which) {
    const jstr *x = s.u.s;
    size_t a = 0, b = x->len;
    if (which & 1)
        while (a < b) {
            size_t i = a;
            uint32_t cp = jx_utf8_next(x->s, x->len, &i);
            if (chars ? !in_set(cp, chars) : !jx_is_space(cp)) break;
            a = i;
        }
    if (which & 2)
        while (b > a) {
            size_t st = b - 1;
            while (st > a && ((unsigned char)x->s[st] & 0xC0) == 0x80)
                st--;
            size_t i = st;
            uint32_t cp = jx_utf8_next(x->s, x->len, &i);
            if (chars ? !in_set(cp, chars) : !jx_is_space(cp)) break;
            b = st;
        }
    if (a == 0 && b == x->len) return s;
    return jv_str(rt->c, x->s + a, b - a);
}

jv jx_replace(jrt *rt, jv s, jv old, jv new_, int64_t count) {
    const jstr *x = s.u.s, *o = old.u.s, *n = new_.u.s;
    jbuf b = {0};
    int64_t done = 0;
    if (o->len == 0) {
        /* Python inserts new before every code point and at the end */
        size_t i = 0;
        while (i < x->len && (count < 0 || done < count)) {
            jb_put(rt->c, &b, n->s, n->len);
            size_t st = i;
            jx_utf8_next(x->s, x->len, &i);
            jb_put(rt->c, &b, x->s + st, i - st);
            done++;
        }
        if (i < x->len)
            jb_put(rt->c, &b, x->s + i, x->len - i);
        else if (count < 0 || done < count)
            jb_put(rt->c, &b, n->s, n->len);
        return jv_buf_str(rt->c, &b);
    }
    size_t i = 0;
    while (i < x->len) {
        if ((count < 0 || done < count) && i + o->len <= x->len &&
            !memcmp(x->s + i, o->s, o->len)) {
            jb_put(rt->c, &b, n->s, n->len);
            i += o->len;
            done++;
        } else
            jb_putc(rt->c, &b, x->s[i++]);
    }
    return jv_buf_str(rt->c, &b);
}

/* stable merge sort of values by key with jv_cmp */
static void sort_vals(jrt *rt, int line, jv *v, jv *keys, size_t n, bool ci, bool reverse) {
    if (n < 2) return;
    jv *tv = jx_alloc(rt->c, n * sizeof(jv)), *tk = jx_alloc(rt->c, n * sizeof(jv));
    for (size_t width = 1; width < n; width *= 2) {
        for (size_t lo = 0; lo < n; lo += 2 * width) {
            size_t mid = lo + width < n ? lo + width : n,
                   hi = lo + 2 * width < n ? lo + 2 * width : n;
            size_t i = lo, j = mid, k = lo;
            while (i < mid && j < hi) {
                int c = jv_cmp(rt->c, line, keys[j], keys[i], ci);
                bool take_right = reverse ? c > 0 : c < 0;
                if (take_right) {
                    tv[k] = v[j];
                    tk[k++] = keys[j++];
                } else {
                    tv[k] = v[i];
                    tk[k++] = keys[i++];
                }
            }
            while (i < mid) {
                tv[k] = v[i];
                tk[k++] = keys[i++];
            }
            while (j < hi) {
                tv[k] = v[j];
                tk[k++] = keys[j++];
            }
        }
        memcpy(v, tv, n * sizeof(jv));
        memcpy(keys, tk, n * sizeof(jv));
    }
}

static jv list_copy(jrt *rt, jlist *l) {
    jv r = jv_list(rt->c, l->n);
    for (size_t i = 0; i < l->n; i++)
        jl_push(rt->c, r.u.l, l->v[i]);
    return r;
}

static jv lower_if_str(jrt *rt, jv v, bool cs) {
    if (!cs && v.t == JV_STR) return str_map_case(rt, v, 0);
    return v;
}

static jv do_tojson(jrt *rt, int line, jv v, jv *args, size_t nargs, const char **kwn, jv *kwv,
                    size_t nkw) {
    jx_json_opts o = {0};
    o.ensure_ascii = jv_truthy(ARG(0, "ensure_ascii", jv_bool(false)));
    jv indent = ARG(1, "indent", jv_none());
    jv seps = ARG(2, "separators", jv_none());
    o.sort_keys = jv_truthy(ARG(3, "sort_keys", jv_bool(false)));
    if (indent.t == JV_INT || indent.t == JV_BOOL) {
        int64_t n = want_int(rt, line, indent, "indent");
        if (n < 0) n = 0;
        if (n > 64) jx_fail(rt->c, CMF_E_LIMIT, line, "tojson indent above 64");
        char *sp = jx_alloc(rt->c, (size_t)n + 1);
        memset(sp, ' ', (size_t)n);
        o.indent = sp;
    } else if (indent.t == JV_STR)
        o.indent = indent.u.s->s;
    else if (indent.t != JV_NONE && indent.t != JV_UNDEF)
        jx_fail(rt->c, CMF_E_PARSE, line, "tojson: indent must be an int or a string");
    o.item_sep = o.indent ? "," : ", ";
    o.key_sep = ": ";
    if (seps.t == JV_LIST) {
        if (seps.u.l->n != 2 || seps.u.l->v[0].t != JV_STR || seps.u.l->v[1].t != JV_STR)
            jx_fail(rt->c, CMF_E_PARSE, line, "tojson: separators must be two strings");
        o.item_sep = seps.u.l->v[0].u.s->s;
        o.key_sep = seps.u.l->v[1].u.s->s;
    }
    jbuf b = {0};
    jv_write_json(rt->c, line, &b, v, &o, 0);
    return jv_buf_str(rt->c, &b);
}

static jv do_indent(jrt *rt, jv s, jv width, bool first, bool blank) {
    jbuf ind = {0};
    if (width.t == JV_STR)
        jb_put(rt->c, &ind, width.u.s->s, width.u.s->len);
    else
        for (int64_t i = 0; i < (width.t == JV_INT ? width.u.i : 4) && i < 1024; i++)
            jb_putc(rt->c, &ind, ' ');
    /* split into lines like str.splitlines() after appending "\n" */
    jv text = jv_to_str(rt->c, s);
    jbuf src = {0};
    jb_put(rt->c, &src, text.u.s->s, text.u.s->len);
    jb_putc(rt->c, &src, '\n');
    jv lines = jv_list(rt->c, 0);
    size_t st = 0, i = 0;
    while (i < src.n) {
        size_t here = i;
        uint32_t cp = jx_utf8_next(src.p, src.n, &i);
        bool brk = cp == '\n' || cp == '\r' || cp == 0x0B || cp == 0x0C ||
                   (cp >= 0x1C && cp <= 0x1E) || cp == 0x85 || cp == 0x2028 || cp == 0x2029;
        if (!brk) continue;
        jl_push(rt->c, lines.u.l, jv_str(rt->c, src.p + st, here - st));
        if (cp == '\r' && i < src.n && src.p[i] == '\n') i++;
        st = i;
    }
    if (st < src.n) jl_push(rt->c, lines.u.l, jv_str(rt->c, src.p + st, src.n - st));
    jbuf out = {0};
    jlist *L = lines.u.l;
    if (first) jb_put(rt->c, &out, ind.p, ind.n);
    for (size_t k = 0; k < L->n; k++) {
        if (k) {
            jb_putc(rt->c, &out, '\n');
            if (blank || L->v[k].u.s->len) jb_put(rt->c, &out, ind.p, ind.n);
        }
        jb_put(rt->c, &out, L->v[k].u.s->s, L->v[k].u.s->len);
    }
    return jv_buf_str(rt->c, &out);
}

static jv do_round(jrt *rt, int line, jv v, int64_t prec, const char *method) {
    if (v.t == JV_INT || v.t == JV_BOOL) {
        int64_t iv = v.t == JV_BOOL ? v.u.b : v.u.i;
        if (strcmp(method, "common")) return jv_float((double)iv);
        if (prec >= 0) return jv_int(iv);
        if (prec < -18) return jv_int(0);
        int64_t p = 1;
        for (int64_t k = 0; k < -prec; k++)
            p *= 10;
        int64_t q = iv / p, r = iv % p;
        if (r < 0) {
            q--;
            r += p;
        }
        if (2 * r > p || (2 * r == p && (q & 1))) q++; /* half to even, like Python's round() */
        return jv_int(q * p);
    }
    if (v.t != JV_FLOAT)
        jx_fail(rt->c, CMF_E_PARSE, line, "round: expected a number, got %s", jv_type_name(v));
    double x = v.u.f;
    if (!strcmp(method, "common")) {
        if (prec > 30 || !isfinite(x)) return jv_float(x);
        if (prec < 0) {
            double p = pow(10.0, (double)-prec);
            return jv_float(nearbyint(x / p) * p);
        }
        char buf[400];
        snprintf(buf, sizeof buf, "%.*f", (int)prec, x);
        return jv_float(strtod(buf, NULL));
    }
    double p = pow(10.0, (double)prec);
    if (!strcmp(method, "ceil")) return jv_float(ceil(x * p) / p);
    if (!strcmp(method, "floor")) return jv_float(floor(x * p) / p);
    jx_fail(rt->c, CMF_E_PARSE, line, "method must be common, ceil or floor");
}

static jv html_escape(jrt *rt, jv v) {
    jv s = jv_to_str(rt->c, v);
    jbuf b = {0};
    for (size_t i = 0; i < s.u.s->len; i++) {
        char ch = s.u.s->s[i];
        switch (ch) {
        case '&':
            jb_puts(rt->c, &b, "&amp;");
            break;
        case '<':
            jb_puts(rt->c, &b, "&lt;");
            break;
        case '>':
            jb_puts(rt->c, &b, "&gt;");
            break;
        case '"':
            jb_puts(rt->c, &b, "&#34;");
            break;
        case '\'':
            jb_puts(rt->c, &b, "&#39;");
            break;
        default:
            jb_putc(rt->c, &b, ch);
        }
    }
    return jv_buf_str(rt->c, &b);
}

/* Python int(str, base): optional sign, 0x/0o/0b prefix (required for base 0), '_' between digits
 */
static bool parse_py_int(const char *p, size_t n, int64_t base, int64_t *out) {
    size_t i = 0;
    bool neg = false;
    if (i < n && (p[i] == '+' || p[i] == '-')) neg = p[i++] == '-';
    if (i + 1 < n && p[i] == '0' && strchr("xXoObB", p[i + 1])) {
        int pb = (p[i + 1] | 32) == 'x' ? 16 : (p[i + 1] | 32) == 'o' ? 8 : 2;
        if (base != 0 && base != pb) return false;
        base = pb;
        i += 2;
        if (i < n && p[i] == '_') i++;
    } else if (base == 0) {
        base = 10;
        for (size_t k = i; k + 1 < n && p[k] == '0'; k++)
            if (p[k + 1] != '0' && p[k + 1] != '_') return false; /* 012 is invalid with base 0 */
    }
    if (base < 2 || base > 36 || i >= n) return false;
    int64_t v = 0;
    bool last_us = true;
    for (; i < n; i++) {
        char ch = p[i];
        if (ch == '_') {
            if (last_us) return false;
            last_us = true;
            continue;
        }
        int d = (ch >= '0' && ch <= '9')                 ? ch - '0'
                : ((ch | 32) >= 'a' && (ch | 32) <= 'z') ? (ch | 32) - 'a' + 10
                                                         : 99;
        if (d >= base) return false;
        if (v > (INT64_MAX - d) / base) return false;
        v = v * base + d;
        last_us = false;
    }
    if (last_us) return false;
    *out = neg ? -v : v;
    return true;
}

static jv to_int(jrt *rt, jv v, jv dflt, int64_t base) {
    if (v.t == JV_INT) return v;
    if (v.t == JV_BOOL) return jv_int(v.u.b);
    if (v.t == JV_FLOAT)
        return isfinite(v.u.f) && fabs(v.u.f) < 9.2e18 ? jv_int((int64_t)v.u.f) : dflt;
    if (v.t == JV_STR) {
        jv t = jx_strip(rt, v, NULL, 3);
        int64_t r;
        if (parse_py_int(t.u.s->s, t.u.s->len, base, &r)) return jv_int(r);
        char *end;
        double d = strtod(t.u.s->s, &end);
        if (t.u.s->len && *end == 0 && isfinite(d) && fabs(d) < 9.2e18) return jv_int((int64_t)d);
    }
    return dflt;
}
static jv to_float(jrt *rt, jv v, jv dflt) {
    if (v.t == JV_FLOAT) return v;
    if (v.t == JV_INT || v.t == JV_BOOL) return jv_float(jv_num(v));
    if (v.t == JV_STR) {
        jv t = jx_strip(rt, v, NULL, 3);
        if (!t.u.s->len) return dflt;
        char *end;
        double d = strtod(t.u.s->s, &end);
        if (*end == 0) return jv_float(d);
    }
    return dflt;
}

static jlist *as_list(jrt *rt, int line, jv v) {
    return jx_iterate(rt, line, v);
}

/* select, reject, selectattr, rejectattr and map yield nothing for a falsy value (none, an
 * empty or undefined one) before looking at their arguments, as jinja2's do the work under
 * `if value:` - transformers passes tools=None, and templates filter it. */
static jv select_impl(jrt *rt, jscope *sc, int line, jv seq, jv *args, size_t nargs, bool by_attr,
                      bool want) {
    if (!jv_truthy(seq)) return jv_list(rt->c, 0);
    jlist *L = as_list(rt, line, seq);
    jv out = jv_list(rt->c, 0);
    size_t off = by_attr ? 1 : 0;
    jv attr = by_attr && nargs ? args[0] : jv_none();
    if (by_attr && !nargs)
        jx_fail(rt->c, CMF_E_PARSE, line, "selectattr/rejectattr need an attribute name");
    for (size_t i = 0; i < L->n; i++) {
        jx_step(rt, line);
        jv item = by_attr ? attr_get(rt, line, L->v[i], attr) : L->v[i];
        bool ok;
        if (nargs > off) {
            jv tn = jv_to_str(rt->c, args[off]);
            ok = jx_test(rt, sc, line, tn.u.s->s, item, args + off + 1, nargs - off - 1);
        } else
            ok = jv_truthy(item);
        if (ok == want) jl_push(rt->c, out.u.l, L->v[i]);
    }
    return out;
}

jv jx_filter(jrt *rt, jscope *sc, int line, const char *name, jv v, jv *args, size_t nargs,
             const char **kwn, jv *kwv, size_t nkw) {
    jx_ctx *c = rt->c;
#define IS(n) (!strcmp(name, n))
    if (IS("tojson")) return do_tojson(rt, line, v, args, nargs, kwn, kwv, nkw);
    if (IS("safe")) return v;
    if (IS("string")) return jv_to_str(c, v);
    if (IS("trim")) {
        jv chars = ARG(0, "chars", jv_none());
        return jx_strip(rt, jv_to_str(c, v), chars.t == JV_STR ? chars.u.s : NULL, 3);
    }
    if (IS("length") || IS("count")) return jv_int((int64_t)jv_len(rt, line, v));
    if (IS("default") || IS("d")) {
        jv dflt = ARG(0, "default_value", S(rt, ""));
        bool boolean = jv_truthy(ARG(1, "boolean", jv_bool(false)));
        if (v.t == JV_UNDEF || (boolean && !jv_truthy(v))) return dflt;
        return v;
    }
    if (IS("upper")) return str_map_case(rt, jv_to_str(c, v), 1);
    if (IS("lower")) return str_map_case(rt, jv_to_str(c, v), 0);
    if (IS("capitalize")) return str_map_case(rt, jv_to_str(c, v), 2);
    if (IS("title")) return str_map_case(rt, jv_to_str(c, v), 3);
    if (IS("replace")) {
        jv old = ARG(0, "old", jv_undef("old")), nw = ARG(1, "new", jv_undef("new"));
        jv cnt = ARG(2, "count", jv_none());
        if (old.t != JV_STR || nw.t != JV_STR) {
            old = jv_to_str(c, old);
            nw = jv_to_str(c, nw);
        }
        return jx_replace(rt, jv_to_str(c, v), old, nw,
                          cnt.t == JV_NONE ? -1 : want_int(rt, line, cnt, "count"));
    }
    if (IS("join")) {
        jv d = ARG(0, "d", S(rt, ""));
        jv attr = ARG(1, "attribute", jv_none());
        jlist *L = as_list(rt, line, v);
        jbuf b = {0};
        jv ds = jv_to_str(c, d);
        for (size_t i = 0; i < L->n; i++) {
            if (i) jb_put(c, &b, ds.u.s->s, ds.u.s->len);
            jv item = attr.t != JV_NONE ? attr_get(rt, line, L->v[i], attr) : L->v[i];
            jv_write_str(c, &b, item);
        }
        return jv_buf_str(c, &b);
    }
    if (IS("first") || IS("last")) {
        jlist *L = as_list(rt, line, v);
        if (!L->n) return jv_undef(name);
        return IS("first") ? L->v[0] : L->v[L->n - 1];
    }
    if (IS("items")) {
        if (v.t == JV_UNDEF) return jv_list(c, 0);
        if (v.t != JV_DICT && v.t != JV_NS)
            jx_fail(c, CMF_E_PARSE, line, "Can only get item pairs from a mapping.");
        jv out = jv_list(c, v.u.d->n);
        for (size_t i = 0; i < v.u.d->n; i++)
            jl_push(c, out.u.l, jv_tuple2(c, v.u.d->k[i], v.u.d->v[i]));
        return out;
    }
    if (IS("list")) return list_copy(rt, as_list(rt, line, v));
    if (IS("map")) {
        if (!jv_truthy(v)) return jv_list(c, 0); /* as select_impl */
        jlist *L = as_list(rt, line, v);
        jv out = jv_list(c, L->n);
        jv attr = ARG(99, "attribute", jv_undef(NULL));
        if (attr.t != JV_UNDEF) {
            jv dflt = ARG(99, "default", jv_undef(NULL));
            for (size_t i = 0; i < L->n; i++) {
                jv x = attr_get(rt, line, L->v[i], attr);
                jl_push(c, out.u.l, (x.t == JV_UNDEF && dflt.t != JV_UNDEF) ? dflt : x);
            }
            return out;
        }
        if (!nargs) jx_fail(c, CMF_E_PARSE, line, "map requires a filter name or attribute=");
        jv fname = jv_to_str(c, args[0]);
        for (size_t i = 0; i < L->n; i++) {
            jx_step(rt, line);
            jl_push(
                c, out.u.l,
                jx_filter(rt, sc, line, fname.u.s->s, L->v[i], args + 1, nargs - 1, kwn, kwv, nkw));
        }
        return out;
    }
    if (IS("select")) return select_impl(rt, sc, line, v, args, nargs, false, true);
    if (IS("reject")) return select_impl(rt, sc, line, v, args, nargs, false, false);
    if (IS("selectattr")) return select_impl(rt, sc, line, v, args, nargs, true, true);
    if (IS("rejectattr")) return select_impl(rt, sc, line, v, args, nargs, true, false);
    if (IS("int")) {
        jv dflt = ARG(0, "default", jv_int(0));
        jv base = ARG(1, "base", jv_int(10));
        return to_int(rt, v, dflt, want_int(rt, line, base, "base"));
    }
    if (IS("float")) return to_float(rt, v, ARG(0, "default", jv_float(0.0)));
    if (IS("abs")) {
        if (v.t == JV_INT) return jv_int(v.u.i < 0 ? -v.u.i : v.u.i);
        if (v.t == JV_BOOL) return jv_int(v.u.b);
        if (v.t == JV_FLOAT) return jv_float(fabs(v.u.f));
        jx_fail(c, CMF_E_PARSE, line, "bad operand type for abs(): '%s'", jv_type_name(v));
    }
    if (IS("round")) {
        jv p = ARG(0, "precision", jv_int(0));
        jv m = ARG(1, "method", S(rt, "common"));
        return do_round(rt, line, v, want_int(rt, line, p, "precision"), jv_to_str(c, m).u.s->s);
    }
    if (IS("indent")) {
        /* jinja2 appends "\n" to the input first: anything but a string is an error */
        if (v.t == JV_UNDEF)
            jx_fail(c, CMF_E_PARSE, line, "'%s' is undefined", v.u.uname ? v.u.uname : "value");
        if (v.t != JV_STR)
            jx_fail(c, CMF_E_PARSE, line, "unsupported operand type(s) for +=: '%s' and 'str'",
                    jv_type_name(v));
        jv w = ARG(0, "width", jv_int(4));
        bool first = jv_truthy(ARG(1, "first", jv_bool(false)));
        bool blank = jv_truthy(ARG(2, "blank", jv_bool(false)));
        return do_indent(rt, v, w, first, blank);
    }
    if (IS("e") || IS("escape") || IS("forceescape")) return html_escape(rt, v);
    if (IS("unique")) {
        bool cs = jv_truthy(ARG(0, "case_sensitive", jv_bool(false)));
        jv attr = ARG(1, "attribute", jv_none());
        jlist *L = as_list(rt, line, v);
        jv out = jv_list(c, 0), seen = jv_list(c, 0);
        for (size_t i = 0; i < L->n; i++) {
            jv key = lower_if_str(
                rt, attr.t != JV_NONE ? attr_get(rt, line, L->v[i], attr) : L->v[i], cs);
            bool dup = false;
            for (size_t k = 0; k < seen.u.l->n && !dup; k++)
                dup = jv_eq(seen.u.l->v[k], key);
            if (dup) continue;
            jl_push(c, seen.u.l, key);
            jl_push(c, out.u.l, L->v[i]);
        }
        return out;
    }
    if (IS("sort")) {
        bool reverse = jv_truthy(ARG(0, "reverse", jv_bool(false)));
        bool cs = jv_truthy(ARG(1, "case_sensitive", jv_bool(false)));
        jv attr = ARG(2, "attribute", jv_none());
        jv out = list_copy(rt, as_list(rt, line, v));
        size_t n = out.u.l->n;
        jv *keys = jx_alloc(c, (n + 1) * sizeof(jv));
        for (size_t i = 0; i < n; i++)
            keys[i] = attr.t != JV_NONE ? attr_get(rt, line, out.u.l->v[i], attr) : out.u.l->v[i];
        sort_vals(rt, line, out.u.l->v, keys, n, !cs, reverse);
        return out;
    }
    if (IS("dictsort")) {
        bool cs = jv_truthy(ARG(0, "case_sensitive", jv_bool(false)));
        jv by = ARG(1, "by", S(rt, "key"));
        bool reverse = jv_truthy(ARG(2, "reverse", jv_bool(false)));
        if (v.t != JV_DICT && v.t != JV_NS)
            jx_fail(c, CMF_E_PARSE, line, "dictsort: expected a mapping");
        size_t n = v.u.d->n;
        jv out = jv_list(c, n);
        jv *keys = jx_alloc(c, (n + 1) * sizeof(jv));
        bool by_value = by.t == JV_STR && !strcmp(by.u.s->s, "value");
        for (size_t i = 0; i < n; i++) {
            jl_push(c, out.u.l, jv_tuple2(c, v.u.d->k[i], v.u.d->v[i]));
            keys[i] = by_value ? v.u.d->v[i] : v.u.d->k[i];
        }
        sort_vals(rt, line, out.u.l->v, keys, n, !cs, reverse);
        return out;
    }
    if (IS("reverse")) {
        if (v.t == JV_STR) {
            size_t n = v.u.s->len;
            char *buf = jx_alloc(c, n + 1);
            size_t i = 0;
            while (i < n) {
                size_t st = i;
                jx_utf8_next(v.u.s->s, n, &i);
                memcpy(buf + n - i, v.u.s->s + st, i - st);
            }
            return jv_str(c, buf, n);
        }
        jlist *L = as_list(rt, line, v);
        jv out = jv_list(c, L->n);
        for (size_t i = L->n; i-- > 0;)
            jl_push(c, out.u.l, L->v[i]);
        return out;
    }
    if (IS("sum")) {
        jv attr = ARG(0, "attribute", jv_none());
        jv acc = ARG(1, "start", jv_int(0));
        jlist *L = as_list(rt, line, v);
        for (size_t i = 0; i < L->n; i++)
            acc = jx_binop(rt, line, OP_ADD, acc,
                           attr.t != JV_NONE ? attr_get(rt, line, L->v[i], attr) : L->v[i]);
        return acc;
    }
    if (IS("min") || IS("max")) {
        bool cs = jv_truthy(ARG(0, "case_sensitive", jv_bool(false)));
        jv attr = ARG(1, "attribute", jv_none());
        jlist *L = as_list(rt, line, v);
        if (!L->n) return jv_undef(name);
        size_t best = 0;
        jv bk =
            lower_if_str(rt, attr.t != JV_NONE ? attr_get(rt, line, L->v[0], attr) : L->v[0], cs);
        for (size_t i = 1; i < L->n; i++) {
            jv k = lower_if_str(rt, attr.t != JV_NONE ? attr_get(rt, line, L->v[i], attr) : L->v[i],
                                cs);
            int r = jv_cmp(c, line, k, bk, false);
            if (IS("min") ? r < 0 : r > 0) {
                best = i;
                bk = k;
            }
        }
        return L->v[best];
    }
    if (IS("wordcount")) {
        jv s = jv_to_str(c, v);
        int64_t n = 0;
        bool in = false;
        size_t i = 0;
        while (i < s.u.s->len) {
            uint32_t cp = jx_utf8_next(s.u.s->s, s.u.s->len, &i);
            bool w = cp == '_' || (cp >= '0' && cp <= '9') || jx_is_alpha_cp(cp);
            if (w && !in) n++;
            in = w;
        }
        return jv_int(n);
    }
    if (IS("batch")) {
        int64_t cnt = want_int(rt, line, ARG(0, "linecount", jv_int(1)), "linecount");
        if (cnt <= 0) jx_fail(c, CMF_E_PARSE, line, "batch size must be positive");
        jv fill = ARG(1, "fill_with", jv_none());
        jlist *L = as_list(rt, line, v);
        jv out = jv_list(c, 0), cur = jv_list(c, 0);
        for (size_t i = 0; i < L->n; i++) {
            if ((int64_t)cur.u.l->n == cnt) {
                jl_push(c, out.u.l, cur);
                cur = jv_list(c, 0);
            }
            jl_push(c, cur.u.l, L->v[i]);
        }
        if (cur.u.l->n) {
            if (fill.t != JV_NONE)
                while ((int64_t)cur.u.l->n < cnt)
                    jl_push(c, cur.u.l, fill);
            jl_push(c, out.u.l, cur);
        }
        return out;
    }
    if (IS("slice")) {
        int64_t slices = want_int(rt, line, ARG(0, "slices", jv_int(1)), "slices");
        if (slices <= 0 || slices > 100000)
            jx_fail(c, CMF_E_PARSE, line, "slice count out of range");
        jv fill = ARG(1, "fill_with", jv_none());
        jlist *L = as_list(rt, line, v);
        int64_t len = (int64_t)L->n, per = len / slices, extra = len % slices, offset = 0;
        jv out = jv_list(c, (size_t)slices);
        for (int64_t k = 0; k < slices; k++) {
            int64_t st = offset + k * per;
            if (k < extra) offset++;
            int64_t en = offset + (k + 1) * per;
            jv part = jv_list(c, 0);
            for (int64_t j = st; j < en; j++)
                jl_push(c, part.u.l, L->v[j]);
            if (fill.t != JV_NONE && k >= extra) jl_push(c, part.u.l, fill);
            jl_push(c, out.u.l, part);
        }
        return out;
    }
    if (IS("center")) {
        jv s = jv_to_str(c, v);
        int64_t w = want_int(rt, line, ARG(0, "width", jv_int(80)), "width");
        int64_t len = (int64_t)jx_utf8_len(s.u.s->s, s.u.s->len);
        if (w <= len) return s;
        if (w > 1 << 20) jx_fail(c, CMF_E_LIMIT, line, "center width too large");
        int64_t marg = w - len, left = marg / 2 + (marg & w & 1);
        jbuf b = {0};
        for (int64_t i = 0; i < left; i++)
            jb_putc(c, &b, ' ');
        jb_put(c, &b, s.u.s->s, s.u.s->len);
        for (int64_t i = 0; i < marg - left; i++)
            jb_putc(c, &b, ' ');
        return jv_buf_str(c, &b);
    }
    if (IS("truncate")) {
        jv s = jv_to_str(c, v);
        int64_t length = want_int(rt, line, ARG(0, "length", jv_int(255)), "length");
        bool killwords = jv_truthy(ARG(1, "killwords", jv_bool(false)));
        jv end = jv_to_str(c, ARG(2, "end", S(rt, "...")));
        jv lw = ARG(3, "leeway", jv_none());
        int64_t leeway = lw.t == JV_NONE ? 5 : want_int(rt, line, lw, "leeway");
        int64_t n = (int64_t)jx_utf8_len(s.u.s->s, s.u.s->len);
        int64_t endn = (int64_t)jx_utf8_len(end.u.s->s, end.u.s->len);
        if (n <= length + leeway) return s;
        int64_t keep = length - endn;
        if (keep < 0) keep = 0;
        size_t p = 0;
        for (int64_t i = 0; i < keep && p < s.u.s->len; i++)
            jx_utf8_next(s.u.s->s, s.u.s->len, &p);
        size_t cut = p;
        if (!killwords) {
            size_t k = cut;
            while (k > 0 && s.u.s->s[k - 1] != ' ')
                k--;
            if (k > 0) cut = k - 1;
        }
        jbuf b = {0};
        jb_put(c, &b, s.u.s->s, cut);
        jb_put(c, &b, end.u.s->s, end.u.s->len);
        return jv_buf_str(c, &b);
    }
    if (IS("format")) {
        if (nargs && nkw)
            jx_fail(c, CMF_E_PARSE, line,
                    "can't handle positional and keyword arguments at the same time");
        jv a;
        if (nkw) {
            a = jv_dict(c, nkw);
            for (size_t i = 0; i < nkw; i++)
                jd_set(c, a.u.d, jv_cstr(c, kwn[i]), kwv[i]);
        } else {
            a = jv_list(c, nargs);
            a.u.l->tuple = true;
            for (size_t i = 0; i < nargs; i++)
                jl_push(c, a.u.l, args[i]);
        }
        return jx_percent_format(rt, line, jv_to_str(c, v), a);
    }
    if (IS("attr")) { /* attributes only: dict keys are not attributes */
        jv n = jv_to_str(c, ARG(0, "name", S(rt, "")));
        if (v.t == JV_NS || v.t == JV_LOOP || v.t == JV_UNDEF)
            return jx_getattr(rt, line, v, n.u.s->s, n.u.s->len);
        if (jx_has_method(v, n.u.s->s)) return jx_getattr(rt, line, v, n.u.s->s, n.u.s->len);
        return jv_undef(n.u.s->s);
    }
    if (IS("pprint")) {
        jbuf b = {0};
        jv_write_repr(c, &b, v);
        return jv_buf_str(c, &b);
    }
#undef IS
    jx_fail(c, CMF_E_PARSE, line, "no filter named '%s'", name);
}

/* ---- tests ---- */
static const char *const k_tests[] = {
    "defined", "undefined", "none",   "boolean", "false",       "true",     "integer",
    "float",   "number",    "string", "mapping", "iterable",    "sequence", "callable",
    "sameas",  "escaped",   "odd",    "even",    "divisibleby", "lower",    "upper",
    "eq",      "equalto",   "==",     "ne",      "!=",          "lt",       "lessthan",
    "<",       "le",        "<=",     "gt",      "greaterthan", ">",        "ge",
    ">=",      "in",        "filter", "test",
};
bool jx_has_test(const char *name) {
    for (size_t i = 0; i < sizeof k_tests / sizeof k_tests[0]; i++)
        if (!strcmp(k_tests[i], name)) return true;
    return false;
}

bool jx_test(jrt *rt, jscope *sc, int line, const char *name, jv v, jv *args, size_t nargs) {
    (void)sc;
    jx_ctx *c = rt->c;
#define IS(n) (!strcmp(name, n))
    jv a0 = nargs ? args[0] : jv_undef("argument");
    if (IS("defined")) return v.t != JV_UNDEF;
    if (IS("undefined")) return v.t == JV_UNDEF;
    if (IS("none")) return v.t == JV_NONE;
    if (IS("boolean")) return v.t == JV_BOOL;
    if (IS("false")) return v.t == JV_BOOL && !v.u.b;
    if (IS("true")) return v.t == JV_BOOL && v.u.b;
    if (IS("integer")) return v.t == JV_INT;
    if (IS("float")) return v.t == JV_FLOAT;
    if (IS("number")) return jv_is_num(v);
    if (IS("string")) return v.t == JV_STR;
    if (IS("mapping")) return v.t == JV_DICT;
    if (IS("iterable")) return v.t == JV_STR || v.t == JV_LIST || v.t == JV_DICT || v.t == JV_UNDEF;
    if (IS("sequence"))
        return v.t == JV_STR || (v.t == JV_LIST && !v.u.l->view) || v.t == JV_DICT ||
               v.t == JV_UNDEF;
    if (IS("callable")) return v.t == JV_MACRO || v.t == JV_FUNC || v.t == JV_UNDEF;
    if (IS("escaped")) return false;
    if (IS("sameas")) {
        if (v.t != a0.t) return false;
        if (v.t == JV_NONE || v.t == JV_UNDEF) return true;
        if (v.t == JV_BOOL) return v.u.b == a0.u.b;
        if (v.t == JV_INT) return v.u.i == a0.u.i && v.u.i >= -5 && v.u.i <= 256;
        if (v.t == JV_STR) return v.u.s == a0.u.s;
        return jv_eq(v, a0) && (v.t == JV_DICT || v.t == JV_NS ? v.u.d == a0.u.d
                                : v.t == JV_LIST               ? v.u.l == a0.u.l
                                                               : true);
    }
    if (IS("odd") || IS("even") || IS("divisibleby")) {
        if (v.t == JV_UNDEF)
            jx_fail(c, CMF_E_PARSE, line, "'%s' is undefined", v.u.uname ? v.u.uname : "value");
        if (!jv_is_num(v))
            jx_fail(c, CMF_E_PARSE, line, "test '%s' needs a number, got %s", name,
                    jv_type_name(v));
        if (IS("divisibleby")) {
            if (!jv_is_num(a0) || jv_num(a0) == 0)
                jx_fail(c, CMF_E_PARSE, line, "divisibleby needs a non-zero number");
            jv m = jx_binop(rt, line, OP_MOD, v, a0);
            return jv_num(m) == 0;
        }
        jv m = jx_binop(rt, line, OP_MOD, v, jv_int(2));
        return IS("odd") ? jv_num(m) == 1 : jv_num(m) == 0;
    }
    if (IS("lower") || IS("upper")) {
        if (v.t != JV_STR) return false;
        bool any = false;
        size_t i = 0;
        while (i < v.u.s->len) {
            uint32_t cp = jx_utf8_next(v.u.s->s, v.u.s->len, &i);
            if (IS("lower") ? jx_lower_cp(cp) != cp : jx_upper_cp(cp) != cp) return false;
            if (jx_lower_cp(cp) != jx_upper_cp(cp)) any = true;
        }
        return any;
    }
    if (IS("eq") || IS("equalto") || IS("==")) return jv_eq(v, a0);
    if (IS("ne") || IS("!=")) return !jv_eq(v, a0);
    if (IS("lt") || IS("lessthan") || IS("<")) return jv_cmp(c, line, v, a0, false) < 0;
    if (IS("le") || IS("<=")) return jv_cmp(c, line, v, a0, false) <= 0;
    if (IS("gt") || IS("greaterthan") || IS(">")) return jv_cmp(c, line, v, a0, false) > 0;
    if (IS("ge") || IS(">=")) return jv_cmp(c, line, v, a0, false) >= 0;
    if (IS("in")) {
        jv r = jv_bool(false);
        if (a0.t == JV_STR && v.t == JV_STR)
            return strstr(a0.u.s->s, v.u.s->s) != NULL || !v.u.s->len;
        jlist *L = jx_iterate(rt, line, a0);
        for (size_t i = 0; i < L->n; i++)
            if (jv_eq(L->v[i], v)) r = jv_bool(true);
        return r.u.b;
    }
    if (IS("filter") || IS("test"))
        return v.t == JV_STR && (IS("test") ? jx_has_test(v.u.s->s) : true);
#undef IS
    jx_fail(c, CMF_E_PARSE, line, "no test named '%s'", name);
}
