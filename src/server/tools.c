/* tools.c - tool calls out of generated text (see tools.h). */
#include "server/tools.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

/* {"name": str, "arguments"|"parameters": object or string} into an OpenAI tool call. */
static json_t *to_call(json_t *obj, unsigned long id) {
    const char *name = json_string_value(json_object_get(obj, "name"));
    json_t *args = json_object_get(obj, "arguments");
    if (!args) args = json_object_get(obj, "parameters");
    if (!name || (args && !json_is_object(args) && !json_is_string(args))) return NULL;
    char *atext = !args                  ? strdup("{}")
                  : json_is_string(args) ? strdup(json_string_value(args))
                                         : json_dumps(args, JSON_COMPACT);
    char idbuf[40];
    snprintf(idbuf, sizeof idbuf, "call_%016lx", id);
    json_t *call = json_pack("{s:s,s:s,s:{s:s,s:s}}", "id", idbuf, "type", "function", "function",
                             "name", name, "arguments", atext ? atext : "{}");
    free(atext);
    return call;
}

static const char *skip_ws(const char *p, const char *end) {
    while (p < end && (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t'))
        p++;
    return p;
}

static json_t *hermes(const char *text, size_t len, size_t *content_end, unsigned long seed) {
    const char *open = "<tool_call>", *close = "</tool_call>";
    const char *end = text + len, *first = strstr(text, open);
    if (!first) return NULL;
    json_t *calls = json_array();
    for (const char *p = first; p && p < end; p = strstr(p, open)) {
        p += strlen(open);
        const char *stop = strstr(p, close);
        const char *body_end = stop ? stop : end;
        json_error_t je;
        json_t *obj = json_loadb(p, (size_t)(body_end - p), 0, &je);
        json_t *call = json_is_object(obj) ? to_call(obj, seed + json_array_size(calls)) : NULL;
        json_decref(obj);
        if (!call) {
            json_decref(calls);
            return NULL;
        }
        json_array_append_new(calls, call);
        if (!stop) break;
        p = stop + strlen(close);
    }
    size_t ce = (size_t)(first - text);
    while (ce && (text[ce - 1] == ' ' || text[ce - 1] == '\n'))
        ce--;
    *content_end = ce;
    return calls;
}

static json_t *mistral(const char *text, size_t len, size_t *content_end, unsigned long seed) {
    const char *mark = "[TOOL_CALLS]";
    const char *at = strstr(text, mark);
    if (!at) return NULL;
    const char *p = skip_ws(at + strlen(mark), text + len);
    json_error_t je;
    json_t *arr = json_loadb(p, (size_t)(text + len - p), JSON_DISABLE_EOF_CHECK, &je);
    if (json_is_object(arr)) { /* one call without the brackets */
        json_t *a = json_array();
        json_array_append_new(a, arr);
        arr = a;
    }
    if (!json_is_array(arr) || !json_array_size(arr)) {
        json_decref(arr);
        return NULL;
    }
    json_t *calls = json_array();
    size_t i;
    json_t *o;
    json_array_foreach(arr, i, o) {
        json_t *call = json_is_object(o) ? to_call(o, seed + i) : NULL;
        if (!call) {
            json_decref(calls);
            json_decref(arr);
            return NULL;
        }
        json_array_append_new(calls, call);
    }
    json_decref(arr);
    *content_end = (size_t)(at - text);
    return calls;
}

static json_t *llama3(const char *text, size_t len, size_t *content_end, unsigned long seed) {
    const char *end = text + len, *p = skip_ws(text, end);
    const char *tag = "<|python_tag|>";
    if ((size_t)(end - p) >= strlen(tag) && !memcmp(p, tag, strlen(tag)))
        p = skip_ws(p + strlen(tag), end);
    if (p == end || *p != '{') return NULL;
    json_error_t je;
    json_t *obj = json_loadb(p, (size_t)(end - p), 0, &je);
    json_t *call = NULL;
    if (json_is_object(obj) &&
        (json_object_get(obj, "parameters") || json_object_get(obj, "arguments")))
        call = to_call(obj, seed);
    json_decref(obj);
    if (!call) return NULL;
    json_t *calls = json_array();
    json_array_append_new(calls, call);
    *content_end = 0;
    return calls;
}

json_t *srv_parse_tool_calls(const char *text, size_t len, size_t *content_end,
                             unsigned long id_seed) {
    json_t *c = hermes(text, len, content_end, id_seed);
    if (!c) c = mistral(text, len, content_end, id_seed);
    if (!c) c = llama3(text, len, content_end, id_seed);
    return c;
}
