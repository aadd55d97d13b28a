/* f16 and q8 KV caches against the exact f32 cache on the tiny checkpoints of every dense family
 * (tests/fixtures/tiny): logits over a 64-token sequence and a 32-token greedy continuation.
 *
 * Bounds, as max |diff| / max |logit of the f32 cache| over all 64 x vocab logits:
 *   f16 <= 2e-3: each cached value carries a relative rounding error <= 2^-11 (4.9e-4); scores
 *     and attention outputs are weighted sums of such values, so their relative error stays of
 *     that order, and the layers after only mix it; 4x the unit roundoff leaves room for the
 *     softmax's exponent amplifying score errors.
 *   q8 <= 3e-2: each cached value is off by at most half a step, max |x| / 254 of its head
 *     vector (3.9e-3 of the largest value); the same propagation argument, with ~8x the f16
 *     error per value.
 * Measured (every SIMD tier): f16 worst 5.9e-4 (qwen3), q8 worst 1.1e-2 (qwen3).
 * Greedy: the 32 tokens of the f16 and of the q8 cache equal the f32 cache's (measured on every
 * tier; no near-tie within these bounds on these fixtures).
 * Also: the load option picks the type cortiq_session_create uses (f16 by default), batch and
 * token-by-token prefill fill the f16/q8 caches alike, and the cache sizes follow the type. */
#include <math.h>

#include "cortiq/converter.h"
#include "cortiq/engine.h"
#include "logits_cmp.h"
#include "npy.h"
#include "test.h"

#define TINY CORTIQ_SOURCE_DIR "/tests/fixtures/tiny/"

static void greedy(cortiq_session *s, const int32_t *prompt, int32_t *out, uint32_t V) {
    cmf_err err;
    cortiq_session_reset(s);
    CHECK(cortiq_session_eval(s, prompt, 8, NULL, &err) == CMF_OK);
    for (int i = 0; i < 32; i++) {
        out[i] = cortiq_argmax(cortiq_session_logits(s), V);
        CHECK(cortiq_session_eval(s, &out[i], 1, NULL, &err) == CMF_OK);
    }
}

static double worst_f16, worst_q8;

