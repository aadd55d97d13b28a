/* jinja_internal.h - shared types of the chat-template interpreter (see cortiq/chat_template.h).
 *
 * Memory: everything a compile or a render allocates lives in one arena freed at the end,
 * so errors can unwind with longjmp from any depth without leaking (jx_fail).
 * Values (jv) are small structs passed by value; strings, lists and dicts are immutable
 * once built, except namespaces (`set ns.x = ...`). */
#ifndef CORTIQ_JINJA_INTERNAL_H
#define CORTIQ_JINJA_INTERNAL_H

#include <setjmp.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cortiq/status.h"

/* ---- arena and error unwinding ---- */
typedef struct jx_chunk jx_chunk;
typedef struct jx_ctx {
    jx_chunk *chunks;
    size_t mem_used, mem_limit;
    jmp_buf jb;
    cmf_status status;
    int line;
    int cur_line; /* line being executed; used when a failure names none */
    char msg[400];
} jx_ctx;

void jx_ctx_init(jx_ctx *c, size_t mem_limit);
void jx_ctx_release(jx_ctx *c);
void *jx_alloc(jx_ctx *c, size_t n); /* zeroed; fails (longjmp) past mem_limit */
_Noreturn void jx_fail(jx_ctx *c, cmf_status st, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* growable byte buffer in the arena */
typedef struct jbuf {
    char *p;
    size_t n, cap, limit; /* limit 0 = none */
} jbuf;
void jb_put(jx_ctx *c, jbuf *b, const char *s, size_t n);
void jb_puts(jx_ctx *c, jbuf *b, const char *s);
void jb_putc(jx_ctx *c, jbuf *b, char ch);
void jb_printf(jx_ctx *c, jbuf *b, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void jb_put_cp(jx_ctx *c, jbuf *b, uint32_t cp); /* UTF-8 encode */

/* ---- values ---- */
typedef enum {
    JV_UNDEF,
    JV_NONE,
    JV_BOOL,
    JV_INT,
    JV_FLOAT,
    JV_STR,
    JV_LIST,
    JV_DICT,
    JV_NS,
    JV_MACRO,
    JV_LOOP,
    JV_FUNC
} jv_type;

typedef struct jstr {
    size_t len;
    char s[];
} jstr; /* NUL-terminated */
typedef struct jv jv;
typedef struct jlist jlist;
typedef struct jdict jdict;
typedef struct jmacro jmacro;
typedef struct jloop jloop;
typedef struct jfunc jfunc;

struct jv {
    uint8_t t;
    union {
        bool b;
        int64_t i;
        double f;
        jstr *s;
        jlist *l;
        jdict *d; /* JV_DICT and JV_NS */
        jmacro *m;
        jloop *lp;
        jfunc *fn;
        const char *uname; /* JV_UNDEF: what was missing (for messages), may be NULL */
    } u;
};
/* view: 0 a list or tuple, else what dict.items()/keys()/values() returned (JLV_*): iterable and
 * sized but not indexable, printed as dict_items([...]), not JSON-serialisable */
enum { JLV_NONE, JLV_ITEMS, JLV_KEYS, JLV_VALUES };
struct jlist {
    size_t n, cap;
    jv *v;
    bool tuple;
    uint8_t view;
};
struct jdict {
    size_t n, cap;
    jv *k, *v;
};

jv jv_undef(const char *name);
jv jv_none(void);
jv jv_bool(bool b);
jv jv_int(int64_t i);
jv jv_float(double f);
jv jv_str(jx_ctx *c, const char *s, size_t n);
jv jv_cstr(jx_ctx *c, const char *s);
jv jv_buf_str(jx_ctx *c, const jbuf *b);
jv jv_list(jx_ctx *c, size_t cap);
jv jv_tuple2(jx_ctx *c, jv a, jv b);
jv jv_dict(jx_ctx *c, size_t cap);
void jl_push(jx_ctx *c, jlist *l, jv v);
void jd_set(jx_ctx *c, jdict *d, jv k, jv v);
bool jd_get(const jdict *d, jv k, jv *out);
bool jd_get_s(const jdict *d, const char *key, jv *out);

const char *jv_type_name(jv v); /* Python-ish: 'str', 'list', 'dict', 'NoneType', ... */
bool jv_truthy(jv v);
bool jv_eq(jv a, jv b);
/* three-way order for <, sorting; fails on unorderable types. ci: case-insensitive strings */
int jv_cmp(jx_ctx *c, int line, jv a, jv b, bool ci);
bool jv_is_num(jv v); /* int, float or bool */
double jv_num(jv v);
void jv_write_str(jx_ctx *c, jbuf *b, jv v);  /* str(v) */
void jv_write_repr(jx_ctx *c, jbuf *b, jv v); /* repr(v) */
jv jv_to_str(jx_ctx *c, jv v);                /* str(v) as a value (identity for strings) */
void jx_fmt_float(double f, char out[40]);    /* Python float repr */
typedef struct jx_json_opts {
    const char *indent; /* NULL: single line */
    const char *item_sep, *key_sep;
    bool sort_keys, ensure_ascii;
} jx_json_opts;
void jv_write_json(jx_ctx *c, int line, jbuf *b, jv v, const jx_json_opts *o, int level);
struct json_t;
jv jv_from_json(jx_ctx *c, struct json_t *j, int depth);

/* ---- UTF-8 helpers ---- */
uint32_t jx_utf8_next(const char *s, size_t n, size_t *i); /* decodes at *i, advances */
size_t jx_utf8_len(const char *s, size_t n);               /* code points */
bool jx_is_space(uint32_t cp);                             /* Python str.isspace */
uint32_t jx_lower_cp(uint32_t cp);
uint32_t jx_upper_cp(uint32_t cp);
bool jx_is_alpha_cp(uint32_t cp);

/* ---- lexer ---- */
typedef enum {
    TK_TEXT,
    TK_VAR_BEGIN,
    TK_VAR_END,
    TK_BLOCK_BEGIN,
    TK_BLOCK_END,
    TK_NAME,
    TK_STRING,
    TK_INT,
    TK_FLOAT,
    TK_OP,
    TK_EOF
} jtok_type;
typedef enum {
    OP_ADD,
    OP_SUB,
    OP_DIV,
    OP_FLOORDIV,
    OP_MUL,
    OP_MOD,
    OP_POW,
    OP_TILDE,
    OP_LBRACKET,
    OP_RBRACKET,
    OP_LPAREN,
    OP_RPAREN,
    OP_LBRACE,
    OP_RBRACE,
    OP_EQ,
    OP_NE,
    OP_GT,
    OP_GE,
    OP_LT,
    OP_LE,
    OP_ASSIGN,
    OP_DOT,
    OP_COLON,
    OP_PIPE,
    OP_COMMA,
    OP_SEMI,
    OP__COUNT
} jop;
typedef struct jtok {
    uint8_t type, op;
    int line;
    const char *s; /* TEXT/NAME/STRING (decoded, NUL-terminated) */
    size_t len;
    int64_t i;
    double f;
} jtok;
/* Tokenise with transformers' settings; returns token array ending in TK_EOF. */
jtok *jx_lex(jx_ctx *c, const char *src, size_t len, size_t *ntok);

/* ---- AST ---- */
typedef enum {
    /* expressions */
    N_CONST,
    N_NAME,
    N_GETATTR,
    N_GETITEM,
    N_SLICE,
    N_CALL,
    N_FILTER,
    N_TEST,
    N_BINOP,
    N_NEG,
    N_POS,
    N_NOT,
    N_AND,
    N_OR,
    N_COMPARE,
    N_CONCAT,
    N_COND,
    N_LIST,
    N_TUPLE,
    N_DICT,
    N_PLACEHOLDER,
    /* statements */
    N_TEXT,
    N_OUTPUT,
    N_IF,
    N_FOR,
    N_SET,
    N_SETBLOCK,
    N_MACRO,
    N_CALLBLOCK,
    N_FILTERBLOCK,
    N_BREAK,
    N_CONTINUE,
    N_WITH,
    N_SCOPE
} jnode_kind;

enum { CMP_EQ, CMP_NE, CMP_LT, CMP_LE, CMP_GT, CMP_GE, CMP_IN, CMP_NOTIN };

typedef struct jnode jnode;
struct jnode {
    uint8_t kind;
    uint8_t op; /* BINOP: jop; COMPARE: ops in args2 via kw ops array */
    bool neg;   /* TEST negated */
    int line;
    const char *name; /* NAME, GETATTR attr, FILTER/TEST/MACRO name, TEXT */
    size_t name_len;
    jv val;           /* CONST */
    jnode *a, *b, *c; /* children */
    jnode **args;     /* positional args, items, dict keys, compare operands */
    size_t nargs;
    jnode **vals; /* dict values, kwarg values, macro defaults (NULL entry = none) */
    const char **kwnames;
    size_t nkw;
    uint8_t *cmpops; /* COMPARE */
    jnode **body;
    size_t nbody;
    jnode **ebody; /* else */
    size_t nebody;
};

/* Parse tokens into a statement list; fails (longjmp) with line-numbered messages. */
jnode **jx_parse(jx_ctx *c, jtok *toks, size_t ntok, size_t *nbody);

/* ---- evaluation ---- */
typedef struct jscope jscope;
struct jscope {
    jscope *parent;
    size_t n, cap;
    const char **names;
    jv *vals;
};

struct jmacro {
    const jnode *def; /* N_MACRO, or N_CALLBLOCK for a caller */
    jscope *closure;  /* scope names resolve in */
    jv caller;        /* undefined unless invoked through {% call %} */
};
struct jloop {
    jlist *items;
    size_t idx;
    jlist *cycle_last; /* arguments of the previous loop.changed() call */
    bool has_changed;
};
enum {
    FN_RANGE,
    FN_NAMESPACE,
    FN_DICT,
    FN_RAISE,
    FN_STRFTIME,
    FN_METHOD,
    FN_LOOP_CYCLE,
    FN_LOOP_CHANGED,
    FN_UNSUPPORTED
};
struct jfunc {
    int kind;
    const char *name;
    jv self;
};

typedef struct jrt {
    jx_ctx *c;
    jscope *globals; /* render variables */
    jscope *root;    /* template top-level scope */
    jbuf *out;
    int ctl; /* 0, 1 break, 2 continue */
    int depth, max_depth;
    uint64_t steps, max_steps;
    int64_t now; /* <0: wall clock */
    jv placeholder;
    uintptr_t stack_base; /* address of a local of the render entry (stack guard) */
} jrt;

/* Stack the evaluator may use below the render entry. Counting macro levels and nesting is
 * not enough on its own: frame sizes differ by compiler and sanitizer (ASan frames of jx_eval
 * are ~10 KiB), so a template that recurses within the count limits could still overflow the
 * thread's stack. 1 MiB fits every default thread stack (glibc 8 MiB, macOS secondary 512 KiB
 * is the exception: render on a thread with >= 2 MiB there). */
#define JX_STACK_BUDGET (1u << 20)

/* Fail with CMF_E_LIMIT when the evaluator has used more than JX_STACK_BUDGET of stack. */
static inline void jx_stack_guard(jrt *rt, int line) {
    char here;
    uintptr_t at = (uintptr_t)&here;
    if (rt->stack_base > at && rt->stack_base - at > JX_STACK_BUDGET)
        jx_fail(rt->c, CMF_E_LIMIT, line, "template nesting needs more than %u KiB of stack",
                JX_STACK_BUDGET >> 10);
}

void jx_exec_body(jrt *rt, jscope *sc, jnode **body, size_t n);
jv jx_eval(jrt *rt, jscope *sc, const jnode *e);
jv jx_call_value(jrt *rt, jscope *sc, int line, jv fn, jv *args, size_t nargs, const char **kwn,
                 jv *kwv, size_t nkw);
jv jx_getattr(jrt *rt, int line, jv obj, const char *name, size_t len);
jv jx_getitem(jrt *rt, int line, jv obj, jv key);
jlist *jx_iterate(jrt *rt, int line, jv v); /* materialise an iterable */
void jx_step(jrt *rt, int line);

/* filters, tests, methods, globals (jinja_filters.c / jinja_methods.c) */
jv jx_filter(jrt *rt, jscope *sc, int line, const char *name, jv v, jv *args, size_t nargs,
             const char **kwn, jv *kwv, size_t nkw);
bool jx_test(jrt *rt, jscope *sc, int line, const char *name, jv v, jv *args, size_t nargs);
bool jx_has_test(const char *name);
jv jx_method(jrt *rt, int line, jv self, const char *name, jv *args, size_t nargs, const char **kwn,
             jv *kwv, size_t nkw);
bool jx_has_method(jv self, const char *name);
jv jx_call_global(jrt *rt, int line, const jfunc *fn, jv *args, size_t nargs, const char **kwn,
                  jv *kwv, size_t nkw);
jv jx_percent_format(jrt *rt, int line, jv fmt, jv args);
jv jx_binop(jrt *rt, int line, int op, jv a, jv b);

/* Python str.strip family (which: 1 left, 2 right, 3 both; chars NULL = whitespace), str.replace */
jv jx_strip(jrt *rt, jv s, const jstr *chars, int which);
jv jx_replace(jrt *rt, jv s, jv old, jv new_, int64_t count);

/* argument helper: positional index or keyword name, else dflt */
jv jx_arg(jv *args, size_t nargs, const char **kwn, jv *kwv, size_t nkw, size_t pos,
          const char *name, jv dflt);

#endif
