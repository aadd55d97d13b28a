/* mapfile.c - read-only whole-file mappings. */
#include "common/err.h"
#include "common/mapfile.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

cmf_status cq_map_file(const char *path, const uint8_t **base, size_t *size, cmf_err *err) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return cmf_err_set(err, CMF_E_IO, path, "cannot open: %s", strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        int e = errno;
        close(fd);
        return cmf_err_set(err, CMF_E_IO, path, "not a regular file%s%s", e ? ": " : "",
                           e ? strerror(e) : "");
    }
    *size = (size_t)st.st_size;
    *base = NULL;
    if (st.st_size > 0) {
        void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED) {
            int e = errno;
            close(fd);
            return cmf_err_set(err, CMF_E_IO, path, "mmap of %lld bytes failed: %s",
                               (long long)st.st_size, strerror(e));
        }
        *base = p;
    }
    close(fd);
    return CMF_OK;
}

void cq_unmap_file(const uint8_t *base, size_t size) {
    if (base) munmap((void *)base, size);
}
