/* sched_req — the request object (sreq): built from a spec, queued,
 * finished, freed.
 *
 * DESIGN
 * Layer 5 (sched_impl.h "Layers"): includes sched_util, sched_event,
 * sched_kv.  A request is owned by exactly one place at a time (the inbox,
 * a held list, the waiting / running arrays, s->q.chunked or a warm-up's
 * children); sched_req_finish is the one way out for a request that ran. */
#include "sched/sched_req.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sched/sched_event.h"
#include "sched/sched_kv.h"
#include "lora/lora.h"
#include "sched/sched_util.h"
#include "util/log.h"
#include "util/timeutil.h"

/* ---- requests -------------------------------------------------------------- */

/* The radix namespace of a request: its cache_salt, prefixed by its LoRA
 * adapter's load uid when it has one ("\x01lora:<uid>" then "\x1f" + salt),
 * so prefixes computed under one adapter are never matched under another
 * (nor the base's, nor a later adapter reusing the name).  Owned or NULL. */
static char *sched_lora_ns(const struct lora_adapter *ad, const char *salt)
{
    if (!ad) return sched_strdup(salt);
    size_t n = (salt ? strlen(salt) : 0) + 48;
    char *s = malloc(n);
    if (s) snprintf(s, n, "\x01lora:%llu%s%s", (unsigned long long)ad->uid, salt ? "\x1f" : "", salt ? salt : "");
    return s;
}

void sched_req_free(sreq *r)
{
    if (!r) return;
    for (int i = 0; i < r->life.n_children; i++) sched_req_free(r->life.children[i]);
    free(r->life.children);
    sampling_state_free(&r->samp.st);
    sampling_params_free(&r->samp.params);
    free(r->who.rid);
    free(r->tok.seq);
    free(r->embd.emb);
    free(r->kv.cache_salt);
    lora_adapter_unref(r->lora.ad);
    free(r->lpr.tids);
    free(r->lpr.lp);
    free(r->lpr.top_ids);
    free(r->lpr.top_lp);
    free(r->lpr.tid_lp);
    free(r->lpr.in_lp);
    free(r->lpr.in_top_ids);
    free(r->lpr.in_top_lp);
    free(r->lpr.in_tid_lp);
    free(r->kv.pages);
    free(r->kv.slots);
    free(r->spec.draft);
    free(r->spec.parent);
    free(r->spec.mpar);
    grammar_job_release(r->gram.job);
    grammar_matcher_free(r->gram.m);
    grammar_entry_release(r->gram.entry);
    free(r->gram.text);
    free(r->gram.after);
    free(r->life.abort_msg);
    free(r);
}

