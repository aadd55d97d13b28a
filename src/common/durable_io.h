/* durable_io.h - positioned writes, temp files and atomic rename: how the writer, the appender
 * and the key and signature files make a name hold either the old bytes or the new ones. */
#ifndef CORTIQ_COMMON_DURABLE_IO_H
#define CORTIQ_COMMON_DURABLE_IO_H

#include <stddef.h>
#include <stdint.h>

#include "cortiq/status.h"

/* Write all of buf at offset off (one logical write; a "write boundary"). */
cmf_status io_pwrite_all(int fd, const void *buf, size_t len, uint64_t off, const char *path,
                         cmf_err *err);
/* Create "<dir>/.<base>.tmp.XXXXXX" beside target; returns fd, fills tmp_path (malloc'd). */
cmf_status io_create_temp(const char *target, int *fd, char **tmp_path, cmf_err *err);
cmf_status io_fsync(int fd, const char *path, cmf_err *err);
/* rename(tmp, target) then fsync the directory so the new name is durable. */
cmf_status io_commit_rename(const char *tmp, const char *target, cmf_err *err);

#endif
