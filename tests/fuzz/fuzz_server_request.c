/* fuzz_server_request: any bytes as a request body of `cortiq serve` -> srv_request_parse for
 * the kind the first byte picks (chat, completions, embeddings); an accepted request's fields
 * are read back (ranges the parser promised), and the tool-call parser runs on the rest. */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "server/request.h"
#include "server/tools.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    srv_kind kind = (srv_kind)(data[0] % 3);
    const char *body = (const char *)data + 1;
    srv_request r;
    srv_error e;
    if (srv_request_parse(kind, body, size - 1, &r, &e)) {
        bool gen = kind != SRV_EMBEDDING;
        if ((gen && (!(r.temperature >= 0 && r.temperature <= 2) ||
                     !(r.top_p > 0 && r.top_p <= 1) || r.n < 1 || r.n > SRV_MAX_N)) ||
            r.n_stop > SRV_MAX_STOP || r.top_logprobs > SRV_MAX_TOP_LOGPROBS ||
            (kind == SRV_CHAT && !r.messages_json) || (kind == SRV_COMPLETION && !r.prompt) ||
            (kind == SRV_EMBEDDING && !r.n_inputs))
            abort();
        for (size_t i = 0; i < r.n_bias; i++)
            if (!isfinite(r.bias_vals[i]) || r.bias_ids[i] < 0) abort();
        srv_request_free(&r);
    } else if (e.http < 400 || e.http > 599 || !e.message[0])
        abort();
    char *text = malloc(size);
    if (!text) return 0;
    memcpy(text, body, size - 1);
    text[size - 1] = '\0';
    size_t ce = 0;
    json_t *calls = srv_parse_tool_calls(text, strlen(text), &ce, 1);
    if (calls && ce > strlen(text)) abort();
    json_decref(calls);
    free(text);
    return 0;
}
