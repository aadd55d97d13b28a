#include "common/durable_io.h"
#include "common/err.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

cmf_status io_pwrite_all(int fd, const void *buf, size_t len, uint64_t off, const char *path,
                         cmf_err *err) {
    const uint8_t *p = buf;
    while (len) {
        ssize_t n = pwrite(fd, p, len, (off_t)off);
        if (n < 0) {
            if (errno == EINTR) continue;
            return cmf_err_set(err, CMF_E_IO, path, "write of %zu bytes at offset %llu failed: %s",
                               len, (unsigned long long)off, strerror(errno));
        }
        p += n;
        len -= (size_t)n;
        off += (uint64_t)n;
    }
    return CMF_OK;
}

static char *dir_of(const char *path) {
    char *copy = strdup(path);
    if (!copy) return NULL;
    char *d = strdup(dirname(copy));
    free(copy);
    return d;
}

cmf_status io_create_temp(const char *target, int *fd, char **tmp_path, cmf_err *err) {
    char *copy = strdup(target), *d = dir_of(target);
    if (!copy || !d) {
        free(copy);
        free(d);
        return cmf_err_set(err, CMF_E_NOMEM, target, "temp name");
    }
    const char *base = basename(copy);
    size_t cap = strlen(d) + strlen(base) + 32;
    char *tmp = malloc(cap);
    if (!tmp) {
        free(copy);
        free(d);
        return cmf_err_set(err, CMF_E_NOMEM, target, "temp name");
    }
    snprintf(tmp, cap, "%s/.%s.tmp.XXXXXX", d, base);
    free(copy);
    free(d);
    int f = mkostemp(tmp, O_CLOEXEC);
    if (f < 0) {
        cmf_status st = cmf_err_set(
            err, CMF_E_IO, target, "cannot create a temporary file beside it: %s", strerror(errno));
        free(tmp);
        return st;
    }
    fchmod(f, 0644);
    *fd = f;
    *tmp_path = tmp;
    return CMF_OK;
}

cmf_status io_fsync(int fd, const char *path, cmf_err *err) {
    if (fsync(fd) != 0)
        return cmf_err_set(err, CMF_E_IO, path, "fsync failed: %s", strerror(errno));
    return CMF_OK;
}

cmf_status io_commit_rename(const char *tmp, const char *target, cmf_err *err) {
    if (rename(tmp, target) != 0)
        return cmf_err_set(err, CMF_E_IO, target, "rename from %s failed: %s", tmp,
                           strerror(errno));
    char *d = dir_of(target);
    if (d) {
        int dfd = open(d, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd >= 0) {
            fsync(dfd);
            close(dfd);
        }
        free(d);
    }
    return CMF_OK;
}
