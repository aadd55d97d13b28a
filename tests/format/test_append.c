/* Append-only growth (spec §9): new tensors and a new header land at the tail, earlier bytes
 * never change, and a crash at every write boundary leaves either the old or the new file. */
#include <errno.h>
#include <sys/types.h>
#include <unistd.h>

#include "sample.h"
#include "test.h"

/* The crash simulation: this program links with -Wl,--wrap=pwrite (tests/CMakeLists.txt), so
 * every pwrite of the library lands here. When fail_after >= 0, the fail_after-th following
 * call and every one after it fail without writing, as if the process had died there. */
static long fail_after = -1;
ssize_t __real_pwrite(int fd, const void *buf, size_t n, off_t off);
ssize_t __wrap_pwrite(int fd, const void *buf, size_t n, off_t off);
ssize_t __wrap_pwrite(int fd, const void *buf, size_t n, off_t off) {
    if (fail_after >= 0) {
        if (fail_after == 0) {
            errno = EIO;
            return -1;
        }
        fail_after--;
    }
    return __real_pwrite(fd, buf, n, off);
}

static const char *k_new_header =
    "{\"arch\": {\"arch_name\": \"llama\", \"hidden_size\": 64, \"intermediate_size\": 40, "
    "\"num_layers\": 2,"
    " \"num_attention_heads\": 4, \"moe\": {\"num_experts\": 4, \"top_k\": 2}},"
    " \"skills\": [{\"id\": \"sql\"}, {\"id\": \"chem\", \"name\": \"Chemistry\", \"layers\": "
    "[1]}]}";

static cmf_status do_append(const char *path, cmf_err *err) {
    cmf_appender *a;
    cmf_status st = cmf_append_begin(path, &a, err);
    if (st) return st;
    static float w[40 * 64];
    sample_fill(w, 40 * 64, 99);
    uint64_t sh[2] = {40, 64};
    st = cmf_append_add_tensor(a, "skill.chem.model.layers.1.mlp.up_proj.weight", CMF_DT_F32, 2, sh,
                               w, sizeof w, 0, err);
    if (!st)
        st = cmf_append_add_tensor(a, "skill.chem.model.layers.0.mlp.up_proj.weight", CMF_DT_F32, 2,
                                   sh, w, sizeof w, 0, err);
    uint64_t sh1[1] = {64};
    uint16_t ones[64];
    for (int i = 0; i < 64; i++)
        ones[i] = 0x3c00;
    if (!st)
        st = cmf_append_add_tensor(a, "model.layers.0.input_layernorm.weight", CMF_DT_F16, 1, sh1,
                                   ones, sizeof ones, 1, err);
    if (!st) st = cmf_append_set_header(a, k_new_header, strlen(k_new_header), err);
    if (!st) st = cmf_append_commit(a, err);
    cmf_append_free(a);
    return st;
}

/* 0 = old version, 1 = new version, -1 = neither */
static int which_version(const char *path) {
    cmf_file *f;
    if (cmf_open(path, 0, &f, NULL) != CMF_OK) return -1;
    int v = -1;
    if (cmf_verify(f, 1, NULL, NULL, NULL) == CMF_OK) {
        size_t n = cmf_file_tensor_count(f);
        const cmf_header *h = cmf_file_header(f);
        if (n == 8 && h->n_skills == 1) v = 0;
        if (n == 10 && h->n_skills == 2 &&
            cmf_file_find(f, "skill.chem.model.layers.1.mlp.up_proj.weight"))
            v = 1;
    }
    cmf_close(f);
    return v;
}

