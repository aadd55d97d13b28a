/* run_output.c - see run_output.h. */
#include "cli/run_output.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void run_out_begin(run_out *o) {
    o->n_pending = 0;
    o->printed = 0;
    o->stopped = o->interrupted = false;
    o->last = '\n';
}

static void emit(run_out *o, const char *s, size_t n) {
    if (!n) return;
    fwrite(s, 1, n, stdout);
    fflush(stdout);
    o->printed += n;
    o->last = s[n - 1];
}

/* Bytes at the end of pending that could still grow into a stop string. */
static size_t held_back(const run_out *o) {
    size_t hold = 0;
    for (size_t k = 0; k < o->n_stops; k++) {
        size_t sl = strlen(o->stops[k]);
        for (size_t h = sl - 1; h > hold; h--)
            if (h <= o->n_pending && !memcmp(o->pending + o->n_pending - h, o->stops[k], h)) {
                hold = h;
                break;
            }
    }
    return hold;
}

int run_out_piece(void *user, const char *text, size_t len) {
    run_out *o = user;
    if (o->interrupt && *o->interrupt) {
        o->interrupted = true;
        return 1;
    }
    if (!o->n_stops) {
        emit(o, text, len);
        return 0;
    }
    if (o->n_pending + len > o->cap) {
        size_t cap = (o->n_pending + len) * 2;
        char *p = realloc(o->pending, cap);
        if (!p) { /* no room to look ahead: print as is */
            emit(o, o->pending, o->n_pending);
            emit(o, text, len);
            o->n_pending = 0;
            return 0;
        }
        o->pending = p, o->cap = cap;
    }
    memcpy(o->pending + o->n_pending, text, len);
    o->n_pending += len;
    size_t first = o->n_pending;
    for (size_t k = 0; k < o->n_stops; k++) {
        size_t sl = strlen(o->stops[k]);
        for (size_t i = 0; i + sl <= o->n_pending && i < first; i++)
            if (!memcmp(o->pending + i, o->stops[k], sl)) {
                first = i;
                break;
            }
    }
    if (first < o->n_pending) { /* a stop string: print what precedes it, end the answer */
        emit(o, o->pending, first);
        o->n_pending = 0;
        o->stopped = true;
        return 1;
    }
    size_t keep = held_back(o);
    emit(o, o->pending, o->n_pending - keep);
    memmove(o->pending, o->pending + o->n_pending - keep, keep);
    o->n_pending = keep;
    return 0;
}

void run_out_end(run_out *o, char *reply) {
    if (!o->stopped) emit(o, o->pending, o->n_pending);
    o->n_pending = 0;
    if (reply && strlen(reply) > o->printed) reply[o->printed] = '\0';
    if (o->last != '\n') { /* the answer's own line: piped answers do not run together */
        putchar('\n');
        fflush(stdout);
        o->last = '\n';
    }
}

void run_out_free(run_out *o) {
    free(o->pending);
    o->pending = NULL;
    o->cap = 0;
}

void run_print_stats(run_out *o, const cortiq_generate_stats *s) {
    size_t pre = s->prompt_tokens - s->cached_tokens;
    char mtp[96] = "";
    uint64_t drafts, accepted;
    if (o->rt && cortiq_runtime_mtp_counts(o->rt, &drafts, &accepted)) {
        uint64_t d = drafts - o->mtp_drafts, a = accepted - o->mtp_accepted;
        snprintf(mtp, sizeof mtp, " | MTP %llu of %llu drafts accepted (%.1f%%)",
                 (unsigned long long)a, (unsigned long long)d, d ? 100.0 * (double)a / d : 0.0);
        o->mtp_drafts = drafts, o->mtp_accepted = accepted;
    }
    const char *finish = o->stopped       ? "stop string"
                         : o->interrupted ? "interrupted"
                                          : cortiq_finish_name(s->finish);
    fprintf(stderr,
            "[prompt %zu tokens (%zu cached), prefill %.1f tok/s | generated %zu tokens, decode "
            "%.1f tok/s%s | finish %s]\n",
            s->prompt_tokens, s->cached_tokens,
            s->prefill_seconds > 0 ? pre / s->prefill_seconds : 0.0, s->generated_tokens,
            s->decode_seconds > 0 ? s->generated_tokens / s->decode_seconds : 0.0, mtp, finish);
}
