/* safetensors.c - safetensors checkpoints (single file or sharded via
 * model.safetensors.index.json), validated at open, payloads read as f32 by row range. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/bytes.h"
#include "common/checked.h"
#include "common/err.h"
#include "common/f16.h"
#include "convert/map_file.h"
#include "cortiq/safetensors.h"

typedef struct st_file {
    char *path;
    cv_map map;
    const uint8_t *bytes;
    uint64_t len;
    uint64_t data_off, data_len;
    size_t n_tensors;
    cmf_st_tensor *tensors;
    size_t n_meta;
    char **meta_keys, **meta_vals;
} st_file;

struct cmf_st {
    size_t n_files;
    st_file *files;
    size_t n_tensors;
    const cmf_st_tensor **sorted;
};

static const struct {
    const char *name;
    unsigned size;
} k_dtypes[CMF_ST_DTYPE_COUNT] = {
    [CMF_ST_F32] = {"F32", 4},         [CMF_ST_F16] = {"F16", 2},
    [CMF_ST_BF16] = {"BF16", 2},       [CMF_ST_F64] = {"F64", 8},
    [CMF_ST_I64] = {"I64", 8},         [CMF_ST_I32] = {"I32", 4},
    [CMF_ST_I16] = {"I16", 2},         [CMF_ST_I8] = {"I8", 1},
    [CMF_ST_U64] = {"U64", 8},         [CMF_ST_U32] = {"U32", 4},
    [CMF_ST_U16] = {"U16", 2},         [CMF_ST_U8] = {"U8", 1},
    [CMF_ST_BOOL] = {"BOOL", 1},       [CMF_ST_F8_E4M3] = {"F8_E4M3", 1},
    [CMF_ST_F8_E5M2] = {"F8_E5M2", 1},
};

const char *cmf_st_dtype_name(cmf_st_dtype d) {
    return (unsigned)d < CMF_ST_DTYPE_COUNT ? k_dtypes[d].name : "?";
}

static bool dtype_from_name(const char *s, cmf_st_dtype *out) {
    for (unsigned i = 0; i < CMF_ST_DTYPE_COUNT; i++)
        if (strcmp(s, k_dtypes[i].name) == 0) {
            *out = (cmf_st_dtype)i;
            return true;
        }
    return false;
}

static void file_free(st_file *f) {
    for (size_t i = 0; i < f->n_tensors; i++)
        free((void *)f->tensors[i].name);
    free(f->tensors);
    for (size_t i = 0; i < f->n_meta; i++) {
        free(f->meta_keys[i]);
        free(f->meta_vals[i]);
    }
    free(f->meta_keys);
    free(f->meta_vals);
    cv_map_close(&f->map);
    free(f->path);
}

static int cmp_begin(const void *a, const void *b) {
    const cmf_st_tensor *x = *(const cmf_st_tensor *const *)a,
                        *y = *(const cmf_st_tensor *const *)b;
    return x->data < y->data ? -1 : x->data > y->data;
}

static cmf_status parse_meta(st_file *f, json_t *meta, cmf_err *err) {
    if (!json_is_object(meta))
        return cmf_err_set(err, CMF_E_PARSE, f->path, "__metadata__ is not an object");
    size_t n = json_object_size(meta);
    f->meta_keys = calloc(n ? n : 1, sizeof(char *));
    f->meta_vals = calloc(n ? n : 1, sizeof(char *));
    if (!f->meta_keys || !f->meta_vals)
        return cmf_err_set(err, CMF_E_NOMEM, f->path, "out of memory");
    const char *k;
    json_t *v;
    json_object_foreach(meta, k, v) {
        if (!json_is_string(v))
            return cmf_err_set(err, CMF_E_PARSE, f->path,
                               "__metadata__ value of '%s' is not a string", k);
        f->meta_keys[f->n_meta] = strdup(k);
        f->meta_vals[f->n_meta] = strdup(json_string_value(v));
        f->n_meta++;
        if (!f->meta_keys[f->n_meta - 1] || !f->meta_vals[f->n_meta - 1])
            return cmf_err_set(err, CMF_E_NOMEM, f->path, "out of memory");
    }
    return CMF_OK;
}

static cmf_status parse_entry(st_file *f, const char *name, json_t *v, cmf_st_tensor *t,
                              cmf_err *err) {
    if (!json_is_object(v))
        return cmf_err_set(err, CMF_E_PARSE, f->path, "tensor '%s': entry is not an object", name);
    json_t *dt = json_object_get(v, "dtype"), *sh = json_object_get(v, "shape"),
           *off = json_object_get(v, "data_offsets");
    if (!json_is_string(dt))
        return cmf_err_set(err, CMF_E_PARSE, f->path, "tensor '%s': dtype missing or not a string",
                           name);
    if (!dtype_from_name(json_string_value(dt), &t->dtype))
        return cmf_err_set(err, CMF_E_PARSE, f->path, "tensor '%s': unknown dtype '%s'", name,
                           json_string_value(dt));
    t->dtype_name = k_dtypes[t->dtype].name;
    if (!json_is_array(sh))
        return cmf_err_set(err, CMF_E_PARSE, f->path, "tensor '%s': shape missing or not an array",
                           name);
    if (json_array_size(sh) > CMF_ST_MAX_DIMS)
        return cmf_err_set(err, CMF_E_PARSE, f->path, "tensor '%s': %zu dims exceed %d", name,
                           json_array_size(sh), CMF_ST_MAX_DIMS);
    t->ndim = (uint32_t)json_array_size(sh);
    uint64_t nelem = 1;
    for (uint32_t d = 0; d < t->ndim; d++) {
        json_t *x = json_array_get(sh, d);
        if (!json_is_integer(x) || json_integer_value(x) < 0)
            return cmf_err_set(err, CMF_E_PARSE, f->path,
                               "tensor '%s': shape[%u] is not a non-negative integer", name, d);
        t->shape[d] = (uint64_t)json_integer_value(x);
        if (!ck_mul_u64(nelem, t->shape[d], &nelem))
            return cmf_err_set(err, CMF_E_PARSE, f->path,
                               "tensor '%s': element count overflows at shape[%u]=%llu", name, d,
                               (unsigned long long)t->shape[d]);
    }
    t->nelem = nelem;
    t->row_len = t->ndim ? t->shape[t->ndim - 1] : 1;
    t->nrows = t->row_len ? nelem / t->row_len : 0;
    if (!json_is_array(off) || json_array_size(off) != 2 ||
        !json_is_integer(json_array_get(off, 0)) || !json_is_integer(json_array_get(off, 1)))
        return cmf_err_set(err, CMF_E_PARSE, f->path,
                           "tensor '%s': data_offsets is not [begin, end]", name);
    json_int_t b = json_integer_value(json_array_get(off, 0)),
               e = json_integer_value(json_array_get(off, 1));
    if (b < 0 || e < b || (uint64_t)e > f->data_len)
        return cmf_err_set(
            err, CMF_E_BOUNDS, f->path,
            "tensor '%s': data_offsets [%lld, %lld] not within the %llu-byte data area", name,
            (long long)b, (long long)e, (unsigned long long)f->data_len);
    uint64_t want;
    if (!ck_mul_u64(nelem, k_dtypes[t->dtype].size, &want) || want != (uint64_t)(e - b))
        return cmf_err_set(
            err, CMF_E_PARSE, f->path,
            "tensor '%s': data_offsets span %llu bytes but %llu elements of %s need %llu", name,
            (unsigned long long)(e - b), (unsigned long long)nelem, t->dtype_name,
            (unsigned long long)want);
    t->nbytes = want;
    t->data = f->bytes + f->data_off + (uint64_t)b;
    if (!(t->name = strdup(name))) return cmf_err_set(err, CMF_E_NOMEM, f->path, "out of memory");
    return CMF_OK;
}

/* Validate one file image (bytes/len set). */
static cmf_status parse_file(st_file *f, uint32_t file_index, cmf_err *err) {
    if (f->len < 8)
        return cmf_err_set(err, CMF_E_BOUNDS, f->path,
                           "%llu bytes: too short for the 8-byte header length",
                           (unsigned long long)f->len);
    uint64_t hlen = ld_u64(f->bytes);
    if (hlen > CMF_ST_MAX_HEADER)
        return cmf_err_set(err, CMF_E_LIMIT, f->path, "header length %llu exceeds the cap %u",
                           (unsigned long long)hlen, CMF_ST_MAX_HEADER);
    if (hlen < 2 || !ck_span_within(8, hlen, f->len))
        return cmf_err_set(err, CMF_E_BOUNDS, f->path,
                           "header length %llu does not fit in the %llu-byte file",
                           (unsigned long long)hlen, (unsigned long long)f->len);
    f->data_off = 8 + hlen;
    f->data_len = f->len - f->data_off;
    json_error_t je;
    json_t *root =
        json_loadb((const char *)f->bytes + 8, (size_t)hlen, JSON_REJECT_DUPLICATES, &je);
    if (!root)
        return cmf_err_set(err, CMF_E_PARSE, f->path, "header JSON: %s (at byte %d)", je.text,
                           je.position);
    cmf_status st = CMF_OK;
    if (!json_is_object(root)) {
        st = cmf_err_set(err, CMF_E_PARSE, f->path, "header JSON is not an object");
        goto done;
    }
    size_t n = json_object_size(root);
    f->tensors = calloc(n ? n : 1, sizeof *f->tensors);
    if (!f->tensors) {
        st = cmf_err_set(err, CMF_E_NOMEM, f->path, "out of memory");
        goto done;
    }
    const char *k;
    json_t *v;
    json_object_foreach(root, k, v) {
        if (strcmp(k, "__metadata__") == 0) {
            if ((st = parse_meta(f, v, err))) goto done;
            continue;
        }
        if (k[0] == 0) {
            st = cmf_err_set(err, CMF_E_PARSE, f->path, "a tensor has an empty name");
            goto done;
        }
        cmf_st_tensor *t = &f->tensors[f->n_tensors];
        if ((st = parse_entry(f, k, v, t, err))) {
            free((void *)t->name);
            t->name = NULL;
            goto done;
        }
        t->file = file_index;
        f->n_tensors++;
    }
    /* no two payloads overlap (zero-byte tensors occupy nothing) */
    if (f->n_tensors > 1) {
        const cmf_st_tensor **by = malloc(f->n_tensors * sizeof *by);
        if (!by) {
            st = cmf_err_set(err, CMF_E_NOMEM, f->path, "out of memory");
            goto done;
        }
        size_t m = 0;
        for (size_t i = 0; i < f->n_tensors; i++)
            if (f->tensors[i].nbytes) by[m++] = &f->tensors[i];
        qsort(by, m, sizeof *by, cmp_begin);
        for (size_t i = 1; i < m; i++)
            if (by[i - 1]->data + by[i - 1]->nbytes > by[i]->data) {
                st = cmf_err_set(err, CMF_E_PARSE, f->path,
                                 "tensors '%s' and '%s' overlap in the data area", by[i - 1]->name,
                                 by[i]->name);
                break;
            }
        free(by);
    }
done:
    json_decref(root);
    return st;
}

