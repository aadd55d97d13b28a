/* The server's request parser and tool-call reader without a model: accepted fields and their
 * defaults, each rejected range naming its parameter, NaN reported by name, unknown fields
 * ignored, content parts joined, tool-call arguments turned into objects for the template; tool
 * calls read back from the Hermes/Qwen, Mistral and Llama 3.x shapes, and plain text left as
 * content. */
#include <jansson.h>
#include <string.h>

#include "server/request.h"
#include "server/tools.h"
#include "test.h"

static bool parse(srv_kind k, const char *body, srv_request *r, srv_error *e) {
    return srv_request_parse(k, body, strlen(body), r, e);
}

/* The parameter a body is refused for ("" when it is accepted). */
static const char *refused(srv_kind k, const char *body) {
    static srv_error e;
    srv_request r;
    if (parse(k, body, &r, &e)) {
        srv_request_free(&r);
        return "";
    }
    if (e.http != 400) return "not 400";
    return e.param;
}

#define MSG "\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]"

static void test_chat(void) {
    srv_request r;
    srv_error e;
    CHECK(parse(
        SRV_CHAT,
        "{" MSG ",\"temperature\":0.5,\"top_k\":7,\"stop\":\"x\",\"max_completion_tokens\":9,"
        "\"logit_bias\":{\"3\":-100},\"n\":3,\"stream\":true,\"stream_options\":{\"include_usage\":true},"
        "\"seed\":-1,\"whatever\":{\"a\":[1]}}",
        &r, &e));
    CHECK(r.temperature == 0.5f && r.top_k == 7 && r.n_stop == 1 && !strcmp(r.stop[0], "x"));
    CHECK(r.has_max_tokens && r.max_tokens == 9 && r.n == 3 && r.stream && r.include_usage);
    CHECK(r.n_bias == 1 && r.bias_ids[0] == 3 && r.bias_vals[0] == -100);
    CHECK(r.has_seed && r.seed == UINT64_MAX);
    srv_request_free(&r);
    /* defaults: `cortiq run`'s sampler */
    CHECK(parse(SRV_CHAT, "{" MSG "}", &r, &e));
    CHECK(r.temperature > 0.69f && r.temperature < 0.71f && r.top_k == 40 && r.n == 1 &&
          !r.has_max_tokens && !r.stream);
    srv_request_free(&r);
    /* content parts joined; tool arguments as an object */
    CHECK(parse(SRV_CHAT,
                "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"a\"},"
                "{\"type\":\"text\",\"text\":\"b\"}]},{\"role\":\"assistant\",\"content\":null,"
                "\"tool_calls\":[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"arguments\":"
                "\"{\\\"x\\\":1}\"}}]}],\"tools\":[{\"type\":\"function\"}]}",
                &r, &e));
    CHECK(strstr(r.messages_json, "\"content\":\"ab\"") != NULL);
    CHECK(strstr(r.messages_json, "\"arguments\":{\"x\":1}") != NULL);
    CHECK(r.has_tools && r.tools_json);
    srv_request_free(&r);
    CHECK(parse(SRV_CHAT, "{" MSG ",\"tools\":[{}],\"tool_choice\":\"none\"}", &r, &e));
    CHECK(!r.has_tools);
    srv_request_free(&r);

    CHECK(!strcmp(refused(SRV_CHAT, "{" MSG ",\"temperature\":NaN}"), "temperature"));
    CHECK(!strcmp(refused(SRV_CHAT, "{" MSG ",\"top_p\":Infinity}"), "top_p"));
    CHECK(!strcmp(refused(SRV_CHAT, "{" MSG ",\"temperature\":-0.1}"), "temperature"));
    CHECK(!strcmp(refused(SRV_CHAT, "{" MSG ",\"task\":5}"), "task"));
    CHECK(!strcmp(refused(SRV_CHAT, "{" MSG ",\"skill\":5}"), "skill"));
    CHECK(!strcmp(refused(SRV_COMPLETION, "{\"prompt\":\"x\",\"skill\":\"\"}"), "skill"));
    CHECK(parse(SRV_COMPLETION, "{\"prompt\":\"x\",\"skill\":\"code\"}", &r, &e));
    CHECK(r.skill && !strcmp(r.skill, "code"));
    srv_request_free(&r);
    CHECK(parse(SRV_EMBEDDING, "{\"input\":\"x\",\"skill\":null}", &r, &e));
    CHECK(!r.skill); /* null: the server's --skill */
    srv_request_free(&r);
    CHECK(!strcmp(
        refused(
            SRV_CHAT,
            "{" MSG
            ",\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"schema\":{\"not\":{}}}}}"),
        "response_format"));
    CHECK(!strcmp(
        refused(
            SRV_COMPLETION,
            "{\"prompt\":\"x\",\"response_format\":{\"type\":\"json_object\"},\"task\":\"half\"}"),
        ""));
    CHECK(!strcmp(refused(SRV_CHAT, "{" MSG ",\"top_p\":0}"), "top_p"));
    CHECK(!strcmp(refused(SRV_CHAT, "{" MSG ",\"max_tokens\":0}"), "max_tokens"));
    CHECK(!strcmp(refused(SRV_CHAT, "{" MSG ",\"max_tokens\":1e30}"), "max_tokens"));
    CHECK(!strcmp(refused(SRV_CHAT, "{" MSG ",\"n\":0}"), "n"));
    CHECK(!strcmp(refused(SRV_CHAT, "{" MSG ",\"frequency_penalty\":3}"), "frequency_penalty"));
    CHECK(!strcmp(refused(SRV_CHAT, "{" MSG ",\"top_logprobs\":21}"), "top_logprobs"));
    CHECK(!strcmp(refused(SRV_CHAT, "{" MSG ",\"logit_bias\":{\"x\":1}}"), "logit_bias"));
    CHECK(!strcmp(refused(SRV_CHAT, "{" MSG ",\"logit_bias\":{\"1\":101}}"), "logit_bias"));
    CHECK(!strcmp(refused(SRV_CHAT, "{" MSG ",\"stop\":[\"\"]}"), "stop"));
    CHECK(!strcmp(refused(SRV_CHAT, "{" MSG ",\"stream\":1}"), "stream"));
    CHECK(!strcmp(refused(SRV_CHAT, "{\"messages\":[]}"), "messages"));
    CHECK(!strcmp(refused(SRV_CHAT, "{\"messages\":[{\"content\":\"x\"}]}"), "messages"));
    CHECK(!parse(SRV_CHAT, "[1]", &r, &e) && e.http == 400);
    CHECK(!strcmp(refused(SRV_CHAT, "{" MSG ",\"chat_template_kwargs\":[]}"),
                  "chat_template_kwargs"));
}

