/* model_cache.h - where scripts/fetch-models puts the real models ($CORTIQ_MODEL_CACHE, else
 * ~/.cache/cortiq/models), for the tests that use them. */
#ifndef CORTIQ_TEST_MODEL_CACHE_H
#define CORTIQ_TEST_MODEL_CACHE_H

#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

static inline const char *cache_dir(char *buf, size_t cap) {
    const char *c = getenv("CORTIQ_MODEL_CACHE");
    if (c && *c) return c;
    snprintf(buf, cap, "%s/.cache/cortiq/models", getenv("HOME") ? getenv("HOME") : "/root");
    return buf;
}

static inline int file_exists(const char *p) {
    struct stat st;
    return stat(p, &st) == 0 && st.st_size > 0;
}

#endif
