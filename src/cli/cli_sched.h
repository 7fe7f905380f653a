/* cli_sched — the scheduler for the commands that drive it (serve,
 * generate --requests, bench-offline).
 *
 * DESIGN: the options come from the parsed server arguments
 * (cli_args.h); cli_sched_create builds the scheduler from them and the
 * model options; cli_sched_collect runs the synchronous driver until idle
 * and gathers every event into one sched_result per (request id, sibling
 * index). */
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
 * options; dp_size 1 is one scheduler.  NULL after printing
 * "error: ..." on failure. */
dp *cli_dp_create(model *m, const cli_model_opts *mo, sched_args *sa, const args_server *a);

/* results[k] for the request with submit id first_id + k ... : the caller
 * passes ids[] (n_req, ascending) and n_per[] (results per request); the
 * results array is (sum n_per) laid out request by request. */
typedef struct cli_results {
    int n_req;
    const uint64_t *ids;   /* (n_req) borrowed, ascending */
    const int *n_per;      /* (n_req) borrowed */
    int *offset;           /* (n_req) owned */
    sched_result *res;     /* (total) owned */
    int total;
} cli_results;

int cli_results_init(cli_results *r, int n_req, const uint64_t *ids, const int *n_per, const bool *logprob);
void cli_results_free(cli_results *r);
/* Run until idle, then drain the outbox into r.  0 or -1. */
int cli_sched_collect(sched *s, cli_results *r);

#endif
