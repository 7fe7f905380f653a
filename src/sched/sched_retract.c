/* sched_retract — giving KV back under pressure: retraction for decode
 * (SGLang's retract_decode), priority preemption (preempt_to_schedule),
 * retract-all for pause / weight swap.
 *
 * DESIGN
 * Layer 8 (sched_impl.h "Layers"): includes sched_util, sched_kv,
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
    r->life.num_retractions++;
    s->stats.st.num_retractions++;
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
        for (int i = 0; i < s->q.n_running; i++) {
            sreq *r = s->q.running[i];
            need += max64(0, kv_pool_pages_for(s->eng.pool, r->kv.kv_len + 1) - r->kv.n_pages);
        }
        if (need <= sched_kv_avail_pages(s)) break;
        if (s->q.n_running == 0) break;
        if (s->q.n_running == 1 && s->q.chunked) {
            /* the half-prefilled prompt yields to the last decoder */
            sreq *c = s->q.chunked;
            s->q.chunked = NULL;
            log_info("KV cache full: retracting chunked request %s", c->who.rid);
            sched_retract(s, c);
            n_retracted++;
            continue;
        }
        if (s->q.n_running == 1) {
            sreq *r = s->q.running[0];
            s->q.n_running = 0;
            r->life.abort_msg = sched_strdup("The KV cache pool is too small for this request.");
            r->life.abort_status = 400;
            log_error("request %s does not fit the KV cache even alone; aborted", r->who.rid);
            sched_req_abort(s, r);
            continue;
        }
        int best = 0;
        for (int i = 1; i < s->q.n_running; i++) {
            sreq *a = s->q.running[i], *b = s->q.running[best];
            int64_t oa = a->tok.len - a->tok.n_input, ob = b->tok.len - b->tok.n_input;
            if (oa > ob || (oa == ob && a->tok.n_input < b->tok.n_input)) best = i;
        }
        sreq *r = s->q.running[best];
        sched_remove_req(s->q.running, &s->q.n_running, best);
        log_info("KV cache full: retracting request %s (%" PRId64 " output tokens)", r->who.rid, r->tok.len - r->tok.n_input);
        sched_retract(s, r);
        n_retracted++;
    }
    if (n_retracted) {
        /* SGLang: (decoded + RETRACT_DECODE_STEPS * running) / sum(max_new) */
        int64_t decoded = 0, total_max = 0;
        for (int i = 0; i < s->q.n_running; i++) {
            sreq *r = s->q.running[i];
            decoded += r->tok.len - r->tok.n_input;
            total_max += r->tok.max_new;
        }
        double ratio = total_max > 0 ? (double)(decoded + RETRACT_DECODE_STEPS * s->q.n_running) / (double)total_max : 1.0;
        s->adm.new_token_ratio = ratio < 1.0 ? ratio : 1.0;
        if (s->adm.new_token_ratio < s->adm.min_ratio) s->adm.new_token_ratio = s->adm.min_ratio;
    }
    return n_retracted;
}

/* Is a lower than b (a may be preempted for b)? */
static bool prio_below(sched *s, const sreq *a, const sreq *b)
{
    /* in 128 bits: a missing priority is INT64_MIN / INT64_MAX */
    __int128 th = s->a.priority_scheduling_preemption_threshold;
    if (s->a.schedule_low_priority_values_first) return (__int128)a->pol.priority - b->pol.priority > th;
    return (__int128)b->pol.priority - a->pol.priority > th;
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
        for (int i = 0; i < s->q.n_running; i++) {
            sreq *r = s->q.running[i];
            if (!prio_below(s, r, w)) continue;
            if (pick < 0) {
                pick = i;
                continue;
            }
            sreq *p = s->q.running[pick];
            bool lower = s->a.schedule_low_priority_values_first ? r->pol.priority > p->pol.priority
                                                                 : r->pol.priority < p->pol.priority;
            if (lower || (r->pol.priority == p->pol.priority && r->pol.seq_no > p->pol.seq_no)) pick = i;
        }
        if (pick < 0) break;
        sreq *r = s->q.running[pick];
        sched_remove_req(s->q.running, &s->q.n_running, pick);
        got += (double)(r->kv.kv_len - r->kv.rr.protected_len) +
               (double)min64(r->tok.max_new - (r->tok.len - r->tok.n_input), CLIP_MAX_NEW_TOKENS) * s->adm.new_token_ratio;
        log_info("priority preemption: request %s (priority %" PRId64 ") yields to %s (priority %" PRId64 ")",
                 r->who.rid, r->pol.priority, w->who.rid, w->pol.priority);
        sched_retract(s, r);
        s->stats.st.num_preemptions++;
        n++;
    }
    return n;
}

/* Every running (and half-prefilled) request back to the waiting queue. */
int sched_retract_all(sched *s)
{
    int n = 0;
    if (s->q.chunked) {
        sreq *c = s->q.chunked;
        s->q.chunked = NULL;
        sched_retract(s, c);
        n++;
    }
    while (s->q.n_running > 0) {
        sreq *r = s->q.running[s->q.n_running - 1];
        s->q.n_running--;
        sched_retract(s, r);
        n++;
    }
    return n;
}
