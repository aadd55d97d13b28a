/* tools.h - tool calls read back out of a finished answer, in the shapes the template families
 * we ship write them: Hermes / Qwen (`<tool_call>{"name", "arguments"}</tool_call>`, several
 * allowed), Mistral (`[TOOL_CALLS][{"name", "arguments"}, ...]`) and Llama 3.x (the whole answer
 * one JSON object {"name", "parameters"}, optionally after `<|python_tag|>`). */
#ifndef CQ_SERVER_TOOLS_H
#define CQ_SERVER_TOOLS_H

#include <jansson.h>
#include <stddef.h>

/* An array of OpenAI tool_calls ({"id", "type": "function", "function": {"name", "arguments":
 * JSON text}}), or NULL when the text holds none that parse; *content_end: the length of the
 * text before the calls (the message's content). id_seed makes the call ids distinct. */
json_t *srv_parse_tool_calls(const char *text, size_t len, size_t *content_end,
                             unsigned long id_seed);

#endif
