/* jinja_lex.c - split template source into text and tag tokens, applying whitespace control
 * the way jinja2 does with transformers' settings: newlines normalised to "\n", one trailing
 * newline dropped, trim_blocks (a block or comment tag eats the newline after it),
 * lstrip_blocks (spaces before a block or comment tag on its own line are dropped),
 * "-" modifiers strip all whitespace on that side, "+" disables lstrip/trim. */
#include <stdlib.h>
#include <string.h>

#include "text/jinja_internal.h"

typedef struct lexer {
    jx_ctx *c;
    const char *s;
    size_t n, pos;
    int line;
    bool line_starting;
    jtok *toks;
    size_t ntok, cap;
} lexer;

static jtok *emit(lexer *L, jtok_type t, int line) {
    if (L->ntok == L->cap) {
        size_t cap = L->cap ? L->cap * 2 : 256;
        jtok *nt = jx_alloc(L->c, cap * sizeof(jtok));
        if (L->ntok) memcpy(nt, L->toks, L->ntok * sizeof(jtok));
        L->toks = nt;
        L->cap = cap;
    }
    jtok *t2 = &L->toks[L->ntok++];
    memset(t2, 0, sizeof *t2);
    t2->type = (uint8_t)t;
    t2->line = line;
    return t2;
}

static bool is_ws(char ch) {
    return ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r' || ch == '\v' || ch == '\f';
}

/* Python's \s / str.isspace() includes Unicode spaces (NBSP, U+3000, ...): the length of the
 * whitespace code point at s[i] (0 if none). */
static size_t ws_len(const char *s, size_t n, size_t i) {
    if (i >= n) return 0;
    if ((unsigned char)s[i] < 0x80) return jx_is_space((unsigned char)s[i]) ? 1 : 0;
    size_t j = i;
    uint32_t cp = jx_utf8_next(s, n, &j);
    return jx_is_space(cp) ? j - i : 0;
}
static size_t skip_ws(const char *s, size_t n, size_t i) {
    size_t k;
    while ((k = ws_len(s, n, i)) > 0)
        i += k;
    return i;
}
/* length of t[0..n) without its trailing (Unicode) whitespace */
static size_t rstrip_len(const char *t, size_t n) {
    while (n) {
        size_t st = n - 1;
        while (st > 0 && ((unsigned char)t[st] & 0xC0) == 0x80)
            st--;
        if (ws_len(t, n, st) != n - st) break;
        n = st;
    }
    return n;
}

static void emit_text(lexer *L, const char *s, size_t n, int line) {
    if (!n) return;
    jtok *t = emit(L, TK_TEXT, line);
    char *d = jx_alloc(L->c, n + 1);
    memcpy(d, s, n);
    t->s = d;
    t->len = n;
}

static int count_nl(const char *s, size_t n) {
    int k = 0;
    for (size_t i = 0; i < n; i++)
        k += s[i] == '\n';
    return k;
}

/* Find the next "{{", "{%" or "{#" at or after pos; returns n when none. */
static size_t find_tag(const lexer *L, size_t pos) {
    for (size_t i = pos; i + 1 < L->n; i++)
        if (L->s[i] == '{' && (L->s[i + 1] == '{' || L->s[i + 1] == '%' || L->s[i + 1] == '#'))
            return i;
    return L->n;
}

/* Text before a tag, with the tag's left-side whitespace control applied. */
static void text_before_tag(lexer *L, size_t start, size_t end, char kind, char mod) {
    const char *t = L->s + start;
    size_t n = end - start;
    int line = L->line;
    L->line += count_nl(t, n);
    if (mod == '-') {
        n = rstrip_len(t, n);
    } else if (mod != '+' && kind != '{') {
        size_t l_pos = n;
        while (l_pos && t[l_pos - 1] != '\n')
            l_pos--;
        if ((l_pos > 0 || L->line_starting) && l_pos < n) {
            if (skip_ws(t, n, l_pos) == n) n = l_pos;
        }
    }
    emit_text(L, t, n, line);
}

/* After a tag's closing delimiter: "-" strips following whitespace, trim_blocks eats one
 * newline after block/comment tags, "+" keeps everything. */
