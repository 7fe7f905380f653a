/* sched_batch — stage 1 of a step, "assemble": prefill admission
 * (SGLang's get_new_batch_prefill + PrefillAdder), decode pages, draft
 * tokens, and the layout of the forward in the step buffers.
 *
 * DESIGN
 * Layer 9 (sched_impl.h "Layers"): includes sched_util, sched_kv,
 * sched_policy, sched_retract.  build_prefill chooses s->buf.batch (the
 * chunked request first, then the waiting queue in policy order, admitted
 * by token budget, preempting lower priorities when allowed);
 * sched_batch_assemble turns s->buf.batch and s->q.running into one model_batch
 * and records, per row, where its logits rows are (b_lp_row / b_lp_n for
 * input logprobs, b_sample_row / b_n_rows for sampling) for
 * sched_process_results. */
#include "sched/sched_batch.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "lora/lora.h"
#include "model/rope.h"
#include "sched/sched_grammar.h"
#include "sched/sched_kv.h"
#include "sched/sched_policy.h"
#include "sched/sched_retract.h"
#include "sched/sched_util.h"
#include "util/log.h"
#include "util/timeutil.h"

static int reserve_batch(sched *s, int n_tok, int n_seq)
{
    if (n_tok > s->buf.cap_tok) {
        int nc = s->buf.cap_tok ? s->buf.cap_tok : 64;
        while (nc < n_tok) nc *= 2;
        void *a = realloc(s->buf.b_tokens, sizeof(int32_t) * (size_t)nc);
        if (!a) return -1;
        s->buf.b_tokens = a;
        a = realloc(s->buf.b_pos, sizeof(int32_t) * (size_t)nc);
        if (!a) return -1;
        s->buf.b_pos = a;
        a = realloc(s->buf.b_rows, sizeof(int32_t) * (size_t)nc);
        if (!a) return -1;
        s->buf.b_rows = a;
        s->buf.cap_tok = nc;
    }
    if (n_seq + 1 > s->buf.cap_seq) {
        int nc = s->buf.cap_seq ? s->buf.cap_seq : 16;
        while (nc < n_seq + 1) nc *= 2;
        void *a = realloc(s->buf.b_start, sizeof(int32_t) * (size_t)nc);
        if (!a) return -1;
        s->buf.b_start = a;
        a = realloc(s->buf.b_kvlen, sizeof(int32_t) * (size_t)nc);
        if (!a) return -1;
        s->buf.b_kvlen = a;
        a = realloc(s->buf.b_ropelen, sizeof(int32_t) * (size_t)nc);
        if (!a) return -1;
        s->buf.b_ropelen = a;
        a = realloc((void *)s->buf.b_slots, sizeof(int32_t *) * (size_t)nc);
        if (!a) return -1;
        s->buf.b_slots = a;
        a = realloc(s->buf.b_lp_row, sizeof(int32_t) * (size_t)nc);
        if (!a) return -1;
        s->buf.b_lp_row = a;
        a = realloc(s->buf.b_lp_n, sizeof(int32_t) * (size_t)nc);
        if (!a) return -1;
        s->buf.b_lp_n = a;
        a = realloc(s->buf.b_sample_row, sizeof(int32_t) * (size_t)nc);
        if (!a) return -1;
        s->buf.b_sample_row = a;
        a = realloc(s->buf.b_n_rows, sizeof(int32_t) * (size_t)nc);
        if (!a) return -1;
        s->buf.b_n_rows = a;
        a = realloc(s->buf.b_seq_ad, sizeof(int32_t) * (size_t)nc);
        if (!a) return -1;
        s->buf.b_seq_ad = a;
        a = realloc((void *)s->buf.b_ads, sizeof(model_adapter *) * (size_t)nc);
        if (!a) return -1;
        s->buf.b_ads = a;
        a = realloc((void *)s->buf.b_tree, sizeof(int32_t *) * (size_t)nc);
        if (!a) return -1;
        s->buf.b_tree = a;
        s->buf.cap_seq = nc;
    }
    return 0;
}

