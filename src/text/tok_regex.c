/* tok_regex.c - Oniguruma regexes (Ruby syntax, UTF-8: the engine and defaults HF tokenizers
 * uses) and the literal-or-regex pattern search shared by Split, Replace and the decoders. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* memmem */
#endif
#include <oniguruma.h>
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
static void region_free(void *r) { onig_region_free(r, 1); }
static void region_key_init(void) { region_key_ok = pthread_key_create(&region_key, region_free) == 0; }

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

bool tok_regex_search(const tok_regex *r, const char *s, size_t len, size_t start, size_t *ms,
                      size_t *me) {
    OnigRegion *region = thread_region();
    if (!region) return false;
    const OnigUChar *b = (const OnigUChar *)s, *e = b + len;
    int pos = onig_search(r->re, b, e, b + start, e, region, ONIG_OPTION_NONE);
    if (pos < 0 || region->num_regs < 1) return false;
    *ms = (size_t)region->beg[0];
    *me = (size_t)region->end[0];
    return true;
}

void tok_pattern_free(tok_pattern *p) {
    free(p->lit);
    tok_regex_free(p->re);
    memset(p, 0, sizeof *p);
}

bool tok_pattern_next(const tok_pattern *p, const char *s, size_t len, size_t *pos, size_t *last_end,
                      size_t *ms, size_t *me) {
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
