/* pieces.h - a thread's range of work handed out in pieces of half what is left of it, so a
 * range goes in a few large pieces and ends in small ones. The owner and any thread helping
 * it claim from the same counter, so threads that run at different speeds (vCPUs a hypervisor
 * slows) still finish within one small piece of each other. Used by the decode products
 * (src/engine/matmul_sched.c) and by the measurements of `cortiq bench quant`
 * (src/bench/kernel_bench.c), so both split work the same way. */
#ifndef CORTIQ_COMMON_PIECES_H
#define CORTIQ_COMMON_PIECES_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

/* The next piece [*a, *b) of the range [lo, end) (end - lo < 2^32) whose claims are counted in
 * *taken as tag << 32 | units taken: a value with another tag counts as none taken, so a
 * caller that changes the tag per job never has to reset the counter. Pieces are multiples of
 * `step` units (at least `step`; the last one what is left) starting at lo. False when the
 * range is used up. */
static inline bool cq_take_piece(atomic_ullong *taken, uint32_t tag, uint64_t lo, uint64_t end,
                                 uint64_t step, uint64_t *a, uint64_t *b) {
    unsigned long long cur = atomic_load_explicit(taken, memory_order_relaxed);
    for (;;) {
        uint64_t done = cur >> 32 == tag ? cur & 0xFFFFFFFFu : 0;
        if (lo + done >= end) return false;
        uint64_t left = end - lo - done, n = (left / 2 + step - 1) / step * step;
        if (n < step) n = step;
        if (n > left) n = left;
        unsigned long long want = (unsigned long long)tag << 32 | (done + n);
        if (atomic_compare_exchange_weak_explicit(taken, &cur, want, memory_order_relaxed,
                                                  memory_order_relaxed)) {
            *a = lo + done, *b = lo + done + n;
            return true;
        }
    }
}

#endif
