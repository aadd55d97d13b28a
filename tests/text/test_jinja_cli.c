/* test_jinja_cli.c - `cortiq chat-template` end to end: a .cmf whose header carries the
 * template and whose tokenizer section names the special tokens, a tokenizer_config.json,
 * a .jinja with --kwargs, the ChatML fallback, usage and template errors (exit codes). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "common/test.h"
#include "cortiq/writer.h"

static const char *k_tokenizer =
    "{\"version\": \"1.0\", \"truncation\": null, \"padding\": null, \"added_tokens\": ["
    "{\"id\": 0, \"content\": \"<|bos|>\", \"single_word\": false, \"lstrip\": false, \"rstrip\": false,"
    " \"normalized\": false, \"special\": true},"
    "{\"id\": 1, \"content\": \"<|eot|>\", \"single_word\": false, \"lstrip\": false, \"rstrip\": false,"
    " \"normalized\": false, \"special\": true}],"
    " \"normalizer\": null, \"pre_tokenizer\": null, \"post_processor\": null, \"decoder\": null,"
    " \"model\": {\"type\": \"BPE\", \"dropout\": null, \"unk_token\": null, \"continuing_subword_prefix\": null,"
    " \"end_of_word_suffix\": null, \"fuse_unk\": false, \"byte_fallback\": false,"
    " \"vocab\": {\"<|bos|>\": 0, \"<|eot|>\": 1, \"a\": 2, \"b\": 3}, \"merges\": []}}";

static const char *k_header_fmt =
    "{\"arch\": {\"arch_name\": \"llama\", \"hidden_size\": 64, \"intermediate_size\": 40, \"num_layers\": 2,"
    " \"num_attention_heads\": 4, \"num_kv_heads\": 2, \"head_dim\": 16, \"vocab_size\": 4,"
    " \"layer_types\": [\"FullAttention\", \"FullAttention\"], \"rms_norm_eps\": 1e-6,"
    " \"norm_style\": \"qwen\", \"rope_theta\": 10000.0, \"tie_word_embeddings\": true},"
    " %s}";

static char *run_capture(const char *cmd, int *rc) {
    FILE *p = popen(cmd, "r");
    if (!p) return NULL;
    size_t cap = 1 << 16, n = 0;
    char *b = malloc(cap + 1);
    size_t k;
    while ((k = fread(b + n, 1, cap - n, p)) > 0) {
        n += k;
        if (n == cap) b = realloc(b, (cap *= 2) + 1);
    }
    int st = pclose(p);
    *rc = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    b[n] = 0;
    return b;
}

static void write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "wb");
    if (!f) return;
    fputs(text, f);
    fclose(f);
}

static bool make_cmf(const char *path, const char *tokcfg, bool with_vocab) {
    char header[4096];
    snprintf(header, sizeof header, k_header_fmt, tokcfg);
    cmf_writer *w = NULL;
    cmf_err err;
    bool ok = cmf_writer_create(path, NULL, &w, &err) == CMF_OK &&
              cmf_writer_set_header(w, header, strlen(header), &err) == CMF_OK &&
              (!with_vocab ||
               cmf_writer_set_vocab(w, k_tokenizer, strlen(k_tokenizer), &err) == CMF_OK) &&
              cmf_writer_finish(w, &err) == CMF_OK;
    if (!ok) fprintf(stderr, "make_cmf: %s\n", err.msg);
    cmf_writer_free(w);
    return ok;
}

int main(void) {
    const char *bin = getenv("CORTIQ_BIN");
    CHECK_MSG(bin != NULL, "CORTIQ_BIN not set");
    if (!bin) TEST_DONE();
    char cmd[4096];
    int rc;
    char *out;
    write_file("jinja_cli_msgs.json", "[{\"role\": \"user\", \"content\": \"Hi \\u00e9\"}]");
    write_file("jinja_cli_tools.json",
               "[{\"type\": \"function\", \"function\": {\"name\": \"f\"}}]");
    write_file(
        "jinja_cli.jinja",
        "{{ bos_token }}{% for m in messages %}[{{ m.role }}]{{ m.content }}{% endfor %}"
        "{% if tools %}T{{ tools|length }}{% endif %}{% if add_generation_prompt %}>{% endif %}{{ x|default('') }}\n");

    /* .jinja: special tokens from --kwargs, exact output, no trailing newline added */
    snprintf(
        cmd, sizeof cmd,
        "'%s' chat-template jinja_cli.jinja --messages jinja_cli_msgs.json --tools jinja_cli_tools.json "
        "--add-generation-prompt --kwargs '{\"bos_token\": \"<s>\", \"x\": 7}'",
        bin);
    out = run_capture(cmd, &rc);
    CHECK_MSG(rc == 0 && out && !strcmp(out, "<s>[user]Hi \xc3\xa9T1>7"), "jinja: rc=%d out='%s'",
              rc, out ? out : "");
    free(out);

    /* tokenizer_config.json: template + bos/eos as string or {"content": ...} */
    write_file(
        "jinja_cli_tokcfg.json",
        "{\"chat_template\": \"{{ bos_token }}|{{ eos_token }}|{{ messages[0].content }}\","
        " \"bos_token\": {\"content\": \"<B>\", \"lstrip\": false}, \"eos_token\": \"<E>\"}");
    snprintf(cmd, sizeof cmd,
             "'%s' chat-template jinja_cli_tokcfg.json --messages jinja_cli_msgs.json", bin);
    out = run_capture(cmd, &rc);
    CHECK_MSG(rc == 0 && out && !strcmp(out, "<B>|<E>|Hi \xc3\xa9"), "tokcfg: rc=%d out='%s'", rc,
              out ? out : "");
    free(out);

    /* no chat_template field: chat_template.jinja beside the config */
    write_file("chat_template.jinja", "side:{{ eos_token }}\n");
    write_file("jinja_cli_tokcfg2.json", "{\"eos_token\": \"<E>\"}");
    snprintf(cmd, sizeof cmd,
             "'%s' chat-template jinja_cli_tokcfg2.json --messages jinja_cli_msgs.json", bin);
    out = run_capture(cmd, &rc);
    CHECK_MSG(rc == 0 && out && !strcmp(out, "side:<E>"), "sidecar: rc=%d out='%s'", rc,
              out ? out : "");
    free(out);

    /* named templates: tool_use picked when --tools is given */
    write_file("jinja_cli_named.json",
               "{\"chat_template\": [{\"name\": \"default\", \"template\": \"D\"},"
               " {\"name\": \"tool_use\", \"template\": \"U\"}]}");
    snprintf(
        cmd, sizeof cmd,
        "'%s' chat-template jinja_cli_named.json --messages jinja_cli_msgs.json --tools jinja_cli_tools.json",
        bin);
    out = run_capture(cmd, &rc);
    CHECK_MSG(rc == 0 && out && !strcmp(out, "U"), "named: rc=%d out='%s'", rc, out ? out : "");
    free(out);

    /* .cmf: template from header.tokenizer_config, tokens from the tokenizer section */
    if (make_cmf(
            "jinja_cli.cmf",
            "\"tokenizer_config\": {\"chat_template\": \"{{ bos_token }}{{ messages[0]['content'] }}{{ eos_token }}"
            "{{ strftime_now('%Y') }}\", \"eos_token_ids\": [1], \"bos_token_id\": 0, \"pad_token_id\": null}",
            true)) {
        snprintf(cmd, sizeof cmd,
                 "'%s' chat-template jinja_cli.cmf --messages jinja_cli_msgs.json --now 1768469400",
                 bin);
        out = run_capture(cmd, &rc);
        CHECK_MSG(rc == 0 && out && !strcmp(out, "<|bos|>Hi \xc3\xa9<|eot|>2026"),
                  "cmf: rc=%d out='%s'", rc, out ? out : "");
        free(out);
    } else
        CHECK_MSG(false, "could not build jinja_cli.cmf");
    /* .cmf without a template: ChatML fallback (spec §6.1) */
    if (make_cmf("jinja_cli_plain.cmf", "\"quant_type\": \"F32\"", false)) {
        snprintf(
            cmd, sizeof cmd,
            "'%s' chat-template jinja_cli_plain.cmf --messages jinja_cli_msgs.json --add-generation-prompt 2>/dev/null",
            bin);
        out = run_capture(cmd, &rc);
        CHECK_MSG(
            rc == 0 && out &&
                !strcmp(out, "<|im_start|>user\nHi \xc3\xa9<|im_end|>\n<|im_start|>assistant\n"),
            "chatml: rc=%d out='%s'", rc, out ? out : "");
        free(out);
    } else
        CHECK_MSG(false, "could not build jinja_cli_plain.cmf");

    /* errors: template raises -> 1 with the message; usage -> 2; missing file -> 3 */
    write_file("jinja_cli_raise.jinja", "a\n{{ raise_exception('nope: ' ~ messages|length) }}");
    snprintf(cmd, sizeof cmd,
             "'%s' chat-template jinja_cli_raise.jinja --messages jinja_cli_msgs.json 2>&1", bin);
    out = run_capture(cmd, &rc);
    CHECK_MSG(rc == 1 && out && strstr(out, "line 2") && strstr(out, "nope: 1"),
              "raise: rc=%d out='%s'", rc, out ? out : "");
    free(out);
    snprintf(cmd, sizeof cmd, "'%s' chat-template jinja_cli.jinja 2>/dev/null", bin);
    out = run_capture(cmd, &rc);
    CHECK_MSG(rc == 2, "usage: rc=%d", rc);
    free(out);
    snprintf(
        cmd, sizeof cmd,
        "'%s' chat-template jinja_cli.jinja --messages jinja_cli_msgs.json --kwargs '[1]' 2>/dev/null",
        bin);
    out = run_capture(cmd, &rc);
    CHECK_MSG(rc == 2, "bad kwargs: rc=%d", rc);
    free(out);
    snprintf(cmd, sizeof cmd,
             "'%s' chat-template no_such_file.jinja --messages jinja_cli_msgs.json 2>/dev/null",
             bin);
    out = run_capture(cmd, &rc);
    CHECK_MSG(rc == 3, "missing file: rc=%d", rc);
    free(out);
    snprintf(cmd, sizeof cmd, "'%s' chat-template --help", bin);
    out = run_capture(cmd, &rc);
    CHECK_MSG(rc == 0 && out && strstr(out, "--kwargs"), "help: rc=%d", rc);
    free(out);
    TEST_DONE();
}
