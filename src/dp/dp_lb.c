/* dp_lb — see dp_lb.h (methods, cache_aware's prefix table). */
#include "dp/dp_lb.h"

#include <stdlib.h>
#include <string.h>

struct dp_lb {
    int n;
    dp_lb_method m;
    int rr;                      /* round-robin counter (also rotates ties) */
    dp_lb_load *load;            /* (n) */
    uint64_t *table;             /* (n, DP_LB_SLOTS) cache_aware only, else NULL; 0 = empty */
};

static const char *const names[] = {"round_robin", "total_requests", "total_tokens", "follow_bootstrap_room",
                                    "cache_aware"};

int dp_lb_parse(const char *name)
{
    if (!name) return -1;
    if (!strcmp(name, "auto")) return DP_LB_ROUND_ROBIN; /* no PD disaggregation here */
    for (int i = 0; i < (int)(sizeof names / sizeof names[0]); i++)
        if (!strcmp(name, names[i])) return i;
    return -1;
}

const char *dp_lb_name(dp_lb_method m)
{
    return (unsigned)m < sizeof names / sizeof names[0] ? names[m] : "?";
}

dp_lb *dp_lb_create(int n, dp_lb_method m)
{
    if (n < 1) return NULL;
    dp_lb *lb = calloc(1, sizeof *lb);
    if (!lb) return NULL;
    lb->n = n;
    lb->m = m;
    lb->load = calloc((size_t)n, sizeof *lb->load);
    if (m == DP_LB_CACHE_AWARE) lb->table = calloc((size_t)n * DP_LB_SLOTS, sizeof(uint64_t));
    if (!lb->load || (m == DP_LB_CACHE_AWARE && !lb->table)) {
        dp_lb_destroy(lb);
        return NULL;
    }
    return lb;
}

void dp_lb_destroy(dp_lb *lb)
{
    if (!lb) return;
    free(lb->load);
    free(lb->table);
    free(lb);
}

