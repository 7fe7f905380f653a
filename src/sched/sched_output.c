/* sched_output — "process results", the last of a step's three stages
 * (assemble -> forward -> process results; SGLang's
 * scheduler_output_processor_mixin).
 *
 * DESIGN
 * Layer 7 (sched_impl.h "Layers"): includes sched_util, sched_event,
 * sched_kv, sched_req, sched_grammar.  For every request of the batch, in batch order:
 *
 *   prefill rows: input logprobs; KV += extend; cache the prefill in the
 *                 tree; a prompt not complete yet takes 0 tokens
 *   embeddings:   pool the hidden row, finish (0 tokens)
 *   then 1..k tokens, each through the same four steps, in this order:
 *     1. logit processors   penalties, min_new_tokens mask, logit_bias
 *                           (sampling_apply_processors), then the grammar
 *                           mask of structured output (sched_grammar_mask;
 *                           logprobs are of the masked row, as SGLang's);
 *                           the sampled token is accepted by the matcher;
 *                           near the token budget's end a greedy or plain
 *                           temperature draw is checked against the budget
 *                           (sched_grammar_fits) and redrawn without it
 *                           while it does not fit (sample_append)
 *     2. sample or verify   sampling_sample_processed; with draft tokens
 *                           (speculative decoding, sched_set_draft_hook)
 *                           the next row is used only if the sampled token
 *                           equals the draft token that the forward ran;
 *                           with a draft tree (sched_set_draft_tree_hook)
 *                           the next row is the child whose draft token
 *                           equals the sampled one, and its KV page moves
 *                           to the accepted position (sched_kv_move_page)
 *     3. stop checks        length, then a terminated grammar (stop,
 *                           matched = the last token, as SGLang), then
 *                           eos / stop_token_ids, then the
 *                           output hook's stop-string check (check_stop:
 *                           the one call)
 *     4. emit               one TOKENS event per request per step when
 *                           streaming asks for one; FINISH via
 *                           sched_req_finish when step 3 ended it
 *
 * Verification by "sample, then compare" keeps every request's output
 * identical with or without drafts: each token is drawn from the target
 * model's row with the same sampling state and draw counter as plain
 * decoding would use; drafts only change how many forwards it takes.
 * With --speculative-accept-threshold-* below 1 (sched_set_spec_accept)
 * a sampled request's drafts are verified by SGLang's relaxed rule
 * instead (sampling_verify_processed: coin vs p / threshold_acc, or
 * p >= threshold_single, else the residual): more drafts accepted, the
 * output distribution no longer exact; greedy requests unchanged. */
#include "sched/sched_output.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sched/sched_event.h"
#include "sched/sched_grammar.h"
#include "sched/sched_kv.h"
#include "sched/sched_req.h"
#include "sched/sched_util.h"
#include "util/log.h"

/* ---- 3. stop checks ------------------------------------------------------- */

/* SGLang's Req.check_finished after a new token: length, then eos /
 * stop_token_ids (unless ignore_eos), then stop strings through the
 * front's hook.  Returns true when r is finished (and has been freed). */
static bool check_stop(sched *s, sreq *r)
{
    int64_t n_out = r->tok.len - r->tok.n_input;
    if (n_out >= r->tok.max_new) {
        sched_req_finish(s, r, SCHED_FINISH_LENGTH, r->tok.max_new, -1, NULL, 200);
        return true;
    }
    int32_t last = r->tok.seq[r->tok.len - 1];
    if (sched_grammar_terminated(s, r)) { /* SGLang: FINISH_MATCHED_TOKEN(matched=output_ids[-1]) */
        sched_req_finish(s, r, SCHED_FINISH_STOP_TOKEN, 0, last, NULL, 200);
        return true;
    }
    if (!r->samp.params.ignore_eos) {
        bool hit = false;
        for (int i = 0; i < r->samp.params.n_stop_token_ids && !hit; i++) hit = r->samp.params.stop_token_ids[i] == last;
        for (int i = 0; i < s->lim.n_eos && !hit; i++) hit = s->lim.eos[i] == last;
        if (hit) {
            sched_req_finish(s, r, SCHED_FINISH_STOP_TOKEN, 0, last, NULL, 200);
            return true;
        }
    }
    if (r->samp.params.n_stop > 0 && s->hooks.output.check) {
        /* the output hook's stop-string check: its one call site */
        int k = s->hooks.output.check(s->hooks.output_ctx, r->out.output_ctx, r->who.id, r->who.index,
                                      &r->samp.params, r->tok.seq + r->tok.n_input, n_out);
        if (k >= 0 && k < r->samp.params.n_stop) {
            sched_req_finish(s, r, SCHED_FINISH_STOP_STR, 0, -1, r->samp.params.stop[k], 200);
            return true;
        }
    }
    return false;
}

