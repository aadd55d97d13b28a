/* json_util.h - typed, error-reporting accessors over jansson values for the header and
 * mask-meta parsers. Allocations go to a pool freed in one call. */
#ifndef CORTIQ_FORMAT_JSON_UTIL_H
#define CORTIQ_FORMAT_JSON_UTIL_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "cortiq/status.h"

typedef struct jsonu_pool {
    void **ptrs;
    size_t n, cap;
} jsonu_pool;

typedef struct jsonu_ctx {
    jsonu_pool *pool;
    const char *ctx; /* file name for messages */
    cmf_err *err;
} jsonu_ctx;

void *jsonu_alloc(jsonu_ctx *c, size_t n); /* zeroed; NULL on failure */
void jsonu_pool_free(jsonu_pool *p);
cmf_status jsonu_nomem(jsonu_ctx *c);
cmf_status jsonu_fail(jsonu_ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Each: absent or null leaves the output at its "absent" value and returns CMF_OK;
 * a value of the wrong type or range is CMF_E_PARSE naming where.key. */
cmf_status jsonu_opt_pos_int(jsonu_ctx *c, json_t *o, const char *where, const char *key,
                             int64_t *out);
cmf_status jsonu_opt_string(jsonu_ctx *c, json_t *o, const char *where, const char *key,
                            const char **out);
cmf_status jsonu_opt_number(jsonu_ctx *c, json_t *o, const char *where, const char *key,
                            double *out, bool *has);
cmf_status jsonu_opt_bool(jsonu_ctx *c, json_t *o, const char *where, const char *key, bool *out);
/* Any JSON value re-serialized compactly (NULL when absent or null). */
cmf_status jsonu_opt_raw(jsonu_ctx *c, json_t *o, const char *key, const char **out);
/* Array of non-negative (positive if `positive`) integers. */
cmf_status jsonu_int_array(jsonu_ctx *c, json_t *v, const char *where, bool positive, int64_t **out,
                           size_t *n);

#endif
