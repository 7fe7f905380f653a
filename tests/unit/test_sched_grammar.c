/* test_sched_grammar — constrained decoding in the scheduler, on
 * TinyStories-656K with its tokenizer and the real grammar engine:
 *
 * - a regex request's output matches and ends on eos (finish stop with
 *   the eos as matched token, as SGLang's grammar finish);
 * - the grammar queue: a slow compile keeps the request in it
 *   (n_grammar_queue counts it, the scheduler is not blocked: an
 *   unconstrained request submitted after it finishes first); a compile
 *   slower than the timeout ends the request with SGLang's timeout
 *   message (400); a bad grammar with "Failed to compile regex grammar";
 *   an abort reaches a request in the grammar queue;
 * - "grammar after": the mask starts only after the output holds the
 *   given token sequence (logit_bias forces that token first);
 * - drafts the grammar forbids are cut before the forward (the output is
 *   the same as without drafts);
 * - the budget's end (grammar_close.c): with few tokens left the output
 *   still completes the grammar, and the lazy check (only the sampled
 *   token is checked, sched_grammar_mask) gives greedy the same output as
 *   the full narrowed mask (SGLC_GRAMMAR_CLOSE_FULL=1); temperature
 *   sampling by rejection completes too;
 * - grammar_structural_tag_to_ebnf / grammar_ebnf_prefix_rules, walked
 *   byte by byte through the engine. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "grammar/grammar.h"
#include "grammar/grammar_queue.h"
#include "grammar/grammar_serve.h"
#include "kernels/kernels.h"
#include "model/config.h"
#include "model/model.h"
#include "sched/sched.h"
#include "tokenizer/tokenizer.h"
#include "util/log.h"

static model *g_model;
static tok_tokenizer *g_tok;
static grammar_vocab *g_vocab;
static grammar_json_opts g_json = {NULL, 0, 0};

static int setup(void **state)
{
    (void)state;
    kernels_init(NULL);
    log_set_level(getenv("SGLC_TEST_DEBUG") ? LOG_DEBUG : LOG_ERROR);
    const char *sh = getenv("SGLC_SHARED");
    char dir[512], err[1024];
    snprintf(dir, sizeof dir, "%s/models/TinyStories-656K", sh && *sh ? sh : "../shared");
    if (access(dir, R_OK) != 0) return 0;
    model_load_opts o = {.model_path = dir, .dtype = -1};
    g_model = model_load(&o, err, sizeof err);
    g_tok = tok_load_dir(dir, NULL, err, sizeof err);
    if (!g_model || !g_tok) return 0;
    const model_config *c = model_get_config(g_model);
    int32_t ends[MODEL_MAX_EOS];
    for (int i = 0; i < c->n_eos; i++) ends[i] = c->eos_token_ids[i];
    g_vocab = grammar_vocab_from_tok(g_tok, c->vocab_size, ends, (size_t)c->n_eos);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    grammar_vocab_free(g_vocab);
    tok_destroy(g_tok);
    model_free(g_model);
    return 0;
}

#define NEED_MODEL()                                                                   \
    do {                                                                               \
        if (!g_model || !g_tok || !g_vocab) {                                          \
            print_message("TinyStories-656K not found under $SGLC_SHARED: skipped\n"); \
            skip();                                                                    \
        }                                                                              \
    } while (0)

/* a compile function that can be slowed down (the grammar thread) */
static int g_slow_ms;
static void *slow_compile(void *ctx, const grammar_key *k, size_t *bytes, char *err, size_t errlen)
{
    if (g_slow_ms && k->len >= 4 && !memcmp(k->text, "slow", 4)) usleep((useconds_t)g_slow_ms * 1000);
    if (k->len >= 4 && !memcmp(k->text, "slow", 4)) {
        grammar_key k2 = *k;
        k2.text += 4, k2.len -= 4;
        return grammar_compile_key(ctx, &k2, bytes, err, errlen);
    }
    return grammar_compile_key(ctx, k, bytes, err, errlen);
}

typedef struct {
    sched *s;
    grammar_queue *q;
} rig;

