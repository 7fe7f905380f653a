/* test_sampling — sampling params (parse, normalise, SGLang's verify
 * messages) and the sampler (greedy, seeds, distributions against a
 * naive full-sort reference, penalties on hand-computed cases, logprobs).
 * Every random test uses a fixed seed: the counter-based generator makes
 * it deterministic, so it cannot flake. */
#include <float.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "sampling/sampler.h"
#include "sampling/sampling_params.h"

static sampling_params parse_ok(const char *json)
{
    sampling_params p;
    char err[256] = "";
    int rc = sampling_params_parse(&p, json, strlen(json), err, sizeof err);
    if (rc != 0) fail_msg("parse %s: %s", json, err);
    return p;
}

/* ------------------------------------------------------------ params */

static void test_params_defaults(void **state)
{
    (void)state;
    sampling_params p = parse_ok("{}");
    assert_true(p.has_max_new_tokens);
    assert_int_equal(p.max_new_tokens, 128);
    assert_true(p.temperature == 1.0);
    assert_true(p.top_p == 1.0);
    assert_int_equal(p.top_k, SAMPLING_TOP_K_ALL);
    assert_true(p.min_p == 0.0);
    assert_true(p.repetition_penalty == 1.0);
    assert_int_equal(p.n, 1);
    assert_true(p.skip_special_tokens);
    assert_true(p.spaces_between_special_tokens);
    assert_false(p.ignore_eos);
    assert_false(p.no_stop_trim);
    assert_false(p.has_sampling_seed);
    assert_int_equal(sampling_params_verify(&p, 1000, NULL, 0), 0);
    sampling_params_free(&p);
    /* nulls mean defaults, max_new_tokens null means no limit */
    p = parse_ok("{\"temperature\": null, \"top_k\": null, \"max_new_tokens\": null, \"stop\": null}");
    assert_true(p.temperature == 1.0);
    assert_int_equal(p.top_k, SAMPLING_TOP_K_ALL);
    assert_false(p.has_max_new_tokens);
    assert_int_equal(sampling_params_verify(&p, 1000, NULL, 0), 0);
    sampling_params_free(&p);
    /* a NULL object is the defaults too */
    char err[64];
    assert_int_equal(sampling_params_from_json(&p, NULL, err, sizeof err), 0);
    assert_int_equal(p.max_new_tokens, 128);
    sampling_params_free(&p);
}

static void test_params_full(void **state)
{
    (void)state;
    sampling_params p = parse_ok(
        "{\"max_new_tokens\": 7, \"stop\": [\"a\", \"\\n\\n\"], \"stop_token_ids\": [5, null, 9, 5],"
        " \"stop_regex\": \"x+\", \"temperature\": 0.5, \"top_p\": 0.9, \"top_k\": 40, \"min_p\": 0.05,"
        " \"frequency_penalty\": 0.1, \"presence_penalty\": -0.2, \"repetition_penalty\": 1.1,"
        " \"min_new_tokens\": 2, \"n\": 3, \"ignore_eos\": true, \"skip_special_tokens\": false,"
        " \"spaces_between_special_tokens\": false, \"no_stop_trim\": true, \"custom_params\": {\"b\": 1, \"a\": 2},"
        " \"stream_interval\": 4, \"logit_bias\": {\"12\": -100, \" +3 \": 2.5}, \"sampling_seed\": 42}");
    assert_int_equal(p.max_new_tokens, 7);
    assert_int_equal(p.n_stop, 2);
    assert_string_equal(p.stop[1], "\n\n");
    assert_int_equal(p.n_stop_token_ids, 2); /* null dropped, duplicate merged */
    assert_int_equal(p.stop_token_ids[0], 5);
    assert_int_equal(p.stop_token_ids[1], 9);
    assert_int_equal(p.n_stop_regex, 1);
    assert_string_equal(p.stop_regex[0], "x+");
    assert_true(p.temperature == 0.5);
    assert_int_equal(p.top_k, 40);
    assert_int_equal(p.min_new_tokens, 2);
    assert_int_equal(p.n, 3);
    assert_true(p.ignore_eos);
    assert_false(p.skip_special_tokens);
    assert_false(p.spaces_between_special_tokens);
    assert_true(p.no_stop_trim);
    assert_string_equal(p.custom_params, "{\"a\":2,\"b\":1}");
    assert_true(p.has_stream_interval);
    assert_int_equal(p.stream_interval, 4);
    assert_int_equal(p.n_logit_bias, 2);
    assert_true(p.has_sampling_seed);
    assert_int_equal(p.sampling_seed, 42);
    assert_int_equal(sampling_params_verify(&p, 1000, NULL, 0), 0);
    assert_int_equal(sampling_params_check_supported(&p, NULL, 0), 0);
    sampling_params_free(&p);
    p = parse_ok("{\"stop\": \"END\"}");
    assert_int_equal(p.n_stop, 1);
    assert_string_equal(p.stop[0], "END");
    sampling_params_free(&p);
}

static void test_params_greedy_normalisation(void **state)
{
    (void)state;
    sampling_params p = parse_ok("{\"temperature\": 0}");
    assert_int_equal(p.top_k, 1);
    assert_true(p.temperature == 1.0);
    assert_true(sampling_params_is_greedy(&p));
    sampling_params_free(&p);
    p = parse_ok("{\"temperature\": 0.0000005, \"top_k\": 50}");
    assert_int_equal(p.top_k, 1);
    sampling_params_free(&p);
    p = parse_ok("{\"top_k\": -1}");
    assert_int_equal(p.top_k, SAMPLING_TOP_K_ALL);
    sampling_params_free(&p);
}

static void expect_verify(const char *json, int64_t vocab, const char *msg)
{
    sampling_params p = parse_ok(json);
    char err[256] = "";
    int rc = sampling_params_verify(&p, vocab, err, sizeof err);
    sampling_params_free(&p);
    if (rc != -1) fail_msg("verify accepted %s", json);
    if (strcmp(err, msg) != 0) fail_msg("verify %s:\n  got  %s\n  want %s", json, err, msg);
}

