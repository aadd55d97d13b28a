/* npy_write.h - float32 arrays to NumPy .npy files (format 1.0, '<f4', C order). */
#ifndef CORTIQ_CLI_NPY_WRITE_H
#define CORTIQ_CLI_NPY_WRITE_H

#include <stddef.h>
#include <stdint.h>

/* Write vals (numel of shape) to path through a temporary file renamed into place, so a
 * failure leaves no partial file. vals is byte-swapped to little-endian in place. Errors are
 * printed as "cortiq <cmd>: <path>: <reason>"; returns a CLI exit code. */
int cli_write_npy_f32(const char *cmd, const char *path, unsigned ndim, const uint64_t *shape,
                      float *vals);

#endif
