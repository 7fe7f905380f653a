/* cli_sched — the scheduler for the commands that drive it (serve,
 * generate --requests, bench-offline).
 *
 * DESIGN: the options come from the parsed server arguments
 * (cli_args.h); cli_sched_create builds the scheduler from them and the
 * model options; cli_sched_collect runs the synchronous driver until idle
 * and gathers every event into one sched_result per (request id, sibling
 * index); with --dp-size N > 1 (generate --requests, bench-offline)
 * cli_dp_collect does the same from the N replicas' threads (dp_wait),
 * the ids being the controller's global ids (not ascending in submit
 * order under the load-based methods: cli_results sorts them). */
#ifndef SGLC_CLI_SCHED_H
#define SGLC_CLI_SCHED_H

#include "args/args.h"
#include "cli/cli_model.h"
#include "dp/dp.h"
#include "sched/sched.h"
#include "sched/sched_result.h"

/* Scheduler for m with the command's options (kv dtype, threads, seed
 * from mo); NULL after printing "error: ..." on failure. */
sched *cli_sched_create(model *m, const cli_model_opts *mo, sched_args *sa);
/* The data-parallel controller of `serve` (--dp-size replicas, threads
 * split between them, --load-balance-method) with the same scheduler
 * options; dp_size 1 is one scheduler.  models: NULL, or (dp_size) the
 * replicas' own models (serve's DP x TP, cli_dp_tp.h; models[0] = m;
 * given to dp, failure included).  NULL after printing "error: ..." on
 * failure. */
dp *cli_dp_create(model *m, const cli_model_opts *mo, sched_args *sa, const args_server *a, model **models);

/* results[k] for the request with submit id ids[k]: the caller passes
 * ids[] (n_req, distinct, any order) and n_per[] (results per request);
 * the results array is (sum n_per) laid out request by request. */
typedef struct cli_results {
    int n_req;
    const uint64_t *ids;   /* (n_req) borrowed */
    const int *n_per;      /* (n_req) borrowed */
    int *offset;           /* (n_req) owned */
    int *order;            /* (n_req) owned: request indices by ascending id */
    sched_result *res;     /* (total) owned */
    int total;
} cli_results;

int cli_results_init(cli_results *r, int n_req, const uint64_t *ids, const int *n_per, const bool *logprob);
void cli_results_free(cli_results *r);
/* Run until idle, then drain the outbox into r.  0 or -1. */
int cli_sched_collect(sched *s, cli_results *r);
/* The replicas' threads running (dp_start), read dp_wait until every
 * result of r has its FINISH.  -1 when an event names no request of r, on
 * out of memory, or when no event came for timeout_s seconds (a stuck
 * replica: the caller stops the controller); else 0. */
int cli_dp_collect(dp *d, cli_results *r, double timeout_s);
/* The counters of all replicas added up (max_total_num_tokens too: the
 * pools together); snapshot: sched_get_stats_snapshot (threads running),
 * else sched_get_stats (before dp_start or after dp_stop). */
void cli_dp_stats(dp *d, bool snapshot, sched_stats *sum);
/* --dp-size of the parsed arguments (1 when unset). */
int cli_dp_size(const args_server *a);
/* For the offline commands: -1 after printing "sglc NAME: --dp-size must
 * be at least 1, got N" when --dp-size < 1; else 0. */
int cli_dp_check(const args_server *a, const char *name);

#endif
