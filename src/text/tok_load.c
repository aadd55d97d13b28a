/* tok_load.c - parse tokenizer.json into a cmf_tokenizer: the BPE model (vocab hash table,
 * merge-pair table), added tokens and the pipeline components; plus the id/token lookups. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/checked.h"
#include "common/err.h"
#include "text/tok_internal.h"

#define CTX    "tokenizer.json"
#define MAX_ID 0x7FFFFFF0 /* ids are int32; cap what an untrusted file may claim */

void cmf_tokenizer_free(cmf_tokenizer *tok) {
    if (!tok) return;
    tok_strtab_free(&tok->vocab);
    tok_merges_free(&tok->merges);
    free(tok->id_off);
    free(tok->id_len);
    free(tok->id_special);
    tok_buf_free(&tok->id_text);
    free(tok->cont_prefix);
    free(tok->eow_suffix);
    free(tok->added);
    tok_buf_free(&tok->added_text);
    tok_strtab_free(&tok->added_map);
    tok_trie_free(&tok->trie_raw);
    tok_trie_free(&tok->trie_norm);
    tok_trie_free(&tok->uni_trie);
    free(tok->uni_score);
    tok_normalizer_free(tok->norm);
    tok_pretok_free(tok->pre);
    tok_decoder_free(tok->dec);
    free(tok->post.pre);
    free(tok->post.post);
    free(tok);
}

static cmf_status opt_string(tjv m, const char *k, char **out, size_t *len, cmf_err *err) {
    tjv v = tj_get(m, k);
    *out = NULL;
    *len = 0;
    if (tj_is_null_or_none(v)) return CMF_OK;
    size_t n;
    const char *src = tj_str(v, &n);
    if (!src) return cmf_err_set(err, CMF_E_PARSE, CTX, "model.%s must be a string or null", k);
    if (!(*out = malloc(n + 1))) return cmf_err_set(err, CMF_E_NOMEM, CTX, "out of memory");
    memcpy(*out, src, n);
    (*out)[n] = 0;
    *len = n;
    return CMF_OK;
}

#define VOCAB_BATCH 64

/* Validate every id and size the string arena first; then insert in batches: hash and prefetch
 * a batch's slots, then insert them, so the random writes into a large table overlap. */
static cmf_status load_vocab(cmf_tokenizer *tok, tjv vocab, int64_t *max_id, cmf_err *err) {
    if (!tj_is(vocab, TJ_OBJ))
        return cmf_err_set(err, CMF_E_PARSE, CTX, "model.vocab must be an object");
    if (!tok_strtab_init(&tok->vocab, tj_size(vocab)))
        return cmf_err_set(err, CMF_E_NOMEM, CTX, "out of memory for the vocabulary");
    size_t bytes = 0;
    for (tjv v = tj_first(vocab); v.d; v = tj_next(v)) {
        size_t klen;
        const char *key = tj_key(v, &klen);
        int64_t id = -1;
        tj_int(v, &id);
        if (id < 0 || id > MAX_ID)
            return cmf_err_set(err, CMF_E_PARSE, CTX,
                               "model.vocab[\"%.*s\"]: id must be an integer in [0, %d]",
                               (int)(klen > 64 ? 64 : klen), key, MAX_ID);
        bytes += klen; /* keys lie inside the < 4 GiB document: no overflow */
        if (id > *max_id) *max_id = id;
    }
    if (!tok_strtab_reserve(&tok->vocab, bytes))
        return cmf_err_set(err, CMF_E_NOMEM, CTX, "out of memory for the vocabulary");
    uint64_t hash[VOCAB_BATCH];
    tjv v = tj_first(vocab);
    while (v.d) {
        tjv batch = v;
        size_t cnt = 0;
        for (; v.d && cnt < VOCAB_BATCH; v = tj_next(v), cnt++) {
            size_t klen;
            const char *key = tj_key(v, &klen);
            hash[cnt] = tok_hash_bytes(key, klen);
            tok_strtab_prefetch(&tok->vocab, hash[cnt]);
        }
        v = batch;
        for (size_t k = 0; k < cnt; k++, v = tj_next(v)) {
            size_t klen;
            const char *key = tj_key(v, &klen);
            int64_t id = -1;
            tj_int(v, &id);
            if (!tok_strtab_put_hashed(&tok->vocab, key, klen, (int32_t)id, hash[k]))
                return cmf_err_set(err, CMF_E_NOMEM, CTX, "out of memory for the vocabulary");
        }
    }
    return CMF_OK;
}