static void test_params_verify_messages(void **state)
{
    (void)state;
    expect_verify("{\"temperature\": -1}", 100, "temperature must be a non-negative finite number, got -1.");
    expect_verify("{\"temperature\": -0.5}", 100, "temperature must be a non-negative finite number, got -0.5.");
    expect_verify("{\"top_p\": 0}", 100, "top_p must be in (0, 1], got 0.");
    expect_verify("{\"top_p\": 1.5}", 100, "top_p must be in (0, 1], got 1.5.");
    expect_verify("{\"top_p\": -0.00001}", 100, "top_p must be in (0, 1], got -1e-05.");
    expect_verify("{\"min_p\": 2}", 100, "min_p must be in [0, 1], got 2.");
    expect_verify("{\"min_p\": -0.1}", 100, "min_p must be in [0, 1], got -0.1.");
    expect_verify("{\"top_k\": 0}", 100, "top_k must be -1 (disable) or at least 1, got 0.");
    expect_verify("{\"top_k\": -2}", 100, "top_k must be -1 (disable) or at least 1, got -2.");
    expect_verify("{\"frequency_penalty\": 2.5}", 100, "frequency_penalty must be in [-2, 2], got 2.5.");
    expect_verify("{\"presence_penalty\": -3}", 100, "presence_penalty must be in [-2, 2], got -3.");
    expect_verify("{\"repetition_penalty\": 0}", 100,
                  "repetition_penalty must be in (0, 2] (1.0 = no penalty), got 0.");
    expect_verify("{\"repetition_penalty\": 2.0000001}", 100,
                  "repetition_penalty must be in (0, 2] (1.0 = no penalty), got 2.0000001.");
    expect_verify("{\"min_new_tokens\": -1}", 100, "min_new_tokens must be in [0, max_new_tokens], got -1.");
    expect_verify("{\"max_new_tokens\": -1}", 100, "max_new_tokens must be at least 0, got -1.");
    expect_verify("{\"max_new_tokens\": 4, \"min_new_tokens\": 5}", 100,
                  "min_new_tokens must be in [0, max_new_tokens(4)], got 5.");
    expect_verify("{\"logit_bias\": {\"50000\": 1}}", 1000, "logit_bias must has keys in [0, 999], got 50000.");
    expect_verify("{\"logit_bias\": {\"-1\": 1}}", 1000, "logit_bias must has keys in [0, 999], got -1.");
    expect_verify("{\"regex\": \"a\", \"ebnf\": \"b\"}", 100, "Only one of regex, json_schema, or ebnf can be set.");
    /* the first failing check wins, in SGLang's order */
    expect_verify("{\"top_p\": 5, \"temperature\": -1}", 100,
                  "temperature must be a non-negative finite number, got -1.");
}

static void expect_parse_error(const char *json, const char *msg)
{
    sampling_params p;
    char err[256] = "";
    int rc = sampling_params_parse(&p, json, strlen(json), err, sizeof err);
    sampling_params_free(&p); /* safe after a failed parse */
    if (rc != -1) fail_msg("parse accepted %s", json);
    if (strstr(err, msg) == NULL) fail_msg("parse %s:\n  got  %s\n  want %s", json, err, msg);
}

static void test_params_parse_errors(void **state)
{
    (void)state;
    expect_parse_error("{\"temperature\": \"hot\"}", "sampling_params.temperature must be a number, got string.");
    expect_parse_error("{\"temperature\": true}", "sampling_params.temperature must be a number, got boolean.");
    expect_parse_error("{\"top_k\": 2.5}", "sampling_params.top_k must be an integer, got number.");
    expect_parse_error("{\"max_new_tokens\": \"10\"}", "sampling_params.max_new_tokens must be an integer, got string.");
    expect_parse_error("{\"ignore_eos\": 1}", "sampling_params.ignore_eos must be a boolean, got integer.");
    expect_parse_error("{\"stop\": 5}", "sampling_params.stop must be a string or a list of strings, got integer.");
    expect_parse_error("{\"stop\": [\"a\", 1]}", "sampling_params.stop[1] must be a string, got integer.");
    expect_parse_error("{\"stop_token_ids\": [1, \"2\"]}", "sampling_params.stop_token_ids[1] must be a token id");
    expect_parse_error("{\"stop_token_ids\": [-4]}", "sampling_params.stop_token_ids[0] must be a token id");
    expect_parse_error("{\"stop_token_ids\": 3}", "sampling_params.stop_token_ids must be a list of integers");
    expect_parse_error("{\"logit_bias\": {\"abc\": 1}}", "invalid literal for int() with base 10: 'abc'");
    expect_parse_error("{\"logit_bias\": {\"5\": 7.7e76}}", "must be a finite number of magnitude at most 1e30");
    expect_parse_error("{\"logit_bias\": {\"1\": \"x\"}}", "sampling_params.logit_bias['1'] must be a number");
    expect_parse_error("{\"logit_bias\": [1]}", "sampling_params.logit_bias must be an object");
    expect_parse_error("{\"json_schema\": {\"type\": \"object\"}}", "sampling_params.json_schema must be a string");
    expect_parse_error("{\"custom_params\": 3}", "sampling_params.custom_params must be an object");
    expect_parse_error("{\"sampling_seed\": 1.5}", "sampling_params.sampling_seed must be an integer");
    expect_parse_error("{\"foo\": 1}", "Unexpected keyword argument 'foo'");
    expect_parse_error("[1, 2]", "sampling_params must be an object, got array.");
    expect_parse_error("{\"temperature\": ", "invalid JSON in sampling_params");
    expect_parse_error("{\"n\": 1, \"n\": 2}", "invalid JSON in sampling_params");
    expect_parse_error("{\"stop\": \"a\\u0000b\"}", "is not allowed");
}

static void test_params_unsupported(void **state)
{
    (void)state;
    /* grammars are accepted (the scheduler compiles them); one at most */
    sampling_params p = parse_ok("{\"json_schema\": \"{}\"}");
    char err[128];
    const char *name = NULL;
    assert_int_equal(sampling_params_verify(&p, 10, err, sizeof err), 0);
    assert_int_equal(sampling_params_check_supported(&p, err, sizeof err), 0);
    assert_string_equal(sampling_params_grammar(&p, &name), "{}");
    assert_string_equal(name, "json_schema");
    sampling_params_free(&p);
    p = parse_ok("{\"regex\": \"a+\", \"ebnf\": \"root ::= \\\"a\\\"\"}");
    assert_int_equal(sampling_params_verify(&p, 10, err, sizeof err), -1);
    assert_string_equal(err, "Only one of regex, json_schema, or ebnf can be set.");
    sampling_params_free(&p);
    p = parse_ok("{\"regex\": \"a+\", \"structural_tag\": \"{}\"}");
    assert_int_equal(sampling_params_verify(&p, 10, err, sizeof err), -1);
    assert_string_equal(err, "Only one of regex, json_schema, ebnf, or structural_tag can be set.");
    sampling_params_free(&p);
    p = parse_ok("{\"structural_tag\": \"{}\"}");
    assert_string_equal(sampling_params_grammar(&p, &name), "{}");
    assert_string_equal(name, "structural_tag");
    sampling_params_free(&p);
    p = parse_ok("{}");
    assert_null(sampling_params_grammar(&p, &name));
    assert_null(name);
    sampling_params_free(&p);
    p = parse_ok("{\"n\": 0}");
    assert_int_equal(sampling_params_check_supported(&p, err, sizeof err), -1);
    sampling_params_free(&p);
}

