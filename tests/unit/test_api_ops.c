/* test_api_ops — the operations pieces of the API layer on their own:
 * SGLang's auth decision table, the route levels, the context-length
 * rules, the request-log rendering (Python repr text checked against
 * strings printed by CPython, SGLang's truncation at each level, json
 * events, /configure_logging validation), the access-log line, and the
 * Prometheus rendering of the metrics. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include <jansson.h>

#include "api/api_ops.h"
#include "sched/sched.h"
#include "util/log.h"

static void test_auth_matrix(void **state)
{
    (void)state;
    const char *K = "key-1", *AK = "admin-2";
    /* normal route */
    assert_int_equal(api_auth_decide("GET", "/generate", NULL, NULL, NULL, NULL, API_AUTH_NORMAL), 0);
    assert_int_equal(api_auth_decide("GET", "/generate", NULL, NULL, K, NULL, API_AUTH_NORMAL), 401);
    assert_int_equal(api_auth_decide("GET", "/generate", "Bearer key-1", NULL, K, NULL, API_AUTH_NORMAL), 0);
    assert_int_equal(api_auth_decide("GET", "/generate", "bEaReR key-1", NULL, K, NULL, API_AUTH_NORMAL), 0);
    assert_int_equal(api_auth_decide("GET", "/generate", "Bearer key-1x", NULL, K, NULL, API_AUTH_NORMAL), 401);
    assert_int_equal(api_auth_decide("GET", "/generate", "Bearer key-", NULL, K, NULL, API_AUTH_NORMAL), 401);
    assert_int_equal(api_auth_decide("GET", "/generate", "Basic key-1", NULL, K, NULL, API_AUTH_NORMAL), 401);
    assert_int_equal(api_auth_decide("GET", "/generate", "Bearer", NULL, K, NULL, API_AUTH_NORMAL), 401);
    assert_int_equal(api_auth_decide("GET", "/generate", NULL, "key-1", K, NULL, API_AUTH_NORMAL), 0);
    /* both keys: the admin key does not open a normal route */
    assert_int_equal(api_auth_decide("GET", "/generate", "Bearer admin-2", NULL, K, AK, API_AUTH_NORMAL), 401);
    /* admin key only: normal routes are open */
    assert_int_equal(api_auth_decide("GET", "/generate", NULL, NULL, NULL, AK, API_AUTH_NORMAL), 0);
    /* admin-optional */
    assert_int_equal(api_auth_decide("POST", "/flush_cache", NULL, NULL, NULL, NULL, API_AUTH_ADMIN_OPTIONAL), 0);
    assert_int_equal(api_auth_decide("POST", "/flush_cache", NULL, NULL, K, NULL, API_AUTH_ADMIN_OPTIONAL), 401);
    assert_int_equal(api_auth_decide("POST", "/flush_cache", "Bearer key-1", NULL, K, NULL, API_AUTH_ADMIN_OPTIONAL), 0);
    assert_int_equal(api_auth_decide("POST", "/flush_cache", "Bearer key-1", NULL, K, AK, API_AUTH_ADMIN_OPTIONAL), 401);
    assert_int_equal(api_auth_decide("POST", "/flush_cache", "Bearer admin-2", NULL, K, AK, API_AUTH_ADMIN_OPTIONAL), 0);
    assert_int_equal(api_auth_decide("POST", "/flush_cache", NULL, "admin-2", NULL, AK, API_AUTH_ADMIN_OPTIONAL), 0);
    /* admin-force: 403 without an admin key even with the api key */
    assert_int_equal(api_auth_decide("POST", "/x", "Bearer key-1", NULL, K, NULL, API_AUTH_ADMIN_FORCE), 403);
    assert_int_equal(api_auth_decide("POST", "/x", NULL, NULL, NULL, NULL, API_AUTH_ADMIN_FORCE), 403);
    assert_int_equal(api_auth_decide("POST", "/x", "Bearer key-1", NULL, K, AK, API_AUTH_ADMIN_FORCE), 401);
    assert_int_equal(api_auth_decide("POST", "/x", "Bearer admin-2", NULL, K, AK, API_AUTH_ADMIN_FORCE), 0);
    /* always open: OPTIONS, health, ready, metrics prefixes */
    assert_int_equal(api_auth_decide("OPTIONS", "/flush_cache", NULL, NULL, K, AK, API_AUTH_ADMIN_FORCE), 0);
    assert_int_equal(api_auth_decide("GET", "/health_generate", NULL, NULL, K, AK, API_AUTH_NORMAL), 0);
    assert_int_equal(api_auth_decide("GET", "/readyz", NULL, NULL, K, AK, API_AUTH_NORMAL), 0);
    assert_int_equal(api_auth_decide("GET", "/metrics", NULL, NULL, K, AK, API_AUTH_NORMAL), 0);
    /* an empty key is no key */
    assert_int_equal(api_auth_decide("GET", "/generate", NULL, NULL, "", "", API_AUTH_NORMAL), 0);
}

