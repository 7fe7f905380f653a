/* test_api — the API layer without a scheduler or sockets: api_handle in
 * dry-run mode on detached http requests (synthetic events answer each
 * request), checking routing, authentication, error shapes, the native
 * response shape (single, batch, n), OpenAI shapes and SSE framing. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <jansson.h>

#include "api/api.h"
#include "http/http.h"
#include "template/template.h"
#include "util/log.h"

static api_server *mk(const char *key, tmpl_chat *chat)
{
    char err[128];
    api_config c = {.served_model_name = "tiny", .model_path = "m", .architecture = "A",
                    .context_length = 64, .vocab_size = 100, .api_key = key, .chat = chat};
    api_server *a = api_create(&c, err, sizeof err);
    assert_non_null(a);
    return a;
}

/* Run one request; returns the status, *out the body (malloc'd). */
static int call(api_server *a, const char *method, const char *path, const char *body, char **out)
{
    http_req *r = http_req_detached();
    api_handle(a, r, method, path, body, strlen(body));
    const char *b;
    size_t len;
    bool ended;
    int st = http_req_detached_result(r, &b, &len, &ended);
    assert_true(ended);
    *out = strndup(b ? b : "", len);
    http_req_detached_free(r);
    return st;
}

static json_t *jcall(api_server *a, const char *path, const char *body, int want)
{
    char *o;
    int st = call(a, "POST", path, body, &o);
    if (st != want) fprintf(stderr, "%s %s -> %d %s\n", path, body, st, o);
    assert_int_equal(st, want);
    json_t *j = json_loads(o, JSON_DECODE_ANY, NULL);
    if (!j) fprintf(stderr, "not JSON: %s\n", o);
    assert_non_null(j);
    free(o);
    return j;
}

static void test_routes_and_errors(void **state)
{
    (void)state;
    api_server *a = mk(NULL, NULL);
    json_t *j = jcall(a, "/nope", "", 404);
    json_decref(j);
    j = jcall(a, "/generate", "{bad", 400);
    assert_non_null(json_object_get(json_object_get(j, "error"), "message"));
    json_decref(j);
    j = jcall(a, "/generate", "{\"input_ids\":[1],\"text\":\"a\"}", 400);
    assert_non_null(strstr(json_string_value(json_object_get(json_object_get(j, "error"), "message")), "not both"));
    json_decref(j);
    j = jcall(a, "/v1/completions", "{\"prompt\":[1,2],\"top_p\":5}", 400);
    assert_string_equal(json_string_value(json_object_get(j, "object")), "error");
    assert_int_equal(json_integer_value(json_object_get(j, "code")), 400);
    json_decref(j);
    char *o;
    assert_int_equal(call(a, "GET", "/v1/models/other", "", &o), 404);
    assert_non_null(strstr(o, "model_not_found"));
    free(o);
    assert_int_equal(call(a, "GET", "/v1/models/tiny", "", &o), 200);
    free(o);
    /* chat without a template: 400 with a reason */
    j = jcall(a, "/v1/chat/completions", "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}", 400);
    json_decref(j);
    api_destroy(a);
}

static void test_api_key(void **state)
{
    (void)state;
    api_server *a = mk("k", NULL);
    char *o;
    assert_int_equal(call(a, "GET", "/get_model_info", "", &o), 401);
    assert_non_null(strstr(o, "Unauthorized"));
    free(o);
    assert_int_equal(call(a, "GET", "/health", "", &o), 200); /* exempt, as SGLang */
    free(o);
    api_destroy(a);
}

/* Every /v1 error: SGLang's top-level ErrorResponse fields and OpenAI's
 * "error": {"message", "type", "param", "code"} with the same message. */
static void assert_v1_error(json_t *j, const char *msg_part)
{
    assert_string_equal(json_string_value(json_object_get(j, "object")), "error");
    const char *m = json_string_value(json_object_get(j, "message"));
    assert_non_null(m);
    if (!strstr(m, msg_part)) fprintf(stderr, "message '%s' lacks '%s'\n", m, msg_part);
    assert_non_null(strstr(m, msg_part));
    assert_non_null(json_object_get(j, "type"));
    assert_non_null(json_object_get(j, "param"));
    assert_non_null(json_object_get(j, "code"));
    json_t *e = json_object_get(j, "error");
    assert_true(json_is_object(e));
    assert_string_equal(json_string_value(json_object_get(e, "message")), m);
    assert_true(json_is_string(json_object_get(e, "type")));
    assert_non_null(json_object_get(e, "param"));
    assert_non_null(json_object_get(e, "code"));
}

