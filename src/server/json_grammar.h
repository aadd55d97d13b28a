/* json_grammar.h - constrained decoding for `response_format`: a JSON schema (the common subset)
 * or "any JSON object" compiled into a pushdown automaton over bytes. Generation feeds each
 * candidate token's bytes to a copy of the automaton's state and keeps only the tokens that
 * advance it, so the finished answer always parses and validates.
 *
 * The text it accepts is compact JSON (no whitespace outside strings), object keys of a schema
 * object are the declared properties (each at most once; the object closes only once every
 * required one is present), numbers have at most 16 digits before and after the point. */
#ifndef CQ_SERVER_JSON_GRAMMAR_H
#define CQ_SERVER_JSON_GRAMMAR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define JG_MAX_DEPTH 32 /* nesting of objects and arrays (deeper schemas are refused) */
#define JG_MAX_PROPS 64 /* properties of one object; members of one enum */

typedef struct jg_grammar jg_grammar;

typedef struct jg_frame {
    uint8_t kind, phase;
    uint16_t aux;
    uint32_t node;
    uint64_t mask;
} jg_frame;

/* Where the automaton is: a stack of frames (0 frames: a complete value was read). */
typedef struct jg_state {
    uint32_t depth;
    bool dead; /* a byte was refused */
    jg_frame f[JG_MAX_DEPTH + 2];
} jg_state;

/* Compile a schema (UTF-8 JSON text, schema_len bytes). NULL with why set (naming the keyword or
 * value) when it is malformed or uses something outside the subset. */
jg_grammar *jg_compile_schema(const char *schema, size_t schema_len, char *why, size_t why_len);
/* The grammar of `{"type": "json_object"}`: any JSON object. */
jg_grammar *jg_any_object(void);
void jg_free(jg_grammar *g);

void jg_init(jg_state *s, const jg_grammar *g);
/* Feed n bytes; false (and s->dead) if one of them cannot continue a valid value. */
bool jg_feed(jg_state *s, const jg_grammar *g, const char *bytes, size_t n);
/* Would these bytes be accepted? (s unchanged) */
bool jg_accepts(const jg_state *s, const jg_grammar *g, const char *bytes, size_t n);
/* Nothing more may follow: the value is complete. */
bool jg_done(const jg_state *s);
/* The text so far is a complete value (a top-level number may still grow, or end here). */
bool jg_can_end(const jg_state *s, const jg_grammar *g);

#endif
