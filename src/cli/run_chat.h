/* run_chat.h - the interactive session of `cortiq run` (src/cli/run_chat.c). */
#ifndef CORTIQ_CLI_RUN_CHAT_H
#define CORTIQ_CLI_RUN_CHAT_H

#include "cli/run_output.h"
#include "cortiq/runtime.h"

/* Read messages from stdin until /exit, end of input or a second Ctrl-C at the prompt; answer
 * each with the conversation so far (printed through *out). */
cmf_status run_chat(cortiq_runtime *rt, const char *system, const cortiq_generate_params *gp,
                    run_out *out, cmf_err *err);

#endif