static void after_tag(lexer *L, char kind, char mod) {
    size_t st = L->pos;
    if (mod == '-') {
        L->pos = skip_ws(L->s, L->n, L->pos);
    } else if (mod != '+' && kind != '{') {
        if (L->pos < L->n && L->s[L->pos] == '\n') L->pos++;
    }
    L->line += count_nl(L->s + st, L->pos - st);
    if (L->pos > st) L->line_starting = L->s[L->pos - 1] == '\n';
}

static void hex_escape(lexer *L, const char *s, size_t *i, size_t end, int digits, jbuf *b) {
    uint32_t v = 0;
    for (int k = 0; k < digits; k++) {
        if (*i + 1 >= end)
            jx_fail(L->c, CMF_E_PARSE, L->line, "truncated \\x/\\u escape in string");
        char h = s[*i + 1];
        int d = (h >= '0' && h <= '9')   ? h - '0'
                : (h >= 'a' && h <= 'f') ? h - 'a' + 10
                : (h >= 'A' && h <= 'F') ? h - 'A' + 10
                                         : -1;
        if (d < 0) jx_fail(L->c, CMF_E_PARSE, L->line, "bad hex digit in string escape");
        v = v * 16 + (uint32_t)d;
        (*i)++;
    }
    if (v > 0x10FFFF) jx_fail(L->c, CMF_E_PARSE, L->line, "string escape out of range");
    jb_put_cp(L->c, b, v);
}

/* A string literal: Python escapes are decoded (jinja2 uses unicode-escape). */
static void lex_string(lexer *L) {
    char q = L->s[L->pos];
    size_t i = L->pos + 1;
    int line = L->line;
    jbuf b = {0};
    for (;;) {
        if (i >= L->n) jx_fail(L->c, CMF_E_PARSE, line, "unterminated string literal");
        char ch = L->s[i];
        if (ch == q) break;
        if (ch == '\n') L->line++;
        if (ch != '\\') {
            jb_putc(L->c, &b, ch);
            i++;
            continue;
        }
        if (i + 1 >= L->n) jx_fail(L->c, CMF_E_PARSE, line, "unterminated string literal");
        char e = L->s[i + 1];
        i++;
        switch (e) {
        case 'n':
            jb_putc(L->c, &b, '\n');
            break;
        case 't':
            jb_putc(L->c, &b, '\t');
            break;
        case 'r':
            jb_putc(L->c, &b, '\r');
            break;
        case '\\':
            jb_putc(L->c, &b, '\\');
            break;
        case '\'':
            jb_putc(L->c, &b, '\'');
            break;
        case '"':
            jb_putc(L->c, &b, '"');
            break;
        case 'a':
            jb_putc(L->c, &b, '\a');
            break;
        case 'b':
            jb_putc(L->c, &b, '\b');
            break;
        case 'f':
            jb_putc(L->c, &b, '\f');
            break;
        case 'v':
            jb_putc(L->c, &b, '\v');
            break;
        case '\n':
            L->line++;
            break;
        case 'x':
            hex_escape(L, L->s, &i, L->n, 2, &b);
            break;
        case 'u':
            hex_escape(L, L->s, &i, L->n, 4, &b);
            break;
        case 'U':
            hex_escape(L, L->s, &i, L->n, 8, &b);
            break;
        default:
            if (e >= '0' && e <= '7') {
                uint32_t v = (uint32_t)(e - '0');
                for (int k = 0; k < 2 && i + 1 < L->n && L->s[i + 1] >= '0' && L->s[i + 1] <= '7';
                     k++)
                    v = v * 8 + (uint32_t)(L->s[++i] - '0');
                jb_put_cp(L->c, &b, v);
            } else {
                jb_putc(L->c, &b, '\\');
                jb_putc(L->c, &b, e);
                if (e == q) {
                    /* unreachable: handled above */
                }
            }
        }
        i++;
    }
    jtok *t = emit(L, TK_STRING, line);
    t->s = b.p ? b.p : "";
    t->len = b.n;
    L->pos = i + 1;
}

