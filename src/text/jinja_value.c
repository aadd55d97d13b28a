/* jinja_value.c - the interpreter's value model with Python semantics: construction,
 * truthiness, equality and ordering, str()/repr(), json.dumps, UTF-8 helpers. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/checked.h"
#include "text/jinja_internal.h"

/* ---- construction ---- */
jv jv_undef(const char *name) {
    jv v = {.t = JV_UNDEF};
    v.u.uname = name;
    return v;
}
jv jv_none(void) {
    return (jv){.t = JV_NONE};
}
jv jv_bool(bool b) {
    jv v = {.t = JV_BOOL};
    v.u.b = b;
    return v;
}
jv jv_int(int64_t i) {
    jv v = {.t = JV_INT};
    v.u.i = i;
    return v;
}
jv jv_float(double f) {
    jv v = {.t = JV_FLOAT};
    v.u.f = f;
    return v;
}
jv jv_str(jx_ctx *c, const char *s, size_t n) {
    size_t sz;
    if (!ck_add_size(sizeof(jstr), n, &sz) || !ck_add_size(sz, 1, &sz))
        jx_fail(c, CMF_E_LIMIT, 0, "string too long");
    jstr *js = jx_alloc(c, sz);
    js->len = n;
    if (n) memcpy(js->s, s, n);
    js->s[n] = 0;
    jv v = {.t = JV_STR};
    v.u.s = js;
    return v;
}
jv jv_cstr(jx_ctx *c, const char *s) {
    return jv_str(c, s, strlen(s));
}
jv jv_buf_str(jx_ctx *c, const jbuf *b) {
    return jv_str(c, b->p, b->n);
}
jv jv_list(jx_ctx *c, size_t cap) {
    jlist *l = jx_alloc(c, sizeof *l);
    if (cap) {
        size_t sz;
        if (!ck_mul_size(cap, sizeof(jv), &sz)) jx_fail(c, CMF_E_LIMIT, 0, "list too long");
        l->v = jx_alloc(c, sz);
        l->cap = cap;
    }
    jv v = {.t = JV_LIST};
    v.u.l = l;
    return v;
}
jv jv_tuple2(jx_ctx *c, jv a, jv b) {
    jv t = jv_list(c, 2);
    t.u.l->tuple = true;
    jl_push(c, t.u.l, a);
    jl_push(c, t.u.l, b);
    return t;
}
jv jv_dict(jx_ctx *c, size_t cap) {
    jdict *d = jx_alloc(c, sizeof *d);
    if (cap) {
        size_t sz;
        if (!ck_mul_size(cap, sizeof(jv), &sz)) jx_fail(c, CMF_E_LIMIT, 0, "dict too large");
        d->k = jx_alloc(c, sz);
        d->v = jx_alloc(c, sz);
        d->cap = cap;
    }
    jv v = {.t = JV_DICT};
    v.u.d = d;
    return v;
}
void jl_push(jx_ctx *c, jlist *l, jv v) {
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 4, sz;
        if (!ck_mul_size(cap, sizeof(jv), &sz)) jx_fail(c, CMF_E_LIMIT, 0, "list too long");
        jv *nv = jx_alloc(c, sz);
        if (l->n) memcpy(nv, l->v, l->n * sizeof(jv));
        l->v = nv;
        l->cap = cap;
    }
    l->v[l->n++] = v;
}
void jd_set(jx_ctx *c, jdict *d, jv k, jv v) {
    for (size_t i = 0; i < d->n; i++)
        if (jv_eq(d->k[i], k)) {
            d->v[i] = v;
            return;
        }
    if (d->n == d->cap) {
        size_t cap = d->cap ? d->cap * 2 : 4, sz;
        if (!ck_mul_size(cap, sizeof(jv), &sz)) jx_fail(c, CMF_E_LIMIT, 0, "dict too large");
        jv *nk = jx_alloc(c, sz), *nv = jx_alloc(c, sz);
        if (d->n) {
            memcpy(nk, d->k, d->n * sizeof(jv));
            memcpy(nv, d->v, d->n * sizeof(jv));
        }
        d->k = nk;
        d->v = nv;
        d->cap = cap;
    }
    d->k[d->n] = k;
    d->v[d->n] = v;
    d->n++;
}
bool jd_get(const jdict *d, jv k, jv *out) {
    for (size_t i = 0; i < d->n; i++)
        if (jv_eq(d->k[i], k)) {
            *out = d->v[i];
            return true;
        }
    return false;
}
bool jd_get_s(const jdict *d, const char *key, jv *out) {
    size_t n = strlen(key);
    for (size_t i = 0; i < d->n; i++)
        if (d->k[i].t == JV_STR && d->k[i].u.s->len == n && !memcmp(d->k[i].u.s->s, key, n)) {
            *out = d->v[i];
            return true;
        }
    return false;
}

