/* `cmf_export_hf` round trip on every tiny family: convert (f32) -> export-hf -> convert (f32)
 * gives the same tensors, bit for bit, and the same header (arch, tokenizer_config) but for
 * provenance; f16 / bf16 exports hold the values rounded once; errors name the cause. */
#include <jansson.h>

#include "common/test.h"
#include "cortiq/converter.h"
#include "cortiq/format.h"
#include "cortiq/quant.h"

#define TINY CORTIQ_SOURCE_DIR "/tests/fixtures/tiny/"

static cmf_status convert(const char *dir, const char *out, cmf_err *err) {
    cmf_convert_opts o;
    cmf_convert_opts_default(&o);
    o.quant = CMF_DT_F32;
    return cmf_convert_hf(dir, out, NULL, &o, NULL, err);
}

/* The header without provenance (which names the source directory). */
static json_t *header_of(const cmf_file *f) {
    json_t *h = json_loads(cmf_file_header(f)->json, 0, NULL);
    json_object_del(h, "provenance");
    return h;
}

static void round_trip(const char *fam) {
    char dir[512], a[128], b[128], out[128];
    snprintf(dir, sizeof dir, TINY "%s", fam);
    snprintf(a, sizeof a, "ex_%s_a.cmf", fam);
    snprintf(b, sizeof b, "ex_%s_b.cmf", fam);
    snprintf(out, sizeof out, "ex_%s_hf", fam);
    cmf_err err;
    CHECK_MSG(convert(dir, a, &err) == CMF_OK, "%s: %s", fam, err.msg);
    CHECK_MSG(cmf_export_hf(a, out, CMF_DT_F32, &err) == CMF_OK, "%s: %s", fam, err.msg);
    CHECK_MSG(convert(out, b, &err) == CMF_OK, "%s: reconvert: %s", fam, err.msg);
    cmf_file *fa = NULL, *fb = NULL;
    if (cmf_open(a, 0, &fa, &err) || cmf_open(b, 0, &fb, &err)) {
        CHECK_MSG(0, "%s: %s", fam, err.msg);
        cmf_close(fa);
        return;
    }
    size_t n = cmf_file_tensor_count(fa), same = 0;
    CHECK(n == cmf_file_tensor_count(fb));
    for (size_t i = 0; i < n; i++) {
        const cmf_tensor *ta = cmf_file_tensor_at(fa, i), *tb = cmf_file_find(fb, ta->name);
        bool eq = tb && ta->dtype == tb->dtype && ta->nbytes == tb->nbytes &&
                  !memcmp(ta->data, tb->data, ta->nbytes);
        CHECK_MSG(eq, "%s: tensor %s differs after the round trip", fam, ta->name);
        same += eq;
    }
    json_t *ha = header_of(fa), *hb = header_of(fb);
    bool arch_eq = json_equal(json_object_get(ha, "arch"), json_object_get(hb, "arch"));
    bool tc_eq = json_equal(json_object_get(ha, "tokenizer_config"),
                            json_object_get(hb, "tokenizer_config"));
    if (!arch_eq || !tc_eq) {
        char *x = json_dumps(ha, JSON_COMPACT), *y = json_dumps(hb, JSON_COMPACT);
        fprintf(stderr, "%s before: %s\n%s after:  %s\n", fam, x, fam, y);
        free(x), free(y);
    }
    CHECK_MSG(arch_eq, "%s: arch differs after the round trip", fam);
    CHECK_MSG(tc_eq, "%s: tokenizer_config differs after the round trip", fam);
    size_t va = 0, vb = 0;
    const uint8_t *pa = cmf_file_vocab(fa, &va), *pb = cmf_file_vocab(fb, &vb);
    CHECK(pa && pb && va == vb && !memcmp(pa, pb, va));
    printf("%-12s %zu/%zu tensors bit-equal, arch %s, tokenizer_config %s\n", fam, same, n,
           arch_eq ? "equal" : "DIFFERS", tc_eq ? "equal" : "DIFFERS");
    json_decref(ha), json_decref(hb);
    cmf_close(fa), cmf_close(fb);
}

/* f16 export: every value is the f32 one rounded to f16 (what `convert --quant f16` stores). */
static void half_export(void) {
    cmf_err err;
    CHECK(convert(TINY "qwen3", "ex_h_a.cmf", &err) == CMF_OK);
    CHECK_MSG(cmf_export_hf("ex_h_a.cmf", "ex_h_hf", CMF_DT_F16, &err) == CMF_OK, "%s", err.msg);
    cmf_convert_opts o;
    cmf_convert_opts_default(&o);
    o.quant = CMF_DT_F16;
    CHECK(cmf_convert_hf(TINY "qwen3", "ex_h_direct.cmf", NULL, &o, NULL, &err) == CMF_OK);
    CHECK(cmf_convert_hf("ex_h_hf", "ex_h_again.cmf", NULL, &o, NULL, &err) == CMF_OK);
    cmf_file *x = NULL, *y = NULL;
    CHECK(cmf_open("ex_h_direct.cmf", 0, &x, &err) == CMF_OK);
    CHECK(cmf_open("ex_h_again.cmf", 0, &y, &err) == CMF_OK);
    for (size_t i = 0; x && y && i < cmf_file_tensor_count(x); i++) {
        const cmf_tensor *t = cmf_file_tensor_at(x, i), *u = cmf_file_find(y, t->name);
        CHECK_MSG(u && u->hash == t->hash, "f16 export: %s differs", t->name);
    }
    cmf_close(x), cmf_close(y);
}

int main(void) {
    static const char *const fams[] = {"llama",     "llama_yarn", "llama_rope3", "mistral",
                                       "qwen2",     "qwen3",      "gemma3_text", "qwen2_moe",
                                       "qwen3_moe", "qwen3_next"};
    for (size_t i = 0; i < sizeof fams / sizeof fams[0]; i++)
        round_trip(fams[i]);
    half_export();
    CHECK_STATUS(cmf_export_hf("ex_llama_a.cmf", "ex_bad", CMF_DT_Q8_ROW, &t_err_),
                 CMF_E_INVALID_ARG);
    CHECK_STATUS(cmf_export_hf("no_such.cmf", "ex_bad", CMF_DT_F32, &t_err_), CMF_E_IO);
    CHECK_STATUS(cmf_export_hf("ex_llama_a.cmf", "/proc/no_such/dir", CMF_DT_F32, &t_err_),
                 CMF_E_IO);
    TEST_DONE();
}
