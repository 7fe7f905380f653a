/* sched — create / destroy, the scheduler thread, control-message entry
 * and accessors: see sched.h for the design, sched_impl.h for the layers.
 *
 * DESIGN
 * The top layer (sched_impl.h "Layers"): includes every layer below it and
 * nothing includes it.  sched_create sizes the KV cache (SGLang's
 * max_total_num_tokens from --max-total-tokens or --mem-fraction-static)
 * and the request limits; the thread runs sched_step until stopped,
 * sleeping on in_cv when idle. */
#include "sched/sched.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "sched/sched_ctl.h"
#include "sched/sched_grammar.h"
#include "sched/sched_impl.h"
#include "sched/sched_kv.h"
#include "sched/sched_req.h"
#include "sched/sched_util.h"
#include "util/cpu.h"
#include "util/log.h"
#include "util/timeutil.h"

/* SGLang constants (global_config.py) */
#define INIT_NEW_TOKEN_RATIO 0.7
#define MIN_NEW_TOKEN_RATIO_FACTOR 0.14
#define NEW_TOKEN_RATIO_DECAY_STEPS 600

static int64_t mem_available_bytes(void)
{
    FILE *f = fopen("/proc/meminfo", "r");
    if (!f) return -1;
    char line[256];
    int64_t kb = -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %" SCNd64 " kB", &kb) == 1) break;
    fclose(f);
    return kb < 0 ? -1 : kb * 1024;
}

