/* sched_grammar — constrained decoding in the scheduler (SGLang's
 * GrammarManager + the grammar part of Req / the sampler).
 *
 * DESIGN
 * Layer 6 (sched_impl.h "Layers"): includes sched_util, sched_event,
 * sched_req.  The scheduler thread never compiles:
 *
 *   inbox drain: a request with a grammar ──▶ s->gram.waiting (+ a job on
 *                the grammar queue; SGLang's grammar_queue)
 *   each drain:  scan s->gram.waiting: job done and compiled -> matchers,
 *                then the waiting queue (sched_inbox's admit: queue-full
 *                rules apply then); failed -> finish 400 "Failed to
 *                compile <kind> grammar: <reason>"; older than timeout_s
 *                -> finish 400 "Grammar preprocessing timed out: ..."
 *                (the job is released; a compile in progress finishes on
 *                its thread and is cached)
 *   the grammar thread's notify sets gram.wake and signals in.cv, so an
 *   idle scheduler wakes when a grammar is ready.
 *
 * Per token (sched_output): processors -> mask (this file) -> sample ->
 * accept (this file) -> stop checks (terminated = finish stop).  The mask
 * is applied to the processed logits, so logprobs come from the masked
 * distribution, as SGLang's (its vocab mask is part of the logit bias
 * step before the sampler).
 *
 * "Grammar after": a request may say the grammar starts only after its
 * output holds a token sequence (a reasoning parser's end of thinking);
 * until then no mask applies and the matcher stays at its start. */
#include "sched/sched_grammar.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sched/sched_event.h"
#include "sched/sched_req.h"
#include "sched/sched_util.h"
#include "util/log.h"
#include "util/timeutil.h"

/* ---- set-up (any layer may call the public API) --------------------------- */

static void grammar_wake(void *ctx)
{
    sched *s = ctx;
    pthread_mutex_lock(&s->in.mu);
    s->gram.wake = true;
    pthread_cond_signal(&s->in.cv);
    pthread_mutex_unlock(&s->in.mu);
}

void sched_set_grammar(sched *s, grammar_queue *q, const grammar_vocab *v, double timeout_s)
{
    free(s->gram.mask);
    s->gram.mask = NULL;
    s->gram.q = q && v ? q : NULL;
    s->gram.v = q ? v : NULL;
    s->gram.gv = s->gram.v ? grammar_vocab_size(s->gram.v) : 0;
    s->gram.timeout_s = timeout_s > 0 ? timeout_s : 300.0;
    const char *cf = getenv("SGLC_GRAMMAR_CLOSE_FULL");
    s->gram.close_full = cf && *cf == '1';
    if (!s->gram.q) return;
    s->gram.mask = malloc(sizeof(uint32_t) * grammar_mask_words(v));
    if (!s->gram.mask) {
        log_error("out of memory for the grammar mask; constrained decoding is off");
        s->gram.q = NULL;
        s->gram.v = NULL;
        return;
    }
    grammar_queue_set_notify(q, grammar_wake, s);
}

/* ---- the grammar queue ---------------------------------------------------- */

static void fail_req(sched *s, sreq *r, const char *msg, int status)
{
    sched_publish_stats(s); /* the grammar queue no longer holds r: visible before its reply */
    free(r->life.abort_msg);
    r->life.abort_msg = sched_strdup(msg);
    r->life.abort_status = status;
    sched_req_abort(s, r);
}

void sched_grammar_wait(sched *s, sreq *r)
{
    grammar_key k = {r->gram.kind, r->gram.text, r->gram.len, r->gram.opts};
    r->gram.job = s->gram.q ? grammar_queue_submit(s->gram.q, &k) : NULL;
    if (!r->gram.job || sched_push_req(&s->gram.waiting, &s->gram.n_waiting, &s->gram.cap_waiting, r)) {
        fail_req(s, r, s->gram.q ? "Internal error: out of memory." : "constrained decoding is off", 500);
        return;
    }
    r->gram.t_queued = time_now_sec();
}

sreq *sched_grammar_remove(sched *s, int i)
{
    sreq *r = s->gram.waiting[i];
    sched_remove_req(s->gram.waiting, &s->gram.n_waiting, i);
    grammar_job_release(r->gram.job);
    r->gram.job = NULL;
    return r;
}

/* A matcher for r over entry e (a reference of its own). */
static int make_matcher(sched *s, sreq *r, grammar_entry *e)
{
    r->gram.entry = grammar_entry_ref(e);
    r->gram.m = grammar_matcher_new(grammar_entry_value(e), s->gram.v);
    r->gram.active = r->gram.n_after == 0;
    r->gram.start = r->tok.n_input;
    return r->gram.m ? 0 : -1;
}

