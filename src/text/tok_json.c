/* tok_json.c - the read-only JSON DOM of tok_json.h (RFC 8259; strings must be valid UTF-8,
 * lone surrogate escapes are refused as serde_json refuses them). */
#include "text/tok_json.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "text/tok_internal.h"

#define MAX_DEPTH 128

typedef struct parser {
    tj_doc *d;
    char *s;
    size_t len, pos;
    const char *why;
} parser;

static bool fail(parser *p, const char *why) {
    if (!p->why) p->why = why;
    return false;
}

static bool new_node(parser *p, uint32_t *idx) {
    if (p->d->nn == p->d->cap) {
        size_t nc = p->d->cap ? p->d->cap * 2 : 1024;
        if (nc > UINT32_MAX) return fail(p, "too many values");
        tj_node *q = realloc(p->d->n, nc * sizeof *q);
        if (!q) return fail(p, "out of memory");
        p->d->n = q;
        p->d->cap = nc;
    }
    *idx = (uint32_t)p->d->nn++;
    memset(&p->d->n[*idx], 0, sizeof(tj_node));
    return true;
}

/* Locals, not p->pos: stores through char pointers elsewhere would force a reload per byte. */
static void skip_ws(parser *p) {
    const char *s = p->s;
    size_t i = p->pos, n = p->len;
    while (i < n) {
        char c = s[i];
        if (c != ' ' && c != '\n' && c != '\r' && c != '\t') break;
        i++;
    }
    p->pos = i;
}

static int hex4(const char *s) {
    int v = 0;
    for (int i = 0; i < 4; i++) {
        char c = s[i];
        int h = c >= '0' && c <= '9'   ? c - '0'
                : c >= 'a' && c <= 'f' ? c - 'a' + 10
                : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                       : -1;
        if (h < 0) return -1;
        v = v * 16 + h;
    }
    return v;
}

/* Parse a string at p->pos (on the opening quote), unescaping in place: the result occupies
 * s[start, start+len) where start is just after the quote (an escape never grows when decoded). */
static bool parse_string(parser *p, uint32_t *off, uint32_t *slen) {
    size_t start = ++p->pos, r = start;
    char *s = p->s;
    /* Most strings have no escape: find their end without moving bytes. */
    unsigned char seen = 0;
    while (r < p->len) {
        unsigned char c = (unsigned char)s[r];
        if (c == '"' || c == '\\' || c < 0x20) break;
        seen |= c;
        r++;
    }
    size_t w = r;
    bool ascii = seen < 0x80;
    for (;;) {
        if (r >= p->len) return fail(p, "unterminated string");
        unsigned char c = (unsigned char)s[r];
        if (c == '"') break;
        if (c < 0x20) return fail(p, "control character in string");
        if (c != '\\') {
            if (c >= 0x80) ascii = false;
            s[w++] = s[r++];
            continue;
        }
        if (r + 1 >= p->len) return fail(p, "unterminated escape");
        char e = s[r + 1];
        r += 2;
        switch (e) {
        case '"':
            s[w++] = '"';
            break;
        case '\\':
            s[w++] = '\\';
            break;
        case '/':
            s[w++] = '/';
            break;
        case 'b':
            s[w++] = '\b';
            break;
        case 'f':
            s[w++] = '\f';
            break;
        case 'n':
            s[w++] = '\n';
            break;
        case 'r':
            s[w++] = '\r';
            break;
        case 't':
            s[w++] = '\t';
            break;
        case 'u': {
            if (r + 4 > p->len) return fail(p, "short \\u escape");
            int v = hex4(s + r);
            if (v < 0) return fail(p, "bad \\u escape");
            r += 4;
            uint32_t cp = (uint32_t)v;
            if (cp >= 0xD800 && cp <= 0xDBFF) {
                int lo =
                    (r + 6 <= p->len && s[r] == '\\' && s[r + 1] == 'u') ? hex4(s + r + 2) : -1;
                if (lo < 0xDC00 || lo > 0xDFFF) return fail(p, "lone surrogate in \\u escape");
                cp = 0x10000 + ((cp - 0xD800) << 10) + ((uint32_t)lo - 0xDC00);
                r += 6;
            } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
                return fail(p, "lone surrogate in \\u escape");
            }
            char enc[4];
            size_t n = tok_utf8_encode(cp, enc);
            memcpy(s + w, enc, n);
            w += n;
            break;
        }
        default:
            return fail(p, "bad escape");
        }
    }
    p->pos = r + 1;
    if (!ascii) {
        tok_buf unused = {0};
        bool alloc_ok;
        if (!tok_utf8_sanitize(s + start, w - start, &unused, &alloc_ok)) {
            tok_buf_free(&unused);
            return fail(p, "invalid UTF-8 in string");
        }
    }
    *off = (uint32_t)start;
    *slen = (uint32_t)(w - start);
    return true;
}

