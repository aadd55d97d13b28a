/* npy_read.h - read a NumPy .npy array (format 1.x/2.x, C order) as float32: '<f4', '<f8',
 * '<f2', '|b1', '|u1'. What `convert --defrag` reads from a skill directory (spec §11). */
#ifndef CORTIQ_CONVERT_NPY_READ_H
#define CORTIQ_CONVERT_NPY_READ_H

#include <stdint.h>

#include "cortiq/status.h"

#define CQ_NPY_MAX_DIMS 6

typedef struct cq_npy {
    unsigned ndim;
    uint64_t shape[CQ_NPY_MAX_DIMS];
    uint64_t numel;
    float *data; /* malloc'd; bool/u8 as 0/1.. values */
    char descr[8];
} cq_npy;

/* Read path; every header field and the payload size are checked against the file. */
cmf_status cq_npy_read(const char *path, cq_npy *out, cmf_err *err);
void cq_npy_free(cq_npy *a);

#endif
