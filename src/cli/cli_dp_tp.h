/* cli_dp_tp — `sglc serve --dp-size D --tp-size T` (also generate
 * --requests, bench-offline): D data-parallel
 * replicas, each a tensor-parallel group of T ranks, behind one HTTP front
 * and the one data-parallel controller (dp/dp.h).
 *
 * DESIGN: the least new machinery.  The command's process is rank 0 of every
 * replica's group: it loads the rank-0 shard once and makes D run states
 * over it, each driving its own group (cli_model_load_replicas:
 * model_share_group, one shm segment and rank numbering per group,
 * cli_dist.h), and hands them to dp_create (dp_opts.models) in place of
 * model_share copies, so the replicas are the ordinary DP replicas (own
 * scheduler thread, KV pool, radix tree, compute pool; every
 * --load-balance-method, /get_load per dp_rank, the fan-out of control)
 * whose model happens to send each step to its own group (model_tp.c:
 * one lock per group, so the replicas never wait for each other).  T - 1
 * worker processes, process r being rank r of every group: one copy of
 * its shard, a thread per replica running model_tp_worker_loop over a
 * run state of it.  One copy of each rank's shard in all, whatever D.
 * Under mpirun: -np T (tp x pp) processes, each rank r of every replica
 * (one communicator per replica); across nodes (--nnodes, gloo): each
 * node's processes are their ranks of every replica, every rank 0 on
 * node 0 (cli_dist.h).
 *
 * Threads and cores: --threads (default: the cores) / (D x T) per rank
 * (at least 1).  Replica k's rank r is placement slot k x T + r; slot s
 * takes the per-rank thread count of consecutive allowed cores at
 * s x threads, when all D x T slots fit (else nothing is pinned, and the
 * kernel shares the cores).  The command process's replica threads are
 * pinned by dp (dp_opts.cpu_stride), the workers by cli_dist.
 *
 * serve, generate --requests and bench-offline (the commands with a DP
 * controller) take it (cli_dp_tp_load + cli_dp_create's models).  Refused
 * with a message (exit 2): any other command (bench-one-batch; generate
 * --prompt and perplexity refuse --dp-size itself), LoRA,
 * --ep-size > 1, --numa-node / --base-gpu-id / --gpu-id-step (the slots
 * above are the one placement), mpirun -np D x T (cli_dist: -np T), and a
 * weight update (as for --tp-size). */
#ifndef SGLC_CLI_DP_TP_H
#define SGLC_CLI_DP_TP_H

#include <stdbool.h>

#include "args/args.h"
#include "cli/cli_model.h"

/* Whether a asks for replicas of several ranks each (--dp-size > 1 with
 * --tp-size > 1 or --pp-size > 1). */
bool cli_dp_tp_on(const args_server *a);
/* The combinations sglc cannot run, for command `name`: -1 after
 * printing "sglc NAME: ..." (the caller exits 2), else 0. */
int cli_dp_tp_check(const char *name, const args_server *a);
/* The command's model(s): with DP x TP (cli_dp_tp_on), the D replicas'
 * rank-0 models in *rest (D entries, (*rest)[0] the one returned) for
 * cli_dp_create; else cli_model_load's model and *rest = NULL.  NULL
 * after printing the error. */
model *cli_dp_tp_load(const cli_model_opts *mo, const args_server *a, model ***rest);
/* Start-up stopped before cli_dp_create took them: free rest[1..D-1]
 * and rest (not rest[0], the caller's model).  NULL: nothing. */
void cli_dp_tp_free_rest(model **rest, const args_server *a);

#endif
