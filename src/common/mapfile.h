/* mapfile.h - map a whole regular file read-only (the reader's and the converters' inputs). */
#ifndef CORTIQ_MAPFILE_H
#define CORTIQ_MAPFILE_H

#include <stddef.h>
#include <stdint.h>

#include "cortiq/status.h"

/* *base = the mapping (NULL for an empty file), *size = the file size. CMF_E_IO naming path
 * (open, not a regular file, mmap). Release with cq_unmap_file(base, size). */
cmf_status cq_map_file(const char *path, const uint8_t **base, size_t *size, cmf_err *err);
void cq_unmap_file(const uint8_t *base, size_t size);

#endif
