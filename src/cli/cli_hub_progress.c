/* cli_hub_progress.c - the progress display of a pull: a one-line bar with bytes, rate and
 * ETA redrawn in place on a terminal; one line per finished file when stderr is a file. */
#include <stdio.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/cli_hub.h"

static void fmt_eta(char *buf, size_t cap, double s) {
    if (s < 0 || s > 359999) {
        snprintf(buf, cap, "--:--");
        return;
    }
    unsigned t = (unsigned)(s + 0.5);
    if (t >= 3600)
        snprintf(buf, cap, "%u:%02u:%02u", t / 3600, t / 60 % 60, t % 60);
    else
        snprintf(buf, cap, "%u:%02u", t / 60, t % 60);
}

static void draw_bar(const cortiq_hub_progress *p) {
    double frac = p->bytes_total ? (double)p->bytes_done / (double)p->bytes_total : 1.0;
    if (frac > 1) frac = 1;
    char bar[31];
    int fill = (int)(frac * 30);
    for (int i = 0; i < 30; i++)
        bar[i] = i < fill ? '#' : '.';
    bar[30] = 0;
    double rate = p->seconds > 0 ? p->bytes_received / p->seconds : 0;
    char eta[16];
    fmt_eta(eta, sizeof eta, rate > 0 ? (double)(p->bytes_total - p->bytes_done) / rate : -1.0);
    /* cli_bytes rotates its buffers: one call per argument is safe */
    fprintf(stderr, "\r[%s] %3d%%  %s / %s  %s/s  ETA %s  %u/%u files\x1b[K", bar,
            (int)(frac * 100), cli_bytes(p->bytes_done), cli_bytes(p->bytes_total),
            cli_bytes((uint64_t)rate), eta, p->files_done, p->files_total);
}

void cli_hub_progress(void *user, const cortiq_hub_progress *p) {
    const char *cmd = user;
    static int tty = -1;
    if (tty < 0) tty = isatty(STDERR_FILENO);
    switch (p->event) {
    case CORTIQ_HUB_EV_START:
        if (!p->bytes_total) return;
        if (!tty)
            fprintf(stderr, "%s: downloading %s in %u file(s)\n", cmd, cli_bytes(p->bytes_total),
                    p->files_total - p->files_done);
        break;
    case CORTIQ_HUB_EV_CACHED:
        if (tty) fprintf(stderr, "\r\x1b[K");
        fprintf(stderr, "%s: %s (%s) already in the cache\n", cmd, p->file,
                cli_bytes(p->file_size));
        break;
    case CORTIQ_HUB_EV_RESUMED:
        if (tty) fprintf(stderr, "\r\x1b[K");
        fprintf(stderr, "%s: %s: resuming after %s of %s\n", cmd, p->file,
                cli_bytes(p->bytes_resumed), cli_bytes(p->file_size));
        break;
    case CORTIQ_HUB_EV_DONE:
        if (tty) fprintf(stderr, "\r\x1b[K");
        fprintf(stderr, "%s: %s (%s) downloaded and checked\n", cmd, p->file,
                cli_bytes(p->file_size));
        break;
    case CORTIQ_HUB_EV_BYTES:
        break;
    }
    if (tty && p->bytes_total && p->event != CORTIQ_HUB_EV_CACHED) draw_bar(p);
    if (tty && p->event == CORTIQ_HUB_EV_DONE && p->files_done == p->files_total)
        fprintf(stderr, "\n");
    fflush(stderr);
}