/* One merge being resolved: its two tokens, the merged string (in a batch buffer) and hashes. */
typedef struct merge_job {
    const char *a, *b;
    size_t al, bl, moff, ml;
    uint64_t ha, hb, hm;
    int32_t ia, ib, im;
} merge_job;

#define MERGE_BATCH 64

/* Split merges[i] into its two tokens; CMF_E_PARSE if it is neither "a b" nor ["a", "b"]. */
static cmf_status merge_parts(tjv m, size_t i, merge_job *j, cmf_err *err) {
    size_t len;
    const char *s = tj_str(m, &len);
    if (s) { /* legacy "left right" */
        const char *sp = memchr(s, ' ', len);
        if (!sp || memchr(sp + 1, ' ', len - (size_t)(sp + 1 - s)))
            return cmf_err_set(err, CMF_E_PARSE, CTX,
                               "model.merges[%zu] \"%.*s\" is not two tokens split by one space", i,
                               (int)(len > 64 ? 64 : len), s);
        j->a = s;
        j->al = (size_t)(sp - s);
        j->b = sp + 1;
        j->bl = len - j->al - 1;
        return CMF_OK;
    }
    tjv m0 = tj_first(m), m1 = tj_next(m0);
    if (tj_size(m) == 2 && tj_is(m, TJ_ARR) && tj_is(m0, TJ_STR) && tj_is(m1, TJ_STR)) {
        j->a = tj_str(m0, &j->al);
        j->b = tj_str(m1, &j->bl);
        return CMF_OK;
    }
    return cmf_err_set(err, CMF_E_PARSE, CTX, "model.merges[%zu] must be \"a b\" or [\"a\", \"b\"]",
                       i);
}

/* Merges are resolved in batches: hash and prefetch every lookup of a batch, then look them up,
 * so the ~1.5 million random table reads of a large vocabulary overlap instead of queueing. */