sched *sched_create(model *m, const sched_args *a, char *err, size_t errlen)
{
    const model_config *c = model_get_config(m);
    if (a->page_size < 1 || a->page_size > 4096) {
        snprintf(err, errlen, "--page-size must be in [1, 4096] (got %d)", a->page_size);
        return NULL;
    }
    if (a->chunked_prefill_size > 0 && a->chunked_prefill_size % a->page_size) {
        /* as SGLang's server_args check: a chunk is whole pages */
        snprintf(err, errlen, "chunked_prefill_size (%d) must be a multiple of page_size (%d)",
                 a->chunked_prefill_size, a->page_size);
        return NULL;
    }
    dtype kdt = a->kv_cache_dtype >= 0 ? (dtype)a->kv_cache_dtype
                                       : (model_weight_dtype(m) == DTYPE_BF16 ? DTYPE_BF16 : DTYPE_F32);
    size_t per_token = model_kv_token_bytes(m, kdt);
    int P = a->page_size;
    int64_t tokens;
    if (a->max_total_tokens > 0) {
        tokens = a->max_total_tokens;
    } else {
        double frac = a->mem_fraction_static > 0 ? a->mem_fraction_static : 0.3;
        int64_t avail = mem_available_bytes();
        if (avail < 0) {
            snprintf(err, errlen, "cannot read MemAvailable from /proc/meminfo; set --max-total-tokens");
            return NULL;
        }
        double wb = (double)model_weight_bytes(m);
        double budget = ((double)avail + wb) * frac - wb;
        tokens = budget > 0 ? (int64_t)(budget / (double)per_token) : 0;
        log_info("KV budget: (MemAvailable %.1f GiB + weights %.2f GiB) x mem_fraction_static %.2f - weights = %.2f GiB",
                 avail / 1073741824.0, wb / 1073741824.0, frac, budget / 1073741824.0);
    }
    int64_t n_states = 0; /* hybrid Mamba2 models: recurrent states beside the KV cache */
    int mtrack = 0;       /* and their checkpoint interval (extra_buffer), 0 = none */
    if (c->n_mamba && sched_kv_mamba_plan(m, a, kdt, &tokens, &n_states, &mtrack, err, errlen)) return NULL;
    tokens = tokens / P * P;
    if (tokens > (INT32_MAX - P) / P * P) tokens = (INT32_MAX - P) / P * P;
    if (tokens < 2 * (int64_t)P || tokens < 4) {
        snprintf(err, errlen,
                 "not enough memory for the KV cache (%" PRId64
                 " tokens); raise --mem-fraction-static or set --max-total-tokens",
                 tokens);
        return NULL;
    }
    sched *s = calloc(1, sizeof *s);
    if (!s) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    s->a = *a;
    s->eng.m = m;
    s->eng.c = c;
    s->lim.P = P;
    s->lim.V = c->vocab_size;
    s->hooks.tree_ok = model_tree_ok(m); /* draft trees need one process and attention layers */
    s->out.efd = -1;
    s->lim.capacity = tokens;
    s->lim.n_eos = c->n_eos;
    for (int i = 0; i < c->n_eos && i < MODEL_MAX_EOS; i++) s->lim.eos[i] = c->eos_token_ids[i];
    pthread_mutex_init(&s->in.mu, NULL);
    pthread_cond_init(&s->in.cv, NULL);
    pthread_mutex_init(&s->out.mu, NULL);
    pthread_cond_init(&s->out.cv, NULL);
    pthread_cond_init(&s->ctl.cv, NULL);
    pthread_mutex_init(&s->prog.mu, NULL);
    s->in.next_id = 1;
    s->in.rng = a->random_seed ^ 0x5EEDull;
    s->out.efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    /* SGLang: max_req_len = min(context_len - 1, max_total_num_tokens - 1),
     * max_req_input_len = max_req_len - 5 */
    s->lim.max_req_len = min64((int64_t)c->context_length - 1, tokens - 1);
    s->lim.max_req_input_len = max64(1, s->lim.max_req_len - 5);
    if (a->max_running_requests > 0) {
        s->lim.max_running = a->max_running_requests;
    } else {
        int64_t mr = (int64_t)((double)tokens / c->context_length * 512);
        mr = min64(max64(mr, 2048), 4096);
        s->lim.max_running = (int)min64(mr, max64(1, tokens / 2));
    }
    model_pp_default_micro(m, s->lim.max_running); /* unset --pp-max-micro-batch-size: SGLang's */
    s->adm.init_ratio = fmin(INIT_NEW_TOKEN_RATIO * a->schedule_conservativeness, 1.0);
    s->blog.log_decode_tic = time_now_sec();
    s->adm.min_ratio = fmin(s->adm.init_ratio * MIN_NEW_TOKEN_RATIO_FACTOR, 1.0);
    s->adm.ratio_decay = (s->adm.init_ratio - s->adm.min_ratio) / NEW_TOKEN_RATIO_DECAY_STEPS;
    s->adm.new_token_ratio = s->adm.init_ratio;
    s->eng.kv = model_kv_create(m, (int)tokens, kdt);
    s->eng.pool = kv_pool_create(tokens / P, P);
    if (n_states && s->eng.kv && sched_kv_mamba_init(s, n_states, mtrack)) {
        snprintf(err, errlen, "out of memory for %" PRId64 " Mamba states", n_states);
        sched_destroy(s);
        return NULL;
    }
    s->eng.tree = s->eng.pool
                      ? kv_radix_create(s->eng.pool, (kv_evict_policy)a->radix_eviction_policy, s->a.disable_radix_cache)
                      : NULL;
    sched_kv_mamba_attach(s);
    int nth = a->threads > 0 ? a->threads : (cpu_get()->n_cores > 0 ? cpu_get()->n_cores : 1);
    s->eng.tp = tpool_create(nth);
    s->buf.scratch = aligned_alloc(64, (sampling_scratch_bytes(s->lim.V) + 63) & ~(size_t)63);
    if (!s->eng.kv || !s->eng.pool || !s->eng.tree || !s->eng.tp || !s->buf.scratch) {
        snprintf(err, errlen, "out of memory creating the scheduler (KV cache of %" PRId64 " tokens, %.2f GiB)", tokens,
                 (double)tokens * (double)per_token / 1073741824.0);
        sched_destroy(s);
        return NULL;
    }
    int max_tok = a->max_prefill_tokens;
    if (a->chunked_prefill_size > 0 && a->chunked_prefill_size < max_tok) max_tok = a->chunked_prefill_size;
    max_tok += s->lim.max_running < 1024 ? s->lim.max_running : 1024;
    s->ctl.rsv_tok = max_tok;
    s->ctl.rsv_kv = (int)min64(c->context_length, tokens);
    s->ctl.rsv_nth = nth;
    if (model_reserve(m, max_tok, (int)min64(c->context_length, tokens), nth))
        log_warn("could not pre-size the model scratch; it grows on demand");
    log_info("max_total_num_tokens=%" PRId64 ", chunked_prefill_size=%d, max_prefill_tokens=%d, "
             "max_running_requests=%d, context_len=%d, page_size=%d, kv_cache_dtype=%s, "
             "KV %.2f GiB (%zu bytes/token), schedule_policy=%s%s",
             tokens, a->chunked_prefill_size, a->max_prefill_tokens, s->lim.max_running, c->context_length, P,
             dtype_name(kdt), (double)tokens * (double)per_token / 1073741824.0, per_token,
             sched_policy_name(a->schedule_policy), s->a.disable_radix_cache ? ", radix cache disabled" : "");
    return s;
}

