/* test_chunk_exact.c - cortiq_model_exact_chunk: from that chunk size on, a token's results do
 * not depend on how its prompt was cut. On tiny checkpoints of four families converted to q8,
 * q4t, vbit, f16 and bf16 (whose batches take bf16 activations from 8 tokens on AVX-512 BF16,
 * the f32 panels below), a prompt of N tokens evaluated at once and evaluated as a prefix of p
 * tokens then the rest (both at least the exact size) give the same bits: the last token's logits,
 * and those of one decode step after it (the KV cache the same). N = 130 also checks that the
 * engine does not leave a last chunk of 2 tokens (cq_eval_chunk shares the last two). A model
 * loaded with f32 activations (its integer weights then take kernels without such a size) reports
 * 0. The q8 and q4t models again with the batched-decode copies `cortiq serve --parallel` makes,
 * whose exact size is 2 (every cut from 2 tokens on). */
#include <string.h>

#include "cortiq/engine.h"
#include "test.h"
#include "tiny_fixture.h"

static uint32_t V;

/* Evaluates tokens[0 .. n) cut at p (0: at once), then `next`; logits of both into out[2V]. */
static int eval_cut(cortiq_session *s, const int32_t *tokens, size_t n, size_t p, int32_t next,
                    float *out) {
    cmf_err err;
    cortiq_session_reset(s);
    if ((p && cortiq_session_eval(s, tokens, p, NULL, &err)) ||
        cortiq_session_eval(s, tokens + p, n - p, NULL, &err))
        return -1;
    memcpy(out, cortiq_session_logits(s), V * sizeof *out);
    if (cortiq_session_eval(s, &next, 1, NULL, &err)) return -1;
    memcpy(out + V, cortiq_session_logits(s), V * sizeof *out);
    return 0;
}

/* Every cut of the first `lens` tokens against the tokens at once, on model m (label: how it
 * was loaded). */
static void check_cuts(cortiq_model *m, const int32_t *tokens, const char *fam, const char *quant,
                       const char *label) {
    enum { N = 200 };
    cmf_err err;
    V = cortiq_model_vocab(m);
    const uint32_t ex = cortiq_model_exact_chunk(m);
    printf("%-12s %-4s %-6s exact chunk %u\n", fam, quant, label, ex);
    cortiq_session *s = NULL;
    CHECK(cortiq_session_create(m, 256, &s, &err) == CMF_OK);
    float *ref = malloc(2 * V * sizeof *ref), *got = malloc(2 * V * sizeof *got);
    static const size_t lens[] = {N, 130};
    for (size_t li = 0; s && ex && li < 2; li++) {
        size_t n = lens[li];
        CHECK(eval_cut(s, tokens, n, 0, 77, ref) == 0);
        int bad = 0, tried = 0;
        for (size_t p = ex; p + ex <= n; p += li ? 1 : 3) {
            tried++;
            CHECK(eval_cut(s, tokens, n, p, 77, got) == 0);
            if (memcmp(ref, got, 2 * V * sizeof *ref) && bad++ < 3)
                fprintf(stderr, "  %s %s %s: %zu tokens cut at %zu differ\n", fam, quant, label, n,
                        p);
        }
        CHECK_MSG(bad == 0, "%s %s %s: %d of %d cuts of %zu tokens differ", fam, quant, label, bad,
                  tried, n);
    }
    free(ref), free(got);
    cortiq_session_free(s);
}

static void run(const char *fam, const char *quant) {
    char out[256];
    snprintf(out, sizeof out, "chunk_exact_%s_%s.cmf", fam, quant);
    size_t nt = 0;
    int32_t *fx = tiny_convert(fam, quant, out, &nt);
    if (!fx || nt < 2) return;
    enum { N = 200 };
    int32_t tokens[N];
    for (size_t i = 0; i < N; i++) /* the fixture's tokens, repeated with a shift */
        tokens[i] = fx[(i + i / nt) % nt];
    cortiq_model *m = NULL;
    cmf_err err;
    cortiq_load_opts lo = {.threads = 2, .batch_lanes = -1};
    CHECK_MSG(cortiq_model_load(out, &lo, &m, &err) == CMF_OK, "%s", err.msg);
    if (m) check_cuts(m, tokens, fam, quant, "file");
    cortiq_model_free(m);
    /* with the batched-decode copies (`cortiq serve --parallel`): short chunks take the copies'
     * kernels, longer ones the GEMM, with the same bits */
    lo.batch_lanes = 1;
    m = NULL;
    CHECK_MSG(cortiq_model_load(out, &lo, &m, &err) == CMF_OK, "%s", err.msg);
    if (m && cortiq_model_lanes_bytes(m)) {
        /* every batch then gets the GEMM's bits: only one token takes other kernels */
        CHECK_MSG(cortiq_model_exact_chunk(m) == 2, "%s %s with the copies: exact chunk %u", fam,
                  quant, cortiq_model_exact_chunk(m));
        check_cuts(m, tokens, fam, quant, "lanes");
    }
    cortiq_model_free(m);
    lo.batch_lanes = 0;
    /* integer weights without the integer GEMM: no exact size */
    if (strcmp(quant, "f16") && strcmp(quant, "bf16")) {
        lo.act = CORTIQ_ACT_F32;
        CHECK(cortiq_model_load(out, &lo, &m, &err) == CMF_OK);
        if (m)
            CHECK_MSG(cortiq_model_exact_chunk(m) == 0, "%s %s with f32 activations", fam, quant);
        cortiq_model_free(m);
    }
    free(fx);
    remove(out);
}

int main(void) {
    static const char *fams[] = {"llama", "qwen2", "gemma3_text", "mistral"};
    static const char *quants[] = {"q8", "q4t", "vbit", "f16", "bf16"};
    for (size_t i = 0; i < sizeof fams / sizeof *fams; i++)
        for (size_t q = 0; q < sizeof quants / sizeof *quants; q++)
            run(fams[i], quants[q]);
    TEST_DONE();
}
