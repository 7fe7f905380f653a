/* test_spec_eagle — EAGLE / EAGLE3 speculative decoding (src/spec/spec_eagle.c)
 * on TinyStories-656K with random heads written by tests/ref/eagle_ref.py:
 *
 * - the head's first-step logits equal an independent PyTorch reference of
 *   the EAGLE layer over the target's own hidden states (1e-4 relative),
 *   and its greedy chain gives the same ids (a wrong head would otherwise
 *   pass: outputs are identical for any draft); also the EAGLE-1 head
 *   stored as BF16 (run with bf16 matrices);
 * - greedy (and seeded temperature-1) outputs identical with and without
 *   the drafter, alone and in one batch, page sizes 1 and 16, chunked
 *   prefill with mixed chunks;
 *   the per-request counters add up; a stop token inside a drafted run;
 * - no KV page leaked (target pool) after a mixed workload with aborts;
 * - start-up errors: wrong hidden size, missing weights, a head of the
 *   other EAGLE version. */
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
#include "spec/spec_eagle.h"
#include "util/log.h"

#include "tinystories_fixture.h"

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
    int kind;          /* 0 repeating text, 1 free text, 2 repeating with a period of 7 */
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

static void fill_prompt(const req_cfg *c, int i, int32_t *ids)
{
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


static char g_heads[256]; /* the heads' folder ("" = not made) */
static int g_algo = SPEC_ALGO_EAGLE;

static const char *target_dir(void)
{
    static char dir[512];
    const char *sh = getenv("SGLC_SHARED");
    snprintf(dir, sizeof dir, "%s/models/TinyStories-656K", sh && *sh ? sh : "../shared");
    return dir;
}

static int heads_setup(void **state)
{
    tiny_setup(state);
    if (!g_model) return 0;
    snprintf(g_heads, sizeof g_heads, "/tmp/sglc_eagle_XXXXXX");
    if (!mkdtemp(g_heads)) {
        g_heads[0] = 0;
        return 0;
    }
    char cmd[1400];
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 tests/ref/eagle_ref.py make %s %s", g_heads, target_dir());
    if (system(cmd) != 0) g_heads[0] = 0;
    return 0;
}

static int heads_teardown(void **state)
{
    if (g_heads[0]) {
        char cmd[400];
        snprintf(cmd, sizeof cmd, "rm -rf %s", g_heads);
        if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", g_heads);
    }
    return tiny_teardown(state);
}

#define NEED_HEADS()                                                                \
    do {                                                                            \
        NEED_MODEL();                                                               \
        if (!g_heads[0]) {                                                          \
            print_message("no /usr/bin/python3 with torch to make EAGLE heads: skipped\n"); \
            skip();                                                                 \
        }                                                                           \
    } while (0)

static const char *head(const char *name)
{
    static char p[512];
    snprintf(p, sizeof p, "%s/%s", g_heads, name);
    return p;
}

static spec_drafter *mk_drafter(sched *s, int64_t pool)
{
    spec_args a;
    spec_args_init(&a);
    a.algo = (spec_algo)g_algo;
    a.eagle_path = head(g_algo == SPEC_ALGO_EAGLE3 ? "eagle3" : "eagle1");
    a.target_model = sched_model(s);
    a.target_slots = pool;
    a.draft_kv_tokens = 8192;
    char err[512];
    spec_drafter *d = spec_drafter_create(&a, err, sizeof err);
    if (!d) fail_msg("%s", err);
    spec_drafter_attach(d, s);
    return d;
}

static void run(const req_cfg *cfg, int n, const sched_cfg *sc, bool with_spec, bool alone, result *res,
                sched_stats *st, spec_drafter_stats *dst)
{
    sched *s = mk(sc);
    spec_drafter *d = with_spec ? mk_drafter(s, sc->pool ? sc->pool : 65536) : NULL;
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

/* The head against tests/ref/eagle_ref.py check: first-step logits of the
 * last pair and a 4-token chain, over the target's captured states. */
static void logits_vs_torch(const char *name, int eagle3)
{
    enum { N = 21, SLOTS = 256 };
    model_kv *kv = model_kv_create(g_model, SLOTS, DTYPE_F32);
    assert_non_null(kv);
    char err[512];
    spec_eagle *e = spec_eagle_create(head(name), eagle3, g_model, SLOTS, 1024, err, sizeof err);
    if (!e) fail_msg("%s", err);
    int32_t ids[N], pos[N], slots[N];
    for (int i = 0; i < N; i++) {
        ids[i] = i == 0 ? 1 : (int32_t)((37 * i * i + 11 * i) % 2000 + 3);
        pos[i] = i;
        slots[i] = 200 - 3 * i; /* not the identity: the capture goes by slot */
    }
    /* the target over ids[0..N-2] (what the scheduler has computed when seq[N-1] was sampled) */
    int32_t start[2] = {0, N - 1}, kvl[1] = {N - 1};
    const int32_t *sl[1] = {slots};
    model_batch b = {.n_tokens = N - 1, .tokens = ids, .positions = pos, .n_seqs = 1, .seq_start = start,
                     .seq_kv_len = kvl, .seq_slots = sl, .n_logits = 0};
    assert_int_equal(model_forward(g_model, kv, &b, NULL, NULL), 0);
    int nv = 0;
    float *lg = malloc(sizeof(float) * 4096);
    assert_int_equal(spec_eagle_first_logits(e, ids, N, slots, lg, &nv), 0);
    spec_draft_req r = {0};
    int32_t chain[4];
    assert_int_equal(spec_eagle_propose(e, &r, ids, N, slots, chain, 4), 4);
    /* a second proposal over the same sequence reuses the draft KV and agrees */
    int32_t again[4];
    assert_int_equal(spec_eagle_propose(e, &r, ids, N, slots, again, 4), 4);
    assert_memory_equal(chain, again, sizeof chain);
    assert_int_equal(spec_eagle_slots_used(e), N - 1); /* the chain's slots went back */
    spec_eagle_req_release(e, &r);
    assert_int_equal(spec_eagle_slots_used(e), 0);
    char dump[300];
    snprintf(dump, sizeof dump, "%s/%s.json", g_heads, name);
    FILE *f = fopen(dump, "w");
    assert_non_null(f);
    fprintf(f, "{\"ids\": [");
    for (int i = 0; i < N; i++) fprintf(f, "%s%d", i ? "," : "", ids[i]);
    fprintf(f, "], \"chain\": [%d,%d,%d,%d], \"logits\": [", chain[0], chain[1], chain[2], chain[3]);
    for (int i = 0; i < nv; i++) fprintf(f, "%s%.9g", i ? "," : "", lg[i]);
    fprintf(f, "]}\n");
    fclose(f);
    free(lg);
    char cmd[1600];
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 tests/ref/eagle_ref.py check %s %s %s", head(name), target_dir(), dump);
    assert_int_equal(system(cmd), 0);
    spec_eagle_destroy(e);
    model_kv_destroy(kv);
}

static void test_logits_vs_torch(void **state)
{
    (void)state;
    NEED_HEADS();
    logits_vs_torch("eagle1", 0);
    logits_vs_torch("eagle3", 1);
    logits_vs_torch("eagle1_bf16", 0);
}

/* Greedy and seeded sampling: the verify path keeps the outputs. */
static void test_greedy_identical(void **state)
{
    (void)state;
    NEED_HEADS();
    req_cfg cfg[8] = {
        {0, 40, 70, false, 0, true, false, -1}, {2, 30, 60, false, 0, false, true, -1},
        {1, 12, 50, false, 0, true, false, -1}, {0, 25, 1, false, 0, false, false, -1},
        {2, 50, 64, false, 0, true, true, -1},  {1, 20, 48, false, 0, false, false, -1},
        {2, 30, 40, true, 9, true, false, -1},  {0, 25, 33, true, 4, false, true, -1}, /* seeded sampling */
    };
    const int n = 8;
    static result ref[8], got[8];
    sched_stats st_ref, st;
    spec_drafter_stats dst;
    const sched_cfg scs[3] = {{.page_size = 1}, {.page_size = 16}, {.page_size = 1, .chunked = 16, .mixed = true}};
    for (int algo = 0; algo < 2; algo++) {
        g_algo = algo ? SPEC_ALGO_EAGLE3 : SPEC_ALGO_EAGLE;
        for (int c = 0; c < 3; c++)
            for (int alone = 0; alone < 2; alone++) {
                run(cfg, n, &scs[c], false, alone, ref, &st_ref, NULL);
                run(cfg, n, &scs[c], true, alone, got, &st, &dst);
                char what[96];
                snprintf(what, sizeof what, "%s, config %d, %s", algo ? "EAGLE3" : "EAGLE", c, alone ? "alone" : "batch");
                expect_same(ref, got, n, what);
                assert_int_equal(st.generated_tokens, st_ref.generated_tokens);
                assert_true(st.spec_draft_tokens > 0);
                assert_true(dst.proposed > 0);
                int64_t acc = 0;
                for (int i = 0; i < n; i++) {
                    acc += got[i].accepted;
                    assert_true(got[i].accepted <= got[i].drafted);
                    assert_int_equal(got[i].n - 1, got[i].verify_ct + got[i].accepted);
                }
                assert_int_equal(acc, st.spec_accepted_tokens);
            }
    }
    g_algo = SPEC_ALGO_EAGLE;
}

/* A stop token inside the output ends the request there, as without drafts. */
static void test_stop_token(void **state)
{
    (void)state;
    NEED_HEADS();
    req_cfg c = {0, 40, 80, false, 0, true, false, -1};
    static result ref[1], got[1];
    sched_cfg sc = {.page_size = 1};
    run(&c, 1, &sc, false, true, ref, NULL, NULL);
    int k = 10;
    for (; k < ref[0].n; k++) {
        bool seen = false;
        for (int j = 0; j < k; j++) seen |= ref[0].ids[j] == ref[0].ids[k];
        if (!seen) break;
    }
    if (k >= ref[0].n) skip();
    c.stop_id = ref[0].ids[k];
    for (int algo = 0; algo < 2; algo++) {
        g_algo = algo ? SPEC_ALGO_EAGLE3 : SPEC_ALGO_EAGLE;
        run(&c, 1, &sc, false, true, ref, NULL, NULL);
        run(&c, 1, &sc, true, true, got, NULL, NULL);
        expect_same(ref, got, 1, "stop token");
        assert_int_equal(got[0].finish, SCHED_FINISH_STOP_TOKEN);
        assert_int_equal(got[0].n, k + 1);
    }
    g_algo = SPEC_ALGO_EAGLE;
}

/* Mixed workload (chunked prefill, mixed chunks, a small pool that
 * retracts) with aborts: no target KV page leaked, survivors identical. */
static void test_aborts_no_leak(void **state)
{
    (void)state;
    NEED_HEADS();
    enum { N = 12 };
    req_cfg cfg[N];
    for (int i = 0; i < N; i++)
        cfg[i] = (req_cfg){i % 3, 20 + 9 * (i % 5), 30 + 7 * (i % 4), false, 0, i % 2 == 0, i % 3 == 0, -1};
    const sched_cfg scs[2] = {{.page_size = 1, .chunked = 16, .mixed = true},
                              {.page_size = 1, .pool = 600, .conservativeness = 0.05}};
    for (int c = 0; c < 2; c++) {
        g_algo = c ? SPEC_ALGO_EAGLE3 : SPEC_ALGO_EAGLE;
        static result ref[N], got[N];
        run(cfg, N, &scs[c], false, false, ref, NULL, NULL);
        sched *s = mk(&scs[c]);
        spec_drafter *d = mk_drafter(s, scs[c].pool ? scs[c].pool : 65536);
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
        spec_drafter_stats dst;
        spec_drafter_get_stats(d, &dst);
        assert_true(dst.proposed > 0);
        sched_destroy(s);
        spec_drafter_destroy(d);
    }
    g_algo = SPEC_ALGO_EAGLE;
}

static void expect_error(const char *name, int eagle3, const char *msg)
{
    char err[512] = "";
    spec_eagle *e = spec_eagle_create(head(name), eagle3, g_model, 1024, 1024, err, sizeof err);
    if (e) fail_msg("%s: loaded", name);
    if (!strstr(err, msg)) fail_msg("%s: \"%s\" does not say \"%s\"", name, err, msg);
}

static void test_errors(void **state)
{
    (void)state;
    NEED_HEADS();
    expect_error("wrong_h", 0, "hidden size (64) differs from the target model's (128)");
    expect_error("nofile", 0, "model.safetensors");
    expect_error("eagle1", 1, "--speculative-algorithm is EAGLE3");
    expect_error("eagle3", 0, "--speculative-algorithm is EAGLE");
    expect_error("absent", 0, "no readable config.json");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_logits_vs_torch), cmocka_unit_test(test_greedy_identical),
        cmocka_unit_test(test_stop_token),      cmocka_unit_test(test_aborts_no_leak),
        cmocka_unit_test(test_errors),
    };
    return cmocka_run_group_tests(tests, heads_setup, heads_teardown);
}
