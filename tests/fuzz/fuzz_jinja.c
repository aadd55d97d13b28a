/* fuzz_jinja: any bytes as a chat template -> compile, then render over a fixed small
 * conversation with tools. Must never crash, leak or run unbounded (output capped here;
 * loop iterations, call depth and memory are capped by the library). */
#include <stdint.h>
#include <stdlib.h>

#include "cortiq/chat_template.h"

static const char *k_messages =
    "[{\"role\": \"system\", \"content\": \"sys\"}, {\"role\": \"user\", \"content\": \"hi \\u00e9 {{x}}\"},"
    " {\"role\": \"assistant\", \"content\": null, \"tool_calls\": [{\"id\": \"abcdefghi\", \"type\": \"function\","
    " \"function\": {\"name\": \"f\", \"arguments\": {\"a\": [1, 2.5, true, null]}}}]},"
    " {\"role\": \"tool\", \"tool_call_id\": \"abcdefghi\", \"content\": \"42\"}]";
static const char *k_tools =
    "[{\"type\": \"function\", \"function\": {\"name\": \"f\", \"description\": \"d\","
    " \"parameters\": {\"type\": \"object\", \"properties\": {\"a\": {\"type\": \"array\"}}}}}]";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    cmf_chat_template *t = NULL;
    cmf_err err;
    if (cmf_chat_template_compile((const char *)data, size, &t, &err) != CMF_OK) return 0;
    cmf_chat_template_set_now(t, 0);
    cmf_chat_template_set_max_output(t, 1u << 20);
    char *out = NULL;
    size_t n;
    if (cmf_chat_template_render(t, k_messages, k_tools, NULL, true,
                                 "{\"bos_token\": \"<s>\", \"enable_thinking\": false}", &out, &n,
                                 &err) == CMF_OK)
        free(out);
    cmf_chat_template_free(t);
    return 0;
}
