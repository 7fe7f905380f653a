/* cli_dist — starting the ranks of a tensor-parallel group for the
 * commands that load a model (serve, generate, bench-one-batch,
 * bench-offline), and watching them.
 *
 * DESIGN: `--tp-size N` on one machine: the command (rank 0) makes a
 * shared-memory group and starts ranks 1..N-1 itself — fork + exec of the
 * same binary with the same arguments (/proc/self/cmdline) and the hidden
 * rank given by the environment (SGLC_DIST_SHM / SGLC_DIST_RANK /
 * SGLC_DIST_SIZE) — each pinned to its own cores when the machine has
 * enough (SGLC_TP_PIN=0: not pinned).  Under mpirun (OMPI_COMM_WORLD_* in
 * the environment) the ranks are MPI's: the Open MPI backend, one rank per
 * process, the world size must equal --tp-size x --pp-size.
 * `--nnodes K --node-rank R --dist-init-addr HOST:PORT` (SGLang's
 * multi-node launch: the same command on every node): the gloo backend
 * (dist_gloo.cc) over TCP for every rank, the N = tp x pp ranks split
 * evenly, N / K per node; node R's command is global rank R x N / K and
 * starts its node's other ranks as on one machine (fork + exec, hidden
 * rank SGLC_DIST_GLOO_RANK), pinned by their local index.  Node 0's
 * command is rank 0 (the store at HOST:PORT, the HTTP server or the
 * command's output); every other node's command is a worker.  --nnodes 1
 * ignores --dist-init-addr (shared memory is faster on one machine).  With both sizes > 1 each stage's ranks also form a
 * sub-group (cli_dist_stage_group).
 * Every rank loads its shard; a rank > 0 then never returns from
 * cli_model_load: it runs model_tp_worker_loop and exits (0 when rank 0
 * shut the group down, 1 on a failure, after logging which rank failed).
 * Rank 0 continues as the one-process command; a watcher thread checks the
 * peers every 100 ms and, once the group is broken (a rank died, or hung
 * past --dist-timeout), logs the reason and exits 1 after a second (the
 * failed batch's requests are answered 503 by the scheduler meanwhile).
 * Rank 0 reaps its children at exit (SIGKILL after 5 s).
 *
 * `serve --dp-size D --tp-size N` (cli_dp_tp.h): the command makes D
 * groups (cli_dist_start_groups), one shm segment each (named
 * BASE-dpK), and starts N - 1 worker processes (SGLC_DIST_GROUPS=D):
 * process r is rank r of every group, as the command itself is rank 0 of
 * every group — each process loads its rank's shard once and drives each
 * group from its own thread over a run state of that one copy
 * (model_share_group; the command's D rank-0 run states are driven by
 * the replicas' scheduler threads, a worker's by one thread per group).
 * Group K's rank r is placement slot K * N + r: its core group (below)
 * with --base-gpu-id 0 and --gpu-id-step 1; the threads pin themselves
 * (cli_dist_pin_slot; the data-parallel controller pins each replica's
 * scheduler thread and pool to slot K * N).  Each group has its own
 * watcher; any failure ends the server (exit 1), the log naming the
 * dp_rank and the rank.  Not under mpirun.
 */
#ifndef SGLC_CLI_DIST_H
#define SGLC_CLI_DIST_H

#include <stddef.h>

#include "dist/dist.h"

#define CLI_DIST_MAX_RANKS 64

/* Placement of the ranks on this machine's cores (the allowed set, in
 * order): --numa-node gives each rank a NUMA node (all its cores);
 * otherwise rank r takes core group base_group + r * group_step, a group
 * being threads-per-rank consecutive cores (SGLang's --base-gpu-id /
 * --gpu-id-step read as core groups).  A group outside the machine: that
 * rank is not pinned (a warning). */
typedef struct cli_dist_opts {
    int tp_size;          /* 1 = one process */
    int dp_size;          /* data-parallel replicas (each a group of tp_size x pp_size ranks) */
    int pp_size;          /* pipeline stages (1 = none); times tp_size ranks in all */
    int pp_micro;         /* --pp-max-micro-batch-size (0 = unset: model_pp_default_micro) */
    int nnodes, node_rank;
    const char *init_addr; /* --dist-init-addr HOST:PORT, or NULL */
    int timeout_s;        /* --dist-timeout; 0 = default (300 s) */
    int base_group, group_step;
    int numa[CLI_DIST_MAX_RANKS], n_numa;
} cli_dist_opts;

/* Make this process's group: 0 with *out = NULL (tp_size 1), 0 with the
 * group, or -1 with the message in err.  Rank 0 (not under mpirun) starts
 * the other ranks first. */
int cli_dist_start(const cli_dist_opts *o, int threads_per_rank, dist_group **out, char *err,
                   size_t errlen);
/* n_groups groups of tp_size x pp_size ranks (--dp-size with --tp-size:
 * one per replica): out[0..n-1] filled, this process at the same rank in
 * each.  Returns the number of groups made (0: one rank, nothing to make;
 * a worker rank gets the same n_groups, as rank r of each), or -1 with
 * the message in err. */
int cli_dist_start_groups(const cli_dist_opts *o, int threads_per_rank, int n_groups, dist_group **out,
                          char *err, size_t errlen);
/* TP x PP (tp_size and pp_size > 1): this rank's stage group, a
 * dist_split of g (collective: every rank calls it).  The rank layout is
 * stage-major: rank = stage * tp_size + tp_rank, so stage p is ranks
 * [p * tp_size, (p + 1) * tp_size) — consecutive core groups on one
 * machine, consecutive MPI ranks under mpirun.  0 with *out = NULL when
 * not TP x PP, 0 with the group, or -1 with the message in err. */
int cli_dist_stage_group(const cli_dist_opts *o, dist_group *g, dist_group **out, char *err, size_t errlen);
/* Pin the calling thread (threads it creates inherit it) to placement
 * slot `slot` of tpr cores, as a rank's process is pinned; n_slots > 0:
 * only when all n_slots slots fit in the allowed cores (else a log line,
 * nothing pinned).  SGLC_TP_PIN=0: nothing. */
void cli_dist_pin_slot(const cli_dist_opts *o, int slot, int tpr, int n_slots, const char *who);
/* The placement slot of replica k's rank in this process (group g, one of
 * n_groups over the same processes): shm k * N + r; gloo across nodes
 * k * (N / nnodes) + the node-local index; -1 (not pinned) under mpirun
 * or with one group.  *n_slots: the slots on this machine. */
int cli_dist_slot(const cli_dist_opts *o, const dist_group *g, int k, int n_groups, int *n_slots);
/* Rank 0: start g's watcher thread (once per group); dp_rank >= 0 names
 * the replica in its log line (-1: the only group). */
void cli_dist_watch(dist_group *g, int dp_rank);

#endif
