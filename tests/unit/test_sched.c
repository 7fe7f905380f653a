/* test_sched — the scheduler on TinyStories-656K (f32, greedy, 1 thread):
 * batch invariance across radix on/off, chunk sizes 16/64/none, page sizes
 * 1/16/64 and mixed chunks; retraction under a tiny pool; abort; n > 1;
 * priority preemption; queue-full rejection; cached_tokens; stream
 * interval; stop token ids / min_new_tokens / stop-string hook; policies;
 * the threaded inbox/outbox API; request JSON parsing. */
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

#include "kernels/kernels.h"
#include "model/model.h"
#include "sched/sched.h"
#include "api/api_generate_json.h"
#include "util/log.h"

static model *g_model;

static const char *shared_dir(void)
{
    const char *s = getenv("SGLC_SHARED");
    return s && *s ? s : "../shared";
}

static int setup(void **state)
{
    (void)state;
    kernels_init(NULL);
    log_set_level(getenv("SGLC_TEST_DEBUG") ? LOG_DEBUG : LOG_WARNING);
    char dir[512], err[1024];
    snprintf(dir, sizeof dir, "%s/models/TinyStories-656K", shared_dir());
    if (access(dir, R_OK) != 0) return 0;
    model_load_opts o = {.model_path = dir, .dtype = -1};
    g_model = model_load(&o, err, sizeof err);
    if (!g_model) fprintf(stderr, "load failed: %s\n", err);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    model_free(g_model);
    return 0;
}

#define NEED_MODEL()                                                                 \
    do {                                                                             \
        if (!g_model) {                                                              \
            print_message("TinyStories-656K not found under $SGLC_SHARED: skipped\n"); \
            skip();                                                                  \
        }                                                                            \
    } while (0)

/* ---- workloads ------------------------------------------------------------- */

typedef struct {
    int n;
    int32_t *in[96];
    int n_in[96];
    int max_new[96];
} workload;

static uint64_t g_rng;
static uint32_t rnd(void)
{
    g_rng = g_rng * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(g_rng >> 33);
}

/* n requests: three shared "system prompts" (70, 20 and 0 tokens) plus a
 * random tail, so that prefixes are shared at page sizes 1, 16 and 64. */
static void make_workload(workload *w, int n, int tail_max, int new_max, uint64_t seed)
{
    g_rng = seed;
    int32_t sys[3][70];
    int sys_len[3] = {70, 20, 0};
    for (int g = 0; g < 3; g++)
        for (int t = 0; t < 70; t++) sys[g][t] = 3 + (int32_t)(rnd() % 2000);
    w->n = n;
    for (int i = 0; i < n; i++) {
        int g = i % 3, tail = 1 + (int)(rnd() % (uint32_t)tail_max);
        w->n_in[i] = sys_len[g] + tail;
        w->in[i] = malloc(sizeof(int32_t) * (size_t)w->n_in[i]);
        w->in[i][0] = 1; /* BOS */
        for (int t = 1; t < sys_len[g]; t++) w->in[i][t] = sys[g][t];
        for (int t = sys_len[g] > 0 ? sys_len[g] : 1; t < w->n_in[i]; t++) w->in[i][t] = 3 + (int32_t)(rnd() % 2000);
        w->max_new[i] = 2 + (int)(rnd() % (uint32_t)new_max);
    }
}

static void free_workload(workload *w)
{
    for (int i = 0; i < w->n; i++) free(w->in[i]);
}

static sched_args base_args(void)
{
    sched_args a;
    sched_args_init(&a);
    a.max_total_tokens = 16384;
    a.threads = 1;
    a.random_seed = 7;
    return a;
}

static sched *mk(const sched_args *a)
{
    char err[512];
    sched *s = sched_create(g_model, a, err, sizeof err);
    if (!s) fail_msg("sched_create: %s", err);
    return s;
}

static void spec_for(sched_req_spec *sp, const workload *w, int i)
{
    sched_req_spec_init(sp);
    sp->n_input = w->n_in[i];
    sp->input_ids = malloc(sizeof(int32_t) * (size_t)sp->n_input);
    memcpy(sp->input_ids, w->in[i], sizeof(int32_t) * (size_t)sp->n_input);
    sp->params.has_max_new_tokens = true;
    sp->params.max_new_tokens = w->max_new[i];
    sp->params.top_k = 1; /* greedy */
    sp->params.ignore_eos = true;
}

typedef struct {
    sched_result r[96];
    uint64_t id[96];
} outputs;

static int index_of(const outputs *o, int n, uint64_t id)
{
    for (int i = 0; i < n; i++)
        if (o->id[i] == id) return i;
    return -1;
}

/* Drain every event into o (ids[] must be set). */
static void drain(sched *s, outputs *o, int n)
{
    sched_event *e;
    while ((e = sched_poll(s))) {
        int k = index_of(o, n, e->id);
        assert_true(k >= 0);
        assert_int_equal(sched_result_add(&o->r[k], e), 0);
        sched_event_free(e);
    }
}

static void run_all(const sched_args *a, const workload *w, outputs *o)
{
    sched *s = mk(a);
    for (int i = 0; i < w->n; i++) {
        sched_result_init(&o->r[i], false);
        sched_req_spec sp;
        spec_for(&sp, w, i);
        o->id[i] = sched_submit(s, &sp);
    }
    assert_int_equal(sched_run_until_idle(s), 0);
    drain(s, o, w->n);
    char err[512];
    if (sched_check_leak(s, err, sizeof err)) fail_msg("%s", err);
    sched_stats st;
    sched_get_stats(s, &st);
    assert_int_equal(st.leak_failures, 0);
    assert_true(st.leak_checks >= 1);
    sched_destroy(s);
}

/* Every request alone: one at a time, no cache, no chunking. */
static void run_alone(const workload *w, outputs *o)
{
    sched_args a = base_args();
    a.disable_radix_cache = true;
    a.chunked_prefill_size = -1;
    sched *s = mk(&a);
    for (int i = 0; i < w->n; i++) {
        sched_result_init(&o->r[i], false);
        sched_req_spec sp;
        spec_for(&sp, w, i);
        o->id[i] = sched_submit(s, &sp);
        assert_int_equal(sched_run_until_idle(s), 0);
        drain(s, o, i + 1);
    }
    sched_destroy(s);
}

static void free_outputs(outputs *o, int n)
{
    for (int i = 0; i < n; i++) sched_result_free(&o->r[i]);
}

static void expect_same(const outputs *ref, const outputs *got, const workload *w, const char *what)
{
    for (int i = 0; i < w->n; i++) {
        const sched_result *a = &ref->r[i], *b = &got->r[i];
        assert_true(b->done);
        if (b->fin.finish != SCHED_FINISH_LENGTH || b->n != w->max_new[i])
            fail_msg("%s: request %d finished %d with %lld tokens (want length %d)", what, i, b->fin.finish,
                     (long long)b->n, w->max_new[i]);
        assert_int_equal(a->n, b->n);
        for (int64_t t = 0; t < a->n; t++)
            if (a->ids[t] != b->ids[t])
                fail_msg("%s: request %d differs at output %lld: %d vs %d", what, i, (long long)t, a->ids[t], b->ids[t]);
    }
}

static int64_t sum_cached(const outputs *o, int n)
{
    int64_t c = 0;
    for (int i = 0; i < n; i++) c += o->r[i].fin.cached_tokens;
    return c;
}

/* ---- tests ----------------------------------------------------------------- */

