/* regex_adversarial_inputs.h - texts that are hard for backtracking pre-tokenizer regexes, shared
 * by tests/text/test_regex_adversarial.c and bench/bench_regex_adversarial.c: long runs of one
 * character class, alternations of classes, whitespace shapes that make \s*[\r\n]+ and \s+(?!\S)
 * backtrack, combining marks without a base, and invalid UTF-8. */
#ifndef CORTIQ_REGEX_ADVERSARIAL_INPUTS_H
#define CORTIQ_REGEX_ADVERSARIAL_INPUTS_H

#include <stdlib.h>
#include <string.h>

typedef struct adv_input {
    const char *name;
    const char *unit; /* repeated to fill the text ... */
    size_t unit_len;  /* (units may contain NUL) */
    const char *tail; /* ... then this, once */
} adv_input;

#define ADV_U(s) s, sizeof s - 1
static const adv_input ADV_INPUTS[] = {
    {"letters", ADV_U("a"), ""},
    {"letters_tail_digit", ADV_U("a"), "1"},
    {"mixed_case", ADV_U("Ab"), ""},
    {"digits", ADV_U("7"), ""},
    {"punct", ADV_U("!"), ""},
    {"spaces", ADV_U(" "), ""},
    {"spaces_then_letter", ADV_U(" "), "x"},
    {"spaces_then_newline", ADV_U(" "), "\n"},
    {"newlines", ADV_U("\n"), ""},
    {"crlf", ADV_U("\r\n"), "x"},
    {"space_tab", ADV_U(" \t"), "x"},
    {"space_newline", ADV_U(" \n"), "x"},
    {"two_spaces_newline", ADV_U("  \n"), ""},
    {"letter_digit_punct", ADV_U("a1!"), ""},
    {"space_letter", ADV_U(" a"), ""},
    {"space_punct", ADV_U(" !"), "\r\n"},
    {"punct_newline", ADV_U("!\n"), ""},
    {"apostrophe_s", ADV_U("'s"), ""},
    {"apostrophes", ADV_U("'"), "ll"},
    {"combining_marks", ADV_U("\xcc\x81"), ""},       /* U+0301 with no base */
    {"letter_marks", ADV_U("e\xcc\x81\xcc\xa7"), ""}, /* e + acute + cedilla */
    {"cjk", ADV_U("\xe4\xb8\xad"), ""},
    {"emoji_zwj", ADV_U("\xf0\x9f\x91\xa9\xe2\x80\x8d\xf0\x9f\x92\xbb"), ""},
    {"nul", ADV_U("\0"), ""},
    {"invalid_utf8", ADV_U("\xff\xe4\xb8\xc3"), ""}, /* stray byte, truncated sequences */
    {"overlong_surrogate", ADV_U("\xc0\xaf\xed\xa0\x80"), "a"},
};
#undef ADV_U
#define ADV_N_INPUTS (sizeof ADV_INPUTS / sizeof ADV_INPUTS[0])

/* The text of input k with at least n bytes of repeated units (malloc'ed; *len set). */
static inline char *adv_make(size_t k, size_t n, size_t *len) {
    const adv_input *a = &ADV_INPUTS[k];
    size_t reps = (n + a->unit_len - 1) / a->unit_len, tl = strlen(a->tail);
    char *s = malloc(reps * a->unit_len + tl + 1);
    if (!s) return NULL;
    for (size_t i = 0; i < reps; i++)
        memcpy(s + i * a->unit_len, a->unit, a->unit_len);
    memcpy(s + reps * a->unit_len, a->tail, tl + 1);
    *len = reps * a->unit_len + tl;
    return s;
}

#endif