static cmf_status load_merges(cmf_tokenizer *tok, tjv merges, cmf_err *err) {
    size_t n = tj_size(merges);
    if (!tj_is_null_or_none(merges) && !tj_is(merges, TJ_ARR))
        return cmf_err_set(err, CMF_E_PARSE, CTX, "model.merges must be an array");
    if (!tok_merges_init(&tok->merges, n))
        return cmf_err_set(err, CMF_E_NOMEM, CTX, "out of memory for merges");
    merge_job job[MERGE_BATCH];
    tok_buf cat = {0};
    cmf_status st = CMF_OK;
    size_t skip = tok->cont_prefix_len, base = 0;
    tjv m = tj_first(merges);
    while (m.d && !st) {
        size_t cnt = 0;
        cat.len = 0;
        for (; m.d && cnt < MERGE_BATCH; m = tj_next(m), cnt++) {
            merge_job *j = &job[cnt];
            if ((st = merge_parts(m, base + cnt, j, err)) != CMF_OK) break;
            /* merged token = a + b without b's continuing_subword_prefix */
            if (j->bl < skip) {
                st = cmf_err_set(err, CMF_E_PARSE, CTX,
                                 "model.merges[%zu]: \"%.*s\" shorter than the subword prefix",
                                 base + cnt, (int)j->bl, j->b);
                break;
            }
            j->moff = cat.len;
            j->ml = j->al + j->bl - skip;
            if (!tok_buf_put(&cat, j->a, j->al) || !tok_buf_put(&cat, j->b + skip, j->bl - skip)) {
                st = cmf_err_set(err, CMF_E_NOMEM, CTX, "out of memory");
                break;
            }
            j->ha = tok_hash_bytes(j->a, j->al);
            j->hb = tok_hash_bytes(j->b, j->bl);
            tok_strtab_prefetch(&tok->vocab, j->ha);
            tok_strtab_prefetch(&tok->vocab, j->hb);
        }
        for (size_t k = 0; !st && k < cnt; k++) {
            merge_job *j = &job[k];
            j->hm = tok_hash_bytes(cat.p + j->moff, j->ml);
            tok_strtab_prefetch(&tok->vocab, j->hm);
        }
        for (size_t k = 0; !st && k < cnt; k++) {
            merge_job *j = &job[k];
            j->ia = tok_strtab_get_hashed(&tok->vocab, j->a, j->al, j->ha);
            j->ib = tok_strtab_get_hashed(&tok->vocab, j->b, j->bl, j->hb);
            j->im = tok_strtab_get_hashed(&tok->vocab, cat.p + j->moff, j->ml, j->hm);
            if (j->ia < 0 || j->ib < 0) {
                size_t l = j->ia < 0 ? j->al : j->bl;
                st = cmf_err_set(err, CMF_E_PARSE, CTX,
                                 "model.merges[%zu]: token \"%.*s\" is not in the vocabulary",
                                 base + k, (int)(l > 64 ? 64 : l), j->ia < 0 ? j->a : j->b);
            } else if (j->im < 0) {
                st =
                    cmf_err_set(err, CMF_E_PARSE, CTX,
                                "model.merges[%zu]: merged token \"%.*s\" is not in the vocabulary",
                                base + k, (int)(j->ml > 64 ? 64 : j->ml), cat.p + j->moff);
            } else {
                tok_merges_prefetch(&tok->merges, j->ia, j->ib);
            }
        }
        for (size_t k = 0; !st && k < cnt; k++)
            if (!tok_merges_put(&tok->merges, job[k].ia, job[k].ib, (uint32_t)(base + k),
                                job[k].im))
                st = cmf_err_set(err, CMF_E_NOMEM, CTX, "out of memory for merges");
        base += cnt;
    }
    tok_buf_free(&cat);
    return st;
}

static cmf_status load_added(cmf_tokenizer *tok, tjv arr, int64_t *max_id, cmf_err *err) {
    if (tj_is_null_or_none(arr)) return CMF_OK;
    if (!tj_is(arr, TJ_ARR))
        return cmf_err_set(err, CMF_E_PARSE, CTX, "added_tokens must be an array");
    size_t n = tj_size(arr);
    if (!tok_strtab_init(&tok->added_map, n) ||
        (n && !(tok->added = calloc(n, sizeof *tok->added))))
        return cmf_err_set(err, CMF_E_NOMEM, CTX, "out of memory");
    size_t i = 0;
    for (tjv o = tj_first(arr); o.d; o = tj_next(o), i++) {
        int64_t v = -1;
        tj_int(tj_get(o, "id"), &v);
        size_t clen;
        const char *c = tj_str(tj_get(o, "content"), &clen);
        if (v < 0 || v > MAX_ID || !c)
            return cmf_err_set(err, CMF_E_PARSE, CTX,
                               "added_tokens[%zu]: needs \"id\" in [0, %d] and \"content\"", i,
                               MAX_ID);
        tok_added *a = &tok->added[i];
        a->off = tok->added_text.len;
        a->len = clen;
        a->id = (int32_t)v;
        a->special = tj_bool(tj_get(o, "special"), false);
        a->lstrip = tj_bool(tj_get(o, "lstrip"), false);
        a->rstrip = tj_bool(tj_get(o, "rstrip"), false);
        a->single_word = tj_bool(tj_get(o, "single_word"), false);
        a->normalized = tj_bool(tj_get(o, "normalized"), !a->special);
        if (!tok_buf_put(&tok->added_text, c, a->len) ||
            !tok_strtab_put(&tok->added_map, c, a->len, a->id))
            return cmf_err_set(err, CMF_E_NOMEM, CTX, "out of memory");
        tok->nadded++;
        if (v > *max_id) *max_id = v;
    }
    return CMF_OK;
}