static void test_batch_invariance(void **state)
{
    (void)state;
    NEED_MODEL();
    workload w;
    make_workload(&w, 65, 40, 8, 42);
    static outputs ref, got;
    run_alone(&w, &ref);
    struct {
        bool radix;
        int chunk;
        int page;
        bool mixed;
        sched_policy pol;
    } cfg[] = {
        {true, 16, 1, false, SCHED_POLICY_FCFS},
        {false, 16, 16, false, SCHED_POLICY_FCFS},
        {true, -1, 64, false, SCHED_POLICY_LPM},
        {true, 64, 16, true, SCHED_POLICY_DFS_WEIGHT},
        {false, 64, 64, true, SCHED_POLICY_FCFS},
    };
    for (size_t c = 0; c < sizeof cfg / sizeof cfg[0]; c++) {
        sched_args a = base_args();
        a.disable_radix_cache = !cfg[c].radix;
        a.chunked_prefill_size = cfg[c].chunk;
        a.page_size = cfg[c].page;
        a.enable_mixed_chunk = cfg[c].mixed;
        a.schedule_policy = cfg[c].pol;
        char what[128];
        snprintf(what, sizeof what, "radix %d chunk %d page %d mixed %d policy %s", cfg[c].radix, cfg[c].chunk,
                 cfg[c].page, cfg[c].mixed, sched_policy_name(cfg[c].pol));
        memset(&got, 0, sizeof got);
        run_all(&a, &w, &got);
        expect_same(&ref, &got, &w, what);
        int64_t cached = sum_cached(&got, w.n);
        if (cfg[c].radix && cached == 0) fail_msg("%s: no cached tokens on a shared-prefix workload", what);
        if (!cfg[c].radix) assert_int_equal(cached, 0);
        free_outputs(&got, w.n);
    }
    free_outputs(&ref, w.n);
    free_workload(&w);
}

static void test_retraction_tiny_pool(void **state)
{
    (void)state;
    NEED_MODEL();
    workload w;
    make_workload(&w, 24, 20, 1, 9);
    for (int i = 0; i < w.n; i++) w.max_new[i] = 40 + i % 7;
    static outputs ref, got;
    run_alone(&w, &ref);
    int pages[] = {1, 16};
    for (int p = 0; p < 2; p++) {
        sched_args a = base_args();
        a.max_total_tokens = 320;
        a.page_size = pages[p];
        a.chunked_prefill_size = 64;
        memset(&got, 0, sizeof got);
        sched *s = mk(&a);
        for (int i = 0; i < w.n; i++) {
            sched_result_init(&got.r[i], false);
            sched_req_spec sp;
            spec_for(&sp, &w, i);
            got.id[i] = sched_submit(s, &sp);
        }
        assert_int_equal(sched_run_until_idle(s), 0);
        drain(s, &got, w.n);
        sched_stats st;
        sched_get_stats(s, &st);
        char err[512];
        if (sched_check_leak(s, err, sizeof err)) fail_msg("%s", err);
        assert_int_equal(st.leak_failures, 0);
        if (st.num_retractions == 0) fail_msg("page %d: no retraction on a tiny pool", pages[p]);
        int64_t per_req = 0;
        for (int i = 0; i < w.n; i++) per_req += got.r[i].fin.num_retractions;
        assert_int_equal(per_req, st.num_retractions);
        expect_same(&ref, &got, &w, pages[p] == 1 ? "tiny pool, page 1" : "tiny pool, page 16");
        sched_destroy(s);
        free_outputs(&got, w.n);
    }
    free_outputs(&ref, w.n);
    free_workload(&w);
}

static sched_req_spec simple_spec(int n_in, int max_new, int32_t base)
{
    sched_req_spec sp;
    sched_req_spec_init(&sp);
    sp.n_input = n_in;
    sp.input_ids = malloc(sizeof(int32_t) * (size_t)n_in);
    for (int i = 0; i < n_in; i++) sp.input_ids[i] = i == 0 ? 1 : (base + 37 * i) % 2000 + 3;
    sp.params.has_max_new_tokens = true;
    sp.params.max_new_tokens = max_new;
    sp.params.top_k = 1;
    sp.params.ignore_eos = true;
    return sp;
}

static void test_abort_frees_pages(void **state)
{
    (void)state;
    NEED_MODEL();
    sched_args a = base_args();
    a.max_total_tokens = 1024;
    sched *s = mk(&a);
    sched_req_spec sp = simple_spec(30, 300, 5);
    sp.rid = strdup("victim");
    sched_req_spec sp2 = simple_spec(20, 300, 9);
    sp2.rid = strdup("waiting-victim");
    sched_submit(s, &sp);
    for (int i = 0; i < 5; i++) assert_int_equal(sched_step(s), 1);
    sched_stats st;
    sched_get_stats(s, &st);
    assert_int_equal(st.n_running, 1);
    assert_true(st.free_tokens < 1024 - 30);
    sched_abort(s, "victim");
    sched_abort(s, "no-such-rid");
    sched_step(s); /* the abort is handled at the start of this step */
    sched_get_stats(s, &st);
    assert_int_equal(st.n_running, 0);
    assert_int_equal(st.protected_tokens, 0);
    assert_int_equal(st.free_tokens + st.evictable_tokens, 1024);
    sched_event *e = sched_poll(s);
    assert_non_null(e);
    assert_int_equal(e->kind, SCHED_EV_FINISH);
    assert_int_equal(e->finish, SCHED_FINISH_ABORT);
    assert_string_equal(e->rid, "victim");
    assert_true(e->completion_tokens >= 4);
    sched_event_free(e);
    /* a waiting request is aborted before it ever runs */
    sched_submit(s, &sp2);
    sched_abort(s, "waiting-victim");
    sched_step(s);
    e = sched_poll(s);
    assert_non_null(e);
    assert_int_equal(e->finish, SCHED_FINISH_ABORT);
    assert_int_equal(e->completion_tokens, 0);
    sched_event_free(e);
    /* by submit id (a front whose client went away) */
    sched_req_spec sp3 = simple_spec(25, 300, 3);
    uint64_t id3 = sched_submit(s, &sp3);
    for (int i = 0; i < 3; i++) sched_step(s);
    sched_abort_id(s, id3);
    sched_step(s);
    e = sched_poll(s);
    assert_non_null(e);
    assert_int_equal(e->id, id3);
    assert_int_equal(e->finish, SCHED_FINISH_ABORT);
    sched_event_free(e);
    sched_get_stats(s, &st);
    assert_int_equal(st.n_running, 0);
    char err[512];
    if (sched_check_leak(s, err, sizeof err)) fail_msg("%s", err);
    sched_destroy(s);
}

static void collect(sched *s, sched_result *r, int n, uint64_t id)
{
    sched_event *e;
    while ((e = sched_poll(s))) {
        assert_int_equal(e->id, id);
        assert_true(e->index >= 0 && e->index < n);
        assert_int_equal(sched_result_add(&r[e->index], e), 0);
        sched_event_free(e);
    }
}

static void test_parallel_sampling_n(void **state)
{
    (void)state;
    NEED_MODEL();
    sched_result r1[4], r2[4];
    for (int rep = 0; rep < 2; rep++) {
        sched_result *r = rep ? r2 : r1;
        sched_args a = base_args();
        sched *s = mk(&a);
        sched_req_spec sp = simple_spec(25, 12, 3);
        sp.params.top_k = SAMPLING_TOP_K_ALL;
        sp.params.temperature = 1.0;
        sp.params.n = 4;
        sp.params.has_sampling_seed = true;
        sp.params.sampling_seed = 1234;
        for (int i = 0; i < 4; i++) sched_result_init(&r[i], false);
        uint64_t id = sched_submit(s, &sp);
        assert_int_equal(sched_run_until_idle(s), 0);
        collect(s, r, 4, id);
        for (int i = 0; i < 4; i++) {
            assert_true(r[i].done);
            assert_int_equal(r[i].n, 12);
            /* the siblings reuse the warm-up's prompt pages */
            assert_int_equal(r[i].fin.cached_tokens, 24);
            assert_int_equal(r[i].fin.prompt_tokens, 25);
        }
        char err[512];
        if (sched_check_leak(s, err, sizeof err)) fail_msg("%s", err);
        sched_destroy(s);
    }
    int distinct = 0;
    for (int i = 1; i < 4; i++) distinct += memcmp(r1[0].ids, r1[i].ids, 12 * sizeof(int32_t)) != 0;
    assert_true(distinct > 0); /* seeds seed + i differ */
    for (int i = 0; i < 4; i++) {
        assert_memory_equal(r1[i].ids, r2[i].ids, 12 * sizeof(int32_t)); /* sampling_seed replays */
        sched_result_free(&r1[i]);
        sched_result_free(&r2[i]);
    }
}