static void run_family(const char *fam) {
    char dir[512], path[600], out[256];
    snprintf(dir, sizeof dir, TINY "%s", fam);
    snprintf(out, sizeof out, "kv_%s.cmf", fam);
    cmf_convert_opts o;
    cmf_convert_opts_default(&o);
    CHECK(cmf_convert_quant_from_name("f32", &o.quant));
    cmf_err err;
    CHECK_MSG(cmf_convert_hf(dir, out, NULL, &o, NULL, &err) == CMF_OK, "%s", err.msg);
    size_t nt = 0;
    char dt;
    snprintf(path, sizeof path, "%s/tokens.npy", dir);
    int32_t *tokens = npy_load(path, &nt, &dt);
    CHECK(tokens && nt == 64);
    cortiq_model *m = NULL, *mq = NULL;
    cortiq_load_opts lo = {.threads = 2}; /* default KV type */
    CHECK_MSG(cortiq_model_load(out, &lo, &m, &err) == CMF_OK, "%s", err.msg);
    cortiq_load_opts lq = {.threads = 2, .kv = CORTIQ_KV_Q8};
    CHECK_MSG(cortiq_model_load(out, &lq, &mq, &err) == CMF_OK, "%s", err.msg);
    if (!m || !mq || !tokens) return;
    uint32_t V = cortiq_model_vocab(m);
    cortiq_session *s[3] = {NULL, NULL, NULL}; /* f32, f16, q8 */
    CHECK(cortiq_session_create_kv(m, 128, CORTIQ_KV_F32, &s[0], &err) == CMF_OK);
    CHECK(cortiq_session_create(m, 128, &s[1], &err) == CMF_OK);
    CHECK(cortiq_session_create(mq, 128, &s[2], &err) == CMF_OK);
    CHECK(cortiq_session_kv_type(s[0]) == CORTIQ_KV_F32 &&
          cortiq_session_kv_type(s[1]) == CORTIQ_KV_F16 &&
          cortiq_session_kv_type(s[2]) == CORTIQ_KV_Q8);
    /* f16 is half of f32; q8 a quarter plus one f32 scale per head vector */
    uint64_t b32 = cortiq_session_kv_bytes(s[0]), b16 = cortiq_session_kv_bytes(s[1]);
    uint64_t b8 = cortiq_session_kv_bytes(s[2]);
    CHECK(b32 > 0 && b16 * 2 == b32 && b8 > b32 / 4 && b8 < b16);
    float *lg[3];
    for (int t = 0; t < 3; t++) {
        lg[t] = malloc(64 * (size_t)V * sizeof(float));
        CHECK(lg[t] && cortiq_session_eval(s[t], tokens, 64, lg[t], &err) == CMF_OK);
    }
    double d16 = max_rel_diff(lg[1], lg[0], 64 * (size_t)V),
           d8 = max_rel_diff(lg[2], lg[0], 64 * (size_t)V);
    CHECK_MSG(d16 <= 2e-3, "%s: f16 cache logits max relative difference %.3g > 2e-3", fam, d16);
    CHECK_MSG(d8 <= 3e-2, "%s: q8 cache logits max relative difference %.3g > 3e-2", fam, d8);
    CHECK(d16 > 0 && d8 > 0); /* the caches really are rounded */
    if (d16 > worst_f16) worst_f16 = d16;
    if (d8 > worst_q8) worst_q8 = d8;
    /* token by token fills the cache as the batch does. The batched and single-token products
     * differ by ~1e-7 relative (1e-5 on the final logits at f32, test_parity_tiny), and a value
     * that close to a rounding boundary lands on the neighbouring f16 / int8 step: a few such
     * values (2^-11 relative each at f16) give up to ~4e-5 here; bound 2e-4. */
    for (int t = 1; t < 3; t++) {
        cortiq_session_reset(s[t]);
        for (int i = 0; i < 64; i++)
            CHECK(cortiq_session_eval(s[t], &tokens[i], 1, NULL, &err) == CMF_OK);
        double d = max_rel_diff(cortiq_session_logits(s[t]), lg[t] + 63 * (size_t)V, V);
        CHECK_MSG(d < 2e-4, "%s kv %s: batch vs token by token %.3g", fam, t == 1 ? "f16" : "q8",
                  d);
    }
    int32_t g[3][32];
    for (int t = 0; t < 3; t++)
        greedy(s[t], tokens, g[t], V);
    int same16 = 0, same8 = 0;
    while (same16 < 32 && g[1][same16] == g[0][same16])
        same16++;
    while (same8 < 32 && g[2][same8] == g[0][same8])
        same8++;
    CHECK_MSG(same16 == 32, "%s: f16 cache greedy diverges from f32 at token %d", fam, same16);
    CHECK_MSG(same8 == 32, "%s: q8 cache greedy diverges from f32 at token %d", fam, same8);
    printf("%-12s f16 cache: logits rel diff %.3g, greedy %d/32 | q8 cache: %.3g, greedy %d/32 | "
           "KV bytes "
           "f32 %llu f16 %llu q8 %llu\n",
           fam, d16, same16, d8, same8, (unsigned long long)b32, (unsigned long long)b16,
           (unsigned long long)b8);
    for (int t = 0; t < 3; t++)
        free(lg[t]), cortiq_session_free(s[t]);
    cortiq_model_free(m);
    cortiq_model_free(mq);
    free(tokens);
    remove(out);
}

int main(void) {
    const char *fams[] = {"llama", "llama_yarn", "llama_rope3", "mistral",
                          "qwen2", "qwen3",      "gemma3_text"};
    for (size_t i = 0; i < sizeof fams / sizeof fams[0]; i++)
        run_family(fams[i]);
    printf("worst: f16 %.3g, q8 %.3g\n", worst_f16, worst_q8);
    /* an out-of-range type is refused, at load and at session creation */
    cmf_err err;
    cortiq_model *m = NULL;
    cortiq_load_opts bad = {.threads = 1, .kv = CORTIQ_KV_COUNT};
    const char *cmf = "kv_bad.cmf";
    cmf_convert_opts o;
    cmf_convert_opts_default(&o);
    CHECK(cmf_convert_hf(TINY "llama", cmf, NULL, &o, NULL, &err) == CMF_OK);
    CHECK(cortiq_model_load(cmf, &bad, &m, &err) == CMF_E_INVALID_ARG && !m);
    cortiq_load_opts ok = {.threads = 1};
    CHECK(cortiq_model_load(cmf, &ok, &m, &err) == CMF_OK);
    cortiq_session *s = NULL;
    if (m)
        CHECK(cortiq_session_create_kv(m, 16, (cortiq_kv_type)7, &s, &err) == CMF_E_INVALID_ARG &&
              !s);
    cortiq_model_free(m);
    remove(cmf);
    cortiq_kv_type t = CORTIQ_KV_F32;
    CHECK(cortiq_kv_type_from_name("q8", &t) && t == CORTIQ_KV_Q8);
    CHECK(!cortiq_kv_type_from_name("q4", &t) && t == CORTIQ_KV_Q8);
    CHECK(!strcmp(cortiq_kv_type_name(CORTIQ_KV_F16), "f16"));
    TEST_DONE();
}