/* Powers of ten as correctly rounded doubles (the table serde_json multiplies/divides by). */
static double pow10_table[309];
static pthread_once_t pow10_once = PTHREAD_ONCE_INIT;
static void pow10_init(void) {
    for (int i = 0; i < 309; i++) {
        char b[16];
        snprintf(b, sizeof b, "1e%d", i);
        pow10_table[i] = strtod(b, NULL);
    }
}

/* A decimal the way serde_json (HF's JSON reader, without float_roundtrip) turns it into a double:
 * the digits as a u64, converted to double, then one multiply or divide by 10^|exp|. That can be
 * one ulp away from strtod, and Unigram scores must be bit-identical for ties to break the same
 * way. Returns false when the significand overflows u64 (the caller then uses strtod). */
static bool serde_f64(const char *s, size_t n, double *out) {
    size_t i = 0;
    bool neg = false, frac = false;
    uint64_t sig = 0;
    long exp10 = 0;
    if (i < n && s[i] == '-') {
        neg = true;
        i++;
    }
    for (; i < n && s[i] != 'e' && s[i] != 'E'; i++) {
        if (s[i] == '.') {
            frac = true;
            continue;
        }
        uint64_t d = (uint64_t)(s[i] - '0');
        if (sig > (UINT64_MAX - d) / 10) return false;
        sig = sig * 10 + d;
        if (frac) exp10--;
    }
    if (i < n) { /* exponent */
        i++;
        bool eneg = false;
        if (i < n && (s[i] == '+' || s[i] == '-')) eneg = s[i++] == '-';
        long e = 0;
        for (; i < n; i++)
            e = e < 100000 ? e * 10 + (s[i] - '0') : e;
        exp10 += eneg ? -e : e;
    }
    pthread_once(&pow10_once, pow10_init);
    double f = (double)sig;
    for (;;) {
        long a = exp10 < 0 ? -exp10 : exp10;
        if (a <= 308) {
            f = exp10 >= 0 ? f * pow10_table[a] : f / pow10_table[a];
            break;
        }
        if (f == 0.0) break;
        if (exp10 >= 0) return false; /* overflow: let strtod give inf */
        f /= 1e308;
        exp10 += 308;
    }
    *out = neg ? -f : f;
    return true;
}

static bool parse_number(parser *p, tj_node *n) {
    size_t b = p->pos, i = b;
    const char *s = p->s;
    bool is_int = true;
    if (i < p->len && s[i] == '-') i++;
    if (i >= p->len || s[i] < '0' || s[i] > '9') return fail(p, "bad number");
    if (s[i] == '0')
        i++;
    else
        while (i < p->len && s[i] >= '0' && s[i] <= '9')
            i++;
    if (i < p->len && s[i] == '.') {
        is_int = false;
        i++;
        if (i >= p->len || s[i] < '0' || s[i] > '9') return fail(p, "bad number");
        while (i < p->len && s[i] >= '0' && s[i] <= '9')
            i++;
    }
    if (i < p->len && (s[i] == 'e' || s[i] == 'E')) {
        is_int = false;
        i++;
        if (i < p->len && (s[i] == '+' || s[i] == '-')) i++;
        if (i >= p->len || s[i] < '0' || s[i] > '9') return fail(p, "bad number");
        while (i < p->len && s[i] >= '0' && s[i] <= '9')
            i++;
    }
    p->pos = i;
    n->type = TJ_NUM;
    char tmp[64];
    size_t k = i - b;
    if (k >= sizeof tmp) return fail(p, "number longer than 63 characters");
    memcpy(tmp, s + b, k);
    tmp[k] = 0;
    if (is_int && k <= 18) { /* "-?[0-9]{1,18}": fits int64 */
        int64_t v = 0;
        for (size_t d = tmp[0] == '-'; d < k; d++)
            v = v * 10 + (tmp[d] - '0');
        n->is_int = 1;
        n->v.i = tmp[0] == '-' ? -v : v;
    } else if (!serde_f64(tmp, k, &n->v.d)) {
        n->v.d = strtod(tmp, NULL);
    }
    return true;
}