static void test_auth_levels(void **state)
{
    (void)state;
    assert_int_equal(api_auth_level_of("POST", "/flush_cache"), API_AUTH_ADMIN_OPTIONAL);
    assert_int_equal(api_auth_level_of("GET", "/flush_cache"), API_AUTH_ADMIN_OPTIONAL);
    assert_int_equal(api_auth_level_of("HEAD", "/configure_logging"), API_AUTH_ADMIN_OPTIONAL);
    assert_int_equal(api_auth_level_of("POST", "/pause_generation"), API_AUTH_ADMIN_OPTIONAL);
    assert_int_equal(api_auth_level_of("POST", "/continue_generation"), API_AUTH_ADMIN_OPTIONAL);
    assert_int_equal(api_auth_level_of("POST", "/update_weights_from_disk"), API_AUTH_ADMIN_OPTIONAL);
    assert_int_equal(api_auth_level_of("POST", "/abort_request"), API_AUTH_ADMIN_OPTIONAL);
    /* a method the route does not take: no level (Starlette partial match) */
    assert_int_equal(api_auth_level_of("GET", "/abort_request"), API_AUTH_NORMAL);
    assert_int_equal(api_auth_level_of("POST", "/generate"), API_AUTH_NORMAL);
    assert_int_equal(api_auth_level_of("GET", "/flush_cache/x"), API_AUTH_NORMAL);
    assert_int_equal(api_auth_level_of("DELETE", "/hicache/storage-backend"), API_AUTH_ADMIN_OPTIONAL);
}

static sched_req_spec spec(int64_t n, bool has_max, int64_t max_new)
{
    sched_req_spec sp;
    sched_req_spec_init(&sp);
    sp.input_ids = calloc((size_t)n, sizeof(int32_t));
    sp.n_input = n;
    sp.params.has_max_new_tokens = has_max;
    sp.params.max_new_tokens = max_new;
    return sp;
}

