/* cortiq/chat_template.h - render a model's chat template (spec §6.1) exactly as
 * Hugging Face `transformers` `apply_chat_template` does.
 *
 * The template text is the Jinja source found in `header.tokenizer_config.chat_template`
 * (or a tokenizer_config.json / .jinja file). cortiq carries its own interpreter for the
 * Jinja subset that chat templates use, configured like transformers' environment:
 * trim_blocks and lstrip_blocks on, one trailing newline of the source dropped, loop
 * controls (break/continue), the `raise_exception(msg)` and `strftime_now(fmt)` globals,
 * a `tojson` filter that writes like Python's json.dumps(ensure_ascii=False, ...), an
 * immutable sandbox (list/dict mutators are refused) and default (lenient) undefined
 * values. The `{% generation %}` tag renders its body unchanged.
 *
 * No file access: `include`, `import`, `from` and `extends` are refused at compile time.
 * Every render is bounded: loop iterations, call depth, memory and output size.
 * Error messages name the template line, e.g.
 *   "chat_template: Parse: line 12: raise_exception: Conversation roles must alternate"
 */
#ifndef CORTIQ_CHAT_TEMPLATE_H
#define CORTIQ_CHAT_TEMPLATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cortiq/export.h"
#include "cortiq/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cmf_chat_template cmf_chat_template;

/* Spec §6.1: files without a tokenizer_config.chat_template get this ChatML template
 * (the one transformers used as its default). */
#define CMF_CHAT_TEMPLATE_CHATML                                                                     \
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] "   \
    "+ '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' " \
    "}}{% endif %}"

/* Compile template source src[0..len) (UTF-8, need not be NUL-terminated).
 * Returns CMF_OK and sets *out (free with cmf_chat_template_free).
 * Fails with CMF_E_PARSE on a syntax error (message names the line),
 * CMF_E_UNSUPPORTED for include/import/extends/from or an unknown tag,
 * CMF_E_LIMIT when the source nests too deeply or exceeds 16 MiB,
 * CMF_E_NOMEM, CMF_E_INVALID_ARG when src or out is NULL. */
CORTIQ_API CORTIQ_NODISCARD cmf_status cmf_chat_template_compile(const char *src, size_t len,
                                                                 cmf_chat_template **out,
                                                                 cmf_err *err);

/* Fix the clock that `strftime_now` reads: unix_seconds >= 0 formats that instant in UTC
 * (reproducible renders, tests); a negative value (the default) uses the local wall clock. */
CORTIQ_API void cmf_chat_template_set_now(cmf_chat_template *tpl, int64_t unix_seconds);

/* Cap the rendered output at max_bytes (default 64 MiB); 0 restores the default. Rendering
 * also stops after 10,000,000 loop iterations or macro calls, 256 nested calls, or 1 GiB
 * of working memory. Each cap is reported as CMF_E_LIMIT. */
CORTIQ_API void cmf_chat_template_set_max_output(cmf_chat_template *tpl, size_t max_bytes);

/* Render the template. Inputs are JSON text (NUL-terminated):
 *   messages_json      array of message objects (required);
 *   tools_json         array of tool schemas, or NULL (the template sees `tools` = none);
 *   documents_json     array of documents, or NULL (`documents` = none);
 *   extra_kwargs_json  object of further variables, or NULL: special tokens (bos_token,
 *                      eos_token, ...) and template switches such as enable_thinking.
 *                      Its keys override messages/tools/documents/add_generation_prompt.
 * On CMF_OK, *out is a malloc'd NUL-terminated UTF-8 string (free()) of *out_len bytes.
 * Fails with CMF_E_PARSE on bad JSON input or a template runtime error (an undefined value
 * used as an object, a type error, raise_exception(...) whose message is included),
 * CMF_E_LIMIT when a render cap is hit, CMF_E_NOMEM, CMF_E_INVALID_ARG on NULL arguments.
 * A compiled template is not modified by rendering: renders may run concurrently from many
 * threads (the setters above must not run concurrently with them). */
CORTIQ_API CORTIQ_NODISCARD cmf_status cmf_chat_template_render(
    const cmf_chat_template *tpl, const char *messages_json, const char *tools_json,
    const char *documents_json, bool add_generation_prompt, const char *extra_kwargs_json,
    char **out, size_t *out_len, cmf_err *err);

/* Free a compiled template; NULL is allowed. */
CORTIQ_API void cmf_chat_template_free(cmf_chat_template *tpl);

#ifdef __cplusplus
}
#endif
#endif