/* ---- 2. sample or verify -------------------------------------------------- */

static int ensure_tmp(sched *s, int n)
{
    if (n <= s->buf.tmp_cap) return 0;
    int32_t *a = realloc(s->buf.tmp_top_ids, sizeof(int32_t) * (size_t)n);
    if (!a) return -1;
    s->buf.tmp_top_ids = a;
    float *b = realloc(s->buf.tmp_top_lp, sizeof(float) * (size_t)n);
    if (!b) return -1;
    s->buf.tmp_top_lp = b;
    float *c = realloc(s->buf.tmp_tid_lp, sizeof(float) * (size_t)n);
    if (!c) return -1;
    s->buf.tmp_tid_lp = c;
    s->buf.tmp_cap = n;
    return 0;
}

static void abort_internal(sched *s, sreq *r, const char *msg)
{
    free(r->life.abort_msg);
    r->life.abort_msg = sched_strdup(msg);
    r->life.abort_status = 500;
    sched_req_abort(s, r);
}

/* Draw r's next token from a processed row, record it in the sampling
 * state, append it to seq with its logprobs.  draft: the draft token the
 * forward ran after this row (-1 = none); with relaxed thresholds
 * (sched_set_spec_accept) it is verified by SGLang's rule, else the
 * caller compares the sampled token with it.  0, or -1 when r was
 * aborted (freed). */
/* The lazy close check's draws before the full narrowed mask (sched_grammar_mask). */
#define CLOSE_TRIES 8

static int sample_append(sched *s, sreq *r, float *row, int32_t draft, int32_t close_budget)
{
    sampling_logprob_req lpq = {
        .want = r->lpr.return_logprob, .top_n = r->lpr.top_n, .ids = r->lpr.tids, .n_ids = r->lpr.n_tid};
    int need = r->lpr.top_n > r->lpr.n_tid ? r->lpr.top_n : r->lpr.n_tid;
    if (ensure_tmp(s, need + 1)) {
        abort_internal(s, r, "Internal error: out of memory.");
        return -1;
    }
    sampling_result res = {.top_ids = s->buf.tmp_top_ids, .top_logprobs = s->buf.tmp_top_lp, .ids_logprobs = s->buf.tmp_tid_lp};
    const sampling_logprob_req *lpp = r->lpr.return_logprob ? &lpq : NULL;
    bool relaxed = draft >= 0 && draft < s->lim.V && s->hooks.accept_relaxed;
    /* close_budget > 0: the row has the plain grammar mask and the drawn
     * token must still let the grammar complete; a token that does not is
     * dropped from the row and the draw repeated (exact for greedy and
     * plain temperature, sched_grammar_mask); after CLOSE_TRIES misses the
     * dropped logits come back and the full narrowed mask decides */
    int32_t rej[CLOSE_TRIES];
    float rej_l[CLOSE_TRIES];
    int n_rej = 0;
    for (;;) {
        if (relaxed ? sampling_verify_processed(&r->samp.st, row, s->buf.scratch, draft, s->hooks.accept_single,
                                                s->hooks.accept_acc, lpp, &res)
                    : sampling_sample_processed(&r->samp.st, row, s->buf.scratch, lpp, &res)) {
            abort_internal(s, r, "Internal error: sampling failed.");
            return -1;
        }
        if (close_budget <= 0 || sched_grammar_fits(s, r, res.token, close_budget)) break;
        if (n_rej == CLOSE_TRIES && r->samp.params.top_k <= 1) {
            res.token = sched_grammar_greedy_fit(s, r, row, close_budget, rej[0]);
            break;
        }
        if (n_rej == CLOSE_TRIES) {
            while (n_rej > 0) n_rej--, row[rej[n_rej]] = rej_l[n_rej]; /* reverse: a repeat restores the first value */
            sched_grammar_narrow(s, r, row, close_budget);
            close_budget = 0;
            continue;
        }
        rej[n_rej] = res.token;
        rej_l[n_rej++] = row[res.token];
        row[res.token] = -INFINITY;
    }
    if (sampling_state_accept(&r->samp.st, res.token)) {
        abort_internal(s, r, "Internal error: sampling failed.");
        return -1;
    }
    int64_t k = r->tok.len - r->tok.n_input;
    if (r->tok.len >= r->tok.cap) { /* cannot happen: cap = n_input + max_new + 1 */
        abort_internal(s, r, "Internal error: output buffer full.");
        return -1;
    }
    r->tok.seq[r->tok.len++] = res.token;
    s->stats.st.generated_tokens++;
    if (sched_grammar_accept(s, r, res.token)) {
        /* the mask allowed nothing: no token of this vocabulary spells what
         * the grammar needs next (e.g. '{' missing); a 400 for this request */
        free(r->life.abort_msg);
        r->life.abort_msg = sched_strdup("The grammar allows no token of the model's vocabulary at this point of the "
                                         "output (the vocabulary cannot spell what the grammar requires next).");
        r->life.abort_status = 400;
        sched_req_abort(s, r);
        return -1;
    }
    if (r->lpr.return_logprob) {
        r->lpr.lp[k] = res.logprob;
        for (int i = 0; i < r->lpr.top_n; i++) {
            r->lpr.top_ids[k * r->lpr.top_n + i] = i < res.n_top ? res.top_ids[i] : -1;
            r->lpr.top_lp[k * r->lpr.top_n + i] = i < res.n_top ? res.top_logprobs[i] : -INFINITY;
        }
        for (int i = 0; i < r->lpr.n_tid; i++) r->lpr.tid_lp[k * r->lpr.n_tid + i] = res.ids_logprobs[i];
    }
    return 0;
}