/* ---- UTF-8 ---- */
uint32_t jx_utf8_next(const char *s, size_t n, size_t *i) {
    const unsigned char *u = (const unsigned char *)s;
    size_t p = *i;
    unsigned char b = u[p];
    uint32_t cp;
    size_t k;
    if (b < 0x80) {
        *i = p + 1;
        return b;
    } else if ((b & 0xE0) == 0xC0) {
        cp = b & 0x1F;
        k = 1;
    } else if ((b & 0xF0) == 0xE0) {
        cp = b & 0x0F;
        k = 2;
    } else if ((b & 0xF8) == 0xF0) {
        cp = b & 0x07;
        k = 3;
    } else {
        *i = p + 1;
        return b;
    }
    for (size_t j = 1; j <= k; j++) {
        if (p + j >= n || (u[p + j] & 0xC0) != 0x80) {
            *i = p + 1;
            return b;
        }
        cp = (cp << 6) | (u[p + j] & 0x3F);
    }
    *i = p + k + 1;
    return cp;
}
size_t jx_utf8_len(const char *s, size_t n) {
    size_t i = 0, cnt = 0;
    while (i < n) {
        jx_utf8_next(s, n, &i);
        cnt++;
    }
    return cnt;
}
bool jx_is_space(uint32_t cp) {
    return (cp >= 9 && cp <= 13) || cp == ' ' || (cp >= 0x1C && cp <= 0x1F) || cp == 0x85 ||
           cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 ||
           cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}
uint32_t jx_lower_cp(uint32_t cp) {
    if (cp >= 'A' && cp <= 'Z') return cp + 32;
    if (cp < 0x80) return cp;
    if ((cp >= 0xC0 && cp <= 0xDE && cp != 0xD7)) return cp + 32;
    if (cp >= 0x391 && cp <= 0x3AB && cp != 0x3A2) return cp + 32;
    if (cp >= 0x410 && cp <= 0x42F) return cp + 32;
    if (cp >= 0x400 && cp <= 0x40F) return cp + 80;
    if (cp >= 0x100 && cp <= 0x17F && cp != 0x130 && cp != 0x131 && cp != 0x138 && cp != 0x149 &&
        !(cp >= 0x139 && cp <= 0x148) && !(cp >= 0x179 && cp <= 0x17E) && cp != 0x178)
        return (cp % 2 == 0) ? cp + 1 : cp;
    if (((cp >= 0x139 && cp <= 0x148) || (cp >= 0x179 && cp <= 0x17E)) && cp % 2 == 1)
        return cp + 1;
    return cp;
}
uint32_t jx_upper_cp(uint32_t cp) {
    if (cp >= 'a' && cp <= 'z') return cp - 32;
    if (cp < 0x80) return cp;
    if (cp >= 0xE0 && cp <= 0xFE && cp != 0xF7) return cp - 32;
    if (cp == 0xFF) return 0x178;
    if (cp >= 0x3B1 && cp <= 0x3CB && cp != 0x3C2) return cp - 32;
    if (cp == 0x3C2) return 0x3A3;
    if (cp >= 0x430 && cp <= 0x44F) return cp - 32;
    if (cp >= 0x450 && cp <= 0x45F) return cp - 80;
    if (cp >= 0x100 && cp <= 0x17F && cp != 0x130 && cp != 0x131 && cp != 0x138 && cp != 0x149 &&
        !(cp >= 0x139 && cp <= 0x148) && !(cp >= 0x179 && cp <= 0x17E) && cp != 0x178 &&
        cp != 0x17F)
        return (cp % 2 == 1) ? cp - 1 : cp;
    if (((cp >= 0x139 && cp <= 0x148) || (cp >= 0x179 && cp <= 0x17E)) && cp % 2 == 0)
        return cp - 1;
    return cp;
}
bool jx_is_alpha_cp(uint32_t cp) {
    if (cp < 0x80) return (cp | 32) >= 'a' && (cp | 32) <= 'z';
    return jx_lower_cp(cp) != cp || jx_upper_cp(cp) != cp || cp == 0xDF ||
           (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3040 && cp <= 0x30FF) ||
           (cp >= 0xAC00 && cp <= 0xD7A3) ||
           (cp >= 0x5D0 && cp <= 0x6FF && cp != 0x60C && cp != 0x61B && cp != 0x61F);
}

