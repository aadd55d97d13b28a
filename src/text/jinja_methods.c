/* jinja_methods.c - the Python str/dict/list methods templates may call (immutable sandbox:
 * mutators are refused), printf-style `%` / `|format` and str.format, and the globals
 * range, namespace, dict, raise_exception and strftime_now. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "text/jinja_internal.h"

#define ARG(pos, name, dflt) jx_arg(args, nargs, kwn, kwv, nkw, (pos), (name), (dflt))

static const char *const k_str_methods[] = {
    "startswith",   "endswith", "strip",    "lstrip",  "rstrip",     "split",      "rsplit",
    "replace",      "upper",    "lower",    "title",   "capitalize", "format",     "join",
    "count",        "find",     "rfind",    "index",   "rindex",     "splitlines", "isdigit",
    "isalpha",      "isalnum",  "isspace",  "isupper", "islower",    "isnumeric",  "isdecimal",
    "zfill",        "ljust",    "rjust",    "center",  "partition",  "rpartition", "removeprefix",
    "removesuffix", "casefold", "swapcase", NULL};
static const char *const k_dict_methods[] = {"get", "items", "keys", "values", "copy", NULL};
static const char *const k_dict_unsafe[] = {"pop",    "popitem", "setdefault",
                                            "update", "clear",   NULL};
static const char *const k_list_methods[] = {"index", "count", "copy", NULL};
static const char *const k_list_unsafe[] = {"append",  "extend", "insert", "pop", "remove",
                                            "reverse", "sort",   "clear",  NULL};

static bool in_names(const char *const *tab, const char *name) {
    for (; *tab; tab++)
        if (!strcmp(*tab, name)) return true;
    return false;
}

bool jx_has_method(jv self, const char *name) {
    if (self.t == JV_STR) return in_names(k_str_methods, name);
    if (self.t == JV_DICT) return in_names(k_dict_methods, name) || in_names(k_dict_unsafe, name);
    if (self.t == JV_LIST) return in_names(k_list_methods, name) || in_names(k_list_unsafe, name);
    return false;
}

static jv want_str(jrt *rt, int line, jv v, const char *what) {
    if (v.t != JV_STR)
        jx_fail(rt->c, CMF_E_PARSE, line, "%s must be str, not %s", what, jv_type_name(v));
    return v;
}
static int64_t want_int(jrt *rt, int line, jv v, const char *what) {
    if (v.t == JV_INT) return v.u.i;
    if (v.t == JV_BOOL) return v.u.b;
    jx_fail(rt->c, CMF_E_PARSE, line, "%s must be an integer, not %s", what, jv_type_name(v));
}

/* byte offset -> code point index */
static int64_t cp_index(const jstr *s, size_t byte_off) {
    return (int64_t)jx_utf8_len(s->s, byte_off);
}

static bool ws_at(const jstr *s, size_t i, size_t *next) {
    size_t j = i;
    uint32_t cp = jx_utf8_next(s->s, s->len, &j);
    *next = j;
    return jx_is_space(cp);
}

static jv str_split(jrt *rt, int line, jv self, jv sep, int64_t maxsplit, bool from_right) {
    const jstr *s = self.u.s;
    jv out = jv_list(rt->c, 0);
    if (sep.t == JV_NONE || sep.t == JV_UNDEF) {
        /* whitespace runs; collect all words then merge the remainder when maxsplit bites */
        size_t *ws = jx_alloc(rt->c, (s->len + 1) * sizeof(size_t) * 2);
        size_t nw = 0, i = 0;
        while (i < s->len) {
            size_t nx;
            if (ws_at(s, i, &nx)) {
                i = nx;
                continue;
            }
            size_t st = i;
            while (i < s->len && !ws_at(s, i, &nx))
                i = nx;
            ws[2 * nw] = st;
            ws[2 * nw + 1] = i;
            nw++;
        }
        if (maxsplit < 0 || (size_t)maxsplit >= nw) {
            for (size_t k = 0; k < nw; k++)
                jl_push(rt->c, out.u.l, jv_str(rt->c, s->s + ws[2 * k], ws[2 * k + 1] - ws[2 * k]));
            return out;
        }
        if (!from_right) {
            for (int64_t k = 0; k < maxsplit; k++)
                jl_push(rt->c, out.u.l, jv_str(rt->c, s->s + ws[2 * k], ws[2 * k + 1] - ws[2 * k]));
            size_t st = ws[2 * maxsplit]; /* the rest keeps its trailing whitespace */
            jl_push(rt->c, out.u.l, jv_str(rt->c, s->s + st, s->len - st));
        } else {
            size_t first = nw - (size_t)maxsplit; /* the rest keeps its leading whitespace */
            jl_push(rt->c, out.u.l, jv_str(rt->c, s->s, ws[2 * (first - 1) + 1]));
            for (size_t k = first; k < nw; k++)
                jl_push(rt->c, out.u.l, jv_str(rt->c, s->s + ws[2 * k], ws[2 * k + 1] - ws[2 * k]));
        }
        return out;
    }
    want_str(rt, line, sep, "separator");
    const jstr *p = sep.u.s;
    if (!p->len) jx_fail(rt->c, CMF_E_PARSE, line, "empty separator");
    /* positions of non-overlapping matches from the left (or right) */
    size_t cap = s->len / p->len + 2, n = 0;
    size_t *pos = jx_alloc(rt->c, cap * sizeof(size_t));
    if (!from_right) {
        for (size_t i = 0; i + p->len <= s->len && (maxsplit < 0 || (int64_t)n < maxsplit);)
            if (!memcmp(s->s + i, p->s, p->len)) {
                pos[n++] = i;
                i += p->len;
            } else
                i++;
    } else {
        size_t i = s->len;
        while (i >= p->len && (maxsplit < 0 || (int64_t)n < maxsplit)) {
            if (!memcmp(s->s + i - p->len, p->s, p->len)) {
                pos[n++] = i - p->len;
                i -= p->len;
            } else
                i--;
        }
        for (size_t a = 0, b = n ? n - 1 : 0; a < b; a++, b--) {
            size_t t = pos[a];
            pos[a] = pos[b];
            pos[b] = t;
        }
    }
    size_t st = 0;
    for (size_t k = 0; k < n; k++) {
        jl_push(rt->c, out.u.l, jv_str(rt->c, s->s + st, pos[k] - st));
        st = pos[k] + p->len;
    }
    jl_push(rt->c, out.u.l, jv_str(rt->c, s->s + st, s->len - st));
    return out;
}

