/* skill_selection.c - the skills registry's selection block (spec §9): decode and encode the
 * affine subspace (mean + f16 basis rows in base64) and the reconstruction error it defines. */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "common/f16.h"
#include "cortiq/skill.h"

static const char k_b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

char *cmf_base64_encode(const void *data, size_t len) {
    const uint8_t *p = data;
    char *out = malloc((len + 2) / 3 * 4 + 1), *o = out;
    if (!out) return NULL;
    for (size_t i = 0; i < len; i += 3) {
        uint32_t v = (uint32_t)p[i] << 16;
        if (i + 1 < len) v |= (uint32_t)p[i + 1] << 8;
        if (i + 2 < len) v |= p[i + 2];
        *o++ = k_b64[v >> 18 & 63];
        *o++ = k_b64[v >> 12 & 63];
        *o++ = i + 1 < len ? k_b64[v >> 6 & 63] : '=';
        *o++ = i + 2 < len ? k_b64[v & 63] : '=';
    }
    *o = 0;
    return out;
}

static int b64_value(char c) {
    const char *p = c ? strchr(k_b64, c) : NULL;
    return p ? (int)(p - k_b64) : -1;
}

bool cmf_base64_decode(const char *text, size_t len, uint8_t **out, size_t *out_len) {
    *out = NULL;
    *out_len = 0;
    if (len % 4) return false;
    uint8_t *buf = malloc(len / 4 * 3 + 1);
    if (!buf) return false;
    size_t n = 0;
    for (size_t i = 0; i < len; i += 4) {
        int v[4], pad = 0;
        for (int k = 0; k < 4; k++) {
            char c = text[i + k];
            if (c == '=' && i + 4 == len && k >= 2) {
                v[k] = 0;
                pad++;
            } else if (pad || (v[k] = b64_value(c)) < 0) {
                free(buf);
                return false;
            }
        }
        uint32_t w =
            (uint32_t)v[0] << 18 | (uint32_t)v[1] << 12 | (uint32_t)v[2] << 6 | (uint32_t)v[3];
        buf[n++] = (uint8_t)(w >> 16);
        if (pad < 2) buf[n++] = (uint8_t)(w >> 8);
        if (pad < 1) buf[n++] = (uint8_t)w;
    }
    *out = buf;
    *out_len = n;
    return true;
}

/* f16 values of a base64 field: exactly `want` of them. */
static cmf_status f16_field(json_t *o, const char *key, uint64_t want, float **out, const char *ctx,
                            cmf_err *err) {
    json_t *v = json_object_get(o, key);
    if (!json_is_string(v))
        return cmf_err_set(err, CMF_E_PARSE, ctx, "selection.%s must be a base64 string", key);
    uint8_t *raw;
    size_t n;
    if (!cmf_base64_decode(json_string_value(v), json_string_length(v), &raw, &n))
        return cmf_err_set(err, CMF_E_PARSE, ctx, "selection.%s is not valid base64", key);
    if (n != want * 2) {
        free(raw);
        return cmf_err_set(err, CMF_E_PARSE, ctx,
                           "selection.%s holds %zu f16 values, the model needs %llu", key, n / 2,
                           (unsigned long long)want);
    }
    float *f = malloc((want ? want : 1) * sizeof *f);
    if (!f) {
        free(raw);
        return cmf_err_set(err, CMF_E_NOMEM, ctx, "selection.%s", key);
    }
    for (uint64_t i = 0; i < want; i++)
        f[i] = f16_to_f32((uint16_t)(raw[2 * i] | raw[2 * i + 1] << 8));
    free(raw);
    *out = f;
    return CMF_OK;
}