static void test_py_float(void **state)
{
    (void)state;
    char b[64];
    assert_string_equal(sampling_py_float(0.1, b, sizeof b), "0.1");
    assert_string_equal(sampling_py_float(2.5, b, sizeof b), "2.5");
    assert_string_equal(sampling_py_float(123.0, b, sizeof b), "123.0");
    assert_string_equal(sampling_py_float(-1.0, b, sizeof b), "-1.0");
    assert_string_equal(sampling_py_float(-0.0, b, sizeof b), "-0.0");
    assert_string_equal(sampling_py_float(1e-5, b, sizeof b), "1e-05");
    assert_string_equal(sampling_py_float(0.0001, b, sizeof b), "0.0001");
    assert_string_equal(sampling_py_float(1e16, b, sizeof b), "1e+16");
    assert_string_equal(sampling_py_float(1234567890123456.0, b, sizeof b), "1234567890123456.0");
    assert_string_equal(sampling_py_float(1.5e300, b, sizeof b), "1.5e+300");
    assert_string_equal(sampling_py_float(0.30000000000000004, b, sizeof b), "0.30000000000000004");
    assert_string_equal(sampling_py_float(2.0000001, b, sizeof b), "2.0000001");
    assert_string_equal(sampling_py_float(INFINITY, b, sizeof b), "inf");
}

/* ------------------------------------------------------------ sampler */

typedef struct {
    sampling_params p;
    sampling_state st;
    void *scratch;
    int64_t V;
} smp;

static void smp_init(smp *s, const char *json, int64_t V, const int32_t *eos, int n_eos, uint64_t seed)
{
    s->p = parse_ok(json);
    char err[256];
    if (sampling_params_verify(&s->p, V, err, sizeof err) != 0) fail_msg("%s", err);
    s->V = V;
    assert_int_equal(sampling_state_init(&s->st, &s->p, V, eos, n_eos, seed), 0);
    s->scratch = aligned_alloc(64, (sampling_scratch_bytes(V) + 63) / 64 * 64);
    assert_non_null(s->scratch);
}

static void smp_free(smp *s)
{
    sampling_state_free(&s->st);
    sampling_params_free(&s->p);
    free(s->scratch);
}

static int32_t smp_draw(smp *s, const float *logits)
{
    float *row = malloc((size_t)s->V * sizeof *row);
    memcpy(row, logits, (size_t)s->V * sizeof *row);
    sampling_result r = {0};
    assert_int_equal(sampling_sample(&s->st, row, s->scratch, NULL, &r), 0);
    free(row);
    return r.token;
}

static void test_greedy(void **state)
{
    (void)state;
    float l[6] = {0.5f, 3.0f, -1.0f, 3.0f, 2.9f, 0.0f};
    smp s;
    smp_init(&s, "{\"temperature\": 0}", 6, NULL, 0, 1);
    for (int i = 0; i < 5; i++) assert_int_equal(smp_draw(&s, l), 1); /* first index of the max */
    smp_free(&s);
    smp_init(&s, "{\"temperature\": 0.7, \"top_k\": 1}", 6, NULL, 0, 1);
    for (int i = 0; i < 5; i++) assert_int_equal(smp_draw(&s, l), 1);
    smp_free(&s);
    /* NaN never wins */
    float n[3] = {NAN, 1.0f, 2.0f};
    smp_init(&s, "{\"temperature\": 0}", 3, NULL, 0, 1);
    assert_int_equal(smp_draw(&s, n), 2);
    smp_free(&s);
}

static void test_seed_reproducible(void **state)
{
    (void)state;
    float l[16];
    for (int i = 0; i < 16; i++) l[i] = (float)((i * 7) % 5) * 0.3f;
    int32_t a[64], b[64], c[64];
    smp s;
    smp_init(&s, "{\"temperature\": 1.3, \"top_p\": 0.95}", 16, NULL, 0, 1234);
    for (int i = 0; i < 64; i++) a[i] = smp_draw(&s, l);
    smp_free(&s);
    smp_init(&s, "{\"temperature\": 1.3, \"top_p\": 0.95}", 16, NULL, 0, 1234);
    for (int i = 0; i < 64; i++) b[i] = smp_draw(&s, l);
    smp_free(&s);
    smp_init(&s, "{\"temperature\": 1.3, \"top_p\": 0.95}", 16, NULL, 0, 1235);
    for (int i = 0; i < 64; i++) c[i] = smp_draw(&s, l);
    smp_free(&s);
    assert_memory_equal(a, b, sizeof a);
    assert_memory_not_equal(a, c, sizeof a);
    /* the generator itself: uniform in [0, 1), counter-based */
    assert_true(sampling_uniform(7, 3) == sampling_uniform(7, 3));
    double mean = 0;
    for (int i = 0; i < 10000; i++) {
        double u = sampling_uniform(99, (uint64_t)i);
        assert_true(u >= 0.0 && u < 1.0);
        mean += u;
    }
    assert_true(fabs(mean / 10000 - 0.5) < 0.01);
}

static void test_exp_neg(void **state)
{
    (void)state;
    double worst = 0;
    for (int i = 0; i <= 2000000; i++) {
        float x = -87.0f * (float)i / 2000000.0f;
        double want = exp((double)x), got = sampling_exp_neg(x);
        if (x <= -87.0f) {
            assert_true(got == 0.0);
            continue;
        }
        double rel = fabs(got - want) / want;
        if (rel > worst) worst = rel;
    }
    if (worst > 2e-7) fail_msg("exp_neg relative error %g", worst);
    assert_true(sampling_exp_neg(0.0f) == 1.0f);
    assert_true(sampling_exp_neg(-0.0f) == 1.0f);
    assert_true(sampling_exp_neg(-INFINITY) == 0.0f);
    assert_true(sampling_exp_neg(-1000.0f) == 0.0f);
}

