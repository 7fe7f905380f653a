/* sampler — see sampler.h for the pipeline and SGLang's semantics. */
#include "sampling/sampler.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util/log.h"

/* ------------------------------------------------------------ random */

static inline uint64_t mix64(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    x ^= x >> 31;
    return x;
}

double sampling_uniform(uint64_t seed, uint64_t k)
{
    uint64_t x = mix64(seed ^ mix64(k * 0x9e3779b97f4a7c15ULL + 0x632be59bd9b4e019ULL));
    return (double)(x >> 11) * 0x1.0p-53;
}

/* ------------------------------------------------------------ counter */

static inline uint32_t tok_hash(int32_t t) { return (uint32_t)t * 2654435761u; }

static int counter_add(sampling_counter *c, int32_t key, int32_t inc)
{
    if ((c->n + 1) * 2 > c->cap) {
        uint32_t cap = c->cap ? c->cap * 2 : 16;
        int32_t *keys = malloc(cap * sizeof *keys), *vals = malloc(cap * sizeof *vals);
        if (!keys || !vals) {
            free(keys);
            free(vals);
            log_error("out of memory for penalty counters");
            return -1;
        }
        memset(keys, 0xff, cap * sizeof *keys);
        for (uint32_t i = 0; i < c->cap; i++) {
            if (c->keys[i] < 0) continue;
            uint32_t j = tok_hash(c->keys[i]) & (cap - 1);
            while (keys[j] >= 0) j = (j + 1) & (cap - 1);
            keys[j] = c->keys[i];
            vals[j] = c->vals[i];
        }
        free(c->keys);
        free(c->vals);
        c->keys = keys;
        c->vals = vals;
        c->cap = cap;
    }
    uint32_t mask = c->cap - 1, i = tok_hash(key) & mask;
    while (c->keys[i] >= 0 && c->keys[i] != key) i = (i + 1) & mask;
    if (c->keys[i] < 0) {
        c->keys[i] = key;
        c->vals[i] = 0;
        c->n++;
    }
    c->vals[i] += inc;
    return 0;
}

static bool counter_has(const sampling_counter *c, int32_t key)
{
    if (!c->cap) return false;
    uint32_t mask = c->cap - 1, i = tok_hash(key) & mask;
    while (c->keys[i] >= 0) {
        if (c->keys[i] == key) return true;
        i = (i + 1) & mask;
    }
    return false;
}

static void counter_free(sampling_counter *c)
{
    free(c->keys);
    free(c->vals);
    memset(c, 0, sizeof *c);
}

/* ------------------------------------------------------------ state */

int sampling_state_init(sampling_state *st, const sampling_params *p, int64_t vocab, const int32_t *eos_ids,
                        int n_eos, uint64_t seed)
{
    memset(st, 0, sizeof *st);
    if (!p || vocab < 1 || vocab > INT32_MAX || n_eos < 0) {
        log_error("bad arguments (params=%p vocab=%lld n_eos=%d)", (const void *)p, (long long)vocab, n_eos);
        return -1;
    }
    st->params = p;
    st->vocab = vocab;
    st->seed = seed;
    int cap = p->n_stop_token_ids + n_eos;
    st->stop_ids = malloc((size_t)(cap ? cap : 1) * sizeof *st->stop_ids);
    if (!st->stop_ids) {
        log_error("out of memory");
        return -1;
    }
    for (int i = 0; i < cap; i++) {
        int32_t id = i < p->n_stop_token_ids ? p->stop_token_ids[i] : eos_ids[i - p->n_stop_token_ids];
        bool dup = false;
        for (int j = 0; j < st->n_stop_ids && !dup; j++) dup = st->stop_ids[j] == id;
        if (!dup) st->stop_ids[st->n_stop_ids++] = id;
    }
    return 0;
}

void sampling_state_free(sampling_state *st)
{
    free(st->stop_ids);
    counter_free(&st->output);
    counter_free(&st->prompt);
    memset(st, 0, sizeof *st);
}

int sampling_state_add_prompt(sampling_state *st, const int32_t *ids, int64_t n)
{
    if (st->params->repetition_penalty == 1.0) return 0;
    for (int64_t i = 0; i < n; i++)
        if (ids[i] >= 0 && ids[i] < st->vocab && !counter_has(&st->prompt, ids[i]))
            if (counter_add(&st->prompt, ids[i], 1) != 0) return -1;
    return 0;
}

