/* hugepages.h - move parts of a read-only file mapping onto anonymous 2 MiB pages, in place.
 *
 * A stream over a file mapping runs on the page cache's 4 KiB pages: a TLB miss every 4 KiB,
 * and hardware prefetchers that stop at each page boundary. An anonymous mapping can take
 * transparent huge pages (MADV_HUGEPAGE, honoured in THP's default "madvise" mode). Each
 * 2 MiB-aligned window of the mapping that overlaps a span is copied into such a mapping, made
 * read-only and mremap'd over the window: the bytes and their addresses stay the same, so
 * pointers into the mapping stay valid and munmap of the whole mapping still releases it. */
#ifndef CORTIQ_HUGEPAGES_H
#define CORTIQ_HUGEPAGES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CQ_HUGE_PAGE ((uint64_t)2 << 20)

typedef struct cq_span {
    const uint8_t *p;
    uint64_t n;
} cq_span;

/* bytes, rounded up to whole 2 MiB windows, of zeroed anonymous memory starting on a window:
 * MADV_HUGEPAGE when huge (2 MiB pages where the kernel offers them), else MADV_NOHUGEPAGE
 * (4 KiB pages even where THP is "always"). NULL when out of memory. Release with
 * cq_huge_free(p, bytes). */
void *cq_huge_alloc(size_t bytes, bool huge);
void cq_huge_free(void *p, size_t bytes);

/* Transparent huge pages are enabled for madvise'd regions (THP "always" or "madvise"). */
bool cq_thp_available(void);

/* The whole 2 MiB windows of the mapping [base, base + len) that overlap any of the spans (spans
 * outside the mapping are ignored; spans is sorted in place), in address order, into out
 * (room for len / CQ_HUGE_PAGE entries). The partial windows at the mapping's ends are left
 * out. Returns their number. */
size_t cq_huge_windows(const uint8_t *base, size_t len, cq_span *spans, size_t n, uintptr_t *out);

/* Move the window at w (from cq_huge_windows of a read-only, private mapping) onto an
 * anonymous 2 MiB page: map its file pages, copy them, replace the window by the copy. The
 * window's file pages are unmapped as the copy takes their place, so the resident set holds
 * it twice only meanwhile. False (the window unchanged: mremap replaces it atomically) when
 * out of memory or refused. Windows may move concurrently from several threads. */
bool cq_huge_window_move(uintptr_t w);

#endif
