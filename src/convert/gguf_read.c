/* gguf_read.c - GGUF v2/v3 reader: header, metadata, tensor infos, all spans validated.
 *
 * Every count read from the file is compared with the bytes that remain BEFORE anything is
 * allocated for it (the classic GGUF bugs: n_tensors/n_kv = 2^64-1, string lengths that wrap
 * a pointer, tensor spans past EOF, overlapping tensors), and every product and sum is checked.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/bytes.h"
#include "common/checked.h"
#include "common/err.h"
#include "convert/map_file.h"
#include "cortiq/gguf.h"

#define GGUF_MAX_ALIGNMENT (1u << 30)

struct cmf_gguf {
    char *name;
    cv_map map;
    const uint8_t *bytes;
    uint64_t len;
    uint32_t version;
    uint64_t alignment, data_off;
    size_t n_kv, n_tensors;
    cmf_gguf_kv *kv;
    cmf_gguf_tensor *tensors;
    size_t *kv_sorted, *tensor_sorted; /* indices in name order, for look-ups */
};

typedef struct cursor {
    const uint8_t *p;
    uint64_t len, pos;
    const char *ctx;
    cmf_err *err;
} cursor;

static cmf_status need(cursor *c, uint64_t n, const char *what) {
    if (!ck_span_within(c->pos, n, c->len))
        return cmf_err_set(c->err, CMF_E_BOUNDS, c->ctx,
                           "%s: %llu bytes at offset %llu pass the end of the file (%llu bytes)",
                           what, (unsigned long long)n, (unsigned long long)c->pos,
                           (unsigned long long)c->len);
    return CMF_OK;
}

static cmf_status rd_u32(cursor *c, uint32_t *v, const char *what) {
    cmf_status st = need(c, 4, what);
    if (st) return st;
    *v = ld_u32(c->p + c->pos);
    c->pos += 4;
    return CMF_OK;
}

static cmf_status rd_u64(cursor *c, uint64_t *v, const char *what) {
    cmf_status st = need(c, 8, what);
    if (st) return st;
    *v = ld_u64(c->p + c->pos);
    c->pos += 8;
    return CMF_OK;
}

/* A gguf string: u64 length then bytes. max_len = 0: only bounded by the file. */
static cmf_status rd_str(cursor *c, cmf_gguf_str *s, uint64_t max_len, const char *what) {
    uint64_t n;
    cmf_status st = rd_u64(c, &n, what);
    if (st) return st;
    if (max_len && n > max_len)
        return cmf_err_set(c->err, CMF_E_LIMIT, c->ctx,
                           "%s: length %llu at offset %llu exceeds the cap %llu", what,
                           (unsigned long long)n, (unsigned long long)(c->pos - 8),
                           (unsigned long long)max_len);
    if ((st = need(c, n, what))) return st;
    s->ptr = (const char *)c->p + c->pos;
    s->len = n;
    c->pos += n;
    return CMF_OK;
}

static char *dup_str(cmf_gguf_str s) {
    size_t n = (size_t)s.len;
    const char *z = memchr(s.ptr, 0, n);
    if (z) n = (size_t)(z - s.ptr);
    char *out = malloc(n + 1);
    if (!out) return NULL;
    memcpy(out, s.ptr, n);
    out[n] = 0;
    return out;
}

static const char *vtype_name(uint32_t t) {
    static const char *names[] = {"u8",   "i8",     "u16",   "i16", "u32", "i32", "f32",
                                  "bool", "string", "array", "u64", "i64", "f64"};
    return t < CMF_GGUF_VTYPE_COUNT ? names[t] : "unknown";
}

/* Byte size of a fixed-size scalar type, 0 for string/array/unknown. */
static unsigned scalar_size(uint32_t t) {
    switch (t) {
    case CMF_GGUF_U8:
    case CMF_GGUF_I8:
    case CMF_GGUF_BOOL:
        return 1;
    case CMF_GGUF_U16:
    case CMF_GGUF_I16:
        return 2;
    case CMF_GGUF_U32:
    case CMF_GGUF_I32:
    case CMF_GGUF_F32:
        return 4;
    case CMF_GGUF_U64:
    case CMF_GGUF_I64:
    case CMF_GGUF_F64:
        return 8;
    default:
        return 0;
    }
}

