/* test_api_chat_tools — the chat route's tool-call rendering
 * (src/api/api_chat_tools.c) on a job built by hand (no server): the
 * stream's tool_calls delta entries, accumulated by index as the OpenAI
 * SDKs do, give the message's tool_calls of the whole-text answer; each
 * call's first entry carries index, id ("call_" + 24 hex), type and
 * function.name, the later ones only argument fragments; ids differ;
 * parallel_tool_calls false keeps the first call; histories (null
 * content, string arguments); tool_choice reading. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "api/api_job.h"
#include "api/api_reasoning.h"
#include "api/api_toolcall.h"

static const char *TEXT = "Checking.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 3}}\n"
                          "</tool_call>\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"tz\": \"CET\"}}\n</tool_call>";

/* A one-slot chat job whose output stage has the hermes parser (kimi_k2
 * call ids when kimi). */
static api_job *make_job_k(api_server *a, api_slot *sl, api_output *o, bool single, bool kimi)
{
    static api_job j;
    memset(&j, 0, sizeof j);
    memset(sl, 0, sizeof *sl);
    memset(o, 0, sizeof *o);
    j.api = a;
    j.kind = JOB_CHAT;
    j.slots = sl;
    j.outs = o;
    j.n_slots = 1;
    j.tool_single = single;
    j.kimi_ids = kimi;
    j.tool_id_base = 2;
    assert_int_equal(api_output_add_parser(o, api_toolcall_parser_new(api_toolcall_find("hermes"), NULL)), 0);
    return &j;
}

static api_job *make_job(api_server *a, api_slot *sl, api_output *o, bool single)
{
    return make_job_k(a, sl, o, single, false);
}

static json_t *whole_calls(api_server *a, bool single, char **content)
{
    api_slot sl;
    api_output o;
    api_job *j = make_job(a, &sl, &o, single);
    char *reasoning;
    json_t *deltas;
    assert_int_equal(api_oai_parse_tools(j, &sl, TEXT, true, content, &reasoning, &deltas), 0);
    assert_null(reasoning);
    json_t *calls = api_chat_message_tool_calls(deltas);
    json_decref(deltas);
    assert_int_equal(sl.n_calls, json_array_size(calls));
    api_output_free(&o);
    return calls;
}

