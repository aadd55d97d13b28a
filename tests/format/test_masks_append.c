/* Replacing a file's masks section in place (cmf_append_set_masks, what `cortiq mask derive|rm`
 * do): every byte after the envelope up to the old end is unchanged, the new section is read
 * back, and the deprecated sparse index (spec §7), whose entries name the old masks' task ids,
 * is dropped rather than left naming a mask that no longer exists. */
#include "sample.h"
#include "test.h"

/* One index entry: task 1 ("code"), layer 0, FFN group 0, head 0. */
static const uint8_t k_index[] = {1, 0, 0, 0, 0, 0, 0, 0, /* n_entries, reserved */
                                  1, 0, 0, 0, 0, 0, 0, 0, 1, 0,
                                  0, 0, 1, 0, 0, 0, 0, 0, 0, 0}; /* group 0 (u16), head 0, pad */

static void write_with_index(const char *path) {
    cmf_err err;
    cmf_writer *w = NULL;
    CHECK(cmf_writer_create(path, NULL, &w, &err) == CMF_OK);
    CHECK(cmf_writer_set_header(w, sample_header_json(), strlen(sample_header_json()), &err) ==
          CMF_OK);
    static float x[64];
    sample_fill(x, 64, 3);
    uint64_t sh[2] = {1, 64};
    CHECK(cmf_writer_add_tensor(w, "extra.row", CMF_DT_F32, 2, sh, x, sizeof x, &err) == CMF_OK);
    size_t mlen = 0;
    uint8_t *masks = sample_masks(&mlen);
    CHECK(masks && cmf_writer_set_masks(w, masks, mlen, &err) == CMF_OK);
    free(masks);
    CHECK(cmf_writer_set_sparse_index(w, k_index, sizeof k_index, &err) == CMF_OK);
    CHECK_MSG(cmf_writer_finish(w, &err) == CMF_OK, "%s", err.msg);
    cmf_writer_free(w);
}

int main(void) {
    const char *path = "masks_append.cmf";
    write_with_index(path);
    cmf_err err;
    cmf_file *f = NULL;
    CHECK_MSG(cmf_open(path, 0, &f, &err) == CMF_OK, "%s", err.msg);
    CHECK(f && cmf_file_sparse_index(f) && cmf_file_sparse_index(f)->n_entries == 1);
    cmf_close(f);
    size_t old_len = 0;
    uint8_t *old = slurp(path, &old_len);
    /* the masks again without "code" (task 1) */
    cmf_masks_builder *b = NULL;
    CHECK(cmf_masks_builder_create(SAMPLE_LAYERS, SAMPLE_INTER, SAMPLE_HEADS, 4, &b, &err) ==
          CMF_OK);
    uint8_t ffn[SAMPLE_LAYERS * 5], heads[SAMPLE_LAYERS] = {0x0F, 0x0F}, gates[1] = {0x3};
    memset(ffn, 0xFF, sizeof ffn);
    ffn[4] = ffn[9] = 0x0F;
    CHECK(cmf_masks_builder_add(b, "general", NULL, ffn, heads, gates, NULL, NULL, &err) == CMF_OK);
    uint8_t *bytes = NULL;
    size_t len = 0;
    CHECK(cmf_masks_builder_build(b, &bytes, &len, &err) == CMF_OK);
    cmf_masks_builder_free(b);
    cmf_appender *a = NULL;
    CHECK(cmf_append_begin(path, &a, &err) == CMF_OK);
    CHECK(cmf_append_set_masks(a, bytes, len, &err) == CMF_OK);
    CHECK_MSG(cmf_append_commit(a, &err) == CMF_OK, "%s", err.msg);
    cmf_append_free(a);
    free(bytes);
    size_t new_len = 0;
    uint8_t *now = slurp(path, &new_len);
    CHECK(old && now && new_len > old_len);
    CHECK_MSG(old && now && !memcmp(old + 128, now + 128, old_len - 128),
              "bytes between the envelope and the old end changed");
    CHECK_MSG(cmf_open(path, CMF_OPEN_VERIFY_TENSORS, &f, &err) == CMF_OK, "%s", err.msg);
    const cmf_masks *ms = f ? cmf_file_masks(f) : NULL;
    CHECK(ms && ms->n_masks == 1 && !strcmp(ms->masks[0].name, "general"));
    CHECK(f && !cmf_file_sparse_index(f) && cmf_file_envelope(f)->index_off == 0);
    cmf_close(f);
    free(old), free(now);
    remove(path);
    TEST_DONE();
}