static void test_priority_preemption(void **state)
{
    (void)state;
    NEED_MODEL();
    sched_args a = base_args();
    a.enable_priority_scheduling = true;
    a.max_running_requests = 1;
    sched *s = mk(&a);
    sched_req_spec lo = simple_spec(20, 30, 1), hi = simple_spec(20, 10, 2), mid = simple_spec(20, 10, 4);
    lo.has_priority = true, lo.priority = 0, lo.rid = strdup("low");
    hi.has_priority = true, hi.priority = 100, hi.rid = strdup("high");
    mid.has_priority = true, mid.priority = 5, mid.rid = strdup("mid"); /* within the threshold of low */
    uint64_t id_lo = sched_submit(s, &lo);
    for (int i = 0; i < 4; i++) sched_step(s); /* low is decoding */
    uint64_t id_mid = sched_submit(s, &mid);
    for (int i = 0; i < 2; i++) sched_step(s);
    sched_stats st;
    sched_get_stats(s, &st);
    assert_int_equal(st.num_preemptions, 0); /* 5 - 0 <= threshold 10 */
    uint64_t id_hi = sched_submit(s, &hi);
    assert_int_equal(sched_run_until_idle(s), 0);
    sched_get_stats(s, &st);
    assert_true(st.num_preemptions >= 1);
    /* finish order: high first; low was retracted once and still finished */
    uint64_t order[3];
    int n = 0, lo_retr = -1;
    int64_t lo_len = 0;
    sched_event *e;
    while ((e = sched_poll(s))) {
        if (e->kind == SCHED_EV_FINISH) {
            order[n++] = e->id;
            if (e->id == id_lo) {
                lo_retr = e->num_retractions;
                lo_len = e->completion_tokens;
            }
        }
        sched_event_free(e);
    }
    assert_int_equal(n, 3);
    assert_int_equal(order[0], id_hi);
    assert_true(lo_retr >= 1);
    assert_int_equal(lo_len, 30);
    (void)id_mid;
    sched_destroy(s);

    /* --abort-on-priority-when-disabled */
    a = base_args();
    a.abort_on_priority_when_disabled = true;
    s = mk(&a);
    sched_req_spec p = simple_spec(10, 5, 1);
    p.has_priority = true;
    p.priority = 3;
    sched_submit(s, &p);
    e = sched_poll(s);
    assert_non_null(e);
    assert_int_equal(e->finish, SCHED_FINISH_ABORT);
    assert_int_equal(e->http_status, 400);
    sched_event_free(e);
    sched_destroy(s);
}

/* Finish order of a run: ids of SCHED_EV_FINISH events (up to cap). */
static int finish_order(sched *s, uint64_t *order, int cap, int *retractions)
{
    int n = 0;
    sched_event *e;
    while ((e = sched_poll(s))) {
        if (e->kind == SCHED_EV_FINISH && n < cap) {
            if (retractions) retractions[n] = e->num_retractions;
            order[n++] = e->id;
        }
        sched_event_free(e);
    }
    return n;
}

/* --disable-priority-preemption: the same workload as
 * test_priority_preemption, but high priority only jumps the queue. */
static void test_disable_priority_preemption(void **state)
{
    (void)state;
    NEED_MODEL();
    sched_args a = base_args();
    a.enable_priority_scheduling = true;
    a.disable_priority_preemption = true;
    a.max_running_requests = 1;
    sched *s = mk(&a);
    sched_req_spec lo = simple_spec(20, 30, 1), hi = simple_spec(20, 10, 2), mid = simple_spec(20, 10, 4);
    lo.has_priority = true, lo.priority = 0;
    hi.has_priority = true, hi.priority = 100;
    mid.has_priority = true, mid.priority = 1;
    uint64_t id_lo = sched_submit(s, &lo);
    for (int i = 0; i < 4; i++) sched_step(s); /* low is decoding */
    uint64_t id_mid = sched_submit(s, &mid);
    uint64_t id_hi = sched_submit(s, &hi);
    assert_int_equal(sched_run_until_idle(s), 0);
    sched_stats st;
    sched_get_stats(s, &st);
    assert_int_equal(st.num_preemptions, 0);
    uint64_t order[3];
    int retr[3];
    assert_int_equal(finish_order(s, order, 3, retr), 3);
    assert_int_equal(order[0], id_lo); /* never preempted */
    assert_int_equal(retr[0], 0);
    assert_int_equal(order[1], id_hi); /* but priority still orders the queue */
    assert_int_equal(order[2], id_mid);
    sched_destroy(s);
}

/* Requests without a priority: the lowest priority there is (SGLang), or
 * --default-priority-value.  One slot; a blocker runs first, then the
 * queue is ordered by priority. */
static void default_priority_run(bool low_first, bool has_default, int64_t def, uint64_t *first_after_blocker,
                                 uint64_t *id_none, uint64_t *id_prio)
{
    sched_args a = base_args();
    a.enable_priority_scheduling = true;
    a.disable_priority_preemption = true;
    a.schedule_low_priority_values_first = low_first;
    a.has_default_priority = has_default;
    a.default_priority_value = def;
    a.max_running_requests = 1;
    sched *s = mk(&a);
    sched_req_spec blk = simple_spec(20, 8, 1), none = simple_spec(20, 4, 2), pr = simple_spec(20, 4, 3);
    blk.has_priority = true, blk.priority = 0;
    pr.has_priority = true, pr.priority = 5;
    sched_submit(s, &blk);
    for (int i = 0; i < 2; i++) sched_step(s);
    *id_none = sched_submit(s, &none); /* submitted first: fcfs would run it first */
    *id_prio = sched_submit(s, &pr);
    assert_int_equal(sched_run_until_idle(s), 0);
    uint64_t order[3];
    assert_int_equal(finish_order(s, order, 3, NULL), 3);
    *first_after_blocker = order[1];
    sched_destroy(s);
}

static void test_default_priority_value(void **state)
{
    (void)state;
    NEED_MODEL();
    uint64_t first, none, pr;
    default_priority_run(false, false, 0, &first, &none, &pr);
    assert_int_equal(first, pr); /* no priority = lowest: 5 goes first */
    default_priority_run(true, false, 0, &first, &none, &pr);
    assert_int_equal(first, pr); /* low values first: no priority = INT64_MAX */
    default_priority_run(false, true, 100, &first, &none, &pr);
    assert_int_equal(first, none); /* default 100 > 5 */
    default_priority_run(false, true, 1, &first, &none, &pr);
    assert_int_equal(first, pr);   /* default 1 < 5 */
    default_priority_run(true, true, 1, &first, &none, &pr);
    assert_int_equal(first, none); /* low values first: 1 before 5 */
}

/* Preemption for KV tokens (not slots): a low-priority request holds most
 * of a small pool; a high-priority one that does not fit preempts it. */
static void test_priority_preemption_tokens(void **state)
{
    (void)state;
    NEED_MODEL();
    sched_args a = base_args();
    a.enable_priority_scheduling = true;
    a.max_total_tokens = 256;
    sched *s = mk(&a);
    sched_req_spec lo = simple_spec(20, 200, 1), hi = simple_spec(120, 8, 2);
    lo.has_priority = true, lo.priority = 0, lo.rid = strdup("low");
    hi.has_priority = true, hi.priority = 50, hi.rid = strdup("high");
    uint64_t id_lo = sched_submit(s, &lo);
    for (int i = 0; i < 30; i++) sched_step(s); /* low holds 50 tokens + its reserve */
    uint64_t id_hi = sched_submit(s, &hi);
    assert_int_equal(sched_run_until_idle(s), 0);
    sched_stats st;
    sched_get_stats(s, &st);
    assert_true(st.num_preemptions >= 1);
    uint64_t first = 0;
    int lo_retr = -1, n = 0;
    sched_event *e;
    while ((e = sched_poll(s))) {
        if (e->kind == SCHED_EV_FINISH) {
            if (!n++) first = e->id;
            assert_int_equal(e->finish, SCHED_FINISH_LENGTH);
            if (e->id == id_lo) lo_retr = e->num_retractions;
        }
        sched_event_free(e);
    }
    assert_int_equal(n, 2);
    assert_int_equal(first, id_hi);
    assert_true(lo_retr >= 1);
    char err[512];
    if (sched_check_leak(s, err, sizeof err)) fail_msg("%s", err);
    sched_destroy(s);
}

