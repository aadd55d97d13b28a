/* Every validation rule of spec §1.2 and the extra rules, each from a crafted file:
 * a valid sample is mutated, its metadata hashes recomputed (so the structural rule, not the
 * hash, is what fires), and cmf_open_memory must return the right error kind. */
#include "common/bytes.h"
#include "cortiq/hash.h"
#include "sample.h"
#include "test.h"

static uint8_t *g_ref;
static size_t g_len;
static cmf_envelope g_env;

static uint8_t *fresh(void) {
    uint8_t *b = malloc(g_len);
    memcpy(b, g_ref, g_len);
    return b;
}

static void rehash(uint8_t *b, size_t len) {
    cmf_envelope e;
    if (cmf_envelope_parse(b, &e, "t", NULL) != CMF_OK) return;
    if (e.header_off + e.header_len <= len)
        st_u64(b + 0x70, cmf_hash64(b + e.header_off, e.header_len));
    if (e.dir_off + e.dir_len <= len) st_u64(b + 0x78, cmf_hash64(b + e.dir_off, e.dir_len));
}

static cmf_status open_img(const uint8_t *b, size_t len, unsigned flags, cmf_err *err) {
    cmf_file *f = NULL;
    cmf_status st = cmf_open_memory(b, len, "crafted.cmf", flags, &f, err);
    cmf_close(f);
    return st;
}

#define EXPECT(b, len, flags, want, substr)                                                        \
    do {                                                                                           \
        cmf_err e_;                                                                                \
        cmf_err_clear(&e_);                                                                        \
        cmf_status s_ = open_img(b, len, flags, &e_);                                              \
        CHECK_MSG(s_ == (want), "got %s (%s), want %s", cmf_status_name(s_), e_.msg,               \
                  cmf_status_name(want));                                                          \
        CHECK_MSG(strstr(e_.msg, substr) != NULL, "message '%s' lacks '%s'", e_.msg, substr);      \
        CHECK_MSG((want) == CMF_OK || strncmp(e_.msg, "crafted.cmf: ", 13) == 0,                   \
                  "message '%s' does not name the file", e_.msg);                                  \
    } while (0)

static uint8_t *rec(uint8_t *b, size_t i) {
    return b + g_env.dir_off + 16 + i * CMF_DIR_RECORD_SIZE;
}

static size_t find_rec(const char *name) {
    const uint8_t *d = g_ref + g_env.dir_off;
    uint64_t n = ld_u64(d), pool = ld_u64(d + 8);
    for (size_t i = 0; i < n; i++) {
        const uint8_t *r = d + 16 + i * CMF_DIR_RECORD_SIZE;
        if (ld_u16(r + 4) == strlen(name) && !memcmp(d + pool + ld_u32(r), name, strlen(name)))
            return i;
    }
    return (size_t)-1;
}

static void test_envelope(void) {
    uint8_t *b = fresh();
    b[3] = 2;
    EXPECT(b, g_len, 0, CMF_E_INVALID_MAGIC, "magic");
    free(b);
    b = fresh();
    st_u32(b + 4, 3);
    EXPECT(b, g_len, 0, CMF_E_UNSUPPORTED_VERSION, "version 3");
    st_u32(b + 4, 1);
    EXPECT(b, g_len, 0, CMF_E_UNSUPPORTED_VERSION, "version 1");
    free(b);
    b = fresh();
    st_u32(b + 0xC, ld_u32(b + 0xC) | (1u << 3));
    EXPECT(b, g_len, 0, CMF_E_UNSUPPORTED_FEATURE, "DELTA_MASKS");
    st_u32(b + 0xC, ld_u32(g_ref + 0xC) | (1u << 9));
    EXPECT(b, g_len, 0, CMF_E_UNSUPPORTED_FEATURE, "bit 9");
    st_u32(b + 0xC, ld_u32(g_ref + 0xC) | (1u << 5));
    EXPECT(b, g_len, 0, CMF_E_UNSUPPORTED_FEATURE, "LOOP_MASKS");
    st_u32(b + 0xC, ld_u32(g_ref + 0xC) & ~1u);
    EXPECT(b, g_len, 0, CMF_E_PARSE, "TENSOR_DIR");
    free(b);
    b = fresh();
    st_u32(b + 8, 1);
    EXPECT(b, g_len, 0, CMF_E_PARSE, "flags");
    free(b);
    EXPECT(g_ref, 0, 0, CMF_E_BOUNDS, "smaller than the 128-byte envelope");
    EXPECT(g_ref, 100, 0, CMF_E_BOUNDS, "smaller than the 128-byte envelope");
    EXPECT(g_ref, g_len - 1, 0, CMF_E_BOUNDS, "past EOF");
    b = fresh();
    st_u64(b + 0x30, g_env.data_off + 64);
    EXPECT(b, g_len, 0, CMF_E_BOUNDS, "data_off=");
    free(b);
    b = fresh();
    st_u64(b + 0x10, 64);
    EXPECT(b, g_len, 0, CMF_E_BOUNDS, "overlaps the 128-byte envelope");
    free(b);
    b = fresh();
    st_u64(b + 0x58, 5); /* index absent (off 0) but len 5 */
    st_u64(b + 0x68, 5);
    EXPECT(b, g_len, 0, CMF_E_BOUNDS, "index_off=0");
    free(b);
    b = fresh();
    st_u64(b + 0x50, g_env.header_off); /* vocab over the header */
    EXPECT(b, g_len, 0, CMF_E_BOUNDS, "overlaps");
    free(b);
    b = fresh();
    st_u64(b + 0x28, UINT64_MAX); /* dir_len past EOF, wrapping */
    EXPECT(b, g_len, 0, CMF_E_BOUNDS, "directory section");
    free(b);
}

