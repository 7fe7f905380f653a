/* cli_dist — see cli_dist.h. */
#include "cli/cli_dist.h"

#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "util/log.h"

int model_tp_group_shut(const dist_group *g); /* model/model_tp.c */

#define MAX_CHILD 64
static pid_t g_child[MAX_CHILD];
static int g_n_child;

/* Rank 0 at exit: wait for the workers (they exit after SHUTDOWN, or on
 * their own when they see rank 0 gone), then kill what is left. */
static void reap_children(void)
{
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int i = 0; i < g_n_child; i++) {
        for (;;) {
            int st;
            pid_t w = waitpid(g_child[i], &st, WNOHANG);
            if (w != 0) break; /* reaped, or not ours any more */
            struct timespec t;
            clock_gettime(CLOCK_MONOTONIC, &t);
            if (t.tv_sec - t0.tv_sec >= 5) {
                kill(g_child[i], SIGKILL);
                waitpid(g_child[i], &st, 0);
                break;
            }
            usleep(10000);
        }
    }
    g_n_child = 0;
}

/* Rank 0 of an MPI group at exit (after the commands freed their model,
 * which told the workers to stop): MPI_Finalize, as mpirun expects.  The
 * split communicators rank 0 keeps (stage groups, --dp-size's replica
 * groups) go first, newest first; a worker frees its own and then, with
 * --dp-size, the world here too. */
static dist_group *g_stage_keep[MAX_CHILD + 1]; /* rank 0's TP x PP stage groups (shm, gloo) */
static int g_n_stage_keep;
static dist_group *g_gloo_world; /* --dp-size over gloo: the world of the replicas' splits */
static void gloo_finish(void)
{
    if (g_gloo_world) dist_free(g_gloo_world);
    g_gloo_world = NULL;
}
static dist_group *g_mpi, *g_mpi_split[2 * MAX_CHILD];
static int g_n_mpi_split;
static void mpi_keep(dist_group *g)
{
    if (g_n_mpi_split < (int)(sizeof g_mpi_split / sizeof g_mpi_split[0])) g_mpi_split[g_n_mpi_split++] = g;
}
static void mpi_finish(void)
{
    while (g_n_mpi_split > 0) dist_free(g_mpi_split[--g_n_mpi_split]);
    if (g_mpi) dist_free(g_mpi);
    g_mpi = NULL;
}