/* Decode a fixed-size scalar at p into the widened fields. */
static void widen(uint32_t t, const uint8_t *p, uint64_t *u, int64_t *i, double *f) {
    uint64_t uv = 0;
    int64_t iv = 0;
    double fv = 0;
    switch (t) {
    case CMF_GGUF_U8:
    case CMF_GGUF_BOOL:
        uv = p[0];
        iv = (int64_t)uv;
        break;
    case CMF_GGUF_I8:
        iv = (int8_t)p[0];
        uv = (uint64_t)iv;
        break;
    case CMF_GGUF_U16:
        uv = ld_u16(p);
        iv = (int64_t)uv;
        break;
    case CMF_GGUF_I16:
        iv = (int16_t)ld_u16(p);
        uv = (uint64_t)iv;
        break;
    case CMF_GGUF_U32:
        uv = ld_u32(p);
        iv = (int64_t)uv;
        break;
    case CMF_GGUF_I32:
        iv = (int32_t)ld_u32(p);
        uv = (uint64_t)iv;
        break;
    case CMF_GGUF_U64:
        uv = ld_u64(p);
        iv = (int64_t)uv;
        break;
    case CMF_GGUF_I64:
        uv = ld_u64(p);
        iv = (int64_t)uv;
        break;
    case CMF_GGUF_F32: {
        uint32_t b = ld_u32(p);
        float x;
        memcpy(&x, &b, 4);
        fv = x;
        break;
    }
    case CMF_GGUF_F64: {
        uint64_t b = ld_u64(p);
        memcpy(&fv, &b, 8);
        break;
    }
    default:
        break;
    }
    if (t != CMF_GGUF_F32 && t != CMF_GGUF_F64)
        fv = (t == CMF_GGUF_I8 || t == CMF_GGUF_I16 || t == CMF_GGUF_I32 || t == CMF_GGUF_I64)
                 ? (double)iv
                 : (double)uv;
    *u = uv;
    *i = iv;
    *f = fv;
}

static cmf_status parse_kv(cursor *c, cmf_gguf_kv *kv) {
    cmf_gguf_str key;
    cmf_status st = rd_str(c, &key, CMF_GGUF_MAX_NAME, "metadata key");
    if (st) return st;
    if (key.len == 0)
        return cmf_err_set(c->err, CMF_E_PARSE, c->ctx, "empty metadata key at offset %llu",
                           (unsigned long long)(c->pos - 8));
    if (!(kv->key = dup_str(key))) return cmf_err_set(c->err, CMF_E_NOMEM, c->ctx, "out of memory");
    uint32_t t;
    if ((st = rd_u32(c, &t, "metadata value type"))) return st;
    if (t >= CMF_GGUF_VTYPE_COUNT)
        return cmf_err_set(c->err, CMF_E_PARSE, c->ctx, "key '%s': unknown value type %u", kv->key,
                           t);
    kv->type = (cmf_gguf_vtype)t;
    if (t == CMF_GGUF_STRING) {
        if ((st = rd_str(c, &kv->str, 0, kv->key))) return st;
        if (!(kv->cstr = dup_str(kv->str)))
            return cmf_err_set(c->err, CMF_E_NOMEM, c->ctx, "out of memory");
        return CMF_OK;
    }
    if (t != CMF_GGUF_ARRAY) {
        unsigned sz = scalar_size(t);
        if ((st = need(c, sz, kv->key))) return st;
        widen(t, c->p + c->pos, &kv->u64, &kv->i64, &kv->f64);
        if (t == CMF_GGUF_BOOL && c->p[c->pos] > 1)
            return cmf_err_set(c->err, CMF_E_PARSE, c->ctx, "key '%s': bool value %u is not 0 or 1",
                               kv->key, c->p[c->pos]);
        c->pos += sz;
        return CMF_OK;
    }
    uint32_t at;
    uint64_t n;
    if ((st = rd_u32(c, &at, kv->key)) || (st = rd_u64(c, &n, kv->key))) return st;
    if (at == CMF_GGUF_ARRAY)
        return cmf_err_set(c->err, CMF_E_PARSE, c->ctx, "key '%s': nested arrays are not supported",
                           kv->key);
    if (at >= CMF_GGUF_VTYPE_COUNT)
        return cmf_err_set(c->err, CMF_E_PARSE, c->ctx, "key '%s': unknown array element type %u",
                           kv->key, at);
    kv->arr_type = (cmf_gguf_vtype)at;
    kv->arr_len = n;
    if (at == CMF_GGUF_STRING) {
        /* every string needs at least its 8-byte length: bound n before allocating */
        uint64_t min_bytes;
        if (!ck_mul_u64(n, 8, &min_bytes) || (st = need(c, min_bytes, kv->key)))
            return st ? st
                      : cmf_err_set(c->err, CMF_E_BOUNDS, c->ctx,
                                    "key '%s': %llu strings pass the end of the file", kv->key,
                                    (unsigned long long)n);
        cmf_gguf_str *arr = calloc(n ? (size_t)n : 1, sizeof *arr);
        if (!arr)
            return cmf_err_set(c->err, CMF_E_NOMEM, c->ctx, "key '%s': %llu strings: out of memory",
                               kv->key, (unsigned long long)n);
        kv->arr_str = arr;
        for (uint64_t i = 0; i < n; i++)
            if ((st = rd_str(c, &arr[i], 0, kv->key))) return st;
        return CMF_OK;
    }
    uint64_t bytes;
    if (!ck_mul_u64(n, scalar_size(at), &bytes))
        return cmf_err_set(c->err, CMF_E_BOUNDS, c->ctx, "key '%s': %llu x %s elements overflow",
                           kv->key, (unsigned long long)n, vtype_name(at));
    if ((st = need(c, bytes, kv->key))) return st;
    kv->arr_data = c->p + c->pos;
    c->pos += bytes;
    return CMF_OK;
}

