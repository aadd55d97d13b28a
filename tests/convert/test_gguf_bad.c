/* test_gguf_bad.c - hand-built GGUF files, valid and hostile: each class of past GGUF parser
 * bugs (huge counts, wrapping string lengths, spans past EOF, bad alignment, overlaps,
 * unknown types) is refused with the right status, and every truncation of a valid file
 * fails cleanly. */
#include "common/test.h"
#include "cortiq/gguf.h"

typedef struct gbuf {
    uint8_t b[8192];
    size_t n;
} gbuf;

static void put(gbuf *g, const void *p, size_t n) {
    memcpy(g->b + g->n, p, n);
    g->n += n;
}
static void u32(gbuf *g, uint32_t v) {
    for (int i = 0; i < 4; i++)
        g->b[g->n++] = (uint8_t)(v >> (8 * i));
}
static void u64(gbuf *g, uint64_t v) {
    for (int i = 0; i < 8; i++)
        g->b[g->n++] = (uint8_t)(v >> (8 * i));
}
static void str(gbuf *g, const char *s) {
    u64(g, strlen(s));
    put(g, s, strlen(s));
}
static void header(gbuf *g, uint32_t version, uint64_t nt, uint64_t nkv) {
    g->n = 0;
    put(g, "GGUF", 4);
    u32(g, version);
    u64(g, nt);
    u64(g, nkv);
}
static void kv_u32(gbuf *g, const char *k, uint32_t v) {
    str(g, k);
    u32(g, CMF_GGUF_U32);
    u32(g, v);
}
/* tensor info: 2-D [ne0, ne1] */
static void tinfo(gbuf *g, const char *name, uint32_t type, uint64_t ne0, uint64_t ne1,
                  uint64_t off) {
    str(g, name);
    u32(g, 2);
    u64(g, ne0);
    u64(g, ne1);
    u32(g, type);
    u64(g, off);
}
static void pad_to(gbuf *g, size_t align) {
    while (g->n % align)
        g->b[g->n++] = 0;
}
static void zeros(gbuf *g, size_t n) {
    memset(g->b + g->n, 0, n);
    g->n += n;
}

static cmf_status try_open(const gbuf *g, cmf_err *err) {
    cmf_gguf *h = NULL;
    cmf_status st = cmf_gguf_open_memory(g->b, g->n, "t.gguf", &h, err);
    CHECK(st == CMF_OK ? h != NULL : h == NULL);
    cmf_gguf_close(h);
    return st;
}

#define EXPECT(g, want)                                                                            \
    do {                                                                                           \
        cmf_err e_;                                                                                \
        cmf_err_clear(&e_);                                                                        \
        cmf_status s_ = try_open(g, &e_);                                                          \
        CHECK_MSG(s_ == (want), "got %s (%s), want %s", cmf_status_name(s_), e_.msg,               \
                  cmf_status_name(want));                                                          \
    } while (0)