static jv str_case(jrt *rt, jv self, int mode /*0 title 1 capitalize 2 swapcase*/) {
    jbuf b = {0};
    const jstr *s = self.u.s;
    size_t i = 0;
    bool prev_cased = false, first = true;
    while (i < s->len) {
        uint32_t cp = jx_utf8_next(s->s, s->len, &i), o = cp;
        bool cased = jx_is_alpha_cp(cp);
        if (mode == 0)
            o = cased ? (prev_cased ? jx_lower_cp(cp) : jx_upper_cp(cp)) : cp;
        else if (mode == 1)
            o = first ? jx_upper_cp(cp) : jx_lower_cp(cp);
        else
            o = jx_lower_cp(cp) != cp ? jx_lower_cp(cp) : jx_upper_cp(cp);
        prev_cased = cased;
        first = false;
        jb_put_cp(rt->c, &b, o);
    }
    return jv_buf_str(rt->c, &b);
}

static bool str_all(const jstr *s, int kind) {
    if (!s->len) return false;
    size_t i = 0;
    bool any_cased = false;
    while (i < s->len) {
        uint32_t cp = jx_utf8_next(s->s, s->len, &i);
        bool digit = cp >= '0' && cp <= '9';
        switch (kind) {
        case 0:
            if (!digit) return false;
            break;
        case 1:
            if (!jx_is_alpha_cp(cp)) return false;
            break;
        case 2:
            if (!digit && !jx_is_alpha_cp(cp)) return false;
            break;
        case 3:
            if (!jx_is_space(cp)) return false;
            break;
        case 4: /* upper */
            if (jx_upper_cp(cp) != cp) return false;
            if (jx_lower_cp(cp) != cp) any_cased = true;
            break;
        default: /* lower */
            if (jx_lower_cp(cp) != cp) return false;
            if (jx_upper_cp(cp) != cp) any_cased = true;
        }
    }
    return kind >= 4 ? any_cased : true;
}

static jv pad(jrt *rt, jv s, int64_t width, char fill, int align /* '<' '>' '^' */) {
    int64_t n = (int64_t)jx_utf8_len(s.u.s->s, s.u.s->len);
    if (width <= n) return s;
    if (width > (1 << 20)) jx_fail(rt->c, CMF_E_LIMIT, 0, "padding width too large");
    int64_t total = width - n, left = align == '>' ? total : align == '^' ? total / 2 : 0;
    jbuf b = {0};
    for (int64_t i = 0; i < left; i++)
        jb_putc(rt->c, &b, fill);
    jb_put(rt->c, &b, s.u.s->s, s.u.s->len);
    for (int64_t i = 0; i < total - left; i++)
        jb_putc(rt->c, &b, fill);
    return jv_buf_str(rt->c, &b);
}

static jv str_format_method(jrt *rt, int line, jv fmt, jv *args, size_t nargs, const char **kwn,
                            jv *kwv, size_t nkw);

