/* text_load.h - a model file's tokenizer and chat template, built on a worker thread while the
 * caller pages in the weights and allocates the session. Building the tokenizer from the vocab
 * section is the one slow step of opening a model for text (0.3 s of CPU for Gemma 3's 262,144
 * tokens, docs/PERFORMANCE.md), and the prompt cannot be encoded before it exists, so run in
 * sequence it sits on the path to the first token. Used by cortiq_runtime_open and
 * `cortiq bench --text`. */
#ifndef CORTIQ_RUNTIME_TEXT_LOAD_H
#define CORTIQ_RUNTIME_TEXT_LOAD_H

#include <pthread.h>
#include <stdbool.h>

#include "cortiq/chat_template.h"
#include "cortiq/engine.h"
#include "cortiq/tokenizer.h"

typedef struct cq_text_load {
    /* results, valid after cq_text_load_finish returned CMF_OK (owned by the caller then) */
    cmf_tokenizer *tok;
    cmf_chat_template *tpl;
    bool has_template;   /* the file's own template (else ChatML, CMF_CHAT_TEMPLATE_CHATML) */
    double tok_s, tpl_s; /* seconds each build took on the worker */
    /* private */
    const cortiq_model *m;
    const char *path;
    cmf_status st;
    cmf_err err;
    pthread_t th;
    bool threaded;
} cq_text_load;

/* Start building m's tokenizer and template (path names the file in errors). Runs inline when
 * no thread can be started, so it cannot fail here; failures surface from _finish. m must
 * outlive the build. */
void cq_text_load_start(cq_text_load *t, const cortiq_model *m, const char *path);

/* Wait for the build. On failure nothing is left allocated and err says why (CMF_E_NOT_FOUND:
 * the file has no tokenizer section; anything cmf_tokenizer_load or the template compiler
 * returns). */
cmf_status cq_text_load_finish(cq_text_load *t, cmf_err *err);

#endif