static void test_limits(void **state)
{
    (void)state;
    char err[512];
    sched_req_spec sp = spec(600, true, 4);
    assert_int_equal(api_limits_apply(&sp, true, 512, 506, false, err, sizeof err), -1);
    assert_string_equal(err, "The input (600 tokens) is longer than the model's context length (512 tokens).");
    /* truncation: input to context_len, then max_new_tokens to 0, then to max_req_input_len */
    assert_int_equal(api_limits_apply(&sp, true, 512, 506, true, err, sizeof err), 0);
    assert_int_equal(sp.n_input, 506);
    assert_int_equal(sp.params.max_new_tokens, 0);
    sched_req_spec_free(&sp);

    sp = spec(3, true, 600);
    assert_int_equal(api_limits_apply(&sp, true, 512, 506, false, err, sizeof err), -1);
    assert_non_null(strstr(err, "You requested a total of 603 tokens: 3 tokens from the input messages and 600 tokens"));
    /* not given by the request (a default): not checked here */
    assert_int_equal(api_limits_apply(&sp, false, 512, 506, false, err, sizeof err), 0);
    assert_int_equal(sp.params.max_new_tokens, 600);
    assert_int_equal(api_limits_apply(&sp, true, 512, 506, true, err, sizeof err), 0);
    assert_int_equal(sp.params.max_new_tokens, 509);
    assert_int_equal(sp.n_input, 3);
    sched_req_spec_free(&sp);

    /* exactly at the limits */
    sp = spec(3, true, 509);
    assert_int_equal(api_limits_apply(&sp, true, 512, 506, false, err, sizeof err), 0);
    sched_req_spec_free(&sp);
    sp = spec(506, false, 0);
    assert_int_equal(api_limits_apply(&sp, false, 512, 506, false, err, sizeof err), -1);
    assert_string_equal(err, "Input length (506 tokens) exceeds the maximum allowed length (506 tokens). Use a "
                             "shorter input or enable --allow-auto-truncate.");
    sched_req_spec_free(&sp);
    sp = spec(505, false, 0);
    assert_int_equal(api_limits_apply(&sp, false, 512, 506, false, err, sizeof err), 0);
    sched_req_spec_free(&sp);
}

static void repr_is(const char *json, size_t max_len, const char *cls, const char *const *skip, const char *want)
{
    json_t *v = json_loads(json, JSON_DECODE_ANY, NULL);
    assert_non_null(v);
    char *r = api_log_repr(v, max_len, cls, skip);
    assert_non_null(r);
    if (strcmp(r, want)) fprintf(stderr, "got  %s\nwant %s\n", r, want);
    assert_string_equal(r, want);
    free(r);
    json_decref(v);
}

static void test_repr(void **state)
{
    (void)state;
    size_t big = (size_t)1 << 30;
    /* the expected strings are CPython's str()/repr() of the same values */
    repr_is("[1,\"x\",\"it's\",null,true,1.5,0.1,100.0,1e20,1e-5,{\"k\":[2]}]", big, NULL, NULL,
            "[1, 'x', \"it's\", None, True, 1.5, 0.1, 100.0, 1e+20, 1e-05, {'k': [2]}]");
    repr_is("\"tab\\there\\nq\\\"uote\"", big, NULL, NULL, "'tab\\there\\nq\"uote'");
    repr_is("\"both'\\\"\"", big, NULL, NULL, "'both\\'\"'");
    repr_is("[123456789.125, 2.5e-07, 1e16, -0.0]", big, NULL, NULL, "[123456789.125, 2.5e-07, 1e+16, -0.0]");
    /* dataclass form, skip names, nested dict values */
    static const char *const skip[] = {"text", NULL};
    repr_is("{\"text\":\"a\",\"rid\":\"r\",\"sampling_params\":{\"max_new_tokens\":3}}", big, "GenerateReqInput", skip,
            "GenerateReqInput(rid='r', sampling_params={'max_new_tokens': 3})");
    /* SGLang's truncation: halves of strings (by code point) and lists */
    repr_is("\"abcdef\"", 4, NULL, NULL, "'ab' ... 'ef'");
    repr_is("\"h\\u00e9llo w\\u00f6rld\"", 4, NULL, NULL, "'h\xc3\xa9' ... 'ld'");
    repr_is("[1,2,3,4,5]", 2, NULL, NULL, "[1] ... [5]");
    repr_is("{\"ids\":[1,2,3,4,5],\"t\":\"xyz\"}", 4, "R", NULL, "R(ids=[1, 2] ... [4, 5], t='xyz')");
}

