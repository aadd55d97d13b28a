/* test_cve_classes: the bug classes of past GGUF/ggml and safetensors parser CVEs, each as a test
 * across the formats cortiq reads (the cases other tests already cover are listed in
 * docs/SECURITY.md, "CVE classes"; this file adds the rest):
 *  - counts that fit in 64 bits but not in the bytes that follow fail with a bounds/limit error,
 *    never CMF_E_NOMEM (which would mean the allocation came before the check);
 *  - a name length or offset that wraps when a small value is added;
 *  - a tensor span past the end of a FILE opened by path (mapped: a read would be SIGBUS) is
 *    refused at open;
 *  - every truncation of a valid image fails cleanly with the out pointer left NULL (the
 *    sanitizer build checks that no early exit frees or reads what it should not);
 *  - templates cannot reach the host and hostile ones stop with CMF_E_LIMIT;
 *  - the tokenizer survives a 1 MiB token and every invalid UTF-8 byte. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/bytes.h"
#include "convert/gguf_builder.h"
#include "cortiq/chat_template.h"
#include "cortiq/gguf.h"
#include "cortiq/hash.h"
#include "cortiq/safetensors.h"
#include "cortiq/tokenizer.h"
#include "format/sample.h"
#include "test.h"

static const char *tmp_path(const char *name) {
    static char p[4][512];
    static int k;
    k = (k + 1) % 4;
    snprintf(p[k], sizeof p[k], "%s/cve_%s", CORTIQ_BINARY_DIR, name);
    return p[k];
}

/* ---------------- CMF ---------------- */
static uint8_t *g_cmf;
static size_t g_cmf_len;
static cmf_envelope g_env;

static void cmf_rehash(uint8_t *b) {
    st_u64(b + 0x70, cmf_hash64(b + g_env.header_off, g_env.header_len));
    st_u64(b + 0x78, cmf_hash64(b + g_env.dir_off, g_env.dir_len));
}

static cmf_status cmf_try(const uint8_t *b, size_t len, cmf_err *err) {
    cmf_file *f = (cmf_file *)&f; /* garbage in: the reader must set it */
    cmf_status st = cmf_open_memory(b, len, "cve.cmf", 0, &f, err);
    CHECK(st == CMF_OK ? f != NULL : f == NULL);
    if (st == CMF_OK) cmf_close(f);
    return st;
}

static void test_cmf(void) {
    cmf_err err;
    CHECK_MSG(sample_write(tmp_path("sample.cmf"), NULL, &err) == CMF_OK, "%s", err.msg);
    g_cmf = slurp(tmp_path("sample.cmf"), &g_cmf_len);
    CHECK(g_cmf && cmf_envelope_parse(g_cmf, &g_env, "s", NULL) == CMF_OK);
    if (!g_cmf) return;
    uint8_t *b = malloc(g_cmf_len);
    uint8_t *d = b + g_env.dir_off;
    uint64_t counts[] = {UINT64_MAX, UINT64_MAX / CMF_DIR_RECORD_SIZE + 1, (uint64_t)1 << 40,
                         1u << 21};
    for (size_t k = 0; k < sizeof counts / sizeof counts[0]; k++) {
        memcpy(b, g_cmf, g_cmf_len);
        st_u64(d, counts[k]); /* directory count */
        cmf_rehash(b);
        cmf_status st = cmf_try(b, g_cmf_len, &err);
        CHECK_MSG(st == CMF_E_BOUNDS || st == CMF_E_LIMIT, "count %llu: %s",
                  (unsigned long long)counts[k], err.msg);
    }
    /* name_off + name_len wrapping 32 bits; pool_off near 2^64 */
    memcpy(b, g_cmf, g_cmf_len);
    st_u32(d + 16, UINT32_MAX);
    cmf_rehash(b);
    CHECK_MSG(cmf_try(b, g_cmf_len, &err) == CMF_E_BOUNDS, "%s", err.msg);
    memcpy(b, g_cmf, g_cmf_len);
    st_u64(d + 8, UINT64_MAX - 7);
    cmf_rehash(b);
    CHECK_MSG(cmf_try(b, g_cmf_len, &err) == CMF_E_BOUNDS, "%s", err.msg);
    /* shape product past 2^64: three dims of 2^31 */
    memcpy(b, g_cmf, g_cmf_len);
    uint8_t *r = d + 16;
    r[7] = 3;
    for (int k = 0; k < 3; k++)
        st_u32(r + 8 + 4 * k, 1u << 31);
    cmf_rehash(b);
    cmf_status st = cmf_try(b, g_cmf_len, &err);
    CHECK_MSG(st == CMF_E_PARSE || st == CMF_E_BOUNDS || st == CMF_E_LIMIT, "%s", err.msg);
    /* every truncation, from memory and from a file (mapped) */
    size_t opened = 0;
    for (size_t n = 0; n < g_cmf_len; n++)
        if (cmf_try(g_cmf, n, &err) == CMF_OK) opened++;
    CHECK_MSG(opened == 0, "%zu truncations opened", opened);
    /* a span past EOF in a file opened by path: the tensor data cut short */
    CHECK(spit(tmp_path("cut.cmf"), g_cmf, g_env.data_off + g_env.data_len / 2) == 0);
    cmf_file *f = NULL;
    st = cmf_open(tmp_path("cut.cmf"), 0, &f, &err);
    CHECK_MSG(st == CMF_E_BOUNDS && f == NULL, "%s", err.msg);
    cmf_close(f);
    free(b);
    free(g_cmf);
}