static void test_stream_accumulates_to_whole(void **st)
{
    (void)st;
    static api_server a; /* only the rid counter and salt are used */
    char *content;
    json_t *calls = whole_calls(&a, false, &content);
    assert_string_equal(content, "Checking.");
    assert_int_equal(json_array_size(calls), 2);
    json_t *c0 = json_array_get(calls, 0), *c1 = json_array_get(calls, 1);
    assert_string_equal(json_string_value(json_object_get(c0, "type")), "function");
    assert_string_equal(json_string_value(json_object_get(json_object_get(c0, "function"), "name")), "get_weather");
    assert_string_equal(json_string_value(json_object_get(json_object_get(c0, "function"), "arguments")),
                        "{\"city\": \"Paris\", \"days\": 3}");
    const char *id0 = json_string_value(json_object_get(c0, "id")), *id1 = json_string_value(json_object_get(c1, "id"));
    assert_int_equal(strlen(id0), 5 + 24);
    assert_memory_equal(id0, "call_", 5);
    assert_string_not_equal(id0, id1);
    /* byte by byte, as the stream sends it */
    api_slot sl;
    api_output o;
    api_job *j = make_job(&a, &sl, &o, false);
    json_t *acc = json_array();
    char *streamed = calloc(1, 1);
    size_t n = strlen(TEXT);
    for (size_t i = 0; i <= n; i++) {
        char ch[2] = {i < n ? TEXT[i] : 0, 0};
        char *ct, *rs;
        json_t *d;
        assert_int_equal(api_oai_parse_tools(j, &sl, ch, i == n, &ct, &rs, &d), 0);
        streamed = realloc(streamed, strlen(streamed) + strlen(ct) + 1);
        strcat(streamed, ct);
        free(ct);
        size_t k;
        json_t *e;
        json_array_foreach(d, k, e)
        {
            json_int_t idx = json_integer_value(json_object_get(e, "index"));
            json_t *fn = json_object_get(e, "function");
            if ((size_t)idx == json_array_size(acc)) { /* a new call: id, type, name first */
                assert_non_null(json_object_get(e, "id"));
                assert_string_equal(json_string_value(json_object_get(e, "type")), "function");
                assert_non_null(json_object_get(fn, "name"));
                json_array_append_new(acc, json_pack("{s:O,s:O,s:s}", "name", json_object_get(fn, "name"), "id",
                                                     json_object_get(e, "id"), "arguments", ""));
            } else {
                assert_true(idx < (json_int_t)json_array_size(acc));
                assert_null(json_object_get(e, "id"));
                assert_null(json_object_get(fn, "name"));
            }
            json_t *c = json_array_get(acc, (size_t)idx);
            const char *prev = json_string_value(json_object_get(c, "arguments"));
            const char *frag = json_string_value(json_object_get(fn, "arguments"));
            char *cat = malloc(strlen(prev) + strlen(frag) + 1);
            strcpy(cat, prev);
            strcat(cat, frag);
            json_object_set_new(c, "arguments", json_string(cat));
            free(cat);
        }
        json_decref(d);
    }
    assert_string_equal(streamed, content);
    assert_int_equal(json_array_size(acc), 2);
    for (size_t k = 0; k < 2; k++) {
        json_t *w = json_object_get(json_array_get(calls, k), "function"), *g = json_array_get(acc, k);
        assert_string_equal(json_string_value(json_object_get(w, "name")), json_string_value(json_object_get(g, "name")));
        assert_string_equal(json_string_value(json_object_get(w, "arguments")),
                            json_string_value(json_object_get(g, "arguments")));
    }
    assert_int_equal(sl.n_calls, 2);
    api_output_free(&o);
    json_decref(acc);
    free(streamed);
    free(content);
    json_decref(calls);
    /* kimi_k2 ids: functions.NAME:N after the history's calls */
    {
        api_slot ks;
        api_output ko;
        api_job *kj = make_job_k(&a, &ks, &ko, false, true);
        char *kc, *kr;
        json_t *kd;
        assert_int_equal(api_oai_parse_tools(kj, &ks, TEXT, true, &kc, &kr, &kd), 0);
        json_t *kcalls = api_chat_message_tool_calls(kd);
        assert_string_equal(json_string_value(json_object_get(json_array_get(kcalls, 0), "id")), "functions.get_weather:2");
        assert_string_equal(json_string_value(json_object_get(json_array_get(kcalls, 1), "id")), "functions.get_time:3");
        free(kc), json_decref(kd), json_decref(kcalls);
        api_output_free(&ko);
    }
    /* parallel_tool_calls false: the first call only */
    calls = whole_calls(&a, true, &content);
    assert_int_equal(json_array_size(calls), 1);
    free(content);
    json_decref(calls);
}

/* The chat order: reasoning parser first, the tool parser over its
 * content (qwen3 + qwen): any split gives the same three parts. */
