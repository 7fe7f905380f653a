/* dist — a process group: the collectives tensor parallelism needs.
 *
 * DESIGN: ranks are processes.  A group has a rank, a size and four
 * collectives, each with a timeout and a clear error naming the peer that
 * failed: all-reduce (sum) in place over f32 or bf16, broadcast of bytes,
 * gather of equal-size blocks to one rank, barrier.  Two backends behind
 * one vtable:
 *   - shm (dist_shm.c): ranks on one machine share a POSIX shared-memory
 *     segment with per-rank slots (double-buffered) and per-rank epoch
 *     counters; waits spin, then yield, then sleep on a futex in the
 *     segment (SGLang's CPU backend does the same across sub-NUMA
 *     clusters).  Small all-reduces: every rank sums all slots in rank
 *     order (one synchronisation); large ones: reduce-scatter (rank r sums
 *     stripe r) + all-gather (two).  Results are bitwise identical on all
 *     ranks.  A waiting rank checks its peers' processes every 50 ms, so a
 *     dead peer is named at once and a hung one at the timeout.
 *   - mpi (dist_mpi.c): Open MPI (MPI_Iallreduce / MPI_Ibcast / ... polled
 *     against the timeout), across machines; the only file that includes
 *     mpi.h.  Built when mpi.h is there (SGLC_HAVE_MPI), else dist_mpi_init
 *     says so.
 *   - gloo (dist_gloo.cc, C++): Facebook gloo's TCP collectives across
 *     machines without mpirun (--nnodes / --node-rank / --dist-init-addr):
 *     rank 0 runs a small rendezvous store at the init address that every
 *     rank keeps a connection to (join, gloo's transport addresses, 50 ms
 *     heartbeats with each rank's op counters), so a failure names the
 *     rank that is gone or did not reach the op.  Built when libgloo-dev
 *     is there (SGLC_HAVE_GLOO), else dist_gloo_create says so.
 * dist_split makes a sub-group (TP x PP: one stage's tensor-parallel
 * ranks) whose messages still name ranks of the top group.
 * After a failure the group is broken: every later call returns -1 at
 * once with the first error (dist_error).
 *
 * Threading: one thread drives a group (the collectives are not
 * re-entrant); dist_check_peers and dist_broken may be called from any
 * thread (a watchdog).
 */
#ifndef SGLC_DIST_DIST_H
#define SGLC_DIST_DIST_H

#include <stddef.h>
#include <stdint.h>

typedef struct dist_group dist_group;

/* Timeouts (ms) for the `timeout_ms` arguments. */
#define DIST_TIMEOUT_DEFAULT (-1) /* the group's timeout (dist_set_timeout) */
#define DIST_TIMEOUT_FOREVER 0    /* no timeout; a dead peer still ends the wait */

/* Element types of an all-reduce. */
typedef enum dist_dtype { DIST_F32 = 0, DIST_BF16 = 1 } dist_dtype;

/* Shared-memory group on this machine.  Rank 0 creates the segment `name`
 * (a POSIX shm name, "/sglc-..."), the other ranks attach to it; all wait
 * (up to timeout_ms) until every rank joined, then rank 0 unlinks the name
 * (nothing is left in /dev/shm even if a rank is killed later).
 * slot_bytes: the largest piece one collective step moves (bigger
 * payloads go in pieces); 0 = 8 MiB.  NULL with a message in err. */
dist_group *dist_shm_create(const char *name, int size, int rank, size_t slot_bytes, int timeout_ms,
                            char *err, size_t errlen);

/* Open MPI group over MPI_COMM_WORLD (MPI_Init_thread if needed; the
 * caller was started by mpirun).  NULL with a message in err (also when
 * sglc was built without Open MPI). */
dist_group *dist_mpi_init(int timeout_ms, char *err, size_t errlen);
/* The same; multiple: MPI_THREAD_MULTIPLE (several threads each drive a
 * group of their own at once: --dp-size's per-replica splits), else
 * MPI_THREAD_SERIALIZED.  Refused when Open MPI gives less. */
dist_group *dist_mpi_init_threads(int timeout_ms, int multiple, char *err, size_t errlen);
/* 1 when the process looks started by mpirun (OMPI_COMM_WORLD_SIZE / PMI
 * environment), with the world size and rank in *size / *rank. */
int dist_mpi_env(int *size, int *rank);
/* 1 when this build has the Open MPI backend. */
int dist_mpi_available(void);

/* gloo group over TCP (dist_gloo.cc): ranks on several machines started
 * without mpirun.  Rank 0 listens at init_addr ("HOST:PORT") for the
 * rendezvous; every rank (rank 0 too) connects, retrying until
 * timeout_ms, and is refused with a message when its config string differs
 * from rank 0's or its rank joined already; all wait until every rank
 * joined (past timeout_ms the error names the node ranks that did not
 * come: node = rank / per_node), then gloo's TCP mesh is connected.  NULL
 * with a message in err (also when sglc was built without gloo). */
