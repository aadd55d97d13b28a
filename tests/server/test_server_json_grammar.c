/* The response_format grammar without a model: schemas compiled or refused (the refused keyword
 * named), texts accepted or refused byte by byte, and random walks through the automaton (each
 * step a random piece the automaton accepts, as constrained decoding picks tokens) whose
 * finished texts must parse and validate against their schema (a validator for the subset,
 * written here over jansson). */
#include <jansson.h>
#include <stdint.h>
#include <string.h>

#include "server/json_grammar.h"
#include "test.h"

static jg_grammar *compile(const char *schema, char *why) {
    return jg_compile_schema(schema, strlen(schema), why, 256);
}

/* Is text a whole value for the grammar? */
static bool whole(const jg_grammar *g, const char *text) {
    jg_state s;
    jg_init(&s, g);
    return jg_feed(&s, g, text, strlen(text)) && jg_can_end(&s, g);
}

static bool valid(const json_t *sc, const json_t *v);

static bool type_ok(const char *t, const json_t *v) {
    if (!strcmp(t, "object")) return json_is_object(v);
    if (!strcmp(t, "array")) return json_is_array(v);
    if (!strcmp(t, "string")) return json_is_string(v);
    if (!strcmp(t, "number")) return json_is_number(v);
    if (!strcmp(t, "integer")) return json_is_integer(v);
    if (!strcmp(t, "boolean")) return json_is_boolean(v);
    if (!strcmp(t, "null")) return json_is_null(v);
    return false;
}

static bool valid(const json_t *sc, const json_t *v) {
    if (json_is_true(sc)) return true;
    const json_t *t = json_object_get(sc, "type");
    if (json_is_string(t) && !type_ok(json_string_value(t), v)) return false;
    if (json_is_array(t)) {
        bool any = false;
        for (size_t i = 0; i < json_array_size(t); i++)
            any |= type_ok(json_string_value(json_array_get(t, i)), v);
        if (!any) return false;
    }
    const json_t *en = json_object_get(sc, "enum"), *cn = json_object_get(sc, "const");
    if (cn && !json_equal(cn, v)) return false;
    if (en) {
        bool any = false;
        for (size_t i = 0; i < json_array_size(en); i++)
            any |= json_equal(json_array_get(en, i), v);
        if (!any) return false;
    }
    const json_t *props = json_object_get(sc, "properties");
    if (json_is_object(v)) {
        const json_t *req = json_object_get(sc, "required");
        for (size_t i = 0; i < json_array_size(req); i++)
            if (!json_object_get(v, json_string_value(json_array_get(req, i)))) return false;
        const char *k;
        json_t *x;
        json_object_foreach((json_t *)v, k, x) {
            const json_t *ps = json_object_get(props, k);
            if (!ps && json_is_false(json_object_get(sc, "additionalProperties"))) return false;
            if (ps && !valid(ps, x)) return false;
        }
    }
    const json_t *items = json_object_get(sc, "items");
    if (json_is_array(v) && items)
        for (size_t i = 0; i < json_array_size(v); i++)
            if (!valid(items, json_array_get(v, i))) return false;
    return true;
}

