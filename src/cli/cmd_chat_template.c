/* cmd_chat_template.c - `cortiq chat-template SRC --messages FILE`: render a chat template
 * (spec §6.1) exactly as transformers' apply_chat_template would, and print the text. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "cli/cli.h"
#include "cortiq/chat_template.h"
#include "cortiq/format.h"
#include "cortiq/tokenizer.h"

#define CMD_NAME  "chat-template"
#define MAX_INPUT ((size_t)256 << 20)

static void usage(FILE *out) {
    fprintf(
        out,
        "usage: cortiq chat-template SRC --messages FILE [options]\n"
        "\n"
        "Render a chat template with the semantics of Hugging Face transformers'\n"
        "apply_chat_template (jinja2 with trim_blocks, lstrip_blocks, loop controls,\n"
        "raise_exception, strftime_now, tojson as json.dumps) and print exactly the\n"
        "rendered text (no newline is added).\n"
        "\n"
        "SRC is one of:\n"
        "  model.cmf               template from header.tokenizer_config (spec 6.1; ChatML\n"
        "                          when the file has none); bos_token/eos_token are the\n"
        "                          strings of bos_token_id and the first eos_token_ids entry,\n"
        "                          looked up in the file's tokenizer section\n"
        "  tokenizer_config.json   its chat_template (a string, or a list of named templates:\n"
        "                          'tool_use' when --tools is given, else 'default'; when absent,\n"
        "                          chat_template.jinja in the same folder) and its\n"
        "                          bos/eos/unk/pad tokens and additional_special_tokens\n"
        "  any other file          the template text itself (.jinja); special tokens only\n"
        "                          come from --kwargs, e.g. '{\"bos_token\": \"<s>\"}'\n"
        "\n"
        "options:\n"
        "  --messages FILE         JSON array of messages ('-' reads stdin)   (required)\n"
        "  --tools FILE            JSON array of tool schemas (the template sees none without)\n"
        "  --documents FILE        JSON array of documents\n"
        "  --add-generation-prompt set add_generation_prompt\n"
        "  --kwargs JSON           object of extra variables (enable_thinking, bos_token, ...);\n"
        "                          they override the special tokens taken from SRC\n"
        "  --template-name NAME    pick a named template from a tokenizer_config.json list\n"
        "  --now SECONDS           fix strftime_now's clock to this unix time (UTC)\n"
        "\n"
        "exit codes: 0 ok, 1 the template or an input is invalid (or the template raised),\n"
        "            2 usage, 3 system error\n");
}

static char *slurp(const char *path, size_t *len) {
    FILE *f = strcmp(path, "-") ? fopen(path, "rb") : stdin;
    if (!f) return NULL;
    size_t cap = 1 << 16, n = 0;
    char *b = malloc(cap + 1);
    while (b) {
        size_t k = fread(b + n, 1, cap - n, f);
        n += k;
        if (k == 0) break;
        if (n == cap) {
            char *q = cap >= MAX_INPUT ? NULL : realloc(b, cap * 2 + 1);
            if (!q) {
                free(b);
                b = NULL;
                break;
            }
            b = q;
            cap *= 2;
        }
    }
    if (b && ferror(f)) {
        free(b);
        b = NULL;
    }
    if (f != stdin) fclose(f);
    if (b) {
        b[n] = 0;
        *len = n;
    }
    return b;
}

static bool ends_with(const char *s, const char *suf) {
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && !strcmp(s + a - b, suf);
}

/* token string of a tokenizer_config field: "str" or {"content": "str"} */
static const char *token_field(json_t *cfg, const char *key) {
    json_t *v = json_object_get(cfg, key);
    if (json_is_object(v)) v = json_object_get(v, "content");
    return json_string_value(v);
}

