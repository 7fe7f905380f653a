/* sched_inbox — requests and aborts coming in: submit with validation
 * and the abort queue (any thread), and on the scheduler thread the drain
 * of the inbox: queue-full rules, requests held while paused, aborts.
 *
 * DESIGN
 * Layer 10 (sched_impl.h "Layers"): includes sched_util, sched_event,
 * sched_kv, sched_req, sched_grammar.  A request with a grammar goes to
 * the grammar queue first and is admitted (queue-full rules) when its
 * grammar is ready.  in.mu guards the inbox lists; a submit validates
 * on the caller's thread (SGLang's tokenizer-manager checks and
 * SamplingParams.verify), builds the request(s) and links them in; the
 * scheduler takes the whole list at the start of a step. */
#include "sched/sched_inbox.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "sched/sched_event.h"
#include "sched/sched_grammar.h"
#include "sched/sched_kv.h"
#include "sched/sched_req.h"
#include "sched/sched_util.h"
#include "util/log.h"

/* ---- the scheduler thread's side: drain, admit, abort --------------------- */

static bool rid_match_key(const sched_abort_key *k, const sreq *r)
{
    if (k->id) return r->who.id == k->id;
    return !k->rid || (r->who.rid && !strcmp(k->rid, r->who.rid));
}

/* Abort matching requests wherever they are; their pages go back now. */
void sched_inbox_abort(sched *s, const sched_abort_key *key)
{
    for (int i = 0; i < s->q.n_waiting;) {
        sreq *r = s->q.waiting[i];
        if (rid_match_key(key, r)) {
            sched_remove_req(s->q.waiting, &s->q.n_waiting, i);
            sched_req_abort(s, r);
        } else {
            /* siblings still held by a warm-up */
            for (int c = 0; c < r->life.n_children; c++)
                if (rid_match_key(key, r->life.children[c])) {
                    sreq *ch = r->life.children[c];
                    memmove(r->life.children + c, r->life.children + c + 1,
                            sizeof(sreq *) * (size_t)(r->life.n_children - c - 1));
                    r->life.n_children--;
                    c--;
                    sched_emit_reject(s, ch->who.id, ch->who.index, ch->who.rid, ch->tok.n_input, "Request aborted.", 200);
                    sched_req_free(ch);
                }
            i++;
        }
    }
    /* compiling their grammar: never ran, finish like waiting ones */
    for (int i = 0; i < s->gram.n_waiting;) {
        if (rid_match_key(key, s->gram.waiting[i])) sched_req_abort(s, sched_grammar_remove(s, i));
        else i++;
    }
    for (int i = 0; i < s->q.n_running;) {
        sreq *r = s->q.running[i];
        if (rid_match_key(key, r)) {
            sched_remove_req(s->q.running, &s->q.n_running, i);
            sched_req_abort(s, r);
        } else {
            i++;
        }
    }
    if (s->q.chunked && rid_match_key(key, s->q.chunked)) {
        sreq *r = s->q.chunked;
        s->q.chunked = NULL;
        sched_req_abort(s, r);
    }
    /* held while paused: never queued, so they are rejected like a queue-full */
    for (sreq **pp = &s->ctl.held_head; *pp;) {
        sreq *r = *pp;
        if (!rid_match_key(key, r)) {
            pp = &r->life.next;
            continue;
        }
        *pp = r->life.next;
        r->life.next = NULL;
        for (int c = 0; c < r->life.n_children; c++) {
            sreq *ch = r->life.children[c];
            sched_emit_reject(s, ch->who.id, ch->who.index, ch->who.rid, ch->tok.n_input, "Request aborted.", 200);
        }
        if (!r->who.internal)
            sched_emit_reject(s, r->who.id, r->who.index, r->who.rid, r->tok.n_input, "Request aborted.", 200);
        sched_req_free(r);
    }
    s->ctl.held_tail = NULL;
    for (sreq *r = s->ctl.held_head; r; r = r->life.next) s->ctl.held_tail = r;
}