static void test_queue_full(void **state)
{
    (void)state;
    NEED_MODEL();
    sched_args a = base_args();
    a.max_queued_requests = 2;
    sched *s = mk(&a);
    for (int i = 0; i < 5; i++) {
        sched_req_spec sp = simple_spec(10, 3, i);
        sched_submit(s, &sp);
    }
    assert_int_equal(sched_run_until_idle(s), 0);
    int full = 0, ok = 0;
    sched_event *e;
    while ((e = sched_poll(s))) {
        assert_int_equal(e->kind, SCHED_EV_FINISH);
        if (e->finish == SCHED_FINISH_ABORT) {
            assert_string_equal(e->finish_str, "The request queue is full.");
            assert_int_equal(e->http_status, 503);
            full++;
        } else {
            ok++;
        }
        sched_event_free(e);
    }
    assert_int_equal(full, 3);
    assert_int_equal(ok, 2);
    sched_destroy(s);
}

static int64_t cached_of(sched *s, sched_req_spec *sp)
{
    sched_submit(s, sp);
    assert_int_equal(sched_run_until_idle(s), 0);
    sched_event *e = sched_poll(s);
    assert_non_null(e);
    assert_int_equal(e->kind, SCHED_EV_FINISH);
    int64_t c = e->cached_tokens;
    sched_event_free(e);
    assert_null(sched_poll(s));
    return c;
}

static void test_cached_tokens(void **state)
{
    (void)state;
    NEED_MODEL();
    int pages[] = {1, 16};
    for (int p = 0; p < 2; p++) {
        sched_args a = base_args();
        a.page_size = pages[p];
        sched *s = mk(&a);
        sched_req_spec first = simple_spec(40, 4, 11);
        assert_int_equal(cached_of(s, &first), 0);
        sched_req_spec second = simple_spec(50, 4, 11); /* same first 40 tokens */
        assert_int_equal(cached_of(s, &second), pages[p] == 1 ? 40 : 32);
        sched_req_spec salted = simple_spec(50, 4, 11);
        salted.cache_salt = strdup("tenant-b");
        assert_int_equal(cached_of(s, &salted), 0);
        sched_destroy(s);
    }
    sched_args a = base_args();
    a.disable_radix_cache = true;
    sched *s = mk(&a);
    sched_req_spec x = simple_spec(40, 4, 11), y = simple_spec(40, 4, 11);
    cached_of(s, &x);
    assert_int_equal(cached_of(s, &y), 0);
    sched_destroy(s);
}

static void test_stream_interval(void **state)
{
    (void)state;
    NEED_MODEL();
    sched_args a = base_args();
    a.stream_interval = 3;
    sched *s = mk(&a);
    sched_req_spec sp = simple_spec(10, 10, 1);
    sp.stream = true;
    sched_submit(s, &sp);
    assert_int_equal(sched_run_until_idle(s), 0);
    int sizes[8], n = 0;
    sched_event *e;
    while ((e = sched_poll(s))) {
        assert_true(n < 8);
        sizes[n++] = e->n_ids;
        assert_int_equal(e->kind, n == 4 ? SCHED_EV_FINISH : SCHED_EV_TOKENS);
        sched_event_free(e);
    }
    assert_int_equal(n, 4);
    assert_int_equal(sizes[0], 3);
    assert_int_equal(sizes[1], 3);
    assert_int_equal(sizes[2], 3);
    assert_int_equal(sizes[3], 1);
    sched_destroy(s);
}

static int hook_calls;
static int stop_on_token(void *ctx, uint64_t id, const sampling_params *p, const int32_t *out, int64_t n)
{
    (void)id, (void)p;
    hook_calls++;
    return out[n - 1] == *(int32_t *)ctx ? 0 : -1;
}

static void test_stop_conditions(void **state)
{
    (void)state;
    NEED_MODEL();
    sched_args a = base_args();
    sched *s = mk(&a);
    sched_result ref;
    sched_result_init(&ref, false);
    sched_req_spec sp = simple_spec(12, 16, 21);
    uint64_t id = sched_submit(s, &sp);
    assert_int_equal(sched_run_until_idle(s), 0);
    collect(s, &ref, 1, id);
    assert_int_equal(ref.n, 16);
    /* the first position whose token did not occur before it */
    int k = 3;
    while (k < 16) {
        bool seen = false;
        for (int j = 0; j < k; j++) seen |= ref.ids[j] == ref.ids[k];
        if (!seen) break;
        k++;
    }
    if (k >= 16) skip();
    int32_t stop_id = ref.ids[k];
    /* stop_token_ids */
    sched_result r;
    sched_result_init(&r, false);
    sp = simple_spec(12, 16, 21);
    sp.params.ignore_eos = false;
    sp.params.stop_token_ids = malloc(sizeof(int32_t));
    sp.params.stop_token_ids[0] = stop_id;
    sp.params.n_stop_token_ids = 1;
    id = sched_submit(s, &sp);
    assert_int_equal(sched_run_until_idle(s), 0);
    collect(s, &r, 1, id);
    assert_int_equal(r.fin.finish, SCHED_FINISH_STOP_TOKEN);
    assert_int_equal(r.fin.finish_token, stop_id);
    assert_int_equal(r.n, k + 1);
    assert_memory_equal(r.ids, ref.ids, sizeof(int32_t) * (size_t)(k + 1));
    sched_result_free(&r);
    /* ignore_eos also ignores stop_token_ids (SGLang) */
    sched_result_init(&r, false);
    sp = simple_spec(12, 16, 21);
    sp.params.stop_token_ids = malloc(sizeof(int32_t));
    sp.params.stop_token_ids[0] = stop_id;
    sp.params.n_stop_token_ids = 1;
    id = sched_submit(s, &sp);
    assert_int_equal(sched_run_until_idle(s), 0);
    collect(s, &r, 1, id);
    assert_int_equal(r.fin.finish, SCHED_FINISH_LENGTH);
    assert_int_equal(r.fin.finish_length, 16);
    sched_result_free(&r);
    /* min_new_tokens past the stop position masks the stop id */
    sched_result_init(&r, false);
    sp = simple_spec(12, 16, 21);
    sp.params.ignore_eos = false;
    sp.params.stop_token_ids = malloc(sizeof(int32_t));
    sp.params.stop_token_ids[0] = stop_id;
    sp.params.n_stop_token_ids = 1;
    sp.params.min_new_tokens = k + 2;
    id = sched_submit(s, &sp);
    assert_int_equal(sched_run_until_idle(s), 0);
    collect(s, &r, 1, id);
    assert_true(r.n >= k + 2);
    for (int j = 0; j < k + 1 && j < r.n; j++) assert_int_not_equal(r.ids[j] == stop_id && j == k, 1);
    sched_result_free(&r);
    /* stop strings: refused without a hook, matched through it */
    sp = simple_spec(12, 16, 21);
    sp.params.stop = calloc(1, sizeof(char *));
    sp.params.stop[0] = strdup("The end");
    sp.params.n_stop = 1;
    id = sched_submit(s, &sp);
    sched_event *e = sched_poll(s);
    assert_non_null(e);
    assert_int_equal(e->finish, SCHED_FINISH_ABORT);
    sched_event_free(e);
    sched_set_stop_hook(s, stop_on_token, &stop_id);
    sched_result_init(&r, false);
    sp = simple_spec(12, 16, 21);
    sp.params.stop = calloc(1, sizeof(char *));
    sp.params.stop[0] = strdup("The end");
    sp.params.n_stop = 1;
    id = sched_submit(s, &sp);
    assert_int_equal(sched_run_until_idle(s), 0);
    collect(s, &r, 1, id);
    assert_int_equal(r.fin.finish, SCHED_FINISH_STOP_STR);
    assert_string_equal(r.fin.finish_str, "The end");
    assert_int_equal(r.n, k + 1);
    assert_int_equal(hook_calls, k + 1);
    sched_result_free(&r);
    sched_result_free(&ref);
    sched_destroy(s);
}

