#include "common/err.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static const char *const k_names[CMF_STATUS_COUNT] = {
    [CMF_OK] = "OK",
    [CMF_E_INVALID_MAGIC] = "InvalidMagic",
    [CMF_E_UNSUPPORTED_VERSION] = "UnsupportedVersion",
    [CMF_E_UNSUPPORTED_FEATURE] = "UnsupportedFeature",
    [CMF_E_BOUNDS] = "Bounds",
    [CMF_E_PARSE] = "Parse",
    [CMF_E_HASH] = "Hash",
    [CMF_E_IO] = "IO",
    [CMF_E_NOMEM] = "OutOfMemory",
    [CMF_E_INVALID_ARG] = "InvalidArgument",
    [CMF_E_NOT_FOUND] = "NotFound",
    [CMF_E_UNSUPPORTED] = "Unsupported",
    [CMF_E_SHARD] = "Shard",
    [CMF_E_LIMIT] = "Limit",
    [CMF_E_NETWORK] = "Network",
};

const char *cmf_status_name(cmf_status s) {
    return ((unsigned)s < CMF_STATUS_COUNT && k_names[s]) ? k_names[s] : "?";
}

cmf_status cmf_err_set(cmf_err *err, cmf_status code, const char *ctx, const char *fmt, ...) {
    if (!err) return code;
    err->code = code;
    int n = ctx ? snprintf(err->msg, sizeof err->msg, "%s: %s: ", ctx, cmf_status_name(code))
                : snprintf(err->msg, sizeof err->msg, "%s: ", cmf_status_name(code));
    if (n < 0) n = 0;
    if ((size_t)n < sizeof err->msg) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg + n, sizeof err->msg - (size_t)n, fmt, ap);
        va_end(ap);
    }
    return code;
}

void cmf_err_clear(cmf_err *err) {
    if (!err) return;
    err->code = CMF_OK;
    err->msg[0] = '\0';
}