static void test_transform(void **state)
{
    (void)state;
    json_t *v = json_loads("{\"text\":\"abcdef\",\"ids\":[1,2,3,4,5],\"sp\":{\"s\":\"abcdefgh\"},\"n\":1}", 0, NULL);
    static const char *const skip[] = {"n", NULL};
    json_t *t = api_log_transform(v, 4, skip);
    char *s = json_dumps(t, JSON_COMPACT);
    assert_string_equal(s, "{\"text\":\"ab...ef\",\"ids\":[1,2,\"...\",4,5],\"sp\":{\"s\":\"ab...gh\"}}");
    free(s);
    json_decref(t);
    json_decref(v);
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return strdup("");
    char *buf = calloc(1, 1 << 16);
    size_t n = fread(buf, 1, (1 << 16) - 1, f);
    buf[n] = 0;
    fclose(f);
    return buf;
}

static void test_reqlog(void **state)
{
    (void)state;
    char dir[] = "/tmp/sglc_reqlog_XXXXXX";
    assert_non_null(mkdtemp(dir));
    char sub[256];
    snprintf(sub, sizeof sub, "%s/a/b", dir);
    json_t *targets = json_pack("[s]", sub);
    char err[256];
    assert_null(api_reqlog_create(true, 4, "text", targets, err, sizeof err));
    assert_null(api_reqlog_create(true, 2, "xml", targets, err, sizeof err));
    api_reqlog *l = api_reqlog_create(true, 2, "text", targets, err, sizeof err);
    assert_non_null(l);
    json_t *obj = json_pack("{s:s,s:[i,i],s:{s:i},s:s}", "text", "hi", "input_ids", 1, 2, "sampling_params",
                            "max_new_tokens", 3, "rid", "r1");
    json_t *out = json_pack("{s:s,s:[i],s:{s:i}}", "text", "yo", "output_ids", 7, "meta_info", "prompt_tokens", 2);
    api_reqlog_received(l, obj, NULL);
    api_reqlog_finished(l, obj, NULL, out);
    /* validation is atomic */
    json_t *bad = json_pack("{s:b,s:i}", "log_requests", 0, "log_requests_level", 9);
    assert_int_equal(api_reqlog_configure(l, bad, err, sizeof err), -1);
    assert_true(api_reqlog_enabled(l));
    json_decref(bad);
    json_t *unsup = json_pack("{s:s}", "crash_dump_folder", "/tmp");
    assert_int_equal(api_reqlog_configure(l, unsup, err, sizeof err), -1);
    json_decref(unsup);
    json_t *cfg = json_pack("{s:i,s:s}", "log_requests_level", 0, "log_requests_format", "json");
    assert_int_equal(api_reqlog_configure(l, cfg, err, sizeof err), 0);
    json_decref(cfg);
    assert_int_equal(api_reqlog_level(l), 0);
    api_reqlog_finished(l, obj, NULL, out);
    cfg = json_pack("{s:b}", "log_requests", 0);
    assert_int_equal(api_reqlog_configure(l, cfg, err, sizeof err), 0);
    json_decref(cfg);
    api_reqlog_received(l, obj, NULL);
    api_reqlog_destroy(l);

    char host[256] = "localhost", path[600];
    gethostname(host, sizeof host - 1);
    snprintf(path, sizeof path, "%s/%s_0.log", sub, host);
    char *txt = slurp(path);
    const char *want =
        "Receive: obj=GenerateReqInput(text='hi', input_ids=[1, 2], sampling_params={'max_new_tokens': 3}, rid='r1')\n"
        "Finish: obj=GenerateReqInput(text='hi', input_ids=[1, 2], sampling_params={'max_new_tokens': 3}, rid='r1'), "
        "out={'text': 'yo', 'output_ids': [7], 'meta_info': {'prompt_tokens': 2}}\n";
    assert_memory_equal(txt, want, strlen(want));
    /* the json level-0 line: metadata only */
    const char *jl = txt + strlen(want);
    json_t *ev = json_loads(jl, JSON_DISABLE_EOF_CHECK, NULL);
    assert_non_null(ev);
    assert_string_equal(json_string_value(json_object_get(ev, "event")), "request.finished");
    assert_string_equal(json_string_value(json_object_get(ev, "rid")), "r1");
    assert_null(json_object_get(json_object_get(ev, "obj"), "text"));
    assert_null(json_object_get(json_object_get(ev, "obj"), "sampling_params"));
    assert_null(json_object_get(json_object_get(ev, "out"), "output_ids"));
    assert_non_null(json_object_get(json_object_get(ev, "out"), "meta_info"));
    json_decref(ev);
    /* nothing after log_requests=false */
    assert_null(strchr(strchr(jl, '\n') + 1, '\n'));
    free(txt);
    json_decref(obj);
    json_decref(out);
    json_decref(targets);
    unlink(path);
    rmdir(sub);
    snprintf(sub, sizeof sub, "%s/a", dir);
    rmdir(sub);
    rmdir(dir);
}

