/* err.h - how the library fills a cmf_err (cortiq/status.h). Internal: callers read the
 * record, only the library writes it. */
#ifndef CORTIQ_COMMON_ERR_H
#define CORTIQ_COMMON_ERR_H

#include "cortiq/status.h"

/* Fill *err (if non-NULL) with code and a formatted message "<ctx>: <Name>: <fmt...>".
 * ctx may be NULL (no prefix). Returns code, so callers can `return cmf_err_set(...)`. */
cmf_status cmf_err_set(cmf_err *err, cmf_status code, const char *ctx, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#endif
