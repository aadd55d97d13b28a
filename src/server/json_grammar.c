/* json_grammar.c - a JSON schema subset compiled into a byte-level pushdown automaton (see
 * json_grammar.h). Each schema node says what one value may be; the state is a stack of frames,
 * one per value being read (an object, an array, a string, a number, a literal from a fixed
 * set, an object key). A frame that ends pops itself; its parent set, before pushing it, the
 * phase that follows it. */
#include "server/json_grammar.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum { N_ANY, N_ANYOBJ, N_OBJ, N_ARR, N_STR, N_NUM, N_INT, N_LIT, N_UNION } node_kind;

typedef struct node {
    node_kind kind;
    uint32_t items;    /* N_ARR: the items' node */
    uint32_t n;        /* N_OBJ: properties; N_LIT: texts; N_UNION: alternatives */
    char **texts;      /* N_OBJ: the keys as JSON strings ("name"); N_LIT: the values as JSON */
    size_t *lens;      /* their lengths */
    uint32_t *kids;    /* N_OBJ: each property's node; N_UNION: the alternatives */
    uint64_t required; /* N_OBJ: bit i = property i is required */
} node;

struct jg_grammar {
    node *nodes;
    uint32_t n, cap;
};

/* built-in nodes, present in every grammar */
enum { B_ANY, B_ANYOBJ, B_ANYARR, B_STR, B_NUM, B_BOOL, B_NULL, B_COUNT };

enum { F_VAL, F_OBJ, F_ARR, F_STR, F_NUM, F_LIT, F_KEY };
enum { O_OPEN, O_NEXT, O_COLON, O_AFTER };
enum { A_OPEN, A_AFTER };
/* string phases; U_*: the next byte is the second of a character whose lead byte narrows it
 * (no overlong forms, no surrogates, nothing past U+10FFFF) */
enum { S_PLAIN, S_ESC, U_E0, U_ED, U_F0, U_F4 };
/* number phases */
enum { M_START, M_MINUS, M_ZERO, M_INT, M_DOT, M_FRAC, M_E, M_ESIGN, M_EXP };
#define MAX_DIGITS 16
#define MAX_EXP    2

static uint32_t add_node(jg_grammar *g, node_kind k) {
    if (g->n == g->cap) {
        uint32_t cap = g->cap ? g->cap * 2 : 16;
        node *nn = realloc(g->nodes, cap * sizeof *nn);
        if (!nn) return UINT32_MAX;
        g->nodes = nn;
        g->cap = cap;
    }
    memset(&g->nodes[g->n], 0, sizeof g->nodes[g->n]);
    g->nodes[g->n].kind = k;
    return g->n++;
}

static bool set_texts(node *nd, const char *const *t, uint32_t n) {
    nd->texts = calloc(n ? n : 1, sizeof *nd->texts);
    nd->lens = calloc(n ? n : 1, sizeof *nd->lens);
    if (!nd->texts || !nd->lens) return false;
    nd->n = n;
    for (uint32_t i = 0; i < n; i++) {
        nd->lens[i] = strlen(t[i]);
        nd->texts[i] = malloc(nd->lens[i] + 1);
        if (!nd->texts[i]) return false;
        memcpy(nd->texts[i], t[i], nd->lens[i] + 1);
    }
    return true;
}

static jg_grammar *new_grammar(void) {
    jg_grammar *g = calloc(1, sizeof *g);
    if (!g) return NULL;
    static const node_kind k[B_COUNT] = {N_ANY, N_ANYOBJ, N_ARR, N_STR, N_NUM, N_LIT, N_LIT};
    for (int i = 0; i < B_COUNT; i++)
        if (add_node(g, k[i]) == UINT32_MAX) goto fail;
    g->nodes[B_ANYARR].items = B_ANY;
    static const char *const bools[] = {"true", "false"}, *const nul[] = {"null"};
    if (!set_texts(&g->nodes[B_BOOL], bools, 2) || !set_texts(&g->nodes[B_NULL], nul, 1)) goto fail;
    return g;
fail:
    jg_free(g);
    return NULL;
}