/* ---------------- GGUF ---------------- */
static cmf_status gguf_try(const gw *w, cmf_err *err) {
    cmf_gguf *g = (cmf_gguf *)&g;
    cmf_status st = cmf_gguf_open_memory(w->b, w->n, "cve.gguf", &g, err);
    CHECK(st == CMF_OK ? g != NULL : g == NULL);
    if (st == CMF_OK) cmf_gguf_close(g);
    return st;
}

static void gguf_head(gw *w, uint64_t nt, uint64_t nkv) {
    w->n = 0;
    w_bytes(w, "GGUF", 4);
    w_u32(w, 3);
    w_u64(w, nt);
    w_u64(w, nkv);
}

static void test_gguf(void) {
    cmf_err err;
    gw w = {0};
    /* counts under the caps that cannot fit in the bytes present: no allocation first */
    uint64_t nts[] = {UINT64_MAX, CMF_GGUF_MAX_TENSORS, CMF_GGUF_MAX_TENSORS - 1};
    for (size_t k = 0; k < 3; k++) {
        gguf_head(&w, nts[k], 0);
        cmf_status st = gguf_try(&w, &err);
        CHECK_MSG(st != CMF_OK && st != CMF_E_NOMEM, "n_tensors %llu: %s",
                  (unsigned long long)nts[k], err.msg);
    }
    gguf_head(&w, 0, CMF_GGUF_MAX_KV - 1);
    cmf_status st = gguf_try(&w, &err);
    CHECK_MSG(st != CMF_OK && st != CMF_E_NOMEM, "n_kv: %s", err.msg);
    /* a tensor name length that wraps when 1 (or the cursor) is added */
    uint64_t lens[] = {UINT64_MAX, UINT64_MAX - 3, (uint64_t)1 << 63};
    for (size_t k = 0; k < 3; k++) {
        gguf_head(&w, 1, 0);
        w_u64(&w, lens[k]);
        w_bytes(&w, "abcdefgh", 8);
        st = gguf_try(&w, &err);
        CHECK_MSG(st != CMF_OK && st != CMF_E_NOMEM, "name length %llu: %s",
                  (unsigned long long)lens[k], err.msg);
    }
    /* an array count whose byte size wraps: 2^61 u64s, and 2^62 strings */
    gguf_head(&w, 0, 1);
    w_str(&w, "a");
    w_u32(&w, CMF_GGUF_ARRAY);
    w_u32(&w, CMF_GGUF_U64);
    w_u64(&w, (uint64_t)1 << 61);
    w_u64(&w, 0);
    st = gguf_try(&w, &err);
    CHECK_MSG(st != CMF_OK && st != CMF_E_NOMEM, "array: %s", err.msg);
    /* a valid image: every truncation fails cleanly; a file cut inside the tensor data is
     * refused at open (the reader maps the file: touching the span would be SIGBUS) */
    free(w.b); /* w_begin starts a new buffer */
    w_begin(&w);
    kv_str(&w, "general.architecture", "llama");
    w_end(&w);
    const char *names[] = {"a", "b"};
    uint64_t rows[] = {64, 64};
    w_f32_tensors(&w, names, rows, 2);
    CHECK(gguf_try(&w, &err) == CMF_OK);
    size_t full = w.n, opened = 0;
    for (size_t n = 0; n < full; n++) {
        w.n = n;
        if (gguf_try(&w, &err) == CMF_OK) opened++;
    }
    CHECK_MSG(opened == 0, "%zu GGUF truncations opened", opened);
    CHECK(spit(tmp_path("cut.gguf"), w.b, full - 100) == 0);
    cmf_gguf *g = NULL;
    st = cmf_gguf_open(tmp_path("cut.gguf"), &g, &err);
    CHECK_MSG(st != CMF_OK && g == NULL, "a GGUF cut inside tensor data opened: %s", err.msg);
    cmf_gguf_close(g);
    free(w.b);
}