int main(void) {
    cmf_err err;
    CHECK_MSG(sample_write("grow.cmf", NULL, &err) == CMF_OK, "%s", err.msg);
    size_t old_len, new_len;
    uint8_t *old = slurp("grow.cmf", &old_len);
    CHECK_MSG(do_append("grow.cmf", &err) == CMF_OK, "%s", err.msg);
    uint8_t *grown = slurp("grow.cmf", &new_len);
    CHECK(grown && new_len > old_len);
    /* prior bytes never change, except the envelope (first 128 bytes) */
    CHECK(grown && !memcmp(old + 128, grown + 128, old_len - 128));
    CHECK(which_version("grow.cmf") == 1);
    cmf_file *f;
    CHECK(cmf_open("grow.cmf", 0, &f, &err) == CMF_OK);
    if (f) {
        const cmf_tensor *t = cmf_file_find(f, "model.layers.0.input_layernorm.weight");
        CHECK(t && t->nbytes == 128 && t->data[1] == 0x3c);
        CHECK(cmf_file_masks(f) && cmf_file_vocab(f, NULL)); /* sections carried over */
        size_t first, count;
        cmf_file_prefix(f, "skill.chem.", &first, &count);
        CHECK(count == 2);
        cmf_close(f);
    }
    /* append twice: dead header/directory bytes inside the data range are fine */
    cmf_appender *a;
    CHECK(cmf_append_begin("grow.cmf", &a, &err) == CMF_OK);
    uint64_t sh[1] = {64};
    uint16_t z[64] = {0};
    CHECK(cmf_append_add_tensor(a, "extra.second", CMF_DT_F16, 1, sh, z, sizeof z, 0, &err) ==
          CMF_OK);
    CHECK(cmf_append_add_tensor(a, "extra.second2", CMF_DT_F16, 1, sh, z, sizeof z - 2, 0, &err) ==
          CMF_E_INVALID_ARG);
    CHECK(cmf_append_add_tensor(a, "lm_head.weight", CMF_DT_F16, 1, sh, z, sizeof z, 0, &err) ==
          CMF_E_INVALID_ARG);
    CHECK(cmf_append_commit(a, &err) == CMF_OK);
    cmf_append_free(a);
    CHECK(cmf_open("grow.cmf", 0, &f, &err) == CMF_OK);
    if (f) {
        CHECK(cmf_file_tensor_count(f) == 11 && cmf_verify(f, 1, NULL, NULL, NULL) == CMF_OK);
        cmf_close(f);
    }
    /* compaction drops the dead bytes and keeps every tensor */
    CHECK(cmf_compact("grow.cmf", "grow.compact.cmf", 0, &err) == CMF_OK);
    cmf_file *c = NULL;
    CHECK(cmf_open("grow.compact.cmf", 0, &c, &err) == CMF_OK &&
          cmf_open("grow.cmf", 0, &f, &err) == CMF_OK);
    if (c && f) {
        CHECK(cmf_file_tensor_count(c) == cmf_file_tensor_count(f));
        for (size_t i = 0; i < cmf_file_tensor_count(f); i++) {
            const cmf_tensor *x = cmf_file_tensor_at(f, i), *y = cmf_file_find(c, x->name);
            CHECK(y && y->hash == x->hash && y->nbytes == x->nbytes);
        }
        size_t cl, gl;
        cmf_file_shard_bytes(c, 0, &cl);
        cmf_file_shard_bytes(f, 0, &gl);
        CHECK(cl < gl);
        CHECK(cmf_verify(c, 1, NULL, NULL, NULL) == CMF_OK);
    }
    cmf_close(c);
    cmf_close(f);

    /* crash at every write boundary of the append */
    int saw_old = 0, saw_new = 0;
    for (long k = 0; k < 64; k++) {
        spit("crash.cmf", old, old_len);
        fail_after = k;
        cmf_status st = do_append("crash.cmf", &err);
        fail_after = -1;
        int v = which_version("crash.cmf");
        CHECK_MSG(v >= 0, "after a crash at write %ld the file is neither version", k);
        if (st == CMF_OK) {
            CHECK(v == 1);
            saw_new = 1;
            break;
        }
        CHECK_MSG(v == 0, "crash at write %ld: %s", k, err.msg);
        saw_old |= v == 0;
        /* the next append over the crashed tail still works */
        if (k == 2) {
            CHECK(do_append("crash.cmf", &err) == CMF_OK);
            CHECK(which_version("crash.cmf") == 1);
        }
    }
    CHECK(saw_old && saw_new);
    free(old);
    free(grown);
    TEST_DONE();
}
