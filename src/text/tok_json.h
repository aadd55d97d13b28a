/* tok_json.h - a small read-only JSON DOM for tokenizer.json. Built for load speed (one pass,
 * strings unescaped in place in one copy of the input, nodes in one array, no per-value malloc)
 * and for what jansson cannot hold: object keys containing U+0000 (vocabularies have them). */
#ifndef CORTIQ_TOK_JSON_H
#define CORTIQ_TOK_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cortiq/status.h"

typedef enum tj_type {
    TJ_NONE,
    TJ_NULL,
    TJ_FALSE,
    TJ_TRUE,
    TJ_NUM,
    TJ_STR,
    TJ_ARR,
    TJ_OBJ
} tj_type;

typedef struct tj_node {
    uint8_t type;        /* tj_type */
    uint8_t is_int;      /* TJ_NUM written without fraction/exponent and fits int64 */
    uint32_t next;       /* next sibling (0 = none; the root is node 0 and never a sibling) */
    uint32_t koff, klen; /* member key inside the buffer (objects' children) */
    uint32_t len;        /* string bytes, or child count */
    union {
        uint32_t off;   /* string bytes inside the buffer */
        uint32_t first; /* first child (0 = none) */
        int64_t i;
        double d;
    } v;
} tj_node;

typedef struct tj_doc {
    char *buf; /* copy of the input, strings unescaped in place */
    tj_node *n;
    size_t nn, cap;
} tj_doc;

/* A value handle: doc + node index; a missing value has d == NULL (type TJ_NONE). */
typedef struct tjv {
    const tj_doc *d;
    uint32_t i;
} tjv;

/* Parse len bytes (< 4 GiB, nesting <= 128). CMF_E_PARSE with line/column on bad JSON. */
cmf_status tj_parse(const char *json, size_t len, tj_doc *doc, cmf_err *err);
void tj_free(tj_doc *doc);
tjv tj_root(const tj_doc *doc);

tj_type tj_typeof(tjv v);
static inline bool tj_is(tjv v, tj_type t) {
    return tj_typeof(v) == t;
}
static inline bool tj_is_null_or_none(tjv v) {
    return tj_typeof(v) == TJ_NULL || tj_typeof(v) == TJ_NONE;
}
/* Member of an object by key (the first one with that key); none if absent or not an object. */
tjv tj_get(tjv obj, const char *key);
/* First child / next sibling of arrays and objects; none at the end. */
tjv tj_first(tjv v);
tjv tj_next(tjv v);
/* i-th element (linear walk: small arrays only). */
tjv tj_at(tjv arr, size_t i);
size_t tj_size(tjv v); /* children of an array/object, 0 otherwise */
/* String bytes (not NUL-terminated inside the document; *len set); NULL if not a string. */
const char *tj_str(tjv v, size_t *len);
/* Member key of an object child. */
const char *tj_key(tjv v, size_t *len);
bool tj_bool(tjv v, bool def);    /* true/false, else def */
bool tj_int(tjv v, int64_t *out); /* integer numbers only */
double tj_num(tjv v);             /* any number, 0 otherwise */
/* True if v is a string equal to s. */
bool tj_streq(tjv v, const char *s);

#endif
