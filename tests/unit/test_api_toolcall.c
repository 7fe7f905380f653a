/* test_api_toolcall — the tool-call parsers (src/api/api_toolcall*.c):
 * for every format, fixtures in the model's exact output format (one
 * call, two calls, text before, malformed bodies) parsed whole against
 * the expected normal text and calls, then streamed in every split (one
 * chunk, byte by byte, every 2-way split, every 3-way split of short
 * fixtures, random multi-byte chunks): the streamed pieces must give the
 * same normal text and calls, byte for byte, each call's name piece
 * before its arguments, call indices 0, 1, ... in order.  Plus the
 * tool_choice schema and the name check against the tools. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "api/api_toolcall.h"

#define DS_CALLS_BEGIN "<\xef\xbd\x9ctool\xe2\x96\x81" "calls\xe2\x96\x81" "begin\xef\xbd\x9c>"
#define DS_CALLS_END "<\xef\xbd\x9ctool\xe2\x96\x81" "calls\xe2\x96\x81" "end\xef\xbd\x9c>"
#define DS_CALL_BEGIN "<\xef\xbd\x9ctool\xe2\x96\x81" "call\xe2\x96\x81" "begin\xef\xbd\x9c>"
#define DS_CALL_END "<\xef\xbd\x9ctool\xe2\x96\x81" "call\xe2\x96\x81" "end\xef\xbd\x9c>"
#define DS_SEP "<\xef\xbd\x9ctool\xe2\x96\x81" "sep\xef\xbd\x9c>"

typedef struct fixture {
    const char *parser;
    const char *text;
    const char *normal;          /* expected normal text */
    const char *calls;           /* expected calls: JSON [[name, arguments-as-JSON], ...] */
} fixture;

static const char *TOOLS =
    "[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"parameters\":{\"type\":\"object\","
    "\"properties\":{\"city\":{\"type\":\"string\"},\"days\":{\"type\":\"integer\"},\"metric\":{\"type\":\"boolean\"}}}}},"
    "{\"type\":\"function\",\"function\":{\"name\":\"get_time\",\"parameters\":{\"type\":\"object\","
    "\"properties\":{\"tz\":{\"type\":\"string\"}}}}}]";

