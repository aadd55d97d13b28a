/* tok_regex.c - Oniguruma regexes (Ruby syntax, UTF-8: the engine and defaults HF tokenizers
 * uses) and the literal-or-regex pattern search shared by Split, Replace and the decoders. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* memmem */
#endif
#include <oniguruma.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "text/tok_internal.h"

struct tok_regex {
    regex_t *re;
};

static pthread_once_t onig_once = PTHREAD_ONCE_INIT;
static void onig_init_once(void) {
    OnigEncoding enc[1] = {ONIG_ENCODING_UTF8};
    onig_initialize(enc, 1);
}

cmf_status tok_regex_new(const char *pattern, size_t len, tok_regex **out, cmf_err *err) {
    pthread_once(&onig_once, onig_init_once);
    tok_regex *r = calloc(1, sizeof *r);
    if (!r) return cmf_err_set(err, CMF_E_NOMEM, "tokenizer", "out of memory compiling a regex");
    OnigErrorInfo einfo;
    int rc = onig_new(&r->re, (const OnigUChar *)pattern, (const OnigUChar *)pattern + len,
                      ONIG_OPTION_NONE, ONIG_ENCODING_UTF8, ONIG_SYNTAX_DEFAULT, &einfo);
    if (rc != ONIG_NORMAL) {
        OnigUChar msg[ONIG_MAX_ERROR_MESSAGE_LEN];
        onig_error_code_to_str(msg, rc, &einfo);
        free(r);
        return cmf_err_set(err, CMF_E_PARSE, "tokenizer", "regex /%.*s/ does not compile: %s",
                           (int)(len > 200 ? 200 : len), pattern, (const char *)msg);
    }
    *out = r;
    return CMF_OK;
}

void tok_regex_free(tok_regex *r) {
    if (!r) return;
    onig_free(r->re);
    free(r);
}

/* One match region per thread, reused by every search (a region allocates on first use) and
 * freed when the thread exits. */
static pthread_key_t region_key;
static pthread_once_t region_once = PTHREAD_ONCE_INIT;
static bool region_key_ok;
static void region_free(void *r) {
    onig_region_free(r, 1);
}
static void region_key_init(void) {
    region_key_ok = pthread_key_create(&region_key, region_free) == 0;
}

static OnigRegion *thread_region(void) {
    pthread_once(&region_once, region_key_init);
    if (!region_key_ok) return NULL;
    OnigRegion *r = pthread_getspecific(region_key);
    if (!r && (r = onig_region_new()) != NULL && pthread_setspecific(region_key, r) != 0) {
        onig_region_free(r, 1);
        r = NULL;
    }
    return r;
}

/* ---- the backtracking budget ----
 * Oniguruma backtracks, so a pattern like \p{L}+(?=\s) costs O(n^2) on a run of n letters and
 * (a+)+b costs O(2^n); a hostile tokenizer.json can ship either. Every pattern iteration over a
 * piece of text (tok_pattern_next from pos 0 to the end) gets a budget of
 * TOK_RE_RETRIES_PER_BYTE * len + TOK_RE_RETRIES_BASE backtracking steps ("retries", counted by
 * Oniguruma itself, so the bound is deterministic). Oniguruma does not report how many retries a
 * search used, only whether it exceeded its limit; so each search starts with a small limit and
 * multiplies it by 4 while it runs out (few repeats of a long scan, yet a short match that needs
 * up to 128 retries is charged at most 160), and every attempt is charged its full limit. A
 * search that needs r retries is thus charged less than max(6r, 32): the sum over an iteration
 * stays within the budget, and results are those of an unlimited search whenever the budget
 * suffices.
 * When it does not, the search fails, the iteration stops, and the failure is recorded for the
 * calling thread (tok_regex_fail_*) so encode/decode report CMF_E_LIMIT instead of a wrong split.
 */
#define TOK_RE_FIRST_LIMIT 32u

typedef struct re_state {
    unsigned long budget;   /* retries left in the current iteration */
    int fail_code;          /* 0, or the Oniguruma error that stopped a search */
    size_t fail_len;        /* the piece it stopped on */
    unsigned long fail_cap; /* that piece's whole budget */
    OnigMatchParam *mp;
} re_state;

static pthread_key_t state_key;
static pthread_once_t state_once = PTHREAD_ONCE_INIT;
static bool state_key_ok;
static void state_free(void *p) {
    re_state *st = p;
    onig_free_match_param(st->mp);
    free(st);
}
static void state_key_init(void) {
    state_key_ok = pthread_key_create(&state_key, state_free) == 0;
}

static re_state *thread_state(void) {
    pthread_once(&state_once, state_key_init);
    if (!state_key_ok) return NULL;
    re_state *st = pthread_getspecific(state_key);
    if (st) return st;
    st = calloc(1, sizeof *st);
    if (!st || !(st->mp = onig_new_match_param()) ||
        onig_initialize_match_param(st->mp) != ONIG_NORMAL ||
        pthread_setspecific(state_key, st) != 0) {
        if (st) onig_free_match_param(st->mp);
        free(st);
        return NULL;
    }
    return st;
}