static void test_refused(void) {
    char why[256];
    const char *bad[][2] = {
        {"{\"type\":\"string\",\"pattern\":\"a+\"}", "'pattern'"},
        {"{\"type\":\"object\",\"properties\":{\"a\":{\"minimum\":3}}}", "'minimum'"},
        {"{\"anyOf\":[{\"type\":\"string\"}]}", "'anyOf'"},
        {"{\"$ref\":\"#/x\"}", "'$ref'"},
        {"{\"type\":\"tuple\"}", "'tuple'"},
        {"{\"enum\":[]}", "'enum'"},
        {"{\"type\":\"object\",\"properties\":{\"a\":true},\"required\":[\"b\"]}", "'b'"},
        {"{\"type\":\"string\",\"enum\":[1]}", "'string'"},
        {"[1", "not JSON"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        why[0] = 0;
        jg_grammar *g = compile(bad[i][0], why);
        CHECK_MSG(!g && strstr(why, bad[i][1]), "%s: %s", bad[i][0], why);
        jg_free(g);
    }
}

static void test_texts(void) {
    char why[256];
    jg_grammar *g =
        compile("{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\"},"
                "\"age\":{\"type\":\"integer\"},\"tags\":{\"type\":\"array\",\"items\":"
                "{\"enum\":[\"a\",\"bc\",1,12]}},\"ok\":{\"type\":[\"boolean\",\"null\"]}},"
                "\"required\":[\"name\",\"age\"],\"additionalProperties\":false}",
                why);
    CHECK_MSG(g, "%s", why);
    if (!g) return;
    CHECK(whole(g, "{\"name\":\"x\",\"age\":3}"));
    CHECK(whole(g, "{\"age\":-30,\"name\":\"\\\"\\u00\",\"ok\":null}") == false); /* \u refused */
    CHECK(whole(g, "{\"age\":-30,\"name\":\"\\n\\\"\xc3\xa9\",\"ok\":null}"));
    CHECK(whole(g, "{\"name\":\"x\",\"age\":3,\"tags\":[\"a\",12,1,\"bc\"],\"ok\":true}"));
    CHECK(!whole(g, "{\"name\":\"x\"}"));                          /* age required */
    CHECK(!whole(g, "{\"name\":\"x\",\"age\":3.5}"));              /* integer */
    CHECK(!whole(g, "{\"name\":\"x\",\"age\":03}"));               /* leading zero */
    CHECK(!whole(g, "{\"name\":\"x\",\"name\":\"y\",\"age\":1}")); /* repeated key */
    CHECK(!whole(g, "{\"name\":\"x\",\"age\":1,\"zz\":1}"));       /* not a property */
    CHECK(!whole(g, "{\"name\":\"x\",\"age\":1,\"tags\":[\"b\"]}"));
    CHECK(!whole(g, "{\"name\":\"x\",\"age\":1} "));   /* nothing after the value */
    CHECK(!whole(g, "{ \"name\":\"x\",\"age\":1}"));   /* compact only */
    CHECK(!whole(g, "{\"name\":\"a\nb\",\"age\":1}")); /* raw control character */
    jg_state s;
    jg_init(&s, g);
    CHECK(jg_accepts(&s, g, "{\"na", 4) && !jg_accepts(&s, g, "{\"x", 3));
    CHECK(jg_feed(&s, g, "{\"name\":\"x\",\"age\":1}", 20) && jg_done(&s));
    jg_free(g);

    g = jg_any_object();
    CHECK(whole(g, "{}") && whole(g, "{\"a\":[1,-2.5e+3,{\"b\":null}],\"c\":\"\",\"d\":false}"));
    CHECK(!whole(g, "[]") && !whole(g, "{\"a\":tru}") && !whole(g, "{\"a\":1.}"));
    /* UTF-8 in strings: the edges of each lead byte's second-byte range */
    CHECK(whole(g, "{\"a\":\"\xe0\xa0\x80 \xed\x9f\xbf \xf0\x90\x80\x80 \xf4\x8f\xbf\xbf\"}"));
    CHECK(!whole(g, "{\"a\":\"\xe0\x91\xa9\"}"));     /* overlong */
    CHECK(!whole(g, "{\"a\":\"\xed\xa0\x80\"}"));     /* surrogate */
    CHECK(!whole(g, "{\"a\":\"\xf0\x8f\xbf\xbf\"}")); /* overlong */
    CHECK(!whole(g, "{\"a\":\"\xf4\x90\x80\x80\"}")); /* past U+10FFFF */
    CHECK(!whole(g, "{\"a\":\"\xc0\x80\"}") && !whole(g, "{\"a\":\"\xe1\x80\"}"));
    jg_free(g);

    g = compile("{\"type\":\"number\"}", why); /* a top-level number may end anywhere it is whole */
    jg_init(&s, g);
    CHECK(jg_feed(&s, g, "-12.5", 5) && jg_can_end(&s, g) && !jg_done(&s));
    CHECK(jg_feed(&s, g, "e", 1) && !jg_can_end(&s, g));
    jg_free(g);
}

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint32_t next_rand(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng >> 11);
}

/* Random walks: pieces like a vocabulary's (bytes, words, keys, literals), each step one the
 * automaton accepts, drawn at random; every finished text parses and validates. */