/* Python's repr of a short string (SGLang prints the key tuple). */
static void py_repr(char *out, size_t cap, const char *s, size_t n)
{
    size_t o = 0;
    if (cap < 8) return;
    out[o++] = '\'';
    for (size_t i = 0; i < n && o + 6 < cap; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '\'' || c == '\\') out[o++] = '\\', out[o++] = (char)c;
        else if (c == '\n') out[o++] = '\\', out[o++] = 'n';
        else if (c < 0x20) o += (size_t)snprintf(out + o, cap - o, "\\x%02x", c);
        else out[o++] = (char)c;
    }
    out[o++] = '\'';
    out[o] = 0;
}

sreq *sched_grammar_next_ready(sched *s)
{
    double now = time_now_sec();
    for (int i = 0; i < s->gram.n_waiting;) {
        sreq *r = s->gram.waiting[i];
        char msg[1400];
        if (grammar_job_done(r->gram.job)) {
            grammar_entry *e = grammar_job_entry(r->gram.job);
            if (!e || !grammar_entry_value(e)) {
                snprintf(msg, sizeof msg, "Failed to compile %s grammar: %s", grammar_kind_name(r->gram.kind),
                         e ? grammar_entry_error(e) : "out of memory");
                sched_grammar_remove(s, i);
                fail_req(s, r, msg, 400);
                continue;
            }
            bool ok = true;
            if (!r->who.internal) ok = make_matcher(s, r, e) == 0;
            for (int c = 0; ok && c < r->life.n_children; c++) ok = make_matcher(s, r->life.children[c], e) == 0;
            sched_grammar_remove(s, i);
            if (!ok) {
                fail_req(s, r, "Internal error: out of memory.", 500);
                continue;
            }
            return r;
        }
        if (now - r->gram.t_queued > s->gram.timeout_s) {
            char key[256];
            py_repr(key, sizeof key, r->gram.text, r->gram.len < 200 ? r->gram.len : 200);
            snprintf(msg, sizeof msg, "Grammar preprocessing timed out: req.grammar_key=('%s', %s)",
                     grammar_kind_name(r->gram.kind), key);
            log_warn("request %s: %s", r->who.rid, msg);
            sched_grammar_remove(s, i);
            fail_req(s, r, msg, 400);
            continue;
        }
        i++;
    }
    return NULL;
}

void sched_grammar_free_all(sched *s)
{
    /* a compile still running on the grammar thread must not wake a
     * freed scheduler */
    if (s->gram.q) grammar_queue_set_notify(s->gram.q, NULL, NULL);
    while (s->gram.n_waiting > 0) sched_req_free(sched_grammar_remove(s, s->gram.n_waiting - 1));
    free(s->gram.waiting);
    s->gram.waiting = NULL;
    s->gram.cap_waiting = 0;
    free(s->gram.mask);
    s->gram.mask = NULL;
}

/* ---- per token ------------------------------------------------------------ */

/* Within this many bytes of the shortest completion the mask keeps only
 * tokens after which the grammar still completes in the tokens left
 * (grammar_close.c): a request never stops at max_new_tokens with its
 * grammar unfinished, unless one token took it further than this margin. */
#define GRAMMAR_CLOSE_MARGIN 64

/* Before the grammar starts (a reasoning section first): when the tokens
 * left are only enough for the rest of `after` and the grammar, emit
 * `after` now — continuing a partial match at the end of the output. */
static bool force_after(sched *s, sreq *r, float *row, int64_t left)
{
    if (r->gram.n_after <= 0) return false;
    int32_t need = grammar_matcher_min_bytes_to_end(r->gram.m);
    if (need < 0 || left > (int64_t)r->gram.n_after + need + GRAMMAR_CLOSE_MARGIN) return false;
    int64_t n_out = r->tok.len - r->tok.n_input;
    int k = r->gram.n_after - 1 < n_out ? r->gram.n_after - 1 : (int)n_out;
    for (; k > 0; k--) /* longest output suffix that is a prefix of after */
        if (!memcmp(r->tok.seq + r->tok.len - k, r->gram.after, sizeof(int32_t) * (size_t)k)) break;
    int32_t want = r->gram.after[k];
    if (want < 0 || want >= s->lim.V) return false;
    for (int32_t i = 0; i < s->lim.V; i++)
        if (i != want) row[i] = -INFINITY;
    return true;
}

/* The lazy close check is exact for these samplers: greedy takes the
 * argmax of the allowed-and-fitting set (argmax of the plain mask, dropped
 * while it does not fit); plain temperature sampling by rejection draws
 * from the same distribution (the row restricted to fitting tokens).
 * Top-k / top-p / min-p depend on the whole set and logprobs are of the
 * narrowed row, so those take the full narrowed mask. */
static bool lazy_close_ok(const sched *s, const sreq *r)
{
    const sampling_params *p = &r->samp.params;
    if (r->lpr.return_logprob) return false;
    return p->top_k <= 1 || (p->top_k >= s->lim.V && p->top_p >= 1.0 && p->min_p <= 0);
}

