/* test_spec — NGRAM speculative decoding end to end (src/spec drafter on
 * the scheduler's draft hook) on TinyStories-656K:
 *
 * - greedy outputs (ids, finish reasons, logprobs) identical with and
 *   without NGRAM, each request alone and all in one batch, page sizes 1
 *   and 16, BFS and PROB; prompts that repeat text so drafts are
 *   accepted (the accepted count must be > 0, and decode steps fewer);
 *   per-request counters (spec_verify_ct, accepted) in the FINISH event;
 * - temperature 1: the histogram of one output position over 400 seeds
 *   with NGRAM against 400 other seeds without (a two-sample chi-square
 *   test, p = 0.001 bound), and same seed = same output;
 * - no KV page leaked after mixed workloads (chunked prefill, mixed
 *   chunks, a tiny pool that retracts) with aborts mid-flight. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "kernels/kernels.h"
#include "model/model.h"
#include "sched/sched.h"
#include "spec/spec.h"
#include "util/log.h"

#include "tinystories_fixture.h"
#include "chi2_two_sample.h"

#define MAXR 512
#define MAXT 160

typedef struct {
    uint64_t id;
    int32_t ids[MAXT];
    float lp[MAXT];
    int n;
    bool done;
    sched_finish_kind finish;
    int32_t finish_token;
    int64_t verify_ct, accepted, drafted;
    bool spec_on;
} result;

typedef struct {
    int kind;          /* 0 repeating ids, 1 free ids, 2 repeating with a period of 7; 3, 4: real text
                        * (k_rep_text, k_story_text) */
    int n_in, max_new;
    bool sample;
    uint64_t seed;
    bool logprob, stream;
    int32_t stop_id;   /* >= 0: stop_token_ids */
} req_cfg;

typedef struct {
    int page_size;
    int64_t pool;
    int chunked;       /* chunked_prefill_size, 0 = default */
    bool mixed;
    double conservativeness;
} sched_cfg;

static double g_temperature = 1.0;
static model *g_draft; /* STANDALONE runs: the draft model (NULL = NGRAM) */
static bool g_chain;   /* NGRAM runs: verify the first branch only (spec_args.tree off) */

/* Two prompts of real text (the TinyStories tokenizer's ids): "The cat sat
 * on the mat. The dog sat on the log. ..." (a repeating phrase, as
 * bench/spec_tinystories.sh) and "Once upon a time, there was a little girl
 * named Lily. She liked to play with her ball." (greedy, the model loops) */
static const int32_t k_rep_text[29] = {1, 80, 247, 411, 1214, 337, 175, 72, 1094, 1214, 337, 133, 59, 972, 1214,
                                       337, 175, 72, 1094, 1214, 337, 133, 59, 972, 1214, 337, 175, 72, 10};
static const int32_t k_story_text[13] = {1, 80, 147, 201, 282, 215, 286, 598, 1662, 1083, 628, 416, 10};

static void fill_prompt(const req_cfg *c, int i, int32_t *ids)
{
    if (c->kind == 3 || c->kind == 4) { /* real text, n_in <= its length */
        for (int t = 0; t < c->n_in; t++) ids[t] = c->kind == 3 ? k_rep_text[t] : k_story_text[t];
        return;
    }
    /* the "repeating" prompts: a phrase of ids said several times (the
     * model continues the pattern, the trie knows it) */
    int period = c->kind == 2 ? 7 : 11;
    for (int t = 0; t < c->n_in; t++) {
        if (t == 0) ids[t] = 1;
        else if (c->kind == 1) ids[t] = (17 * i + 37 * t) % 2000 + 3;
        else ids[t] = (int32_t)((t % period) * 131 + 7 * i) % 2000 + 3;
    }
}

