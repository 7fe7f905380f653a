/* sched — the scheduler loop: see sched.h for the design.  This file holds
 * the request life cycle (submit -> waiting -> prefill -> running ->
 * finished), admission (SGLang's PrefillAdder), decode with retraction,
 * priority preemption, events and the thread / queue plumbing. */
#include "sched/sched.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "sched/sched_impl.h"
#include "util/cpu.h"
#include "util/log.h"
#include "util/timeutil.h"

/* SGLang constants (global_config.py, schedule_policy.py, scheduler.py) */
#define INIT_NEW_TOKEN_RATIO 0.7
#define MIN_NEW_TOKEN_RATIO_FACTOR 0.14
#define NEW_TOKEN_RATIO_DECAY_STEPS 600
#define CLIP_MAX_NEW_TOKENS 4096
#define RETRACT_DECODE_STEPS 20

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
static void progress_set(sched *s, double since, int reqs, int64_t tokens, bool decode, bool finished);
static void fail_pending_ctl(sched *s);
static int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }

/* Grow *p (elements of size es) to hold at least need; 0 or -1. */
static int grow(void **p, int64_t *cap, int64_t need, size_t es)
{
    if (need <= *cap) return 0;
    int64_t nc = *cap ? *cap : 16;
    while (nc < need) nc *= 2;
    void *g = realloc(*p, (size_t)nc * es);
    if (!g) return -1;
    *p = g;
    *cap = nc;
    return 0;
}

static int grow_int(void **p, int *cap, int need, size_t es)
{
    int64_t c = *cap;
    if (grow(p, &c, need, es)) return -1;
    *cap = (int)c;
    return 0;
}