/* ---------------- safetensors ---------------- */
static size_t st_build(uint8_t *b, const char *json, size_t data_len) {
    size_t h = strlen(json);
    st_u64(b, h);
    memcpy(b + 8, json, h);
    memset(b + 8 + h, 0, data_len);
    return 8 + h + data_len;
}

static cmf_status st_try(const uint8_t *b, size_t n, cmf_err *err) {
    cmf_st *s = (cmf_st *)&s;
    cmf_status st = cmf_st_open_memory(b, n, "cve.safetensors", &s, err);
    CHECK(st == CMF_OK ? s != NULL : s == NULL);
    if (st == CMF_OK) cmf_st_close(s);
    return st;
}

static void test_safetensors(void) {
    cmf_err err;
    static uint8_t b[4096];
    /* header length 2^64-1 and one past the file */
    size_t n = st_build(b, "{}", 0);
    st_u64(b, UINT64_MAX);
    CHECK(st_try(b, n, &err) != CMF_OK);
    st_u64(b, UINT64_MAX - 7); /* 8 + len wraps to 0 */
    CHECK(st_try(b, n, &err) != CMF_OK);
    st_u64(b, n - 7);
    CHECK(st_try(b, n, &err) == CMF_E_BOUNDS);
    /* offsets near 2^64, begin + size wrapping, end before begin */
    const char *bad[] = {
        "{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[18446744073709551608,0]}}",
        "{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[18446744073709551612,4]}}",
        "{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,18446744073709551615]}}",
        "{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,18446744073709551616]}}",
        "{\"w\":{\"dtype\":\"F32\",\"shape\":[4611686018427387904],\"data_offsets\":[0,0]}}",
        "{\"w\":{\"dtype\":\"F32\",\"shape\":[65536,65536,65536,65536],\"data_offsets\":[0,0]}}",
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        n = st_build(b, bad[k], 8);
        cmf_status st = st_try(b, n, &err);
        CHECK_MSG(st != CMF_OK && st != CMF_E_NOMEM, "%s: %s", bad[k], err.msg);
    }
    /* every truncation; a file whose data is cut short opened by path */
    n = st_build(b,
                 "{\"a\":{\"dtype\":\"F32\",\"shape\":[4,4],\"data_offsets\":[0,64]},"
                 "\"b\":{\"dtype\":\"BF16\",\"shape\":[8],\"data_offsets\":[64,80]}}",
                 80);
    CHECK(st_try(b, n, &err) == CMF_OK);
    size_t opened = 0;
    for (size_t k = 0; k < n; k++)
        if (st_try(b, k, &err) == CMF_OK) opened++;
    CHECK_MSG(opened == 0, "%zu safetensors truncations opened", opened);
    CHECK(spit(tmp_path("cut.safetensors"), b, n - 20) == 0);
    cmf_st *s = NULL;
    cmf_status st = cmf_st_open(tmp_path("cut.safetensors"), &s, &err);
    CHECK_MSG(st == CMF_E_BOUNDS && s == NULL, "%s", err.msg);
    cmf_st_close(s);
}

