/* cortiq/hash.h - hash64 of spec §8, the tensor and section checksum.
 *
 * Definition (confirmed against the spec's test vectors): split the input into
 * 64-bit little-endian words, zero-padding the last one; the state starts at 0
 * and for word i is XORed with fmix64(word_i) ^ (i * 0x9E3779B97F4A7C15);
 * then state ^= byte length, and the result is fmix64(state).
 * Hex text of a hash (section_hashes, base_dir_hash) is 16 lowercase digits,
 * most significant first.
 */
#ifndef CORTIQ_HASH_H
#define CORTIQ_HASH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cortiq/export.h"

#ifdef __cplusplus
extern "C" {
#endif

/* hash64 of len bytes (best kernel for this CPU). */
CORTIQ_API uint64_t cmf_hash64(const void *data, size_t len);

/* Streaming form for data that arrives in pieces (the writer's producers). */
typedef struct cmf_hash64_state {
    uint64_t acc;    /* XOR fold of finished words */
    uint64_t nbytes; /* bytes absorbed */
    uint8_t tail[8]; /* partial word */
} cmf_hash64_state;

CORTIQ_API void cmf_hash64_init(cmf_hash64_state *st);
CORTIQ_API void cmf_hash64_update(cmf_hash64_state *st, const void *data, size_t len);
CORTIQ_API uint64_t cmf_hash64_final(const cmf_hash64_state *st);

/* Fold of the whole words [first_word, first_word + nwords) of data that starts at
 * word index first_word: lets threads hash disjoint parts of one buffer.
 * cmf_hash64 == cmf_hash64_finish(fold of all words, len). */
CORTIQ_API uint64_t cmf_hash64_fold_words(const uint8_t *words, size_t nwords, uint64_t first_word);
CORTIQ_API uint64_t cmf_hash64_finish(uint64_t fold, uint64_t len);

/* 16 lowercase hex digits + NUL. */
CORTIQ_API void cmf_hash64_to_hex(uint64_t h, char out[17]);
/* Parse 1..16 hex digits (either case); false on anything else. */
CORTIQ_API bool cmf_hash64_from_hex(const char *s, uint64_t *out);

#ifdef __cplusplus
}
#endif
#endif
