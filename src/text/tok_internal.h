/* tok_internal.h - the data structures shared by the tokenizer files (tok_*.c).
 * Pipeline (HF semantics): added tokens split the raw text -> normalizer -> added tokens
 * (normalized ones) split again -> pre-tokenizer -> BPE or WordPiece model -> post-processor. */
#ifndef CORTIQ_TOK_INTERNAL_H
#define CORTIQ_TOK_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cortiq/tokenizer.h"
#include "text/tok_json.h"

/* ---- growable byte buffer and piece lists ---- */
typedef struct tok_buf {
    char *p;
    size_t len, cap;
} tok_buf;

bool tok_buf_reserve(tok_buf *b, size_t extra);
bool tok_buf_put(tok_buf *b, const void *src, size_t n);
void tok_buf_free(tok_buf *b);

/* A piece: [off, off+len) of a list's buffer; at_origin: starts at offset 0 of the input. */
typedef struct tok_piece {
    size_t off, len;
    bool at_origin;
} tok_piece;

typedef struct tok_pieces {
    tok_buf text;
    tok_piece *v;
    size_t n, cap;
} tok_pieces;

bool tok_pieces_push(tok_pieces *pl, const char *s, size_t len, bool at_origin);
void tok_pieces_reset(tok_pieces *pl);
void tok_pieces_free(tok_pieces *pl);

/* ---- string -> id table (open addressing with the entries in the slots; strings in one arena)
 * ---- */
#define TOK_SLOT_EMPTY UINT64_MAX
typedef struct tok_strtab {
    char *arena;
    size_t arena_len, arena_cap;
    struct tok_str_entry {
        uint64_t hash;
        uint64_t off; /* TOK_SLOT_EMPTY: free slot */
        uint32_t len;
        int32_t id;
        uint64_t head; /* first 8 bytes, zero-padded: short strings compare without the arena */
    } * slots;
    size_t nslots; /* power of two, at most half full */
    size_t n;
} tok_strtab;

uint64_t tok_hash_bytes(const void *p, size_t n);
/* malloc for blocks of many MiB that are filled or read at random (huge pages where the OS has
 * them); free() releases it, realloc() may move it. */
void *tok_big_alloc(size_t bytes);
bool tok_strtab_init(tok_strtab *t, size_t expect);
/* Insert (or overwrite the id of) a string; false on allocation failure. */
bool tok_strtab_put(tok_strtab *t, const char *s, size_t len, int32_t id);
/* The same insert with h = tok_hash_bytes(s, len) computed by the caller (see the prefetch). */
bool tok_strtab_put_hashed(tok_strtab *t, const char *s, size_t len, int32_t id, uint64_t h);
/* Make room for `bytes` more string bytes up front (inserts then never move the arena). */
bool tok_strtab_reserve(tok_strtab *t, size_t bytes);
int32_t tok_strtab_get(const tok_strtab *t, const char *s, size_t len); /* -1 if absent */
/* The same lookup with h = tok_hash_bytes(s, len) computed by the caller, and a prefetch of the
 * slot a hash probes first (bulk loaders hide memory latency with them). */
int32_t tok_strtab_get_hashed(const tok_strtab *t, const char *s, size_t len, uint64_t h);
void tok_strtab_prefetch(const tok_strtab *t, uint64_t h);
void tok_strtab_free(tok_strtab *t);

/* ---- merge table: (left id, right id) -> (rank, merged id) ---- */
typedef struct tok_merges {
    uint64_t *keys; /* (a << 32 | b) + 1; 0 = empty */
    uint32_t *rank;
    int32_t *merged;
    size_t nslots, n;
} tok_merges;

bool tok_merges_init(tok_merges *m, size_t expect);
bool tok_merges_put(tok_merges *m, int32_t a, int32_t b, uint32_t rank, int32_t merged);
bool tok_merges_get(const tok_merges *m, int32_t a, int32_t b, uint32_t *rank, int32_t *merged);
void tok_merges_prefetch(const tok_merges *m, int32_t a, int32_t b);
void tok_merges_free(tok_merges *m);

/* ---- regex (Oniguruma, the engine HF tokenizers uses) ---- */
typedef struct tok_regex tok_regex;
cmf_status tok_regex_new(const char *pattern, size_t len, tok_regex **out, cmf_err *err);
void tok_regex_free(tok_regex *re);
/* Find the first match at or after `start` in s[0..len); thread-safe. A search from start 0 begins
 * a new iteration over s with a fresh backtracking budget (tok_regex.c); false when there is no
 * match or the budget ran out (then recorded for this thread, see tok_regex_fail_check). */