static void lex_number(lexer *L) {
    const char *s = L->s;
    size_t i = L->pos, st = i;
    char digits[64];
    size_t nd = 0;
    bool is_float = false;
    if (s[i] == '0' && i + 1 < L->n && strchr("xXoObB", s[i + 1]) && s[i + 1]) {
        int base = (s[i + 1] | 32) == 'x' ? 16 : (s[i + 1] | 32) == 'o' ? 8 : 2;
        i += 2;
        int64_t v = 0;
        size_t cnt = 0;
        for (; i < L->n; i++) {
            char h = s[i];
            if (h == '_') continue;
            int d = (h >= '0' && h <= '9')                 ? h - '0'
                    : ((h | 32) >= 'a' && (h | 32) <= 'f') ? (h | 32) - 'a' + 10
                                                           : 99;
            if (d >= base) break;
            if (v > (INT64_MAX - d) / base)
                jx_fail(L->c, CMF_E_LIMIT, L->line, "integer literal too large");
            v = v * base + d;
            cnt++;
        }
        if (!cnt) jx_fail(L->c, CMF_E_PARSE, L->line, "bad number literal");
        jtok *t = emit(L, TK_INT, L->line);
        t->i = v;
        L->pos = i;
        return;
    }
    bool too_long = false;
#define PUSHD(ch)                                                                                  \
    do {                                                                                           \
        if (nd < sizeof digits - 1)                                                                \
            digits[nd++] = (ch);                                                                   \
        else                                                                                       \
            too_long = true;                                                                       \
    } while (0)
    while (i < L->n && ((s[i] >= '0' && s[i] <= '9') ||
                        (s[i] == '_' && i + 1 < L->n && s[i + 1] >= '0' && s[i + 1] <= '9'))) {
        if (s[i] != '_') PUSHD(s[i]);
        i++;
    }
    if (i + 1 < L->n && s[i] == '.' && s[i + 1] >= '0' && s[i + 1] <= '9') {
        is_float = true;
        PUSHD('.');
        i++;
        while (i < L->n && ((s[i] >= '0' && s[i] <= '9') || s[i] == '_')) {
            if (s[i] != '_') PUSHD(s[i]);
            i++;
        }
    }
    if (i < L->n && (s[i] | 32) == 'e') {
        size_t j = i + 1;
        if (j < L->n && (s[j] == '+' || s[j] == '-')) j++;
        if (j < L->n && s[j] >= '0' && s[j] <= '9') {
            is_float = true;
            PUSHD('e');
            for (size_t k = i + 1; k < j; k++)
                PUSHD(s[k]);
            i = j;
            while (i < L->n && s[i] >= '0' && s[i] <= '9') {
                PUSHD(s[i]);
                i++;
            }
        }
    }
#undef PUSHD
    digits[nd] = 0;
    if (too_long) jx_fail(L->c, CMF_E_LIMIT, L->line, "number literal too long");
    jtok *t = emit(L, is_float ? TK_FLOAT : TK_INT, L->line);
    if (is_float)
        t->f = strtod(digits, NULL);
    else {
        int64_t v = 0;
        for (size_t k = 0; k < nd; k++) {
            int d = digits[k] - '0';
            if (v > (INT64_MAX - d) / 10)
                jx_fail(L->c, CMF_E_LIMIT, L->line, "integer literal too large");
            v = v * 10 + d;
        }
        t->i = v;
    }
    (void)st;
    L->pos = i;
}

static const char *const k_ops[OP__COUNT] = {
    [OP_ADD] = "+",      [OP_SUB] = "-",      [OP_DIV] = "/",    [OP_FLOORDIV] = "//",
    [OP_MUL] = "*",      [OP_MOD] = "%",      [OP_POW] = "**",   [OP_TILDE] = "~",
    [OP_LBRACKET] = "[", [OP_RBRACKET] = "]", [OP_LPAREN] = "(", [OP_RPAREN] = ")",
    [OP_LBRACE] = "{",   [OP_RBRACE] = "}",   [OP_EQ] = "==",    [OP_NE] = "!=",
    [OP_GT] = ">",       [OP_GE] = ">=",      [OP_LT] = "<",     [OP_LE] = "<=",
    [OP_ASSIGN] = "=",   [OP_DOT] = ".",      [OP_COLON] = ":",  [OP_PIPE] = "|",
    [OP_COMMA] = ",",    [OP_SEMI] = ";",
};

