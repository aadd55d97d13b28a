/* test_safetensors.c - the safetensors reader: values of F32/F16/BF16, refusals of every
 * malformed header class, truncations, and sharded checkpoints (index.json) including
 * inconsistent and hostile indexes. */
#include <sys/stat.h>
#include <unistd.h>

#include "common/test.h"
#include "cortiq/safetensors.h"

typedef struct sbuf {
    uint8_t b[4096];
    size_t n;
} sbuf;

/* header JSON + payload bytes -> a safetensors image */
static void build(sbuf *s, const char *json, const void *data, size_t dlen) {
    size_t h = strlen(json);
    for (int i = 0; i < 8; i++)
        s->b[i] = (uint8_t)((uint64_t)h >> (8 * i));
    memcpy(s->b + 8, json, h);
    if (dlen) memcpy(s->b + 8 + h, data, dlen);
    s->n = 8 + h + dlen;
}

static cmf_status try_open(const sbuf *s, cmf_err *err) {
    cmf_st *h = NULL;
    cmf_status st = cmf_st_open_memory(s->b, s->n, "t.safetensors", &h, err);
    CHECK(st == CMF_OK ? h != NULL : h == NULL);
    cmf_st_close(h);
    return st;
}

#define EXPECT(s, want)                                                                            \
    do {                                                                                           \
        cmf_err e_;                                                                                \
        cmf_err_clear(&e_);                                                                        \
        cmf_status s_ = try_open(s, &e_);                                                          \
        CHECK_MSG(s_ == (want), "got %s (%s), want %s", cmf_status_name(s_), e_.msg,               \
                  cmf_status_name(want));                                                          \
    } while (0)

static uint8_t g_data[64];

static void fill_data(void) {
    /* a: F32 [2,3] = 0..5 at [0,24); b: F16 [3] = 1, -2, 0.5 at [24,30); c: BF16 [2] = 1, -3 at
     * [30,34); d: I64 [1] at [34,42) */
    for (int i = 0; i < 6; i++) {
        float f = (float)i;
        memcpy(g_data + 4 * i, &f, 4);
    }
    const uint8_t f16[6] = {0x00, 0x3c, 0x00, 0xc0, 0x00, 0x38};
    memcpy(g_data + 24, f16, 6);
    const uint8_t bf16[4] = {0x80, 0x3f, 0x40, 0xc0};
    memcpy(g_data + 30, bf16, 4);
    memset(g_data + 34, 7, 8);
}

static const char *VALID = "{\"__metadata__\":{\"format\":\"pt\"},"
                           "\"a\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]},"
                           "\"b\":{\"dtype\":\"F16\",\"shape\":[3],\"data_offsets\":[24,30]},"
                           "\"c\":{\"dtype\":\"BF16\",\"shape\":[2],\"data_offsets\":[30,34]},"
                           "\"d\":{\"dtype\":\"I64\",\"shape\":[1],\"data_offsets\":[34,42]}}";

static void write_file(const char *path, const void *p, size_t n) {
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL);
    if (!f) return;
    fwrite(p, 1, n, f);
    fclose(f);
}

static void write_text(const char *path, const char *text) {
    write_file(path, text, strlen(text));
}

