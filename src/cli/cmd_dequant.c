/* cmd_dequant.c - `cortiq dequant FILE NAME [-o OUT.npy]` / `cortiq dequant FILE --all DIR`:
 * tensors dequantized to float32 and written as NumPy .npy (format 1.0, '<f4', C order). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/cli.h"
#include "cli/npy_write.h"
#include "common/bytes.h"
#include "common/f16.h"
#include "cortiq/format.h"
#include "cortiq/quant.h"

static void usage(void) {
    printf(
        "usage: cortiq dequant FILE NAME [-o OUT.npy]\n"
        "       cortiq dequant FILE --all DIR\n"
        "  Dequantize tensors of a CMF file to float32 and write them as NumPy .npy files\n"
        "  (format 1.0, dtype '<f4', C order, the tensor's shape). The payload is fully\n"
        "  validated first; a malformed one is an error, never a partial file.\n"
        "  -o OUT.npy   output path for NAME (default: ./NAME.npy)\n"
        "  --all DIR    every tensor to DIR/<name>.npy ('/' in names becomes '_'); DIR is created\n"
        "  Memory: one tensor's float32 copy at a time.\n");
}

static int write_npy(const cmf_tensor *t, const char *out_path) {
    cmf_err err;
    uint64_t n;
    if (!cmf_shape_numel(t->ndim, t->shape, &n) || n > SIZE_MAX / sizeof(float)) {
        fprintf(stderr, "cortiq dequant: %s: tensor too large for this machine\n", t->name);
        return CLI_EXIT_SYSTEM;
    }
    float *vals = malloc((size_t)n * sizeof *vals);
    if (!vals) {
        fprintf(stderr, "cortiq dequant: %s: cannot allocate %llu floats\n", t->name,
                (unsigned long long)n);
        return CLI_EXIT_SYSTEM;
    }
    cmf_status st =
        cmf_quant_dequant((cmf_dtype)t->dtype, t->ndim, t->shape, t->data, t->nbytes, vals, &err);
    if (st != CMF_OK) {
        fprintf(stderr, "cortiq dequant: %s: %s\n", t->name, err.msg);
        free(vals);
        return cli_exit_code(st);
    }
    int rc = cli_write_npy_f32("dequant", out_path, t->ndim, t->shape, vals);
    free(vals);
    return rc;
}

/* DIR/<name>.npy with path separators in the (untrusted) name replaced. */
static bool out_name(const char *dir, const char *name, char *buf, size_t cap) {
    int n = snprintf(buf, cap, "%s/%s.npy", dir, name);
    if (n < 0 || (size_t)n >= cap) return false;
    for (char *p = buf + strlen(dir) + 1; *p; p++)
        if (*p == '/' || *p == '\\') *p = '_';
    return true;
}

int cmd_dequant(int argc, char **argv) {
    const char *path = NULL, *name = NULL, *out = NULL, *all_dir = NULL;
    for (int i = 1; i < argc; i++) {
        if (cli_is_help(argv[i])) {
            usage();
            return CLI_EXIT_OK;
        } else if (!strcmp(argv[i], "-o") && i + 1 < argc)
            out = argv[++i];
        else if (!strcmp(argv[i], "--all") && i + 1 < argc)
            all_dir = argv[++i];
        else if (argv[i][0] == '-' && argv[i][1])
            return cli_usage_error("dequant", "unknown option '%s'", argv[i]);
        else if (!path)
            path = argv[i];
        else if (!name)
            name = argv[i];
        else
            return cli_usage_error("dequant", "unexpected argument '%s'", argv[i]);
    }
    if (!path) return cli_usage_error("dequant", "missing FILE");
    if (!all_dir == !name) return cli_usage_error("dequant", "give either NAME or --all DIR");
    if (all_dir && out) return cli_usage_error("dequant", "-o goes with NAME, not --all");
    cmf_file *f;
    cmf_err err;
    cmf_status st = cmf_open_model(path, 0, &f, &err);
    if (st) {
        cli_error(&err);
        return cli_exit_code(st);
    }
    int rc = CLI_EXIT_OK;
    char buf[4096];
    if (name) {
        const cmf_tensor *t = cmf_file_find(f, name);
        if (!t) {
            fprintf(stderr, "cortiq dequant: %s: no tensor named '%s'\n", path, name);
            rc = CLI_EXIT_INVALID;
        } else if (!out && !out_name(".", name, buf, sizeof buf)) {
            fprintf(stderr, "cortiq dequant: tensor name too long for a file name\n");
            rc = CLI_EXIT_INVALID;
        } else {
            rc = write_npy(t, out ? out : buf);
        }
    } else {
        if (mkdir(all_dir, 0777) != 0 && errno != EEXIST) {
            fprintf(stderr, "cortiq dequant: %s: %s\n", all_dir, strerror(errno));
            rc = CLI_EXIT_SYSTEM;
        }
        for (size_t k = 0; rc == CLI_EXIT_OK && k < cmf_file_tensor_count(f); k++) {
            const cmf_tensor *t = cmf_file_tensor_at(f, k);
            if (!out_name(all_dir, t->name, buf, sizeof buf)) {
                fprintf(stderr, "cortiq dequant: %s: name too long for a file name\n", t->name);
                rc = CLI_EXIT_INVALID;
            } else {
                rc = write_npy(t, buf);
            }
        }
    }
    cmf_close(f);
    return rc;
}