static jv str_method(jrt *rt, int line, jv self, const char *name, jv *args, size_t nargs,
                     const char **kwn, jv *kwv, size_t nkw) {
    jx_ctx *c = rt->c;
    const jstr *s = self.u.s;
#define IS(n) (!strcmp(name, n))
    if (IS("startswith") || IS("endswith")) {
        jv p = ARG(0, "prefix", jv_undef("prefix"));
        jv start = ARG(1, "start", jv_none());
        size_t off = 0;
        if (start.t == JV_INT && start.u.i > 0) {
            for (int64_t k = 0; k < start.u.i && off < s->len; k++)
                jx_utf8_next(s->s, s->len, &off);
        }
        jlist one = {1, 1, &p, false, JLV_NONE};
        jlist *cands = p.t == JV_LIST && p.u.l->tuple ? p.u.l : &one;
        for (size_t k = 0; k < cands->n; k++) {
            jv x = want_str(rt, line, cands->v[k],
                            IS("startswith") ? "startswith arg" : "endswith arg");
            size_t L = x.u.s->len;
            if (L > s->len - off) continue;
            if (IS("startswith") ? !memcmp(s->s + off, x.u.s->s, L)
                                 : !memcmp(s->s + s->len - L, x.u.s->s, L))
                return jv_bool(true);
        }
        return jv_bool(false);
    }
    if (IS("strip") || IS("lstrip") || IS("rstrip")) {
        jv ch = ARG(0, "chars", jv_none());
        if (ch.t != JV_NONE) want_str(rt, line, ch, "strip arg");
        return jx_strip(rt, self, ch.t == JV_STR ? ch.u.s : NULL,
                        IS("strip")    ? 3
                        : IS("lstrip") ? 1
                                       : 2);
    }
    if (IS("split") || IS("rsplit"))
        return str_split(rt, line, self, ARG(0, "sep", jv_none()),
                         want_int(rt, line, ARG(1, "maxsplit", jv_int(-1)), "maxsplit"),
                         IS("rsplit"));
    if (IS("replace")) {
        jv o = want_str(rt, line, ARG(0, "old", jv_undef("old")), "replace arg 1");
        jv n = want_str(rt, line, ARG(1, "new", jv_undef("new")), "replace arg 2");
        return jx_replace(rt, self, o, n, want_int(rt, line, ARG(2, "count", jv_int(-1)), "count"));
    }
    if (IS("upper") || IS("lower") || IS("casefold")) {
        jbuf b = {0};
        size_t i = 0;
        while (i < s->len) {
            uint32_t cp = jx_utf8_next(s->s, s->len, &i);
            if (IS("upper") && cp == 0xDF)
                jb_puts(c, &b, "SS");
            else
                jb_put_cp(c, &b, IS("upper") ? jx_upper_cp(cp) : jx_lower_cp(cp));
        }
        return jv_buf_str(c, &b);
    }
    if (IS("title")) return str_case(rt, self, 0);
    if (IS("capitalize")) return str_case(rt, self, 1);
    if (IS("swapcase")) return str_case(rt, self, 2);
    if (IS("format")) return str_format_method(rt, line, self, args, nargs, kwn, kwv, nkw);
    if (IS("join")) {
        jlist *L = jx_iterate(rt, line, ARG(0, "iterable", jv_undef("iterable")));
        jbuf b = {0};
        for (size_t i = 0; i < L->n; i++) {
            if (L->v[i].t != JV_STR)
                jx_fail(c, CMF_E_PARSE, line, "sequence item %zu: expected str instance, %s found",
                        i, jv_type_name(L->v[i]));
            if (i) jb_put(c, &b, s->s, s->len);
            jb_put(c, &b, L->v[i].u.s->s, L->v[i].u.s->len);
        }
        return jv_buf_str(c, &b);
    }
    if (IS("count") || IS("find") || IS("rfind") || IS("index") || IS("rindex")) {
        jv sub = want_str(rt, line, ARG(0, "sub", jv_undef("sub")), "substring");
        const jstr *p = sub.u.s;
        if (IS("count")) {
            if (!p->len) return jv_int((int64_t)jx_utf8_len(s->s, s->len) + 1);
            int64_t n = 0;
            for (size_t i = 0; i + p->len <= s->len;)
                if (!memcmp(s->s + i, p->s, p->len)) {
                    n++;
                    i += p->len;
                } else
                    i++;
            return jv_int(n);
        }
        bool right = name[0] == 'r';
        int64_t found = -1;
        if (p->len <= s->len) {
            if (!right) {
                for (size_t i = 0; i + p->len <= s->len; i++)
                    if (!memcmp(s->s + i, p->s, p->len)) {
                        found = cp_index(s, i);
                        break;
                    }
            } else {
                for (size_t i = s->len - p->len + 1; i-- > 0;)
                    if (!memcmp(s->s + i, p->s, p->len)) {
                        found = cp_index(s, i);
                        break;
                    }
            }
        }
        if (found < 0 && (IS("index") || IS("rindex")))
            jx_fail(c, CMF_E_PARSE, line, "substring not found");
        return jv_int(found);
    }
    if (IS("splitlines")) {
        bool keep = jv_truthy(ARG(0, "keepends", jv_bool(false)));
        jv out = jv_list(c, 0);
        size_t st = 0, i = 0;
        while (i < s->len) {
            size_t here = i;
            uint32_t cp = jx_utf8_next(s->s, s->len, &i);
            bool brk = cp == '\n' || cp == '\r' || cp == 0x0B || cp == 0x0C ||
                       (cp >= 0x1C && cp <= 0x1E) || cp == 0x85 || cp == 0x2028 || cp == 0x2029;
            if (!brk) continue;
            if (cp == '\r' && i < s->len && s->s[i] == '\n') i++;
            jl_push(c, out.u.l, jv_str(c, s->s + st, (keep ? i : here) - st));
            st = i;
        }
        if (st < s->len) jl_push(c, out.u.l, jv_str(c, s->s + st, s->len - st));
        return out;
    }
    if (IS("isdigit") || IS("isnumeric") || IS("isdecimal")) return jv_bool(str_all(s, 0));
    if (IS("isalpha")) return jv_bool(str_all(s, 1));
    if (IS("isalnum")) return jv_bool(str_all(s, 2));
    if (IS("isspace")) return jv_bool(str_all(s, 3));
    if (IS("isupper")) return jv_bool(str_all(s, 4));
    if (IS("islower")) return jv_bool(str_all(s, 5));
    if (IS("ljust") || IS("rjust") || IS("center")) {
        int64_t w = want_int(rt, line, ARG(0, "width", jv_undef("width")), "width");
        jv f = ARG(1, "fillchar", jv_cstr(c, " "));
        char fill = f.t == JV_STR && f.u.s->len == 1 ? f.u.s->s[0] : ' ';
        if (IS("center")) {
            int64_t n = (int64_t)jx_utf8_len(s->s, s->len);
            if (w <= n) return self;
            if (w > (1 << 20)) jx_fail(c, CMF_E_LIMIT, line, "width too large");
            int64_t marg = w - n, left = marg / 2 + (marg & w & 1);
            jbuf b = {0};
            for (int64_t i = 0; i < left; i++)
                jb_putc(c, &b, fill);
            jb_put(c, &b, s->s, s->len);
            for (int64_t i = 0; i < marg - left; i++)
                jb_putc(c, &b, fill);
            return jv_buf_str(c, &b);
        }
        return pad(rt, self, w, fill, IS("ljust") ? '<' : '>');
    }
    if (IS("zfill")) {
        int64_t w = want_int(rt, line, ARG(0, "width", jv_undef("width")), "width");
        int64_t n = (int64_t)jx_utf8_len(s->s, s->len);
        if (w <= n) return self;
        if (w > (1 << 20)) jx_fail(c, CMF_E_LIMIT, line, "width too large");
        jbuf b = {0};
        size_t st = 0;
        if (s->len && (s->s[0] == '-' || s->s[0] == '+')) {
            jb_putc(c, &b, s->s[0]);
            st = 1;
        }
        for (int64_t i = 0; i < w - n; i++)
            jb_putc(c, &b, '0');
        jb_put(c, &b, s->s + st, s->len - st);
        return jv_buf_str(c, &b);
    }
    if (IS("partition") || IS("rpartition")) {
        jv sep = want_str(rt, line, ARG(0, "sep", jv_undef("sep")), "separator");
        if (!sep.u.s->len) jx_fail(c, CMF_E_PARSE, line, "empty separator");
        jv parts = str_split(rt, line, self, sep, 1, IS("rpartition"));
        jv out = jv_list(c, 3);
        out.u.l->tuple = true;
        jv empty = jv_cstr(c, "");
        if (parts.u.l->n == 2) {
            jl_push(c, out.u.l, parts.u.l->v[0]);
            jl_push(c, out.u.l, sep);
            jl_push(c, out.u.l, parts.u.l->v[1]);
        } else if (IS("partition")) {
            jl_push(c, out.u.l, self);
            jl_push(c, out.u.l, empty);
            jl_push(c, out.u.l, empty);
        } else {
            jl_push(c, out.u.l, empty);
            jl_push(c, out.u.l, empty);
            jl_push(c, out.u.l, self);
        }
        return out;
    }
    if (IS("removeprefix") || IS("removesuffix")) {
        jv a = want_str(rt, line, ARG(0, "affix", jv_undef("affix")), "affix");
        size_t L = a.u.s->len;
        if (L > s->len) return self;
        if (IS("removeprefix"))
            return memcmp(s->s, a.u.s->s, L) ? self : jv_str(c, s->s + L, s->len - L);
        return memcmp(s->s + s->len - L, a.u.s->s, L) ? self : jv_str(c, s->s, s->len - L);
    }
#undef IS
    jx_fail(c, CMF_E_PARSE, line, "'str' object has no attribute '%s'", name);
}