static const fixture fixtures[] = {
    /* hermes / qwen / qwen25 */
    {"qwen", "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>", "",
     "[[\"get_weather\", {\"city\": \"Paris\"}]]"},
    {"qwen25", "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 3}}\n</tool_call>\n"
               "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"tz\": \"CET\"}}\n</tool_call>",
     "Let me check.", "[[\"get_weather\", {\"city\": \"Paris\", \"days\": 3}], [\"get_time\", {\"tz\": \"CET\"}]]"},
    {"hermes", "<tool_call>{\"arguments\": {\"tz\": \"UTC\"}, \"name\": \"get_time\"}</tool_call>", "",
     "[[\"get_time\", {\"tz\": \"UTC\"}]]"},
    {"hermes", "no call here, just <b>text</b> and a < sign", "no call here, just <b>text</b> and a < sign", "[]"},
    {"hermes", "<tool_call>\nnot json at all\n</tool_call>", "<tool_call>\nnot json at all\n</tool_call>", "[]"},
    {"hermes", "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Par", "",
     "[[\"get_weather\", null]]"}, /* truncated: the arguments sent so far (not JSON) */
    {"qwen", "<tool_call>\n{\"name\": \"unknown_tool\", \"arguments\": {}}\n</tool_call>\nok", "ok", "[]"},
    {"qwen", "<tool_call>\n{\"name\": \"get_time\", \"arguments\": \"{\\\"tz\\\": \\\"PST\\\"}\"}\n</tool_call>", "",
     "[[\"get_time\", {\"tz\": \"PST\"}]]"},
    {"qwen", "<tool_call>\n{\"name\": \"get_time\"}\n</tool_call>", "", "[[\"get_time\", {}]]"},
    {"qwen", "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Lyon\"} oops\n</tool_call>",
     "oops\n</tool_call>", "[[\"get_weather\", {\"city\": \"Lyon\"}]]"},
    /* llama3 */
    {"llama3", "<|python_tag|>{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\"}}", "",
     "[[\"get_weather\", {\"city\": \"Oslo\"}]]"},
    {"llama3", "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\"}}; {\"name\": \"get_time\", \"parameters\": {\"tz\": \"CET\"}}",
     "", "[[\"get_weather\", {\"city\": \"Oslo\"}], [\"get_time\", {\"tz\": \"CET\"}]]"},
    {"llama3", "Sure! <|python_tag|>{\"name\": \"get_time\", \"arguments\": {}}", "Sure!", "[[\"get_time\", {}]]"},
    {"llama3", "{not a call}", "{not a call}", "[]"},
    {"llama3", "The set {1, 2} is small.", "The set {1, 2} is small.", "[]"},
    /* mistral */
    {"mistral", "[TOOL_CALLS] [{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome\"}}]", "",
     "[[\"get_weather\", {\"city\": \"Rome\"}]]"},
    {"mistral", "Checking. [TOOL_CALLS] [{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome\"}}, {\"name\": \"get_time\", \"arguments\": {\"tz\": \"CET\"}}]",
     "Checking.", "[[\"get_weather\", {\"city\": \"Rome\"}], [\"get_time\", {\"tz\": \"CET\"}]]"},
    {"mistral", "[TOOL_CALLS]get_time[ARGS]{\"tz\": \"EST\"}", "", "[[\"get_time\", {\"tz\": \"EST\"}]]"},
    {"mistral", "[TOOL_CALLS] [oops]", "[TOOL_CALLS] [oops]", "[]"},
    /* json_array (tool_choice required / named) */
    {"json_array", "[{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Bern\", \"metric\": true}}]", "",
     "[[\"get_weather\", {\"city\": \"Bern\", \"metric\": true}]]"},
    {"json_array", " [{\"name\":\"get_time\",\"parameters\":{\"tz\":\"a\"}},{\"name\":\"get_weather\",\"parameters\":{}}]", "",
     "[[\"get_time\", {\"tz\": \"a\"}], [\"get_weather\", {}]]"},
    {"json_array", "plain [text]", "plain [text]", "[]"},
    /* deepseekv3 */
    {"deepseekv3", DS_CALLS_BEGIN DS_CALL_BEGIN "function" DS_SEP "get_weather\n```json\n{\"city\": \"Tokyo\"}\n```" DS_CALL_END DS_CALLS_END,
     "", "[[\"get_weather\", {\"city\": \"Tokyo\"}]]"},
    {"deepseekv3", "Two calls:" DS_CALLS_BEGIN DS_CALL_BEGIN "function" DS_SEP "get_weather\n```json\n{\"city\": \"Tokyo\"}\n```" DS_CALL_END
                   "\n" DS_CALL_BEGIN "function" DS_SEP "get_time\n```json\n{\"tz\": \"JST\"}\n```" DS_CALL_END DS_CALLS_END,
     "Two calls:", "[[\"get_weather\", {\"city\": \"Tokyo\"}], [\"get_time\", {\"tz\": \"JST\"}]]"},
    /* deepseekv31 */
    {"deepseekv31", DS_CALLS_BEGIN DS_CALL_BEGIN "get_weather" DS_SEP "{\"city\": \"Seoul\"}" DS_CALL_END DS_CALL_BEGIN "get_time" DS_SEP "{\"tz\": \"KST\"}" DS_CALL_END DS_CALLS_END,
     "", "[[\"get_weather\", {\"city\": \"Seoul\"}], [\"get_time\", {\"tz\": \"KST\"}]]"},
    {"deepseekv31", "Answer first. " DS_CALLS_BEGIN DS_CALL_BEGIN "get_time" DS_SEP "{}" DS_CALL_END DS_CALLS_END, "Answer first.",
     "[[\"get_time\", {}]]"},
    {"deepseekv31", "x " DS_CALL_BEGIN "get_time" DS_SEP "{\"tz\": \"UTC\"}" DS_CALL_END, "x",
     "[[\"get_time\", {\"tz\": \"UTC\"}]]"}, /* a call without the section opener */
    {"deepseekv31", DS_CALL_BEGIN "get_time" DS_SEP "{\"a\": -1.5e3, \"b\": \"\\u00e9\\n\", \"c\": [true, null, {}, 0]}" DS_CALL_END,
     "", "[[\"get_time\", {\"a\": -1500.0, \"b\": \"\u00e9\\n\", \"c\": [true, null, {}, 0]}]]"},
    {"qwen", "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"tz\": tru}}\n</tool_call>after", "after",
     "[[\"get_time\", null]]"}, /* invalid arguments: the call keeps the bytes before the bad one, the body is dropped */
    /* kimi_k2 */
    {"kimi_k2", "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>{\"city\": \"Beijing\"}<|tool_call_end|>"
                "<|tool_call_begin|>functions.get_time:1 <|tool_call_argument_begin|>{\"tz\": \"CST\"}<|tool_call_end|><|tool_calls_section_end|>",
     "", "[[\"get_weather\", {\"city\": \"Beijing\"}], [\"get_time\", {\"tz\": \"CST\"}]]"},
    {"kimi_k2", "I will look.<|tool_calls_section_begin|><|tool_call_begin|>functions.get_time:0<|tool_call_argument_begin|>{}<|tool_call_end|><|tool_calls_section_end|>",
     "I will look.", "[[\"get_time\", {}]]"},
    /* gpt-oss */
    {"gpt-oss", "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\": \"SF\"}<|call|>", "",
     "[[\"get_weather\", {\"city\": \"SF\"}]]"},
    {"gpt-oss", "<|start|>assistant<|channel|>final<|message|>It is sunny.<|return|>", "It is sunny.", "[]"},
    {"gpt-oss", "<|channel|>analysis<|message|>The user wants the time.<|end|><|start|>assistant<|channel|>commentary to=functions.get_time"
                " <|constrain|>json<|message|>{\"tz\": \"UTC\"}<|call|>",
     "", "[[\"get_time\", {\"tz\": \"UTC\"}]]"}, /* no reasoning parser: the analysis channel is dropped */
    {"gpt-oss", "<|channel|>commentary to=functions.get_time<|constrain|>json<|message|>{\"tz\":\"PT\"}<|call|>"
                "<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\":\"LA\"}<|call|>",
     "", "[[\"get_time\", {\"tz\": \"PT\"}], [\"get_weather\", {\"city\": \"LA\"}]]"},
    /* qwen3_coder */
    {"qwen3_coder", "<tool_call>\n<function=get_weather>\n<parameter=city>\nSan Francisco\n</parameter>\n<parameter=days>\n5\n</parameter>\n</function>\n</tool_call>",
     "", "[[\"get_weather\", {\"city\": \"San Francisco\", \"days\": 5}]]"},
    {"qwen3_coder", "Let me call two.\n<tool_call>\n<function=get_time>\n<parameter=tz>\n007\n</parameter>\n</function>\n</tool_call>\n"
                    "<tool_call>\n<function=get_weather>\n<parameter=metric>\ntrue\n</parameter>\n</function>\n</tool_call>",
     "Let me call two.", "[[\"get_time\", {\"tz\": \"007\"}], [\"get_weather\", {\"metric\": true}]]"},
    {"qwen3_coder", "<tool_call>\n<function=get_time>\n</function>\n</tool_call>", "", "[[\"get_time\", {}]]"},
    {"qwen3_coder", "<tool_call>\n<function=get_weather>\n<parameter=city>\nNULL\n</parameter>\n<parameter=note>\n{\"a\": 1}\n</parameter>\n</function>\n</tool_call>",
     "", "[[\"get_weather\", {\"city\": null, \"note\": \"{\\\"a\\\": 1}\"}]]"},
    {"qwen3_coder", "<tool_call>\nhello\n</tool_call>", "<tool_call>\nhello\n</tool_call>", "[]"},
    /* glm45 */
    {"glm45", "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>\xe5\x8c\x97\xe4\xba\xac</arg_value>\n<arg_key>days</arg_key>\n<arg_value>2</arg_value>\n</tool_call>",
     "", "[[\"get_weather\", {\"city\": \"\xe5\x8c\x97\xe4\xba\xac\", \"days\": 2}]]"},
    {"glm45", "Sure.\n<tool_call>get_time\n<arg_key>tz</arg_key>\n<arg_value>UTC</arg_value>\n</tool_call>\n<tool_call>get_weather\n</tool_call>",
     "Sure.", "[[\"get_time\", {\"tz\": \"UTC\"}], [\"get_weather\", {}]]"},
    /* pythonic */
    {"pythonic", "[get_weather(city='Madrid', days=2, metric=True)]", "",
     "[[\"get_weather\", {\"city\": \"Madrid\", \"days\": 2, \"metric\": true}]]"},
    {"pythonic", "<|python_start|>[get_weather(city=\"A\\\"B\"), get_time(tz=None)]<|python_end|>", "",
     "[[\"get_weather\", {\"city\": \"A\\\"B\"}], [\"get_time\", {\"tz\": null}]]"},
    {"pythonic", "See [1] and [get_time()]", "See [1] and", "[[\"get_time\", {}]]"},
    {"pythonic", "[get_weather(city=['a', 'b'], days={'x': (1, 2)})]", "",
     "[[\"get_weather\", {\"city\": [\"a\", \"b\"], \"days\": {\"x\": [1, 2]}}]]"},
};