void jg_free(jg_grammar *g) {
    if (!g) return;
    for (uint32_t i = 0; i < g->n; i++) {
        node *nd = &g->nodes[i];
        for (uint32_t j = 0; nd->texts && j < nd->n; j++)
            free(nd->texts[j]);
        free(nd->texts);
        free(nd->lens);
        free(nd->kids);
    }
    free(g->nodes);
    free(g);
}

jg_grammar *jg_any_object(void) {
    return new_grammar();
}

/* ---- the schema compiler ---- */

typedef struct compiler {
    jg_grammar *g;
    char *why;
    size_t why_len;
} compiler;

__attribute__((format(printf, 2, 3))) static uint32_t refuse(compiler *c, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->why, c->why_len, fmt, ap);
    va_end(ap);
    return UINT32_MAX;
}

static const char *const k_keywords[] = {
    "type",     "properties", "required", "additionalProperties",
    "items",    "enum",       "const",    "description",
    "title",    "$schema",    "$id",      "$comment",
    "examples", "default"};

static bool type_matches(const char *type, const json_t *v) {
    if (!type) return true;
    if (!strcmp(type, "object")) return json_is_object(v);
    if (!strcmp(type, "array")) return json_is_array(v);
    if (!strcmp(type, "string")) return json_is_string(v);
    if (!strcmp(type, "number")) return json_is_number(v);
    if (!strcmp(type, "integer")) return json_is_integer(v);
    if (!strcmp(type, "boolean")) return json_is_boolean(v);
    if (!strcmp(type, "null")) return json_is_null(v);
    return false;
}

static uint32_t compile(compiler *c, const json_t *s, int depth);

/* enum / const: the values' compact JSON texts */
static uint32_t compile_lits(compiler *c, const json_t *vals, const char *type, const char *kw) {
    size_t n = json_array_size(vals);
    if (!n || n > JG_MAX_PROPS)
        return refuse(c, "'%s' must list 1 to %d values, not %zu", kw, JG_MAX_PROPS, n);
    char *texts[JG_MAX_PROPS] = {0};
    uint32_t id = UINT32_MAX;
    for (size_t i = 0; i < n; i++) {
        const json_t *v = json_array_get(vals, i);
        if (!type_matches(type, v)) {
            refuse(c, "'%s' value %zu is not of type '%s'", kw, i, type);
            goto out;
        }
        texts[i] = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY | JSON_SORT_KEYS);
        if (!texts[i]) {
            refuse(c, "out of memory");
            goto out;
        }
    }
    id = add_node(c->g, N_LIT);
    if (id == UINT32_MAX || !set_texts(&c->g->nodes[id], (const char *const *)texts, (uint32_t)n))
        id = refuse(c, "out of memory");
out:
    for (size_t i = 0; i < n; i++)
        free(texts[i]);
    return id;
}

