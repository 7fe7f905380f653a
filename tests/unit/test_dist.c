/* test_dist — the shared-memory process group (src/dist): collectives
 * across forked ranks (results checked on every rank), pieces larger than
 * a slot, bf16, and failures: a dead rank and a hung rank are named within
 * the timeout. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "dist/dist.h"
#include "util/dtype.h"

static void shm_name(char *buf, size_t n, const char *tag)
{
    snprintf(buf, n, "/sglc-test-%s-%d-%ld", tag, (int)getpid(), (long)time(NULL));
}

/* Run fn(rank) in `size` forked processes; returns how many failed. */
typedef int (*rank_fn)(const char *name, int size, int rank);
static int run_ranks(const char *name, int size, rank_fn fn)
{
    pid_t pids[8];
    for (int r = 0; r < size; r++) {
        pids[r] = fork();
        if (pids[r] == 0) _exit(fn(name, size, r));
    }
    int bad = 0;
    for (int r = 0; r < size; r++) {
        int st;
        waitpid(pids[r], &st, 0);
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
            fprintf(stderr, "rank %d: status %d\n", r, WIFEXITED(st) ? WEXITSTATUS(st) : -1);
            bad++;
        }
    }
    return bad;
}

/* Collectives with values whose sums are exact in f32. */
static int collectives(const char *name, int size, int rank)
{
    char err[512];
    /* 64 KiB slots: the 100k-float all-reduce goes in pieces and stripes */
    dist_group *g = dist_shm_create(name, size, rank, 64 << 10, 10000, err, sizeof err);
    if (!g) {
        fprintf(stderr, "rank %d: %s\n", rank, err);
        return 10;
    }
    if (dist_rank(g) != rank || dist_size(g) != size) return 11;
    size_t sizes[] = {1, 7, 4096, 16384, 100000};
    for (int rep = 0; rep < 3; rep++)
        for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
            size_t n = sizes[si];
            float *a = malloc(n * sizeof(float));
            for (size_t i = 0; i < n; i++) a[i] = (float)((i % 97) * (rank + 1) + rep);
            if (dist_allreduce(g, a, n, DIST_F32, DIST_TIMEOUT_DEFAULT)) return 12;
            float tot = (float)(size * (size + 1) / 2);
            for (size_t i = 0; i < n; i++)
                if (a[i] != (float)(i % 97) * tot + (float)(rep * size)) {
                    fprintf(stderr, "rank %d n %zu i %zu: %g\n", rank, n, i, a[i]);
                    return 13;
                }
            free(a);
        }
    uint16_t h[5000];
    for (int i = 0; i < 5000; i++) h[i] = f32_to_bf16((float)(i % 13 + rank));
    if (dist_allreduce(g, h, 5000, DIST_BF16, DIST_TIMEOUT_DEFAULT)) return 14;
    for (int i = 0; i < 5000; i++)
        if (bf16_to_f32(h[i]) != (float)((i % 13) * size + size * (size - 1) / 2)) return 15;
    /* broadcast from every root, larger than a slot too */
    for (int root = 0; root < size; root++) {
        size_t n = 200000;
        unsigned char *b = malloc(n);
        for (size_t i = 0; i < n; i++) b[i] = rank == root ? (unsigned char)(i * 7 + root) : 0;
        if (dist_bcast(g, b, n, root, DIST_TIMEOUT_DEFAULT)) return 16;
        for (size_t i = 0; i < n; i++)
            if (b[i] != (unsigned char)(i * 7 + root)) return 17;
        free(b);
    }
    int mine[3] = {rank, rank * 10, rank * 100}, all[8 * 3] = {0};
    if (dist_gather(g, mine, sizeof mine, all, 0, DIST_TIMEOUT_DEFAULT)) return 18;
    if (rank == 0)
        for (int r = 0; r < size; r++)
            if (all[r * 3] != r || all[r * 3 + 1] != r * 10 || all[r * 3 + 2] != r * 100) return 19;
    if (dist_barrier(g, DIST_TIMEOUT_DEFAULT)) return 20;
    dist_free(g);
    return 0;
}

static void test_collectives_2(void **st)
{
    (void)st;
    char name[96];
    shm_name(name, sizeof name, "c2");
    assert_int_equal(run_ranks(name, 2, collectives), 0);
}

