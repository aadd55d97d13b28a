/* bench_quant_real.c - real weight matrices for `cortiq bench quant`: a few projections of
 * layer 0 of a CMF or GGUF model, dequantized to f32 so every dtype can re-encode them. */
#include "cli/bench_quant_real.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/checked.h"
#include "common/err.h"
#include "cortiq/gguf.h"
#include "cortiq/format.h"
#include "cortiq/kernels.h"

/* Layer-0 projections by CMF (Hugging Face) and GGUF name. */
static const char *const k_cmf_names[BQ_PER_MODEL] = {
    "model.layers.0.self_attn.q_proj.weight", "model.layers.0.self_attn.o_proj.weight",
    "model.layers.0.mlp.gate_proj.weight", "model.layers.0.mlp.down_proj.weight"};
static const char *const k_gguf_names[BQ_PER_MODEL] = {
    "blk.0.attn_q.weight", "blk.0.attn_output.weight", "blk.0.ffn_gate.weight",
    "blk.0.ffn_down.weight"};

static const char *base_name(const char *path) {
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

/* rows * cols floats, or NULL (also for a size that overflows). */
static float *alloc_matrix(uint64_t rows, uint64_t cols) {
    uint64_t n, bytes;
    if (!ck_mul_u64(rows, cols, &n) || !ck_mul_u64(n, sizeof(float), &bytes) || bytes > SIZE_MAX)
        return NULL;
    return malloc((size_t)bytes);
}

static cmf_status load_cmf(const char *path, bq_matrix *out, size_t *n, cmf_err *err) {
    cmf_file *f;
    cmf_status st = cmf_open_model(path, 0, &f, err);
    if (st != CMF_OK) return st;
    for (int i = 0; i < BQ_PER_MODEL && st == CMF_OK; i++) {
        const cmf_tensor *t = cmf_file_find(f, k_cmf_names[i]);
        if (!t || t->ndim != 2 || t->shape[1] % 32) continue;
        cmf_qmat m;
        st = cmf_qmat_init(&m, (cmf_dtype)t->dtype, t->shape[0], t->shape[1], t->data, t->nbytes,
                           t->name, err);
        if (st != CMF_OK) break;
        float *w = alloc_matrix(m.rows, m.cols);
        if (!w) {
            cmf_qmat_free(&m);
            st = cmf_err_set(err, CMF_E_NOMEM, t->name, "no memory for a [%llu, %llu] matrix",
                             (unsigned long long)m.rows, (unsigned long long)m.cols);
            break;
        }
        for (uint64_t r = 0; r < m.rows; r++)
            cmf_qmat_dequant_row(&m, r, w + r * m.cols);
        bq_matrix *o = &out[(*n)++];
        snprintf(o->label, sizeof o->label, "%s %s", base_name(path), t->name);
        o->rows = m.rows;
        o->cols = m.cols;
        o->w = w;
        cmf_qmat_free(&m);
    }
    cmf_close(f);
    return st;
}

static cmf_status load_gguf(const char *path, bq_matrix *out, size_t *n, cmf_err *err) {
    cmf_gguf *g;
    cmf_status st = cmf_gguf_open(path, &g, err);
    if (st != CMF_OK) return st;
    for (int i = 0; i < BQ_PER_MODEL && st == CMF_OK; i++) {
        const cmf_gguf_tensor *t = cmf_gguf_find_tensor(g, k_gguf_names[i]);
        if (!t || t->ndim != 2 || t->row_len % 32 || !cmf_ggml_type_can_dequantize(t->type))
            continue;
        float *w = alloc_matrix(t->nrows, t->row_len);
        if (!w) {
            st = cmf_err_set(err, CMF_E_NOMEM, t->name, "no memory for a [%llu, %llu] matrix",
                             (unsigned long long)t->nrows, (unsigned long long)t->row_len);
            break;
        }
        st = cmf_gguf_tensor_rows_f32(g, t, 0, t->nrows, w, err);
        if (st != CMF_OK) {
            free(w);
            break;
        }
        bq_matrix *o = &out[(*n)++];
        snprintf(o->label, sizeof o->label, "%s %s", base_name(path), t->name);
        o->rows = t->nrows;
        o->cols = t->row_len;
        o->w = w;
    }
    cmf_gguf_close(g);
    return st;
}

cmf_status bq_load_model(const char *path, bq_matrix *out, size_t *n, cmf_err *err) {
    size_t n0 = *n;
    char magic[4] = {0};
    FILE *fp = fopen(path, "rb");
    if (!fp) return cmf_err_set(err, CMF_E_IO, path, "cannot open the model file");
    size_t got = fread(magic, 1, 4, fp);
    fclose(fp);
    bool gguf = got == 4 && !memcmp(magic, "GGUF", 4);
    cmf_status st = gguf ? load_gguf(path, out, n, err) : load_cmf(path, out, n, err);
    if (st == CMF_OK && *n == n0)
        st = cmf_err_set(err, CMF_E_NOT_FOUND, path,
                         "no layer-0 attention q/o or MLP gate/down projection with in %% 32 == 0 "
                         "(looked for %s, ...)",
                         gguf ? k_gguf_names[0] : k_cmf_names[0]);
    if (st != CMF_OK) {
        while (*n > n0)
            bq_matrix_free(&out[--*n]);
    }
    return st;
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static bool model_ext(const char *name) {
    size_t l = strlen(name);
    return (l > 4 && !strcmp(name + l - 4, ".cmf")) || (l > 5 && !strcmp(name + l - 5, ".gguf"));
}

size_t bq_cached_models(char **paths, size_t max) {
    const char *home = getenv("HOME");
    if (!home || !*home) return 0;
    char dir[1024];
    if ((size_t)snprintf(dir, sizeof dir, "%s/.cache/cortiq/models", home) >= sizeof dir) return 0;
    DIR *d = opendir(dir);
    if (!d) return 0;
    size_t n = 0;
    struct dirent *e;
    while (n < max && (e = readdir(d))) {
        if (e->d_name[0] == '.' || !model_ext(e->d_name)) continue;
        size_t len = strlen(dir) + strlen(e->d_name) + 2;
        char *p = malloc(len);
        if (!p) break;
        snprintf(p, len, "%s/%s", dir, e->d_name);
        paths[n++] = p;
    }
    closedir(d);
    qsort(paths, n, sizeof *paths, cmp_str);
    return n;
}

void bq_matrix_free(bq_matrix *m) {
    free(m->w);
    m->w = NULL;
}
