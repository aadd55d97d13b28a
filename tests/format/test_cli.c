/* The inspection commands (info, tensors, masks, verify, compact) on sample files: exit codes,
 * key lines of output, errors on stderr prefixed with the file name. */
#include <sys/wait.h>

#include "sample.h"
#include "test.h"

static char g_out[1 << 16];

/* Run a shell command line; capture stdout+stderr into g_out; return the exit status. */
static int run(const char *fmt, const char *arg) {
    char cmd[1024], line[512];
    const char *bin = getenv("CORTIQ_BIN");
    snprintf(line, sizeof line, fmt, arg);
    snprintf(cmd, sizeof cmd, "%s %s 2>&1", bin ? bin : "cortiq", line);
    FILE *p = popen(cmd, "r");
    size_t n = 0;
    if (!p) return -1;
    while (n < sizeof g_out - 1 && fgets(g_out + n, (int)(sizeof g_out - n), p))
        n += strlen(g_out + n);
    g_out[n] = '\0';
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

#define HAS(s) CHECK_MSG(strstr(g_out, s) != NULL, "output lacks '%s':\n%s", s, g_out)

int main(void) {
    cmf_err err;
    CHECK_MSG(sample_write("cli.cmf", NULL, &err) == CMF_OK, "%s", err.msg);
    CHECK(run("--help", "") == 0);
    HAS("verify");
    CHECK(run("nosuchcommand", "") == 2);
    CHECK(run("info %s", "cli.cmf") == 0);
    HAS("TENSOR_DIR BINARY_MASKS QUANT_2F");
    HAS("llama");
    HAS("q8_row");
    HAS("general");
    HAS("sql");
    CHECK(run("info --json %s", "cli.cmf") == 0);
    HAS("\"tensor_count\": 8");
    HAS("\"header\": {");
    CHECK(run("tensors %s --prefix model.layers.1.", "cli.cmf") == 0);
    HAS("model.layers.1.mlp.up_proj.weight");
    CHECK(strstr(g_out, "layers.0") == NULL);
    CHECK(run("tensors --json %s", "cli.cmf") == 0);
    HAS("\"name\": \"lm_head.weight\", \"dtype\": \"f32\", \"shape\": [32, 64]");
    CHECK(run("masks %s", "cli.cmf") == 0);
    HAS("general (default)");
    HAS("not measured");
    CHECK(run("masks --json %s", "cli.cmf") == 0);
    HAS("\"experts\": 2");
    CHECK(run("verify %s", "cli.cmf") == 0);
    HAS("cli.cmf: OK");
    for (const char **h = (const char *[]){"info", "tensors", "masks", "verify", "compact", NULL};
         *h; h++) {
        CHECK(run("%s --help", *h) == 0);
        HAS("usage: cortiq");
    }
    /* corrupt one tensor byte: verify names the tensor, exits 1; a good file alongside still
     * reports OK */
    size_t len;
    uint8_t *b = slurp("cli.cmf", &len);
    cmf_file *f;
    CHECK(cmf_open("cli.cmf", 0, &f, &err) == CMF_OK);
    const cmf_tensor *t = cmf_file_find(f, "lm_head.weight");
    b[cmf_file_envelope(f)->data_off + t->off + 5] ^= 1;
    t = cmf_file_find(f, "extra.rank3");
    b[cmf_file_envelope(f)->data_off + t->off] ^= 1;
    cmf_close(f);
    spit("cli_bad.cmf", b, len);
    CHECK(run("verify cli.cmf %s", "cli_bad.cmf") == 1);
    HAS("cli_bad.cmf: Hash: tensor 'lm_head.weight' hash64 mismatch");
    HAS("tensor 'extra.rank3' hash64 mismatch"); /* every problem, not only the first */
    HAS("cli.cmf: OK");
    HAS("2 problems");
    /* a broken envelope: error on stderr names the file and the value */
    b[0] = 'X';
    spit("cli_magic.cmf", b, len);
    CHECK(run("info %s", "cli_magic.cmf") == 1);
    HAS("cli_magic.cmf: InvalidMagic: magic is 58");
    CHECK(run("verify %s", "no_such_file.cmf") == 3);
    HAS("no_such_file.cmf: IO: cannot open");
    free(b);
    /* compact in place keeps a valid file */
    CHECK(run("compact %s -o cli_compact.cmf", "cli.cmf") == 0);
    CHECK(run("verify %s", "cli_compact.cmf") == 0);
    CHECK(run("compact %s", "cli.cmf") == 2);
    TEST_DONE();
}