static void drop_all(sched *s)
{
    sched_grammar_free_all(s);
    for (int i = 0; i < s->q.n_waiting; i++) sched_req_free(s->q.waiting[i]);
    s->q.n_waiting = 0;
    for (int i = 0; i < s->q.n_running; i++) {
        sched_kv_release(s, s->q.running[i], false);
        sched_req_free(s->q.running[i]);
    }
    s->q.n_running = 0;
    if (s->q.chunked) {
        sched_kv_release(s, s->q.chunked, false);
        sched_req_free(s->q.chunked);
        s->q.chunked = NULL;
    }
    while (s->in.head) {
        sreq *r = s->in.head;
        s->in.head = r->life.next;
        sched_req_free(r);
    }
    while (s->in.ab_head) {
        abort_msg *a = s->in.ab_head;
        s->in.ab_head = a->next;
        free(a->rid);
        free(a);
    }
    while (s->ctl.held_head) {
        sreq *r = s->ctl.held_head;
        s->ctl.held_head = r->life.next;
        sched_req_free(r);
    }
    s->ctl.held_tail = NULL;
}

void sched_destroy(sched *s)
{
    if (!s) return;
    sched_stop(s);
    sched_ctl_fail_pending(s);
    if (s->eng.tree && s->eng.pool) drop_all(s);
    while (s->out.head) {
        sched_event *e = s->out.head;
        s->out.head = e->next;
        sched_event_free(e);
    }
    kv_radix_destroy(s->eng.tree);
    kv_pool_destroy(s->eng.pool);
    mamba_state_pool_destroy(s->eng.mpool);
    free(s->eng.b_state);
    free(s->eng.b_snap), free(s->eng.b_snap_pos), free(s->eng.b_snap_slot);
    model_kv_destroy(s->eng.kv);
    if (s->eng.tp) tpool_destroy(s->eng.tp);
    free(s->q.waiting);
    free(s->q.running);
    free(s->buf.batch);
    free(s->buf.b_tokens);
    free(s->buf.b_pos);
    free(s->buf.b_rows);
    free(s->buf.b_start);
    free(s->buf.b_kvlen);
    free(s->buf.b_ropelen);
    free((void *)s->buf.b_slots);
    free(s->buf.b_lp_row);
    free(s->buf.b_lp_n);
    free(s->buf.b_sample_row);
    free(s->buf.b_n_rows);
    free(s->buf.b_seq_ad);
    free((void *)s->buf.b_ads);
    free((void *)s->buf.b_tree);
    free(s->buf.logits);
    free(s->buf.scratch);
    free(s->buf.tmp_top_ids);
    free(s->buf.tmp_top_lp);
    free(s->buf.tmp_tid_lp);
    if (s->out.efd >= 0) close(s->out.efd);
    pthread_mutex_destroy(&s->in.mu);
    pthread_cond_destroy(&s->in.cv);
    pthread_mutex_destroy(&s->out.mu);
    pthread_cond_destroy(&s->out.cv);
    pthread_cond_destroy(&s->ctl.cv);
    pthread_mutex_destroy(&s->prog.mu);
    free(s);
}

