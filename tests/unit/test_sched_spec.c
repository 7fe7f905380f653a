/* test_sched_spec — the k > 1 path of the scheduler's "process results"
 * stage (speculative decoding's verify), on TinyStories-656K:
 *
 * - end to end through sched_set_draft_hook: a drafter that proposes the
 *   true continuation (all accepted), a wrong one (all rejected), a half
 *   right one, with greedy and seeded sampling, logprobs, streaming, a
 *   stop token inside the drafted run: outputs, finish reasons and
 *   logprobs equal the plain run; fewer decode steps when drafts are
 *   right; no KV leak;
 * - driving sched_process_request directly with k crafted logits rows: a
 *   stop token / max_new_tokens in the middle of the k tokens ends the
 *   request there with the right finish reason and event contents; a
 *   rejected draft stops the run; KV / slot bookkeeping stays leak-free. */
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
#include "sched/sched_impl.h"
#include "sched/sched_kv.h"
#include "sched/sched_output.h"
#include "util/log.h"

#include "tinystories_fixture.h"

static int64_t g_pool_tokens = 8192;
static int g_kv_dtype = -1; /* sched_args.kv_cache_dtype */
static double g_conservativeness = 1.0;

static sched *mk(int page_size)
{
    sched_args a;
    sched_args_init(&a);
    a.max_total_tokens = g_pool_tokens;
    a.schedule_conservativeness = g_conservativeness; /* low: admission over-commits, decode retracts */
    a.threads = 1;
    a.random_seed = 7;
    a.page_size = page_size;
    a.kv_cache_dtype = g_kv_dtype;
    char err[512];
    sched *s = sched_create(g_model, &a, err, sizeof err);
    if (!s) fail_msg("sched_create: %s", err);
    return s;
}

#define MAXR 16
#define MAXT 64

/* one request's events, concatenated */
typedef struct {
    uint64_t id;
    int32_t ids[MAXT];
    float lp[MAXT];
    int n, n_events, completion_tokens;
    bool done;
    sched_finish_kind finish;
    int64_t finish_length;
    int32_t finish_token;
} result;

static void drain(sched *s, result *res, int n)
{
    sched_event *e;
    while ((e = sched_poll(s))) {
        result *r = NULL;
        for (int i = 0; i < n; i++)
            if (res[i].id == e->id) r = &res[i];
        assert_non_null(r);
        assert_false(r->done);
        assert_true(r->n + e->n_ids <= MAXT);
        for (int k = 0; k < e->n_ids; k++) {
            r->ids[r->n + k] = e->ids[k];
            r->lp[r->n + k] = e->logprobs ? e->logprobs[k] : NAN;
        }
        r->n += e->n_ids;
        r->n_events++;
        r->completion_tokens = (int)e->completion_tokens;
        assert_int_equal(e->completion_tokens, r->n);
        if (e->kind == SCHED_EV_FINISH) {
            r->done = true;
            r->finish = e->finish;
            r->finish_length = e->finish_length;
            r->finish_token = e->finish_token;
        }
        sched_event_free(e);
    }
}

/* request i of the workload */
typedef struct {
    int n_in, max_new;
    bool sample;      /* seeded temperature sampling instead of greedy */
    bool logprob;
    bool stream;
    int32_t stop_id;  /* >= 0: stop_token_ids = {stop_id} */
} req_cfg;

