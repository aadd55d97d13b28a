/* test_gguf_dequant.c - every dequantizable ggml type matches the `gguf` Python package
 * bit for bit, on random blocks (fixture from tools/make_gguf_cases.py); the metadata of
 * every value type reads back; row-range reads equal whole-tensor reads. */
#include "common/test.h"
#include "convert_test_util.h"
#include "cortiq/gguf.h"

static void check_metadata(const cmf_gguf *g) {
    int64_t i;
    double f;
    bool b;
    CHECK(cmf_gguf_get_int(g, "test.u8", &i) && i == 200);
    CHECK(cmf_gguf_get_int(g, "test.i8", &i) && i == -100);
    CHECK(cmf_gguf_get_int(g, "test.u16", &i) && i == 60000);
    CHECK(cmf_gguf_get_int(g, "test.i16", &i) && i == -30000);
    CHECK(cmf_gguf_get_int(g, "test.u32", &i) && i == 4000000000LL);
    CHECK(cmf_gguf_get_int(g, "test.i32", &i) && i == -2000000000LL);
    CHECK(cmf_gguf_get_float(g, "test.f32", &f) && f == 1.5);
    CHECK(cmf_gguf_get_bool(g, "test.bool", &b) && b);
    CHECK(cmf_gguf_get_str(g, "test.str") &&
          strcmp(cmf_gguf_get_str(g, "test.str"), "h\xc3\xa9llo") == 0);
    const cmf_gguf_kv *kv = cmf_gguf_find_kv(g, "test.u64");
    CHECK(kv && kv->type == CMF_GGUF_U64 && kv->u64 == (1ULL << 63) + 5);
    CHECK(cmf_gguf_get_int(g, "test.i64", &i) && i == -(1LL << 62));
    CHECK(cmf_gguf_get_float(g, "test.f64", &f) && f == -2.25);
    CHECK(!cmf_gguf_get_int(g, "test.str", &i)); /* wrong kind */
    CHECK(!cmf_gguf_get_str(g, "test.absent"));
    kv = cmf_gguf_find_kv(g, "test.arr_i32");
    CHECK(kv && kv->type == CMF_GGUF_ARRAY && kv->arr_len == 3);
    CHECK(cmf_gguf_arr_int(kv, 1, &i) && i == -2);
    CHECK(!cmf_gguf_arr_int(kv, 3, &i));
    kv = cmf_gguf_find_kv(g, "test.arr_str");
    CHECK(kv && kv->arr_type == CMF_GGUF_STRING && kv->arr_len == 3);
    if (kv && kv->arr_str) {
        CHECK(kv->arr_str[0].len == 1 && kv->arr_str[0].ptr[0] == 'a');
        CHECK(kv->arr_str[1].len == 0);
        CHECK(kv->arr_str[2].len == 3 && memcmp(kv->arr_str[2].ptr, "xyz", 3) == 0);
    }
    kv = cmf_gguf_find_kv(g, "test.arr_f32");
    CHECK(kv && cmf_gguf_arr_float(kv, 0, &f) && f == 0.5);
    CHECK(strcmp(cmf_gguf_get_str(g, "general.architecture"), "cortiqtest") == 0);
    CHECK(cmf_gguf_version(g) == 3 && cmf_gguf_alignment(g) == 32);
}

