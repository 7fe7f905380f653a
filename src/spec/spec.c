/* spec — the drafter behind the scheduler's draft hook; see spec.h.
 *
 * The per-request table is open addressing over (id, sibling index),
 * rebuilt without its stale entries every GC_EVERY calls. */
#include "spec/spec.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "spec/spec_draft.h"
#include "spec/spec_eagle.h"
#include "util/log.h"

#define GC_EVERY 4096
#define STALE_PER_ENTRY 64 /* an entry not called for 64 calls per live entry is dropped */
#define BACKOFF_MAX 64
#define K_START 4 /* a new request's first drafts: at most 4 tokens, doubling while all come true */

typedef struct spec_req {
    uint64_t id;                 /* 0 = empty slot */
    int index;
    spec_ngram_cursor cur;       /* NGRAM: the sequence's place in the trie (tokens already inserted) */
    int64_t draft_len;           /* sequence length when `last` was proposed */
    int32_t *last;               /* (k) owned: the last draft */
    int32_t *last_par;           /* (k) owned: its parents (a chain: k - 1) */
    int n_last;
    int k_cap;                   /* drafts proposed at most now (adaptive) */
    int skip;                    /* calls left without drafting */
    int backoff;                 /* the next skip */
    uint64_t tick;               /* the last call */
    spec_draft_req dr;           /* STANDALONE: the draft model's KV of this request */
} spec_req;

struct spec_drafter {
    spec_args a;
    int k;                       /* num_draft_tokens - 1 */
    spec_ngram *trie;            /* NGRAM: owned */
    spec_draft *draft;           /* STANDALONE: owned (the model is borrowed) */
    spec_eagle *eagle;           /* EAGLE / EAGLE3: owned (the target is borrowed) */
    sched *s;                    /* EAGLE: the scheduler attached to (sched_draft_slots) */
    spec_req *tab;               /* (cap) */
    uint64_t cap, n;
    uint64_t tick;
    spec_drafter_stats st;
};

void spec_args_init(spec_args *a)
{
    memset(a, 0, sizeof *a);
    spec_ngram_params_init(&a->ngram);
    a->num_draft_tokens = 0; /* 0 = the algorithm's default */
    a->adaptive = true;
    a->eagle_topk = 1;
    const char *t = getenv("SGLC_SPEC_TREE"); /* 0: NGRAM verifies its first branch only (measurements) */
    a->tree = !(t && !strcmp(t, "0"));
}

int spec_algo_parse(const char *name)
{
    if (!name) return SPEC_ALGO_NONE;
    if (!strcmp(name, "NGRAM")) return SPEC_ALGO_NGRAM;
    if (!strcmp(name, "STANDALONE")) return SPEC_ALGO_STANDALONE;
    if (!strcmp(name, "EAGLE") || !strcmp(name, "NEXTN")) return SPEC_ALGO_EAGLE;
    if (!strcmp(name, "EAGLE3")) return SPEC_ALGO_EAGLE3;
    return -1;
}

spec_drafter *spec_drafter_create(const spec_args *a, char *err, size_t errlen)
{
    bool eagle = a->algo == SPEC_ALGO_EAGLE || a->algo == SPEC_ALGO_EAGLE3;
    if (a->algo != SPEC_ALGO_NGRAM && !(a->algo == SPEC_ALGO_STANDALONE && a->draft_model) &&
        !(eagle && a->eagle_path && a->target_model)) {
        snprintf(err, errlen, "speculative algorithm %d is not available (STANDALONE needs a draft model, EAGLE a head and the target)",
                 (int)a->algo);
        return NULL;
    }
    int ndt = a->num_draft_tokens > 0                          ? a->num_draft_tokens
              : a->algo == SPEC_ALGO_STANDALONE || eagle ? 4 /* SGLang's num_steps 3 + 1 */
                                                           : a->ngram.max_match_window;
    if (ndt < 1 || ndt > 64) {
        snprintf(err, errlen, "--speculative-num-draft-tokens must be between 1 and 64 (got %d)", ndt);
        return NULL;
    }
    if (eagle && (a->eagle_topk < 1 || a->eagle_topk > SPEC_EAGLE_TOPK_MAX || a->eagle_steps < 0 || a->eagle_steps > 63)) {
        snprintf(err, errlen, "--speculative-eagle-topk must be between 1 and %d and --speculative-num-steps between 1 "
                 "and 63 (got %d, %d)", SPEC_EAGLE_TOPK_MAX, a->eagle_topk, a->eagle_steps);
        return NULL;
    }
    spec_drafter *d = calloc(1, sizeof *d);
    if (!d) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    d->a = *a;
    d->a.num_draft_tokens = ndt;
    d->k = ndt - 1;
    if (d->a.eagle_steps <= 0) d->a.eagle_steps = 3;
    bool ok;
    if (a->algo == SPEC_ALGO_NGRAM) ok = (d->trie = spec_ngram_create(&a->ngram, err, errlen)) != NULL;
    else if (eagle)
        ok = (d->eagle = spec_eagle_create(a->eagle_path, a->algo == SPEC_ALGO_EAGLE3, a->target_model, a->target_slots,
                                           a->draft_kv_tokens > 0 ? a->draft_kv_tokens : 65536, err, errlen)) != NULL &&
             spec_eagle_set_token_map(d->eagle, a->token_map, err, errlen) == 0;
    else
        ok = (d->draft = spec_draft_create(a->draft_model, a->target_vocab, a->draft_kv_tokens > 0 ? a->draft_kv_tokens : 65536,
                                           a->draft_threads, err, errlen)) != NULL;
    d->cap = 64;
    d->tab = calloc(d->cap, sizeof(spec_req));
    if (!ok || !d->tab) {
        if (ok) snprintf(err, errlen, "out of memory");
        spec_drafter_destroy(d);
        return NULL;
    }
    return d;
}

