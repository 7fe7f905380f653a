/* dist_mpi — the across-machines backend: Open MPI over MPI_COMM_WORLD
 * (see dist.h).  The only file of sglc that includes mpi.h; without it
 * (SGLC_HAVE_MPI unset) dist_mpi_init explains that the build lacks Open
 * MPI.
 *
 * DESIGN: each collective is the nonblocking MPI call (MPI_Iallreduce,
 * MPI_Ibcast, MPI_Igather, MPI_Ibarrier) completed by polling MPI_Test
 * (spin, then yield, then 1 ms naps) against the timeout, so a hung peer
 * gives an error instead of a silent hang.  MPI cannot say which peer a
 * collective waits for; the message names the root when there is one and
 * otherwise the group.  A dead peer: Open MPI's runtime (mpirun) ends the
 * job and names the process; with MPI_ERRORS_RETURN an error that comes
 * back is reported with MPI_Error_string.  bf16 sums use a user op that
 * adds in f32 and rounds once (the shm backend's result for two ranks).
 * MPI is initialised MPI_THREAD_SERIALIZED: the driving thread may be
 * another than main (serve's scheduler thread); MPI_THREAD_MULTIPLE when
 * several groups (--dp-size: one communicator per replica, dist_split of
 * the world) are driven by their own threads at once.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dist/dist.h"

int dist_mpi_env(int *size, int *rank)
{
    const char *s = getenv("OMPI_COMM_WORLD_SIZE"), *r = getenv("OMPI_COMM_WORLD_RANK");
    if (!s || !r) s = getenv("PMI_SIZE"), r = getenv("PMI_RANK");
    if (!s || !r) return 0;
    *size = atoi(s);
    *rank = atoi(r);
    return *size >= 1 && *rank >= 0 && *rank < *size;
}

#ifndef SGLC_HAVE_MPI

int dist_mpi_available(void) { return 0; }

dist_group *dist_mpi_init(int timeout_ms, char *err, size_t errlen)
{
    return dist_mpi_init_threads(timeout_ms, 0, err, errlen);
}

dist_group *dist_mpi_init_threads(int timeout_ms, int multiple, char *err, size_t errlen)
{
    (void)timeout_ms, (void)multiple;
    snprintf(err, errlen, "this sglc was built without Open MPI (install libopenmpi-dev and rebuild) "
             "so it cannot run ranks across machines");
    return NULL;
}

#else

#include <mpi.h>
#include <sched.h>
#include <time.h>
#include <unistd.h>

#include "util/dtype.h"

int dist_mpi_available(void) { return 1; }

typedef struct mpi_impl {
    MPI_Op bf16_sum;
    int we_init;
    MPI_Comm comm;       /* MPI_COMM_WORLD, or a sub-group's split of it (owned) */
} mpi_impl;

static MPI_Comm comm_of(const dist_group *g) { return ((const mpi_impl *)g->impl)->comm; }

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void bf16_sum_fn(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    (void)dt;
    const uint16_t *a = in;
    uint16_t *b = inout;
    for (int i = 0; i < *len; i++) b[i] = f32_to_bf16(bf16_to_f32(a[i]) + bf16_to_f32(b[i]));
}

static int mpi_check(dist_group *g, int rc, const char *what)
{
    if (rc == MPI_SUCCESS) return 0;
    char s[MPI_MAX_ERROR_STRING];
    int n = 0;
    MPI_Error_string(rc, s, &n);
    dist_fail(g, -1, "rank %d: MPI %s failed: %s", dist_rank_name(g, g->rank), what, s);
    return -1;
}

static int wait_req(dist_group *g, MPI_Request *rq, int timeout_ms, const char *what, int root)
{
    double t0 = now_ms();
    for (long spins = 0;; spins++) {
        int flag = 0;
        if (mpi_check(g, MPI_Test(rq, &flag, MPI_STATUS_IGNORE), what)) return -1;
        if (flag) return 0;
        if (spins < 2000) continue;
        double t = now_ms();
        if (timeout_ms > 0 && t - t0 > timeout_ms) {
            const int me = dist_rank_name(g, g->rank), peer = dist_rank_name(g, 1 - g->rank),
                      rt = dist_rank_name(g, root);
            if (g->size == 2 && root < 0) /* the one peer */
                dist_fail(g, peer, "rank %d: %s with rank %d did not complete within %.1f s "
                          "(rank %d hung or gone)", me, what, peer, timeout_ms / 1e3, peer);
            else if (root >= 0 && root != g->rank)
                dist_fail(g, rt, "rank %d: %s from rank %d did not complete within %.1f s (rank %d "
                          "hung or gone)", me, what, rt, timeout_ms / 1e3, rt);
            else
                dist_fail(g, -1, "rank %d: %s did not complete within %.1f s: a peer of the %d ranks "
                          "is hung or gone (MPI does not say which)", me, what, timeout_ms / 1e3,
                          g->size);
            return -1;
        }
        if (t - t0 < 2.0) sched_yield();
        else usleep(t - t0 < 200.0 ? 50 : 1000);
    }
}

static int m_allreduce(dist_group *g, void *buf, size_t n, dist_dtype dt, int timeout_ms)
{
    mpi_impl *M = g->impl;
    const size_t esz = dt == DIST_F32 ? 4 : 2, per = 1u << 28;
    for (size_t off = 0; off < n; off += per) {
        int c = (int)(n - off < per ? n - off : per);
        MPI_Request rq;
        int rc = dt == DIST_F32 ? MPI_Iallreduce(MPI_IN_PLACE, (char *)buf + off * esz, c, MPI_FLOAT,
                                                 MPI_SUM, comm_of(g), &rq)
                                : MPI_Iallreduce(MPI_IN_PLACE, (char *)buf + off * esz, c,
                                                 MPI_UINT16_T, M->bf16_sum, comm_of(g), &rq);
        if (mpi_check(g, rc, "all-reduce") || wait_req(g, &rq, timeout_ms, "all-reduce", -1)) return -1;
    }
    return 0;
}