static char *xstrdup(const char *s)
{
    if (!s) return NULL;
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

/* ======================================================================
 * specs, events
 * ==================================================================== */

void sched_req_spec_init(sched_req_spec *sp)
{
    memset(sp, 0, sizeof *sp);
    sampling_params_init(&sp->params);
    sp->logprob_start_len = -1;
}

void sched_req_spec_free(sched_req_spec *sp)
{
    free(sp->rid);
    free(sp->input_ids);
    free(sp->cache_salt);
    free(sp->token_ids_logprob);
    sampling_params_free(&sp->params);
    memset(sp, 0, sizeof *sp);
}

void sched_event_free(sched_event *e)
{
    if (!e) return;
    free(e->rid);
    free(e->ids);
    free(e->logprobs);
    free(e->top_ids);
    free(e->top_logprobs);
    free(e->tids);
    free(e->tid_logprobs);
    free(e->finish_str);
    free(e->in_ids);
    free(e->in_logprobs);
    free(e->in_top_ids);
    free(e->in_top_logprobs);
    free(e->in_tid_logprobs);
    free(e->embedding);
    free(e);
}

static void outbox_push(sched *s, sched_event *e)
{
    pthread_mutex_lock(&s->out_mu);
    e->next = NULL;
    if (s->out_tail) s->out_tail->next = e;
    else s->out_head = e;
    s->out_tail = e;
    pthread_cond_broadcast(&s->out_cv);
    pthread_mutex_unlock(&s->out_mu);
    if (s->efd >= 0) {
        uint64_t one = 1;
        ssize_t w = write(s->efd, &one, sizeof one);
        (void)w;
    }
}

static sched_event *outbox_pop_locked(sched *s)
{
    sched_event *e = s->out_head;
    if (e) {
        s->out_head = e->next;
        if (!s->out_head) s->out_tail = NULL;
        e->next = NULL;
    }
    if (!s->out_head && s->efd >= 0) {
        uint64_t v;
        ssize_t r = read(s->efd, &v, sizeof v); /* non-blocking: drains the counter */
        (void)r;
    }
    return e;
}

sched_event *sched_poll(sched *s)
{
    pthread_mutex_lock(&s->out_mu);
    sched_event *e = outbox_pop_locked(s);
    pthread_mutex_unlock(&s->out_mu);
    return e;
}

sched_event *sched_wait(sched *s, double timeout_s)
{
    pthread_mutex_lock(&s->out_mu);
    if (!s->out_head) {
        if (timeout_s < 0) {
            while (!s->out_head) pthread_cond_wait(&s->out_cv, &s->out_mu);
        } else {
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            double t = ts.tv_sec + ts.tv_nsec * 1e-9 + timeout_s;
            ts.tv_sec = (time_t)t;
            ts.tv_nsec = (long)((t - (double)ts.tv_sec) * 1e9);
            while (!s->out_head)
                if (pthread_cond_timedwait(&s->out_cv, &s->out_mu, &ts) == ETIMEDOUT) break;
        }
    }
    sched_event *e = outbox_pop_locked(s);
    pthread_mutex_unlock(&s->out_mu);
    return e;
}

int sched_outbox_fd(const sched *s) { return s->efd; }

/* An ABORT event for a request that never entered the queue. */
static void emit_reject(sched *s, uint64_t id, int index, const char *rid, int64_t n_input,
                        const char *msg, int status)
{
    sched_event *e = calloc(1, sizeof *e);
    if (!e) return;
    e->kind = SCHED_EV_FINISH;
    e->id = id;
    e->index = index;
    e->rid = xstrdup(rid);
    e->finish = SCHED_FINISH_ABORT;
    e->finish_str = xstrdup(msg);
    e->http_status = status;
    e->prompt_tokens = n_input;
    outbox_push(s, e);
}

typedef struct finish_info {
    sched_finish_kind kind;
    int64_t len;
    int32_t tok;
    const char *str;
    int status;
} finish_info;

/* Event with the output tokens of r not sent yet; fin != NULL: the final
 * one, with the finish reason. */
static void emit_tokens(sched *s, sreq *r, const finish_info *fin)
{
    bool finish = fin != NULL;
    if (r->internal) return;
    sched_event *e = calloc(1, sizeof *e);
    if (!e) {
        log_error("out of memory for an event of request %s", r->rid);
        return;
    }
    int64_t n_out = r->len - r->n_input, from = r->n_sent, n = n_out - from;
    e->kind = finish ? SCHED_EV_FINISH : SCHED_EV_TOKENS;
    e->id = r->id;
    e->index = r->index;
    e->rid = xstrdup(r->rid);
    e->n_ids = (int)n;
    e->completion_tokens = n_out;
    bool oom = false;
    if (n > 0) {
        e->ids = malloc(sizeof(int32_t) * (size_t)n);
        oom |= !e->ids;
        if (e->ids) memcpy(e->ids, r->seq + r->n_input + from, sizeof(int32_t) * (size_t)n);
        if (r->return_logprob) {
            e->logprobs = malloc(sizeof(float) * (size_t)n);
            oom |= !e->logprobs;
            if (e->logprobs) memcpy(e->logprobs, r->lp + from, sizeof(float) * (size_t)n);
            if (r->top_n > 0) {
                e->top_n = r->top_n;
                e->top_ids = malloc(sizeof(int32_t) * (size_t)(n * r->top_n));
                e->top_logprobs = malloc(sizeof(float) * (size_t)(n * r->top_n));
                oom |= !e->top_ids || !e->top_logprobs;
                if (e->top_ids && e->top_logprobs) {
                    memcpy(e->top_ids, r->top_ids + from * r->top_n, sizeof(int32_t) * (size_t)(n * r->top_n));
                    memcpy(e->top_logprobs, r->top_lp + from * r->top_n, sizeof(float) * (size_t)(n * r->top_n));
                }
            }
            if (r->n_tid > 0) {
                e->n_tid = r->n_tid;
                e->tids = malloc(sizeof(int32_t) * (size_t)r->n_tid);
                e->tid_logprobs = malloc(sizeof(float) * (size_t)(n * r->n_tid));
                oom |= !e->tids || !e->tid_logprobs;
                if (e->tids && e->tid_logprobs) {
                    memcpy(e->tids, r->tids, sizeof(int32_t) * (size_t)r->n_tid);
                    memcpy(e->tid_logprobs, r->tid_lp + from * r->n_tid, sizeof(float) * (size_t)(n * r->n_tid));
                }
            }
        }
    }
    if (r->return_logprob && r->in_lp_done && !r->in_lp_sent) {
        /* SGLang: entry 0 is a None pad; the rest predict the next input token */
        int64_t m = r->n_in_lp + 1;
        e->n_in = (int)m;
        e->in_ids = malloc(sizeof(int32_t) * (size_t)m);
        e->in_logprobs = malloc(sizeof(float) * (size_t)m);
        oom |= !e->in_ids || !e->in_logprobs;
        if (e->in_ids && e->in_logprobs) {
            memcpy(e->in_ids, r->seq + r->lp_start, sizeof(int32_t) * (size_t)m);
            e->in_logprobs[0] = NAN;
            if (r->n_in_lp) memcpy(e->in_logprobs + 1, r->in_lp, sizeof(float) * (size_t)r->n_in_lp);
        }
        if (r->top_n) {
            e->top_n = r->top_n;
            e->in_top_ids = malloc(sizeof(int32_t) * (size_t)(m * r->top_n));
            e->in_top_logprobs = malloc(sizeof(float) * (size_t)(m * r->top_n));
            oom |= !e->in_top_ids || !e->in_top_logprobs;
            if (e->in_top_ids && e->in_top_logprobs) {
                for (int i = 0; i < r->top_n; i++) e->in_top_ids[i] = -1, e->in_top_logprobs[i] = NAN;
                if (r->n_in_lp) {
                    memcpy(e->in_top_ids + r->top_n, r->in_top_ids, sizeof(int32_t) * (size_t)(r->n_in_lp * r->top_n));
                    memcpy(e->in_top_logprobs + r->top_n, r->in_top_lp, sizeof(float) * (size_t)(r->n_in_lp * r->top_n));
                }
            }
        }
        if (r->n_tid) {
            e->n_tid = r->n_tid;
            if (!e->tids) {
                e->tids = malloc(sizeof(int32_t) * (size_t)r->n_tid);
                if (e->tids) memcpy(e->tids, r->tids, sizeof(int32_t) * (size_t)r->n_tid);
            }
            e->in_tid_logprobs = malloc(sizeof(float) * (size_t)(m * r->n_tid));
            oom |= !e->tids || !e->in_tid_logprobs;
            if (e->in_tid_logprobs) {
                for (int i = 0; i < r->n_tid; i++) e->in_tid_logprobs[i] = NAN;
                if (r->n_in_lp) memcpy(e->in_tid_logprobs + r->n_tid, r->in_tid_lp, sizeof(float) * (size_t)(r->n_in_lp * r->n_tid));
            }
        }
        r->in_lp_sent = true;
    }
    if (oom) log_error("out of memory for an event of request %s (token data dropped)", r->rid);
    r->n_sent = n_out;
    if (finish) {
        e->finish = fin->kind;
        e->finish_length = fin->len;
        e->finish_token = fin->tok;
        e->finish_str = xstrdup(fin->str);
        e->http_status = fin->status;
        e->prompt_tokens = r->n_input;
        e->last_input_id = r->seq[r->n_input - 1];
        e->cached_tokens = r->cached_tokens;
        e->num_retractions = r->num_retractions;
        e->e2e_latency = time_now_sec() - r->t_submit;
        if (r->emb && fin->kind != SCHED_FINISH_ABORT) {
            e->embedding = r->emb, e->n_embedding = r->n_emb;
            r->emb = NULL;
        }
    }
    outbox_push(s, e);
}

/* ======================================================================
 * requests
 * ==================================================================== */

static void sreq_free(sreq *r)
{
    if (!r) return;
    for (int i = 0; i < r->n_children; i++) sreq_free(r->children[i]);
    free(r->children);
    sampling_state_free(&r->st);
    sampling_params_free(&r->params);
    free(r->rid);
    free(r->seq);
    free(r->emb);
    free(r->cache_salt);
    free(r->tids);
    free(r->lp);
    free(r->top_ids);
    free(r->top_lp);
    free(r->tid_lp);
    free(r->in_lp);
    free(r->in_top_ids);
    free(r->in_top_lp);
    free(r->in_tid_lp);
    free(r->pages);
    free(r->slots);
    free(r->abort_msg);
    free(r);
}

/* A request from a spec (copies what it needs; the spec keeps its own). */
static sreq *sreq_new(sched *s, const sched_req_spec *sp, uint64_t id, int index, uint64_t seed,
                      int64_t max_new)
{
    sreq *r = calloc(1, sizeof *r);
    if (!r) return NULL;
    r->id = id;
    r->index = index;
    r->n_input = sp->n_input;
    r->len = sp->n_input;
    r->cap = sp->n_input + max_new + 1;
    r->seq = malloc(sizeof(int32_t) * (size_t)r->cap);
    r->rid = xstrdup(sp->rid);
    r->cache_salt = xstrdup(sp->cache_salt);
    r->max_new = max_new;
    r->priority = sp->priority;
    r->has_priority = sp->has_priority;
    if (s->a.enable_priority_scheduling && !sp->has_priority) {
        /* SGLang: --default-priority-value when given (TokenizerManager),
         * else the lowest priority there is (Scheduler) */
        if (s->a.has_default_priority) r->priority = s->a.default_priority_value;
        else r->priority = s->a.schedule_low_priority_values_first ? INT64_MAX : INT64_MIN;
    }
    r->return_logprob = sp->return_logprob;
    r->top_n = sp->return_logprob ? sp->top_logprobs_num : 0;
    r->stream = sp->stream;
    r->embed_dims = sp->embed_dims;
    r->stream_interval = sp->params.has_stream_interval && sp->params.stream_interval > 0
                             ? (int)sp->params.stream_interval
                             : s->a.stream_interval;
    sampling_params_init(&r->params);
    if (!r->seq || !r->rid || (sp->cache_salt && !r->cache_salt)) goto fail;
    memcpy(r->seq, sp->input_ids, sizeof(int32_t) * (size_t)sp->n_input);
    /* deep copy of the sampling params through their own JSON-free fields */
    r->params = sp->params;
    r->params.stop = NULL, r->params.n_stop = 0;
    r->params.stop_regex = NULL, r->params.n_stop_regex = 0;
    r->params.stop_token_ids = NULL, r->params.n_stop_token_ids = 0;
    r->params.json_schema = r->params.regex = r->params.ebnf = r->params.structural_tag = NULL;
    r->params.custom_params = NULL;
    r->params.logit_bias = NULL, r->params.n_logit_bias = 0;
    if (sp->params.n_stop) {
        r->params.stop = calloc((size_t)sp->params.n_stop, sizeof(char *));
        if (!r->params.stop) goto fail;
        r->params.n_stop = sp->params.n_stop;
        for (int i = 0; i < sp->params.n_stop; i++)
            if (!(r->params.stop[i] = xstrdup(sp->params.stop[i]))) goto fail;
    }
    if (sp->params.n_stop_token_ids) {
        r->params.stop_token_ids = malloc(sizeof(int32_t) * (size_t)sp->params.n_stop_token_ids);
        if (!r->params.stop_token_ids) goto fail;
        memcpy(r->params.stop_token_ids, sp->params.stop_token_ids,
               sizeof(int32_t) * (size_t)sp->params.n_stop_token_ids);
        r->params.n_stop_token_ids = sp->params.n_stop_token_ids;
    }
    if (sp->params.n_logit_bias) {
        r->params.logit_bias = malloc(sizeof(sampling_logit_bias) * (size_t)sp->params.n_logit_bias);
        if (!r->params.logit_bias) goto fail;
        memcpy(r->params.logit_bias, sp->params.logit_bias,
               sizeof(sampling_logit_bias) * (size_t)sp->params.n_logit_bias);
        r->params.n_logit_bias = sp->params.n_logit_bias;
    }
    if (sp->n_token_ids_logprob && sp->return_logprob) {
        r->tids = malloc(sizeof(int32_t) * (size_t)sp->n_token_ids_logprob);
        if (!r->tids) goto fail;
        memcpy(r->tids, sp->token_ids_logprob, sizeof(int32_t) * (size_t)sp->n_token_ids_logprob);
        r->n_tid = sp->n_token_ids_logprob;
    }
    if (r->return_logprob) {
        size_t oc = (size_t)max_new + 1;
        r->lp = malloc(sizeof(float) * oc);
        if (!r->lp) goto fail;
        if (r->top_n) {
            r->top_ids = malloc(sizeof(int32_t) * oc * (size_t)r->top_n);
            r->top_lp = malloc(sizeof(float) * oc * (size_t)r->top_n);
            if (!r->top_ids || !r->top_lp) goto fail;
        }
        if (r->n_tid) {
            r->tid_lp = malloc(sizeof(float) * oc * (size_t)r->n_tid);
            if (!r->tid_lp) goto fail;
        }
    }
    r->lp_start = sp->logprob_start_len < 0 ? sp->n_input - 1 : sp->logprob_start_len;
    r->n_in_lp = r->return_logprob ? sp->n_input - 1 - r->lp_start : 0;
    if (r->n_in_lp < 0) r->n_in_lp = 0;
    r->in_lp_done = r->n_in_lp == 0;
    if (r->n_in_lp > 0) {
        size_t n = (size_t)r->n_in_lp;
        r->in_lp = malloc(sizeof(float) * n);
        if (!r->in_lp) goto fail;
        if (r->top_n) {
            r->in_top_ids = malloc(sizeof(int32_t) * n * (size_t)r->top_n);
            r->in_top_lp = malloc(sizeof(float) * n * (size_t)r->top_n);
            if (!r->in_top_ids || !r->in_top_lp) goto fail;
        }
        if (r->n_tid) {
            r->in_tid_lp = malloc(sizeof(float) * n * (size_t)r->n_tid);
            if (!r->in_tid_lp) goto fail;
        }
    }
    if (sampling_state_init(&r->st, &r->params, s->V, s->eos, s->n_eos, seed)) goto fail;
    /* repetition penalty over prompt + output (HF semantics, see docs/notes/kv.md) */
    if (r->params.repetition_penalty != 1.0 && sampling_state_add_prompt(&r->st, r->seq, r->n_input)) goto fail;
    r->state = RS_WAITING;
    r->t_submit = time_now_sec();
    return r;
fail:
    sreq_free(r);
    return NULL;
}

/* ======================================================================
 * KV bookkeeping
 * ==================================================================== */

static void set_slots(sched *s, sreq *r, int64_t from_page)
{
    int P = s->P;
    for (int64_t p = from_page; p < r->n_pages; p++)
        for (int k = 0; k < P; k++) r->slots[p * P + k] = r->pages[p] * P + k;
}

static int ensure_page_room(sched *s, sreq *r, int64_t n_pages)
{
    int64_t c = r->pages_cap;
    if (grow((void **)&r->pages, &c, n_pages, sizeof(int32_t))) return -1;
    if (c != r->pages_cap) {
        int32_t *g = realloc(r->slots, sizeof(int32_t) * (size_t)(c * s->P));
        if (!g) return -1;
        r->slots = g;
        r->pages_cap = c;
    }
    return 0;
}

/* Pages the pool can give after evicting the whole evictable tree. */
static int64_t avail_pages(sched *s)
{
    return kv_pool_free_pages(s->pool) + kv_radix_evictable_size(s->tree) / s->P;
}

/* Get n pages from the pool, evicting cached prefixes as needed. */
static int take_pages(sched *s, int64_t n, int32_t *out)
{
    if (n <= 0) return 0;
    int64_t fp = kv_pool_free_pages(s->pool);
    if (fp < n) kv_radix_evict(s->tree, (n - fp) * s->P);
    return kv_pool_alloc(s->pool, n, out);
}

/* Make r's page table cover positions [0, upto). */
static int alloc_upto(sched *s, sreq *r, int64_t upto)
{
    int64_t need = kv_pool_pages_for(s->pool, upto);
    if (need <= r->n_pages) return 0;
    if (ensure_page_room(s, r, need)) return -1;
    if (take_pages(s, need - r->n_pages, r->pages + r->n_pages)) return -1;
    int64_t from = r->n_pages;
    r->n_pages = need;
    set_slots(s, r, from);
    return 0;
}

/* Give back r's KV: pages past its computed KV to the pool, the rest to
 * the radix tree (insert) or the pool; drops the lock.  r holds nothing
 * afterwards. */
static void release_kv(sched *s, sreq *r, bool insert)
{
    if (!r->holds_kv) return;
    int64_t keep = kv_pool_pages_for(s->pool, r->kv_len);
    if (r->n_pages > keep) {
        if (kv_pool_free(s->pool, r->pages + keep, r->n_pages - keep))
            log_error("request %s: could not free %" PRId64 " pages", r->rid, r->n_pages - keep);
        r->n_pages = keep;
    }
    if (kv_radix_req_cache_finished(s->tree, &r->rr, r->seq, r->kv_len, r->pages, insert && !r->kv_broken))
        log_error("request %s: releasing its KV failed", r->rid);
    r->n_pages = 0;
    r->kv_len = 0;
    r->holds_kv = false;
}

/* ======================================================================
 * queues
 * ==================================================================== */

static int push_ptr(sreq ***arr, int *n, int *cap, sreq *r)
{
    if (grow_int((void **)arr, cap, *n + 1, sizeof(sreq *))) return -1;
    (*arr)[(*n)++] = r;
    return 0;
}

static void remove_at(sreq **arr, int *n, int i)
{
    memmove(arr + i, arr + i + 1, sizeof(sreq *) * (size_t)(*n - i - 1));
    (*n)--;
}

static void enqueue_waiting(sched *s, sreq *r)
{
    r->state = RS_WAITING;
    r->seq_no = s->next_seq_no++;
    if (push_ptr(&s->waiting, &s->n_waiting, &s->cap_waiting, r)) {
        log_error("out of memory queueing request %s", r->rid);
        r->to_abort = true;
        /* cannot queue it: finish it right away */
        emit_reject(s, r->id, r->index, r->rid, r->n_input, "Internal error: out of memory.", 500);
        sreq_free(r);
    }
}

/* ======================================================================
 * finishing
 * ==================================================================== */

/* The end of a request: KV to the tree, final event, stats, siblings. */
static void finish_req(sched *s, sreq *r, sched_finish_kind kind, int64_t len, int32_t tok,
                       const char *str, int status)
{
    release_kv(s, r, true);
    r->state = RS_DONE;
    if (!r->internal && s->a.log_time_stats && r->t_forward > 0) {
        /* SGLang's Req.log_time_stats, unified (non-disaggregated) mode */
        double now = time_now_sec();
        struct timespec wall;
        clock_gettime(CLOCK_REALTIME, &wall);
        double entry = (double)wall.tv_sec + (double)wall.tv_nsec * 1e-9 - (now - r->t_submit);
        log_info("Req Time Stats(rid=%s, input len=%" PRId64 ", output len=%" PRId64
                 ", type=unified): queue_duration=%.2fms, forward_duration=%.2fms, entry_time=%.3f",
                 r->rid, r->n_input, r->len - r->n_input, (r->t_forward - r->t_submit) * 1e3,
                 (now - r->t_forward) * 1e3, entry);
    }
    if (!r->internal) {
        finish_info fin = {kind, len, tok, str, status};
        emit_tokens(s, r, &fin);
        s->st.n_finished++;
        s->st.prompt_tokens += r->n_input;
        s->st.cached_tokens += r->cached_tokens;
    }
    /* n > 1: the warm-up has cached the prompt, the siblings may start */
    for (int i = 0; i < r->n_children; i++) {
        sreq *c = r->children[i];
        r->children[i] = NULL;
        if (kind == SCHED_FINISH_ABORT) {
            emit_reject(s, c->id, c->index, c->rid, c->n_input, str ? str : "Aborted.", status);
            sreq_free(c);
        } else {
            c->t_submit = r->t_submit;
            enqueue_waiting(s, c);
        }
    }
    r->n_children = 0;
    sreq_free(r);
}

static void finish_abort(sched *s, sreq *r)
{
    const char *msg = r->abort_msg ? r->abort_msg : "Request aborted.";
    finish_req(s, r, SCHED_FINISH_ABORT, 0, -1, msg, r->abort_status ? r->abort_status : 200);
}

/* SGLang's Req.check_finished after a new token.  Returns true when r is
 * finished (and has been finished / freed). */
static bool check_finished(sched *s, sreq *r)
{
    int64_t n_out = r->len - r->n_input;
    if (n_out >= r->max_new) {
        finish_req(s, r, SCHED_FINISH_LENGTH, r->max_new, -1, NULL, 200);
        return true;
    }
    int32_t last = r->seq[r->len - 1];
    if (!r->params.ignore_eos) {
        bool hit = false;
        for (int i = 0; i < r->params.n_stop_token_ids && !hit; i++) hit = r->params.stop_token_ids[i] == last;
        for (int i = 0; i < s->n_eos && !hit; i++) hit = s->eos[i] == last;
        if (hit) {
            finish_req(s, r, SCHED_FINISH_STOP_TOKEN, 0, last, NULL, 200);
            return true;
        }
    }
    if (r->params.n_stop > 0 && s->stop_fn) {
        int k = s->stop_fn(s->stop_ctx, r->id, &r->params, r->seq + r->n_input, n_out);
        if (k >= 0 && k < r->params.n_stop) {
            finish_req(s, r, SCHED_FINISH_STOP_STR, 0, -1, r->params.stop[k], 200);
            return true;
        }
    }
    return false;
}

/* ======================================================================
 * sampling
 * ==================================================================== */

static int ensure_tmp(sched *s, int n)
{
    if (n <= s->tmp_cap) return 0;
    int32_t *a = realloc(s->tmp_top_ids, sizeof(int32_t) * (size_t)n);
    if (!a) return -1;
    s->tmp_top_ids = a;
    float *b = realloc(s->tmp_top_lp, sizeof(float) * (size_t)n);
    if (!b) return -1;
    s->tmp_top_lp = b;
    float *c = realloc(s->tmp_tid_lp, sizeof(float) * (size_t)n);
    if (!c) return -1;
    s->tmp_tid_lp = c;
    s->tmp_cap = n;
    return 0;
}

/* Sample r's next token from row, append it, record logprobs, stream, and
 * check the stop conditions.  Returns true when r finished (freed). */
static bool sample_one(sched *s, sreq *r, float *row)
{
    sampling_logprob_req lpq = {.want = r->return_logprob, .top_n = r->top_n, .ids = r->tids, .n_ids = r->n_tid};
    int need = r->top_n > r->n_tid ? r->top_n : r->n_tid;
    if (ensure_tmp(s, need + 1)) {
        r->abort_msg = xstrdup("Internal error: out of memory.");
        r->abort_status = 500;
        finish_abort(s, r);
        return true;
    }
    sampling_result res = {.top_ids = s->tmp_top_ids, .top_logprobs = s->tmp_top_lp, .ids_logprobs = s->tmp_tid_lp};
    if (sampling_sample(&r->st, row, s->scratch, r->return_logprob ? &lpq : NULL, &res) ||
        sampling_state_accept(&r->st, res.token)) {
        r->abort_msg = xstrdup("Internal error: sampling failed.");
        r->abort_status = 500;
        finish_abort(s, r);
        return true;
    }
    int64_t k = r->len - r->n_input;
    if (r->len >= r->cap) { /* cannot happen: cap = n_input + max_new + 1 */
        r->abort_msg = xstrdup("Internal error: output buffer full.");
        r->abort_status = 500;
        finish_abort(s, r);
        return true;
    }
    r->seq[r->len++] = res.token;
    s->st.generated_tokens++;
    if (r->return_logprob) {
        r->lp[k] = res.logprob;
        for (int i = 0; i < r->top_n; i++) {
            r->top_ids[k * r->top_n + i] = i < res.n_top ? res.top_ids[i] : -1;
            r->top_lp[k * r->top_n + i] = i < res.n_top ? res.top_logprobs[i] : -INFINITY;
        }
        for (int i = 0; i < r->n_tid; i++) r->tid_lp[k * r->n_tid + i] = res.ids_logprobs[i];
    }
    if (check_finished(s, r)) return true;
    if (r->stream && r->len - r->n_input - r->n_sent >= r->stream_interval) emit_tokens(s, r, NULL);
    return false;
}

/* ======================================================================
 * retraction and preemption
 * ==================================================================== */

/* Back to the waiting queue: KV cached in the tree (it may still be
 * reused), outputs kept, prefilled again over input + output later. */
static void retract(sched *s, sreq *r)
{
    release_kv(s, r, true);
    r->num_retractions++;
    s->st.num_retractions++;
    enqueue_waiting(s, r);
}

/* Decode needs one slot per running request; retract the longest outputs
 * (ties: the shorter input) until the pool can give the pages.  The last
 * request standing, if it still cannot fit, is aborted.  Returns the
 * number retracted. */
static int retract_for_decode(sched *s)
{
    int n_retracted = 0;
    for (;;) {
        int64_t need = 0;
        for (int i = 0; i < s->n_running; i++) {
            sreq *r = s->running[i];
            need += kv_pool_pages_for(s->pool, r->kv_len + 1) - r->n_pages;
        }
        if (need <= avail_pages(s)) break;
        if (s->n_running == 0) break;
        if (s->n_running == 1 && s->chunked) {
            /* the half-prefilled prompt yields to the last decoder */
            sreq *c = s->chunked;
            s->chunked = NULL;
            log_info("KV cache full: retracting chunked request %s", c->rid);
            retract(s, c);
            n_retracted++;
            continue;
        }
        if (s->n_running == 1) {
            sreq *r = s->running[0];
            s->n_running = 0;
            r->abort_msg = xstrdup("The KV cache pool is too small for this request.");
            r->abort_status = 400;
            log_error("request %s does not fit the KV cache even alone; aborted", r->rid);
            finish_abort(s, r);
            continue;
        }
        int best = 0;
        for (int i = 1; i < s->n_running; i++) {
            sreq *a = s->running[i], *b = s->running[best];
            int64_t oa = a->len - a->n_input, ob = b->len - b->n_input;
            if (oa > ob || (oa == ob && a->n_input < b->n_input)) best = i;
        }
        sreq *r = s->running[best];
        remove_at(s->running, &s->n_running, best);
        log_info("KV cache full: retracting request %s (%" PRId64 " output tokens)", r->rid, r->len - r->n_input);
        retract(s, r);
        n_retracted++;
    }
    if (n_retracted) {
        /* SGLang: (decoded + RETRACT_DECODE_STEPS * running) / sum(max_new) */
        int64_t decoded = 0, total_max = 0;
        for (int i = 0; i < s->n_running; i++) {
            sreq *r = s->running[i];
            decoded += r->len - r->n_input;
            total_max += r->max_new;
        }
        double ratio = total_max > 0 ? (double)(decoded + RETRACT_DECODE_STEPS * s->n_running) / (double)total_max : 1.0;
        s->new_token_ratio = ratio < 1.0 ? ratio : 1.0;
        if (s->new_token_ratio < s->min_ratio) s->new_token_ratio = s->min_ratio;
    }
    return n_retracted;
}

/* Is a lower than b (a may be preempted for b)? */
static bool prio_below(sched *s, const sreq *a, const sreq *b)
{
    /* in 128 bits: a missing priority is INT64_MIN / INT64_MAX */
    __int128 th = s->a.priority_scheduling_preemption_threshold;
    if (s->a.schedule_low_priority_values_first) return (__int128)a->priority - b->priority > th;
    return (__int128)b->priority - a->priority > th;
}

/* SGLang's preempt_to_schedule: retract running requests of lower
 * priority (the lowest first) so that w fits.  need_tokens: tokens w needs
 * beyond what is available now (0 when it waits only for a running slot).
 * Returns how many were preempted. */
static int preempt_for(sched *s, const sreq *w, double need_tokens, bool need_slot)
{
    if (!s->a.enable_priority_scheduling || s->a.disable_priority_preemption) return 0;
    int n = 0;
    double got = 0;
    while ((need_slot && n == 0) || got < need_tokens) {
        int pick = -1;
        for (int i = 0; i < s->n_running; i++) {
            sreq *r = s->running[i];
            if (!prio_below(s, r, w)) continue;
            if (pick < 0) {
                pick = i;
                continue;
            }
            sreq *p = s->running[pick];
            bool lower = s->a.schedule_low_priority_values_first ? r->priority > p->priority : r->priority < p->priority;
            if (lower || (r->priority == p->priority && r->seq_no > p->seq_no)) pick = i;
        }
        if (pick < 0) break;
        sreq *r = s->running[pick];
        remove_at(s->running, &s->n_running, pick);
        got += (double)(r->kv_len - r->rr.protected_len) +
               (double)min64(r->max_new - (r->len - r->n_input), CLIP_MAX_NEW_TOKENS) * s->new_token_ratio;
        log_info("priority preemption: request %s (priority %" PRId64 ") yields to %s (priority %" PRId64 ")",
                 r->rid, r->priority, w->rid, w->priority);
        retract(s, r);
        s->st.num_preemptions++;
        n++;
    }
    return n;
}

/* ======================================================================
 * one step
 * ==================================================================== */

static int reserve_batch(sched *s, int n_tok, int n_seq)
{
    if (n_tok > s->cap_tok) {
        int nc = s->cap_tok ? s->cap_tok : 64;
        while (nc < n_tok) nc *= 2;
        void *a = realloc(s->b_tokens, sizeof(int32_t) * (size_t)nc);
        if (!a) return -1;
        s->b_tokens = a;
        a = realloc(s->b_pos, sizeof(int32_t) * (size_t)nc);
        if (!a) return -1;
        s->b_pos = a;
        a = realloc(s->b_rows, sizeof(int32_t) * (size_t)nc);
        if (!a) return -1;
        s->b_rows = a;
        s->cap_tok = nc;
    }
    if (n_seq + 1 > s->cap_seq) {
        int nc = s->cap_seq ? s->cap_seq : 16;
        while (nc < n_seq + 1) nc *= 2;
        void *a = realloc(s->b_start, sizeof(int32_t) * (size_t)nc);
        if (!a) return -1;
        s->b_start = a;
        a = realloc(s->b_kvlen, sizeof(int32_t) * (size_t)nc);
        if (!a) return -1;
        s->b_kvlen = a;
        a = realloc((void *)s->b_slots, sizeof(int32_t *) * (size_t)nc);
        if (!a) return -1;
        s->b_slots = a;
        a = realloc(s->b_lp_row, sizeof(int32_t) * (size_t)nc);
        if (!a) return -1;
        s->b_lp_row = a;
        a = realloc(s->b_lp_n, sizeof(int32_t) * (size_t)nc);
        if (!a) return -1;
        s->b_lp_n = a;
        a = realloc(s->b_sample_row, sizeof(int32_t) * (size_t)nc);
        if (!a) return -1;
        s->b_sample_row = a;
        s->cap_seq = nc;
    }
    return 0;
}

static int reserve_logits(sched *s, int n)
{
    if (n <= s->cap_logits) return 0;
    int nc = s->cap_logits ? s->cap_logits : 16;
    while (nc < n) nc *= 2;
    size_t w = (size_t)(s->V > s->c->hidden_size ? s->V : s->c->hidden_size);
    float *g = realloc(s->logits, sizeof(float) * (size_t)nc * w);
    if (!g) return -1;
    s->logits = g;
    s->cap_logits = nc;
    return 0;
}

/* Running requests' reserve for future decode tokens (PrefillAdder). */
static double running_reserve(sched *s)
{
    double r = 0;
    for (int i = 0; i < s->n_running; i++) {
        sreq *q = s->running[i];
        r += (double)min64(q->max_new - (q->len - q->n_input), CLIP_MAX_NEW_TOKENS) * s->new_token_ratio;
    }
    return r;
}

static int64_t ceil_paged(sched *s, int64_t n) { return (n + s->P - 1) / s->P * s->P; }

/* Input logprobs need logits rows: a request computing them prefills at
 * most this many such rows per step (bounded logits memory), and its
 * cached prefix may not reach past logprob_start_len (SGLang). */
#define LP_ROWS_MAX 256

static bool needs_in_lp(const sreq *r) { return r->return_logprob && !r->in_lp_done; }

static int64_t match_limit(const sreq *r)
{
    int64_t m = r->len - 1;
    if (needs_in_lp(r) && r->lp_start < m) m = r->lp_start;
    return m;
}

static int64_t lp_ext_cap(sched *s, const sreq *r)
{
    if (!needs_in_lp(r)) return INT64_MAX / 4;
    int64_t first = r->kv_len > r->lp_start ? r->kv_len : r->lp_start;
    int64_t cap = (first - r->kv_len + LP_ROWS_MAX) / s->P * s->P;
    return cap < s->P ? s->P : cap;
}

/* Input logprob of position p (predicting seq[p + 1]) from its raw logits
 * row, SGLang's default (log_softmax of the raw logits): the chosen entry,
 * top_n best and the token_ids_logprob entries. */
static void input_logprob(sched *s, sreq *r, const float *row, int64_t p)
{
    int64_t k = p - r->lp_start;
    sampling_logprob_req lpq = {.want = true, .top_n = r->top_n, .ids = r->tids, .n_ids = r->n_tid};
    sampling_result res = {.top_ids = r->top_n ? r->in_top_ids + k * r->top_n : NULL,
                           .top_logprobs = r->top_n ? r->in_top_lp + k * r->top_n : NULL,
                           .ids_logprobs = r->n_tid ? r->in_tid_lp + k * r->n_tid : NULL};
    if (sampling_input_logprobs(row, s->V, r->seq[p + 1], s->scratch, &lpq, &res)) {
        r->in_lp[k] = NAN;
        return;
    }
    r->in_lp[k] = res.logprob;
    for (int i = res.n_top; i < r->top_n; i++) r->in_top_ids[k * r->top_n + i] = -1;
}

/* In-batch prefix sharing (SGLang's in-batch prefix caching, applied to
 * every policy): a waiting request that shares at least this many uncached
 * tokens with a request prefilled in this step waits one step, then finds
 * them in the radix tree instead of computing them twice. */
#define IN_BATCH_PREFIX_THRESHOLD 32

static bool defer_in_batch(sched *s, const sreq *w, int64_t cached)
{
    if (kv_radix_disabled(s->tree)) return false;
    for (int b = 0; b < s->n_batch; b++) {
        const sreq *q = s->batch[b];
        if ((q->cache_salt == NULL) != (w->cache_salt == NULL)) continue;
        if (q->cache_salt && strcmp(q->cache_salt, w->cache_salt)) continue;
        int64_t n = min64(w->len - 1, q->len), k = 0;
        while (k < n && w->seq[k] == q->seq[k]) k++;
        if (k - cached >= IN_BATCH_PREFIX_THRESHOLD) return true;
    }
    return false;
}

/* Choose this step's prefill requests into s->batch (SGLang's
 * get_new_batch_prefill + PrefillAdder).  n_mixed: decode rows riding
 * along.  Returns the number of prefill requests. */
static int build_prefill(sched *s, int n_mixed)
{
    s->n_batch = 0;
    s->log_new_tokens = s->log_hit_tokens = 0;
    bool have_waiting = s->n_waiting > 0;
    if (!have_waiting && !s->chunked) return 0;
    double offset = running_reserve(s);
    int64_t rem_input = (int64_t)s->a.max_prefill_tokens - n_mixed;
    int64_t rem_chunk = s->a.chunked_prefill_size > 0 ? (int64_t)s->a.chunked_prefill_size - n_mixed : INT64_MAX / 4;
#define REM_TOTAL() ((double)(kv_pool_free_tokens(s->pool) + kv_radix_evictable_size(s->tree)) - offset)

    /* 1. the chunked request continues first */
    if (s->chunked) {
        sreq *r = s->chunked;
        int64_t left = r->len - r->kv_len;
        int64_t lim = min64(min64(rem_chunk, (int64_t)REM_TOTAL()), lp_ext_cap(s, r));
        int64_t ext = left;
        bool trunc = false;
        if (left > lim) {
            ext = lim / s->P * s->P;
            trunc = true;
        }
        if (ext > 0 && alloc_upto(s, r, r->kv_len + ext) == 0) {
            r->extend = ext;
            s->log_new_tokens += ext;
            offset += (double)ceil_paged(s, ext) +
                      (trunc ? 0.0 : (double)min64(r->max_new - (r->len - r->n_input), CLIP_MAX_NEW_TOKENS));
            rem_input -= ext;
            rem_chunk -= ext;
            if (push_ptr(&s->batch, &s->n_batch, &s->cap_batch, r)) return -1;
            if (!trunc) s->chunked = NULL; /* completes this step */
        }
        if (s->chunked) return s->n_batch; /* still chunking: nothing else fits */
    }
    if (!have_waiting) return s->n_batch;
    if (rem_input <= 0 || rem_chunk <= 0) return s->n_batch;

    sched_policy_order(s);
    int i = 0;
    while (i < s->n_waiting) {
        sreq *w = s->waiting[i];
        if (s->n_running + s->n_batch >= s->max_running) {
            if (preempt_for(s, w, 0, true) == 0) break;
            continue; /* the queue changed (preempted requests appended) */
        }
        if (s->a.prefill_max_requests > 0 && s->n_batch >= s->a.prefill_max_requests) break;
        int64_t fill = w->len;
        kv_radix_node *node = NULL;
        int64_t mlen = match_limit(w);
        int64_t prefix = kv_radix_match(s->tree, w->cache_salt, w->seq, mlen, NULL, &node);
        if (defer_in_batch(s, w, prefix)) {
            i++;
            continue;
        }
        int64_t ext = fill - prefix;
        int64_t reserve = min64(w->max_new - (w->len - w->n_input), CLIP_MAX_NEW_TOKENS);
        double total = (double)(ext + reserve);
        if (total >= REM_TOTAL()) {
            double deficit = total - REM_TOTAL() + 1;
            if (preempt_for(s, w, deficit, false) > 0) {
                offset = running_reserve(s);
                for (int b = 0; b < s->n_batch; b++) {
                    sreq *q = s->batch[b];
                    offset += (double)ceil_paged(s, q->extend) +
                              (double)min64(q->max_new - (q->len - q->n_input), CLIP_MAX_NEW_TOKENS);
                }
                continue;
            }
            log_debug("admission stops (no tokens): request %s needs %.0f, %.0f left", w->rid, total, REM_TOTAL());
            break; /* NO_TOKEN */
        }
        if (ceil_paged(s, ext) >= rem_input && s->n_batch > 0) break; /* OTHER */
        /* admit: lock the prefix, then size the chunk */
        if (ensure_page_room(s, w, kv_pool_pages_for(s->pool, fill))) return -1;
        w->rr.ns = w->cache_salt;
        w->rr.last_node = NULL;
        w->rr.protected_len = 0;
        prefix = kv_radix_req_match(s->tree, &w->rr, w->seq, mlen, w->pages);
        w->holds_kv = true;
        w->n_pages = prefix / s->P;
        set_slots(s, w, 0);
        w->kv_len = prefix;
        ext = fill - prefix;
        bool chunk = false;
        int64_t lim = min64(rem_chunk, lp_ext_cap(s, w));
        if (ext > lim) {
            ext = lim / s->P * s->P;
            chunk = true;
        }
        if (ext <= 0 || (double)(chunk ? ext : ext + reserve) > REM_TOTAL() || alloc_upto(s, w, prefix + ext)) {
            log_debug("admission stops: request %s got no room for a %lld-token chunk", w->rid, (long long)ext);
            release_kv(s, w, false);
            break;
        }
        w->extend = ext;
        if (w->t_forward == 0) w->t_forward = time_now_sec();
        s->log_new_tokens += ext;
        s->log_hit_tokens += prefix;
        if (prefix > w->already_computed) w->cached_tokens += prefix - w->already_computed;
        offset += (double)ceil_paged(s, ext) + (chunk ? 0.0 : (double)reserve);
        rem_input -= ceil_paged(s, ext);
        rem_chunk -= ceil_paged(s, ext);
        remove_at(s->waiting, &s->n_waiting, i);
        w->state = RS_PREFILL;
        if (push_ptr(&s->batch, &s->n_batch, &s->cap_batch, w)) return -1;
        if (chunk) {
            s->chunked = w;
            break;
        }
        if (rem_input <= 0 || rem_chunk <= 0) break;
    }
#undef REM_TOTAL
    return s->n_batch;
}

/* Pages for one decode token of every running request, all or nothing. */
static int alloc_decode(sched *s)
{
    int64_t need = 0;
    for (int i = 0; i < s->n_running; i++) {
        sreq *r = s->running[i];
        need += kv_pool_pages_for(s->pool, r->kv_len + 1) - r->n_pages;
    }
    if (need > avail_pages(s)) return -1;
    for (int i = 0; i < s->n_running; i++)
        if (alloc_upto(s, s->running[i], s->running[i]->kv_len + 1)) return -1;
    return 0;
}

/* Assemble and run one forward over s->batch (prefill rows) then, when
 * with_decode, one row per running request.  Then sample and advance. */
/* Embedding mode: SGLang's Pooler(LAST, normalize=True) over the last
 * token's final-normed hidden state h (hidden_size): keep the first
 * embed_dims values (Matryoshka), divide by their L2 norm (max(norm, 1e-12)
 * as torch's F.normalize).  0, or -1 out of memory. */
static int pool_embedding(sched *s, sreq *r, const float *h)
{
    int H = s->c->hidden_size;
    int d = r->embed_dims > 0 && r->embed_dims < H ? r->embed_dims : H;
    free(r->emb);
    r->emb = malloc(sizeof(float) * (size_t)d);
    if (!r->emb) return -1;
    double ss = 0.0;
    for (int i = 0; i < d; i++) ss += (double)h[i] * h[i];
    double nrm = sqrt(ss);
    if (nrm < 1e-12) nrm = 1e-12;
    for (int i = 0; i < d; i++) r->emb[i] = (float)(h[i] / nrm);
    r->n_emb = d;
    return 0;
}

static int run_batch(sched *s, bool with_decode)
{
    int n_dec = with_decode ? s->n_running : 0;
    int64_t n_tok = n_dec;
    for (int b = 0; b < s->n_batch; b++) n_tok += s->batch[b]->extend;
    int n_seq = s->n_batch + n_dec;
    if (n_tok > INT32_MAX / 2 || reserve_batch(s, (int)n_tok, n_seq)) {
        log_error("out of memory for a batch of %" PRId64 " tokens", n_tok);
        return -1;
    }
    int t = 0, nl = 0;
    for (int b = 0; b < n_seq; b++) {
        sreq *r = b < s->n_batch ? s->batch[b] : s->running[b - s->n_batch];
        int64_t ext = b < s->n_batch ? r->extend : 1;
        s->b_start[b] = t;
        for (int64_t k = 0; k < ext; k++, t++) {
            s->b_tokens[t] = r->seq[r->kv_len + k];
            s->b_pos[t] = (int32_t)(r->kv_len + k);
        }
        s->b_kvlen[b] = (int32_t)(r->kv_len + ext);
        s->b_slots[b] = r->slots;
        /* input-logprob rows: positions [lo, hi) predicting input tokens */
        s->b_lp_row[b] = nl;
        s->b_lp_n[b] = 0;
        if (b < s->n_batch && needs_in_lp(r)) {
            int64_t lo = max64(r->kv_len, r->lp_start), hi = min64(r->kv_len + ext, r->n_input - 1);
            for (int64_t p = lo; p < hi; p++) s->b_rows[nl++] = s->b_start[b] + (int32_t)(p - r->kv_len);
            s->b_lp_n[b] = hi > lo ? (int32_t)(hi - lo) : 0;
        }
        bool wants_logits = r->kv_len + ext == r->len &&
                            (r->len - r->n_input < r->max_new || (s->a.is_embedding && b < s->n_batch));
        s->b_sample_row[b] = wants_logits ? nl : -1;
        if (wants_logits) s->b_rows[nl++] = t - 1;
    }
    s->b_start[n_seq] = t;
    if (reserve_logits(s, nl)) {
        log_error("out of memory for %d logits rows", nl);
        return -1;
    }
    model_batch mb = {.n_tokens = t, .tokens = s->b_tokens, .positions = s->b_pos, .n_seqs = n_seq,
                      .seq_start = s->b_start, .seq_kv_len = s->b_kvlen, .seq_slots = s->b_slots,
                      .n_logits = nl, .logit_rows = s->b_rows, .want_hidden = s->a.is_embedding};
    double t0 = time_now_sec();
    progress_set(s, s->pg.busy_since, n_seq, n_tok, n_dec > 0 && s->n_batch == 0, false);
    int frc = model_forward(s->m, s->kv, &mb, s->logits, s->tp);
    s->st.forward_s += time_now_sec() - t0;
    if (frc) {
        /* give every request in the batch a clear end instead of looping */
        log_error("model forward failed; aborting the %d requests of the batch", n_seq);
        for (int b = 0; b < s->n_batch; b++) {
            sreq *r = s->batch[b];
            if (s->chunked == r) s->chunked = NULL;
            r->abort_msg = xstrdup("Internal error: model forward failed.");
            r->abort_status = 500;
            finish_abort(s, r);
        }
        s->n_batch = 0;
        if (with_decode) {
            while (s->n_running > 0) {
                sreq *r = s->running[--s->n_running];
                r->abort_msg = xstrdup("Internal error: model forward failed.");
                r->abort_status = 500;
                finish_abort(s, r);
            }
        }
        return -1;
    }
    /* advance: prefill requests, then the decode rows */
    int nb = s->n_batch;
    sreq **newly = NULL;
    int n_new = 0, cap_new = 0;
    for (int b = 0; b < s->n_batch; b++) {
        sreq *r = s->batch[b];
        if (s->b_lp_n[b] > 0) {
            int64_t lo = max64(r->kv_len, r->lp_start);
            for (int k = 0; k < s->b_lp_n[b]; k++)
                input_logprob(s, r, s->logits + (size_t)(s->b_lp_row[b] + k) * (size_t)s->V, lo + k);
        }
        r->kv_len += r->extend;
        if (r->return_logprob && r->kv_len >= r->n_input - 1) r->in_lp_done = true;
        r->extend = 0;
        if (r->kv_len > r->already_computed) r->already_computed = r->kv_len;
        /* SGLang's cache_unfinished_req after every prefill (chunk or
         * whole): the prompt is shareable from the next step on */
        if (!kv_radix_disabled(s->tree)) {
            if (kv_radix_req_cache_unfinished(s->tree, &r->rr, r->seq, r->kv_len, r->pages)) {
                /* its page table can no longer be trusted (kv_radix.h) */
                log_error("request %s: caching its prefill failed; aborting it", r->rid);
                if (s->chunked == r) s->chunked = NULL;
                r->kv_broken = true;
                r->abort_msg = xstrdup("Internal error: KV cache bookkeeping failed.");
                r->abort_status = 500;
                finish_abort(s, r);
                continue;
            }
            set_slots(s, r, 0);
        }
        if (r->kv_len < r->len) continue; /* more chunks to come */
        if (s->a.is_embedding && pool_embedding(s, r, s->logits + (size_t)s->b_sample_row[b] * s->c->hidden_size)) {
            r->abort_msg = xstrdup("Internal error: out of memory.");
            r->abort_status = 500;
            finish_abort(s, r);
            continue;
        }
        if (r->len - r->n_input >= r->max_new) { /* max_new_tokens 0: prefill only (and embeddings) */
            finish_req(s, r, SCHED_FINISH_LENGTH, r->max_new, -1, NULL, 200);
            continue;
        }
        float *row = s->logits + (size_t)s->b_sample_row[b] * (size_t)s->V;
        if (r->to_abort) { /* cannot happen mid-step; kept for safety */
            finish_abort(s, r);
            continue;
        }
        if (!sample_one(s, r, row)) {
            r->state = RS_RUNNING;
            if (push_ptr(&newly, &n_new, &cap_new, r)) {
                r->abort_msg = xstrdup("Internal error: out of memory.");
                r->abort_status = 500;
                finish_abort(s, r);
            }
        }
    }
    s->n_batch = 0;
    if (with_decode) {
        int keep = 0;
        int n = s->n_running;
        for (int i = 0; i < n; i++) {
            sreq *r = s->running[i];
            r->kv_len += 1;
            if (r->kv_len > r->already_computed) r->already_computed = r->kv_len;
            float *row = s->logits + (size_t)s->b_sample_row[nb + i] * (size_t)s->V;
            if (!sample_one(s, r, row)) s->running[keep++] = r;
        }
        s->n_running = keep;
    }
    for (int i = 0; i < n_new; i++)
        if (push_ptr(&s->running, &s->n_running, &s->cap_running, newly[i])) {
            newly[i]->abort_msg = xstrdup("Internal error: out of memory.");
            newly[i]->abort_status = 500;
            finish_abort(s, newly[i]);
        }
    free(newly);
    return 0;
}

/* ---- inbox --------------------------------------------------------------- */

typedef struct {
    const char *rid;
    uint64_t id; /* > 0: match by id */
} abort_key;

static bool rid_match_key(const abort_key *k, const sreq *r)
{
    if (k->id) return r->id == k->id;
    return !k->rid || (r->rid && !strcmp(k->rid, r->rid));
}

/* Abort matching requests wherever they are; their pages go back now. */
static void do_abort(sched *s, const abort_key *key)
{
    for (int i = 0; i < s->n_waiting;) {
        sreq *r = s->waiting[i];
        if (rid_match_key(key, r)) {
            remove_at(s->waiting, &s->n_waiting, i);
            finish_abort(s, r);
        } else {
            /* siblings still held by a warm-up */
            for (int c = 0; c < r->n_children; c++)
                if (rid_match_key(key, r->children[c])) {
                    sreq *ch = r->children[c];
                    memmove(r->children + c, r->children + c + 1, sizeof(sreq *) * (size_t)(r->n_children - c - 1));
                    r->n_children--;
                    c--;
                    emit_reject(s, ch->id, ch->index, ch->rid, ch->n_input, "Request aborted.", 200);
                    sreq_free(ch);
                }
            i++;
        }
    }
    for (int i = 0; i < s->n_running;) {
        sreq *r = s->running[i];
        if (rid_match_key(key, r)) {
            remove_at(s->running, &s->n_running, i);
            finish_abort(s, r);
        } else {
            i++;
        }
    }
    if (s->chunked && rid_match_key(key, s->chunked)) {
        sreq *r = s->chunked;
        s->chunked = NULL;
        finish_abort(s, r);
    }
    /* held while paused: never queued, so they are rejected like a queue-full */
    for (sreq **pp = &s->held_head; *pp;) {
        sreq *r = *pp;
        if (!rid_match_key(key, r)) {
            pp = &r->next;
            continue;
        }
        *pp = r->next;
        r->next = NULL;
        for (int c = 0; c < r->n_children; c++) {
            sreq *ch = r->children[c];
            emit_reject(s, ch->id, ch->index, ch->rid, ch->n_input, "Request aborted.", 200);
        }
        if (!r->internal) emit_reject(s, r->id, r->index, r->rid, r->n_input, "Request aborted.", 200);
        sreq_free(r);
    }
    s->held_tail = NULL;
    for (sreq *r = s->held_head; r; r = r->next) s->held_tail = r;
}

/* The lowest-priority waiting request (for queue-full with priorities). */
static int lowest_waiting(sched *s)
{
    int pick = -1;
    for (int i = 0; i < s->n_waiting; i++) {
        sreq *r = s->waiting[i];
        if (pick < 0) {
            pick = i;
            continue;
        }
        sreq *p = s->waiting[pick];
        bool lower = s->a.schedule_low_priority_values_first ? r->priority > p->priority : r->priority < p->priority;
        if (lower || (r->priority == p->priority && r->seq_no > p->seq_no)) pick = i;
    }
    return pick;
}

static void admit_new(sched *s, sreq *r)
{
    if (s->a.max_queued_requests > 0 && s->n_waiting >= s->a.max_queued_requests) {
        int low = s->a.enable_priority_scheduling ? lowest_waiting(s) : -1;
        if (low >= 0) {
            sreq *l = s->waiting[low];
            bool better = s->a.schedule_low_priority_values_first ? r->priority < l->priority : r->priority > l->priority;
            if (better) {
                remove_at(s->waiting, &s->n_waiting, low);
                l->abort_msg = xstrdup("The request is aborted by a higher priority request.");
                l->abort_status = 503;
                finish_abort(s, l);
                enqueue_waiting(s, r);
                return;
            }
        }
        /* rejected before it ever ran: siblings too */
        for (int c = 0; c < r->n_children; c++) {
            sreq *ch = r->children[c];
            emit_reject(s, ch->id, ch->index, ch->rid, ch->n_input, "The request queue is full.", 503);
        }
        if (!r->internal) emit_reject(s, r->id, r->index, r->rid, r->n_input, "The request queue is full.", 503);
        sreq_free(r);
        return;
    }
    enqueue_waiting(s, r);
}

/* Requests arriving while paused (or while a swap waits) are held in
 * arrival order until generation continues. */
static void hold_req(sched *s, sreq *r)
{
    r->next = NULL;
    if (s->held_tail) s->held_tail->next = r;
    else s->held_head = r;
    s->held_tail = r;
}

static void release_held(sched *s)
{
    sreq *r = s->held_head;
    s->held_head = s->held_tail = NULL;
    while (r) {
        sreq *n = r->next;
        r->next = NULL;
        admit_new(s, r);
        r = n;
    }
}

static bool holding(const sched *s) { return s->paused || s->swap_wait; }

static void drain_inbox(sched *s)
{
    pthread_mutex_lock(&s->in_mu);
    sreq *head = s->in_head;
    abort_msg *ab = s->ab_head;
    s->in_head = s->in_tail = NULL;
    s->ab_head = s->ab_tail = NULL;
    pthread_mutex_unlock(&s->in_mu);
    while (head) {
        sreq *r = head;
        head = r->next;
        r->next = NULL;
        if (holding(s)) hold_req(s, r);
        else admit_new(s, r);
    }
    while (ab) {
        abort_msg *a = ab;
        ab = a->next;
        abort_key key = {a->rid, a->id};
        do_abort(s, &key);
        free(a->rid);
        free(a);
    }
}

/* ---- control messages ------------------------------------------------------ */

static void ctl_done(sched *s, ctl_msg *m)
{
    pthread_mutex_lock(&s->in_mu);
    m->done = true;
    pthread_cond_broadcast(&s->ctl_cv);
    pthread_mutex_unlock(&s->in_mu);
}

static void set_paused(sched *s, bool on)
{
    pthread_mutex_lock(&s->in_mu);
    s->paused = on;
    pthread_mutex_unlock(&s->in_mu);
}

/* Every running (and half-prefilled) request back to the waiting queue. */
static int retract_all(sched *s)
{
    int n = 0;
    if (s->chunked) {
        sreq *c = s->chunked;
        s->chunked = NULL;
        retract(s, c);
        n++;
    }
    while (s->n_running > 0) {
        sreq *r = s->running[s->n_running - 1];
        s->n_running--;
        retract(s, r);
        n++;
    }
    return n;
}

/* SGLang's flush_cache: only when no request holds KV; while paused,
 * waiting requests (they hold none) do not prevent it. */
static int ctl_flush(sched *s, char *msg, size_t len)
{
    if (s->n_running || s->chunked || (s->n_waiting && !s->paused)) {
        snprintf(msg, len, "Cache not flushed because there are pending requests (%d running, %d waiting).",
                 s->n_running + (s->chunked ? 1 : 0), s->n_waiting);
        log_warn("flush_cache refused: %s", msg);
        return -1;
    }
    for (int i = 0; i < s->n_waiting; i++) s->waiting[i]->est_node = NULL;
    if (kv_radix_reset(s->tree)) {
        snprintf(msg, len, "Internal error: the radix cache could not be reset.");
        return -1;
    }
    snprintf(msg, len, "Cache flushed.");
    log_info("radix cache flushed");
    return 0;
}

/* Is the new model a drop-in for the running one?  The KV tensors, the
 * scratch sizes, the vocabulary and the request limits depend on these. */
static int swap_compatible(const sched *s, model *nm, char *msg, size_t len)
{
    const model_config *a = s->c, *b = model_get_config(nm);
#define SWAP_CHECK(f)                                                                                        \
    if (a->f != b->f) {                                                                                      \
        snprintf(msg, len, "The new model is not compatible with the running one: " #f " %d != %d.",          \
                 (int)b->f, (int)a->f);                                                                      \
        return -1;                                                                                           \
    }
    if (strcmp(a->architecture, b->architecture)) {
        snprintf(msg, len, "The new model is not compatible with the running one: architecture %s != %s.",
                 b->architecture, a->architecture);
        return -1;
    }
    SWAP_CHECK(hidden_size)
    SWAP_CHECK(intermediate_size)
    SWAP_CHECK(n_layer)
    SWAP_CHECK(n_head)
    SWAP_CHECK(n_kv_head)
    SWAP_CHECK(head_dim)
    SWAP_CHECK(vocab_size)
    SWAP_CHECK(context_length)
    SWAP_CHECK(tie_word_embeddings)
    SWAP_CHECK(attention_bias)
    SWAP_CHECK(mlp_bias)
    SWAP_CHECK(n_expert)
    SWAP_CHECK(n_expert_used)
    SWAP_CHECK(moe_inter)
#undef SWAP_CHECK
    if (model_weight_dtype(nm) != model_weight_dtype(s->m)) {
        snprintf(msg, len, "The new model is not compatible with the running one: weight dtype %s != %s.",
                 dtype_name(model_weight_dtype(nm)), dtype_name(model_weight_dtype(s->m)));
        return -1;
    }
    return 0;
}

/* The swap itself, between steps: KV of the old weights is dropped from
 * the tree (SGLang flushes after update_weights_from_disk). */
static void do_swap(sched *s, ctl_msg *m)
{
    sched_ctl *c = m->c;
    c->n_affected = retract_all(s);
    model *old = s->m;
    s->m = c->new_model;
    s->c = model_get_config(s->m);
    s->n_eos = s->c->n_eos;
    for (int i = 0; i < s->c->n_eos && i < MODEL_MAX_EOS; i++) s->eos[i] = s->c->eos_token_ids[i];
    c->old_model = old;
    char fmsg[256];
    if (!c->keep_cache && ctl_flush(s, fmsg, sizeof fmsg)) log_error("after the weight update: %s", fmsg);
    if (c->stay_paused) set_paused(s, true);
    c->rc = 0;
    snprintf(c->msg, sizeof c->msg, "Succeeded to update model weights.");
    log_info("model weights updated (%d request(s) retracted, radix cache flushed)", c->n_affected);
    s->swap_wait = NULL;
    if (!s->paused) release_held(s);
    ctl_done(s, m);
}

static void handle_ctl(sched *s, ctl_msg *m)
{
    sched_ctl *c = m->c;
    c->rc = 0;
    c->msg[0] = 0;
    c->n_affected = 0;
    switch (c->kind) {
    case SCHED_CTL_PAUSE:
        if (c->pause_mode == SCHED_PAUSE_ABORT) {
            int n = s->n_running + s->n_waiting + (s->chunked ? 1 : 0);
            abort_key all = {NULL, 0};
            sreq *held = s->held_head; /* arrived after the pause began: kept */
            s->held_head = s->held_tail = NULL;
            do_abort(s, &all);
            s->held_head = held;
            for (sreq *r = held; r; r = r->next) s->held_tail = r;
            c->n_affected = n;
        } else if (c->pause_mode == SCHED_PAUSE_RETRACT) {
            c->n_affected = retract_all(s);
        }
        set_paused(s, true);
        log_info("generation paused (mode %s, %d request(s) %s)",
                 c->pause_mode == SCHED_PAUSE_ABORT ? "abort" : c->pause_mode == SCHED_PAUSE_RETRACT ? "retract" : "in_place",
                 c->n_affected, c->pause_mode == SCHED_PAUSE_ABORT ? "aborted" : "retracted");
        snprintf(c->msg, sizeof c->msg, "Generation paused successfully.");
        if (s->swap_wait) do_swap(s, s->swap_wait); /* a waiting swap need not wait any more */
        break;
    case SCHED_CTL_CONTINUE:
        set_paused(s, false);
        if (!s->swap_wait) release_held(s);
        log_info("generation continued");
        snprintf(c->msg, sizeof c->msg, "Generation continued successfully.");
        break;
    case SCHED_CTL_FLUSH_CACHE:
        c->rc = ctl_flush(s, c->msg, sizeof c->msg);
        break;
    case SCHED_CTL_SWAP_MODEL:
        if (!c->new_model || swap_compatible(s, c->new_model, c->msg, sizeof c->msg)) {
            if (!c->new_model) snprintf(c->msg, sizeof c->msg, "No model given.");
            c->rc = -1;
            log_error("update_weights_from_disk refused: %s", c->msg);
            break;
        }
        if (s->swap_wait) {
            c->rc = -1;
            snprintf(c->msg, sizeof c->msg, "Another weight update is in progress.");
            break;
        }
        s->swap_wait = m;
        if (s->paused || (!s->n_running && !s->n_waiting && !s->chunked)) do_swap(s, m);
        return; /* done by do_swap, now or when the requests in flight finish */
    default:
        c->rc = -1;
        snprintf(c->msg, sizeof c->msg, "Unknown control message.");
        break;
    }
    ctl_done(s, m);
}

static void drain_ctl(sched *s)
{
    pthread_mutex_lock(&s->in_mu);
    ctl_msg *m = s->ctl_head;
    s->ctl_head = s->ctl_tail = NULL;
    pthread_mutex_unlock(&s->in_mu);
    while (m) {
        ctl_msg *n = m->next; /* m belongs to its waiting caller once done */
        m->next = NULL;
        handle_ctl(s, m);
        m = n;
    }
}

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
    drain_inbox(s);
    drain_ctl(s);
    if (s->swap_wait && !s->n_running && !s->n_waiting && !s->chunked) do_swap(s, s->swap_wait);
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
        mixed = alloc_decode(s) == 0;
    int np = build_prefill(s, mixed ? s->n_running : 0);
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
        int n_ret = retract_for_decode(s);
        if (s->n_running > 0) {
            if (alloc_decode(s)) {
                log_error("decode could not get KV pages after retraction");
                rc = -1;
            } else {
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
    if (s->swap_wait && idle) do_swap(s, s->swap_wait);
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
                w->abort_msg = xstrdup("Internal error: the scheduler could not admit the request.");
                w->abort_status = 500;
                finish_abort(s, w);
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

/* ======================================================================
 * submit / abort (any thread)
 * ==================================================================== */

void sched_set_stop_hook(sched *s, sched_stop_fn fn, void *ctx)
{
    pthread_mutex_lock(&s->in_mu);
    s->stop_fn = fn;
    s->stop_ctx = ctx;
    pthread_mutex_unlock(&s->in_mu);
}

static void inbox_push(sched *s, sreq *r)
{
    pthread_mutex_lock(&s->in_mu);
    r->next = NULL;
    if (s->in_tail) s->in_tail->next = r;
    else s->in_head = r;
    s->in_tail = r;
    pthread_cond_signal(&s->in_cv);
    pthread_mutex_unlock(&s->in_mu);
}

/* Validation as SGLang (tokenizer_manager + SamplingParams.verify).  0 or
 * -1 with a message. */
static int validate(sched *s, const sched_req_spec *sp, int64_t *max_new, char *err, size_t errlen, int *status)
{
    *status = 400;
    if (sp->n_input < 1 || !sp->input_ids) {
        snprintf(err, errlen, "The input_ids must not be empty.");
        return -1;
    }
    for (int64_t i = 0; i < sp->n_input; i++)
        if (sp->input_ids[i] < 0 || sp->input_ids[i] >= s->V) {
            snprintf(err, errlen, "Token id %d is out of range [0, %d).", sp->input_ids[i], s->V);
            return -1;
        }
    if (sp->n_input > s->max_req_input_len) {
        snprintf(err, errlen,
                 "The input (%" PRId64 " tokens) is longer than the model's context length (%" PRId64 " tokens).",
                 sp->n_input, s->max_req_input_len);
        return -1;
    }
    if (sampling_params_verify(&sp->params, s->V, err, errlen)) return -1;
    if (sampling_params_check_supported(&sp->params, err, errlen)) return -1;
    if (sp->params.n_stop_regex > 0) {
        snprintf(err, errlen, "stop_regex is not supported yet.");
        return -1;
    }
    pthread_mutex_lock(&s->in_mu);
    bool have_hook = s->stop_fn != NULL;
    pthread_mutex_unlock(&s->in_mu);
    if (sp->params.n_stop > 0 && !have_hook) {
        snprintf(err, errlen, "Stop strings need the tokenizer (not available): use stop_token_ids.");
        return -1;
    }
    if (sp->return_logprob && sp->logprob_start_len >= sp->n_input) {
        snprintf(err, errlen,
                 "logprob_start_len, (%" PRId64 ") is higher than the number of input tokens (%" PRId64
                 "). Request with a lower logprob_start_len.",
                 sp->logprob_start_len, sp->n_input);
        return -1;
    }
    if (sp->top_logprobs_num < 0) {
        snprintf(err, errlen, "top_logprobs_num must be non-negative.");
        return -1;
    }
    for (int i = 0; i < sp->n_token_ids_logprob; i++)
        if (sp->token_ids_logprob[i] < 0 || sp->token_ids_logprob[i] >= s->V) {
            snprintf(err, errlen, "token_ids_logprob: token id %d is out of range [0, %d).",
                     sp->token_ids_logprob[i], s->V);
            return -1;
        }
    if (sp->has_priority && !s->a.enable_priority_scheduling && s->a.abort_on_priority_when_disabled) {
        snprintf(err, errlen,
                 "Priority is not enabled on this server (--enable-priority-scheduling), but the request sets one.");
        return -1;
    }
    if (s->a.is_embedding) {
        if (sp->params.n > 1 || sp->return_logprob || sp->stream) {
            snprintf(err, errlen, "Embedding requests take no n > 1, return_logprob or stream.");
            return -1;
        }
        if (sp->embed_dims < 0 || sp->embed_dims > s->c->hidden_size) {
            snprintf(err, errlen, "Provided dimensions are greater than max embedding dimension: %d",
                     s->c->hidden_size);
            return -1;
        }
        *max_new = 0; /* prefill only */
        return 0;
    }
    int64_t room = s->max_req_len - sp->n_input;
    int64_t mn = sp->params.has_max_new_tokens ? sp->params.max_new_tokens : room;
    *max_new = mn < room ? mn : room;
    if (*max_new < 0) *max_new = 0;
    return 0;
}

uint64_t sched_submit(sched *s, sched_req_spec *sp)
{
    pthread_mutex_lock(&s->in_mu);
    uint64_t id = s->next_id++;
    uint64_t seed_base = sched_rand(&s->rng);
    pthread_mutex_unlock(&s->in_mu);
    char rid_buf[48];
    if (!sp->rid) {
        snprintf(rid_buf, sizeof rid_buf, "req-%" PRIu64, id);
        sp->rid = xstrdup(rid_buf);
    }
    char err[512];
    int status = 400;
    int64_t max_new = 0;
    int n = sp->params.n > 1 ? (int)sp->params.n : 1;
    if (!sp->rid || validate(s, sp, &max_new, err, sizeof err, &status)) {
        if (!sp->rid) snprintf(err, sizeof err, "Internal error: out of memory."), status = 500;
        for (int i = 0; i < n; i++) emit_reject(s, id, i, sp->rid, sp->n_input, err, status);
        sched_req_spec_free(sp);
        return id;
    }
    uint64_t seed = sp->params.has_sampling_seed ? sp->params.sampling_seed : seed_base;
    sreq *head = NULL;
    if (n == 1) {
        head = sreq_new(s, sp, id, 0, seed, max_new);
    } else {
        /* SGLang's parallel sampling: a max_new_tokens=0 request caches the
         * prompt, then the n siblings reuse its pages from the radix tree */
        head = sreq_new(s, sp, id, 0, seed, 0);
        if (head) {
            head->internal = true;
            head->children = calloc((size_t)n, sizeof(sreq *));
            if (!head->children) {
                sreq_free(head);
                head = NULL;
            }
        }
        for (int i = 0; head && i < n; i++) {
            sreq *c = sreq_new(s, sp, id, i, seed + (uint64_t)i, max_new);
            if (!c) {
                sreq_free(head);
                head = NULL;
                break;
            }
            head->children[head->n_children++] = c;
        }
    }
    if (!head) {
        for (int i = 0; i < n; i++) emit_reject(s, id, i, sp->rid, sp->n_input, "Internal error: out of memory.", 500);
        sched_req_spec_free(sp);
        return id;
    }
    sched_req_spec_free(sp);
    inbox_push(s, head);
    return id;
}

static void queue_abort(sched *s, const char *rid, uint64_t id)
{
    abort_msg *a = calloc(1, sizeof *a);
    if (!a) {
        log_error("out of memory queueing an abort");
        return;
    }
    a->rid = xstrdup(rid);
    a->id = id;
    pthread_mutex_lock(&s->in_mu);
    if (s->ab_tail) s->ab_tail->next = a;
    else s->ab_head = a;
    s->ab_tail = a;
    pthread_cond_signal(&s->in_cv);
    pthread_mutex_unlock(&s->in_mu);
}

void sched_abort(sched *s, const char *rid) { queue_abort(s, rid, 0); }

void sched_abort_id(sched *s, uint64_t id)
{
    if (id) queue_abort(s, NULL, id);
}

/* ======================================================================
 * create / destroy / thread
 * ==================================================================== */

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
    size_t per_token = (size_t)c->n_layer * 2 * (size_t)c->n_kv_head * (size_t)c->head_dim * dtype_size(kdt);
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
    tokens = tokens / P * P;
    if (tokens > (INT32_MAX - P) / P * P) tokens = (INT32_MAX - P) / P * P;
    if (tokens < 2 * (int64_t)P || tokens < 4) {
        snprintf(err, errlen,
                 "not enough memory for the KV cache (%" PRId64 " tokens); raise --mem-fraction-static or set --max-total-tokens",
                 tokens);
        return NULL;
    }
    sched *s = calloc(1, sizeof *s);
    if (!s) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    s->a = *a;
    s->m = m;
    s->c = c;
    s->P = P;
    s->V = c->vocab_size;
    s->efd = -1;
    s->capacity = tokens;
    s->n_eos = c->n_eos;
    for (int i = 0; i < c->n_eos && i < MODEL_MAX_EOS; i++) s->eos[i] = c->eos_token_ids[i];
    pthread_mutex_init(&s->in_mu, NULL);
    pthread_cond_init(&s->in_cv, NULL);
    pthread_mutex_init(&s->out_mu, NULL);
    pthread_cond_init(&s->out_cv, NULL);
    pthread_cond_init(&s->ctl_cv, NULL);
    pthread_mutex_init(&s->pg_mu, NULL);
    s->next_id = 1;
    s->rng = a->random_seed ^ 0x5EEDull;
    s->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    /* SGLang: max_req_len = min(context_len - 1, max_total_num_tokens - 1),
     * max_req_input_len = max_req_len - 5 */
    s->max_req_len = min64((int64_t)c->context_length - 1, tokens - 1);
    s->max_req_input_len = max64(1, s->max_req_len - 5);
    if (a->max_running_requests > 0) {
        s->max_running = a->max_running_requests;
    } else {
        int64_t mr = (int64_t)((double)tokens / c->context_length * 512);
        mr = min64(max64(mr, 2048), 4096);
        s->max_running = (int)min64(mr, max64(1, tokens / 2));
    }
    s->init_ratio = fmin(INIT_NEW_TOKEN_RATIO * a->schedule_conservativeness, 1.0);
    s->log_decode_tic = time_now_sec();
    s->min_ratio = fmin(s->init_ratio * MIN_NEW_TOKEN_RATIO_FACTOR, 1.0);
    s->ratio_decay = (s->init_ratio - s->min_ratio) / NEW_TOKEN_RATIO_DECAY_STEPS;
    s->new_token_ratio = s->init_ratio;
    s->kv = model_kv_create(m, (int)tokens, kdt);
    s->pool = kv_pool_create(tokens / P, P);
    s->tree = s->pool ? kv_radix_create(s->pool, (kv_evict_policy)a->radix_eviction_policy, a->disable_radix_cache) : NULL;
    int nth = a->threads > 0 ? a->threads : (cpu_get()->n_cores > 0 ? cpu_get()->n_cores : 1);
    s->tp = tpool_create(nth);
    s->scratch = aligned_alloc(64, (sampling_scratch_bytes(s->V) + 63) & ~(size_t)63);
    if (!s->kv || !s->pool || !s->tree || !s->tp || !s->scratch) {
        snprintf(err, errlen, "out of memory creating the scheduler (KV cache of %" PRId64 " tokens, %.2f GiB)", tokens,
                 (double)tokens * (double)per_token / 1073741824.0);
        sched_destroy(s);
        return NULL;
    }
    int max_tok = a->max_prefill_tokens;
    if (a->chunked_prefill_size > 0 && a->chunked_prefill_size < max_tok) max_tok = a->chunked_prefill_size;
    max_tok += s->max_running < 1024 ? s->max_running : 1024;
    s->rsv_tok = max_tok;
    s->rsv_kv = (int)min64(c->context_length, tokens);
    s->rsv_nth = nth;
    if (model_reserve(m, max_tok, (int)min64(c->context_length, tokens), nth))
        log_warn("could not pre-size the model scratch; it grows on demand");
    log_info("max_total_num_tokens=%" PRId64 ", chunked_prefill_size=%d, max_prefill_tokens=%d, "
             "max_running_requests=%d, context_len=%d, page_size=%d, kv_cache_dtype=%s, "
             "KV %.2f GiB (%zu bytes/token), schedule_policy=%s%s",
             tokens, a->chunked_prefill_size, a->max_prefill_tokens, s->max_running, c->context_length, P,
             dtype_name(kdt), (double)tokens * (double)per_token / 1073741824.0, per_token,
             sched_policy_name(a->schedule_policy), a->disable_radix_cache ? ", radix cache disabled" : "");
    return s;
}

static void drop_all(sched *s)
{
    for (int i = 0; i < s->n_waiting; i++) sreq_free(s->waiting[i]);
    s->n_waiting = 0;
    for (int i = 0; i < s->n_running; i++) {
        release_kv(s, s->running[i], false);
        sreq_free(s->running[i]);
    }
    s->n_running = 0;
    if (s->chunked) {
        release_kv(s, s->chunked, false);
        sreq_free(s->chunked);
        s->chunked = NULL;
    }
    while (s->in_head) {
        sreq *r = s->in_head;
        s->in_head = r->next;
        sreq_free(r);
    }
    while (s->ab_head) {
        abort_msg *a = s->ab_head;
        s->ab_head = a->next;
        free(a->rid);
        free(a);
    }
    while (s->held_head) {
        sreq *r = s->held_head;
        s->held_head = r->next;
        sreq_free(r);
    }
    s->held_tail = NULL;
}

void sched_destroy(sched *s)
{
    if (!s) return;
    sched_stop(s);
    fail_pending_ctl(s);
    if (s->tree && s->pool) drop_all(s);
    while (s->out_head) {
        sched_event *e = s->out_head;
        s->out_head = e->next;
        sched_event_free(e);
    }
    kv_radix_destroy(s->tree);
    kv_pool_destroy(s->pool);
    model_kv_destroy(s->kv);
    if (s->tp) tpool_destroy(s->tp);
    free(s->waiting);
    free(s->running);
    free(s->batch);
    free(s->b_tokens);
    free(s->b_pos);
    free(s->b_rows);
    free(s->b_start);
    free(s->b_kvlen);
    free((void *)s->b_slots);
    free(s->b_lp_row);
    free(s->b_lp_n);
    free(s->b_sample_row);
    free(s->logits);
    free(s->scratch);
    free(s->tmp_top_ids);
    free(s->tmp_top_lp);
    free(s->tmp_tid_lp);
    if (s->efd >= 0) close(s->efd);
    pthread_mutex_destroy(&s->in_mu);
    pthread_cond_destroy(&s->in_cv);
    pthread_mutex_destroy(&s->out_mu);
    pthread_cond_destroy(&s->out_cv);
    pthread_cond_destroy(&s->ctl_cv);
    pthread_mutex_destroy(&s->pg_mu);
    free(s);
}

static void *thread_main(void *arg)
{
    sched *s = arg;
    pthread_setname_np(pthread_self(), "sglc-sched");
    for (;;) {
        pthread_mutex_lock(&s->in_mu);
        bool stop = s->stop;
        pthread_mutex_unlock(&s->in_mu);
        if (stop) break;
        int r = sched_step(s);
        if (r < 0) log_error("scheduler step failed; continuing");
        if (r == 0) {
            /* --sleep-on-idle: the compute workers go to sleep now instead
             * of spinning out their pause/yield budget after the last forward */
            if (s->a.sleep_on_idle) tpool_quiesce(s->tp);
            pthread_mutex_lock(&s->in_mu);
            while (!s->stop && !s->in_head && !s->ab_head && !s->ctl_head) pthread_cond_wait(&s->in_cv, &s->in_mu);
            pthread_mutex_unlock(&s->in_mu);
        }
    }
    return NULL;
}

int sched_start(sched *s)
{
    if (s->thread_started) return 0;
    s->stop = false;
    if (pthread_create(&s->thread, NULL, thread_main, s)) {
        log_error("cannot start the scheduler thread");
        return -1;
    }
    s->thread_started = true;
    return 0;
}

/* Refuse every control message still queued or waiting (shutdown).  A
 * message's caller frees it once it sees `done` (under in_mu, held here). */
static void fail_pending_ctl(sched *s)
{
    pthread_mutex_lock(&s->in_mu);
    ctl_msg *m = s->ctl_head;
    s->ctl_head = s->ctl_tail = NULL;
    ctl_msg *w = s->swap_wait;
    s->swap_wait = NULL;
    while (m || w) {
        ctl_msg *x = m ? m : w;
        if (m) m = m->next;
        else w = NULL;
        x->c->rc = -1;
        snprintf(x->c->msg, sizeof x->c->msg, "The scheduler is stopped.");
        x->done = true;
    }
    pthread_cond_broadcast(&s->ctl_cv);
    pthread_mutex_unlock(&s->in_mu);
}

void sched_stop(sched *s)
{
    if (!s->thread_started) return;
    pthread_mutex_lock(&s->in_mu);
    s->stop = true;
    s->stopped = true;
    pthread_cond_broadcast(&s->in_cv);
    pthread_mutex_unlock(&s->in_mu);
    pthread_join(s->thread, NULL);
    s->thread_started = false;
    fail_pending_ctl(s);
}

int sched_control(sched *s, sched_ctl *c)
{
    ctl_msg m = {.c = c, .done = false, .next = NULL};
    c->rc = -1;
    c->msg[0] = 0;
    c->old_model = NULL;
    /* size the new model's scratch here, off the scheduler thread */
    if (c->kind == SCHED_CTL_SWAP_MODEL && c->new_model && c->new_model != s->m &&
        model_reserve(c->new_model, s->rsv_tok, s->rsv_kv, s->rsv_nth))
        log_warn("could not pre-size the new model's scratch; it grows on demand");
    pthread_mutex_lock(&s->in_mu);
    if (s->stopped) {
        pthread_mutex_unlock(&s->in_mu);
        snprintf(c->msg, sizeof c->msg, "The scheduler is stopped.");
        return -1;
    }
    if (s->ctl_tail) s->ctl_tail->next = &m;
    else s->ctl_head = &m;
    s->ctl_tail = &m;
    pthread_cond_signal(&s->in_cv);
    bool threaded = s->thread_started;
    if (threaded)
        while (!m.done) pthread_cond_wait(&s->ctl_cv, &s->in_mu);
    pthread_mutex_unlock(&s->in_mu);
    if (!threaded) {
        /* synchronous mode: the caller is the scheduler thread */
        for (;;) {
            pthread_mutex_lock(&s->in_mu);
            bool done = m.done;
            pthread_mutex_unlock(&s->in_mu);
            if (done) break;
            if (sched_step(s) < 0) log_error("scheduler step failed while handling a control message");
        }
    }
    return c->rc;
}

bool sched_is_paused(sched *s)
{
    pthread_mutex_lock(&s->in_mu);
    bool p = s->paused;
    pthread_mutex_unlock(&s->in_mu);
    return p;
}

model *sched_model(sched *s) { return s->m; }

void sched_get_progress(sched *s, sched_progress *out)
{
    pthread_mutex_lock(&s->pg_mu);
    *out = s->pg;
    pthread_mutex_unlock(&s->pg_mu);
}

int64_t sched_max_req_input_len(const sched *s) { return s->max_req_input_len; }