static int reserve_logits(sched *s, int n)
{
    if (n <= s->buf.cap_logits) return 0;
    int nc = s->buf.cap_logits ? s->buf.cap_logits : 16;
    while (nc < n) nc *= 2;
    size_t w = (size_t)(s->lim.V > s->eng.c->hidden_size ? s->lim.V : s->eng.c->hidden_size);
    float *g = realloc(s->buf.logits, sizeof(float) * (size_t)nc * w);
    if (!g) return -1;
    s->buf.logits = g;
    s->buf.cap_logits = nc;
    return 0;
}

/* Running requests' reserve for future decode tokens (PrefillAdder). */
static double running_reserve(sched *s)
{
    double r = 0;
    for (int i = 0; i < s->q.n_running; i++) {
        sreq *q = s->q.running[i];
        r += (double)min64(q->tok.max_new - (q->tok.len - q->tok.n_input), CLIP_MAX_NEW_TOKENS) * s->adm.new_token_ratio;
    }
    return r;
}

static int64_t ceil_paged(sched *s, int64_t n) { return (n + s->lim.P - 1) / s->lim.P * s->lim.P; }

/* Input logprobs need logits rows: a request computing them prefills at
 * most this many such rows per step (bounded logits memory), and its
 * cached prefix may not reach past logprob_start_len (SGLang). */
#define LP_ROWS_MAX 256

static bool needs_in_lp(const sreq *r) { return r->lpr.return_logprob && !r->lpr.in_lp_done; }

static int64_t match_limit(const sreq *r)
{
    int64_t m = r->tok.len - 1;
    if (needs_in_lp(r) && r->lpr.lp_start < m) m = r->lpr.lp_start;
    return m;
}

static int64_t lp_ext_cap(sched *s, const sreq *r)
{
    if (!needs_in_lp(r)) return INT64_MAX / 4;
    int64_t first = r->kv.kv_len > r->lpr.lp_start ? r->kv.kv_len : r->lpr.lp_start;
    int64_t cap = (first - r->kv.kv_len + LP_ROWS_MAX) / s->lim.P * s->lim.P;
    return cap < s->lim.P ? s->lim.P : cap;
}


/* In-batch prefix sharing (SGLang's in-batch prefix caching, applied to
 * every policy): a waiting request that shares at least this many uncached
 * tokens with a request prefilled in this step waits one step, then finds
 * them in the radix tree instead of computing them twice. */
#define IN_BATCH_PREFIX_THRESHOLD 32

/* LoRA admission (SGLang's can_run_lora_batch): the distinct adapters of
 * the running requests, this step's prefills and w, the base model
 * counting as one, must stay within --max-loras-per-batch. */
static bool lora_fits(sched *s, const sreq *w)
{
    int lim = s->a.max_loras_per_batch;
    if (lim <= 0) return true;
    const void *seen[64];
    int n = 0;
    bool have_w = false;
    for (int k = 0; k < s->q.n_running + s->buf.n_batch + 1; k++) {
        const sreq *q = k < s->q.n_running ? s->q.running[k]
                        : k < s->q.n_running + s->buf.n_batch ? s->buf.batch[k - s->q.n_running] : w;
        const void *key = q->lora.ad; /* NULL = the base */
        int j = 0;
        while (j < n && seen[j] != key) j++;
        if (q == w) have_w = j < n;
        if (j == n) {
            if (n == 64) return false;
            seen[n++] = key;
        }
    }
    return have_w || n <= lim;
}

