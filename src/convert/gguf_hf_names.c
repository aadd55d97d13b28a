/* gguf_hf_names.c - llama.cpp tensor names -> HF names, and the value fix-ups that make a
 * dequantized GGUF tensor equal to the HF checkpoint it came from (docs/CONVERT.md). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/checked.h"
#include "common/err.h"
#include "cortiq/gguf.h"

static bool is_gemma(const char *arch) {
    return arch && strncmp(arch, "gemma", 5) == 0;
}
/* Gemma 2/3 have four norms per block; their ffn_norm is the PRE-feed-forward norm. */
static bool has_sandwich_norms(const char *arch) {
    return arch && (strcmp(arch, "gemma2") == 0 || strcmp(arch, "gemma3") == 0 ||
                    strcmp(arch, "gemma3n") == 0);
}

typedef struct name_pair {
    const char *gguf, *hf;
} name_pair;

/* Per-block names (after "blk.N."), without the .weight/.bias suffix. */
static const name_pair k_block[] = {
    {"attn_q", "self_attn.q_proj"},
    {"attn_k", "self_attn.k_proj"},
    {"attn_v", "self_attn.v_proj"},
    {"attn_output", "self_attn.o_proj"},
    {"attn_q_norm", "self_attn.q_norm"},
    {"attn_k_norm", "self_attn.k_norm"},
    {"ffn_gate", "mlp.gate_proj"},
    {"ffn_up", "mlp.up_proj"},
    {"ffn_down", "mlp.down_proj"},
    {"attn_norm", "input_layernorm"},
    {"post_ffw_norm", "post_feedforward_layernorm"},
    {"ffn_gate_inp", "mlp.gate"},
    {"ffn_gate_shexp", "mlp.shared_expert.gate_proj"},
    {"ffn_up_shexp", "mlp.shared_expert.up_proj"},
    {"ffn_down_shexp", "mlp.shared_expert.down_proj"},
    {"ffn_gate_inp_shexp", "mlp.shared_expert_gate"},
};

static const name_pair k_top[] = {
    {"token_embd", "model.embed_tokens"},
    {"output_norm", "model.norm"},
    {"output", "lm_head"},
};

static bool emit(char *out, size_t cap, const char *fmt_prefix, const char *mid,
                 const char *suffix) {
    int n = snprintf(out, cap, "%s%s%s", fmt_prefix, mid, suffix);
    return n > 0 && (size_t)n < cap;
}

bool cmf_gguf_hf_name(const char *arch, const char *gguf_name, char *out, size_t cap) {
    if (!gguf_name || !out || cap == 0) return false;
    const char *dot = strrchr(gguf_name, '.');
    if (!dot || (strcmp(dot, ".weight") != 0 && strcmp(dot, ".bias") != 0)) return false;
    size_t stem_len = (size_t)(dot - gguf_name);
    char stem[256];
    if (stem_len >= sizeof stem) return false;
    memcpy(stem, gguf_name, stem_len);
    stem[stem_len] = 0;
    for (size_t i = 0; i < sizeof k_top / sizeof *k_top; i++)
        if (strcmp(stem, k_top[i].gguf) == 0) return emit(out, cap, "", k_top[i].hf, dot);
    unsigned long layer;
    int consumed = 0;
    if (strncmp(stem, "blk.", 4) != 0 || sscanf(stem + 4, "%lu%n", &layer, &consumed) != 1 ||
        stem[4] < '0' || stem[4] > '9' || stem[4 + consumed] != '.')
        return false;
    const char *part = stem + 4 + consumed + 1;
    const char *hf = NULL;
    if (strcmp(part, "ffn_norm") == 0)
        hf = has_sandwich_norms(arch) ? "pre_feedforward_layernorm" : "post_attention_layernorm";
    else if (strcmp(part, "post_attention_norm") == 0)
        hf = has_sandwich_norms(arch) ? "post_attention_layernorm" : NULL;
    else
        for (size_t i = 0; i < sizeof k_block / sizeof *k_block; i++)
            if (strcmp(part, k_block[i].gguf) == 0) hf = k_block[i].hf;
    if (!hf) return false;
    char prefix[64];
    snprintf(prefix, sizeof prefix, "model.layers.%lu.", layer);
    return emit(out, cap, prefix, hf, dot);
}

