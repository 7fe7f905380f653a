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
 *   other EAGLE version;
 * - tree drafts (topk > 1): each node's log-probability against the head's
 *   causal chain over its ancestors; outputs identical with topk 2..4
 *   (batched, alone, pages 1 and 16) with accepted drafts from a head
 *   fitted to the target (eagle_ref.py fit_head); seeded sampling keeps
 *   the target's distribution (chi-square); aborts leak nothing. */
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
static int g_topk = 1, g_steps = 0, g_ndt = 0; /* the drafter's tree shape (topk 1: the chain as before) */
static const char *g_head_name;                /* NULL: eagle1 / eagle3 by g_algo */

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
    a.eagle_path = head(g_head_name ? g_head_name : g_algo == SPEC_ALGO_EAGLE3 ? "eagle3" : "eagle1");
    a.eagle_topk = g_topk;
    a.eagle_steps = g_steps;
    a.num_draft_tokens = g_ndt;
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

/* The workloads of the tree tests (greedy 0-5, seeded 6-7) and of the
 * aborts test. */
static const req_cfg TREE_CFG[8] = {
    {0, 40, 70, false, 0, true, false, -1}, {2, 30, 60, false, 0, false, true, -1},
    {1, 12, 50, false, 0, true, false, -1}, {0, 25, 1, false, 0, false, false, -1},
    {2, 50, 64, false, 0, true, true, -1},  {1, 20, 48, false, 0, false, false, -1},
    {2, 30, 40, true, 9, true, false, -1},  {0, 25, 33, true, 4, false, true, -1},
};
enum { N_ABORT = 12 };
static req_cfg abort_cfg(int i)
{
    return (req_cfg){i % 3, 20 + 9 * (i % 5), 30 + 7 * (i % 4), false, 0, i % 2 == 0, i % 3 == 0, -1};
}

/* head("eagle1_fit"): an EAGLE-1 head fitted (tests/ref/eagle_ref.py fit)
 * to the target's plain greedy outputs of these workloads, so that its
 * drafts are often right and "accepted > 0" can fail.  Once per run;
 * false when python could not make it. */
static bool ensure_fit(void)
{
    static int done = 0; /* 1 made, -1 failed */
    if (done) return done > 0;
    done = -1;
    enum { NF = 8 + N_ABORT };
    static req_cfg cfg[NF];
    static result res[NF];
    for (int i = 0; i < 8; i++) cfg[i] = TREE_CFG[i], cfg[i].sample = false;
    for (int i = 0; i < N_ABORT; i++) cfg[8 + i] = abort_cfg(i);
    sched_cfg sc = {.page_size = 1};
    run(cfg, NF, &sc, false, false, res, NULL, NULL);
    char path[400];
    snprintf(path, sizeof path, "%s/fit_seqs.json", g_heads);
    FILE *f = fopen(path, "w");
    if (!f) return false;
    fprintf(f, "[");
    for (int i = 0; i < NF; i++) {
        int32_t in[MAXT];
        fill_prompt(&cfg[i], i < 8 ? i : i - 8, in);
        fprintf(f, "%s[", i ? "," : "");
        for (int t = 0; t < cfg[i].n_in; t++) fprintf(f, "%s%d", t ? "," : "", in[t]);
        for (int t = 0; t < res[i].n; t++) fprintf(f, ",%d", res[i].ids[t]);
        fprintf(f, "]");
    }
    fprintf(f, "]\n");
    fclose(f);
    char cmd[1600];
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 tests/ref/eagle_ref.py fit %s %s %s", head("eagle1_fit"), target_dir(),
             path);
    if (system(cmd) != 0) return false;
    done = 1;
    return true;
}

#define NEED_FIT()                                                 \
    do {                                                           \
        NEED_HEADS();                                              \
        if (!ensure_fit()) fail_msg("eagle_ref.py fit failed");     \
    } while (0)

/* Mixed workload (chunked prefill, mixed chunks, a small pool that
 * retracts) with aborts: no target KV page leaked, survivors identical. */