static void test_collectives_4(void **st)
{
    (void)st;
    char name[96];
    shm_name(name, sizeof name, "c4");
    assert_int_equal(run_ranks(name, 4, collectives), 0);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* rank 1 dies (mode 0) or hangs (mode 1) before the second all-reduce;
 * rank 0 must fail naming rank 1, quickly (death) or at the timeout. */
static int fail_mode;
static int failing(const char *name, int size, int rank)
{
    char err[512];
    dist_group *g = dist_shm_create(name, size, rank, 0, 400, err, sizeof err);
    if (!g) return 10;
    float x[64] = {1};
    if (dist_allreduce(g, x, 64, DIST_F32, DIST_TIMEOUT_DEFAULT)) return 11;
    if (rank == 1) {
        if (fail_mode == 0) _exit(0); /* looks like a clean exit, but mid-collective */
        sleep(1);
        _exit(0);
    }
    double t0 = now_s();
    int rc = dist_allreduce(g, x, 64, DIST_F32, DIST_TIMEOUT_DEFAULT);
    double dt = now_s() - t0;
    fprintf(stderr, "rank 0 saw (%.2f s): %s\n", dt, dist_error(g));
    if (rc != -1 || dist_failed_rank(g) != 1 || !strstr(dist_error(g), "rank 1")) return 12;
    if (fail_mode == 0 && (dt > 0.3 || !strstr(dist_error(g), "exited"))) return 13;
    if (fail_mode == 1 && (dt < 0.35 || dt > 1.5 || !strstr(dist_error(g), "did not reach"))) return 14;
    /* broken: later calls fail at once */
    if (dist_barrier(g, DIST_TIMEOUT_DEFAULT) != -1) return 15;
    dist_free(g);
    return 0;
}

static void test_dead_rank(void **st)
{
    (void)st;
    char name[96];
    shm_name(name, sizeof name, "dead");
    fail_mode = 0;
    assert_int_equal(run_ranks(name, 2, failing), 0);
}

static void test_hung_rank(void **st)
{
    (void)st;
    char name[96];
    shm_name(name, sizeof name, "hang");
    fail_mode = 1;
    assert_int_equal(run_ranks(name, 2, failing), 0);
}

static void test_join_timeout(void **st)
{
    (void)st;
    char name[96], err[512];
    shm_name(name, sizeof name, "join");
    double t0 = now_s();
    dist_group *g = dist_shm_create(name, 2, 0, 0, 300, err, sizeof err);
    assert_null(g);
    assert_true(now_s() - t0 < 2.0);
    assert_non_null(strstr(err, "rank 1 did not join"));
    /* the name was unlinked: a new group of that name can be made */
    g = dist_shm_create(name, 1, 0, 0, 300, err, sizeof err);
    assert_non_null(g);
    float x = 3;
    assert_int_equal(dist_allreduce(g, &x, 1, DIST_F32, DIST_TIMEOUT_DEFAULT), 0);
    assert_true(x == 3);
    dist_free(g);
}

/* dist_split: 4 ranks, stages {0,1} and {2,3} (color rank / 2, key rank %
 * 2), as TP x PP makes them.  Each stage's all-reduce sums its own ranks
 * only; the parent group still works between them; a dead rank of the
 * second stage is named by its parent rank (3), and dist_break_from
 * carries that error to the parent group. */
static int splitting(const char *name, int size, int rank)
{
    char err[512];
    dist_group *g = dist_shm_create(name, size, rank, 64 << 10, 2000, err, sizeof err);
    if (!g) return 10;
    dist_group *s = dist_split(g, rank / 2, rank % 2, err, sizeof err);
    if (!s) {
        fprintf(stderr, "rank %d: split: %s\n", rank, err);
        return 11;
    }
    if (dist_size(s) != 2 || dist_rank(s) != rank % 2 || dist_rank_name(s, 1) != (rank / 2) * 2 + 1) return 12;
    for (int rep = 0; rep < 50; rep++) { /* stages at their own pace, the parent in between */
        float x[300];
        for (int i = 0; i < 300; i++) x[i] = (float)(rank + 1 + i);
        if (dist_allreduce(s, x, 300, DIST_F32, DIST_TIMEOUT_DEFAULT)) return 13;
        float want = rank < 2 ? 3.0f : 7.0f; /* 1 + 2, 3 + 4 */
        for (int i = 0; i < 300; i++)
            if (x[i] != want + 2.0f * (float)i) return 14;
        int v = rank == 2 ? 1000 + rep : -1;
        if (dist_bcast(g, &v, sizeof v, 2, DIST_TIMEOUT_DEFAULT) || v != 1000 + rep) return 15;
    }
    if (rank == 3) _exit(0); /* dies mid-run */
    float x[8] = {0};
    if (rank == 2) {
        int rc = dist_allreduce(s, x, 8, DIST_F32, DIST_TIMEOUT_DEFAULT);
        fprintf(stderr, "rank 2 saw: %s\n", dist_error(s));
        if (rc != -1 || dist_failed_rank(s) != 3 || !strstr(dist_error(s), "rank 3 (pid")) return 16;
        dist_break_from(g, s);
        if (!dist_broken(g) || dist_failed_rank(g) != 3 || strcmp(dist_error(g), dist_error(s))) return 17;
        usleep(300000); /* exits after the others saw rank 3's failure */
        return 0;
    }
    /* ranks 0 and 1 wait on the parent group: rank 2's published error, or rank 3's death */
    int v = 0;
    int rc = dist_bcast(g, &v, sizeof v, 2, DIST_TIMEOUT_DEFAULT);
    fprintf(stderr, "rank %d saw: %s\n", rank, dist_error(g));
    if (rc != -1 || !strstr(dist_error(g), "rank 3")) return 18;
    usleep(300000);
    return 0;
}

static void test_split(void **st)
{
    (void)st;
    char name[96];
    shm_name(name, sizeof name, "sp");
    assert_int_equal(run_ranks(name, 4, splitting), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_collectives_2), cmocka_unit_test(test_collectives_4),
        cmocka_unit_test(test_dead_rank),     cmocka_unit_test(test_hung_rank),
        cmocka_unit_test(test_join_timeout),  cmocka_unit_test(test_split),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