int sampling_state_accept(sampling_state *st, int32_t token)
{
    if (token < 0 || token >= st->vocab) {
        log_error("token %d out of vocabulary [0, %lld)", token, (long long)st->vocab);
        return -1;
    }
    if (counter_add(&st->output, token, 1) != 0) return -1;
    st->n_generated++;
    return 0;
}

size_t sampling_scratch_bytes(int64_t vocab)
{
    /* e (vocab f32) | idx (vocab i32) */
    return (size_t)vocab * (sizeof(float) + sizeof(int32_t)) + 64;
}

/* ------------------------------------------------------------ selection */

/* Total order for ranking: larger weight first, smaller id on ties. */
static inline bool gt(const float *w, int32_t a, int32_t b) { return w[a] > w[b] || (w[a] == w[b] && a < b); }

static inline void swp(int32_t *v, int64_t i, int64_t j)
{
    int32_t x = v[i];
    v[i] = v[j];
    v[j] = x;
}

/* Move the k highest-ranked ids of idx[lo..hi) to idx[lo..lo+k), in any
 * order.  Quickselect with median-of-three; O(hi - lo) expected. */
static void select_top(int32_t *idx, int64_t lo, int64_t hi, int64_t k, const float *w)
{
    int64_t target = lo + k;
    if (k <= 0 || target >= hi) return;
    while (hi - lo > 1) {
        int64_t mid = lo + (hi - lo) / 2;
        if (gt(w, idx[mid], idx[lo])) swp(idx, lo, mid);
        if (gt(w, idx[hi - 1], idx[lo])) swp(idx, lo, hi - 1);
        if (gt(w, idx[mid], idx[hi - 1])) swp(idx, mid, hi - 1);
        int32_t pv = idx[hi - 1];
        int64_t s = lo;
        for (int64_t i = lo; i < hi - 1; i++)
            if (gt(w, idx[i], pv)) swp(idx, i, s++);
        swp(idx, s, hi - 1);
        if (s == target || s == target - 1) return;
        if (s < target) lo = s + 1;
        else hi = s;
    }
}

static int cmp_rank(const void *a, const void *b, void *w)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return gt(w, x, y) ? -1 : gt(w, y, x) ? 1 : 0;
}

/* Ranked candidate window over weights w: idx[0..n_sorted) sorted best
 * first, idx[n_sorted..vocab) the rest, all worse. */
typedef struct {
    int32_t *idx;
    const float *w;
    int64_t vocab, n_sorted;
} ranker;

static void ranker_init(ranker *r, int32_t *idx, const float *w, int64_t vocab)
{
    r->idx = idx;
    r->w = w;
    r->vocab = vocab;
    r->n_sorted = 0;
    for (int64_t i = 0; i < vocab; i++) idx[i] = (int32_t)i;
}

/* Grow the sorted window to at least min(want, vocab). */
static void ranker_grow(ranker *r, int64_t want)
{
    if (want > r->vocab) want = r->vocab;
    if (want <= r->n_sorted) return;
    select_top(r->idx, r->n_sorted, r->vocab, want - r->n_sorted, r->w);
    qsort_r(r->idx + r->n_sorted, (size_t)(want - r->n_sorted), sizeof(int32_t), cmp_rank, (void *)r->w);
    r->n_sorted = want;
}

/* Length of the prefix of the ranking kept by rank < top_k, exclusive mass
 * <= top_p (skipped when top_p >= 1), weight >= min_w.  Grows the window
 * as needed.  Weights are probabilities times z. */
static int64_t ranker_keep(ranker *r, int64_t top_k, double top_p, double z, float min_w)
{
    int64_t lim = top_k < r->vocab ? top_k : r->vocab;
    double cum = 0.0;
    int64_t i = 0;
    for (int64_t window = 64;; window *= 2) {
        ranker_grow(r, window < lim ? window : lim);
        for (; i < r->n_sorted && i < lim; i++) {
            float wi = r->w[r->idx[i]];
            if (top_p < 1.0 && cum > top_p) return i;
            if (wi < min_w) return i;
            cum += (double)wi / z;
        }
        if (i >= lim) return lim;
    }
}