jv jx_method(jrt *rt, int line, jv self, const char *name, jv *args, size_t nargs, const char **kwn,
             jv *kwv, size_t nkw) {
    jx_ctx *c = rt->c;
    if (self.t == JV_STR) return str_method(rt, line, self, name, args, nargs, kwn, kwv, nkw);
    if ((self.t == JV_DICT && in_names(k_dict_unsafe, name)) ||
        (self.t == JV_LIST && in_names(k_list_unsafe, name)))
        jx_fail(c, CMF_E_PARSE, line,
                "access to attribute '%s' of '%s' object is unsafe (immutable sandbox)", name,
                jv_type_name(self));
    if (self.t == JV_DICT) {
        jdict *d = self.u.d;
        if (!strcmp(name, "get")) {
            jv k = ARG(0, "key", jv_undef("key")), v;
            if (jd_get(d, k, &v)) return v;
            return ARG(1, "default", jv_none());
        }
        if (!strcmp(name, "items") || !strcmp(name, "keys") || !strcmp(name, "values") ||
            !strcmp(name, "copy")) {
            if (!strcmp(name, "copy")) {
                jv o = jv_dict(c, d->n);
                for (size_t i = 0; i < d->n; i++)
                    jd_set(c, o.u.d, d->k[i], d->v[i]);
                return o;
            }
            jv out = jv_list(c, d->n);
            for (size_t i = 0; i < d->n; i++)
                jl_push(c, out.u.l,
                        name[0] == 'i'   ? jv_tuple2(c, d->k[i], d->v[i])
                        : name[0] == 'k' ? d->k[i]
                                         : d->v[i]);
            out.u.l->view = name[0] == 'i' ? JLV_ITEMS : name[0] == 'k' ? JLV_KEYS : JLV_VALUES;
            return out;
        }
    }
    if (self.t == JV_LIST) {
        jlist *l = self.u.l;
        if (!strcmp(name, "copy")) {
            jv o = jv_list(c, l->n);
            for (size_t i = 0; i < l->n; i++)
                jl_push(c, o.u.l, l->v[i]);
            return o;
        }
        jv x = ARG(0, "value", jv_undef("value"));
        int64_t n = 0;
        for (size_t i = 0; i < l->n; i++)
            if (jv_eq(l->v[i], x)) {
                if (!strcmp(name, "index")) return jv_int((int64_t)i);
                n++;
            }
        if (!strcmp(name, "index")) jx_fail(c, CMF_E_PARSE, line, "value is not in list");
        return jv_int(n);
    }
    jx_fail(c, CMF_E_PARSE, line, "'%s' object has no attribute '%s'", jv_type_name(self), name);
}