/* Feed text in chunks cut at the given offsets (cuts ascending, < n). */
static void run_split(const api_toolcall_format *f, json_t *tools, const char *text, const size_t *cuts, int n_cuts,
                      char **normal, json_t **calls)
{
    api_output_parser *p = api_toolcall_parser_new(f, tools);
    assert_non_null(p);
    api_pieces ps = {0};
    size_t n = strlen(text), at = 0;
    for (int i = 0; i <= n_cuts; i++) {
        size_t to = i < n_cuts ? cuts[i] : n;
        assert_int_equal(p->feed(p, text + at, to - at, false, &ps), 0);
        at = to;
    }
    assert_int_equal(p->feed(p, "", 0, true, &ps), 0);
    /* order: a call's name before its arguments; indices 0, 1, ... */
    int next = 0;
    for (int i = 0; i < ps.n; i++) {
        if (ps.v[i].kind == API_PIECE_TOOL_NAME) assert_int_equal(ps.v[i].index, next++);
        if (ps.v[i].kind == API_PIECE_TOOL_CALL) assert_true(ps.v[i].index < next);
    }
    assert_int_equal(api_toolcall_collect(&ps, normal, calls), 0);
    api_pieces_free(&ps);
    p->destroy(p);
}

static void same(const char *what, const char *text, const char *n0, json_t *c0, const char *n1, json_t *c1)
{
    if (strcmp(n0, n1) || !json_equal(c0, c1)) {
        char *a = json_dumps(c0, 0), *b = json_dumps(c1, 0);
        fail_msg("%s: %s\nwhole: [%s] %s\nsplit: [%s] %s", what, text, n0, a, n1, b);
    }
}

