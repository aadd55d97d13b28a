/* json_out.h - a growable text buffer for writing large JSON documents directly (the
 * tokenizer.json of a 262k-token vocabulary with half a million merges). */
#ifndef CORTIQ_CONVERT_JSON_OUT_H
#define CORTIQ_CONVERT_JSON_OUT_H

#include <stdbool.h>
#include <stddef.h>

typedef struct jout {
    char *buf;
    size_t len, cap;
    bool failed; /* an allocation failed: everything after is dropped */
} jout;

void jo_raw(jout *o, const char *s);
void jo_rawn(jout *o, const char *s, size_t n);
void jo_printf(jout *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A JSON string literal of n bytes of UTF-8 (quotes, backslash and controls escaped).
 * Returns false (writing nothing) if the bytes are not valid UTF-8. */
bool jo_str(jout *o, const char *s, size_t n);
/* Give the NUL-terminated text to the caller (NULL after a failed allocation). */
char *jo_take(jout *o, size_t *len);
void jo_free(jout *o);

/* Length of the valid UTF-8 sequence starting at s (1..4), 0 if invalid. */
size_t utf8_seq_len(const unsigned char *s, size_t n);

#endif