/* ---- printf-style formatting (Python's str % args) ---- */
/* one more decimal digit of a width/precision; saturates (callers reject > 4096) */
static int digit_acc(int acc, char d) {
    if (acc < 0) acc = 0;
    return acc > 100000 ? acc : acc * 10 + (d - '0');
}

jv jx_percent_format(jrt *rt, int line, jv fmt, jv args) {
    jx_ctx *c = rt->c;
    const jstr *f = fmt.u.s;
    jv single[1] = {args};
    jv *items = single;
    size_t nitems = 1, used = 0;
    jdict *mapping = NULL;
    if (args.t == JV_LIST && args.u.l->tuple) {
        items = args.u.l->v;
        nitems = args.u.l->n;
    } else if (args.t == JV_DICT)
        mapping = args.u.d;
    jbuf b = {0};
    bool used_mapping = false;
    for (size_t i = 0; i < f->len; i++) {
        if (f->s[i] != '%') {
            jb_putc(c, &b, f->s[i]);
            continue;
        }
        if (++i >= f->len) jx_fail(c, CMF_E_PARSE, line, "incomplete format");
        if (f->s[i] == '%') {
            jb_putc(c, &b, '%');
            continue;
        }
        jv val;
        bool have = false;
        if (f->s[i] == '(') {
            size_t st = ++i;
            while (i < f->len && f->s[i] != ')')
                i++;
            if (i >= f->len || !mapping) jx_fail(c, CMF_E_PARSE, line, "format requires a mapping");
            jv key = jv_str(c, f->s + st, i - st);
            if (!jd_get(mapping, key, &val))
                jx_fail(c, CMF_E_PARSE, line, "KeyError: '%s'", key.u.s->s);
            have = used_mapping = true;
            i++;
        }
        char flags[8];
        size_t nf = 0;
        while (i < f->len && strchr("-+ #0", f->s[i]) && nf < sizeof flags - 1)
            flags[nf++] = f->s[i++];
        flags[nf] = 0;
        int width = -1, prec = -1;
        if (i < f->len && f->s[i] == '*') {
            if (used >= nitems)
                jx_fail(c, CMF_E_PARSE, line, "not enough arguments for format string");
            width = (int)want_int(rt, line, items[used++], "* width");
            i++;
        } else
            while (i < f->len && f->s[i] >= '0' && f->s[i] <= '9')
                width = digit_acc(width, f->s[i++]);
        if (i < f->len && f->s[i] == '.') {
            i++;
            prec = 0;
            while (i < f->len && f->s[i] >= '0' && f->s[i] <= '9')
                prec = digit_acc(prec, f->s[i++]);
        }
        while (i < f->len && strchr("hlL", f->s[i]))
            i++;
        if (i >= f->len) jx_fail(c, CMF_E_PARSE, line, "incomplete format");
        if (width > 4096 || prec > 4096)
            jx_fail(c, CMF_E_LIMIT, line, "format width/precision too large");
        char conv = f->s[i];
        if (!have) {
            if (used >= nitems)
                jx_fail(c, CMF_E_PARSE, line, "not enough arguments for format string");
            val = items[used++];
        }
        char spec[32];
        char tmp[8192];
        switch (conv) {
        case 's':
        case 'r':
        case 'a': {
            jbuf sb = {0};
            if (conv == 's')
                jv_write_str(c, &sb, val);
            else
                jv_write_repr(c, &sb, val);
            jv sv = jv_buf_str(c, &sb);
            if (prec >= 0) {
                size_t p = 0;
                for (int k = 0; k < prec && p < sv.u.s->len; k++)
                    jx_utf8_next(sv.u.s->s, sv.u.s->len, &p);
                sv = jv_str(c, sv.u.s->s, p);
            }
            jb_puts(c, &b, pad(rt, sv, width, ' ', strchr(flags, '-') ? '<' : '>').u.s->s);
            break;
        }
        case 'd':
        case 'i':
        case 'u':
        case 'x':
        case 'X':
        case 'o': {
            int64_t iv;
            if (val.t == JV_FLOAT && (conv == 'd' || conv == 'i' || conv == 'u'))
                iv = (int64_t)val.u.f;
            else if (val.t == JV_INT || val.t == JV_BOOL)
                iv = val.t == JV_BOOL ? val.u.b : val.u.i;
            else
                jx_fail(c, CMF_E_PARSE, line, "%%%c format: a number is required, not %s", conv,
                        jv_type_name(val));
            char cc = conv == 'i' || conv == 'u' ? 'd' : conv;
            if (width < 0 && prec < 0)
                snprintf(spec, sizeof spec, "%%%sll%c", flags, cc);
            else if (width < 0)
                snprintf(spec, sizeof spec, "%%%s.%dll%c", flags, prec, cc);
            else if (prec < 0)
                snprintf(spec, sizeof spec, "%%%s%dll%c", flags, width, cc);
            else
                snprintf(spec, sizeof spec, "%%%s%d.%dll%c", flags, width, prec, cc);
            if (cc == 'o' && strchr(flags, '#')) {
                /* Python writes 0o17 */
                snprintf(tmp, sizeof tmp, "%s0o%llo", iv < 0 ? "-" : "",
                         (unsigned long long)(iv < 0 ? -iv : iv));
            } else if (cc == 'x' || cc == 'X' || cc == 'o') {
                /* Python formats negatives with a sign, not two's complement */
                char body[64];
                snprintf(body, sizeof body, spec, (long long)(iv < 0 ? -iv : iv));
                snprintf(tmp, sizeof tmp, "%s%s", iv < 0 ? "-" : "", body);
            } else
                snprintf(tmp, sizeof tmp, spec, (long long)iv);
            jb_puts(c, &b, tmp);
            break;
        }
        case 'e':
        case 'E':
        case 'f':
        case 'F':
        case 'g':
        case 'G': {
            if (!jv_is_num(val))
                jx_fail(c, CMF_E_PARSE, line, "must be real number, not %s", jv_type_name(val));
            if (width < 0 && prec < 0)
                snprintf(spec, sizeof spec, "%%%s%c", flags, conv);
            else if (width < 0)
                snprintf(spec, sizeof spec, "%%%s.%d%c", flags, prec, conv);
            else if (prec < 0)
                snprintf(spec, sizeof spec, "%%%s%d%c", flags, width, conv);
            else
                snprintf(spec, sizeof spec, "%%%s%d.%d%c", flags, width, prec, conv);
            snprintf(tmp, sizeof tmp, spec, jv_num(val));
            jb_puts(c, &b, tmp);
            break;
        }
        case 'c':
            if (val.t == JV_INT && val.u.i >= 0 && val.u.i <= 0x10FFFF)
                jb_put_cp(c, &b, (uint32_t)val.u.i);
            else if (val.t == JV_STR && jx_utf8_len(val.u.s->s, val.u.s->len) == 1)
                jb_put(c, &b, val.u.s->s, val.u.s->len);
            else
                jx_fail(c, CMF_E_PARSE, line, "%%c requires int or char");
            break;
        default:
            jx_fail(c, CMF_E_PARSE, line, "unsupported format character '%c'", conv);
        }
    }
    if (!mapping && !used_mapping && used < nitems)
        jx_fail(c, CMF_E_PARSE, line, "not all arguments converted during string formatting");
    return jv_buf_str(c, &b);
}