static void walk(const char *schema) {
    static const char *const pieces[] = {"{",
                                         "}",
                                         "[",
                                         "]",
                                         ",",
                                         ":",
                                         "\"",
                                         "\"}",
                                         "\",",
                                         "\":",
                                         "a",
                                         "bc",
                                         " ",
                                         "x y",
                                         "\\n",
                                         "\\",
                                         "n",
                                         "\xc3\xa9",
                                         "\xe2\x82\xac",
                                         "0",
                                         "1",
                                         "12",
                                         "-",
                                         ".",
                                         "5",
                                         "e",
                                         "+",
                                         "true",
                                         "false",
                                         "null",
                                         "tr",
                                         "ue",
                                         "\"name",
                                         "\"age\":",
                                         "\"tags\":[",
                                         "\"ok\"",
                                         "\"kind\":\"",
                                         "red",
                                         "\"red\"",
                                         "\"blue\"",
                                         "\"inner\":{",
                                         "\"v\":",
                                         "1}",
                                         "]}",
                                         "\"}}"};
    const size_t nfixed = sizeof pieces / sizeof *pieces;
    const size_t np = nfixed + 95; /* and every printable ASCII byte, so a walk never sticks */
    static char bytes[95][2];
    for (int b = 0; b < 95; b++)
        bytes[b][0] = (char)(' ' + b);
    char why[256];
    jg_grammar *g = compile(schema, why);
    CHECK_MSG(g, "%s: %s", schema, why);
    if (!g) return;
    json_t *sc = json_loads(schema, 0, NULL);
    int finished = 0;
    for (int run = 0; run < 200; run++) {
        jg_state s;
        jg_init(&s, g);
        char text[4096];
        size_t len = 0;
        for (int step = 0; step < 400 && !jg_done(&s); step++) {
            const char *ok[256];
            size_t n = 0;
            for (size_t i = 0; i < np; i++) {
                const char *p = i < nfixed ? pieces[i] : bytes[i - nfixed];
                if (jg_accepts(&s, g, p, strlen(p))) ok[n++] = p;
            }
            if (!n) break;
            /* lean towards closing pieces as the text grows, so most walks finish */
            const char *pick = ok[next_rand() % n];
            if (len > 200) /* close: a string first, then arrays and objects */
                for (int want = 0; want < 3; want++)
                    for (size_t i = 0; i < n; i++)
                        if (!strcmp(ok[i], (const char *[]){"}", "]", "\""}[want])) pick = ok[i];
            size_t pl = strlen(pick);
            if (len + pl >= sizeof text) break;
            CHECK(jg_feed(&s, g, pick, pl));
            memcpy(text + len, pick, pl);
            len += pl;
        }
        text[len] = 0;
        if (!jg_can_end(&s, g)) {
            if (getenv("JG_DEBUG")) fprintf(stderr, "unfinished: %s\n", text);
            continue;
        }
        finished++;
        json_error_t je;
        json_t *v = json_loadb(text, len, JSON_DECODE_ANY, &je);
        CHECK_MSG(v, "%s: does not parse (%s)", text, je.text);
        CHECK_MSG(!v || valid(sc, v), "%s: does not validate against %s", text, schema);
        json_decref(v);
    }
    CHECK_MSG(finished >= 100, "%s: only %d of 200 walks finished", schema, finished);
    json_decref(sc);
    jg_free(g);
}

int main(void) {
    test_refused();
    test_texts();
    walk("{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\"},\"age\":{\"type\":"
         "\"integer\"}},\"required\":[\"name\",\"age\"],\"additionalProperties\":false}");
    walk(
        "{\"type\":\"object\",\"properties\":{\"kind\":{\"type\":\"string\",\"enum\":[\"red\","
        "\"blue\"]},\"tags\":{\"type\":\"array\",\"items\":{\"type\":\"string\"}},\"ok\":{\"type\""
        ":[\"boolean\",\"null\"]},\"inner\":{\"type\":\"object\",\"properties\":{\"v\":{\"type\":"
        "\"number\"}},\"required\":[\"v\"],\"additionalProperties\":false}},\"required\":[\"kind\","
        "\"ok\"],\"additionalProperties\":false}");
    walk("{\"type\":\"array\",\"items\":{\"enum\":[1,12,\"red\",true,null]}}");
    walk("{\"type\":\"object\"}");
    walk("{\"const\":{\"a\":[1,2]}}");
    printf("%d checks, %d failures\n", t_checks, t_failures);
    return t_failures;
}