/* id -> token table: model tokens first, added tokens override (HF looks added tokens up first). */
static cmf_status build_id_table(cmf_tokenizer *tok, int64_t max_id, cmf_err *err) {
    tok->nids = (size_t)(max_id + 1);
    tok->id_off = malloc(tok->nids * sizeof *tok->id_off);
    tok->id_len = calloc(tok->nids, sizeof *tok->id_len);
    tok->id_special = calloc(tok->nids, 1);
    if (!tok->id_off || !tok->id_len || !tok->id_special ||
        !tok_buf_reserve(&tok->id_text, tok->vocab.arena_len + tok->added_text.len))
        return cmf_err_set(err, CMF_E_NOMEM, CTX, "out of memory for the id table");
    for (size_t i = 0; i < tok->nids; i++)
        tok->id_off[i] = SIZE_MAX;
    for (size_t i = 0; i < tok->vocab.nslots; i++) {
        const struct tok_str_entry *e = &tok->vocab.slots[i];
        if (e->off == TOK_SLOT_EMPTY) continue;
        tok->id_off[e->id] = tok->id_text.len;
        tok->id_len[e->id] = e->len;
        tok_buf_put(&tok->id_text, tok->vocab.arena + e->off, e->len);
    }
    /* A `normalized` added token reads back as its normalized content (as HF's id_to_token). */
    for (size_t i = 0; i < tok->nadded; i++) {
        const tok_added *a = &tok->added[i];
        size_t off = tok->id_text.len;
        bool ok;
        if (a->normalized && tok->norm) {
            /* a Replace pattern that runs out of its budget must fail the load, not leave the
             * token half normalized */
            tok_regex_fail_reset();
            ok = tok_normalize(tok->norm, tok->added_text.p + a->off, a->len, &tok->id_text);
            char ctx[64];
            snprintf(ctx, sizeof ctx, CTX " added token id %lld", (long long)a->id);
            cmf_status rst = tok_regex_fail_check(err, ctx);
            if (rst) return rst;
        } else {
            ok = tok_buf_put(&tok->id_text, tok->added_text.p + a->off, a->len);
        }
        if (!ok || tok->id_text.len - off > UINT32_MAX)
            return cmf_err_set(err, CMF_E_NOMEM, CTX, "out of memory for the id table");
        tok->id_off[a->id] = off;
        tok->id_len[a->id] = (uint32_t)(tok->id_text.len - off);
        tok->id_special[a->id] = a->special;
    }
    return CMF_OK;
}

static void build_fast_paths(cmf_tokenizer *tok) {
    for (int b = 0; b < 256; b++) {
        char name[8];
        snprintf(name, sizeof name, "<0x%02X>", b);
        tok->byte_ids[b] = tok_strtab_get(&tok->vocab, name, 6);
    }
    for (uint32_t cp = 0; cp < 1024; cp++) {
        char enc[4];
        size_t n = tok_utf8_encode(cp, enc);
        tok->small_cp[cp] = tok_strtab_get(&tok->vocab, enc, n);
    }
}

static cmf_status load_wordpiece(cmf_tokenizer *tok, tjv m, int64_t *max_id, cmf_err *err) {
    tok->wordpiece = true;
    int64_t maxc = 100;
    if (tj_get(m, "max_input_chars_per_word").d &&
        (!tj_int(tj_get(m, "max_input_chars_per_word"), &maxc) || maxc < 0))
        return cmf_err_set(err, CMF_E_PARSE, CTX,
                           "model.max_input_chars_per_word must be a non-negative integer");
    tok->max_word_chars = (size_t)maxc;
    cmf_status st =
        opt_string(m, "continuing_subword_prefix", &tok->cont_prefix, &tok->cont_prefix_len, err);
    if (!st && !tok->cont_prefix) {
        if (!(tok->cont_prefix = malloc(3)))
            return cmf_err_set(err, CMF_E_NOMEM, CTX, "out of memory");
        memcpy(tok->cont_prefix, "##", 3);
        tok->cont_prefix_len = 2;
    }
    if (!st) st = load_vocab(tok, tj_get(m, "vocab"), max_id, err);
    if (st) return st;
    size_t ul;
    const char *unk = tj_str(tj_get(m, "unk_token"), &ul);
    if (!unk) {
        unk = "[UNK]";
        ul = 5;
    }
    tok->unk_id = tok_strtab_get(&tok->vocab, unk, ul);
    if (tok->unk_id < 0)
        return cmf_err_set(err, CMF_E_PARSE, CTX,
                           "model.unk_token \"%.*s\" is not in the vocabulary",
                           (int)(ul > 64 ? 64 : ul), unk);
    build_fast_paths(tok);
    return CMF_OK;
}

