#include "common/err.h"
#include "format/json_util.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool pool_push(jsonu_pool *p, void *ptr) {
    if (p->n == p->cap) {
        size_t cap = p->cap ? p->cap * 2 : 16;
        void **np = realloc(p->ptrs, cap * sizeof *np);
        if (!np) return false;
        p->ptrs = np;
        p->cap = cap;
    }
    p->ptrs[p->n++] = ptr;
    return true;
}

void *jsonu_alloc(jsonu_ctx *c, size_t n) {
    void *p = calloc(1, n ? n : 1);
    if (p && !pool_push(c->pool, p)) {
        free(p);
        return NULL;
    }
    return p;
}

void jsonu_pool_free(jsonu_pool *p) {
    for (size_t i = 0; i < p->n; i++)
        free(p->ptrs[i]);
    free(p->ptrs);
    memset(p, 0, sizeof *p);
}

cmf_status jsonu_nomem(jsonu_ctx *c) {
    return cmf_err_set(c->err, CMF_E_NOMEM, c->ctx, "parsing header JSON");
}

cmf_status jsonu_fail(jsonu_ctx *c, const char *fmt, ...) {
    char buf[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    return cmf_err_set(c->err, CMF_E_PARSE, c->ctx, "%s", buf);
}

cmf_status jsonu_opt_pos_int(jsonu_ctx *c, json_t *o, const char *where, const char *key,
                             int64_t *out) {
    json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) return CMF_OK;
    if (json_is_real(v)) {
        double d = json_real_value(v); /* some writers emit 4096.0; accept exact integers only */
        if (d >= 0 && d <= 9.007199254740992e15 && floor(d) == d) {
            *out = (int64_t)d;
            return CMF_OK;
        }
    }
    if (!json_is_integer(v) || json_integer_value(v) < 0)
        return jsonu_fail(c, "%s.%s must be a non-negative integer", where, key);
    *out = json_integer_value(v);
    return CMF_OK;
}

cmf_status jsonu_opt_string(jsonu_ctx *c, json_t *o, const char *where, const char *key,
                            const char **out) {
    json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) return CMF_OK;
    if (!json_is_string(v)) return jsonu_fail(c, "%s.%s must be a string", where, key);
    if (strlen(json_string_value(v)) != json_string_length(v))
        return jsonu_fail(c, "%s.%s contains a NUL character", where, key);
    *out = json_string_value(v);
    return CMF_OK;
}

cmf_status jsonu_opt_number(jsonu_ctx *c, json_t *o, const char *where, const char *key,
                            double *out, bool *has) {
    json_t *v = json_object_get(o, key);
    *has = false;
    if (!v || json_is_null(v)) return CMF_OK;
    if (!json_is_number(v)) return jsonu_fail(c, "%s.%s must be a number", where, key);
    double d = json_number_value(v);
    if (!isfinite(d)) return jsonu_fail(c, "%s.%s is not finite", where, key);
    *out = d;
    *has = true;
    return CMF_OK;
}

cmf_status jsonu_opt_bool(jsonu_ctx *c, json_t *o, const char *where, const char *key, bool *out) {
    json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) return CMF_OK;
    if (!json_is_boolean(v)) return jsonu_fail(c, "%s.%s must be true or false", where, key);
    *out = json_is_true(v);
    return CMF_OK;
}

cmf_status jsonu_opt_raw(jsonu_ctx *c, json_t *o, const char *key, const char **out) {
    json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) return CMF_OK;
    char *s = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
    if (!s || !pool_push(c->pool, s)) {
        free(s);
        return jsonu_nomem(c);
    }
    *out = s;
    return CMF_OK;
}

cmf_status jsonu_int_array(jsonu_ctx *c, json_t *v, const char *where, bool positive, int64_t **out,
                           size_t *n) {
    if (!json_is_array(v)) return jsonu_fail(c, "%s must be an array of integers", where);
    size_t len = json_array_size(v);
    int64_t *a = jsonu_alloc(c, (len ? len : 1) * sizeof *a);
    if (!a) return jsonu_nomem(c);
    for (size_t i = 0; i < len; i++) {
        json_t *e = json_array_get(v, i);
        if (!json_is_integer(e) || json_integer_value(e) < (positive ? 1 : 0))
            return jsonu_fail(c, "%s[%zu] must be a %s integer", where, i,
                              positive ? "positive" : "non-negative");
        a[i] = json_integer_value(e);
    }
    *out = a;
    *n = len;
    return CMF_OK;
}
