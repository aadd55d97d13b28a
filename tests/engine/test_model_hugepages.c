/* cq_huge_windows (common/hugepages.h) on an 11 MiB file mapped read-only at an address that is
 * not 2 MiB-aligned: the windows overlapping the spans become anonymous mappings with the
 * same bytes at the same addresses, the windows no span touches and the partial ends stay
 * file-backed, a span outside the mapping is ignored, and one munmap of the whole mapping
 * releases every piece. Whether the kernel really backed a window with a huge page depends on
 * its free memory, so AnonHugePages is printed, not required. The model-level use is in
 * test_model_prefetch (logits) and test_real_chat (real models through cortiq_runtime_open
 * and cortiq_generate, whose windows do move). */
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/hugepages.h"
#include "maps.h"
#include "test.h"

#define MIB ((uint64_t)1 << 20)

/* AnonHugePages (kB) of the mapping that starts at lo, from /proc/self/smaps. */
static long anon_huge_kb(uintptr_t lo) {
    FILE *f = fopen("/proc/self/smaps", "r");
    CHECK(f != NULL);
    char line[512];
    bool in = false;
    long kb = -1;
    while (fgets(line, sizeof line, f)) {
        uintptr_t s, e;
        if (sscanf(line, "%" SCNxPTR "-%" SCNxPTR " ", &s, &e) == 2 &&
            strchr(line, '-') < strchr(line, ' '))
            in = s == lo;
        else if (in && sscanf(line, "AnonHugePages: %ld kB", &kb) == 1)
            break;
    }
    fclose(f);
    return kb;
}

static void check_windows(void) {
    const char *path = "hugepages_test.bin";
    const uint64_t len = 11 * MIB;
    uint8_t *want = malloc(len);
    CHECK(want != NULL);
    for (uint64_t i = 0; i < len; i++)
        want[i] = (uint8_t)(i * 2654435761u >> 13);
    FILE *f = fopen(path, "wb");
    CHECK(f && fwrite(want, 1, len, f) == len && fclose(f) == 0);
    int fd = open(path, O_RDONLY);
    CHECK(fd >= 0);
    /* a 2 MiB-aligned hole, then the file 64 KiB into it: the mapping starts off-window */
    uint8_t *hole = mmap(NULL, len + 4 * MIB, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(hole != MAP_FAILED);
    uintptr_t at = (((uintptr_t)hole + 2 * MIB - 1) & ~(uintptr_t)(2 * MIB - 1)) + 64 * 1024;
    uint8_t *base = mmap((void *)at, len, PROT_READ, MAP_PRIVATE | MAP_FIXED, fd, 0);
    CHECK(base == (uint8_t *)at);
    close(fd);
    uintptr_t w0 = at - 64 * 1024; /* windows: [w0 + 2k MiB, w0 + 2(k+1) MiB) */
    /* spans: inside window 1, straddling windows 3 and 4, in the partial last window, and one
     * outside the mapping (on the stack) */
    uint8_t outside[64];
    cq_span spans[4] = {
        {(const uint8_t *)(w0 + 2 * MIB + 1000), 5000},
        {(const uint8_t *)(w0 + 8 * MIB - 100), 200},
        {base + len - 10, 10},
        {outside, sizeof outside},
    };
    uintptr_t win[8];
    size_t nw = cq_huge_windows(base, len, spans, 4, win);
    CHECK_MSG(nw == 3 && win[0] == w0 + 2 * MIB && win[1] == w0 + 6 * MIB && win[2] == w0 + 8 * MIB,
              "%zu windows", nw);
    uint64_t moved = 0;
    for (size_t i = 0; i < nw && cq_thp_available(); i++)
        moved += cq_huge_window_move(win[i]) ? CQ_HUGE_PAGE : 0;
    printf("moved %" PRIu64 " MiB (THP %s)\n", moved / MIB,
           cq_thp_available() ? "available" : "not available");
    CHECK_MSG(memcmp(base, want, len) == 0, "the mapping's bytes changed");
    bool fb;
    uintptr_t lo, hi;
    if (!cq_thp_available()) {
        CHECK(moved == 0);
    } else {
        CHECK_MSG(moved == 6 * MIB, "moved %" PRIu64 " bytes, want windows 1, 3 and 4", moved);
        CHECK(test_mapping_at(w0 + 2 * MIB, &fb, &lo, &hi) && !fb && lo == w0 + 2 * MIB &&
              hi == w0 + 4 * MIB);
        printf("window 1: AnonHugePages %ld kB\n", anon_huge_kb(lo));
        CHECK(test_mapping_at(w0 + 6 * MIB, &fb, &lo, &hi) && !fb && lo == w0 + 6 * MIB);
        CHECK(test_mapping_at(w0 + 8 * MIB, &fb, &lo, &hi) && !fb && hi == w0 + 10 * MIB);
        CHECK(test_mapping_at(w0 + 4 * MIB, &fb, &lo, &hi) && fb); /* window 2: no span */
    }
    CHECK(test_mapping_at(at, &fb, &lo, &hi) && fb);           /* the partial first window */
    CHECK(test_mapping_at(at + len - 1, &fb, &lo, &hi) && fb); /* the partial last window */
    CHECK(mprotect(base, len, PROT_READ) == 0);                /* still read-only, all of it */
    CHECK(munmap(base, len) == 0);
    for (uint64_t o = 0; o < len; o += MIB)
        CHECK_MSG(!test_mapping_at(at + o, &fb, &lo, &hi), "offset %" PRIu64 " still mapped", o);
    munmap(hole, len + 4 * MIB);
    unlink(path);
    free(want);
}

int main(void) {
    check_windows();
    TEST_DONE();
}