static void test_reasoning_then_tools(void **st)
{
    (void)st;
    static const char *t = "<think>I should call get_time.</think>\n\n<tool_call>\n{\"name\": \"get_time\", "
                           "\"arguments\": {\"tz\": \"UTC\"}}\n</tool_call>";
    size_t n = strlen(t);
    for (size_t step = 1; step <= n; step += (step < 8 ? 1 : 7)) {
        api_output o;
        api_output_init(&o, NULL);
        assert_int_equal(api_output_add_parser(&o, api_reasoning_parser_new(api_reasoning_find("qwen3"), true)), 0);
        assert_int_equal(api_output_add_parser(&o, api_toolcall_parser_new(api_toolcall_find("qwen"), NULL)), 0);
        api_pieces ps = {0};
        for (size_t at = 0; at < n; at += step)
            assert_int_equal(api_output_parse(&o, t + at, at + step > n ? n - at : step, false, &ps), 0);
        assert_int_equal(api_output_parse(&o, "", 0, true, &ps), 0);
        char *normal, *reasoning = api_pieces_join(&ps, API_PIECE_REASONING);
        json_t *calls;
        assert_int_equal(api_toolcall_collect(&ps, &normal, &calls), 0);
        assert_string_equal(reasoning, "I should call get_time.");
        assert_string_equal(normal, "");
        assert_int_equal(json_array_size(calls), 1);
        assert_string_equal(json_string_value(json_object_get(json_array_get(calls, 0), "name")), "get_time");
        assert_string_equal(json_string_value(json_object_get(json_array_get(calls, 0), "parameters")), "{\"tz\": \"UTC\"}");
        free(normal), free(reasoning), json_decref(calls);
        api_pieces_free(&ps);
        api_output_free(&o);
    }
}

static void test_history_message(void **st)
{
    (void)st;
    json_t *m = json_loads("{\"role\": \"assistant\", \"content\": null, \"tool_calls\": [{\"id\": \"c\", \"type\": \"function\","
                           " \"function\": {\"name\": \"f\", \"arguments\": \"{\\\"a\\\": [1, 2]}\"}}]}",
                           0, NULL);
    json_t *h = api_chat_history_message(m);
    assert_string_equal(json_string_value(json_object_get(h, "content")), "");
    json_t *args = json_object_get(json_object_get(json_array_get(json_object_get(h, "tool_calls"), 0), "function"), "arguments");
    assert_true(json_is_object(args));
    assert_int_equal(json_array_size(json_object_get(args, "a")), 2);
    /* the caller's message is untouched */
    assert_true(json_is_null(json_object_get(m, "content")));
    json_decref(h);
    json_decref(m);
}

static void test_tool_choice(void **st)
{
    (void)st;
    char err[256];
    api_chat_tools t;
    json_t *b = json_loads("{\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\"}},"
                           " {\"type\": \"function\", \"function\": {\"name\": \"g\"}}]}", 0, NULL);
    assert_int_equal(api_chat_tools_read(b, &t, err, sizeof err), 0);
    assert_true(t.active);
    json_t *tt = api_chat_template_tools(&t);
    assert_int_equal(json_array_size(tt), 2);
    assert_string_equal(json_string_value(json_object_get(json_array_get(tt, 1), "name")), "g");
    json_decref(tt);
    json_object_set_new(b, "tool_choice", json_string("none"));
    assert_int_equal(api_chat_tools_read(b, &t, err, sizeof err), 0);
    assert_false(t.active);
    assert_null(api_chat_template_tools(&t));
    json_object_set_new(b, "tool_choice", json_pack("{s:s,s:{s:s}}", "type", "function", "function", "name", "g"));
    assert_int_equal(api_chat_tools_read(b, &t, err, sizeof err), 0);
    tt = api_chat_template_tools(&t);
    assert_int_equal(json_array_size(tt), 1);
    json_decref(tt);
    json_t *sp = json_object();
    assert_int_equal(api_chat_tools_sampling(&t, sp, err, sizeof err), 0);
    assert_true(json_is_false(json_object_get(sp, "skip_special_tokens")));
    assert_true(json_is_string(json_object_get(sp, "json_schema")));
    json_decref(sp);
    json_object_set_new(b, "tool_choice", json_pack("{s:s,s:{s:s}}", "type", "function", "function", "name", "h"));
    assert_int_equal(api_chat_tools_read(b, &t, err, sizeof err), -1);
    assert_non_null(strstr(err, "'h'"));
    json_object_set_new(b, "tool_choice", json_string("sometimes"));
    assert_int_equal(api_chat_tools_read(b, &t, err, sizeof err), -1);
    json_decref(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stream_accumulates_to_whole),
        cmocka_unit_test(test_reasoning_then_tools),
        cmocka_unit_test(test_history_message),
        cmocka_unit_test(test_tool_choice),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
