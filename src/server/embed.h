/* embed.h - POST /v1/embeddings: each input's final hidden states (after the final norm),
 * mean-pooled over its tokens and L2-normalised (docs/SERVER.md). */
#ifndef CQ_SERVER_EMBED_H
#define CQ_SERVER_EMBED_H

#include <microhttpd.h>

#include "server/ctx.h"

enum MHD_Result srv_handle_embeddings(struct MHD_Connection *conn, srv_ctx *c, const char *body,
                                      size_t len, double t0);

#endif