static int cmp_kv_idx(const void *a, const void *b, void *base) {
    const cmf_gguf_kv *kv = base;
    return strcmp(kv[*(const size_t *)a].key, kv[*(const size_t *)b].key);
}
static int cmp_tensor_idx(const void *a, const void *b, void *base) {
    const cmf_gguf_tensor *t = base;
    return strcmp(t[*(const size_t *)a].name, t[*(const size_t *)b].name);
}
static int cmp_tensor_off(const void *a, const void *b, void *base) {
    const cmf_gguf_tensor *t = base;
    uint64_t x = t[*(const size_t *)a].off, y = t[*(const size_t *)b].off;
    return x < y ? -1 : x > y;
}

static cmf_status parse_tensor_info(cmf_gguf *g, cursor *c, cmf_gguf_tensor *t, size_t idx) {
    cmf_gguf_str name;
    cmf_status st = rd_str(c, &name, CMF_GGUF_MAX_NAME, "tensor name");
    if (st) return st;
    if (name.len == 0)
        return cmf_err_set(c->err, CMF_E_PARSE, c->ctx, "tensor %zu has an empty name", idx);
    if (!(t->name = dup_str(name)))
        return cmf_err_set(c->err, CMF_E_NOMEM, c->ctx, "out of memory");
    if (strlen(t->name) != name.len)
        return cmf_err_set(c->err, CMF_E_PARSE, c->ctx, "tensor %zu: name contains a NUL byte",
                           idx);
    uint32_t nd;
    if ((st = rd_u32(c, &nd, t->name))) return st;
    if (nd == 0 || nd > CMF_GGUF_MAX_DIMS)
        return cmf_err_set(c->err, CMF_E_PARSE, c->ctx, "tensor '%s': n_dims %u not in 1..%d",
                           t->name, nd, CMF_GGUF_MAX_DIMS);
    t->ndim = nd;
    uint64_t nelem = 1;
    for (uint32_t d = 0; d < CMF_GGUF_MAX_DIMS; d++)
        t->ne[d] = 1;
    for (uint32_t d = 0; d < nd; d++) {
        if ((st = rd_u64(c, &t->ne[d], t->name))) return st;
        if (t->ne[d] > (uint64_t)INT64_MAX || !ck_mul_u64(nelem, t->ne[d], &nelem) ||
            nelem > (uint64_t)INT64_MAX)
            return cmf_err_set(c->err, CMF_E_PARSE, c->ctx,
                               "tensor '%s': element count overflows at dim %u (ne=%llu)", t->name,
                               d, (unsigned long long)t->ne[d]);
    }
    for (uint32_t d = 0; d < nd; d++)
        t->shape[d] = t->ne[nd - 1 - d];
    for (uint32_t d = nd; d < CMF_GGUF_MAX_DIMS; d++)
        t->shape[d] = 1;
    t->nelem = nelem;
    t->row_len = t->ne[0];
    t->nrows = t->ne[0] ? nelem / t->ne[0] : 0;
    if ((st = rd_u32(c, &t->type, t->name))) return st;
    uint32_t be, bb;
    if (!cmf_ggml_type_size(t->type, &be, &bb))
        return cmf_err_set(c->err, CMF_E_UNSUPPORTED, c->ctx,
                           "tensor '%s': unknown ggml type id %u", t->name, t->type);
    if (t->ne[0] % be != 0)
        return cmf_err_set(c->err, CMF_E_PARSE, c->ctx,
                           "tensor '%s': row length %llu is not a multiple of the %s block size %u",
                           t->name, (unsigned long long)t->ne[0], cmf_ggml_type_name(t->type), be);
    uint64_t row_bytes;
    if (!ck_mul_u64(t->ne[0] / be, bb, &row_bytes) || !ck_mul_u64(row_bytes, t->nrows, &t->nbytes))
        return cmf_err_set(c->err, CMF_E_PARSE, c->ctx, "tensor '%s': byte size overflows",
                           t->name);
    if ((st = rd_u64(c, &t->off, t->name))) return st; /* relative for now */
    (void)g;
    return CMF_OK;
}

