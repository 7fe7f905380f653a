/* dist — the process-group front: argument checks, the broken state, the
 * backend dispatch (see dist.h). */
#include "dist/dist.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static pthread_mutex_t fail_mu = PTHREAD_MUTEX_INITIALIZER;

void dist_fail(dist_group *g, int rank, const char *fmt, ...)
{
    pthread_mutex_lock(&fail_mu);
    if (!__atomic_load_n(&g->broken, __ATOMIC_ACQUIRE)) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(g->err, sizeof g->err, fmt, ap);
        va_end(ap);
        g->failed_rank = rank;
        __atomic_store_n(&g->broken, 1, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&fail_mu);
}

int dist_rank(const dist_group *g) { return g->rank; }
int dist_size(const dist_group *g) { return g->size; }
const char *dist_backend(const dist_group *g) { return g->ops->name; }
void dist_set_timeout(dist_group *g, int timeout_ms) { g->timeout_ms = timeout_ms > 0 ? timeout_ms : 0; }
int dist_broken(const dist_group *g) { return __atomic_load_n(&g->broken, __ATOMIC_ACQUIRE); }
const char *dist_error(const dist_group *g) { return dist_broken(g) ? g->err : ""; }
int dist_failed_rank(const dist_group *g) { return dist_broken(g) ? g->failed_rank : -1; }

static int tmo(const dist_group *g, int t) { return t < 0 ? g->timeout_ms : t; }

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

int dist_allreduce(dist_group *g, void *buf, size_t n, dist_dtype dt, int timeout_ms)
{
    if (dist_broken(g)) return -1;
    if (g->size == 1 || n == 0) return 0;
    double t0 = now_s(), w0 = g->wait_s;
    int rc = g->ops->allreduce(g, buf, n, dt, tmo(g, timeout_ms));
    g->ar_total_s += now_s() - t0;
    g->ar_wait_s += g->wait_s - w0;
    g->ar_calls++;
    return rc;
}

void dist_allreduce_stats(const dist_group *g, double *total_s, double *wait_s, long *calls)
{
    if (total_s) *total_s = g->ar_total_s;
    if (wait_s) *wait_s = g->ar_wait_s;
    if (calls) *calls = g->ar_calls;
}

int dist_bcast(dist_group *g, void *buf, size_t bytes, int root, int timeout_ms)
{
    if (dist_broken(g)) return -1;
    if (root < 0 || root >= g->size) {
        dist_fail(g, -1, "broadcast from rank %d of a group of %d", root, g->size);
        return -1;
    }
    if (g->size == 1 || bytes == 0) return 0;
    return g->ops->bcast(g, buf, bytes, root, tmo(g, timeout_ms));
}

int dist_gather(dist_group *g, const void *send, size_t bytes, void *recv, int root, int timeout_ms)
{
    if (dist_broken(g)) return -1;
    if (root < 0 || root >= g->size) {
        dist_fail(g, -1, "gather to rank %d of a group of %d", root, g->size);
        return -1;
    }
    if (g->size == 1) {
        if (bytes && recv != send) __builtin_memcpy(recv, send, bytes);
        return 0;
    }
    if (bytes == 0) return 0;
    return g->ops->gather(g, send, bytes, recv, root, tmo(g, timeout_ms));
}

int dist_barrier(dist_group *g, int timeout_ms)
{
    if (dist_broken(g)) return -1;
    if (g->size == 1) return 0;
    return g->ops->barrier(g, tmo(g, timeout_ms));
}

int dist_check_peers(dist_group *g)
{
    if (dist_broken(g)) return -1;
    return g->ops->check_peers ? g->ops->check_peers(g) : 0;
}

void dist_abort(dist_group *g, const char *msg)
{
    if (g->ops->abort) g->ops->abort(g, msg);
    dist_fail(g, dist_rank_name(g, g->rank), "rank %d gave up: %s", dist_rank_name(g, g->rank), msg);
}

void dist_break_from(dist_group *g, const dist_group *cause)
{
    if (dist_broken(g) || !dist_broken(cause)) return;
    if (g->ops->publish) g->ops->publish(g, cause->err);
    dist_fail(g, cause->failed_rank, "%s", cause->err);
}

dist_group *dist_split(dist_group *g, int color, int key, char *err, size_t errlen)
{
    if (dist_broken(g)) {
        snprintf(err, errlen, "%s", g->err);
        return NULL;
    }
    if (!g->ops->split) {
        snprintf(err, errlen, "the %s backend cannot make sub-groups", g->ops->name);
        return NULL;
    }
    const int n = g->size;
    int mine[2] = {color, key};
    int *all = malloc(sizeof(int) * 2 * (size_t)n), *mem = malloc(sizeof(int) * (size_t)n);
    if (!all || !mem) {
        free(all), free(mem);
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    /* every rank's (color, key), on every rank */
    if (dist_gather(g, mine, sizeof mine, all, 0, DIST_TIMEOUT_DEFAULT) ||
        dist_bcast(g, all, sizeof(int) * 2 * (size_t)n, 0, DIST_TIMEOUT_DEFAULT)) {
        snprintf(err, errlen, "%s", g->err);
        free(all), free(mem);
        return NULL;
    }
    int m = 0, me = -1;
    for (int r = 0; r < n; r++) { /* members of my color, by (key, rank): insertion sort */
        if (all[2 * r] != color) continue;
        int i = m++;
        while (i > 0 && all[2 * mem[i - 1] + 1] > all[2 * r + 1]) mem[i] = mem[i - 1], i--;
        mem[i] = r;
    }
    for (int i = 0; i < m; i++)
        if (mem[i] == g->rank) me = i;
    free(all);
    dist_group *s = me >= 0 ? g->ops->split(g, color, key, m, me, err, errlen) : NULL;
    if (!s) {
        if (me < 0) snprintf(err, errlen, "dist_split: rank %d is not in its own color", g->rank);
        free(mem);
        return NULL;
    }
    for (int i = 0; i < m; i++) mem[i] = dist_rank_name(g, mem[i]);
    s->name = mem;
    return s;
}

void dist_free(dist_group *g)
{
    if (!g) return;
    int *name = g->name;
    g->ops->free(g);
    free(name);
}