/* --export-metrics-to-file: SGLang's FileRequestMetricsExporter records */
static void test_metrics_export(void **state)
{
    (void)state;
    char dir[] = "/tmp/sglc_mexport_XXXXXX";
    assert_non_null(mkdtemp(dir));
    char sub[256], err[256];
    snprintf(sub, sizeof sub, "%s/m", dir);
    assert_null(api_mexport_create(NULL, 2, err, sizeof err));
    api_mexport *x = api_mexport_create(sub, 2, err, sizeof err); /* the folder is created */
    assert_non_null(x);
    json_t *obj = json_pack("{s:s,s:n,s:{s:i},s:s,s:b,s:n}", "text", "h\u00e9", "input_ids", "sampling_params",
                            "max_new_tokens", 3, "rid", "r1", "stream", 0, "priority");
    json_t *out = json_pack("{s:s,s:[i],s:{s:s,s:i,s:i,s:f}}", "text", "yo", "output_ids", 7, "meta_info", "id", "r1",
                            "prompt_tokens", 2, "completion_tokens", 1, "e2e_latency", 0.25);
    api_mexport_write(x, obj, out);
    json_t *hc = json_pack("{s:s}", "rid", "HEALTH_CHECK_1");
    api_mexport_write(x, hc, out); /* health checks are not exported */
    json_decref(hc);
    api_mexport_destroy(x);
    x = api_mexport_create(sub, 0, err, sizeof err); /* level 0: metadata only */
    api_mexport_write(x, obj, out);
    api_mexport_destroy(x);

    char hour[16], path[600];
    time_t now = time(NULL);
    struct tm tm;
    localtime_r(&now, &tm);
    strftime(hour, sizeof hour, "%Y%m%d_%H", &tm);
    snprintf(path, sizeof path, "%s/sglang-request-metrics-%s.log", sub, hour);
    char *txt = slurp(path);
    assert_non_null(txt);
    /* json.dumps' separators and ASCII escapes, nulls left out, meta_info spread */
    const char *want =
        "{\"request_parameters\": \"{\\\"text\\\": \\\"h\\\\u00e9\\\", \\\"sampling_params\\\": "
        "{\\\"max_new_tokens\\\": 3}, \\\"rid\\\": \\\"r1\\\", \\\"stream\\\": false}\", \"id\": \"r1\", "
        "\"prompt_tokens\": 2, \"completion_tokens\": 1, \"e2e_latency\": 0.25}\n"
        "{\"request_parameters\": \"{\\\"rid\\\": \\\"r1\\\", \\\"stream\\\": false}\", \"id\": \"r1\", "
        "\"prompt_tokens\": 2, \"completion_tokens\": 1, \"e2e_latency\": 0.25}\n";
    assert_string_equal(txt, want);
    free(txt);
    json_decref(obj);
    json_decref(out);
    unlink(path);
    rmdir(sub);
    rmdir(dir);
}

