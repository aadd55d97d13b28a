/* hash64_impl.h - the per-ISA word-fold kernels behind cmf_hash64 (spec §8). */
#ifndef CORTIQ_HASH64_IMPL_H
#define CORTIQ_HASH64_IMPL_H

#include <stddef.h>
#include <stdint.h>

#define HASH64_SALT UINT64_C(0x9E3779B97F4A7C15)

static inline uint64_t hash64_fmix(uint64_t k) {
    k ^= k >> 33;
    k *= UINT64_C(0xff51afd7ed558ccd);
    k ^= k >> 33;
    k *= UINT64_C(0xc4ceb9fe1a85ec53);
    k ^= k >> 33;
    return k;
}

/* XOR over i in [first, first+n) of fmix64(word_i) ^ i*SALT. */
uint64_t hash64_fold_scalar(const uint8_t *p, size_t n, uint64_t first);
uint64_t hash64_fold_avx2(const uint8_t *p, size_t n, uint64_t first);
uint64_t hash64_fold_avx512(const uint8_t *p, size_t n, uint64_t first);

#endif
