/* tok_wordpiece.c - the WordPiece model (BERT family): each word is cut greedily into the longest
 * vocabulary pieces from the left, pieces after the first carrying continuing_subword_prefix
 * ("##"); a word with any unmatched rest, or longer than max_input_chars_per_word characters,
 * becomes the single unk token (as HF does). */
#include <string.h>

#include "text/tok_internal.h"

static bool push_unk(const cmf_tokenizer *tok, tok_ids *out) {
    return tok->unk_id < 0 || tok_ids_push(out, tok->unk_id);
}

bool tok_wordpiece_encode(const cmf_tokenizer *tok, tok_buf *scratch, const char *w, size_t len,
                          tok_ids *out) {
    size_t nch = 0;
    for (size_t i = 0; i < len; i++)
        nch += ((unsigned char)w[i] & 0xC0) != 0x80;
    if (nch > tok->max_word_chars) return push_unk(tok, out);
    size_t first = out->n, start = 0;
    while (start < len) {
        size_t end = len;
        int32_t cur = -1;
        while (start < end) {
            scratch->len = 0;
            if (start > 0 && !tok_buf_put(scratch, tok->cont_prefix, tok->cont_prefix_len))
                return false;
            if (!tok_buf_put(scratch, w + start, end - start)) return false;
            cur = tok_strtab_get(&tok->vocab, scratch->p, scratch->len);
            if (cur >= 0) break;
            do
                end--; /* back one character */
            while (end > start && ((unsigned char)w[end] & 0xC0) == 0x80);
        }
        if (cur < 0) {
            out->n = first;
            return push_unk(tok, out);
        }
        if (!tok_ids_push(out, cur)) return false;
        start = end;
    }
    return true;
}