static void test_directory(void) {
    uint8_t *b = fresh();
    uint8_t *d = b + g_env.dir_off;
    st_u64(d, UINT64_MAX);
    rehash(b, g_len);
    EXPECT(b, g_len, 0, CMF_E_BOUNDS, "count=18446744073709551615");
    st_u64(d, ld_u64(g_ref + g_env.dir_off) + 20);
    rehash(b, g_len);
    EXPECT(b, g_len, 0, CMF_E_BOUNDS, "count=");
    free(b);
    b = fresh();
    d = b + g_env.dir_off;
    st_u64(d + 8, 16);
    rehash(b, g_len);
    EXPECT(b, g_len, 0, CMF_E_BOUNDS, "pool_off=16");
    free(b);

    size_t i = find_rec("lm_head.weight"),
           v = find_rec("skill.sql.model.layers.0.mlp.up_proj.weight");
    CHECK(i != (size_t)-1 && v != (size_t)-1);
    struct {
        size_t at; /* byte within the record */
        int width; /* 1, 2, 4, 8 */
        uint64_t value;
        cmf_status want;
        const char *msg;
    } cases[] = {
        {0, 4, 1u << 30, CMF_E_BOUNDS, "name_off=1073741824"},
        {4, 2, 65535, CMF_E_BOUNDS, "name_len=65535"},
        {4, 2, 0, CMF_E_PARSE, "empty name"},
        {6, 1, 99, CMF_E_PARSE, "unknown dtype id 99"},
        {6, 1, 5, CMF_E_PARSE, "reserved"},
        {6, 1, 7, CMF_E_PARSE, "q4_col"},
        {7, 1, 7, CMF_E_PARSE, "ndim=7"},
        {8, 4, 0, CMF_E_PARSE, "zero dimension"},
        {20, 4, 3, CMF_E_PARSE, "shape[3]=3"},
        {32, 8, 32, CMF_E_BOUNDS, "not a multiple of 64"},
        {32, 8, UINT64_MAX - 63, CMF_E_BOUNDS, "off+nbytes="},
        {40, 8, 32 * 64 * 4 + 1, CMF_E_PARSE, "nbytes=8193"},
        {40, 8, 32 * 64 * 4 - 4, CMF_E_PARSE, "8192 bytes"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        b = fresh();
        uint8_t *r = rec(b, i) + cases[k].at;
        switch (cases[k].width) {
        case 1:
            *r = (uint8_t)cases[k].value;
            break;
        case 2:
            st_u16(r, (uint16_t)cases[k].value);
            break;
        case 4:
            st_u32(r, (uint32_t)cases[k].value);
            break;
        default:
            st_u64(r, cases[k].value);
        }
        rehash(b, g_len);
        EXPECT(b, g_len, 0, cases[k].want, cases[k].msg);
        free(b);
    }
    /* off exactly at the end of the data section */
    b = fresh();
    st_u64(rec(b, i) + 32, (g_env.data_len + 63) / 64 * 64);
    rehash(b, g_len);
    EXPECT(b, g_len, 0, CMF_E_BOUNDS, "data_len=");
    free(b);
    /* variable-length dtype outside its possible range */
    b = fresh();
    st_u64(rec(b, v) + 40, 10);
    rehash(b, g_len);
    EXPECT(b, g_len, 0, CMF_E_PARSE, "outside [");
    free(b);
    /* invalid UTF-8 name */
    b = fresh();
    d = b + g_env.dir_off;
    b[g_env.dir_off + ld_u64(d + 8) + ld_u32(rec(b, i))] = 0xC3; /* lead byte then 'm' */
    rehash(b, g_len);
    EXPECT(b, g_len, 0, CMF_E_PARSE, "not valid UTF-8");
    free(b);
    /* duplicate names: record i takes record 0's name */
    b = fresh();
    memcpy(rec(b, i), rec(b, 0), 6);
    memcpy(rec(b, i) + 6, rec(b, 0) + 6, 50); /* same shape/dtype so size rules pass */
    rehash(b, g_len);
    EXPECT(b, g_len, 0, CMF_E_PARSE, "duplicate tensor name 'model.embed_tokens.weight'");
    free(b);
}

static void test_header_and_hashes(void) {
    uint8_t *b = fresh();
    b[g_env.header_off + 1] ^= 0x01;
    EXPECT(b, g_len, 0, CMF_E_HASH, "header hash64 mismatch");
    rehash(b, g_len);
    EXPECT(b, g_len, 0, CMF_E_PARSE, "header JSON invalid");
    free(b);
    b = fresh();
    b[g_env.dir_off + 20] ^= 0x40;
    EXPECT(b, g_len, 0, CMF_E_HASH, "directory hash64 mismatch");
    free(b);
    b = fresh();
    b[g_env.vocab_off] ^= 0x20;
    EXPECT(b, g_len, 0, CMF_E_HASH, "vocab section hash64 mismatch");
    free(b);
    /* feature consistency */
    b = fresh();
    st_u32(b + 0xC, ld_u32(b + 0xC) & ~(uint32_t)CMF_FEAT_BINARY_MASKS);
    EXPECT(b, g_len, 0, CMF_E_PARSE, "BINARY_MASKS");
    st_u32(b + 0xC, ld_u32(g_ref + 0xC) & ~(uint32_t)CMF_FEAT_QUANT_2F);
    EXPECT(b, g_len, 0, CMF_E_PARSE, "QUANT_2F");
    st_u32(b + 0xC, ld_u32(g_ref + 0xC) | CMF_FEAT_SKILL_FILE);
    EXPECT(b, g_len, 0, CMF_E_PARSE, "SKILL_FILE");
    free(b);
    /* a mask with a tail bit set (layer 0 FFN byte 4 has 8 bits of which only... dim 40 is a
       multiple of 8, so use the heads row: 4 heads, bit 5 set) */
    b = fresh();
    const uint8_t *mb = g_ref + g_env.masks_off;
    uint32_t meta_len = ld_u32(mb + 4);
    size_t blob = (8 + meta_len + 7) / 8 * 8;
    b[g_env.masks_off + blob + 2 * 5] |= 0x20;
    EXPECT(b, g_len, CMF_OPEN_SKIP_META_HASH, CMF_E_PARSE, "past num_attention_heads=4");
    free(b);
    b = fresh();
    st_u32(b + g_env.masks_off, 3); /* n_masks disagrees with meta */
    EXPECT(b, g_len, CMF_OPEN_SKIP_META_HASH, CMF_E_PARSE, "n_masks=3");
    st_u32(b + g_env.masks_off, 2);
    st_u32(b + g_env.masks_off + 4, (uint32_t)g_env.masks_len);
    EXPECT(b, g_len, CMF_OPEN_SKIP_META_HASH, CMF_E_BOUNDS, "meta_len=");
    free(b);
}

static void header_case(const char *json, cmf_status want, const char *substr) {
    cmf_header h;
    cmf_err err;
    cmf_err_clear(&err);
    cmf_status st = cmf_header_parse(json, strlen(json), &h, "h.cmf", &err);
    CHECK_MSG(st == want, "%s: got %s (%s)", json, cmf_status_name(st), err.msg);
    if (substr) CHECK_MSG(strstr(err.msg, substr) != NULL, "'%s' lacks '%s'", err.msg, substr);
    if (!st) cmf_header_free(&h);
}

static void test_header_json(void) {
    header_case("{}", CMF_OK, NULL);
    header_case("{\"unknown\": [1, {\"x\": null}], \"arch\": {\"new_thing\": 5}}", CMF_OK, NULL);
    header_case("{", CMF_E_PARSE, "header JSON invalid");
    header_case("[]", CMF_E_PARSE, "must be an object");
    header_case("{\"a\": 1, \"a\": 2}", CMF_E_PARSE, "duplicate");
    header_case("{\"format\": \"gguf\"}", CMF_E_PARSE, "format=\"gguf\"");
    header_case("{\"version\": 3}", CMF_E_PARSE, "version");
    header_case("{\"arch\": {\"hidden_size\": \"big\"}}", CMF_E_PARSE, "arch.hidden_size");
    header_case("{\"arch\": {\"hidden_size\": -4}}", CMF_E_PARSE, "arch.hidden_size");
    header_case("{\"arch\": {\"hidden_size\": 4096.0}}", CMF_OK, NULL);
    header_case("{\"arch\": {\"norm_style\": \"llama\"}}", CMF_E_PARSE, "norm_style=\"llama\"");
    header_case("{\"arch\": {\"num_layers\": 2, \"layer_types\": [\"FullAttention\"]}}",
                CMF_E_PARSE, "1 entries");
    header_case("{\"arch\": {\"num_layers\": 2, \"attention_heads_per_layer\": [8, 0]}}",
                CMF_E_PARSE, "[1]");
    header_case("{\"arch\": {\"yarn\": {\"factor\": 2}}}", CMF_E_PARSE,
                "original_max_position_embeddings");
    header_case("{\"arch\": {\"moe\": {\"num_experts\": 4, \"top_k\": 8}}}", CMF_E_PARSE,
                "top_k=8");
    header_case("{\"arch\": {\"mtp\": {\"share_embed\": true}}}", CMF_E_PARSE, "mtp.num_layers");
    header_case("{\"arch\": {\"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": 8.0}}}",
                CMF_OK, NULL);
    header_case("{\"arch\": {\"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": 0}}}",
                CMF_E_PARSE, "rope_scaling");
    header_case("{\"arch\": {\"rope_scaling\": [8]}}", CMF_E_PARSE,
                "arch.rope_scaling must be an object");
    header_case("{\"arch\": {\"rope_theta\": 1e999}}", CMF_E_PARSE, NULL);
    header_case("{\"tokenizer_config\": {\"eos_token_ids\": [1, -2]}}", CMF_E_PARSE,
                "eos_token_ids[1]");
    header_case("{\"tokenizer_config\": null}", CMF_OK, NULL);
    header_case("{\"shard\": {\"no\": 3, \"count\": 2}}", CMF_E_PARSE, "no=3, count=2");
    header_case("{\"skills\": [{\"id\": \"a\"}, {\"id\": \"a\"}]}", CMF_E_PARSE, "duplicates");
    header_case("{\"skills\": [{\"name\": \"x\"}]}", CMF_E_PARSE, "skills[0].id");
    header_case("{\"skills\": [{\"id\": \"a\", \"base_dir_hash\": \"zz\"}]}", CMF_E_PARSE,
                "base_dir_hash=\"zz\"");
    header_case("{\"section_hashes\": {\"vocab\": \"0x12\"}}", CMF_E_PARSE, "section_hashes.vocab");
    header_case("{\"arch\": {\"arch_name\": \"\\u0000x\"}}", CMF_E_PARSE, NULL);
    const char bad_utf8[] = {'{', '"', 'a', '"', ':', '"', (char)0xff, '"', '}', 0};
    header_case(bad_utf8, CMF_E_PARSE, "header JSON invalid");
}

int main(void) {
    cmf_err err;
    CHECK_MSG(sample_write("errors_sample.cmf", NULL, &err) == CMF_OK, "%s", err.msg);
    g_ref = slurp("errors_sample.cmf", &g_len);
    CHECK(g_ref && cmf_envelope_parse(g_ref, &g_env, "x", NULL) == CMF_OK);
    if (!g_ref) TEST_DONE();
    EXPECT(g_ref, g_len, 0, CMF_OK, "");
    test_envelope();
    test_directory();
    test_header_and_hashes();
    test_header_json();
    free(g_ref);
    TEST_DONE();
}
