/* respond.h - HTTP replies (JSON bodies, OpenAI-shaped errors, the CORS header) and the JSON
 * pieces that both the whole and the streamed answers carry (logprobs, usage). */
#ifndef CQ_SERVER_RESPOND_H
#define CQ_SERVER_RESPOND_H

#include <jansson.h>
#include <microhttpd.h>

#include "server/ctx.h"
#include "server/gen.h"
#include "server/request.h"

void srv_add_headers(const srv_ctx *c, struct MHD_Response *r);
/* Take body (malloc'd, freed by the library after sending). */
enum MHD_Result srv_reply_text(struct MHD_Connection *conn, const srv_ctx *c, unsigned code,
                               const char *content_type, char *body, size_t len);
/* Take j (its reference is dropped). */
enum MHD_Result srv_reply_json(struct MHD_Connection *conn, const srv_ctx *c, unsigned code,
                               json_t *j);
/* retry_after: seconds for a Retry-After header, or NULL. */
enum MHD_Result srv_reply_error(struct MHD_Connection *conn, const srv_ctx *c, const srv_error *e,
                                const char *retry_after);
json_t *srv_error_json(const srv_error *e);

/* Logprobs of generated tokens: the chat shape ({"content": [{token, logprob, bytes,
 * top_logprobs}]}) and the completions shape ({tokens, token_logprobs, top_logprobs,
 * text_offset}); text_base is the text length before the first of them. */
json_t *srv_logprobs_chat(const srv_ctx *c, const srv_tok_lp *lp, size_t n);
json_t *srv_logprobs_completion(const srv_ctx *c, const srv_tok_lp *lp, size_t n, size_t text_base);
json_t *srv_usage(size_t prompt, size_t completion);
/* A fresh response id with the prefix ("chatcmpl-", "cmpl-"). */
void srv_new_id(char *buf, size_t len, const char *prefix);

#endif