static uint32_t compile_object(compiler *c, const json_t *s, int depth) {
    const json_t *props = json_object_get(s, "properties");
    const json_t *req = json_object_get(s, "required");
    const json_t *addl = json_object_get(s, "additionalProperties");
    if (props && !json_is_object(props)) return refuse(c, "'properties' must be an object");
    if (req && !json_is_array(req)) return refuse(c, "'required' must be an array");
    if (addl && !json_is_boolean(addl))
        return refuse(c,
                      "'additionalProperties' must be true or false (a schema is not supported)");
    size_t n = props ? json_object_size(props) : 0;
    if (!n && !json_array_size(req) && !json_is_false(addl)) return B_ANYOBJ;
    if (n > JG_MAX_PROPS)
        return refuse(c, "an object has %zu properties; at most %d are supported", n, JG_MAX_PROPS);
    const char *names[JG_MAX_PROPS];
    uint32_t kids[JG_MAX_PROPS];
    char *keys[JG_MAX_PROPS] = {0};
    uint32_t i = 0, id = UINT32_MAX;
    const char *name;
    const json_t *sub;
    json_object_foreach((json_t *)props, name, sub) {
        names[i] = name;
        kids[i] = compile(c, sub, depth + 1);
        if (kids[i] == UINT32_MAX) goto out;
        json_t *js = json_string(name);
        keys[i] = js ? json_dumps(js, JSON_ENCODE_ANY) : NULL;
        json_decref(js);
        if (!keys[i]) {
            refuse(c, "out of memory");
            goto out;
        }
        i++;
    }
    uint64_t required = 0;
    for (size_t r = 0; r < json_array_size(req); r++) {
        const char *rn = json_string_value(json_array_get(req, r));
        if (!rn) {
            refuse(c, "'required' item %zu is not a string", r);
            goto out;
        }
        uint32_t k = 0;
        while (k < n && strcmp(names[k], rn))
            k++;
        if (k == n) {
            refuse(c, "'required' names '%s', which is not in 'properties'", rn);
            goto out;
        }
        required |= 1ull << k;
    }
    id = add_node(c->g, N_OBJ);
    if (id == UINT32_MAX) {
        refuse(c, "out of memory");
        goto out;
    }
    node *nd = &c->g->nodes[id];
    nd->required = required;
    nd->kids = malloc((n ? n : 1) * sizeof *nd->kids);
    if (!nd->kids || !set_texts(nd, (const char *const *)keys, (uint32_t)n)) {
        id = refuse(c, "out of memory");
        goto out;
    }
    memcpy(nd->kids, kids, n * sizeof *kids);
out:
    for (uint32_t k = 0; k < n; k++)
        free(keys[k]);
    return id;
}

static uint32_t compile_typed(compiler *c, const json_t *s, const char *type, int depth) {
    if (!strcmp(type, "object")) return compile_object(c, s, depth);
    if (!strcmp(type, "array")) {
        const json_t *items = json_object_get(s, "items");
        uint32_t it = items ? compile(c, items, depth + 1) : B_ANY;
        if (it == UINT32_MAX) return it;
        uint32_t id = add_node(c->g, N_ARR);
        if (id == UINT32_MAX) return refuse(c, "out of memory");
        c->g->nodes[id].items = it;
        return id;
    }
    if (!strcmp(type, "string")) return B_STR;
    if (!strcmp(type, "number")) return B_NUM;
    if (!strcmp(type, "integer")) {
        uint32_t id = add_node(c->g, N_INT);
        return id == UINT32_MAX ? refuse(c, "out of memory") : id;
    }
    if (!strcmp(type, "boolean")) return B_BOOL;
    if (!strcmp(type, "null")) return B_NULL;
    return refuse(c, "unsupported type '%s'", type);
}

static uint32_t compile(compiler *c, const json_t *s, int depth) {
    if (depth >= JG_MAX_DEPTH)
        return refuse(c, "the schema nests deeper than %d levels", JG_MAX_DEPTH);
    if (json_is_true(s)) return B_ANY;
    if (!json_is_object(s)) return refuse(c, "a schema must be an object");
    const char *kw;
    const json_t *v;
    json_object_foreach((json_t *)s, kw, v) {
        size_t k = 0;
        while (k < sizeof k_keywords / sizeof *k_keywords && strcmp(k_keywords[k], kw))
            k++;
        if (k == sizeof k_keywords / sizeof *k_keywords)
            return refuse(c,
                          "unsupported keyword '%s' (supported: type, properties, required, "
                          "additionalProperties, items, enum, const)",
                          kw);
    }
    const json_t *type = json_object_get(s, "type");
    const char *t1 = json_string_value(type);
    if (type && !t1 && !json_is_array(type))
        return refuse(c, "'type' must be a string or an array of strings");
    const json_t *en = json_object_get(s, "enum"), *cn = json_object_get(s, "const");
    if (en || cn) {
        if (en && !json_is_array(en)) return refuse(c, "'enum' must be an array");
        if (json_is_array(type)) return refuse(c, "'type' as an array together with enum/const");
        if (en) return compile_lits(c, en, t1, "enum");
        json_t *one = json_array();
        if (!one || json_array_append(one, (json_t *)cn)) {
            json_decref(one);
            return refuse(c, "out of memory");
        }
        uint32_t id = compile_lits(c, one, t1, "const");
        json_decref(one);
        return id;
    }
    if (t1) return compile_typed(c, s, t1, depth);
    if (json_is_array(type)) { /* alternatives start with distinct bytes, except number/integer */
        size_t n = json_array_size(type);
        if (!n || n > 7) return refuse(c, "'type' lists %zu types; 1 to 7 are supported", n);
        uint32_t kids[7];
        for (size_t i = 0; i < n; i++) {
            const char *ti = json_string_value(json_array_get(type, i));
            if (!ti) return refuse(c, "'type' item %zu is not a string", i);
            kids[i] = compile_typed(c, s, ti, depth);
            if (kids[i] == UINT32_MAX) return UINT32_MAX;
        }
        uint32_t id = add_node(c->g, N_UNION);
        if (id == UINT32_MAX) return refuse(c, "out of memory");
        node *nd = &c->g->nodes[id];
        nd->kids = malloc(n * sizeof *nd->kids);
        if (!nd->kids) return refuse(c, "out of memory");
        memcpy(nd->kids, kids, n * sizeof *kids);
        nd->n = (uint32_t)n;
        return id;
    }
    if (json_object_get(s, "properties") || json_object_get(s, "required") ||
        json_object_get(s, "additionalProperties"))
        return compile_object(c, s, depth);
    if (json_object_get(s, "items")) return compile_typed(c, s, "array", depth);
    return B_ANY;
}

