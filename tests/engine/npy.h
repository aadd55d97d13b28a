/* npy.h - read the little-endian float32 / int32 .npy fixtures tools/ scripts write. */
#ifndef CORTIQ_TEST_NPY_H
#define CORTIQ_TEST_NPY_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Returns malloc'd data (4-byte elements) and the element count; dtype_out is 'f' or 'i'. */
static inline void *npy_load(const char *path, size_t *count, char *dtype_out) {
    FILE *fp = fopen(path, "rb");
    if (!fp) return NULL;
    unsigned char pre[10];
    if (fread(pre, 1, 10, fp) != 10 || memcmp(pre, "\x93NUMPY", 6)) {
        fclose(fp);
        return NULL;
    }
    size_t hlen = pre[8] | (pre[9] << 8);
    char *hdr = calloc(1, hlen + 1);
    if (!hdr || fread(hdr, 1, hlen, fp) != hlen) {
        free(hdr);
        fclose(fp);
        return NULL;
    }
    *dtype_out = strstr(hdr, "'<f4'") ? 'f' : strstr(hdr, "'<i4'") ? 'i' : '?';
    size_t n = 1;
    const char *sh = strstr(hdr, "'shape': (");
    if (sh) {
        sh += 10;
        while (*sh && *sh != ')') {
            char *end;
            unsigned long v = strtoul(sh, &end, 10);
            if (end == sh) break;
            n *= v;
            sh = end;
            while (*sh == ',' || *sh == ' ')
                sh++;
        }
    }
    free(hdr);
    void *data = malloc(n * 4);
    if (data && fread(data, 4, n, fp) != n) {
        free(data);
        data = NULL;
    }
    fclose(fp);
    *count = n;
    return data;
}

#endif
