/* test_jinja_errors.c - the chat-template interpreter's errors and caps: syntax and runtime
 * errors name the template line, raise_exception's message comes through, file-access tags
 * are refused, the sandbox refuses mutation, and runaway templates stop with CMF_E_LIMIT. */
#include <string.h>

#include "common/test.h"
#include "cortiq/chat_template.h"

static const char *k_msgs = "[{\"role\": \"user\", \"content\": \"hi\"}]";

/* compile + render src; returns the status of whichever step failed; *out_s gets the text */
static cmf_status run(const char *src, const char *msgs, char **out_s, cmf_err *err) {
    cmf_chat_template *t = NULL;
    *out_s = NULL;
    cmf_status st = cmf_chat_template_compile(src, strlen(src), &t, err);
    if (st != CMF_OK) return st;
    size_t n;
    st = cmf_chat_template_render(t, msgs ? msgs : k_msgs, NULL, NULL, false,
                                  "{\"bos_token\": \"<s>\"}", out_s, &n, err);
    cmf_chat_template_free(t);
    return st;
}

static void expect_err(const char *src, cmf_status want, const char *needle) {
    char *out;
    cmf_err err;
    cmf_err_clear(&err);
    cmf_status st = run(src, NULL, &out, &err);
    CHECK_MSG(st == want, "template %s: got %s (%s), want %s", src, cmf_status_name(st), err.msg,
              cmf_status_name(want));
    if (needle)
        CHECK_MSG(strstr(err.msg, needle) != NULL, "message '%s' lacks '%s'", err.msg, needle);
    free(out);
}

static void expect_out(const char *src, const char *want) {
    char *out;
    cmf_err err;
    cmf_err_clear(&err);
    cmf_status st = run(src, NULL, &out, &err);
    CHECK_MSG(st == CMF_OK && out && !strcmp(out, want), "template %s: got '%s' (%s), want '%s'",
              src, out ? out : "(null)", err.msg, want);
    free(out);
}

