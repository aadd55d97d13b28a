/* moe_rewrite.h - write a variant of a CMF file for the MoE tests: its header with one string
 * replaced, its tensors but the dropped ones, plus extra tensors. Include after test.h. */
#ifndef CORTIQ_TEST_MOE_REWRITE_H
#define CORTIQ_TEST_MOE_REWRITE_H

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "common/f16.h"
#include "cortiq/format.h"
#include "cortiq/writer.h"
#include "engine/npy.h"

typedef struct extra_tensor {
    const char *name;
    cmf_dtype dtype;
    unsigned ndim;
    uint64_t shape[2];
    const void *data; /* borrowed until the file is written */
    size_t nbytes;
} extra_tensor;

/* header with every occurrence of from[i] replaced by to[i] (n pairs); malloc'd */
static inline char *replace_all(const char *s, const char *const *from, const char *const *to,
                                size_t n) {
    char *cur = strdup(s);
    for (size_t i = 0; cur && i < n; i++) {
        size_t fl = strlen(from[i]), tl = strlen(to[i]), k = 0;
        for (const char *p = cur; (p = strstr(p, from[i])); p += fl)
            k++;
        char *out = malloc(strlen(cur) + k * tl + 1), *o = out;
        const char *p = cur, *q;
        while (out && (q = strstr(p, from[i]))) {
            memcpy(o, p, (size_t)(q - p)), o += q - p;
            memcpy(o, to[i], tl), o += tl;
            p = q + fl;
        }
        if (out) strcpy(o, p);
        free(cur);
        cur = out;
    }
    return cur;
}

/* src's tensors whose names do not start with any of drop[0..n_drop), then extra[0..n_extra),
 * under src's header edited by (from, to) pairs, into dst. */
static inline bool moe_rewrite(const char *src, const char *dst, const char *const *drop,
                               size_t n_drop, const char *const *from, const char *const *to,
                               size_t n_edit, const extra_tensor *extra, size_t n_extra) {
    cmf_err err;
    cmf_file *f = NULL;
    cmf_writer *w = NULL;
    bool ok = cmf_open(src, 0, &f, &err) == CMF_OK;
    char *json = ok ? replace_all(cmf_file_header(f)->json, from, to, n_edit) : NULL;
    ok = ok && json && cmf_writer_create(dst, NULL, &w, &err) == CMF_OK &&
         cmf_writer_set_header(w, json, strlen(json), &err) == CMF_OK;
    for (size_t i = 0; ok && i < cmf_file_tensor_count(f); i++) {
        const cmf_tensor *t = cmf_file_tensor_at(f, i);
        bool dropped = false;
        for (size_t d = 0; d < n_drop && !dropped; d++)
            dropped = !strncmp(t->name, drop[d], strlen(drop[d]));
        if (!dropped)
            ok = cmf_writer_add_tensor_ref(w, t->name, (cmf_dtype)t->dtype, t->ndim, t->shape,
                                           t->data, t->nbytes, &err) == CMF_OK;
    }
    for (size_t i = 0; ok && i < n_extra; i++)
        ok = cmf_writer_add_tensor_ref(w, extra[i].name, extra[i].dtype, extra[i].ndim,
                                       extra[i].shape, extra[i].data, extra[i].nbytes,
                                       &err) == CMF_OK;
    ok = ok && cmf_writer_finish(w, &err) == CMF_OK;
    CHECK_MSG(ok, "rewrite %s -> %s: %s", src, dst, err.msg);
    cmf_writer_free(w);
    cmf_close(f);
    free(json);
    return ok;
}

/* The sigmoid-router variant of the tiny qwen3_moe file `base` (tools/make_moe_references.py):
 * router_sigmoid, routed_scaling_factor 2.5, and with_bias: the expert_bias tensors of
 * tests/fixtures/tiny/qwen3_moe/expert_bias.npy. */
static inline bool moe_write_sigmoid(const char *base, const char *out, bool with_bias) {
    size_t nb = 0;
    char dt;
    float *bias =
        npy_load(CORTIQ_SOURCE_DIR "/tests/fixtures/tiny/qwen3_moe/expert_bias.npy", &nb, &dt);
    CHECK(bias && nb == 8);
    if (!bias || nb != 8) return free(bias), false;
    uint16_t b16[8];
    for (int i = 0; i < 8; i++)
        b16[i] = f32_to_f16(bias[i]);
    free(bias);
    extra_tensor ex[2] = {{"model.layers.0.mlp.expert_bias", CMF_DT_F16, 1, {4, 0}, b16, 8},
                          {"model.layers.1.mlp.expert_bias", CMF_DT_F16, 1, {4, 0}, b16 + 4, 8}};
    const char *from[] = {"\"norm_topk_prob\":true}"};
    const char *to[] = {"\"norm_topk_prob\":true,\"router_sigmoid\":true,"
                        "\"routed_scaling_factor\":2.5}"};
    return moe_rewrite(base, out, NULL, 0, from, to, 1, ex, with_bias ? 2 : 0);
}

#endif