static cmf_status gguf_parse(cmf_gguf *g, cmf_err *err) {
    cursor c = {g->bytes, g->len, 0, g->name, err};
    cmf_status st;
    if (g->len < 4 || memcmp(g->bytes, "GGUF", 4) != 0)
        return cmf_err_set(err, CMF_E_INVALID_MAGIC, g->name,
                           "not a GGUF file (magic is not \"GGUF\")");
    c.pos = 4;
    if ((st = rd_u32(&c, &g->version, "version"))) return st;
    if (g->version != 2 && g->version != 3)
        return cmf_err_set(err, CMF_E_UNSUPPORTED_VERSION, g->name,
                           "GGUF version %u (0x%08x) is not 2 or 3%s", g->version, g->version,
                           (g->version & 0xffff) == 0 ? " (big-endian file?)" : "");
    uint64_t nt, nkv;
    if ((st = rd_u64(&c, &nt, "tensor count")) || (st = rd_u64(&c, &nkv, "metadata count")))
        return st;
    /* bound the counts by the caps and by the smallest possible record sizes */
    if (nt > CMF_GGUF_MAX_TENSORS)
        return cmf_err_set(err, CMF_E_LIMIT, g->name, "tensor count %llu exceeds the cap %u",
                           (unsigned long long)nt, CMF_GGUF_MAX_TENSORS);
    if (nkv > CMF_GGUF_MAX_KV)
        return cmf_err_set(err, CMF_E_LIMIT, g->name, "metadata count %llu exceeds the cap %u",
                           (unsigned long long)nkv, CMF_GGUF_MAX_KV);
    uint64_t rest = g->len - c.pos;
    if (nkv * 13 > rest ||
        nt * 32 > rest) /* key(8+1)+type(4); name(8+1)+ndim(4)+dim(8)+type(4)+off(8)-ish */
        return cmf_err_set(
            err, CMF_E_BOUNDS, g->name,
            "%llu metadata entries and %llu tensor infos cannot fit in the %llu bytes left",
            (unsigned long long)nkv, (unsigned long long)nt, (unsigned long long)rest);
    g->n_kv = (size_t)nkv;
    g->n_tensors = (size_t)nt;
    g->kv = calloc(g->n_kv ? g->n_kv : 1, sizeof *g->kv);
    g->tensors = calloc(g->n_tensors ? g->n_tensors : 1, sizeof *g->tensors);
    g->kv_sorted = calloc(g->n_kv ? g->n_kv : 1, sizeof(size_t));
    g->tensor_sorted = calloc(g->n_tensors ? g->n_tensors : 1, sizeof(size_t));
    if (!g->kv || !g->tensors || !g->kv_sorted || !g->tensor_sorted)
        return cmf_err_set(err, CMF_E_NOMEM, g->name, "out of memory");
    for (size_t i = 0; i < g->n_kv; i++)
        if ((st = parse_kv(&c, &g->kv[i]))) return st;
    for (size_t i = 0; i < g->n_kv; i++)
        g->kv_sorted[i] = i;
    qsort_r(g->kv_sorted, g->n_kv, sizeof(size_t), cmp_kv_idx, g->kv);
    for (size_t i = 1; i < g->n_kv; i++)
        if (strcmp(g->kv[g->kv_sorted[i]].key, g->kv[g->kv_sorted[i - 1]].key) == 0)
            return cmf_err_set(err, CMF_E_PARSE, g->name, "duplicate metadata key '%s'",
                               g->kv[g->kv_sorted[i]].key);
    g->alignment = CMF_GGUF_DEFAULT_ALIGNMENT;
    const cmf_gguf_kv *al = cmf_gguf_find_kv(g, "general.alignment");
    if (al) {
        if (!scalar_size(al->type) || al->type == CMF_GGUF_F32 || al->type == CMF_GGUF_F64 ||
            al->type == CMF_GGUF_BOOL)
            return cmf_err_set(err, CMF_E_PARSE, g->name,
                               "general.alignment has type %s, not an integer",
                               vtype_name(al->type));
        uint64_t a = al->u64;
        if (a == 0 || (a & (a - 1)) || a > GGUF_MAX_ALIGNMENT)
            return cmf_err_set(err, CMF_E_PARSE, g->name,
                               "general.alignment %lld is not a power of two in 1..2^30",
                               (long long)al->i64);
        g->alignment = a;
    }
    for (size_t i = 0; i < g->n_tensors; i++)
        if ((st = parse_tensor_info(g, &c, &g->tensors[i], i))) return st;
    g->data_off = ck_align_up(c.pos, g->alignment);
    uint64_t data_len = g->data_off <= g->len ? g->len - g->data_off : 0;
    for (size_t i = 0; i < g->n_tensors; i++) {
        cmf_gguf_tensor *t = &g->tensors[i];
        if (t->off % g->alignment)
            return cmf_err_set(err, CMF_E_PARSE, g->name,
                               "tensor '%s': offset %llu is not a multiple of the alignment %llu",
                               t->name, (unsigned long long)t->off,
                               (unsigned long long)g->alignment);
        if (g->data_off > g->len || !ck_span_within(t->off, t->nbytes, data_len))
            return cmf_err_set(
                err, CMF_E_BOUNDS, g->name,
                "tensor '%s': data [%llu, +%llu) passes the end of the data area (%llu bytes)",
                t->name, (unsigned long long)t->off, (unsigned long long)t->nbytes,
                (unsigned long long)data_len);
        t->off += g->data_off;
        t->data = g->bytes + t->off;
    }
    for (size_t i = 0; i < g->n_tensors; i++)
        g->tensor_sorted[i] = i;
    qsort_r(g->tensor_sorted, g->n_tensors, sizeof(size_t), cmp_tensor_idx, g->tensors);
    for (size_t i = 1; i < g->n_tensors; i++)
        if (strcmp(g->tensors[g->tensor_sorted[i]].name,
                   g->tensors[g->tensor_sorted[i - 1]].name) == 0)
            return cmf_err_set(err, CMF_E_PARSE, g->name, "duplicate tensor name '%s'",
                               g->tensors[g->tensor_sorted[i]].name);
    /* overlap check on a by-offset order (a temporary copy of the index) */
    if (g->n_tensors > 1) {
        size_t *by_off = malloc(g->n_tensors * sizeof(size_t));
        if (!by_off) return cmf_err_set(err, CMF_E_NOMEM, g->name, "out of memory");
        for (size_t i = 0; i < g->n_tensors; i++)
            by_off[i] = i;
        qsort_r(by_off, g->n_tensors, sizeof(size_t), cmp_tensor_off, g->tensors);
        for (size_t i = 1; i < g->n_tensors; i++) {
            const cmf_gguf_tensor *a = &g->tensors[by_off[i - 1]], *b = &g->tensors[by_off[i]];
            if (a->off + a->nbytes > b->off) {
                st = cmf_err_set(err, CMF_E_PARSE, g->name,
                                 "tensors '%s' and '%s' overlap ([%llu,+%llu) and [%llu,+%llu))",
                                 a->name, b->name, (unsigned long long)a->off,
                                 (unsigned long long)a->nbytes, (unsigned long long)b->off,
                                 (unsigned long long)b->nbytes);
                free(by_off);
                return st;
            }
        }
        free(by_off);
    }
    return CMF_OK;
}

