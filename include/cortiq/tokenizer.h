/* cortiq/tokenizer.h - a Hugging Face `tokenizer.json` tokenizer (spec §6: the tokenizer section
 * of a .cmf is those bytes verbatim), with ids identical to the Python `tokenizers` package.
 *
 * Supported models: BPE (byte-level as in GPT-2/Qwen/Llama 3, SentencePiece-style with
 * byte_fallback as in Gemma/Llama 2, ignore_merges, continuing_subword_prefix, end_of_word_suffix),
 * WordPiece (BERT), Unigram (SentencePiece unigram, byte_fallback) and WordLevel.
 * Normalizers: NFC NFD NFKC NFKD Lowercase Replace Prepend Strip StripAccents BertNormalizer
 * Sequence. Pre-tokenizers: ByteLevel Split Metaspace Digits Punctuation Whitespace WhitespaceSplit
 * BertPreTokenizer Sequence. Post-processors: TemplateProcessing ByteLevel RobertaProcessing
 * BertProcessing Sequence. Decoders: ByteLevel ByteFallback Fuse Strip Replace Metaspace
 * BPEDecoder WordPiece Sequence. Added tokens: special or not,
 * lstrip/rstrip/single_word/normalized. Anything else is refused at load with CMF_E_UNSUPPORTED and
 * a message naming the component (e.g. the Precompiled normalizer, BPE dropout).
 *
 * A loaded tokenizer is immutable: encode/decode may run concurrently from many threads.
 * Text is UTF-8; invalid input bytes are first replaced by U+FFFD (one per maximal invalid
 * subsequence, as Python's bytes.decode("utf-8", "replace") does).
 */
#ifndef CORTIQ_TOKENIZER_H
#define CORTIQ_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cortiq/export.h"
#include "cortiq/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cmf_tokenizer cmf_tokenizer;

/* Parse tokenizer.json bytes (need not be NUL-terminated). On success *out owns a new
 * tokenizer (free with cmf_tokenizer_free). Fails with CMF_E_PARSE on malformed JSON or a
 * malformed component, CMF_E_UNSUPPORTED for a component type we do not implement,
 * CMF_E_NOMEM, CMF_E_INVALID_ARG if json/out is NULL. */
CORTIQ_API CORTIQ_NODISCARD cmf_status cmf_tokenizer_load(const char *json, size_t len,
                                                          cmf_tokenizer **out, cmf_err *err);

/* Read and parse a tokenizer.json file (CMF_E_IO if it cannot be read). */
CORTIQ_API CORTIQ_NODISCARD cmf_status cmf_tokenizer_load_file(const char *path,
                                                               cmf_tokenizer **out, cmf_err *err);

/* Free a tokenizer; NULL is allowed. */
CORTIQ_API void cmf_tokenizer_free(cmf_tokenizer *tok);

/* Encode `len` bytes of UTF-8 text. With add_special_tokens the post-processor adds its tokens
 * (e.g. BOS); special tokens written in the text are recognised either way. On success *ids is a
 * malloc'ed array of *n ids (free() it; non-NULL even when *n == 0). */
CORTIQ_API CORTIQ_NODISCARD cmf_status cmf_tokenizer_encode(const cmf_tokenizer *tok,
                                                            const char *text, size_t len,
                                                            bool add_special_tokens, int32_t **ids,
                                                            size_t *n, cmf_err *err);

/* Decode ids to UTF-8 text through the tokenizer's decoder. Ids with no token are skipped;
 * with skip_special_tokens, special added tokens are dropped. On success *text is a malloc'ed,
 * NUL-terminated string of *len bytes (free() it). */
CORTIQ_API CORTIQ_NODISCARD cmf_status cmf_tokenizer_decode(const cmf_tokenizer *tok,
                                                            const int32_t *ids, size_t n,
                                                            bool skip_special_tokens, char **text,
                                                            size_t *len, cmf_err *err);

/* 1 + the largest id of the model vocabulary and the added tokens (the embedding rows needed). */
CORTIQ_API size_t cmf_tokenizer_vocab_size(const cmf_tokenizer *tok);

/* Id of a token string (added tokens first, then the model vocabulary); -1 if absent. */
CORTIQ_API int32_t cmf_tokenizer_token_to_id(const cmf_tokenizer *tok, const char *token,
                                             size_t len);

/* Token string of an id (not NUL-terminated; *len set), owned by tok; NULL if the id has none. */
CORTIQ_API const char *cmf_tokenizer_id_to_token(const cmf_tokenizer *tok, int32_t id, size_t *len);

/* True if id is an added token marked special (skipped by skip_special_tokens). */
CORTIQ_API bool cmf_tokenizer_is_special(const cmf_tokenizer *tok, int32_t id);

/* Incremental decoding for generation: push ids one at a time and receive the text they
 * complete. Text is released only once it decodes to complete UTF-8 (no trailing U+FFFD from a
 * partial byte sequence), so a multi-byte character split over several byte tokens comes out
 * whole. The concatenation of all pieces equals cmf_tokenizer_decode of all ids pushed, except
 * where the decoder strips a leading space of the very first token only. */
typedef struct cmf_detok_stream cmf_detok_stream;

/* Create a stream bound to tok (tok must outlive it). */
CORTIQ_API CORTIQ_NODISCARD cmf_status cmf_detok_stream_create(const cmf_tokenizer *tok,
                                                               bool skip_special_tokens,
                                                               cmf_detok_stream **out,
                                                               cmf_err *err);

/* Push one id. On success *text points to the newly completed text (*len bytes, may be 0,
 * NUL-terminated), valid until the next push or free. */
CORTIQ_API CORTIQ_NODISCARD cmf_status cmf_detok_stream_push(cmf_detok_stream *s, int32_t id,
                                                             const char **text, size_t *len,
                                                             cmf_err *err);

/* Free a stream; NULL is allowed. */
CORTIQ_API void cmf_detok_stream_free(cmf_detok_stream *s);

#ifdef __cplusplus
}
#endif
#endif