typedef struct dist_gloo_opts {
    const char *init_addr; /* HOST:PORT */
    int size, rank;
    int per_node;          /* ranks per node (messages name node = rank / per_node) */
    int timeout_ms;        /* join and default collective timeout; <= 0: 300 s */
    const char *config;    /* the launch configuration every node must share */
} dist_gloo_opts;
dist_group *dist_gloo_create(const dist_gloo_opts *o, char *err, size_t errlen);
/* 1 when this build has the gloo backend. */
int dist_gloo_available(void);

void dist_free(dist_group *g);

int dist_rank(const dist_group *g);
int dist_size(const dist_group *g);
const char *dist_backend(const dist_group *g); /* "shm", "mpi" or "gloo" */
void dist_set_timeout(dist_group *g, int timeout_ms);

/* Sum n elements of type dt over all ranks, in place (bf16: summed in
 * f32, rounded once).  0, or -1 (group broken; dist_error says why). */
int dist_allreduce(dist_group *g, void *buf, size_t n, dist_dtype dt, int timeout_ms);
/* root's `bytes` bytes at buf to every rank's buf.  0 or -1. */
int dist_bcast(dist_group *g, void *buf, size_t bytes, int root, int timeout_ms);
/* Each rank's `bytes` at send to root's recv (size * bytes, rank-major;
 * recv is ignored on other ranks).  0 or -1. */
int dist_gather(dist_group *g, const void *send, size_t bytes, void *recv, int root,
                int timeout_ms);
int dist_barrier(dist_group *g, int timeout_ms);

/* The first error ("" when none) and the rank it names (-1 when none). */
const char *dist_error(const dist_group *g);
int dist_failed_rank(const dist_group *g);
/* 1 once a collective failed or dist_check_peers found a dead peer. */
int dist_broken(const dist_group *g);
/* Any thread: check that every peer process is alive (shm: on this
 * machine; mpi: nothing to check between calls).  0, or -1 and the group
 * is broken with the dead rank named. */
int dist_check_peers(dist_group *g);
/* Mark the group broken with msg (this rank gives up, e.g. on a load
 * error); shm peers see it at their next wait. */
void dist_abort(dist_group *g, const char *msg);
/* Break g with the error of `cause` (a broken sub-group of g, see
 * dist_split), same message and failed rank: shm peers see it at their
 * next wait; under MPI only this rank's g is marked (no MPI_Abort: the
 * caller, e.g. rank 0's watcher, decides).  Nothing when g is broken
 * already or cause is not. */
void dist_break_from(dist_group *g, const dist_group *cause);

/* A sub-group of g (collective over g, like MPI_Comm_split): the ranks
 * that pass the same color, ranked by key (ties: by their rank in g).  Its
 * collectives involve only its members; its messages name ranks by their
 * rank in g (dist_rank_name).  shm: a segment of its own; mpi: a split
 * communicator.  Free it before g.  NULL with a message in err. */
dist_group *dist_split(dist_group *g, int color, int key, char *err, size_t errlen);

/* Seconds this rank spent in all-reduces (total) and, of that, waiting for
 * other ranks to arrive (shm backend; 0 for MPI and gloo), and the number of calls
 * (the driving thread's counters). */
void dist_allreduce_stats(const dist_group *g, double *total_s, double *wait_s, long *calls);

/* Internal: the backend vtable (dist.c, dist_shm.c, dist_mpi.c). */
typedef struct dist_ops {
    const char *name;
    int (*allreduce)(dist_group *g, void *buf, size_t n, dist_dtype dt, int timeout_ms);
    int (*bcast)(dist_group *g, void *buf, size_t bytes, int root, int timeout_ms);
    int (*gather)(dist_group *g, const void *send, size_t bytes, void *recv, int root,
                  int timeout_ms);
    int (*barrier)(dist_group *g, int timeout_ms);
    int (*check_peers)(dist_group *g);
    void (*abort)(dist_group *g, const char *msg);
    void (*free)(dist_group *g);
    /* a sub-group of `size` ranks where this one is `rank` (dist_split) */
    dist_group *(*split)(dist_group *g, int color, int key, int size, int rank, char *err, size_t errlen);
    /* tell the peers g is broken, without ending the job (NULL: nothing to tell) */
    void (*publish)(dist_group *g, const char *msg);
} dist_ops;

struct dist_group {
    const dist_ops *ops;
    int rank, size;
    int timeout_ms;
    int broken;               /* atomic */
    int failed_rank;
    char err[512];
    void *impl;
    double ar_total_s, ar_wait_s, wait_s; /* all-reduce time, its waits; waits of any call */
    long ar_calls;
    int *name;                /* owned or NULL: rank r is rank name[r] of the parent group (messages) */
};

/* The rank r of g as messages name it: its rank in the top group. */
static inline int dist_rank_name(const dist_group *g, int r)
{
    return g->name && r >= 0 && r < g->size ? g->name[r] : r;
}

/* Internal: record the first failure (thread-safe; later ones are kept out). */
void dist_fail(dist_group *g, int rank, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#endif
