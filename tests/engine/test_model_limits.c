/* The runtime refuses, before allocating anything for them, untrusted header values (a 10^9
 * hidden size, a vocab larger than the embedding) and files it cannot run correctly (a
 * standalone skill, a missing tensor, a missing norm_style), each with a message naming it. */
#include <jansson.h>

#include "cortiq/converter.h"
#include "cortiq/engine.h"
#include "cortiq/writer.h"
#include "test.h"

/* Rewrite src with its header edited by `edit` and optionally one tensor left out. */
static void rewrite(const char *src, const char *dst, void (*edit)(json_t *), const char *drop) {
    cmf_file *f;
    cmf_err err;
    CHECK(cmf_open(src, 0, &f, &err) == CMF_OK);
    json_t *h = json_loads(cmf_file_header(f)->json, 0, NULL);
    edit(h);
    char *hj = json_dumps(h, JSON_COMPACT);
    cmf_writer *w;
    CHECK(cmf_writer_create(dst, NULL, &w, &err) == CMF_OK);
    CHECK(cmf_writer_set_header(w, hj, strlen(hj), &err) == CMF_OK);
    for (size_t i = 0; i < cmf_file_tensor_count(f); i++) {
        const cmf_tensor *t = cmf_file_tensor_at(f, i);
        if (drop && !strcmp(t->name, drop)) continue;
        CHECK(cmf_writer_add_tensor_ref(w, t->name, (cmf_dtype)t->dtype, t->ndim, t->shape, t->data,
                                        t->nbytes, &err) == CMF_OK);
    }
    size_t vl;
    const uint8_t *v = cmf_file_vocab(f, &vl);
    if (v) CHECK_STATUS(cmf_writer_set_vocab(w, v, vl, &t_err_), CMF_OK);
    CHECK_MSG(cmf_writer_finish(w, &err) == CMF_OK, "%s", err.msg);
    cmf_writer_free(w);
    free(hj);
    json_decref(h);
    cmf_close(f);
}

static json_t *arch(json_t *h) {
    return json_object_get(h, "arch");
}
static void huge_hidden(json_t *h) {
    json_object_set_new(arch(h), "hidden_size", json_integer(1000000000));
}
static void huge_layers(json_t *h) {
    json_object_set_new(arch(h), "num_layers", json_integer(1 << 30));
    json_object_del(arch(h),
                    "layer_types"); /* else the format layer already refuses the mismatch */
}
static void big_vocab(json_t *h) {
    json_object_set_new(arch(h), "vocab_size", json_integer(321));
}
static void no_norm_style(json_t *h) {
    json_object_del(arch(h), "norm_style");
}
static void nothing(json_t *h) {
    (void)h;
}
static void skill_file(json_t *h) {
    json_object_set_new(h, "skills",
                        json_pack("[{s:s,s:s}]", "id", "sql", "base_dir_hash", "9f22593eb458bc6f"));
}
static void odd_heads(json_t *h) {
    json_object_set_new(arch(h), "num_kv_heads", json_integer(3));
}

static void expect(const char *path, cmf_status want, const char *substr) {
    cortiq_model *m = NULL;
    cmf_err err;
    cmf_err_clear(&err);
    cmf_status st = cortiq_model_load(path, NULL, &m, &err);
    CHECK_MSG(st == want, "%s: got %s (%s), want %s", path, cmf_status_name(st), err.msg,
              cmf_status_name(want));
    CHECK_MSG(strstr(err.msg, substr) != NULL, "%s: '%s' lacks '%s'", path, err.msg, substr);
    cortiq_model_free(m);
}

int main(void) {
    cmf_convert_opts o;
    cmf_convert_opts_default(&o);
    o.quant = CMF_DT_F32;
    cmf_err err;
    CHECK(cmf_convert_hf(CORTIQ_SOURCE_DIR "/tests/fixtures/tiny/llama", "lim_base.cmf", NULL, &o,
                         NULL, &err) == CMF_OK);
    rewrite("lim_base.cmf", "lim_hidden.cmf", huge_hidden, NULL);
    expect("lim_hidden.cmf", CMF_E_LIMIT, "hidden_size=1000000000");
    rewrite("lim_base.cmf", "lim_layers.cmf", huge_layers, NULL);
    expect("lim_layers.cmf", CMF_E_LIMIT, "num_layers=1073741824");
    rewrite("lim_base.cmf", "lim_vocab.cmf", big_vocab, NULL);
    expect("lim_vocab.cmf", CMF_E_PARSE, "larger than the embedding");
    rewrite("lim_base.cmf", "lim_norm.cmf", no_norm_style, NULL);
    expect("lim_norm.cmf", CMF_E_PARSE, "norm_style");
    rewrite("lim_base.cmf", "lim_missing.cmf", nothing, "model.layers.1.mlp.down_proj.weight");
    expect("lim_missing.cmf", CMF_E_NOT_FOUND, "'model.layers.1.mlp.down_proj.weight'");
    rewrite("lim_base.cmf", "lim_skill.cmf", skill_file, NULL);
    expect("lim_skill.cmf", CMF_E_UNSUPPORTED, "not a runnable model");
    rewrite("lim_base.cmf", "lim_heads.cmf", odd_heads, NULL);
    expect("lim_heads.cmf", CMF_E_PARSE, "not a multiple of 3 kv heads");
    /* the CLI says the same on stderr */
    char cmd[512];
    snprintf(cmd, sizeof cmd,
             "%s run lim_skill.cmf --prompt hi 2>&1 | grep -q 'not a runnable model'",
             getenv("CORTIQ_BIN") ? getenv("CORTIQ_BIN") : "cortiq");
    CHECK(system(cmd) == 0);
    TEST_DONE();
}