static bool defer_in_batch(sched *s, const sreq *w, int64_t cached)
{
    if (kv_radix_disabled(s->eng.tree)) return false;
    for (int b = 0; b < s->buf.n_batch; b++) {
        const sreq *q = s->buf.batch[b];
        if ((q->kv.cache_salt == NULL) != (w->kv.cache_salt == NULL)) continue;
        if (q->kv.cache_salt && strcmp(q->kv.cache_salt, w->kv.cache_salt)) continue;
        int64_t n = min64(w->tok.len - 1, q->tok.len), k = 0;
        while (k < n && w->tok.seq[k] == q->tok.seq[k]) k++;
        if (s->lim.mtrack) k = k / s->lim.mtrack * s->lim.mtrack; /* resumable only from a checkpoint */
        if (k - cached >= IN_BATCH_PREFIX_THRESHOLD) return true;
    }
    return false;
}

/* Choose this step's prefill requests into s->buf.batch (SGLang's
 * get_new_batch_prefill + PrefillAdder).  n_mixed: decode rows riding
 * along.  Returns the number of prefill requests. */
int sched_batch_build_prefill(sched *s, int n_mixed)
{
    s->buf.n_batch = 0;
    s->blog.log_new_tokens = s->blog.log_hit_tokens = 0;
    bool have_waiting = s->q.n_waiting > 0;
    if (!have_waiting && !s->q.chunked) return 0;
    double offset = running_reserve(s);
    int64_t rem_input = (int64_t)s->a.max_prefill_tokens - n_mixed;
    int64_t rem_chunk = s->a.chunked_prefill_size > 0 ? (int64_t)s->a.chunked_prefill_size - n_mixed : INT64_MAX / 4;
#define REM_TOTAL() ((double)(kv_pool_free_tokens(s->eng.pool) + kv_radix_evictable_size(s->eng.tree)) - offset)

    /* 1. the chunked request continues first */
    if (s->q.chunked) {
        sreq *r = s->q.chunked;
        int64_t left = r->tok.len - r->kv.kv_len;
        int64_t lim = min64(min64(rem_chunk, (int64_t)REM_TOTAL()), lp_ext_cap(s, r));
        int64_t ext = left;
        bool trunc = false;
        if (left > lim) {
            ext = lim / s->lim.P * s->lim.P;
            trunc = true;
        }
        if (ext > 0 && sched_kv_alloc_upto(s, r, r->kv.kv_len + ext) == 0) {
            r->kv.extend = ext;
            s->blog.log_new_tokens += ext;
            offset += (double)ceil_paged(s, ext) +
                      (trunc ? 0.0 : (double)min64(r->tok.max_new - (r->tok.len - r->tok.n_input), CLIP_MAX_NEW_TOKENS));
            rem_input -= ext;
            rem_chunk -= ext;
            if (sched_push_req(&s->buf.batch, &s->buf.n_batch, &s->buf.cap_batch, r)) return -1;
            if (!trunc) s->q.chunked = NULL; /* completes this step */
        }
        if (s->q.chunked) return s->buf.n_batch; /* still chunking: nothing else fits */
    }
    if (!have_waiting) return s->buf.n_batch;
    if (rem_input <= 0 || rem_chunk <= 0) return s->buf.n_batch;

    sched_policy_order(s);
    int i = 0;
    while (i < s->q.n_waiting) {
        sreq *w = s->q.waiting[i];
        if (s->q.n_running + s->buf.n_batch >= s->lim.max_running) {
            if (sched_preempt_for(s, w, 0, true) == 0) break;
            continue; /* the queue changed (preempted requests appended) */
        }
        if (s->a.prefill_max_requests > 0 && s->buf.n_batch >= s->a.prefill_max_requests) break;
        if (!lora_fits(s, w)) break; /* the batch has no adapter slot left (SGLang stops here too) */
        int64_t fill = w->tok.len;
        kv_radix_node *node = NULL;
        int64_t mlen = match_limit(w);
        int64_t prefix = s->lim.mtrack ? kv_radix_match_state(s->eng.tree, w->kv.cache_salt, w->tok.seq, mlen, &node, NULL)
                                       : kv_radix_match(s->eng.tree, w->kv.cache_salt, w->tok.seq, mlen, NULL, &node);
        if (defer_in_batch(s, w, prefix)) {
            i++;
            continue;
        }
        int64_t ext = fill - prefix;
        int64_t reserve = min64(w->tok.max_new - (w->tok.len - w->tok.n_input), CLIP_MAX_NEW_TOKENS);
        double total = (double)(ext + reserve);
        if (total >= REM_TOTAL()) {
            double deficit = total - REM_TOTAL() + 1;
            if (sched_preempt_for(s, w, deficit, false) > 0) {
                offset = running_reserve(s);
                for (int b = 0; b < s->buf.n_batch; b++) {
                    sreq *q = s->buf.batch[b];
                    offset += (double)ceil_paged(s, q->kv.extend) +
                              (double)min64(q->tok.max_new - (q->tok.len - q->tok.n_input), CLIP_MAX_NEW_TOKENS);
                }
                continue;
            }
            log_debug("admission stops (no tokens): request %s needs %.0f, %.0f left", w->who.rid, total, REM_TOTAL());
            break; /* NO_TOKEN */
        }
        if (ceil_paged(s, ext) >= rem_input && s->buf.n_batch > 0) break; /* OTHER */
        /* admit: lock the prefix, then size the chunk */
        if (sched_kv_page_room(s, w, kv_pool_pages_for(s->eng.pool, fill))) return -1;
        w->kv.rr.ns = w->kv.cache_salt;
        w->kv.rr.last_node = NULL;
        w->kv.rr.protected_len = 0;
        int32_t src = -1; /* hybrid Mamba2, extra_buffer: the checkpoint the prefix resumes from */
        prefix = s->lim.mtrack ? kv_radix_req_match_state(s->eng.tree, &w->kv.rr, w->tok.seq, mlen, w->kv.pages, &src)
                               : kv_radix_req_match(s->eng.tree, &w->kv.rr, w->tok.seq, mlen, w->kv.pages);
        w->kv.holds_kv = true;
        if (s->eng.mpool && sched_kv_mamba_take(s, w, src, prefix)) { /* hybrid Mamba2: every state slot is taken */
            log_debug("admission stops: no Mamba state slot for request %s", w->who.rid);
            sched_kv_release(s, w, false);
            break;
        }
        w->kv.n_pages = prefix / s->lim.P;
        sched_kv_set_slots(s, w, 0);
        w->kv.kv_len = prefix;
        ext = fill - prefix;
        bool chunk = false;
        int64_t lim = min64(rem_chunk, lp_ext_cap(s, w));
        if (ext > lim) {
            ext = lim / s->lim.P * s->lim.P;
            chunk = true;
        }
        if (ext <= 0 || (double)(chunk ? ext : ext + reserve) > REM_TOTAL() || sched_kv_alloc_upto(s, w, prefix + ext)) {
            log_debug("admission stops: request %s got no room for a %lld-token chunk", w->who.rid, (long long)ext);
            sched_kv_release(s, w, false);
            break;
        }
        w->kv.extend = ext;
        if (w->time.t_forward == 0) w->time.t_forward = time_now_sec();
        s->blog.log_new_tokens += ext;
        s->blog.log_hit_tokens += prefix;
        if (prefix > w->kv.already_computed) w->kv.cached_tokens += prefix - w->kv.already_computed;
        offset += (double)ceil_paged(s, ext) + (chunk ? 0.0 : (double)reserve);
        rem_input -= ceil_paged(s, ext);
        rem_chunk -= ceil_paged(s, ext);
        sched_remove_req(s->q.waiting, &s->q.n_waiting, i);
        w->life.state = RS_PREFILL;
        if (sched_push_req(&s->buf.batch, &s->buf.n_batch, &s->buf.cap_batch, w)) return -1;
        if (chunk) {
            s->q.chunked = w;
            break;
        }
        if (rem_input <= 0 || rem_chunk <= 0) break;
    }
#undef REM_TOTAL
    return s->buf.n_batch;
}