static void test_completion_embedding(void) {
    srv_request r;
    srv_error e;
    CHECK(parse(SRV_COMPLETION, "{\"prompt\":[\"once\"],\"logprobs\":2}", &r, &e));
    CHECK(!strcmp(r.prompt, "once") && r.logprobs && r.top_logprobs == 2);
    srv_request_free(&r);
    CHECK(!strcmp(refused(SRV_COMPLETION, "{\"prompt\":[\"a\",\"b\"]}"), "prompt"));
    CHECK(!strcmp(refused(SRV_COMPLETION, "{\"prompt\":\"a\",\"logprobs\":6}"), "logprobs"));
    CHECK(parse(SRV_EMBEDDING, "{\"input\":[\"a\",\"b\"]}", &r, &e) && r.n_inputs == 2);
    srv_request_free(&r);
    CHECK(!strcmp(refused(SRV_EMBEDDING, "{\"input\":[]}"), "input"));
    CHECK(!strcmp(refused(SRV_EMBEDDING, "{\"input\":[\"\"]}"), "input"));
}

/* The first call's name and arguments (as JSON text), or NULL when none parsed. */
static json_t *calls_of(const char *text, size_t *ce) {
    return srv_parse_tool_calls(text, strlen(text), ce, 1);
}

static void test_tools(void) {
    size_t ce;
    json_t *c = calls_of("Let me look.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "
                         "{\"city\": \"Paris\"}}\n</tool_call>\n<tool_call>{\"name\":\"b\","
                         "\"arguments\":{}}</tool_call>",
                         &ce);
    CHECK(c && json_array_size(c) == 2);
    json_t *f = json_object_get(json_array_get(c, 0), "function");
    CHECK(!strcmp(json_string_value(json_object_get(f, "name")), "get_weather"));
    CHECK(!strcmp(json_string_value(json_object_get(f, "arguments")), "{\"city\":\"Paris\"}"));
    CHECK(ce == strlen("Let me look."));
    CHECK(strcmp(json_string_value(json_object_get(json_array_get(c, 0), "id")),
                 json_string_value(json_object_get(json_array_get(c, 1), "id"))));
    json_decref(c);
    c = calls_of("[TOOL_CALLS] [{\"name\": \"f\", \"arguments\": {\"a\": 1}}]", &ce);
    CHECK(c && json_array_size(c) == 1 && ce == 0);
    json_decref(c);
    c = calls_of("<|python_tag|>{\"name\": \"search\", \"parameters\": {\"q\": \"x\"}}", &ce);
    CHECK(c && json_array_size(c) == 1);
    f = json_object_get(json_array_get(c, 0), "function");
    CHECK(c && !strcmp(json_string_value(json_object_get(f, "arguments")), "{\"q\":\"x\"}"));
    json_decref(c);
    CHECK(calls_of("Just an answer {not json}.", &ce) == NULL);
    CHECK(calls_of("<tool_call>{broken</tool_call>", &ce) == NULL);
    CHECK(calls_of("{\"a\": 1}", &ce) == NULL); /* JSON without a name is content */
}

int main(void) {
    test_chat();
    test_completion_embedding();
    test_tools();
    TEST_DONE();
}