/* The lowest-priority waiting request (for queue-full with priorities). */
static int lowest_waiting(sched *s)
{
    int pick = -1;
    for (int i = 0; i < s->q.n_waiting; i++) {
        sreq *r = s->q.waiting[i];
        if (pick < 0) {
            pick = i;
            continue;
        }
        sreq *p = s->q.waiting[pick];
        bool lower = s->a.schedule_low_priority_values_first ? r->pol.priority > p->pol.priority
                                                             : r->pol.priority < p->pol.priority;
        if (lower || (r->pol.priority == p->pol.priority && r->pol.seq_no > p->pol.seq_no)) pick = i;
    }
    return pick;
}

static void admit_new(sched *s, sreq *r)
{
    if (s->a.max_queued_requests > 0 && s->q.n_waiting >= s->a.max_queued_requests) {
        int low = s->a.enable_priority_scheduling ? lowest_waiting(s) : -1;
        if (low >= 0) {
            sreq *l = s->q.waiting[low];
            bool better = s->a.schedule_low_priority_values_first ? r->pol.priority < l->pol.priority
                                                                  : r->pol.priority > l->pol.priority;
            if (better) {
                sched_remove_req(s->q.waiting, &s->q.n_waiting, low);
                l->life.abort_msg = sched_strdup("The request is aborted by a higher priority request.");
                l->life.abort_status = 503;
                sched_req_abort(s, l);
                sched_req_enqueue(s, r);
                return;
            }
        }
        /* rejected before it ever ran: siblings too */
        for (int c = 0; c < r->life.n_children; c++) {
            sreq *ch = r->life.children[c];
            sched_emit_reject(s, ch->who.id, ch->who.index, ch->who.rid, ch->tok.n_input, "The request queue is full.", 503);
        }
        if (!r->who.internal)
            sched_emit_reject(s, r->who.id, r->who.index, r->who.rid, r->tok.n_input, "The request queue is full.",
                              503);
        sched_req_free(r);
        return;
    }
    sched_req_enqueue(s, r);
}

/* Requests arriving while paused (or while a swap waits) are held in
 * arrival order until generation continues. */
static void hold_req(sched *s, sreq *r)
{
    r->life.next = NULL;
    if (s->ctl.held_tail) s->ctl.held_tail->life.next = r;
    else s->ctl.held_head = r;
    s->ctl.held_tail = r;
}

/* A new request: to the grammar queue when it has a grammar, else
 * admitted now. */
static void route_new(sched *s, sreq *r)
{
    if (r->gram.text && !r->gram.m) sched_grammar_wait(s, r);
    else admit_new(s, r);
}

void sched_inbox_release_held(sched *s)
{
    sreq *r = s->ctl.held_head;
    s->ctl.held_head = s->ctl.held_tail = NULL;
    while (r) {
        sreq *n = r->life.next;
        r->life.next = NULL;
        route_new(s, r);
        r = n;
    }
}

static bool sched_inbox_holding(const sched *s) { return s->ctl.paused || s->ctl.swap_wait; }

void sched_inbox_drain(sched *s)
{
    pthread_mutex_lock(&s->in.mu);
    sreq *head = s->in.head;
    abort_msg *ab = s->in.ab_head;
    s->in.head = s->in.tail = NULL;
    s->in.ab_head = s->in.ab_tail = NULL;
    s->gram.wake = false;
    pthread_mutex_unlock(&s->in.mu);
    while (head) {
        sreq *r = head;
        head = r->life.next;
        r->life.next = NULL;
        if (sched_inbox_holding(s)) hold_req(s, r);
        else route_new(s, r);
    }
    /* grammars that became ready (or failed, or timed out) */
    for (sreq *r; (r = sched_grammar_next_ready(s));) admit_new(s, r);
    while (ab) {
        abort_msg *a = ab;
        ab = a->next;
        sched_abort_key key = {a->rid, a->id};
        sched_inbox_abort(s, &key);
        free(a->rid);
        free(a);
    }
}

