/* maps.h - what /proc/self/maps says about an address, for tests of mappings. */
#ifndef CORTIQ_TEST_MAPS_H
#define CORTIQ_TEST_MAPS_H

#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

/* The mapping that holds address a: whether it names a file, and its bounds. false when
 * nothing is mapped there (or /proc/self/maps cannot be read). */
static inline bool test_mapping_at(uintptr_t a, bool *file_backed, uintptr_t *lo, uintptr_t *hi) {
    FILE *f = fopen("/proc/self/maps", "r");
    if (!f) return false;
    char line[512];
    bool found = false;
    while (!found && fgets(line, sizeof line, f)) {
        uintptr_t s, e;
        char path[256] = "";
        if (sscanf(line, "%" SCNxPTR "-%" SCNxPTR " %*s %*s %*s %*s %255s", &s, &e, path) < 2)
            continue;
        if (a >= s && a < e) found = true, *file_backed = path[0] == '/', *lo = s, *hi = e;
    }
    fclose(f);
    return found;
}

#endif
