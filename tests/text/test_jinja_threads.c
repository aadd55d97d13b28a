/* test_jinja_threads.c - one compiled template rendered from several threads at once gives
 * the single-threaded result every time (rendering never writes to the template). */
#include <pthread.h>
#include <string.h>

#include "common/test.h"
#include "cortiq/chat_template.h"

#define NTHREADS 4
#define ROUNDS   40

static const char *k_src =
    "{%- set ns = namespace(n=0) %}{% macro m(x) %}<{{ x|upper }}>{% endmacro %}"
    "{%- for msg in messages %}{% set ns.n = ns.n + 1 %}{{ m(msg.role) }}{{ msg.content|tojson }}"
    "{{ loop.index }}/{{ ns.n }}{% endfor %}{{ [3, 1, 2]|sort }}{{ {'k': messages|length} }}";
static const char *k_msgs =
    "[{\"role\": \"user\", \"content\": \"a\\u00e9\"}, {\"role\": \"assistant\", \"content\": \"b\"},"
    " {\"role\": \"user\", \"content\": \"c\"}]";

typedef struct job {
    const cmf_chat_template *t;
    const char *want;
    int bad;
} job;

static void *worker(void *arg) {
    job *j = arg;
    for (int r = 0; r < ROUNDS; r++) {
        char *out = NULL;
        size_t n;
        cmf_err err;
        if (cmf_chat_template_render(j->t, k_msgs, NULL, NULL, r & 1, NULL, &out, &n, &err) !=
                CMF_OK ||
            strcmp(out, j->want))
            j->bad++;
        free(out);
    }
    return NULL;
}

int main(void) {
    cmf_chat_template *t = NULL;
    CHECK_STATUS(cmf_chat_template_compile(k_src, strlen(k_src), &t, &t_err_), CMF_OK);
    if (!t) TEST_DONE();
    char *want = NULL;
    size_t n;
    cmf_err err;
    CHECK(cmf_chat_template_render(t, k_msgs, NULL, NULL, false, NULL, &want, &n, &err) == CMF_OK);
    CHECK_MSG(
        want && !strcmp(want,
                        "<USER>\"a\xc3\xa9\"1/1<ASSISTANT>\"b\"2/2<USER>\"c\"3/3[1, 2, 3]{'k': 3}"),
        "got %s", want ? want : "");
    pthread_t th[NTHREADS];
    job jobs[NTHREADS];
    for (int i = 0; i < NTHREADS; i++) {
        jobs[i] = (job){t, want, 0};
        CHECK(pthread_create(&th[i], NULL, worker, &jobs[i]) == 0);
    }
    for (int i = 0; i < NTHREADS; i++) {
        pthread_join(th[i], NULL);
        CHECK_MSG(jobs[i].bad == 0, "thread %d: %d bad renders", i, jobs[i].bad);
    }
    free(want);
    cmf_chat_template_free(t);
    TEST_DONE();
}
