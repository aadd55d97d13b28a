/* defrag_fixture.h - the tiny llama checkpoint (2 layers, hidden 64, 128 FFN neurons, 4 query
 * heads over 2 kv heads, head_dim 16) as CMF files with a task mask, and the pieces the defrag
 * and requant tests share. Include after test.h. */
#ifndef CORTIQ_TEST_DEFRAG_FIXTURE_H
#define CORTIQ_TEST_DEFRAG_FIXTURE_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cortiq/converter.h"
#include "cortiq/engine.h"
#include "cortiq/format.h"
#include "cortiq/quant.h"
#include "cortiq/writer.h"

#define DF_TINY  CORTIQ_SOURCE_DIR "/tests/fixtures/tiny/llama"
#define DF_L     2
#define DF_I     128
#define DF_H     4
#define DF_KV    2
#define DF_HD    16
#define DF_HID   64
#define DF_FFN_B (DF_I / 8)

/* A task: FFN bits per layer, head bits per layer, layer gates. */
typedef struct df_task {
    uint8_t ffn[DF_L][DF_FFN_B];
    uint8_t heads[DF_L][1];
    uint8_t gates[1];
} df_task;

static inline void df_set(uint8_t *row, unsigned i, int on) {
    if (on)
        row[i / 8] |= (uint8_t)(1u << (i % 8));
    else
        row[i / 8] &= (uint8_t) ~(1u << (i % 8));
}

/* keep: fraction of FFN neurons kept per layer (deterministic pseudo-random choice). */
static inline void df_task_make(df_task *t, double keep, unsigned seed) {
    memset(t, 0, sizeof *t);
    uint32_t x = seed * 2654435761u + 12345u;
    for (unsigned l = 0; l < DF_L; l++) {
        for (unsigned i = 0; i < DF_I; i++) {
            x = x * 1664525u + 1013904223u;
            df_set(t->ffn[l], i, (x >> 8) % 1000 < keep * 1000);
        }
        t->heads[l][0] = (1u << DF_H) - 1;
    }
    t->gates[0] = (1u << DF_L) - 1;
}

static inline cmf_file *df_open(const char *path) {
    cmf_file *f = NULL;
    cmf_err err;
    CHECK_MSG(cmf_open(path, 0, &f, &err) == CMF_OK, "%s", err.msg);
    return f;
}

/* The tiny llama converted with `quant` (a --quant name) into path. */
static inline int df_convert(const char *quant, const char *path) {
    cmf_convert_opts o;
    cmf_convert_opts_default(&o);
    CHECK(cmf_convert_quant_from_name(quant, &o.quant));
    o.threads = 1;
    cmf_err err;
    int ok = cmf_convert_hf(DF_TINY, path, NULL, &o, NULL, &err) == CMF_OK;
    CHECK_MSG(ok, "%s: %s", quant, err.msg);
    return ok;
}

/* A copy of in with a masks section of the given tasks (names "t0", "t1", ...; t0 default). */
static inline int df_with_masks(const char *in, const char *out, const df_task *tasks, size_t n) {
    cmf_file *f = df_open(in);
    if (!f) return 0;
    cmf_err err;
    cmf_masks_builder *b = NULL;
    uint8_t *masks = NULL;
    size_t mlen = 0;
    cmf_status st = cmf_masks_builder_create(DF_L, DF_I, DF_H, 0, &b, &err);
    for (size_t i = 0; i < n && !st; i++) {
        char name[24];
        snprintf(name, sizeof name, "t%zu", i);
        st = cmf_masks_builder_add(b, name, NULL, &tasks[i].ffn[0][0], &tasks[i].heads[0][0],
                                   tasks[i].gates, NULL, NULL, &err);
    }
    /* the other implementation's reader requires default_task */
    if (!st && n) st = cmf_masks_builder_set_default(b, "t0", &err);
    if (!st) st = cmf_masks_builder_build(b, &masks, &mlen, &err);
    cmf_masks_builder_free(b);
    cmf_writer *w = NULL;
    const cmf_header *h = cmf_file_header(f);
    if (!st) st = cmf_writer_create(out, NULL, &w, &err);
    if (!st) st = cmf_writer_set_header(w, h->json, h->json_len, &err);
    for (size_t i = 0; i < cmf_file_tensor_count(f) && !st; i++) {
        const cmf_tensor *t = cmf_file_tensor_at(f, i);
        st = cmf_writer_add_tensor_ref(w, t->name, (cmf_dtype)t->dtype, t->ndim, t->shape, t->data,
                                       t->nbytes, &err);
    }
    size_t vlen;
    const uint8_t *vocab = cmf_file_vocab(f, &vlen);
    if (!st && vocab) st = cmf_writer_set_vocab(w, vocab, vlen, &err);
    if (!st) st = cmf_writer_set_masks(w, masks, mlen, &err);
    if (!st) st = cmf_writer_finish(w, &err);
    CHECK_MSG(st == CMF_OK, "%s", err.msg);
    cmf_writer_free(w);
    free(masks);
    cmf_close(f);
    return st == CMF_OK;
}