static int m_bcast(dist_group *g, void *buf, size_t bytes, int root, int timeout_ms)
{
    const size_t per = 1u << 30;
    for (size_t off = 0; off < bytes; off += per) {
        int c = (int)(bytes - off < per ? bytes - off : per);
        MPI_Request rq;
        if (mpi_check(g, MPI_Ibcast((char *)buf + off, c, MPI_BYTE, root, comm_of(g), &rq), "broadcast") ||
            wait_req(g, &rq, timeout_ms, "broadcast", root))
            return -1;
    }
    return 0;
}

static int m_gather(dist_group *g, const void *send, size_t bytes, void *recv, int root, int timeout_ms)
{
    if (bytes > (size_t)1 << 30) {
        dist_fail(g, -1, "gather of %zu bytes per rank is over the 1 GiB this backend sends at once", bytes);
        return -1;
    }
    MPI_Request rq;
    if (mpi_check(g, MPI_Igather(send, (int)bytes, MPI_BYTE, recv, (int)bytes, MPI_BYTE, root,
                                 comm_of(g), &rq), "gather"))
        return -1;
    return wait_req(g, &rq, timeout_ms, "gather", root);
}

static int m_barrier(dist_group *g, int timeout_ms)
{
    MPI_Request rq;
    if (mpi_check(g, MPI_Ibarrier(comm_of(g), &rq), "barrier")) return -1;
    return wait_req(g, &rq, timeout_ms, "barrier", -1);
}

static void m_abort(dist_group *g, const char *msg)
{
    fprintf(stderr, "rank %d: %s (MPI_Abort)\n", dist_rank_name(g, g->rank), msg);
    MPI_Abort(MPI_COMM_WORLD, 1);
}

static void m_free(dist_group *g)
{
    mpi_impl *M = g->impl;
    if (M) {
        int fin = 0;
        MPI_Finalized(&fin);
        if (!fin) MPI_Op_free(&M->bf16_sum);
        if (!fin && M->comm != MPI_COMM_WORLD && !dist_broken(g)) MPI_Comm_free(&M->comm);
        if (M->we_init && !fin && !dist_broken(g)) MPI_Finalize();
        free(M);
    }
    free(g);
}

static const dist_ops mpi_ops;

static dist_group *m_split(dist_group *g, int color, int key, int size, int rank, char *err, size_t errlen)
{
    dist_group *s = calloc(1, sizeof *s);
    mpi_impl *M = calloc(1, sizeof *M);
    if (!s || !M) {
        free(s), free(M);
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    /* MPI_Comm_split orders by key, then by rank in g: dist_split's order */
    int rc = MPI_Comm_split(comm_of(g), color, key, &M->comm);
    int r = -1, n = 0;
    if (rc == MPI_SUCCESS) MPI_Comm_rank(M->comm, &r), MPI_Comm_size(M->comm, &n);
    if (rc != MPI_SUCCESS || r != rank || n != size) {
        snprintf(err, errlen, "MPI_Comm_split failed (rank %d of %d, expected %d of %d)", r, n, rank, size);
        free(s), free(M);
        return NULL;
    }
    MPI_Comm_set_errhandler(M->comm, MPI_ERRORS_RETURN);
    MPI_Op_create(bf16_sum_fn, 1, &M->bf16_sum);
    s->ops = &mpi_ops, s->impl = M, s->failed_rank = -1, s->rank = r, s->size = n;
    s->timeout_ms = g->timeout_ms;
    return s;
}

static const dist_ops mpi_ops = {
    .name = "mpi",
    .allreduce = m_allreduce,
    .bcast = m_bcast,
    .gather = m_gather,
    .barrier = m_barrier,
    .check_peers = NULL,
    .abort = m_abort,
    .free = m_free,
    .split = m_split,
    .publish = NULL, /* a peer learns by its timeout, or mpirun ends the job */
};

dist_group *dist_mpi_init(int timeout_ms, char *err, size_t errlen)
{
    return dist_mpi_init_threads(timeout_ms, 0, err, errlen);
}

dist_group *dist_mpi_init_threads(int timeout_ms, int multiple, char *err, size_t errlen)
{
    int inited = 0, prov = 0;
    const int want = multiple ? MPI_THREAD_MULTIPLE : MPI_THREAD_SERIALIZED;
    MPI_Initialized(&inited);
    if (!inited && MPI_Init_thread(NULL, NULL, want, &prov) != MPI_SUCCESS) {
        snprintf(err, errlen, "MPI_Init_thread failed");
        return NULL;
    }
    if (inited) MPI_Query_thread(&prov);
    if (prov < want) {
        snprintf(err, errlen, "Open MPI gives thread level %d, sglc needs %s%s", prov,
                 multiple ? "MPI_THREAD_MULTIPLE" : "MPI_THREAD_SERIALIZED",
                 multiple ? " (--dp-size: each replica's group is driven by its own thread)" : "");
        return NULL;
    }
    dist_group *g = calloc(1, sizeof *g);
    mpi_impl *M = calloc(1, sizeof *M);
    if (!g || !M) {
        free(g), free(M);
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    M->we_init = !inited;
    M->comm = MPI_COMM_WORLD;
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Op_create(bf16_sum_fn, 1, &M->bf16_sum);
    g->ops = &mpi_ops, g->impl = M, g->failed_rank = -1;
    g->timeout_ms = timeout_ms > 0 ? timeout_ms : 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &g->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g->size);
    return g;
}

#endif