static sched_req_spec spec_of(const req_cfg *c, int i)
{
    sched_req_spec sp;
    sched_req_spec_init(&sp);
    sp.n_input = c->n_in;
    sp.input_ids = malloc(sizeof(int32_t) * (size_t)c->n_in);
    for (int t = 0; t < c->n_in; t++) sp.input_ids[t] = t == 0 ? 1 : (17 * i + 37 * t) % 2000 + 3;
    sp.params.has_max_new_tokens = true;
    sp.params.max_new_tokens = c->max_new;
    if (c->sample) {
        sp.params.temperature = 0.8;
        sp.params.has_sampling_seed = true;
        sp.params.sampling_seed = 1234 + (uint64_t)i;
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

/* ---- the drafters ----------------------------------------------------------- */

typedef struct {
    const result *ref;   /* the plain run's outputs, by request */
    int n;
    int mode;            /* 0 right, 1 wrong, 2 right for 2 tokens then wrong */
    int64_t n_in[MAXR];
    uint64_t id[MAXR];
    int calls, proposed;
} drafter;

static int draft_fn(void *ctx, uint64_t id, int index, const int32_t *seq, int64_t len, int32_t *draft, int max)
{
    (void)seq, (void)index;
    drafter *d = ctx;
    int i = -1;
    for (int k = 0; k < d->n; k++)
        if (d->id[k] == id) i = k;
    assert_true(i >= 0);
    const result *r = &d->ref[i];
    int64_t out = len - d->n_in[i];
    assert_true(max >= 1);
    int n = 0;
    for (; n < max && out + n < r->n; n++) {
        int32_t t = r->ids[out + n];
        bool right = d->mode == 0 || (d->mode == 2 && n < 2);
        draft[n] = right ? t : (t + 1) % 2000 + 3;
    }
    d->calls++;
    d->proposed += n;
    return n;
}

static void run(const req_cfg *cfg, int n, drafter *d, int max_draft, int page_size, result *res,
                sched_stats *st)
{
    sched *s = mk(page_size);
    if (d) sched_set_draft_hook(s, draft_fn, d, max_draft);
    memset(res, 0, sizeof(result) * (size_t)n);
    for (int i = 0; i < n; i++) {
        sched_req_spec sp = spec_of(&cfg[i], i);
        res[i].id = sched_submit(s, &sp);
        if (d) d->id[i] = res[i].id, d->n_in[i] = cfg[i].n_in;
    }
    assert_int_equal(sched_run_until_idle(s), 0);
    drain(s, res, n);
    char err[512];
    if (sched_check_leak(s, err, sizeof err)) fail_msg("%s", err);
    sched_get_stats(s, st);
    assert_int_equal(st->leak_failures, 0);
    assert_int_equal(st->free_tokens + st->evictable_tokens, st->max_total_num_tokens);
    sched_destroy(s);
}

static void expect_same(const result *a, const result *b, int n, const char *what)
{
    for (int i = 0; i < n; i++) {
        assert_true(b[i].done);
        if (a[i].n != b[i].n || memcmp(a[i].ids, b[i].ids, sizeof(int32_t) * (size_t)a[i].n))
            fail_msg("%s: request %d: %d vs %d tokens or different ids", what, i, a[i].n, b[i].n);
        assert_int_equal(a[i].finish, b[i].finish);
        assert_int_equal(a[i].finish_length, b[i].finish_length);
        assert_int_equal(a[i].finish_token, b[i].finish_token);
        for (int k = 0; k < a[i].n; k++)
            if (!(isnan(a[i].lp[k]) && isnan(b[i].lp[k])) && fabsf(a[i].lp[k] - b[i].lp[k]) > 1e-4f)
                fail_msg("%s: request %d logprob %d: %g vs %g", what, i, k, a[i].lp[k], b[i].lp[k]);
    }
}

static void test_draft_end_to_end(void **state)
{
    (void)state;
    NEED_MODEL();
    req_cfg cfg[5] = {
        {12, 20, false, true, false, -1},
        {9, 17, true, true, false, -1},
        {15, 11, false, false, true, -1},
        {7, 24, true, false, true, -1},
        {20, 1, false, true, false, -1},
    };
    int n = 5;
    static result ref[MAXR], got[MAXR];
    sched_stats st_ref, st;
    run(cfg, n, NULL, 0, 1, ref, &st_ref);
    for (int i = 0; i < n; i++) {
        assert_int_equal(ref[i].n, cfg[i].max_new);
        assert_int_equal(ref[i].finish, SCHED_FINISH_LENGTH);
    }
    const int pages[2] = {1, 16};
    for (int pg = 0; pg < 2; pg++)
        for (int mode = 0; mode < 3; mode++) {
            drafter d = {.ref = ref, .n = n, .mode = mode};
            run(cfg, n, &d, 4, pages[pg], got, &st);
            char what[64];
            snprintf(what, sizeof what, "page %d drafter mode %d", pages[pg], mode);
            expect_same(ref, got, n, what);
            assert_true(d.calls > 0 && d.proposed > 0);
            assert_int_equal(st.generated_tokens, st_ref.generated_tokens);
            if (mode == 0) {
                /* every draft accepted: 1 + 4 tokens per decode forward */
                assert_true(st.n_decode_steps * 3 < st_ref.n_decode_steps);
            } else if (mode == 1) {
                assert_int_equal(st.n_decode_steps, st_ref.n_decode_steps);
            } else {
                assert_true(st.n_decode_steps < st_ref.n_decode_steps);
            }
        }
    /* streaming with drafts: one event per step carrying every accepted token */
    drafter d = {.ref = ref, .n = n, .mode = 0};
    run(cfg, n, &d, 4, 1, got, &st);
    assert_true(got[2].n_events < ref[2].n_events);
}

/* Drafts under KV pressure: a pool too small for every request at once
 * (decode retracts), drafts competing for pages: same outputs, no leak. */
static void test_draft_tiny_pool(void **state)
{
    (void)state;
    NEED_MODEL();
    req_cfg cfg[MAXR];
    int n = 12;
    for (int i = 0; i < n; i++) cfg[i] = (req_cfg){8 + i % 5, 24 + i % 7, i % 3 == 1, i % 2 == 0, i % 4 == 3, -1};
    static result ref[MAXR], got[MAXR];
    sched_stats st_ref, st;
    run(cfg, n, NULL, 0, 1, ref, &st_ref); /* the large pool: reference */
    g_pool_tokens = 192;
    g_conservativeness = 0.05;
    run(cfg, n, NULL, 0, 1, got, &st);
    expect_same(ref, got, n, "tiny pool, no drafts");
    assert_true(st.num_retractions > 0);
    for (int pg = 1; pg <= 16; pg += 15) {
        drafter d = {.ref = ref, .n = n, .mode = 0};
        run(cfg, n, &d, 6, pg, got, &st);
        expect_same(ref, got, n, "tiny pool, drafts");
        d = (drafter){.ref = ref, .n = n, .mode = 2};
        run(cfg, n, &d, 6, pg, got, &st);
        expect_same(ref, got, n, "tiny pool, half-right drafts");
    }
    g_pool_tokens = 8192;
    g_conservativeness = 1.0;
}

/* A stop token inside a drafted run: the request ends at it. */
static void test_draft_stop_token(void **state)
{
    (void)state;
    NEED_MODEL();
    req_cfg cfg[1] = {{12, 30, false, true, true, -1}};
    static result ref[1], got[1], plain[1];
    sched_stats st;
    run(cfg, 1, NULL, 0, 1, ref, &st);
    /* the first position >= 3 whose token did not occur before it */
    int k = 3;
    while (k < ref[0].n) {
        bool seen = false;
        for (int j = 0; j < k; j++) seen |= ref[0].ids[j] == ref[0].ids[k];
        if (!seen) break;
        k++;
    }
    if (k >= ref[0].n) skip();
    cfg[0].stop_id = ref[0].ids[k];
    run(cfg, 1, NULL, 0, 1, plain, &st);
    assert_int_equal(plain[0].finish, SCHED_FINISH_STOP_TOKEN);
    assert_int_equal(plain[0].n, k + 1);
    for (int md = 2; md <= 6; md++) {
        drafter d = {.ref = ref, .n = 1, .mode = 0};
        run(cfg, 1, &d, md, 1, got, &st);
        expect_same(plain, got, 1, "stop token in a drafted run");
        assert_int_equal(got[0].finish_token, cfg[0].stop_id);
        assert_int_equal(got[0].completion_tokens, k + 1);
    }
}

/* ---- sched_process_request driven directly ---------------------------------- */

/* A scheduler with one greedy streaming request that has been prefilled
 * (one output token) and is running; its events drained into *res. */
static sched *one_running_page(int max_new, int32_t stop_id, result *res, int page_size)
{
    sched *s = mk(page_size);
    req_cfg c = {10, max_new, false, true, true, stop_id};
    sched_req_spec sp = spec_of(&c, 0);
    memset(res, 0, sizeof *res);
    res->id = sched_submit(s, &sp);
    assert_int_equal(sched_step(s), 1);
    assert_int_equal(s->q.n_running, 1);
    drain(s, res, 1);
    assert_int_equal(res->n, 1);
    return s;
}

static sched *one_running(int max_new, int32_t stop_id, result *res)
{
    return one_running_page(max_new, stop_id, res, 1);
}

/* Page size > 1: every attention layer's K and V row at kv position p of
 * r filled with the byte mark (what the forward would have stored there). */
static void mark_kv(sched *s, sreq *r, int64_t p, uint8_t mark)
{
    model_kv *kv = s->eng.kv;
    size_t eb = kv->dt == DTYPE_F32 ? 4 : kv->dt == DTYPE_BF16 ? 2 : 1, row = (size_t)kv->row_len * eb;
    for (int l = 0; l < kv->n_layer; l++) {
        if (kv->k[l]) memset((char *)kv->k[l] + (size_t)r->kv.slots[p] * row, mark, row);
        if (kv->v[l]) memset((char *)kv->v[l] + (size_t)r->kv.slots[p] * row, mark + 100, row);
        for (int h = 0; kv->dt == DTYPE_I8 && kv->k[l] && h < kv->n_tok_head; h++) {
            kv->k_tok[l][(size_t)r->kv.slots[p] * kv->n_tok_head + h] = (float)mark;
            kv->v_tok[l][(size_t)r->kv.slots[p] * kv->n_tok_head + h] = (float)mark + 0.5f;
        }
    }
}

/* 1 when every K and V row at kv position p of r holds mark (mark_kv). */
static bool kv_marked(sched *s, sreq *r, int64_t p, uint8_t mark)
{
    model_kv *kv = s->eng.kv;
    size_t eb = kv->dt == DTYPE_F32 ? 4 : kv->dt == DTYPE_BF16 ? 2 : 1, row = (size_t)kv->row_len * eb;
    for (int l = 0; l < kv->n_layer; l++)
        for (size_t i = 0; i < row; i++) {
            if (kv->k[l] && ((uint8_t *)kv->k[l])[(size_t)r->kv.slots[p] * row + i] != mark) return false;
            if (kv->v[l] && ((uint8_t *)kv->v[l])[(size_t)r->kv.slots[p] * row + i] != (uint8_t)(mark + 100))
                return false;
        }
    for (int l = 0; kv->dt == DTYPE_I8 && l < kv->n_layer; l++)
        for (int h = 0; kv->k[l] && h < kv->n_tok_head; h++)
            if (kv->k_tok[l][(size_t)r->kv.slots[p] * kv->n_tok_head + h] != (float)mark ||
                kv->v_tok[l][(size_t)r->kv.slots[p] * kv->n_tok_head + h] != (float)mark + 0.5f)
                return false;
    return true;
}

/* k rows whose greedy choices are toks[0..k-1]; the request's pages made
 * to cover what the forward would have computed (as sched_batch_draft
 * does for real drafts). */
static float *rows_for(sched *s, sreq *r, const int32_t *toks, int k)
{
    float *rows = calloc((size_t)k * (size_t)s->lim.V, sizeof(float));
    for (int j = 0; j < k; j++) rows[(size_t)j * (size_t)s->lim.V + (size_t)toks[j]] = 10.0f;
    assert_int_equal(sched_kv_alloc_upto(s, r, r->tok.len + k - 1), 0);
    return rows;
}

static void finish_and_check(sched *s, result *res)
{
    assert_int_equal(sched_run_until_idle(s), 0);
    drain(s, res, 1);
    assert_true(res->done);
    char err[512];
    if (sched_check_leak(s, err, sizeof err)) fail_msg("%s", err);
    sched_stats st;
    sched_get_stats(s, &st);
    assert_int_equal(st.free_tokens + st.evictable_tokens, st.max_total_num_tokens);
    assert_int_equal(st.protected_tokens, 0);
}

static void test_process_k_all_accepted(void **state)
{
    (void)state;
    NEED_MODEL();
    result res;
    sched *s = one_running(20, -1, &res);
    sreq *r = s->q.running[0];
    int32_t toks[4] = {100, 200, 300, 400};
    float *rows = rows_for(s, r, toks, 4);
    int64_t len0 = r->tok.len;
    bool fin;
    int n = sched_process_request(s, r, rows, 4, toks, &fin);
    assert_int_equal(n, 4);
    assert_false(fin);
    assert_int_equal(r->tok.len, len0 + 4);
    assert_int_equal(r->kv.kv_len, r->tok.len - 1);
    for (int j = 0; j < 4; j++) assert_int_equal(r->tok.seq[len0 + j], toks[j]);
    drain(s, &res, 1);
    /* one TOKENS event with the four tokens */
    assert_int_equal(res.n_events, 2);
    assert_int_equal(res.n, 5);
    assert_memory_equal(res.ids + 1, toks, sizeof toks);
    free(rows);
    finish_and_check(s, &res);
    assert_int_equal(res.finish, SCHED_FINISH_LENGTH);
    assert_int_equal(res.n, 20);
    sched_destroy(s);
}

static void test_process_k_rejects(void **state)
{
    (void)state;
    NEED_MODEL();
    result res;
    sched *s = one_running(20, -1, &res);
    sreq *r = s->q.running[0];
    int32_t toks[4] = {100, 200, 300, 400};
    int32_t draft[3] = {100, 201, 300}; /* the second draft is not what row 1 samples */
    float *rows = rows_for(s, r, toks, 4);
    int64_t len0 = r->tok.len;
    bool fin;
    int n = sched_process_request(s, r, rows, 4, draft, &fin);
    assert_int_equal(n, 2); /* 100 confirms draft 0; 200 rejects draft 1 and is the last token */
    assert_false(fin);
    assert_int_equal(r->tok.len, len0 + 2);
    assert_int_equal(r->tok.seq[len0 + 1], 200);
    assert_int_equal(r->kv.kv_len, r->tok.len - 1);
    free(rows);
    drain(s, &res, 1);
    assert_int_equal(res.n, 3);
    finish_and_check(s, &res);
    assert_int_equal(res.n, 20);
    sched_destroy(s);
}

static void test_process_k_stop_token_mid(void **state)
{
    (void)state;
    NEED_MODEL();
    result res;
    sched *s = one_running(20, 300, &res);
    sreq *r = s->q.running[0];
    int32_t toks[4] = {100, 200, 300, 400};
    float *rows = rows_for(s, r, toks, 4);
    bool fin;
    int n = sched_process_request(s, r, rows, 4, toks, &fin);
    assert_int_equal(n, 3);
    assert_true(fin); /* r is freed */
    free(rows);
    drain(s, &res, 1);
    assert_true(res.done);
    assert_int_equal(res.finish, SCHED_FINISH_STOP_TOKEN);
    assert_int_equal(res.finish_token, 300);
    assert_int_equal(res.n, 4); /* the prefill's token + 100 200 300 */
    assert_int_equal(res.completion_tokens, 4);
    assert_int_equal(res.ids[3], 300);
    assert_int_equal(res.n_events, 2); /* no TOKENS event for the finishing run: all in FINISH */
    assert_int_equal(s->q.n_running, 1); /* the stage's caller drops it; here by hand */
    s->q.n_running = 0;
    finish_and_check(s, &res);
    sched_destroy(s);
}

static void test_process_k_max_new_mid(void **state)
{
    (void)state;
    NEED_MODEL();
    result res;
    sched *s = one_running(3, -1, &res);
    sreq *r = s->q.running[0];
    int32_t toks[4] = {100, 200, 300, 400};
    float *rows = rows_for(s, r, toks, 4);
    bool fin;
    int n = sched_process_request(s, r, rows, 4, toks, &fin);
    assert_int_equal(n, 2);
    assert_true(fin);
    free(rows);
    drain(s, &res, 1);
    assert_true(res.done);
    assert_int_equal(res.finish, SCHED_FINISH_LENGTH);
    assert_int_equal(res.finish_length, 3);
    assert_int_equal(res.n, 3);
    assert_int_equal(res.ids[1], 100);
    assert_int_equal(res.ids[2], 200);
    s->q.n_running = 0;
    finish_and_check(s, &res);
    sched_destroy(s);
}

/* The tree walk (sched_process_request_tree) on crafted rows.  Tree (row:
 * draft, parent row):  1: 100 (0)   2: 200 (0)   3: 300 (1)   4: 400 (2)
 * 5: 500 (4)   6: 600 (2).  Row argmaxes: row 0 -> 200, row 2 -> 400 (row
 * 6's 600 is its other child), row 4 -> 500, row 5 -> 77; rows 1, 3, 6
 * would give 300, 999, 999 if (wrongly) followed.  Expected: 200 400 500
 * 77 (the target's argmax path, SGLang's verify_tree_greedy), the pages of
 * rows 2, 4, 5 moved to positions len, len + 1, len + 2, the rest trimmed
 * without a leak.  Then: a root whose sample matches no child (1 token), and
 * a stop token on the path.  At page size 16 (c >= 3) the pages stay and the
 * K / V rows of rows 2, 4, 5 are copied to positions len, len + 1, len + 2
 * (each row's KV marked with its own bytes beforehand); also over an int8
 * cache, whose per-token scales must follow. */
static void test_process_tree_walk(void **state)
{
    (void)state;
    NEED_MODEL();
    const int32_t draft[6] = {100, 200, 300, 400, 500, 600};
    const int32_t parent[6] = {-1, -1, 0, 1, 3, 1}; /* draft k follows draft parent[k] (-1 = the root row) */
    const int32_t toks[7] = {200, 300, 400, 999, 500, 77, 999};
    for (int cc = 0; cc < 9; cc++) {
        const int c = cc % 3, P = cc < 3 ? 1 : 16;
        g_kv_dtype = cc >= 6 ? DTYPE_I8 : -1; /* 6..8: page 16 over an int8 cache (token scales move too) */
        result res;
        sched *s = one_running_page(20, c == 2 ? 500 : -1, &res, P);
        sreq *r = s->q.running[0];
        int32_t t2[7];
        memcpy(t2, toks, sizeof t2);
        if (c == 1) t2[0] = 123; /* the root samples 123: no child */
        float *rows = rows_for(s, r, t2, 7);
        int64_t len0 = r->tok.len;
        int32_t pg[7], sl[7];
        for (int k = 0; k < 7; k++) sl[k] = r->kv.slots[len0 - 1 + k];
        for (int k = 0; k < 7 && P == 1; k++) pg[k] = r->kv.pages[len0 - 1 + k];
        for (int k = 0; k < 7 && P > 1; k++) mark_kv(s, r, len0 - 1 + k, (uint8_t)(k + 1));
        bool fin;
        int n = sched_process_request_tree(s, r, rows, 7, draft, parent, &fin);
        free(rows);
        if (c == 0) {
            assert_int_equal(n, 4);
            assert_false(fin);
            const int32_t want[4] = {200, 400, 500, 77};
            assert_memory_equal(r->tok.seq + len0, want, sizeof want);
            assert_int_equal(r->kv.kv_len, len0 + 3);
            if (P == 1) {
                assert_int_equal(r->kv.pages[len0 - 1], pg[0]); /* the root stays */
                assert_int_equal(r->kv.pages[len0], pg[2]);
                assert_int_equal(r->kv.pages[len0 + 1], pg[4]);
                assert_int_equal(r->kv.pages[len0 + 2], pg[5]);
                for (int k = 0; k < 4; k++) assert_int_equal(r->kv.slots[len0 - 1 + k], r->kv.pages[len0 - 1 + k]);
            } else {
                for (int k = 0; k < 7; k++) assert_int_equal(r->kv.slots[len0 - 1 + k], sl[k]); /* no slot moves */
                assert_true(kv_marked(s, r, len0 - 1, 1)); /* the root stays */
                assert_true(kv_marked(s, r, len0, 3));     /* row 2's KV */
                assert_true(kv_marked(s, r, len0 + 1, 5)); /* row 4's */
                assert_true(kv_marked(s, r, len0 + 2, 6)); /* row 5's */
                assert_false(r->kv.kv_broken);
            }
            assert_int_equal(r->spec.accepted, 3);
            sched_kv_trim(s, r, r->kv.kv_len + 1); /* what the stage does: rejected nodes' pages go back */
            assert_int_equal(r->kv.n_pages, (len0 + 4 + P - 1) / P);
        } else if (c == 1) {
            assert_int_equal(n, 1);
            assert_false(fin);
            assert_int_equal(r->tok.seq[len0], 123);
            for (int k = 0; k < 7 && P == 1; k++) /* nothing moved */
                assert_int_equal(r->kv.pages[len0 - 1 + k], pg[k]);
            for (int k = 0; k < 7 && P > 1; k++) assert_true(kv_marked(s, r, len0 - 1 + k, (uint8_t)(k + 1)));
            sched_kv_trim(s, r, r->kv.kv_len + 1);
        } else {
            assert_int_equal(n, 3); /* 200 400 500, and 500 is the stop token */
            assert_true(fin);
            s->q.n_running = 0;
        }
        drain(s, &res, 1);
        finish_and_check(s, &res);
        if (c == 2) {
            assert_int_equal(res.finish, SCHED_FINISH_STOP_TOKEN);
            assert_int_equal(res.ids[res.n - 1], 500);
        } else {
            assert_int_equal(res.n, 20);
        }
        sched_destroy(s);
    }
    g_kv_dtype = -1;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_process_tree_walk),
        cmocka_unit_test(test_process_k_all_accepted),
        cmocka_unit_test(test_process_k_rejects),
        cmocka_unit_test(test_process_k_stop_token_mid),
        cmocka_unit_test(test_process_k_max_new_mid),
        cmocka_unit_test(test_draft_end_to_end),
        cmocka_unit_test(test_draft_stop_token),
        cmocka_unit_test(test_draft_tiny_pool),
    };
    return cmocka_run_group_tests(tests, tiny_setup, tiny_teardown);
}
