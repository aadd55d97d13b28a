/* dlopen_no_curl.c - LD_PRELOAD shim for test_pull_no_curl.sh: dlopen of libcurl fails, as on
 * a system without the libcurl4 package; every other dlopen goes to the C library's. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <string.h>

void *dlopen(const char *file, int mode) {
    if (file && strstr(file, "libcurl")) return NULL;
    void *(*real)(const char *, int) = (void *(*)(const char *, int))dlsym(RTLD_NEXT, "dlopen");
    return real ? real(file, mode) : NULL;
}
