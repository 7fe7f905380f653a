/* sched_step — one scheduler step and the synchronous drivers.
 *
 * DESIGN
 * Layer 12 (sched_impl.h "Layers"): includes every layer below it.  A
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
#include <unistd.h>

#include "sched/sched_batch.h"
#include "sched/sched_ctl.h"
#include "sched/sched_inbox.h"
#include "sched/sched_kv.h"
#include "sched/sched_output.h"
#include "sched/sched_req.h"
#include "sched/sched_retract.h"
#include "sched/sched_util.h"
#include "util/log.h"
#include "util/timeutil.h"

static void progress_set(sched *s, double since, int reqs, int64_t tokens, bool decode, bool finished)
{
    pthread_mutex_lock(&s->prog.mu);
    s->prog.pg.busy_since = since;
    s->prog.pg.batch_reqs = reqs;
    s->prog.pg.batch_tokens = tokens;
    s->prog.pg.decode = decode;
    if (finished) s->prog.pg.steps++;
    pthread_mutex_unlock(&s->prog.mu);
}

/* ---- stage 2: forward, and the three stages in order ----------------------- */

/* Stage 2: one model_forward over the assembled batch.  On failure every
 * request of the batch gets a clear end (ABORT, 500) instead of looping.
 * 0 or -1. */
static int forward(sched *s, const model_batch *mb, bool with_decode)
{
    double t0 = time_now_sec();
    progress_set(s, s->prog.pg.busy_since, mb->n_seqs, mb->n_tokens, with_decode && s->q.n_running > 0 && s->buf.n_batch == 0,
                 false);
    int frc = model_forward(s->eng.m, s->eng.kv, mb, s->buf.logits, s->eng.tp);
    s->stats.st.forward_s += time_now_sec() - t0;
    if (!frc) return 0;
    log_error("model forward failed; aborting the %d requests of the batch", mb->n_seqs);
    /* tensor parallelism: a rank failed (the server cannot serve: 503) */
    const char *tpe = model_tp_error(s->eng.m);
    for (int b = 0; b < s->buf.n_batch; b++) {
        sreq *r = s->buf.batch[b];
        if (s->q.chunked == r) s->q.chunked = NULL;
        free(r->life.abort_msg);
        r->life.abort_msg = sched_strdup(*tpe ? "Service unavailable: a tensor-parallel rank failed."
                                              : "Internal error: model forward failed.");
        r->life.abort_status = *tpe ? 503 : 500;
        sched_req_abort(s, r);
    }
    s->buf.n_batch = 0;
    if (with_decode) {
        while (s->q.n_running > 0) {
            sreq *r = s->q.running[--s->q.n_running];
            free(r->life.abort_msg); /* decoding requests: 503 too when a rank failed */
            r->life.abort_msg = sched_strdup(*tpe ? "Service unavailable: a tensor-parallel rank failed."
                                                  : "Internal error: model forward failed.");
            r->life.abort_status = *tpe ? 503 : 500;
            sched_req_abort(s, r);
        }
    }
    return -1;
}

/* One forward over s->buf.batch (prefill rows) then, when with_decode, the
 * running requests: assemble -> forward -> process results. */
static int run_batch(sched *s, bool with_decode)
{
    model_batch mb;
    if (sched_batch_assemble(s, with_decode, &mb)) return -1;
    if (forward(s, &mb, with_decode)) {
        sched_kv_mamba_drop(s);
        return -1;
    }
    sched_kv_mamba_commit(s, with_decode); /* Mamba checkpoints into the tree before any request finishes */
    sched_process_results(s, with_decode);
    return 0;
}

/* ---- the step -------------------------------------------------------------- */

/* KV tokens in use: the pool less what is free or evictable (SGLang's
 * _get_token_info: max_total_num_tokens - available - evictable). */
static int64_t used_tokens(sched *s)
{
    int64_t u = s->lim.capacity - kv_pool_free_tokens(s->eng.pool) - kv_radix_evictable_size(s->eng.tree);
    return u > 0 ? u : 0;
}