int32_t sched_grammar_mask(sched *s, sreq *r, float *row, bool lazy)
{
    if (!r->gram.m) return 0;
    int64_t left = r->tok.max_new - (r->tok.len - r->tok.n_input); /* tokens left, this one included */
    if (!r->gram.active) {
        force_after(s, r, row, left);
        return 0;
    }
    int32_t need = left <= (int64_t)GRAMMAR_CLOSE_MARGIN * 8 ? grammar_matcher_min_bytes_to_end(r->gram.m) : -1;
    /* need 0 too: where the grammar may end now, a token can still take it
     * away from the end (a `[a-z]+x` after its x) with no budget left to come back */
    bool closing = need >= 0 && left <= (int64_t)need + GRAMMAR_CLOSE_MARGIN;
    int32_t budget = closing && lazy && !s->gram.close_full && lazy_close_ok(s, r) ? (int32_t)left : 0;
    if (closing && !budget) grammar_matcher_fill_mask_within(r->gram.m, s->gram.mask, (int32_t)left);
    else grammar_matcher_fill_mask(r->gram.m, s->gram.mask);
    int32_t n = s->gram.gv < s->lim.V ? s->gram.gv : s->lim.V;
    grammar_apply_mask(row, n, s->gram.mask);
    for (int32_t i = n; i < s->lim.V; i++) row[i] = -INFINITY; /* padding rows of the LM head */
    return budget;
}

bool sched_grammar_fits(sched *s, sreq *r, int32_t tok, int32_t budget)
{
    (void)s;
    return !r->gram.m || grammar_matcher_token_fits(r->gram.m, tok, budget);
}

/* Greedy's search when the argmax and the next few did not fit: rounds of
 * the GREEDY_ROUND best remaining ids (value desc, id asc: argmax_first's
 * order), checked in order; a checked id is set to -inf.  The first that
 * fits is the argmax of the narrowed row.  After GREEDY_ROUNDS rounds the
 * full narrowed mask decides. */
#define GREEDY_ROUND 256
#define GREEDY_ROUNDS 4

static inline bool rank_gt(const float *row, int32_t a, int32_t b) /* a before b */
{
    return row[a] > row[b] || (row[a] == row[b] && a < b);
}

/* The k best finite ids of row (k <= GREEDY_ROUND) into out, best first; returns k. */
static int best_ids(const float *row, int32_t V, int32_t *out)
{
    int32_t h[GREEDY_ROUND]; /* min-heap by rank: h[0] the worst kept */
    int n = 0;
    for (int32_t i = 0; i < V; i++) {
        if (!(row[i] > -INFINITY)) continue;
        if (n == GREEDY_ROUND && !rank_gt(row, i, h[0])) continue;
        int c;
        if (n < GREEDY_ROUND) { /* sift up */
            c = n++;
            while (c > 0 && rank_gt(row, h[(c - 1) / 2], i)) h[c] = h[(c - 1) / 2], c = (c - 1) / 2;
            h[c] = i;
            continue;
        }
        c = 0; /* replace the root, sift down */
        for (;;) {
            int l = 2 * c + 1, m = l;
            if (l >= n) break;
            if (l + 1 < n && rank_gt(row, h[l], h[l + 1])) m = l + 1;
            if (!rank_gt(row, i, h[m])) break;
            h[c] = h[m], c = m;
        }
        h[c] = i;
    }
    for (int k = n; k > 0; k--) { /* pop the worst to the back */
        out[k - 1] = h[0];
        int32_t last = h[k - 1];
        int c = 0, m2 = k - 1;
        for (;;) {
            int l = 2 * c + 1, m = l;
            if (l >= m2) break;
            if (l + 1 < m2 && rank_gt(row, h[l], h[l + 1])) m = l + 1;
            if (!rank_gt(row, last, h[m])) break;
            h[c] = h[m], c = m;
        }
        h[c] = last;
    }
    return n;
}

int32_t sched_grammar_greedy_fit(sched *s, sreq *r, float *row, int32_t budget, int32_t first)
{
    int32_t ids[GREEDY_ROUND];
    for (int round = 0; round < GREEDY_ROUNDS; round++) {
        int k = best_ids(row, s->lim.V, ids);
        if (!k) return first; /* every allowed id checked: none fits (the plain mask's argmax) */
        for (int i = 0; i < k; i++) {
            if (grammar_matcher_token_fits(r->gram.m, ids[i], budget)) return ids[i];
            row[ids[i]] = -INFINITY;
        }
    }
    /* the ids left unchecked: the narrowed mask over the plain one; when it
     * still holds `first` (which does not fit) nothing fits */
    grammar_matcher_fill_mask_within(r->gram.m, s->gram.mask, budget);
    if (first >= 0 && first < s->gram.gv && (s->gram.mask[first >> 5] >> (first & 31) & 1)) return first;
    int32_t n = s->gram.gv < s->lim.V ? s->gram.gv : s->lim.V;
    grammar_apply_mask(row, n, s->gram.mask);
    int32_t best = -1;
    for (int32_t i = 0; i < n; i++)
        if (row[i] > -INFINITY && (best < 0 || row[i] > row[best])) best = i;
    return best >= 0 ? best : first;
}