static int cmp_name(const void *a, const void *b) {
    return strcmp((*(const cmf_st_tensor *const *)a)->name,
                  (*(const cmf_st_tensor *const *)b)->name);
}

/* Build the name-sorted index over all files; duplicate names across files are an error. */
static cmf_status build_index(cmf_st *s, cmf_err *err) {
    size_t n = 0;
    for (size_t i = 0; i < s->n_files; i++)
        n += s->files[i].n_tensors;
    s->sorted = malloc((n ? n : 1) * sizeof *s->sorted);
    if (!s->sorted) return cmf_err_set(err, CMF_E_NOMEM, NULL, "out of memory");
    for (size_t i = 0; i < s->n_files; i++)
        for (size_t j = 0; j < s->files[i].n_tensors; j++)
            s->sorted[s->n_tensors++] = &s->files[i].tensors[j];
    qsort(s->sorted, s->n_tensors, sizeof *s->sorted, cmp_name);
    for (size_t i = 1; i < s->n_tensors; i++)
        if (strcmp(s->sorted[i]->name, s->sorted[i - 1]->name) == 0)
            return cmf_err_set(err, CMF_E_SHARD, s->files[s->sorted[i]->file].path,
                               "tensor '%s' also appears in %s", s->sorted[i]->name,
                               s->files[s->sorted[i - 1]->file].path);
    return CMF_OK;
}