static rig mk(double timeout_s)
{
    rig r;
    sched_args a;
    sched_args_init(&a);
    a.max_total_tokens = 8192;
    a.threads = 1;
    a.random_seed = 7;
    char err[512];
    r.s = sched_create(g_model, &a, err, sizeof err);
    if (!r.s) fail_msg("sched_create: %s", err);
    grammar_queue_opts qo = {.n_threads = 1, .compile = slow_compile, .compile_ctx = &g_json,
                             .free_value = grammar_free_value};
    r.q = grammar_queue_create(&qo);
    assert_non_null(r.q);
    sched_set_grammar(r.s, r.q, g_vocab, timeout_s);
    return r;
}

static void rig_free(rig *r)
{
    sched_destroy(r->s);
    grammar_queue_destroy(r->q);
}

#define MAXT 128
typedef struct {
    uint64_t id;
    int32_t ids[MAXT];
    int n;
    bool done;
    sched_finish_kind finish;
    int32_t finish_token;
    int status;
    char msg[512];
    int order;                   /* finish order */
} result;

static int g_order;

static void drain(sched *s, result *res, int n)
{
    sched_event *e;
    while ((e = sched_poll(s))) {
        result *r = NULL;
        for (int i = 0; i < n; i++)
            if (res[i].id == e->id) r = &res[i];
        assert_non_null(r);
        for (int k = 0; k < e->n_ids && r->n < MAXT; k++) r->ids[r->n++] = e->ids[k];
        if (e->kind == SCHED_EV_FINISH) {
            r->done = true;
            r->finish = e->finish;
            r->finish_token = e->finish_token;
            r->status = e->http_status;
            r->order = ++g_order;
            snprintf(r->msg, sizeof r->msg, "%s", e->finish_str ? e->finish_str : "");
        }
        sched_event_free(e);
    }
}

static sched_req_spec spec(const char *prompt_text, int max_new, uint64_t seed)
{
    sched_req_spec sp;
    sched_req_spec_init(&sp);
    tok_ids ids = {0};
    tok_encode(g_tok, prompt_text, strlen(prompt_text), true, &ids);
    sp.input_ids = ids.ids;
    sp.n_input = (int64_t)ids.n;
    sp.params.has_max_new_tokens = true;
    sp.params.max_new_tokens = max_new;
    sp.params.has_sampling_seed = true;
    sp.params.sampling_seed = seed;
    return sp;
}

static char *text_of(const result *r, bool drop_last)
{
    char *out = NULL;
    tok_decode_opts o = {.skip_special_tokens = true};
    tok_decode(g_tok, r->ids, (size_t)(r->n - (drop_last ? 1 : 0)), &o, &out, NULL);
    return out;
}

static bool all_digits(const char *s, size_t n)
{
    if (strlen(s) != n) return false;
    for (size_t i = 0; i < n; i++)
        if (s[i] < '0' || s[i] > '9') return false;
    return true;
}

static void run(rig *r, result *res, int n)
{
    assert_int_equal(sched_run_until_idle(r->s), 0);
    drain(r->s, res, n);
}

static void test_regex_eos_finish(void **state)
{
    (void)state;
    NEED_MODEL();
    rig r = mk(60);
    result res[3];
    memset(res, 0, sizeof res);
    for (int i = 0; i < 3; i++) {
        sched_req_spec sp = spec("Once upon a time", 64, (uint64_t)i + 1);
        sp.params.regex = strdup("[0-9]{4}");
        res[i].id = sched_submit(r.s, &sp);
    }
    run(&r, res, 3);
    const model_config *c = model_get_config(g_model);
    for (int i = 0; i < 3; i++) {
        assert_true(res[i].done);
        assert_int_equal(res[i].finish, SCHED_FINISH_STOP_TOKEN);
        assert_int_equal(res[i].finish_token, c->eos_token_ids[0]);
        assert_int_equal(res[i].ids[res[i].n - 1], c->eos_token_ids[0]);
        char *t = text_of(&res[i], true);
        assert_true(all_digits(t, 4));
        free(t);
    }
    rig_free(&r);
}

