/* test_real_models.c - the real GGUF models that scripts/fetch-models puts in the cache
 * (~/.cache/cortiq/models or $CORTIQ_MODEL_CACHE): tensor count and types, dequantized values
 * against the `gguf` package (tools/make_real_model_refs.py), HF names, fix-ups, arch JSON
 * and tokenizer_config. Skipped, with a message, for a model absent from the cache. */
#include <jansson.h>

#include "common/model_cache.h"
#include "common/test.h"
#include "convert_test_util.h"
#include "cortiq/gguf.h"

static char g_cache[1024];
static int g_skipped;

/* Sum of the whole tensor in f64 (row chunks: memory stays bounded). */
static double tensor_sum(const cmf_gguf *g, const cmf_gguf_tensor *t) {
    uint64_t chunk = (1u << 20) / t->row_len + 1;
    float *buf = malloc(chunk * t->row_len * sizeof(float));
    double s = 0;
    for (uint64_t r = 0; buf && r < t->nrows; r += chunk) {
        uint64_t n = t->nrows - r < chunk ? t->nrows - r : chunk;
        cmf_err err;
        if (cmf_gguf_tensor_rows_f32(g, t, r, n, buf, &err) != CMF_OK) {
            fprintf(stderr, "%s\n", err.msg);
            s = NAN;
            break;
        }
        for (uint64_t i = 0; i < n * t->row_len; i++)
            s += buf[i];
    }
    free(buf);
    return s;
}

