/* npy_write.c - see npy_write.h. */
#include "cli/npy_write.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "common/bytes.h"
#include "common/f16.h"

/* magic, version 1.0, u16 length, a Python dict literal padded with spaces to a 64-byte
 * boundary and ended by '\n' */
static size_t npy_header(unsigned ndim, const uint64_t *shape, char *buf, size_t cap) {
    char dict[400];
    size_t n =
        (size_t)snprintf(dict, sizeof dict, "{'descr': '<f4', 'fortran_order': False, 'shape': (");
    for (unsigned i = 0; i < ndim && n < sizeof dict; i++) /* numpy's repr: (n,) or (a, b) */
        n += (size_t)snprintf(dict + n, sizeof dict - n, "%s%llu%s", i ? ", " : "",
                              (unsigned long long)shape[i], ndim == 1 ? "," : "");
    if (n >= sizeof dict - 8) return 0;
    n += (size_t)snprintf(dict + n, sizeof dict - n, "), }");
    size_t total = (10 + n + 1 + 63) / 64 * 64;
    if (total > cap) return 0;
    memcpy(buf, "\x93NUMPY\x01\x00", 8);
    st_u16((uint8_t *)buf + 8, (uint16_t)(total - 10));
    memcpy(buf + 10, dict, n);
    memset(buf + 10 + n, ' ', total - 10 - n - 1);
    buf[total - 1] = '\n';
    return total;
}

int cli_write_npy_f32(const char *cmd, const char *path, unsigned ndim, const uint64_t *shape,
                      float *vals) {
    uint64_t n = 1;
    for (unsigned i = 0; i < ndim; i++)
        n *= shape[i];
    for (uint64_t i = 0; i < n; i++) { /* '<f4' whatever the host order */
        uint8_t le[4];
        st_u32(le, f32_bits(vals[i]));
        memcpy(&vals[i], le, 4);
    }
    char hdr[512], tmp[4200];
    size_t hl = npy_header(ndim, shape, hdr, sizeof hdr);
    if (!hl || snprintf(tmp, sizeof tmp, "%s.tmp", path) >= (int)sizeof tmp) {
        fprintf(stderr, "cortiq %s: %s: name or shape too long\n", cmd, path);
        return CLI_EXIT_USAGE;
    }
    FILE *fp = fopen(tmp, "wb");
    int ok = fp && fwrite(hdr, 1, hl, fp) == hl && fwrite(vals, sizeof *vals, (size_t)n, fp) == n;
    int saved = errno;
    if (fp && fclose(fp) != 0) ok = 0, saved = errno;
    if (ok && rename(tmp, path) != 0) ok = 0, saved = errno;
    if (!ok) {
        remove(tmp);
        fprintf(stderr, "cortiq %s: %s: %s\n", cmd, path, strerror(saved));
        return CLI_EXIT_SYSTEM;
    }
    return CLI_EXIT_OK;
}