/* A valid file: 2 KVs, an F32 [4 x 2] and a Q8_0 [32 x 1] tensor. */
static void valid(gbuf *g) {
    header(g, 3, 2, 2);
    str(g, "general.architecture");
    u32(g, CMF_GGUF_STRING);
    str(g, "llama");
    kv_u32(g, "general.alignment", 32);
    tinfo(g, "a", CMF_GGML_F32, 4, 2, 0);
    tinfo(g, "b", CMF_GGML_Q8_0, 32, 1, 32);
    pad_to(g, 32);
    float v[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    put(g, v, sizeof v);
    uint8_t q8[34] = {0x00, 0x3c}; /* d = 1.0 */
    for (int i = 0; i < 32; i++)
        q8[2 + i] = (uint8_t)(int8_t)(i - 16);
    put(g, q8, sizeof q8);
}

int main(void) {
    gbuf *g = calloc(1, sizeof *g);
    cmf_err err;

    valid(g);
    cmf_gguf *h = NULL;
    CHECK_STATUS(cmf_gguf_open_memory(g->b, g->n, "valid.gguf", &h, &t_err_), CMF_OK);
    if (h) {
        const cmf_gguf_tensor *a = cmf_gguf_find_tensor(h, "a"), *b = cmf_gguf_find_tensor(h, "b");
        CHECK(a && b && a->nrows == 2 && a->row_len == 4 && a->shape[0] == 2 && b->nbytes == 34);
        float out[32];
        if (a) CHECK_STATUS(cmf_gguf_tensor_rows_f32(h, a, 1, 1, out, &t_err_), CMF_OK);
        CHECK(out[0] == 5 && out[3] == 8);
        if (b) CHECK_STATUS(cmf_gguf_tensor_rows_f32(h, b, 0, 1, out, &t_err_), CMF_OK);
        CHECK(out[0] == -16 && out[31] == 15);
        CHECK(strcmp(cmf_gguf_get_str(h, "general.architecture"), "llama") == 0);
        CHECK(cmf_gguf_find_tensor(h, "c") == NULL);
    }
    cmf_gguf_close(h);
    /* every truncation fails cleanly */
    size_t full = g->n, bad_ok = 0;
    for (size_t n = 0; n < full; n++) {
        g->n = n;
        if (try_open(g, &err) == CMF_OK) bad_ok++;
    }
    CHECK_MSG(bad_ok == 0, "%zu truncations opened", bad_ok);

    /* magic and version */
    valid(g);
    g->b[0] = 'X';
    EXPECT(g, CMF_E_INVALID_MAGIC);
    header(g, 1, 0, 0);
    EXPECT(g, CMF_E_UNSUPPORTED_VERSION);
    header(g, 0x03000000u, 0, 0); /* big-endian v3 */
    EXPECT(g, CMF_E_UNSUPPORTED_VERSION);
    header(g, 2, 0, 0);
    EXPECT(g, CMF_OK);

    /* counts of 2^64-1 and counts that cannot fit */
    header(g, 3, UINT64_MAX, 0);
    EXPECT(g, CMF_E_LIMIT);
    header(g, 3, 0, UINT64_MAX);
    EXPECT(g, CMF_E_LIMIT);
    header(g, 3, 1000, 1000);
    EXPECT(g, CMF_E_BOUNDS);

    /* string lengths that would wrap the cursor, or pass EOF */
    header(g, 3, 0, 1);
    u64(g, UINT64_MAX); /* key length */
    zeros(g, 16);
    EXPECT(g, CMF_E_LIMIT);
    header(g, 3, 0, 1);
    str(g, "k");
    u32(g, CMF_GGUF_STRING);
    u64(g, UINT64_MAX - 7);
    EXPECT(g, CMF_E_BOUNDS);
    header(g, 3, 0, 1);
    str(g, "k");
    u32(g, CMF_GGUF_STRING);
    u64(g, 100);
    put(g, "short", 5);
    EXPECT(g, CMF_E_BOUNDS);

    /* arrays: string count x 8 wraps, numeric count x size wraps, nested, unknown element */
    header(g, 3, 0, 1);
    str(g, "k");
    u32(g, CMF_GGUF_ARRAY);
    u32(g, CMF_GGUF_STRING);
    u64(g, 1ULL << 61);
    EXPECT(g, CMF_E_BOUNDS);
    header(g, 3, 0, 1);
    str(g, "k");
    u32(g, CMF_GGUF_ARRAY);
    u32(g, CMF_GGUF_U64);
    u64(g, (1ULL << 61) + 1);
    EXPECT(g, CMF_E_BOUNDS);
    header(g, 3, 0, 1);
    str(g, "k");
    u32(g, CMF_GGUF_ARRAY);
    u32(g, CMF_GGUF_ARRAY);
    u64(g, 1);
    zeros(g, 16);
    EXPECT(g, CMF_E_PARSE);
    header(g, 3, 0, 1);
    str(g, "k");
    u32(g, 13);
    zeros(g, 8);
    EXPECT(g, CMF_E_PARSE);
    header(g, 3, 0, 1);
    str(g, "k");
    u32(g, CMF_GGUF_BOOL);
    g->b[g->n++] = 7;
    EXPECT(g, CMF_E_PARSE);

    /* duplicate keys and tensor names */
    header(g, 3, 0, 2);
    kv_u32(g, "k", 1);
    kv_u32(g, "k", 2);
    EXPECT(g, CMF_E_PARSE);
    header(g, 3, 2, 0);
    tinfo(g, "t", CMF_GGML_F32, 8, 1, 0);
    tinfo(g, "t", CMF_GGML_F32, 8, 1, 32);
    pad_to(g, 32);
    zeros(g, 64);
    EXPECT(g, CMF_E_PARSE);

    /* alignment: not a power of two, zero, huge, wrong type; default 32 */
    static const uint32_t bad_align[] = {3, 0, 1u << 31};
    for (size_t i = 0; i < 3; i++) {
        header(g, 3, 0, 1);
        kv_u32(g, "general.alignment", bad_align[i]);
        EXPECT(g, CMF_E_PARSE);
    }
    header(g, 3, 0, 1);
    str(g, "general.alignment");
    u32(g, CMF_GGUF_F32);
    u32(g, 0x42000000u);
    EXPECT(g, CMF_E_PARSE);
    header(g, 3, 1, 1);
    kv_u32(g, "general.alignment", 64);
    tinfo(g, "t", CMF_GGML_F32, 8, 1, 32); /* 32 is not a multiple of 64 */
    pad_to(g, 64);
    zeros(g, 96);
    EXPECT(g, CMF_E_PARSE);
    header(g, 3, 1, 0);
    tinfo(g, "t", CMF_GGML_F32, 8, 1, 16); /* default alignment 32 */
    pad_to(g, 32);
    zeros(g, 64);
    EXPECT(g, CMF_E_PARSE);

    /* tensor spans: past EOF, offset near 2^64 (wraps), overlap */
    header(g, 3, 1, 0);
    tinfo(g, "t", CMF_GGML_F32, 8, 2, 0);
    pad_to(g, 32);
    zeros(g, 63);
    EXPECT(g, CMF_E_BOUNDS);
    header(g, 3, 1, 0);
    tinfo(g, "t", CMF_GGML_F32, 8, 1, UINT64_MAX - 31);
    pad_to(g, 32);
    zeros(g, 32);
    EXPECT(g, CMF_E_BOUNDS);
    header(g, 3, 2, 0);
    tinfo(g, "t1", CMF_GGML_F32, 16, 1, 0);
    tinfo(g, "t2", CMF_GGML_F32, 8, 1, 32);
    pad_to(g, 32);
    zeros(g, 96);
    EXPECT(g, CMF_E_PARSE);

    /* shapes and types: element count overflow, 5 dims, zero dims, unknown type, row vs block */
    header(g, 3, 1, 0);
    tinfo(g, "t", CMF_GGML_F32, 1ULL << 32, 1ULL << 32, 0);
    EXPECT(g, CMF_E_PARSE);
    header(g, 3, 1, 0);
    tinfo(g, "t", CMF_GGML_F32, 1ULL << 40, 1ULL << 23, 0); /* numel fine, bytes overflow */
    EXPECT(g, CMF_E_PARSE);
    header(g, 3, 1, 0);
    str(g, "t");
    u32(g, 5);
    for (int i = 0; i < 5; i++)
        u64(g, 1);
    u32(g, 0);
    u64(g, 0);
    EXPECT(g, CMF_E_PARSE);
    header(g, 3, 1, 0);
    str(g, "t");
    u32(g, 0);
    u32(g, 0);
    u64(g, 0);
    zeros(g, 32);
    EXPECT(g, CMF_E_PARSE);
    header(g, 3, 1, 0);
    tinfo(g, "t", 99, 32, 1, 0);
    pad_to(g, 32);
    zeros(g, 64);
    EXPECT(g, CMF_E_UNSUPPORTED);
    header(g, 3, 1, 0);
    tinfo(g, "t", CMF_GGML_Q4_0, 48, 1, 0);
    pad_to(g, 32);
    zeros(g, 64);
    EXPECT(g, CMF_E_PARSE);
    header(g, 3, 1, 0);
    u64(g, 0); /* empty tensor name */
    zeros(g, 32);
    EXPECT(g, CMF_E_PARSE);

    /* a type that opens but does not dequantize names itself */
    header(g, 3, 1, 0);
    tinfo(g, "iq", 20 /* IQ4_NL */, 32, 1, 0);
    pad_to(g, 32);
    zeros(g, 32);
    h = NULL;
    CHECK_STATUS(cmf_gguf_open_memory(g->b, g->n, "iq.gguf", &h, &t_err_), CMF_OK);
    if (h) {
        float out[32];
        cmf_status st = cmf_gguf_tensor_rows_f32(h, cmf_gguf_tensor_at(h, 0), 0, 1, out, &err);
        CHECK(st == CMF_E_UNSUPPORTED && strstr(err.msg, "IQ4_NL") && strstr(err.msg, "'iq'"));
    }
    cmf_gguf_close(h);

    CHECK_STATUS(cmf_gguf_open("/nonexistent/x.gguf", &h, &t_err_), CMF_E_IO);
    free(g);
    TEST_DONE();
}