/* ---- type names, truthiness, equality, order ---- */
const char *jv_type_name(jv v) {
    switch (v.t) {
    case JV_UNDEF:
        return "Undefined";
    case JV_NONE:
        return "NoneType";
    case JV_BOOL:
        return "bool";
    case JV_INT:
        return "int";
    case JV_FLOAT:
        return "float";
    case JV_STR:
        return "str";
    case JV_LIST:
        if (v.u.l->view)
            return v.u.l->view == JLV_ITEMS  ? "dict_items"
                   : v.u.l->view == JLV_KEYS ? "dict_keys"
                                             : "dict_values";
        return v.u.l->tuple ? "tuple" : "list";
    case JV_DICT:
        return "dict";
    case JV_NS:
        return "Namespace";
    case JV_MACRO:
        return "Macro";
    case JV_LOOP:
        return "LoopContext";
    default:
        return "function";
    }
}
bool jv_truthy(jv v) {
    switch (v.t) {
    case JV_UNDEF:
    case JV_NONE:
        return false;
    case JV_BOOL:
        return v.u.b;
    case JV_INT:
        return v.u.i != 0;
    case JV_FLOAT:
        return v.u.f != 0.0;
    case JV_STR:
        return v.u.s->len != 0;
    case JV_LIST:
        return v.u.l->n != 0;
    case JV_DICT:
        return v.u.d->n != 0;
    default:
        return true;
    }
}
bool jv_is_num(jv v) {
    return v.t == JV_INT || v.t == JV_FLOAT || v.t == JV_BOOL;
}
double jv_num(jv v) {
    return v.t == JV_FLOAT  ? v.u.f
           : v.t == JV_INT  ? (double)v.u.i
           : v.t == JV_BOOL ? (double)v.u.b
                            : 0.0;
}
static bool num_eq(jv a, jv b) {
    if (a.t != JV_FLOAT && b.t != JV_FLOAT) {
        int64_t x = a.t == JV_BOOL ? a.u.b : a.u.i, y = b.t == JV_BOOL ? b.u.b : b.u.i;
        return x == y;
    }
    return jv_num(a) == jv_num(b);
}
bool jv_eq(jv a, jv b) {
    if (jv_is_num(a) && jv_is_num(b)) return num_eq(a, b);
    if (a.t != b.t) return false;
    switch (a.t) {
    case JV_UNDEF:
    case JV_NONE:
        return true;
    case JV_STR:
        return a.u.s->len == b.u.s->len && !memcmp(a.u.s->s, b.u.s->s, a.u.s->len);
    case JV_LIST:
        if (a.u.l->tuple != b.u.l->tuple || a.u.l->view != b.u.l->view || a.u.l->n != b.u.l->n)
            return false;
        if (a.u.l->view == JLV_VALUES) return a.u.l == b.u.l; /* values views compare by identity */
        for (size_t i = 0; i < a.u.l->n; i++)
            if (!jv_eq(a.u.l->v[i], b.u.l->v[i])) return false;
        return true;
    case JV_DICT:
        if (a.u.d->n != b.u.d->n) return false;
        for (size_t i = 0; i < a.u.d->n; i++) {
            jv o;
            if (!jd_get(b.u.d, a.u.d->k[i], &o) || !jv_eq(a.u.d->v[i], o)) return false;
        }
        return true;
    case JV_NS:
        return a.u.d == b.u.d;
    case JV_MACRO:
        return a.u.m == b.u.m;
    case JV_LOOP:
        return a.u.lp == b.u.lp;
    default:
        return a.u.fn == b.u.fn;
    }
}
static int str_cmp_ci(const jstr *a, const jstr *b) {
    size_t i = 0, j = 0;
    while (i < a->len && j < b->len) {
        uint32_t x = jx_lower_cp(jx_utf8_next(a->s, a->len, &i));
        uint32_t y = jx_lower_cp(jx_utf8_next(b->s, b->len, &j));
        if (x != y) return x < y ? -1 : 1;
    }
    return (i < a->len) - (j < b->len);
}
int jv_cmp(jx_ctx *c, int line, jv a, jv b, bool ci) {
    if (jv_is_num(a) && jv_is_num(b)) {
        if (a.t != JV_FLOAT && b.t != JV_FLOAT) {
            int64_t x = a.t == JV_BOOL ? a.u.b : a.u.i, y = b.t == JV_BOOL ? b.u.b : b.u.i;
            return (x > y) - (x < y);
        }
        double x = jv_num(a), y = jv_num(b);
        return (x > y) - (x < y);
    }
    if (a.t == JV_STR && b.t == JV_STR) {
        if (ci) return str_cmp_ci(a.u.s, b.u.s);
        size_t n = a.u.s->len < b.u.s->len ? a.u.s->len : b.u.s->len;
        int r = memcmp(a.u.s->s, b.u.s->s, n);
        if (r) return r < 0 ? -1 : 1;
        return (a.u.s->len > b.u.s->len) - (a.u.s->len < b.u.s->len);
    }
    if (a.t == JV_LIST && b.t == JV_LIST && a.u.l->tuple == b.u.l->tuple && !a.u.l->view &&
        !b.u.l->view) {
        size_t n = a.u.l->n < b.u.l->n ? a.u.l->n : b.u.l->n;
        for (size_t i = 0; i < n; i++) {
            if (jv_eq(a.u.l->v[i], b.u.l->v[i])) continue;
            return jv_cmp(c, line, a.u.l->v[i], b.u.l->v[i], ci);
        }
        return (a.u.l->n > b.u.l->n) - (a.u.l->n < b.u.l->n);
    }
    if (a.t == JV_UNDEF || b.t == JV_UNDEF)
        jx_fail(c, CMF_E_PARSE, line, "'%s' is undefined",
                a.t == JV_UNDEF ? (a.u.uname ? a.u.uname : "value")
                                : (b.u.uname ? b.u.uname : "value"));
    jx_fail(c, CMF_E_PARSE, line, "'<' not supported between instances of '%s' and '%s'",
            jv_type_name(a), jv_type_name(b));
}