/* Naive reference: full sort, SGLang's joint filter, renormalise. */
static void ref_probs(const float *l, int V, double T, int64_t top_k, double top_p, double min_p, double *out)
{
    double mx = -INFINITY, z = 0;
    for (int i = 0; i < V; i++) mx = fmax(mx, l[i]);
    double *p = malloc((size_t)V * sizeof *p);
    int *ord = malloc((size_t)V * sizeof *ord);
    for (int i = 0; i < V; i++) z += p[i] = exp((l[i] - mx) / T);
    for (int i = 0; i < V; i++) p[i] /= z, ord[i] = i;
    for (int i = 1; i < V; i++) /* insertion sort, desc, stable */
        for (int j = i; j > 0 && p[ord[j]] > p[ord[j - 1]]; j--) {
            int x = ord[j];
            ord[j] = ord[j - 1];
            ord[j - 1] = x;
        }
    double cum = 0, kept = 0;
    for (int r = 0; r < V; r++) {
        int i = ord[r];
        bool keep = r < top_k && (top_p >= 1.0 || cum <= top_p) && p[i] >= min_p * p[ord[0]];
        cum += p[i];
        out[i] = keep ? p[i] : 0;
        kept += out[i];
    }
    for (int i = 0; i < V; i++) out[i] /= kept;
    free(p);
    free(ord);
}

static void check_distribution(const char *json, const float *l, int V, double T, int64_t top_k, double top_p,
                               double min_p, int draws)
{
    smp s;
    smp_init(&s, json, V, NULL, 0, 20260101);
    int *cnt = calloc((size_t)V, sizeof *cnt);
    for (int i = 0; i < draws; i++) cnt[smp_draw(&s, l)]++;
    smp_free(&s);
    double *ex = malloc((size_t)V * sizeof *ex);
    ref_probs(l, V, T, top_k, top_p, min_p, ex);
    double chi2 = 0;
    int df = -1;
    for (int i = 0; i < V; i++) {
        if (ex[i] == 0) {
            if (cnt[i] != 0) fail_msg("%s: token %d drawn %d times but filtered out", json, i, cnt[i]);
            continue;
        }
        double e = ex[i] * draws;
        chi2 += (cnt[i] - e) * (cnt[i] - e) / e;
        df++;
    }
    /* p = 0.0001 critical values for df 1..7 */
    static const double crit[20] = {0,     15.14, 18.42, 21.11, 23.51, 25.74, 27.86, 29.88, 31.83, 33.72,
                                    35.56, 37.37, 39.13, 40.87, 42.58, 44.26, 45.92, 47.57, 49.19, 50.80};
    if (df >= 20) fail_msg("vocabulary too large for the chi2 table");
    if (df > 0 && chi2 > crit[df]) fail_msg("%s: chi2 %.2f with df %d", json, chi2, df);
    free(cnt);
    free(ex);
}

static void test_distribution(void **state)
{
    (void)state;
    const float l[8] = {1.0f, 2.0f, 0.5f, -1.0f, 3.0f, 0.0f, 2.5f, -0.5f};
    check_distribution("{\"temperature\": 0.8}", l, 8, 0.8, 8, 1.0, 0, 40000);
    /* 19 tokens: several blocks of 8 plus a tail in the dense draw */
    const float l19[19] = {0.3f, -0.2f, 1.1f, 0.0f, 0.7f, -1.0f, 0.2f, 0.9f, 0.4f, -0.5f,
                           1.3f, 0.1f, -0.3f, 0.6f, 0.8f, -0.8f, 0.5f, 1.0f, -0.1f};
    check_distribution("{\"temperature\": 1.0}", l19, 19, 1.0, 19, 1.0, 0, 60000);
    check_distribution("{\"temperature\": 0.9, \"min_p\": 0.4}", l19, 19, 0.9, 19, 1.0, 0.4, 60000);
    check_distribution("{\"temperature\": 1.5, \"top_k\": 3}", l, 8, 1.5, 3, 1.0, 0, 40000);
    check_distribution("{\"temperature\": 1.0, \"top_p\": 0.8}", l, 8, 1.0, 8, 0.8, 0, 40000);
    check_distribution("{\"temperature\": 1.2, \"min_p\": 0.2}", l, 8, 1.2, 8, 1.0, 0.2, 40000);
    check_distribution("{\"temperature\": 1.0, \"top_k\": 4, \"min_p\": 0.3}", l, 8, 1.0, 4, 1.0, 0.3, 40000);
    check_distribution("{\"temperature\": 1.0, \"top_k\": 4, \"min_p\": 0.3}", l, 8, 1.0, 4, 1.0, 0.3, 40000);
    check_distribution("{\"temperature\": 0.9, \"top_k\": 5, \"top_p\": 0.9, \"min_p\": 0.05}", l, 8, 0.9, 5, 0.9,
                       0.05, 40000);
}

/* ------------------------------------------- speculative verification */

/* SGLang's accept rule on fixed probabilities and coins. */
static void test_spec_accept_rule(void **state)
{
    (void)state;
    struct {
        double p, coin, ts, ta;
        bool want;
    } c[] = {
        {0.3, 0.29, 1, 1, true},      /* exact rule: coin <= p */
        {0.3, 0.30, 1, 1, true},      /* <=, as the kernel */
        {0.3, 0.31, 1, 1, false},
        {1.0, 0.999999, 1, 1, true},  /* p = 1: always */
        {0.3, 0.99, 0.25, 1, true},   /* p >= threshold_single */
        {0.25, 0.99, 0.25, 1, true},  /* >= */
        {0.2, 0.99, 0.25, 1, false},
        {0.3, 0.55, 1, 0.5, true},    /* coin <= p / threshold_acc = 0.6 */
        {0.3, 0.65, 1, 0.5, false},
        {0.6, 0.999, 1, 0.5, true},   /* p / acc > 1: always */
        {0.0, 0.0, 0.01, 0.01, false},/* p = 0 (masked): never, even at coin 0 */
        {1e-12, 0.999, 1, 1e-12, false}, /* acc capped at 1e-9: 1e-12 / 1e-9 = 0.001 */
        {1e-12, 0.0005, 1, 1e-12, true},
        {0.05, 0.9, 0.01, 1, true},   /* the measured setting: any p >= 0.01 */
        {0.009, 0.9, 0.01, 1, false},
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++)
        if (sampling_spec_accept(c[i].p, c[i].coin, c[i].ts, c[i].ta) != c[i].want)
            fail_msg("case %zu: p %g coin %g single %g acc %g: want %d", i, c[i].p, c[i].coin, c[i].ts, c[i].ta,
                     c[i].want);
    /* at the defaults (1, 1) it is the exact rejection rule: accept iff coin <= p */
    for (int a = 0; a <= 100; a++)
        for (int b = 0; b < 100; b++) {
            double p = a / 100.0, coin = b / 100.0 + 0.005;
            assert_int_equal(sampling_spec_accept(p, coin, 1.0, 1.0), p > 0 && coin <= p);
        }
}