/* ------------------------------------------------------------ sampling */

static void apply_penalties(const sampling_state *st, float *logits)
{
    const sampling_params *p = st->params;
    int64_t V = st->vocab;
    for (int64_t i = 0; i < V; i++)
        if (isnan(logits[i])) logits[i] = -INFINITY;
    const sampling_counter *out = &st->output;
    if (p->frequency_penalty != 0.0 || p->presence_penalty != 0.0) {
        float fp = (float)p->frequency_penalty, pp = (float)p->presence_penalty;
        for (uint32_t i = 0; i < out->cap; i++)
            if (out->keys[i] >= 0) logits[out->keys[i]] -= fp * (float)out->vals[i] + pp;
    }
    if (st->n_generated < p->min_new_tokens)
        for (int i = 0; i < st->n_stop_ids; i++)
            if (st->stop_ids[i] >= 0 && st->stop_ids[i] < V) logits[st->stop_ids[i]] = -INFINITY;
    if (p->repetition_penalty != 1.0) {
        float rp = (float)p->repetition_penalty;
        const sampling_counter *pr = &st->prompt;
        for (uint32_t i = 0; i < pr->cap; i++) {
            int32_t t = pr->keys[i];
            if (t < 0) continue;
            logits[t] = logits[t] > 0 ? logits[t] / rp : logits[t] * rp;
        }
        for (uint32_t i = 0; i < out->cap; i++) {
            int32_t t = out->keys[i];
            if (t < 0 || counter_has(pr, t)) continue;
            logits[t] = logits[t] > 0 ? logits[t] / rp : logits[t] * rp;
        }
    }
    for (int i = 0; i < p->n_logit_bias; i++) {
        int32_t t = p->logit_bias[i].token;
        if (t >= 0 && t < V) logits[t] += p->logit_bias[i].bias;
    }
}

/* Draw from weights w over the ids idx[0..n) (or 0..n when idx is NULL),
 * skipping weights below min_w.  Returns the id. */
static int32_t draw(const float *w, const int32_t *idx, int64_t n, float min_w, double u01)
{
    double total = 0.0;
    for (int64_t i = 0; i < n; i++) {
        float wi = w[idx ? idx[i] : i];
        if (wi >= min_w) total += wi;
    }
    double u = u01 * total, acc = 0.0;
    int32_t last = -1;
    for (int64_t i = 0; i < n; i++) {
        int32_t id = idx ? idx[i] : (int32_t)i;
        float wi = w[id];
        if (wi < min_w) continue;
        if (wi > 0) last = id;
        acc += wi;
        if (acc > u && wi > 0) return id;
    }
    return last >= 0 ? last : (idx ? idx[0] : 0);
}

typedef struct {
    int mode;        /* 0: log_softmax(logits), 1: log_softmax(logits / T), 2: top-p renormalised */
    float lmax;      /* max processed logit */
    double log_z;    /* log sum exp of the mode's scaled logits, minus lmax */
    float inv_t;
    const float *e;  /* mode 2: weights exp((l - lmax) / T) */
    double z;        /* mode 2: sum of e */
    double log_mass; /* mode 2: log(sum of e over the top-p set / z) */
    int32_t bound;   /* mode 2: last id of the top-p set in rank order */
} lp_ctx;

static float lp_of(const lp_ctx *c, const float *logits, int32_t t)
{
    if (c->mode == 0) return (float)((double)(logits[t] - c->lmax) - c->log_z);
    if (c->mode == 1) return (float)((double)((logits[t] - c->lmax) * c->inv_t) - c->log_z);
    if (!(c->e[t] > c->e[c->bound] || (c->e[t] == c->e[c->bound] && t <= c->bound))) return -FLT_MAX;
    double v = log((double)c->e[t] / c->z) - c->log_mass;
    return v < -FLT_MAX ? -FLT_MAX : (float)v;
}