jg_grammar *jg_compile_schema(const char *schema, size_t schema_len, char *why, size_t why_len) {
    json_error_t je;
    json_t *s = json_loadb(schema, schema_len, JSON_DECODE_ANY, &je);
    if (!s) {
        snprintf(why, why_len, "the schema is not JSON: %s", je.text);
        return NULL;
    }
    compiler c = {.g = new_grammar(), .why = why, .why_len = why_len};
    if (!c.g) {
        json_decref(s);
        snprintf(why, why_len, "out of memory");
        return NULL;
    }
    uint32_t root = compile(&c, s, 0);
    json_decref(s);
    if (root == UINT32_MAX) {
        jg_free(c.g);
        return NULL;
    }
    /* the root node goes first in the frame stack; keep its index at the grammar's end */
    uint32_t r = add_node(c.g, N_UNION);
    if (r == UINT32_MAX) {
        jg_free(c.g);
        snprintf(why, why_len, "out of memory");
        return NULL;
    }
    node *nd = &c.g->nodes[r];
    nd->kids = malloc(sizeof *nd->kids);
    if (!nd->kids) {
        jg_free(c.g);
        snprintf(why, why_len, "out of memory");
        return NULL;
    }
    nd->kids[0] = root;
    nd->n = 1;
    return c.g;
}

/* ---- the automaton ---- */

void jg_init(jg_state *s, const jg_grammar *g) {
    memset(s, 0, sizeof *s);
    s->depth = 1;
    /* a compiled schema's last node is its root; the any-object grammar has only built-ins */
    s->f[0] = (jg_frame){.kind = F_VAL, .node = g->n > B_COUNT ? g->n - 1 : B_ANYOBJ};
}

bool jg_done(const jg_state *s) {
    return !s->dead && s->depth == 0;
}

static bool num_accepting(uint8_t phase) {
    return phase == M_ZERO || phase == M_INT || phase == M_FRAC || phase == M_EXP;
}

static bool lit_complete(const jg_grammar *g, const jg_frame *f) {
    const node *nd = &g->nodes[f->node];
    for (uint32_t i = 0; i < nd->n; i++)
        if ((f->mask >> i & 1) && nd->lens[i] == f->aux) return true;
    return false;
}

bool jg_can_end(const jg_state *s, const jg_grammar *g) {
    if (s->dead) return false;
    if (s->depth == 0) return true;
    if (s->depth != 1) return false;
    const jg_frame *f = &s->f[0];
    return (f->kind == F_NUM && num_accepting(f->phase)) ||
           (f->kind == F_LIT && lit_complete(g, f));
}

static bool push(jg_state *s, jg_frame f) {
    if (s->depth >= JG_MAX_DEPTH + 2) return false;
    s->f[s->depth++] = f;
    return true;
}