static void test_sharded(void) {
    char dir[] = "/tmp/cortiq_st_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char p1[256], p2[256], idx[256];
    snprintf(p1, sizeof p1, "%s/m-1.safetensors", dir);
    snprintf(p2, sizeof p2, "%s/m-2.safetensors", dir);
    snprintf(idx, sizeof idx, "%s/model.safetensors.index.json", dir);
    sbuf s;
    build(&s, "{\"x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", g_data, 8);
    write_file(p1, s.b, s.n);
    build(&s,
          "{\"y\":{\"dtype\":\"F16\",\"shape\":[1,3],\"data_offsets\":[0,6]},"
          "\"z\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[6,10]}}",
          g_data + 24, 10);
    write_file(p2, s.b, s.n);
    write_text(
        idx,
        "{\"metadata\":{},\"weight_map\":{\"x\":\"m-1.safetensors\",\"y\":\"m-2.safetensors\",\"z\":\"m-2.safetensors\"}}");
    cmf_st *h = NULL;
    cmf_err err;
    cmf_status st = cmf_st_open(dir, &h, &err);
    CHECK_MSG(st == CMF_OK, "%s", err.msg);
    if (h) {
        CHECK(cmf_st_file_count(h) == 2 && cmf_st_tensor_count(h) == 3);
        CHECK(strcmp(cmf_st_tensor_at(h, 0)->name, "x") == 0 &&
              strcmp(cmf_st_tensor_at(h, 2)->name, "z") == 0);
        const cmf_st_tensor *y = cmf_st_find(h, "y"), *z = cmf_st_find(h, "z");
        float out[3];
        CHECK(y && y->file == 1 && y->nrows == 1 && y->row_len == 3);
        if (y) CHECK_STATUS(cmf_st_rows_f32(h, y, 0, 1, out, &t_err_), CMF_OK);
        CHECK(out[0] == 1.0f && out[1] == -2.0f && out[2] == 0.5f);
        CHECK(z && z->ndim == 0 && z->nelem == 1 && z->nrows == 1);
    }
    cmf_st_close(h);
    /* a tensor listed for the wrong shard */
    write_text(
        idx,
        "{\"weight_map\":{\"x\":\"m-2.safetensors\",\"y\":\"m-2.safetensors\",\"z\":\"m-1.safetensors\"}}");
    CHECK_STATUS(cmf_st_open(dir, &h, &t_err_), CMF_E_SHARD);
    /* a listed tensor that no shard has */
    write_text(
        idx,
        "{\"weight_map\":{\"x\":\"m-1.safetensors\",\"y\":\"m-2.safetensors\",\"z\":\"m-2.safetensors\",\"w\":\"m-1.safetensors\"}}");
    CHECK_STATUS(cmf_st_open(dir, &h, &t_err_), CMF_E_NOT_FOUND);
    /* a shard tensor the map does not list */
    write_text(idx, "{\"weight_map\":{\"x\":\"m-1.safetensors\",\"y\":\"m-2.safetensors\"}}");
    CHECK_STATUS(cmf_st_open(dir, &h, &t_err_), CMF_E_SHARD);
    /* path traversal and missing shard files */
    write_text(idx, "{\"weight_map\":{\"x\":\"../m-1.safetensors\"}}");
    CHECK_STATUS(cmf_st_open(dir, &h, &t_err_), CMF_E_PARSE);
    write_text(idx, "{\"weight_map\":{\"x\":\"m-9.safetensors\"}}");
    CHECK_STATUS(cmf_st_open(dir, &h, &t_err_), CMF_E_NOT_FOUND);
    write_text(idx, "{\"weight_map\":[]}");
    CHECK_STATUS(cmf_st_open(dir, &h, &t_err_), CMF_E_PARSE);
    /* the same tensor in two shards */
    build(&s,
          "{\"x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
          "\"y\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}",
          g_data, 12);
    write_file(p1, s.b, s.n);
    write_text(
        idx,
        "{\"weight_map\":{\"x\":\"m-1.safetensors\",\"y\":\"m-2.safetensors\",\"z\":\"m-2.safetensors\"}}");
    CHECK_STATUS(cmf_st_open(dir, &h, &t_err_), CMF_E_SHARD);
    /* a directory with a single model.safetensors */
    unlink(idx);
    unlink(p1);
    unlink(p2);
    char single[256];
    snprintf(single, sizeof single, "%s/model.safetensors", dir);
    CHECK_STATUS(cmf_st_open(dir, &h, &t_err_), CMF_E_NOT_FOUND);
    build(&s, VALID, g_data, 42);
    write_file(single, s.b, s.n);
    st = cmf_st_open(dir, &h, &err);
    CHECK_MSG(st == CMF_OK && h && cmf_st_tensor_count(h) == 4, "%s", err.msg);
    cmf_st_close(h);
    unlink(single);
    rmdir(dir);
}

