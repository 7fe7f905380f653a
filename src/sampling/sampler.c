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

float sampling_exp_neg(float x);
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

static void heap_sift(int32_t *h, int64_t n, int64_t k, const float *w)
{
    /* min-heap by rank: the root is the worst kept */
    while (true) {
        int64_t l = 2 * k + 1, r = l + 1, m = k;
        if (l < n && gt(w, h[m], h[l])) m = l;
        if (r < n && gt(w, h[m], h[r])) m = r;
        if (m == k) return;
        swp(h, k, m);
        k = m;
    }
}

/* Move the k best of idx[0..n) to idx[0..k) (any order) with a size-k
 * min-heap kept in place: one compare per element in the common case
 * (not better than the worst kept), so O(n) for small k.  k < n. */
static void heap_top(int32_t *idx, int64_t n, int64_t k, const float *w)
{
    for (int64_t i = k / 2 - 1; i >= 0; i--) heap_sift(idx, k, i, w);
    float worst = w[idx[0]];
    for (int64_t j = k; j < n; j++) {
        if (w[idx[j]] < worst) continue; /* the common case, one compare */
        if (gt(w, idx[j], idx[0])) {
            swp(idx, 0, j);
            heap_sift(idx, k, 0, w);
            worst = w[idx[0]];
        }
    }
}

/* The best k of idx[0..n) to the front: heap for small k, quickselect
 * otherwise. */
static void top_k_front(int32_t *idx, int64_t n, int64_t k, const float *w)
{
    if (k >= n) return;
    if (k <= 1024) heap_top(idx, n, k, w);
    else select_top(idx, 0, n, k, w);
}

/* idx[0..m) = the ids whose weight can still be in a top-p set: a token
 * with p < (1 - top_p) / V has more than top_p ranked above it (all the
 * tokens at or above that bound hold more than top_p of the mass), so it
 * is dropped before any ranking.  Returns m (>= 1: the max survives). */
static int64_t top_p_candidates(int32_t *idx, const float *w, int64_t V, double z, double top_p)
{
    float bound = (float)((1.0 - top_p) / (double)V * z);
    int64_t m = 0;
    for (int64_t i = 0; i < V; i++) {
        idx[m] = (int32_t)i;
        m += w[i] >= bound;
    }
    return m;
}

/* Top-p as a weighted quickselect, no sort: among idx[0..n) (any order,
 * all ranked above idx[n..)), move to idx[0..k) the ids whose mass
 * ranked strictly before them is <= top_p, and return k (>= 1 when
 * n >= 1, since the best id has 0 mass before it).  Same partition as
 * select_top; each round decides the pivot: kept when the mass of
 * everything ranked above it is <= top_p (then so is everything above
 * it), dropped otherwise (then so is everything below it).  O(n)
 * expected. */
static int64_t select_top_p(int32_t *idx, int64_t n, const float *w, double top_p)
{
    int64_t lo = 0, hi = n;
    double acc = 0.0; /* mass of idx[0..lo), all kept */
    while (lo < hi) {
        if (hi - lo >= 3) {
            int64_t mid = lo + (hi - lo) / 2;
            if (gt(w, idx[mid], idx[lo])) swp(idx, lo, mid);
            if (gt(w, idx[hi - 1], idx[lo])) swp(idx, lo, hi - 1);
            if (gt(w, idx[mid], idx[hi - 1])) swp(idx, mid, hi - 1);
        }
        int32_t pv = idx[hi - 1];
        int64_t s = lo;
        double above = 0.0;
        for (int64_t i = lo; i < hi - 1; i++)
            if (gt(w, idx[i], pv)) {
                above += w[idx[i]];
                swp(idx, i, s++);
            }
        swp(idx, s, hi - 1);
        if (acc + above > top_p) {
            hi = s;
        } else {
            acc += above + w[idx[s]];
            lo = s + 1;
        }
    }
    return lo;
}

/* ------------------------------------------------------------ sampling */

typedef union {
    int32_t i;
    float f;
} fbits;