static void check_type(const cmf_gguf *g, const char *type) {
    char cname[64], wname[64];
    snprintf(cname, sizeof cname, "case.%s", type);
    snprintf(wname, sizeof wname, "want.%s", type);
    const cmf_gguf_tensor *c = cmf_gguf_find_tensor(g, cname), *w = cmf_gguf_find_tensor(g, wname);
    CHECK_MSG(c && w, "fixture lacks %s", type);
    if (!c || !w) return;
    CHECK_MSG(strcmp(cmf_ggml_type_name(c->type), type) == 0, "%s has type %s", cname,
              cmf_ggml_type_name(c->type));
    CHECK(w->type == CMF_GGML_F32 && w->nelem == c->nelem && c->nrows == 3);
    CHECK(c->shape[0] == c->nrows && c->shape[1] == c->row_len);
    float *got = malloc(c->nelem * sizeof(float)), *want = malloc(w->nelem * sizeof(float));
    float *row = malloc(c->row_len * sizeof(float));
    cmf_err err;
    CHECK_STATUS(cmf_gguf_tensor_rows_f32(g, w, 0, w->nrows, want, &t_err_), CMF_OK);
    cmf_status st = cmf_gguf_tensor_rows_f32(g, c, 0, c->nrows, got, &err);
    CHECK_MSG(st == CMF_OK, "%s", err.msg);
    uint64_t bad = 0, first = 0;
    for (uint64_t i = 0; i < c->nelem; i++)
        if (!same_bits(got[i], want[i]) && bad++ == 0) first = i;
    CHECK_MSG(bad == 0, "%s: %llu of %llu values differ, first at %llu: got %.9g want %.9g", type,
              (unsigned long long)bad, (unsigned long long)c->nelem, (unsigned long long)first,
              got[first], want[first]);
    /* one row at a time equals the whole read */
    uint64_t rbad = 0;
    for (uint64_t r = 0; r < c->nrows; r++) {
        CHECK_STATUS(cmf_gguf_tensor_rows_f32(g, c, r, 1, row, &t_err_), CMF_OK);
        for (uint64_t i = 0; i < c->row_len; i++)
            rbad += !same_bits(row[i], got[r * c->row_len + i]);
    }
    CHECK_MSG(rbad == 0, "%s: row-wise read differs in %llu values", type,
              (unsigned long long)rbad);
    CHECK_STATUS(cmf_gguf_tensor_rows_f32(g, c, 2, 2, row, &t_err_), CMF_E_INVALID_ARG);
    free(got);
    free(want);
    free(row);
}

int main(void) {
    size_t len = 0;
    uint8_t *buf = load_gz(CORTIQ_SOURCE_DIR "/tests/convert/data/dequant_cases.gguf.gz", &len);
    CHECK_MSG(buf != NULL, "cannot read the fixture (gzip missing?)");
    if (!buf) TEST_DONE();
    cmf_gguf *g = NULL;
    cmf_err err;
    cmf_status st = cmf_gguf_open_memory(buf, len, "dequant_cases.gguf", &g, &err);
    CHECK_MSG(st == CMF_OK, "%s", err.msg);
    if (g) {
        check_metadata(g);
        static const char *types[] = {"Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q2_K", "Q3_K",
                                      "Q4_K", "Q5_K", "Q6_K", "F16",  "BF16", "F32"};
        for (size_t i = 0; i < sizeof types / sizeof *types; i++)
            check_type(g, types[i]);
        CHECK(cmf_gguf_tensor_count(g) == 26);
    }
    /* unsupported types name themselves */
    float out[32];
    uint8_t blk[40] = {0};
    CHECK_STATUS(cmf_ggml_dequantize(CMF_GGML_Q8_1, blk, sizeof blk, 32, out, &t_err_),
                 CMF_E_UNSUPPORTED);
    CHECK(cmf_ggml_dequantize(20, blk, sizeof blk, 32, out, &err) == CMF_E_UNSUPPORTED);
    CHECK_MSG(strstr(err.msg, "IQ4_NL") != NULL, "message: %s", err.msg);
    CHECK_STATUS(cmf_ggml_dequantize(CMF_GGML_Q4_0, blk, sizeof blk, 16, out, &t_err_),
                 CMF_E_INVALID_ARG);
    CHECK_STATUS(cmf_ggml_dequantize(CMF_GGML_Q4_0, blk, 10, 32, out, &t_err_), CMF_E_INVALID_ARG);
    cmf_gguf_close(g);
    free(buf);
    TEST_DONE();
}