static sched_req_spec spec_of(const req_cfg *c, int i)
{
    sched_req_spec sp;
    sched_req_spec_init(&sp);
    sp.n_input = c->n_in;
    sp.input_ids = malloc(sizeof(int32_t) * (size_t)c->n_in);
    fill_prompt(c, i, sp.input_ids);
    char rid[32];
    snprintf(rid, sizeof rid, "r%d", i);
    sp.rid = strdup(rid);
    sp.params.has_max_new_tokens = true;
    sp.params.max_new_tokens = c->max_new;
    if (c->sample) {
        sp.params.temperature = g_temperature;
        sp.params.has_sampling_seed = true;
        sp.params.sampling_seed = c->seed;
    } else {
        sp.params.top_k = 1;
    }
    sp.params.ignore_eos = c->stop_id < 0;
    if (c->stop_id >= 0) {
        sp.params.stop_token_ids = malloc(sizeof(int32_t));
        sp.params.stop_token_ids[0] = c->stop_id;
        sp.params.n_stop_token_ids = 1;
    }
    sp.return_logprob = c->logprob;
    sp.stream = c->stream;
    return sp;
}

static sched *mk(const sched_cfg *sc)
{
    sched_args a;
    sched_args_init(&a);
    a.max_total_tokens = sc->pool ? sc->pool : 65536;
    a.threads = 1;
    a.random_seed = 7;
    a.page_size = sc->page_size ? sc->page_size : 1;
    if (sc->chunked) a.chunked_prefill_size = sc->chunked;
    a.enable_mixed_chunk = sc->mixed;
    if (sc->conservativeness > 0) a.schedule_conservativeness = sc->conservativeness;
    char err[512];
    sched *s = sched_create(g_model, &a, err, sizeof err);
    if (!s) fail_msg("sched_create: %s", err);
    return s;
}

static result *find(result *res, int n, uint64_t id)
{
    for (int i = 0; i < n; i++)
        if (res[i].id == id) return &res[i];
    return NULL;
}

static void drain(sched *s, result *res, int n)
{
    sched_event *e;
    while ((e = sched_poll(s))) {
        result *r = find(res, n, e->id);
        assert_non_null(r);
        assert_false(r->done);
        assert_true(r->n + e->n_ids <= MAXT);
        for (int k = 0; k < e->n_ids; k++) {
            r->ids[r->n + k] = e->ids[k];
            r->lp[r->n + k] = e->logprobs ? e->logprobs[k] : NAN;
        }
        r->n += e->n_ids;
        if (e->kind == SCHED_EV_FINISH) {
            r->done = true;
            r->finish = e->finish;
            r->finish_token = e->finish_token;
            r->verify_ct = e->spec_verify_ct;
            r->accepted = e->spec_accepted;
            r->drafted = e->spec_drafted;
            r->spec_on = e->spec_on;
        }
        sched_event_free(e);
    }
}

static void check_no_leak(sched *s)
{
    char err[512];
    if (sched_check_leak(s, err, sizeof err)) fail_msg("%s", err);
    sched_stats st;
    sched_get_stats(s, &st);
    assert_int_equal(st.leak_failures, 0);
    assert_int_equal(st.free_tokens + st.evictable_tokens, st.max_total_num_tokens);
    assert_int_equal(st.protected_tokens, 0);
}

/* Run cfg[0..n) (all at once, or one by one when alone) with or without
 * an NGRAM drafter of match type mt. */
static void run(const req_cfg *cfg, int n, const sched_cfg *sc, bool with_spec, spec_match_type mt, bool alone,
                result *res, sched_stats *st, spec_drafter_stats *dst)
{
    sched *s = mk(sc);
    spec_drafter *d = NULL;
    if (with_spec) {
        spec_args a;
        spec_args_init(&a);
        a.algo = g_draft ? SPEC_ALGO_STANDALONE : SPEC_ALGO_NGRAM;
        a.ngram.match_type = mt;
        a.tree = !g_chain;
        a.draft_model = g_draft;
        a.target_vocab = model_get_config(g_model)->vocab_size;
        a.draft_kv_tokens = 8192;
        char err[256];
        d = spec_drafter_create(&a, err, sizeof err);
        if (!d) fail_msg("%s", err);
        spec_drafter_attach(d, s);
    }
    memset(res, 0, sizeof(result) * (size_t)n);
    for (int i = 0; i < n; i++) {
        sched_req_spec sp = spec_of(&cfg[i], i);
        res[i].id = sched_submit(s, &sp);
        if (alone) {
            assert_int_equal(sched_run_until_idle(s), 0);
            drain(s, res, n);
        }
    }
    assert_int_equal(sched_run_until_idle(s), 0);
    drain(s, res, n);
    for (int i = 0; i < n; i++) {
        assert_true(res[i].done);
        assert_true(res[i].spec_on == with_spec);
    }
    check_no_leak(s);
    if (st) sched_get_stats(s, st);
    sched_destroy(s);
    if (d && dst) spec_drafter_get_stats(d, dst);
    spec_drafter_destroy(d);
}