static void test_fixtures(void **st)
{
    (void)st;
    json_t *tools = json_loads(TOOLS, 0, NULL);
    assert_non_null(tools);
    srand(42);
    for (size_t fi = 0; fi < sizeof fixtures / sizeof fixtures[0]; fi++) {
        const fixture *fx = &fixtures[fi];
        const api_toolcall_format *f = api_toolcall_find(fx->parser);
        assert_non_null(f);
        char *normal;
        json_t *calls;
        assert_int_equal(api_toolcall_parse(f, tools, fx->text, strlen(fx->text), &normal, &calls), 0);
        /* against the expectation */
        json_t *want = json_loads(fx->calls, 0, NULL);
        assert_non_null(want);
        if (strcmp(normal, fx->normal)) fail_msg("%s normal: got [%s] want [%s]", fx->text, normal, fx->normal);
        if (json_array_size(calls) != json_array_size(want))
            fail_msg("%s: %zu calls, want %zu", fx->text, json_array_size(calls), json_array_size(want));
        for (size_t k = 0; k < json_array_size(want); k++) {
            json_t *c = json_array_get(calls, k), *w = json_array_get(want, k);
            assert_string_equal(json_string_value(json_object_get(c, "name")), json_string_value(json_array_get(w, 0)));
            assert_int_equal(json_integer_value(json_object_get(c, "tool_index")), (json_int_t)k);
            const char *args = json_string_value(json_object_get(c, "parameters"));
            json_t *wa = json_array_get(w, 1);
            json_t *ga = json_loads(args, JSON_DECODE_ANY, NULL);
            if (json_is_null(wa)) { /* truncated: not valid JSON */
                assert_null(ga);
            } else if (!ga || !json_equal(ga, wa)) {
                fail_msg("%s: arguments %s", fx->text, args);
            }
            json_decref(ga);
        }
        json_decref(want);
        /* every split gives the whole result */
        size_t n = strlen(fx->text);
        char *n1;
        json_t *c1;
        run_split(f, tools, fx->text, NULL, 0, &n1, &c1);
        same("one chunk", fx->text, normal, calls, n1, c1);
        free(n1), json_decref(c1);
        size_t *cuts = malloc(sizeof *cuts * (n + 1));
        for (size_t i = 1; i < n; i++) cuts[i - 1] = i;
        run_split(f, tools, fx->text, cuts, n > 1 ? (int)n - 1 : 0, &n1, &c1);
        same("byte by byte", fx->text, normal, calls, n1, c1);
        free(n1), json_decref(c1);
        for (size_t a = 1; a < n; a++) {
            size_t c[2] = {a, 0};
            run_split(f, tools, fx->text, c, 1, &n1, &c1);
            same("2-way", fx->text, normal, calls, n1, c1);
            free(n1), json_decref(c1);
            if (n <= 120)
                for (size_t b = a + 1; b < n; b++) {
                    c[1] = b;
                    run_split(f, tools, fx->text, c, 2, &n1, &c1);
                    same("3-way", fx->text, normal, calls, n1, c1);
                    free(n1), json_decref(c1);
                }
        }
        for (int rep = 0; rep < 50; rep++) { /* multi-token chunks, often holding two calls */
            int nc = 0;
            for (size_t at = 0;;) {
                at += 1 + (size_t)(rand() % 40);
                if (at >= n) break;
                cuts[nc++] = at;
            }
            run_split(f, tools, fx->text, cuts, nc, &n1, &c1);
            same("random chunks", fx->text, normal, calls, n1, c1);
            free(n1), json_decref(c1);
        }
        free(cuts);
        free(normal);
        json_decref(calls);
    }
    json_decref(tools);
}

