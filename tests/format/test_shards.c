/* Sharding (spec §10): a sample split into several files opens from any member name, merges
 * its directories, verifies, and fails loudly on a missing sibling or a count mismatch. */
#include <unistd.h>

#include "sample.h"
#include "test.h"

int main(void) {
    cmf_err err;
    cmf_writer_opts o = {.shard_max_bytes = 12000};
    system("rm -f shardy*.cmf");
    CHECK_MSG(sample_write("shardy.cmf", &o, &err) == CMF_OK, "%s", err.msg);
    cmf_file *whole = NULL;
    CHECK_MSG(sample_write("unsharded.cmf", NULL, &err) == CMF_OK, "%s", err.msg);
    CHECK(cmf_open("unsharded.cmf", 0, &whole, &err) == CMF_OK);
    if (!whole) TEST_DONE();

    char name[64];
    unsigned count = 0;
    for (unsigned c = 2; c < 10 && !count; c++) {
        cmf_shard_name(name, sizeof name, "shardy", 1, c);
        if (access(name, F_OK) == 0) count = c;
    }
    CHECK_MSG(count >= 3, "expected at least 3 shards, got %u", count);
    char base[64];
    unsigned no, cnt;
    CHECK(cmf_shard_parse_name("dir/m-00002-of-00005.cmf", base, sizeof base, &no, &cnt) &&
          no == 2 && cnt == 5 && !strcmp(base, "dir/m"));
    CHECK(!cmf_shard_parse_name("m-00006-of-00005.cmf", base, sizeof base, &no, &cnt));
    CHECK(!cmf_shard_parse_name("m.cmf", base, sizeof base, &no, &cnt));

    for (unsigned i = 1; i <= count; i++) {
        cmf_shard_name(name, sizeof name, "shardy", i, count);
        /* every shard stands alone */
        cmf_file *one = NULL;
        CHECK_MSG(cmf_open(name, 0, &one, &err) == CMF_OK, "%s", err.msg);
        if (one) {
            const cmf_header *h = cmf_file_header(one);
            CHECK(h->has_shard && h->shard_no == i && h->shard_count == count);
            CHECK((i == 1) == h->tokenizer_config.present);
            CHECK((i == 1) == (h->n_skills == 1));
            CHECK((i == 1) == (cmf_file_masks(one) != NULL));
            CHECK((i == 1) == (cmf_file_vocab(one, NULL) != NULL));
            CHECK(cmf_verify(one, 1, NULL, NULL, NULL) == CMF_OK);
            cmf_close(one);
        }
        /* any member name opens the whole model */
        cmf_file *m = NULL;
        CHECK_MSG(cmf_open_model(name, 0, &m, &err) == CMF_OK, "%s", err.msg);
        if (!m) continue;
        CHECK(cmf_file_shard_count(m) == count);
        CHECK(cmf_file_tensor_count(m) == cmf_file_tensor_count(whole));
        for (size_t k = 0; k < cmf_file_tensor_count(whole); k++) {
            const cmf_tensor *a = cmf_file_tensor_at(whole, k), *b = cmf_file_find(m, a->name);
            CHECK_MSG(b && b->nbytes == a->nbytes && b->hash == a->hash &&
                          !memcmp(a->data, b->data, a->nbytes),
                      "%s", a->name);
        }
        CHECK(cmf_file_tensor_at(m, cmf_file_tensor_count(m) - 1)->shard == count - 1);
        CHECK(cmf_file_masks(m) && cmf_file_header(m)->tokenizer_config.present);
        CHECK(cmf_verify(m, 2, NULL, NULL, NULL) == CMF_OK);
        cmf_close(m);
    }
    /* a missing sibling */
    char moved[80];
    cmf_shard_name(name, sizeof name, "shardy", count, count);
    snprintf(moved, sizeof moved, "%s.away", name);
    rename(name, moved);
    cmf_shard_name(name, sizeof name, "shardy", 1, count);
    cmf_file *m = NULL;
    cmf_err_clear(&err);
    CHECK(cmf_open_model(name, 0, &m, &err) == CMF_E_SHARD && strstr(err.msg, "missing"));
    cmf_shard_name(name, sizeof name, "shardy", count, count);
    rename(moved, name);
    /* a count mismatch: the same files under names that claim one shard fewer */
    char renamed[64];
    for (unsigned i = 1; i < count; i++) {
        cmf_shard_name(name, sizeof name, "shardy", i, count);
        cmf_shard_name(renamed, sizeof renamed, "fewer", i, count - 1);
        char cmd[200];
        snprintf(cmd, sizeof cmd, "cp %s %s", name, renamed);
        system(cmd);
    }
    cmf_shard_name(renamed, sizeof renamed, "fewer", 1, count - 1);
    cmf_err_clear(&err);
    CHECK(cmf_open_model(renamed, 0, &m, &err) == CMF_E_SHARD &&
          strstr(err.msg, "expected shard block"));
    /* a shard renamed away from the pattern cannot find its siblings */
    cmf_shard_name(name, sizeof name, "shardy", 2, count);
    system("rm -f lonely.cmf");
    rename(name, "lonely.cmf");
    cmf_err_clear(&err);
    CHECK(cmf_open_model("lonely.cmf", 0, &m, &err) == CMF_E_SHARD && strstr(err.msg, "non-first"));
    CHECK(cmf_open_model("lonely.cmf", CMF_OPEN_NO_SHARDS, &m, &err) == CMF_OK);
    cmf_close(m);
    rename("lonely.cmf", name);
    cmf_close(whole);
    TEST_DONE();
}
