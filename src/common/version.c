/* version.c - the library's own version, fixed when it was compiled (cortiq/version.h). */
#include "cortiq/version.h"

const char *cortiq_version(void) {
    return CORTIQ_VERSION_STRING;
}

int cortiq_version_number(void) {
    return CORTIQ_VERSION_NUMBER;
}
