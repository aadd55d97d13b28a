/* envelope.c - the fixed 128-byte envelope (spec §1) and feature-bit names (§1.1). */
#include <string.h>

#include "common/bytes.h"
#include "common/err.h"
#include "cortiq/format.h"

static const char *const k_feature_names[] = {
    "TENSOR_DIR", "BINARY_MASKS", "QUANT_2F",   "DELTA_MASKS",
    "HOT_PACKS",  "LOOP_MASKS",   "SKILL_FILE",
};

const char *cmf_feature_name(unsigned bit) {
    return bit < sizeof k_feature_names / sizeof k_feature_names[0] ? k_feature_names[bit] : NULL;
}

cmf_status cmf_envelope_parse(const uint8_t b[CMF_ENVELOPE_SIZE], cmf_envelope *e, const char *ctx,
                              cmf_err *err) {
    if (memcmp(b, CMF_MAGIC, 4) != 0)
        return cmf_err_set(err, CMF_E_INVALID_MAGIC, ctx,
                           "magic is %02x %02x %02x %02x, want 43 4d 46 01 (\"CMF\\x01\")", b[0],
                           b[1], b[2], b[3]);
    e->version = ld_u32(b + 0x04);
    e->flags = ld_u32(b + 0x08);
    e->required_features = ld_u32(b + 0x0C);
    e->header_off = ld_u64(b + 0x10);
    e->header_len = ld_u64(b + 0x18);
    e->dir_off = ld_u64(b + 0x20);
    e->dir_len = ld_u64(b + 0x28);
    e->data_off = ld_u64(b + 0x30);
    e->data_len = ld_u64(b + 0x38);
    e->masks_off = ld_u64(b + 0x40);
    e->masks_len = ld_u64(b + 0x48);
    e->vocab_off = ld_u64(b + 0x50);
    e->vocab_len = ld_u64(b + 0x58);
    e->index_off = ld_u64(b + 0x60);
    e->index_len = ld_u64(b + 0x68);
    e->header_hash = ld_u64(b + 0x70);
    e->dir_hash = ld_u64(b + 0x78);
    if (e->version != CMF_VERSION)
        return cmf_err_set(err, CMF_E_UNSUPPORTED_VERSION, ctx,
                           "version %u, this reader knows only %d", e->version, CMF_VERSION);
    uint32_t unknown = e->required_features & ~(uint32_t)CMF_FEAT_KNOWN;
    if (unknown) {
        unsigned bit = (unsigned)__builtin_ctz(unknown);
        const char *name = cmf_feature_name(bit);
        return cmf_err_set(
            err, CMF_E_UNSUPPORTED_FEATURE, ctx,
            "required_features bit %u (%s) is set; this reader does not implement it", bit,
            name ? name : "unassigned");
    }
    if (!(e->required_features & CMF_FEAT_TENSOR_DIR))
        return cmf_err_set(err, CMF_E_PARSE, ctx,
                           "required_features=0x%x lacks TENSOR_DIR (bit 0), which v2 always sets",
                           e->required_features);
    if (e->flags != 0)
        return cmf_err_set(err, CMF_E_PARSE, ctx, "envelope flags=0x%x, reserved and must be 0",
                           e->flags);
    return CMF_OK;
}

void cmf_envelope_write(const cmf_envelope *e, uint8_t b[CMF_ENVELOPE_SIZE]) {
    memcpy(b, CMF_MAGIC, 4);
    st_u32(b + 0x04, CMF_VERSION);
    st_u32(b + 0x08, e->flags);
    st_u32(b + 0x0C, e->required_features);
    st_u64(b + 0x10, e->header_off);
    st_u64(b + 0x18, e->header_len);
    st_u64(b + 0x20, e->dir_off);
    st_u64(b + 0x28, e->dir_len);
    st_u64(b + 0x30, e->data_off);
    st_u64(b + 0x38, e->data_len);
    st_u64(b + 0x40, e->masks_off);
    st_u64(b + 0x48, e->masks_len);
    st_u64(b + 0x50, e->vocab_off);
    st_u64(b + 0x58, e->vocab_len);
    st_u64(b + 0x60, e->index_off);
    st_u64(b + 0x68, e->index_len);
    st_u64(b + 0x70, e->header_hash);
    st_u64(b + 0x78, e->dir_hash);
}