static void test_aborts_no_leak(void **state)
{
    (void)state;
    NEED_HEADS();
    enum { N = N_ABORT };
    req_cfg cfg[N];
    for (int i = 0; i < N; i++) cfg[i] = abort_cfg(i);
    if (!ensure_fit()) fail_msg("eagle_ref.py fit failed");
    const sched_cfg scs[3] = {{.page_size = 1, .chunked = 16, .mixed = true},
                              {.page_size = 1, .pool = 600, .conservativeness = 0.05},
                              {.page_size = 16, .chunked = 32, .mixed = true, .pool = 480, .conservativeness = 0.05}};
    for (int pass = 0; pass < 5; pass++) { /* 2, 3, 4: topk 4 trees of the fitted head (4: page 16) */
        const int c = pass < 4 ? pass % 2 : 2;
        g_algo = c && pass < 2 ? SPEC_ALGO_EAGLE3 : SPEC_ALGO_EAGLE;
        g_head_name = pass < 2 ? NULL : "eagle1_fit";
        g_topk = pass < 2 ? 1 : 4, g_steps = pass < 2 ? 0 : 5, g_ndt = pass < 2 ? 0 : 8;
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
        if (pass >= 2) {
            sched_stats st;
            sched_get_stats(s, &st);
            assert_true(st.spec_tree_verifies > 0);
            assert_true(st.spec_accepted_tokens > 0);
            if (c == 2) assert_true(st.num_retractions > 0);
            print_message("aborts pass %d (page %d): %lld tree verifies, %lld accepted, %lld retractions\n", pass,
                          scs[c].page_size, (long long)st.spec_tree_verifies, (long long)st.spec_accepted_tokens,
                          (long long)st.num_retractions);
        }
        sched_destroy(s);
        spec_drafter_destroy(d);
    }
    g_algo = SPEC_ALGO_EAGLE, g_head_name = NULL, g_topk = 1, g_steps = 0, g_ndt = 0;
}

/* Tree drafts against the head itself: every node's cumulative
 * log-probability minus its parent's equals the log-softmax of its token
 * under the head's logits after the causal chain of its ancestors
 * (spec_eagle_path_logits: no tree mask), so a wrong mask, rope position,
 * hidden input or parent shows; parents come first and never score below
 * their children; the frontier's slots go back; topk 1 gives the chain. */
static void tree_vs_path(const char *name, int eagle3, bool with_map)
{
    enum { N = 21, SLOTS = 256, K = 12 };
    model_kv *kv = model_kv_create(g_model, SLOTS, DTYPE_F32);
    assert_non_null(kv);
    char err[512];
    spec_eagle *e = spec_eagle_create(head(name), eagle3, g_model, SLOTS, 1024, err, sizeof err);
    if (!e) fail_msg("%s", err);
    spec_tokmap *map = NULL; /* --speculative-token-map: the multiples of 3 */
    if (with_map) {
        int64_t hot[683];
        for (int i = 0; i < 683; i++) hot[i] = 3 * i;
        map = spec_tokmap_from_ids(hot, 683, err, sizeof err);
        assert_non_null(map);
        assert_int_equal(spec_tokmap_bind(map, model_get_config(g_model)->vocab_size, err, sizeof err), 0);
        assert_int_equal(spec_eagle_set_token_map(e, map, err, sizeof err), 0);
    }
    int32_t ids[N], pos[N], slots[N];
    for (int i = 0; i < N; i++) {
        ids[i] = i == 0 ? 1 : (int32_t)((37 * i * i + 11 * i) % 2000 + 3);
        pos[i] = i;
        slots[i] = 200 - 3 * i;
    }
    int32_t start[2] = {0, N - 1}, kvl[1] = {N - 1};
    const int32_t *sl[1] = {slots};
    model_batch b = {.n_tokens = N - 1, .tokens = ids, .positions = pos, .n_seqs = 1, .seq_start = start,
                     .seq_kv_len = kvl, .seq_slots = sl, .n_logits = 0};
    assert_int_equal(model_forward(g_model, kv, &b, NULL, NULL), 0);
    const int Vd = spec_eagle_vocab(e);
    float *lg = malloc(sizeof(float) * (size_t)Vd);
    spec_draft_req r = {0};
    const int shapes[3][2] = {{5, 4}, {4, 2}, {3, 3}}; /* (steps, topk) */
    for (int sh = 0; sh < 3; sh++) {
        int32_t draft[K], par[K];
        double sc[K];
        int n = spec_eagle_propose_tree(e, &r, ids, N, slots, draft, par, sc, K, shapes[sh][0], shapes[sh][1]);
        assert_int_equal(n, K); /* enough candidates: topk + (steps - 1) topk^2 >= 12 */
        assert_int_equal(spec_eagle_slots_used(e), N - 1);
        int depth[K], maxd = 0;
        for (int c = 0; c < n; c++) {
            assert_true(par[c] >= -1 && par[c] < c);
            if (map) assert_int_equal(draft[c] % 3, 0);
            depth[c] = par[c] < 0 ? 1 : depth[par[c]] + 1;
            if (depth[c] > maxd) maxd = depth[c];
            assert_true(depth[c] <= shapes[sh][0]);
            if (par[c] >= 0) assert_true(sc[c] <= sc[par[c]]);
            int32_t path[K];
            int np = 0;
            for (int v = par[c]; v >= 0; v = par[v]) path[np++] = draft[v];
            for (int i = 0; i < np / 2; i++) {
                int32_t t = path[i];
                path[i] = path[np - 1 - i], path[np - 1 - i] = t;
            }
            assert_int_equal(spec_eagle_path_logits(e, ids, N, slots, path, np, lg), 0);
            float mx = lg[0];
            for (int i = 1; i < Vd; i++) mx = lg[i] > mx ? lg[i] : mx;
            double sum = 0;
            for (int i = 0; i < Vd; i++) sum += exp((double)lg[i] - mx);
            int di = -1;
            for (int i = 0; i < Vd && di < 0; i++)
                if (spec_eagle_target_id(e, i) == draft[c]) di = i;
            assert_true(di >= 0);
            double want = (double)lg[di] - mx - log(sum), got = sc[c] - (par[c] >= 0 ? sc[par[c]] : 0.0);
            if (fabs(want - got) > 1e-3)
                fail_msg("%s steps %d topk %d node %d (depth %d): log-prob %.6f, the head's chain says %.6f", name,
                         shapes[sh][0], shapes[sh][1], c, depth[c], got, want);
            /* and the node's token is among its parent's topk */
            int better = 0;
            for (int i = 0; i < Vd; i++) better += lg[i] > lg[di];
            assert_true(better < shapes[sh][1]);
        }
        assert_true(maxd >= 2); /* the tree reached past the first step */
    }
    /* topk 1: the chain */
    int32_t chain[4], t1[4], p1[4];
    assert_int_equal(spec_eagle_propose(e, &r, ids, N, slots, chain, 4), 4);
    assert_int_equal(spec_eagle_propose_tree(e, &r, ids, N, slots, t1, p1, NULL, 4, 4, 1), 4);
    assert_memory_equal(chain, t1, sizeof chain);
    for (int i = 0; i < 4; i++) assert_int_equal(p1[i], i - 1);
    spec_eagle_req_release(e, &r);
    assert_int_equal(spec_eagle_slots_used(e), 0);
    free(lg);
    spec_eagle_destroy(e);
    spec_tokmap_destroy(map);
    model_kv_destroy(kv);
}