/* The logits of n tokens [n][V] of a dense run (batch, or one token at a time), f32 KV cache,
 * f32 activations; malloc'd. */
static inline float *df_logits(const char *path, const int32_t *tokens, size_t n, int one_by_one,
                               uint32_t *V) {
    cortiq_model *m = NULL;
    cortiq_load_opts lo = {.threads = 2, .kv = CORTIQ_KV_F32, .act = CORTIQ_ACT_F32};
    cmf_err err;
    CHECK_MSG(cortiq_model_load(path, &lo, &m, &err) == CMF_OK, "%s: %s", path, err.msg);
    if (!m) return NULL;
    *V = cortiq_model_vocab(m);
    cortiq_session *s = NULL;
    CHECK(cortiq_session_create(m, 128, &s, &err) == CMF_OK);
    float *lg = s ? malloc(n * (size_t)*V * sizeof(float)) : NULL;
    if (lg && one_by_one)
        for (size_t i = 0; i < n; i++) {
            CHECK(cortiq_session_eval(s, &tokens[i], 1, NULL, &err) == CMF_OK);
            memcpy(lg + i * *V, cortiq_session_logits(s), *V * sizeof(float));
        }
    else if (lg)
        CHECK(cortiq_session_eval(s, tokens, n, lg, &err) == CMF_OK);
    cortiq_session_free(s);
    cortiq_model_free(m);
    return lg;
}

static inline int df_verify(const char *path) {
    cmf_file *f = df_open(path);
    if (!f) return 0;
    cmf_verify_stats vs;
    int ok = cmf_verify(f, 1, NULL, NULL, &vs) == CMF_OK;
    CHECK_MSG(ok, "%s: %llu problems", path, (unsigned long long)vs.problems);
    cmf_close(f);
    return ok;
}

/* Write a C-order .npy of n elements of `descr` (element size es) with the given shape. */
static inline void df_npy_write(const char *path, const char *descr, unsigned es,
                                const uint64_t *shape, unsigned ndim, const void *data) {
    char dict[256], sh[96] = "";
    uint64_t n = 1;
    for (unsigned i = 0; i < ndim; i++) {
        size_t l = strlen(sh);
        snprintf(sh + l, sizeof sh - l, "%llu,%s", (unsigned long long)shape[i],
                 i + 1 < ndim ? " " : "");
        n *= shape[i];
    }
    int len = snprintf(dict, sizeof dict,
                       "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }", descr, sh);
    int pad = 64 - (10 + len + 1) % 64;
    FILE *fp = fopen(path, "wb");
    CHECK(fp != NULL);
    if (!fp) return;
    uint16_t hl = (uint16_t)(len + pad + 1);
    fwrite("\x93NUMPY\x01\x00", 1, 8, fp);
    fputc(hl & 0xff, fp), fputc(hl >> 8, fp);
    fwrite(dict, 1, (size_t)len, fp);
    for (int i = 0; i < pad; i++)
        fputc(' ', fp);
    fputc('\n', fp);
    fwrite(data, es, (size_t)n, fp);
    fclose(fp);
}

#endif