/* Unigram: "vocab" is [[piece, score], ...] (the id is the index), "unk_id", "byte_fallback". */
static cmf_status load_unigram(cmf_tokenizer *tok, tjv m, int64_t *max_id, cmf_err *err) {
    tok->unigram = true;
    tjv v = tj_get(m, "vocab");
    size_t n = tj_size(v);
    if (!tj_is(v, TJ_ARR) || n == 0 || n > MAX_ID)
        return cmf_err_set(err, CMF_E_PARSE, CTX,
                           "model.vocab of a Unigram model must be a non-empty array");
    tok->byte_fallback = tj_bool(tj_get(m, "byte_fallback"), false);
    if (!tok_strtab_init(&tok->vocab, n) ||
        !(tok->uni_score = malloc(n * sizeof *tok->uni_score)) || !tok_trie_init(&tok->uni_trie))
        return cmf_err_set(err, CMF_E_NOMEM, CTX, "out of memory for the vocabulary");
    size_t i = 0;
    for (tjv e = tj_first(v); e.d; e = tj_next(e), i++) {
        size_t pl;
        const char *p = tj_str(tj_first(e), &pl);
        tjv sc = tj_next(tj_first(e));
        if (!p || !tj_is(sc, TJ_NUM) || tj_size(e) != 2)
            return cmf_err_set(err, CMF_E_PARSE, CTX, "model.vocab[%zu] must be [piece, score]", i);
        tok->uni_score[i] = tj_num(sc);
        if (i == 0 || tok->uni_score[i] < tok->uni_min) tok->uni_min = tok->uni_score[i];
        if (!tok_strtab_put(&tok->vocab, p, pl, (int32_t)i))
            return cmf_err_set(err, CMF_E_NOMEM, CTX, "out of memory for the vocabulary");
    }
    *max_id = (int64_t)n - 1;
    /* trie entries carry the id a lookup gives (a repeated piece maps to its last index) */
    i = 0;
    for (tjv e = tj_first(v); e.d; e = tj_next(e), i++) {
        size_t pl;
        const char *p = tj_str(tj_first(e), &pl);
        if (!tok_trie_insert(&tok->uni_trie, p, pl, tok_strtab_get(&tok->vocab, p, pl)))
            return cmf_err_set(err, CMF_E_NOMEM, CTX, "out of memory for the vocabulary trie");
    }
    tok->unk_id = -1;
    tjv u = tj_get(m, "unk_id");
    int64_t uid;
    if (!tj_is_null_or_none(u)) {
        if (!tj_int(u, &uid) || uid < 0 || (size_t)uid >= n)
            return cmf_err_set(err, CMF_E_PARSE, CTX,
                               "model.unk_id must be an index into the vocabulary");
        tok->unk_id = (int32_t)uid;
    }
    build_fast_paths(tok);
    return CMF_OK;
}

/* WordLevel: "vocab" {word: id} and "unk_token" (used when present in the vocabulary). */
static cmf_status load_wordlevel(cmf_tokenizer *tok, tjv m, int64_t *max_id, cmf_err *err) {
    tok->wordlevel = true;
    cmf_status st = load_vocab(tok, tj_get(m, "vocab"), max_id, err);
    if (st) return st;
    size_t ul;
    const char *unk = tj_str(tj_get(m, "unk_token"), &ul);
    tok->unk_id = unk ? tok_strtab_get(&tok->vocab, unk, ul) : -1;
    build_fast_paths(tok);
    return CMF_OK;
}

