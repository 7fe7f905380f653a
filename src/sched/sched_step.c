/* sched_step — one scheduler step and the synchronous drivers.
 *
 * DESIGN
 * Layer 11 (sched_impl.h "Layers"): includes every layer below it.  A
 * step: drain the inbox and the control messages; then either a prefill
 * forward (plus the running requests' decode tokens with
 * --enable-mixed-chunk) or a decode forward (after retraction, with draft
 * tokens when a draft hook is set); idle: the leak check.  Every forward
 * is the same three stages (run_batch):
 *
 *   assemble (sched_batch) -> forward (here) -> process results (sched_output)
 *
 * Also here: the batch log lines (--decode-log-interval), progress for the
 * watchdog, stats. */
#include <inttypes.h>
#include <stdlib.h>
#include <time.h>

#include "sched/sched_batch.h"
#include "sched/sched_ctl.h"
#include "sched/sched_inbox.h"
#include "sched/sched_output.h"
#include "sched/sched_req.h"
#include "sched/sched_retract.h"
#include "sched/sched_util.h"
#include "util/log.h"
#include "util/timeutil.h"

static void progress_set(sched *s, double since, int reqs, int64_t tokens, bool decode, bool finished)
{
    pthread_mutex_lock(&s->pg_mu);
    s->pg.busy_since = since;
    s->pg.batch_reqs = reqs;
    s->pg.batch_tokens = tokens;
    s->pg.decode = decode;
    if (finished) s->pg.steps++;
    pthread_mutex_unlock(&s->pg_mu);
}

/* ---- stage 2: forward, and the three stages in order ----------------------- */

/* Stage 2: one model_forward over the assembled batch.  On failure every
 * request of the batch gets a clear end (ABORT, 500) instead of looping.
 * 0 or -1. */
static int forward(sched *s, const model_batch *mb, bool with_decode)
{
    double t0 = time_now_sec();
    progress_set(s, s->pg.busy_since, mb->n_seqs, mb->n_tokens, with_decode && s->n_running > 0 && s->n_batch == 0,
                 false);
    int frc = model_forward(s->m, s->kv, mb, s->logits, s->tp);
    s->st.forward_s += time_now_sec() - t0;
    if (!frc) return 0;
    log_error("model forward failed; aborting the %d requests of the batch", mb->n_seqs);
    for (int b = 0; b < s->n_batch; b++) {
        sreq *r = s->batch[b];
        if (s->chunked == r) s->chunked = NULL;
        free(r->abort_msg);
        r->abort_msg = sched_strdup("Internal error: model forward failed.");
        r->abort_status = 500;
        sched_req_abort(s, r);
    }
    s->n_batch = 0;
    if (with_decode) {
        while (s->n_running > 0) {
            sreq *r = s->running[--s->n_running];
            free(r->abort_msg);
            r->abort_msg = sched_strdup("Internal error: model forward failed.");
            r->abort_status = 500;
            sched_req_abort(s, r);
        }
    }
    return -1;
}

/* One forward over s->batch (prefill rows) then, when with_decode, the
 * running requests: assemble -> forward -> process results. */
static int run_batch(sched *s, bool with_decode)
{
    model_batch mb;
    if (sched_batch_assemble(s, with_decode, &mb)) return -1;
    if (forward(s, &mb, with_decode)) return -1;
    sched_process_results(s, with_decode);
    return 0;
}

/* ---- the step -------------------------------------------------------------- */

/* KV tokens in use: the pool less what is free or evictable (SGLang's
 * _get_token_info: max_total_num_tokens - available - evictable). */
static int64_t used_tokens(sched *s)
{
    int64_t u = s->capacity - kv_pool_free_tokens(s->pool) - kv_radix_evictable_size(s->tree);
    return u > 0 ? u : 0;
}

/* SGLang's "Prefill batch." line, once per prefill batch (before it runs). */
static void log_prefill_stats(sched *s)
{
    if (s->a.decode_log_interval <= 0) return;
    int64_t used = used_tokens(s);
    log_info("Prefill batch. #new-seq: %d, #new-token: %" PRId64 ", #cached-token: %" PRId64
             ", token usage: %.2f, #running-req: %d, #queue-req: %d,",
             s->n_batch, s->log_new_tokens, s->log_hit_tokens,
             s->capacity > 0 ? (double)used / (double)s->capacity : 0.0, s->n_running, s->n_waiting);
}

/* After a decode forward of n_dec requests: SGLang's "Decode batch." line
 * every decode_log_interval decode forwards; gen throughput = decode
 * tokens since the previous line / seconds since it. */
static void log_decode_stats(sched *s, int n_dec)
{
    s->log_decode_ct++;
    s->log_gen_tokens += n_dec;
    if (s->a.decode_log_interval <= 0 || s->log_decode_ct % s->a.decode_log_interval) return;
    double now = time_now_sec(), gap = now - s->log_decode_tic;
    int64_t used = used_tokens(s);
    log_info("Decode batch. #running-req: %d, #token: %" PRId64 ", token usage: %.2f, cuda graph: False, "
             "gen throughput (token/s): %.2f, #queue-req: %d,",
             n_dec, used, s->capacity > 0 ? (double)used / (double)s->capacity : 0.0,
             gap > 0 ? (double)s->log_gen_tokens / gap : 0.0, s->n_waiting);
    s->log_gen_tokens = 0;
    s->log_decode_tic = now;
}