/* A request from a spec (copies what it needs; the spec keeps its own). */
sreq *sched_req_new(sched *s, const sched_req_spec *sp, uint64_t id, int index, uint64_t seed,
                      int64_t max_new)
{
    sreq *r = calloc(1, sizeof *r);
    if (!r) return NULL;
    r->who.id = id;
    r->who.index = index;
    r->tok.n_input = sp->n_input;
    r->tok.len = sp->n_input;
    r->tok.cap = sp->n_input + max_new + 1;
    r->tok.seq = malloc(sizeof(int32_t) * (size_t)r->tok.cap);
    r->who.rid = sched_strdup(sp->rid);
    r->kv.cache_salt = sched_lora_ns(sp->lora, sp->cache_salt);
    if (sp->lora) {
        lora_adapter_ref(sp->lora);
        r->lora.ad = sp->lora;
    }
    r->tok.max_new = max_new;
    r->pol.priority = sp->priority;
    r->pol.has_priority = sp->has_priority;
    if (s->a.enable_priority_scheduling && !sp->has_priority) {
        /* SGLang: --default-priority-value when given (TokenizerManager),
         * else the lowest priority there is (Scheduler) */
        if (s->a.has_default_priority) r->pol.priority = s->a.default_priority_value;
        else r->pol.priority = s->a.schedule_low_priority_values_first ? INT64_MAX : INT64_MIN;
    }
    r->lpr.return_logprob = sp->return_logprob;
    r->lpr.top_n = sp->return_logprob ? sp->top_logprobs_num : 0;
    r->out.stream = sp->stream;
    r->out.output_ctx = sp->output_ctx;
    r->embd.embed_dims = sp->embed_dims;
    r->out.stream_interval = sp->params.has_stream_interval && sp->params.stream_interval > 0
                             ? (int)sp->params.stream_interval
                             : s->a.stream_interval;
    sampling_params_init(&r->samp.params);
    if (!r->tok.seq || !r->who.rid || ((sp->cache_salt || sp->lora) && !r->kv.cache_salt)) goto fail;
    memcpy(r->tok.seq, sp->input_ids, sizeof(int32_t) * (size_t)sp->n_input);
    /* deep copy of the sampling params through their own JSON-free fields */
    r->samp.params = sp->params;
    r->samp.params.stop = NULL, r->samp.params.n_stop = 0;
    r->samp.params.stop_regex = NULL, r->samp.params.n_stop_regex = 0;
    r->samp.params.stop_token_ids = NULL, r->samp.params.n_stop_token_ids = 0;
    r->samp.params.json_schema = r->samp.params.regex = r->samp.params.ebnf = r->samp.params.structural_tag = NULL;
    r->samp.params.custom_params = NULL;
    r->samp.params.logit_bias = NULL, r->samp.params.n_logit_bias = 0;
    if (sp->params.n_stop) {
        r->samp.params.stop = calloc((size_t)sp->params.n_stop, sizeof(char *));
        if (!r->samp.params.stop) goto fail;
        r->samp.params.n_stop = sp->params.n_stop;
        for (int i = 0; i < sp->params.n_stop; i++)
            if (!(r->samp.params.stop[i] = sched_strdup(sp->params.stop[i]))) goto fail;
    }
    if (sp->params.n_stop_token_ids) {
        r->samp.params.stop_token_ids = malloc(sizeof(int32_t) * (size_t)sp->params.n_stop_token_ids);
        if (!r->samp.params.stop_token_ids) goto fail;
        memcpy(r->samp.params.stop_token_ids, sp->params.stop_token_ids,
               sizeof(int32_t) * (size_t)sp->params.n_stop_token_ids);
        r->samp.params.n_stop_token_ids = sp->params.n_stop_token_ids;
    }
    if (sp->params.n_logit_bias) {
        r->samp.params.logit_bias = malloc(sizeof(sampling_logit_bias) * (size_t)sp->params.n_logit_bias);
        if (!r->samp.params.logit_bias) goto fail;
        memcpy(r->samp.params.logit_bias, sp->params.logit_bias,
               sizeof(sampling_logit_bias) * (size_t)sp->params.n_logit_bias);
        r->samp.params.n_logit_bias = sp->params.n_logit_bias;
    }
    if (sp->n_token_ids_logprob && sp->return_logprob) {
        r->lpr.tids = malloc(sizeof(int32_t) * (size_t)sp->n_token_ids_logprob);
        if (!r->lpr.tids) goto fail;
        memcpy(r->lpr.tids, sp->token_ids_logprob, sizeof(int32_t) * (size_t)sp->n_token_ids_logprob);
        r->lpr.n_tid = sp->n_token_ids_logprob;
    }
    if (r->lpr.return_logprob) {
        size_t oc = (size_t)max_new + 1;
        r->lpr.lp = malloc(sizeof(float) * oc);
        if (!r->lpr.lp) goto fail;
        if (r->lpr.top_n) {
            r->lpr.top_ids = malloc(sizeof(int32_t) * oc * (size_t)r->lpr.top_n);
            r->lpr.top_lp = malloc(sizeof(float) * oc * (size_t)r->lpr.top_n);
            if (!r->lpr.top_ids || !r->lpr.top_lp) goto fail;
        }
        if (r->lpr.n_tid) {
            r->lpr.tid_lp = malloc(sizeof(float) * oc * (size_t)r->lpr.n_tid);
            if (!r->lpr.tid_lp) goto fail;
        }
    }
    r->lpr.lp_start = sp->logprob_start_len < 0 ? sp->n_input - 1 : sp->logprob_start_len;
    r->lpr.n_in_lp = r->lpr.return_logprob ? sp->n_input - 1 - r->lpr.lp_start : 0;
    if (r->lpr.n_in_lp < 0) r->lpr.n_in_lp = 0;
    r->lpr.in_lp_done = r->lpr.n_in_lp == 0;
    if (r->lpr.n_in_lp > 0) {
        size_t n = (size_t)r->lpr.n_in_lp;
        r->lpr.in_lp = malloc(sizeof(float) * n);
        if (!r->lpr.in_lp) goto fail;
        if (r->lpr.top_n) {
            r->lpr.in_top_ids = malloc(sizeof(int32_t) * n * (size_t)r->lpr.top_n);
            r->lpr.in_top_lp = malloc(sizeof(float) * n * (size_t)r->lpr.top_n);
            if (!r->lpr.in_top_ids || !r->lpr.in_top_lp) goto fail;
        }
        if (r->lpr.n_tid) {
            r->lpr.in_tid_lp = malloc(sizeof(float) * n * (size_t)r->lpr.n_tid);
            if (!r->lpr.in_tid_lp) goto fail;
        }
    }
    /* the grammar key (compiled by sched_grammar; the spec's strings are freed after submit) */
    const char *gname = NULL;
    const char *gtext = sampling_params_grammar(&sp->params, &gname);
    if (gtext && !s->a.is_embedding) {
        r->gram.kind = sp->params.json_schema ? GRAMMAR_KIND_JSON
                       : sp->params.regex     ? GRAMMAR_KIND_REGEX
                       : sp->params.ebnf      ? GRAMMAR_KIND_EBNF
                                              : GRAMMAR_KIND_STRUCTURAL_TAG;
        r->gram.opts = (sp->params.json_strict && sp->params.json_schema ? GRAMMAR_OPT_STRICT : 0) |
                       (sp->params.json_compact && (sp->params.json_schema || sp->params.structural_tag)
                            ? GRAMMAR_OPT_COMPACT /* forced calls, and the strict tools' tag (api_chat_tools.c) */
                            : 0);
        r->gram.len = strlen(gtext);
        if (!(r->gram.text = sched_strdup(gtext))) goto fail;
        if (sp->n_grammar_after > 0 && sp->grammar_after) {
            r->gram.after = malloc(sizeof(int32_t) * (size_t)sp->n_grammar_after);
            if (!r->gram.after) goto fail;
            memcpy(r->gram.after, sp->grammar_after, sizeof(int32_t) * (size_t)sp->n_grammar_after);
            r->gram.n_after = sp->n_grammar_after;
        }
    }
    if (sampling_state_init(&r->samp.st, &r->samp.params, s->lim.V, s->lim.eos, s->lim.n_eos, seed)) goto fail;
    /* repetition penalty over prompt + output (HF semantics, see docs/notes/kv.md) */
    if (r->samp.params.repetition_penalty != 1.0 && sampling_state_add_prompt(&r->samp.st, r->tok.seq, r->tok.n_input))
        goto fail;
    r->life.state = RS_WAITING;
    r->time.t_submit = time_now_sec();
    return r;
fail:
    sched_req_free(r);
    return NULL;
}

