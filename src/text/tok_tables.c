/* tok_tables.c - the tokenizer's containers: byte buffers, piece lists, id lists, the
 * string -> id hash table and the merge-pair table. All sizes are overflow-checked. */
#include <stdlib.h>
#include <string.h>
#if defined(__linux__)
#include <sys/mman.h>
#endif

#include "common/checked.h"
#include "text/tok_internal.h"

static bool grow(void **p, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap) return true;
    size_t nc = *cap ? *cap : 16;
    while (nc < need) {
        if (nc > SIZE_MAX / 2) return false;
        nc *= 2;
    }
    size_t bytes;
    if (!ck_mul_size(nc, elem, &bytes)) return false;
    void *q = realloc(*p, bytes);
    if (!q) return false;
    *p = q;
    *cap = nc;
    return true;
}

bool tok_buf_reserve(tok_buf *b, size_t extra) {
    size_t need;
    if (!ck_add_size(b->len, extra, &need) || !ck_add_size(need, 1, &need)) return false;
    return grow((void **)&b->p, &b->cap, need, 1);
}

bool tok_buf_put(tok_buf *b, const void *src, size_t n) {
    if (!tok_buf_reserve(b, n)) return false;
    if (n) memcpy(b->p + b->len, src, n);
    b->len += n;
    b->p[b->len] = 0;
    return true;
}

void tok_buf_free(tok_buf *b) {
    free(b->p);
    b->p = NULL;
    b->len = b->cap = 0;
}

bool tok_pieces_push(tok_pieces *pl, const char *s, size_t len, bool at_origin) {
    if (!grow((void **)&pl->v, &pl->cap, pl->n + 1, sizeof *pl->v)) return false;
    size_t off = pl->text.len;
    if (!tok_buf_put(&pl->text, s, len)) return false;
    pl->v[pl->n++] = (tok_piece){off, len, at_origin};
    return true;
}

void tok_pieces_reset(tok_pieces *pl) {
    pl->n = 0;
    pl->text.len = 0;
}

void tok_pieces_free(tok_pieces *pl) {
    tok_buf_free(&pl->text);
    free(pl->v);
    pl->v = NULL;
    pl->n = pl->cap = 0;
}

bool tok_ids_push(tok_ids *ids, int32_t id) {
    if (!grow((void **)&ids->v, &ids->cap, ids->n + 1, sizeof *ids->v)) return false;
    ids->v[ids->n++] = id;
    return true;
}

/* 64-bit multiply-xorshift hash over 8-byte words: fast and good enough for table lookups. */
uint64_t tok_hash_bytes(const void *p, size_t n) {
    const unsigned char *s = p;
    uint64_t h = 0x9E3779B97F4A7C15ull ^ (n * 0xff51afd7ed558ccdull);
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, s, 8);
        h = (h ^ w) * 0xbf58476d1ce4e5b9ull;
        h ^= h >> 31;
        s += 8;
        n -= 8;
    }
    uint64_t w = 0;
    for (size_t i = 0; i < n; i++)
        w |= (uint64_t)s[i] << (8 * i);
    h = (h ^ w) * 0x94d049bb133111ebull;
    h ^= h >> 29;
    h *= 0xbf58476d1ce4e5b9ull;
    h ^= h >> 32;
    return h;
}

static size_t pow2_slots(size_t expect) {
    size_t n = 64;
    while (n < expect * 2 && n < ((size_t)1 << 40))
        n *= 2;
    return n;
}

/* Large hash tables are read at random (a big vocabulary's table is ~16 MiB): on Linux, ask for
 * transparent huge pages so the lookups do not miss the TLB on nearly every probe, and so that
 * filling tens of MiB takes a few page faults instead of thousands. free()-able. */
