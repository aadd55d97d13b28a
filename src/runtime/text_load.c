/* text_load.c - the tokenizer and chat template built off the caller's thread (text_load.h). */
#include "common/err.h"
#include "runtime/text_load.h"

#include <string.h>
#include <time.h>

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void *build(void *arg) {
    cq_text_load *t = arg;
    const cmf_file *f = cortiq_model_file(t->m);
    size_t vlen = 0;
    const uint8_t *vocab = cmf_file_vocab(f, &vlen);
    if (!vocab) {
        t->st = cmf_err_set(&t->err, CMF_E_NOT_FOUND, t->path,
                            "no tokenizer section (spec §6): this file cannot take text");
        return NULL;
    }
    double t0 = now_s();
    t->st = cmf_tokenizer_load((const char *)vocab, vlen, &t->tok, &t->err);
    t->tok_s = now_s() - t0;
    if (t->st) return NULL;
    const cmf_tokenizer_config *tc = &cmf_file_header(f)->tokenizer_config;
    t->has_template = tc->present && tc->chat_template;
    const char *src = t->has_template ? tc->chat_template : CMF_CHAT_TEMPLATE_CHATML;
    t0 = now_s();
    t->st = cmf_chat_template_compile(src, strlen(src), &t->tpl, &t->err);
    t->tpl_s = now_s() - t0;
    if (t->st) {
        cmf_tokenizer_free(t->tok);
        t->tok = NULL;
    }
    return NULL;
}

void cq_text_load_start(cq_text_load *t, const cortiq_model *m, const char *path) {
    memset(t, 0, sizeof *t);
    t->m = m;
    t->path = path;
    t->threaded = pthread_create(&t->th, NULL, build, t) == 0;
    if (!t->threaded) build(t);
}

cmf_status cq_text_load_finish(cq_text_load *t, cmf_err *err) {
    if (t->threaded) pthread_join(t->th, NULL);
    t->threaded = false;
    if (t->st && err) *err = t->err;
    return t->st;
}