/* sampling_verify_processed over many draws: the token histogram against
 * the rule's law: P(draft) = a = min(1, q_d / acc) (1 when q_d >= single,
 * 0 when q_d = 0), the rest the residual q_i / (1 - q_d).  At (1, 1) that
 * law is q itself (exact rejection sampling). */
static void check_verify(const char *json, const float *l, int V, double T, int64_t top_k, double top_p, double min_p,
                         int32_t d, double ts, double ta, int draws, double *accept_rate)
{
    smp s;
    smp_init(&s, json, V, NULL, 0, 777);
    int *cnt = calloc((size_t)V, sizeof *cnt);
    for (int i = 0; i < draws; i++) {
        sampling_result r = {0};
        uint64_t before = s.st.n_draws;
        assert_int_equal(sampling_verify_processed(&s.st, l, s.scratch, d, ts, ta, NULL, &r), 0);
        assert_true(r.token >= 0 && r.token < V);
        /* one coin for an accept, a second number for a reject's residual */
        assert_int_equal(s.st.n_draws - before, r.token == d ? 1 : 2);
        cnt[r.token]++;
    }
    smp_free(&s);
    double *q = malloc((size_t)V * sizeof *q), *ex = malloc((size_t)V * sizeof *ex);
    ref_probs(l, V, T, top_k, top_p, min_p, q);
    double a = q[d] <= 0 ? 0 : q[d] >= ts ? 1 : fmin(1.0, q[d] / ta);
    for (int i = 0; i < V; i++) ex[i] = i == d ? a : q[d] < 1 ? (1 - a) * q[i] / (1 - q[d]) : 0;
    double chi2 = 0;
    int df = -1;
    for (int i = 0; i < V; i++) {
        if (ex[i] < 1e-12) {
            if (cnt[i] != 0) fail_msg("%s d %d: token %d drawn %d times, expected never", json, d, i, cnt[i]);
            continue;
        }
        double e = ex[i] * draws;
        chi2 += (cnt[i] - e) * (cnt[i] - e) / e;
        df++;
    }
    static const double crit[20] = {0,     15.14, 18.42, 21.11, 23.51, 25.74, 27.86, 29.88, 31.83, 33.72,
                                    35.56, 37.37, 39.13, 40.87, 42.58, 44.26, 45.92, 47.57, 49.19, 50.80};
    if (df >= 20) fail_msg("vocabulary too large for the chi2 table");
    if (df > 0 && chi2 > crit[df]) fail_msg("%s d %d single %g acc %g: chi2 %.2f with df %d", json, d, ts, ta, chi2, df);
    if (accept_rate) *accept_rate = (double)cnt[d] / draws;
    free(cnt);
    free(q);
    free(ex);
}

static void test_spec_verify(void **state)
{
    (void)state;
    const float l[8] = {1.0f, 2.0f, 0.5f, -1.0f, 3.0f, 0.0f, 2.5f, -0.5f};
    double exact, relaxed, single;
    /* defaults: the output law is q (as plain sampling), for a likely and an unlikely draft */
    check_verify("{\"temperature\": 0.8}", l, 8, 0.8, 8, 1.0, 0, 4, 1.0, 1.0, 40000, &exact);
    check_verify("{\"temperature\": 0.8}", l, 8, 0.8, 8, 1.0, 0, 3, 1.0, 1.0, 40000, NULL);
    /* threshold_acc 0.5: the draft taken twice as often (q_6 ~ 0.29 at T 1) */
    check_verify("{\"temperature\": 1.0}", l, 8, 1.0, 8, 1.0, 0, 6, 1.0, 1.0, 40000, &exact);
    check_verify("{\"temperature\": 1.0}", l, 8, 1.0, 8, 1.0, 0, 6, 1.0, 0.5, 40000, &relaxed);
    assert_true(relaxed > 1.8 * exact && relaxed < 2.2 * exact);
    /* threshold_single 0.01: any draft of q >= 0.01 always */
    check_verify("{\"temperature\": 1.0}", l, 8, 1.0, 8, 1.0, 0, 5, 0.01, 1.0, 20000, &single);
    assert_true(single == 1.0);
    /* the ranked paths (top-k, top-p, min-p): a draft inside and one outside the kept set */
    check_verify("{\"temperature\": 1.0, \"top_k\": 4, \"min_p\": 0.3}", l, 8, 1.0, 4, 1.0, 0.3, 0, 1.0, 0.4, 40000,
                 NULL);
    check_verify("{\"temperature\": 1.0, \"top_k\": 4, \"min_p\": 0.3}", l, 8, 1.0, 4, 1.0, 0.3, 3, 0.01, 0.01, 20000,
                 &single);
    assert_true(single == 0.0); /* filtered out: q = 0, never taken */
    check_verify("{\"temperature\": 0.9, \"top_p\": 0.8}", l, 8, 0.9, 8, 0.8, 0, 1, 0.5, 0.7, 40000, NULL);
    check_verify("{\"temperature\": 1.2, \"min_p\": 0.2}", l, 8, 1.2, 8, 1.0, 0.2, 0, 1.0, 1.0, 40000, NULL);
    /* a masked draft (-inf, as the grammar mask) is never taken */
    float m[8];
    memcpy(m, l, sizeof m);
    m[4] = -INFINITY;
    check_verify("{\"temperature\": 1.0}", m, 8, 1.0, 8, 1.0, 0, 4, 0.01, 0.01, 20000, &single);
    assert_true(single == 0.0);

    /* greedy: the argmax whatever the thresholds, no draw used */
    smp s;
    smp_init(&s, "{\"temperature\": 0}", 8, NULL, 0, 5);
    sampling_result r = {0};
    assert_int_equal(sampling_verify_processed(&s.st, l, s.scratch, 6, 0.01, 0.01, NULL, &r), 0);
    assert_int_equal(r.token, 4);
    assert_int_equal(s.st.n_draws, 0);
    /* bad draft ids */
    assert_int_equal(sampling_verify_processed(&s.st, l, s.scratch, -1, 1.0, 1.0, NULL, &r), -1);
    assert_int_equal(sampling_verify_processed(&s.st, l, s.scratch, 8, 1.0, 1.0, NULL, &r), -1);
    smp_free(&s);

    /* a seed replays; the chosen token's logprob is the plain sampler's */
    int32_t a1[64], a2[64];
    for (int k = 0; k < 2; k++) {
        smp_init(&s, "{\"temperature\": 1.0}", 8, NULL, 0, 99);
        for (int i = 0; i < 64; i++) {
            sampling_logprob_req lq = {.want = true};
            assert_int_equal(sampling_verify_processed(&s.st, l, s.scratch, 6, 0.2, 0.5, &lq, &r), 0);
            (k ? a2 : a1)[i] = r.token;
            double z = 0;
            for (int j = 0; j < 8; j++) z += exp(l[j] - 3.0);
            assert_true(fabs(r.logprob - (l[r.token] - 3.0 - log(z))) < 1e-5);
        }
        smp_free(&s);
    }
    assert_memory_equal(a1, a2, sizeof a1);
}

