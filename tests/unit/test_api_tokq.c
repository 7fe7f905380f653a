/* test_api_tokq — the tokenizer workers (api_tokq.h) on detached requests:
 * every queued job is run and answered; a small job is answered while the
 * only worker is stuck in a large one (express lane); destroy runs what
 * is still queued; batch encode gives the ids of one-by-one encoding, on
 * one thread or spread over several; the API in dry-run mode answers the
 * same through workers as inline, with and without batch encode. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>

#include <jansson.h>

#include "api/api.h"
#include "api/api_tokq.h"
#include "http/http.h"
#include "util/log.h"

/* ---- the queue alone --------------------------------------------------------------- */

typedef struct gate {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool open;
    atomic_int ran;
} gate;

/* run fn: a large body waits for the gate; every job answers 200 with its
 * body length */
static void run_gated(void *ctx, http_req *r, const char *method, const char *path, const char *body,
                      size_t len)
{
    (void)method, (void)path, (void)body;
    gate *g = ctx;
    if (len > API_TOKQ_EXPRESS_MAX) {
        pthread_mutex_lock(&g->mu);
        while (!g->open) pthread_cond_wait(&g->cv, &g->mu);
        pthread_mutex_unlock(&g->mu);
    }
    char txt[32];
    snprintf(txt, sizeof txt, "%zu", len);
    atomic_fetch_add(&g->ran, 1);
    http_respond(r, 200, "text/plain", txt, strlen(txt), NULL);
}

static int wait_answer(http_req *r, double secs)
{
    for (int i = 0; i < (int)(secs * 1000); i++) {
        const char *b;
        size_t n;
        bool ended;
        int st = http_req_detached_result(r, &b, &n, &ended);
        if (ended) return st;
        usleep(1000);
    }
    return 0;
}

static void test_express_lane(void **state)
{
    (void)state;
    gate g = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
    char err[128];
    api_tokq *q = api_tokq_create(1, run_gated, &g, err, sizeof err);
    assert_non_null(q);
    size_t big_len = API_TOKQ_EXPRESS_MAX + 1;
    char *big = calloc(1, big_len + 1);
    memset(big, 'x', big_len);
    http_req *rb[2], *rs;
    for (int i = 0; i < 2; i++) {
        rb[i] = http_req_detached();
        assert_true(api_tokq_offer(q, rb[i], "POST", "/generate", big, big_len));
    }
    /* the worker is stuck in the first large job; a small one still passes */
    rs = http_req_detached();
    assert_true(api_tokq_offer(q, rs, "POST", "/generate", "{}", 2));
    assert_int_equal(wait_answer(rs, 10), 200);
    assert_int_equal(wait_answer(rb[0], 0.05), 0);
    /* no body: not queued (the caller serves it inline) */
    http_req *rn = http_req_detached();
    assert_false(api_tokq_offer(q, rn, "GET", "/health", "", 0));
    http_respond(rn, 200, "text/plain", "", 0, NULL);
    http_req_detached_free(rn);
    pthread_mutex_lock(&g.mu);
    g.open = true;
    pthread_cond_broadcast(&g.cv);
    pthread_mutex_unlock(&g.mu);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(wait_answer(rb[i], 10), 200);
        http_req_detached_free(rb[i]);
    }
    http_req_detached_free(rs);
    api_tokq_destroy(q);
    assert_int_equal(atomic_load(&g.ran), 3);
    free(big);
}

/* destroy runs every job still queued before the threads stop */
static void test_destroy_runs_queued(void **state)
{
    (void)state;
    gate g = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER, .open = true};
    char err[128];
    api_tokq *q = api_tokq_create(2, run_gated, &g, err, sizeof err);
    assert_non_null(q);
    enum { N = 200 };
    http_req *r[N];
    char body[] = "{\"text\":\"x\"}";
    for (int i = 0; i < N; i++) {
        r[i] = http_req_detached();
        assert_true(api_tokq_offer(q, r[i], "POST", "/generate", body, strlen(body)));
    }
    api_tokq_destroy(q);
    for (int i = 0; i < N; i++) {
        const char *b;
        size_t n;
        bool ended;
        assert_int_equal(http_req_detached_result(r[i], &b, &n, &ended), 200);
        assert_true(ended);
        http_req_detached_free(r[i]);
    }
    assert_int_equal(atomic_load(&g.ran), N);
    assert_null(api_tokq_create(0, run_gated, &g, err, sizeof err));
}

/* ---- batch encode -------------------------------------------------------------------- */

static tok_tokenizer *load_tok(void)
{
    const char *shared = getenv("SGLC_SHARED");
    char path[4096], err[512];
    snprintf(path, sizeof path, "%s/models/TinyStories-656K", shared ? shared : "../shared");
    return tok_load_dir(path, NULL, err, sizeof err);
}

typedef struct busy {
    api_tokq *q;
    const tok_tokenizer *t;
    api_tokq_text *texts;
    size_t n;
    int rc;
    tok_ids *out;
} busy;