/* Does the value of node n admit first byte c? (resolves unions to the matching kind) */
static uint32_t resolve(const jg_grammar *g, uint32_t n, uint8_t c) {
    const node *nd = &g->nodes[n];
    if (nd->kind != N_UNION) return n;
    for (uint32_t i = 0; i < nd->n; i++) {
        uint32_t k = resolve(g, nd->kids[i], c);
        if (k == UINT32_MAX) continue; /* a union inside the union, none of whose kinds fits */
        const node *kn = &g->nodes[k];
        bool ok = false;
        switch (kn->kind) {
        case N_ANY:
            ok = true;
            break;
        case N_ANYOBJ:
        case N_OBJ:
            ok = c == '{';
            break;
        case N_ARR:
            ok = c == '[';
            break;
        case N_STR:
            ok = c == '"';
            break;
        case N_NUM:
        case N_INT:
            ok = c == '-' || (c >= '0' && c <= '9');
            break;
        case N_LIT:
            for (uint32_t j = 0; j < kn->n && !ok; j++)
                ok = kn->lens[j] && (uint8_t)kn->texts[j][0] == c;
            break;
        case N_UNION:
            break;
        }
        if (ok) return k;
    }
    return UINT32_MAX;
}

/* Start the value of node n on the top frame with byte c. Returns 1 consumed, 0 re-feed c to
 * the new top frame, -1 refused. */
static int start_value(jg_state *s, const jg_grammar *g, uint8_t c) {
    jg_frame *f = &s->f[s->depth - 1];
    uint32_t n = resolve(g, f->node, c);
    if (n == UINT32_MAX) return -1;
    const node *nd = &g->nodes[n];
    switch (nd->kind) {
    case N_ANY:
        if (c == '{')
            n = B_ANYOBJ;
        else if (c == '[')
            n = B_ANYARR;
        else if (c == '"')
            n = B_STR;
        else if (c == '-' || (c >= '0' && c <= '9'))
            n = B_NUM;
        else if (c == 't' || c == 'f')
            n = B_BOOL;
        else if (c == 'n')
            n = B_NULL;
        else
            return -1;
        f->node = n;
        return start_value(s, g, c);
    case N_ANYOBJ:
    case N_OBJ:
        if (c != '{' || s->depth > JG_MAX_DEPTH) return -1;
        *f = (jg_frame){.kind = F_OBJ, .phase = O_OPEN, .node = n};
        return 1;
    case N_ARR:
        if (c != '[' || s->depth > JG_MAX_DEPTH) return -1;
        *f = (jg_frame){.kind = F_ARR, .phase = A_OPEN, .node = n};
        return 1;
    case N_STR:
        if (c != '"') return -1;
        *f = (jg_frame){.kind = F_STR, .phase = S_PLAIN};
        return 1;
    case N_NUM:
    case N_INT:
        *f = (jg_frame){.kind = F_NUM, .phase = M_START, .mask = nd->kind == N_INT};
        return 0;
    case N_LIT:
        *f =
            (jg_frame){.kind = F_LIT, .node = n, .mask = nd->n >= 64 ? ~0ull : (1ull << nd->n) - 1};
        return 0;
    case N_UNION:
        return -1;
    }
    return -1;
}

/* A literal (or key) frame takes c. 1 consumed, 0 popped and c to re-feed, -1 refused. */
static int lit_byte(jg_state *s, const jg_grammar *g, uint8_t c) {
    jg_frame *f = &s->f[s->depth - 1];
    const node *nd = &g->nodes[f->node];
    uint64_t next = 0;
    bool longer = false;
    for (uint32_t i = 0; i < nd->n; i++)
        if ((f->mask >> i & 1) && nd->lens[i] > f->aux && (uint8_t)nd->texts[i][f->aux] == c) {
            next |= 1ull << i;
            if (nd->lens[i] > (size_t)f->aux + 1) longer = true;
        }
    if (!next) {
        if (!lit_complete(g, f)) return -1;
        s->depth--; /* a literal that is a prefix of another (numbers) ends at the next byte */
        return 0;
    }
    f->mask = next;
    f->aux++;
    if (!longer) { /* every remaining candidate is complete */
        if (f->kind == F_KEY) {
            uint32_t idx = (uint32_t)__builtin_ctzll(next);
            jg_frame *p = &s->f[s->depth - 2];
            p->aux = (uint16_t)idx;
            p->mask |= 1ull << idx;
        }
        s->depth--;
    }
    return 1;
}

