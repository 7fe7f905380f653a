/* test_dp — the data-parallel controller: every load-balance method's
 * decisions (dp_lb, no model), then two replicas over one copy of
 * TinyStories-656K's weights: ids, routing, the same greedy outputs as one
 * scheduler, fan-out of aborts and flushes, no KV page leaked. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "dp/dp.h"
#include "dp/dp_lb.h"
#include "kernels/kernels.h"
#include "model/model.h"
#include "sched/sched.h"
#include "sched/sched_result.h"
#include "util/log.h"

#include "tinystories_fixture.h"

/* ---- load balancer ------------------------------------------------------------ */

static void test_lb_names(void **state)
{
    (void)state;
    assert_int_equal(dp_lb_parse("auto"), DP_LB_ROUND_ROBIN);
    assert_int_equal(dp_lb_parse("round_robin"), DP_LB_ROUND_ROBIN);
    assert_int_equal(dp_lb_parse("total_requests"), DP_LB_TOTAL_REQUESTS);
    assert_int_equal(dp_lb_parse("total_tokens"), DP_LB_TOTAL_TOKENS);
    assert_int_equal(dp_lb_parse("follow_bootstrap_room"), DP_LB_FOLLOW_BOOTSTRAP_ROOM);
    assert_int_equal(dp_lb_parse("cache_aware"), DP_LB_CACHE_AWARE);
    assert_int_equal(dp_lb_parse("shortest_queue"), -1);
    assert_int_equal(dp_lb_parse(NULL), -1);
    for (int m = 0; m <= DP_LB_CACHE_AWARE; m++) assert_int_equal(dp_lb_parse(dp_lb_name((dp_lb_method)m)), m);
}

static void test_lb_round_robin(void **state)
{
    (void)state;
    int32_t ids[4] = {1, 2, 3, 4};
    dp_lb *lb = dp_lb_create(3, DP_LB_ROUND_ROBIN);
    assert_non_null(lb);
    assert_int_equal(dp_lb_pick(lb, ids, 4, 1, -1, -1, NULL), 0);
    assert_int_equal(dp_lb_pick(lb, ids, 4, 1, -1, -1, NULL), 1);
    /* a request that names its replica does not move the counter */
    assert_int_equal(dp_lb_pick(lb, ids, 4, 1, -1, 0, NULL), 0);
    assert_int_equal(dp_lb_pick(lb, ids, 4, 1, -1, -1, NULL), 2);
    assert_int_equal(dp_lb_pick(lb, ids, 4, 1, -1, -1, NULL), 0);
    dp_lb_load l;
    dp_lb_get_load(lb, 0, &l);
    assert_int_equal(l.reqs, 3);
    assert_int_equal(l.tokens, 12);
    assert_int_equal(l.routed, 3);
    dp_lb_add_tokens(lb, 0, 5);
    dp_lb_finish(lb, 0, 4 + 5);
    dp_lb_get_load(lb, 0, &l);
    assert_int_equal(l.reqs, 2);
    assert_int_equal(l.tokens, 8);
    dp_lb_finish(lb, 0, 4);
    dp_lb_finish(lb, 0, 4);
    dp_lb_finish(lb, 0, 4); /* one too many: never below zero */
    dp_lb_get_load(lb, 0, &l);
    assert_int_equal(l.reqs, 0);
    assert_int_equal(l.tokens, 0);
    dp_lb_destroy(lb);
}

static void test_lb_total_requests(void **state)
{
    (void)state;
    int32_t ids[2] = {7, 8};
    dp_lb *lb = dp_lb_create(2, DP_LB_TOTAL_REQUESTS);
    /* two requests pinned to replica 0: the next two go to replica 1 */
    dp_lb_pick(lb, ids, 2, 1, -1, 0, NULL);
    dp_lb_pick(lb, ids, 2, 1, -1, 0, NULL);
    assert_int_equal(dp_lb_pick(lb, ids, 2, 1, -1, -1, NULL), 1);
    assert_int_equal(dp_lb_pick(lb, ids, 2, 1, -1, -1, NULL), 1);
    /* even now: ties rotate, siblings count */
    int a = dp_lb_pick(lb, ids, 2, 1, -1, -1, NULL), b = dp_lb_pick(lb, ids, 2, 1, -1, -1, NULL);
    assert_int_not_equal(a, b);
    assert_int_equal(dp_lb_pick(lb, ids, 2, 4, -1, -1, NULL) >= 0, 1);
    dp_lb_load l0, l1;
    dp_lb_get_load(lb, 0, &l0);
    dp_lb_get_load(lb, 1, &l1);
    assert_int_equal(l0.reqs + l1.reqs, 10);
    int heavy = l0.reqs > l1.reqs ? 0 : 1;
    assert_int_equal(dp_lb_pick(lb, ids, 2, 1, -1, -1, NULL), 1 - heavy);
    dp_lb_destroy(lb);
}

