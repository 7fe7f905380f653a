/* cli_dp_tp — `sglc serve --dp-size D --tp-size T`: D data-parallel
 * replicas, each a tensor-parallel group of T ranks, behind one HTTP front
 * and the one data-parallel controller (dp/dp.h).
 *
 * DESIGN: the least new machinery.  The serve process is rank 0 of every
 * replica's group: it loads D rank-0 shards (cli_model_load_replicas, one
 * shm segment and rank numbering per group, cli_dist.h) and hands them to
 * dp_create (dp_opts.models) in place of model_share copies, so the
 * replicas are the ordinary DP replicas (own scheduler thread, KV pool,
 * radix tree, compute pool; every --load-balance-method, /get_load per
 * dp_rank, the fan-out of control) whose model happens to send each step
 * to its own worker processes (model_tp.c: one lock per group, so the
 * replicas never wait for each other).  D x (T - 1) worker processes run
 * model_tp_worker_loop.  Each replica holds its own weight shards: D
 * copies of the sharded weights in all (replicas over one copy, as plain
 * --dp-size does, would need the group per run state, not per weights).
 *
 * Threads and cores: --threads (default: the cores) / (D x T) per rank
 * (at least 1).  Replica k's rank r is placement slot k x T + r; slot s
 * takes the per-rank thread count of consecutive allowed cores at
 * s x threads, when all D x T slots fit (else nothing is pinned, and the
 * kernel shares the cores).  The serve process's replica threads are
 * pinned by dp (dp_opts.cpu_stride), the workers by cli_dist.
 *
 * Refused with a message (exit 2): any command but serve (generate,
 * bench-offline, bench-one-batch: offline DP x TP is not built), LoRA,
 * --ep-size > 1, --numa-node / --base-gpu-id / --gpu-id-step (the slots
 * above are the one placement), mpirun (cli_dist), and a weight update
 * (as for --tp-size). */
#ifndef SGLC_CLI_DP_TP_H
#define SGLC_CLI_DP_TP_H

#include <stdbool.h>

#include "args/args.h"

/* Whether a asks for replicas of several ranks each (--dp-size > 1 with
 * --tp-size > 1 or --pp-size > 1). */
bool cli_dp_tp_on(const args_server *a);
/* The combinations sglc cannot run, for command `name`: -1 after
 * printing "sglc NAME: ..." (the caller exits 2), else 0. */
int cli_dp_tp_check(const char *name, const args_server *a);

#endif
