/* cli.h - what the subcommands share: exit codes, error printing, small parsers. */
#ifndef CORTIQ_CLI_H
#define CORTIQ_CLI_H

#include <stdbool.h>
#include <stdint.h>

#include "cortiq/engine.h"
#include "cortiq/format.h"
#include "cortiq/status.h"

/* Exit codes of every command (documented in README "Exit codes"). */
enum {
    CLI_EXIT_OK = 0,      /* success */
    CLI_EXIT_INVALID = 1, /* an input file is invalid, or a check (verify, ...) found a problem */
    CLI_EXIT_USAGE = 2,   /* bad command line */
    CLI_EXIT_SYSTEM = 3,  /* the system refused: I/O error, out of memory */
};

#define CMD(c, n, s) int cmd_##c(int argc, char **argv);
#include "cli/commands.def"
#undef CMD

/* `cortiq bench MODEL.cmf ...` (src/cli/bench_model.c); cmd_bench dispatches to it. */
int bench_model_main(int argc, char **argv);

/* Open a model (a shard name opens the whole set); on failure print the error and return the
 * exit code, else 0. */
int cli_open_model(const char *path, cmf_file **out);

/* Print an error (already prefixed with the file name by the library) to stderr. */
void cli_error(const cmf_err *err);
/* Print "cortiq <cmd>: <message>" to stderr, return CLI_EXIT_USAGE. */
int cli_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Exit code for a library status. */
int cli_exit_code(cmf_status s);
/* True if argv[i] is -h/--help. */
bool cli_is_help(const char *arg);
/* Parse a non-negative integer / a double; false on junk or overflow. */
bool cli_parse_u64(const char *s, uint64_t *out);
bool cli_parse_double(const char *s, double *out);
/* Option values that explain a rejection: each prints "cortiq CMD: OPT 'VALUE': <the rule>"
 * and returns false on a missing, malformed or out-of-range value (the caller then returns
 * CLI_EXIT_USAGE). cli_opt_value takes argv[*i + 1] and advances *i. */
const char *cli_opt_value(const char *cmd, int argc, char **argv, int *i);
bool cli_opt_u64(const char *cmd, const char *opt, const char *v, uint64_t lo, uint64_t hi,
                 uint64_t *out);
/* [lo, hi], with lo_open / hi_open making an end exclusive */
/* -log softmax(logits)[target] over V logits, in double (perplexity's per-token term). */
double cli_token_nll(const float *logits, uint32_t V, int32_t target);
bool cli_opt_double(const char *cmd, const char *opt, const char *v, double lo, bool lo_open,
                    double hi, bool hi_open, double *out);

/* True if word is one of the space-separated words of list (option names that take a value). */
bool cli_word_in(const char *word, const char *list);

/* Human-readable byte count ("1.50 GiB"), into a static rotating buffer. */
const char *cli_bytes(uint64_t n);
/* Print a JSON string literal (quoted, escaped) to stdout. */
void cli_json_string(const char *s);
/* The same for n bytes that may contain NUL (written as \u0000). */
void cli_json_bytes(const char *s, size_t n);

/* --task NAME (NULL: cortiq_model_default_task: the skill's input_mask_task, else the file's
 * default_task, dense when none; "none": dense) on session s of
 * model m, before its first token. Prints the task's shape on stderr; returns a CLI exit code
 * (an unknown name lists the file's tasks). */
int cli_select_task(const char *cmd, cortiq_model *m, cortiq_session *s, const char *task);

#endif