/* ---- str.format ---- */
static jv format_spec(jrt *rt, int line, jv v, const char *spec, size_t n) {
    jx_ctx *c = rt->c;
    char fill = ' ', align = 0, sign = 0, type = 0;
    bool alt = false, zero = false;
    int width = -1, prec = -1;
    size_t i = 0;
    if (n >= 2 && strchr("<>^=", spec[1])) {
        fill = spec[0];
        align = spec[1];
        i = 2;
    } else if (n >= 1 && strchr("<>^=", spec[0])) {
        align = spec[0];
        i = 1;
    }
    if (i < n && strchr("+- ", spec[i])) sign = spec[i++];
    if (i < n && spec[i] == '#') {
        alt = true;
        i++;
    }
    if (i < n && spec[i] == '0') {
        zero = true;
        i++;
    }
    while (i < n && spec[i] >= '0' && spec[i] <= '9')
        width = digit_acc(width, spec[i++]);
    if (i < n && (spec[i] == ',' || spec[i] == '_')) i++;
    if (i < n && spec[i] == '.') {
        i++;
        prec = 0;
        while (i < n && spec[i] >= '0' && spec[i] <= '9')
            prec = digit_acc(prec, spec[i++]);
    }
    if (i < n) type = spec[i++];
    if (i != n) jx_fail(c, CMF_E_PARSE, line, "invalid format specifier");
    if (width > 4096 || prec > 4096)
        jx_fail(c, CMF_E_LIMIT, line, "format width/precision too large");
    (void)alt;
    jv body;
    bool numeric = false;
    char tmp[8192];
    if ((v.t == JV_INT || v.t == JV_BOOL) && (!type || strchr("dnxXobc", type))) {
        int64_t iv = v.t == JV_BOOL ? v.u.b : v.u.i;
        numeric = true;
        if (type == 'x' || type == 'X' || type == 'o')
            snprintf(tmp, sizeof tmp,
                     type == 'x'   ? "%s%llx"
                     : type == 'X' ? "%s%llX"
                                   : "%s%llo",
                     iv < 0 ? "-" : "", (unsigned long long)(iv < 0 ? -iv : iv));
        else
            snprintf(tmp, sizeof tmp, "%lld", (long long)iv);
        if (sign && iv >= 0 && sign != '-') {
            memmove(tmp + 1, tmp, strlen(tmp) + 1);
            tmp[0] = sign;
        }
        body = jv_cstr(c, tmp);
    } else if (jv_is_num(v) && (!type || strchr("eEfFgG%", type))) {
        numeric = true;
        double d = jv_num(v);
        if (!type && prec < 0) {
            jbuf sb = {0};
            jv_write_str(c, &sb, v.t == JV_FLOAT ? v : jv_float(d));
            body = jv_buf_str(c, &sb);
        } else {
            char f[16];
            char t2 = type ? type : 'g';
            if (t2 == '%') {
                d *= 100;
                t2 = 'f';
            }
            snprintf(f, sizeof f, "%%%s.%d%c",
                     sign == '+'   ? "+"
                     : sign == ' ' ? " "
                                   : "",
                     prec < 0 ? 6 : prec, t2);
            snprintf(tmp, sizeof tmp, f, d);
            if (type == '%') strcat(tmp, "%");
            body = jv_cstr(c, tmp);
        }
    } else {
        if ((type && type != 's') || (type == 's' && v.t != JV_STR))
            jx_fail(c, CMF_E_PARSE, line, "unknown format code '%c' for %s", type, jv_type_name(v));
        body = jv_to_str(c, v);
        if (prec >= 0) {
            size_t p = 0;
            for (int k = 0; k < prec && p < body.u.s->len; k++)
                jx_utf8_next(body.u.s->s, body.u.s->len, &p);
            body = jv_str(c, body.u.s->s, p);
        }
    }
    if (zero && !align) {
        fill = '0';
        align = '=';
    }
    if (!align) align = numeric ? '>' : '<';
    if (align == '=') {
        int64_t len = (int64_t)jx_utf8_len(body.u.s->s, body.u.s->len);
        if (width <= len) return body;
        jbuf b = {0};
        size_t st = 0;
        if (body.u.s->len && strchr("+- ", body.u.s->s[0])) {
            jb_putc(c, &b, body.u.s->s[0]);
            st = 1;
        }
        for (int64_t k = 0; k < width - len; k++)
            jb_putc(c, &b, fill);
        jb_put(c, &b, body.u.s->s + st, body.u.s->len - st);
        return jv_buf_str(c, &b);
    }
    return pad(rt, body, width, fill, align);
}