static bool parse_value(parser *p, uint32_t idx, int depth);

static bool parse_container(parser *p, uint32_t idx, int depth, bool obj) {
    if (depth > MAX_DEPTH) return fail(p, "nesting deeper than 128");
    p->pos++;
    p->d->n[idx].type = obj ? TJ_OBJ : TJ_ARR;
    uint32_t last = 0, count = 0;
    skip_ws(p);
    if (p->pos < p->len && p->s[p->pos] == (obj ? '}' : ']')) {
        p->pos++;
        return true;
    }
    for (;;) {
        uint32_t koff = 0, klen = 0;
        skip_ws(p);
        if (obj) {
            if (p->pos >= p->len || p->s[p->pos] != '"') return fail(p, "expected a member name");
            if (!parse_string(p, &koff, &klen)) return false;
            skip_ws(p);
            if (p->pos >= p->len || p->s[p->pos] != ':') return fail(p, "expected ':'");
            p->pos++;
        }
        uint32_t child;
        if (!new_node(p, &child)) return false;
        p->d->n[child].koff = koff;
        p->d->n[child].klen = klen;
        if (!parse_value(p, child, depth + 1)) return false;
        if (last)
            p->d->n[last].next = child;
        else
            p->d->n[idx].v.first = child;
        last = child;
        count++;
        skip_ws(p);
        if (p->pos >= p->len) return fail(p, "unterminated container");
        char c = p->s[p->pos++];
        if (c == ',') continue;
        if (c == (obj ? '}' : ']')) break;
        return fail(p, obj ? "expected ',' or '}'" : "expected ',' or ']'");
    }
    p->d->n[idx].len = count;
    return true;
}

static bool lit(parser *p, const char *w, size_t n) {
    if (p->len - p->pos < n || memcmp(p->s + p->pos, w, n) != 0) return fail(p, "invalid literal");
    p->pos += n;
    return true;
}

static bool parse_value(parser *p, uint32_t idx, int depth) {
    skip_ws(p);
    if (p->pos >= p->len) return fail(p, "unexpected end of input");
    char c = p->s[p->pos];
    tj_node *n = &p->d->n[idx];
    switch (c) {
    case '{':
        return parse_container(p, idx, depth, true);
    case '[':
        return parse_container(p, idx, depth, false);
    case '"': {
        uint32_t off, len;
        if (!parse_string(p, &off, &len)) return false;
        n = &p->d->n[idx];
        n->type = TJ_STR;
        n->v.off = off;
        n->len = len;
        return true;
    }
    case 't':
        n->type = TJ_TRUE;
        return lit(p, "true", 4);
    case 'f':
        n->type = TJ_FALSE;
        return lit(p, "false", 5);
    case 'n':
        n->type = TJ_NULL;
        return lit(p, "null", 4);
    default:
        return parse_number(p, n);
    }
}