/* ---------------- chat templates ---------------- */
static const char *k_msgs = "[{\"role\":\"user\",\"content\":\"hi\"}]";

/* compile + render; returns the status of the first failing step (output in *out) */
static cmf_status tpl_run(const char *src, char **out, cmf_err *err) {
    cmf_chat_template *t = NULL;
    *out = NULL;
    cmf_status st = cmf_chat_template_compile(src, strlen(src), &t, err);
    if (st) return st;
    size_t n;
    st = cmf_chat_template_render(t, k_msgs, NULL, NULL, false, NULL, out, &n, err);
    cmf_chat_template_free(t);
    return st;
}

static void test_templates(void) {
    cmf_err err;
    char *out;
    /* no way to the file system or to host objects: refused, or rendered as nothing */
    const char *host[] = {
        "{% include '/etc/passwd' %}",
        "{% import '/etc/passwd' as p %}",
        "{% from '/etc/passwd' import x %}",
        "{% extends '/etc/passwd' %}",
        "{{ ''.__class__.__mro__[1].__subclasses__() }}",
        "{{ messages.__class__.__init__.__globals__ }}",
        "{{ range.__globals__['__builtins__'] }}",
        "{{ cycler.__init__.__globals__.os.popen('id').read() }}",
        "{{ joiner.__init__.__globals__ }}{{ namespace.__init__.__globals__ }}",
        "{{ lipsum.__globals__['os'] }}",
        "{{ self._TemplateReference__context }}{{ self.__dict__ }}",
        "{{ config }}{{ request }}{{ __import__('os') }}",
        "{{ open('/etc/passwd').read() }}",
        "{% set x = messages[0] %}{{ x.__class__.__base__ }}{{ x.items.__self__ }}",
        "{{ messages|attr('__class__') }}{{ (messages|first)|attr('__init__') }}",
    };
    for (size_t k = 0; k < sizeof host / sizeof host[0]; k++) {
        cmf_status st = tpl_run(host[k], &out, &err);
        if (st == CMF_OK)
            CHECK_MSG(!strstr(out, "root:") && !strstr(out, "class") && !strstr(out, "function") &&
                          !strstr(out, "module") && !strstr(out, "uid="),
                      "%s rendered '%s'", host[k], out);
        free(out);
    }
    /* hostile templates stop with CMF_E_LIMIT */
    const char *hostile[] = {
        "{% macro f(n) %}{{ f(n) }}{% endmacro %}{{ f(0) }}",
        "{% macro a(n) %}{{ b(n) }}{% endmacro %}{% macro b(n) %}{{ a(n) }}{% endmacro %}{{ a(0) "
        "}}",
        "{% for i in range(1000000000) %}{% endfor %}",
        "{% for i in range(100000) %}{% for j in range(100000) %}x{% endfor %}{% endfor %}",
        "{% set ns = namespace(s='xy') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}{% "
        "endfor %}{{ ns.s|length }}",
        "{{ 'x' * 4000000000 }}",
        "{% for i in range(10000000) %}0123456789abcdef{% endfor %}",
        "{{ range(100000000)|list|length }}",
    };
    for (size_t k = 0; k < sizeof hostile / sizeof hostile[0]; k++) {
        cmf_status st = tpl_run(hostile[k], &out, &err);
        CHECK_MSG(st == CMF_E_LIMIT, "%s: %s %s", hostile[k], cmf_status_name(st), err.msg);
        free(out);
    }
    /* nesting 100,000 deep refused at compile time, without recursing that deep */
    size_t depth = 100000;
    char *deep = malloc(depth * 16 + 1);
    if (deep) {
        size_t n = 0;
        for (size_t i = 0; i < depth; i++)
            n += (size_t)sprintf(deep + n, "{%% if 1 %%}");
        cmf_status st = tpl_run(deep, &out, &err);
        CHECK_MSG(st == CMF_E_LIMIT, "deep if: %s", err.msg);
        free(out);
        for (size_t i = 0; i < depth * 3; i++)
            deep[i] = i % 3 == 2 ? '1' : '[';
        deep[depth * 3] = 0;
        memcpy(deep, "{{ ", 3);
        st = tpl_run(deep, &out, &err);
        CHECK_MSG(st == CMF_E_LIMIT, "deep list literal: %s", err.msg);
        free(out);
        free(deep);
    }
}

