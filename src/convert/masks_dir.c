/* masks_dir.c - read DIR/<task>.json keep-sets and build the masks section with the format
 * library's builder. Every index is range-checked; `quality` stays null unless given. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "convert/masks_dir.h"
#include "cortiq/writer.h"

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int64_t ival(json_t *o, const char *k) {
    json_t *v = json_object_get(o, k);
    return v && json_is_integer(v) ? json_integer_value(v) : -1;
}

/* rows x dim bitfield from a list of per-row index lists (absent/null = all set). */
static cmf_status fill_rows(json_t *v, uint32_t rows, uint32_t dim, uint8_t *bits, size_t row_bytes,
                            const char *ctx, const char *what, cmf_err *err) {
    for (uint32_t r = 0; r < rows; r++) {
        uint8_t *row = bits + (size_t)r * row_bytes;
        json_t *list = v ? json_array_get(v, r) : NULL;
        if (!v || !list || json_is_null(list)) {
            for (uint32_t i = 0; i < dim; i++)
                row[i / 8] |= (uint8_t)(1u << (i % 8));
            continue;
        }
        if (!json_is_array(list))
            return cmf_err_set(err, CMF_E_PARSE, ctx, "%s[%u] must be a list of indices", what, r);
        size_t k;
        json_t *e;
        json_array_foreach(list, k, e) {
            if (!json_is_integer(e) || json_integer_value(e) < 0 || json_integer_value(e) >= dim)
                return cmf_err_set(err, CMF_E_PARSE, ctx, "%s[%u][%zu] not an index in [0, %u)",
                                   what, r, k, dim);
            uint32_t i = (uint32_t)json_integer_value(e);
            row[i / 8] |= (uint8_t)(1u << (i % 8));
        }
    }
    if (v && (!json_is_array(v) || json_array_size(v) != rows))
        return cmf_err_set(err, CMF_E_PARSE, ctx, "%s must list %u layers", what, rows);
    return CMF_OK;
}

cmf_status cmf_masks_from_dir(const char *dir, json_t *arch, uint8_t **out, size_t *len,
                              cmf_err *err) {
    int64_t L = ival(arch, "num_layers"), I = ival(arch, "intermediate_size"),
            H = ival(arch, "num_attention_heads");
    int64_t E = ival(json_object_get(arch, "moe"), "num_experts");
    if (L <= 0 || I <= 0 || H <= 0 || L > 65535 || I > (1 << 24) || H > 4096)
        return cmf_err_set(err, CMF_E_INVALID_ARG, dir,
                           "masks need num_layers, intermediate_size, num_attention_heads");
    DIR *d = opendir(dir);
    if (!d) return cmf_err_set(err, CMF_E_IO, dir, "cannot read the masks directory");
    char **names = NULL;
    size_t n = 0, cap = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        size_t l = strlen(de->d_name);
        if (l < 6 || strcmp(de->d_name + l - 5, ".json") || de->d_name[0] == '.') continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 8;
            char **nn = realloc(names, cap * sizeof *nn);
            if (!nn) break;
            names = nn;
        }
        names[n++] = strdup(de->d_name);
    }
    closedir(d);
    cmf_status st = CMF_OK;
    if (!n) st = cmf_err_set(err, CMF_E_NOT_FOUND, dir, "no <task>.json files");
    qsort(names, n, sizeof *names, cmp_str);
    cmf_masks_builder *b = NULL;
    if (!st)
        st = cmf_masks_builder_create((uint32_t)L, (uint32_t)I, (uint32_t)H,
                                      E > 0 ? (uint32_t)E : 0, &b, err);
    size_t fb = (size_t)(I + 7) / 8, hb = (size_t)(H + 7) / 8, gb = (size_t)(L + 7) / 8,
           eb = E > 0 ? (size_t)(E + 7) / 8 : 0;
    uint8_t *ffn = calloc((size_t)L, fb), *heads = calloc((size_t)L, hb), *gates = calloc(1, gb),
            *experts = eb ? calloc((size_t)L, eb) : NULL;
    if (!st && (!ffn || !heads || !gates || (eb && !experts)))
        st = cmf_err_set(err, CMF_E_NOMEM, dir, "masks");
    for (size_t i = 0; i < n && !st; i++) {
        char path[4096], task[256];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        snprintf(task, sizeof task, "%.*s", (int)(strlen(names[i]) - 5), names[i]);
        json_error_t je;
        json_t *o = json_load_file(path, 0, &je);
        if (!o || !json_is_object(o)) {
            st = cmf_err_set(err, CMF_E_PARSE, path, "not a JSON object (%s)", o ? "" : je.text);
            json_decref(o);
            break;
        }
        memset(ffn, 0, (size_t)L * fb);
        memset(heads, 0, (size_t)L * hb);
        memset(gates, 0, gb);
        json_t *ex = json_object_get(o, "experts");
        if (ex && !eb)
            st = cmf_err_set(err, CMF_E_PARSE, path, "experts given but arch has no moe");
        if (!st)
            st = fill_rows(json_object_get(o, "ffn"), (uint32_t)L, (uint32_t)I, ffn, fb, path,
                           "ffn", err);
        if (!st)
            st = fill_rows(json_object_get(o, "heads"), (uint32_t)L, (uint32_t)H, heads, hb, path,
                           "heads", err);
        if (!st && ex) {
            memset(experts, 0, (size_t)L * eb);
            st = fill_rows(ex, (uint32_t)L, (uint32_t)E, experts, eb, path, "experts", err);
        }
        json_t *lay = json_object_get(o, "layers");
        if (!st) {
            json_t *wrap = lay ? json_pack("[O]", lay) : NULL; /* one row of layer indices */
            st = fill_rows(wrap, 1, (uint32_t)L, gates, gb, path, "layers", err);
            json_decref(wrap);
        }
        json_t *q = json_object_get(o, "quality");
        char *qs = q && !json_is_null(q) ? json_dumps(q, JSON_COMPACT) : NULL;
        json_t *desc = json_object_get(o, "description");
        if (!st)
            st = cmf_masks_builder_add(b, task,
                                       json_is_string(desc) ? json_string_value(desc) : NULL, ffn,
                                       heads, gates, ex ? experts : NULL, qs, err);
        if (!st && json_is_true(json_object_get(o, "default")))
            st = cmf_masks_builder_set_default(b, task, err);
        free(qs);
        json_decref(o);
    }
    if (!st) st = cmf_masks_builder_build(b, out, len, err);
    cmf_masks_builder_free(b);
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
    free(ffn);
    free(heads);
    free(gates);
    free(experts);
    return st;
}