static jv str_format_method(jrt *rt, int line, jv fmt, jv *args, size_t nargs, const char **kwn,
                            jv *kwv, size_t nkw) {
    jx_ctx *c = rt->c;
    const jstr *f = fmt.u.s;
    jbuf b = {0};
    size_t auto_idx = 0;
    int numbering = 0; /* 1 automatic {}, 2 manual {0} */
    for (size_t i = 0; i < f->len; i++) {
        char ch = f->s[i];
        if (ch == '}') {
            if (i + 1 < f->len && f->s[i + 1] == '}')
                i++;
            else
                jx_fail(c, CMF_E_PARSE, line, "Single '}' encountered in format string");
            jb_putc(c, &b, '}');
            continue;
        }
        if (ch != '{') {
            jb_putc(c, &b, ch);
            continue;
        }
        if (i + 1 < f->len && f->s[i + 1] == '{') {
            jb_putc(c, &b, '{');
            i++;
            continue;
        }
        size_t st = ++i;
        while (i < f->len && f->s[i] != '}')
            i++;
        if (i >= f->len) jx_fail(c, CMF_E_PARSE, line, "Single '{' encountered in format string");
        const char *field = f->s + st;
        size_t flen = i - st;
        const char *colon = memchr(field, ':', flen);
        size_t head = colon ? (size_t)(colon - field) : flen;
        const char *bang = memchr(field, '!', head);
        size_t nlen = bang ? (size_t)(bang - field) : head;
        size_t nend = 0;
        while (nend < nlen && field[nend] != '.' && field[nend] != '[')
            nend++;
        jv val;
        if (nend == 0 || (field[0] >= '0' && field[0] <= '9')) {
            int mode = nend == 0 ? 1 : 2;
            if (numbering && numbering != mode)
                jx_fail(c, CMF_E_PARSE, line,
                        "cannot switch between automatic and manual field numbering");
            numbering = mode;
        }
        if (nend == 0) {
            if (auto_idx >= nargs)
                jx_fail(c, CMF_E_PARSE, line, "Replacement index %zu out of range", auto_idx);
            val = args[auto_idx++];
        } else if (field[0] >= '0' && field[0] <= '9') {
            size_t k = (size_t)strtoul(field, NULL, 10);
            if (k >= nargs) jx_fail(c, CMF_E_PARSE, line, "Replacement index %zu out of range", k);
            val = args[k];
        } else {
            bool found = false;
            for (size_t k = 0; k < nkw; k++)
                if (strlen(kwn[k]) == nend && !memcmp(kwn[k], field, nend)) {
                    val = kwv[k];
                    found = true;
                }
            if (!found) jx_fail(c, CMF_E_PARSE, line, "KeyError: '%.*s'", (int)nend, field);
        }
        /* .attr and [key] chains */
        size_t p = nend;
        while (p < nlen) {
            if (field[p] == '.') {
                size_t q = ++p;
                while (p < nlen && field[p] != '.' && field[p] != '[')
                    p++;
                val = jx_getattr(rt, line, val, jv_str(c, field + q, p - q).u.s->s, p - q);
            } else {
                size_t q = ++p;
                while (p < nlen && field[p] != ']')
                    p++;
                jv key = jv_str(c, field + q, p - q);
                bool digits = p > q;
                for (size_t k = q; k < p; k++)
                    if (field[k] < '0' || field[k] > '9') digits = false;
                val =
                    jx_getitem(rt, line, val, digits ? jv_int(strtoll(key.u.s->s, NULL, 10)) : key);
                p++;
            }
        }
        if (bang && (size_t)(bang - field) + 1 < head) {
            char conv = bang[1];
            if (conv == 'r' || conv == 'a') {
                jbuf rb = {0};
                jv_write_repr(c, &rb, val);
                val = jv_buf_str(c, &rb);
            } else
                val = jv_to_str(c, val);
        }
        jv out = colon ? format_spec(rt, line, val, colon + 1, flen - head - 1) : jv_to_str(c, val);
        jb_put(c, &b, out.u.s->s, out.u.s->len);
    }
    return jv_buf_str(c, &b);
}

