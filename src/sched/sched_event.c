/* sched_event — request specs and events: spec init/free, the outbox
 * (mutex + condvar + eventfd) and its readers sched_poll / sched_wait,
 * and the two event builders (reject, tokens / finish).
 *
 * DESIGN
 * Layer 3 (sched_impl.h "Layers"): includes sched_util only.  The outbox
 * is the one place events leave the scheduler; builders copy what they
 * need from the request, so an event outlives it. */
#include "sched/sched_event.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "lora/lora.h"
#include "sched/sched_util.h"
#include "util/log.h"
#include "util/timeutil.h"


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
    free(sp->grammar_after);
    lora_adapter_unref(sp->lora);
    free(sp->lora_name);
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
    free(e->text);
    free(e);
}

static void outbox_push(sched *s, sched_event *e)
{
    pthread_mutex_lock(&s->out.mu);
    e->next = NULL;
    if (s->out.tail) s->out.tail->next = e;
    else s->out.head = e;
    s->out.tail = e;
    pthread_cond_broadcast(&s->out.cv);
    pthread_mutex_unlock(&s->out.mu);
    if (s->out.efd >= 0) {
        uint64_t one = 1;
        ssize_t w = write(s->out.efd, &one, sizeof one);
        (void)w;
    }
}

static sched_event *outbox_pop_locked(sched *s)
{
    sched_event *e = s->out.head;
    if (e) {
        s->out.head = e->next;
        if (!s->out.head) s->out.tail = NULL;
        e->next = NULL;
    }
    if (!s->out.head && s->out.efd >= 0) {
        uint64_t v;
        ssize_t r = read(s->out.efd, &v, sizeof v); /* non-blocking: drains the counter */
        (void)r;
    }
    return e;
}

sched_event *sched_poll(sched *s)
{
    pthread_mutex_lock(&s->out.mu);
    sched_event *e = outbox_pop_locked(s);
    pthread_mutex_unlock(&s->out.mu);
    return e;
}

sched_event *sched_wait(sched *s, double timeout_s)
{
    pthread_mutex_lock(&s->out.mu);
    if (!s->out.head) {
        if (timeout_s < 0) {
            while (!s->out.head) pthread_cond_wait(&s->out.cv, &s->out.mu);
        } else {
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            double t = ts.tv_sec + ts.tv_nsec * 1e-9 + timeout_s;
            ts.tv_sec = (time_t)t;
            ts.tv_nsec = (long)((t - (double)ts.tv_sec) * 1e9);
            while (!s->out.head)
                if (pthread_cond_timedwait(&s->out.cv, &s->out.mu, &ts) == ETIMEDOUT) break;
        }
    }
    sched_event *e = outbox_pop_locked(s);
    pthread_mutex_unlock(&s->out.mu);
    return e;
}

int sched_outbox_fd(const sched *s) { return s->out.efd; }

/* An ABORT event for a request that never entered the queue. */
void sched_emit_reject(sched *s, uint64_t id, int index, const char *rid, int64_t n_input,
                        const char *msg, int status)
{
    sched_event *e = calloc(1, sizeof *e);
    if (!e) return;
    e->kind = SCHED_EV_FINISH;
    e->id = id;
    e->index = index;
    e->rid = sched_strdup(rid);
    e->finish = SCHED_FINISH_ABORT;
    e->finish_str = sched_strdup(msg);
    e->http_status = status;
    e->prompt_tokens = n_input;
    outbox_push(s, e);
}


/* Event with the output tokens of r not sent yet; fin != NULL: the final
 * one, with the finish reason. */
