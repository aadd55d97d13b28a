/* sample.h - builds small but complete CMF files for the format tests: several dtypes, a
 * masks section, a vocab section, skills, provenance. */
#ifndef CORTIQ_TEST_SAMPLE_H
#define CORTIQ_TEST_SAMPLE_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "common/f16.h"
#include "cortiq/format.h"
#include "cortiq/writer.h"

#define SAMPLE_LAYERS 2
#define SAMPLE_HIDDEN 64
#define SAMPLE_INTER  40 /* not a multiple of 8: exercises tail bits */
#define SAMPLE_HEADS  4

static inline const char *sample_header_json(void) {
    return "{\"arch\": {\"arch_name\": \"llama\", \"hidden_size\": 64, \"intermediate_size\": 40, "
           "\"num_layers\": 2,"
           " \"num_attention_heads\": 4, \"num_kv_heads\": 2, \"head_dim\": 16, \"vocab_size\": 32,"
           " \"layer_types\": [\"FullAttention\", \"SlidingAttention\"], \"rms_norm_eps\": 1e-6,"
           " \"norm_style\": \"qwen\", \"rope_theta\": 10000.0, \"sliding_window\": 128,"
           " \"yarn\": {\"factor\": 4.0, \"original_max_position_embeddings\": 4096},"
           " \"moe\": {\"num_experts\": 4, \"top_k\": 2, \"moe_intermediate_size\": 16, "
           "\"norm_topk_prob\": true},"
           " \"tie_word_embeddings\": true, \"future_field\": {\"ignored\": [1, 2]}},"
           " \"quant_type\": \"Q8_ROW\","
           " \"tokenizer_config\": {\"chat_template\": \"{{ bos_token }}\", \"eos_token_ids\": [2, "
           "3],"
           " \"bos_token_id\": 1, \"pad_token_id\": null},"
           " \"skills\": [{\"id\": \"sql\", \"name\": \"SQL\", \"layers\": [0, \"...\", 1], "
           "\"quality\": null}],"
           " \"provenance\": {\"tool\": \"test\", \"source_model\": \"none\"}}";
}

static inline void sample_fill(float *x, size_t n, unsigned seed) {
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        x[i] = ((float)(seed >> 8) / 16777216.0f - 0.5f) * 2.0f;
    }
}

/* masks for the sample arch: 2 tasks, the second with an expert area */
static inline uint8_t *sample_masks(size_t *len) {
    cmf_masks_builder *b;
    if (cmf_masks_builder_create(SAMPLE_LAYERS, SAMPLE_INTER, SAMPLE_HEADS, 4, &b, NULL))
        return NULL;
    uint8_t ffn[SAMPLE_LAYERS * 5], heads[SAMPLE_LAYERS], gates[1] = {0x3},
                                                          experts[SAMPLE_LAYERS] = {0x5, 0xF};
    memset(ffn, 0xFF, sizeof ffn);
    ffn[4] = 0x0F, ffn[9] = 0x01; /* 36 and 33 neurons */
    heads[0] = 0x0F, heads[1] = 0x03;
    uint8_t *out = NULL;
    if (cmf_masks_builder_add(b, "general", NULL, ffn, heads, gates, NULL, NULL, NULL) ||
        cmf_masks_builder_add(b, "code", "coding tasks", ffn, heads, gates, experts,
                              "{\"metric\": \"heldout_ppl_ratio\", \"value\": 0.97}", NULL) ||
        cmf_masks_builder_set_default(b, "general", NULL) ||
        cmf_masks_builder_build(b, &out, len, NULL))
        out = NULL;
    cmf_masks_builder_free(b);
    return out;
}

typedef struct stream_ctx {
    const uint8_t *data;
    size_t len, piece;
} stream_ctx;

static inline cmf_status sample_stream(void *user, cmf_sink *sink, cmf_err *err) {
    stream_ctx *c = user;
    for (size_t off = 0; off < c->len; off += c->piece) {
        size_t n = c->len - off < c->piece ? c->len - off : c->piece;
        cmf_status st = cmf_sink_write(sink, c->data + off, n, err);
        if (st) return st;
    }
    return CMF_OK;
}

