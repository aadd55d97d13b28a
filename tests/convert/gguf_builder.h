/* gguf_builder.h - build GGUF v3 images in memory for the converter tests (metadata only;
 * tensor infos and data are appended by the tests that need them). */
#ifndef CORTIQ_GGUF_BUILDER_H
#define CORTIQ_GGUF_BUILDER_H

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cortiq/gguf.h"

typedef struct gw {
    uint8_t *b;
    size_t n, cap;
    uint64_t nkv;
} gw;

static inline void w_bytes(gw *w, const void *p, size_t n) {
    if (w->n + n > w->cap) {
        while (w->n + n > w->cap)
            w->cap = w->cap ? w->cap * 2 : 1 << 16;
        w->b = realloc(w->b, w->cap);
    }
    memcpy(w->b + w->n, p, n);
    w->n += n;
}
static inline void w_u32(gw *w, uint32_t v) {
    uint8_t b[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
    w_bytes(w, b, 4);
}
static inline void w_u64(gw *w, uint64_t v) {
    w_u32(w, (uint32_t)v);
    w_u32(w, (uint32_t)(v >> 32));
}
static inline void w_strn(gw *w, const char *s, size_t n) {
    w_u64(w, n);
    w_bytes(w, s, n);
}
static inline void w_str(gw *w, const char *s) {
    w_strn(w, s, strlen(s));
}
static inline void w_begin(gw *w) {
    memset(w, 0, sizeof *w);
    w_bytes(w, "GGUF", 4);
    w_u32(w, 3);
    w_u64(w, 0);
    w_u64(w, 0); /* n_kv, patched by w_end */
}
static inline void w_end(gw *w) {
    for (int i = 0; i < 8; i++)
        w->b[16 + i] = (uint8_t)(w->nkv >> (8 * i));
}
static inline void kv_str(gw *w, const char *k, const char *v) {
    w_str(w, k);
    w_u32(w, CMF_GGUF_STRING);
    w_str(w, v);
    w->nkv++;
}
static inline void kv_u32(gw *w, const char *k, uint32_t v) {
    w_str(w, k);
    w_u32(w, CMF_GGUF_U32);
    w_u32(w, v);
    w->nkv++;
}
static inline void kv_bool(gw *w, const char *k, bool v) {
    w_str(w, k);
    w_u32(w, CMF_GGUF_BOOL);
    uint8_t b = v;
    w_bytes(w, &b, 1);
    w->nkv++;
}
static inline void kv_strs(gw *w, const char *k, const char **v, size_t n) {
    w_str(w, k);
    w_u32(w, CMF_GGUF_ARRAY);
    w_u32(w, CMF_GGUF_STRING);
    w_u64(w, n);
    for (size_t i = 0; i < n; i++)
        w_str(w, v[i]);
    w->nkv++;
}
static inline void kv_i32s(gw *w, const char *k, const int32_t *v, size_t n) {
    w_str(w, k);
    w_u32(w, CMF_GGUF_ARRAY);
    w_u32(w, CMF_GGUF_I32);
    w_u64(w, n);
    for (size_t i = 0; i < n; i++)
        w_u32(w, (uint32_t)v[i]);
    w->nkv++;
}
/* n f32 scores of -1000 (llama.cpp's placeholder score). */
static inline void kv_f32s(gw *w, const char *k, size_t n) {
    w_str(w, k);
    w_u32(w, CMF_GGUF_ARRAY);
    w_u32(w, CMF_GGUF_F32);
    w_u64(w, n);
    for (size_t i = 0; i < n; i++)
        w_u32(w, 0xC47A0000u); /* -1000: placeholder scores */
    w->nkv++;
}

static inline void kv_f32(gw *w, const char *k, float v) {
    uint32_t b;
    memcpy(&b, &v, 4);
    w_str(w, k);
    w_u32(w, CMF_GGUF_F32);
    w_u32(w, b);
    w->nkv++;
}

static inline void kv_bools(gw *w, const char *k, const bool *v, size_t n) {
    w_str(w, k);
    w_u32(w, CMF_GGUF_ARRAY);
    w_u32(w, CMF_GGUF_BOOL);
    w_u64(w, n);
    for (size_t i = 0; i < n; i++) {
        uint8_t b = v[i];
        w_bytes(w, &b, 1);
    }
    w->nkv++;
}

/* After the last KV: n tensors, each F32 [rows x 32] (rows[i], or 1 row when rows is NULL),
 * zero-filled, at the default alignment. */
static inline void w_f32_tensors(gw *w, const char **names, const uint64_t *rows, size_t n) {
    uint64_t off = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t r = rows ? rows[i] : 1;
        w_str(w, names[i]);
        w_u32(w, 2);
        w_u64(w, 32);
        w_u64(w, r);
        w_u32(w, CMF_GGML_F32);
        w_u64(w, off);
        off += (r * 128 + 31) / 32 * 32;
    }
    while (w->n % 32)
        w_bytes(w, "", 1);
    for (uint64_t i = 0; i < off; i++)
        w_bytes(w, "", 1);
    for (int i = 0; i < 8; i++)
        w->b[8 + i] = (uint8_t)((uint64_t)n >> (8 * i));
}

#endif