static json_t *get_json(api_server *a, const char *method, const char *path, int want)
{
    char *o;
    assert_int_equal(call(a, method, path, "", &o), want);
    json_t *j = json_loads(o, 0, NULL);
    assert_non_null(j);
    free(o);
    return j;
}

static void test_v1_error_shape(void **state)
{
    (void)state;
    api_server *a = mk("k", NULL);
    json_t *j = get_json(a, "GET", "/v1/models", 401);
    assert_v1_error(j, "Unauthorized");
    json_decref(j);
    api_destroy(a);
    a = mk(NULL, NULL);
    j = jcall(a, "/v1/completions", "{\"prompt\":[1,2],\"top_p\":5}", 400);
    assert_v1_error(j, "");
    assert_int_equal(json_integer_value(json_object_get(json_object_get(j, "error"), "code")), 400);
    json_decref(j);
    j = jcall(a, "/v1/chat/completions", "{\"messages\":[]}", 400);
    assert_v1_error(j, "tokenizer"); /* no tokenizer in this server */
    json_decref(j);
    j = get_json(a, "GET", "/v1/models/other", 404);
    assert_v1_error(j, "does not exist");
    assert_string_equal(json_string_value(json_object_get(json_object_get(j, "error"), "code")), "model_not_found");
    json_decref(j);
    j = get_json(a, "GET", "/v1/no_such_route", 404);
    assert_v1_error(j, "Not Found");
    assert_string_equal(json_string_value(json_object_get(j, "detail")), "Not Found");
    json_decref(j);
    j = get_json(a, "GET", "/v1/completions", 405);
    assert_v1_error(j, "Method Not Allowed");
    json_decref(j);
    api_destroy(a);
}

/* Start-up: until api_set_ready, health and generation answer 503
 * "starting"; other routes already work. */
static void test_starting(void **state)
{
    (void)state;
    char err[128];
    api_config c = {.served_model_name = "tiny", .model_path = "m", .architecture = "A",
                    .context_length = 64, .vocab_size = 100, .start_later = true};
    api_server *a = api_create(&c, err, sizeof err);
    assert_non_null(a);
    char *o;
    assert_int_equal(call(a, "GET", "/health", "", &o), 503);
    assert_non_null(strstr(o, "starting"));
    free(o);
    assert_int_equal(call(a, "GET", "/health_generate", "", &o), 503);
    free(o);
    json_t *j = jcall(a, "/generate", "{\"input_ids\":[1,2]}", 503);
    json_decref(j);
    j = jcall(a, "/v1/completions", "{\"prompt\":[1,2]}", 503);
    assert_string_equal(json_string_value(json_object_get(j, "object")), "error");
    json_decref(j);
    assert_int_equal(call(a, "GET", "/get_model_info", "", &o), 200);
    free(o);
    assert_int_equal(api_set_ready(a, err, sizeof err), 0);
    assert_int_equal(call(a, "GET", "/health", "", &o), 200);
    free(o);
    j = jcall(a, "/generate", "{\"input_ids\":[1,2]}", 200);
    json_decref(j);
    api_destroy(a);
}

static void test_native_shapes(void **state)
{
    (void)state;
    api_server *a = mk(NULL, NULL);
    /* input id 4 -> first id % 4 == 0 -> synthetic finish "length" */
    json_t *j = jcall(a, "/generate", "{\"input_ids\":[4,5,6],\"sampling_params\":{\"max_new_tokens\":2}}", 200);
    assert_true(json_is_object(j));
    assert_int_equal(json_array_size(json_object_get(j, "output_ids")), 2);
    json_t *m = json_object_get(j, "meta_info");
    assert_int_equal(json_integer_value(json_object_get(m, "prompt_tokens")), 3);
    assert_string_equal(json_string_value(json_object_get(json_object_get(m, "finish_reason"), "type")), "length");
    json_decref(j);
    j = jcall(a, "/generate", "{\"input_ids\":[[4],[8,9]],\"sampling_params\":{\"n\":3}}", 200);
    assert_int_equal(json_array_size(j), 6);
    json_decref(j);
    /* a 400 rejection from the scheduler becomes the request's error
     * (first id 3 -> abort; out[0] = 3 odd -> status 400) */
    j = jcall(a, "/generate", "{\"input_ids\":[3]}", 400);
    json_decref(j);
    /* streaming framing */
    char *o;
    assert_int_equal(call(a, "POST", "/generate", "{\"input_ids\":[4,5],\"stream\":true}", &o), 200);
    assert_true(!strncmp(o, "data: {", 7));
    size_t n = strlen(o);
    assert_string_equal(o + n - 14, "data: [DONE]\n\n");
    free(o);
    api_destroy(a);
}