static void expect_same(const result *a, const result *b, int n, const char *what)
{
    for (int i = 0; i < n; i++) {
        if (a[i].n != b[i].n || memcmp(a[i].ids, b[i].ids, sizeof(int32_t) * (size_t)a[i].n))
            fail_msg("%s: request %d: %d vs %d tokens or different ids", what, i, a[i].n, b[i].n);
        assert_int_equal(a[i].finish, b[i].finish);
        assert_int_equal(a[i].finish_token, b[i].finish_token);
        for (int k = 0; k < a[i].n; k++)
            if (!(isnan(a[i].lp[k]) && isnan(b[i].lp[k])) && fabsf(a[i].lp[k] - b[i].lp[k]) > 1e-4f)
                fail_msg("%s: request %d logprob %d: %g vs %g", what, i, k, a[i].lp[k], b[i].lp[k]);
    }
}

static void test_greedy_identical(void **state)
{
    (void)state;
    NEED_MODEL();
    req_cfg cfg[8] = {
        {0, 40, 120, false, 0, true, false, -1},  {2, 30, 100, false, 0, false, true, -1},
        {1, 12, 90, false, 0, true, false, -1},   {0, 25, 64, false, 0, false, false, -1},
        {2, 50, 140, false, 0, true, true, -1},   {1, 20, 48, true, 99, true, false, -1},
        {0, 33, 1, false, 0, true, false, -1},    {2, 18, 77, true, 5, false, true, -1},
    };
    int n = 8;
    static result ref[8], got[8];
    sched_stats st_ref, st;
    spec_drafter_stats dst;
    const sched_cfg pages[2] = {{.page_size = 1}, {.page_size = 16}};
    for (int pg = 0; pg < 2; pg++)
        for (int alone = 0; alone < 2; alone++) {
            run(cfg, n, &pages[pg], false, SPEC_MATCH_BFS, alone, ref, &st_ref, NULL);
            for (int mt = 0; mt < 2; mt++) {
                run(cfg, n, &pages[pg], true, (spec_match_type)mt, alone, got, &st, &dst);
                char what[96];
                snprintf(what, sizeof what, "page %d, %s, %s", pages[pg].page_size, alone ? "alone" : "batch",
                         mt ? "PROB" : "BFS");
                expect_same(ref, got, n, what);
                assert_int_equal(st.generated_tokens, st_ref.generated_tokens);
                /* drafts were accepted, so fewer forwards */
                assert_true(st.spec_accepted_tokens > 0);
                assert_true(dst.right > 0);
                assert_true(st.n_decode_steps < st_ref.n_decode_steps);
                /* the per-request counters add up */
                int64_t acc = 0, vct = 0;
                for (int i = 0; i < n; i++) {
                    acc += got[i].accepted;
                    vct += got[i].verify_ct;
                    assert_true(got[i].accepted <= got[i].drafted);
                    /* every output token but the prefill's: one verify or an accepted draft */
                    assert_int_equal(got[i].n - 1, got[i].verify_ct + got[i].accepted);
                }
                assert_int_equal(acc, st.spec_accepted_tokens);
                assert_int_equal(vct, st.spec_verify_ct);
                assert_true(got[0].accepted > 0); /* the repeating prompt */
                /* NGRAM's trees are verified as trees at page size 1 and 16 (the accepted
                 * nodes' KV copied into the pages at 16) */
                assert_true(st.spec_tree_verifies > 0);
                assert_true(st.spec_tree_off_branch > 0);
            }
        }
}