static void test_tree_vs_path(void **state)
{
    (void)state;
    NEED_FIT();
    tree_vs_path("eagle1", 0, false);
    tree_vs_path("eagle3", 1, false);
    tree_vs_path("eagle1_fit", 0, false);
    tree_vs_path("eagle1", 0, true); /* with a token map: drafts and log-probabilities over its ids */
}

/* topk 2..4 trees: outputs identical to plain decoding (greedy and seeded),
 * batched and alone, page 1 and 16 (trees verified at both; at 16 the
 * accepted nodes' KV and hidden-state capture rows are copied into place),
 * with accepted drafts (the fitted head) and the counters adding
 * up; the random EAGLE3 head too. */
static void test_tree_identical(void **state)
{
    (void)state;
    NEED_FIT();
    const req_cfg *cfg = TREE_CFG;
    const int n = 8;
    static result ref[8], got[8];
    sched_stats st_ref, st;
    spec_drafter_stats dst;
    const sched_cfg scs[2] = {{.page_size = 1}, {.page_size = 16}};
    int64_t acc_chain = -1;
    int64_t at1[2][5][4]; /* page 1, batch: (accepted, drafted, tree verifies, off-branch) per head, topk */
    for (int h = 0; h < 2; h++) {
        g_algo = h ? SPEC_ALGO_EAGLE3 : SPEC_ALGO_EAGLE;
        g_head_name = h ? NULL : "eagle1_fit";
        for (int c = 0; c < 2; c++)
            for (int alone = 0; alone < 2; alone++) {
                if (c == 1 && alone) continue;
                run(cfg, n, &scs[c], false, alone, ref, &st_ref, NULL);
                for (int topk = 1; topk <= 4; topk++) {
                    if (topk == 1 && (h || c || alone)) continue; /* the chain: for the accept comparison only */
                    g_topk = topk, g_steps = 5, g_ndt = topk == 1 ? 6 : 8;
                    run(cfg, n, &scs[c], true, alone, got, &st, &dst);
                    char what[128];
                    snprintf(what, sizeof what, "%s, page %d, %s, topk %d", h ? "EAGLE3" : "EAGLE fit",
                             scs[c].page_size, alone ? "alone" : "batch", topk);
                    expect_same(ref, got, n, what);
                    assert_int_equal(st.generated_tokens, st_ref.generated_tokens);
                    assert_true(st.spec_draft_tokens > 0);
                    int64_t acc = 0;
                    for (int i = 0; i < n; i++) {
                        acc += got[i].accepted;
                        assert_true(got[i].accepted <= got[i].drafted);
                        assert_int_equal(got[i].n - 1, got[i].verify_ct + got[i].accepted);
                    }
                    assert_int_equal(acc, st.spec_accepted_tokens);
                    if (topk > 1) assert_true(st.spec_tree_verifies > 0); /* page 16 too: KV copied into place */
                    if (!h) assert_true(st.spec_accepted_tokens > 0);
                    if (topk == 1) acc_chain = acc;
                    /* page 16 verifies the same trees as page 1: the same drafts, so the accepted
                     * nodes' KV and the EAGLE capture rows (the drafter's next input) were copied */
                    const int64_t cur[4] = {acc, st.spec_draft_tokens, st.spec_tree_verifies, st.spec_tree_off_branch};
                    if (c == 0 && !alone) memcpy(at1[h][topk], cur, sizeof cur);
                    if (c == 1) assert_memory_equal(at1[h][topk], cur, sizeof cur);
                    print_message("%s: accepted %lld of %lld drafts, %lld tree verifies, %lld off the first branch\n",
                                  what, (long long)acc, (long long)st.spec_draft_tokens, (long long)st.spec_tree_verifies,
                                  (long long)st.spec_tree_off_branch);
                }
            }
    }
    assert_true(acc_chain > 0);
    g_algo = SPEC_ALGO_EAGLE, g_head_name = NULL, g_topk = 1, g_steps = 0, g_ndt = 0;
}

