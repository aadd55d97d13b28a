/* io.h - positioned writes, temp files and atomic rename for the writer and appender. */
#ifndef CORTIQ_FORMAT_IO_H
#define CORTIQ_FORMAT_IO_H

#include <stddef.h>
#include <stdint.h>

#include "cortiq/status.h"

/* Test hook: when >= 0, the n-th following write call fails as if the process died there
 * (nothing of that write reaches the file). -1 (default) disables it. */
extern long cmf__io_fail_after;

/* Write all of buf at offset off (one logical write; a "write boundary"). */
cmf_status io_pwrite_all(int fd, const void *buf, size_t len, uint64_t off, const char *path,
                         cmf_err *err);
/* Create "<dir>/.<base>.tmp.XXXXXX" beside target; returns fd, fills tmp_path (malloc'd). */
cmf_status io_create_temp(const char *target, int *fd, char **tmp_path, cmf_err *err);
cmf_status io_fsync(int fd, const char *path, cmf_err *err);
/* rename(tmp, target) then fsync the directory so the new name is durable. */
cmf_status io_commit_rename(const char *tmp, const char *target, cmf_err *err);

#endif
