/* sched_batch — stage 1 of a step, "assemble": prefill admission
 * (SGLang's get_new_batch_prefill + PrefillAdder), decode pages, draft
 * tokens, and the layout of the forward in the step buffers.
 *
 * DESIGN
 * Layer 8 (sched_impl.h "Layers"): includes sched_util, sched_kv,
 * sched_policy, sched_retract.  build_prefill chooses s->batch (the
 * chunked request first, then the waiting queue in policy order, admitted
 * by token budget, preempting lower priorities when allowed);
 * sched_batch_assemble turns s->batch and s->running into one model_batch
 * and records, per row, where its logits rows are (b_lp_row / b_lp_n for
 * input logprobs, b_sample_row / b_n_rows for sampling) for
 * sched_process_results. */
#include "sched/sched_batch.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "sched/sched_kv.h"
#include "sched/sched_policy.h"
#include "sched/sched_retract.h"
#include "sched/sched_util.h"
#include "util/log.h"
#include "util/timeutil.h"

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
        a = realloc(s->b_n_rows, sizeof(int32_t) * (size_t)nc);
        if (!a) return -1;
        s->b_n_rows = a;
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
int sched_batch_build_prefill(sched *s, int n_mixed)
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
        if (ext > 0 && sched_kv_alloc_upto(s, r, r->kv_len + ext) == 0) {
            r->extend = ext;
            s->log_new_tokens += ext;
            offset += (double)ceil_paged(s, ext) +
                      (trunc ? 0.0 : (double)min64(r->max_new - (r->len - r->n_input), CLIP_MAX_NEW_TOKENS));
            rem_input -= ext;
            rem_chunk -= ext;
            if (sched_push_req(&s->batch, &s->n_batch, &s->cap_batch, r)) return -1;
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
            if (sched_preempt_for(s, w, 0, true) == 0) break;
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
            if (sched_preempt_for(s, w, deficit, false) > 0) {
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
        if (sched_kv_page_room(s, w, kv_pool_pages_for(s->pool, fill))) return -1;
        w->rr.ns = w->cache_salt;
        w->rr.last_node = NULL;
        w->rr.protected_len = 0;
        prefix = kv_radix_req_match(s->tree, &w->rr, w->seq, mlen, w->pages);
        w->holds_kv = true;
        w->n_pages = prefix / s->P;
        sched_kv_set_slots(s, w, 0);
        w->kv_len = prefix;
        ext = fill - prefix;
        bool chunk = false;
        int64_t lim = min64(rem_chunk, lp_ext_cap(s, w));
        if (ext > lim) {
            ext = lim / s->P * s->P;
            chunk = true;
        }
        if (ext <= 0 || (double)(chunk ? ext : ext + reserve) > REM_TOTAL() || sched_kv_alloc_upto(s, w, prefix + ext)) {
            log_debug("admission stops: request %s got no room for a %lld-token chunk", w->rid, (long long)ext);
            sched_kv_release(s, w, false);
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
        sched_remove_req(s->waiting, &s->n_waiting, i);
        w->state = RS_PREFILL;
        if (sched_push_req(&s->batch, &s->n_batch, &s->cap_batch, w)) return -1;
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
int sched_batch_alloc_decode(sched *s)
{
    int64_t need = 0;
    for (int i = 0; i < s->n_running; i++) {
        sreq *r = s->running[i];
        need += kv_pool_pages_for(s->pool, r->kv_len + 1) - r->n_pages;
    }
    if (need > sched_kv_avail_pages(s)) return -1;
    for (int i = 0; i < s->n_running; i++)
        if (sched_kv_alloc_upto(s, s->running[i], s->running[i]->kv_len + 1)) return -1;
    return 0;
}

/* Draft tokens for the decode rows of this step (speculative decoding):
 * the hook proposes up to max_draft tokens per running request, clipped to
 * what the request may still accept (max_new - out - 1) and to the pages
 * the pool can give now (a request gets none rather than forcing a
 * retraction).  Call after sched_batch_alloc_decode. */
void sched_batch_draft(sched *s)
{
    for (int i = 0; i < s->n_running; i++) s->running[i]->n_draft = 0;
    if (!s->draft_fn || s->max_draft <= 0) return;
    for (int i = 0; i < s->n_running; i++) {
        sreq *r = s->running[i];
        int64_t room = r->max_new - (r->len - r->n_input) - 1;
        int max = (int)min64(s->max_draft, room);
        if (max <= 0) continue;
        int64_t c = r->cap_draft;
        if (sched_grow((void **)&r->draft, &c, max, sizeof(int32_t))) continue;
        r->cap_draft = (int)c;
        int n = s->draft_fn(s->draft_ctx, r->id, r->index, r->seq, r->len, r->draft, max);
        if (n <= 0) continue;
        if (n > max) n = max;
        bool ok = true;
        for (int k = 0; k < n && ok; k++) ok = r->draft[k] >= 0 && r->draft[k] < s->V;
        if (!ok) continue;
        int64_t need = kv_pool_pages_for(s->pool, r->len + n) - r->n_pages;
        if (need > sched_kv_avail_pages(s) || sched_kv_alloc_upto(s, r, r->len + n)) continue;
        r->n_draft = n;
    }
}

/* Stage 1 of a step: lay out this step's forward in the step buffers.
 * Rows: s->batch's prefill requests (extend tokens each), then, when
 * with_decode, every running request (its last token plus its draft
 * tokens).  Logits rows: a prefill's input-logprob rows, then its sample
 * row when the prompt completes; a decode row's 1 + n_draft rows.
 * Fills *mb (borrowing the step buffers).  0, or -1 out of memory. */
int sched_batch_assemble(sched *s, bool with_decode, model_batch *mb)
{
    int n_dec = with_decode ? s->n_running : 0;
    int64_t n_tok = 0;
    for (int b = 0; b < s->n_batch; b++) n_tok += s->batch[b]->extend;
    for (int i = 0; i < n_dec; i++) n_tok += s->running[i]->len - s->running[i]->kv_len + s->running[i]->n_draft;
    int n_seq = s->n_batch + n_dec;
    if (n_tok > INT32_MAX / 2 || reserve_batch(s, (int)n_tok, n_seq)) {
        log_error("out of memory for a batch of %" PRId64 " tokens", n_tok);
        return -1;
    }
    int t = 0, nl = 0;
    for (int b = 0; b < n_seq; b++) {
        bool prefill = b < s->n_batch;
        sreq *r = prefill ? s->batch[b] : s->running[b - s->n_batch];
        int nd = prefill ? 0 : r->n_draft;
        int64_t ext = prefill ? r->extend : r->len - r->kv_len; /* decode: 1 */
        s->b_start[b] = t;
        for (int64_t k = 0; k < ext; k++, t++) {
            s->b_tokens[t] = r->seq[r->kv_len + k];
            s->b_pos[t] = (int32_t)(r->kv_len + k);
        }
        for (int k = 0; k < nd; k++, t++) {
            s->b_tokens[t] = r->draft[k];
            s->b_pos[t] = (int32_t)(r->len + k);
        }
        s->b_kvlen[b] = (int32_t)(r->kv_len + ext + nd);
        s->b_slots[b] = r->slots;
        /* input-logprob rows: positions [lo, hi) predicting input tokens */
        s->b_lp_row[b] = nl;
        s->b_lp_n[b] = 0;
        if (prefill && needs_in_lp(r)) {
            int64_t lo = max64(r->kv_len, r->lp_start), hi = min64(r->kv_len + ext, r->n_input - 1);
            for (int64_t p = lo; p < hi; p++) s->b_rows[nl++] = s->b_start[b] + (int32_t)(p - r->kv_len);
            s->b_lp_n[b] = hi > lo ? (int32_t)(hi - lo) : 0;
        }
        bool wants_logits = r->kv_len + ext == r->len &&
                            (r->len - r->n_input < r->max_new || (s->a.is_embedding && prefill));
        s->b_sample_row[b] = wants_logits ? nl : -1;
        s->b_n_rows[b] = wants_logits ? 1 + nd : 0;
        if (wants_logits)
            for (int k = 0; k <= nd; k++) s->b_rows[nl++] = t - 1 - nd + k;
    }
    s->b_start[n_seq] = t;
    if (reserve_logits(s, nl)) {
        log_error("out of memory for %d logits rows", nl);
        return -1;
    }
    *mb = (model_batch){.n_tokens = t, .tokens = s->b_tokens, .positions = s->b_pos, .n_seqs = n_seq,
                        .seq_start = s->b_start, .seq_kv_len = s->b_kvlen, .seq_slots = s->b_slots,
                        .n_logits = nl, .logit_rows = s->b_rows, .want_hidden = s->a.is_embedding};
    return 0;
}
