/* run_chat.c - the interactive session of `cortiq run`: history kept across turns, commands
 * (/help /reset /save /load /exit), multi-line input, the oldest turns dropped when the context
 * fills, and Ctrl-C that stops a reply without ending the session. */
#include "cli/run_chat.h"
#include "common/err.h"

#include <errno.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static volatile sig_atomic_t g_sigint;

static void on_sigint(int sig) {
    (void)sig;
    g_sigint = 1;
}

static const char k_help[] =
    "chat: type a message; a line ending in \\ continues on the next, and a line of \"\"\" starts "
    "and ends a block.\n"
    "  /reset      start over (the system message stays)\n"
    "  /save FILE  write the conversation as JSON     /load FILE  continue a saved one\n"
    "  /help       this text                          /exit       quit (also Ctrl-D)\n"
    "  Ctrl-C stops a reply; at an empty prompt, twice in a row, it quits.\n";

typedef enum { IN_LINE, IN_EOF, IN_INTERRUPT } in_status;

/* One message from stdin into *buf (NUL-terminated, without the final newline). */
static in_status read_message(char **buf, size_t *len, bool tty) {
    size_t cap = 0;
    char *line = NULL;
    bool block = false, more = false;
    *len = 0;
    for (;;) {
        if (tty) fputs(block || more ? "… " : "> ", stderr);
        errno = 0;
        ssize_t n = getline(&line, &cap, stdin);
        if (n < 0) {
            bool intr = errno == EINTR && g_sigint;
            clearerr(stdin);
            free(line);
            if (intr) g_sigint = 0;
            return intr ? IN_INTERRUPT : (*len ? IN_LINE : IN_EOF);
        }
        while (n && (line[n - 1] == '\n' || line[n - 1] == '\r'))
            line[--n] = '\0';
        if (!strcmp(line, "\"\"\"") && !more) {
            if (block) break;
            block = true;
            continue;
        }
        more = !block && n && line[n - 1] == '\\';
        if (more) line[--n] = '\0';
        char *grown = realloc(*buf, *len + (size_t)n + 2);
        if (!grown) break;
        *buf = grown;
        if (*len) (*buf)[(*len)++] = '\n';
        memcpy(*buf + *len, line, (size_t)n);
        *len += (size_t)n;
        (*buf)[*len] = '\0';
        if (!block && !more) break;
    }
    free(line);
    if (!*buf && !(*buf = calloc(1, 1))) return IN_EOF;
    return IN_LINE;
}

static json_t *message(const char *role, const char *content) {
    return json_pack("{s:s,s:s}", "role", role, "content", content);
}

/* The prompt ids of the conversation, dropping its oldest turns (never the system message nor
 * the last message) until it leaves `reserve` positions of the context for the answer. */
static cmf_status fit_prompt(cortiq_runtime *rt, json_t *msgs, uint32_t reserve, int32_t **ids,
                             size_t *n, size_t *dropped, cmf_err *err) {
    uint32_t ctx = cortiq_session_ctx(cortiq_runtime_session(rt));
    *dropped = 0;
    for (;;) {
        char *mj = json_dumps(msgs, JSON_COMPACT), *prompt = NULL;
        cmf_status st = mj ? cortiq_render_chat(rt, mj, true, &prompt, err)
                           : cmf_err_set(err, CMF_E_NOMEM, "chat", "messages");
        free(mj);
        *ids = NULL, *n = 0;
        if (!st)
            st = cmf_tokenizer_encode(cortiq_runtime_tokenizer(rt), prompt, strlen(prompt), false,
                                      ids, n, err);
        free(prompt);
        if (st || *n + reserve <= ctx) return st;
        free(*ids);
        *ids = NULL;
        size_t first = 0;
        const char *role = json_string_value(json_object_get(json_array_get(msgs, 0), "role"));
        if (role && !strcmp(role, "system")) first = 1;
        if (json_array_size(msgs) <= first + 1)
            return cmf_err_set(err, CMF_E_LIMIT, "chat",
                               "this message makes a prompt of %zu tokens, more than the context "
                               "of %u leaves with %u kept for the answer; not sent",
                               *n, ctx, reserve);
        json_array_remove(msgs, first);
        ++*dropped;
    }
}

static void save_chat(json_t *msgs, const char *path) {
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    if (json_dump_file(msgs, tmp, JSON_INDENT(2)) != 0 || rename(tmp, path) != 0) {
        fprintf(stderr, "chat: cannot write %s: %s\n", path, strerror(errno));
        remove(tmp);
        return;
    }
    fprintf(stderr, "chat: saved %zu messages to %s\n", json_array_size(msgs), path);
}

