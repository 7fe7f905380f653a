/* dist_shm — the in-node backend: a POSIX shared-memory segment shared by
 * the ranks of one machine (see dist.h).
 *
 * DESIGN: the segment is a header (per-rank pids and three epoch counters,
 * each on its own cache line; a futex word; an abort record) followed by
 * two slots per rank.  Every collective is one "op" with a number g, the
 * same on every rank (collectives run in the same order everywhere); it
 * uses slot buffer g & 1.  Counters: arrive[r] = g once rank r's input for
 * op g is in its slot, red[r] = g once its stripe is reduced (large
 * all-reduce), done[r] = g once it no longer reads op g's slots.  Before
 * writing buffer g & 1 a rank waits until every done >= g - 2: nobody still
 * reads what op g - 2 left there (double buffering, usually already true).
 *   all-reduce, small: write slot; arrive; wait all arrive; sum every
 *     slot in rank order into the caller's buffer; done.
 *   all-reduce, large (> SMALL_BYTES): write slot; arrive; wait all
 *     arrive; rank r sums stripe r of every slot (rank order) into its own
 *     slot; red; wait all red; copy every rank's stripe; done.  Same sums,
 *     same order: bitwise the small path's result, identical on all ranks.
 *   broadcast: root writes, arrive[root]; the others wait for it, copy, done.
 *   gather: non-roots write, arrive, done; root waits for all, copies.
 *   barrier: arrive; wait all arrive; done.
 * Payloads larger than a slot go as several ops.
 *
 * Waiting: SPIN_PAUSE pause-spins, then sched_yield, then after YIELD_MS a
 * futex sleep on the header's bell (2 ms at a time; every counter store
 * bumps the bell and wakes sleepers), so an oversubscribed machine (more
 * ranks than cores) still progresses.  Every 50 ms in a wait the peers'
 * processes are checked (a child: waitpid; any: /proc/PID/stat, zombie =
 * dead) and the abort record is read; a dead peer, an abort or the timeout
 * breaks the group with a message naming the rank, its pid and the op.
 */
#include <errno.h>
#include <fcntl.h>
#include <immintrin.h>
#include <limits.h>
#include <pthread.h>
#include <linux/futex.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "dist/dist.h"
#include "util/dtype.h"

#define SHM_MAGIC 0x7473696463676c73ull /* "sglcdist" */
#define SHM_MAX_RANKS 64
#define SMALL_BYTES (256u << 10)
#define SPIN_PAUSE 2000
#define YIELD_MS 2.0
#define CHECK_MS 50.0

typedef struct {
    _Alignas(64) uint32_t v;
    char pad[60];
} line32;

typedef struct shm_hdr {
    uint64_t magic;                 /* written last by rank 0 (release) */
    int size;
    uint64_t slot_bytes;
    uint64_t map_bytes;
    int joined;                     /* ranks attached (atomic) */
    int abort_rank;                 /* -1, or the rank that published abort_msg (CAS) */
    char abort_msg[256];
    int pid[SHM_MAX_RANKS];
    line32 bell;                    /* futex word: bumped by every counter store */
    line32 sleepers;
    line32 arrive[SHM_MAX_RANKS], red[SHM_MAX_RANKS], done[SHM_MAX_RANKS];
} shm_hdr;

typedef struct shm_impl {
    shm_hdr *h;
    char *slots;
    size_t map_bytes, slot_bytes;
    uint32_t op;                    /* last op number this rank ran */
    char name[96];                  /* the segment's name (sub-groups derive theirs) */
    int dead[SHM_MAX_RANKS];        /* peer known dead (reported once) */
} shm_impl;

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static size_t hdr_bytes(void) { return (sizeof(shm_hdr) + 4095) & ~(size_t)4095; }

static char *slot(shm_impl *S, int r, uint32_t g)
{
    return S->slots + ((size_t)r * 2 + (g & 1)) * S->slot_bytes;
}