/* $SGLANG_LOG_REQUEST_EXCEEDED_MS: only slow requests are logged as finished */
static void test_reqlog_exceeded(void **state)
{
    (void)state;
    char dir[] = "/tmp/sglc_reqlog_XXXXXX";
    assert_non_null(mkdtemp(dir));
    json_t *targets = json_pack("[s]", dir);
    char err[256];
    setenv("SGLANG_LOG_REQUEST_EXCEEDED_MS", "500", 1);
    api_reqlog *l = api_reqlog_create(true, 3, "text", targets, err, sizeof err);
    unsetenv("SGLANG_LOG_REQUEST_EXCEEDED_MS");
    assert_non_null(l);
    json_t *obj = json_pack("{s:s}", "rid", "fast");
    json_t *fast = json_pack("{s:{s:f}}", "meta_info", "e2e_latency", 0.1);
    json_t *slow = json_pack("{s:{s:f}}", "meta_info", "e2e_latency", 0.6);
    api_reqlog_finished(l, obj, NULL, fast);
    api_reqlog_finished(l, obj, NULL, slow);
    api_reqlog_destroy(l);
    char host[256] = "localhost", path[600];
    gethostname(host, sizeof host - 1);
    snprintf(path, sizeof path, "%s/%s_0.log", dir, host);
    char *txt = slurp(path);
    assert_string_equal(txt, "Finish: obj=GenerateReqInput(rid='fast'), out={'meta_info': {'e2e_latency': 0.6}}\n");
    free(txt);
    json_decref(obj), json_decref(fast), json_decref(slow), json_decref(targets);
    unlink(path);
    rmdir(dir);
}

static void test_access_log(void **state)
{
    (void)state;
    FILE *f = tmpfile();
    json_t *ex = json_pack("[s,s]", "/health", "");
    api_access_log *l = api_access_log_create(LOG_INFO, ex, f);
    api_access_log_line(l, "127.0.0.1:5000", "GET", "/health", "HTTP/1.1", 200, "OK");
    api_access_log_line(l, "127.0.0.1:5000", "POST", "/generate", "HTTP/1.1", 400, "Bad Request");
    api_access_log_destroy(l);
    l = api_access_log_create(LOG_WARNING, NULL, f);
    api_access_log_line(l, "127.0.0.1:5000", "GET", "/x", "HTTP/1.1", 200, "OK");
    api_access_log_destroy(l);
    rewind(f);
    char buf[512] = "";
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = 0;
    fclose(f);
    json_decref(ex);
    /* "[YYYY-MM-DD HH:MM:SS] " then uvicorn's access line */
    assert_true(n > 22 && buf[0] == '[' && buf[20] == ']');
    assert_string_equal(buf + 22, "INFO:     127.0.0.1:5000 - \"POST /generate HTTP/1.1\" 400 Bad Request\n");
}

static double sample(const char *txt, const char *series)
{
    const char *p = strstr(txt, series);
    if (!p) return -1;
    return strtod(p + strlen(series), NULL);
}

