/* checked.h - overflow-checked size arithmetic for every value that comes from a file.
 * Each returns false (and leaves *out unspecified) when the exact result does not fit. */
#ifndef CORTIQ_CHECKED_H
#define CORTIQ_CHECKED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

static inline bool ck_add_u64(uint64_t a, uint64_t b, uint64_t *out) {
    return !__builtin_add_overflow(a, b, out);
}
static inline bool ck_mul_u64(uint64_t a, uint64_t b, uint64_t *out) {
    return !__builtin_mul_overflow(a, b, out);
}
static inline bool ck_add_size(size_t a, size_t b, size_t *out) {
    return !__builtin_add_overflow(a, b, out);
}
static inline bool ck_mul_size(size_t a, size_t b, size_t *out) {
    return !__builtin_mul_overflow(a, b, out);
}
/* [off, off+len) lies within [0, limit) */
static inline bool ck_span_within(uint64_t off, uint64_t len, uint64_t limit) {
    uint64_t end;
    return ck_add_u64(off, len, &end) && end <= limit;
}
static inline uint64_t ck_align_up(uint64_t v, uint64_t a) {
    return (v + a - 1) / a * a;
}

#endif