/* Seeded sampling at temperature 1 with topk 4 trees: the same seeds give
 * the same ids as plain decoding, and other seeds the same distribution of
 * the token at output position 8 (two-sample chi-square over 240 requests
 * each, bins of >= 10 tokens, the rest pooled by id, p = 0.001); at page
 * size 1 and 16. */
static void test_tree_sampling_distribution(void **state)
{
    (void)state;
    NEED_FIT();
    enum { N = 240, POS = 8 };
    static req_cfg cfg[N];
    static result a[N], b[N], b_same[N];
    g_head_name = "eagle1_fit", g_topk = 4, g_steps = 5, g_ndt = 8;
    for (int pg = 1; pg <= 16; pg += 15) { /* page 16: the accepted nodes' KV copied into the pages */
        sched_cfg sc = {.page_size = pg};
        for (int i = 0; i < N; i++) cfg[i] = (req_cfg){i % 3, 30, POS + 2, true, 1 + (uint64_t)i, false, false, -1};
        run(cfg, N, &sc, false, false, a, NULL, NULL);
        sched_stats st;
        run(cfg, N, &sc, true, false, b_same, &st, NULL);
        expect_same(a, b_same, N, "tree, seeded sampling, same seeds");
        for (int i = 0; i < N; i++) cfg[i].seed = 100000 + (uint64_t)i;
        run(cfg, N, &sc, true, false, b, &st, NULL);
        assert_true(st.spec_accepted_tokens > 0);
        assert_true(st.spec_tree_verifies > 0);
        int V = model_get_config(g_model)->vocab_size;
        int *ca = calloc((size_t)V, sizeof(int)), *cb = calloc((size_t)V, sizeof(int));
        for (int i = 0; i < N; i++) ca[a[i].ids[POS]]++, cb[b[i].ids[POS]]++;
        int bins;
        double chi = chi2_two_sample(ca, cb, V, &bins);
        free(ca), free(cb);
        assert_true(bins >= 5);
        double bound = chi2_quantile(bins - 1, 3.09);
        print_message("tree sampling, page %d: accepted %lld, chi-square %.2f over %d bins (bound %.2f at p = 0.001)\n",
                      pg, (long long)st.spec_accepted_tokens, chi, bins, bound);
        assert_true(chi < bound);
    }
    g_head_name = NULL, g_topk = 1, g_steps = 0, g_ndt = 0;
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
        cmocka_unit_test(test_errors),          cmocka_unit_test(test_tree_vs_path),
        cmocka_unit_test(test_tree_identical),  cmocka_unit_test(test_tree_sampling_distribution),
    };
    return cmocka_run_group_tests(tests, heads_setup, heads_teardown);
}