void sched_req_enqueue(sched *s, sreq *r)
{
    r->life.state = RS_WAITING;
    r->pol.seq_no = s->q.next_seq_no++;
    if (sched_push_req(&s->q.waiting, &s->q.n_waiting, &s->q.cap_waiting, r)) {
        log_error("out of memory queueing request %s", r->who.rid);
        r->life.to_abort = true;
        /* cannot queue it: finish it right away */
        sched_emit_reject(s, r->who.id, r->who.index, r->who.rid, r->tok.n_input, "Internal error: out of memory.", 500);
        sched_req_free(r);
    }
}

/* ---- finishing ------------------------------------------------------------- */

/* The end of a request: KV to the tree, final event, stats, siblings. */
void sched_req_finish(sched *s, sreq *r, sched_finish_kind kind, int64_t len, int32_t tok,
                       const char *str, int status)
{
    sched_kv_release(s, r, true);
    r->life.state = RS_DONE;
    if (!r->who.internal && s->a.log_time_stats && r->time.t_forward > 0) {
        /* SGLang's Req.log_time_stats, unified (non-disaggregated) mode */
        double now = time_now_sec();
        struct timespec wall;
        clock_gettime(CLOCK_REALTIME, &wall);
        double entry = (double)wall.tv_sec + (double)wall.tv_nsec * 1e-9 - (now - r->time.t_submit);
        log_info("Req Time Stats(rid=%s, input len=%" PRId64 ", output len=%" PRId64
                 ", type=unified): queue_duration=%.2fms, forward_duration=%.2fms, entry_time=%.3f",
                 r->who.rid, r->tok.n_input, r->tok.len - r->tok.n_input, (r->time.t_forward - r->time.t_submit) * 1e3,
                 (now - r->time.t_forward) * 1e3, entry);
    }
    if (!r->who.internal) {
        sched_finish_info fin = {kind, len, tok, str, status};
        sched_emit_tokens(s, r, &fin);
        s->stats.st.n_finished++;
        s->stats.st.prompt_tokens += r->tok.n_input;
        s->stats.st.cached_tokens += r->kv.cached_tokens;
    }
    /* n > 1: the warm-up has cached the prompt, the siblings may start */
    for (int i = 0; i < r->life.n_children; i++) {
        sreq *c = r->life.children[i];
        r->life.children[i] = NULL;
        if (kind == SCHED_FINISH_ABORT) {
            sched_emit_reject(s, c->who.id, c->who.index, c->who.rid, c->tok.n_input, str ? str : "Aborted.", status);
            sched_req_free(c);
        } else {
            c->time.t_submit = r->time.t_submit;
            sched_req_enqueue(s, c);
        }
    }
    r->life.n_children = 0;
    sched_req_free(r);
}

void sched_req_abort(sched *s, sreq *r)
{
    const char *msg = r->life.abort_msg ? r->life.abort_msg : "Request aborted.";
    sched_req_finish(s, r, SCHED_FINISH_ABORT, 0, -1, msg, r->life.abort_status ? r->life.abort_status : 200);
}