static void test_lb_total_tokens(void **state)
{
    (void)state;
    int32_t big[200] = {0}, small[3] = {1, 2, 3};
    dp_lb *lb = dp_lb_create(2, DP_LB_TOTAL_TOKENS);
    int r = dp_lb_pick(lb, big, 200, 1, -1, -1, NULL);
    /* three short prompts all go to the other replica (fewer tokens) */
    for (int i = 0; i < 3; i++) assert_int_equal(dp_lb_pick(lb, small, 3, 1, -1, -1, NULL), 1 - r);
    /* output tokens count too */
    dp_lb_finish(lb, r, 200);
    dp_lb_add_tokens(lb, 1 - r, 1000);
    assert_int_equal(dp_lb_pick(lb, small, 3, 1, -1, -1, NULL), r);
    dp_lb_destroy(lb);
}

static void test_lb_bootstrap_room(void **state)
{
    (void)state;
    int32_t ids[2] = {1, 2};
    dp_lb *lb = dp_lb_create(3, DP_LB_FOLLOW_BOOTSTRAP_ROOM);
    assert_int_equal(dp_lb_pick(lb, ids, 2, 1, 7, -1, NULL), 1);
    assert_int_equal(dp_lb_pick(lb, ids, 2, 1, 9, -1, NULL), 0);
    assert_int_equal(dp_lb_pick(lb, ids, 2, 1, 7, -1, NULL), 1);
    /* no room: round robin */
    assert_int_equal(dp_lb_pick(lb, ids, 2, 1, -1, -1, NULL), 0);
    assert_int_equal(dp_lb_pick(lb, ids, 2, 1, -1, -1, NULL), 1);
    dp_lb_destroy(lb);
}

static void fill(int32_t *v, int n, int32_t base)
{
    for (int i = 0; i < n; i++) v[i] = base + i * 7 % 101;
}

static void test_lb_cache_aware(void **state)
{
    (void)state;
    int32_t p[100], q[100], x[100];
    fill(p, 100, 1000);
    fill(q, 100, 5000);
    memcpy(x, p, sizeof(int32_t) * 40); /* shares p's first 40 tokens (2 whole blocks) */
    fill(x + 40, 60, 9000);
    dp_lb *lb = dp_lb_create(2, DP_LB_CACHE_AWARE);
    int64_t m = -1;
    int rp = dp_lb_pick(lb, p, 100, 1, -1, -1, &m);
    assert_int_equal(m, 0);
    /* nothing cached anywhere: the least loaded replica */
    int rq = dp_lb_pick(lb, q, 100, 1, -1, -1, &m);
    assert_int_equal(rq, 1 - rp);
    assert_int_equal(m, 0);
    /* the same prompt again: where it is cached, though that replica is as loaded */
    for (int i = 0; i < 3; i++) {
        assert_int_equal(dp_lb_pick(lb, p, 100, 1, -1, -1, &m), rp);
        assert_int_equal(m, 96); /* whole blocks only */
    }
    /* a prompt that shares a prefix: its longest match wins */
    assert_int_equal(dp_lb_pick(lb, x, 100, 1, -1, -1, &m), rp);
    assert_int_equal(m, 32);
    /* the replica's cache flushed: forgotten */
    dp_lb_forget(lb, rp);
    int r2 = dp_lb_pick(lb, p, 100, 1, -1, -1, &m);
    assert_int_equal(m, 0);
    assert_int_equal(r2, 1 - rp); /* the least loaded one now */
    dp_lb_destroy(lb);
    /* overload guard: a hot prefix does not pile everything on one replica */
    lb = dp_lb_create(2, DP_LB_CACHE_AWARE);
    int home = dp_lb_pick(lb, p, 100, 1, -1, -1, NULL), away = 0;
    for (int i = 0; i < 60; i++)
        if (dp_lb_pick(lb, p, 100, 1, -1, -1, NULL) != home) away++;
    assert_true(away > 0);
    dp_lb_load lh, la;
    dp_lb_get_load(lb, home, &lh);
    dp_lb_get_load(lb, 1 - home, &la);
    assert_true(lh.reqs - la.reqs <= DP_LB_ABS_SLACK + 1);
    dp_lb_destroy(lb);
}

