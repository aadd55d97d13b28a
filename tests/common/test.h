/* test.h - the few assertion macros the C tests use. A failed CHECK prints where and why,
 * counts, and lets the test continue; the program's exit status is the failure count. */
#ifndef CORTIQ_TEST_H
#define CORTIQ_TEST_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int t_failures;
static int t_checks;

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        t_checks++;                                                                                \
        if (!(cond)) {                                                                             \
            t_failures++;                                                                          \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);               \
        }                                                                                          \
    } while (0)

#define CHECK_MSG(cond, ...)                                                                       \
    do {                                                                                           \
        t_checks++;                                                                                \
        if (!(cond)) {                                                                             \
            t_failures++;                                                                          \
            fprintf(stderr, "%s:%d: CHECK failed: %s: ", __FILE__, __LINE__, #cond);               \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fputc('\n', stderr);                                                                   \
        }                                                                                          \
    } while (0)

#define CHECK_EQ_U64(a, b)                                                                         \
    CHECK_MSG((unsigned long long)(a) == (unsigned long long)(b), "%llu != %llu",                  \
              (unsigned long long)(a), (unsigned long long)(b))

/* Check that expr returns want. expr passes &t_err_ (declared here) as its cmf_err *, so a
 * failure always shows the library's message:
 *   CHECK_STATUS(cmf_open(path, 0, &f, &t_err_), CMF_OK); */
#define CHECK_STATUS(expr, want)                                                                   \
    do {                                                                                           \
        cmf_err t_err_;                                                                            \
        cmf_err_clear(&t_err_);                                                                    \
        cmf_status t_got_ = (expr);                                                                \
        CHECK_MSG(t_got_ == (want), "got %s (%s), want %s", cmf_status_name(t_got_),               \
                  t_err_.msg[0] ? t_err_.msg                                                       \
                  : t_got_      ? "no message: expr must pass &t_err_"                             \
                                : "no error",                                                           \
                  cmf_status_name(want));                                                          \
    } while (0)

/* Call at the end of main. */
#define TEST_DONE()                                                                                \
    do {                                                                                           \
        printf("%s: %d checks, %d failed\n", __FILE__, t_checks, t_failures);                      \
        return t_failures ? 1 : 0;                                                                 \
    } while (0)

#endif