int main(void) {
    fill_data();
    sbuf *s = calloc(1, sizeof *s);
    cmf_err err;
    build(s, VALID, g_data, 42);
    cmf_st *h = NULL;
    CHECK_STATUS(cmf_st_open_memory(s->b, s->n, "v.safetensors", &h, &t_err_), CMF_OK);
    if (h) {
        CHECK(cmf_st_tensor_count(h) == 4);
        CHECK(strcmp(cmf_st_metadata(h, "format"), "pt") == 0 && cmf_st_metadata(h, "x") == NULL);
        const cmf_st_tensor *a = cmf_st_find(h, "a"), *b = cmf_st_find(h, "b"),
                            *c = cmf_st_find(h, "c"), *d = cmf_st_find(h, "d");
        CHECK(a && b && c && d);
        float out[6] = {0};
        if (a) {
            CHECK(a->nrows == 2 && a->row_len == 3 && a->dtype == CMF_ST_F32);
            CHECK_STATUS(cmf_st_rows_f32(h, a, 1, 1, out, &t_err_), CMF_OK);
            CHECK(out[0] == 3 && out[2] == 5);
            CHECK_STATUS(cmf_st_rows_f32(h, a, 1, 2, out, &t_err_), CMF_E_INVALID_ARG);
        }
        if (c) {
            CHECK_STATUS(cmf_st_rows_f32(h, c, 0, 1, out, &t_err_), CMF_OK);
            CHECK(out[0] == 1.0f && out[1] == -3.0f);
        }
        if (d) {
            cmf_status st = cmf_st_rows_f32(h, d, 0, 1, out, &err);
            CHECK(st == CMF_E_UNSUPPORTED && strstr(err.msg, "'d'") && strstr(err.msg, "I64"));
        }
    }
    cmf_st_close(h);
    size_t full = s->n, opened = 0;
    for (size_t n = 0; n < full; n++) {
        s->n = n;
        if (try_open(s, &err) == CMF_OK) opened++;
    }
    CHECK_MSG(opened == 0, "%zu truncations opened", opened);

    /* header length: over the cap, past the file, file too short */
    build(s, "{}", NULL, 0);
    CHECK(try_open(s, &err) == CMF_OK);
    s->b[3] = 0x10; /* 256 MiB + 2 */
    EXPECT(s, CMF_E_LIMIT);
    build(s, "{}", NULL, 0);
    s->b[0] = 3;
    EXPECT(s, CMF_E_BOUNDS);
    memset(s->b, 0xff, 8); /* 2^64-1 */
    EXPECT(s, CMF_E_LIMIT);
    /* JSON shape */
    build(s, "{\"a\":", NULL, 0);
    EXPECT(s, CMF_E_PARSE);
    build(s, "[1,2]", NULL, 0);
    EXPECT(s, CMF_E_PARSE);
    build(
        s,
        "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
        g_data, 8);
    EXPECT(s, CMF_E_PARSE);
    build(s, "{\"a\":7}", NULL, 0);
    EXPECT(s, CMF_E_PARSE);
    /* dtypes */
    build(s, "{\"w\":{\"dtype\":\"Q4\",\"shape\":[2],\"data_offsets\":[0,1]}}", g_data, 1);
    CHECK(try_open(s, &err) == CMF_E_PARSE && strstr(err.msg, "'w'") && strstr(err.msg, "Q4"));
    build(s, "{\"w\":{\"dtype\":5,\"shape\":[2],\"data_offsets\":[0,8]}}", g_data, 8);
    EXPECT(s, CMF_E_PARSE);
    /* shapes */
    build(s, "{\"w\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}", g_data, 4);
    EXPECT(s, CMF_E_PARSE);
    build(s, "{\"w\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,4]}}",
          g_data, 4);
    EXPECT(s, CMF_E_PARSE);
    build(s, "{\"w\":{\"dtype\":\"F32\",\"shape\":[2305843009213693952],\"data_offsets\":[0,0]}}",
          g_data, 0);
    EXPECT(s, CMF_E_PARSE); /* numel fine, bytes overflow */
    build(s, "{\"w\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,4]}}",
          g_data, 4);
    EXPECT(s, CMF_E_PARSE);
    build(s, "{\"w\":{\"dtype\":\"F32\",\"shape\":[1.5],\"data_offsets\":[0,4]}}", g_data, 4);
    EXPECT(s, CMF_E_PARSE);
    /* offsets */
    build(s, "{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", g_data, 7);
    EXPECT(s, CMF_E_BOUNDS);
    build(s, "{\"w\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[8,4]}}", g_data, 8);
    EXPECT(s, CMF_E_BOUNDS);
    build(s, "{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,12]}}", g_data, 12);
    EXPECT(s, CMF_E_PARSE);
    build(s, "{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0]}}", g_data, 8);
    EXPECT(s, CMF_E_PARSE);
    build(s, "{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[-8,0]}}", g_data, 8);
    EXPECT(s, CMF_E_BOUNDS);
    build(
        s,
        "{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},\"v\":{\"dtype\":\"F16\",\"shape\":[2],\"data_offsets\":[6,10]}}",
        g_data, 10);
    EXPECT(s, CMF_E_PARSE); /* overlap */
    build(
        s,
        "{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},\"v\":{\"dtype\":\"F16\",\"shape\":[0],\"data_offsets\":[4,4]}}",
        g_data, 8);
    EXPECT(s, CMF_OK); /* an empty tensor occupies nothing */
    /* metadata */
    build(s, "{\"__metadata__\":{\"k\":1}}", NULL, 0);
    EXPECT(s, CMF_E_PARSE);
    build(s, "{\"__metadata__\":[]}", NULL, 0);
    EXPECT(s, CMF_E_PARSE);

    test_sharded();
    CHECK_STATUS(cmf_st_open("/nonexistent/dir", &h, &t_err_), CMF_E_IO);
    free(s);
    TEST_DONE();
}
