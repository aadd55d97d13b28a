/* fileio.h - read a whole (small) file into memory. */
#ifndef CORTIQ_FILEIO_H
#define CORTIQ_FILEIO_H

#include <stddef.h>

/* malloc'd contents plus a terminating NUL (not counted in *len); NULL if the file cannot be
 * read (errno tells why). */
char *cq_read_file(const char *path, size_t *len);

#endif