/* Check one "model" block of the refs text at *cursor; false at the end of the text. */
static bool check_model(char **cursor) {
    char *line = strtok_r(NULL, "\n", cursor);
    if (!line) return false;
    char fname[256];
    unsigned long count;
    if (sscanf(line, "model %255s %lu", fname, &count) != 2) return false;
    char path[1400];
    snprintf(path, sizeof path, "%s/%s", g_cache, fname);
    cmf_gguf *g = NULL;
    cmf_err err;
    FILE *probe = fopen(path, "rb");
    if (!probe) {
        printf("SKIP: %s is absent and scripts/fetch-models could not fetch it\n", path);
        g_skipped++;
    } else {
        fclose(probe);
        cmf_status st = cmf_gguf_open(path, &g, &err);
        CHECK_MSG(st == CMF_OK, "%s", err.msg);
        if (g) CHECK_EQ_U64(cmf_gguf_tensor_count(g), count);
    }
    const cmf_gguf_tensor *cur = NULL;
    float *row = NULL;
    while ((line = strtok_r(NULL, "\n", cursor)) && strcmp(line, "end") != 0) {
        if (!g) continue;
        char a[256], b[64];
        unsigned long n;
        double sum;
        if (sscanf(line, "count %63s %lu", b, &n) == 2) {
            unsigned long have = 0;
            for (size_t i = 0; i < cmf_gguf_tensor_count(g); i++)
                have += strcmp(cmf_ggml_type_name(cmf_gguf_tensor_at(g, i)->type), b) == 0;
            CHECK_MSG(have == n, "%s: %lu %s tensors, want %lu", fname, have, b, n);
        } else if (sscanf(line, "tensor %255s %63s %lu %lf", a, b, &n, &sum) == 4) {
            cur = cmf_gguf_find_tensor(g, a);
            CHECK_MSG(cur != NULL, "%s: no tensor %s", fname, a);
            if (!cur) continue;
            CHECK_MSG(strcmp(cmf_ggml_type_name(cur->type), b) == 0 && cur->nelem == n,
                      "%s: %s type/size", fname, a);
            double got = tensor_sum(g, cur);
            CHECK_MSG(fabs(got - sum) <= 1e-9 * (fabs(sum) + 1.0) + 1e-6,
                      "%s: %s sum %.17g, want %.17g", fname, a, got, sum);
        } else if (strncmp(line, "row ", 4) == 0 && cur) {
            unsigned long ri, len;
            int used = 0;
            if (sscanf(line, "row %lu %lu%n", &ri, &len, &used) != 2 || len != cur->row_len) {
                CHECK_MSG(0, "bad row line for %s", cur->name);
                continue;
            }
            free(row);
            row = malloc(len * sizeof(float));
            CHECK_STATUS(cmf_gguf_tensor_rows_f32(g, cur, ri, 1, row, &t_err_), CMF_OK);
            const char *p = line + used;
            unsigned long bad = 0;
            for (unsigned long i = 0; i < len; i++) {
                char *end;
                uint32_t bits = (uint32_t)strtoul(p, &end, 16);
                p = end;
                uint32_t have;
                memcpy(&have, &row[i], 4);
                bad += have != bits;
            }
            CHECK_MSG(bad == 0, "%s: %s row %lu: %lu values differ from the gguf package", fname,
                      cur->name, ri, bad);
        }
    }
    free(row);
    if (g) {
        /* every tensor has an HF name, and the names are unique */
        size_t nt = cmf_gguf_tensor_count(g), unmapped = 0;
        char(*names)[128] = calloc(nt, sizeof *names);
        const char *arch = cmf_gguf_get_str(g, "general.architecture");
        for (size_t i = 0; i < nt; i++)
            if (!cmf_gguf_hf_name(arch, cmf_gguf_tensor_at(g, i)->name, names[i], sizeof names[i]))
                unmapped++;
        CHECK_MSG(unmapped == 0, "%s: %zu tensors without an HF name", fname, unmapped);
        size_t dups = 0;
        for (size_t i = 0; i < nt; i++)
            for (size_t j = i + 1; j < nt; j++)
                dups += strcmp(names[i], names[j]) == 0;
        CHECK(dups == 0);
        free(names);
        char *aj = NULL, *tj = NULL;
        CHECK_STATUS(cmf_gguf_arch_json(g, &aj, &t_err_), CMF_OK);
        CHECK_STATUS(cmf_gguf_tokenizer_config_json(g, &tj, &t_err_), CMF_OK);
        json_t *A = aj ? json_loads(aj, 0, NULL) : NULL, *T = tj ? json_loads(tj, 0, NULL) : NULL;
        CHECK(A && T);
        if (A && T && strcmp(arch, "llama") == 0) {
            CHECK(json_integer_value(json_object_get(A, "num_layers")) == 30);
            CHECK(json_integer_value(json_object_get(A, "hidden_size")) == 576);
            CHECK(json_integer_value(json_object_get(A, "num_kv_heads")) == 3);
            CHECK(json_integer_value(json_object_get(A, "head_dim")) == 64);
            CHECK(json_integer_value(json_object_get(A, "vocab_size")) == 49152);
            CHECK(json_real_value(json_object_get(A, "rms_norm_eps")) == 1e-5);
            CHECK(json_real_value(json_object_get(A, "rope_theta")) == 100000.0);
            CHECK(strcmp(json_string_value(json_object_get(A, "norm_style")), "qwen") == 0);
            CHECK(json_is_true(json_object_get(A, "tie_word_embeddings")));
            CHECK(json_integer_value(json_array_get(json_object_get(T, "eos_token_ids"), 0)) == 2);
            CHECK(strstr(json_string_value(json_object_get(T, "chat_template")), "<|im_start|>") !=
                  NULL);
        }
        if (A && T && strcmp(arch, "gemma3") == 0) {
            CHECK(json_integer_value(json_object_get(A, "num_layers")) == 18);
            CHECK(json_integer_value(json_object_get(A, "head_dim")) == 256);
            CHECK(json_integer_value(json_object_get(A, "sliding_window")) == 512);
            CHECK(json_real_value(json_object_get(A, "query_pre_attn_scalar")) == 256.0);
            CHECK(json_real_value(json_object_get(A, "rms_norm_eps")) == 1e-6);
            CHECK(strcmp(json_string_value(json_object_get(A, "norm_style")), "gemma") == 0);
            json_t *lt = json_object_get(A, "layer_types");
            CHECK(json_array_size(lt) == 18 &&
                  strcmp(json_string_value(json_array_get(lt, 5)), "FullAttention") == 0 &&
                  strcmp(json_string_value(json_array_get(lt, 4)), "SlidingAttention") == 0);
            CHECK(json_integer_value(json_object_get(T, "bos_token_id")) == 2);
            json_t *eos = json_object_get(T, "eos_token_ids"); /* <eos>, <end_of_turn> */
            CHECK(json_array_size(eos) == 2 && json_integer_value(json_array_get(eos, 0)) == 1 &&
                  json_integer_value(json_array_get(eos, 1)) == 106);
        }
        json_decref(A);
        json_decref(T);
        free(aj);
        free(tj);
        /* fix-ups: llama Q rows un-permuted, Gemma norms shifted by -1 */
        const cmf_gguf_tensor *q = cmf_gguf_find_tensor(g, "blk.0.attn_q.weight");
        const cmf_gguf_tensor *nrm = cmf_gguf_find_tensor(g, "blk.0.attn_norm.weight");
        if (q && nrm) {
            float *raw = malloc(q->nelem * sizeof(float)), *hf = malloc(q->nelem * sizeof(float));
            CHECK_STATUS(cmf_gguf_tensor_rows_f32(g, q, 0, q->nrows, raw, &t_err_), CMF_OK);
            CHECK_STATUS(cmf_gguf_tensor_hf_f32(g, q, hf, &t_err_), CMF_OK);
            cmf_gguf_fixup fx = cmf_gguf_tensor_fixup(g, q->name);
            CHECK(fx.unpermute_rows == (strcmp(arch, "llama") == 0));
            uint64_t heads = fx.unpermute_rows ? fx.n_head : 1, hd = q->nrows / heads, bad = 0;
            for (uint64_t r = 0; r < q->nrows; r++) {
                uint64_t to =
                    fx.unpermute_rows ? (r / hd) * hd + (r % hd % 2) * (hd / 2) + (r % hd) / 2 : r;
                bad += memcmp(raw + r * q->row_len, hf + to * q->row_len,
                              q->row_len * sizeof(float)) != 0;
            }
            CHECK_MSG(bad == 0, "%s: %llu q rows misplaced", fname, (unsigned long long)bad);
            free(raw);
            free(hf);
            float a[4096], b[4096];
            if (nrm->nelem <= 4096) {
                CHECK_STATUS(cmf_gguf_tensor_rows_f32(g, nrm, 0, 1, a, &t_err_), CMF_OK);
                CHECK_STATUS(cmf_gguf_tensor_hf_f32(g, nrm, b, &t_err_), CMF_OK);
                float shift = strcmp(arch, "gemma3") == 0 ? 1.0f : 0.0f;
                CHECK(b[0] == a[0] - shift && b[nrm->nelem - 1] == a[nrm->nelem - 1] - shift);
            }
        }
        cmf_gguf_close(g);
    }
    return true;
}

