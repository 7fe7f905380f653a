/* dp — see dp.h (replicas, threads and pinning, KV split, ids). */
#include "dp/dp.h"

#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/log.h"
#include "util/timeutil.h"

struct dp {
    int n;
    bool owns;                   /* false: dp_wrap (the scheduler is borrowed) */
    sched **s;                   /* (n) */
    int *cpus;                   /* (n_cpus) the CPUs replicas are pinned to, in order; NULL = not pinned */
    int *cpu_off, *cpu_cnt;      /* (n) replica r's slice of cpus */
    pthread_mutex_t mu;          /* guards lb */
    dp_lb *lb;                   /* owned */
    dp_lb_method method;
    int next;                    /* dp_wait's rotation (its one reader) */
    bool started;
};

static dp *dp_alloc(int n)
{
    dp *d = calloc(1, sizeof *d);
    if (!d) return NULL;
    d->n = n;
    d->s = calloc((size_t)n, sizeof *d->s);
    d->cpu_off = calloc((size_t)n, sizeof(int));
    d->cpu_cnt = calloc((size_t)n, sizeof(int));
    pthread_mutex_init(&d->mu, NULL);
    if (!d->s || !d->cpu_off || !d->cpu_cnt) {
        free(d->s), free(d->cpu_off), free(d->cpu_cnt);
        pthread_mutex_destroy(&d->mu);
        free(d);
        return NULL;
    }
    return d;
}

dp *dp_wrap(sched *s)
{
    dp *d = s ? dp_alloc(1) : NULL;
    if (!d) return NULL;
    d->s[0] = s;
    d->method = DP_LB_ROUND_ROBIN;
    d->lb = dp_lb_create(1, d->method);
    if (!d->lb) {
        dp_destroy(d);
        return NULL;
    }
    return d;
}

/* The calling thread takes replica r's CPUs (saved gets its own mask
 * back with restore_affinity).  No-op when the replicas are not pinned. */
static void take_affinity(dp *d, int r, cpu_set_t *saved, bool *changed)
{
    *changed = false;
    if (!d->cpus || d->cpu_cnt[r] <= 0) return;
    if (pthread_getaffinity_np(pthread_self(), sizeof *saved, saved)) return;
    cpu_set_t cs;
    CPU_ZERO(&cs);
    for (int i = 0; i < d->cpu_cnt[r]; i++) CPU_SET(d->cpus[d->cpu_off[r] + i], &cs);
    *changed = pthread_setaffinity_np(pthread_self(), sizeof cs, &cs) == 0;
    if (!*changed) log_warn("dp_rank %d: cannot pin to its CPUs; it runs unpinned", r);
}

static void restore_affinity(const cpu_set_t *saved, bool changed)
{
    if (changed) pthread_setaffinity_np(pthread_self(), sizeof *saved, saved);
}

/* Split `threads` between the replicas and, when they fit in the CPUs
 * this process may use, give each its slice (at r * stride when stride >
 * 0).  0 or -1 (OOM). */
static int plan_cpus(dp *d, int threads, bool pin, int stride, int *per)
{
    for (int r = 0; r < d->n; r++) per[r] = threads / d->n + (r < threads % d->n ? 1 : 0);
    if (!pin || d->n == 1) return 0;
    cpu_set_t cs;
    CPU_ZERO(&cs);
    if (sched_getaffinity(0, sizeof cs, &cs)) return 0;
    int avail = CPU_COUNT(&cs);
    int span = stride > 0 ? (d->n - 1) * stride + per[d->n - 1] : threads; /* CPUs the slices cover */
    if (avail < span) {
        if (stride > 0)
            log_info("dp: %d replicas x %d CPUs per replica's ranks on %d CPUs: replicas are not pinned", d->n,
                     stride, avail);
        else
            log_info("dp: %d compute threads on %d CPUs: replicas are not pinned", threads, avail);
        return 0;
    }
    d->cpus = malloc(sizeof(int) * (size_t)avail);
    if (!d->cpus) return -1;
    int k = 0;
    for (int c = 0; c < CPU_SETSIZE && k < avail; c++)
        if (CPU_ISSET(c, &cs)) d->cpus[k++] = c;
    int off = 0;
    for (int r = 0; r < d->n; r++) {
        d->cpu_off[r] = stride > 0 ? r * stride : off;
        d->cpu_cnt[r] = per[r];
        off += per[r];
    }
    return 0;
}

