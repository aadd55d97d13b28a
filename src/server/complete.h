/* complete.h - POST /v1/chat/completions and /v1/completions: prompt, slot, generation, and
 * the answer whole or streamed as server-sent events. */
#ifndef CQ_SERVER_COMPLETE_H
#define CQ_SERVER_COMPLETE_H

#include <microhttpd.h>

#include "server/ctx.h"
#include "server/request.h"

enum MHD_Result srv_handle_generate(struct MHD_Connection *conn, srv_ctx *c, srv_kind kind,
                                    const char *body, size_t len, double t0);

/* True when the client has closed its end of the connection. */
bool srv_client_gone(struct MHD_Connection *conn);

#endif
