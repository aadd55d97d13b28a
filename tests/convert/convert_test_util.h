/* convert_test_util.h - helpers shared by the converter tests. */
#ifndef CORTIQ_CONVERT_TEST_UTIL_H
#define CORTIQ_CONVERT_TEST_UTIL_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Read a gzip-compressed fixture through `gzip -dc` into a malloc'd buffer; NULL on failure. */
static inline uint8_t *load_gz(const char *path, size_t *len) {
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "gzip -dc '%s'", path);
    FILE *p = popen(cmd, "r");
    if (!p) return NULL;
    size_t cap = 1 << 16, n = 0;
    uint8_t *buf = malloc(cap);
    for (;;) {
        if (!buf) break;
        if (n == cap) {
            uint8_t *nb = realloc(buf, cap * 2);
            if (!nb) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = nb;
            cap *= 2;
        }
        size_t got = fread(buf + n, 1, cap - n, p);
        if (got == 0) break;
        n += got;
    }
    if (pclose(p) != 0) {
        free(buf);
        return NULL;
    }
    *len = n;
    return buf;
}

/* Bitwise float equality (NaNs compare by their bits). */
static inline int same_bits(float a, float b) {
    return memcmp(&a, &b, sizeof a) == 0;
}

#endif