/* Template and special tokens of SRC; *special is a new JSON object. Returns an exit code. */
static int load_source(const char *path, const char *tpl_name, bool have_tools, char **tpl,
                       json_t *special) {
    size_t len = 0;
    cmf_err err;
    if (ends_with(path, ".cmf")) {
        cmf_file *f = NULL;
        cmf_status st = cmf_open_model(path, 0, &f, &err);
        if (st) {
            cli_error(&err);
            return cli_exit_code(st);
        }
        const cmf_header *h = cmf_file_header(f);
        const cmf_tokenizer_config *tc = &h->tokenizer_config;
        const char *t = tc->present && tc->chat_template ? tc->chat_template : NULL;
        if (!t)
            fprintf(stderr, "cortiq %s: %s has no chat_template; using the ChatML fallback\n",
                    CMD_NAME, path);
        *tpl = strdup(t ? t : CMF_CHAT_TEMPLATE_CHATML);
        size_t vlen;
        const uint8_t *vocab = cmf_file_vocab(f, &vlen);
        cmf_tokenizer *tok = NULL;
        if (vocab && cmf_tokenizer_load((const char *)vocab, vlen, &tok, &err) == CMF_OK) {
            size_t n;
            const char *s;
            if (tc->present && tc->bos_token_id >= 0 && tc->bos_token_id <= INT32_MAX &&
                (s = cmf_tokenizer_id_to_token(tok, (int32_t)tc->bos_token_id, &n)))
                json_object_set_new(special, "bos_token", json_stringn(s, n));
            if (tc->present && tc->n_eos && tc->eos_token_ids[0] >= 0 &&
                tc->eos_token_ids[0] <= INT32_MAX &&
                (s = cmf_tokenizer_id_to_token(tok, (int32_t)tc->eos_token_ids[0], &n)))
                json_object_set_new(special, "eos_token", json_stringn(s, n));
            if (tc->present && tc->pad_token_id >= 0 && tc->pad_token_id <= INT32_MAX &&
                (s = cmf_tokenizer_id_to_token(tok, (int32_t)tc->pad_token_id, &n)))
                json_object_set_new(special, "pad_token", json_stringn(s, n));
            cmf_tokenizer_free(tok);
        } else if (vocab)
            fprintf(
                stderr,
                "cortiq %s: tokenizer section unusable (%s); special tokens only from --kwargs\n",
                CMD_NAME, err.msg);
        cmf_close(f);
        return *tpl ? CLI_EXIT_OK : CLI_EXIT_SYSTEM;
    }
    char *text = slurp(path, &len);
    if (!text) {
        fprintf(stderr, "cortiq %s: %s: cannot read\n", CMD_NAME, path);
        return CLI_EXIT_SYSTEM;
    }
    if (!ends_with(path, ".json")) {
        *tpl = text;
        return CLI_EXIT_OK;
    }
    json_error_t je;
    json_t *cfg = json_loadb(text, len, 0, &je);
    free(text);
    if (!json_is_object(cfg)) {
        fprintf(stderr, "cortiq %s: %s: not a JSON object (line %d: %s)\n", CMD_NAME, path, je.line,
                je.text);
        json_decref(cfg);
        return CLI_EXIT_INVALID;
    }
    json_t *ct = json_object_get(cfg, "chat_template");
    const char *t = json_string_value(ct);
    if (json_is_array(ct)) {
        const char *want = tpl_name ? tpl_name : have_tools ? "tool_use" : "default";
        size_t i;
        json_t *e;
        json_array_foreach(ct, i, e) {
            const char *nm = json_string_value(json_object_get(e, "name"));
            if (nm && !strcmp(nm, want)) t = json_string_value(json_object_get(e, "template"));
        }
        if (!t && !tpl_name && have_tools) json_array_foreach(ct, i, e) {
                const char *nm = json_string_value(json_object_get(e, "name"));
                if (nm && !strcmp(nm, "default"))
                    t = json_string_value(json_object_get(e, "template"));
            }
    }
    char *sidecar = NULL;
    if (!t &&
        !ct) { /* newer checkpoints keep the template in chat_template.jinja beside the config */
        const char *slash = strrchr(path, '/');
        size_t dir = slash ? (size_t)(slash - path) + 1 : 0;
        char *side = malloc(dir + sizeof "chat_template.jinja");
        if (side) {
            memcpy(side, path, dir);
            strcpy(side + dir, "chat_template.jinja");
            size_t sl;
            sidecar = slurp(side, &sl);
            free(side);
        }
        t = sidecar;
    }
    if (!t) {
        fprintf(stderr, "cortiq %s: %s: no chat_template%s%s\n", CMD_NAME, path,
                tpl_name ? " named " : "", tpl_name ? tpl_name : "");
        json_decref(cfg);
        return CLI_EXIT_INVALID;
    }
    static const char *const keys[] = {"bos_token", "eos_token", "unk_token", "pad_token"};
    for (size_t k = 0; k < 4; k++) {
        const char *s = token_field(cfg, keys[k]);
        if (s) json_object_set_new(special, keys[k], json_string(s));
    }
    json_t *extra = json_object_get(cfg, "additional_special_tokens");
    if (json_is_array(extra)) json_object_set(special, "additional_special_tokens", extra);
    *tpl = sidecar ? sidecar : strdup(t);
    json_decref(cfg);
    return *tpl ? CLI_EXIT_OK : CLI_EXIT_SYSTEM;
}

