/* cmf_moe_mask_add (`cortiq moe-mask`, spec §5 expert area, §9 append-only) on the tiny qwen3_moe
 * file: the mask's expert area holds the chosen sets and its FFN, head and gate areas are all
 * ones; quality is null; a second mask keeps the first (bits, description); the file grows
 * append-only; the "general" default the other implementation's reader needs names no mask and
 * reads as none; a duplicate name is refused and the file left as it was. */
#include <sys/stat.h>

#include "common/test.h"
#include "cortiq/moe.h"
#include "engine/tiny_fixture.h"

#define FILE_ "moe_mask_file.cmf"
#define STATS "moe_mask_file.json"

static uint8_t *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    *len = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc(*len ? *len : 1);
    if (b && fread(b, 1, *len, f) != *len) free(b), b = NULL;
    fclose(f);
    return b;
}

static cmf_moe_keep keep_at(const char *path, double cover) {
    cmf_moe_keep k = {0};
    cmf_file *f = NULL;
    cmf_err err;
    CHECK(cmf_open(path, 0, &f, &err) == CMF_OK);
    if (f) CHECK_MSG(cmf_moe_keep_from_stats(f, STATS, cover, &k, &err) == CMF_OK, "%s", err.msg);
    cmf_close(f);
    return k;
}

/* mask `name` of path carries k's expert rows and all-ones elsewhere */
static void check_mask(const cmf_file *f, const char *name, const cmf_moe_keep *k) {
    const cmf_masks *ms = cmf_file_masks(f);
    const cmf_mask *m = ms ? cmf_masks_find(ms, name) : NULL;
    CHECK_MSG(m, "mask %s absent", name);
    if (!m) return;
    CHECK(m->has_expert_fields && m->experts && !m->quality_json);
    for (uint32_t l = 0; l < ms->n_layers; l++) {
        CHECK(cmf_mask_ffn_active(ms, m, l) == ms->intermediate);
        CHECK(cmf_mask_heads_active(ms, m, l) == ms->n_heads);
        CHECK(!memcmp(m->experts + l * ms->expert_bytes, k->bits + l * k->expert_bytes,
                      ms->expert_bytes));
        CHECK(cmf_mask_experts_active(ms, m, l) == k->kept[l]);
    }
    CHECK(cmf_mask_layers_active(ms, m) == ms->n_layers);
}

int main(void) {
    size_t nt = 0;
    int32_t *tokens = tiny_convert("qwen3_moe", "f32", FILE_, &nt);
    if (!tokens) TEST_DONE();
    free(tokens);
    FILE *s = fopen(STATS, "w");
    CHECK(s);
    if (!s) TEST_DONE();
    fputs("{\"0\":[38,6,106,140],\"1\":[69,123,44,54]}", s);
    fclose(s);
    cmf_moe_keep a = keep_at(FILE_, 0.7), b = keep_at(FILE_, 0.95);
    /* 0.7 of 290: 140 + 106 = 246 >= 203 -> experts 2, 3; of 290 in layer 1: 123 + 69 = 192 < 203,
     * + 54 -> experts 1, 0, 3 */
    CHECK(a.kept[0] == 2 && a.bits[0] == 0x0C && a.kept[1] == 3 && a.bits[a.expert_bytes] == 0x0B);
    size_t len0, len1, len2;
    uint8_t *v0 = slurp(FILE_, &len0);
    cmf_err err;
    CHECK_MSG(cmf_moe_mask_add(FILE_, NULL, &a, "code", &err) == CMF_OK, "%s", err.msg);
    uint8_t *v1 = slurp(FILE_, &len1);
    CHECK(v0 && v1 && len1 > len0 && !memcmp(v0 + 128, v1 + 128, len0 - 128));
    CHECK_MSG(cmf_moe_mask_add(FILE_, NULL, &b, "prose", &err) == CMF_OK, "%s", err.msg);
    cmf_status st = cmf_moe_mask_add(FILE_, NULL, &b, "code", &err);
    CHECK_MSG(st == CMF_E_INVALID_ARG && strstr(err.msg, "'code' exists already"), "%s", err.msg);
    uint8_t *v2 = slurp(FILE_, &len2);
    CHECK(v2 && len2 > len1 && !memcmp(v1 + 128, v2 + 128, len1 - 128));
    cmf_file *f = NULL;
    CHECK(cmf_open(FILE_, CMF_OPEN_VERIFY_TENSORS, &f, &err) == CMF_OK);
    if (f) {
        const cmf_masks *ms = cmf_file_masks(f);
        CHECK(ms && ms->n_masks == 2 && !ms->default_task);
        check_mask(f, "code", &a);
        check_mask(f, "prose", &b);
        const cmf_mask *m = ms ? cmf_masks_find(ms, "code") : NULL;
        CHECK(m && m->description && strstr(m->description, "0.7"));
        /* the other implementation's reader needs default_task: "general", naming no mask */
        size_t sl;
        const uint8_t *img = cmf_file_shard_bytes(f, 0, &sl);
        const cmf_envelope *e = cmf_file_envelope(f);
        CHECK(memmem(img + e->masks_off, e->masks_len, "\"default_task\":\"general\"", 24));
    }
    cmf_close(f);
    free(v0), free(v1), free(v2);
    cmf_moe_keep_free(&a);
    cmf_moe_keep_free(&b);
    TEST_DONE();
}