/* ---- the per-request order ------------------------------------------------ */

/* The row verified after `row` once it sampled token `tok`: the chain's
 * next row when draft[row] == tok; in a tree (parent: draft k follows
 * draft parent[k], -1 = the root row) the first child row of `row` whose
 * draft is tok (SGLang's verify_tree_greedy walk, for any sampling).  -1:
 * rejected. */
static int next_row(int row, int n_rows, const int32_t *draft, const int32_t *parent, int32_t tok)
{
    if (!parent) return row + 1 < n_rows && draft[row] == tok ? row + 1 : -1;
    for (int c = row + 1; c < n_rows; c++)
        if (parent[c - 1] + 1 == row && draft[c - 1] == tok) return c;
    return -1;
}

int sched_process_request(sched *s, sreq *r, float *rows, int n_rows, const int32_t *draft, bool *finished)
{
    return sched_process_request_tree(s, r, rows, n_rows, draft, NULL, finished);
}

int sched_process_request_tree(sched *s, sreq *r, float *rows, int n_rows, const int32_t *draft, const int32_t *parent,
                               bool *finished)
{
    *finished = false;
    int n = 0;
    const int64_t len0 = r->tok.len; /* row k's KV is at kv position len0 - 1 + k */
    bool first_branch = true;         /* the path so far is the tree's first branch (the chain's drafts) */
    for (int j = 0, row = 0; row >= 0; j++) {
        float *rowp = rows + (size_t)row * (size_t)s->lim.V;
        /* a tree node accepted at depth j: its KV page moves to where the
         * sequence now has its token (position len0 - 1 + j) */
        if (row != j) sched_kv_move_page(s, r, len0 - 1 + j, len0 - 1 + row);
        /* the forward computed KV for the whole sequence so far: the
         * prefill / decode input and, for j > 0, the accepted drafts */
        r->kv.kv_len = r->tok.len;
        if (r->kv.kv_len > r->kv.already_computed) r->kv.already_computed = r->kv.kv_len;
        /* 1. logit processors */
        if (sampling_apply_processors(&r->samp.st, rowp)) {
            abort_internal(s, r, "Internal error: sampling failed.");
            *finished = true;
            return n;
        }
        /* relaxed verification (a chain's next draft with --speculative-accept-threshold-*)
         * takes the full narrowed mask near the budget's end */
        int32_t draft_next = !parent && row + 1 < n_rows ? draft[row] : -1;
        int32_t close_budget = sched_grammar_mask(s, r, rowp, !(draft_next >= 0 && s->hooks.accept_relaxed));
        /* 2. sample (row 0) or verify (rows 1..: reached only when the
         *    previous sample confirmed the draft the forward ran) */
        if (j > 0) { /* draft j - 1 was confirmed: counted before a finish builds the event */
            r->spec.accepted++;
            s->stats.st.spec_accepted_tokens++;
            if (parent && first_branch)
                for (int c = 0; c < row - 1 && first_branch; c++) first_branch = parent[c] != parent[row - 1];
            if (!first_branch) s->stats.st.spec_tree_off_branch++;
        }
        /* relaxed thresholds verify a chain's next draft by SGLang's rule
         * (sched_batch_draft gives such a scheduler chains only) */
        if (sample_append(s, r, rowp, draft_next, close_budget)) {
            *finished = true;
            return n;
        }
        n++;
        /* 3. stop checks */
        if (check_stop(s, r)) {
            *finished = true;
            return n;
        }
        row = next_row(row, n_rows, draft, parent, r->tok.seq[r->tok.len - 1]); /* -1: rejected */
    }
    /* 4. emit */
    if (r->out.stream && r->tok.len - r->tok.n_input - r->out.n_sent >= r->out.stream_interval) sched_emit_tokens(s, r, NULL);
    return n;
}

