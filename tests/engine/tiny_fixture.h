/* tiny_fixture.h - the tiny checkpoints of tests/fixtures/tiny (made by tools/ scripts with
 * transformers): convert one family to a CMF file, read its token sequence, and run tokens
 * through it. Include after test.h (it CHECKs). */
#ifndef CORTIQ_TEST_TINY_FIXTURE_H
#define CORTIQ_TEST_TINY_FIXTURE_H

#include "cortiq/converter.h"
#include "cortiq/engine.h"
#include "npy.h"

#define TINY CORTIQ_SOURCE_DIR "/tests/fixtures/tiny/"

/* Converts family `fam` with `quant` (a --quant name) to `out` and returns its tokens.npy
 * (malloc'd, *n of them), or NULL when either step fails. */
static inline int32_t *tiny_convert(const char *fam, const char *quant, const char *out,
                                    size_t *n) {
    char dir[512], path[600];
    snprintf(dir, sizeof dir, TINY "%s", fam);
    cmf_convert_opts o;
    cmf_convert_opts_default(&o);
    CHECK(cmf_convert_quant_from_name(quant, &o.quant));
    cmf_err err;
    int ok = cmf_convert_hf(dir, out, NULL, &o, NULL, &err) == CMF_OK;
    CHECK_MSG(ok, "%s %s: %s", fam, quant, err.msg);
    snprintf(path, sizeof path, "%s/tokens.npy", dir);
    char dt;
    int32_t *tokens = ok ? npy_load(path, n, &dt) : NULL;
    CHECK_MSG(tokens && dt == 'i', "%s: %s", fam, path);
    return tokens;
}

/* The logits of n tokens, [n][*V] (malloc'd; NULL on failure), of the model at `path` loaded
 * with *lo, in a session of ctx positions: one batch, or one token at a time. */
static inline float *tiny_logits(const char *path, const cortiq_load_opts *lo, uint32_t ctx,
                                 const int32_t *tokens, size_t n, int one_by_one, uint32_t *V) {
    cortiq_model *m = NULL;
    cmf_err err;
    CHECK_MSG(cortiq_model_load(path, lo, &m, &err) == CMF_OK, "%s", err.msg);
    if (!m) return NULL;
    *V = cortiq_model_vocab(m);
    cortiq_session *s = NULL;
    CHECK(cortiq_session_create(m, ctx, &s, &err) == CMF_OK);
    float *logits = s ? malloc(n * (size_t)*V * sizeof(float)) : NULL;
    if (logits && one_by_one)
        for (size_t i = 0; i < n; i++) {
            CHECK(cortiq_session_eval(s, &tokens[i], 1, NULL, &err) == CMF_OK);
            memcpy(logits + i * *V, cortiq_session_logits(s), *V * sizeof(float));
        }
    else if (logits)
        CHECK(cortiq_session_eval(s, tokens, n, logits, &err) == CMF_OK);
    cortiq_session_free(s);
    cortiq_model_free(m);
    return logits;
}

#endif
