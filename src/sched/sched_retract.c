/* sched_retract — giving KV back under pressure: retraction for decode
 * (SGLang's retract_decode), priority preemption (preempt_to_schedule),
 * retract-all for pause / weight swap.
 *
 * DESIGN
 * Layer 7 (sched_impl.h "Layers"): includes sched_util, sched_kv,
 * sched_req.  A retracted request keeps its outputs and sampling state,
 * caches its KV in the tree and is prefilled again over input + output. */
#include "sched/sched_retract.h"

#include <inttypes.h>

#include "sched/sched_kv.h"
#include "sched/sched_req.h"
#include "sched/sched_util.h"
#include "util/log.h"

#define RETRACT_DECODE_STEPS 20 /* SGLang's retract_decode_steps */

/* ---- retraction and preemption --------------------------------------------- */

/* Back to the waiting queue: KV cached in the tree (it may still be
 * reused), outputs kept, prefilled again over input + output later. */
void sched_retract(sched *s, sreq *r)
{
    sched_kv_release(s, r, true);
    r->num_retractions++;
    s->st.num_retractions++;
    sched_req_enqueue(s, r);
}

/* Decode needs one slot per running request; retract the longest outputs
 * (ties: the shorter input) until the pool can give the pages.  The last
 * request standing, if it still cannot fit, is aborted.  Returns the
 * number retracted. */
int sched_retract_for_decode(sched *s)
{
    int n_retracted = 0;
    for (;;) {
        int64_t need = 0;
        for (int i = 0; i < s->n_running; i++) {
            sreq *r = s->running[i];
            need += kv_pool_pages_for(s->pool, r->kv_len + 1) - r->n_pages;
        }
        if (need <= sched_kv_avail_pages(s)) break;
        if (s->n_running == 0) break;
        if (s->n_running == 1 && s->chunked) {
            /* the half-prefilled prompt yields to the last decoder */
            sreq *c = s->chunked;
            s->chunked = NULL;
            log_info("KV cache full: retracting chunked request %s", c->rid);
            sched_retract(s, c);
            n_retracted++;
            continue;
        }
        if (s->n_running == 1) {
            sreq *r = s->running[0];
            s->n_running = 0;
            r->abort_msg = sched_strdup("The KV cache pool is too small for this request.");
            r->abort_status = 400;
            log_error("request %s does not fit the KV cache even alone; aborted", r->rid);
            sched_req_abort(s, r);
            continue;
        }
        int best = 0;
        for (int i = 1; i < s->n_running; i++) {
            sreq *a = s->running[i], *b = s->running[best];
            int64_t oa = a->len - a->n_input, ob = b->len - b->n_input;
            if (oa > ob || (oa == ob && a->n_input < b->n_input)) best = i;
        }
        sreq *r = s->running[best];
        sched_remove_req(s->running, &s->n_running, best);
        log_info("KV cache full: retracting request %s (%" PRId64 " output tokens)", r->rid, r->len - r->n_input);
        sched_retract(s, r);
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
int sched_preempt_for(sched *s, const sreq *w, double need_tokens, bool need_slot)
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
        sched_remove_req(s->running, &s->n_running, pick);
        got += (double)(r->kv_len - r->rr.protected_len) +
               (double)min64(r->max_new - (r->len - r->n_input), CLIP_MAX_NEW_TOKENS) * s->new_token_ratio;
        log_info("priority preemption: request %s (priority %" PRId64 ") yields to %s (priority %" PRId64 ")",
                 r->rid, r->priority, w->rid, w->priority);
        sched_retract(s, r);
        s->st.num_preemptions++;
        n++;
    }
    return n;
}

/* Every running (and half-prefilled) request back to the waiting queue. */
int sched_retract_all(sched *s)
{
    int n = 0;
    if (s->chunked) {
        sreq *c = s->chunked;
        s->chunked = NULL;
        sched_retract(s, c);
        n++;
    }
    while (s->n_running > 0) {
        sreq *r = s->running[s->n_running - 1];
        s->n_running--;
        sched_retract(s, r);
        n++;
    }
    return n;
}