void sched_emit_tokens(sched *s, sreq *r, const sched_finish_info *fin)
{
    bool finish = fin != NULL;
    if (r->who.internal) return;
    sched_event *e = calloc(1, sizeof *e);
    if (!e) {
        log_error("out of memory for an event of request %s", r->who.rid);
        return;
    }
    int64_t n_out = r->tok.len - r->tok.n_input, from = r->out.n_sent, n = n_out - from;
    e->kind = finish ? SCHED_EV_FINISH : SCHED_EV_TOKENS;
    e->id = r->who.id;
    e->index = r->who.index;
    e->rid = sched_strdup(r->who.rid);
    e->n_ids = (int)n;
    e->completion_tokens = n_out;
    bool oom = false;
    if (n > 0) {
        e->ids = malloc(sizeof(int32_t) * (size_t)n);
        oom |= !e->ids;
        if (e->ids) memcpy(e->ids, r->tok.seq + r->tok.n_input + from, sizeof(int32_t) * (size_t)n);
        if (r->lpr.return_logprob) {
            e->logprobs = malloc(sizeof(float) * (size_t)n);
            oom |= !e->logprobs;
            if (e->logprobs) memcpy(e->logprobs, r->lpr.lp + from, sizeof(float) * (size_t)n);
            if (r->lpr.top_n > 0) {
                e->top_n = r->lpr.top_n;
                e->top_ids = malloc(sizeof(int32_t) * (size_t)(n * r->lpr.top_n));
                e->top_logprobs = malloc(sizeof(float) * (size_t)(n * r->lpr.top_n));
                oom |= !e->top_ids || !e->top_logprobs;
                if (e->top_ids && e->top_logprobs) {
                    memcpy(e->top_ids, r->lpr.top_ids + from * r->lpr.top_n, sizeof(int32_t) * (size_t)(n * r->lpr.top_n));
                    memcpy(e->top_logprobs, r->lpr.top_lp + from * r->lpr.top_n, sizeof(float) * (size_t)(n * r->lpr.top_n));
                }
            }
            if (r->lpr.n_tid > 0) {
                e->n_tid = r->lpr.n_tid;
                e->tids = malloc(sizeof(int32_t) * (size_t)r->lpr.n_tid);
                e->tid_logprobs = malloc(sizeof(float) * (size_t)(n * r->lpr.n_tid));
                oom |= !e->tids || !e->tid_logprobs;
                if (e->tids && e->tid_logprobs) {
                    memcpy(e->tids, r->lpr.tids, sizeof(int32_t) * (size_t)r->lpr.n_tid);
                    memcpy(e->tid_logprobs, r->lpr.tid_lp + from * r->lpr.n_tid, sizeof(float) * (size_t)(n * r->lpr.n_tid));
                }
            }
        }
    }
    if (r->lpr.return_logprob && r->lpr.in_lp_done && !r->lpr.in_lp_sent) {
        /* SGLang: entry 0 is a None pad; the rest predict the next input token */
        int64_t m = r->lpr.n_in_lp + 1;
        e->n_in = (int)m;
        e->in_ids = malloc(sizeof(int32_t) * (size_t)m);
        e->in_logprobs = malloc(sizeof(float) * (size_t)m);
        oom |= !e->in_ids || !e->in_logprobs;
        if (e->in_ids && e->in_logprobs) {
            memcpy(e->in_ids, r->tok.seq + r->lpr.lp_start, sizeof(int32_t) * (size_t)m);
            e->in_logprobs[0] = NAN;
            if (r->lpr.n_in_lp) memcpy(e->in_logprobs + 1, r->lpr.in_lp, sizeof(float) * (size_t)r->lpr.n_in_lp);
        }
        if (r->lpr.top_n) {
            e->top_n = r->lpr.top_n;
            e->in_top_ids = malloc(sizeof(int32_t) * (size_t)(m * r->lpr.top_n));
            e->in_top_logprobs = malloc(sizeof(float) * (size_t)(m * r->lpr.top_n));
            oom |= !e->in_top_ids || !e->in_top_logprobs;
            if (e->in_top_ids && e->in_top_logprobs) {
                for (int i = 0; i < r->lpr.top_n; i++) e->in_top_ids[i] = -1, e->in_top_logprobs[i] = NAN;
                if (r->lpr.n_in_lp) {
                    memcpy(e->in_top_ids + r->lpr.top_n, r->lpr.in_top_ids,
                           sizeof(int32_t) * (size_t)(r->lpr.n_in_lp * r->lpr.top_n));
                    memcpy(e->in_top_logprobs + r->lpr.top_n, r->lpr.in_top_lp,
                           sizeof(float) * (size_t)(r->lpr.n_in_lp * r->lpr.top_n));
                }
            }
        }
        if (r->lpr.n_tid) {
            e->n_tid = r->lpr.n_tid;
            if (!e->tids) {
                e->tids = malloc(sizeof(int32_t) * (size_t)r->lpr.n_tid);
                if (e->tids) memcpy(e->tids, r->lpr.tids, sizeof(int32_t) * (size_t)r->lpr.n_tid);
            }
            e->in_tid_logprobs = malloc(sizeof(float) * (size_t)(m * r->lpr.n_tid));
            oom |= !e->tids || !e->in_tid_logprobs;
            if (e->in_tid_logprobs) {
                for (int i = 0; i < r->lpr.n_tid; i++) e->in_tid_logprobs[i] = NAN;
                if (r->lpr.n_in_lp)
                    memcpy(e->in_tid_logprobs + r->lpr.n_tid, r->lpr.in_tid_lp,
                           sizeof(float) * (size_t)(r->lpr.n_in_lp * r->lpr.n_tid));
            }
        }
        r->lpr.in_lp_sent = true;
    }
    if (s->hooks.output.text && r->out.output_ctx) /* the front's text of these tokens */
        e->text = s->hooks.output.text(s->hooks.output_ctx, r->out.output_ctx, r->who.index, &r->samp.params,
                                       r->tok.seq + r->tok.n_input, n_out, finish ? fin->kind : SCHED_FINISH_NONE,
                                       &e->text_len);
    if (oom) log_error("out of memory for an event of request %s (token data dropped)", r->who.rid);
    r->out.n_sent = n_out;
    e->spec_on = s->hooks.draft_fn || s->hooks.draft_tree_fn;
    e->spec_verify_ct = r->spec.verify_ct;
    e->spec_accepted = r->spec.accepted;
    e->spec_drafted = r->spec.drafted;
    if (finish) {
        e->finish = fin->kind;
        e->finish_length = fin->len;
        e->finish_token = fin->tok;
        e->finish_str = sched_strdup(fin->str);
        e->http_status = fin->status;
        e->prompt_tokens = r->tok.n_input;
        e->last_input_id = r->tok.seq[r->tok.n_input - 1];
        e->cached_tokens = r->kv.cached_tokens;
        e->num_retractions = r->life.num_retractions;
        e->e2e_latency = time_now_sec() - r->time.t_submit;
        if (r->embd.emb && fin->kind != SCHED_FINISH_ABORT) {
            e->embedding = r->embd.emb, e->n_embedding = r->embd.n_emb;
            r->embd.emb = NULL;
        }
    }
    outbox_push(s, e);
}