void *tok_big_alloc(size_t bytes) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    const size_t huge = (size_t)2 << 20;
    if (bytes >= 2 * huge) {
        void *p = NULL;
        if (posix_memalign(&p, huge, bytes) != 0) return NULL;
        madvise(p, bytes & ~(huge - 1), MADV_HUGEPAGE); /* advisory: failure is harmless */
        return p;
    }
#endif
    return malloc(bytes);
}

static struct tok_str_entry *slots_new(size_t n) {
    struct tok_str_entry *sl = tok_big_alloc(n * sizeof *sl);
    if (sl)
        for (size_t i = 0; i < n; i++)
            sl[i].off = TOK_SLOT_EMPTY;
    return sl;
}

bool tok_strtab_init(tok_strtab *t, size_t expect) {
    memset(t, 0, sizeof *t);
    t->nslots = pow2_slots(expect);
    t->slots = slots_new(t->nslots);
    return t->slots != NULL;
}

static bool strtab_rehash(tok_strtab *t) {
    size_t ns = t->nslots * 2;
    struct tok_str_entry *sl = slots_new(ns);
    if (!sl) return false;
    for (size_t i = 0; i < t->nslots; i++) {
        if (t->slots[i].off == TOK_SLOT_EMPTY) continue;
        size_t k = (size_t)t->slots[i].hash & (ns - 1);
        while (sl[k].off != TOK_SLOT_EMPTY)
            k = (k + 1) & (ns - 1);
        sl[k] = t->slots[i];
    }
    free(t->slots);
    t->slots = sl;
    t->nslots = ns;
    return true;
}

static inline uint64_t head8(const char *s, size_t len) {
    uint64_t h = 0;
    memcpy(&h, s, len < 8 ? len : 8);
    return h;
}

static inline bool entry_eq(const tok_strtab *t, const struct tok_str_entry *e, uint64_t h,
                            uint64_t head, const char *s, size_t len) {
    if (e->hash != h || e->len != len || e->head != head) return false;
    return len <= 8 || memcmp(t->arena + e->off + 8, s + 8, len - 8) == 0;
}

bool tok_strtab_reserve(tok_strtab *t, size_t bytes) {
    size_t need;
    return ck_add_size(t->arena_len, bytes, &need) && ck_add_size(need, 1, &need) &&
           grow((void **)&t->arena, &t->arena_cap, need, 1);
}

bool tok_strtab_put(tok_strtab *t, const char *s, size_t len, int32_t id) {
    return tok_strtab_put_hashed(t, s, len, id, tok_hash_bytes(s, len));
}

bool tok_strtab_put_hashed(tok_strtab *t, const char *s, size_t len, int32_t id, uint64_t h) {
    if (len > UINT32_MAX) return false;
    uint64_t hd = head8(s, len);
    size_t k = (size_t)h & (t->nslots - 1);
    while (t->slots[k].off != TOK_SLOT_EMPTY) {
        struct tok_str_entry *e = &t->slots[k];
        if (entry_eq(t, e, h, hd, s, len)) {
            e->id = id;
            return true;
        }
        k = (k + 1) & (t->nslots - 1);
    }
    size_t need;
    if (!ck_add_size(t->arena_len, len, &need)) return false;
    if (!grow((void **)&t->arena, &t->arena_cap, need + 1, 1)) return false;
    if (len) memcpy(t->arena + t->arena_len, s, len);
    t->slots[k] = (struct tok_str_entry){h, t->arena_len, (uint32_t)len, id, hd};
    t->arena_len += len;
    t->n++;
    if (t->n * 2 > t->nslots) return strtab_rehash(t);
    return true;
}

void tok_strtab_prefetch(const tok_strtab *t, uint64_t h) {
    if (t->slots) __builtin_prefetch(&t->slots[(size_t)h & (t->nslots - 1)]);
}

int32_t tok_strtab_get(const tok_strtab *t, const char *s, size_t len) {
    return tok_strtab_get_hashed(t, s, len, tok_hash_bytes(s, len));
}

