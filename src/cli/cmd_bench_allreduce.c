/* cmd_bench_allreduce — `sglc bench-allreduce`: latency of the process
 * group's all-reduce (src/dist) for the sizes tensor parallelism sends.
 *
 * DESIGN: --ranks N processes on this machine (the command forks N-1
 * children, one shared-memory group; each rank pinned to its core unless
 * SGLC_TP_PIN=0), or the ranks of mpirun (Open MPI backend), or with
 * --dist-init-addr HOST:PORT the same forked ranks over the gloo backend
 * (TCP; --nnodes / --node-rank: --ranks per node, the same command on each
 * node, as serve's multi-node launch).  Every rank
 * runs --warmup then --iters all-reduces of --hidden x --tokens elements
 * for f32 and bf16 and a broadcast of the same bytes; rank 0 prints the
 * median, p90 and mean per call in microseconds (one JSON line with
 * --json).  A barrier between dtypes keeps the ranks in step. */
#include <jansson.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "args/args.h"
#include "cli/cli.h"
#include "cli/cli_args.h"
#include "dist/dist.h"
#include "util/dtype.h"

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

typedef struct ar_stats {
    double med, p90, mean;
} ar_stats;

/* kind 0: all-reduce f32, 1: all-reduce bf16, 2: broadcast of the f32 bytes */
static int measure(dist_group *g, int kind, size_t n, int warm, int iters, ar_stats *st)
{
    void *buf = malloc(n * 4 + 64);
    double *t = malloc(sizeof(double) * (size_t)(iters > 0 ? iters : 1));
    if (!buf || !t) {
        free(buf), free(t);
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        float v = (float)((i % 7) + dist_rank(g)) * 0.25f;
        if (kind == 1) ((uint16_t *)buf)[i] = f32_to_bf16(v);
        else ((float *)buf)[i] = v;
    }
    int rc = dist_barrier(g, DIST_TIMEOUT_DEFAULT);
    for (int it = -warm; it < iters && !rc; it++) {
        double t0 = now_us();
        rc = kind == 2 ? dist_bcast(g, buf, n * 4, 0, DIST_TIMEOUT_DEFAULT)
                       : dist_allreduce(g, buf, n, kind ? DIST_BF16 : DIST_F32, DIST_TIMEOUT_DEFAULT);
        if (kind != 2) /* keep the values bounded */
            for (size_t i = 0; i < (n < 8 ? n : 8); i++) {
                if (kind == 1) ((uint16_t *)buf)[i] = f32_to_bf16(1.0f);
                else ((float *)buf)[i] = 1.0f;
            }
        if (it >= 0) t[it] = now_us() - t0;
    }
    if (!rc) rc = dist_barrier(g, DIST_TIMEOUT_DEFAULT);
    if (!rc && iters > 0) {
        double sum = 0;
        for (int i = 0; i < iters; i++) sum += t[i];
        qsort(t, (size_t)iters, sizeof *t, cmp_d);
        st->med = t[iters / 2];
        st->p90 = t[(int)(iters * 0.9)];
        st->mean = sum / iters;
    }
    free(buf), free(t);
    return rc;
}

static void pin_core(int r)
{
    const char *p = getenv("SGLC_TP_PIN");
    if (p && !strcmp(p, "0")) return;
    cpu_set_t have, want;
    if (sched_getaffinity(0, sizeof have, &have)) return;
    int seen = 0;
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &have) && seen++ == r) {
            CPU_ZERO(&want);
            CPU_SET(c, &want);
            sched_setaffinity(0, sizeof want, &want);
            return;
        }
}