static cmf_status load_model(cmf_tokenizer *tok, tjv m, int64_t *max_id, cmf_err *err) {
    if (!tj_is(m, TJ_OBJ)) return cmf_err_set(err, CMF_E_PARSE, CTX, "\"model\" must be an object");
    size_t tl;
    const char *t = tj_str(tj_get(m, "type"), &tl);
    if (t && tj_streq(tj_get(m, "type"), "WordPiece")) return load_wordpiece(tok, m, max_id, err);
    if (t && tj_streq(tj_get(m, "type"), "Unigram")) return load_unigram(tok, m, max_id, err);
    if (t && tj_streq(tj_get(m, "type"), "WordLevel")) return load_wordlevel(tok, m, max_id, err);
    if (t && !tj_streq(tj_get(m, "type"), "BPE"))
        return cmf_err_set(
            err, CMF_E_UNSUPPORTED, CTX,
            "model type \"%.*s\" is not supported (BPE, WordPiece, Unigram, WordLevel are)",
            (int)(tl > 64 ? 64 : tl), t);
    if (!t && !tj_get(m, "merges").d)
        return cmf_err_set(err, CMF_E_UNSUPPORTED, CTX,
                           "model without \"type\" and without merges: only BPE is supported");
    double drop = tj_num(tj_get(m, "dropout"));
    if (drop > 0.0)
        return cmf_err_set(err, CMF_E_UNSUPPORTED, CTX,
                           "BPE dropout %g is not supported (encoding must be deterministic)",
                           drop);
    tok->byte_fallback = tj_bool(tj_get(m, "byte_fallback"), false);
    tok->fuse_unk = tj_bool(tj_get(m, "fuse_unk"), false);
    tok->ignore_merges = tj_bool(tj_get(m, "ignore_merges"), false);
    cmf_status st =
        opt_string(m, "continuing_subword_prefix", &tok->cont_prefix, &tok->cont_prefix_len, err);
    if (!st) st = opt_string(m, "end_of_word_suffix", &tok->eow_suffix, &tok->eow_suffix_len, err);
    if (!st) st = load_vocab(tok, tj_get(m, "vocab"), max_id, err);
    if (!st) st = load_merges(tok, tj_get(m, "merges"), err);
    if (st) return st;
    tok->unk_id = -1;
    size_t ul;
    const char *unk = tj_str(tj_get(m, "unk_token"), &ul);
    if (unk) {
        tok->unk_id = tok_strtab_get(&tok->vocab, unk, ul);
        if (tok->unk_id < 0)
            return cmf_err_set(err, CMF_E_PARSE, CTX,
                               "model.unk_token \"%.*s\" is not in the vocabulary",
                               (int)(ul > 64 ? 64 : ul), unk);
    }
    build_fast_paths(tok);
    return CMF_OK;
}

static cmf_status load_root(cmf_tokenizer *tok, tjv root, cmf_err *err) {
    if (!tj_is(root, TJ_OBJ))
        return cmf_err_set(err, CMF_E_PARSE, CTX, "top level must be an object");
    int64_t max_id = -1;
    cmf_status st = load_model(tok, tj_get(root, "model"), &max_id, err);
    if (!st) st = load_added(tok, tj_get(root, "added_tokens"), &max_id, err);
    if (st) return st;
    if (max_id < 0) return cmf_err_set(err, CMF_E_PARSE, CTX, "empty vocabulary");
    /* Ids index dense tables: refuse an id space far sparser than the tokens that fill it. */
    uint64_t entries = (uint64_t)tok->vocab.n + tok->nadded;
    if ((uint64_t)max_id >= entries * 16 + 65536)
        return cmf_err_set(err, CMF_E_LIMIT, CTX,
                           "largest id %lld for %llu tokens: id space too sparse (limit %llu)",
                           (long long)max_id, (unsigned long long)entries,
                           (unsigned long long)(entries * 16 + 65536));
    tjv j;
    if (!st && !tj_is_null_or_none(j = tj_get(root, "normalizer")))
        st = tok_load_normalizer(j, &tok->norm, err);
    if (!st && !tj_is_null_or_none(j = tj_get(root, "pre_tokenizer")))
        st = tok_load_pretok(j, &tok->pre, err);
    if (!st && !tj_is_null_or_none(j = tj_get(root, "decoder")))
        st = tok_load_decoder(j, &tok->dec, err);
    if (!st) st = build_id_table(tok, max_id, err);
    if (!st && !tj_is_null_or_none(j = tj_get(root, "post_processor")))
        st = tok_load_post(j, tok, &tok->post, err);
    if (st) return st;
    tok_regex_fail_reset();
    bool built =
        tok_trie_build(&tok->trie_raw, tok, false) && tok_trie_build(&tok->trie_norm, tok, true);
    st = tok_regex_fail_check(err, CTX " added-token trie");
    if (st) return st;
    if (!built)
        return cmf_err_set(err, CMF_E_NOMEM, CTX, "out of memory for the added-token tries");
    return CMF_OK;
}

