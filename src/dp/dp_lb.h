/* dp_lb — the data-parallel controller's load balancer: which replica
 * (dp_rank) a request goes to.
 *
 * DESIGN: pure bookkeeping, no threads and no scheduler calls (dp.c holds
 * the lock and feeds it), so every method is unit-tested on its own.  It
 * keeps, per replica, what the controller itself put there and has not
 * seen finish: requests in flight (one per sibling of n > 1) and tokens in
 * flight (prompt tokens plus output tokens so far).  These are exact at
 * every moment (the controller sees every submit and every event), unlike
 * SGLang's loads that the schedulers report back a moment late.
 *
 * Methods (SGLang's --load-balance-method names, data_parallel_controller
 * .py; `auto` is round_robin outside PD disaggregation, as SGLang's
 * _handle_load_balance_method resolves it):
 *   round_robin            replicas in turn
 *   total_requests         fewest requests in flight (SGLang's DPBudget
 *                          TOTAL_REQUESTS); ties rotate
 *   total_tokens           fewest tokens in flight, ties by fewer requests,
 *                          then rotate (SGLang's TOTAL_TOKENS)
 *   follow_bootstrap_room  bootstrap_room % dp_size (SGLang's rule for PD
 *                          prefill); a request without a room: round robin
 *   cache_aware            sglc's own (SGLang's router has a policy of this
 *                          name across servers; SGLang's in-engine
 *                          controller has none): the replica whose radix
 *                          cache holds the longest prefix of the prompt,
 *                          unless that replica is overloaded (below);
 *                          no prefix anywhere: total_requests.
 * A request that names its replica (data_parallel_rank) goes there and
 * does not move the round-robin counter (SGLang's
 * maybe_external_dp_rank_routing).
 *
 * cache_aware's view of each radix cache: the prompts the controller sent
 * to a replica, as chained hashes of DP_LB_BLOCK-token blocks in a
 * direct-mapped table per replica (DP_LB_SLOTS entries: a newer block
 * overwrites an older one in its slot, an approximate LRU).  A lookup
 * walks the prompt's blocks and stops at the first the table lacks, so a
 * match is a true prefix (up to hash collisions, ~2^-64).  The table is
 * cleared when the replica's radix cache is (flush_cache, a weight
 * update).  It does not see the radix tree's own evictions: after heavy
 * eviction a request may be sent for a prefix that is gone, which costs
 * only that prefix's recomputation.  Overload guard (the router's
 * balance thresholds): the best-matching replica is passed over for the
 * least loaded one when its requests in flight exceed the least loaded
 * replica's by more than DP_LB_ABS_SLACK and by a factor DP_LB_REL_SLACK. */
#ifndef SGLC_DP_DP_LB_H
#define SGLC_DP_DP_LB_H

#include <stdbool.h>
#include <stdint.h>

typedef enum {
    DP_LB_ROUND_ROBIN = 0,
    DP_LB_TOTAL_REQUESTS,
    DP_LB_TOTAL_TOKENS,
    DP_LB_FOLLOW_BOOTSTRAP_ROOM,
    DP_LB_CACHE_AWARE,
} dp_lb_method;

#define DP_LB_BLOCK 16           /* tokens per hashed block (cache_aware) */
#define DP_LB_SLOTS (1 << 16)    /* hashed blocks remembered per replica */
#define DP_LB_ABS_SLACK 16       /* cache_aware overload guard: requests ... */
#define DP_LB_REL_SLACK 1.5      /* ... and ratio over the least loaded replica */

/* "auto", "round_robin", ... -> method; -1 when unknown. */
int dp_lb_parse(const char *name);
/* The method's name ("round_robin" ...). */
const char *dp_lb_name(dp_lb_method m);

typedef struct dp_lb dp_lb;

/* n replicas (>= 1).  NULL on OOM. */
dp_lb *dp_lb_create(int n, dp_lb_method m);
void dp_lb_destroy(dp_lb *lb);

/* Choose the replica of one request: prompt ids (n_ids), n_per siblings,
 * bootstrap_room (< 0 = none), forced (>= 0: the client's
 * data_parallel_rank, already checked to be in range; < 0 = choose).
 * Counts the request in flight there (n_per requests, n_per * n_ids
 * tokens) and, for cache_aware, remembers its prefix.  *matched (may be
 * NULL) gets the prefix tokens the chosen replica was believed to hold. */
int dp_lb_pick(dp_lb *lb, const int32_t *ids, int64_t n_ids, int n_per, int64_t bootstrap_room, int forced,
               int64_t *matched);
/* Output tokens arrived for a request on replica r. */
void dp_lb_add_tokens(dp_lb *lb, int r, int64_t n);
/* One sibling on replica r finished; tokens = its prompt plus output
 * tokens (what was counted for it). */
void dp_lb_finish(dp_lb *lb, int r, int64_t tokens);
/* A sibling counted at pick was never submitted (submission failed). */
void dp_lb_unpick(dp_lb *lb, int r, int n_per, int64_t n_ids);
/* Replica r's radix cache was emptied (r < 0: every replica's). */
void dp_lb_forget(dp_lb *lb, int r);

typedef struct dp_lb_load {
    int64_t reqs;                /* requests in flight */
    int64_t tokens;              /* tokens in flight */
    int64_t routed;              /* requests ever sent there (siblings counted) */
} dp_lb_load;
void dp_lb_get_load(const dp_lb *lb, int r, dp_lb_load *out);

#endif
