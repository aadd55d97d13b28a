/* hash64.c - spec §8 hash64: scalar reference, streaming state, dispatch. */
#include "cortiq/hash.h"

#include <string.h>

#include "common/bytes.h"
#include "common/cpu.h"
#include "format/hash64_impl.h"

uint64_t hash64_fold_scalar(const uint8_t *p, size_t n, uint64_t first) {
    uint64_t acc = 0, salt = first * HASH64_SALT;
    for (size_t i = 0; i < n; i++, salt += HASH64_SALT)
        acc ^= hash64_fmix(ld_u64(p + 8 * i)) ^ salt;
    return acc;
}

typedef uint64_t (*hash64_fold_fn)(const uint8_t *p, size_t n, uint64_t first);
static const hash64_fold_fn k_fold[CQ_ISA_COUNT] = {
    [CQ_ISA_SCALAR] = hash64_fold_scalar,
    [CQ_ISA_AVX2] = hash64_fold_avx2,
    [CQ_ISA_AVX512] = hash64_fold_avx512,
};

uint64_t cmf_hash64_fold_words(const uint8_t *words, size_t nwords, uint64_t first_word) {
    return CQ_ISA_SELECT(k_fold)(words, nwords, first_word);
}

uint64_t cmf_hash64_finish(uint64_t fold, uint64_t len) {
    return hash64_fmix(fold ^ len);
}

uint64_t cmf_hash64(const void *data, size_t len) {
    const uint8_t *p = data;
    size_t nw = len / 8;
    uint64_t acc = cmf_hash64_fold_words(p, nw, 0);
    if (len % 8) {
        uint8_t last[8] = {0};
        memcpy(last, p + 8 * nw, len % 8);
        acc ^= hash64_fmix(ld_u64(last)) ^ (nw * HASH64_SALT);
    }
    return cmf_hash64_finish(acc, len);
}

void cmf_hash64_init(cmf_hash64_state *st) {
    memset(st, 0, sizeof *st);
}

void cmf_hash64_update(cmf_hash64_state *st, const void *data, size_t len) {
    const uint8_t *p = data;
    size_t have = st->nbytes % 8;
    if (have) {
        size_t take = 8 - have < len ? 8 - have : len;
        memcpy(st->tail + have, p, take);
        st->nbytes += take;
        p += take;
        len -= take;
        if (st->nbytes % 8) return;
        st->acc ^= hash64_fmix(ld_u64(st->tail)) ^ ((st->nbytes / 8 - 1) * HASH64_SALT);
    }
    size_t nw = len / 8;
    st->acc ^= cmf_hash64_fold_words(p, nw, st->nbytes / 8);
    st->nbytes += 8 * nw;
    memcpy(st->tail, p + 8 * nw, len % 8);
    st->nbytes += len % 8;
}

uint64_t cmf_hash64_final(const cmf_hash64_state *st) {
    uint64_t acc = st->acc;
    size_t have = st->nbytes % 8;
    if (have) {
        uint8_t last[8] = {0};
        memcpy(last, st->tail, have);
        acc ^= hash64_fmix(ld_u64(last)) ^ ((st->nbytes / 8) * HASH64_SALT);
    }
    return cmf_hash64_finish(acc, st->nbytes);
}

void cmf_hash64_to_hex(uint64_t h, char out[17]) {
    static const char hex[] = "0123456789abcdef";
    for (int i = 15; i >= 0; i--, h >>= 4)
        out[i] = hex[h & 15];
    out[16] = '\0';
}

bool cmf_hash64_from_hex(const char *s, uint64_t *out) {
    uint64_t v = 0;
    size_t n = 0;
    for (; s[n]; n++) {
        char c = s[n];
        unsigned d;
        if (c >= '0' && c <= '9')
            d = (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f')
            d = (unsigned)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F')
            d = (unsigned)(c - 'A' + 10);
        else
            return false;
        if (n >= 16) return false;
        v = (v << 4) | d;
    }
    if (n == 0) return false;
    *out = v;
    return true;
}