static bool ends_with(const char *s, const char *suf) {
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && strcmp(s + a - b, suf) == 0;
}

cmf_gguf_fixup cmf_gguf_tensor_fixup(const cmf_gguf *g, const char *gguf_name) {
    cmf_gguf_fixup f = {false, 0, false};
    const char *arch = cmf_gguf_get_str(g, "general.architecture");
    if (!arch) return f;
    /* llama.cpp's converter interleaves the rotary halves of Q/K rows for the llama family
     * (its rope is the GPT-J style pairwise one); HF's llama keeps halves. */
    if (strcmp(arch, "llama") == 0 && strncmp(gguf_name, "blk.", 4) == 0 &&
        ends_with(gguf_name, ".weight")) {
        char key[128];
        int64_t heads = 0, kv = -1;
        snprintf(key, sizeof key, "%s.attention.head_count", arch);
        cmf_gguf_get_int(g, key, &heads);
        snprintf(key, sizeof key, "%s.attention.head_count_kv", arch);
        if (!cmf_gguf_get_int(g, key, &kv)) kv = heads;
        if (ends_with(gguf_name, ".attn_q.weight") && heads > 0)
            f = (cmf_gguf_fixup){true, (uint64_t)heads, false};
        if (ends_with(gguf_name, ".attn_k.weight") && kv > 0)
            f = (cmf_gguf_fixup){true, (uint64_t)kv, false};
    }
    /* Gemma's llama.cpp conversion stores every norm weight as (1 + w). */
    if (is_gemma(arch) && ends_with(gguf_name, "norm.weight")) f.minus_one = true;
    return f;
}

cmf_status cmf_gguf_unpermute_rows(float *w, uint64_t rows, uint64_t cols, uint64_t n_head,
                                   float *scratch, cmf_err *err) {
    if (n_head == 0 || rows % (2 * n_head) != 0)
        return cmf_err_set(err, CMF_E_INVALID_ARG, NULL,
                           "%llu rows do not split into %llu heads of an even size",
                           (unsigned long long)rows, (unsigned long long)n_head);
    uint64_t hd = rows / n_head, half = hd / 2;
    memcpy(scratch, w, (size_t)(rows * cols) * sizeof(float));
    for (uint64_t r = 0; r < rows; r++) {
        uint64_t h = r / hd, j = r % hd;
        uint64_t dst = h * hd + (j % 2) * half + j / 2;
        memcpy(w + dst * cols, scratch + r * cols, (size_t)cols * sizeof(float));
    }
    return CMF_OK;
}

cmf_status cmf_gguf_tensor_hf_f32(const cmf_gguf *g, const cmf_gguf_tensor *t, float *dst,
                                  cmf_err *err) {
    cmf_gguf_fixup f = cmf_gguf_tensor_fixup(g, t->name);
    cmf_status st;
    if (!f.unpermute_rows) {
        if ((st = cmf_gguf_tensor_rows_f32(g, t, 0, t->nrows, dst, err))) return st;
    } else {
        /* dequantize each GGUF row straight into its HF row */
        if (f.n_head == 0 || t->nrows % (2 * f.n_head) != 0)
            return cmf_err_set(
                err, CMF_E_PARSE, cmf_gguf_name(g),
                "tensor '%s': %llu rows do not split into %llu heads of an even size", t->name,
                (unsigned long long)t->nrows, (unsigned long long)f.n_head);
        uint64_t hd = t->nrows / f.n_head, half = hd / 2;
        for (uint64_t r = 0; r < t->nrows; r++) {
            uint64_t h = r / hd, j = r % hd;
            uint64_t to = h * hd + (j % 2) * half + j / 2;
            if ((st = cmf_gguf_tensor_rows_f32(g, t, r, 1, dst + to * t->row_len, err))) return st;
        }
    }
    if (f.minus_one)
        for (uint64_t i = 0; i < t->nelem; i++)
            dst[i] -= 1.0f;
    return CMF_OK;
}