/* Tree vs chain verification of the same NGRAM drafts on repetitive text:
 * both give plain decoding's ids and logprobs (greedy and seeded), the tree
 * accepts at least as many drafts in all, takes no more decode steps, and
 * some accepted tokens come from off the first branch (which the chain
 * never verifies). */
static void test_tree_vs_chain(void **state)
{
    (void)state;
    NEED_MODEL();
    enum { N = 6 };
    req_cfg cfg[N] = {
        {3, 29, 150, false, 0, true, false, -1}, {4, 13, 150, false, 0, false, true, -1},
        {3, 20, 140, false, 0, true, false, -1}, {4, 13, 120, true, 11, false, false, -1},
        {3, 29, 150, true, 12, true, true, -1},  {2, 33, 90, false, 0, false, false, -1},
    };
    static result ref[N], chain[N], tree[N];
    sched_cfg sc = {.page_size = 1};
    for (int mt = 0; mt < 2; mt++)
        for (int alone = 0; alone < 2; alone++) {
            sched_stats st_c, st_t;
            run(cfg, N, &sc, false, SPEC_MATCH_BFS, alone, ref, NULL, NULL);
            g_chain = true;
            run(cfg, N, &sc, true, (spec_match_type)mt, alone, chain, &st_c, NULL);
            g_chain = false;
            run(cfg, N, &sc, true, (spec_match_type)mt, alone, tree, &st_t, NULL);
            expect_same(ref, chain, N, "chain");
            expect_same(ref, tree, N, "tree");
            assert_int_equal(st_c.spec_tree_verifies, 0);
            assert_true(st_t.spec_tree_verifies > 0);
            print_message("%s %s: accept length chain %.3f (%lld decode steps), tree %.3f (%lld steps, %lld tree "
                          "verifies, %lld tokens off the first branch)\n",
                          mt ? "PROB" : "BFS", alone ? "alone" : "batch",
                          (double)st_c.spec_verify_tokens / (double)st_c.spec_verify_ct, (long long)st_c.n_decode_steps,
                          (double)st_t.spec_verify_tokens / (double)st_t.spec_verify_ct, (long long)st_t.n_decode_steps,
                          (long long)st_t.spec_tree_verifies, (long long)st_t.spec_tree_off_branch);
            assert_true(st_t.spec_accepted_tokens >= st_c.spec_accepted_tokens);
            assert_true(st_t.n_decode_steps <= st_c.n_decode_steps);
            assert_true(st_t.spec_tree_off_branch > 0);
        }
}

/* A stop token inside a drafted run ends the request there. */
static void test_stop_token(void **state)
{
    (void)state;
    NEED_MODEL();
    req_cfg c = {0, 40, 120, false, 0, true, false, -1};
    static result ref[1], got[1];
    sched_cfg sc = {.page_size = 1};
    run(&c, 1, &sc, true, SPEC_MATCH_BFS, true, ref, NULL, NULL);
    /* a token of the output's repeating part, first seen at position >= 10 */
    int k = 10;
    for (; k < ref[0].n; k++) {
        bool seen = false;
        for (int j = 0; j < k; j++) seen |= ref[0].ids[j] == ref[0].ids[k];
        if (!seen) break;
    }
    if (k >= ref[0].n) skip();
    c.stop_id = ref[0].ids[k];
    run(&c, 1, &sc, false, SPEC_MATCH_BFS, true, ref, NULL, NULL);
    run(&c, 1, &sc, true, SPEC_MATCH_BFS, true, got, NULL, NULL);
    expect_same(ref, got, 1, "stop token");
    assert_int_equal(got[0].finish, SCHED_FINISH_STOP_TOKEN);
    assert_int_equal(got[0].n, k + 1);
}