/* ---- prefill-only results: input logprobs, embeddings --------------------- */


/* Input logprob of position p (predicting seq[p + 1]) from its raw logits
 * row, SGLang's default (log_softmax of the raw logits): the chosen entry,
 * top_n best and the token_ids_logprob entries. */
static void input_logprob(sched *s, sreq *r, const float *row, int64_t p)
{
    int64_t k = p - r->lpr.lp_start;
    sampling_logprob_req lpq = {.want = true, .top_n = r->lpr.top_n, .ids = r->lpr.tids, .n_ids = r->lpr.n_tid};
    sampling_result res = {.top_ids = r->lpr.top_n ? r->lpr.in_top_ids + k * r->lpr.top_n : NULL,
                           .top_logprobs = r->lpr.top_n ? r->lpr.in_top_lp + k * r->lpr.top_n : NULL,
                           .ids_logprobs = r->lpr.n_tid ? r->lpr.in_tid_lp + k * r->lpr.n_tid : NULL};
    if (sampling_input_logprobs(row, s->lim.V, r->tok.seq[p + 1], s->buf.scratch, &lpq, &res)) {
        r->lpr.in_lp[k] = NAN;
        return;
    }
    r->lpr.in_lp[k] = res.logprob;
    for (int i = res.n_top; i < r->lpr.top_n; i++) r->lpr.in_top_ids[k * r->lpr.top_n + i] = -1;
}

/* Embedding mode: SGLang's Pooler(LAST, normalize=True) over the last
 * token's final-normed hidden state h (hidden_size): keep the first
 * embed_dims values (Matryoshka), divide by their L2 norm (max(norm, 1e-12)
 * as torch's F.normalize).  0, or -1 out of memory. */
static int pool_embedding(sched *s, sreq *r, const float *h)
{
    int H = s->eng.c->hidden_size;
    if (s->eng.c->n_labels > 0) { /* a classifier's row: its raw scores (SGLang's embedding) */
        int L = s->eng.c->n_labels;
        free(r->embd.emb);
        r->embd.emb = malloc(sizeof(float) * (size_t)L);
        if (!r->embd.emb) return -1;
        memcpy(r->embd.emb, h, sizeof(float) * (size_t)L);
        r->embd.n_emb = L;
        return 0;
    }
    int d = r->embd.embed_dims > 0 && r->embd.embed_dims < H ? r->embd.embed_dims : H;
    free(r->embd.emb);
    r->embd.emb = malloc(sizeof(float) * (size_t)d);
    if (!r->embd.emb) return -1;
    double ss = 0.0;
    for (int i = 0; i < d; i++) ss += (double)h[i] * h[i];
    double nrm = sqrt(ss);
    if (nrm < 1e-12) nrm = 1e-12;
    for (int i = 0; i < d; i++) r->embd.emb[i] = (float)(h[i] / nrm);
    r->embd.n_emb = d;
    return 0;
}

/* ---- the stage ------------------------------------------------------------ */

