/* convert_progress.h - how `cortiq convert` and `cortiq import-gguf` show a conversion on
 * stderr: a bar redrawn in place on a terminal, a line every few seconds otherwise, and one
 * line per tensor the chosen dtype could not hold. */
#ifndef CORTIQ_CLI_CONVERT_PROGRESS_H
#define CORTIQ_CLI_CONVERT_PROGRESS_H

#include <stdbool.h>

#include "cortiq/converter.h"

typedef struct cli_convert_progress {
    bool tty;         /* stderr is a terminal: redraw one line */
    bool open_line;   /* a bar is drawn without its newline yet */
    double last_draw; /* monotonic seconds of the last report shown */
} cli_convert_progress;

/* Point o's progress and fallback callbacks at a display kept in *state. */
void cli_convert_progress_attach(cmf_convert_opts *o, cli_convert_progress *state);
/* After the conversion: end a bar a failure left open, so the error starts its own line. */
void cli_convert_progress_end(cli_convert_progress *state);

#endif
