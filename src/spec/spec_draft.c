/* spec_draft — the draft-model proposer; see spec_draft.h. */
#include "spec/spec_draft.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/log.h"
#include "util/threadpool.h"

struct spec_draft {
    model *m;                    /* borrowed */
    model_kv *kv;                /* owned: (kv_tokens) slots */
    tpool *pool;                 /* owned */
    int V;
    int ctx;                     /* the draft model's context length */
    int32_t *free_slots;         /* (kv_tokens) stack */
    int64_t n_free, n_slots;
    int32_t *tok, *pos;          /* (cap_tok) forward scratch */
    int64_t cap_tok;
    float *logits;               /* (V) */
};

spec_draft *spec_draft_create(model *draft, int target_vocab, int64_t kv_tokens, int threads, char *err,
                              size_t errlen)
{
    const model_config *c = model_get_config(draft);
    if (c->vocab_size != target_vocab) {
        snprintf(err, errlen,
                 "the draft model's vocabulary (%d tokens) differs from the target model's (%d): STANDALONE needs a "
                 "draft model of the same vocabulary",
                 c->vocab_size, target_vocab);
        return NULL;
    }
    if (kv_tokens < 16 || kv_tokens > INT32_MAX / 2) {
        snprintf(err, errlen, "bad draft KV size %lld", (long long)kv_tokens);
        return NULL;
    }
    spec_draft *d = calloc(1, sizeof *d);
    if (!d) goto oom;
    d->m = draft;
    d->V = c->vocab_size;
    d->ctx = c->context_length > 0 ? c->context_length : c->max_position_embeddings;
    d->n_slots = kv_tokens;
    d->kv = model_kv_create(draft, (int)kv_tokens, DTYPE_F32);
    d->pool = tpool_create(threads > 0 ? threads : 1);
    d->free_slots = malloc(sizeof(int32_t) * (size_t)kv_tokens);
    d->logits = malloc(sizeof(float) * (size_t)d->V);
    if (!d->kv || !d->pool || !d->free_slots || !d->logits) goto oom;
    for (int64_t i = 0; i < kv_tokens; i++) d->free_slots[i] = (int32_t)(kv_tokens - 1 - i);
    d->n_free = kv_tokens;
    return d;
oom:
    snprintf(err, errlen, "out of memory for the draft model's KV cache (%lld tokens)", (long long)kv_tokens);
    spec_draft_destroy(d);
    return NULL;
}

void spec_draft_destroy(spec_draft *d)
{
    if (!d) return;
    model_kv_destroy(d->kv);
    if (d->pool) tpool_destroy(d->pool);
    free(d->free_slots);
    free(d->tok);
    free(d->pos);
    free(d->logits);
    free(d);
}

int64_t spec_draft_slots_used(const spec_draft *d) { return d->n_slots - d->n_free; }

void spec_draft_req_release(spec_draft *d, spec_draft_req *r)
{
    for (int64_t i = 0; i < r->cap && r->slots; i++)
        if (r->slots[i] >= 0) d->free_slots[d->n_free++] = r->slots[i];
    free(r->slots);
    free(r->fed);
    memset(r, 0, sizeof *r);
}

/* Slots for positions [0, n): 0, or -1 when the arrays or the slots run out. */
static int ensure_slots(spec_draft *d, spec_draft_req *r, int64_t n)
{
    if (n > r->cap) {
        int64_t nc = r->cap ? r->cap : 64;
        while (nc < n) nc *= 2;
        int32_t *s = realloc(r->slots, sizeof(int32_t) * (size_t)nc);
        if (!s) return -1;
        r->slots = s;
        int32_t *f = realloc(r->fed, sizeof(int32_t) * (size_t)nc);
        if (!f) return -1;
        r->fed = f;
        for (int64_t i = r->cap; i < nc; i++) r->slots[i] = -1;
        r->cap = nc;
    }
    for (int64_t i = 0; i < n; i++) {
        if (r->slots[i] >= 0) continue;
        if (d->n_free == 0) return -1;
        r->slots[i] = d->free_slots[--d->n_free];
    }
    return 0;
}

static int ensure_tok(spec_draft *d, int64_t n)
{
    if (n <= d->cap_tok) return 0;
    int32_t *t = realloc(d->tok, sizeof(int32_t) * (size_t)n);
    if (!t) return -1;
    d->tok = t;
    int32_t *p = realloc(d->pos, sizeof(int32_t) * (size_t)n);
    if (!p) return -1;
    d->pos = p;
    d->cap_tok = n;
    return 0;
}

/* One forward of tokens toks[0..n) at positions from..from+n-1 over r's
 * slots; the argmax of the last row.  -1 on failure. */
static int32_t step(spec_draft *d, spec_draft_req *r, const int32_t *toks, int64_t from, int64_t n)
{
    if (ensure_tok(d, n)) return -1;
    for (int64_t i = 0; i < n; i++) {
        d->tok[i] = toks[i];
        d->pos[i] = (int32_t)(from + i);
    }
    int32_t start[2] = {0, (int32_t)n}, kvl[1] = {(int32_t)(from + n)}, row[1] = {(int32_t)(n - 1)};
    const int32_t *sl[1] = {r->slots};
    model_batch b = {.n_tokens = (int)n, .tokens = d->tok, .positions = d->pos, .n_seqs = 1, .seq_start = start,
                     .seq_kv_len = kvl, .seq_slots = sl, .n_logits = 1, .logit_rows = row};
    if (model_forward(d->m, d->kv, &b, d->logits, d->pool)) return -1;
    for (int64_t i = 0; i < n; i++) r->fed[from + i] = toks[i];
    if (from + n > r->n_fed) r->n_fed = from + n;
    int32_t best = 0;
    for (int v = 1; v < d->V; v++)
        if (d->logits[v] > d->logits[best]) best = v;
    return best;
}

int spec_draft_propose(spec_draft *d, spec_draft_req *r, const int32_t *seq, int64_t len, int32_t *draft, int k)
{
    if (k <= 0 || len <= 0) return 0;
    if (len + k > d->ctx) k = (int)(d->ctx - len);
    if (k <= 0) return 0;
    if (ensure_slots(d, r, len + k - 1)) return 0;
    /* the draft KV is valid while what it was computed for matches seq */
    int64_t valid = 0, lim = r->n_fed < len ? r->n_fed : len;
    while (valid < lim && r->fed[valid] == seq[valid]) valid++;
    if (valid == len) valid = len - 1; /* the last token's row gives d0 */
    r->n_fed = valid;
    int32_t t = step(d, r, seq + valid, valid, len - valid);
    if (t < 0) return 0;
    int n = 0;
    draft[n++] = t;
    while (n < k) {
        t = step(d, r, &draft[n - 1], len + n - 1, 1);
        if (t < 0) break;
        draft[n++] = t;
    }
    return n;
}
