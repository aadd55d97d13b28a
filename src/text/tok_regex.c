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
#include <time.h>

#include "common/err.h"
#include "text/tok_internal.h"

struct tok_regex {
    regex_t *re;
};

/* ---- the time limit ----
 * The backtracking budget below counts retries, but Oniguruma also does work that is no retry:
 * onig_search gives up on a start position that fails without backtracking and tries the next
 * one, so [ \t]+x|\n scans a blank run to its end from every start, O(n^2) per piece of text.
 * Every pattern is therefore compiled as "(*<TOK_RE_CALLOUT>)(?:<pattern>)": a callout of name,
 * run once at the start of every match attempt. It reads a coarse wall clock (vDSO, a few ns) and,
 * when that has ticked since its last look, the thread's CPU clock (a system call; time spent
 * waiting for a core does not count), and aborts the search once the piece has used more than
 * TOK_RE_NS_PER_BYTE * len + TOK_RE_TIME_BASE_NS of it, counted from that first look: a piece
 * done within one tick never makes the system call. A running attempt is not interrupted (each
 * search's retry limit ends it), so the limit can be overrun by the rest of the search running
 * when it expires (see docs/SECURITY.md, "Regex time per byte"). The
 * default syntax (ONIG_SYNTAX_ONIGURUMA) already has (*name) callouts, so user patterns mean
 * what they meant before; the non-capturing group keeps group numbers and inline options. */
#define TOK_RE_CALLOUT     "cortiq_deadline"
#define TOK_RE_FAIL_TIME   1 /* re_state.fail_code of a search the time limit stopped */
#define TOK_RE_FAIL_GROWTH 2 /* re_state.fail_code: normalized text passed tok_norm_cap */
#ifdef CLOCK_MONOTONIC_COARSE
#define TOK_RE_TICK_CLOCK CLOCK_MONOTONIC_COARSE
#else
#define TOK_RE_TICK_CLOCK CLOCK_MONOTONIC
#endif

static int deadline_callout(OnigCalloutArgs *args, void *user);
static bool callout_ok;

static pthread_once_t onig_once = PTHREAD_ONCE_INIT;
static void onig_init_once(void) {
    OnigEncoding enc[1] = {ONIG_ENCODING_UTF8};
    onig_initialize(enc, 1);
    static const char name[] = TOK_RE_CALLOUT;
    /* returns the name's id (>= 0) */
    callout_ok =
        onig_set_callout_of_name(ONIG_ENCODING_UTF8, ONIG_CALLOUT_TYPE_SINGLE, (OnigUChar *)name,
                                 (OnigUChar *)name + sizeof name - 1, ONIG_CALLOUT_IN_PROGRESS,
                                 deadline_callout, NULL, 0, NULL, 0, NULL) >= 0;
}

static int compile(const char *pattern, size_t len, regex_t **re, OnigErrorInfo *einfo) {
    return onig_new(re, (const OnigUChar *)pattern, (const OnigUChar *)pattern + len,
                    ONIG_OPTION_NONE, ONIG_ENCODING_UTF8, ONIG_SYNTAX_DEFAULT, einfo);
}

/* Length of a leading whole-pattern option group such as (?L) or (?Ii): Oniguruma accepts one
 * only at the very head of a pattern, so the callout goes after it. 0 when there is none. */
static size_t whole_options_len(const char *p, size_t len) {
    if (len < 3 || p[0] != '(' || p[1] != '?') return 0;
    bool whole = false;
    for (size_t i = 2; i < len; i++) {
        char c = p[i];
        if (c == ')') return whole ? i + 1 : 0;
        if (c == 'C' || c == 'I' || c == 'L')
            whole = true;
        else if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '-' || c == '{' ||
                   c == '}'))
            return 0;
    }
    return 0;
}

/* Compiles head "(*callout)(?:" rest close. */
static int compile_wrapped(const char *p, size_t len, size_t head, const char *close, regex_t **re,
                           OnigErrorInfo *einfo) {
    static const char open[] = "(*" TOK_RE_CALLOUT ")(?:";
    size_t cl = strlen(close), n = len + sizeof open - 1 + cl;
    char *w = malloc(n);
    if (!w) return ONIGERR_MEMORY;
    memcpy(w, p, head);
    memcpy(w + head, open, sizeof open - 1);
    memcpy(w + head + sizeof open - 1, p + head, len - head);
    memcpy(w + n - cl, close, cl);
    int rc = compile(w, n, re, einfo);
    free(w);
    return rc;
}