/* splitmix64's finalizer: every input bit moves every output bit */
static uint64_t mix(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

/* Hash of the prompt's prefix through block k (0-based), chained from
 * the previous block's; never 0 (0 marks an empty slot). */
static uint64_t block_hash(uint64_t prev, const int32_t *blk)
{
    uint64_t h = prev;
    for (int i = 0; i < DP_LB_BLOCK; i++) h = mix(h ^ (uint32_t)blk[i]);
    return h ? h : 1;
}

/* Tokens of ids' prefix that replica r's table holds (whole blocks). */
static int64_t match_len(const dp_lb *lb, int r, const int32_t *ids, int64_t n)
{
    const uint64_t *t = lb->table + (size_t)r * DP_LB_SLOTS;
    uint64_t h = 0x5DEECE66Dull;
    int64_t k = 0;
    for (; (k + 1) * DP_LB_BLOCK <= n; k++) {
        h = block_hash(h, ids + k * DP_LB_BLOCK);
        if (t[h & (DP_LB_SLOTS - 1)] != h) break;
    }
    return k * DP_LB_BLOCK;
}

static void remember(dp_lb *lb, int r, const int32_t *ids, int64_t n)
{
    uint64_t *t = lb->table + (size_t)r * DP_LB_SLOTS;
    uint64_t h = 0x5DEECE66Dull;
    for (int64_t k = 0; (k + 1) * DP_LB_BLOCK <= n; k++) {
        h = block_hash(h, ids + k * DP_LB_BLOCK);
        t[h & (DP_LB_SLOTS - 1)] = h;
    }
}

/* The replica minimising (key1, key2), ties rotating from the counter. */
static int argmin2(dp_lb *lb, const int64_t *k1, const int64_t *k2)
{
    int best = -1;
    for (int i = 0; i < lb->n; i++) {
        int r = (lb->rr + i) % lb->n;
        if (best < 0 || k1[r] < k1[best] || (k1[r] == k1[best] && k2 && k2[r] < k2[best])) best = r;
    }
    lb->rr = (lb->rr + 1) % lb->n;
    return best;
}

static int least_requests(dp_lb *lb, int64_t *tmp)
{
    for (int i = 0; i < lb->n; i++) tmp[i] = lb->load[i].reqs;
    return argmin2(lb, tmp, NULL);
}

int dp_lb_pick(dp_lb *lb, const int32_t *ids, int64_t n_ids, int n_per, int64_t bootstrap_room, int forced,
               int64_t *matched)
{
    int n = lb->n, r = 0;
    int64_t got = 0;
    int64_t stack_a[64], stack_b[64];
    int64_t *a = n <= 64 ? stack_a : malloc(sizeof(int64_t) * (size_t)n);
    int64_t *b = n <= 64 ? stack_b : malloc(sizeof(int64_t) * (size_t)n);
    if (!a || !b) { /* OOM: any replica will do */
        if (a != stack_a) free(a);
        if (b != stack_b) free(b);
        a = b = NULL;
        forced = forced >= 0 ? forced : lb->rr;
    }
    if (forced >= 0 && forced < n) {
        r = forced;
    } else if (lb->m == DP_LB_TOTAL_REQUESTS) {
        r = least_requests(lb, a);
    } else if (lb->m == DP_LB_TOTAL_TOKENS) {
        for (int i = 0; i < n; i++) a[i] = lb->load[i].tokens, b[i] = lb->load[i].reqs;
        r = argmin2(lb, a, b);
    } else if (lb->m == DP_LB_FOLLOW_BOOTSTRAP_ROOM && bootstrap_room >= 0) {
        r = (int)(bootstrap_room % n);
    } else if (lb->m == DP_LB_CACHE_AWARE) {
        int best = -1;
        int64_t best_len = 0;
        for (int i = 0; i < n; i++) {
            int q = (lb->rr + i) % n;
            int64_t len = match_len(lb, q, ids, n_ids);
            b[q] = len;
            if (len > best_len || (len == best_len && best >= 0 && len > 0 && lb->load[q].reqs < lb->load[best].reqs))
                best = q, best_len = len;
        }
        int least = least_requests(lb, a);
        int64_t lo = lb->load[least].reqs, hi = best >= 0 ? lb->load[best].reqs : 0;
        bool overloaded = best >= 0 && hi - lo > DP_LB_ABS_SLACK && (double)hi > DP_LB_REL_SLACK * (double)lo;
        r = best >= 0 && best_len > 0 && !overloaded ? best : least;
    } else { /* round_robin, or follow_bootstrap_room without a room */
        r = lb->rr;
        lb->rr = (lb->rr + 1) % n;
    }
    if (a && a != stack_a) free(a);
    if (b && b != stack_b) free(b);
    if (n_per < 1) n_per = 1;
    lb->load[r].reqs += n_per;
    lb->load[r].tokens += (int64_t)n_per * n_ids;
    lb->load[r].routed += n_per;
    if (lb->table && ids) {
        got = match_len(lb, r, ids, n_ids);
        remember(lb, r, ids, n_ids);
    }
    if (matched) *matched = got;
    return r;
}

void dp_lb_add_tokens(dp_lb *lb, int r, int64_t n)
{
    if (r >= 0 && r < lb->n) lb->load[r].tokens += n;
}

void dp_lb_finish(dp_lb *lb, int r, int64_t tokens)
{
    if (r < 0 || r >= lb->n) return;
    dp_lb_load *l = &lb->load[r];
    l->reqs = l->reqs > 0 ? l->reqs - 1 : 0;
    l->tokens = l->tokens > tokens && l->reqs > 0 ? l->tokens - tokens : 0; /* idle: no drift kept */
}

void dp_lb_unpick(dp_lb *lb, int r, int n_per, int64_t n_ids)
{
    if (r < 0 || r >= lb->n) return;
    if (n_per < 1) n_per = 1;
    for (int i = 0; i < n_per; i++) dp_lb_finish(lb, r, n_ids);
    lb->load[r].routed -= n_per;
}

void dp_lb_forget(dp_lb *lb, int r)
{
    if (!lb->table) return;
    if (r < 0) memset(lb->table, 0, sizeof(uint64_t) * (size_t)lb->n * DP_LB_SLOTS);
    else if (r < lb->n) memset(lb->table + (size_t)r * DP_LB_SLOTS, 0, sizeof(uint64_t) * DP_LB_SLOTS);
}

void dp_lb_get_load(const dp_lb *lb, int r, dp_lb_load *out)
{
    if (r >= 0 && r < lb->n) *out = lb->load[r];
    else memset(out, 0, sizeof *out);
}