/* ---- any thread: submit (validation), abort, the front hooks -------------- */

void sched_set_output_hook(sched *s, const sched_output_hook *h, void *ctx)
{
    pthread_mutex_lock(&s->in.mu);
    memset(&s->hooks.output, 0, sizeof s->hooks.output);
    if (h) s->hooks.output = *h;
    s->hooks.output_ctx = ctx;
    s->hooks.stop_fn = NULL;
    s->hooks.stop_ctx = NULL;
    pthread_mutex_unlock(&s->in.mu);
}

/* sched_set_stop_hook's check: the predicate, without the request context. */
static int stop_only_check(void *ctx, void *req_ctx, uint64_t id, int index, const sampling_params *p,
                           const int32_t *out, int64_t n_out)
{
    sched *s = ctx;
    (void)req_ctx, (void)index;
    return s->hooks.stop_fn(s->hooks.stop_ctx, id, p, out, n_out);
}

void sched_set_stop_hook(sched *s, sched_stop_fn fn, void *ctx)
{
    sched_output_hook h = {.check = stop_only_check};
    sched_set_output_hook(s, fn ? &h : NULL, fn ? s : NULL);
    pthread_mutex_lock(&s->in.mu);
    s->hooks.stop_fn = fn;
    s->hooks.stop_ctx = ctx;
    pthread_mutex_unlock(&s->in.mu);
}

void sched_set_draft_tree_hook(sched *s, sched_draft_tree_fn fn, void *ctx, int max_draft)
{
    s->hooks.draft_tree_fn = fn;
    s->hooks.draft_fn = NULL;
    s->hooks.draft_ctx = ctx;
    s->hooks.max_draft = fn && max_draft > 0 ? max_draft : 0;
}

void sched_set_draft_hook(sched *s, sched_draft_fn fn, void *ctx, int max_draft)
{
    s->hooks.draft_tree_fn = NULL;
    s->hooks.draft_fn = fn;
    s->hooks.draft_ctx = ctx;
    s->hooks.max_draft = fn && max_draft > 0 ? max_draft : 0;
}

void sched_set_spec_accept(sched *s, double threshold_single, double threshold_acc)
{
    s->hooks.accept_relaxed = threshold_single < 1.0 || threshold_acc < 1.0;
    s->hooks.accept_single = threshold_single;
    s->hooks.accept_acc = threshold_acc;
}

const int32_t *sched_draft_slots(const sched *s) { return s->hooks.draft_slots; }

static void inbox_push(sched *s, sreq *r)
{
    pthread_mutex_lock(&s->in.mu);
    r->life.next = NULL;
    if (s->in.tail) s->in.tail->life.next = r;
    else s->in.head = r;
    s->in.tail = r;
    pthread_cond_signal(&s->in.cv);
    pthread_mutex_unlock(&s->in.mu);
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
        if (sp->input_ids[i] < 0 || sp->input_ids[i] >= s->lim.V) {
            snprintf(err, errlen, "Token id %d is out of range [0, %d).", sp->input_ids[i], s->lim.V);
            return -1;
        }
    if (sp->n_input > s->lim.max_req_input_len) {
        snprintf(err, errlen,
                 "The input (%" PRId64 " tokens) is longer than the model's context length (%" PRId64 " tokens).",
                 sp->n_input, s->lim.max_req_input_len);
        return -1;
    }
    if (sampling_params_verify(&sp->params, s->lim.V, err, errlen)) return -1;
    if (sampling_params_check_supported(&sp->params, err, errlen)) return -1;
    if (sampling_params_grammar(&sp->params, NULL) && !s->a.is_embedding) {
        pthread_mutex_lock(&s->in.mu);
        bool have_grammar = s->gram.q != NULL;
        pthread_mutex_unlock(&s->in.mu);
        if (!have_grammar) {
            snprintf(err, errlen, "Grammar-based generation (json_schema, regex, ebnf, structural_tag) is not "
                                  "supported when the server is launched with --grammar-backend none");
            return -1;
        }
    }
    if (sp->params.n_stop_regex > 0) {
        snprintf(err, errlen, "stop_regex is not supported yet.");
        return -1;
    }
    pthread_mutex_lock(&s->in.mu);
    bool have_hook = s->hooks.output.check != NULL;
    pthread_mutex_unlock(&s->in.mu);
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
        if (sp->token_ids_logprob[i] < 0 || sp->token_ids_logprob[i] >= s->lim.V) {
            snprintf(err, errlen, "token_ids_logprob: token id %d is out of range [0, %d).",
                     sp->token_ids_logprob[i], s->lim.V);
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
        if (sp->embed_dims < 0 || sp->embed_dims > s->eng.c->hidden_size) {
            snprintf(err, errlen, "Provided dimensions are greater than max embedding dimension: %d",
                     s->eng.c->hidden_size);
            return -1;
        }
        *max_new = 0; /* prefill only */
        return 0;
    }
    int64_t room = s->lim.max_req_len - sp->n_input;
    int64_t mn = sp->params.has_max_new_tokens ? sp->params.max_new_tokens : room;
    *max_new = mn < room ? mn : room;
    if (*max_new < 0) *max_new = 0;
    return 0;
}

