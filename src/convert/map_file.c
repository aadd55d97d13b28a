/* map_file.c - read-only mmap of a converter input file. */
#include "convert/map_file.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

cmf_status cv_map_open(const char *path, cv_map *m, cmf_err *err) {
    memset(m, 0, sizeof *m);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return cmf_err_set(err, CMF_E_IO, path, "open: %s", strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return cmf_err_set(err, CMF_E_IO, path, "stat: %s", strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return cmf_err_set(err, CMF_E_IO, path, "not a regular file");
    }
    if (st.st_size > 0) {
        void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED) {
            int e = errno;
            close(fd);
            return cmf_err_set(err, CMF_E_IO, path, "mmap %lld bytes: %s", (long long)st.st_size, strerror(e));
        }
        m->base = p;
        m->map_len = (size_t)st.st_size;
        m->bytes = p;
        m->len = (size_t)st.st_size;
    }
    close(fd);
    return CMF_OK;
}

void cv_map_close(cv_map *m) {
    if (m && m->base) munmap(m->base, m->map_len);
    if (m) memset(m, 0, sizeof *m);
}