/* ---- float repr (Python's shortest round-trip form) ---- */
void jx_fmt_float(double f, char out[40]) {
    if (isnan(f)) {
        strcpy(out, "nan");
        return;
    }
    if (isinf(f)) {
        strcpy(out, f < 0 ? "-inf" : "inf");
        return;
    }
    if (f == 0) {
        strcpy(out, signbit(f) ? "-0.0" : "0.0");
        return;
    }
    char e[40];
    for (int p = 1; p <= 17; p++) {
        snprintf(e, sizeof e, "%.*e", p - 1, f);
        if (strtod(e, NULL) == f) break;
    }
    char digits[24];
    size_t nd = 0;
    const char *q = e;
    bool neg = false;
    if (*q == '-') {
        neg = true;
        q++;
    }
    for (; *q && *q != 'e'; q++)
        if (*q >= '0' && *q <= '9' && nd < sizeof digits - 1) digits[nd++] = *q;
    int ex = (*q == 'e') ? atoi(q + 1) : 0;
    while (nd > 1 && digits[nd - 1] == '0')
        nd--;
    digits[nd] = 0;
    char *o = out;
    if (neg) *o++ = '-';
    if (ex >= -4 && ex < 16) {
        if (ex >= 0) {
            for (int i = 0; i <= ex; i++)
                *o++ = (size_t)i < nd ? digits[i] : '0';
            *o++ = '.';
            if ((size_t)ex + 1 < nd)
                for (size_t i = (size_t)ex + 1; i < nd; i++)
                    *o++ = digits[i];
            else
                *o++ = '0';
        } else {
            *o++ = '0';
            *o++ = '.';
            for (int i = 0; i < -ex - 1; i++)
                *o++ = '0';
            for (size_t i = 0; i < nd; i++)
                *o++ = digits[i];
        }
        *o = 0;
    } else {
        *o++ = digits[0];
        if (nd > 1) {
            *o++ = '.';
            for (size_t i = 1; i < nd; i++)
                *o++ = digits[i];
        }
        int ax = ex < 0 ? -ex : ex;
        *o++ = 'e';
        *o++ = ex < 0 ? '-' : '+';
        if (ax >= 100) *o++ = (char)('0' + ax / 100);
        *o++ = (char)('0' + (ax / 10) % 10);
        *o++ = (char)('0' + ax % 10);
        *o = 0;
    }
}