void sched_process_results(sched *s, bool with_decode)
{
    int nb = s->buf.n_batch;
    sreq **newly = NULL;
    int n_new = 0, cap_new = 0;
    bool fin;
    /* prefill requests */
    for (int b = 0; b < s->buf.n_batch; b++) {
        sreq *r = s->buf.batch[b];
        if (s->buf.b_lp_n[b] > 0) {
            int64_t lo = max64(r->kv.kv_len, r->lpr.lp_start);
            for (int k = 0; k < s->buf.b_lp_n[b]; k++)
                input_logprob(s, r, s->buf.logits + (size_t)(s->buf.b_lp_row[b] + k) * (size_t)s->lim.V, lo + k);
        }
        r->kv.kv_len += r->kv.extend;
        if (r->lpr.return_logprob && r->kv.kv_len >= r->tok.n_input - 1) r->lpr.in_lp_done = true;
        r->kv.extend = 0;
        if (r->kv.kv_len > r->kv.already_computed) r->kv.already_computed = r->kv.kv_len;
        /* SGLang's cache_unfinished_req after every prefill (chunk or
         * whole): the prompt is shareable from the next step on */
        if (sched_kv_cache_prefill(s, r)) {
            log_error("request %s: caching its prefill failed; aborting it", r->who.rid);
            if (s->q.chunked == r) s->q.chunked = NULL;
            abort_internal(s, r, "Internal error: KV cache bookkeeping failed.");
            continue;
        }
        if (r->kv.kv_len < r->tok.len) continue; /* more chunks to come: 0 tokens */
        if (s->a.is_embedding && pool_embedding(s, r, s->buf.logits + (size_t)s->buf.b_sample_row[b] * s->eng.c->hidden_size)) {
            abort_internal(s, r, "Internal error: out of memory.");
            continue;
        }
        if (r->tok.len - r->tok.n_input >= r->tok.max_new) { /* max_new_tokens 0: prefill only (and embeddings) */
            sched_req_finish(s, r, SCHED_FINISH_LENGTH, r->tok.max_new, -1, NULL, 200);
            continue;
        }
        if (r->life.to_abort) { /* cannot happen mid-step; kept for safety */
            sched_req_abort(s, r);
            continue;
        }
        float *rows = s->buf.logits + (size_t)s->buf.b_sample_row[b] * (size_t)s->lim.V;
        sched_process_request(s, r, rows, s->buf.b_n_rows[b], NULL, &fin);
        if (!fin) {
            r->life.state = RS_RUNNING;
            if (sched_push_req(&newly, &n_new, &cap_new, r)) abort_internal(s, r, "Internal error: out of memory.");
        }
    }
    s->buf.n_batch = 0;
    /* decode rows: 1 + n_draft logits rows each */
    if (with_decode) {
        int keep = 0;
        int n = s->q.n_running;
        const bool spec_on = s->hooks.draft_fn || s->hooks.draft_tree_fn;
        for (int i = 0; i < n; i++) {
            sreq *r = s->q.running[i];
            float *rows = s->buf.logits + (size_t)s->buf.b_sample_row[nb + i] * (size_t)s->lim.V;
            if (spec_on) { /* SGLang's spec_verify_ct: every decode forward is a verify */
                r->spec.verify_ct++;
                r->spec.drafted += r->spec.n_draft;
                s->stats.st.spec_verify_ct++;
                s->stats.st.spec_draft_tokens += r->spec.n_draft;
                if (r->spec.tree && r->spec.n_draft) s->stats.st.spec_tree_verifies++;
            }
            /* a tree's other nodes: their pages lie past kv_len + 1 after the walk (trimmed below) */
            int took = sched_process_request_tree(s, r, rows, s->buf.b_n_rows[nb + i], r->spec.draft,
                                                  r->spec.tree ? r->spec.parent : NULL, &fin);
            if (spec_on) s->stats.st.spec_verify_tokens += took;
            if (!fin) {
                if (r->spec.n_draft) sched_kv_trim(s, r, r->kv.kv_len + 1); /* pages of rejected drafts */
                r->spec.n_draft = 0;
                r->spec.tree = false;
                s->q.running[keep++] = r;
            }
        }
        s->q.n_running = keep;
    }
    for (int i = 0; i < n_new; i++)
        if (sched_push_req(&s->q.running, &s->q.n_running, &s->q.cap_running, newly[i]))
            abort_internal(s, newly[i], "Internal error: out of memory.");
    free(newly);
}