/* Top-p over a flat distribution keeps hundreds of tokens: exercises the
 * growing candidate window; compare the kept set with the reference. */
static void test_wide_top_p(void **state)
{
    (void)state;
    int V = 5000;
    float *l = malloc((size_t)V * sizeof *l);
    uint64_t x = 7;
    for (int i = 0; i < V; i++) {
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
        l[i] = (float)((x >> 40) % 1000) / 500.0f; /* many ties, flat */
    }
    double *ex = malloc((size_t)V * sizeof *ex);
    ref_probs(l, V, 1.0, V, 0.5, 0, ex);
    smp s;
    smp_init(&s, "{\"top_p\": 0.5}", V, NULL, 0, 5);
    int distinct = 0;
    char *seen = calloc((size_t)V, 1);
    for (int i = 0; i < 3000; i++) {
        int32_t t = smp_draw(&s, l);
        if (ex[t] == 0) {
            /* a token tied with the boundary may be ranked either way; allow
             * only exact ties with a kept token */
            bool tie = false;
            for (int j = 0; j < V && !tie; j++) tie = ex[j] > 0 && l[j] == l[t];
            if (!tie) fail_msg("token %d (logit %f) outside the top-p set", t, l[t]);
        }
        if (!seen[t]) seen[t] = 1, distinct++;
    }
    assert_true(distinct > 300);
    smp_free(&s);
    free(seen);
    free(ex);
    free(l);
}

/* top-k alone (no sort path): every draw is among the k best and all k
 * show up, over a vocabulary large enough for quickselect to matter. */
static void test_top_k_set(void **state)
{
    (void)state;
    int V = 1000;
    float l[1000];
    uint64_t x = 3;
    for (int i = 0; i < V; i++) {
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
        l[i] = (float)((x >> 33) % 100000) / 1000.0f;
    }
    int best[10]; /* the 10 best by selection */
    for (int k = 0; k < 10; k++) {
        int b = -1;
        for (int i = 0; i < V; i++) {
            bool used = false;
            for (int j = 0; j < k; j++) used |= best[j] == i;
            if (!used && (b < 0 || l[i] > l[b])) b = i;
        }
        best[k] = b;
    }
    smp s;
    smp_init(&s, "{\"temperature\": 50.0, \"top_k\": 10}", V, NULL, 0, 77);
    int hits[10] = {0};
    for (int d = 0; d < 2000; d++) {
        int32_t t = smp_draw(&s, l);
        int k = 0;
        while (k < 10 && best[k] != t) k++;
        if (k == 10) fail_msg("draw %d: token %d is not among the top 10", d, t);
        hits[k]++;
    }
    for (int k = 0; k < 10; k++) assert_true(hits[k] > 50);
    smp_free(&s);
}

/* Processed logits written back to the row. */
static void processed(smp *s, float *row)
{
    sampling_result r = {0};
    assert_int_equal(sampling_sample(&s->st, row, s->scratch, NULL, &r), 0);
}

static void test_penalties(void **state)
{
    (void)state;
    const float l[5] = {2.0f, 1.0f, 0.5f, -1.0f, 0.0f};
    float row[5];
    smp s;
    /* frequency / presence over generated tokens (OpenAI semantics) */
    smp_init(&s, "{\"temperature\": 0, \"frequency_penalty\": 0.5, \"presence_penalty\": 0.3}", 5, NULL, 0, 1);
    assert_int_equal(sampling_state_accept(&s.st, 1), 0);
    assert_int_equal(sampling_state_accept(&s.st, 1), 0);
    assert_int_equal(sampling_state_accept(&s.st, 2), 0);
    memcpy(row, l, sizeof row);
    processed(&s, row);
    assert_float_equal(row[0], 2.0f, 1e-6);
    assert_float_equal(row[1], 1.0f - 2 * 0.5f - 0.3f, 1e-6);
    assert_float_equal(row[2], 0.5f - 0.5f - 0.3f, 1e-6);
    assert_float_equal(row[3], -1.0f, 1e-6);
    assert_int_equal(sampling_state_accept(&s.st, 99), -1); /* out of vocabulary */
    smp_free(&s);

    /* repetition (HF: prompt + output; positive / rp, negative * rp),
     * after the additive penalties */
    smp_init(&s, "{\"temperature\": 0, \"repetition_penalty\": 1.5, \"frequency_penalty\": 1.0}", 5, NULL, 0, 1);
    int32_t prompt[3] = {0, 3, 0};
    assert_int_equal(sampling_state_add_prompt(&s.st, prompt, 3), 0);
    assert_int_equal(sampling_state_accept(&s.st, 2), 0);
    memcpy(row, l, sizeof row);
    processed(&s, row);
    assert_float_equal(row[0], 2.0f / 1.5f, 1e-6);
    assert_float_equal(row[1], 1.0f, 1e-6);
    assert_float_equal(row[2], (0.5f - 1.0f) * 1.5f, 1e-6);
    assert_float_equal(row[3], -1.0f * 1.5f, 1e-6);
    assert_float_equal(row[4], 0.0f, 1e-6);
    smp_free(&s);

    /* logit_bias */
    smp_init(&s, "{\"temperature\": 0, \"logit_bias\": {\"3\": 5.0, \"0\": -100}}", 5, NULL, 0, 1);
    memcpy(row, l, sizeof row);
    processed(&s, row);
    assert_float_equal(row[3], 4.0f, 1e-6);
    assert_float_equal(row[0], -98.0f, 1e-6);
    memcpy(row, l, sizeof row);
    sampling_result r = {0};
    assert_int_equal(sampling_sample(&s.st, row, s.scratch, NULL, &r), 0);
    assert_int_equal(r.token, 3);
    smp_free(&s);
}

