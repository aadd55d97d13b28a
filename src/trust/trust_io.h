/* trust_io.h - small file helpers of the trust module: atomic small writes, bounded reads. */
#ifndef CORTIQ_TRUST_IO_H
#define CORTIQ_TRUST_IO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "cortiq/status.h"

/* Write len bytes to path with permission bits `mode`, via a temp file beside it: the path holds
 * either its old contents or all the new ones, never a part. With !overwrite an existing path is
 * refused (CMF_E_INVALID_ARG) atomically (link(2) instead of rename(2)). */
cmf_status trust_write_atomic(const char *path, const void *data, size_t len, mode_t mode,
                              bool overwrite, cmf_err *err);

/* Read a regular file of at most max bytes into buf (cap > max); *len = bytes read, buf
 * NUL-terminated. CMF_E_NOT_FOUND if it does not exist, CMF_E_LIMIT if larger than max. If st_mode
 * is non-NULL it receives the file's mode. what names the file's role in messages ("key file",
 * "signature"). */
cmf_status trust_read_small(const char *path, const char *what, char *buf, size_t max, size_t *len,
                            mode_t *st_mode, cmf_err *err);

/* "<path>.sig", malloc'd (NULL when out of memory). */
char *trust_sig_path(const char *path);

#endif
