/* hash64 (spec §8): the shared test vectors, every SIMD tier against scalar, streaming. */
#include <jansson.h>

#include "common/cpu.h"
#include "cortiq/hash.h"
#include "format/hash64_impl.h"
#include "test.h"
#include "tier.h"

static size_t vector_input(const char *desc, uint8_t *buf) {
    if (!strcmp(desc, "empty")) return 0;
    if (!strcmp(desc, "ascii 'a'")) return memcpy(buf, "a", 1), 1;
    if (!strcmp(desc, "ascii 'CMF'")) return memcpy(buf, "CMF", 3), 3;
    if (!strcmp(desc, "ascii 'model.embed_tokens.weight'"))
        return memcpy(buf, "model.embed_tokens.weight", 25), 25;
    if (!strcmp(desc, "8 zero bytes")) return memset(buf, 0, 8), 8;
    if (!strcmp(desc, "4096 bytes of 0xff")) return memset(buf, 0xff, 4096), 4096;
    if (!strncmp(desc, "bytes i%251", 11)) {
        for (int i = 0; i < 1000; i++)
            buf[i] = (uint8_t)(i % 251);
        return 1000;
    }
    unsigned hi;
    if (sscanf(desc, "bytes 0x00..0x%x", &hi) == 1) {
        for (unsigned i = 0; i <= hi; i++)
            buf[i] = (uint8_t)i;
        return hi + 1;
    }
    return (size_t)-1;
}

static void test_vectors(void) {
    json_error_t je;
    json_t *root = json_load_file(CORTIQ_SOURCE_DIR "/tests/fixtures/hash64_vectors.json", 0, &je);
    CHECK_MSG(root != NULL, "cannot load vectors: %s", je.text);
    if (!root) return;
    json_t *cases = json_object_get(root, "cases");
    size_t i;
    json_t *c;
    int n = 0;
    static uint8_t buf[8192];
    json_array_foreach(cases, i, c) {
        const char *desc = json_string_value(json_object_get(c, "input"));
        size_t len = vector_input(desc, buf);
        CHECK_MSG(len != (size_t)-1, "unknown vector input '%s'", desc);
        if (len == (size_t)-1) continue;
        CHECK_EQ_U64(len, json_integer_value(json_object_get(c, "len")));
        char hex[17];
        for (int isa = CQ_ISA_SCALAR; isa <= CQ_ISA_AVX512; isa++) {
            if (!test_tier_on((cq_isa)isa)) continue;
            cq_cpu_force((cq_isa)isa);
            cmf_hash64_to_hex(cmf_hash64(buf, len), hex);
            CHECK_MSG(!strcmp(hex, json_string_value(json_object_get(c, "hash64"))),
                      "%s [%s]: got %s want %s", desc, cq_isa_name(cq_cpu_isa()), hex,
                      json_string_value(json_object_get(c, "hash64")));
        }
        n++;
    }
    CHECK(n == 11);
    json_decref(root);
}

static void test_tiers_and_streaming(void) {
    size_t max = 70000;
    uint8_t *buf = malloc(max + 64);
    for (size_t i = 0; i < max + 64; i++)
        buf[i] = (uint8_t)(i * 2654435761u >> 13);
    size_t lens[] = {0,   1,   7,   8,   9,   63,   64,   65,         127,
                     128, 129, 255, 256, 257, 1000, 4096, 65536 + 24, max};
    for (size_t k = 0; k < sizeof lens / sizeof lens[0]; k++) {
        for (size_t mis = 0; mis < 3; mis++) { /* unaligned starts */
            cq_cpu_force(CQ_ISA_SCALAR);
            uint64_t ref = cmf_hash64(buf + mis, lens[k]);
            for (int isa = CQ_ISA_AVX2; isa <= CQ_ISA_AVX512; isa++) {
                if (!test_tier_on((cq_isa)isa)) continue;
                cq_cpu_force((cq_isa)isa);
                CHECK_MSG(cmf_hash64(buf + mis, lens[k]) == ref, "len %zu isa %s", lens[k],
                          cq_isa_name(cq_cpu_isa()));
                /* fold_words from an arbitrary first index equals the scalar fold */
                size_t nw = lens[k] / 8;
                CHECK(cmf_hash64_fold_words(buf + mis, nw, 12345) ==
                      hash64_fold_scalar(buf + mis, nw, 12345));
            }
            cq_cpu_force(CQ_ISA_AVX512);
            size_t pieces[] = {1, 3, 8, 13, 100, 4096};
            for (size_t p = 0; p < sizeof pieces / sizeof pieces[0]; p++) {
                cmf_hash64_state st;
                cmf_hash64_init(&st);
                for (size_t off = 0; off < lens[k]; off += pieces[p])
                    cmf_hash64_update(&st, buf + mis + off,
                                      lens[k] - off < pieces[p] ? lens[k] - off : pieces[p]);
                CHECK_MSG(cmf_hash64_final(&st) == ref, "streaming len %zu piece %zu", lens[k],
                          pieces[p]);
            }
        }
    }
    free(buf);
}

static void test_hex(void) {
    uint64_t v;
    CHECK(cmf_hash64_from_hex("9f22593eb458bc6f", &v) && v == 0x9f22593eb458bc6fULL);
    CHECK(cmf_hash64_from_hex("ABC", &v) && v == 0xabc);
    CHECK(!cmf_hash64_from_hex("", &v));
    CHECK(!cmf_hash64_from_hex("12345678901234567", &v));
    CHECK(!cmf_hash64_from_hex("xyz", &v));
    char hex[17];
    cmf_hash64_to_hex(0xabc, hex);
    CHECK(!strcmp(hex, "0000000000000abc"));
}

int main(int argc, char **argv) {
    test_tier_select(argc, argv);
    test_vectors();
    test_tiers_and_streaming();
    if (test_tier_on(CQ_ISA_SCALAR)) test_hex();
    TEST_DONE();
}
