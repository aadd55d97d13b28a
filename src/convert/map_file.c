/* map_file.c - the converter's view of a mapped input file (mapping: common/mapfile.c). */
#include "convert/map_file.h"

#include <string.h>

#include "common/mapfile.h"

cmf_status cv_map_open(const char *path, cv_map *m, cmf_err *err) {
    memset(m, 0, sizeof *m);
    const uint8_t *p;
    size_t n;
    cmf_status st = cq_map_file(path, &p, &n, err);
    if (st) return st;
    m->base = (void *)p;
    m->map_len = n;
    m->bytes = p;
    m->len = n;
    return CMF_OK;
}

void cv_map_close(cv_map *m) {
    if (!m) return;
    cq_unmap_file(m->base, m->map_len);
    memset(m, 0, sizeof *m);
}
