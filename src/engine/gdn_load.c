/* gdn_load.c - bind a LinearAttention layer's Gated DeltaNet tensors (gdn.h): the header's
 * linear_* fields give the shapes (capped before any allocation), the tensors present choose
 * the fused (Qwen3-Next) or split (Qwen3.5) projections. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "cortiq/quant.h"
#include "engine/gdn.h"

#define CQ_MAX_GDN_KERNEL 64

typedef struct gdn_loader {
    cortiq_model *m;
    uint32_t l;
    const char *path;
    cmf_err *err;
} gdn_loader;

static const cmf_tensor *tensor(const gdn_loader *L, const char *suffix) {
    char name[192];
    snprintf(name, sizeof name, "model.layers.%u.linear_attn.%s", L->l, suffix);
    return cmf_file_find(L->m->file, name);
}

static cmf_status absent(const gdn_loader *L, const char *suffix) {
    return cmf_err_set(L->err, CMF_E_NOT_FOUND, L->path,
                       "tensor 'model.layers.%u.linear_attn.%s' is required by this "
                       "LinearAttention layer but absent",
                       L->l, suffix);
}

static cmf_status mat(const gdn_loader *L, const char *suffix, uint64_t rows, uint64_t cols,
                      cmf_qmat *q) {
    const cmf_tensor *t = tensor(L, suffix);
    if (!t) return absent(L, suffix);
    if (t->ndim != 2 || t->shape[0] != rows || t->shape[1] != cols)
        return cmf_err_set(L->err, CMF_E_PARSE, L->path,
                           "tensor '%s' must be [%llu, %llu] (arch.linear_* fields)", t->name,
                           (unsigned long long)rows, (unsigned long long)cols);
    cmf_status st =
        cmf_qmat_init(q, (cmf_dtype)t->dtype, rows, cols, t->data, t->nbytes, t->name, L->err);
    if (!st) L->m->weight_bytes += t->nbytes;
    return st;
}

/* n floats of a tensor of n elements, any shape and dtype. */
static cmf_status vec(const gdn_loader *L, const char *suffix, uint64_t n, float **out) {
    const cmf_tensor *t = tensor(L, suffix);
    if (!t) return absent(L, suffix);
    cmf_status st = cq_load_floats(t, n, L->path, out, L->err);
    if (st) return st;
    L->m->weight_bytes += t->nbytes;
    return CMF_OK;
}

static cmf_status dim(const gdn_loader *L, const char *field, int64_t v, int64_t hi,
                      uint32_t *out) {
    if (v < 1 || v > hi)
        return cmf_err_set(L->err, v < 1 ? CMF_E_PARSE : CMF_E_LIMIT, L->path,
                           "layer %u is LinearAttention: arch.%s=%lld must be in [1, %lld]", L->l,
                           field, (long long)v, (long long)hi);
    *out = (uint32_t)v;
    return CMF_OK;
}

static cmf_status bind(const gdn_loader *L, const cmf_arch *a, cq_gdn *g) {
    cmf_status st;
    if ((st = dim(L, "linear_num_key_heads", a->linear_num_key_heads, CQ_MAX_HEADS, &g->nk)) ||
        (st = dim(L, "linear_num_value_heads", a->linear_num_value_heads, CQ_MAX_HEADS, &g->nv)) ||
        (st = dim(L, "linear_key_head_dim", a->linear_key_head_dim, CQ_MAX_HEAD_DIM, &g->dk)) ||
        (st = dim(L, "linear_value_head_dim", a->linear_value_head_dim, CQ_MAX_HEAD_DIM, &g->dv)) ||
        (st = dim(L, "linear_conv_kernel_dim", a->linear_conv_kernel_dim, CQ_MAX_GDN_KERNEL,
                  &g->kernel)))
        return st;
    if (g->nv % g->nk)
        return cmf_err_set(L->err, CMF_E_PARSE, L->path,
                           "arch.linear_num_value_heads=%u is not a multiple of "
                           "linear_num_key_heads=%u",
                           g->nv, g->nk);
    uint64_t H = L->m->hidden;
    g->key_dim = g->nk * g->dk;
    g->value_dim = g->nv * g->dv;
    g->conv_dim = 2 * g->key_dim + g->value_dim;
    g->fused = tensor(L, "in_proj_qkvz.weight") != NULL;
    if (g->fused) {
        if ((st = mat(L, "in_proj_qkvz.weight", (uint64_t)g->conv_dim + g->value_dim, H,
                      &g->qkvz)) ||
            (st = mat(L, "in_proj_ba.weight", 2 * (uint64_t)g->nv, H, &g->ba)))
            return st;
    } else if ((st = mat(L, "in_proj_qkv.weight", g->conv_dim, H, &g->qkv)) ||
               (st = mat(L, "in_proj_z.weight", g->value_dim, H, &g->z)) ||
               (st = mat(L, "in_proj_b.weight", g->nv, H, &g->b)) ||
               (st = mat(L, "in_proj_a.weight", g->nv, H, &g->a)))
        return st;
    if ((st = mat(L, "out_proj.weight", H, g->value_dim, &g->out)) ||
        (st = vec(L, "conv1d.weight", (uint64_t)g->conv_dim * g->kernel, &g->conv_w)) ||
        (st = vec(L, "A_log", g->nv, &g->neg_a)) || (st = vec(L, "dt_bias", g->nv, &g->dt_bias)) ||
        (st = vec(L, "norm.weight", g->dv, &g->norm_w)))
        return st;
    if (tensor(L, "conv1d.bias"))
        return cmf_err_set(L->err, CMF_E_UNSUPPORTED, L->path,
                           "layer %u: linear_attn.conv1d.bias is present; the Gated DeltaNet "
                           "conv of Qwen3-Next / Qwen3.5 has none and this runtime adds none",
                           L->l);
    for (uint32_t h = 0; h < g->nv; h++)
        g->neg_a[h] = -expf(g->neg_a[h]);
    return CMF_OK;
}

cmf_status cq_gdn_load(cortiq_model *m, const cmf_arch *a, uint32_t l, const char *path,
                       cq_gdn **out, cmf_err *err) {
    cq_gdn *g = *out = calloc(1, sizeof *g);
    if (!g) return cmf_err_set(err, CMF_E_NOMEM, path, "layer %u linear attention", l);
    const gdn_loader L = {m, l, path, err};
    cmf_status st = bind(&L, a, g); /* on an error the layer keeps g, freed with the model */
    for (uint32_t j = 0; !st && j < l; j++) /* after the earlier layers' states */
        if (m->layers[j].gdn) g->state_off += cq_gdn_state_floats(m->layers[j].gdn);
    return st;
}

void cq_gdn_free(cq_gdn *g) {
    if (!g) return;
    cmf_qmat *mats[] = {&g->qkvz, &g->ba, &g->qkv, &g->z, &g->b, &g->a, &g->out};
    for (size_t k = 0; k < sizeof mats / sizeof mats[0]; k++)
        cmf_qmat_free(mats[k]);
    free(g->conv_w), free(g->neg_a), free(g->dt_bias), free(g->norm_w);
    free(g);
}

size_t cq_gdn_state_floats(const cq_gdn *g) {
    return (size_t)(g->kernel - 1) * g->conv_dim + (size_t)g->nv * g->dk * g->dv;
}
