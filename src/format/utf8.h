/* utf8.h - strict UTF-8 validation (no overlongs, surrogates or code points past U+10FFFF). */
#ifndef CORTIQ_FORMAT_UTF8_H
#define CORTIQ_FORMAT_UTF8_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* True when s[0..len) is valid UTF-8 without NUL bytes. */
bool utf8_valid_no_nul(const uint8_t *s, size_t len);

#endif
