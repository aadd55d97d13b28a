/* defrag_hf.c - `convert --defrag SKILL_DIR`: overlays and a keep-set applied to the
 * converter's tensor sources (spec §11). */
#include "convert/defrag_hf.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/err.h"
#include "convert/defrag_plan.h"
#include "convert/npy_read.h"

typedef struct wrap {
    cmf_convert_source base; /* the checkpoint's source, full shape */
    const float *overlay;    /* baked replacement, or NULL */
    const uint32_t *rows, *cols;
    uint32_t n_rows, n_cols;
} wrap;

struct cq_defrag_hf {
    cq_npy *overlays;
    size_t n_overlays;
    cq_defrag_plan plan;
    wrap *wraps; /* one per source */
};

static cmf_status read_full(const wrap *w, float *dst, cmf_err *err) {
    if (!w->overlay) return w->base.read_f32(w->base.user, &w->base, dst, err);
    uint64_t n = 1;
    for (unsigned i = 0; i < w->base.ndim; i++)
        n *= w->base.shape[i];
    memcpy(dst, w->overlay, (size_t)n * sizeof *dst);
    return CMF_OK;
}

static cmf_status read_wrap(void *user, const cmf_convert_source *src, float *dst, cmf_err *err) {
    (void)src;
    const wrap *w = user;
    if (!w->rows && !w->cols) return read_full(w, dst, err);
    uint64_t R = w->base.shape[0], C = w->base.shape[1];
    float *full = malloc((size_t)(R * C) * sizeof *full);
    if (!full)
        return cmf_err_set(err, CMF_E_NOMEM, w->base.name, "%llu floats",
                           (unsigned long long)(R * C));
    cmf_status st = read_full(w, full, err);
    if (!st && w->rows)
        for (uint32_t i = 0; i < w->n_rows; i++)
            memcpy(dst + (size_t)i * C, full + (size_t)w->rows[i] * C, (size_t)C * sizeof *dst);
    if (!st && w->cols)
        for (uint64_t r = 0; r < R; r++)
            for (uint32_t j = 0; j < w->n_cols; j++)
                dst[r * w->n_cols + j] = full[r * C + w->cols[j]];
    free(full);
    return st;
}

static ptrdiff_t find_src(const cmf_convert_source *src, size_t n, const char *name) {
    for (size_t i = 0; i < n; i++)
        if (!strcmp(src[i].name, name)) return (ptrdiff_t)i;
    return -1;
}

static ptrdiff_t find_layer(const cmf_convert_source *src, size_t n, uint32_t l, const char *sfx) {
    char name[256];
    snprintf(name, sizeof name, "model.layers.%u.%s", l, sfx);
    return find_src(src, n, name);
}

/* tensors/<name>.npy: each replaces the checkpoint tensor of the same name and shape. */
static cmf_status load_overlays(cq_defrag_hf *d, const char *dir, cmf_convert_source *src, size_t n,
                                cmf_err *err) {
    char tdir[4096];
    snprintf(tdir, sizeof tdir, "%s/tensors", dir);
    DIR *dp = opendir(tdir);
    if (!dp) return CMF_OK; /* optional */
    cmf_status st = CMF_OK;
    struct dirent *de;
    size_t cap = 0;
    while (!st && (de = readdir(dp))) {
        size_t l = strlen(de->d_name);
        if (l < 5 || strcmp(de->d_name + l - 4, ".npy") || de->d_name[0] == '.') continue;
        char path[4352], name[512];
        snprintf(path, sizeof path, "%s/%s", tdir, de->d_name);
        snprintf(name, sizeof name, "%.*s", (int)(l - 4), de->d_name);
        ptrdiff_t k = find_src(src, n, name);
        if (k < 0) {
            st = cmf_err_set(err, CMF_E_NOT_FOUND, path,
                             "overlay for '%s': no such tensor in the "
                             "checkpoint",
                             name);
            break;
        }
        if (d->n_overlays == cap) {
            cap = cap ? 2 * cap : 8;
            cq_npy *nv = realloc(d->overlays, cap * sizeof *nv);
            if (!nv) {
                st = cmf_err_set(err, CMF_E_NOMEM, path, "overlays");
                break;
            }
            d->overlays = nv;
        }
        cq_npy *a = &d->overlays[d->n_overlays];
        if ((st = cq_npy_read(path, a, err))) break;
        d->n_overlays++;
        bool same = a->ndim == src[k].ndim && (a->descr[1] == 'f');
        for (unsigned i = 0; same && i < a->ndim; i++)
            same = a->shape[i] == src[k].shape[i];
        if (!same) {
            st = cmf_err_set(err, CMF_E_PARSE, path,
                             "overlay must be a float array of the tensor's shape [%llu, %llu]",
                             (unsigned long long)src[k].shape[0],
                             (unsigned long long)(src[k].ndim > 1 ? src[k].shape[1] : 0));
            break;
        }
        d->wraps[k].overlay = a->data;
    }
    closedir(dp);
    return st;
}

/* Live flags of layer l from the effective down_proj: a column that is not all zero. */
static cmf_status autodetect(const wrap *down, uint8_t *flags, cmf_err *err) {
    uint64_t R = down->base.shape[0], C = down->base.shape[1];
    float *v = malloc((size_t)(R * C) * sizeof *v);
    if (!v) return cmf_err_set(err, CMF_E_NOMEM, down->base.name, "down_proj");
    cmf_status st = read_full(down, v, err);
    memset(flags, 0, (size_t)C);
    for (uint64_t r = 0; !st && r < R; r++)
        for (uint64_t c = 0; c < C; c++)
            if (v[r * C + c] != 0.0f) flags[c] = 1;
    free(v);
    return st;
}