/* sampling_sample == sampling_apply_processors then
 * sampling_sample_processed: same processed row, token, draw counter and
 * logprobs, greedy and sampled, over a run of accepted tokens. */
static void test_split_processors(void **state)
{
    (void)state;
    const char *cfgs[] = {
        "{\"temperature\": 0, \"frequency_penalty\": 0.4, \"logit_bias\": {\"7\": 2.5}}",
        "{\"temperature\": 0.9, \"top_p\": 0.8, \"top_k\": 20, \"presence_penalty\": 0.3, \"repetition_penalty\": 1.2}",
        "{\"temperature\": 1.3, \"min_p\": 0.05, \"min_new_tokens\": 3, \"logit_bias\": {\"1\": -4}}",
    };
    enum { V = 97 };
    int32_t eos[1] = {1};
    for (size_t c = 0; c < sizeof cfgs / sizeof cfgs[0]; c++) {
        smp a, b;
        smp_init(&a, cfgs[c], V, eos, 1, 42);
        smp_init(&b, cfgs[c], V, eos, 1, 42);
        uint64_t g = 12345 + c;
        for (int step = 0; step < 24; step++) {
            float la[V], lb[V];
            for (int i = 0; i < V; i++) {
                g = g * 6364136223846793005ull + 1442695040888963407ull;
                la[i] = lb[i] = (float)((int)(g >> 40) % 2000) / 250.0f - 4.0f;
            }
            int32_t ta[3], tb[3];
            float pa[3], pb[3];
            sampling_logprob_req lp = {.want = true, .top_n = 3};
            sampling_result ra = {.top_ids = ta, .top_logprobs = pa}, rb = {.top_ids = tb, .top_logprobs = pb};
            assert_int_equal(sampling_sample(&a.st, la, a.scratch, &lp, &ra), 0);
            assert_int_equal(sampling_apply_processors(&b.st, lb), 0);
            assert_int_equal(sampling_sample_processed(&b.st, lb, b.scratch, &lp, &rb), 0);
            assert_memory_equal(la, lb, sizeof la);
            assert_int_equal(ra.token, rb.token);
            assert_true(ra.logprob == rb.logprob || (isnan(ra.logprob) && isnan(rb.logprob)));
            assert_int_equal(ra.n_top, rb.n_top);
            assert_memory_equal(ta, tb, sizeof ta);
            assert_int_equal(a.st.n_draws, b.st.n_draws);
            assert_int_equal(sampling_state_accept(&a.st, ra.token), 0);
            assert_int_equal(sampling_state_accept(&b.st, rb.token), 0);
        }
        smp_free(&a);
        smp_free(&b);
    }
}

static void test_min_new_tokens(void **state)
{
    (void)state;
    const float l[5] = {0.0f, 1.0f, 0.5f, 0.2f, 9.0f}; /* eos (4) would win */
    int32_t eos = 4;
    smp s;
    smp_init(&s, "{\"temperature\": 0, \"min_new_tokens\": 2, \"stop_token_ids\": [1]}", 5, &eos, 1, 1);
    float row[5];
    memcpy(row, l, sizeof row);
    processed(&s, row);
    assert_true(isinf(row[4]) && row[4] < 0);
    assert_true(isinf(row[1]) && row[1] < 0); /* stop_token_ids too */
    assert_int_equal(smp_draw(&s, l), 2);
    sampling_state_accept(&s.st, 2);
    assert_int_equal(smp_draw(&s, l), 2);
    sampling_state_accept(&s.st, 2);
    assert_int_equal(smp_draw(&s, l), 4); /* reached: eos allowed again */
    smp_free(&s);
}

static void test_logprobs(void **state)
{
    (void)state;
    const float l[5] = {1.0f, 3.0f, 0.0f, 2.0f, -1.0f};
    double lse1 = 0, lse2 = 0;
    for (int i = 0; i < 5; i++) lse1 += exp(l[i]), lse2 += exp(l[i] / 0.5);
    lse1 = log(lse1);
    lse2 = log(lse2);
    int32_t ids[3] = {4, 0, 77}, top_ids[3];
    float top_lp[3], ids_lp[3];
    sampling_logprob_req lp = {.want = true, .top_n = 3, .ids = ids, .n_ids = 3};
    float row[5];
    smp s;

    /* greedy: log_softmax of the logits */
    smp_init(&s, "{\"temperature\": 0}", 5, NULL, 0, 1);
    memcpy(row, l, sizeof row);
    sampling_result r = {.top_ids = top_ids, .top_logprobs = top_lp, .ids_logprobs = ids_lp};
    assert_int_equal(sampling_sample(&s.st, row, s.scratch, &lp, &r), 0);
    assert_int_equal(r.token, 1);
    assert_float_equal(r.logprob, 3.0 - lse1, 1e-5);
    assert_int_equal(r.n_top, 3);
    assert_int_equal(top_ids[0], 1);
    assert_int_equal(top_ids[1], 3);
    assert_int_equal(top_ids[2], 0);
    assert_float_equal(top_lp[1], 2.0 - lse1, 1e-5);
    assert_float_equal(ids_lp[0], -1.0 - lse1, 1e-5);
    assert_float_equal(ids_lp[1], 1.0 - lse1, 1e-5);
    assert_true(isnan(ids_lp[2]));
    smp_free(&s);

    /* sampled: after temperature */
    smp_init(&s, "{\"temperature\": 0.5}", 5, NULL, 0, 3);
    memcpy(row, l, sizeof row);
    assert_int_equal(sampling_sample(&s.st, row, s.scratch, &lp, &r), 0);
    assert_float_equal(r.logprob, l[r.token] / 0.5 - lse2, 1e-5);
    assert_float_equal(top_lp[0], 3.0 / 0.5 - lse2, 1e-5);
    assert_float_equal(ids_lp[1], 1.0 / 0.5 - lse2, 1e-5);
    /* original: before temperature */
    sampling_logprob_req lo = lp;
    lo.original = true;
    memcpy(row, l, sizeof row);
    assert_int_equal(sampling_sample(&s.st, row, s.scratch, &lo, &r), 0);
    assert_float_equal(top_lp[0], 3.0 - lse1, 1e-5);
    smp_free(&s);

    /* top_p: renormalised over the top-p set, -FLT_MAX outside */
    smp_init(&s, "{\"temperature\": 1.0, \"top_p\": 0.7}", 5, NULL, 0, 3);
    memcpy(row, l, sizeof row);
    assert_int_equal(sampling_sample(&s.st, row, s.scratch, &lp, &r), 0);
    /* probs: 3.0 -> .636, 2.0 -> .234 (mass before .636 <= .7: kept),
     * 1.0 -> mass before .870 > .7: out */
    double p1 = exp(3.0 - lse1), p3 = exp(2.0 - lse1);
    assert_float_equal(top_lp[0], log(p1 / (p1 + p3)), 1e-5);
    assert_float_equal(top_lp[1], log(p3 / (p1 + p3)), 1e-5);
    assert_true(top_lp[2] == -FLT_MAX);
    assert_true(ids_lp[0] == -FLT_MAX);
    assert_true(r.token == 1 || r.token == 3);
    smp_free(&s);
}