static void test_sampling_distribution(void **state)
{
    (void)state;
    NEED_MODEL();
    enum { N = 400, POS = 10 };
    static req_cfg cfg[N];
    static result a[N], b[N], b_same[N];
    sched_cfg sc = {.page_size = 1};
    for (int i = 0; i < N; i++) cfg[i] = (req_cfg){0, 30, POS + 2, true, 1 + (uint64_t)i, false, false, -1};
    run(cfg, N, &sc, false, SPEC_MATCH_BFS, false, a, NULL, NULL);
    sched_stats st;
    run(cfg, N, &sc, true, SPEC_MATCH_BFS, false, b_same, &st, NULL);
    expect_same(a, b_same, N, "seeded sampling, same seeds");
    for (int i = 0; i < N; i++) cfg[i].seed = 100000 + (uint64_t)i;
    run(cfg, N, &sc, true, SPEC_MATCH_BFS, false, b, &st, NULL);
    assert_true(st.spec_accepted_tokens > 0);
    /* histogram of the token at output position POS, two samples */
    int V = model_get_config(g_model)->vocab_size;
    int *ca = calloc((size_t)V, sizeof(int)), *cb = calloc((size_t)V, sizeof(int));
    for (int i = 0; i < N; i++) {
        ca[a[i].ids[POS]]++;
        cb[b[i].ids[POS]]++;
    }
    /* bins: chi2_two_sample.h */
    int bins;
    double chi = chi2_two_sample(ca, cb, V, &bins);
    free(ca), free(cb);
    g_temperature = 1.0;
    assert_true(bins >= 5); /* the position is not (nearly) deterministic */
    double bound = chi2_quantile(bins - 1, 3.09); /* p = 0.001 */
    print_message("chi-square %.2f over %d bins (bound %.2f at p = 0.001)\n", chi, bins, bound);
    assert_true(chi < bound);
}

/* Aborts mid-flight, chunked prefill, mixed chunks, retraction: no leak,
 * and the requests that were not aborted match the plain run. */
static void test_aborts_no_leak(void **state)
{
    (void)state;
    NEED_MODEL();
    enum { N = 14 };
    req_cfg cfg[N];
    for (int i = 0; i < N; i++)
        cfg[i] = (req_cfg){i % 3, 20 + 9 * (i % 5), 40 + 7 * (i % 4), i % 4 == 1, 3 + (uint64_t)i, i % 2 == 0,
                           i % 3 == 0, -1};
    const sched_cfg scs[3] = {
        {.page_size = 1, .chunked = 16, .mixed = true},
        {.page_size = 16, .chunked = 32},
        {.page_size = 1, .pool = 600, .conservativeness = 0.05},
    };
    for (int c = 0; c < 3; c++) {
        static result ref[N], got[N];
        sched_stats st;
        run(cfg, N, &scs[c], false, SPEC_MATCH_BFS, false, ref, NULL, NULL);
        run(cfg, N, &scs[c], true, SPEC_MATCH_BFS, false, got, &st, NULL);
        expect_same(ref, got, N, "mixed workload");
        if (c == 2) assert_true(st.num_retractions > 0);
        assert_true(st.spec_tree_verifies > 0); /* trees in the mixed workload (page 16 too) */
        /* the same with aborts after a few steps */
        sched *s = mk(&scs[c]);
        spec_args a;
        spec_args_init(&a);
        a.algo = SPEC_ALGO_NGRAM;
        char err[256];
        spec_drafter *d = spec_drafter_create(&a, err, sizeof err);
        assert_non_null(d);
        spec_drafter_attach(d, s);
        memset(got, 0, sizeof got);
        for (int i = 0; i < N; i++) {
            sched_req_spec sp = spec_of(&cfg[i], i);
            got[i].id = sched_submit(s, &sp);
        }
        for (int k = 0; k < 6 + 3 * c; k++) assert_true(sched_step(s) >= 0);
        for (int i = 0; i < N; i += 3) {
            char rid[32];
            snprintf(rid, sizeof rid, "r%d", i);
            sched_abort(s, rid);
        }
        for (int k = 0; k < 5; k++) assert_true(sched_step(s) >= 0);
        sched_abort(s, "r1");
        assert_int_equal(sched_run_until_idle(s), 0);
        drain(s, got, N);
        for (int i = 0; i < N; i++) {
            assert_true(got[i].done);
            if (i % 3 != 0 && i != 1) {
                assert_int_equal(got[i].n, ref[i].n);
                assert_memory_equal(got[i].ids, ref[i].ids, sizeof(int32_t) * (size_t)ref[i].n);
            }
        }
        check_no_leak(s);
        sched_destroy(s);
        spec_drafter_destroy(d);
    }
}