static int64_t arch_int(json_t *arch, const char *k) {
    json_t *v = json_object_get(arch, k);
    return json_is_integer(v) ? json_integer_value(v) : -1;
}

cmf_status cq_defrag_hf_apply(const char *dir, json_t *header, cmf_convert_source *src, size_t n,
                              cq_defrag_hf **out, cmf_err *err) {
    *out = NULL;
    struct stat sb;
    if (stat(dir, &sb) || !S_ISDIR(sb.st_mode))
        return cmf_err_set(err, CMF_E_NOT_FOUND, dir, "--defrag needs a skill directory");
    json_t *arch = json_object_get(header, "arch");
    int64_t L = arch_int(arch, "num_layers"), I = arch_int(arch, "intermediate_size");
    if (L < 1 || I < 1 || L > 65536 || I > (1 << 24))
        return cmf_err_set(err, CMF_E_PARSE, dir,
                           "defrag needs arch num_layers and "
                           "intermediate_size");
    cq_defrag_hf *d = calloc(1, sizeof *d);
    uint8_t *flags = malloc((size_t)I);
    if (d) d->wraps = calloc(n ? n : 1, sizeof *d->wraps);
    if (d) d->plan.layers = calloc((size_t)L, sizeof *d->plan.layers);
    cmf_status st = (!d || !flags || !d->wraps || !d->plan.layers)
                        ? cmf_err_set(err, CMF_E_NOMEM, dir, "defrag")
                        : CMF_OK;
    if (st) goto fail;
    d->plan.n_layers = (uint32_t)L;
    d->plan.pre_intermediate = (uint32_t)I;
    for (size_t i = 0; i < n; i++)
        d->wraps[i].base = src[i];
    if ((st = load_overlays(d, dir, src, n, err))) goto fail;
    char kpath[4096];
    snprintf(kpath, sizeof kpath, "%s/ffn_keep.npy", dir);
    cq_npy keep = {0};
    bool have_keep = stat(kpath, &sb) == 0;
    if (have_keep) {
        if ((st = cq_npy_read(kpath, &keep, err))) goto fail;
        if (keep.ndim != 2 || keep.shape[0] != (uint64_t)L || keep.shape[1] != (uint64_t)I) {
            st = cmf_err_set(err, CMF_E_PARSE, kpath,
                             "shape must be [num_layers=%lld, "
                             "intermediate_size=%lld]",
                             (long long)L, (long long)I);
            cq_npy_free(&keep);
            goto fail;
        }
    }
    for (uint32_t l = 0; l < (uint32_t)L && !st; l++) {
        ptrdiff_t g = find_layer(src, n, l, "mlp.gate_proj.weight"),
                  u = find_layer(src, n, l, "mlp.up_proj.weight"),
                  dn = find_layer(src, n, l, "mlp.down_proj.weight");
        if (have_keep)
            for (int64_t i = 0; i < I; i++)
                flags[i] = keep.data[(size_t)l * (size_t)I + (size_t)i] != 0.0f;
        if (g < 0 || u < 0 || dn < 0) {
            bool all = true;
            for (int64_t i = 0; have_keep && i < I; i++)
                all &= flags[i] != 0;
            if (!all)
                st = cmf_err_set(err, CMF_E_UNSUPPORTED, kpath,
                                 "layer %u has no mlp.{gate,up,down}_proj but its keep row drops "
                                 "neurons (MoE experts: `moe-defrag`, spec §11.1)",
                                 l);
            continue;
        }
        if (src[g].shape[0] != (uint64_t)I || src[dn].shape[1] != (uint64_t)I) {
            st = cmf_err_set(err, CMF_E_PARSE, dir,
                             "layer %u FFN width differs from "
                             "intermediate_size %lld",
                             l, (long long)I);
            break;
        }
        if (!have_keep && (st = autodetect(&d->wraps[dn], flags, err))) break;
        cq_defrag_layer *y = &d->plan.layers[l];
        y->dense = true;
        y->ffn = (uint32_t)I;
        if ((st = cq_defrag_set_ffn(&d->plan, l, flags, have_keep ? kpath : dir, err))) break;
        if (!y->keep) continue;
        d->wraps[g].rows = d->wraps[u].rows = y->keep;
        d->wraps[g].n_rows = d->wraps[u].n_rows = y->n_keep;
        d->wraps[dn].cols = y->keep;
        d->wraps[dn].n_cols = y->n_keep;
        src[g].shape[0] = src[u].shape[0] = y->n_keep;
        src[dn].shape[1] = y->n_keep;
        src[dn].fallback_q8_2f = true; /* spec §11: a width the dtype cannot hold -> q8_2f */
    }
    cq_npy_free(&keep);
    if (st) goto fail;
    for (size_t i = 0; i < n; i++)
        if (d->wraps[i].overlay || d->wraps[i].rows || d->wraps[i].cols) {
            src[i].read_f32 = read_wrap;
            src[i].user = &d->wraps[i];
        }
    if ((st = cq_defrag_header(&d->plan, header, dir, dir, err))) goto fail;
    free(flags);
    *out = d;
    return CMF_OK;
fail:
    free(flags);
    cq_defrag_hf_free(d);
    return st;
}

void cq_defrag_hf_free(cq_defrag_hf *d) {
    if (!d) return;
    for (size_t i = 0; i < d->n_overlays; i++)
        cq_npy_free(&d->overlays[i]);
    free(d->overlays);
    cq_defrag_plan_free(&d->plan);
    free(d->wraps);
    free(d);
}