/* argv of this process (NUL-separated /proc/self/cmdline); NULL on error. */
static char **self_argv(void)
{
    FILE *f = fopen("/proc/self/cmdline", "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap + 1);
    size_t got;
    while (buf && (got = fread(buf + n, 1, cap - n, f)) > 0) {
        n += got;
        if (n == cap) {
            char *nb = realloc(buf, cap * 2 + 1);
            if (!nb) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = nb, cap *= 2;
        }
    }
    fclose(f);
    if (!buf) return NULL;
    buf[n] = 0;
    int argc = 0;
    for (size_t i = 0; i < n; i++)
        if (!buf[i]) argc++;
    char **argv = calloc((size_t)argc + 1, sizeof *argv);
    if (!argv) {
        free(buf);
        return NULL;
    }
    for (size_t i = 0, a = 0; i < n && (int)a < argc; a++) {
        argv[a] = buf + i;
        i += strlen(buf + i) + 1;
    }
    return argv; /* buf lives as long as the child needs it (exec) */
}

/* Pin this process (rank r, tpr threads) per o's placement (see
 * cli_dist.h).  SGLC_TP_PIN=0: leave it to the kernel. */
static void pin_rank(const cli_dist_opts *o, int r, int tpr, int n_slots, const char *who)
{
    const char *p = getenv("SGLC_TP_PIN");
    if (p && !strcmp(p, "0")) return;
    cpu_set_t have, want;
    if (sched_getaffinity(0, sizeof have, &have)) return;
    CPU_ZERO(&want);
    int n = 0;
    if (o->n_numa > 0) {
        if (r >= o->n_numa) {
            log_warn("--numa-node names %d nodes for %d ranks: rank %d is not pinned", o->n_numa, o->tp_size, r);
            return;
        }
        char path[96], list[4096];
        snprintf(path, sizeof path, "/sys/devices/system/node/node%d/cpulist", o->numa[r]);
        FILE *f = fopen(path, "r");
        size_t got = f ? fread(list, 1, sizeof list - 1, f) : 0;
        if (f) fclose(f);
        list[got] = 0;
        for (char *s = list; *s && *s != '\n';) { /* "0-3,8-11" */
            char *e;
            long a = strtol(s, &e, 10), b = a;
            if (e == s) break;
            if (*e == '-') b = strtol(e + 1, &e, 10);
            for (long c = a; c <= b && c < CPU_SETSIZE; c++)
                if (c >= 0 && CPU_ISSET(c, &have)) CPU_SET(c, &want), n++;
            s = *e == ',' ? e + 1 : e;
        }
        if (!n) {
            log_warn("--numa-node %d: no usable cores on that node; rank %d is not pinned", o->numa[r], r);
            return;
        }
    } else {
        int ids[CPU_SETSIZE], nc = 0;
        for (int c = 0; c < CPU_SETSIZE; c++)
            if (CPU_ISSET(c, &have)) ids[nc++] = c;
        long first = ((long)o->base_group + (long)r * o->group_step) * tpr;
        if (n_slots > 0 && (long)n_slots * tpr > nc) { /* DP x TP: all slots fit, or none is pinned */
            log_info("%s: %d ranks x %d thread(s) on %d cores: not pinned", who, n_slots, tpr, nc);
            return;
        }
        if (first < 0 || first + tpr > nc) {
            /* oversubscribed (more ranks x threads than cores) or a group past the end */
            if (o->base_group || o->group_step != 1)
                log_warn("core group %ld of rank %d is outside the %d cores: not pinned",
                         (long)o->base_group + (long)r * o->group_step, r, nc);
            return;
        }
        for (int i = 0; i < tpr; i++) CPU_SET(ids[first + i], &want), n++;
    }
    if (sched_setaffinity(0, sizeof want, &want) == 0) log_info("%s pinned to %d core(s)", who, n);
}

/* The binary by its own path (not /proc/self/exe: the workers keep the name sglc). */
static void self_exe(char *exe, size_t n)
{
    ssize_t el = readlink("/proc/self/exe", exe, n - 1);
    if (el <= 0) snprintf(exe, n, "/proc/self/exe");
    else exe[el] = 0;
}

/* --nnodes K --dist-init-addr (cli_dist.h): this node's ranks over gloo. */
static int start_gloo(const cli_dist_opts *o, int tpr, int N, int n_groups, int tmo, dist_group **out, char *err,
                      size_t errlen)
{
    const int K = o->nnodes, R = o->node_rank;
    if (R < 0 || R >= K) {
        snprintf(err, errlen, "--node-rank %d: must be between 0 and --nnodes - 1 = %d", R, K - 1);
        return -1;
    }
    if (N % K) {
        snprintf(err, errlen, "--tp-size x --pp-size = %d ranks do not split evenly over --nnodes %d", N, K);
        return -1;
    }
    if (!dist_gloo_available()) {
        snprintf(err, errlen, "this sglc was built without gloo (install libgloo-dev and rebuild), so "
                 "--dist-init-addr cannot join the nodes; run them under mpirun instead");
        return -1;
    }
    const int per = N / K;
    char cfg[160];
    snprintf(cfg, sizeof cfg, "--tp-size %d --pp-size %d --nnodes %d", o->tp_size > 0 ? o->tp_size : 1,
             o->pp_size > 1 ? o->pp_size : 1, K);
    if (n_groups > 1) snprintf(cfg + strlen(cfg), sizeof cfg - strlen(cfg), " --dp-size %d", n_groups);
    const char *wr = getenv("SGLC_DIST_GLOO_RANK");
    int rank = R * per;
    if (wr) { /* a rank this node's command started */
        rank = atoi(wr);
        if (rank < R * per || rank >= (R + 1) * per) {
            snprintf(err, errlen, "SGLC_DIST_GLOO_RANK=%s is not a rank of node %d", wr, R);
            return -1;
        }
    } else if (per > 1) {
        char **argv = self_argv();
        if (!argv) {
            snprintf(err, errlen, "cannot read /proc/self/cmdline to start this node's ranks");
            return -1;
        }
        char exe[4096];
        self_exe(exe, sizeof exe);
        fflush(stdout), fflush(stderr);
        for (int l = 1; l < per && g_n_child < MAX_CHILD; l++) {
            pid_t pid = fork();
            if (pid < 0) {
                snprintf(err, errlen, "fork for rank %d failed", R * per + l);
                return -1;
            }
            if (pid == 0) {
                char rb[16];
                snprintf(rb, sizeof rb, "%d", R * per + l);
                setenv("SGLC_DIST_GLOO_RANK", rb, 1);
                dup2(2, 1);
                execv(exe, argv);
                _exit(127);
            }
            g_child[g_n_child++] = pid;
        }
        free(argv[0]);
        free(argv);
        atexit(reap_children);
    }
    char who[64];
    snprintf(who, sizeof who, "rank %d (node %d)", rank, R);
    if (n_groups == 1) pin_rank(o, rank - R * per, tpr, 0, who); /* DP: each replica's thread pins itself */
    dist_gloo_opts go = {.init_addr = o->init_addr, .size = N, .rank = rank, .per_node = per, .timeout_ms = tmo,
                         .config = cfg};
    dist_group *g = dist_gloo_create(&go, err, errlen);
    if (!g) return -1;
    log_info("tensor parallelism: rank %d of %d on node %d of %d (%d per node) over gloo (TCP, rendezvous at %s), "
             "%d thread(s) each", rank, N, R, K, per, o->init_addr, tpr);
    if (n_groups == 1) {
        out[0] = g;
        return 1;
    }
    /* --dp-size: every process is rank r of each replica (SGLang's layout:
     * a replica's ranks spread over the nodes, every rank 0 on node 0);
     * replica k's group is a gloo context of its own over the same ranks */
    for (int k = 0; k < n_groups; k++) {
        out[k] = dist_split(g, 0, rank, err, errlen);
        if (!out[k]) return -1;
    }
    g_gloo_world = g; /* the splits use its store connection: it lives as long as the process */
    if (rank != 0) atexit(gloo_finish); /* a worker says goodbye to the store once its groups are done */
    log_info("data parallelism x tensor parallelism: %d replicas of %d ranks over gloo (one context per replica), "
             "rank %d of each on node %d", n_groups, N, rank, R);
    return n_groups;
}

int cli_dist_slot(const cli_dist_opts *o, const dist_group *g, int k, int n_groups, int *n_slots)
{
    *n_slots = 0;
    if (n_groups < 2 || !g) return -1;
    const int N = dist_size(g), r = dist_rank(g);
    if (!strcmp(dist_backend(g), "shm")) {
        *n_slots = n_groups * N;
        return k * N + r;
    }
    if (!strcmp(dist_backend(g), "gloo") && o->nnodes > 1) { /* this node's ranks: N / nnodes of each replica */
        const int per = N / o->nnodes;
        *n_slots = n_groups * per;
        return k * per + r % per;
    }
    return -1; /* mpirun places its processes */
}

int cli_dist_start(const cli_dist_opts *o, int tpr, dist_group **out, char *err, size_t errlen)
{
    dist_group *g[1] = {NULL};
    int n = cli_dist_start_groups(o, tpr, 1, g, err, errlen);
    *out = g[0];
    return n < 0 ? -1 : 0;
}

int cli_dist_start_groups(const cli_dist_opts *o, int tpr, int n_groups, dist_group **out, char *err,
                          size_t errlen)
{
    for (int i = 0; i < n_groups; i++) out[i] = NULL;
    int N = (o->tp_size > 0 ? o->tp_size : 1) * (o->pp_size > 1 ? o->pp_size : 1); /* ranks */
    if (n_groups < 1 || n_groups * N > MAX_CHILD + 1) {
        snprintf(err, errlen, "%d groups of %d ranks: at most %d ranks on one machine", n_groups, N,
                 MAX_CHILD + 1);
        return -1;
    }
    int tmo = (o->timeout_s > 0 ? o->timeout_s : 300) * 1000;
    int msize, mrank;
    if (dist_mpi_env(&msize, &mrank) && msize > 1) {
        if (msize != N) {
            if (n_groups > 1 && msize == n_groups * N)
                snprintf(err, errlen, "mpirun started %d processes = --dp-size %d x %d ranks, but sglc runs rank r "
                         "of every replica in one process (one copy of its shard, a thread per replica): use "
                         "-np %d", msize, n_groups, N, N);
            else
                snprintf(err, errlen, "mpirun started %d processes but --tp-size x --pp-size is %d (sglc "
                         "runs one rank per process%s: use -np %d)", msize, N,
                         n_groups > 1 ? ", each rank of every replica" : "", N);
            return -1;
        }
        dist_group *g = dist_mpi_init_threads(tmo, n_groups > 1, err, errlen);
        if (!g) return -1;
        log_info("tensor parallelism: rank %d of %d over Open MPI (node rank %d of %d)", dist_rank(g),
                 N, o->node_rank, o->nnodes);
        if (dist_rank(g) == 0 || n_groups > 1) {
            g_mpi = g;
            atexit(mpi_finish);
        }
        if (n_groups == 1) {
            out[0] = g;
            return 1;
        }
        /* --dp-size: replica k's group is a communicator of its own over the
         * same processes (every process is rank r of each replica) */
        for (int k = 0; k < n_groups; k++) {
            out[k] = dist_split(g, 0, dist_rank(g), err, errlen);
            if (!out[k]) return -1;
            if (dist_rank(g) == 0) mpi_keep(out[k]);
        }
        log_info("data parallelism x tensor parallelism: %d replicas of %d ranks over Open MPI (one communicator "
                 "per replica), rank %d of each", n_groups, N, dist_rank(g));
        return n_groups;
    }
    if (N == 1) return 0;
    if (o->nnodes > 1 && !o->init_addr) {
        snprintf(err, errlen, "--nnodes %d: give node 0's address with --dist-init-addr HOST:PORT (the same "
                 "command on every node, --node-rank 0..%d), or start the command under mpirun (mpirun -np %d "
                 "-H host1,host2 sglc ... --tp-size %d)", o->nnodes, o->nnodes - 1, N, N);
        return -1;
    }
    if (o->nnodes > 1) return start_gloo(o, tpr, N, n_groups, tmo, out, err, errlen);
    const char *shm = getenv("SGLC_DIST_SHM"), *rs = getenv("SGLC_DIST_RANK");
    if (shm && rs) { /* a worker rank started by rank 0: rank r of one group, or of every replica's */
        int r = atoi(rs);
        const char *gs = getenv("SGLC_DIST_GROUPS");
        int ng = gs ? atoi(gs) : 1;
        if (ng != n_groups) {
            snprintf(err, errlen, "rank %d was started for %d groups, the command makes %d", r, ng, n_groups);
            return -1;
        }
        char who[64];
        if (ng > 1) snprintf(who, sizeof who, "tensor-parallel rank %d (loading)", r);
        else snprintf(who, sizeof who, "tensor-parallel rank %d", r);
        /* DP x TP: this thread loads (replica 0's slot); each replica's
         * thread pins itself to its own slot (cli_dist_pin_slot) */
        pin_rank(o, r, tpr, ng > 1 ? ng * N : 0, who);
        for (int k = 0; k < ng; k++) {
            char name[112];
            if (ng > 1) snprintf(name, sizeof name, "%s-dp%d", shm, k);
            else snprintf(name, sizeof name, "%s", shm);
            out[k] = dist_shm_create(name, N, r, 0, tmo, err, errlen);
            if (!out[k]) {
                for (int q = 0; q < k; q++) {
                    dist_abort(out[q], err);
                    dist_free(out[q]);
                    out[q] = NULL;
                }
                return -1;
            }
        }
        return ng;
    }
    char base[96];
    snprintf(base, sizeof base, "/sglc-tp-%d-%ld", (int)getpid(), (long)time(NULL));
    char **argv = self_argv();
    if (!argv) {
        snprintf(err, errlen, "cannot read /proc/self/cmdline to start the tensor-parallel ranks");
        return -1;
    }
    /* the binary by its own path (not /proc/self/exe: the workers keep the name sglc) */
    char exe[4096];
    self_exe(exe, sizeof exe);
    fflush(stdout), fflush(stderr);
    /* one worker process per rank r >= 1; with several groups (--dp-size)
     * it is rank r of every one of them (one copy of its shard, a thread
     * per replica; group k's rank r is placement slot k * N + r, cli_dist.h) */
    for (int r = 1; r < N && g_n_child < MAX_CHILD; r++) {
        pid_t pid = fork();
        if (pid < 0) {
            snprintf(err, errlen, "fork for tensor-parallel rank %d failed", r);
            return -1;
        }
        if (pid == 0) {
            char rb[16], sb[16], gb[16];
            snprintf(rb, sizeof rb, "%d", r);
            snprintf(sb, sizeof sb, "%d", N);
            snprintf(gb, sizeof gb, "%d", n_groups);
            setenv("SGLC_DIST_SHM", base, 1);
            setenv("SGLC_DIST_RANK", rb, 1);
            setenv("SGLC_DIST_SIZE", sb, 1);
            if (n_groups > 1) setenv("SGLC_DIST_GROUPS", gb, 1);
            dup2(2, 1); /* a worker's stdout would mix with the command's output */
            execv(exe, argv);
            _exit(127);
        }
        g_child[g_n_child++] = pid;
    }
    free(argv[0]);
    free(argv);
    atexit(reap_children);
    /* one group: this process is rank 0's slot; several (--dp-size): the
     * data-parallel controller pins each replica's threads (dp.h) */
    if (n_groups == 1) pin_rank(o, 0, tpr, 0, "tensor-parallel rank 0");
    for (int k = 0; k < n_groups; k++) {
        char name[112];
        if (n_groups > 1) snprintf(name, sizeof name, "%s-dp%d", base, k);
        else snprintf(name, sizeof name, "%s", base);
        out[k] = dist_shm_create(name, N, 0, 0, tmo, err, errlen);
        if (!out[k]) {
            for (int q = 0; q < k; q++) {
                dist_abort(out[q], err);
                dist_free(out[q]);
                out[q] = NULL;
            }
            return -1;
        }
    }
    if (n_groups > 1)
        log_info("data parallelism x tensor parallelism: %d replicas of %d ranks on this machine (shared memory, "
                 "one segment per replica; %d process(es), each rank's shard once, a thread per replica), "
                 "%d thread(s) per rank", n_groups, N, N, tpr);
    else
        log_info("tensor parallelism: %d ranks on this machine (shared memory), %d thread(s) each", N, tpr);
    return n_groups;
}

void cli_dist_pin_slot(const cli_dist_opts *o, int slot, int tpr, int n_slots, const char *who)
{
    pin_rank(o, slot, tpr, n_slots, who);
}

int cli_dist_stage_group(const cli_dist_opts *o, dist_group *g, dist_group **out, char *err, size_t errlen)
{
    *out = NULL;
    const int T = o->tp_size > 1 ? o->tp_size : 1, P = o->pp_size > 1 ? o->pp_size : 1;
    if (!g || T == 1 || P == 1) return 0;
    const int r = dist_rank(g), stage = r / T;
    dist_group *s = dist_split(g, stage, r % T, err, errlen);
    if (!s) return -1;
    log_info("rank %d: pipeline stage %d of %d, tensor-parallel rank %d of %d (ranks %d-%d, %s)", r, stage, P,
             dist_rank(s), T, stage * T, stage * T + T - 1, dist_backend(s));
    if (r == 0 && !strcmp(dist_backend(g), "mpi")) mpi_keep(s);
    else if (r == 0 && g_n_stage_keep < (int)(sizeof g_stage_keep / sizeof g_stage_keep[0]))
        g_stage_keep[g_n_stage_keep++] = s; /* rank 0's models borrow it until exit (as the watched groups) */
    *out = s;
    return 0;
}

typedef struct watch_arg {
    dist_group *g;
    int dp_rank; /* -1: the only group */
} watch_arg;

static void *watch_main(void *arg)
{
    watch_arg wa = *(watch_arg *)arg;
    free(arg);
    dist_group *g = wa.g;
    for (;;) {
        usleep(100000);
        if (model_tp_group_shut(g)) return NULL;
        if (!dist_check_peers(g) && !dist_broken(g)) continue;
        if (model_tp_group_shut(g)) return NULL;
        if (wa.dp_rank >= 0)
            log_error("tensor parallelism failed in dp_rank %d: %s; exiting", wa.dp_rank, dist_error(g));
        else
            log_error("tensor parallelism failed: %s; exiting", dist_error(g));
        /* the failed batch's requests are answered (503) meanwhile */
        sleep(1);
        fflush(stdout), fflush(stderr);
        for (int i = 0; i < g_n_child; i++) kill(g_child[i], SIGKILL);
        /* Open MPI: MPI_Abort ends every rank of the job (a hung one too) */
        if (!strcmp(dist_backend(g), "mpi")) dist_abort(g, "tensor parallelism failed");
        /* gloo: published so the other nodes' ranks name the same failure */
        if (!strcmp(dist_backend(g), "gloo")) dist_abort(g, dist_error(g));
        _exit(1);
    }
}

void cli_dist_watch(dist_group *g, int dp_rank)
{
    static dist_group *watched[MAX_CHILD + 1];
    static int n_watched;
    if (!g || dist_size(g) < 2 || dist_rank(g) != 0 || n_watched >= MAX_CHILD + 1) return;
    for (int i = 0; i < n_watched; i++)
        if (watched[i] == g) return;
    watched[n_watched++] = g;
    watch_arg *wa = malloc(sizeof *wa);
    if (!wa) return;
    wa->g = g, wa->dp_rank = dp_rank;
    pthread_t th;
    if (!pthread_create(&th, NULL, watch_main, wa)) pthread_detach(th);
    else free(wa);
}
