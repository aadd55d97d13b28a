/* test_codec_dequant_cli.c - `cortiq dequant`: writes a small CMF file with the writer, runs the
 * CLI ($CORTIQ_BIN) and checks the .npy files byte by byte against cmf_quant_dequant. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "common/bytes.h"
#include "common/test.h"
#include "cortiq/quant.h"
#include "cortiq/writer.h"
#include "quant/quant_matrix.h"

typedef struct {
    const char *name;
    cmf_dtype dt;
    unsigned ndim;
    uint64_t shape[2];
} spec_t;

static const spec_t k_tensors[] = {
    {"model.layers.0.mlp.up_proj.weight", CMF_DT_Q4_TILED, 2, {4, 64}},
    {"model.layers.0.mlp.down_proj.weight", CMF_DT_VBIT_RO, 2, {4, 64}},
    {"model.layers.0.self_attn.q_proj.weight", CMF_DT_Q1T, 2, {3, 32}},
    {"model.norm.weight", CMF_DT_F16, 1, {64, 0}},
    {"odd/name", CMF_DT_F32, 2, {2, 3}},
};
#define NT (sizeof k_tensors / sizeof k_tensors[0])

static uint8_t *g_payload[NT + 1];
static size_t g_len[NT + 1];

static int run(const char *args) {
    const char *bin = getenv("CORTIQ_BIN");
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "'%s' %s >/dev/null 2>&1", bin, args);
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static uint8_t *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc((size_t)n + 1);
    if (fread(b, 1, (size_t)n, f) != (size_t)n) n = 0;
    fclose(f);
    *len = (size_t)n;
    return b;
}

/* The .npy at path holds tensor k: header per format 1.0 and the dequantized floats. */
static void check_npy(const char *path, size_t k) {
    const spec_t *s = &k_tensors[k];
    size_t len = 0;
    uint8_t *b = slurp(path, &len);
    CHECK_MSG(b != NULL, "%s missing", path);
    if (!b) return;
    CHECK(len > 10 && !memcmp(b, "\x93NUMPY\x01\x00", 8));
    size_t hl = ld_u16(b + 8), n = s->ndim == 1 ? s->shape[0] : s->shape[0] * s->shape[1];
    CHECK((10 + hl) % 64 == 0 && b[10 + hl - 1] == '\n');
    char want[128];
    if (s->ndim == 1)
        snprintf(want, sizeof want, "{'descr': '<f4', 'fortran_order': False, 'shape': (%llu,), }",
                 (unsigned long long)s->shape[0]);
    else
        snprintf(want, sizeof want,
                 "{'descr': '<f4', 'fortran_order': False, 'shape': (%llu, %llu), }",
                 (unsigned long long)s->shape[0], (unsigned long long)s->shape[1]);
    CHECK_MSG(hl >= strlen(want) && !memcmp(b + 10, want, strlen(want)), "%s header", path);
    CHECK_MSG(len == 10 + hl + 4 * n, "%s: %zu bytes", path, len);
    float *ref = malloc(n * sizeof *ref);
    cmf_err err;
    CHECK(cmf_quant_dequant(s->dt, s->ndim, s->shape, g_payload[k], g_len[k], ref, &err) == CMF_OK);
    int same = len == 10 + hl + 4 * n;
    for (size_t i = 0; same && i < n; i++) {
        uint32_t u;
        memcpy(&u, &ref[i], 4);
        same = ld_u32(b + 10 + hl + 4 * i) == u;
    }
    CHECK_MSG(same, "%s: values differ from cmf_quant_dequant", path);
    free(ref);
    free(b);
}

int main(void) {
    CHECK_MSG(getenv("CORTIQ_BIN") != NULL, "CORTIQ_BIN not set");
    if (!getenv("CORTIQ_BIN")) TEST_DONE();
    float src[512];
    qm_heavy(src, 8, 64, 9);
    cmf_writer *w = NULL;
    cmf_err err;
    CHECK_STATUS(cmf_writer_create("dq.cmf", NULL, &w, &t_err_), CMF_OK);
    const char *hdr = "{\"arch\": {\"num_layers\": 1}}";
    CHECK_STATUS(cmf_writer_set_header(w, hdr, strlen(hdr), &t_err_), CMF_OK);
    for (size_t k = 0; k < NT; k++) {
        const spec_t *s = &k_tensors[k];
        CHECK_STATUS(cmf_quant_encode(s->dt, s->ndim, s->shape, src, NULL, &g_payload[k], &g_len[k],
                                      &t_err_),
                     CMF_OK);
        CHECK_STATUS(cmf_writer_add_tensor(w, s->name, s->dt, s->ndim, s->shape, g_payload[k],
                                           g_len[k], &t_err_),
                     CMF_OK);
    }
    /* a q1t payload whose sizes pass the directory rule but whose row_ptr is not monotonic */
    const uint64_t bad_shape[2] = {3, 32};
    g_payload[NT] = malloc(g_len[2]);
    memcpy(g_payload[NT], g_payload[2], g_len[2]);
    st_u32(g_payload[NT] + 3 * 9 + 4, 0xFFFF);
    CHECK_STATUS(
        cmf_writer_add_tensor(w, "bad", CMF_DT_Q1T, 2, bad_shape, g_payload[NT], g_len[2], &t_err_),
        CMF_OK);
    CHECK_STATUS(cmf_writer_finish(w, &t_err_), CMF_OK);
    cmf_writer_free(w);
    (void)err;

    CHECK(run("dequant --help") == 0);
    CHECK(run("dequant") == 2);
    CHECK(run("dequant dq.cmf") == 2);
    CHECK(run("dequant dq.cmf a --all x") == 2);
    CHECK(run("dequant dq.cmf no.such.tensor -o x.npy") == 1);
    CHECK(run("dequant missing.cmf model.norm.weight") != 0);
    remove("one.npy");
    CHECK(run("dequant dq.cmf model.layers.0.mlp.up_proj.weight -o one.npy") == 0);
    check_npy("one.npy", 0);
    remove("model.norm.weight.npy");
    CHECK(run("dequant dq.cmf model.norm.weight") == 0);
    check_npy("model.norm.weight.npy", 3);
    remove("bad.npy");
    CHECK(run("dequant dq.cmf bad -o bad.npy") == 1);
    struct stat st;
    CHECK(stat("bad.npy", &st) != 0); /* no partial file */
    /* --all stops at the malformed tensor (directory order: it comes last) */
    CHECK(run("dequant dq.cmf --all dq_all") == 1);
    check_npy("dq_all/model.layers.0.mlp.up_proj.weight.npy", 0);
    check_npy("dq_all/model.layers.0.mlp.down_proj.weight.npy", 1);
    check_npy("dq_all/model.layers.0.self_attn.q_proj.weight.npy", 2);
    check_npy("dq_all/model.norm.weight.npy", 3);
    check_npy("dq_all/odd_name.npy", 4);
    for (size_t k = 0; k <= NT; k++)
        free(g_payload[k]);
    TEST_DONE();
}