cmf_status tj_parse(const char *json, size_t len, tj_doc *doc, cmf_err *err) {
    memset(doc, 0, sizeof *doc);
    if (len >= UINT32_MAX)
        return cmf_err_set(err, CMF_E_LIMIT, "tokenizer.json", "%zu bytes: over 4 GiB", len);
    doc->buf = tok_big_alloc(len + 1);
    if (!doc->buf) return cmf_err_set(err, CMF_E_NOMEM, "tokenizer.json", "out of memory");
    if (len) memcpy(doc->buf, json, len);
    doc->buf[len] = 0;
    /* Size the node array from the input once (tokenizer.json files hold one value per ~10-20
     * bytes) instead of doubling it from small: each doubling copied every node so far. */
    size_t guess = len / 8 + 1024;
    if (guess <= SIZE_MAX / sizeof *doc->n && (doc->n = tok_big_alloc(guess * sizeof *doc->n)))
        doc->cap = guess;
    parser p = {doc, doc->buf, len, 0, NULL};
    uint32_t root;
    bool ok = new_node(&p, &root) && parse_value(&p, root, 0);
    if (ok) {
        skip_ws(&p);
        if (p.pos != len) ok = fail(&p, "trailing characters after the value");
    }
    if (ok) return CMF_OK;
    /* line and column of the failure, counted in the original input */
    size_t line = 1, col = 1;
    for (size_t i = 0; i < p.pos && i < len; i++) {
        if (json[i] == '\n') {
            line++;
            col = 1;
        } else {
            col++;
        }
    }
    tj_free(doc);
    bool oom = p.why && !strcmp(p.why, "out of memory");
    return cmf_err_set(err, oom ? CMF_E_NOMEM : CMF_E_PARSE, "tokenizer.json",
                       "invalid JSON at line %zu column %zu: %s", line, col, p.why ? p.why : "?");
}

void tj_free(tj_doc *doc) {
    free(doc->buf);
    free(doc->n);
    memset(doc, 0, sizeof *doc);
}

tjv tj_root(const tj_doc *doc) {
    return (tjv){doc->nn ? doc : NULL, 0};
}

tj_type tj_typeof(tjv v) {
    return v.d ? (tj_type)v.d->n[v.i].type : TJ_NONE;
}

tjv tj_first(tjv v) {
    tj_type t = tj_typeof(v);
    if ((t != TJ_ARR && t != TJ_OBJ) || v.d->n[v.i].len == 0) return (tjv){NULL, 0};
    return (tjv){v.d, v.d->n[v.i].v.first};
}

tjv tj_next(tjv v) {
    if (!v.d || v.d->n[v.i].next == 0) return (tjv){NULL, 0};
    return (tjv){v.d, v.d->n[v.i].next};
}

tjv tj_get(tjv obj, const char *key) {
    if (tj_typeof(obj) != TJ_OBJ) return (tjv){NULL, 0};
    size_t kl = strlen(key);
    for (tjv c = tj_first(obj); c.d; c = tj_next(c)) {
        const tj_node *n = &c.d->n[c.i];
        if (n->klen == kl && memcmp(c.d->buf + n->koff, key, kl) == 0) return c;
    }
    return (tjv){NULL, 0};
}

tjv tj_at(tjv arr, size_t i) {
    tjv c = tj_first(arr);
    while (c.d && i--)
        c = tj_next(c);
    return c;
}

size_t tj_size(tjv v) {
    tj_type t = tj_typeof(v);
    return (t == TJ_ARR || t == TJ_OBJ) ? v.d->n[v.i].len : 0;
}

const char *tj_str(tjv v, size_t *len) {
    if (tj_typeof(v) != TJ_STR) return NULL;
    if (len) *len = v.d->n[v.i].len;
    return v.d->buf + v.d->n[v.i].v.off;
}

const char *tj_key(tjv v, size_t *len) {
    if (!v.d) return NULL;
    if (len) *len = v.d->n[v.i].klen;
    return v.d->buf + v.d->n[v.i].koff;
}

bool tj_bool(tjv v, bool def) {
    tj_type t = tj_typeof(v);
    return t == TJ_TRUE ? true : t == TJ_FALSE ? false : def;
}

bool tj_int(tjv v, int64_t *out) {
    if (tj_typeof(v) != TJ_NUM || !v.d->n[v.i].is_int) return false;
    *out = v.d->n[v.i].v.i;
    return true;
}

double tj_num(tjv v) {
    if (tj_typeof(v) != TJ_NUM) return 0.0;
    return v.d->n[v.i].is_int ? (double)v.d->n[v.i].v.i : v.d->n[v.i].v.d;
}

bool tj_streq(tjv v, const char *s) {
    size_t n;
    const char *p = tj_str(v, &n);
    return p && n == strlen(s) && memcmp(p, s, n) == 0;
}