static void test_metrics(void **state)
{
    (void)state;
    char err[256];
    json_t *badb = json_pack("[f,f]", 2.0, 1.0);
    api_metrics_opts o = {.ttft_buckets = badb};
    assert_null(api_metrics_create("m", &o, err, sizeof err));
    json_decref(badb);
    /* SGLang's bucket rules: tse 1000 2 4 -> 996 998 1000 1002 1004; custom dedups and sorts */
    json_t *tse = json_pack("[s,s,s,s]", "tse", "1000", "2", "4");
    json_t *cus = json_pack("[s,s,s,s]", "custom", "50", "10", "50");
    json_t *bad = json_pack("[s,s,s,s]", "tse", "1000", "1", "4");
    o = (api_metrics_opts){.collect_tokens_histogram = true, .prompt_tokens_rule = bad};
    assert_null(api_metrics_create("m", &o, err, sizeof err));
    o = (api_metrics_opts){.collect_tokens_histogram = true, .prompt_tokens_rule = tse, .generation_tokens_rule = cus};
    api_metrics *m = api_metrics_create("m\"x", &o, err, sizeof err);
    json_decref(tse), json_decref(cus), json_decref(bad);
    assert_non_null(m);
    api_metrics_ttft(m, 0.15);
    api_metrics_ttft(m, 500);
    api_metrics_itl(m, 0.03, 3); /* 3 samples of 0.01 */
    api_metrics_finished(m, 10, 4, 5, 0.7, false);
    api_metrics_finished(m, 6, 0, 0, 0.1, true);
    sched_stats st;
    memset(&st, 0, sizeof st);
    st.max_total_num_tokens = 100;
    st.free_tokens = 70;
    st.evictable_tokens = 5;
    st.n_running = 2;
    st.n_waiting = 1;
    char *t = api_metrics_render(m, &st);
    assert_non_null(t);
    const char *lab = "{model_name=\"m\\\"x\"}";
    char s[200];
    snprintf(s, sizeof s, "sglang:prompt_tokens_total%s ", lab);
    assert_true(sample(t, s) == 10.0);
    snprintf(s, sizeof s, "sglang:generation_tokens_total%s ", lab);
    assert_true(sample(t, s) == 4.0);
    snprintf(s, sizeof s, "sglang:num_aborted_requests_total%s ", lab);
    assert_true(sample(t, s) == 1.0);
    assert_true(sample(t, "sglang:time_to_first_token_seconds_bucket{model_name=\"m\\\"x\",le=\"0.1\"} ") == 0.0);
    assert_true(sample(t, "sglang:time_to_first_token_seconds_bucket{model_name=\"m\\\"x\",le=\"0.2\"} ") == 1.0);
    assert_true(sample(t, "sglang:time_to_first_token_seconds_bucket{model_name=\"m\\\"x\",le=\"400.0\"} ") == 1.0);
    assert_true(sample(t, "sglang:time_to_first_token_seconds_bucket{model_name=\"m\\\"x\",le=\"+Inf\"} ") == 2.0);
    assert_true(sample(t, "sglang:inter_token_latency_seconds_bucket{model_name=\"m\\\"x\",le=\"0.008\"} ") == 0.0);
    assert_true(sample(t, "sglang:inter_token_latency_seconds_bucket{model_name=\"m\\\"x\",le=\"0.01\"} ") == 3.0);
    assert_true(sample(t, "sglang:inter_token_latency_seconds_count{model_name=\"m\\\"x\"} ") == 3.0);
    assert_true(fabs(sample(t, "sglang:inter_token_latency_seconds_sum{model_name=\"m\\\"x\"} ") - 0.03) < 1e-12);
    assert_true(sample(t, "sglang:e2e_request_latency_seconds_count{model_name=\"m\\\"x\"} ") == 1.0);
    assert_true(sample(t, "sglang:num_running_reqs{engine_type=\"unified\",model_name=\"m\\\"x\",pp_rank=\"0\",tp_rank=\"0\"} ") == 2.0);
    assert_true(sample(t, "sglang:num_queue_reqs{engine_type=\"unified\",model_name=\"m\\\"x\",pp_rank=\"0\",tp_rank=\"0\"} ") == 1.0);
    assert_true(fabs(sample(t, "sglang:token_usage{engine_type=\"unified\",model_name=\"m\\\"x\",pp_rank=\"0\",tp_rank=\"0\"} ") - 0.25) < 1e-12);
    assert_true(fabs(sample(t, "sglang:cache_hit_rate{engine_type=\"unified\",model_name=\"m\\\"x\",pp_rank=\"0\",tp_rank=\"0\"} ") - 0.5) < 1e-12);
    assert_non_null(strstr(t, "# TYPE sglang:time_to_first_token_seconds histogram\n"));
    /* token histograms: prompt 10 (cached 5) with tse buckets, generation 4 with custom ones */
    assert_true(sample(t, "sglang:prompt_tokens_histogram_bucket{model_name=\"m\\\"x\",le=\"996.0\"} ") == 1.0);
    assert_non_null(strstr(t, "sglang:prompt_tokens_histogram_bucket{model_name=\"m\\\"x\",le=\"1004.0\"} 1.0\nsglang:prompt_tokens_histogram_bucket{model_name=\"m\\\"x\",le=\"+Inf\"}"));
    assert_true(sample(t, "sglang:uncached_prompt_tokens_histogram_sum{model_name=\"m\\\"x\"} ") == 5.0);
    assert_true(sample(t, "sglang:generation_tokens_histogram_bucket{model_name=\"m\\\"x\",le=\"10.0\"} ") == 1.0);
    assert_non_null(strstr(t, "le=\"50.0\"} 1.0\nsglang:generation_tokens_histogram_bucket{model_name=\"m\\\"x\",le=\"+Inf\"}"));
    free(t);
    api_metrics_destroy(m);

    /* --extra-metric-labels: appended to every series, checked */
    static const char *const bad_extra[] = {"{\"model_name\": \"x\"}", "{\"1a\": \"x\"}", "{\"__a\": \"x\"}",
                                            "{\"a\": 1}", "[1]", NULL};
    for (int i = 0; bad_extra[i]; i++) {
        json_t *x = json_loads(bad_extra[i], JSON_DECODE_ANY, NULL);
        o = (api_metrics_opts){.extra_labels = x};
        assert_null(api_metrics_create("m", &o, err, sizeof err));
        assert_non_null(strstr(err, "--extra-metric-labels"));
        json_decref(x);
    }
    json_t *x = json_pack("{s:s,s:s}", "region", "eu\"1", "team", "a");
    o = (api_metrics_opts){.extra_labels = x};
    m = api_metrics_create("m", &o, err, sizeof err);
    json_decref(x);
    assert_non_null(m);
    api_metrics_ttft(m, 0.15);
    t = api_metrics_render(m, &st);
    assert_non_null(t);
    const char *ex = ",region=\"eu\\\"1\",team=\"a\"";
    snprintf(s, sizeof s, "sglang:num_requests_total{model_name=\"m\"%s} ", ex);
    assert_true(sample(t, s) == 0.0);
    snprintf(s, sizeof s, "sglang:num_running_reqs{engine_type=\"unified\",model_name=\"m\",pp_rank=\"0\",tp_rank=\"0\"%s} ", ex);
    assert_true(sample(t, s) == 2.0);
    snprintf(s, sizeof s, "sglang:time_to_first_token_seconds_bucket{model_name=\"m\"%s,le=\"0.2\"} ", ex);
    assert_true(sample(t, s) == 1.0);
    snprintf(s, sizeof s, "sglang:cached_tokens_total{model_name=\"m\"%s,cache_source=\"total\"} ", ex);
    assert_true(sample(t, s) == 0.0);
    /* every series carries them */
    for (const char *p = strchr(t, '{'); p; p = strchr(p + 1, '{')) {
        const char *q = strchr(p, '}'), *lab2 = strstr(p, "team=\"a\"");
        assert_true(q && lab2 && lab2 < q);
    }
    free(t);
    api_metrics_destroy(m);
}

int main(void)
{
    log_set_level(LOG_ERROR);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_auth_matrix), cmocka_unit_test(test_auth_levels),
        cmocka_unit_test(test_limits),      cmocka_unit_test(test_repr),
        cmocka_unit_test(test_transform),   cmocka_unit_test(test_reqlog),
        cmocka_unit_test(test_access_log),  cmocka_unit_test(test_metrics),
        cmocka_unit_test(test_reqlog_exceeded), cmocka_unit_test(test_metrics_export),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