void spec_drafter_destroy(spec_drafter *d)
{
    if (!d) return;
    for (uint64_t i = 0; i < d->cap && d->tab; i++) {
        free(d->tab[i].last);
        free(d->tab[i].last_par);
        spec_ngram_cursor_free(&d->tab[i].cur);
        if (d->draft && d->tab[i].id) spec_draft_req_release(d->draft, &d->tab[i].dr);
        if (d->eagle && d->tab[i].id) spec_eagle_req_release(d->eagle, &d->tab[i].dr);
    }
    free(d->tab);
    spec_ngram_destroy(d->trie);
    spec_draft_destroy(d->draft);
    spec_eagle_destroy(d->eagle);
    free(d);
}

void spec_drafter_attach(spec_drafter *d, sched *s)
{
    d->s = s;
    sched_set_draft_tree_hook(s, spec_drafter_draft_tree, d, d->k);
}

void spec_drafter_get_stats(const spec_drafter *d, spec_drafter_stats *st)
{
    *st = d->st;
    st->tracked = (int64_t)d->n;
    st->trie_nodes = d->trie ? spec_ngram_size(d->trie) : 0;
    st->draft_slots = d->draft ? spec_draft_slots_used(d->draft) : d->eagle ? spec_eagle_slots_used(d->eagle) : 0;
}

/* ---- the per-request table ------------------------------------------------ */

static uint64_t req_hash(uint64_t id, int index)
{
    uint64_t x = id * 0x9E3779B97F4A7C15ULL ^ (uint64_t)(uint32_t)index * 0xC2B2AE3D27D4EB4FULL;
    return x ^ (x >> 29);
}

static spec_req *slot_of(spec_req *tab, uint64_t cap, uint64_t id, int index)
{
    uint64_t i = req_hash(id, index) & (cap - 1);
    while (tab[i].id && !(tab[i].id == id && tab[i].index == index)) i = (i + 1) & (cap - 1);
    return &tab[i];
}

/* Rebuild into a table of new_cap slots, dropping entries idle for too
 * long (all kept when keep_all).  0 or -1 (out of memory: unchanged). */
static int rebuild(spec_drafter *d, uint64_t new_cap, bool keep_all)
{
    spec_req *nt = calloc(new_cap, sizeof(spec_req));
    if (!nt) return -1;
    uint64_t stale = STALE_PER_ENTRY * (d->n + 1), n = 0;
    for (uint64_t i = 0; i < d->cap; i++) {
        spec_req *e = &d->tab[i];
        if (!e->id) continue;
        if (!keep_all && d->tick - e->tick > stale) {
            free(e->last);
            free(e->last_par);
            spec_ngram_cursor_free(&e->cur);
            if (d->draft) spec_draft_req_release(d->draft, &e->dr);
            if (d->eagle) spec_eagle_req_release(d->eagle, &e->dr);
            continue;
        }
        *slot_of(nt, new_cap, e->id, e->index) = *e;
        n++;
    }
    free(d->tab);
    d->tab = nt;
    d->cap = new_cap;
    d->n = n;
    return 0;
}

static spec_req *req_get(spec_drafter *d, uint64_t id, int index)
{
    if (d->tick % GC_EVERY == 0) rebuild(d, d->cap, false);
    if ((d->n + 1) * 2 > d->cap && rebuild(d, d->cap * 2, true)) return NULL;
    spec_req *e = slot_of(d->tab, d->cap, id, index);
    if (!e->id) {
        int32_t *last = malloc(sizeof(int32_t) * (size_t)(d->k > 0 ? d->k : 1));
        int32_t *last_par = malloc(sizeof(int32_t) * (size_t)(d->k > 0 ? d->k : 1));
        spec_ngram_cursor cur = {0};
        if (!last || !last_par || (d->trie && spec_ngram_cursor_init(d->trie, &cur))) {
            free(last), free(last_par);
            return NULL;
        }
        *e = (spec_req){.id = id, .index = index, .last = last, .last_par = last_par, .cur = cur,
                        .k_cap = d->k < K_START ? d->k : K_START, .backoff = 1};
        d->n++;
    }
    e->tick = d->tick;
    return e;
}