cmf_status cmf_tokenizer_load(const char *json, size_t len, cmf_tokenizer **out, cmf_err *err) {
    if (!json || !out)
        return cmf_err_set(err, CMF_E_INVALID_ARG, CTX, "json and out must not be NULL");
    *out = NULL;
    tj_doc doc;
    cmf_status st = tj_parse(json, len, &doc, err);
    if (st) return st;
    cmf_tokenizer *tok = calloc(1, sizeof *tok);
    st = tok ? load_root(tok, tj_root(&doc), err)
             : cmf_err_set(err, CMF_E_NOMEM, CTX, "out of memory");
    tj_free(&doc);
    if (st) {
        cmf_tokenizer_free(tok);
        return st;
    }
    *out = tok;
    return CMF_OK;
}

cmf_status cmf_tokenizer_load_file(const char *path, cmf_tokenizer **out, cmf_err *err) {
    if (!path || !out)
        return cmf_err_set(err, CMF_E_INVALID_ARG, CTX, "path and out must not be NULL");
    FILE *f = fopen(path, "rb");
    if (!f) return cmf_err_set(err, CMF_E_IO, path, "cannot open");
    tok_buf b = {0};
    /* Read straight into a buffer of the file's size (no chunk copies, no doubling); the loop
     * still grows it if the size was unknown or the file grew. */
    long size = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
    rewind(f); /* a pipe cannot seek, but nothing was read from it yet */
    bool ok = size <= 0 || tok_buf_reserve(&b, (size_t)size + 1);
    size_t n;
    while (ok) {
        if (b.cap - b.len < 2 && !tok_buf_reserve(&b, 1 << 16)) {
            ok = false;
            break;
        }
        if ((n = fread(b.p + b.len, 1, b.cap - b.len - 1, f)) == 0) break;
        b.len += n;
        b.p[b.len] = 0;
    }
    bool rerr = ferror(f) != 0;
    fclose(f);
    if (!ok) {
        tok_buf_free(&b);
        return cmf_err_set(err, CMF_E_NOMEM, path, "out of memory reading the file");
    }
    if (rerr) {
        tok_buf_free(&b);
        return cmf_err_set(err, CMF_E_IO, path, "read error");
    }
    cmf_status st = cmf_tokenizer_load(b.p ? b.p : "", b.len, out, err);
    tok_buf_free(&b);
    return st;
}

size_t cmf_tokenizer_vocab_size(const cmf_tokenizer *tok) {
    return tok ? tok->nids : 0;
}

int32_t cmf_tokenizer_token_to_id(const cmf_tokenizer *tok, const char *token, size_t len) {
    if (!tok || (!token && len)) return -1;
    int32_t id = tok_strtab_get(&tok->added_map, token ? token : "", len);
    return id >= 0 ? id : tok_strtab_get(&tok->vocab, token ? token : "", len);
}

const char *cmf_tokenizer_id_to_token(const cmf_tokenizer *tok, int32_t id, size_t *len) {
    if (!tok || id < 0 || (size_t)id >= tok->nids || tok->id_off[id] == SIZE_MAX) return NULL;
    if (len) *len = tok->id_len[id];
    return tok->id_text.p + tok->id_off[id];
}

bool cmf_tokenizer_is_special(const cmf_tokenizer *tok, int32_t id) {
    return tok && id >= 0 && (size_t)id < tok->nids && tok->id_special[id];
}