static void ring(shm_impl *S)
{
    __atomic_add_fetch(&S->h->bell.v, 1, __ATOMIC_RELEASE);
    if (__atomic_load_n(&S->h->sleepers.v, __ATOMIC_ACQUIRE))
        syscall(SYS_futex, &S->h->bell.v, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

static void publish(shm_impl *S, line32 *c, uint32_t g)
{
    __atomic_store_n(&c->v, g, __ATOMIC_RELEASE);
    ring(S);
}

/* Children this process reaped while checking a group (a worker process
 * is a peer in every replica's group, --dp-size with --tp-size): the
 * first check that reaps it keeps its status here, so every group names
 * the same cause instead of "no process" for the others. */
#define REAPED_MAX 64
static struct {
    pid_t pid;
    int st;
} reaped[REAPED_MAX];
static int n_reaped;
static pthread_mutex_t reaped_mu = PTHREAD_MUTEX_INITIALIZER;

/* waitpid(pid, WNOHANG) that remembers: pid when it ended (status in *st). */
static pid_t reap_child(pid_t pid, int *st)
{
    pthread_mutex_lock(&reaped_mu);
    pid_t w = 0;
    for (int i = 0; i < n_reaped && i < REAPED_MAX && !w; i++)
        if (reaped[i].pid == pid) *st = reaped[i].st, w = pid;
    if (!w) {
        w = waitpid(pid, st, WNOHANG);
        if (w == pid) { /* a ring: the oldest entry goes first */
            reaped[n_reaped % REAPED_MAX].pid = pid;
            reaped[n_reaped % REAPED_MAX].st = *st;
            n_reaped++;
        }
    }
    pthread_mutex_unlock(&reaped_mu);
    return w;
}

/* Is peer r's process gone?  Fills why. */
static int peer_dead(shm_impl *S, int r, char *why, size_t n)
{
    int pid = __atomic_load_n(&S->h->pid[r], __ATOMIC_ACQUIRE);
    if (pid <= 0) return 0;
    int st;
    pid_t w = reap_child(pid, &st);
    if (w == pid) {
        if (WIFEXITED(st)) snprintf(why, n, "exited with status %d", WEXITSTATUS(st));
        else if (WIFSIGNALED(st)) snprintf(why, n, "was killed by signal %d", WTERMSIG(st));
        else snprintf(why, n, "ended");
        return 1;
    }
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(why, n, "is gone (no process %d)", pid);
        return 1;
    }
    size_t got = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[got] = 0;
    const char *p = strrchr(buf, ')');
    if (p && p[1] == ' ' && (p[2] == 'Z' || p[2] == 'X')) {
        snprintf(why, n, "exited (zombie process %d)", pid);
        return 1;
    }
    return 0;
}

/* Slow-path checks: abort record, dead peers.  -1 after breaking g. */
static int slow_checks(dist_group *g, const char *what, uint32_t op)
{
    shm_impl *S = g->impl;
    int ar = __atomic_load_n(&S->h->abort_rank, __ATOMIC_ACQUIRE);
    if (ar >= 0 && ar != g->rank) {
        dist_fail(g, dist_rank_name(g, ar), "rank %d failed: %s", dist_rank_name(g, ar), S->h->abort_msg);
        return -1;
    }
    for (int r = 0; r < g->size; r++) {
        char why[128];
        if (r == g->rank || !peer_dead(S, r, why, sizeof why)) continue;
        dist_fail(g, dist_rank_name(g, r), "rank %d (pid %d) %s; rank %d was in %s #%u", dist_rank_name(g, r),
                  S->h->pid[r], why, dist_rank_name(g, g->rank), what, op);
        return -1;
    }
    return 0;
}

static void publish_abort(shm_impl *S, int rank, const char *msg)
{
    int expect = -1;
    if (__atomic_compare_exchange_n(&S->h->abort_rank, &expect, -2, 0, __ATOMIC_ACQ_REL,
                                    __ATOMIC_ACQUIRE)) {
        size_t l = strnlen(msg, sizeof S->h->abort_msg - 1);
        memcpy(S->h->abort_msg, msg, l);
        S->h->abort_msg[l] = 0;
        __atomic_store_n(&S->h->abort_rank, rank, __ATOMIC_RELEASE);
        ring(S);
    }
}

/* Wait until arr[r] >= e for every rank r (only = -1) or for rank `only`.
 * 0, or -1 with the group broken (timeout, dead peer, abort). */
static int wait_counter(dist_group *g, line32 *arr, int only, uint32_t e, int timeout_ms,
                        const char *what)
{
    shm_impl *S = g->impl;
    int spins = 0, lag = -1;
    double t0 = 0, last_check = 0, tw = 0;
    for (;;) {
        lag = -1;
        for (int r = only < 0 ? 0 : only; r < (only < 0 ? g->size : only + 1); r++)
            if ((int32_t)(__atomic_load_n(&arr[r].v, __ATOMIC_ACQUIRE) - e) < 0) {
                lag = r;
                break;
            }
        if (lag < 0) {
            if (tw > 0) g->wait_s += (now_ms() - tw) / 1e3;
            return 0;
        }
        if (tw == 0) tw = now_ms(); /* the time spent waiting for others (statistics) */
        if (spins < SPIN_PAUSE) {
            spins++;
            _mm_pause();
            continue;
        }
        double t = now_ms();
        if (t0 == 0) t0 = last_check = t;
        if (t - last_check >= CHECK_MS) {
            last_check = t;
            if (slow_checks(g, what, e)) return -1;
        }
        if (timeout_ms > 0 && t - t0 >= timeout_ms) {
            char msg[300];
            snprintf(msg, sizeof msg, "rank %d (pid %d) did not reach %s #%u within %.1f s",
                     dist_rank_name(g, lag), S->h->pid[lag], what, e, timeout_ms / 1e3);
            dist_fail(g, dist_rank_name(g, lag), "%s", msg);
            publish_abort(S, g->rank, msg);
            return -1;
        }
        if (t - t0 < YIELD_MS) {
            sched_yield();
            continue;
        }
        uint32_t bell = __atomic_load_n(&S->h->bell.v, __ATOMIC_ACQUIRE);
        __atomic_add_fetch(&S->h->sleepers.v, 1, __ATOMIC_ACQ_REL);
        /* re-check after announcing ourselves: a store before this is seen */
        int ready = 1;
        for (int r = only < 0 ? 0 : only; r < (only < 0 ? g->size : only + 1); r++)
            if ((int32_t)(__atomic_load_n(&arr[r].v, __ATOMIC_ACQUIRE) - e) < 0) ready = 0;
        if (!ready) {
            /* the bell wakes us; the timeout is only the re-check period */
            struct timespec ts = {0, t - t0 < 200.0 ? 2000000 : 40000000};
            syscall(SYS_futex, &S->h->bell.v, FUTEX_WAIT, bell, &ts, NULL, 0);
        }
        __atomic_sub_fetch(&S->h->sleepers.v, 1, __ATOMIC_ACQ_REL);
    }
}

/* Start op g: wait until nobody reads op g - 2's buffer. */
static int begin_op(dist_group *g, uint32_t *op, int timeout_ms, const char *what)
{
    shm_impl *S = g->impl;
    *op = ++S->op;
    if (*op <= 2) return 0;
    return wait_counter(g, S->h->done, -1, *op - 2, timeout_ms, what);
}

/* Elements [e0, e1) of op's slots summed over ranks in rank order (f32
 * accumulation) into dst[e0..e1); dst may be one of the slots. */
static void sum_rows(void *dst, shm_impl *S, int size, uint32_t op, size_t e0, size_t e1,
                     dist_dtype dt)
{
    float acc[256];
    for (size_t i0 = e0; i0 < e1; i0 += 256) {
        size_t c = e1 - i0 < 256 ? e1 - i0 : 256;
        if (dt == DIST_F32) {
            memcpy(acc, (const float *)slot(S, 0, op) + i0, c * 4);
            for (int r = 1; r < size; r++) {
                const float *sr = (const float *)slot(S, r, op) + i0;
                for (size_t j = 0; j < c; j++) acc[j] += sr[j];
            }
            memcpy((float *)dst + i0, acc, c * 4);
        } else {
            const uint16_t *s0 = (const uint16_t *)slot(S, 0, op) + i0;
            for (size_t j = 0; j < c; j++) acc[j] = bf16_to_f32(s0[j]);
            for (int r = 1; r < size; r++) {
                const uint16_t *sr = (const uint16_t *)slot(S, r, op) + i0;
                for (size_t j = 0; j < c; j++) acc[j] += bf16_to_f32(sr[j]);
            }
            for (size_t j = 0; j < c; j++) ((uint16_t *)dst)[i0 + j] = f32_to_bf16(acc[j]);
        }
    }
}

static int shm_allreduce(dist_group *g, void *buf, size_t n, dist_dtype dt, int timeout_ms)
{
    shm_impl *S = g->impl;
    const size_t esz = dt == DIST_F32 ? 4 : 2, per = S->slot_bytes / esz;
    const int me = g->rank, N = g->size;
    for (size_t off = 0; off < n; off += per) {
        size_t cnt = n - off < per ? n - off : per, bytes = cnt * esz;
        char *mine = (char *)buf + off * esz;
        uint32_t op;
        if (begin_op(g, &op, timeout_ms, "all-reduce")) return -1;
        memcpy(slot(S, me, op), mine, bytes);
        publish(S, &S->h->arrive[me], op);
        if (wait_counter(g, S->h->arrive, -1, op, timeout_ms, "all-reduce")) return -1;
        if (bytes <= SMALL_BYTES) {
            /* the sum goes into the caller's buffer; the slots stay intact */
            sum_rows(mine, S, N, op, 0, cnt, dt);
        } else {
            size_t s0 = cnt * me / N, s1 = cnt * (me + 1) / N;
            /* stripe me, summed into slot(me) (only this rank reads it before red) */
            char *tmp = slot(S, me, op);
            sum_rows(tmp, S, N, op, s0, s1, dt);
            publish(S, &S->h->red[me], op);
            if (wait_counter(g, S->h->red, -1, op, timeout_ms, "all-reduce")) return -1;
            for (int r = 0; r < N; r++) {
                size_t a = cnt * r / N, b = cnt * (r + 1) / N;
                memcpy(mine + a * esz, slot(S, r, op) + a * esz, (b - a) * esz);
            }
        }
        publish(S, &S->h->done[me], op);
    }
    return 0;
}

static int shm_bcast(dist_group *g, void *buf, size_t bytes, int root, int timeout_ms)
{
    shm_impl *S = g->impl;
    const int me = g->rank;
    for (size_t off = 0; off < bytes; off += S->slot_bytes) {
        size_t c = bytes - off < S->slot_bytes ? bytes - off : S->slot_bytes;
        uint32_t op;
        if (begin_op(g, &op, timeout_ms, "broadcast")) return -1;
        if (me == root) {
            memcpy(slot(S, root, op), (char *)buf + off, c);
            __atomic_store_n(&S->h->arrive[root].v, op, __ATOMIC_RELEASE);
            publish(S, &S->h->done[root], op);
        } else {
            if (wait_counter(g, S->h->arrive, root, op, timeout_ms, "broadcast")) return -1;
            memcpy((char *)buf + off, slot(S, root, op), c);
            publish(S, &S->h->done[me], op);
        }
    }
    return 0;
}

static int shm_gather(dist_group *g, const void *send, size_t bytes, void *recv, int root,
                      int timeout_ms)
{
    shm_impl *S = g->impl;
    const int me = g->rank, N = g->size;
    for (size_t off = 0; off < bytes; off += S->slot_bytes) {
        size_t c = bytes - off < S->slot_bytes ? bytes - off : S->slot_bytes;
        uint32_t op;
        if (begin_op(g, &op, timeout_ms, "gather")) return -1;
        if (me != root) {
            memcpy(slot(S, me, op), (const char *)send + off, c);
            __atomic_store_n(&S->h->arrive[me].v, op, __ATOMIC_RELEASE);
            publish(S, &S->h->done[me], op);
            continue;
        }
        __atomic_store_n(&S->h->arrive[me].v, op, __ATOMIC_RELEASE);
        if (wait_counter(g, S->h->arrive, -1, op, timeout_ms, "gather")) return -1;
        for (int r = 0; r < N; r++) {
            const char *src = r == me ? (const char *)send + off : slot(S, r, op);
            memcpy((char *)recv + (size_t)r * bytes + off, src, c);
        }
        publish(S, &S->h->done[me], op);
    }
    return 0;
}

static int shm_barrier(dist_group *g, int timeout_ms)
{
    shm_impl *S = g->impl;
    uint32_t op = ++S->op;
    publish(S, &S->h->arrive[g->rank], op);
    if (wait_counter(g, S->h->arrive, -1, op, timeout_ms, "barrier")) return -1;
    publish(S, &S->h->done[g->rank], op);
    return 0;
}

static int shm_check_peers(dist_group *g) { return slow_checks(g, "a peer check after", ((shm_impl *)g->impl)->op); }

static void shm_abort(dist_group *g, const char *msg) { publish_abort(g->impl, g->rank, msg); }

static void shm_free(dist_group *g)
{
    shm_impl *S = g->impl;
    if (S) {
        if (S->h) munmap(S->h, S->map_bytes);
        free(S);
    }
    free(g);
}

static dist_group *shm_split(dist_group *g, int color, int key, int size, int rank, char *err, size_t errlen)
{
    (void)key;
    shm_impl *S = g->impl;
    char name[128];
    snprintf(name, sizeof name, "%.90s-c%d", S->name, color);
    return dist_shm_create(name, size, rank, S->slot_bytes, g->timeout_ms, err, errlen);
}

static const dist_ops shm_ops = {
    .name = "shm",
    .allreduce = shm_allreduce,
    .bcast = shm_bcast,
    .gather = shm_gather,
    .barrier = shm_barrier,
    .check_peers = shm_check_peers,
    .abort = shm_abort,
    .free = shm_free,
    .split = shm_split,
    .publish = shm_abort,
};

dist_group *dist_shm_create(const char *name, int size, int rank, size_t slot_bytes, int timeout_ms,
                            char *err, size_t errlen)
{
    if (size < 1 || size > SHM_MAX_RANKS || rank < 0 || rank >= size) {
        snprintf(err, errlen, "shared-memory group: rank %d of %d (at most %d ranks)", rank, size,
                 SHM_MAX_RANKS);
        return NULL;
    }
    if (!slot_bytes) slot_bytes = 8u << 20;
    slot_bytes = (slot_bytes + 4095) & ~(size_t)4095;
    dist_group *g = calloc(1, sizeof *g);
    shm_impl *S = calloc(1, sizeof *S);
    if (!g || !S) {
        free(g), free(S);
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    g->ops = &shm_ops, g->impl = S, g->rank = rank, g->size = size, g->failed_rank = -1;
    g->timeout_ms = timeout_ms > 0 ? timeout_ms : 0;
    snprintf(S->name, sizeof S->name, "%s", name);
    double t0 = now_ms();
    int fd = -1;
    if (rank == 0) {
        size_t total = hdr_bytes() + (size_t)size * 2 * slot_bytes;
        fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR, 0600);
        if (fd < 0 || ftruncate(fd, (off_t)total)) {
            snprintf(err, errlen, "shm_open/ftruncate %s (%zu bytes): %s", name, total, strerror(errno));
            if (fd >= 0) close(fd), shm_unlink(name);
            shm_free(g);
            return NULL;
        }
        S->h = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        close(fd);
        if (S->h == MAP_FAILED) {
            S->h = NULL;
            shm_unlink(name);
            snprintf(err, errlen, "mmap %s: %s", name, strerror(errno));
            shm_free(g);
            return NULL;
        }
        S->map_bytes = total;
        S->h->size = size;
        S->h->slot_bytes = slot_bytes;
        S->h->map_bytes = total;
        S->h->abort_rank = -1;
        __atomic_store_n(&S->h->magic, SHM_MAGIC, __ATOMIC_RELEASE);
    } else {
        /* attach: the name appears when rank 0 made it */
        for (;;) {
            fd = shm_open(name, O_RDWR, 0600);
            if (fd >= 0) break;
            if (timeout_ms > 0 && now_ms() - t0 > timeout_ms) {
                snprintf(err, errlen, "rank %d: no shared-memory segment %s after %.1f s (%s): rank 0 "
                         "did not create it", rank, name, timeout_ms / 1e3, strerror(errno));
                shm_free(g);
                return NULL;
            }
            usleep(2000);
        }
        struct stat st;
        while (!fstat(fd, &st) && (size_t)st.st_size < hdr_bytes()) usleep(1000);
        shm_hdr *h = mmap(NULL, hdr_bytes(), PROT_READ, MAP_SHARED, fd, 0);
        while (h != MAP_FAILED && __atomic_load_n(&h->magic, __ATOMIC_ACQUIRE) != SHM_MAGIC) usleep(1000);
        size_t total = h != MAP_FAILED ? h->map_bytes : 0;
        int hsize = h != MAP_FAILED ? h->size : 0;
        slot_bytes = h != MAP_FAILED ? h->slot_bytes : 0;
        if (h != MAP_FAILED) munmap(h, hdr_bytes());
        if (hsize != size) {
            close(fd);
            snprintf(err, errlen, "rank %d: segment %s is for %d ranks, not %d", rank, name, hsize, size);
            shm_free(g);
            return NULL;
        }
        S->h = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        close(fd);
        if (S->h == MAP_FAILED) {
            S->h = NULL;
            snprintf(err, errlen, "mmap %s: %s", name, strerror(errno));
            shm_free(g);
            return NULL;
        }
        S->map_bytes = total;
    }
    S->slot_bytes = slot_bytes;
    S->slots = (char *)S->h + hdr_bytes();
    __atomic_store_n(&S->h->pid[rank], (int)getpid(), __ATOMIC_RELEASE);
    __atomic_add_fetch(&S->h->joined, 1, __ATOMIC_ACQ_REL);
    ring(S);
    /* everyone joined (dead peers named meanwhile) */
    double last = now_ms();
    while (__atomic_load_n(&S->h->joined, __ATOMIC_ACQUIRE) < size) {
        double t = now_ms();
        if (t - last > CHECK_MS) {
            last = t;
            if (slow_checks(g, "start-up", 0)) break;
        }
        if (timeout_ms > 0 && t - t0 > timeout_ms) {
            int missing = -1;
            for (int r = 0; r < size && missing < 0; r++)
                if (!__atomic_load_n(&S->h->pid[r], __ATOMIC_ACQUIRE)) missing = r;
            dist_fail(g, missing, "rank %d did not join the group within %.1f s", missing, timeout_ms / 1e3);
            break;
        }
        usleep(500);
    }
    if (rank == 0) shm_unlink(name);
    if (dist_broken(g)) {
        snprintf(err, errlen, "%s", g->err);
        shm_free(g);
        return NULL;
    }
    return g;
}
