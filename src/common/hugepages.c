/* hugepages.c - move parts of a read-only file mapping onto anonymous 2 MiB pages (hugepages.h). */
#include "common/hugepages.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

bool cq_thp_available(void) {
    FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
    if (!f) return false;
    char line[128] = {0};
    bool ok = fgets(line, sizeof line, f) && !strstr(line, "[never]");
    fclose(f);
    return ok;
}

static int by_start(const void *a, const void *b) {
    uintptr_t x = (uintptr_t)((const cq_span *)a)->p, y = (uintptr_t)((const cq_span *)b)->p;
    return x < y ? -1 : x > y;
}

static size_t whole_windows(size_t bytes) {
    return (bytes + CQ_HUGE_PAGE - 1) & ~(size_t)(CQ_HUGE_PAGE - 1);
}

void *cq_huge_alloc(size_t bytes, bool huge) {
    const uintptr_t H = CQ_HUGE_PAGE;
    size_t len = whole_windows(bytes);
    if (!len) return NULL;
    uint8_t *raw = mmap(NULL, len + H, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) return NULL;
    uintptr_t r = (uintptr_t)raw, p = (r + H - 1) & ~(H - 1);
    if (p > r) munmap(raw, p - r); /* keep only the aligned windows */
    if (r + H > p) munmap((void *)(p + len), r + H - p);
    (void)madvise((void *)p, len, huge ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
    return (void *)p;
}

void cq_huge_free(void *p, size_t bytes) {
    if (p) munmap(p, whole_windows(bytes));
}

bool cq_huge_window_move(uintptr_t w) {
    const uintptr_t H = CQ_HUGE_PAGE;
    uint8_t *dst = cq_huge_alloc(H, true);
    if (!dst) return false;
#ifdef MADV_POPULATE_READ
    (void)madvise((void *)w, H, MADV_POPULATE_READ); /* one call, not a fault per 4 KiB page */
#endif
    memcpy(dst, (const void *)w, H);
    if (mprotect(dst, H, PROT_READ) != 0 ||
        mremap(dst, H, H, MREMAP_MAYMOVE | MREMAP_FIXED, (void *)w) == MAP_FAILED) {
        cq_huge_free(dst, H);
        return false;
    }
    return true;
}

size_t cq_huge_windows(const uint8_t *base, size_t len, cq_span *spans, size_t n, uintptr_t *out) {
    const uintptr_t H = CQ_HUGE_PAGE;
    if (!base || !len || !n) return 0;
    qsort(spans, n, sizeof *spans, by_start);
    /* the whole windows of the mapping */
    uintptr_t first = ((uintptr_t)base + H - 1) & ~(H - 1),
              end = ((uintptr_t)base + len) & ~(H - 1);
    size_t count = 0;
    uintptr_t next = first; /* windows below this are listed already */
    for (size_t i = 0; i < n; i++) {
        uintptr_t s = (uintptr_t)spans[i].p, e = s + spans[i].n;
        if (!spans[i].n || e <= first || s >= end) continue; /* no whole window */
        uintptr_t lo = s & ~(H - 1), hi = (e + H - 1) & ~(H - 1);
        if (lo < next) lo = next;
        if (hi > end) hi = end;
        for (uintptr_t w = lo; w < hi; w += H)
            out[count++] = w;
        if (hi > next) next = hi;
    }
    return count;
}