static cmf_status open_common(cmf_gguf *g, cmf_gguf **out, cmf_err *err) {
    cmf_status st = gguf_parse(g, err);
    if (st) {
        cmf_gguf_close(g);
        return st;
    }
    *out = g;
    return CMF_OK;
}

cmf_status cmf_gguf_open(const char *path, cmf_gguf **out, cmf_err *err) {
    if (!path || !out)
        return cmf_err_set(err, CMF_E_INVALID_ARG, NULL, "cmf_gguf_open: NULL argument");
    *out = NULL;
    cmf_gguf *g = calloc(1, sizeof *g);
    if (!g || !(g->name = strdup(path))) {
        free(g);
        return cmf_err_set(err, CMF_E_NOMEM, path, "out of memory");
    }
    cmf_status st = cv_map_open(path, &g->map, err);
    if (st) {
        cmf_gguf_close(g);
        return st;
    }
    g->bytes = g->map.bytes;
    g->len = g->map.len;
    return open_common(g, out, err);
}

cmf_status cmf_gguf_open_memory(const void *buf, size_t len, const char *name, cmf_gguf **out,
                                cmf_err *err) {
    if (!out || (!buf && len))
        return cmf_err_set(err, CMF_E_INVALID_ARG, name, "cmf_gguf_open_memory: NULL argument");
    *out = NULL;
    cmf_gguf *g = calloc(1, sizeof *g);
    if (!g || !(g->name = strdup(name ? name : "<memory>"))) {
        free(g);
        return cmf_err_set(err, CMF_E_NOMEM, name, "out of memory");
    }
    g->bytes = buf;
    g->len = len;
    return open_common(g, out, err);
}