/* Without tools every name is accepted; with tools an unknown one is dropped. */
static void test_name_check(void **st)
{
    (void)st;
    const char *t = "<tool_call>\n{\"name\": \"other\", \"arguments\": {\"x\": 1}}\n</tool_call>";
    char *normal;
    json_t *calls;
    assert_int_equal(api_toolcall_parse(api_toolcall_find("hermes"), NULL, t, strlen(t), &normal, &calls), 0);
    assert_int_equal(json_array_size(calls), 1);
    assert_string_equal(json_string_value(json_object_get(json_array_get(calls, 0), "name")), "other");
    free(normal), json_decref(calls);
    json_t *tools = json_loads(TOOLS, 0, NULL);
    assert_int_equal(api_toolcall_parse(api_toolcall_find("hermes"), tools, t, strlen(t), &normal, &calls), 0);
    assert_int_equal(json_array_size(calls), 0);
    assert_string_equal(normal, "");
    free(normal), json_decref(calls), json_decref(tools);
}

static void test_names(void **st)
{
    (void)st;
    static const char *names[] = {"llama3", "pythonic", "qwen", "qwen25", "qwen3_coder", "mistral", "hermes",
                                  "deepseekv3", "deepseekv31", "gpt-oss", "kimi_k2", "glm45"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) assert_non_null(api_toolcall_find(names[i]));
    assert_null(api_toolcall_find("nope"));
}

