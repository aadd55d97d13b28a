/* bench_regex_adversarial.c - time per byte of each pre-tokenizer regex on adversarial texts,
 * under cortiq's backtracking budget (src/text/tok_regex.c).
 * usage: bench_regex_adversarial [BYTES] [reps] [PATTERN] [INPUT]
 *   (default 1 MiB, best of 3 CPU times; PATTERN / INPUT pick one row by name)
 * For every pattern x input it walks all matches as the Split pre-tokenizer does and prints
 * ns/byte, the number of matches, and "ok" or "LIMIT" when the budget or the time limit stopped
 * the walk. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../tests/text/regex_adversarial_inputs.h"
#include "text/tok_internal.h"

typedef struct pattern {
    const char *name, *re;
    size_t max_bytes; /* 0: none; else the text is cut to this (quadratic rows) */
} pattern;

/* The pre-tokenizer patterns of the tokenizers we ship parity tests for, plus some that a hostile
 * tokenizer.json could carry: quadratic (lookahead) and exponential (nested alternation) through
 * backtracking, which the budget stops, and quadratic without backtracking, which the time limit
 * stops. */
static const pattern PATTERNS[] = {
    {"llama3",
     "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
     "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
     0},
    {"qwen3",
     "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| "
     "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
     0},
    {"gpt2", "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+",
     0},
    {"synth_lookahead", "(?i:'s|'t|'re)|\\p{L}+(?=\\s)|\\p{N}{1,2}|\\s+", 0},
    {"hostile_nested", "(?:a|a)+b|(?:\\s|\\s)+x", 0},
    /* not bounded by the budget: Oniguruma gives up on each start position of a run after
     * scanning to its end without counting a retry, so one search is O(n^2) (alone, [ \t]+x is
     * rejected at once because x never occurs; the alternation hides that); the time limit stops
     * them at TOK_RE_NS_PER_BYTE per byte + TOK_RE_TIME_BASE_NS */
    {"hostile_scan", "[ \\t]+x|\\n", 0},
    {"hostile_scan_letters", "[a-z]+[0-9]|\\n", 0},
    {"hostile_scan_pairs", "(?: a)+!|\\n", 0},
    /* lookaheads inside a loop: one match attempt can scan ahead from every position it passes */
    {"hostile_lookahead_loop", "(?:\\s(?=\\s*x))+y|\\n", 0},
    {"hostile_lookahead_alt", "(?:(?=[ ]*x) |\\s)+z|\\n", 0},
    /* a lookahead inside a lookahead: one attempt is O(n^3) */
    {"hostile_lookahead_nest", "(?:\\s(?=(?:\\s(?=\\s*x))*x))+y|\\n", 0},
};

static double cpu_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Walk every match; returns the match count, *limited when the budget stopped the walk. */
static size_t walk(const tok_pattern *p, const char *s, size_t len, int *limited) {
    size_t pos = 0, last = SIZE_MAX, ms, me, n = 0;
    tok_regex_fail_reset();
    while (tok_pattern_next(p, s, len, &pos, &last, &ms, &me))
        n++;
    cmf_err err;
    *limited = tok_regex_fail_check(&err, "bench") != CMF_OK;
    return n;
}

int main(int argc, char **argv) {
    size_t bytes = argc > 1 ? (size_t)strtoull(argv[1], NULL, 10) : (size_t)1 << 20;
    int reps = argc > 2 ? atoi(argv[2]) : 3;
    const char *only_p = argc > 3 ? argv[3] : NULL, *only_in = argc > 4 ? argv[4] : NULL;
    if (bytes == 0 || reps < 1) {
        fprintf(stderr, "usage: %s [BYTES] [reps]\n", argv[0]);
        return 2;
    }
    printf("budget: %u retries per byte + %u per piece; text %zu bytes; best of %d CPU times\n",
           (unsigned)TOK_RE_RETRIES_PER_BYTE, (unsigned)TOK_RE_RETRIES_BASE, bytes, reps);
    printf("%-22s %-20s %10s %9s %10s %s\n", "pattern", "input", "bytes", "ns/byte", "matches",
           "status");
    for (size_t pi = 0; pi < sizeof PATTERNS / sizeof PATTERNS[0]; pi++) {
        if (only_p && strcmp(only_p, PATTERNS[pi].name)) continue;
        tok_pattern p = {0};
        cmf_err err;
        if (tok_regex_new(PATTERNS[pi].re, strlen(PATTERNS[pi].re), &p.re, &err)) {
            fprintf(stderr, "%s: %s\n", PATTERNS[pi].name, err.msg);
            return 1;
        }
        double worst = 0;
        const char *worst_in = "";
        for (size_t k = 0; k < ADV_N_INPUTS; k++) {
            if (only_in && strcmp(only_in, ADV_INPUTS[k].name)) continue;
            size_t len, want = PATTERNS[pi].max_bytes && PATTERNS[pi].max_bytes < bytes
                                   ? PATTERNS[pi].max_bytes
                                   : bytes;
            char *raw = adv_make(k, want, &len);
            tok_buf clean = {0};
            bool alloc_ok = true;
            const char *s = raw;
            if (raw && !tok_utf8_sanitize(raw, len, &clean, &alloc_ok)) {
                s = clean.p; /* the tokenizer sees U+FFFD where the bytes were invalid */
                len = clean.len;
            }
            if (!raw || !alloc_ok) {
                fprintf(stderr, "out of memory\n");
                return 3;
            }
            double best = 1e30;
            size_t matches = 0;
            int limited = 0;
            for (int r = 0; r < reps; r++) {
                double t0 = cpu_s();
                matches = walk(&p, s, len, &limited);
                double t = cpu_s() - t0;
                if (t < best) best = t;
            }
            double nspb = best * 1e9 / (double)len;
            if (nspb > worst) {
                worst = nspb;
                worst_in = ADV_INPUTS[k].name;
            }
            printf("%-22s %-20s %10zu %9.1f %10zu %s\n", PATTERNS[pi].name, ADV_INPUTS[k].name, len,
                   nspb, matches, limited ? "LIMIT" : "ok");
            fflush(stdout);
            tok_buf_free(&clean);
            free(raw);
        }
        printf("%-22s worst %.1f ns/byte (%s)\n\n", PATTERNS[pi].name, worst, worst_in);
        tok_pattern_free(&p);
    }
    return 0;
}