void cmf_st_close(cmf_st *s) {
    if (!s) return;
    for (size_t i = 0; i < s->n_files; i++)
        file_free(&s->files[i]);
    free(s->files);
    free(s->sorted);
    free(s);
}

static cmf_st *st_new(size_t n_files) {
    cmf_st *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->files = calloc(n_files ? n_files : 1, sizeof *s->files);
    if (!s->files) {
        free(s);
        return NULL;
    }
    s->n_files = n_files;
    return s;
}

static cmf_status open_one_file(st_file *f, const char *path, uint32_t idx, cmf_err *err) {
    if (!(f->path = strdup(path))) return cmf_err_set(err, CMF_E_NOMEM, path, "out of memory");
    cmf_status st = cv_map_open(path, &f->map, err);
    if (st) return st;
    f->bytes = f->map.bytes;
    f->len = f->map.len;
    return parse_file(f, idx, err);
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Directory with model.safetensors.index.json: open every shard its weight_map names and
 * check the map against the shards' own headers. */
static cmf_status open_index(const char *dir, const char *index_path, cmf_st **out, cmf_err *err) {
    json_error_t je;
    json_t *root = json_load_file(index_path, JSON_REJECT_DUPLICATES, &je);
    if (!root) return cmf_err_set(err, CMF_E_PARSE, index_path, "%s (line %d)", je.text, je.line);
    cmf_status st = CMF_OK;
    cmf_st *s = NULL;
    const char **names = NULL;
    json_t *wm = json_object_get(root, "weight_map");
    if (!json_is_object(wm) || json_object_size(wm) == 0) {
        st =
            cmf_err_set(err, CMF_E_PARSE, index_path, "weight_map missing, empty or not an object");
        goto done;
    }
    size_t nw = json_object_size(wm), nf = 0;
    names = malloc(nw * sizeof *names);
    if (!names) {
        st = cmf_err_set(err, CMF_E_NOMEM, index_path, "out of memory");
        goto done;
    }
    const char *k;
    json_t *v;
    json_object_foreach(wm, k, v) {
        const char *fn = json_string_value(v);
        if (!fn || !fn[0] || strchr(fn, '/') || strcmp(fn, ".") == 0 || strcmp(fn, "..") == 0) {
            st = cmf_err_set(
                err, CMF_E_PARSE, index_path,
                "weight_map['%s'] is not a plain file name in the checkpoint directory", k);
            goto done;
        }
        names[nf++] = fn;
    }
    qsort(names, nf, sizeof *names, cmp_str);
    size_t nu = 0;
    for (size_t i = 0; i < nf; i++)
        if (nu == 0 || strcmp(names[i], names[nu - 1]) != 0) names[nu++] = names[i];
    if (!(s = st_new(nu))) {
        st = cmf_err_set(err, CMF_E_NOMEM, index_path, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < nu; i++) {
        char path[4096];
        if (snprintf(path, sizeof path, "%s/%s", dir, names[i]) >= (int)sizeof path) {
            st = cmf_err_set(err, CMF_E_INVALID_ARG, dir, "shard path too long");
            goto done;
        }
        if ((st = open_one_file(&s->files[i], path, (uint32_t)i, err))) {
            if (st == CMF_E_IO)
                st = cmf_err_set(err, CMF_E_NOT_FOUND, index_path,
                                 "shard %s listed in weight_map cannot be opened: %s", names[i],
                                 err ? err->msg : "");
            goto done;
        }
    }
    if ((st = build_index(s, err))) goto done;
    /* every shard tensor listed for its own file; every listed tensor present */
    for (size_t i = 0; i < s->n_tensors; i++) {
        const cmf_st_tensor *t = s->sorted[i];
        const char *fn = json_string_value(json_object_get(wm, t->name));
        const char *base = strrchr(s->files[t->file].path, '/');
        base = base ? base + 1 : s->files[t->file].path;
        if (!fn || strcmp(fn, base) != 0) {
            st = cmf_err_set(err, CMF_E_SHARD, index_path,
                             "tensor '%s' is in %s but weight_map says %s", t->name, base,
                             fn ? fn : "nothing");
            goto done;
        }
    }
    json_object_foreach(wm, k, v) {
        if (!cmf_st_find(s, k)) {
            st = cmf_err_set(err, CMF_E_NOT_FOUND, index_path,
                             "tensor '%s' listed in weight_map is not in %s", k,
                             json_string_value(v));
            goto done;
        }
    }
done:
    free(names);
    json_decref(root);
    if (st) {
        cmf_st_close(s);
        return st;
    }
    *out = s;
    return CMF_OK;
}

cmf_status cmf_st_open(const char *path, cmf_st **out, cmf_err *err) {
    if (!path || !out)
        return cmf_err_set(err, CMF_E_INVALID_ARG, NULL, "cmf_st_open: NULL argument");
    *out = NULL;
    struct stat sb;
    if (stat(path, &sb) != 0) return cmf_err_set(err, CMF_E_IO, path, "cannot stat");
    char file[4096];
    if (S_ISDIR(sb.st_mode)) {
        if (snprintf(file, sizeof file, "%s/model.safetensors.index.json", path) >=
            (int)sizeof file)
            return cmf_err_set(err, CMF_E_INVALID_ARG, path, "path too long");
        if (stat(file, &sb) == 0) return open_index(path, file, out, err);
        snprintf(file, sizeof file, "%s/model.safetensors", path);
        if (stat(file, &sb) != 0)
            return cmf_err_set(
                err, CMF_E_NOT_FOUND, path,
                "neither model.safetensors.index.json nor model.safetensors in the directory");
        path = file;
    }
    cmf_st *s = st_new(1);
    if (!s) return cmf_err_set(err, CMF_E_NOMEM, path, "out of memory");
    cmf_status st = open_one_file(&s->files[0], path, 0, err);
    if (!st) st = build_index(s, err);
    if (st) {
        cmf_st_close(s);
        return st;
    }
    *out = s;
    return CMF_OK;
}

cmf_status cmf_st_open_memory(const void *buf, size_t len, const char *name, cmf_st **out,
                              cmf_err *err) {
    if (!out || (!buf && len))
        return cmf_err_set(err, CMF_E_INVALID_ARG, name, "cmf_st_open_memory: NULL argument");
    *out = NULL;
    cmf_st *s = st_new(1);
    if (!s || !(s->files[0].path = strdup(name ? name : "<memory>"))) {
        cmf_st_close(s);
        return cmf_err_set(err, CMF_E_NOMEM, name, "out of memory");
    }
    s->files[0].bytes = buf;
    s->files[0].len = len;
    cmf_status st = parse_file(&s->files[0], 0, err);
    if (!st) st = build_index(s, err);
    if (st) {
        cmf_st_close(s);
        return st;
    }
    *out = s;
    return CMF_OK;
}

size_t cmf_st_file_count(const cmf_st *s) {
    return s->n_files;
}
const char *cmf_st_file_path(const cmf_st *s, size_t i) {
    return i < s->n_files ? s->files[i].path : NULL;
}
size_t cmf_st_tensor_count(const cmf_st *s) {
    return s->n_tensors;
}
const cmf_st_tensor *cmf_st_tensor_at(const cmf_st *s, size_t i) {
    return i < s->n_tensors ? s->sorted[i] : NULL;
}

const cmf_st_tensor *cmf_st_find(const cmf_st *s, const char *name) {
    size_t lo = 0, hi = s->n_tensors;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(s->sorted[mid]->name, name);
        if (c == 0) return s->sorted[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

const char *cmf_st_metadata(const cmf_st *s, const char *key) {
    if (!s->n_files) return NULL;
    const st_file *f = &s->files[0];
    for (size_t i = 0; i < f->n_meta; i++)
        if (strcmp(f->meta_keys[i], key) == 0) return f->meta_vals[i];
    return NULL;
}

cmf_status cmf_st_rows_f32(const cmf_st *s, const cmf_st_tensor *t, uint64_t row0, uint64_t nrows,
                           float *dst, cmf_err *err) {
    const char *path = s->files[t->file].path;
    uint64_t end;
    if (!ck_add_u64(row0, nrows, &end) || end > t->nrows)
        return cmf_err_set(err, CMF_E_INVALID_ARG, path,
                           "tensor '%s': rows [%llu, +%llu) past its %llu rows", t->name,
                           (unsigned long long)row0, (unsigned long long)nrows,
                           (unsigned long long)t->nrows);
    uint64_t n = nrows * t->row_len, first = row0 * t->row_len;
    switch (t->dtype) {
    case CMF_ST_F32: {
        const uint8_t *p = t->data + first * 4;
        for (uint64_t i = 0; i < n; i++)
            dst[i] = f32_from_bits(ld_u32(p + 4 * i));
        return CMF_OK;
    }
    case CMF_ST_F16: {
        const uint8_t *p = t->data + first * 2;
        for (uint64_t i = 0; i < n; i++)
            dst[i] = f16_to_f32(ld_u16(p + 2 * i));
        return CMF_OK;
    }
    case CMF_ST_BF16: {
        const uint8_t *p = t->data + first * 2;
        for (uint64_t i = 0; i < n; i++)
            dst[i] = bf16_to_f32(ld_u16(p + 2 * i));
        return CMF_OK;
    }
    default:
        return cmf_err_set(err, CMF_E_UNSUPPORTED, path,
                           "tensor '%s': dtype %s is not supported (only F32, F16, BF16 convert)",
                           t->name, t->dtype_name);
    }
}
