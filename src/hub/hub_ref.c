/* hub_ref.c - tell a repo reference "OWNER/NAME[@REVISION][:FILE]" from a local path. */
#include <string.h>
#include <strings.h>

#include "cortiq/hub.h"

/* Hub repo names: letters, digits, '-', '_', '.'; not starting or ending with '.' or '-',
 * no "..", at most 96 characters (the hub's own rule). */
static bool name_ok(const char *s, size_t n) {
    if (n == 0 || n > 96) return false;
    if (s[0] == '.' || s[0] == '-' || s[n - 1] == '.' || s[n - 1] == '-') return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                  c == '-' || c == '_' || c == '.';
        if (!ok || (c == '.' && i + 1 < n && s[i + 1] == '.')) return false;
    }
    return true;
}

/* A revision or file part: printable, no spaces, no ".." path segment, not absolute. */
static bool part_ok(const char *s, size_t n) {
    if (n == 0 || s[0] == '/') return false;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] <= ' ' || s[i] == '\\' || (unsigned char)s[i] == 0x7f) return false;
    for (size_t i = 0; i + 1 < n; i++)
        if (s[i] == '.' && s[i + 1] == '.' && (i == 0 || s[i - 1] == '/') &&
            (i + 2 == n || s[i + 2] == '/'))
            return false;
    return true;
}

/* A name ending like a model file ("out/model.cmf") is a path that does not exist yet, not a
 * repo: its error should be "cannot open", not an HTTP 404. */
static bool file_like(const char *s, size_t n) {
    static const char *const ext[] = {".cmf", ".gguf", ".safetensors", ".json", ".jinja"};
    for (size_t i = 0; i < sizeof ext / sizeof ext[0]; i++) {
        size_t e = strlen(ext[i]);
        if (n > e && !strncasecmp(s + n - e, ext[i], e)) return true;
    }
    return false;
}

bool cortiq_hub_ref_parse(const char *spec, cortiq_hub_ref *out) {
    memset(out, 0, sizeof *out);
    if (!spec) return false;
    const char *slash = strchr(spec, '/');
    if (!slash || !name_ok(spec, (size_t)(slash - spec))) return false;
    const char *name = slash + 1;
    size_t nn = strcspn(name, "@:");
    if (!name_ok(name, nn) || memchr(name, '/', nn) || file_like(name, nn)) return false;
    const char *rest = name + nn;
    size_t repo_len = (size_t)(rest - spec);
    if (repo_len >= sizeof out->repo) return false;
    memcpy(out->repo, spec, repo_len);
    if (*rest == '@') {
        size_t rl = strcspn(rest + 1, ":");
        if (!part_ok(rest + 1, rl) || rl >= sizeof out->revision) return false;
        memcpy(out->revision, rest + 1, rl);
        rest += 1 + rl;
    }
    if (*rest == ':') {
        size_t fl = strlen(rest + 1);
        if (!part_ok(rest + 1, fl) || fl >= sizeof out->file) return false;
        memcpy(out->file, rest + 1, fl);
        rest += 1 + fl;
    }
    return *rest == 0;
}
