/* oracle.h - drive the other CMF implementation's prebuilt binaries (shared/tools/ref-oracle:
 * cmfref, cmfeng, cortiq-ref) from a test and compare what they compute with ours. Include
 * after test.h. */
#ifndef CORTIQ_TEST_ORACLE_H
#define CORTIQ_TEST_ORACLE_H

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sys/wait.h>

#include "engine/npy.h"

/* CI exit code for a skipped test (tests/CMakeLists.txt: SKIP_RETURN_CODE). */
#define TEST_SKIPPED 77

static char g_oracle[1024];

/* The oracle's bin directory: $CORTIQ_REF_ORACLE, else shared/ beside the checkout. False (and
 * a SKIP line) when it is absent. */
static inline bool oracle_find(void) {
    const char *env = getenv("CORTIQ_REF_ORACLE");
    snprintf(g_oracle, sizeof g_oracle, "%s",
             env && *env ? env : CORTIQ_SOURCE_DIR "/../shared/tools/ref-oracle/bin");
    char probe[1100];
    snprintf(probe, sizeof probe, "%s/cmfref", g_oracle);
    if (access(probe, X_OK) == 0) return true;
    printf("SKIP: the reference oracle is absent (%s); set CORTIQ_REF_ORACLE\n", probe);
    return false;
}

/* Run a shell command (printf-style); its stdout (first cap-1 bytes) into out, if non-NULL.
 * Returns the exit status, or -1 when it could not run. */
static inline int __attribute__((format(printf, 3, 4)))
sh(char *out, size_t cap, const char *fmt, ...) {
    char cmd[8192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    FILE *p = popen(cmd, "r");
    if (!p) return -1;
    size_t n = 0;
    char sink[4096];
    for (;;) {
        size_t got =
            out && n + 1 < cap ? fread(out + n, 1, cap - 1 - n, p) : fread(sink, 1, sizeof sink, p);
        if (!got) break;
        if (out && n + 1 < cap) n += got;
    }
    if (out && cap) out[n] = 0;
    int st = pclose(p);
    return st == -1 ? -1 : WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* "1,2,3" of the first n ids. */
static inline void ids_text(const int32_t *ids, size_t n, char *buf, size_t cap) {
    size_t k = 0;
    buf[0] = 0;
    for (size_t i = 0; i < n && k + 12 < cap; i++)
        k += (size_t)snprintf(buf + k, cap - k, "%s%d", i ? "," : "", ids[i]);
}

/* cmfeng logits FILE --ids <first n ids>: its last position's logits (malloc'd, *V of them),
 * NULL when it fails (its stderr goes to the test log). */
static inline float *ref_logits(const char *file, const int32_t *ids, size_t n, size_t *V) {
    char list[4096], npy[64];
    ids_text(ids, n, list, sizeof list);
    snprintf(npy, sizeof npy, "ref_logits_%d.npy", (int)getpid());
    if (sh(NULL, 0, "%s/cmfeng logits '%s' --ids %s --out %s >/dev/null 2>&1", g_oracle, file, list,
           npy) != 0)
        return NULL;
    char dt;
    float *l = npy_load(npy, V, &dt);
    remove(npy);
    return l && dt == 'f' ? l : (free(l), NULL);
}

/* max |a - b| / max |a| over n values */
static inline double rel_diff(const float *a, const float *b, size_t n) {
    double m = 0, d = 0;
    for (size_t i = 0; i < n; i++) {
        m = fmax(m, fabs((double)a[i]));
        d = fmax(d, fabs((double)a[i] - (double)b[i]));
    }
    return m > 0 ? d / m : d;
}

static inline size_t argmax_f(const float *l, size_t n) {
    size_t best = 0;
    for (size_t i = 1; i < n; i++)
        if (l[i] > l[best]) best = i;
    return best;
}

#endif