/* ---- str() and repr() ---- */
static bool repr_needs_escape(uint32_t cp) {
    return cp < 0x20 || cp == 0x7F || (cp >= 0x80 && cp <= 0xA0) || cp == 0xAD || cp == 0x1680 ||
           (cp >= 0x2000 && cp <= 0x200F) || (cp >= 0x2028 && cp <= 0x202F) ||
           (cp >= 0x205F && cp <= 0x206F) || cp == 0x3000 || cp == 0xFEFF ||
           (cp >= 0xE000 && cp <= 0xF8FF) || (cp >= 0xD800 && cp <= 0xDFFF) || cp == 0xFFFE ||
           cp == 0xFFFF;
}
static void write_str_repr(jx_ctx *c, jbuf *b, const jstr *s) {
    bool has_sq = memchr(s->s, '\'', s->len) != NULL, has_dq = memchr(s->s, '"', s->len) != NULL;
    char q = (has_sq && !has_dq) ? '"' : '\'';
    jb_putc(c, b, q);
    size_t i = 0;
    while (i < s->len) {
        size_t st = i;
        uint32_t cp = jx_utf8_next(s->s, s->len, &i);
        if (cp == (uint32_t)q || cp == '\\') {
            jb_putc(c, b, '\\');
            jb_putc(c, b, (char)cp);
        } else if (cp == '\n')
            jb_puts(c, b, "\\n");
        else if (cp == '\r')
            jb_puts(c, b, "\\r");
        else if (cp == '\t')
            jb_puts(c, b, "\\t");
        else if (repr_needs_escape(cp)) {
            if (cp < 0x100)
                jb_printf(c, b, "\\x%02x", cp);
            else
                jb_printf(c, b, "\\u%04x", cp);
        } else
            jb_put(c, b, s->s + st, i - st);
    }
    jb_putc(c, b, q);
}
void jv_write_repr(jx_ctx *c, jbuf *b, jv v) {
    switch (v.t) {
    case JV_STR:
        write_str_repr(c, b, v.u.s);
        return;
    case JV_LIST: {
        jlist *l = v.u.l;
        if (l->view) {
            jb_puts(c, b, jv_type_name(v));
            jb_putc(c, b, '(');
        }
        jb_putc(c, b, l->tuple ? '(' : '[');
        for (size_t i = 0; i < l->n; i++) {
            if (i) jb_puts(c, b, ", ");
            jv_write_repr(c, b, l->v[i]);
        }
        if (l->tuple && l->n == 1) jb_putc(c, b, ',');
        jb_putc(c, b, l->tuple ? ')' : ']');
        if (l->view) jb_putc(c, b, ')');
        return;
    }
    case JV_DICT: {
        jdict *d = v.u.d;
        jb_putc(c, b, '{');
        for (size_t i = 0; i < d->n; i++) {
            if (i) jb_puts(c, b, ", ");
            jv_write_repr(c, b, d->k[i]);
            jb_puts(c, b, ": ");
            jv_write_repr(c, b, d->v[i]);
        }
        jb_putc(c, b, '}');
        return;
    }
    case JV_UNDEF:
        jb_puts(c, b, "Undefined");
        return;
    default:
        jv_write_str(c, b, v);
    }
}
void jv_write_str(jx_ctx *c, jbuf *b, jv v) {
    char t[40];
    switch (v.t) {
    case JV_UNDEF:
        return;
    case JV_NONE:
        jb_puts(c, b, "None");
        return;
    case JV_BOOL:
        jb_puts(c, b, v.u.b ? "True" : "False");
        return;
    case JV_INT:
        jb_printf(c, b, "%lld", (long long)v.u.i);
        return;
    case JV_FLOAT:
        jx_fmt_float(v.u.f, t);
        jb_puts(c, b, t);
        return;
    case JV_STR:
        jb_put(c, b, v.u.s->s, v.u.s->len);
        return;
    case JV_LIST:
    case JV_DICT:
        jv_write_repr(c, b, v);
        return;
    case JV_NS: {
        jb_puts(c, b, "<Namespace ");
        jv d = v;
        d.t = JV_DICT;
        jv_write_repr(c, b, d);
        jb_putc(c, b, '>');
        return;
    }
    case JV_MACRO:
        jb_puts(c, b, "<Macro>");
        return;
    case JV_LOOP:
        jb_puts(c, b, "<LoopContext>");
        return;
    default:
        jb_printf(c, b, "<built-in method %s>", v.u.fn->name ? v.u.fn->name : "?");
        return;
    }
}
jv jv_to_str(jx_ctx *c, jv v) {
    if (v.t == JV_STR) return v;
    jbuf b = {0};
    jv_write_str(c, &b, v);
    return jv_buf_str(c, &b);
}