/* exp((xv - shift) * scale) for arguments <= 0 (shift = the max, scale =
 * 1 / T > 0); exactly 0 at or below -87 (so -inf -> 0).  Cephes-style
 * 2^k * poly(r), relative error < 2e-7 (test_sampling checks it against
 * exp() through sampling_exp_neg).  The range test and the selects work on bit patterns with
 * integer masks (no float compare-and-branch) so that it vectorises. */
static inline float exp_neg(float xv, float shift, float scale)
{
    fbits v = {.f = (xv - shift) * scale};
    int32_t keep = -((v.i & 0x7fffffff) < 0x42ae0000); /* |v| < 87 (v <= 0) */
    fbits c = {.i = (v.i & keep) | ((int32_t)0xc2ae0000 & ~keep)}; /* else -87 */
    float a = c.f;
    float k = (a * 1.44269504088896341f + 12582912.0f) - 12582912.0f; /* round(a / ln 2) */
    float r = a - k * 0.693145751953125f - k * 1.428606765330187045e-06f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    fbits two_k = {.i = ((int32_t)k + 127) << 23};
    fbits out = {.f = p * two_k.f};
    out.i &= keep;
    return out.f;
}

float sampling_exp_neg(float x) { return exp_neg(x, 0.0f, 1.0f); }

/* w[i] = exp_neg(x[i], shift, scale); returns the sum of w.  Blocks of 8
 * with a fixed inner trip count: GCC -O2's cheap cost model vectorises
 * those (an open-ended loop it does not).  ~3x glibc expf at vocab 152k. */
static double exp_weights(float *restrict w, const float *restrict x, int64_t n, float shift, float scale)
{
    int64_t n8 = n / 8 * 8;
    for (int64_t i = 0; i < n8; i += 8)
        for (int j = 0; j < 8; j++) w[i + j] = exp_neg(x[i + j], shift, scale);
    for (int64_t i = n8; i < n; i++) w[i] = exp_neg(x[i], shift, scale);
    float part[8] = {0};
    for (int64_t i = 0; i < n8; i += 8)
        for (int j = 0; j < 8; j++) part[j] += w[i + j];
    double z = 0.0;
    for (int j = 0; j < 8; j++) z += part[j];
    for (int64_t i = n8; i < n; i++) z += w[i];
    return z;
}

/* Index of the first maximum of x[0..n) (no NaN: sanitised before).
 * Eight running maxima the compiler keeps in registers / vectorises,
 * then one scan for the first index holding the max: measured 24x faster
 * than a loop that re-reads x[best] (kern_ref_argmax) at vocab 152k. */
static int32_t argmax_first(const float *x, int64_t n)
{
    float m[8];
    for (int j = 0; j < 8; j++) m[j] = -INFINITY;
    int64_t n8 = n / 8 * 8;
    for (int64_t i = 0; i < n8; i += 8)
        for (int j = 0; j < 8; j++) m[j] = x[i + j] > m[j] ? x[i + j] : m[j];
    float mx = -INFINITY;
    for (int j = 0; j < 8; j++) mx = m[j] > mx ? m[j] : mx;
    for (int64_t i = n8; i < n; i++) mx = x[i] > mx ? x[i] : mx;
    for (int64_t i = 0; i < n; i++)
        if (x[i] == mx) return (int32_t)i;
    return 0;
}

/* NaN -> -inf on bit patterns (blocks of 8 with integer masks so that
 * GCC -O2 vectorises it; a compare-and-store loop costs 4x more). */
static void nan_to_neg_inf(float *x, int64_t n)
{
    int64_t n8 = n / 8 * 8;
    for (int64_t i = 0; i < n8; i += 8)
        for (int j = 0; j < 8; j++) {
            fbits v = {.f = x[i + j]};
            int32_t nan = -((v.i & 0x7fffffff) > 0x7f800000);
            v.i = (v.i & ~nan) | ((int32_t)0xff800000 & nan);
            x[i + j] = v.f;
        }
    for (int64_t i = n8; i < n; i++)
        if (isnan(x[i])) x[i] = -INFINITY;
}

