/* test_hub_units.c - the pure parts of the hub client: repo references, the default GGUF
 * choice, URL building and origins, the file selection of a listing, SHA-1 / git blob ids,
 * the environment's cache and endpoint rules. No network. */
#include <stdlib.h>
#include <string.h>

#include "cortiq/hub.h"
#include "hub/hub_digest.h"
#include "hub/hub_env.h"
#include "hub/hub_select.h"
#include "hub/hub_url.h"
#include "test.h"

static void test_ref_parse(void) {
    cortiq_hub_ref r;
    CHECK(cortiq_hub_ref_parse("Qwen/Qwen3-0.6B", &r) && !strcmp(r.repo, "Qwen/Qwen3-0.6B") &&
          !r.revision[0] && !r.file[0]);
    CHECK(cortiq_hub_ref_parse("bartowski/SmolLM2-GGUF:SmolLM2-Q8_0.gguf", &r) &&
          !strcmp(r.repo, "bartowski/SmolLM2-GGUF") && !strcmp(r.file, "SmolLM2-Q8_0.gguf"));
    CHECK(cortiq_hub_ref_parse("a/b@v1.0:sub/x.gguf", &r) && !strcmp(r.revision, "v1.0") &&
          !strcmp(r.file, "sub/x.gguf"));
    CHECK(cortiq_hub_ref_parse("a/b@refs/pr/1", &r) && !strcmp(r.revision, "refs/pr/1"));
    const char *bad[] = {"model.cmf",
                         "/abs/path",
                         "./a/b",
                         "a/b/c",
                         "a/",
                         "/b",
                         "a/b:",
                         "a/b@",
                         "a/..",
                         "../b",
                         "a/b:../x",
                         "a/b:/etc/passwd",
                         "a b/c",
                         "a/b:x y",
                         "-a/b",
                         "a/b.",
                         "dir/model.cmf/x",
                         "out/model.cmf",
                         "models/x.gguf",
                         "tiny/config.json"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        CHECK_MSG(!cortiq_hub_ref_parse(bad[i], &r), "'%s' parsed as a repo", bad[i]);
}

static void test_gguf_order(void) {
    const char *a[] = {"m-F16.gguf", "m-Q4_K_M.gguf", "m-Q8_0.gguf", "mmproj-m-Q8_0.gguf",
                       "README.md"};
    CHECK_EQ_U64(hub_select_gguf(a, 5), 2);
    const char *b[] = {"m-IQ4_XS.gguf", "m-BF16.gguf", "m-Q4_K_M.gguf", "m-Q4_0.gguf"};
    CHECK_EQ_U64(hub_select_gguf(b, 4), 2); /* IQ4_XS is not Q4_K_M; BF16 is not F16 */
    const char *c[] = {"sub/m-Q8_0.gguf", "m-Q8_0-00001-of-00002.gguf", "zz.gguf", "aa.gguf"};
    CHECK_EQ_U64(hub_select_gguf(c, 4), 3); /* no folder, no split part; then by name */
    const char *d[] = {"mmproj-f16.gguf", "config.json"};
    CHECK_EQ_U64(hub_select_gguf(d, 2), SIZE_MAX);
    const char *e[] = {"smollm2-135m-instruct-q4_1.gguf", "smollm2-135m-instruct-f16.gguf"};
    CHECK_EQ_U64(hub_select_gguf(e, 2), 0); /* lower case counts too */
}

static void test_urls(void) {
    char *u = hub_url_resolve("https://hf.co", "a/b", "0123", "sub dir/x+y.gguf");
    CHECK_MSG(u && !strcmp(u, "https://hf.co/a/b/resolve/0123/sub%20dir/x%2By.gguf"), "%s", u);
    free(u);
    u = hub_url_model_info("https://hf.co", "a/b", "refs/pr/1");
    CHECK_MSG(u && !strcmp(u, "https://hf.co/api/models/a/b/revision/refs%2Fpr%2F1"), "%s", u);
    free(u);
    u = hub_url_tree("http://h:8", "a/b", "c0", NULL);
    CHECK_MSG(u && !strcmp(u, "http://h:8/api/models/a/b/tree/c0"), "%s", u);
    free(u);
    CHECK(hub_url_same_origin("https://huggingface.co/x", "https://HuggingFace.co:443"));
    CHECK(hub_url_same_origin("http://127.0.0.1:80/a", "http://127.0.0.1"));
    CHECK(!hub_url_same_origin("https://huggingface.co/x", "https://cdn-lfs.huggingface.co/x"));
    CHECK(!hub_url_same_origin("http://127.0.0.1:8000/x", "http://127.0.0.1:8001/x"));
    CHECK(!hub_url_same_origin("http://127.0.0.1/x", "https://127.0.0.1/x"));
    CHECK(!hub_url_same_origin("https://huggingface.co@evil.com/x", "https://huggingface.co"));
    CHECK(!hub_url_same_origin("https://huggingface.co.evil.com/", "https://huggingface.co"));
    CHECK(!hub_url_same_origin("file:///etc/passwd", "file:///etc/passwd"));
}

static hub_file file(const char *path) {
    hub_file f = {.path = (char *)path, .size = 1};
    memset(f.oid, 'a', 40);
    return f;
}

static bool selected(const hub_listing *l, const hub_selection *s, const char *path) {
    for (size_t i = 0; i < s->n; i++)
        if (!strcmp(l->files[s->idx[i]].path, path)) return true;
    return false;
}

static void test_select(void) {
    hub_file fs[] = {file("config.json"),
                     file("tokenizer.json"),
                     file("README.md"),
                     file("model-00001-of-00002.safetensors"),
                     file("model-00002-of-00002.safetensors"),
                     file("model.safetensors.index.json"),
                     file("original/consolidated.pth"),
                     file("chat_template.jinja"),
                     file("m-Q8_0.gguf")};
    hub_listing l = {.commit = "c", .files = fs, .n = sizeof fs / sizeof fs[0]};
    hub_selection s;
    cmf_err err;
    CHECK_STATUS(hub_select(&l, "a/b", NULL, CORTIQ_HUB_WANT_ANY, &s, &err), CMF_OK);
    CHECK(s.sharded_index && !s.gguf && selected(&l, &s, "config.json") &&
          selected(&l, &s, "chat_template.jinja") && !selected(&l, &s, "README.md") &&
          !selected(&l, &s, "model-00001-of-00002.safetensors"));
    const char *index = "{\"weight_map\": {\"a\": \"model-00001-of-00002.safetensors\", "
                        "\"b\": \"model-00002-of-00002.safetensors\", "
                        "\"c\": \"model-00001-of-00002.safetensors\"}}";
    size_t before = s.n;
    CHECK_STATUS(hub_select_index_shards(&l, index, &s, &err), CMF_OK);
    CHECK_EQ_U64(s.n, before + 2);
    CHECK_STATUS(hub_select_index_shards(&l, "{\"weight_map\": {\"a\": \"nope\"}}", &s, &err),
                 CMF_E_NOT_FOUND);
    hub_selection_free(&s);
    CHECK_STATUS(hub_select(&l, "a/b", NULL, CORTIQ_HUB_WANT_GGUF, &s, &err), CMF_OK);
    CHECK(s.gguf && s.n == 1 && selected(&l, &s, "m-Q8_0.gguf"));
    hub_selection_free(&s);
    CHECK_STATUS(hub_select(&l, "a/b", "nope.gguf", CORTIQ_HUB_WANT_ANY, &s, &err),
                 CMF_E_NOT_FOUND);
    CHECK(strstr(err.msg, "no file 'nope.gguf'"));
    hub_listing only_gguf = {.commit = "c", .files = &fs[8], .n = 1};
    CHECK_STATUS(hub_select(&only_gguf, "a/b", NULL, CORTIQ_HUB_WANT_SAFETENSORS, &s, &err),
                 CMF_E_NOT_FOUND);
    CHECK(strstr(err.msg, "import-gguf"));
    hub_file single[] = {file("config.json"), file("model.safetensors"),
                         file("consolidated.safetensors")};
    hub_listing ls = {.commit = "c", .files = single, .n = 3};
    CHECK_STATUS(hub_select(&ls, "a/b", NULL, CORTIQ_HUB_WANT_ANY, &s, &err), CMF_OK);
    CHECK(selected(&ls, &s, "model.safetensors") && !selected(&ls, &s, "consolidated.safetensors"));
    hub_selection_free(&s);
}

static void hex_of(hub_digest *d, const hub_file *f, char hex[65]) {
    (void)hub_digest_matches(d, f, hex);
}

static void test_digests(void) {
    hub_sha1 s;
    uint8_t out[20];
    char hex[65];
    hub_sha1_init(&s);
    hub_sha1_update(&s, "abc", 3);
    hub_sha1_final(&s, out);
    sodium_bin2hex(hex, sizeof hex, out, 20);
    CHECK_MSG(!strcmp(hex, "a9993e364706816aba3e25717850c26c9cd0d89d"), "%s", hex);
    /* 1,000,000 'a' fed in odd pieces: FIPS 180 test vector, across block boundaries */
    hub_sha1_init(&s);
    char a[997];
    memset(a, 'a', sizeof a);
    size_t left = 1000000;
    while (left) {
        size_t n = left < sizeof a ? left : sizeof a;
        hub_sha1_update(&s, a, n);
        left -= n;
    }
    hub_sha1_final(&s, out);
    sodium_bin2hex(hex, sizeof hex, out, 20);
    CHECK_MSG(!strcmp(hex, "34aa973cd4c4daa4f61eeb2bdbad27316534016f"), "%s", hex);
    /* git hash-object of "hello\n" */
    hub_file f = {.path = "x", .size = 6};
    memcpy(f.oid, "ce013625030ba8dba906f756967f9e9ca394464a", 41);
    hub_digest d;
    hub_digest_init(&d, &f);
    hub_digest_update(&d, "hello\n", 6);
    CHECK(hub_digest_matches(&d, &f, hex));
    /* LFS: sha256 of "abc" */
    memcpy(f.sha256, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad", 65);
    f.size = 3;
    hub_digest_init(&d, &f);
    hub_digest_update(&d, "abc", 3);
    CHECK(hub_digest_matches(&d, &f, hex));
    hub_digest_init(&d, &f);
    hub_digest_update(&d, "abd", 3);
    hex_of(&d, &f, hex);
    CHECK(strcmp(hex, f.sha256) != 0);
}

static void test_env(void) {
    cortiq_hub_opts o;
    cortiq_hub_opts_default(&o);
    setenv("HF_HUB_CACHE", "/tmp/hubcache", 1);
    char *c = cortiq_hub_cache_dir(&o, NULL);
    CHECK(c && !strcmp(c, "/tmp/hubcache"));
    free(c);
    unsetenv("HF_HUB_CACHE");
    unsetenv("HUGGINGFACE_HUB_CACHE");
    setenv("HF_HOME", "/tmp/hfhome", 1);
    c = cortiq_hub_cache_dir(&o, NULL);
    CHECK(c && !strcmp(c, "/tmp/hfhome/hub"));
    free(c);
    unsetenv("HF_HOME");
    setenv("XDG_CACHE_HOME", "/tmp/xdg", 1);
    c = cortiq_hub_cache_dir(&o, NULL);
    CHECK(c && !strcmp(c, "/tmp/xdg/huggingface/hub"));
    free(c);
    o.cache_dir = "/opt/c";
    c = cortiq_hub_cache_dir(&o, NULL);
    CHECK(c && !strcmp(c, "/opt/c"));
    free(c);
    o.endpoint = "https://mirror.example/";
    o.token = "";
    hub_env env;
    CHECK_STATUS(hub_env_resolve(&o, &env, NULL), CMF_OK);
    CHECK(!strcmp(env.endpoint, "https://mirror.example") && !env.token);
    hub_env_free(&env);
    o.endpoint = "ftp://x";
    cmf_err err;
    CHECK_STATUS(hub_env_resolve(&o, &env, &err), CMF_E_INVALID_ARG);
}

int main(void) {
    test_ref_parse();
    test_gguf_order();
    test_urls();
    test_select();
    test_digests();
    test_env();
    TEST_DONE();
}