static void test_queue_not_blocking_and_timeout(void **state)
{
    (void)state;
    NEED_MODEL();
    /* slow compile (300 ms) under a 5 s timeout: waits in the grammar
     * queue while an unconstrained request runs to its end */
    g_slow_ms = 300;
    rig r = mk(5);
    result res[2];
    memset(res, 0, sizeof res);
    sched_req_spec a = spec("The cat", 8, 1);
    a.params.regex = strdup("slow[a-z]{3}");
    res[0].id = sched_submit(r.s, &a);
    sched_req_spec b = spec("The dog", 4, 2);
    res[1].id = sched_submit(r.s, &b);
    sched_step(r.s);
    sched_stats st;
    sched_get_stats(r.s, &st);
    assert_int_equal(st.n_grammar_queue, 1);
    run(&r, res, 2);
    assert_true(res[0].done && res[1].done);
    assert_true(res[1].order < res[0].order); /* the free one was not held up */
    assert_int_equal(res[1].n, 4);
    assert_int_equal(res[0].finish, SCHED_FINISH_STOP_TOKEN);
    sched_get_stats(r.s, &st);
    assert_int_equal(st.n_grammar_queue, 0);
    rig_free(&r);

    /* the same slow compile under a 50 ms timeout: SGLang's timeout message */
    r = mk(0.05);
    memset(res, 0, sizeof res);
    sched_req_spec c2 = spec("The cat", 8, 1);
    c2.params.regex = strdup("slow[a-z]{3}");
    res[0].id = sched_submit(r.s, &c2);
    run(&r, res, 1);
    assert_true(res[0].done);
    assert_int_equal(res[0].finish, SCHED_FINISH_ABORT);
    assert_int_equal(res[0].status, 400);
    assert_non_null(strstr(res[0].msg, "Grammar preprocessing timed out: req.grammar_key=('regex', 'slow[a-z]{3}')"));
    rig_free(&r);
    g_slow_ms = 0;

    /* a bad grammar, and an abort of a request in the grammar queue */
    g_slow_ms = 300;
    r = mk(60);
    memset(res, 0, sizeof res);
    sched_req_spec d = spec("The cat", 8, 1);
    d.params.regex = strdup("([a-z");
    res[0].id = sched_submit(r.s, &d);
    sched_req_spec e = spec("The cat", 8, 1);
    e.params.regex = strdup("slow[a-z]{2}");
    e.rid = strdup("to-abort");
    res[1].id = sched_submit(r.s, &e);
    sched_step(r.s);
    sched_abort(r.s, "to-abort");
    run(&r, res, 2);
    assert_int_equal(res[0].finish, SCHED_FINISH_ABORT);
    assert_int_equal(res[0].status, 400);
    assert_non_null(strstr(res[0].msg, "Failed to compile regex grammar: "));
    assert_int_equal(res[1].finish, SCHED_FINISH_ABORT);
    assert_int_equal(res[1].n, 0);
    rig_free(&r);
    g_slow_ms = 0;
}

static void test_grammar_after(void **state)
{
    (void)state;
    NEED_MODEL();
    rig r = mk(60);
    int32_t x = tok_token_to_id(g_tok, "dog", 3);
    assert_true(x > 0);
    result res[1];
    memset(res, 0, sizeof res);
    sched_req_spec sp = spec("Once upon a time", 32, 3);
    sp.params.regex = strdup("[0-9]{3}");
    sp.params.logit_bias = malloc(sizeof(sampling_logit_bias));
    sp.params.logit_bias[0] = (sampling_logit_bias){x, 100.0f};
    sp.params.n_logit_bias = 1;
    sp.grammar_after = malloc(sizeof(int32_t));
    sp.grammar_after[0] = x;
    sp.n_grammar_after = 1;
    res[0].id = sched_submit(r.s, &sp);
    run(&r, res, 1);
    assert_true(res[0].done);
    assert_int_equal(res[0].finish, SCHED_FINISH_STOP_TOKEN);
    assert_int_equal(res[0].ids[0], x); /* before the grammar: the bias wins */
    result rest = res[0];
    memmove(rest.ids, rest.ids + 1, sizeof(int32_t) * (size_t)(rest.n - 1));
    rest.n--;
    char *t = text_of(&rest, true);
    assert_true(all_digits(t, 3)); /* after it: the grammar, despite the bias */
    free(t);
    rig_free(&r);
}

/* drafts: propose a run of 'x' tokens the grammar forbids every step */
static int bad_draft(void *ctx, uint64_t id, int index, const int32_t *seq, int64_t len, int32_t *draft, int max)
{
    (void)id, (void)index, (void)seq, (void)len;
    int32_t tok = *(int32_t *)ctx;
    for (int i = 0; i < max; i++) draft[i] = tok;
    return max;
}

/* drafts: the true continuation (from a plain run), so they are accepted:
 * the matcher is walked over them, rolled back, then advanced again by
 * the verified tokens */
typedef struct {
    const int32_t *out;
    int n, n_input;
} oracle;