/* ---- the hook ---------------------------------------------------------------- */

/* How the previous draft fared, and the back-off (spec.h).  A tree is
 * scored along the path the sequence took (right = accepted depth), and
 * "all right" means its deepest node was reached. */
static void adapt(spec_drafter *d, spec_req *e, const int32_t *seq, int64_t len)
{
    if (e->n_last <= 0 || e->draft_len <= 0 || len <= e->draft_len) return;
    int right = 0, node = -1, deepest = 0;
    int32_t dep[64];
    for (int k = 0; k < e->n_last && k < 64; k++) {
        dep[k] = e->last_par[k] < 0 ? 1 : dep[e->last_par[k]] + 1;
        if (dep[k] > deepest) deepest = dep[k];
    }
    while (e->draft_len + right < len) {
        int c = node + 1;
        while (c < e->n_last && !(e->last_par[c] == node && e->last[c] == seq[e->draft_len + right])) c++;
        if (c >= e->n_last) break;
        node = c;
        right++;
    }
    d->st.right += right;
    int n_last = deepest;
    e->n_last = 0;
    if (!d->a.adaptive) return;
    if (right > 0) {
        e->backoff = 1;
        e->k_cap = right == n_last ? e->k_cap * 2 : right + 1;
    } else if (e->k_cap > 1) {
        e->k_cap = 1;
    } else {
        e->skip = e->backoff;
        e->backoff = e->backoff * 2 > BACKOFF_MAX ? BACKOFF_MAX : e->backoff * 2;
    }
    if (e->k_cap > d->k) e->k_cap = d->k;
    if (e->k_cap < 1) e->k_cap = 1;
}

int spec_drafter_draft(void *ctx, uint64_t id, int index, const int32_t *seq, int64_t len, int32_t *draft,
                       int max_draft)
{
    return spec_drafter_draft_tree(ctx, id, index, seq, len, draft, NULL, max_draft);
}

int spec_drafter_draft_tree(void *ctx, uint64_t id, int index, const int32_t *seq, int64_t len, int32_t *draft,
                            int32_t *parent, int max_draft)
{
    spec_drafter *d = ctx;
    d->tick++;
    d->st.calls++;
    spec_req *e = req_get(d, id, index);
    if (!e) return 0;
    if (d->trie) spec_ngram_advance(d->trie, &e->cur, seq, len);
    adapt(d, e, seq, len);
    if (e->skip > 0) {
        e->skip--;
        d->st.skipped++;
        return 0;
    }
    int k = max_draft < e->k_cap ? max_draft : e->k_cap;
    if (k > d->k) k = d->k;
    if (k <= 0) return 0;
    /* NGRAM: the whole tree when the scheduler verifies trees (and SGLC_SPEC_TREE is not 0);
     * EAGLE: a tree with topk > 1 (a chain of at most num_steps tokens when the scheduler
     * wants chains), else a chain; STANDALONE: chains */
    bool etree = d->eagle && d->a.eagle_topk > 1;
    bool tree = parent && ((d->trie && d->a.tree) || etree);
    /* an EAGLE tree keeps its breadth under the back-off: k_cap bounds its depth, the
     * scheduler's max_draft and num_draft_tokens - 1 its nodes */
    int tree_nodes = max_draft < d->k ? max_draft : d->k;
    const int32_t *ts = d->eagle && d->s ? sched_draft_slots(d->s) : NULL;
    int n = d->trie    ? (tree ? spec_ngram_draft_tree(d->trie, &e->cur, seq, len, draft, parent, k)
                               : spec_ngram_draft_cursor(d->trie, &e->cur, seq, len, draft, k))
            : tree     ? spec_eagle_propose_tree(d->eagle, &e->dr, seq, len, ts, draft, parent, NULL, tree_nodes,
                                                 k < d->a.eagle_steps ? k : d->a.eagle_steps, d->a.eagle_topk)
            : d->eagle ? spec_eagle_propose(d->eagle, &e->dr, seq, len, ts, draft,
                                            etree && k > d->a.eagle_steps ? d->a.eagle_steps : k)
                       : spec_draft_propose(d->draft, &e->dr, seq, len, draft, k);
    if (n > 0 && parent && !tree)
        for (int i = 0; i < n; i++) parent[i] = i - 1;
    if (n > 0) {
        for (int i = 0; i < n; i++) e->last_par[i] = tree ? parent[i] : i - 1;
        memcpy(e->last, draft, sizeof(int32_t) * (size_t)n);
        e->n_last = n;
        e->draft_len = len;
        d->st.proposed += n;
    }
    return n;
}