/* ---- globals ---- */
jv jx_call_global(jrt *rt, int line, const jfunc *fn, jv *args, size_t nargs, const char **kwn,
                  jv *kwv, size_t nkw) {
    jx_ctx *c = rt->c;
    switch (fn->kind) {
    case FN_RANGE: {
        int64_t start = 0, stop, step = 1;
        if (nargs == 1)
            stop = want_int(rt, line, args[0], "range stop");
        else if (nargs == 2 || nargs == 3) {
            start = want_int(rt, line, args[0], "range start");
            stop = want_int(rt, line, args[1], "range stop");
            if (nargs == 3) step = want_int(rt, line, args[2], "range step");
        } else
            jx_fail(c, CMF_E_PARSE, line, "range expected 1 to 3 arguments");
        if (step == 0) jx_fail(c, CMF_E_PARSE, line, "range() arg 3 must not be zero");
        double count = ceil(((double)stop - (double)start) / (double)step);
        if (count > 100000) jx_fail(c, CMF_E_LIMIT, line, "range too big, maximum size is 100000");
        jv out = jv_list(c, count > 0 ? (size_t)count : 0);
        for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step)
            jl_push(c, out.u.l, jv_int(i));
        return out;
    }
    case FN_NAMESPACE:
    case FN_DICT: {
        jv d = jv_dict(c, nkw);
        for (size_t i = 0; i < nargs; i++) {
            if (args[i].t != JV_DICT && args[i].t != JV_NS)
                jx_fail(c, CMF_E_PARSE, line, "%s() positional argument must be a mapping",
                        fn->name);
            for (size_t k = 0; k < args[i].u.d->n; k++)
                jd_set(c, d.u.d, args[i].u.d->k[k], args[i].u.d->v[k]);
        }
        for (size_t i = 0; i < nkw; i++)
            jd_set(c, d.u.d, jv_cstr(c, kwn[i]), kwv[i]);
        if (fn->kind == FN_NAMESPACE) d.t = JV_NS;
        return d;
    }
    case FN_RAISE: {
        jv msg = nargs ? jv_to_str(c, args[0]) : jv_cstr(c, "");
        jx_fail(c, CMF_E_PARSE, line, "raise_exception: %s", msg.u.s->s);
    }
    case FN_UNSUPPORTED:
        jx_fail(c, CMF_E_UNSUPPORTED, line, "'%s' is not supported", fn->name);
    case FN_STRFTIME: {
        jv f = nargs ? args[0] : jv_undef("format");
        if (f.t != JV_STR) jx_fail(c, CMF_E_PARSE, line, "strftime_now needs a format string");
        time_t t = rt->now >= 0 ? (time_t)rt->now : time(NULL);
        struct tm tmv;
        if (rt->now >= 0)
            gmtime_r(&t, &tmv);
        else
            localtime_r(&t, &tmv);
        char out[512];
        size_t n = f.u.s->len ? strftime(out, sizeof out, f.u.s->s, &tmv) : 0;
        if (f.u.s->len && n == 0) jx_fail(c, CMF_E_LIMIT, line, "strftime_now result too long");
        return jv_str(c, out, n);
    }
    default:
        jx_fail(c, CMF_E_PARSE, line, "'%s' is not callable", fn->name ? fn->name : "object");
    }
}