bool tok_regex_search(const tok_regex *re, const char *s, size_t len, size_t start, size_t *ms,
                      size_t *me);
/* Backtracking steps one iteration over a len-byte piece may take: per byte + base. */
#define TOK_RE_RETRIES_PER_BYTE 256u
#define TOK_RE_RETRIES_BASE     256u
unsigned long tok_regex_budget(size_t len);
/* Thread CPU time one iteration over a len-byte piece may take (ns): per byte + base. A limit on
 * the work that is no backtracking (failed start positions; see tok_regex.c): real pre-tokenizer
 * patterns take 25-35 ns per byte on median text and <= 0.5 us on the slowest adversarial text
 * (docs/SECURITY.md); the base covers short pieces and the clock's granularity. */
#define TOK_RE_NS_PER_BYTE  10000u     /* 10 us */
#define TOK_RE_TIME_BASE_NS 100000000u /* 100 ms */
uint64_t tok_regex_time_ns(size_t len);
/* Forget a recorded budget failure of this thread (call before encoding or decoding). */
void tok_regex_fail_reset(void);
/* CMF_E_LIMIT naming the piece length and the budget if a search of this thread ran out since the
 * last reset (and clears it); CMF_OK otherwise. */
cmf_status tok_regex_fail_check(cmf_err *err, const char *ctx);

/* A Split / Replace pattern: a literal string or a regex. */
typedef struct tok_pattern {
    char *lit;
    size_t lit_len;
    tok_regex *re; /* NULL for a literal */
} tok_pattern;

/* Next match of a pattern at or after pos (literal: memmem; regex: HF's find_iter rule of
 * skipping an empty match right after the previous one). *last_end tracks that rule: init SIZE_MAX.
 */
bool tok_pattern_next(const tok_pattern *p, const char *s, size_t len, size_t *pos,
                      size_t *last_end, size_t *ms, size_t *me);

/* ---- unicode helpers ---- */
/* Decode one code point at s[i] (valid UTF-8 assumed); returns its byte length. */
size_t tok_utf8_decode(const char *s, size_t len, size_t i, uint32_t *cp);
size_t tok_utf8_encode(uint32_t cp, char out[4]);
/* Replace invalid UTF-8 by U+FFFD (maximal subparts); returns true if the input was already valid
 * (then *out is untouched). */
bool tok_utf8_sanitize(const char *s, size_t len, tok_buf *out, bool *ok_alloc);
bool tok_is_whitespace(uint32_t cp);  /* Unicode White_Space (Rust char::is_whitespace) */
bool tok_is_numeric(uint32_t cp);     /* Nd | Nl | No (Rust char::is_numeric) */
bool tok_is_punctuation(uint32_t cp); /* ASCII punctuation or a P* category */
bool tok_is_word_char(uint32_t cp);   /* regex \w: letters, marks, digits, Pc, joiners */

/* ---- components (tagged trees) ---- */
typedef enum tok_norm_type {
    TOK_NORM_NFC,
    TOK_NORM_NFD,
    TOK_NORM_NFKC,
    TOK_NORM_NFKD,
    TOK_NORM_LOWERCASE,
    TOK_NORM_REPLACE,
    TOK_NORM_PREPEND,
    TOK_NORM_STRIP,
    TOK_NORM_SEQUENCE,
    TOK_NORM_STRIP_ACCENTS,
    TOK_NORM_BERT,
} tok_norm_type;

typedef struct tok_normalizer {
    tok_norm_type type;
    tok_pattern pat; /* Replace */
    char *content;   /* Replace content, Prepend string */
    size_t content_len;
    bool left, right;                                         /* Strip */
    bool clean_text, chinese_chars, strip_accents, lowercase; /* BertNormalizer */
    struct tok_normalizer **kids;
    size_t nkids;
} tok_normalizer;

typedef enum tok_behavior {
    TOK_SPLIT_REMOVED,
    TOK_SPLIT_ISOLATED,
    TOK_SPLIT_MERGED_PREV,
    TOK_SPLIT_MERGED_NEXT,
    TOK_SPLIT_CONTIGUOUS,
} tok_behavior;