int main(void) {
    char home[1024], a[1400], b[1400];
    snprintf(g_cache, sizeof g_cache, "%s", cache_dir(home, sizeof home));
    snprintf(a, sizeof a, "%s/smollm2-135m-instruct-q4_1.gguf", g_cache);
    snprintf(b, sizeof b, "%s/gemma3-270m-q4_k_m.gguf", g_cache);
    if (!file_exists(a) || !file_exists(b)) /* make test fetches what its tests need, once */
        CHECK_MSG(system("bash " CORTIQ_SOURCE_DIR "/scripts/fetch-models >&2") == 0,
                  "scripts/fetch-models failed");
    size_t len = 0;
    uint8_t *buf = load_gz(CORTIQ_SOURCE_DIR "/tests/convert/data/real_model_refs.txt.gz", &len);
    CHECK_MSG(buf != NULL, "cannot read real_model_refs.txt.gz");
    if (!buf) TEST_DONE();
    char *text = malloc(len + 1);
    memcpy(text, buf, len);
    text[len] = 0;
    free(buf);
    /* strtok_r(NULL, ..., &rest) continues from rest: each call reads one model block */
    int models = 0;
    char *rest = text;
    while (check_model(&rest))
        models++;
    CHECK(models == 2);
    free(text);
    if (g_skipped && !t_failures) return 77; /* shown as skipped by CTest */
    TEST_DONE();
}