static int num_byte(jg_state *s, uint8_t c) {
    jg_frame *f = &s->f[s->depth - 1];
    bool digit = c >= '0' && c <= '9', integer = f->mask;
    switch (f->phase) {
    case M_START:
        if (c == '-')
            f->phase = M_MINUS;
        else if (c == '0')
            f->phase = M_ZERO;
        else if (digit)
            f->phase = M_INT, f->aux = 1;
        else
            return -1;
        return 1;
    case M_MINUS:
        if (c == '0')
            f->phase = M_ZERO;
        else if (digit)
            f->phase = M_INT, f->aux = 1;
        else
            return -1;
        return 1;
    case M_ZERO:
    case M_INT:
        if (digit && f->phase == M_INT && f->aux < MAX_DIGITS) {
            f->aux++;
            return 1;
        }
        if (!integer && c == '.') {
            f->phase = M_DOT;
            f->aux = 0;
            return 1;
        }
        if (!integer && (c == 'e' || c == 'E')) {
            f->phase = M_E;
            return 1;
        }
        break;
    case M_DOT:
        if (!digit) return -1;
        f->phase = M_FRAC;
        f->aux = 1;
        return 1;
    case M_FRAC:
        if (digit && f->aux < MAX_DIGITS) {
            f->aux++;
            return 1;
        }
        if (c == 'e' || c == 'E') {
            f->phase = M_E;
            return 1;
        }
        break;
    case M_E:
        if (c == '+' || c == '-') {
            f->phase = M_ESIGN;
            return 1;
        }
        /* fall through */
    case M_ESIGN:
        if (!digit) return -1;
        f->phase = M_EXP;
        f->aux = 1;
        return 1;
    case M_EXP:
        if (digit && f->aux < MAX_EXP) {
            f->aux++;
            return 1;
        }
        break;
    }
    if (!num_accepting(f->phase)) return -1;
    if (digit) return -1; /* too many digits */
    s->depth--;
    return 0;
}

static int str_byte(jg_state *s, uint8_t c) {
    jg_frame *f = &s->f[s->depth - 1];
    if (f->phase == S_ESC) { /* \uXXXX is refused: a lone surrogate is not valid everywhere */
        if (!strchr("\"\\/bfnrt", c) || !c) return -1;
        f->phase = S_PLAIN;
        return 1;
    }
    if (f->aux) { /* inside a multi-byte character */
        static const uint8_t lo[] = {0, 0, 0xA0, 0x80, 0x90, 0x80},
                             hi[] = {0, 0, 0xBF, 0x9F, 0xBF, 0x8F};
        if ((c & 0xC0) != 0x80) return -1;
        if (f->phase >= U_E0 && (c < lo[f->phase] || c > hi[f->phase])) return -1;
        f->phase = S_PLAIN;
        f->aux--;
        return 1;
    }
    if (c == '"') {
        s->depth--;
        return 1;
    }
    if (c == '\\') {
        f->phase = S_ESC;
        return 1;
    }
    if (c < 0x20 || c == 0x7F) return -1;
    if (c < 0x80) return 1;
    /* the lead bytes whose second byte has a narrower range (no overlong form, no
     * surrogate, nothing past U+10FFFF) mark it in phase; the check above applies it */
    if (c >= 0xC2 && c <= 0xDF)
        f->aux = 1;
    else if (c >= 0xE0 && c <= 0xEF)
        f->aux = 2, f->phase = c == 0xE0 ? U_E0 : c == 0xED ? U_ED : S_PLAIN;
    else if (c >= 0xF0 && c <= 0xF4)
        f->aux = 3, f->phase = c == 0xF0 ? U_F0 : c == 0xF4 ? U_F4 : S_PLAIN;
    else
        return -1;
    return 1;
}