typedef enum tok_pre_type {
    TOK_PRE_BYTELEVEL,
    TOK_PRE_SPLIT,
    TOK_PRE_METASPACE,
    TOK_PRE_DIGITS,
    TOK_PRE_PUNCTUATION,
    TOK_PRE_WHITESPACE,
    TOK_PRE_WHITESPACE_SPLIT,
    TOK_PRE_SEQUENCE,
    TOK_PRE_BERT,
} tok_pre_type;

typedef enum tok_prepend { TOK_PREPEND_ALWAYS, TOK_PREPEND_FIRST, TOK_PREPEND_NEVER } tok_prepend;

typedef struct tok_pretok {
    tok_pre_type type;
    tok_pattern pat;        /* Split; ByteLevel/Whitespace own regex in pat.re */
    tok_behavior behavior;  /* Split, Punctuation */
    bool invert;            /* Split */
    bool add_prefix_space;  /* ByteLevel */
    bool use_regex;         /* ByteLevel */
    bool individual_digits; /* Digits */
    char repl[4];           /* Metaspace replacement char (UTF-8) */
    size_t repl_len;
    tok_prepend prepend; /* Metaspace */
    bool split;          /* Metaspace */
    struct tok_pretok **kids;
    size_t nkids;
} tok_pretok;

typedef enum tok_dec_type {
    TOK_DEC_BYTELEVEL,
    TOK_DEC_BYTEFALLBACK,
    TOK_DEC_FUSE,
    TOK_DEC_STRIP,
    TOK_DEC_REPLACE,
    TOK_DEC_METASPACE,
    TOK_DEC_BPE,
    TOK_DEC_SEQUENCE,
    TOK_DEC_WORDPIECE,
} tok_dec_type;

typedef struct tok_decoder {
    tok_dec_type type;
    tok_pattern pat; /* Replace */
    char *content;   /* Replace content, Strip char, BPE suffix */
    size_t content_len;
    size_t start, stop; /* Strip */
    bool cleanup;       /* WordPiece (content = prefix) */
    char repl[4];       /* Metaspace */
    size_t repl_len;
    tok_prepend prepend; /* Metaspace */
    struct tok_decoder **kids;
    size_t nkids;
} tok_decoder;

/* Post-processor, flattened: the ids placed before and after the single sequence. */
typedef struct tok_post {
    int32_t *pre, *post;
    size_t npre, npost;
} tok_post;

typedef struct tok_added {
    size_t off, len; /* content in tok->added_text */
    int32_t id;
    bool special, lstrip, rstrip, single_word, normalized;
} tok_added;

/* Byte trie over added-token contents; leftmost-longest matching. */
typedef struct tok_trie {
    tok_merges edges; /* key (node, byte) -> child node (stored in `merged`) */
    int32_t *term;    /* per node: added-token index or -1 */
    size_t nnodes, cap;
    uint8_t first[32]; /* bitmap of first bytes */
    bool empty;
} tok_trie;

struct cmf_tokenizer {
    /* model */
    tok_strtab vocab; /* model vocabulary */
    tok_merges merges;
    size_t *id_off; /* id -> token string in id_text (model + added), SIZE_MAX if none */
    uint32_t *id_len;
    uint8_t *id_special;
    size_t nids;
    tok_buf id_text;
    int32_t unk_id; /* -1 if none */
    bool byte_fallback, fuse_unk, ignore_merges;
    bool wordpiece; /* WordPiece model instead of BPE (cont_prefix, unk_id, max_word_chars) */
    size_t max_word_chars;
    bool wordlevel;    /* WordLevel model: the whole word from the vocabulary, else unk */
    bool unigram;      /* Unigram model instead of BPE (unk_id, byte_fallback, the fields below) */
    double *uni_score; /* per vocabulary index */
    double uni_min;    /* lowest score */
    tok_trie uni_trie; /* every vocabulary string -> its id */
    char *cont_prefix, *eow_suffix;
    size_t cont_prefix_len, eow_suffix_len;
    int32_t byte_ids[256];  /* <0xXX> ids, -1 if absent */
    int32_t small_cp[1024]; /* id of single code points < 1024 as a whole token, -1 if absent */
    /* added tokens */
    tok_added *added;
    size_t nadded;
    tok_buf added_text;
    tok_strtab added_map; /* content -> id */
    tok_trie trie_raw, trie_norm;
    /* components (NULL when absent) */
    tok_normalizer *norm;
    tok_pretok *pre;
    tok_decoder *dec;
    tok_post post;
};

