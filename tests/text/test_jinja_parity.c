/* test_jinja_parity.c - every case of tests/fixtures/templates/cases.json.gz (rendered by
 * jinja2 configured like transformers, see tools/make_template_cases.py) must render
 * byte-identically, and every case jinja2 refused must fail here too. Cases name a fixture
 * template file, or carry their own small template ("source", from snippets.txt). */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/test.h"
#include "cortiq/chat_template.h"

#define FIX CORTIQ_SOURCE_DIR "/tests/fixtures/templates/"

static char *read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    for (;;) {
        if (n == cap) buf = realloc(buf, cap *= 2);
        size_t r = fread(buf + n, 1, cap - n, f);
        if (!r) break;
        n += r;
    }
    fclose(f);
    buf = realloc(buf, n + 1);
    buf[n] = 0;
    *len = n;
    return buf;
}

static char *read_gz(const char *path, size_t *len) {
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "gzip -dc '%s'", path);
    FILE *p = popen(cmd, "r");
    if (!p) return NULL;
    size_t cap = 1 << 20, n = 0;
    char *buf = malloc(cap);
    for (;;) {
        if (n == cap) buf = realloc(buf, cap *= 2);
        size_t r = fread(buf + n, 1, cap - n, p);
        if (!r) break;
        n += r;
    }
    pclose(p);
    buf = realloc(buf, n + 1);
    buf[n] = 0;
    *len = n;
    return buf;
}

/* template source of a fixture: a .jinja file or tokenizer_config_*.json's chat_template */
static char *template_source(const char *name, size_t *len) {
    char path[1024];
    snprintf(path, sizeof path, FIX "%s", name);
    char *raw = read_file(path, len);
    if (!raw || !strstr(name, ".json")) return raw;
    json_t *cfg = json_loads(raw, 0, NULL);
    free(raw);
    if (!cfg) return NULL;
    const char *t = json_string_value(json_object_get(cfg, "chat_template"));
    char *out = t ? strdup(t) : NULL;
    *len = t ? strlen(t) : 0;
    json_decref(cfg);
    return out;
}

static void show_diff(const char *want, const char *got, size_t got_len) {
    size_t i = 0;
    while (want[i] && i < got_len && want[i] == got[i])
        i++;
    size_t from = i > 60 ? i - 60 : 0;
    fprintf(stderr, "  first difference at byte %zu\n  want: ...%.120s\n  got:  ...%.120s\n", i,
            want + from, got + from);
}

int main(void) {
    size_t len;
    char *gz = read_gz(FIX "cases.json.gz", &len);
    CHECK_MSG(gz && len > 0, "cannot read cases.json.gz");
    if (!gz) TEST_DONE();
    json_error_t je;
    json_t *doc = json_loads(gz, 0, &je);
    free(gz);
    CHECK_MSG(doc != NULL, "cases JSON: %s", je.text);
    if (!doc) TEST_DONE();
    int64_t now = (int64_t)json_integer_value(json_object_get(doc, "fixed_now"));
    json_t *cases = json_object_get(doc, "cases");
    size_t ncase = json_array_size(cases), ok = 0, err_ok = 0;
    CHECK(ncase >= 500);
    const char *cur_name = NULL;
    cmf_chat_template *tpl = NULL;
    bool compile_failed = false;
    cmf_err compile_err;
    cmf_err_clear(&compile_err);
    for (size_t i = 0; i < ncase; i++) {
        json_t *c = json_array_get(cases, i);
        const char *name = json_string_value(json_object_get(c, "template"));
        const char *inline_src = json_string_value(json_object_get(c, "source"));
        if (!cur_name || strcmp(cur_name, name)) {
            cmf_chat_template_free(tpl);
            tpl = NULL;
            size_t sl = inline_src ? strlen(inline_src) : 0;
            char *src = inline_src ? strdup(inline_src) : template_source(name, &sl);
            CHECK_MSG(src != NULL, "template %s unreadable", name);
            cmf_status st = src ? cmf_chat_template_compile(src, sl, &tpl, &compile_err) : CMF_E_IO;
            if (!src) snprintf(compile_err.msg, sizeof compile_err.msg, "unreadable");
            compile_failed = st != CMF_OK;
            free(src);
            cur_name = name;
            if (tpl) cmf_chat_template_set_now(tpl, now);
        }
        const char *want = json_string_value(json_object_get(c, "expected"));
        const char *want_err = json_string_value(json_object_get(c, "error"));
        if (compile_failed) { /* only right when jinja2 refused the template too */
            CHECK_MSG(want_err != NULL, "case %zu: compile %s: %s", i, name, compile_err.msg);
            if (want_err) err_ok++;
            continue;
        }
        char *out = NULL;
        size_t out_len = 0;
        cmf_err err;
        cmf_status st = cmf_chat_template_render(
            tpl, json_string_value(json_object_get(c, "messages")),
            json_string_value(json_object_get(c, "tools")),
            json_string_value(json_object_get(c, "documents")),
            json_is_true(json_object_get(c, "add_generation_prompt")),
            json_string_value(json_object_get(c, "kwargs")), &out, &out_len, &err);
        const char *conv = json_string_value(json_object_get(c, "conversation"));
        if (want_err) {
            CHECK_MSG(st != CMF_OK, "case %zu %s/%s: jinja2 failed (%s) but render succeeded", i,
                      name, conv, want_err);
            if (st != CMF_OK) err_ok++;
        } else {
            bool same = st == CMF_OK && out_len == strlen(want) && !memcmp(out, want, out_len);
            CHECK_MSG(same, "case %zu %s/%s agp=%d kwargs=%s: %s", i, name, conv,
                      json_is_true(json_object_get(c, "add_generation_prompt")),
                      json_string_value(json_object_get(c, "kwargs")),
                      st == CMF_OK ? "output differs" : err.msg);
            if (!same && st == CMF_OK) show_diff(want, out, out_len);
            if (same) ok++;
        }
        free(out);
    }
    cmf_chat_template_free(tpl);
    printf("parity: %zu/%zu renders identical, %zu/%zu expected errors reproduced\n", ok + err_ok,
           ncase, err_ok, err_ok);
    json_decref(doc);
    TEST_DONE();
}