static void test_policies_same_outputs(void **state)
{
    (void)state;
    NEED_MODEL();
    workload w;
    make_workload(&w, 16, 30, 6, 77);
    static outputs ref, got;
    run_alone(&w, &ref);
    sched_policy pols[] = {SCHED_POLICY_LOF, SCHED_POLICY_RANDOM, SCHED_POLICY_DFS_WEIGHT};
    for (int p = 0; p < 3; p++) {
        sched_args a = base_args();
        a.schedule_policy = pols[p];
        a.max_prefill_tokens = 64; /* several prefill steps: the order matters */
        a.prefill_max_requests = 3;
        memset(&got, 0, sizeof got);
        run_all(&a, &w, &got);
        expect_same(&ref, &got, &w, sched_policy_name(pols[p]));
        free_outputs(&got, w.n);
    }
    free_outputs(&ref, w.n);
    free_workload(&w);
}

static void test_threaded_api(void **state)
{
    (void)state;
    NEED_MODEL();
    workload w;
    make_workload(&w, 12, 20, 6, 5);
    static outputs ref, got;
    run_alone(&w, &ref);
    sched_args a = base_args();
    sched *s = mk(&a);
    assert_true(sched_outbox_fd(s) >= 0);
    assert_int_equal(sched_start(s), 0);
    memset(&got, 0, sizeof got);
    for (int i = 0; i < w.n; i++) {
        sched_result_init(&got.r[i], false);
        sched_req_spec sp;
        spec_for(&sp, &w, i);
        sp.stream = i % 2 == 0;
        got.id[i] = sched_submit(s, &sp);
    }
    int done = 0;
    while (done < w.n) {
        sched_event *e = sched_wait(s, 30.0);
        assert_non_null(e);
        int k = index_of(&got, w.n, e->id);
        assert_true(k >= 0);
        assert_int_equal(sched_result_add(&got.r[k], e), 0);
        done += e->kind == SCHED_EV_FINISH;
        sched_event_free(e);
    }
    sched_stop(s);
    sched_stats snap;
    sched_get_stats_snapshot(s, &snap);
    assert_int_equal(snap.n_finished, w.n);
    assert_int_equal(snap.n_running, 0);
    expect_same(&ref, &got, &w, "threaded");
    char err[512];
    if (sched_check_leak(s, err, sizeof err)) fail_msg("%s", err);
    sched_destroy(s);
    free_outputs(&got, w.n);
    free_outputs(&ref, w.n);
    free_workload(&w);
}

/* ---- control messages ---------------------------------------------------- */

static int ctl(sched *s, sched_ctl_kind kind, sched_pause_mode mode, sched_ctl *out)
{
    sched_ctl c;
    memset(&c, 0, sizeof c);
    c.kind = kind;
    c.pause_mode = mode;
    int rc = sched_control(s, &c);
    if (out) *out = c;
    return rc;
}

/* Pause with requests running (their KV allocated), in every mode; one
 * request arrives while paused.  in_place / retract: after continue every
 * output equals the uninterrupted one; abort: the requests in flight end
 * with abort, the one that arrived while paused runs normally. */
static void test_pause_modes(void **state)
{
    (void)state;
    NEED_MODEL();
    workload w;
    make_workload(&w, 10, 20, 1, 77);
    for (int i = 0; i < w.n; i++) w.max_new[i] = 12 + i;
    static outputs ref, got;
    run_alone(&w, &ref);
    const sched_pause_mode modes[] = {SCHED_PAUSE_IN_PLACE, SCHED_PAUSE_RETRACT, SCHED_PAUSE_ABORT};
    for (int mi = 0; mi < 3; mi++) {
        sched_pause_mode mode = modes[mi];
        sched_args a = base_args();
        a.chunked_prefill_size = 32; /* some prompts are mid-prefill when paused */
        sched *s = mk(&a);
        memset(&got, 0, sizeof got);
        int late = w.n - 1; /* submitted while paused */
        for (int i = 0; i < w.n; i++) sched_result_init(&got.r[i], false);
        for (int i = 0; i < late; i++) {
            sched_req_spec sp;
            spec_for(&sp, &w, i);
            got.id[i] = sched_submit(s, &sp);
        }
        for (int k = 0; k < 6; k++) assert_true(sched_step(s) >= 0);
        drain(s, &got, late);
        sched_stats before, after;
        sched_get_stats(s, &before);
        if (before.n_running == 0) fail_msg("mode %d: nothing running before the pause", mode);
        sched_ctl c;
        assert_int_equal(ctl(s, SCHED_CTL_PAUSE, mode, &c), 0);
        assert_string_equal(c.msg, "Generation paused successfully.");
        assert_true(sched_is_paused(s));
        sched_req_spec sp;
        spec_for(&sp, &w, late);
        got.id[late] = sched_submit(s, &sp);
        for (int k = 0; k < 5; k++) assert_int_equal(sched_step(s), 0); /* nothing runs */
        assert_int_equal(sched_run_until_idle(s), 0);                  /* returns: paused */
        sched_get_stats(s, &after);
        assert_int_equal(after.n_decode_steps + after.n_prefill_steps,
                         before.n_decode_steps + before.n_prefill_steps);
        if (mode == SCHED_PAUSE_IN_PLACE) {
            assert_int_equal(after.n_running, before.n_running);
            assert_int_equal(after.free_tokens, before.free_tokens); /* KV kept */
            assert_int_equal(c.n_affected, 0);
            assert_int_equal(ctl(s, SCHED_CTL_FLUSH_CACHE, 0, &c), -1); /* requests hold KV */
            assert_null(sched_poll(s));
        } else if (mode == SCHED_PAUSE_RETRACT) {
            assert_int_equal(after.n_running, 0);
            assert_true(c.n_affected >= before.n_running);
            assert_true(after.num_retractions >= before.n_running);
            int retracted = c.n_affected;
            assert_int_equal(after.n_waiting, before.n_waiting + retracted);
            assert_int_equal(ctl(s, SCHED_CTL_FLUSH_CACHE, 0, &c), 0); /* no KV held: allowed */
            assert_null(sched_poll(s));
        } else {
            assert_int_equal(after.n_running, 0);
            assert_int_equal(after.n_waiting, 0);
            drain(s, &got, w.n);
            for (int i = 0; i < late; i++) {
                assert_true(got.r[i].done);
                assert_int_equal(got.r[i].fin.finish, SCHED_FINISH_ABORT);
            }
            assert_false(got.r[late].done); /* held, not aborted */
        }
        assert_int_equal(ctl(s, SCHED_CTL_CONTINUE, 0, &c), 0);
        assert_string_equal(c.msg, "Generation continued successfully.");
        assert_false(sched_is_paused(s));
        assert_int_equal(sched_run_until_idle(s), 0);
        drain(s, &got, w.n);
        char err[512];
        if (sched_check_leak(s, err, sizeof err)) fail_msg("%s", err);
        if (mode == SCHED_PAUSE_ABORT) {
            workload one = w;
            one.n = 1;
            one.in[0] = w.in[late], one.n_in[0] = w.n_in[late], one.max_new[0] = w.max_new[late];
            outputs r1, g1;
            r1.r[0] = ref.r[late];
            g1.r[0] = got.r[late];
            expect_same(&r1, &g1, &one, "held during pause(abort)");
        } else {
            expect_same(&ref, &got, &w, mode == SCHED_PAUSE_IN_PLACE ? "pause in_place" : "pause retract");
        }
        sched_destroy(s);
        free_outputs(&got, w.n);
    }
    free_outputs(&ref, w.n);
    free_workload(&w);
}