/* SGLang's "Prefill batch." line, once per prefill batch (before it runs). */
static void log_prefill_stats(sched *s)
{
    if (s->a.decode_log_interval <= 0) return;
    int64_t used = used_tokens(s);
    log_info("Prefill batch. #new-seq: %d, #new-token: %" PRId64 ", #cached-token: %" PRId64
             ", token usage: %.2f, #running-req: %d, #queue-req: %d,",
             s->buf.n_batch, s->blog.log_new_tokens, s->blog.log_hit_tokens,
             s->lim.capacity > 0 ? (double)used / (double)s->lim.capacity : 0.0, s->q.n_running, s->q.n_waiting);
}

/* After a decode forward of n_dec requests that produced n_gen tokens:
 * SGLang's "Decode batch." line
 * every decode_log_interval decode forwards; gen throughput = decode
 * tokens since the previous line / seconds since it. */
static void log_decode_stats(sched *s, int n_dec, int64_t n_gen)
{
    s->blog.log_decode_ct++;
    s->blog.log_gen_tokens += n_gen; /* n_dec, or more with accepted drafts */
    if (s->a.decode_log_interval <= 0 || s->blog.log_decode_ct % s->a.decode_log_interval) return;
    double now = time_now_sec(), gap = now - s->blog.log_decode_tic;
    int64_t used = used_tokens(s);
    log_info("Decode batch. #running-req: %d, #token: %" PRId64 ", token usage: %.2f, cuda graph: False, "
             "gen throughput (token/s): %.2f, #queue-req: %d,",
             n_dec, used, s->lim.capacity > 0 ? (double)used / (double)s->lim.capacity : 0.0,
             gap > 0 ? (double)s->blog.log_gen_tokens / gap : 0.0, s->q.n_waiting);
    s->blog.log_gen_tokens = 0;
    s->blog.log_decode_tic = now;
}

int sched_step(sched *s)
{
    double t0 = time_now_sec(), f0 = s->stats.st.forward_s;
    sched_inbox_drain(s);
    sched_ctl_drain(s);
    if (s->ctl.swap_wait && !s->q.n_running && !s->q.n_waiting && !s->q.chunked) sched_ctl_swap(s, s->ctl.swap_wait);
    if (s->ctl.paused) {
        sched_publish_stats(s);
        return 0;
    }
    bool work = s->q.n_running || s->q.n_waiting || s->q.chunked;
    if (work) progress_set(s, t0, s->q.n_running + s->q.n_waiting + (s->q.chunked ? 1 : 0), 0, false, false);
    int did = 0, rc = 0;
    bool mixed = false;
    if (s->a.enable_mixed_chunk && s->q.n_running > 0 && (s->q.n_waiting > 0 || s->q.chunked))
        mixed = sched_batch_alloc_decode(s) == 0;
    int np = sched_batch_build_prefill(s, mixed ? s->q.n_running : 0);
    if (np < 0) {
        log_error("out of memory building a prefill batch");
        return -1;
    }
    if (np > 0) {
        log_prefill_stats(s);
        rc = run_batch(s, mixed);
        if (mixed) s->stats.st.n_mixed_steps++;
        else s->stats.st.n_prefill_steps++;
        did = 1;
        if (mixed && rc == 0) {
            s->adm.new_token_ratio -= s->adm.ratio_decay;
            if (s->adm.new_token_ratio < s->adm.min_ratio) s->adm.new_token_ratio = s->adm.min_ratio;
        }
    } else if (s->q.n_running > 0) {
        int n_ret = sched_retract_for_decode(s);
        if (s->q.n_running > 0) {
            if (sched_batch_alloc_decode(s)) {
                log_error("decode could not get KV pages after retraction");
                rc = -1;
            } else {
                sched_batch_draft(s);
                int n_dec = s->q.n_running;
                int64_t g0 = s->stats.st.generated_tokens;
                rc = run_batch(s, true);
                s->stats.st.n_decode_steps++;
                if (rc == 0) log_decode_stats(s, n_dec, s->stats.st.generated_tokens - g0);
            }
            if (!n_ret) {
                s->adm.new_token_ratio -= s->adm.ratio_decay;
                if (s->adm.new_token_ratio < s->adm.min_ratio) s->adm.new_token_ratio = s->adm.min_ratio;
            }
        }
        did = 1;
    }
    bool idle = s->q.n_running == 0 && s->q.n_waiting == 0 && !s->q.chunked;
    if (idle) {
        s->adm.new_token_ratio = s->adm.init_ratio;
        if (s->q.was_busy) {
            char err[256];
            s->stats.st.leak_checks++;
            if (kv_radix_check_leak(s->eng.tree, err, sizeof err)) {
                s->stats.st.leak_failures++;
                log_error("%s", err);
            }
            if (sched_kv_mamba_check_leak(s, err, sizeof err)) {
                s->stats.st.leak_failures++;
                log_error("%s", err);
            }
        }
    }
    s->q.was_busy = !idle;
    if (work) progress_set(s, 0, 0, 0, false, true);
    if (s->ctl.swap_wait && idle) sched_ctl_swap(s, s->ctl.swap_wait);
    s->stats.st.sched_s += (time_now_sec() - t0) - (s->stats.st.forward_s - f0);
    sched_publish_stats(s);
    return rc < 0 ? -1 : did;
}