int32_t tok_strtab_get_hashed(const tok_strtab *t, const char *s, size_t len, uint64_t h) {
    if (!t->slots) return -1;
    uint64_t hd = head8(s, len);
    size_t k = (size_t)h & (t->nslots - 1);
    for (;;) {
        const struct tok_str_entry *e = &t->slots[k];
        if (e->off == TOK_SLOT_EMPTY) return -1;
        if (entry_eq(t, e, h, hd, s, len)) return e->id;
        k = (k + 1) & (t->nslots - 1);
    }
}

void tok_strtab_free(tok_strtab *t) {
    free(t->arena);
    free(t->slots);
    memset(t, 0, sizeof *t);
}

static inline uint64_t mix64(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return x;
}

bool tok_merges_init(tok_merges *m, size_t expect) {
    memset(m, 0, sizeof *m);
    m->nslots = pow2_slots(expect);
    m->keys = tok_big_alloc(m->nslots * sizeof *m->keys);
    m->rank = tok_big_alloc(m->nslots * sizeof *m->rank);
    m->merged = tok_big_alloc(m->nslots * sizeof *m->merged);
    if (m->keys) memset(m->keys, 0, m->nslots * sizeof *m->keys);
    return m->keys && m->rank && m->merged;
}

static bool merges_rehash(tok_merges *m) {
    tok_merges n;
    if (!tok_merges_init(&n, m->nslots)) {
        tok_merges_free(&n);
        return false;
    }
    for (size_t i = 0; i < m->nslots; i++) {
        if (!m->keys[i]) continue;
        uint64_t key = m->keys[i];
        size_t k = (size_t)mix64(key) & (n.nslots - 1);
        while (n.keys[k])
            k = (k + 1) & (n.nslots - 1);
        n.keys[k] = key;
        n.rank[k] = m->rank[i];
        n.merged[k] = m->merged[i];
    }
    n.n = m->n;
    tok_merges_free(m);
    *m = n;
    return true;
}

/* A repeated pair overwrites: HF collects the merges into a map, so the last one wins. */
bool tok_merges_put(tok_merges *m, int32_t a, int32_t b, uint32_t rank, int32_t merged) {
    uint64_t key = (((uint64_t)(uint32_t)a << 32) | (uint32_t)b) + 1;
    size_t k = (size_t)mix64(key) & (m->nslots - 1);
    while (m->keys[k]) {
        if (m->keys[k] == key) {
            m->rank[k] = rank;
            m->merged[k] = merged;
            return true;
        }
        k = (k + 1) & (m->nslots - 1);
    }
    m->keys[k] = key;
    m->rank[k] = rank;
    m->merged[k] = merged;
    m->n++;
    if (m->n * 2 > m->nslots) return merges_rehash(m);
    return true;
}

void tok_merges_prefetch(const tok_merges *m, int32_t a, int32_t b) {
    uint64_t key = (((uint64_t)(uint32_t)a << 32) | (uint32_t)b) + 1;
    size_t k = (size_t)mix64(key) & (m->nslots - 1);
    __builtin_prefetch(&m->keys[k]);
    __builtin_prefetch(&m->rank[k]);
    __builtin_prefetch(&m->merged[k]);
}

bool tok_merges_get(const tok_merges *m, int32_t a, int32_t b, uint32_t *rank, int32_t *merged) {
    if (!m->keys) return false;
    uint64_t key = (((uint64_t)(uint32_t)a << 32) | (uint32_t)b) + 1;
    size_t k = (size_t)mix64(key) & (m->nslots - 1);
    while (m->keys[k]) {
        if (m->keys[k] == key) {
            *rank = m->rank[k];
            *merged = m->merged[k];
            return true;
        }
        k = (k + 1) & (m->nslots - 1);
    }
    return false;
}

void tok_merges_free(tok_merges *m) {
    free(m->keys);
    free(m->rank);
    free(m->merged);
    memset(m, 0, sizeof *m);
}