static void apply_penalties(const sampling_state *st, float *logits)
{
    const sampling_params *p = st->params;
    int64_t V = st->vocab;
    nan_to_neg_inf(logits, V);
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

/* Draw over all ids 0..n-1 with weights w (those below min_w count as 0).
 * total: the sum of the counted weights, or < 0 to compute it.  Walks in
 * blocks of 8 (one block sum per step instead of a serial chain of
 * adds), then inside the block that crosses u. */
static int32_t draw_dense(const float *w, int64_t n, float min_w, double total, double u01)
{
    int64_t n8 = n / 8 * 8;
    bool all = min_w < 0; /* no min-p: plain sums, no compares (vectorisable) */
    if (total < 0) {
        float part[8] = {0};
        for (int64_t i = 0; i < n8; i += 8)
            for (int j = 0; j < 8; j++) part[j] += all || w[i + j] >= min_w ? w[i + j] : 0.0f;
        total = 0.0;
        for (int j = 0; j < 8; j++) total += part[j];
        for (int64_t i = n8; i < n; i++) total += all || w[i] >= min_w ? w[i] : 0.0f;
    }
    double u = u01 * total, acc = 0.0;
    int64_t i = 0;
    for (; i < n8; i += 8) {
        float b = 0.0f;
        if (all)
            for (int j = 0; j < 8; j++) b += w[i + j];
        else
            for (int j = 0; j < 8; j++) b += w[i + j] >= min_w ? w[i + j] : 0.0f;
        if (acc + b > u) break;
        acc += b;
    }
    for (; i < n; i++) {
        float wi = w[i];
        if (wi < min_w || !(wi > 0)) continue;
        acc += wi;
        if (acc > u) return (int32_t)i;
    }
    /* rounding left u unreached: the last counted token */
    for (i = n - 1; i > 0; i--)
        if (w[i] >= min_w && w[i] > 0) break;
    return (int32_t)i;
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
    /* min-heap of the best n seen so far, in the caller's array */
    for (int i = 0; i < n; i++) ids[i] = i;
    for (int64_t i = n / 2 - 1; i >= 0; i--) heap_sift(ids, n, i, logits);
    float worst = logits[ids[0]];
    for (int64_t j = n; j < V; j++) {
        if (logits[j] < worst) continue;
        if (gt(logits, (int32_t)j, ids[0])) {
            ids[0] = (int32_t)j;
            heap_sift(ids, n, 0, logits);
            worst = logits[ids[0]];
        }
    }
    qsort_r(ids, (size_t)n, sizeof *ids, cmp_rank, (void *)logits);
}

/* The chosen token's logprob (when lp->want), the top lp->top_n and the
 * lp->ids ones, from a prepared lp_ctx. */
static void fill_logprobs(const lp_ctx *lc, const float *logits, int64_t V, const sampling_logprob_req *lp,
                          sampling_result *out)
{
    if (lp->want) out->logprob = out->token >= 0 && out->token < V ? lp_of(lc, logits, out->token) : NAN;
    if (lp->top_n > 0 && out->top_ids && out->top_logprobs) {
        int n = lp->top_n < V ? lp->top_n : (int)V;
        top_by_logit(logits, V, out->top_ids, n);
        for (int i = 0; i < n; i++) out->top_logprobs[i] = lp_of(lc, logits, out->top_ids[i]);
        out->n_top = n;
    }
    if (lp->n_ids > 0 && lp->ids && out->ids_logprobs)
        for (int i = 0; i < lp->n_ids; i++)
            out->ids_logprobs[i] = lp->ids[i] >= 0 && lp->ids[i] < V ? lp_of(lc, logits, lp->ids[i]) : NAN;
}

int sampling_apply_processors(const sampling_state *st, float *logits)
{
    if (!st || !st->params || !logits) {
        log_error("bad arguments");
        return -1;
    }
    apply_penalties(st, logits);
    return 0;
}

int sampling_sample(sampling_state *st, float *logits, void *scratch, const sampling_logprob_req *lp,
                    sampling_result *out)
{
    if (!st || !st->params || !logits || !scratch || !out) {
        log_error("bad arguments");
        return -1;
    }
    apply_penalties(st, logits);
    return sampling_sample_processed(st, logits, scratch, lp, out);
}

bool sampling_spec_accept(double p, double coin, double threshold_single, double threshold_acc)
{
    if (!(p > 0)) return false; /* masked / filtered out: never (SGLang would take it at coin 0) */
    if (!(threshold_acc >= 1e-9)) threshold_acc = 1e-9; /* SGLang's cap */
    return coin <= p / threshold_acc || p >= threshold_single;
}

/* The verify half of sample_impl: e holds the weights, the kept set is
 * ids 0..V-1 (idx NULL) or idx[0..keep), those below min_w not counted.
 * Draws the coin, and on a reject a second number for the residual
 * (the kept set without the draft).  Returns the token. */
static int32_t verify_draw(sampling_state *st, float *e, const int32_t *idx, int64_t keep, float min_w, int32_t draft,
                           double ts, double ta)
{
    double tot = 0.0;
    bool in = false;
    for (int64_t i = 0; i < keep; i++) {
        int32_t id = idx ? idx[i] : (int32_t)i;
        if (e[id] < min_w) continue;
        tot += e[id];
        if (id == draft) in = e[id] > 0;
    }
    double q = in && tot > 0 ? (double)e[draft] / tot : 0.0;
    double coin = sampling_uniform(st->seed, st->n_draws++);
    if (sampling_spec_accept(q, coin, ts, ta)) return draft;
    if (in && !(tot - (double)e[draft] > 0)) return draft; /* no residual mass: only a bad threshold gets here */
    double u = sampling_uniform(st->seed, st->n_draws++);
    float saved = in ? e[draft] : 0.0f;
    if (in) e[draft] = 0.0f; /* residual: the draft's own mass removed */
    int32_t t = idx ? draw(e, idx, keep, min_w, u) : draw_dense(e, keep, min_w, -1.0, u);
    if (in) e[draft] = saved;
    return t;
}

/* sampling_sample_processed, and with draft >= 0 sampling_verify_processed. */
static int sample_impl(sampling_state *st, const float *logits, void *scratch, const sampling_logprob_req *lp,
                       sampling_result *out, int32_t draft, double ts, double ta)
{
    const sampling_params *p = st->params;
    int64_t V = st->vocab;
    float *e = scratch;                    /* (V) weights exp((l - lmax) / T) */
    int32_t *idx = (int32_t *)(e + V);     /* (V) ranking */
    bool greedy = p->top_k <= 1;
    bool want_lp = lp && (lp->want || lp->top_n > 0 || lp->n_ids > 0);
    bool verify = draft >= 0 && draft < V;

    int32_t best = argmax_first(logits, V);
    float lmax = logits[best];

    lp_ctx lc = {.mode = 0, .lmax = lmax, .inv_t = 1.0f};
    if (greedy) {
        out->token = best;
    } else {
        /* e = softmax(logits / T).  Infinite maxima (a +inf logit, or
         * every token masked) take an exact path: uniform over the maxima. */
        float inv_t = (float)(1.0 / p->temperature);
        double log_z;
        double z; /* e holds unnormalised weights, e[best] = 1, sum z */
        if (isfinite(lmax)) {
            z = exp_weights(e, logits, V, lmax, inv_t);
        } else {
            z = 0.0;
            for (int64_t i = 0; i < V; i++) z += e[i] = logits[i] == lmax ? 1.0f : 0.0f;
        }
        log_z = log(z);
        /* p_i >= min_p * p_max  <=>  e_i >= min_p * e[best] */
        float min_w = p->min_p > 0 ? (float)p->min_p * e[best] : -1.0f;
        if (verify && p->top_k >= V && p->top_p >= 1.0) {
            out->token = verify_draw(st, e, NULL, V, min_w, draft, ts, ta);
        } else if (p->top_k >= V && p->top_p >= 1.0) {
            out->token = draw_dense(e, V, min_w, min_w < 0 ? z : -1.0, sampling_uniform(st->seed, st->n_draws++));
        } else {
            /* top-k: the set of the k best (order not needed); top-p: a
             * weighted select inside it (exclusive mass is the same as in
             * the full ranking, the k best being ranked first) */
            int64_t keep = V;
            if (p->top_p < 1.0) {
                keep = top_p_candidates(idx, e, V, z, p->top_p);
            } else {
                for (int64_t i = 0; i < V; i++) idx[i] = (int32_t)i;
            }
            if (p->top_k < keep) {
                top_k_front(idx, keep, p->top_k, e);
                keep = p->top_k;
            }
            if (p->top_p < 1.0) keep = select_top_p(idx, keep, e, p->top_p * z);
            out->token = verify ? verify_draw(st, e, idx, keep, min_w, draft, ts, ta)
                                : draw(e, idx, keep, min_w, sampling_uniform(st->seed, st->n_draws++));
        }
        lc.mode = 1;
        lc.inv_t = inv_t;
        lc.log_z = log_z;
        lc.z = z;
    }

    out->n_top = 0;
    if (!want_lp) return 0;
    if ((greedy || lp->original)) {
        /* log_softmax of the processed logits: reuse e for softmax(logits) */
        lc.mode = 0;
        if (isfinite(lmax)) {
            lc.log_z = log(exp_weights(e, logits, V, lmax, 1.0f));
        } else {
            double n_max = 0;
            for (int64_t i = 0; i < V; i++) n_max += logits[i] == lmax;
            lc.log_z = log(n_max);
        }
    } else if (p->top_p < 1.0) {
        /* the top-p set over the whole vocabulary (no top-k, no min-p) */
        int64_t n_p = top_p_candidates(idx, e, V, lc.z, p->top_p);
        n_p = select_top_p(idx, n_p, e, p->top_p * lc.z);
        double mass = 0.0;
        int32_t bound = idx[0];
        for (int64_t i = 0; i < n_p; i++) {
            mass += e[idx[i]];
            if (gt(e, bound, idx[i])) bound = idx[i];
        }
        lc.mode = 2;
        lc.e = e;
        lc.log_mass = log(mass / lc.z);
        lc.bound = bound;
    }
    fill_logprobs(&lc, logits, V, lp, out);
    return 0;
}

int sampling_sample_processed(sampling_state *st, const float *logits, void *scratch,
                              const sampling_logprob_req *lp, sampling_result *out)
{
    if (!st || !st->params || !logits || !scratch || !out) {
        log_error("bad arguments");
        return -1;
    }
    return sample_impl(st, logits, scratch, lp, out, -1, 1.0, 1.0);
}

int sampling_verify_processed(sampling_state *st, const float *logits, void *scratch, int32_t draft,
                              double threshold_single, double threshold_acc, const sampling_logprob_req *lp,
                              sampling_result *out)
{
    if (!st || !st->params || !logits || !scratch || !out || draft < 0 || draft >= st->vocab) {
        log_error("bad arguments");
        return -1;
    }
    return sample_impl(st, logits, scratch, lp, out, draft, threshold_single, threshold_acc);
}

int sampling_input_logprobs(const float *logits, int64_t vocab, int32_t target, void *scratch,
                            const sampling_logprob_req *lp, sampling_result *out)
{
    if (!logits || vocab < 1 || vocab > INT32_MAX || !scratch || !out) {
        log_error("bad arguments");
        return -1;
    }
    float *x = scratch;  /* (vocab) logits with NaN -> -inf */
    float *e = x + vocab; /* (vocab) weights */
    memcpy(x, logits, (size_t)vocab * sizeof *x);
    nan_to_neg_inf(x, vocab);
    int32_t best = argmax_first(x, vocab);
    float lmax = x[best];
    lp_ctx lc = {.mode = 0, .lmax = lmax, .inv_t = 1.0f};
    if (isfinite(lmax)) {
        lc.log_z = log(exp_weights(e, x, vocab, lmax, 1.0f));
    } else {
        double n_max = 0;
        for (int64_t i = 0; i < vocab; i++) n_max += x[i] == lmax;
        lc.log_z = log(n_max);
    }
    out->token = target;
    out->n_top = 0;
    sampling_logprob_req all = lp ? *lp : (sampling_logprob_req){0};
    all.want = true;
    fill_logprobs(&lc, x, vocab, &all, out);
    return 0;
}