static bool obj_close_ok(const jg_grammar *g, const jg_frame *f) {
    const node *nd = &g->nodes[f->node];
    return nd->kind == N_ANYOBJ || (nd->required & ~f->mask) == 0;
}

static bool obj_more_keys(const jg_grammar *g, const jg_frame *f) {
    const node *nd = &g->nodes[f->node];
    if (nd->kind == N_ANYOBJ) return true;
    uint64_t all = nd->n >= 64 ? ~0ull : (1ull << nd->n) - 1;
    return (all & ~f->mask) != 0;
}

static int obj_byte(jg_state *s, const jg_grammar *g, uint8_t c) {
    jg_frame *f = &s->f[s->depth - 1];
    const node *nd = &g->nodes[f->node];
    switch (f->phase) {
    case O_OPEN:
    case O_NEXT:
        if (c == '}' && f->phase == O_OPEN && obj_close_ok(g, f)) {
            s->depth--;
            return 1;
        }
        if (c != '"') return -1;
        f->phase = O_COLON;
        if (nd->kind == N_ANYOBJ) return push(s, (jg_frame){.kind = F_STR}) ? 1 : -1;
        {
            uint64_t all = nd->n >= 64 ? ~0ull : (1ull << nd->n) - 1;
            uint64_t left = all & ~f->mask;
            if (!left) return -1;
            return push(s, (jg_frame){.kind = F_KEY, .node = f->node, .mask = left}) ? 0 : -1;
        }
    case O_COLON: {
        if (c != ':') return -1;
        f->phase = O_AFTER;
        uint32_t v = nd->kind == N_ANYOBJ ? B_ANY : nd->kids[f->aux];
        return push(s, (jg_frame){.kind = F_VAL, .node = v}) ? 1 : -1;
    }
    case O_AFTER:
        if (c == '}' && obj_close_ok(g, f)) {
            s->depth--;
            return 1;
        }
        if (c == ',' && obj_more_keys(g, f)) {
            f->phase = O_NEXT;
            return 1;
        }
        return -1;
    }
    return -1;
}

static int arr_byte(jg_state *s, const jg_grammar *g, uint8_t c) {
    jg_frame *f = &s->f[s->depth - 1];
    uint32_t items = g->nodes[f->node].items;
    if (c == ']') {
        s->depth--;
        return 1;
    }
    if (f->phase == A_OPEN) {
        f->phase = A_AFTER;
        return push(s, (jg_frame){.kind = F_VAL, .node = items}) ? 0 : -1;
    }
    if (c != ',') return -1;
    return push(s, (jg_frame){.kind = F_VAL, .node = items}) ? 1 : -1;
}

static bool feed_byte(jg_state *s, const jg_grammar *g, uint8_t c) {
    for (;;) {
        if (s->depth == 0) return false; /* nothing may follow a complete value */
        int r;
        switch (s->f[s->depth - 1].kind) {
        case F_VAL:
            r = start_value(s, g, c);
            break;
        case F_OBJ:
            r = obj_byte(s, g, c);
            break;
        case F_ARR:
            r = arr_byte(s, g, c);
            break;
        case F_STR:
            r = str_byte(s, c);
            break;
        case F_NUM:
            r = num_byte(s, c);
            break;
        default:
            r = lit_byte(s, g, c);
            break;
        }
        if (r < 0) return false;
        if (r > 0) return true;
    }
}

bool jg_feed(jg_state *s, const jg_grammar *g, const char *bytes, size_t n) {
    if (s->dead) return false;
    for (size_t i = 0; i < n; i++)
        if (!feed_byte(s, g, (uint8_t)bytes[i])) {
            s->dead = true;
            return false;
        }
    return true;
}

bool jg_accepts(const jg_state *s, const jg_grammar *g, const char *bytes, size_t n) {
    if (s->dead || !n) return false;
    jg_state t;
    t.depth = s->depth;
    t.dead = false;
    memcpy(t.f, s->f, s->depth * sizeof *s->f);
    for (size_t i = 0; i < n; i++)
        if (!feed_byte(&t, g, (uint8_t)bytes[i])) return false;
    return true;
}