/* ---- json.dumps ---- */
static void json_str(jx_ctx *c, jbuf *b, const char *s, size_t n, bool ascii) {
    jb_putc(c, b, '"');
    size_t i = 0;
    while (i < n) {
        size_t st = i;
        uint32_t cp = jx_utf8_next(s, n, &i);
        switch (cp) {
        case '"':
            jb_puts(c, b, "\\\"");
            break;
        case '\\':
            jb_puts(c, b, "\\\\");
            break;
        case '\n':
            jb_puts(c, b, "\\n");
            break;
        case '\r':
            jb_puts(c, b, "\\r");
            break;
        case '\t':
            jb_puts(c, b, "\\t");
            break;
        case '\b':
            jb_puts(c, b, "\\b");
            break;
        case '\f':
            jb_puts(c, b, "\\f");
            break;
        default:
            if (cp < 0x20 || (ascii && cp >= 0x7F)) {
                if (cp >= 0x10000) {
                    uint32_t v = cp - 0x10000;
                    jb_printf(c, b, "\\u%04x\\u%04x", 0xD800 + (v >> 10), 0xDC00 + (v & 0x3FF));
                } else
                    jb_printf(c, b, "\\u%04x", cp);
            } else
                jb_put(c, b, s + st, i - st);
        }
    }
    jb_putc(c, b, '"');
}
static void json_newline(jx_ctx *c, jbuf *b, const jx_json_opts *o, int level) {
    jb_putc(c, b, '\n');
    for (int i = 0; i < level; i++)
        jb_puts(c, b, o->indent);
}
static void json_key(jx_ctx *c, int line, jbuf *b, jv k, const jx_json_opts *o) {
    char t[40];
    switch (k.t) {
    case JV_STR:
        json_str(c, b, k.u.s->s, k.u.s->len, o->ensure_ascii);
        return;
    case JV_INT:
        jb_printf(c, b, "\"%lld\"", (long long)k.u.i);
        return;
    case JV_FLOAT:
        jx_fmt_float(k.u.f, t);
        jb_printf(c, b, "\"%s\"", t);
        return;
    case JV_BOOL:
        jb_puts(c, b, k.u.b ? "\"true\"" : "\"false\"");
        return;
    case JV_NONE:
        jb_puts(c, b, "\"null\"");
        return;
    default:
        jx_fail(c, CMF_E_PARSE, line, "keys must be str, int, float, bool or None, not %s",
                jv_type_name(k));
    }
}
void jv_write_json(jx_ctx *c, int line, jbuf *b, jv v, const jx_json_opts *o, int level) {
    char t[40];
    if (level > 512) jx_fail(c, CMF_E_LIMIT, line, "tojson: nesting deeper than 512");
    switch (v.t) {
    case JV_NONE:
        jb_puts(c, b, "null");
        return;
    case JV_BOOL:
        jb_puts(c, b, v.u.b ? "true" : "false");
        return;
    case JV_INT:
        jb_printf(c, b, "%lld", (long long)v.u.i);
        return;
    case JV_FLOAT:
        if (isnan(v.u.f))
            jb_puts(c, b, "NaN");
        else if (isinf(v.u.f))
            jb_puts(c, b, v.u.f < 0 ? "-Infinity" : "Infinity");
        else {
            jx_fmt_float(v.u.f, t);
            jb_puts(c, b, t);
        }
        return;
    case JV_STR:
        json_str(c, b, v.u.s->s, v.u.s->len, o->ensure_ascii);
        return;
    case JV_LIST: {
        jlist *l = v.u.l;
        if (l->view)
            jx_fail(c, CMF_E_PARSE, line, "Object of type %s is not JSON serializable",
                    jv_type_name(v));
        if (!l->n) {
            jb_puts(c, b, "[]");
            return;
        }
        jb_putc(c, b, '[');
        if (o->indent) json_newline(c, b, o, level + 1);
        for (size_t i = 0; i < l->n; i++) {
            if (i) {
                jb_puts(c, b, o->item_sep);
                if (o->indent) json_newline(c, b, o, level + 1);
            }
            jv_write_json(c, line, b, l->v[i], o, level + 1);
        }
        if (o->indent) json_newline(c, b, o, level);
        jb_putc(c, b, ']');
        return;
    }
    case JV_DICT: {
        jdict *d = v.u.d;
        if (!d->n) {
            jb_puts(c, b, "{}");
            return;
        }
        size_t *ord = jx_alloc(c, d->n * sizeof *ord);
        for (size_t i = 0; i < d->n; i++)
            ord[i] = i;
        if (o->sort_keys) /* insertion sort: stable, dicts are small */
            for (size_t i = 1; i < d->n; i++)
                for (size_t j = i;
                     j > 0 && jv_cmp(c, line, d->k[ord[j - 1]], d->k[ord[j]], false) > 0; j--) {
                    size_t x = ord[j];
                    ord[j] = ord[j - 1];
                    ord[j - 1] = x;
                }
        jb_putc(c, b, '{');
        if (o->indent) json_newline(c, b, o, level + 1);
        for (size_t i = 0; i < d->n; i++) {
            if (i) {
                jb_puts(c, b, o->item_sep);
                if (o->indent) json_newline(c, b, o, level + 1);
            }
            json_key(c, line, b, d->k[ord[i]], o);
            jb_puts(c, b, o->key_sep);
            jv_write_json(c, line, b, d->v[ord[i]], o, level + 1);
        }
        if (o->indent) json_newline(c, b, o, level);
        jb_putc(c, b, '}');
        return;
    }
    default:
        jx_fail(c, CMF_E_PARSE, line, "Object of type %s is not JSON serializable",
                jv_type_name(v));
    }
}