/* Tokens inside {{ }} or {% %} up to the closing delimiter (only at bracket depth 0). */
static void lex_tag(lexer *L, char kind) {
    char close = kind == '{' ? '}' : '%';
    int depth = 0;
    int start_line = L->line;
    char stack[256];
    for (;;) {
        for (size_t k; (k = ws_len(L->s, L->n, L->pos)) > 0; L->pos += k)
            if (L->s[L->pos] == '\n') L->line++;
        if (L->pos >= L->n)
            jx_fail(L->c, CMF_E_PARSE, start_line, "unexpected end of template, expected '%s'",
                    kind == '{' ? "}}" : "%}");
        const char *p = L->s + L->pos;
        size_t rem = L->n - L->pos;
        if (depth == 0) {
            char mod = 0;
            size_t skip = 0;
            if ((p[0] == '-' || p[0] == '+') && rem >= 3 && p[1] == close && p[2] == '}') {
                mod = p[0];
                skip = 3;
            } else if (rem >= 2 && p[0] == close && p[1] == '}')
                skip = 2;
            if (skip) {
                emit(L, kind == '{' ? TK_VAR_END : TK_BLOCK_END, L->line);
                L->pos += skip;
                L->line_starting = false;
                after_tag(L, kind, mod);
                return;
            }
        }
        char ch = p[0];
        if (ch == '\'' || ch == '"') {
            lex_string(L);
            continue;
        }
        if (ch >= '0' && ch <= '9') {
            lex_number(L);
            continue;
        }
        if ((ch | 32) >= 'a' && (ch | 32) <= 'z' ? 1 : (ch == '_' || (unsigned char)ch >= 0x80)) {
            size_t i = L->pos;
            while (i < L->n && (((L->s[i] | 32) >= 'a' && (L->s[i] | 32) <= 'z') ||
                                (L->s[i] >= '0' && L->s[i] <= '9') || L->s[i] == '_' ||
                                (unsigned char)L->s[i] >= 0x80))
                i++;
            jtok *t = emit(L, TK_NAME, L->line);
            char *d = jx_alloc(L->c, i - L->pos + 1);
            memcpy(d, p, i - L->pos);
            t->s = d;
            t->len = i - L->pos;
            L->pos = i;
            continue;
        }
        int best = -1;
        size_t best_len = 0;
        for (int k = 0; k < OP__COUNT; k++) {
            size_t ol = strlen(k_ops[k]);
            if (ol <= rem && ol > best_len && !memcmp(p, k_ops[k], ol)) {
                best = k;
                best_len = ol;
            }
        }
        if (best < 0) jx_fail(L->c, CMF_E_PARSE, L->line, "unexpected character '%c'", ch);
        if (best == OP_LPAREN || best == OP_LBRACKET || best == OP_LBRACE) {
            if (depth >= (int)sizeof stack)
                jx_fail(L->c, CMF_E_LIMIT, L->line, "brackets nest too deeply");
            stack[depth++] = best == OP_LPAREN ? ')' : best == OP_LBRACKET ? ']' : '}';
        } else if (best == OP_RPAREN || best == OP_RBRACKET || best == OP_RBRACE) {
            if (depth == 0) jx_fail(L->c, CMF_E_PARSE, L->line, "unexpected '%s'", k_ops[best]);
            if (stack[depth - 1] != k_ops[best][0])
                jx_fail(L->c, CMF_E_PARSE, L->line, "unexpected '%s', expected '%c'", k_ops[best],
                        stack[depth - 1]);
            depth--;
        }
        jtok *t = emit(L, TK_OP, L->line);
        t->op = (uint8_t)best;
        L->pos += best_len;
    }
}