int main(void) {
    /* syntax errors carry the line */
    expect_err("line one\n{% if %}x{% endif %}", CMF_E_PARSE, "line 2");
    expect_err("a\nb\n{% if x %}never closed", CMF_E_PARSE, "endif");
    expect_err("{{ 1 + }}", CMF_E_PARSE, "line 1");
    expect_err("{{ 'unterminated }}", CMF_E_PARSE, "unterminated");
    expect_err("{% for x in y %}{% endif %}", CMF_E_PARSE, "endif");
    expect_err("{% break %}", CMF_E_PARSE, "outside");
    expect_err("{# no end", CMF_E_PARSE, "comment");
    expect_err("{{ (1, 2] }}", CMF_E_PARSE, NULL);
    /* no file access, unknown tags */
    expect_err("{% include 'x.jinja' %}", CMF_E_UNSUPPORTED, "not allowed");
    expect_err("{% import 'm.jinja' as m %}", CMF_E_UNSUPPORTED, "not allowed");
    expect_err("{% extends 'base' %}", CMF_E_UNSUPPORTED, "not allowed");
    expect_err("{% from 'm' import x %}", CMF_E_UNSUPPORTED, "not allowed");
    expect_err("{% frobnicate %}", CMF_E_UNSUPPORTED, "frobnicate");
    /* runtime errors carry the line and the reason */
    expect_err("ok\n\n{{ raise_exception('roles must alternate') }}", CMF_E_PARSE,
               "line 3: raise_exception: roles must alternate");
    expect_err("{{ nothing.attr }}", CMF_E_PARSE, "'nothing' is undefined");
    expect_err("x\n{{ messages[0].content + 1 }}", CMF_E_PARSE, "line 2");
    expect_err("{{ none + 'a' }}", CMF_E_PARSE, "unsupported operand");
    expect_err("{% for x in none %}{% endfor %}", CMF_E_PARSE, "not iterable");
    expect_err("{{ 1 / 0 }}", CMF_E_PARSE, "division by zero");
    expect_err("{{ 1 < 'a' }}", CMF_E_PARSE, "not supported");
    expect_err("{{ messages|nosuchfilter }}", CMF_E_PARSE, "nosuchfilter");
    expect_err("{{ 1 is nosuchtest }}", CMF_E_PARSE, "nosuchtest");
    expect_err("{{ {'a': 1}|tojson }}{{ messages[5]|tojson }}", CMF_E_PARSE,
               "not JSON serializable");
    /* immutable sandbox: mutators refused, internals invisible */
    expect_err("{{ messages.append(1) }}", CMF_E_PARSE, "unsafe");
    expect_err("{% set d = {} %}{{ d.update({'a': 1}) }}", CMF_E_PARSE, "unsafe");
    expect_err("{% set x = 1 %}{% set x.y = 2 %}", CMF_E_PARSE, "namespace");
    expect_out("[{{ ''.__class__ }}][{{ messages.__len__ }}][{{ range.__globals__ }}]", "[][][]");
    /* caps: recursion, loop iterations, output size, giant strings, deep nesting */
    expect_err("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", CMF_E_LIMIT, "nest");
    expect_err("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
               CMF_E_LIMIT, "iterations");
    expect_err("{{ 'abc' * 100000000000 }}", CMF_E_LIMIT, NULL);
    expect_err("{{ range(1000000)|list }}", CMF_E_LIMIT, "range");
    {
        char deep[4200];
        size_t n = 0;
        n += (size_t)snprintf(deep + n, sizeof deep - n, "{{ ");
        for (int i = 0; i < 2000; i++)
            deep[n++] = '(';
        deep[n++] = '1';
        for (int i = 0; i < 2000; i++)
            deep[n++] = ')';
        snprintf(deep + n, sizeof deep - n, " }}");
        expect_err(deep, CMF_E_LIMIT, NULL);
    }
    {
        const char *src = "{% for i in range(1000) %}0123456789{% endfor %}";
        cmf_chat_template *t = NULL;
        CHECK_STATUS(cmf_chat_template_compile(src, strlen(src), &t, &t_err_), CMF_OK);
        cmf_chat_template_set_max_output(t, 5000);
        char *out = NULL;
        size_t n;
        cmf_err err;
        CHECK(cmf_chat_template_render(t, k_msgs, NULL, NULL, false, NULL, &out, &n, &err) ==
              CMF_E_LIMIT);
        CHECK(out == NULL);
        cmf_chat_template_set_max_output(t, 0);
        CHECK(cmf_chat_template_render(t, k_msgs, NULL, NULL, false, NULL, &out, &n, &err) ==
                  CMF_OK &&
              n == 10000);
        free(out);
        cmf_chat_template_free(t);
    }
    /* bad inputs */
    {
        char *out;
        cmf_err err;
        CHECK(run("{{ messages }}", "not json", &out, &err) == CMF_E_PARSE &&
              strstr(err.msg, "messages"));
        CHECK(run("{{ messages }}", "{\"role\": \"user\"}", &out, &err) == CMF_E_PARSE);
        cmf_chat_template *t = NULL;
        CHECK(cmf_chat_template_compile(NULL, 3, &t, &err) == CMF_E_INVALID_ARG);
        CHECK(cmf_chat_template_compile("x", 1, NULL, &err) == CMF_E_INVALID_ARG);
        CHECK(cmf_chat_template_compile("x", 1, &t, &err) == CMF_OK);
        size_t n;
        CHECK(cmf_chat_template_render(t, NULL, NULL, NULL, false, NULL, &out, &n, &err) ==
              CMF_E_INVALID_ARG);
        CHECK(cmf_chat_template_render(t, "[]", "{}", NULL, false, NULL, &out, &n, &err) ==
              CMF_E_PARSE);
        CHECK(cmf_chat_template_render(t, "[]", NULL, NULL, false, "[1]", &out, &n, &err) ==
              CMF_E_PARSE);
        cmf_chat_template_free(t);
        cmf_chat_template_free(NULL);
    }
    /* reuse, defaults, fixed clock, variables transformers passes */
    {
        const char *src =
            "{{ bos_token }}{{ tools is none }}{{ documents is none }}{{ add_generation_prompt }}"
            "{{ enable_thinking is defined }}|{{ strftime_now('%d %b %Y %H:%M') }}";
        cmf_chat_template *t = NULL;
        CHECK_STATUS(cmf_chat_template_compile(src, strlen(src), &t, &t_err_), CMF_OK);
        cmf_chat_template_set_now(t, 1768469400); /* 2026-01-15 09:30 UTC */
        for (int rep = 0; rep < 2; rep++) {
            char *out = NULL;
            size_t n;
            cmf_err err;
            CHECK(cmf_chat_template_render(t, k_msgs, NULL, NULL, true, "{\"bos_token\": \"<s>\"}",
                                           &out, &n, &err) == CMF_OK);
            CHECK_MSG(out && !strcmp(out, "<s>TrueTrueTrueFalse|15 Jan 2026 09:30"), "got '%s'",
                      out ? out : "");
            free(out);
        }
        char *out = NULL;
        size_t n;
        cmf_err err;
        CHECK(cmf_chat_template_render(t, k_msgs, "[{\"type\": \"function\"}]", "[]", false,
                                       "{\"enable_thinking\": false}", &out, &n, &err) == CMF_OK);
        CHECK_MSG(out && !strncmp(out, "FalseFalseFalseTrue|", 20), "got '%s'", out ? out : "");
        free(out);
        cmf_chat_template_free(t);
    }
    /* a trailing newline of the source is dropped, like jinja2 */
    expect_out("{{ 'a' }}\n", "a");
    expect_out("{{ 'a' }}\n\n", "a\n");
    expect_out("x\r\ny\rz", "x\ny\nz");
    TEST_DONE();
}