/* Component construction (tok_load_components.c) */
cmf_status tok_load_normalizer(tjv j, tok_normalizer **out, cmf_err *err);
cmf_status tok_load_pretok(tjv j, tok_pretok **out, cmf_err *err);
cmf_status tok_load_decoder(tjv j, tok_decoder **out, cmf_err *err);
cmf_status tok_load_post(tjv j, const cmf_tokenizer *tok, tok_post *out, cmf_err *err);
void tok_normalizer_free(tok_normalizer *n);
void tok_pretok_free(tok_pretok *p);
void tok_decoder_free(tok_decoder *d);
void tok_pattern_free(tok_pattern *p);

/* Running components */
/* Normalize s into out (appending). false on allocation failure or past tok_norm_cap. */
bool tok_normalize(const tok_normalizer *n, const char *s, size_t len, tok_buf *out);
/* What normalizing a len-byte piece may append to `out`, every intermediate text of a Sequence
 * included: TOK_NORM_GROWTH x len + TOK_NORM_GROWTH_BASE bytes. Real normalizers grow text by a
 * small factor (Replace ' ' -> U+2581: 3x; NFKC/NFKD of compatibility characters: ~11x at
 * most), but a tokenizer.json can chain Replace steps that each multiply the text (found by
 * fuzz_tokenizer_json: 4 bytes asking for 8 GiB). Past the cap tok_normalize returns false and
 * records the failure for this thread; tok_regex_fail_check then reports CMF_E_LIMIT. */
#define TOK_NORM_GROWTH      64u
#define TOK_NORM_GROWTH_BASE 65536u
size_t tok_norm_cap(size_t len);
void tok_norm_fail_growth(size_t len, size_t cap);
/* Pre-tokenize: in -> out (out is reset first); `tmp` is scratch. false on allocation failure. */
bool tok_pretokenize(const tok_pretok *p, tok_pieces *in, tok_pieces *out, tok_pieces *tmp);

/* Added-token trie */
bool tok_trie_build(tok_trie *t, const cmf_tokenizer *tok, bool normalized);
bool tok_trie_init(tok_trie *t); /* an empty trie (root only) */
/* Add a string ending in `index` (a string already present keeps its first index). */
bool tok_trie_insert(tok_trie *t, const char *s, size_t len, int32_t index);
int32_t tok_trie_child(const tok_trie *t, int32_t node,
                       unsigned char byte); /* -1 if none; root = 0 */
void tok_trie_free(tok_trie *t);

/* Split text into added-token matches and plain segments (HF find_matches). Appends to segs: each
 * entry {off,len,id} with id >= 0 for an added token and -1 for plain text. */
typedef struct tok_seg {
    size_t off, len;
    int32_t id;
} tok_seg;
bool tok_added_split(const cmf_tokenizer *tok, const tok_trie *t, const char *s, size_t len,
                     tok_seg **segs, size_t *nseg, size_t *cap);

/* BPE model: encode one pre-token, appending ids. */
typedef struct tok_ids {
    int32_t *v;
    size_t n, cap;
} tok_ids;
bool tok_ids_push(tok_ids *ids, int32_t id);
typedef struct tok_bpe_scratch tok_bpe_scratch;
tok_bpe_scratch *tok_bpe_scratch_new(void);
void tok_bpe_scratch_free(tok_bpe_scratch *s);
bool tok_bpe_encode(const cmf_tokenizer *tok, tok_bpe_scratch *s, const char *w, size_t len,
                    tok_ids *out);
/* WordPiece model: greedy longest match with the continuing-subword prefix; unk for the word when
 * a piece is missing or the word is longer than max_word_chars characters. */
bool tok_wordpiece_encode(const cmf_tokenizer *tok, tok_buf *scratch, const char *w, size_t len,
                          tok_ids *out);
/* Unigram model: Viterbi over every vocabulary match (scores summed, strictly better wins, unknown
 * characters cost min_score - 10 and fuse), then byte_fallback or unk for pieces not in the vocab.
 * `scratch` holds the lattice between calls. */
bool tok_unigram_encode(const cmf_tokenizer *tok, tok_buf *scratch, const char *w, size_t len,
                        tok_ids *out);

/* Decoders: run over a list of token strings (pieces), producing the final text. */
bool tok_decode_tokens(const tok_decoder *d, tok_pieces *toks, tok_buf *out);

#endif
