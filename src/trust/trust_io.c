/* trust_io.c - atomic small writes and bounded reads for key and .sig files. */
#include "trust/trust_io.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/durable_io.h"
#include "common/err.h"

cmf_status trust_write_atomic(const char *path, const void *data, size_t len, mode_t mode,
                              bool overwrite, cmf_err *err) {
    int fd;
    char *tmp;
    cmf_status st = io_create_temp(path, &fd, &tmp, err);
    if (st) return st;
    /* mkostemp made it 0600; set the final mode before any byte is written */
    if (fchmod(fd, mode) != 0)
        st = cmf_err_set(err, CMF_E_IO, path, "chmod of the temp file failed: %s", strerror(errno));
    if (!st) st = io_pwrite_all(fd, data, len, 0, path, err);
    if (!st) st = io_fsync(fd, path, err);
    if (close(fd) != 0 && !st)
        st = cmf_err_set(err, CMF_E_IO, path, "close failed: %s", strerror(errno));
    if (!st) {
        if (overwrite) {
            st = io_commit_rename(tmp, path, err);
        } else if (link(tmp, path) != 0) {
            st = errno == EEXIST
                     ? cmf_err_set(err, CMF_E_INVALID_ARG, path,
                                   "already exists; refusing to overwrite it")
                     : cmf_err_set(err, CMF_E_IO, path, "cannot create it: %s", strerror(errno));
        }
    }
    if (st || !overwrite) unlink(tmp); /* after link() the temp name is a second name to drop */
    free(tmp);
    return st;
}

cmf_status trust_read_small(const char *path, const char *what, char *buf, size_t max, size_t *len,
                            mode_t *st_mode, cmf_err *err) {
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0)
        return cmf_err_set(err, errno == ENOENT ? CMF_E_NOT_FOUND : CMF_E_IO, path,
                           "cannot open the %s: %s", what, strerror(errno));
    struct stat sb;
    cmf_status st = CMF_OK;
    if (fstat(fd, &sb) != 0) {
        st = cmf_err_set(err, CMF_E_IO, path, "cannot stat the %s: %s", what, strerror(errno));
    } else if (!S_ISREG(sb.st_mode)) {
        st = cmf_err_set(err, CMF_E_PARSE, path, "the %s is not a regular file", what);
    } else if ((uint64_t)sb.st_size > max) {
        st = cmf_err_set(err, CMF_E_LIMIT, path, "the %s has %lld bytes, at most %zu are allowed",
                         what, (long long)sb.st_size, max);
    }
    size_t n = 0;
    while (!st && n <= max) {
        ssize_t r = read(fd, buf + n, max + 1 - n);
        if (r < 0) {
            if (errno == EINTR) continue;
            st = cmf_err_set(err, CMF_E_IO, path, "cannot read the %s: %s", what, strerror(errno));
        } else if (r == 0) {
            break;
        } else {
            n += (size_t)r;
        }
    }
    if (!st && n > max)
        st =
            cmf_err_set(err, CMF_E_LIMIT, path, "the %s grew past %zu bytes while read", what, max);
    close(fd);
    if (st) return st;
    buf[n] = '\0';
    *len = n;
    if (st_mode) *st_mode = sb.st_mode;
    return CMF_OK;
}

char *trust_sig_path(const char *path) {
    size_t n = strlen(path);
    char *s = malloc(n + 5);
    if (s) {
        memcpy(s, path, n);
        memcpy(s + n, ".sig", 5);
    }
    return s;
}