/* STANDALONE with the target itself as the draft (its own run state):
 * greedy drafts of the same model are right (up to the rounding of
 * multi-row forwards), outputs identical, alone and batched, sampling
 * too; a dummy-weight draft of the same vocabulary (drafts mostly wrong):
 * identical; a draft of another vocabulary: refused. */
static void test_standalone(void **state)
{
    (void)state;
    NEED_MODEL();
    req_cfg cfg[6] = {
        {0, 40, 60, false, 0, true, false, -1}, {1, 12, 50, false, 0, true, true, -1},
        {2, 30, 40, true, 9, true, false, -1},  {1, 20, 1, false, 0, false, false, -1},
        {0, 25, 33, true, 4, false, true, -1},  {2, 18, 45, false, 0, false, false, -1},
    };
    static result ref[6], got[6];
    sched_stats st_ref, st;
    spec_drafter_stats dst;
    sched_cfg sc = {.page_size = 1};
    model *self = model_share(g_model);
    assert_non_null(self);
    const model_config *c = model_get_config(g_model);
    char dir[512], err[512];
    const char *sh = getenv("SGLC_SHARED");
    snprintf(dir, sizeof dir, "%s/models/TinyStories-656K", sh && *sh ? sh : "../shared");
    model_load_opts o = {.model_path = dir, .dtype = -1, .load_format = MODEL_LOAD_DUMMY, .random_seed = 5};
    model *dummy = model_load(&o, err, sizeof err);
    assert_non_null(dummy);
    for (int alone = 0; alone < 2; alone++) {
        run(cfg, 6, &sc, false, SPEC_MATCH_BFS, alone, ref, &st_ref, NULL);
        g_draft = self;
        run(cfg, 6, &sc, true, SPEC_MATCH_BFS, alone, got, &st, &dst);
        expect_same(ref, got, 6, alone ? "standalone self, alone" : "standalone self, batch");
        assert_true(st.spec_draft_tokens > 0);
        assert_true(st.spec_accepted_tokens * 2 > st.spec_draft_tokens); /* mostly right */
        /* request rows of verify forwards vs plain decode rows (one per token past the prefill) */
        assert_true(st.spec_verify_ct * 2 < st_ref.generated_tokens - 6);
        assert_true(dst.tracked > 0);
        g_draft = dummy;
        run(cfg, 6, &sc, true, SPEC_MATCH_BFS, alone, got, &st, NULL);
        expect_same(ref, got, 6, "standalone dummy draft");
        assert_true(st.spec_draft_tokens > 0);
        g_draft = NULL;
    }
    /* another vocabulary: a clear error */
    spec_args a;
    spec_args_init(&a);
    a.algo = SPEC_ALGO_STANDALONE;
    a.draft_model = self;
    a.target_vocab = c->vocab_size + 1;
    assert_null(spec_drafter_create(&a, err, sizeof err));
    assert_non_null(strstr(err, "differs from the target model's"));
    model_free(dummy);
    model_free(self);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tree_vs_chain),
        cmocka_unit_test(test_standalone),
        cmocka_unit_test(test_greedy_identical),
        cmocka_unit_test(test_stop_token),
        cmocka_unit_test(test_sampling_distribution),
        cmocka_unit_test(test_aborts_no_leak),
    };
    return cmocka_run_group_tests(tests, tiny_setup, tiny_teardown);
}