void cmf_gguf_close(cmf_gguf *g) {
    if (!g) return;
    if (g->kv)
        for (size_t i = 0; i < g->n_kv; i++) {
            free((void *)g->kv[i].key);
            free((void *)g->kv[i].cstr);
            free((void *)g->kv[i].arr_str);
        }
    if (g->tensors)
        for (size_t i = 0; i < g->n_tensors; i++)
            free((void *)g->tensors[i].name);
    free(g->kv);
    free(g->tensors);
    free(g->kv_sorted);
    free(g->tensor_sorted);
    cv_map_close(&g->map);
    free(g->name);
    free(g);
}

uint32_t cmf_gguf_version(const cmf_gguf *g) {
    return g->version;
}
uint64_t cmf_gguf_alignment(const cmf_gguf *g) {
    return g->alignment;
}
uint64_t cmf_gguf_data_offset(const cmf_gguf *g) {
    return g->data_off;
}
const char *cmf_gguf_name(const cmf_gguf *g) {
    return g->name;
}
size_t cmf_gguf_kv_count(const cmf_gguf *g) {
    return g->n_kv;
}
const cmf_gguf_kv *cmf_gguf_kv_at(const cmf_gguf *g, size_t i) {
    return i < g->n_kv ? &g->kv[i] : NULL;
}
size_t cmf_gguf_tensor_count(const cmf_gguf *g) {
    return g->n_tensors;
}
const cmf_gguf_tensor *cmf_gguf_tensor_at(const cmf_gguf *g, size_t i) {
    return i < g->n_tensors ? &g->tensors[i] : NULL;
}

