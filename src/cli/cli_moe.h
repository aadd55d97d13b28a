/* cli_moe.h - the mixture-of-experts options run, ppl and logits share (docs/MOE.md):
 *   --moe-mask STATS.json  restrict routing to the experts STATS keeps at --moe-cover
 *   --moe-cover C          the cover of --moe-mask (default 0.9)
 *   --route-stats OUT.json write per layer, per expert selection counts (CMF_MOE_STATS)
 * Without --moe-mask, the environment's CMF_MOE_MASK / CMF_MOE_MASK_COVER (the other
 * implementation's names for the same restriction) apply, announced on stderr. */
#ifndef CORTIQ_CLI_MOE_H
#define CORTIQ_CLI_MOE_H

#include <stdbool.h>

#include "cortiq/engine.h"

typedef struct cli_moe_opts {
    const char *mask, *stats_out;
    double cover;
    bool cover_set;
} cli_moe_opts;

/* The help lines of the three options. */
#define CLI_MOE_HELP                                                                               \
    "  --moe-mask S.json    restrict MoE routing to the experts route statistics S keep at\n"      \
    "                       --moe-cover (default 0.9; the same as a file moe-defrag cut there)\n"  \
    "  --moe-cover C        cover of --moe-mask, in (0, 1]\n"                                      \
    "  --route-stats F.json write per layer, per expert selection counts (CMF_MOE_STATS)\n"

/* 1 when argv[*i] is one of the options (consumed with its value, *i advanced), 0 when it is
 * not, -1 after printing a usage error. */
int cli_moe_opt(const char *cmd, cli_moe_opts *o, int argc, char **argv, int *i);
/* Once the session exists: apply the restriction and start counting. 0, or an exit code after
 * printing the error. */
int cli_moe_begin(const char *cmd, cli_moe_opts *o, cortiq_model *m, cortiq_session *s);
/* At the end of a successful run: write --route-stats. 0, or an exit code. */
int cli_moe_end(const char *cmd, const cli_moe_opts *o, cortiq_model *m, const cortiq_session *s);

#endif