void sched_grammar_narrow(sched *s, sreq *r, float *row, int32_t budget)
{
    grammar_matcher_fill_mask_within(r->gram.m, s->gram.mask, budget);
    int32_t n = s->gram.gv < s->lim.V ? s->gram.gv : s->lim.V;
    grammar_apply_mask(row, n, s->gram.mask);
}

int sched_grammar_accept(sched *s, sreq *r, int32_t tok)
{
    (void)s;
    if (!r->gram.m) return 0;
    if (r->gram.active) return grammar_matcher_accept_token(r->gram.m, tok) ? 0 : -1;
    /* before the grammar starts: does the output now end with `after`? */
    int64_t n_out = r->tok.len - r->tok.n_input;
    if (n_out >= r->gram.n_after &&
        !memcmp(r->tok.seq + r->tok.len - r->gram.n_after, r->gram.after, sizeof(int32_t) * (size_t)r->gram.n_after))
        r->gram.active = true, r->gram.start = r->tok.len;
    return 0;
}

bool sched_grammar_terminated(const sched *s, const sreq *r)
{
    if (!r->gram.m || !r->gram.active || !grammar_matcher_is_terminated(r->gram.m)) return false;
    /* the engine also reports "terminated" when nothing but an end token
     * can follow; then the mask allows only the end tokens and the request
     * ends on the next one, as with xgrammar (whose matcher terminates on
     * accepting the eos): the finish's matched token is always an end
     * token, which the front does not print */
    int32_t last = r->tok.seq[r->tok.len - 1];
    for (int i = 0; i < s->lim.n_eos; i++)
        if (s->lim.eos[i] == last) return true;
    return false;
}

int sched_grammar_prune_tree(sched *s, sreq *r, int n_draft)
{
    (void)s;
    if (!r->gram.m || !r->gram.active || n_draft <= 0) return n_draft;
    int32_t *draft = r->spec.draft, *par = r->spec.parent;
    int *idx = malloc(sizeof(int) * (size_t)n_draft); /* new index of a kept node, -1 dropped */
    int32_t *path = malloc(sizeof(int32_t) * (size_t)n_draft);
    if (!idx || !path) {
        free(idx), free(path);
        return 0;
    }
    int kept = 0;
    for (int k = 0; k < n_draft; k++) {
        idx[k] = -1;
        if (par[k] >= 0 && idx[par[k]] < 0) continue; /* below a dropped node */
        int d = 0;
        for (int v = k; v >= 0; v = par[v]) path[d++] = draft[v];
        int acc = 0;
        while (acc < d && grammar_matcher_accept_token(r->gram.m, path[d - 1 - acc])) acc++;
        if (acc > 0 && grammar_matcher_rollback(r->gram.m, acc)) {
            log_warn("request %s: grammar rollback of %d tokens failed; replaying the output", r->who.rid, acc);
            grammar_matcher_reset(r->gram.m);
            for (int64_t i = r->gram.start; i < r->tok.len; i++) grammar_matcher_accept_token(r->gram.m, r->tok.seq[i]);
            free(idx), free(path);
            return 0;
        }
        if (acc == d) idx[k] = kept++;
    }
    for (int k = 0; k < n_draft; k++) /* compact in order: idx[k] <= k, parents before children */
        if (idx[k] >= 0) {
            draft[idx[k]] = draft[k];
            par[idx[k]] = par[k] < 0 ? -1 : idx[par[k]];
        }
    free(idx), free(path);
    return kept;
}

int sched_grammar_trim_draft(sched *s, sreq *r, int n_draft)
{
    (void)s;
    if (!r->gram.m || !r->gram.active || n_draft <= 0) return n_draft;
    int k = 0;
    while (k < n_draft && grammar_matcher_accept_token(r->gram.m, r->spec.draft[k])) k++;
    if (k > 0 && grammar_matcher_rollback(r->gram.m, k)) {
        /* cannot undo: the matcher is unusable for this walk; keep no drafts
         * and rebuild it from the output (rare: rollback depth) */
        log_warn("request %s: grammar rollback of %d tokens failed; replaying the output", r->who.rid, k);
        grammar_matcher_reset(r->gram.m);
        for (int64_t i = r->gram.start; i < r->tok.len; i++) grammar_matcher_accept_token(r->gram.m, r->tok.seq[i]);
        return 0;
    }
    return k;
}