const cmf_gguf_kv *cmf_gguf_find_kv(const cmf_gguf *g, const char *key) {
    size_t lo = 0, hi = g->n_kv;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const cmf_gguf_kv *kv = &g->kv[g->kv_sorted[mid]];
        if (!kv->key) return NULL; /* during a failed parse */
        int c = strcmp(kv->key, key);
        if (c == 0) return kv;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

const cmf_gguf_tensor *cmf_gguf_find_tensor(const cmf_gguf *g, const char *name) {
    size_t lo = 0, hi = g->n_tensors;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const cmf_gguf_tensor *t = &g->tensors[g->tensor_sorted[mid]];
        int c = strcmp(t->name, name);
        if (c == 0) return t;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

static bool is_int_type(uint32_t t) {
    return t == CMF_GGUF_U8 || t == CMF_GGUF_I8 || t == CMF_GGUF_U16 || t == CMF_GGUF_I16 ||
           t == CMF_GGUF_U32 || t == CMF_GGUF_I32 || t == CMF_GGUF_U64 || t == CMF_GGUF_I64 ||
           t == CMF_GGUF_BOOL;
}

bool cmf_gguf_get_int(const cmf_gguf *g, const char *key, int64_t *out) {
    const cmf_gguf_kv *kv = cmf_gguf_find_kv(g, key);
    if (!kv || !is_int_type(kv->type)) return false;
    *out = kv->i64;
    return true;
}

bool cmf_gguf_get_float(const cmf_gguf *g, const char *key, double *out) {
    const cmf_gguf_kv *kv = cmf_gguf_find_kv(g, key);
    if (!kv || !(is_int_type(kv->type) || kv->type == CMF_GGUF_F32 || kv->type == CMF_GGUF_F64) ||
        kv->type == CMF_GGUF_BOOL)
        return false;
    *out = kv->f64;
    return true;
}

bool cmf_gguf_get_bool(const cmf_gguf *g, const char *key, bool *out) {
    const cmf_gguf_kv *kv = cmf_gguf_find_kv(g, key);
    if (!kv || kv->type != CMF_GGUF_BOOL) return false;
    *out = kv->u64 != 0;
    return true;
}

const char *cmf_gguf_get_str(const cmf_gguf *g, const char *key) {
    const cmf_gguf_kv *kv = cmf_gguf_find_kv(g, key);
    return kv && kv->type == CMF_GGUF_STRING ? kv->cstr : NULL;
}

bool cmf_gguf_arr_int(const cmf_gguf_kv *kv, uint64_t i, int64_t *out) {
    if (!kv || kv->type != CMF_GGUF_ARRAY || i >= kv->arr_len || !is_int_type(kv->arr_type))
        return false;
    uint64_t u;
    double f;
    widen(kv->arr_type, kv->arr_data + i * scalar_size(kv->arr_type), &u, out, &f);
    return true;
}

bool cmf_gguf_arr_float(const cmf_gguf_kv *kv, uint64_t i, double *out) {
    if (!kv || kv->type != CMF_GGUF_ARRAY || i >= kv->arr_len || kv->arr_type == CMF_GGUF_STRING)
        return false;
    uint64_t u;
    int64_t s;
    widen(kv->arr_type, kv->arr_data + i * scalar_size(kv->arr_type), &u, &s, out);
    return true;
}

cmf_status cmf_gguf_tensor_rows_f32(const cmf_gguf *g, const cmf_gguf_tensor *t, uint64_t row0,
                                    uint64_t nrows, float *dst, cmf_err *err) {
    uint64_t end;
    if (!ck_add_u64(row0, nrows, &end) || end > t->nrows)
        return cmf_err_set(err, CMF_E_INVALID_ARG, g->name,
                           "tensor '%s': rows [%llu, +%llu) past its %llu rows", t->name,
                           (unsigned long long)row0, (unsigned long long)nrows,
                           (unsigned long long)t->nrows);
    if (!cmf_ggml_type_can_dequantize(t->type)) {
        const char *tn = cmf_ggml_type_name(t->type);
        return cmf_err_set(err, CMF_E_UNSUPPORTED, g->name,
                           "tensor '%s': ggml type %s (id %u) cannot be dequantized", t->name,
                           tn ? tn : "unknown", t->type);
    }
    uint32_t be, bb;
    cmf_ggml_type_size(t->type, &be, &bb);
    uint64_t row_bytes = t->row_len / be * bb; /* fits: checked at open */
    cmf_status st = cmf_ggml_dequantize(t->type, t->data + row0 * row_bytes,
                                        (size_t)(nrows * row_bytes), nrows * t->row_len, dst, err);
    if (st && err) {
        char msg[CMF_ERR_MSG_MAX];
        snprintf(msg, sizeof msg, "%s", err->msg);
        cmf_err_set(err, st, g->name, "tensor '%s': %s", t->name, msg);
    }
    return st;
}