/* Pages for one decode token of every running request, all or nothing. */
int sched_batch_alloc_decode(sched *s)
{
    int64_t need = 0;
    for (int i = 0; i < s->q.n_running; i++) {
        sreq *r = s->q.running[i];
        need += max64(0, kv_pool_pages_for(s->eng.pool, r->kv.kv_len + 1) - r->kv.n_pages);
    }
    if (need > sched_kv_avail_pages(s)) return -1;
    for (int i = 0; i < s->q.n_running; i++)
        if (sched_kv_alloc_upto(s, s->q.running[i], s->q.running[i]->kv.kv_len + 1)) return -1;
    return 0;
}

/* Drafts a sequence of len tokens may carry without changing its rope
 * tables: the tables of dynamic NTK (past max_position_embeddings) and
 * longrope (short / long factors past the switch length) follow the
 * forward's sequence length (transformers' semantics), so a verify
 * forward reaching past that length would rotate its tokens unlike plain
 * decoding.  No limit for the other ropes. */
static int64_t rope_draft_limit(const sched *s, int64_t len)
{
    const model_config *c = s->eng.c;
    if (c->rope.kind == MODEL_ROPE_DYNAMIC) return (int64_t)c->max_position_embeddings - len;
    if (c->rope.kind == MODEL_ROPE_LONGROPE) {
        int64_t sw = model_rope_longrope_switch(c);
        return len <= sw ? sw - len : INT64_MAX / 4;
    }
    return INT64_MAX / 4;
}