/* ---------------- tokenizer ---------------- */
static void test_tokenizer(void) {
    cmf_err err;
    /* a byte-level BPE whose vocabulary holds a 1 MiB token (also an added token) */
    size_t big = (size_t)1 << 20, cap = big * 2 + (1 << 16), n = 0;
    char *j = malloc(cap);
    if (!j) return;
    n += (size_t)snprintf(j + n, cap - n, "{\"added_tokens\":[{\"id\":300,\"content\":\"");
    memset(j + n, 'Q', big);
    n += big;
    n += (size_t)snprintf(
        j + n, cap - n,
        "\",\"special\":false,\"normalized\":false}],\"pre_tokenizer\":{\"type\":\"ByteLevel\","
        "\"add_prefix_space\":false,\"use_regex\":true},\"decoder\":{\"type\":\"ByteLevel\"},"
        "\"model\":{\"type\":\"BPE\",\"vocab\":{");
    for (int c = 33; c < 127; c++)
        if (c != '"' && c != '\\') n += (size_t)snprintf(j + n, cap - n, "\"%c\":%d,", c, c);
    n += (size_t)snprintf(j + n, cap - n, "\"");
    memset(j + n, 'z', big);
    n += big;
    n += (size_t)snprintf(j + n, cap - n, "\":301},\"merges\":[]}}");
    cmf_tokenizer *tok = NULL;
    cmf_status st = cmf_tokenizer_load(j, n, &tok, &err);
    CHECK_MSG(st == CMF_OK, "huge token: %s", err.msg);
    if (st == CMF_OK) {
        /* the text: the huge added token, a 1 MiB word of 'z', every invalid UTF-8 lead byte */
        size_t tl = 0;
        char *text = malloc(big * 2 + 512);
        memset(text, 'Q', big);
        tl = big;
        memset(text + tl, 'z', big);
        tl += big;
        for (int c = 0x80; c <= 0xFF; c++)
            text[tl++] = (char)c;
        memcpy(text + tl, "\xe4\xb8\xf0\x9f\x98\xed\xa0\x80", 8);
        tl += 8;
        int32_t *ids = NULL;
        size_t nid = 0;
        st = cmf_tokenizer_encode(tok, text, tl, false, &ids, &nid, &err);
        CHECK_MSG(st == CMF_OK, "encode: %s", err.msg);
        CHECK(nid > 1 && ids[0] == 300);
        char *back = NULL;
        size_t bl;
        if (st == CMF_OK) {
            /* decode of arbitrary ids, including ones with no token */
            int32_t odd[] = {300, -1, 5, 2147483647, 301, 33};
            CHECK(cmf_tokenizer_decode(tok, odd, 6, false, &back, &bl, &err) == CMF_OK);
            CHECK(bl >= big * 2);
            free(back);
        }
        free(ids);
        free(text);
        cmf_tokenizer_free(tok);
    }
    /* invalid UTF-8 inside tokenizer.json itself: refused or loaded, never a crash */
    const char *bad_json =
        "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\xff\":0,\"\xc0\xaf\":1},\"merges\":[]}}";
    st = cmf_tokenizer_load(bad_json, strlen(bad_json), &tok, &err);
    if (st == CMF_OK) cmf_tokenizer_free(tok);
    CHECK_MSG(st == CMF_OK || st == CMF_E_PARSE, "%s", err.msg);
    free(j);
}

int main(void) {
    test_cmf();
    test_gguf();
    test_safetensors();
    test_templates();
    test_tokenizer();
    TEST_DONE();
}
