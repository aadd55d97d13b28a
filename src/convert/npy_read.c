/* npy_read.c - a strict .npy reader: magic, version, header dict (descr, fortran_order,
 * shape), payload size exactly as the shape says. */
#include "convert/npy_read.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "common/f16.h"
#include "common/fileio.h"

/* The value text after 'key': in the header dict, or NULL. */
static const char *dict_value(const char *hdr, const char *key) {
    char pat[32];
    snprintf(pat, sizeof pat, "'%s'", key);
    const char *p = strstr(hdr, pat);
    if (!p) return NULL;
    p += strlen(pat);
    while (*p == ' ' || *p == ':')
        p++;
    return p;
}

static unsigned elem_size(const char *d) {
    if (!strcmp(d, "<f4")) return 4;
    if (!strcmp(d, "<f8")) return 8;
    if (!strcmp(d, "<f2")) return 2;
    if (!strcmp(d, "|b1") || !strcmp(d, "|u1")) return 1;
    return 0;
}

static cmf_status parse_header(const char *hdr, cq_npy *a, const char *path, cmf_err *err) {
    const char *d = dict_value(hdr, "descr"), *fo = dict_value(hdr, "fortran_order"),
               *sh = dict_value(hdr, "shape");
    if (!d || *d != '\'' || !fo || !sh || *sh != '(')
        return cmf_err_set(err, CMF_E_PARSE, path, "npy header lacks descr/fortran_order/shape");
    const char *e = strchr(d + 1, '\'');
    if (!e || e - d - 1 >= (long)sizeof a->descr)
        return cmf_err_set(err, CMF_E_PARSE, path, "npy descr");
    memcpy(a->descr, d + 1, (size_t)(e - d - 1));
    a->descr[e - d - 1] = 0;
    if (!elem_size(a->descr))
        return cmf_err_set(err, CMF_E_UNSUPPORTED, path,
                           "npy dtype '%s' (read: <f4 <f8 <f2 |b1 |u1)", a->descr);
    if (strncmp(fo, "False", 5))
        return cmf_err_set(err, CMF_E_UNSUPPORTED, path, "Fortran-order npy arrays are not read");
    a->ndim = 0;
    a->numel = 1;
    const char *p = sh + 1;
    for (;;) {
        while (*p == ' ' || *p == ',')
            p++;
        if (*p == ')') break;
        char *end;
        unsigned long long v = strtoull(p, &end, 10);
        if (end == p || a->ndim == CQ_NPY_MAX_DIMS || !v || v > (1ull << 40) ||
            a->numel > (1ull << 40) / v)
            return cmf_err_set(err, CMF_E_PARSE, path, "npy shape");
        a->shape[a->ndim++] = v;
        a->numel *= v;
        p = end;
    }
    return CMF_OK;
}

cmf_status cq_npy_read(const char *path, cq_npy *a, cmf_err *err) {
    memset(a, 0, sizeof *a);
    size_t len;
    uint8_t *buf = (uint8_t *)cq_read_file(path, &len);
    if (!buf) return cmf_err_set(err, CMF_E_IO, path, "cannot read");
    cmf_status st = CMF_OK;
    size_t hlen = 0, hoff = 0;
    if (len < 10 || memcmp(buf, "\x93NUMPY", 6)) {
        st = cmf_err_set(err, CMF_E_PARSE, path, "not an .npy file (magic)");
    } else if (buf[6] == 1) {
        hlen = buf[8] | (size_t)buf[9] << 8, hoff = 10;
    } else if ((buf[6] == 2 || buf[6] == 3) && len >= 12) {
        hlen = buf[8] | (size_t)buf[9] << 8 | (size_t)buf[10] << 16 | (size_t)buf[11] << 24;
        hoff = 12;
    } else {
        st = cmf_err_set(err, CMF_E_UNSUPPORTED, path, "npy version %u", buf[6]);
    }
    if (!st && hlen > len - hoff) st = cmf_err_set(err, CMF_E_BOUNDS, path, "npy header length");
    char *hdr = st ? NULL : malloc(hlen + 1);
    if (!st && !hdr) st = cmf_err_set(err, CMF_E_NOMEM, path, "header");
    if (!st) {
        memcpy(hdr, buf + hoff, hlen);
        hdr[hlen] = 0;
        st = parse_header(hdr, a, path, err);
    }
    free(hdr);
    unsigned es = st ? 0 : elem_size(a->descr);
    const uint8_t *p = buf + hoff + hlen;
    if (!st && (uint64_t)(len - hoff - hlen) != a->numel * es)
        st = cmf_err_set(err, CMF_E_BOUNDS, path, "payload is %zu bytes, shape needs %llu",
                         len - hoff - hlen, (unsigned long long)(a->numel * es));
    if (!st && !(a->data = malloc((size_t)a->numel * sizeof *a->data)))
        st = cmf_err_set(err, CMF_E_NOMEM, path, "%llu values", (unsigned long long)a->numel);
    for (uint64_t i = 0; !st && i < a->numel; i++) {
        const uint8_t *q = p + i * es;
        switch (es) {
        case 4: {
            uint32_t u = q[0] | (uint32_t)q[1] << 8 | (uint32_t)q[2] << 16 | (uint32_t)q[3] << 24;
            memcpy(&a->data[i], &u, 4);
            break;
        }
        case 8: {
            uint64_t u = 0;
            for (int k = 7; k >= 0; k--)
                u = u << 8 | q[k];
            double dv;
            memcpy(&dv, &u, 8);
            a->data[i] = (float)dv;
            break;
        }
        case 2:
            a->data[i] = f16_to_f32((uint16_t)(q[0] | q[1] << 8));
            break;
        default:
            a->data[i] = (float)q[0];
        }
    }
    free(buf);
    if (st) cq_npy_free(a);
    return st;
}

void cq_npy_free(cq_npy *a) {
    free(a->data);
    a->data = NULL;
}
