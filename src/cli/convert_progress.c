#include "cli/convert_progress.h"

#include <stdio.h>
#include <time.h>
#include <unistd.h>

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void draw(void *user, const cmf_convert_progress *r) {
    cli_convert_progress *s = user;
    double t = now_s();
    if (!r->final && t - s->last_draw < (s->tty ? 0.2 : 5.0)) return;
    s->last_draw = t;
    double el = r->seconds;
    double frac = r->source_bytes_total
                      ? (double)r->source_bytes_done / (double)r->source_bytes_total
                      : (double)r->tensors_done / (double)r->tensors_total;
    double rate = el > 0 ? r->source_bytes_done / el / 1e6 : 0;
    double eta = frac > 0 ? el * (1 - frac) / frac : 0;
    if (s->tty) {
        char bar[31];
        int fill = (int)(frac * 30);
        for (int i = 0; i < 30; i++)
            bar[i] = i < fill ? '#' : '.';
        bar[30] = '\0';
        fprintf(stderr, "\r[%s] %3.0f%% of bytes  %zu/%zu tensors  %.0f MB/s  ETA %.0fs   %s", bar,
                frac * 100, r->tensors_done, r->tensors_total, rate, eta, r->final ? "\n" : "");
        s->open_line = !r->final;
    } else {
        fprintf(stderr,
                "convert: %3.0f%% of bytes, %zu/%zu tensors, %.0f MB/s, elapsed %.1fs, ETA %.0fs\n",
                frac * 100, r->tensors_done, r->tensors_total, rate, el, eta);
    }
}

static void fallback(void *user, const char *tensor, cmf_dtype wanted, cmf_dtype written) {
    (void)user;
    fprintf(stderr, "convert: %s: shape does not fit %s, written as %s\n", tensor,
            cmf_dtype_name(wanted), cmf_dtype_name(written));
}

void cli_convert_progress_attach(cmf_convert_opts *o, cli_convert_progress *state) {
    *state = (cli_convert_progress){.tty = isatty(2)};
    o->on_progress = draw;
    o->on_fallback = fallback;
    o->progress_user = state;
}

void cli_convert_progress_end(cli_convert_progress *state) {
    if (state->open_line) fputc('\n', stderr);
    state->open_line = false;
}