/* ---- replicas ---------------------------------------------------------------- */

static void args_small(sched_args *a)
{
    sched_args_init(a);
    a->max_total_tokens = 1024;
}

static sched_req_spec spec_of(int k, int max_new)
{
    sched_req_spec sp;
    sched_req_spec_init(&sp);
    int n = 5 + k % 7;
    sp.input_ids = malloc(sizeof(int32_t) * (size_t)n);
    for (int i = 0; i < n; i++) sp.input_ids[i] = 1 + (k * 31 + i * 17) % 500;
    sp.n_input = n;
    sp.params.max_new_tokens = max_new;
    sp.params.has_max_new_tokens = true;
    sp.params.top_k = 1; /* greedy */
    sp.params.ignore_eos = true;
    return sp;
}

#define NREQ 8

static void test_dp_errors(void **state)
{
    (void)state;
    NEED_MODEL();
    sched_args a;
    args_small(&a);
    char err[512];
    dp_opts o = {.dp_size = 3, .method = DP_LB_ROUND_ROBIN, .threads = 2};
    assert_null(dp_create(g_model, &a, &o, err, sizeof err));
    assert_non_null(strstr(err, "--dp-size 3 needs at least 3 compute threads"));
    o.dp_size = 0;
    assert_null(dp_create(g_model, &a, &o, err, sizeof err));
    assert_non_null(strstr(err, "--dp-size must be at least 1"));
}