static void test_openai_shapes(void **state)
{
    (void)state;
    tmpl_chat chat = {0};
    char *err = NULL;
    const char *src = tmpl_builtin_source("chatml");
    assert_int_equal(tmpl_compile(src, strlen(src), &chat.tmpl, &err), 0);
    chat.special = json_object();
    api_server *a = mk(NULL, &chat);
    /* no tokenizer here: text prompts are refused, the chat route too */
    json_t *j = jcall(a, "/v1/completions", "{\"prompt\":\"hi\"}", 400);
    json_decref(j);
    api_destroy(a);
    tmpl_chat_free(&chat);
}

/* The control routes in dry-run mode: request validation and SGLang's
 * answer shapes (the scheduler side is tested by test_sched and
 * tests/scripts/test_server_ctl.sh). */
static void test_admin_routes(void **state)
{
    (void)state;
    api_server *a = mk(NULL, NULL);
    json_t *j = jcall(a, "/pause_generation", "{\"mode\":\"in_place\"}", 200);
    assert_string_equal(json_string_value(json_object_get(j, "message")), "Generation paused successfully.");
    assert_string_equal(json_string_value(json_object_get(j, "status")), "ok");
    json_decref(j);
    j = jcall(a, "/pause_generation", "", 200); /* default mode abort */
    json_decref(j);
    j = jcall(a, "/pause_generation", "{\"mode\":\"later\"}", 400);
    assert_string_equal(json_string_value(json_object_get(j, "object")), "error");
    assert_non_null(strstr(json_string_value(json_object_get(j, "message")), "Invalid mode"));
    json_decref(j);
    j = jcall(a, "/pause_generation", "{\"mode\":3}", 400);
    json_decref(j);
    j = jcall(a, "/continue_generation", "{}", 200);
    assert_string_equal(json_string_value(json_object_get(j, "message")), "Generation continued successfully.");
    json_decref(j);
    char *o;
    assert_int_equal(call(a, "GET", "/pause_generation", "", &o), 405);
    free(o);
    assert_int_equal(call(a, "GET", "/flush_cache", "", &o), 200);
    assert_non_null(strstr(o, "Cache flushed."));
    free(o);
    assert_int_equal(call(a, "GET", "/ready", "", &o), 200);
    free(o);
    j = jcall(a, "/update_weights_from_disk", "{}", 400);
    assert_non_null(strstr(json_string_value(json_object_get(j, "message")), "model_path"));
    json_decref(j);
    j = jcall(a, "/update_weights_from_disk", "{\"model_path\":\"x\",\"is_async\":true}", 400);
    assert_true(json_is_false(json_object_get(j, "success")));
    assert_int_equal(json_integer_value(json_object_get(j, "num_paused_requests")), 0);
    json_decref(j);
    j = jcall(a, "/update_weights_from_disk", "{\"model_path\":\"x\",\"load_format\":\"gguf\"}", 400);
    json_decref(j);
    /* no loader in dry run: success false, the version does not move */
    j = jcall(a, "/update_weights_from_disk", "{\"model_path\":\"x\",\"weight_version\":\"v9\"}", 400);
    assert_true(json_is_false(json_object_get(j, "success")));
    json_decref(j);
    assert_int_equal(call(a, "GET", "/get_weight_version", "", &o), 200);
    assert_non_null(strstr(o, "\"default\""));
    free(o);
    api_destroy(a);
}

int main(void)
{
    log_set_level(LOG_CRITICAL);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_routes_and_errors),
        cmocka_unit_test(test_api_key),
        cmocka_unit_test(test_v1_error_shape),
        cmocka_unit_test(test_starting),
        cmocka_unit_test(test_native_shapes),
        cmocka_unit_test(test_openai_shapes),
        cmocka_unit_test(test_admin_routes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