/* A saved conversation: an array of {"role": string, "content": string}. NULL if not. */
static json_t *load_chat(const char *path) {
    json_error_t je;
    json_t *j = json_load_file(path, 0, &je);
    if (!j) {
        fprintf(stderr, "chat: cannot load %s: line %d: %s\n", path, je.line, je.text);
        return NULL;
    }
    size_t i;
    json_t *m;
    bool ok = json_is_array(j);
    json_array_foreach(j, i, m) ok = ok && json_is_string(json_object_get(m, "role")) &&
                                     json_is_string(json_object_get(m, "content"));
    if (!ok) {
        fprintf(stderr,
                "chat: %s is not a conversation (an array of {\"role\", \"content\"} strings)\n",
                path);
        json_decref(j);
        return NULL;
    }
    return j;
}

cmf_status run_chat(cortiq_runtime *rt, const char *system, const cortiq_generate_params *gp,
                    run_out *out, cmf_err *err) {
    json_t *msgs = json_array();
    if (system) json_array_append_new(msgs, message("system", system));
    bool tty = isatty(0);
    struct sigaction sa = {0}, old;
    sa.sa_handler = on_sigint; /* no SA_RESTART: Ctrl-C interrupts the read at the prompt */
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old);
    out->interrupt = &g_sigint;
    uint32_t ctx = cortiq_session_ctx(cortiq_runtime_session(rt));
    uint32_t reserve = gp->max_tokens && gp->max_tokens < ctx / 2 ? gp->max_tokens : ctx / 2;
    if (tty) fputs(k_help, stderr);
    cmf_status st = CMF_OK;
    bool ctrl_c = false; /* the last input was a Ctrl-C at the prompt */
    char *text = NULL;
    for (;;) {
        size_t len;
        free(text);
        text = NULL;
        cortiq_runtime_idle(rt); /* the user reads or types: move the weights now, not mid-answer */
        in_status in = read_message(&text, &len, tty);
        if (in == IN_EOF) {
            if (tty) fputc('\n', stderr); /* leave the shell prompt on a line of its own */
            break;
        }
        if (in == IN_INTERRUPT) {
            if (ctrl_c) break;
            ctrl_c = true;
            fputs("\nchat: Ctrl-C again to quit (or /exit)\n", stderr);
            continue;
        }
        ctrl_c = false;
        if (!len) continue;
        if (!strcmp(text, "/exit")) break;
        if (!strcmp(text, "/help")) {
            fputs(k_help, stderr);
            continue;
        }
        if (!strcmp(text, "/reset")) {
            json_array_clear(msgs);
            if (system) json_array_append_new(msgs, message("system", system));
            fprintf(stderr, "chat: conversation cleared%s\n",
                    system ? " (the system message stays)" : "");
            continue;
        }
        if (!strncmp(text, "/save ", 6) || !strncmp(text, "/load ", 6)) {
            const char *path = text + 6;
            if (text[1] == 's') {
                save_chat(msgs, path);
            } else {
                json_t *loaded = load_chat(path);
                if (loaded) {
                    json_decref(msgs);
                    msgs = loaded;
                    fprintf(stderr, "chat: loaded %zu messages from %s\n", json_array_size(msgs),
                            path);
                }
            }
            continue;
        }
        if (text[0] == '/' && !strchr(text, ' ') && !strchr(text, '\n')) {
            fprintf(stderr, "chat: unknown command %s (/help lists them)\n", text);
            continue;
        }
        json_array_append_new(msgs, message("user", text));
        int32_t *ids = NULL;
        size_t n = 0, dropped = 0;
        st = fit_prompt(rt, msgs, reserve, &ids, &n, &dropped, err);
        if (st == CMF_E_LIMIT) { /* this message alone is too long: the session goes on */
            fprintf(stderr, "%s\n", err->msg);
            json_array_remove(msgs, json_array_size(msgs) - 1);
            st = CMF_OK;
            continue;
        }
        if (st) break;
        if (dropped)
            fprintf(stderr, "chat: the context is full; dropped the %zu oldest message%s%s\n",
                    dropped, dropped == 1 ? "" : "s", system ? " (the system message stays)" : "");
        cortiq_generate_stats s;
        char *reply = NULL;
        g_sigint = 0;
        run_out_begin(out);
        st = cortiq_generate(rt, ids, n, gp, run_out_piece, out, &reply, &s, err);
        free(ids);
        if (st) break;
        run_out_end(out, reply);
        run_print_stats(out, &s);
        g_sigint = 0;
        json_array_append_new(msgs, message("assistant", reply));
        free(reply);
    }
    free(text);
    out->interrupt = NULL;
    sigaction(SIGINT, &old, NULL);
    json_decref(msgs);
    return st;
}