/* Weight swap: refused for another shape (the old model keeps serving);
 * a copy of the same weights swaps in (waiting for the requests in flight,
 * radix cache flushed) and gives the same outputs. */
static void test_swap_model(void **state)
{
    (void)state;
    NEED_MODEL();
    char dir[512], err[1024];
    snprintf(dir, sizeof dir, "%s/models/TinyStories-656K", shared_dir());
    model_load_opts o = {.model_path = dir, .dtype = -1, .load_format = MODEL_LOAD_DUMMY,
                         .override_json = "{\"num_hidden_layers\": 1}"};
    model *bad = model_load(&o, err, sizeof err);
    if (!bad) fail_msg("load: %s", err);
    model_load_opts o2 = {.model_path = dir, .dtype = -1};
    model *copy = model_load(&o2, err, sizeof err);
    if (!copy) fail_msg("load: %s", err);

    workload w;
    make_workload(&w, 6, 20, 1, 3);
    for (int i = 0; i < w.n; i++) w.max_new[i] = 10 + i;
    static outputs ref, got;
    run_alone(&w, &ref);
    sched_args a = base_args();
    sched *s = mk(&a);
    memset(&got, 0, sizeof got);
    for (int i = 0; i < w.n; i++) {
        sched_result_init(&got.r[i], false);
        sched_req_spec sp;
        spec_for(&sp, &w, i);
        got.id[i] = sched_submit(s, &sp);
    }
    for (int k = 0; k < 3; k++) assert_true(sched_step(s) >= 0);
    sched_ctl c;
    memset(&c, 0, sizeof c);
    c.kind = SCHED_CTL_SWAP_MODEL;
    c.new_model = bad;
    assert_int_equal(sched_control(s, &c), -1);
    assert_non_null(strstr(c.msg, "n_layer"));
    assert_ptr_equal(sched_model(s), g_model);
    assert_null(c.old_model);

    memset(&c, 0, sizeof c);
    c.kind = SCHED_CTL_SWAP_MODEL;
    c.new_model = copy;
    assert_int_equal(sched_control(s, &c), 0); /* drives the requests in flight to their end first */
    assert_string_equal(c.msg, "Succeeded to update model weights.");
    assert_ptr_equal(c.old_model, g_model);
    assert_ptr_equal(sched_model(s), copy);
    drain(s, &got, w.n);
    for (int i = 0; i < w.n; i++) assert_true(got.r[i].done);
    sched_stats st;
    sched_get_stats(s, &st);
    assert_int_equal(st.evictable_tokens, 0); /* flushed */
    expect_same(&ref, &got, &w, "before the swap");
    free_outputs(&got, w.n);
    /* the same workload again on the copy: same outputs, no cache hits at first */
    memset(&got, 0, sizeof got);
    for (int i = 0; i < w.n; i++) {
        sched_result_init(&got.r[i], false);
        sched_req_spec sp;
        spec_for(&sp, &w, i);
        got.id[i] = sched_submit(s, &sp);
    }
    assert_int_equal(sched_run_until_idle(s), 0);
    drain(s, &got, w.n);
    expect_same(&ref, &got, &w, "after the swap");
    /* paused with running requests (in place): the swap happens at once and
     * retracts them; they finish identically after continue */
    free_outputs(&got, w.n);
    memset(&got, 0, sizeof got);
    for (int i = 0; i < w.n; i++) {
        sched_result_init(&got.r[i], false);
        sched_req_spec sp;
        spec_for(&sp, &w, i);
        got.id[i] = sched_submit(s, &sp);
    }
    for (int k = 0; k < 3; k++) assert_true(sched_step(s) >= 0);
    assert_int_equal(ctl(s, SCHED_CTL_PAUSE, SCHED_PAUSE_IN_PLACE, NULL), 0);
    memset(&c, 0, sizeof c);
    c.kind = SCHED_CTL_SWAP_MODEL;
    c.new_model = g_model;
    assert_int_equal(sched_control(s, &c), 0);
    assert_true(c.n_affected > 0);
    assert_ptr_equal(c.old_model, copy);
    assert_int_equal(ctl(s, SCHED_CTL_CONTINUE, 0, NULL), 0);
    assert_int_equal(sched_run_until_idle(s), 0);
    drain(s, &got, w.n);
    expect_same(&ref, &got, &w, "swap while paused");
    if (sched_check_leak(s, err, sizeof err)) fail_msg("%s", err);
    sched_destroy(s);
    free_outputs(&got, w.n);
    free_outputs(&ref, w.n);
    free_workload(&w);
    model_free(copy);
    model_free(bad);
}

/* Threaded: control messages wait for the scheduler thread; after
 * sched_stop they are refused. */
static void test_control_threaded(void **state)
{
    (void)state;
    NEED_MODEL();
    sched_args a = base_args();
    sched *s = mk(&a);
    assert_int_equal(sched_start(s), 0);
    sched_req_spec sp = simple_spec(20, 200, 11);
    uint64_t id = sched_submit(s, &sp);
    sched_ctl c;
    assert_int_equal(ctl(s, SCHED_CTL_PAUSE, SCHED_PAUSE_IN_PLACE, &c), 0);
    sched_progress pg;
    sched_get_progress(s, &pg);
    assert_true(pg.busy_since == 0); /* paused: no step in progress */
    uint64_t steps = pg.steps;
    usleep(20000);
    sched_get_progress(s, &pg);
    assert_int_equal(pg.steps, steps);
    assert_int_equal(ctl(s, SCHED_CTL_CONTINUE, 0, &c), 0);
    for (;;) {
        sched_event *e = sched_wait(s, 30.0);
        assert_non_null(e);
        bool fin = e->id == id && e->kind == SCHED_EV_FINISH;
        if (fin) assert_int_equal(e->finish, SCHED_FINISH_LENGTH);
        sched_event_free(e);
        if (fin) break;
    }
    sched_get_progress(s, &pg);
    assert_true(pg.steps > steps);
    assert_int_equal(ctl(s, SCHED_CTL_FLUSH_CACHE, 0, &c), 0);
    sched_stop(s);
    assert_int_equal(ctl(s, SCHED_CTL_PAUSE, SCHED_PAUSE_ABORT, &c), -1);
    assert_string_equal(c.msg, "The scheduler is stopped.");
    sched_destroy(s);
}

static void test_logprobs(void **state)
{
    (void)state;
    NEED_MODEL();
    sched_args a = base_args();
    sched *s = mk(&a);
    sched_req_spec sp = simple_spec(10, 6, 2);
    sp.return_logprob = true;
    sp.top_logprobs_num = 3;
    sp.token_ids_logprob = malloc(2 * sizeof(int32_t));
    sp.token_ids_logprob[0] = 5;
    sp.token_ids_logprob[1] = 60;
    sp.n_token_ids_logprob = 2;
    sched_result r;
    sched_result_init(&r, true);
    uint64_t id = sched_submit(s, &sp);
    assert_int_equal(sched_run_until_idle(s), 0);
    collect(s, &r, 1, id);
    assert_int_equal(r.n, 6);
    for (int i = 0; i < 6; i++) {
        /* greedy: the chosen token is the best one and its logprob is the top */
        assert_int_equal(r.top_ids[i * 3], r.ids[i]);
        assert_true(r.lp[i] <= 0.0f);
        assert_float_equal(r.lp[i], r.top_lp[i * 3], 1e-6);
        assert_true(r.top_lp[i * 3] >= r.top_lp[i * 3 + 1]);
    }
    json_t *o = api_gen_result_json(&r);
    json_t *meta = json_object_get(o, "meta_info");
    json_t *otl = json_object_get(meta, "output_token_logprobs");
    assert_int_equal(json_array_size(otl), 6);
    assert_int_equal(json_array_size(json_array_get(otl, 0)), 3);
    assert_int_equal(json_integer_value(json_array_get(json_array_get(otl, 0), 1)), r.ids[0]);
    assert_true(json_is_null(json_array_get(json_array_get(otl, 0), 2)));
    assert_int_equal(json_array_size(json_array_get(json_object_get(meta, "output_top_logprobs"), 0)), 3);
    json_t *itl = json_object_get(meta, "input_token_logprobs");
    assert_int_equal(json_array_size(itl), 1);
    assert_true(json_is_null(json_array_get(json_array_get(itl, 0), 0)));
    assert_int_equal(json_integer_value(json_array_get(json_array_get(itl, 0), 1)), (2 + 9 * 37) % 2000 + 3);
    assert_int_equal(json_array_size(json_array_get(json_object_get(meta, "output_token_ids_logprobs"), 0)), 2);
    json_decref(o);
    sched_result_free(&r);
    sched_destroy(s);
}