static void *batch_thread(void *arg)
{
    busy *b = arg;
    b->rc = api_tokq_encode_batch(b->q, b->t, b->texts, b->n, true, b->out);
    return NULL;
}

static void run_noop(void *ctx, http_req *r, const char *method, const char *path, const char *body,
                     size_t len)
{
    (void)ctx, (void)method, (void)path, (void)body, (void)len;
    http_respond(r, 200, "text/plain", "", 0, NULL);
}

static void test_encode_batch(void **state)
{
    (void)state;
    tok_tokenizer *t = load_tok();
    if (!t) {
        skip();
        return;
    }
    enum { N = 64 };
    api_tokq_text texts[N];
    char *bufs[N];
    for (int i = 0; i < N; i++) {
        size_t len = 100 + (size_t)i * 97;
        bufs[i] = malloc(len + 1);
        for (size_t k = 0; k < len; k++) bufs[i][k] = "Once upon a time, Lily saw a big red ball! "[(k * 7 + (size_t)i) % 43];
        bufs[i][len] = 0;
        texts[i] = (api_tokq_text){bufs[i], len};
    }
    tok_ids want[N];
    memset(want, 0, sizeof want);
    for (int i = 0; i < N; i++) assert_int_equal(tok_encode(t, texts[i].s, texts[i].len, true, &want[i]), 0);
    char err[128];
    api_tokq *qs[3] = {NULL, NULL, NULL};
    qs[1] = api_tokq_create(1, run_noop, NULL, err, sizeof err);
    qs[2] = api_tokq_create(3, run_noop, NULL, err, sizeof err);
    for (int v = 0; v < 3; v++) {
        /* from a thread of its own (as a worker would call it), twice at
         * once so that helpers serve two batches */
        tok_ids got[2][N];
        memset(got, 0, sizeof got);
        busy b[2];
        pthread_t th[2];
        for (int k = 0; k < 2; k++) {
            b[k] = (busy){.q = qs[v], .t = t, .texts = texts, .n = N, .out = got[k]};
            assert_int_equal(pthread_create(&th[k], NULL, batch_thread, &b[k]), 0);
        }
        for (int k = 0; k < 2; k++) {
            pthread_join(th[k], NULL);
            assert_int_equal(b[k].rc, 0);
            for (int i = 0; i < N; i++) {
                assert_int_equal(got[k][i].n, want[i].n);
                assert_memory_equal(got[k][i].ids, want[i].ids, want[i].n * sizeof(int32_t));
                tok_ids_free(&got[k][i]);
            }
        }
    }
    /* encode ahead: the route finds the ids by content */
    json_t *body = json_pack("{s:[s,s,i],s:{s:i}}", "text", bufs[0], bufs[1], 7, "sampling_params", "max_new_tokens", 1);
    assert_int_equal(api_tokq_encode_ahead(qs[2], t, "/generate", body, err, sizeof err), 0);
    tok_ids x = {0};
    char *copy = strdup(bufs[1]);
    assert_true(api_tokq_pre_take(copy, texts[1].len, true, &x));
    assert_int_equal(x.n, want[1].n);
    assert_memory_equal(x.ids, want[1].ids, x.n * sizeof(int32_t));
    assert_false(api_tokq_pre_take(copy, texts[1].len, false, &x)); /* add_special differs */
    assert_false(api_tokq_pre_take("other", 5, true, &x));
    api_tokq_pre_clear();
    assert_false(api_tokq_pre_take(copy, texts[1].len, true, &x));
    tok_ids_free(&x);
    free(copy);
    /* n > 1 or a single text: nothing ahead; multimodal batch: refused */
    json_object_set_new(json_object_get(body, "sampling_params"), "n", json_integer(2));
    assert_int_equal(api_tokq_encode_ahead(qs[2], t, "/generate", body, err, sizeof err), 0);
    assert_false(api_tokq_pre_take(bufs[0], texts[0].len, true, &x));
    json_object_del(json_object_get(body, "sampling_params"), "n");
    json_object_set_new(body, "image_data", json_string("a.png"));
    assert_int_equal(api_tokq_encode_ahead(qs[2], t, "/generate", body, err, sizeof err), 400);
    assert_non_null(strstr(err, "enable_tokenizer_batch_encode"));
    /* text and input_ids together: left to the route's own error */
    json_object_set_new(body, "input_ids", json_pack("[i]", 1));
    assert_int_equal(api_tokq_encode_ahead(qs[2], t, "/generate", body, err, sizeof err), 0);
    json_decref(body);
    for (int v = 0; v < 3; v++) api_tokq_destroy(qs[v]);
    for (int i = 0; i < N; i++) {
        tok_ids_free(&want[i]);
        free(bufs[i]);
    }
    tok_destroy(t);
}

/* ---- the API through the workers -------------------------------------------------------- */

static api_server *mk(const tok_tokenizer *t, int workers, bool batch)
{
    char err[128];
    api_config c = {.served_model_name = "tiny", .model_path = "m", .architecture = "A",
                    .context_length = 4096, .vocab_size = 2048, .tok = t,
                    .tokenizer_workers = workers, .batch_encode = batch};
    api_server *a = api_create(&c, err, sizeof err);
    assert_non_null(a);
    return a;
}