int sched_step(sched *s)
{
    double t0 = time_now_sec(), f0 = s->st.forward_s;
    sched_inbox_drain(s);
    sched_ctl_drain(s);
    if (s->swap_wait && !s->n_running && !s->n_waiting && !s->chunked) sched_ctl_swap(s, s->swap_wait);
    if (s->paused) {
        if (s->thread_started) {
            sched_stats snap;
            sched_get_stats(s, &snap);
            pthread_mutex_lock(&s->out_mu);
            s->st_pub = snap;
            pthread_mutex_unlock(&s->out_mu);
        }
        return 0;
    }
    bool work = s->n_running || s->n_waiting || s->chunked;
    if (work) progress_set(s, t0, s->n_running + s->n_waiting + (s->chunked ? 1 : 0), 0, false, false);
    int did = 0, rc = 0;
    bool mixed = false;
    if (s->a.enable_mixed_chunk && s->n_running > 0 && (s->n_waiting > 0 || s->chunked))
        mixed = sched_batch_alloc_decode(s) == 0;
    int np = sched_batch_build_prefill(s, mixed ? s->n_running : 0);
    if (np < 0) {
        log_error("out of memory building a prefill batch");
        return -1;
    }
    if (np > 0) {
        log_prefill_stats(s);
        rc = run_batch(s, mixed);
        if (mixed) s->st.n_mixed_steps++;
        else s->st.n_prefill_steps++;
        did = 1;
        if (mixed && rc == 0) {
            s->new_token_ratio -= s->ratio_decay;
            if (s->new_token_ratio < s->min_ratio) s->new_token_ratio = s->min_ratio;
        }
    } else if (s->n_running > 0) {
        int n_ret = sched_retract_for_decode(s);
        if (s->n_running > 0) {
            if (sched_batch_alloc_decode(s)) {
                log_error("decode could not get KV pages after retraction");
                rc = -1;
            } else {
                sched_batch_draft(s);
                int n_dec = s->n_running;
                rc = run_batch(s, true);
                s->st.n_decode_steps++;
                if (rc == 0) log_decode_stats(s, n_dec);
            }
            if (!n_ret) {
                s->new_token_ratio -= s->ratio_decay;
                if (s->new_token_ratio < s->min_ratio) s->new_token_ratio = s->min_ratio;
            }
        }
        did = 1;
    }
    bool idle = s->n_running == 0 && s->n_waiting == 0 && !s->chunked;
    if (idle) {
        s->new_token_ratio = s->init_ratio;
        if (s->was_busy) {
            char err[256];
            s->st.leak_checks++;
            if (kv_radix_check_leak(s->tree, err, sizeof err)) {
                s->st.leak_failures++;
                log_error("%s", err);
            }
        }
    }
    s->was_busy = !idle;
    if (work) progress_set(s, 0, 0, 0, false, true);
    if (s->swap_wait && idle) sched_ctl_swap(s, s->swap_wait);
    s->st.sched_s += (time_now_sec() - t0) - (s->st.forward_s - f0);
    if (s->thread_started) {
        sched_stats snap;
        sched_get_stats(s, &snap);
        pthread_mutex_lock(&s->out_mu);
        s->st_pub = snap;
        pthread_mutex_unlock(&s->out_mu);
    }
    return rc < 0 ? -1 : did;
}

int sched_run_until_idle(sched *s)
{
    for (;;) {
        int r = sched_step(s);
        if (r < 0) return -1;
        pthread_mutex_lock(&s->in_mu);
        bool inbox = s->in_head || s->ab_head || s->ctl_head;
        pthread_mutex_unlock(&s->in_mu);
        if (r == 0 && !inbox && s->n_waiting == 0 && s->n_running == 0 && !s->chunked) return 0;
        if (r == 0 && !inbox && s->paused) return 0; /* paused: nothing runs until continue */
        if (r == 0 && !inbox) {
            /* waiting requests that cannot be admitted with nothing running
             * would loop forever: cannot happen by construction (max_new is
             * clipped to the pool); guard anyway */
            log_error("scheduler stalled with %d waiting requests", s->n_waiting);
            while (s->n_waiting > 0) {
                sreq *w = s->waiting[--s->n_waiting];
                w->abort_msg = sched_strdup("Internal error: the scheduler could not admit the request.");
                w->abort_status = 500;
                sched_req_abort(s, w);
            }
            return -1;
        }
    }
}

int sched_flush_cache(sched *s)
{
    if (s->n_running || s->n_waiting || s->chunked) {
        log_warn("flush_cache refused: %d running, %d waiting requests", s->n_running, s->n_waiting);
        return -1;
    }
    return kv_radix_reset(s->tree);
}

int sched_check_leak(sched *s, char *err, size_t errlen) { return kv_radix_check_leak(s->tree, err, errlen); }

void sched_get_stats_snapshot(sched *s, sched_stats *out)
{
    pthread_mutex_lock(&s->out_mu);
    *out = s->st_pub;
    pthread_mutex_unlock(&s->out_mu);
}

void sched_get_stats(sched *s, sched_stats *out)
{
    *out = s->st;
    out->max_total_num_tokens = s->capacity;
    out->n_running = s->n_running;
    out->n_waiting = s->n_waiting;
    out->free_tokens = kv_pool_free_tokens(s->pool);
    out->evictable_tokens = kv_radix_evictable_size(s->tree);
    out->protected_tokens = kv_radix_protected_size(s->tree);
}