/* Input logprobs (logprob_start_len 5, chunked prefill 16, prompt cached
 * beforehand) against log_softmax of a plain model_forward over the prompt. */
static void test_input_logprobs(void **state)
{
    (void)state;
    NEED_MODEL();
    const int N = 40, START = 5, V = 2048;
    sched_req_spec sp = simple_spec(N, 3, 13);
    int32_t prompt[40], slots[40], pos[40], rows[40];
    memcpy(prompt, sp.input_ids, sizeof prompt);
    sched_req_spec_free(&sp);
    /* reference: one forward over the whole prompt, every row's logits */
    model_kv *kv = model_kv_create(g_model, 64, DTYPE_F32);
    assert_non_null(kv);
    float *lg = malloc(sizeof(float) * (size_t)N * V);
    for (int i = 0; i < N; i++) slots[i] = pos[i] = rows[i] = i;
    int32_t st[2] = {0, N}, kvl = N;
    const int32_t *sl[1] = {slots};
    model_batch b = {.n_tokens = N, .tokens = prompt, .positions = pos, .n_seqs = 1, .seq_start = st,
                     .seq_kv_len = &kvl, .seq_slots = sl, .n_logits = N, .logit_rows = rows};
    assert_int_equal(model_forward(g_model, kv, &b, lg, NULL), 0);
    model_kv_destroy(kv);

    sched_args a = base_args();
    a.chunked_prefill_size = 16;
    sched *s = mk(&a);
    sched_req_spec warm = simple_spec(N, 2, 13); /* caches the prompt */
    sched_submit(s, &warm);
    assert_int_equal(sched_run_until_idle(s), 0);
    sched_event *e;
    while ((e = sched_poll(s))) sched_event_free(e);
    sp = simple_spec(N, 3, 13);
    sp.return_logprob = true;
    sp.logprob_start_len = START;
    sp.top_logprobs_num = 2;
    sp.token_ids_logprob = malloc(sizeof(int32_t));
    sp.token_ids_logprob[0] = 7;
    sp.n_token_ids_logprob = 1;
    sched_result r;
    sched_result_init(&r, true);
    uint64_t id = sched_submit(s, &sp);
    assert_int_equal(sched_run_until_idle(s), 0);
    collect(s, &r, 1, id);
    assert_true(r.done);
    assert_true(r.fin.cached_tokens <= START);
    assert_int_equal(r.n_in, N - START);
    assert_true(isnan(r.in_lp[0]));
    assert_int_equal(r.in_ids[0], prompt[START]);
    for (int i = 1; i < r.n_in; i++) {
        int p = START + i - 1; /* the row predicting prompt[START + i] */
        const float *row = lg + (size_t)p * V;
        float mx = row[0];
        int am = 0;
        for (int v = 1; v < V; v++)
            if (row[v] > mx) mx = row[v], am = v;
        double sum = 0;
        for (int v = 0; v < V; v++) sum += exp((double)row[v] - mx);
        double want = row[prompt[START + i]] - mx - log(sum);
        assert_int_equal(r.in_ids[i], prompt[START + i]);
        if (fabs(r.in_lp[i] - want) > 1e-4) fail_msg("input logprob %d: %g vs %g", i, r.in_lp[i], want);
        assert_int_equal(r.in_top_ids[i * 2], am);
        assert_true(fabs(r.in_tid_lp[i] - (row[7] - mx - log(sum))) < 1e-4);
    }
    json_t *o = api_gen_result_json(&r);
    json_t *meta = json_object_get(o, "meta_info");
    assert_int_equal(json_array_size(json_object_get(meta, "input_token_logprobs")), N - START);
    assert_true(json_is_null(json_array_get(json_object_get(meta, "input_top_logprobs"), 0)));
    assert_int_equal(json_array_size(json_array_get(json_object_get(meta, "input_top_logprobs"), 1)), 2);
    json_decref(o);
    sched_result_free(&r);
    /* logprob_start_len past the prompt: SGLang's message */
    sp = simple_spec(10, 3, 13);
    sp.return_logprob = true;
    sp.logprob_start_len = 10;
    sched_submit(s, &sp);
    e = sched_poll(s);
    assert_non_null(e);
    assert_int_equal(e->finish, SCHED_FINISH_ABORT);
    assert_non_null(strstr(e->finish_str, "is higher than the number of input tokens"));
    sched_event_free(e);
    char err[512];
    if (sched_check_leak(s, err, sizeof err)) fail_msg("%s", err);
    sched_destroy(s);
    free(lg);

    /* 300 rows from position 0, no chunking: the logits rows per step are
     * capped (LP_ROWS_MAX), so the prompt is prefilled in two steps */
    const int N2 = 300;
    sp = simple_spec(N2, 2, 17);
    int32_t *p2 = malloc(sizeof(int32_t) * N2), *s2 = malloc(sizeof(int32_t) * N2);
    memcpy(p2, sp.input_ids, sizeof(int32_t) * N2);
    for (int i = 0; i < N2; i++) s2[i] = i;
    float *lg2 = malloc(sizeof(float) * V);
    int32_t last_row = N2 - 2, st2[2] = {0, N2}, kvl2 = N2, *pos2 = malloc(sizeof(int32_t) * N2);
    for (int i = 0; i < N2; i++) pos2[i] = i;
    const int32_t *sl2[1] = {s2};
    kv = model_kv_create(g_model, N2, DTYPE_F32);
    model_batch b2 = {.n_tokens = N2, .tokens = p2, .positions = pos2, .n_seqs = 1, .seq_start = st2,
                      .seq_kv_len = &kvl2, .seq_slots = sl2, .n_logits = 1, .logit_rows = &last_row};
    assert_int_equal(model_forward(g_model, kv, &b2, lg2, NULL), 0);
    model_kv_destroy(kv);
    a = base_args();
    a.chunked_prefill_size = -1;
    s = mk(&a);
    sp.return_logprob = true;
    sp.logprob_start_len = 0;
    sched_result_init(&r, true);
    id = sched_submit(s, &sp);
    assert_int_equal(sched_run_until_idle(s), 0);
    collect(s, &r, 1, id);
    sched_stats sst;
    sched_get_stats(s, &sst);
    assert_true(sst.n_prefill_steps >= 2);
    assert_int_equal(r.n_in, N2);
    for (int i = 1; i < N2; i++) assert_true(isfinite(r.in_lp[i]) && r.in_lp[i] <= 0);
    {
        float mx = lg2[0];
        for (int v = 1; v < V; v++) mx = lg2[v] > mx ? lg2[v] : mx;
        double sum = 0;
        for (int v = 0; v < V; v++) sum += exp((double)lg2[v] - mx);
        double want = lg2[p2[N2 - 1]] - mx - log(sum);
        if (fabs(r.in_lp[N2 - 1] - want) > 1e-4) fail_msg("last input logprob %g vs %g", r.in_lp[N2 - 1], want);
    }
    sched_result_free(&r);
    sched_destroy(s);
    free(p2), free(s2), free(lg2), free(pos2);
}

