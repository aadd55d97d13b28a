/* `cortiq convert` on a multimodal Qwen3.5 checkpoint (Qwen3_5ForConditionalGeneration's layout:
 * text_config, model.language_model.*, a vision tower model.visual.*, lm_head.weight), built by
 * tools/make_qwen35_multimodal.py from the text-only fixture qwen3_5_text with equal weights:
 * the converted file holds the text model under the canonical names (every tensor byte-equal to
 * the text checkpoint's conversion, no model.visual.* or model.language_model.* left), its
 * provenance names what was left out, and its logits over 64 tokens equal the text file's and
 * are within 1e-4 of transformers' (the text fixture's logits.npy). */
#include <string.h>

#include "common/test.h"
#include "cortiq/format.h"
#include "engine/logits_cmp.h"
#include "engine/tiny_fixture.h"

static int convert(const char *fam, const char *out) {
    cmf_convert_opts o;
    cmf_convert_opts_default(&o);
    o.quant = CMF_DT_F32;
    cmf_err err;
    int ok = cmf_convert_hf(fam, out, NULL, &o, NULL, &err) == CMF_OK;
    CHECK_MSG(ok, "%s: %s", fam, err.msg);
    return ok;
}

static void same_tensors(const char *mm, const char *text) {
    cmf_file *a = NULL, *b = NULL;
    cmf_err err;
    CHECK(cmf_open(mm, 0, &a, &err) == CMF_OK && cmf_open(text, 0, &b, &err) == CMF_OK);
    if (!a || !b) goto done;
    CHECK_MSG(cmf_file_tensor_count(a) == cmf_file_tensor_count(b), "%zu tensors, text file %zu",
              cmf_file_tensor_count(a), cmf_file_tensor_count(b));
    for (size_t i = 0; i < cmf_file_tensor_count(a); i++) {
        const cmf_tensor *t = cmf_file_tensor_at(a, i);
        CHECK_MSG(strncmp(t->name, "model.visual.", 13) && strncmp(t->name, "model.language_", 15),
                  "tensor '%s' kept", t->name);
        const cmf_tensor *u = cmf_file_find(b, t->name);
        CHECK_MSG(u && u->dtype == t->dtype && u->nbytes == t->nbytes &&
                      !memcmp(u->data, t->data, t->nbytes),
                  "tensor '%s' differs from the text checkpoint's", t->name);
    }
    const char *prov = cmf_file_header(a)->provenance_json;
    CHECK_MSG(prov && strstr(prov, "\"left_out\"") && strstr(prov, "9 tensors of model.visual.*"),
              "provenance %s", prov ? prov : "(none)");
done:
    cmf_close(a), cmf_close(b);
}

int main(void) {
    const char *mm = "convert_multimodal_mm.cmf", *text = "convert_multimodal_text.cmf";
    CHECK(convert(TINY "qwen3_5_multimodal", mm) && convert(TINY "qwen3_5_text", text));
    same_tensors(mm, text);
    size_t nt = 0, nl = 0;
    char dt;
    int32_t *tokens = npy_load(TINY "qwen3_5_text/tokens.npy", &nt, &dt);
    float *ref = npy_load(TINY "qwen3_5_text/logits.npy", &nl, &dt);
    cortiq_load_opts lo = {.threads = 2, .kv = CORTIQ_KV_F32, .act = CORTIQ_ACT_F32};
    uint32_t V = 0;
    float *a = tokens ? tiny_logits(mm, &lo, 256, tokens, nt, 0, &V) : NULL;
    float *b = tokens ? tiny_logits(text, &lo, 256, tokens, nt, 0, &V) : NULL;
    CHECK(a && b && ref && nl == nt * (size_t)V);
    if (a && b && ref && nl == nt * (size_t)V) {
        double same = max_rel_diff(a, b, nl), tf = max_rel_diff(a, ref, nl);
        printf("multimodal vs text-only logits %.3g, vs transformers %.3g\n", same, tf);
        CHECK_MSG(same <= 1e-6, "multimodal vs text-only checkpoint: logits differ by %.3g", same);
        CHECK_MSG(tf <= 1e-4, "multimodal checkpoint vs transformers: %.3g > 1e-4", tf);
    }
    free(tokens), free(ref), free(a), free(b);
    remove(mm), remove(text);
    TEST_DONE();
}