cmf_status tok_regex_new(const char *pattern, size_t len, tok_regex **out, cmf_err *err) {
    pthread_once(&onig_once, onig_init_once);
    if (!callout_ok)
        return cmf_err_set(err, CMF_E_NOMEM, "tokenizer", "cannot register the regex callout");
    tok_regex *r = calloc(1, sizeof *r);
    if (!r) return cmf_err_set(err, CMF_E_NOMEM, "tokenizer", "out of memory compiling a regex");
    /* The pattern alone first: its errors are reported as written, and a pattern that compiles
     * alone is well formed, so the wrapper's ")" can only fail to close the group when the
     * pattern ends inside an extended-mode (?x) comment, which a newline ends. */
    OnigErrorInfo einfo;
    int rc = compile(pattern, len, &r->re, &einfo);
    int captures = rc == ONIG_NORMAL ? onig_number_of_captures(r->re) : 0;
    if (rc == ONIG_NORMAL) {
        onig_free(r->re);
        r->re = NULL;
        size_t head = whole_options_len(pattern, len);
        rc = compile_wrapped(pattern, len, head, ")", &r->re, &einfo);
        if (rc == ONIGERR_END_PATTERN_WITH_UNMATCHED_PARENTHESIS)
            rc = compile_wrapped(pattern, len, head, "\n)", &r->re, &einfo);
        if (rc == ONIG_NORMAL && onig_number_of_captures(r->re) != captures) {
            onig_free(r->re);
            rc = ONIGERR_INVALID_CALLOUT_PATTERN; /* cannot happen: the wrapper captures nothing */
        }
        if (rc != ONIG_NORMAL && rc != ONIGERR_MEMORY) {
            free(r);
            return cmf_err_set(err, CMF_E_PARSE, "tokenizer",
                               "regex /%.*s/ compiles, but not under the time-limit callout",
                               (int)(len > 200 ? 200 : len), pattern);
        }
    }
    if (rc != ONIG_NORMAL) {
        OnigUChar msg[ONIG_MAX_ERROR_MESSAGE_LEN];
        onig_error_code_to_str(msg, rc, &einfo);
        free(r);
        if (rc == ONIGERR_MEMORY)
            return cmf_err_set(err, CMF_E_NOMEM, "tokenizer", "out of memory compiling a regex");
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
    /* the time limit of the current iteration (see the top of the file) */
    size_t piece_len;     /* the piece being searched */
    uint64_t tick_ns;     /* coarse wall clock at the last look; 0: no attempt yet */
    uint64_t deadline_ns; /* thread CPU time it must end by; 0: CPU clock not read yet */
    bool time_over;       /* the callout aborted the current search */
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
        onig_set_callout_user_data_of_match_param(st->mp, st) != ONIG_NORMAL ||
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

uint64_t tok_regex_time_ns(size_t len) {
    uint64_t cap = UINT64_MAX / 2;
    return len > (cap - TOK_RE_TIME_BASE_NS) / TOK_RE_NS_PER_BYTE
               ? cap
               : (uint64_t)TOK_RE_NS_PER_BYTE * len + TOK_RE_TIME_BASE_NS;
}

static bool clock_ns(clockid_t c, uint64_t *ns) {
    struct timespec t;
    if (clock_gettime(c, &t) != 0) return false;
    *ns = (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
    return true;
}

/* Runs at the start of every match attempt (the pattern begins with it): checks the thread's CPU
 * time against the piece's deadline whenever the coarse clock has ticked (see the top). */
static int deadline_callout(OnigCalloutArgs *args, void *user) {
    (void)args;
    re_state *st = user; /* NULL when searched without our match param: no limit */
    uint64_t tick, now;
    if (!st || !clock_ns(TOK_RE_TICK_CLOCK, &tick) || tick == st->tick_ns)
        return ONIG_CALLOUT_SUCCESS;
    bool first = st->tick_ns == 0;
    st->tick_ns = tick;
    if (first || !clock_ns(CLOCK_THREAD_CPUTIME_ID, &now)) return ONIG_CALLOUT_SUCCESS;
    if (st->deadline_ns == 0) {
        st->deadline_ns = now + tok_regex_time_ns(st->piece_len);
        return ONIG_CALLOUT_SUCCESS;
    }
    if (now <= st->deadline_ns) return ONIG_CALLOUT_SUCCESS;
    st->time_over = true;
    return ONIG_ABORT; /* < -1: onig_search stops and returns it */
}

void tok_regex_fail_reset(void) {
    re_state *st = thread_state();
    if (st) st->fail_code = 0;
}

void tok_norm_fail_growth(size_t len, size_t cap) {
    re_state *st = thread_state();
    if (!st || st->fail_code) return; /* the first failure is the one reported */
    st->fail_code = TOK_RE_FAIL_GROWTH;
    st->fail_len = len;
    st->fail_cap = (unsigned long)cap;
}

cmf_status tok_regex_fail_check(cmf_err *err, const char *ctx) {
    re_state *st = thread_state();
    if (!st) return cmf_err_set(err, CMF_E_NOMEM, ctx, "out of memory for the regex state");
    if (!st->fail_code) return CMF_OK;
    int code = st->fail_code;
    st->fail_code = 0;
    if (code == TOK_RE_FAIL_GROWTH)
        return cmf_err_set(err, CMF_E_LIMIT, ctx,
                           "normalized text limit exceeded on a %zu-byte piece of text (%lu bytes "
                           "= %u x its length + %u): the tokenizer's normalizers grow it too much",
                           st->fail_len, st->fail_cap, (unsigned)TOK_NORM_GROWTH,
                           (unsigned)TOK_NORM_GROWTH_BASE);
    if (code == TOK_RE_FAIL_TIME) {
        uint64_t allowed = tok_regex_time_ns(st->fail_len);
        return cmf_err_set(err, CMF_E_LIMIT, ctx,
                           "regex time limit exceeded on a %zu-byte piece of text (%llu ms = %u µs "
                           "per byte + %u ms of thread CPU time): the pattern is too slow on this "
                           "input",
                           st->fail_len, (unsigned long long)(allowed / 1000000u),
                           (unsigned)(TOK_RE_NS_PER_BYTE / 1000u),
                           (unsigned)(TOK_RE_TIME_BASE_NS / 1000000u));
    }
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
    st->time_over = false;
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
            st->fail_code = retry_over ? ONIGERR_RETRY_LIMIT_IN_SEARCH_OVER
                            : pos == ONIG_ABORT && st->time_over ? TOK_RE_FAIL_TIME
                                                                 : pos;
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
    if (start == 0) { /* a new iteration: fresh budget and time limit */
        st->budget = tok_regex_budget(len);
        st->piece_len = len;
        st->tick_ns = 0;
        st->deadline_ns = 0;
    }
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