static int oracle_draft(void *ctx, uint64_t id, int index, const int32_t *seq, int64_t len, int32_t *draft, int max)
{
    (void)id, (void)index, (void)seq;
    const oracle *o = ctx;
    int k = (int)(len - o->n_input), n = 0;
    while (n < max && k + n < o->n) draft[n] = o->out[k + n], n++;
    return n;
}

static void test_drafts_trimmed(void **state)
{
    (void)state;
    NEED_MODEL();
    result plain[1], drafted[1], oracled[1];
    sched_req_spec probe = spec("Once upon a time", 32, 9);
    oracle orc = {NULL, 0, (int)probe.n_input};
    sched_req_spec_free(&probe);
    int64_t steps[3];
    for (int k = 0; k < 3; k++) {
        rig r = mk(60);
        int32_t xtok = tok_token_to_id(g_tok, "x", 1);
        if (k == 1) sched_set_draft_hook(r.s, bad_draft, &xtok, 3);
        if (k == 2) {
            orc.out = plain[0].ids, orc.n = plain[0].n;
            sched_set_draft_hook(r.s, oracle_draft, &orc, 3);
        }
        result *res = k == 0 ? plain : k == 1 ? drafted : oracled;
        memset(res, 0, sizeof(result));
        sched_req_spec sp = spec("Once upon a time", 32, 9);
        sp.params.regex = strdup("(ab|cd)[0-9]{5}");
        res[0].id = sched_submit(r.s, &sp);
        run(&r, res, 1);
        assert_true(res[0].done);
        sched_stats st;
        sched_get_stats(r.s, &st);
        steps[k] = st.n_decode_steps;
        rig_free(&r);
    }
    assert_int_equal(plain[0].n, drafted[0].n);
    assert_memory_equal(plain[0].ids, drafted[0].ids, sizeof(int32_t) * (size_t)plain[0].n);
    assert_int_equal(plain[0].n, oracled[0].n);
    assert_memory_equal(plain[0].ids, oracled[0].ids, sizeof(int32_t) * (size_t)plain[0].n);
    assert_true(steps[2] < steps[0]); /* accepted drafts saved forwards */
}

/* structural tag through the engine, byte by byte */
static int walk(grammar *g, const char *s)
{
    grammar_matcher *m = grammar_matcher_new(g, g_vocab);
    int ok = grammar_matcher_accept_bytes(m, s, strlen(s)) && grammar_matcher_can_end(m);
    grammar_matcher_free(m);
    return ok;
}

static void test_structural_tag(void **state)
{
    (void)state;
    NEED_MODEL();
    const char *st = "{\"type\":\"structural_tag\",\"structures\":["
                     "{\"begin\":\"<f=pick>\",\"schema\":{\"type\":\"object\",\"properties\":{\"c\":{\"enum\":[\"a\",\"b\"]}},"
                     "\"required\":[\"c\"],\"additionalProperties\":false},\"end\":\"</f>\"},"
                     "{\"begin\":\"<f=none>\",\"end\":\"</f>\"}],\"triggers\":[\"<f=\"]}";
    grammar_key k = {GRAMMAR_KIND_STRUCTURAL_TAG, st, strlen(st), 0};
    char err[512];
    size_t bytes = 0;
    grammar *g = grammar_compile_key(&g_json, &k, &bytes, err, sizeof err);
    if (!g) fail_msg("structural tag: %s", err);
    assert_true(bytes > 0);
    assert_true(walk(g, ""));
    assert_true(walk(g, "just text, < and <f but no trigger"));
    assert_true(walk(g, "call <f=pick>{\"c\":\"a\"}</f> and again <f=pick>{\"c\":\"b\"}</f> done"));
    assert_true(walk(g, "<<f=none>{\"any\":[1,2]}</f>"));
    assert_true(walk(g, "ends in a partial trigger <f"));
    assert_false(walk(g, "<f=other>{}</f>"));
    assert_false(walk(g, "<f=pick>{\"c\":\"z\"}</f>"));
    assert_false(walk(g, "<f=pick>{\"c\":\"a\"}")); /* unfinished: cannot end */
    assert_false(walk(g, "<f=pick>{\"c\":\"a\"}</g>"));
    grammar_free(g);
    /* bad input (trigger sets whose characters repeat are accepted now: grammar_stag.c, test_schema_stag) */
    strbuf sb = {0};
    const char *nobeg = "{\"structures\":[{\"begin\":\"<x>\",\"end\":\"x\"}],\"triggers\":[\"<f=\"]}";
    assert_int_equal(grammar_structural_tag_to_ebnf(nobeg, strlen(nobeg), &g_json, &sb, err, sizeof err), -1);
    assert_non_null(strstr(err, "starts with no trigger"));
    assert_int_equal(grammar_structural_tag_to_ebnf("[1]", 3, &g_json, &sb, err, sizeof err), -1);
    free(sb.p);
}

