/* fuzz_server_schema: any bytes as `response_format` text: up to the first NUL a JSON schema
 * for jg_compile_schema (refused with a message, or compiled); the bytes after it are fed to
 * the compiled automaton, and a text it accepts whole must parse as JSON. */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "server/json_grammar.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const uint8_t *nul = memchr(data, 0, size);
    size_t n = nul ? (size_t)(nul - data) : size;
    char why[256] = "";
    jg_grammar *g = jg_compile_schema((const char *)data, n, why, sizeof why);
    if (!g) {
        if (!why[0]) abort(); /* a refusal always says why */
        return 0;
    }
    const char *text = nul ? (const char *)nul + 1 : "";
    size_t len = nul ? size - n - 1 : 0;
    jg_state s;
    jg_init(&s, g);
    if (jg_feed(&s, g, text, len) && jg_can_end(&s, g)) {
        json_t *v = json_loadb(text, len, JSON_DECODE_ANY, NULL);
        if (!v) abort();
        json_decref(v);
    }
    jg_free(g);
    return 0;
}