uint64_t sched_submit(sched *s, sched_req_spec *sp)
{
    pthread_mutex_lock(&s->in.mu);
    uint64_t id = s->in.next_id++;
    uint64_t seed_base = sched_rand(&s->in.rng);
    pthread_mutex_unlock(&s->in.mu);
    char rid_buf[48];
    if (!sp->rid) {
        snprintf(rid_buf, sizeof rid_buf, "req-%" PRIu64, id);
        sp->rid = sched_strdup(rid_buf);
    }
    char err[512];
    int status = 400;
    int64_t max_new = 0;
    int n = sp->params.n > 1 ? (int)sp->params.n : 1;
    if (!sp->rid || validate(s, sp, &max_new, err, sizeof err, &status)) {
        if (!sp->rid) snprintf(err, sizeof err, "Internal error: out of memory."), status = 500;
        for (int i = 0; i < n; i++) sched_emit_reject(s, id, i, sp->rid, sp->n_input, err, status);
        sched_req_spec_free(sp);
        return id;
    }
    uint64_t seed = sp->params.has_sampling_seed ? sp->params.sampling_seed : seed_base;
    sreq *head = NULL;
    if (n == 1) {
        head = sched_req_new(s, sp, id, 0, seed, max_new);
    } else {
        /* SGLang's parallel sampling: a max_new_tokens=0 request caches the
         * prompt, then the n siblings reuse its pages from the radix tree */
        head = sched_req_new(s, sp, id, 0, seed, 0);
        if (head) {
            head->who.internal = true;
            head->life.children = calloc((size_t)n, sizeof(sreq *));
            if (!head->life.children) {
                sched_req_free(head);
                head = NULL;
            }
        }
        for (int i = 0; head && i < n; i++) {
            sreq *c = sched_req_new(s, sp, id, i, seed + (uint64_t)i, max_new);
            if (!c) {
                sched_req_free(head);
                head = NULL;
                break;
            }
            head->life.children[head->life.n_children++] = c;
        }
    }
    if (!head) {
        for (int i = 0; i < n; i++) sched_emit_reject(s, id, i, sp->rid, sp->n_input, "Internal error: out of memory.", 500);
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
    a->rid = sched_strdup(rid);
    a->id = id;
    pthread_mutex_lock(&s->in.mu);
    if (s->in.ab_tail) s->in.ab_tail->next = a;
    else s->in.ab_head = a;
    s->in.ab_tail = a;
    pthread_cond_signal(&s->in.cv);
    pthread_mutex_unlock(&s->in.mu);
}

void sched_abort(sched *s, const char *rid) { queue_abort(s, rid, 0); }

void sched_abort_id(sched *s, uint64_t id)
{
    if (id) queue_abort(s, NULL, id);
}
