/* cmd_skill.h - what `cortiq skill ...` and the runners' --skill / --skill-blend options share. */
#ifndef CORTIQ_CLI_CMD_SKILL_H
#define CORTIQ_CLI_CMD_SKILL_H

#include <stddef.h>
#include <stdint.h>

#include "cortiq/engine.h"
#include "cortiq/skill.h"

/* The overlay a runner loads: skill (NULL = backbone) or a blend (n_blend > 0). */
typedef struct cli_skill_choice {
    char *skill;
    cortiq_skill_weight *blend;
    char **blend_ids;
    size_t n_blend;
} cli_skill_choice;

/* Turn `--skill ARG` (NULL, "none", an id or "auto") and `--skill-blend T` (blend_t > 0) into a
 * choice. "auto" and a blend route on the prompt: `ids` when given, else `text` tokenized
 * without BOS (its first 512 tokens, within the model's context); the backbone of `path` is loaded
 * for that (threads as the runner's). The scores go to stderr. Returns 0 or an exit code (after
 * printing the error). */
int cli_skill_choose(const char *cmd, const char *path, const char *skill_arg, double blend_t,
                     const char *text, const int32_t *ids, size_t n_ids, unsigned threads,
                     cli_skill_choice *out);
void cli_skill_choice_free(cli_skill_choice *c);

/* Subcommands (cmd_skill.c dispatches). */
int skill_add_main(int argc, char **argv);
int skill_export_main(int argc, char **argv);
int skill_apply_main(int argc, char **argv);
int skill_route_main(int argc, char **argv);

/* A registry record of a file's header by id, or NULL. */
const cmf_skill *skill_record(const cmf_file *f, const char *id);
/* Valid skill ids: [A-Za-z0-9_-]+, at most 64 characters, not "none" / "auto". */
int skill_id_ok(const char *id);

#endif
