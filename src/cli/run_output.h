/* run_output.h - how `cortiq run` prints an answer as it is generated: stop strings (text that
 * could begin one is held back until it cannot), an interrupt flag (Ctrl-C), the answer's own
 * line end, and the stats line. */
#ifndef CORTIQ_CLI_RUN_OUTPUT_H
#define CORTIQ_CLI_RUN_OUTPUT_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>

#include "cortiq/runtime.h"

typedef struct run_out {
    const char *const *stops; /* --stop strings (none empty) */
    size_t n_stops;
    volatile sig_atomic_t *interrupt; /* non-NULL: the answer stops once it is nonzero */
    /* per answer */
    char *pending; /* generated text not printed yet: it may be the start of a stop string */
    size_t n_pending, cap;
    size_t printed; /* bytes of the answer printed */
    bool stopped;   /* a stop string ended the answer (not printed) */
    bool interrupted;
    char last; /* the last byte printed */
    /* the runtime whose MTP drafts the stats line counts (NULL: none), and its counts at the
     * previous stats line */
    const cortiq_runtime *rt;
    uint64_t mtp_drafts, mtp_accepted;
} run_out;

/* Start an answer. */
void run_out_begin(run_out *o);
/* cortiq_text_fn: print what can be printed; nonzero once a stop string or the interrupt ends
 * the answer. */
int run_out_piece(void *user, const char *text, size_t len);
/* Print what was held back (unless a stop string ended the answer) and end the line. Trims
 * *reply (when non-NULL) to what was printed. */
void run_out_end(run_out *o, char *reply);
void run_out_free(run_out *o);

/* "[prompt N tokens (C cached), prefill ... | generated ... | MTP ... | finish F]" on stderr
 * (the MTP part where o->rt drafts with its head: this answer's drafts and acceptance rate). */
void run_print_stats(run_out *o, const cortiq_generate_stats *s);

#endif