cmf_status cmf_skill_selection_decode(const char *text, uint64_t hidden, const char *ctx,
                                      cmf_skill_selection *out, cmf_err *err) {
    memset(out, 0, sizeof *out);
    out->hidden = hidden;
    json_error_t je;
    json_t *o = text ? json_loads(text, 0, &je) : NULL;
    cmf_status st = CMF_OK;
    if (!json_is_object(o)) {
        st = cmf_err_set(err, CMF_E_PARSE, ctx, "selection must be a JSON object");
        goto out;
    }
    json_t *m = json_object_get(o, "metric");
    const char *metric = json_is_string(m) ? json_string_value(m) : "mse";
    if (strcmp(metric, "mse") && strcmp(metric, "mse_unit")) {
        st = cmf_err_set(err, CMF_E_PARSE, ctx,
                         "selection.metric \"%s\": known are \"mse\" and \"mse_unit\"", metric);
        goto out;
    }
    out->unit = !strcmp(metric, "mse_unit");
    json_t *l = json_object_get(o, "phi_layer"), *r = json_object_get(o, "rank");
    if (!json_is_integer(l) || json_integer_value(l) < 0 || json_integer_value(l) > 65535) {
        st = cmf_err_set(err, CMF_E_PARSE, ctx, "selection.phi_layer must be an integer >= 0");
        goto out;
    }
    if (r && (!json_is_integer(r) || json_integer_value(r) < 0 || json_integer_value(r) > 4096)) {
        st = cmf_err_set(err, CMF_E_PARSE, ctx, "selection.rank must be an integer in [0, 4096]");
        goto out;
    }
    out->phi_layer = (uint32_t)json_integer_value(l);
    if (r) {
        out->rank = (uint32_t)json_integer_value(r);
    } else { /* the spec's example has no "rank": the basis' length says it */
        json_t *b = json_object_get(o, "basis");
        size_t f16s = 0;
        if (json_is_string(b) && json_string_length(b) >= 2) {
            const char *t = json_string_value(b) + json_string_length(b);
            f16s = (json_string_length(b) / 4 * 3 - (t[-1] == '=') - (t[-2] == '=')) / 2;
        }
        out->rank =
            hidden && f16s % hidden == 0 && f16s / hidden <= 4096 ? (uint32_t)(f16s / hidden) : 0;
        if (hidden && f16s % hidden) {
            st = cmf_err_set(err, CMF_E_PARSE, ctx,
                             "selection.basis holds %zu f16 values, not a multiple of hidden %llu",
                             f16s, (unsigned long long)hidden);
            goto out;
        }
    }
    if ((st = f16_field(o, "mean", hidden, &out->mean, ctx, err))) goto out;
    st = f16_field(o, "basis", hidden * out->rank, &out->basis, ctx, err);
out:
    json_decref(o);
    if (st) cmf_skill_selection_free(out);
    return st;
}

void cmf_skill_selection_free(cmf_skill_selection *s) {
    if (!s) return;
    free(s->mean);
    free(s->basis);
    s->mean = s->basis = NULL;
}

static char *f16_b64(const float *v, uint64_t n) {
    uint8_t *raw = malloc(n * 2 + 1);
    if (!raw) return NULL;
    for (uint64_t i = 0; i < n; i++) {
        uint16_t h = f32_to_f16(v[i]);
        raw[2 * i] = (uint8_t)h;
        raw[2 * i + 1] = (uint8_t)(h >> 8);
    }
    char *s = cmf_base64_encode(raw, n * 2);
    free(raw);
    return s;
}

char *cmf_skill_selection_encode(const cmf_skill_selection *s) {
    char *mean = f16_b64(s->mean, s->hidden), *basis = f16_b64(s->basis, s->hidden * s->rank);
    json_t *o = json_object();
    char *text = NULL;
    if (mean && basis && o) {
        json_object_set_new(o, "metric", json_string(s->unit ? "mse_unit" : "mse"));
        json_object_set_new(o, "phi_layer", json_integer(s->phi_layer));
        json_object_set_new(o, "rank", json_integer(s->rank));
        json_object_set_new(o, "mean", json_string(mean));
        json_object_set_new(o, "basis", json_string(basis));
        text = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
    }
    json_decref(o);
    free(mean);
    free(basis);
    return text;
}

void cmf_skill_selection_error(const cmf_skill_selection *s, const float *phi, double *raw,
                               double *phi_sq) {
    double pp = 0;
    for (uint64_t i = 0; i < s->hidden; i++)
        pp += (double)phi[i] * phi[i];
    double scale = s->unit ? 1.0 / fmax(sqrt(pp), 1e-12) : 1.0;
    if (s->unit) pp = pp * scale * scale;
    double rr = 0, proj = 0;
    for (uint64_t i = 0; i < s->hidden; i++) {
        double r = phi[i] * scale - s->mean[i];
        rr += r * r;
    }
    for (uint32_t k = 0; k < s->rank; k++) {
        const float *b = s->basis + (size_t)k * s->hidden;
        double c = 0;
        for (uint64_t i = 0; i < s->hidden; i++)
            c += (double)b[i] * (phi[i] * scale - s->mean[i]);
        proj += c * c;
    }
    *raw = rr - proj > 0 ? rr - proj : 0;
    *phi_sq = pp;
}