unsigned long tok_regex_budget(size_t len) {
    unsigned long cap = ULONG_MAX / 2;
    unsigned long per = TOK_RE_RETRIES_PER_BYTE;
    return len > (cap - TOK_RE_RETRIES_BASE) / per ? cap
                                                   : per * (unsigned long)len + TOK_RE_RETRIES_BASE;
}

void tok_regex_fail_reset(void) {
    re_state *st = thread_state();
    if (st) st->fail_code = 0;
}

cmf_status tok_regex_fail_check(cmf_err *err, const char *ctx) {
    re_state *st = thread_state();
    if (!st) return cmf_err_set(err, CMF_E_NOMEM, ctx, "out of memory for the regex state");
    if (!st->fail_code) return CMF_OK;
    int code = st->fail_code;
    st->fail_code = 0;
    if (code == ONIGERR_RETRY_LIMIT_IN_MATCH_OVER || code == ONIGERR_RETRY_LIMIT_IN_SEARCH_OVER)
        return cmf_err_set(err, CMF_E_LIMIT, ctx,
                           "regex backtracking budget exhausted on a %zu-byte piece of text "
                           "(%lu steps = %u per byte + %u): the pattern is too slow on this input",
                           st->fail_len, st->fail_cap, (unsigned)TOK_RE_RETRIES_PER_BYTE,
                           (unsigned)TOK_RE_RETRIES_BASE);
    OnigUChar msg[ONIG_MAX_ERROR_MESSAGE_LEN];
    onig_error_code_to_str(msg, code);
    return cmf_err_set(err, code == ONIGERR_MEMORY ? CMF_E_NOMEM : CMF_E_LIMIT, ctx,
                       "regex search failed on a %zu-byte piece of text: %s", st->fail_len,
                       (const char *)msg);
}

/* One search under the budget of the current iteration (see above). 1 match, 0 none, -1 failed. */
static int budget_search(re_state *st, const tok_regex *r, const OnigUChar *b, const OnigUChar *e,
                         size_t start, OnigRegion *region) {
    unsigned long limit = TOK_RE_FIRST_LIMIT;
    for (;;) {
        if (st->budget == 0) { /* a limit of 0 would mean "unlimited" to Oniguruma */
            st->fail_code = ONIGERR_RETRY_LIMIT_IN_SEARCH_OVER;
            st->fail_len = (size_t)(e - b);
            st->fail_cap = tok_regex_budget((size_t)(e - b));
            return -1;
        }
        if (limit > st->budget) limit = st->budget;
        onig_set_retry_limit_in_match_of_match_param(st->mp, limit);
        onig_set_retry_limit_in_search_of_match_param(st->mp, limit);
        int pos =
            onig_search_with_param(r->re, b, e, b + start, e, region, ONIG_OPTION_NONE, st->mp);
        st->budget -= limit;
        if (pos >= 0) return region->num_regs >= 1 ? 1 : 0;
        if (pos == ONIG_MISMATCH) return 0;
        bool retry_over =
            pos == ONIGERR_RETRY_LIMIT_IN_MATCH_OVER || pos == ONIGERR_RETRY_LIMIT_IN_SEARCH_OVER;
        if (!retry_over || st->budget == 0) {
            st->fail_code = retry_over ? ONIGERR_RETRY_LIMIT_IN_SEARCH_OVER : pos;
            st->fail_len = (size_t)(e - b);
            st->fail_cap = tok_regex_budget((size_t)(e - b));
            return -1;
        }
        limit = limit > ULONG_MAX / 4 ? ULONG_MAX : limit * 4;
    }
}

bool tok_regex_search(const tok_regex *r, const char *s, size_t len, size_t start, size_t *ms,
                      size_t *me) {
    OnigRegion *region = thread_region();
    re_state *st = thread_state();
    if (!region || !st) return false;
    if (start == 0) st->budget = tok_regex_budget(len);
    const OnigUChar *b = (const OnigUChar *)s, *e = b + len;
    if (budget_search(st, r, b, e, start, region) != 1) return false;
    *ms = (size_t)region->beg[0];
    *me = (size_t)region->end[0];
    return true;
}

void tok_pattern_free(tok_pattern *p) {
    free(p->lit);
    tok_regex_free(p->re);
    memset(p, 0, sizeof *p);
}

bool tok_pattern_next(const tok_pattern *p, const char *s, size_t len, size_t *pos,
                      size_t *last_end, size_t *ms, size_t *me) {
    for (;;) {
        if (*pos > len) return false;
        if (!p->re) {
            if (p->lit_len == 0 || len - *pos < p->lit_len) return false;
            const char *hit = memmem(s + *pos, len - *pos, p->lit, p->lit_len);
            if (!hit) return false;
            *ms = (size_t)(hit - s);
            *me = *ms + p->lit_len;
            *pos = *me;
            return true;
        }
        if (!tok_regex_search(p->re, s, len, *pos, ms, me)) return false;
        if (*ms == *me && *last_end == *me) {
            /* Empty match right after the previous match: step one character and retry. */
            uint32_t cp;
            *pos += *pos < len ? tok_utf8_decode(s, len, *pos, &cp) : 1;
            continue;
        }
        *pos = *me;
        *last_end = *me;
        return true;
    }
}
