/* bench_bf16_body — the two AVX-512 bf16 matmul bodies (widen + FMA, and
 * vdpbf16ps) A/B in one process, alternating, on the Llama-3.2-1B layer
 * shapes (q/o 2048x2048, k/v 512x2048, gate/up 8192x2048, down 2048x8192),
 * at m = 1 (decode), 16 (batch decode) and 512 (prefill).
 *
 * DESIGN: one packed copy of each weight serves both bodies (same panel
 * layout); kern_avx512_set_bf16_dot switches between calls.  For each m,
 * `--rounds` rounds; a round times every shape through fma then dot (the
 * order alternating per round) and records the summed wall time of the
 * four shapes and the slowest thread's CPU time.  Prints per m and body the
 * median over rounds of GFLOP/s (wall and CPU-normalized) and the ratio
 * dot / fma of the medians.  At m = 1 the weights (~48 MiB) exceed the
 * caches, so it is a memory-bound rate like decode.
 *
 * Usage: build/bench/bench_bf16_body [--threads 2] [--rounds 7] [--m LIST]
 * Output: JSON lines. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_common.h"
#include "kernels/kernels.h"
#include "kernels/kernels_impl.h"
#include "util/dtype.h"
#include "util/threadpool.h"
#include "util/timeutil.h"

typedef struct {
    float *y;
    const float *x;
    int m;
    const kern_mat *w;
    void **scratch;
    double cpu[64];
} mm_ctx;

static void mm_task(void *vctx, int ith, int nth)
{
    mm_ctx *c = vctx;
    double c0 = bench_thread_cpu();
    kern_matmul(c->y, c->x, c->m, c->w, NULL, ith, nth, c->scratch[ith]);
    c->cpu[ith] = bench_thread_cpu() - c0;
}

static uint64_t g_rng = 88172645463325252ull;
static float frand(void)
{
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return (float)((g_rng >> 40) & 0xFFFFFF) / (float)(1 << 23) - 1.0f;
}

int main(int argc, char **argv)
{
    int nthreads = 2, rounds = 7;
    int ms[8] = {1, 16, 512}, nm = 3;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--threads") && i + 1 < argc) nthreads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--rounds") && i + 1 < argc) rounds = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--m") && i + 1 < argc) {
            nm = 0;
            for (char *t = strtok(argv[++i], ","); t && nm < 8; t = strtok(NULL, ",")) ms[nm++] = atoi(t);
        } else {
            fprintf(stderr, "usage: %s [--threads N] [--rounds R] [--m 1,16,512]\n", argv[0]);
            return 2;
        }
    }
    if (nthreads < 1 || nthreads > 64 || rounds < 1 || rounds > 64 || nm < 1) return 2;
    for (int i = 0; i < nm; i++)
        if (ms[i] < 1 || ms[i] > 4096) return 2;
    if (kernels_init("avx512") != 0) {
        fprintf(stderr, "needs AVX-512 BF16\n");
        return 77;
    }
    char line[512];
    printf("{\"bench\":\"setup\",\"threads\":%d,\"rounds\":%d,\"choice\":\"%s\"}\n", nthreads, rounds,
           kernels_choice_line(line, sizeof line));
    const int start_body = kernels_choice()->bf16_dot;
    static const int shp[4][2] = {{2048, 2048}, {512, 2048}, {8192, 2048}, {2048, 8192}};
    kern_mat w[4];
    int mmax = 1, kmax = 8192;
    for (int i = 0; i < nm; i++)
        if (ms[i] > mmax) mmax = ms[i];
    for (int s = 0; s < 4; s++) {
        size_t cnt = (size_t)shp[s][0] * shp[s][1];
        uint16_t *src = malloc(2 * cnt);
        if (!src) return 1;
        for (size_t i = 0; i < cnt; i++) src[i] = f32_to_bf16(frand() * 0.05f);
        if (kern_mat_init(&w[s], src, DTYPE_BF16, shp[s][0], shp[s][1], DTYPE_BF16, 0)) return 1;
        free(src);
    }
    tpool *pool = tpool_create(nthreads);
    float *x = malloc(sizeof(float) * (size_t)mmax * kmax), *y = malloc(sizeof(float) * (size_t)mmax * 8192);
    void *scr[64];
    size_t ss = kern_matmul_scratch(mmax, kmax);
    for (int t = 0; t < nthreads; t++) scr[t] = aligned_alloc(64, (ss + 63) / 64 * 64);
    if (!pool || !x || !y) return 1;
    for (size_t i = 0; i < (size_t)mmax * kmax; i++) x[i] = frand();
    for (int mi = 0; mi < nm; mi++) {
        const int m = ms[mi];
        double flop = 0.0;
        for (int s = 0; s < 4; s++) flop += 2.0 * m * shp[s][0] * shp[s][1];
        double wall[2][64], cpu[2][64];
        for (int r = -1; r < rounds; r++) /* round -1: warm-up */
            for (int j = 0; j < 2; j++) {
                const int body = (r & 1) ? 1 - j : j;
                kern_avx512_set_bf16_dot(body ? 2 : 0);
                double tw = 0.0, tc = 0.0;
                for (int s = 0; s < 4; s++) {
                    mm_ctx c = {y, x, m, &w[s], scr, {0}};
                    double t0 = time_now_sec();
                    tpool_run(pool, mm_task, &c);
                    tw += time_now_sec() - t0;
                    tc += bench_max_cpu(c.cpu, nthreads);
                }
                if (r >= 0) {
                    wall[body][r] = flop / tw * 1e-9;
                    cpu[body][r] = flop / tc * 1e-9;
                }
            }
        double mw[2], mc[2];
        for (int b = 0; b < 2; b++) {
            mw[b] = bench_median(wall[b], rounds);
            mc[b] = bench_median(cpu[b], rounds);
            printf("{\"bench\":\"bf16_body\",\"m\":%d,\"body\":\"%s\",\"gflops_wall_median\":%.1f,\"gflops_wall_best\":%.1f,"
                   "\"gflops_cpu_median\":%.1f}\n",
                   m, b ? "dot" : "fma", mw[b], bench_max(wall[b], rounds), mc[b]);
        }
        printf("{\"bench\":\"bf16_body_ratio\",\"m\":%d,\"dot_over_fma_wall\":%.3f,\"dot_over_fma_cpu\":%.3f}\n", m,
               mw[1] / mw[0], mc[1] / mc[0]);
        fflush(stdout);
    }
    kern_avx512_set_bf16_dot(start_body);
    for (int s = 0; s < 4; s++) kern_mat_free(&w[s]);
    for (int t = 0; t < nthreads; t++) free(scr[t]);
    free(x);
    free(y);
    tpool_destroy(pool);
    return 0;
}