int sched_run_until_idle(sched *s)
{
    for (;;) {
        int r = sched_step(s);
        if (r < 0) return -1;
        pthread_mutex_lock(&s->in.mu);
        bool inbox = s->in.head || s->in.ab_head || s->ctl.head;
        pthread_mutex_unlock(&s->in.mu);
        if (r == 0 && !inbox && s->q.n_waiting == 0 && s->q.n_running == 0 && !s->q.chunked && !s->gram.n_waiting)
            return 0;
        if (r == 0 && !inbox && s->gram.n_waiting > 0 && !s->q.n_waiting && !s->q.n_running && !s->q.chunked) {
            usleep(500); /* only grammars compiling (on their own thread): wait for them */
            continue;
        }
        if (r == 0 && !inbox && s->ctl.paused) return 0; /* paused: nothing runs until continue */
        if (r == 0 && !inbox) {
            /* waiting requests that cannot be admitted with nothing running
             * would loop forever: cannot happen by construction (max_new is
             * clipped to the pool); guard anyway */
            log_error("scheduler stalled with %d waiting requests", s->q.n_waiting);
            while (s->q.n_waiting > 0) {
                sreq *w = s->q.waiting[--s->q.n_waiting];
                w->life.abort_msg = sched_strdup("Internal error: the scheduler could not admit the request.");
                w->life.abort_status = 500;
                sched_req_abort(s, w);
            }
            return -1;
        }
    }
}

int sched_flush_cache(sched *s)
{
    if (s->q.n_running || s->q.n_waiting || s->q.chunked) {
        log_warn("flush_cache refused: %d running, %d waiting requests", s->q.n_running, s->q.n_waiting);
        return -1;
    }
    return kv_radix_reset(s->eng.tree);
}

int sched_check_leak(sched *s, char *err, size_t errlen)
{
    return kv_radix_check_leak(s->eng.tree, err, errlen) || sched_kv_mamba_check_leak(s, err, errlen) ? -1 : 0;
}

/* the snapshot readers (/metrics, /get_load) see; the scheduler thread
 * publishes it after each step, and before answering a request from inside
 * a step when the answer changes a counter (a grammar that failed to
 * compile), so a client that reads /metrics after its reply sees it */
void sched_publish_stats(sched *s)
{
    if (!s->thr.thread_started) return;
    sched_stats snap;
    sched_get_stats(s, &snap);
    pthread_mutex_lock(&s->out.mu);
    s->stats.st_pub = snap;
    pthread_mutex_unlock(&s->out.mu);
}

void sched_get_stats_snapshot(sched *s, sched_stats *out)
{
    pthread_mutex_lock(&s->out.mu);
    *out = s->stats.st_pub;
    pthread_mutex_unlock(&s->out.mu);
}

void sched_get_stats(sched *s, sched_stats *out)
{
    *out = s->stats.st;
    out->max_total_num_tokens = s->lim.capacity;
    out->n_running = s->q.n_running;
    out->n_waiting = s->q.n_waiting;
    out->n_grammar_queue = s->gram.n_waiting;
    out->free_tokens = kv_pool_free_tokens(s->eng.pool);
    out->evictable_tokens = kv_radix_evictable_size(s->eng.tree);
    out->protected_tokens = kv_radix_protected_size(s->eng.tree);
}