/* Draft tokens for the decode rows of this step (speculative decoding):
 * the hook proposes up to max_draft tokens per running request, clipped to
 * what the request may still accept (max_new - out - 1) and to the pages
 * the pool can give now (a request gets none rather than forcing a
 * retraction), and to what keeps the rope tables of plain decoding
 * (rope_draft_limit).  A tree hook's drafts are a tree when the model
 * allows it (s->hooks.tree_ok), else a chain.  Call after
 * sched_batch_alloc_decode. */
void sched_batch_draft(sched *s)
{
    for (int i = 0; i < s->q.n_running; i++) s->q.running[i]->spec.n_draft = 0, s->q.running[i]->spec.tree = false;
    if ((!s->hooks.draft_fn && !s->hooks.draft_tree_fn) || s->hooks.max_draft <= 0) return;
    for (int i = 0; i < s->q.n_running; i++) {
        sreq *r = s->q.running[i];
        int64_t room = r->tok.max_new - (r->tok.len - r->tok.n_input) - 1;
        int max = (int)min64(s->hooks.max_draft, room);
        max = (int)min64(max, rope_draft_limit(s, r->tok.len)); /* a tree's nodes all count: kv_len = len + n */
        if (max <= 0) continue;
        int64_t c = r->spec.cap_draft;
        if (sched_grow((void **)&r->spec.draft, &c, max, sizeof(int32_t))) continue;
        if (c != r->spec.cap_draft || !r->spec.parent) { /* parent / mpar follow draft's capacity */
            int32_t *pa = realloc(r->spec.parent, sizeof(int32_t) * (size_t)c);
            if (pa) r->spec.parent = pa;
            int32_t *mp = pa ? realloc(r->spec.mpar, sizeof(int32_t) * (size_t)(c + 1)) : NULL;
            if (mp) r->spec.mpar = mp;
            if (!pa || !mp) continue;
        }
        r->spec.cap_draft = (int)c;
        /* a tree needs a model that verifies trees (sched_set_draft_tree_hook, any page size);
         * accept thresholds below 1 (sched_set_spec_accept) verify chains only */
        int32_t *par = s->hooks.draft_tree_fn && s->hooks.tree_ok && !s->hooks.accept_relaxed ? r->spec.parent : NULL;
        s->hooks.draft_slots = r->kv.slots; /* sched_draft_slots */
        int n = s->hooks.draft_tree_fn ? s->hooks.draft_tree_fn(s->hooks.draft_ctx, r->who.id, r->who.index, r->tok.seq,
                                                                r->tok.len, r->spec.draft, par, max)
                                       : s->hooks.draft_fn(s->hooks.draft_ctx, r->who.id, r->who.index, r->tok.seq,
                                                           r->tok.len, r->spec.draft, max);
        s->hooks.draft_slots = NULL;
        if (n <= 0) continue;
        if (n > max) n = max;
        bool ok = true, chain = true;
        for (int k = 0; k < n && ok; k++) ok = r->spec.draft[k] >= 0 && r->spec.draft[k] < s->lim.V;
        for (int k = 0; par && k < n && ok; k++) {
            ok = par[k] >= -1 && par[k] < k;
            chain = chain && par[k] == k - 1;
        }
        if (!ok) continue;
        r->spec.tree = par && !chain; /* a chain needs no mask */
        if (r->spec.tree) n = sched_grammar_prune_tree(s, r, n); /* nodes the grammar forbids, and below */
        else n = sched_grammar_trim_draft(s, r, n);               /* drafts the grammar forbids */
        if (n <= 0) {
            r->spec.tree = false;
            continue;
        }
        if (r->spec.tree) {
            chain = true;
            for (int k = 0; k < n; k++) chain = chain && par[k] == k - 1;
            r->spec.tree = !chain;
            r->spec.mpar[0] = -1; /* row 0: seq[len - 1] */
            for (int k = 0; k < n; k++) r->spec.mpar[k + 1] = par[k] + 1;
        }
        int64_t need = kv_pool_pages_for(s->eng.pool, r->tok.len + n) - r->kv.n_pages;
        if (need > sched_kv_avail_pages(s) || sched_kv_alloc_upto(s, r, r->tok.len + n)) {
            r->spec.tree = false;
            continue;
        }
        r->spec.n_draft = n;
    }
}

