/* sched_req — the request object (sreq): built from a spec, queued,
 * finished, freed.
 *
 * DESIGN
 * Layer 5 (sched_impl.h "Layers"): includes sched_util, sched_event,
 * sched_kv.  A request is owned by exactly one place at a time (the inbox,
 * a held list, the waiting / running arrays, s->chunked or a warm-up's
 * children); sched_req_finish is the one way out for a request that ran. */
#include "sched/sched_req.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sched/sched_event.h"
#include "sched/sched_kv.h"
#include "sched/sched_util.h"
#include "util/log.h"
#include "util/timeutil.h"

/* ---- requests -------------------------------------------------------------- */

void sched_req_free(sreq *r)
{
    if (!r) return;
    for (int i = 0; i < r->n_children; i++) sched_req_free(r->children[i]);
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
    free(r->draft);
    free(r->abort_msg);
    free(r);
}

/* A request from a spec (copies what it needs; the spec keeps its own). */
sreq *sched_req_new(sched *s, const sched_req_spec *sp, uint64_t id, int index, uint64_t seed,
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
    r->rid = sched_strdup(sp->rid);
    r->cache_salt = sched_strdup(sp->cache_salt);
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
            if (!(r->params.stop[i] = sched_strdup(sp->params.stop[i]))) goto fail;
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
    sched_req_free(r);
    return NULL;
}

void sched_req_enqueue(sched *s, sreq *r)
{
    r->state = RS_WAITING;
    r->seq_no = s->next_seq_no++;
    if (sched_push_req(&s->waiting, &s->n_waiting, &s->cap_waiting, r)) {
        log_error("out of memory queueing request %s", r->rid);
        r->to_abort = true;
        /* cannot queue it: finish it right away */
        sched_emit_reject(s, r->id, r->index, r->rid, r->n_input, "Internal error: out of memory.", 500);
        sched_req_free(r);
    }
}

/* ---- finishing ------------------------------------------------------------- */

/* The end of a request: KV to the tree, final event, stats, siblings. */
void sched_req_finish(sched *s, sreq *r, sched_finish_kind kind, int64_t len, int32_t tok,
                       const char *str, int status)
{
    sched_kv_release(s, r, true);
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
        sched_finish_info fin = {kind, len, tok, str, status};
        sched_emit_tokens(s, r, &fin);
        s->st.n_finished++;
        s->st.prompt_tokens += r->n_input;
        s->st.cached_tokens += r->cached_tokens;
    }
    /* n > 1: the warm-up has cached the prompt, the siblings may start */
    for (int i = 0; i < r->n_children; i++) {
        sreq *c = r->children[i];
        r->children[i] = NULL;
        if (kind == SCHED_FINISH_ABORT) {
            sched_emit_reject(s, c->id, c->index, c->rid, c->n_input, str ? str : "Aborted.", status);
            sched_req_free(c);
        } else {
            c->t_submit = r->t_submit;
            sched_req_enqueue(s, c);
        }
    }
    r->n_children = 0;
    sched_req_free(r);
}

void sched_req_abort(sched *s, sreq *r)
{
    const char *msg = r->abort_msg ? r->abort_msg : "Request aborted.";
    sched_req_finish(s, r, SCHED_FINISH_ABORT, 0, -1, msg, r->abort_status ? r->abort_status : 200);
}
