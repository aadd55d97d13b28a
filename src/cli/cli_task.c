/* cli_task.c - `--task NAME` of run, ppl, bench and logits: the task mask a session runs with
 * (spec §5). Not given: the active skill's input_mask_task, else the file's default_task
 * (cortiq_model_default_task; dense when neither names one); `none`: dense. */
#include <stdio.h>

#include "cli/cli.h"
#include "cortiq/engine.h"

int cli_select_task(const char *cmd, cortiq_model *m, cortiq_session *s, const char *task) {
    if (!task) task = cortiq_model_default_task(m);
    cmf_err err;
    cmf_status st = cortiq_session_set_task(s, task, &err);
    if (st) {
        fprintf(stderr, "cortiq %s: --task: ", cmd);
        cli_error(&err);
        return cli_exit_code(st);
    }
    cortiq_task_stats ts;
    cortiq_session_task_stats(s, &ts);
    if (cortiq_session_task(s))
        fprintf(stderr,
                "cortiq %s: task '%s': %u/%u layers on, FFN %llu/%llu neurons active (%llu "
                "computed), heads %llu/%llu active%s\n",
                cmd, cortiq_session_task(s), ts.layers_on, ts.layers,
                (unsigned long long)ts.ffn_active, (unsigned long long)ts.ffn_neurons,
                (unsigned long long)ts.ffn_computed, (unsigned long long)ts.heads_active,
                (unsigned long long)ts.heads,
                ts.dense_layers ? "; some layers' dtype has no gather: computed densely" : "");
    return CLI_EXIT_OK;
}