static void test_dp_two_replicas(void **state)
{
    (void)state;
    NEED_MODEL();
    /* reference: one scheduler, synchronous */
    sched_args a;
    args_small(&a);
    a.threads = 1;
    char err[512];
    sched *ref = sched_create(g_model, &a, err, sizeof err);
    assert_non_null(ref);
    uint64_t rid[NREQ];
    sched_result want[NREQ];
    for (int k = 0; k < NREQ; k++) {
        sched_req_spec sp = spec_of(k, 12);
        rid[k] = sched_submit(ref, &sp);
        sched_result_init(&want[k], false);
    }
    assert_int_equal(sched_run_until_idle(ref), 0);
    sched_event *e;
    while ((e = sched_poll(ref))) {
        for (int k = 0; k < NREQ; k++)
            if (e->id == rid[k]) assert_int_equal(sched_result_add(&want[k], e), 0);
        sched_event_free(e);
    }
    sched_destroy(ref);

    dp_opts o = {.dp_size = 2, .method = DP_LB_ROUND_ROBIN, .threads = 2, .pin = true};
    args_small(&a);
    dp *d = dp_create(g_model, &a, &o, err, sizeof err);
    assert_non_null(d);
    assert_int_equal(dp_size(d), 2);
    assert_ptr_not_equal(dp_sched(d, 0), dp_sched(d, 1));
    assert_int_equal(dp_start(d), 0);
    uint64_t gid[NREQ];
    int rank[NREQ], per[2] = {0, 0};
    sched_result got[NREQ];
    for (int k = 0; k < NREQ; k++) {
        sched_req_spec sp = spec_of(k, 12);
        gid[k] = dp_submit(d, &sp, -1, -1, &rank[k]);
        assert_int_equal((int)(gid[k] % 2), rank[k]);
        per[rank[k]]++;
        for (int q = 0; q < k; q++) assert_true(gid[q] != gid[k]);
        sched_result_init(&got[k], false);
    }
    assert_int_equal(per[0], NREQ / 2); /* round robin */
    assert_int_equal(per[1], NREQ / 2);
    /* a long request on replica 1, aborted by id; one by rid on replica 0 */
    sched_req_spec lsp = spec_of(99, 400);
    lsp.rid = strdup("long-one");
    int lr = -1;
    uint64_t lid = dp_submit(d, &lsp, 1, -1, &lr);
    assert_int_equal(lr, 1);
    dp_abort_id(d, lid);
    sched_req_spec lsp2 = spec_of(98, 400);
    lsp2.rid = strdup("long-two");
    uint64_t lid2 = dp_submit(d, &lsp2, 0, -1, NULL);
    dp_abort(d, "long-two");
    int finished = 0, aborted = 0, guard = 0;
    while (finished < NREQ + 2 && guard++ < 2000) {
        int r = -1;
        e = dp_wait(d, 0.05, &r);
        if (!e) continue;
        assert_int_equal((int)(e->id % 2), r);
        bool mine = false;
        for (int k = 0; k < NREQ; k++)
            if (e->id == gid[k]) {
                assert_int_equal(r, rank[k]);
                assert_int_equal(sched_result_add(&got[k], e), 0);
                mine = true;
            }
        if (e->id == lid || e->id == lid2) {
            mine = true;
            if (e->kind == SCHED_EV_FINISH) {
                assert_int_equal(e->finish, SCHED_FINISH_ABORT);
                assert_true(e->completion_tokens < 400);
                aborted++;
            }
        }
        assert_true(mine);
        if (e->kind == SCHED_EV_FINISH) finished++;
        sched_event_free(e);
    }
    assert_int_equal(finished, NREQ + 2);
    assert_int_equal(aborted, 2);
    for (int k = 0; k < NREQ; k++) {
        assert_int_equal(got[k].n, want[k].n);
        assert_memory_equal(got[k].ids, want[k].ids, sizeof(int32_t) * (size_t)want[k].n);
        sched_result_free(&got[k]);
        sched_result_free(&want[k]);
    }
    for (int r = 0; r < 2; r++) {
        dp_lb_load l;
        dp_get_load(d, r, &l);
        assert_int_equal(l.reqs, 0);
        assert_int_equal(l.tokens, 0);
    }
    /* flush reaches both replicas */
    sched_ctl c;
    memset(&c, 0, sizeof c);
    c.kind = SCHED_CTL_FLUSH_CACHE;
    assert_int_equal(dp_control(d, &c), 0);
    /* pause / continue reach both */
    memset(&c, 0, sizeof c);
    c.kind = SCHED_CTL_PAUSE;
    c.pause_mode = SCHED_PAUSE_IN_PLACE;
    assert_int_equal(dp_control(d, &c), 0);
    assert_true(sched_is_paused(dp_sched(d, 0)) && sched_is_paused(dp_sched(d, 1)));
    assert_true(dp_is_paused(d));
    memset(&c, 0, sizeof c);
    c.kind = SCHED_CTL_CONTINUE;
    assert_int_equal(dp_control(d, &c), 0);
    assert_false(dp_is_paused(d));
    dp_stop(d);
    for (int r = 0; r < 2; r++) {
        sched_stats st;
        sched_get_stats(dp_sched(d, r), &st);
        assert_int_equal(st.max_total_num_tokens, 1024);
        assert_true(st.leak_checks >= 1);
        assert_int_equal(st.leak_failures, 0);
        assert_int_equal(st.free_tokens, st.max_total_num_tokens); /* flushed: every page free */
        assert_int_equal(sched_check_leak(dp_sched(d, r), err, sizeof err), 0);
    }
    assert_ptr_equal(dp_model(d), g_model);
    dp_destroy(d); /* frees replica 1's run state; g_model stays */
}

/* Without --max-total-tokens the memory budget is the machine's: split
 * between the replicas, not taken by each. */
static void test_dp_kv_split(void **state)
{
    (void)state;
    NEED_MODEL();
    sched_args a;
    sched_args_init(&a);
    a.mem_fraction_static = 0.0005; /* tens of thousands of tokens of this tiny model */
    a.threads = 1;
    char err[512];
    sched *one = sched_create(g_model, &a, err, sizeof err);
    if (!one) {
        print_message("no KV budget here (%s): skipped\n", err);
        skip();
    }
    sched_stats st;
    sched_get_stats(one, &st);
    sched_destroy(one);
    int64_t whole = st.max_total_num_tokens;
    dp_opts o = {.dp_size = 2, .method = DP_LB_TOTAL_TOKENS, .threads = 2};
    dp *d = dp_create(g_model, &a, &o, err, sizeof err);
    assert_non_null(d);
    int64_t sum = 0;
    for (int r = 0; r < 2; r++) {
        sched_get_stats(dp_sched(d, r), &st);
        assert_true(st.max_total_num_tokens > 0);
        sum += st.max_total_num_tokens;
    }
    /* MemAvailable moves a little between the two measurements */
    assert_true(sum > whole * 9 / 10 && sum < whole * 11 / 10);
    assert_int_equal(dp_method(d), DP_LB_TOTAL_TOKENS);
    dp_destroy(d);
}