/* ---- from jansson ---- */
jv jv_from_json(jx_ctx *c, json_t *j, int depth) {
    if (depth > 512) jx_fail(c, CMF_E_LIMIT, 0, "input JSON nests deeper than 512");
    switch (json_typeof(j)) {
    case JSON_OBJECT: {
        jv d = jv_dict(c, json_object_size(j));
        const char *k;
        json_t *val;
        json_object_foreach(j, k, val) {
            jv kv = jv_cstr(c, k);
            d.u.d->k[d.u.d->n] = kv;
            d.u.d->v[d.u.d->n] = jv_from_json(c, val, depth + 1);
            d.u.d->n++;
        }
        return d;
    }
    case JSON_ARRAY: {
        size_t n = json_array_size(j);
        jv l = jv_list(c, n);
        for (size_t i = 0; i < n; i++)
            l.u.l->v[i] = jv_from_json(c, json_array_get(j, i), depth + 1);
        l.u.l->n = n;
        return l;
    }
    case JSON_STRING:
        return jv_str(c, json_string_value(j), json_string_length(j));
    case JSON_INTEGER:
        return jv_int((int64_t)json_integer_value(j));
    case JSON_REAL:
        return jv_float(json_real_value(j));
    case JSON_TRUE:
        return jv_bool(true);
    case JSON_FALSE:
        return jv_bool(false);
    default:
        return jv_none();
    }
}