static void test_schema(void **st)
{
    (void)st;
    json_t *tools = json_loads(TOOLS, 0, NULL);
    json_t *s = api_toolcall_schema(tools, NULL, true);
    assert_non_null(s);
    assert_string_equal(json_string_value(json_object_get(s, "type")), "array");
    assert_int_equal(json_integer_value(json_object_get(s, "minItems")), 1);
    assert_null(json_object_get(s, "maxItems"));
    json_t *any = json_object_get(json_object_get(s, "items"), "anyOf");
    assert_int_equal(json_array_size(any), 2);
    json_t *e = json_object_get(json_object_get(json_object_get(json_array_get(any, 1), "properties"), "name"), "enum");
    assert_string_equal(json_string_value(json_array_get(e, 0)), "get_time");
    json_decref(s);
    s = api_toolcall_schema(tools, "get_weather", false);
    assert_non_null(s);
    assert_int_equal(json_integer_value(json_object_get(s, "maxItems")), 1);
    json_t *props = json_object_get(json_object_get(s, "items"), "properties");
    assert_non_null(json_object_get(json_object_get(json_object_get(props, "parameters"), "properties"), "city"));
    json_decref(s);
    assert_null(api_toolcall_schema(tools, "missing", true));
    json_decref(tools);
}

/* The structural tag's begin + arguments + end is a call the parser reads back. */
static void test_structural_tag(void **st)
{
    (void)st;
    json_t *tools = json_loads(TOOLS, 0, NULL);
    json_object_set_new(json_object_get(json_array_get(tools, 1), "function"), "strict", json_true());
    static const char *names[] = {"qwen", "llama3", "mistral", "deepseekv3", "deepseekv31", "kimi_k2"};
    for (size_t k = 0; k < sizeof names / sizeof names[0]; k++) {
        const api_toolcall_format *f = api_toolcall_find(names[k]);
        json_t *tag = api_toolcall_structural_tag(f, tools);
        assert_non_null(tag);
        json_t *ss = json_object_get(tag, "structures");
        assert_int_equal(json_array_size(ss), 2);
        assert_int_equal(json_object_size(json_object_get(json_array_get(ss, 0), "schema")), 0); /* not strict */
        assert_non_null(json_object_get(json_object_get(json_array_get(ss, 1), "schema"), "properties"));
        json_t *s1 = json_array_get(ss, 1);
        const char *b = json_string_value(json_object_get(s1, "begin")), *e = json_string_value(json_object_get(s1, "end"));
        assert_non_null(strstr(b, json_string_value(json_array_get(json_object_get(tag, "triggers"), 0))));
        char text[600];
        snprintf(text, sizeof text, "%s{\"tz\": \"UTC\"}%s", b, e);
        char *normal;
        json_t *calls;
        assert_int_equal(api_toolcall_parse(f, tools, text, strlen(text), &normal, &calls), 0);
        if (json_array_size(calls) != 1) fail_msg("%s: %s", names[k], text);
        assert_string_equal(json_string_value(json_object_get(json_array_get(calls, 0), "name")), "get_time");
        json_t *args = json_loads(json_string_value(json_object_get(json_array_get(calls, 0), "parameters")), 0, NULL);
        assert_string_equal(json_string_value(json_object_get(args, "tz")), "UTC");
        json_decref(args), json_decref(calls), free(normal), json_decref(tag);
    }
    assert_null(api_toolcall_structural_tag(api_toolcall_find("pythonic"), tools));
    json_decref(tools);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fixtures),
        cmocka_unit_test(test_name_check),
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_schema),
        cmocka_unit_test(test_structural_tag),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
