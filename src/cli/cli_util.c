/* cli_util.c - helpers shared by the subcommands. */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cortiq/format.h"

void cli_error(const cmf_err *err) {
    fprintf(stderr, "%s\n", err->msg[0] ? err->msg : cmf_status_name(err->code));
}

int cli_usage_error(const char *cmd, const char *fmt, ...) {
    va_list ap;
    fprintf(stderr, "cortiq %s: ", cmd);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, " (see cortiq %s --help)\n", cmd);
    return CLI_EXIT_USAGE;
}

int cli_exit_code(cmf_status s) {
    switch (s) {
    case CMF_OK:
        return CLI_EXIT_OK;
    case CMF_E_IO:
    case CMF_E_NOMEM:
    case CMF_E_NETWORK:
        return CLI_EXIT_SYSTEM;
    case CMF_E_INVALID_ARG:
        return CLI_EXIT_USAGE;
    default:
        return CLI_EXIT_INVALID;
    }
}

bool cli_is_help(const char *arg) {
    return !strcmp(arg, "-h") || !strcmp(arg, "--help");
}

bool cli_parse_u64(const char *s, uint64_t *out) {
    if (!s || !*s || *s == '-') return false;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end) return false;
    *out = v;
    return true;
}

bool cli_parse_double(const char *s, double *out) {
    if (!s || !*s) return false;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || *end) return false;
    *out = v;
    return true;
}

const char *cli_opt_value(const char *cmd, int argc, char **argv, int *i) {
    if (*i + 1 >= argc) {
        fprintf(stderr, "cortiq %s: %s needs a value (see cortiq %s --help)\n", cmd, argv[*i], cmd);
        return NULL;
    }
    return argv[++*i];
}

bool cli_opt_u64(const char *cmd, const char *opt, const char *v, uint64_t lo, uint64_t hi,
                 uint64_t *out) {
    uint64_t u;
    if (v && cli_parse_u64(v, &u) && u >= lo && u <= hi) return *out = u, true;
    if (v && cli_parse_u64(v, &u))
        fprintf(stderr, "cortiq %s: %s '%s': must be in [%llu, %llu]\n", cmd, opt, v,
                (unsigned long long)lo, (unsigned long long)hi);
    else
        fprintf(stderr, "cortiq %s: %s '%s': not a whole number\n", cmd, opt, v ? v : "");
    return false;
}

bool cli_opt_double(const char *cmd, const char *opt, const char *v, double lo, bool lo_open,
                    double hi, bool hi_open, double *out) {
    double d;
    if (!v || !cli_parse_double(v, &d) || d != d) {
        fprintf(stderr, "cortiq %s: %s '%s': not a number\n", cmd, opt, v ? v : "");
        return false;
    }
    if ((lo_open ? d > lo : d >= lo) && (hi_open ? d < hi : d <= hi)) return *out = d, true;
    char hib[32];
    if (hi >= 1e300)
        snprintf(hib, sizeof hib, "inf");
    else
        snprintf(hib, sizeof hib, "%g", hi);
    fprintf(stderr, "cortiq %s: %s '%s': must be in %c%g, %s%c\n", cmd, opt, v, lo_open ? '(' : '[',
            lo, hib, hi_open || hi >= 1e300 ? ')' : ']');
    return false;
}

bool cli_word_in(const char *word, const char *list) {
    size_t n = strlen(word);
    for (const char *p = list; n && (p = strstr(p, word)); p += n)
        if ((p == list || p[-1] == ' ') && (p[n] == ' ' || p[n] == '\0')) return true;
    return false;
}

const char *cli_bytes(uint64_t n) {
    static char bufs[4][32];
    static int k;
    char *b = bufs[k++ & 3];
    if (n < 1024)
        snprintf(b, 32, "%llu B", (unsigned long long)n);
    else if (n < (1ull << 20))
        snprintf(b, 32, "%.2f KiB", n / 1024.0);
    else if (n < (1ull << 30))
        snprintf(b, 32, "%.2f MiB", n / 1048576.0);
    else
        snprintf(b, 32, "%.2f GiB", n / 1073741824.0);
    return b;
}

void cli_json_bytes(const char *s, size_t n) {
    putchar('"');
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        switch (c) {
        case '"':
            fputs("\\\"", stdout);
            break;
        case '\\':
            fputs("\\\\", stdout);
            break;
        case '\n':
            fputs("\\n", stdout);
            break;
        case '\r':
            fputs("\\r", stdout);
            break;
        case '\t':
            fputs("\\t", stdout);
            break;
        default:
            if (c < 0x20)
                printf("\\u%04x", c);
            else
                putchar(c);
        }
    }
    putchar('"');
}

void cli_json_string(const char *s) {
    cli_json_bytes(s, strlen(s));
}

int cli_open_model(const char *path, cmf_file **out) {
    cmf_err err;
    cmf_status st = cmf_open_model(path, 0, out, &err);
    if (st) cli_error(&err);
    return cli_exit_code(st);
}

double cli_token_nll(const float *logits, uint32_t V, int32_t target) {
    float mx = logits[0];
    for (uint32_t v = 1; v < V; v++)
        mx = logits[v] > mx ? logits[v] : mx;
    double sum = 0;
    for (uint32_t v = 0; v < V; v++)
        sum += exp((double)logits[v] - mx);
    return log(sum) + mx - logits[target];
}
