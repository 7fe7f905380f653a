/* dp — data parallelism in one process: N scheduler replicas behind one
 * front (SGLang's --dp-size with its DataParallelController).
 *
 * DESIGN
 *   front threads ── dp_submit ──▶ dp_lb picks a replica (dp_lb.h) ──▶ sched_submit(replica r)
 *   dispatcher    ◀── dp_wait ──── poll() on the N outboxes' eventfds, one event at a time,
 *                                  its id rewritten to the controller's global id
 *   admin threads ── dp_control ─▶ the same message to every replica, in turn
 *
 * Each replica is a whole scheduler (sched.h): its own thread, run state
 * (model_share: scratch, counters), KV pool and radix tree, and compute
 * pool; all of them read ONE copy of the weights (model_weights is
 * immutable and reference counted), which SGLang cannot do across GPUs.
 * The replicas share nothing else, so they never lock each other; the
 * controller's own lock guards only its load counters (dp_lb).
 *
 * Threads: the total (--threads, default the cores) is split evenly,
 * the first replicas taking the remainder; it must be at least dp_size.
 * When the total fits in the CPUs this process may run on, replica r's
 * scheduler thread and compute workers are pinned to its own slice of
 * them (the creating thread takes the slice's affinity while sched_create
 * and sched_start make the threads, which inherit it, then gets its own
 * back), so the replicas do not migrate onto each other's cores.
 *
 * KV memory: --max-total-tokens is per replica (as each SGLang DP rank's
 * scheduler has its own pool); without it, the --mem-fraction-static
 * budget (one machine's memory, the weights counted once) is split evenly
 * between the replicas.
 *
 * Ids: sched_submit's ids are per replica; the controller's id of a
 * request is local * dp_size + rank, so events, aborts and the front's
 * registry use one id space.  dp_size 1 is the identity (a wrapper around
 * one scheduler: dp_wrap), so the front has one path.
 *
 * DP x TP (dp_opts.models, cli/cli_dp_tp.h): each replica runs its own
 * model (the rank-0 shard of its own tensor-parallel group) instead of a
 * share of replica 0's; nothing else differs.
 *
 * Ownership: dp owns its replicas' schedulers and the run states it made
 * or was given (replicas 1..N-1); replica 0 runs the caller's model, which the caller
 * frees after dp_destroy (dp_model(d) gives the one running then: a
 * weight update replaces it).  dp_wrap borrows its scheduler. */
#ifndef SGLC_DP_DP_H
#define SGLC_DP_DP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dp/dp_lb.h"
#include "sched/sched.h"

typedef struct dp dp;

typedef struct dp_opts {
    int dp_size;                 /* replicas, >= 1 */
    dp_lb_method method;         /* --load-balance-method */
    int threads;                 /* compute threads of all replicas together, >= dp_size */
    bool pin;                    /* pin each replica to its slice of the CPUs (when they fit) */
    int cpu_stride;              /* 0: replica r's slice follows replica r-1's; else it starts at
                                  * allowed CPU index r * cpu_stride (DP x TP: the workers of
                                  * replica r's group take the CPUs in between, cli_dp_tp.h) */
    model **models;              /* (dp_size) or NULL: replica r >= 1 runs models[r] (its own
                                  * weights, e.g. the rank-0 shard of its tensor-parallel group)
                                  * instead of model_share(m); models[0] is m.  Owned by dp from
                                  * dp_create on, failure included (freed in dp_destroy) */
} dp_opts;

/* Build dp_size schedulers for m with arguments a (a->threads and the KV
 * size are replaced per replica as described above).  NULL with a message
 * in err (dp_size above the threads, out of memory, a scheduler that
 * cannot be made). */
dp *dp_create(model *m, const sched_args *a, const dp_opts *o, char *err, size_t errlen);
/* One scheduler as a controller of size 1 (borrowed: dp_destroy leaves it). */
dp *dp_wrap(sched *s);
/* Stops the replicas' threads (if started) and frees what dp owns. */
void dp_destroy(dp *d);

int dp_size(const dp *d);
dp_lb_method dp_method(const dp *d);
/* Replica r's scheduler (0 <= r < dp_size): for per-replica set-up before
 * dp_start (output hook, grammar, warm-ups) and for reading its stats. */
sched *dp_sched(dp *d, int r);
/* The model replica 0 runs now (see Ownership).  After dp_stop. */
model *dp_model(dp *d);

/* Start every replica's thread (pinned as described).  0 or -1. */
int dp_start(dp *d);
void dp_stop(dp *d);

/* Thread-safe.  Submit to replica `rank` (0 <= rank < dp_size), or to the
 * one the load balancer picks when rank < 0; bootstrap_room < 0 = none.
 * Returns the global id (>= 1); *rank_out (may be NULL) gets the replica. */
uint64_t dp_submit(dp *d, sched_req_spec *spec, int rank, int64_t bootstrap_room, int *rank_out);
/* Thread-safe.  Abort by rid (NULL = all) on every replica. */
void dp_abort(dp *d, const char *rid);
/* Thread-safe.  Abort one submission by its global id. */
void dp_abort_id(dp *d, uint64_t id);
/* One reader at a time (the dispatcher): the next event of any replica,
 * id rewritten to the global id; NULL when none came in timeout_s
 * seconds (< 0 = wait forever).  *rank_out (may be NULL) gets the
 * replica.  Keeps the load counters (events' tokens, finishes). */
sched_event *dp_wait(dp *d, double timeout_s, int *rank_out);

/* Thread-safe.  Send c to every replica in turn and wait (sched_control).
 * rc 0 when every replica did it; else the first refusal's rc and msg.
 * n_affected is summed.  SWAP_MODEL: replica 0 gets c->new_model, the
 * others a run state over the same weights (model_share); c->old_model
 * is replica 0's old model (the caller frees it as before), the other
 * replicas' old run states are freed here.  A successful flush (or a swap
 * that flushes) also clears cache_aware's prefix tables. */
int dp_control(dp *d, sched_ctl *c);
/* Thread-safe: whether any replica is paused. */
bool dp_is_paused(dp *d);

/* Thread-safe.  Replica r's load as the controller counts it. */
void dp_get_load(dp *d, int r, dp_lb_load *out);

#endif
