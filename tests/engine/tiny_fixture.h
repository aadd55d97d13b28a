/* tiny_fixture.h - the tiny checkpoints of tests/fixtures/tiny (made by tools/ scripts with
 * transformers): convert one family to a CMF file and read its token sequence. Include after
 * test.h (it CHECKs). */
#ifndef CORTIQ_TEST_TINY_FIXTURE_H
#define CORTIQ_TEST_TINY_FIXTURE_H

#include "cortiq/converter.h"
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

#endif