static char *call(api_server *a, const char *method, const char *path, const char *body, int *st)
{
    http_req *r = http_req_detached();
    api_handle(a, r, method, path, body, strlen(body));
    *st = wait_answer(r, 30);
    const char *b;
    size_t n;
    bool ended;
    http_req_detached_result(r, &b, &n, &ended);
    assert_true(ended);
    char *out = strndup(b ? b : "", n);
    http_req_detached_free(r);
    return out;
}

/* the answer minus what differs between runs (ids, timestamps) */
static char *stable(const char *txt)
{
    json_t *j = json_loads(txt, JSON_DECODE_ANY, NULL);
    if (!j) return strdup(txt);
    json_t *list = json_is_array(j) ? j : NULL;
    size_t n = list ? json_array_size(list) : 1;
    for (size_t i = 0; i < n; i++) {
        json_t *o = list ? json_array_get(list, i) : j;
        json_object_del(json_object_get(o, "meta_info"), "id");
        json_object_del(json_object_get(o, "meta_info"), "e2e_latency");
        json_object_del(o, "id");
        json_object_del(o, "created");
    }
    char *s = json_dumps(j, JSON_SORT_KEYS | JSON_COMPACT);
    json_decref(j);
    return s;
}

static void test_api_same_answers(void **state)
{
    (void)state;
    tok_tokenizer *t = load_tok();
    if (!t) {
        skip();
        return;
    }
    static const char *const reqs[][2] = {
        {"/generate", "{\"text\":[\"Once upon a time\",\"Lily saw a ball\",\"The end.\"],\"sampling_params\":{\"max_new_tokens\":2}}"},
        {"/generate", "{\"text\":\"One day\",\"sampling_params\":{\"max_new_tokens\":2}}"},
        {"/generate", "{\"input_ids\":[[1,2,3],[4,5]]}"},
        {"/v1/completions", "{\"prompt\":[\"Once upon\",[5,6],\"a time\"],\"max_tokens\":2}"},
        {"/tokenize", "{\"prompt\":\"Once upon a time\"}"},
        {"/generate", "{bad"},
        {"/generate", "{\"text\":[\"a\",\"b\"],\"image_data\":[\"x\",\"y\"]}"},
        {"/nope", "{}"},
    };
    size_t nr = sizeof reqs / sizeof reqs[0];
    char *want[16];
    int want_st[16];
    api_server *a = mk(t, 0, false);
    for (size_t i = 0; i < nr; i++) {
        char *o = call(a, "POST", reqs[i][0], reqs[i][1], &want_st[i]);
        want[i] = stable(o);
        free(o);
    }
    api_destroy(a);
    for (int v = 0; v < 3; v++) {
        bool batch = v > 0;
        a = mk(t, v == 2 ? 3 : 1, batch);
        for (size_t i = 0; i < nr; i++) {
            int st;
            char *o = call(a, "POST", reqs[i][0], reqs[i][1], &st);
            char *s = stable(o);
            bool mm = strstr(reqs[i][1], "image_data") != NULL;
            if (batch && mm) { /* SGLang refuses multimodal batches with batch encode */
                assert_int_equal(st, 400);
                assert_non_null(strstr(s, "enable_tokenizer_batch_encode"));
            } else {
                if (st != want_st[i] || strcmp(s, want[i]))
                    fprintf(stderr, "%s %s:\n  inline  %d %s\n  workers %d %s\n", reqs[i][0], reqs[i][1], want_st[i],
                            want[i], st, s);
                assert_int_equal(st, want_st[i]);
                assert_string_equal(s, want[i]);
            }
            free(s);
            free(o);
        }
        api_destroy(a);
    }
    for (size_t i = 0; i < nr; i++) free(want[i]);
    tok_destroy(t);
}

/* authentication refuses on the polling thread (nothing queued); the
 * authorized request goes through the workers */
static void test_api_auth_first(void **state)
{
    (void)state;
    char err[128];
    api_config c = {.served_model_name = "tiny", .model_path = "m", .architecture = "A",
                    .context_length = 64, .vocab_size = 100, .api_key = "k", .tokenizer_workers = 1};
    api_server *a = api_create(&c, err, sizeof err);
    assert_non_null(a);
    http_req *r = http_req_detached();
    const char *body = "{\"input_ids\":[1,2]}";
    api_handle(a, r, "POST", "/generate", body, strlen(body));
    const char *b;
    size_t n;
    bool ended;
    assert_int_equal(http_req_detached_result(r, &b, &n, &ended), 401); /* answered before returning */
    assert_true(ended);
    http_req_detached_free(r);
    api_destroy(a);
}

int main(void)
{
    log_set_level(LOG_WARNING);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_express_lane),
        cmocka_unit_test(test_destroy_runs_queued),
        cmocka_unit_test(test_encode_batch),
        cmocka_unit_test(test_api_same_answers),
        cmocka_unit_test(test_api_auth_first),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