int cmd_chat_template(int argc, char **argv) {
    const char *src = NULL, *messages_path = NULL, *tools_path = NULL, *docs_path = NULL,
               *kwargs = NULL, *tpl_name = NULL;
    bool agp = false;
    int64_t now = -1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (cli_is_help(a)) {
            usage(stdout);
            return CLI_EXIT_OK;
        }
        bool has_val = i + 1 < argc;
        if (!strcmp(a, "--add-generation-prompt"))
            agp = true;
        else if (!strcmp(a, "--messages") && has_val)
            messages_path = argv[++i];
        else if (!strcmp(a, "--tools") && has_val)
            tools_path = argv[++i];
        else if (!strcmp(a, "--documents") && has_val)
            docs_path = argv[++i];
        else if (!strcmp(a, "--kwargs") && has_val)
            kwargs = argv[++i];
        else if (!strcmp(a, "--template-name") && has_val)
            tpl_name = argv[++i];
        else if (!strcmp(a, "--now") && has_val) {
            uint64_t v;
            if (!cli_parse_u64(argv[++i], &v) || v > INT64_MAX)
                return cli_usage_error(CMD_NAME, "--now wants a non-negative unix time, got '%s'",
                                       argv[i]);
            now = (int64_t)v;
        } else if (a[0] == '-' && a[1])
            return cli_usage_error(CMD_NAME, "unknown or incomplete option '%s'", a);
        else if (!src)
            src = a;
        else
            return cli_usage_error(CMD_NAME, "unexpected argument '%s'", a);
    }
    if (!src) return cli_usage_error(CMD_NAME, "missing SRC");
    if (!messages_path) return cli_usage_error(CMD_NAME, "missing --messages FILE");

    json_t *special = json_object();
    char *tpl = NULL, *msgs = NULL, *tools = NULL, *docs = NULL, *kw_all = NULL, *out = NULL;
    int rc = load_source(src, tpl_name, tools_path != NULL, &tpl, special);
    size_t len;
    if (rc == CLI_EXIT_OK && !(msgs = slurp(messages_path, &len))) {
        fprintf(stderr, "cortiq %s: %s: cannot read\n", CMD_NAME, messages_path);
        rc = CLI_EXIT_SYSTEM;
    }
    if (rc == CLI_EXIT_OK && tools_path && !(tools = slurp(tools_path, &len))) {
        fprintf(stderr, "cortiq %s: %s: cannot read\n", CMD_NAME, tools_path);
        rc = CLI_EXIT_SYSTEM;
    }
    if (rc == CLI_EXIT_OK && docs_path && !(docs = slurp(docs_path, &len))) {
        fprintf(stderr, "cortiq %s: %s: cannot read\n", CMD_NAME, docs_path);
        rc = CLI_EXIT_SYSTEM;
    }
    if (rc == CLI_EXIT_OK && kwargs) {
        json_error_t je;
        json_t *kw = json_loads(kwargs, 0, &je);
        if (!json_is_object(kw)) {
            json_decref(kw);
            json_decref(special);
            free(tpl);
            free(msgs);
            free(tools);
            free(docs);
            return cli_usage_error(CMD_NAME, "--kwargs must be a JSON object (%s)", je.text);
        }
        json_object_update(special, kw);
        json_decref(kw);
    }
    if (rc == CLI_EXIT_OK) kw_all = json_dumps(special, JSON_COMPACT | JSON_ENCODE_ANY);
    if (rc == CLI_EXIT_OK) {
        cmf_err err;
        cmf_chat_template *t = NULL;
        cmf_status st = cmf_chat_template_compile(tpl, strlen(tpl), &t, &err);
        if (st == CMF_OK) {
            cmf_chat_template_set_now(t, now);
            size_t out_len = 0;
            st = cmf_chat_template_render(t, msgs, tools, docs, agp, kw_all, &out, &out_len, &err);
            if (st == CMF_OK && fwrite(out, 1, out_len, stdout) != out_len) st = CMF_E_IO;
        }
        cmf_chat_template_free(t);
        if (st) {
            if (st == CMF_E_IO)
                fprintf(stderr, "cortiq %s: write error\n", CMD_NAME);
            else
                cli_error(&err);
            rc = cli_exit_code(st);
        }
    }
    free(out);
    free(kw_all);
    free(tpl);
    free(msgs);
    free(tools);
    free(docs);
    json_decref(special);
    return rc;
}