static void test_prefix_rules(void **state)
{
    (void)state;
    const char *in = "root ::= a-b \"root x\" [a-z] # root comment\na-b ::= \"\\\"\" root_2 | [\\]x]\n";
    strbuf sb = {0};
    assert_int_equal(grammar_ebnf_prefix_rules(in, strlen(in), "p-", &sb), 0);
    assert_string_equal(sb.p, "p-root ::= p-a-b \"root x\" [a-z] # root comment\np-a-b ::= \"\\\"\" p-root_2 | [\\]x]\n");
    free(sb.p);
}

/* [a-z]{1,40}(ab){6}: the whole text */
static bool close_match(const char *t)
{
    size_t n = strlen(t);
    if (n < 13) return false;
    for (size_t i = 0; i < 6; i++)
        if (strncmp(t + n - 12 + 2 * i, "ab", 2)) return false;
    size_t m = n - 12;
    if (m < 1 || m > 40) return false;
    for (size_t i = 0; i < m; i++)
        if (t[i] < 'a' || t[i] > 'z') return false;
    return true;
}

/* n requests with max_new tokens, greedy (top_k 1) or temperature 1; close_full
 * sets SGLC_GRAMMAR_CLOSE_FULL for the scheduler.  Returns how many ended
 * at the length limit. */
static int run_close(result *res, int n, int max_new, bool greedy, bool close_full)
{
    if (close_full) setenv("SGLC_GRAMMAR_CLOSE_FULL", "1", 1);
    rig r = mk(60);
    unsetenv("SGLC_GRAMMAR_CLOSE_FULL");
    static const char *prompts[] = {"Once upon a time", "The cat", "Lily and Tom went to the park", "A big dog"};
    memset(res, 0, sizeof *res * (size_t)n);
    for (int i = 0; i < n; i++) {
        sched_req_spec sp = spec(prompts[i % 4], max_new, (uint64_t)i + 11);
        if (greedy) sp.params.top_k = 1;
        sp.params.regex = strdup("[a-z]{1,40}(ab){6}");
        res[i].id = sched_submit(r.s, &sp);
    }
    run(&r, res, n);
    int at_length = 0;
    for (int i = 0; i < n; i++) {
        assert_true(res[i].done);
        assert_int_equal(res[i].status, 200);
        bool stop = res[i].finish == SCHED_FINISH_STOP_TOKEN;
        assert_true(stop || res[i].finish == SCHED_FINISH_LENGTH);
        at_length += !stop;
        char *t = text_of(&res[i], stop);
        if (!close_match(t)) fail_msg("request %d (max_new %d, full %d, greedy %d, finish %d, n %d): '%s' does not match", i, max_new, close_full, greedy, (int)res[i].finish, res[i].n, t);
        free(t);
    }
    rig_free(&r);
    return at_length;
}

static void test_budget_close_lazy(void **state)
{
    (void)state;
    NEED_MODEL();
    enum { N = 4 };
    result lazy[N], full[N];
    int lengths = 0;
    for (int max_new = 14; max_new <= 30; max_new += 8) {
        run_close(full, N, max_new, true, true);
        lengths += run_close(lazy, N, max_new, true, false);
        for (int i = 0; i < N; i++) {
            assert_int_equal(lazy[i].n, full[i].n);
            assert_memory_equal(lazy[i].ids, full[i].ids, sizeof(int32_t) * (size_t)lazy[i].n);
        }
        run_close(lazy, N, max_new, false, false); /* temperature 1: by rejection */
    }
    assert_true(lengths > 0); /* the budget was reached: the close path ran */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_prefix_rules),
        cmocka_unit_test(test_regex_eos_finish),
        cmocka_unit_test(test_queue_not_blocking_and_timeout),
        cmocka_unit_test(test_grammar_after),
        cmocka_unit_test(test_drafts_trimmed),
        cmocka_unit_test(test_structural_tag),
        cmocka_unit_test(test_budget_close_lazy),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