int cmd_bench_allreduce(int argc, char **argv)
{
    long long ranks = 2, hidden = 4096, tokens = 1, iters = 2000, warm = 200, timeout = 30;
    long long nnodes = 1, node_rank = 0;
    const char *init_addr = NULL;
    bool as_json = false;
    const args_extra extra[] = {
        {.name = "--ranks", .metavar = "N", .help = "Ranks on this machine (ignored under mpirun).",
         .ival = &ranks, .lo = 1, .hi = 64, .def = "2"},
        {.name = "--hidden", .metavar = "H", .help = "Elements per token (the model's hidden size).",
         .ival = &hidden, .lo = 1, .hi = 1 << 20, .def = "4096"},
        {.name = "--tokens", .metavar = "T", .help = "Token rows per all-reduce (decode batch).",
         .ival = &tokens, .lo = 1, .hi = 1 << 16, .def = "1"},
        {.name = "--iters", .metavar = "K", .help = "Timed calls per kind.", .ival = &iters, .lo = 1,
         .hi = 1 << 24, .def = "2000"},
        {.name = "--warmup", .metavar = "K", .help = "Untimed calls first.", .ival = &warm, .lo = 0,
         .hi = 1 << 24, .def = "200"},
        {.name = "--dist-timeout", .metavar = "S", .help = "Seconds a rank may wait for the others.",
         .ival = &timeout, .lo = 1, .hi = 1 << 20, .def = "30"},
        {.name = "--dist-init-addr", .metavar = "HOST:PORT", .help = "Use the gloo backend (TCP) with its "
         "rendezvous at HOST:PORT (node 0 listens there) instead of shared memory.", .value = &init_addr},
        {.name = "--nnodes", .metavar = "N", .help = "Nodes of a gloo group (--ranks on each).", .ival = &nnodes,
         .lo = 1, .hi = 64, .def = "1"},
        {.name = "--node-rank", .metavar = "R", .help = "This node's rank in a gloo group.", .ival = &node_rank,
         .lo = 0, .hi = 63, .def = "0"},
        {.name = "--json", .help = "One JSON line instead of the table.", .flag = &as_json},
        {0},
    };
    const args_cmd cmd = {
        .usage = "usage: sglc bench-allreduce [--ranks N] [--hidden H] [--tokens T] [options]",
        .about = "Latency of the tensor-parallel all-reduce (shared memory between processes on "
                 "this machine, Open MPI under mpirun, or gloo over TCP with --dist-init-addr) for f32 and bf16, and of a broadcast.",
        .extra = extra,
        .no_server_args = true,
    };
    args_server sargs;
    int prc = cli_args_parse("bench-allreduce", &cmd, false, &sargs, argc, argv);
    if (prc >= 0) return prc;
    args_server_free(&sargs);
    char err[512];
    dist_group *g = NULL;
    int msize, mrank, n_child = 0;
    pid_t kids[64];
    if (dist_mpi_env(&msize, &mrank) && msize > 1) {
        g = dist_mpi_init((int)timeout * 1000, err, sizeof err);
    } else {
        char name[96];
        snprintf(name, sizeof name, "/sglc-bar-%d-%ld", (int)getpid(), (long)time(NULL));
        int rank = 0;
        fflush(stdout);
        for (int r = 1; r < ranks; r++) {
            pid_t p = fork();
            if (p == 0) {
                rank = r;
                n_child = 0;
                break;
            }
            if (p > 0) kids[n_child++] = p;
        }
        pin_core(rank);
        if (init_addr) {
            char cfg[96];
            snprintf(cfg, sizeof cfg, "bench-allreduce --ranks %lld --nnodes %lld", ranks, nnodes);
            dist_gloo_opts go = {.init_addr = init_addr, .size = (int)(ranks * nnodes),
                                 .rank = (int)(node_rank * ranks) + rank, .per_node = (int)ranks,
                                 .timeout_ms = (int)timeout * 1000, .config = cfg};
            if (node_rank >= nnodes) snprintf(err, sizeof err, "--node-rank %lld is not below --nnodes %lld", node_rank, nnodes);
            else g = dist_gloo_create(&go, err, sizeof err);
        } else {
            g = dist_shm_create(name, (int)ranks, rank, 0, (int)timeout * 1000, err, sizeof err);
        }
    }
    if (!g) {
        fprintf(stderr, "sglc bench-allreduce: %s\n", err);
        return 1;
    }
    size_t n = (size_t)hidden * (size_t)tokens;
    static const char *kinds[3] = {"allreduce_f32", "allreduce_bf16", "bcast_f32_bytes"};
    ar_stats st[3] = {{0}};
    int rc = 0;
    for (int k = 0; k < 3 && !rc; k++) rc = measure(g, k, n, (int)warm, (int)iters, &st[k]);
    if (rc) fprintf(stderr, "sglc bench-allreduce: rank %d: %s\n", dist_rank(g), dist_error(g));
    if (!rc && dist_rank(g) == 0) {
        if (as_json) {
            json_t *j = json_pack("{s:s,s:i,s:I,s:I,s:I}", "backend", dist_backend(g), "ranks",
                                  dist_size(g), "hidden", (json_int_t)hidden, "tokens",
                                  (json_int_t)tokens, "iters", (json_int_t)iters);
            for (int k = 0; k < 3; k++)
                json_object_set_new(j, kinds[k], json_pack("{s:f,s:f,s:f}", "median_us", st[k].med,
                                                          "p90_us", st[k].p90, "mean_us", st[k].mean));
            char *s = json_dumps(j, JSON_COMPACT);
            printf("%s\n", s);
            free(s);
            json_decref(j);
        } else {
            printf("%s backend, %d ranks, %lld x %lld elements, %lld calls\n", dist_backend(g),
                   dist_size(g), tokens, hidden, iters);
            printf("%-18s %10s %10s %10s\n", "", "median us", "p90 us", "mean us");
            for (int k = 0; k < 3; k++)
                printf("%-18s %10.2f %10.2f %10.2f\n", kinds[k], st[k].med, st[k].p90, st[k].mean);
        }
    }
    int me = dist_rank(g);
    dist_free(g);
    if (me != 0 && n_child == 0 && !dist_mpi_env(&msize, &mrank)) _exit(rc ? 1 : 0);
    for (int i = 0; i < n_child; i++) {
        int s;
        waitpid(kids[i], &s, 0);
        if (!WIFEXITED(s) || WEXITSTATUS(s)) rc = 1;
    }
    return rc ? 1 : 0;
}