/* The given replica models 1..n-1 that dp_create did not take over. */
static void free_given(const dp_opts *o, int from)
{
    for (int r = from > 1 ? from : 1; o->models && r < o->dp_size; r++) model_free(o->models[r]);
}

dp *dp_create(model *m, const sched_args *a, const dp_opts *o, char *err, size_t errlen)
{
    int n = o->dp_size;
    if (n < 1) {
        snprintf(err, errlen, "--dp-size must be at least 1, got %d", n);
        return NULL;
    }
    if (o->models && (o->models[0] != m || n < 2)) {
        free_given(o, 1);
        snprintf(err, errlen, "dp_create: models[0] must be the model m, with dp_size >= 2");
        return NULL;
    }
    if (o->threads < n) {
        free_given(o, 1);
        snprintf(err, errlen,
                 "--dp-size %d needs at least %d compute threads (one per replica), but there are %d "
                 "(--threads, default: the CPU cores)",
                 n, n, o->threads);
        return NULL;
    }
    dp *d = dp_alloc(n);
    int *per = malloc(sizeof(int) * (size_t)n);
    if (!d || !per) {
        free(per);
        dp_destroy(d);
        free_given(o, 1);
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    d->owns = true;
    d->method = o->method;
    d->lb = dp_lb_create(n, o->method);
    if (!d->lb || plan_cpus(d, o->threads, o->pin, o->cpu_stride, per)) {
        free(per);
        dp_destroy(d);
        free_given(o, 1);
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    sched_args ra = *a;
    if (n > 1 && a->max_total_tokens <= 0) {
        /* the memory budget is the machine's: a probe scheduler sizes it
         * once (weights counted once), then each replica gets its share */
        sched_args pa = *a;
        pa.threads = 1;
        sched *probe = sched_create(m, &pa, err, errlen);
        if (!probe) {
            free(per);
            dp_destroy(d);
            free_given(o, 1);
            return NULL;
        }
        sched_stats st;
        sched_get_stats(probe, &st);
        sched_destroy(probe);
        int P = a->page_size > 0 ? a->page_size : 1;
        ra.max_total_tokens = st.max_total_num_tokens / n / P * P;
        log_info("dp: %d replicas share the KV budget of %" PRId64 " tokens: %" PRId64 " each", n,
                 st.max_total_num_tokens, ra.max_total_tokens);
    }
    int r = 0;
    for (; r < n; r++) {
        model *mr = r == 0 ? m : o->models ? o->models[r] : model_share(m);
        if (!mr) {
            snprintf(err, errlen, "out of memory");
            break;
        }
        ra.threads = per[r];
        cpu_set_t saved;
        bool changed;
        take_affinity(d, r, &saved, &changed); /* the compute workers inherit it */
        char e2[512];
        d->s[r] = sched_create(mr, &ra, e2, sizeof e2);
        restore_affinity(&saved, changed);
        if (!d->s[r]) {
            snprintf(err, errlen, "dp_rank %d: %s", r, e2);
            if (r > 0) model_free(mr);
            r++;
            break;
        }
        if (d->cpus)
            log_info("dp_rank %d: %d compute threads on CPUs %d..%d", r, per[r], d->cpus[d->cpu_off[r]],
                     d->cpus[d->cpu_off[r] + per[r] - 1]);
        else if (n > 1)
            log_info("dp_rank %d: %d compute threads", r, per[r]);
    }
    free(per);
    for (int q = 0; q < n; q++)
        if (!d->s[q]) {
            free_given(o, r); /* the given models no replica took */
            dp_destroy(d);
            return NULL;
        }
    if (n > 1 && o->models)
        log_info("dp: %d replicas, each driving its own group of ranks over one copy of each rank's shard "
                 "(%.2f GiB on rank 0), load balance method %s", n, (double)model_weight_bytes(m) / 1073741824.0,
                 dp_lb_name(o->method));
    else if (n > 1)
        log_info("dp: %d replicas over one copy of the weights (%.2f GiB), load balance method %s", n,
                 (double)model_weight_bytes(m) / 1073741824.0, dp_lb_name(o->method));
    return d;
}

void dp_destroy(dp *d)
{
    if (!d) return;
    if (d->owns) {
        dp_stop(d);
        for (int r = 0; r < d->n; r++) {
            if (!d->s[r]) continue;
            if (d->n > 1) {
                sched_stats st;
                sched_get_stats(d->s[r], &st);
                log_info("dp_rank %d: %" PRId64 " requests finished, %" PRId64 " leak checks, %" PRId64
                         " leaks", r, st.n_finished, st.leak_checks, st.leak_failures);
            }
            model *mr = r > 0 ? sched_model(d->s[r]) : NULL;
            sched_destroy(d->s[r]);
            model_free(mr);
            d->s[r] = NULL;
        }
    }
    dp_lb_destroy(d->lb);
    pthread_mutex_destroy(&d->mu);
    free(d->s), free(d->cpus), free(d->cpu_off), free(d->cpu_cnt);
    free(d);
}

int dp_size(const dp *d) { return d->n; }
dp_lb_method dp_method(const dp *d) { return d->method; }
sched *dp_sched(dp *d, int r) { return r >= 0 && r < d->n ? d->s[r] : NULL; }
model *dp_model(dp *d) { return sched_model(d->s[0]); }

int dp_start(dp *d)
{
    for (int r = 0; r < d->n; r++) {
        cpu_set_t saved;
        bool changed;
        take_affinity(d, r, &saved, &changed); /* the scheduler thread inherits it */
        int rc = sched_start(d->s[r]);
        restore_affinity(&saved, changed);
        if (rc) {
            log_error("dp_rank %d: cannot start its scheduler thread", r);
            return -1;
        }
    }
    d->started = true;
    return 0;
}

void dp_stop(dp *d)
{
    if (!d->owns) return; /* dp_wrap: the owner stops it */
    for (int r = 0; r < d->n; r++)
        if (d->s[r]) sched_stop(d->s[r]);
    d->started = false;
}

/* ---- requests -------------------------------------------------------------------- */

uint64_t dp_submit(dp *d, sched_req_spec *spec, int rank, int64_t bootstrap_room, int *rank_out)
{
    int n_per = spec->params.n > 1 ? (int)spec->params.n : 1;
    pthread_mutex_lock(&d->mu);
    int r = dp_lb_pick(d->lb, spec->input_ids, spec->n_input, n_per, bootstrap_room,
                       rank >= 0 && rank < d->n ? rank : -1, NULL);
    pthread_mutex_unlock(&d->mu);
    if (rank_out) *rank_out = r;
    uint64_t local = sched_submit(d->s[r], spec);
    return local * (uint64_t)d->n + (uint64_t)r;
}

void dp_abort(dp *d, const char *rid)
{
    for (int r = 0; r < d->n; r++) sched_abort(d->s[r], rid);
}

void dp_abort_id(dp *d, uint64_t id)
{
    if (!id) return;
    int r = (int)(id % (uint64_t)d->n);
    sched_abort_id(d->s[r], id / (uint64_t)d->n);
}

/* An event from replica r: count it, give it the global id. */
static sched_event *account(dp *d, int r, sched_event *e, int *rank_out)
{
    pthread_mutex_lock(&d->mu);
    if (e->n_ids > 0) dp_lb_add_tokens(d->lb, r, e->n_ids);
    if (e->kind == SCHED_EV_FINISH) dp_lb_finish(d->lb, r, e->prompt_tokens + e->completion_tokens);
    pthread_mutex_unlock(&d->mu);
    e->id = e->id * (uint64_t)d->n + (uint64_t)r;
    if (rank_out) *rank_out = r;
    return e;
}

sched_event *dp_wait(dp *d, double timeout_s, int *rank_out)
{
    if (d->n == 1) {
        sched_event *e = sched_wait(d->s[0], timeout_s);
        return e ? account(d, 0, e, rank_out) : NULL;
    }
    double deadline = timeout_s >= 0 ? time_now_sec() + timeout_s : -1;
    struct pollfd pf[64];
    int npf = d->n <= 64 ? d->n : 64;
    bool fds = true;
    for (int i = 0; i < npf; i++) {
        pf[i].fd = sched_outbox_fd(d->s[i]);
        pf[i].events = POLLIN;
        if (pf[i].fd < 0) fds = false;
    }
    if (d->n > 64) fds = false;
    for (;;) {
        for (int i = 0; i < d->n; i++) {
            int r = (d->next + i) % d->n;
            sched_event *e = sched_poll(d->s[r]);
            if (e) {
                d->next = (r + 1) % d->n;
                return account(d, r, e, rank_out);
            }
        }
        double left = deadline < 0 ? 0.2 : deadline - time_now_sec();
        if (left <= 0) return NULL;
        if (left > 0.2) left = 0.2;
        if (fds) {
            for (int i = 0; i < npf; i++) pf[i].revents = 0;
            poll(pf, (nfds_t)npf, (int)(left * 1000.0) + 1);
        } else { /* no eventfd: wait on one outbox a little, then look at all */
            sched_event *e = sched_wait(d->s[d->next], left < 0.005 ? left : 0.005);
            if (e) {
                int r = d->next;
                d->next = (r + 1) % d->n;
                return account(d, r, e, rank_out);
            }
            d->next = (d->next + 1) % d->n;
        }
    }
}

/* ---- control ------------------------------------------------------------------- */

static bool flushes(const sched_ctl *c) { return c->kind == SCHED_CTL_FLUSH_CACHE || (c->kind == SCHED_CTL_SWAP_MODEL && !c->keep_cache); }

static void forget(dp *d, int r)
{
    pthread_mutex_lock(&d->mu);
    dp_lb_forget(d->lb, r);
    pthread_mutex_unlock(&d->mu);
}

/* SWAP_MODEL on every replica: replica 0 gets c->new_model, the others a
 * share of it.  A replica that refuses undoes the ones before it (they go
 * back to their old run states), so the replicas never run different
 * weights and the caller's ownership stays as for one scheduler. */
static int swap_all(dp *d, sched_ctl *c)
{
    model **olds = calloc((size_t)d->n, sizeof *olds);
    if (!olds) {
        snprintf(c->msg, sizeof c->msg, "out of memory");
        return c->rc = -1;
    }
    int rc = 0, affected = 0, r = 0;
    for (; r < d->n; r++) {
        sched_ctl cr = *c;
        cr.old_model = NULL;
        cr.new_model = r == 0 ? c->new_model : model_share(c->new_model);
        if (!cr.new_model) {
            snprintf(c->msg, sizeof c->msg, "dp_rank %d: out of memory", r);
            rc = -1;
            break;
        }
        if (sched_control(d->s[r], &cr)) {
            if (r > 0) model_free(cr.new_model);
            snprintf(c->msg, sizeof c->msg, "dp_rank %d: %.480s", r, cr.msg);
            rc = -1;
            break;
        }
        affected += cr.n_affected;
        olds[r] = cr.old_model;
        if (r == 0) snprintf(c->msg, sizeof c->msg, "%s", cr.msg);
    }
    if (rc) { /* undo replicas [0, r) */
        for (int q = 0; q < r; q++) {
            sched_ctl cu = *c;
            cu.new_model = olds[q];
            cu.old_model = NULL;
            cu.keep_cache = false;
            if (sched_control(d->s[q], &cu) == 0) {
                if (q > 0) model_free(cu.old_model); /* the share made above */
                olds[q] = NULL;
            } else {
                log_error("dp_rank %d: cannot undo the weight update: %s", q, cu.msg);
            }
        }
    } else {
        for (int q = 1; q < d->n; q++) model_free(olds[q]);
    }
    if (!c->keep_cache || rc) forget(d, -1);
    c->old_model = rc ? NULL : olds[0];
    c->n_affected = affected;
    free(olds);
    return c->rc = rc;
}

int dp_control(dp *d, sched_ctl *c)
{
    if (c->kind == SCHED_CTL_SWAP_MODEL && d->n > 1) return swap_all(d, c);
    if (d->n == 1) {
        int rc = sched_control(d->s[0], c);
        if (rc == 0 && flushes(c)) forget(d, -1);
        return rc;
    }
    int rc = 0, affected = 0;
    char first_msg[sizeof c->msg] = "";
    for (int r = 0; r < d->n; r++) {
        sched_ctl cr = *c;
        int rr = sched_control(d->s[r], &cr);
        affected += cr.n_affected;
        if (r == 0) snprintf(first_msg, sizeof first_msg, "%s", cr.msg);
        if (rr == 0 && flushes(c)) forget(d, r);
        if (rr && !rc) {
            snprintf(c->msg, sizeof c->msg, "dp_rank %d: %.480s", r, cr.msg);
            rc = rr;
        }
    }
    if (!rc) snprintf(c->msg, sizeof c->msg, "%s", first_msg);
    c->rc = rc;
    c->n_affected = affected;
    return rc;
}

bool dp_is_paused(dp *d)
{
    for (int r = 0; r < d->n; r++)
        if (sched_is_paused(d->s[r])) return true;
    return false;
}

void dp_get_load(dp *d, int r, dp_lb_load *out)
{
    pthread_mutex_lock(&d->mu);
    dp_lb_get_load(d->lb, r, out);
    pthread_mutex_unlock(&d->mu);
}