/* Best n ids by processed logit (value desc, id asc) into ids[0..n). */
static void top_by_logit(const float *logits, int64_t V, int32_t *ids, int n)
{
    /* min-heap of the current best n: root is the worst kept */
    int h = 0;
    for (int64_t i = 0; i < V; i++) {
        int32_t t = (int32_t)i;
        if (h < n) {
            int k = h++;
            ids[k] = t;
            while (k > 0 && gt(logits, ids[(k - 1) / 2], ids[k])) {
                swp(ids, k, (k - 1) / 2);
                k = (k - 1) / 2;
            }
        } else if (gt(logits, t, ids[0])) {
            ids[0] = t;
            for (int k = 0;;) {
                int l = 2 * k + 1, r = l + 1, m = k;
                if (l < h && gt(logits, ids[m], ids[l])) m = l;
                if (r < h && gt(logits, ids[m], ids[r])) m = r;
                if (m == k) break;
                swp(ids, k, m);
                k = m;
            }
        }
    }
    qsort_r(ids, (size_t)h, sizeof *ids, cmp_rank, (void *)logits);
}

int sampling_sample(sampling_state *st, float *logits, void *scratch, const sampling_logprob_req *lp,
                    sampling_result *out)
{
    if (!st || !st->params || !logits || !scratch || !out) {
        log_error("bad arguments");
        return -1;
    }
    const sampling_params *p = st->params;
    int64_t V = st->vocab;
    float *e = scratch;                    /* (V) weights exp((l - lmax) / T) */
    int32_t *idx = (int32_t *)(e + V);     /* (V) ranking */
    bool greedy = p->top_k <= 1;
    bool want_lp = lp && (lp->want || lp->top_n > 0 || lp->n_ids > 0);

    apply_penalties(st, logits);

    float lmax = -INFINITY;
    int32_t best = 0;
    for (int64_t i = 0; i < V; i++)
        if (logits[i] > lmax) lmax = logits[i], best = (int32_t)i;

    lp_ctx lc = {.mode = 0, .lmax = lmax, .inv_t = 1.0f};
    double z = 0.0;
    ranker rk;
    bool ranked = false;
    if (greedy) {
        out->token = best;
    } else {
        float inv_t = (float)(1.0 / p->temperature);
        for (int64_t i = 0; i < V; i++) {
            float w = logits[i] == lmax ? 1.0f : expf((logits[i] - lmax) * inv_t);
            e[i] = w;
            z += w;
        }
        double u = sampling_uniform(st->seed, st->n_draws++);
        float min_w = p->min_p > 0 ? (float)p->min_p : -1.0f; /* p_i >= min_p * p_max <=> e_i >= min_p */
        if (p->top_k >= V && p->top_p >= 1.0) {
            out->token = draw(e, NULL, V, min_w, u);
        } else {
            ranker_init(&rk, idx, e, V);
            ranked = true;
            int64_t keep = ranker_keep(&rk, p->top_k, p->top_p, z, min_w);
            out->token = draw(e, idx, keep, -1.0f, u);
        }
        lc.mode = 1;
        lc.inv_t = inv_t;
        lc.log_z = log(z);
    }

    out->n_top = 0;
    if (!want_lp) return 0;
    if (greedy || lp->original) {
        double z0 = 0.0;
        for (int64_t i = 0; i < V; i++) z0 += logits[i] == lmax ? 1.0 : exp((double)(logits[i] - lmax));
        lc.mode = 0;
        lc.log_z = log(z0);
    } else if (p->top_p < 1.0) {
        if (!ranked) ranker_init(&rk, idx, e, V);
        int64_t n_p = ranker_keep(&rk, (int64_t)V, p->top_p, z, -1.0f);
        double mass = 0.0;
        for (int64_t i = 0; i < n_p; i++) mass += e[idx[i]];
        lc.mode = 2;
        lc.e = e;
        lc.z = z;
        lc.log_mass = log(mass / z);
        lc.bound = idx[n_p - 1];
    }
    out->logprob = lp_of(&lc, logits, out->token);
    if (lp->top_n > 0 && out->top_ids && out->top_logprobs) {
        int n = lp->top_n < V ? lp->top_n : (int)V;
        top_by_logit(logits, V, out->top_ids, n);
        for (int i = 0; i < n; i++) out->top_logprobs[i] = lp_of(&lc, logits, out->top_ids[i]);
        out->n_top = n;
    }
    if (lp->n_ids > 0 && lp->ids && out->ids_logprobs)
        for (int i = 0; i < lp->n_ids; i++)
            out->ids_logprobs[i] = lp->ids[i] >= 0 && lp->ids[i] < V ? lp_of(&lc, logits, lp->ids[i]) : NAN;
    return 0;
}