/* Stage 1 of a step: lay out this step's forward in the step buffers.
 * Rows: s->buf.batch's prefill requests (extend tokens each), then, when
 * with_decode, every running request (its last token plus its draft
 * tokens).  Logits rows: a prefill's input-logprob rows, then its sample
 * row when the prompt completes; a decode row's 1 + n_draft rows.
 * Fills *mb (borrowing the step buffers).  0, or -1 out of memory. */
int sched_batch_assemble(sched *s, bool with_decode, model_batch *mb)
{
    int n_dec = with_decode ? s->q.n_running : 0;
    int64_t n_tok = 0;
    for (int b = 0; b < s->buf.n_batch; b++) n_tok += s->buf.batch[b]->kv.extend;
    for (int i = 0; i < n_dec; i++)
        n_tok += s->q.running[i]->tok.len - s->q.running[i]->kv.kv_len + s->q.running[i]->spec.n_draft;
    int n_seq = s->buf.n_batch + n_dec;
    if (n_tok > INT32_MAX / 2 || reserve_batch(s, (int)n_tok, n_seq)) {
        log_error("out of memory for a batch of %" PRId64 " tokens", n_tok);
        return -1;
    }
    if (s->eng.mpool && sched_kv_mamba_reserve(s, n_seq)) {
        log_error("out of memory for a batch of %d sequences", n_seq);
        return -1;
    }
    int t = 0, nl = 0, n_ads = 0;
    bool any_tree = false;
    for (int b = 0; b < n_seq; b++) {
        bool prefill = b < s->buf.n_batch;
        sreq *r = prefill ? s->buf.batch[b] : s->q.running[b - s->buf.n_batch];
        int nd = prefill ? 0 : r->spec.n_draft;
        int64_t ext = prefill ? r->kv.extend : r->tok.len - r->kv.kv_len; /* decode: 1 */
        s->buf.b_start[b] = t;
        for (int64_t k = 0; k < ext; k++, t++) {
            s->buf.b_tokens[t] = r->tok.seq[r->kv.kv_len + k];
            s->buf.b_pos[t] = (int32_t)(r->kv.kv_len + k);
        }
        for (int k = 0; k < nd; k++, t++) {
            s->buf.b_tokens[t] = r->spec.draft[k];
            s->buf.b_pos[t] = (int32_t)(r->tok.len + k);
        }
        s->buf.b_kvlen[b] = (int32_t)(r->kv.kv_len + ext + nd);
        /* a prompt's chunks all see its whole length (longrope's table choice) */
        s->buf.b_ropelen[b] = (int32_t)max64(r->kv.kv_len + ext + nd, r->tok.len);
        s->buf.b_slots[b] = r->kv.slots;
        s->buf.b_tree[b] = !prefill && nd > 0 && r->spec.tree ? r->spec.mpar : NULL; /* draft tree rows */
        any_tree = any_tree || s->buf.b_tree[b];
        if (s->eng.mpool) s->eng.b_state[b] = r->kv.mamba_slot;
        if (s->lim.mtrack && sched_kv_mamba_snaps(s, b, r->kv.kv_len, r->kv.kv_len + ext + nd)) {
            sched_kv_mamba_drop(s);
            log_error("out of memory for a batch's Mamba checkpoints");
            return -1;
        }
        /* LoRA: the step's adapter list, each once */
        s->buf.b_seq_ad[b] = -1;
        if (r->lora.ad) {
            const model_adapter *ma = &r->lora.ad->ma;
            int j = 0;
            while (j < n_ads && s->buf.b_ads[j] != ma) j++;
            if (j == n_ads) s->buf.b_ads[n_ads++] = ma;
            s->buf.b_seq_ad[b] = j;
        }
        /* input-logprob rows: positions [lo, hi) predicting input tokens */
        s->buf.b_lp_row[b] = nl;
        s->buf.b_lp_n[b] = 0;
        if (prefill && needs_in_lp(r)) {
            int64_t lo = max64(r->kv.kv_len, r->lpr.lp_start), hi = min64(r->kv.kv_len + ext, r->tok.n_input - 1);
            for (int64_t p = lo; p < hi; p++) s->buf.b_rows[nl++] = s->buf.b_start[b] + (int32_t)(p - r->kv.kv_len);
            s->buf.b_lp_n[b] = hi > lo ? (int32_t)(hi - lo) : 0;
        }
        bool wants_logits = r->kv.kv_len + ext == r->tok.len &&
                            (r->tok.len - r->tok.n_input < r->tok.max_new || (s->a.is_embedding && prefill));
        s->buf.b_sample_row[b] = wants_logits ? nl : -1;
        s->buf.b_n_rows[b] = wants_logits ? 1 + nd : 0;
        if (wants_logits)
            for (int k = 0; k <= nd; k++) s->buf.b_rows[nl++] = t - 1 - nd + k;
    }
    s->buf.b_start[n_seq] = t;
    if (s->lim.mtrack) s->eng.b_snap[n_seq] = s->eng.n_snap;
    if (reserve_logits(s, nl)) {
        sched_kv_mamba_drop(s);
        log_error("out of memory for %d logits rows", nl);
        return -1;
    }
    *mb = (model_batch){.n_tokens = t, .tokens = s->buf.b_tokens, .positions = s->buf.b_pos, .n_seqs = n_seq,
                        .seq_start = s->buf.b_start, .seq_kv_len = s->buf.b_kvlen, .seq_slots = s->buf.b_slots,
                        .seq_rope_len = s->buf.b_ropelen, .n_logits = nl, .logit_rows = s->buf.b_rows, .want_hidden = s->a.is_embedding,
                        .n_adapters = n_ads, .adapters = s->buf.b_ads,
                        .seq_adapter = n_ads ? s->buf.b_seq_ad : NULL,
                        .seq_state = s->eng.mpool ? s->eng.b_state : NULL,
                        .seq_snap = s->eng.n_snap ? s->eng.b_snap : NULL, .snap_pos = s->eng.b_snap_pos,
                        .snap_state = s->eng.b_snap_slot,
                        .seq_tree_parent = any_tree ? s->buf.b_tree : NULL};
    return 0;
}