static void *thread_main(void *arg)
{
    sched *s = arg;
    pthread_setname_np(pthread_self(), "sglc-sched");
    for (;;) {
        pthread_mutex_lock(&s->in.mu);
        bool stop = s->thr.stop;
        pthread_mutex_unlock(&s->in.mu);
        if (stop) break;
        int r = sched_step(s);
        if (r < 0) log_error("scheduler step failed; continuing");
        if (r == 0) {
            /* --sleep-on-idle: the compute workers go to sleep now instead
             * of spinning out their pause/yield budget after the last forward */
            if (s->a.sleep_on_idle) tpool_quiesce(s->eng.tp);
            pthread_mutex_lock(&s->in.mu);
            /* a grammar job's notify sets gram.wake; requests waiting for
             * their grammar also need their timeout checked now and then */
            struct timespec dl;
            clock_gettime(CLOCK_REALTIME, &dl);
            dl.tv_sec += 1;
            while (!s->thr.stop && !s->in.head && !s->in.ab_head && !s->ctl.head && !s->gram.wake) {
                if (s->gram.n_waiting > 0) {
                    if (pthread_cond_timedwait(&s->in.cv, &s->in.mu, &dl)) break;
                } else {
                    pthread_cond_wait(&s->in.cv, &s->in.mu);
                }
            }
            pthread_mutex_unlock(&s->in.mu);
        }
    }
    return NULL;
}

int sched_start(sched *s)
{
    if (s->thr.thread_started) return 0;
    /* set before the thread exists (and under in.mu for sched_control's
     * readers), so the new thread's reads happen after the write */
    pthread_mutex_lock(&s->in.mu);
    s->thr.stop = false;
    s->thr.thread_started = true;
    pthread_mutex_unlock(&s->in.mu);
    if (pthread_create(&s->thr.thread, NULL, thread_main, s)) {
        pthread_mutex_lock(&s->in.mu);
        s->thr.thread_started = false;
        pthread_mutex_unlock(&s->in.mu);
        log_error("cannot start the scheduler thread");
        return -1;
    }
    return 0;
}


void sched_stop(sched *s)
{
    if (!s->thr.thread_started) return;
    pthread_mutex_lock(&s->in.mu);
    s->thr.stop = true;
    s->thr.stopped = true;
    pthread_cond_broadcast(&s->in.cv);
    pthread_mutex_unlock(&s->in.mu);
    pthread_join(s->thr.thread, NULL);
    s->thr.thread_started = false;
    sched_ctl_fail_pending(s);
}

int sched_control(sched *s, sched_ctl *c)
{
    ctl_msg m = {.c = c, .done = false, .next = NULL};
    c->rc = -1;
    c->msg[0] = 0;
    c->old_model = NULL;
    /* size the new model's scratch here, off the scheduler thread */
    if (c->kind == SCHED_CTL_SWAP_MODEL && c->new_model && c->new_model != s->eng.m &&
        model_reserve(c->new_model, s->ctl.rsv_tok, s->ctl.rsv_kv, s->ctl.rsv_nth))
        log_warn("could not pre-size the new model's scratch; it grows on demand");
    pthread_mutex_lock(&s->in.mu);
    if (s->thr.stopped) {
        pthread_mutex_unlock(&s->in.mu);
        snprintf(c->msg, sizeof c->msg, "The scheduler is stopped.");
        return -1;
    }
    if (s->ctl.tail) s->ctl.tail->next = &m;
    else s->ctl.head = &m;
    s->ctl.tail = &m;
    pthread_cond_signal(&s->in.cv);
    bool threaded = s->thr.thread_started;
    if (threaded)
        while (!m.done) pthread_cond_wait(&s->ctl.cv, &s->in.mu);
    pthread_mutex_unlock(&s->in.mu);
    if (!threaded) {
        /* synchronous mode: the caller is the scheduler thread */
        for (;;) {
            pthread_mutex_lock(&s->in.mu);
            bool done = m.done;
            pthread_mutex_unlock(&s->in.mu);
            if (done) break;
            if (sched_step(s) < 0) log_error("scheduler step failed while handling a control message");
        }
    }
    return c->rc;
}

bool sched_is_paused(sched *s)
{
    pthread_mutex_lock(&s->in.mu);
    bool p = s->ctl.paused;
    pthread_mutex_unlock(&s->in.mu);
    return p;
}

model *sched_model(sched *s) { return s->eng.m; }

void sched_get_progress(sched *s, sched_progress *out)
{
    pthread_mutex_lock(&s->prog.mu);
    *out = s->prog.pg;
    pthread_mutex_unlock(&s->prog.mu);
}

int64_t sched_max_req_input_len(const sched *s) { return s->lim.max_req_input_len; }