static void test_request_json(void **state)
{
    (void)state;
    struct {
        const char *json;
        int ok;
        const char *msg;
    } cases[] = {
        {"{\"input_ids\":[1,2,3],\"sampling_params\":{\"max_new_tokens\":4},\"rid\":\"x\",\"priority\":3}", 1, NULL},
        {"{\"text\":\"hi\"}", 0, "tokenizer"},
        {"{\"text\":\"hi\",\"input_ids\":[1]}", 0, "not both"},
        {"{\"input_ids\":[[1,2],[3]]}", 0, "batched"},
        {"{\"input_ids\":[]}", 0, "empty"},
        {"{\"input_ids\":[1],\"bogus\":1}", 0, "unexpected field 'bogus'"},
        {"{\"input_ids\":[1],\"custom_logit_processor\":\"{}\"}", 0, "--enable-custom-logit-processor"},
        {"{\"input_ids\":[1],\"return_hidden_states\":true}", 0, "--enable-return-hidden-states"},
        {"{\"input_ids\":[1],\"sampling_params\":{\"temperature\":\"hot\"}}", 0, "temperature"},
        {"{\"input_ids\":[1],\"top_logprobs_num\":-1}", 0, "top_logprobs_num"},
        {"{}", 0, "should be provided"},
        {"[1,2]", 0, "JSON object"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        json_t *o = json_loads(cases[i].json, 0, NULL);
        assert_non_null(o);
        sched_req_spec sp;
        char err[512] = "";
        int rc = api_gen_req_from_json(o, &sp, err, sizeof err);
        if (cases[i].ok) {
            assert_int_equal(rc, 0);
            assert_int_equal(sp.n_input, 3);
            assert_string_equal(sp.rid, "x");
            assert_true(sp.has_priority);
            assert_int_equal(sp.params.max_new_tokens, 4);
        } else {
            assert_int_equal(rc, -1);
            if (!strstr(err, cases[i].msg)) fail_msg("case %zu: message '%s' lacks '%s'", i, err, cases[i].msg);
        }
        sched_req_spec_free(&sp);
        json_decref(o);
    }
}

static void test_validation(void **state)
{
    (void)state;
    NEED_MODEL();
    sched_args a = base_args();
    a.max_total_tokens = 256;
    sched *s = mk(&a);
    sched_req_spec sp = simple_spec(300, 4, 1); /* longer than the pool allows */
    sched_submit(s, &sp);
    sched_event *e = sched_poll(s);
    assert_non_null(e);
    assert_int_equal(e->finish, SCHED_FINISH_ABORT);
    assert_non_null(strstr(e->finish_str, "longer than"));
    sched_event_free(e);
    sp = simple_spec(10, 4, 1);
    sp.input_ids[3] = 99999;
    sched_submit(s, &sp);
    e = sched_poll(s);
    assert_non_null(e);
    assert_int_equal(e->finish, SCHED_FINISH_ABORT);
    sched_event_free(e);
    /* max_new_tokens beyond the pool is clipped, as SGLang's max_req_len */
    sp = simple_spec(200, 1000, 1);
    sched_submit(s, &sp);
    assert_int_equal(sched_run_until_idle(s), 0);
    e = sched_poll(s);
    assert_non_null(e);
    assert_int_equal(e->finish, SCHED_FINISH_LENGTH);
    assert_int_equal(e->completion_tokens, 255 - 200);
    sched_event_free(e);
    sched_destroy(s);
}

/* Embedding mode: prefill-only requests (one of them chunked) in one
 * batch; each FINISH carries the last token's final-normed hidden state,
 * L2-normalized (or its first embed_dims values, renormalized), equal to a
 * direct model_forward(want_hidden) of the prompt alone. */
static void test_embedding_mode(void **state)
{
    (void)state;
    NEED_MODEL();
    const int H = model_get_config(g_model)->hidden_size;
    const int LENS[4] = {40, 7, 1, 40}, DIMS[4] = {0, 0, 0, 8};
    float ref[4][512];
    assert_true(H <= 512);
    for (int q = 0; q < 4; q++) {
        sched_req_spec sp = simple_spec(LENS[q], 5, 13 + q % 3);
        int N = LENS[q];
        int32_t slots[40], pos[40], row = N - 1;
        for (int i = 0; i < N; i++) slots[i] = pos[i] = i;
        model_kv *kv = model_kv_create(g_model, 64, DTYPE_F32);
        int32_t st[2] = {0, N}, kvl = N;
        const int32_t *sl[1] = {slots};
        model_batch b = {.n_tokens = N, .tokens = sp.input_ids, .positions = pos, .n_seqs = 1, .seq_start = st,
                         .seq_kv_len = &kvl, .seq_slots = sl, .n_logits = 1, .logit_rows = &row, .want_hidden = 1};
        assert_int_equal(model_forward(g_model, kv, &b, ref[q], NULL), 0);
        model_kv_destroy(kv);
        sched_req_spec_free(&sp);
        int d = DIMS[q] ? DIMS[q] : H;
        double ss = 0;
        for (int i = 0; i < d; i++) ss += (double)ref[q][i] * ref[q][i];
        for (int i = 0; i < d; i++) ref[q][i] = (float)(ref[q][i] / sqrt(ss));
    }
    sched_args a = base_args();
    a.is_embedding = true;
    a.chunked_prefill_size = 16; /* the 40-token prompts are prefilled in chunks */
    sched *s = mk(&a);
    uint64_t ids[4];
    for (int q = 0; q < 4; q++) {
        sched_req_spec sp = simple_spec(LENS[q], 5, 13 + q % 3); /* max_new is ignored */
        sp.embed_dims = DIMS[q];
        ids[q] = sched_submit(s, &sp);
    }
    sched_req_spec bad = simple_spec(4, 5, 1);
    bad.params.n = 2;
    uint64_t bad_id = sched_submit(s, &bad);
    assert_int_equal(sched_run_until_idle(s), 0);
    int seen = 0;
    sched_event *e;
    while ((e = sched_poll(s))) {
        if (e->id == bad_id) {
            assert_int_equal(e->finish, SCHED_FINISH_ABORT);
            assert_int_equal(e->http_status, 400);
            assert_null(e->embedding);
            sched_event_free(e);
            continue;
        }
        assert_int_equal(e->kind, SCHED_EV_FINISH);
        int q = -1;
        for (int k = 0; k < 4; k++) if (ids[k] == e->id) q = k;
        assert_true(q >= 0);
        assert_int_equal(e->finish, SCHED_FINISH_LENGTH);
        assert_int_equal(e->finish_length, 0);
        assert_int_equal(e->completion_tokens, 0);
        assert_int_equal(e->prompt_tokens, LENS[q]);
        int d = DIMS[q] ? DIMS[q] : H;
        assert_non_null(e->embedding);
        assert_int_equal(e->n_embedding, d);
        double nn = 0;
        for (int i = 0; i < d; i++) {
            nn += (double)e->embedding[i] * e->embedding[i];
            if (fabsf(e->embedding[i] - ref[q][i]) > 1e-5f)
                fail_msg("request %d value %d: %g vs %g", q, i, e->embedding[i], ref[q][i]);
        }
        assert_true(fabs(nn - 1.0) < 1e-5);
        seen++;
        sched_event_free(e);
    }
    assert_int_equal(seen, 4);
    char err[256];
    assert_int_equal(sched_check_leak(s, err, sizeof err), 0);
    sched_destroy(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_request_json),
        cmocka_unit_test(test_embedding_mode),
        cmocka_unit_test(test_batch_invariance),
        cmocka_unit_test(test_retraction_tiny_pool),
        cmocka_unit_test(test_abort_frees_pages),
        cmocka_unit_test(test_parallel_sampling_n),
        cmocka_unit_test(test_priority_preemption),
        cmocka_unit_test(test_priority_preemption_tokens),
        cmocka_unit_test(test_disable_priority_preemption),
        cmocka_unit_test(test_default_priority_value),
        cmocka_unit_test(test_queue_full),
        cmocka_unit_test(test_cached_tokens),
        cmocka_unit_test(test_stream_interval),
        cmocka_unit_test(test_stop_conditions),
        cmocka_unit_test(test_policies_same_outputs),
        cmocka_unit_test(test_threaded_api),
        cmocka_unit_test(test_pause_modes),
        cmocka_unit_test(test_swap_model),
        cmocka_unit_test(test_control_threaded),
        cmocka_unit_test(test_logprobs),
        cmocka_unit_test(test_input_logprobs),
        cmocka_unit_test(test_validation),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