/* dp_opts.models (DP x TP's path, here without TP): replica 1 runs the
 * model it was given (its own weights, not a share of replica 0's), which
 * dp_destroy frees; the same greedy ids on both replicas; a refused
 * dp_create frees the given models too (ASan/LSan builds check both). */
static model *load_again(void)
{
    const char *sh = getenv("SGLC_SHARED");
    char dir[512], err[1024];
    snprintf(dir, sizeof dir, "%s/models/TinyStories-656K", sh && *sh ? sh : "../shared");
    model_load_opts lo = {.model_path = dir, .dtype = -1};
    return model_load(&lo, err, sizeof err);
}

static void test_dp_given_models(void **state)
{
    (void)state;
    NEED_MODEL();
    sched_args a;
    args_small(&a);
    char err[512];
    model *ms[2] = {g_model, load_again()};
    assert_non_null(ms[1]);
    dp_opts o = {.dp_size = 2, .method = DP_LB_ROUND_ROBIN, .threads = 2, .pin = true, .cpu_stride = 1,
                 .models = ms};
    dp *d = dp_create(g_model, &a, &o, err, sizeof err);
    assert_non_null(d);
    assert_ptr_equal(sched_model(dp_sched(d, 0)), g_model);
    assert_ptr_equal(sched_model(dp_sched(d, 1)), ms[1]);
    assert_int_equal(dp_start(d), 0);
    sched_result got[2];
    uint64_t gid[2];
    for (int r = 0; r < 2; r++) {
        sched_req_spec sp = spec_of(3, 10);
        gid[r] = dp_submit(d, &sp, r, -1, NULL);
        sched_result_init(&got[r], false);
    }
    int finished = 0, guard = 0;
    while (finished < 2 && guard++ < 2000) {
        sched_event *e = dp_wait(d, 0.05, NULL);
        if (!e) continue;
        for (int r = 0; r < 2; r++)
            if (e->id == gid[r]) assert_int_equal(sched_result_add(&got[r], e), 0);
        if (e->kind == SCHED_EV_FINISH) finished++;
        sched_event_free(e);
    }
    assert_int_equal(finished, 2);
    assert_int_equal(got[0].n, 10);
    assert_int_equal(got[1].n, got[0].n);
    assert_memory_equal(got[0].ids, got[1].ids, sizeof(int32_t) * (size_t)got[0].n);
    for (int r = 0; r < 2; r++) sched_result_free(&got[r]);
    dp_destroy(d); /* frees ms[1] */
    /* refused: the given model is freed all the same */
    model *ms2[2] = {g_model, load_again()};
    o.models = ms2;
    o.threads = 1;
    assert_null(dp_create(g_model, &a, &o, err, sizeof err));
    assert_non_null(strstr(err, "needs at least 2 compute threads"));
    model *ms3[2] = {load_again(), load_again()}; /* models[0] is not m */
    o.models = ms3;
    o.threads = 2;
    assert_null(dp_create(g_model, &a, &o, err, sizeof err));
    assert_non_null(strstr(err, "models[0] must be the model m"));
    model_free(ms3[0]); /* the caller's, as m would be */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lb_names),         cmocka_unit_test(test_lb_round_robin),
        cmocka_unit_test(test_lb_total_requests), cmocka_unit_test(test_lb_total_tokens),
        cmocka_unit_test(test_lb_bootstrap_room), cmocka_unit_test(test_lb_cache_aware),
        cmocka_unit_test(test_dp_errors),        cmocka_unit_test(test_dp_two_replicas),
        cmocka_unit_test(test_dp_kv_split),      cmocka_unit_test(test_dp_given_models),
    };
    return cmocka_run_group_tests(tests, tiny_setup, tiny_teardown);
}