/* Write the sample model to path; opts may set sharding. Returns the status of finish. */
static inline cmf_status sample_write(const char *path, const cmf_writer_opts *opts, cmf_err *err) {
    cmf_writer *w;
    cmf_status st = cmf_writer_create(path, opts, &w, err);
    if (st) return st;
    static float emb[32 * SAMPLE_HIDDEN];
    sample_fill(emb, 32 * SAMPLE_HIDDEN, 1);
    static uint16_t emb16[32 * SAMPLE_HIDDEN], norm16[SAMPLE_HIDDEN];
    for (size_t i = 0; i < 32 * SAMPLE_HIDDEN; i++)
        emb16[i] = f32_to_f16(emb[i]);
    for (size_t i = 0; i < SAMPLE_HIDDEN; i++)
        norm16[i] = f32_to_f16(1.0f + 0.01f * (float)i);
    uint64_t sh_emb[2] = {32, SAMPLE_HIDDEN}, sh_norm[1] = {SAMPLE_HIDDEN};
    st = cmf_writer_set_header(w, sample_header_json(), strlen(sample_header_json()), err);
    if (!st)
        st = cmf_writer_add_tensor(w, "model.embed_tokens.weight", CMF_DT_F16, 2, sh_emb, emb16,
                                   sizeof emb16, err);
    /* q8_row by hand: int8 then f16 scales */
    static uint8_t q8[SAMPLE_INTER * SAMPLE_HIDDEN + 2 * SAMPLE_INTER];
    for (size_t i = 0; i < sizeof q8; i++)
        q8[i] = (uint8_t)(i * 7 + 3);
    uint64_t sh_up[2] = {SAMPLE_INTER, SAMPLE_HIDDEN};
    for (int l = 0; l < SAMPLE_LAYERS && !st; l++) {
        char name[96];
        snprintf(name, sizeof name, "model.layers.%d.input_layernorm.weight", l);
        st = cmf_writer_add_tensor(w, name, CMF_DT_F16, 1, sh_norm, norm16, sizeof norm16, err);
        snprintf(name, sizeof name, "model.layers.%d.mlp.up_proj.weight", l);
        if (!st) st = cmf_writer_add_tensor(w, name, CMF_DT_Q8_ROW, 2, sh_up, q8, sizeof q8, err);
    }
    static float f32[3 * 5 * 7];
    sample_fill(f32, 105, 7);
    uint64_t sh3[3] = {3, 5, 7};
    if (!st) st = cmf_writer_add_tensor(w, "extra.rank3", CMF_DT_F32, 3, sh3, f32, sizeof f32, err);
    static uint8_t vb[SAMPLE_INTER + 2 * SAMPLE_INTER * 2 + SAMPLE_INTER * SAMPLE_HIDDEN];
    /* vbit: all rows 8 bits -> max size */
    memset(vb, 8, SAMPLE_INTER);
    for (size_t i = SAMPLE_INTER; i < sizeof vb; i++)
        vb[i] = (uint8_t)(i * 13);
    if (!st)
        st = cmf_writer_add_tensor(w, "skill.sql.model.layers.0.mlp.up_proj.weight", CMF_DT_VBIT, 2,
                                   sh_up, vb, sizeof vb, err);
    static stream_ctx sc;
    sc.data = (const uint8_t *)emb;
    sc.len = sizeof emb;
    sc.piece = 100;
    uint64_t sh_head[2] = {32, SAMPLE_HIDDEN};
    if (!st)
        st = cmf_writer_add_tensor_stream(w, "lm_head.weight", CMF_DT_F32, 2, sh_head,
                                          sample_stream, &sc, err);
    size_t mlen = 0;
    uint8_t *masks = sample_masks(&mlen);
    if (!st && !masks) st = cmf_err_set(err, CMF_E_NOMEM, path, "sample masks");
    if (!st) st = cmf_writer_set_masks(w, masks, mlen, err);
    free(masks);
    const char *vocab = "{\"model\": {\"type\": \"BPE\"}}";
    if (!st) st = cmf_writer_set_vocab(w, vocab, strlen(vocab), err);
    if (!st) st = cmf_writer_finish(w, err);
    cmf_writer_free(w);
    return st;
}

/* Read a whole file into memory. */
static inline uint8_t *slurp(const char *path, size_t *len) {
    FILE *fp = fopen(path, "rb");
    *len = 0;
    if (!fp) return NULL;
    fseek(fp, 0, SEEK_END);
    long n = ftell(fp);
    fseek(fp, 0, SEEK_SET);
    uint8_t *b = malloc((size_t)n + 1);
    if (b && fread(b, 1, (size_t)n, fp) != (size_t)n) {
        free(b);
        b = NULL;
    }
    fclose(fp);
    *len = (size_t)n;
    return b;
}

static inline int spit(const char *path, const void *b, size_t len) {
    FILE *fp = fopen(path, "wb");
    if (!fp) return -1;
    int ok = fwrite(b, 1, len, fp) == len;
    return (fclose(fp) == 0 && ok) ? 0 : -1;
}

#endif
