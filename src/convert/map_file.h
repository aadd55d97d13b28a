/* map_file.h - read-only whole-file mappings for the converter's input readers. */
#ifndef CORTIQ_CONVERT_MAP_FILE_H
#define CORTIQ_CONVERT_MAP_FILE_H

#include <stddef.h>
#include <stdint.h>

#include "cortiq/status.h"

typedef struct cv_map {
    const uint8_t *bytes;
    size_t len;
    void *base; /* mmap base (NULL for an empty file or a borrowed buffer) */
    size_t map_len;
} cv_map;

/* Map path read-only. An empty file maps as len 0. CMF_E_IO naming the path on failure. */
cmf_status cv_map_open(const char *path, cv_map *m, cmf_err *err);
void cv_map_close(cv_map *m);

#endif