/* "{% raw %}": returns true and emits the raw text when the block at L->pos is one. */
static bool try_raw(lexer *L, size_t tag, char mod_in) {
    size_t i = tag + 2 + (mod_in ? 1 : 0);
    while (i < L->n && is_ws(L->s[i]))
        i++;
    if (L->n - i < 3 || memcmp(L->s + i, "raw", 3)) return false;
    i += 3;
    while (i < L->n && is_ws(L->s[i]))
        i++;
    char mod_out = 0;
    if (i < L->n && (L->s[i] == '-' || L->s[i] == '+')) mod_out = L->s[i++];
    if (L->n - i < 2 || L->s[i] != '%' || L->s[i + 1] != '}') return false;
    i += 2;
    if (mod_out == '-')
        while (i < L->n && is_ws(L->s[i]))
            i++;
    /* find {%[-+]? endraw [-+]?%} */
    for (size_t j = i; j + 1 < L->n; j++) {
        if (L->s[j] != '{' || L->s[j + 1] != '%') continue;
        size_t k = j + 2;
        char m1 = 0;
        if (k < L->n && (L->s[k] == '-' || L->s[k] == '+')) m1 = L->s[k++];
        while (k < L->n && is_ws(L->s[k]))
            k++;
        if (L->n - k < 6 || memcmp(L->s + k, "endraw", 6)) continue;
        k += 6;
        while (k < L->n && is_ws(L->s[k]))
            k++;
        char m2 = 0;
        if (k < L->n && (L->s[k] == '-' || L->s[k] == '+')) m2 = L->s[k++];
        if (L->n - k < 2 || L->s[k] != '%' || L->s[k + 1] != '}') continue;
        size_t tn = j - i;
        if (m1 == '-') tn = rstrip_len(L->s + i, tn);
        L->line += count_nl(L->s + tag, i - tag);
        emit_text(L, L->s + i, tn, L->line);
        L->line += count_nl(L->s + i, k + 2 - i);
        L->pos = k + 2;
        L->line_starting = false;
        after_tag(L, '%', m2);
        return true;
    }
    jx_fail(L->c, CMF_E_PARSE, L->line, "missing {%% endraw %%}");
}

jtok *jx_lex(jx_ctx *c, const char *src, size_t len, size_t *ntok) {
    /* normalise newlines, drop one trailing newline (keep_trailing_newline=False) */
    char *s = jx_alloc(c, len + 1);
    size_t n = 0;
    for (size_t i = 0; i < len; i++) {
        if (src[i] == '\r') {
            s[n++] = '\n';
            if (i + 1 < len && src[i + 1] == '\n') i++;
        } else
            s[n++] = src[i];
    }
    if (n && s[n - 1] == '\n') n--;
    s[n] = 0;
    lexer L = {.c = c, .s = s, .n = n, .line = 1, .line_starting = true};
    while (L.pos < L.n) {
        size_t tag = find_tag(&L, L.pos);
        if (tag >= L.n) {
            emit_text(&L, L.s + L.pos, L.n - L.pos, L.line);
            L.line += count_nl(L.s + L.pos, L.n - L.pos);
            break;
        }
        char kind = L.s[tag + 1];
        char mod = 0;
        if (tag + 2 < L.n && (L.s[tag + 2] == '-' || L.s[tag + 2] == '+')) mod = L.s[tag + 2];
        text_before_tag(&L, L.pos, tag, kind, mod);
        L.pos = tag + 2 + (mod ? 1 : 0);
        if (kind == '#') {
            size_t j = L.pos;
            while (j + 1 < L.n && !(L.s[j] == '#' && L.s[j + 1] == '}'))
                j++;
            if (j + 1 >= L.n) jx_fail(c, CMF_E_PARSE, L.line, "missing end of comment tag");
            char cm = (j > L.pos && (L.s[j - 1] == '-' || L.s[j - 1] == '+')) ? L.s[j - 1] : 0;
            L.line += count_nl(L.s + L.pos, j + 2 - L.pos);
            L.pos = j + 2;
            L.line_starting = false;
            after_tag(&L, '#', cm);
            continue;
        }
        if (kind == '%' && try_raw(&L, tag, mod)) continue;
        emit(&L, kind == '{' ? TK_VAR_BEGIN : TK_BLOCK_BEGIN, L.line);
        lex_tag(&L, kind);
    }
    emit(&L, TK_EOF, L.line);
    *ntok = L.ntok;
    return L.toks;
}