static const float *g_sort_logits;
static int by_logit_desc(const void *a, const void *b)
{
    float x = g_sort_logits[*(const int *)a], y = g_sort_logits[*(const int *)b];
    return x > y ? -1 : x < y ? 1 : 0;
}

static void test_input_logprobs(void **state)
{
    (void)state;
    const float l[6] = {0.5f, -2.0f, 3.0f, NAN, 1.0f, -INFINITY};
    double lse = 0;
    for (int i = 0; i < 6; i++)
        if (isfinite(l[i])) lse += exp(l[i]);
    lse = log(lse);
    void *scratch = malloc(sampling_scratch_bytes(6));
    int32_t top_ids[3], ids[2] = {5, 9};
    float top_lp[3], ids_lp[2];
    sampling_logprob_req lp = {.top_n = 3, .ids = ids, .n_ids = 2};
    sampling_result r = {.top_ids = top_ids, .top_logprobs = top_lp, .ids_logprobs = ids_lp};
    float copy[6];
    memcpy(copy, l, sizeof copy);
    assert_int_equal(sampling_input_logprobs(l, 6, 4, scratch, &lp, &r), 0);
    assert_memory_equal(copy, l, sizeof copy); /* the row is left alone */
    assert_int_equal(r.token, 4);
    assert_float_equal(r.logprob, 1.0 - lse, 1e-5);
    assert_int_equal(r.n_top, 3);
    assert_int_equal(top_ids[0], 2);
    assert_int_equal(top_ids[1], 4);
    assert_int_equal(top_ids[2], 0);
    assert_float_equal(top_lp[0], 3.0 - lse, 1e-5);
    assert_float_equal(top_lp[2], 0.5 - lse, 1e-5);
    assert_true(isinf(ids_lp[0]) && ids_lp[0] < 0);
    assert_true(isnan(ids_lp[1]));
    assert_int_equal(sampling_input_logprobs(l, 6, 3, scratch, NULL, &r), 0);
    assert_true(isinf(r.logprob) && r.logprob < 0); /* NaN logit: -inf */
    free(scratch);
}

/* A 150k vocabulary with top-k 50 and top-p 0.9: every draw lands in the
 * reference's kept set. */
static void test_big_vocab(void **state)
{
    (void)state;
    int V = 150000;
    float *l = malloc((size_t)V * sizeof *l);
    uint64_t x = 11;
    for (int i = 0; i < V; i++) {
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
        l[i] = (float)((double)(x >> 11) * 0x1.0p-53 * 12.0 - 6.0);
    }
    double *ex = malloc((size_t)V * sizeof *ex);
    smp s;
    smp_init(&s, "{\"temperature\": 0.7, \"top_k\": 50, \"top_p\": 0.9}", V, NULL, 0, 9);
    /* reference kept set: full sort of the vocabulary by logit */
    int *ord = malloc((size_t)V * sizeof *ord);
    for (int i = 0; i < V; i++) ord[i] = i;
    g_sort_logits = l;
    qsort(ord, (size_t)V, sizeof *ord, by_logit_desc);
    int best[50];
    memcpy(best, ord, sizeof best);
    free(ord);
    float sub[50];
    for (int k = 0; k < 50; k++) sub[k] = l[best[k]];
    /* top-p mass needs the full normaliser */
    double mx = l[best[0]], z = 0;
    for (int i = 0; i < V; i++) z += exp((l[i] - mx) / 0.7);
    double cum = 0;
    int kept = 0;
    for (int k = 0; k < 50; k++) {
        if (cum > 0.9) break;
        cum += exp((sub[k] - mx) / 0.7) / z;
        kept++;
    }
    for (int i = 0; i < 200; i++) {
        int32_t t = smp_draw(&s, l);
        bool ok = false;
        for (int k = 0; k < kept && !ok; k++) ok = best[k] == t;
        if (!ok) fail_msg("draw %d: token %d not among the %d kept", i, t, kept);
    }
    smp_free(&s);
    free(ex);
    free(l);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_params_defaults),
        cmocka_unit_test(test_params_full),
        cmocka_unit_test(test_params_greedy_normalisation),
        cmocka_unit_test(test_params_verify_messages),
        cmocka_unit_test(test_params_parse_errors),
        cmocka_unit_test(test_params_unsupported),
        cmocka_unit_test(test_py_float),
        cmocka_unit_test(test_exp_neg),
        cmocka_unit_test(test_greedy),
        cmocka_unit_test(test_seed_reproducible),
        cmocka_unit_test(test_distribution),
        cmocka_unit_test(test_wide_top_p),
        cmocka_unit_test(test_top_k_set),
        cmocka_unit_test(test_penalties),
        cmocka_unit_test(test_split_processors),
        cmocka_unit_test(test_min_new_tokens),
        cmocka_unit_test(test_logprobs),
        cmocka_unit_test(test_input_logprobs),
        cmocka_unit_test(test_big_vocab),
        cmocka_unit_test(test_spec_accept_rule),
        cmocka_unit_test(test_spec_verify),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
