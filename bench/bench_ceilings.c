/* bench_ceilings — the machine ceilings the kernels are judged against.
 *
 * DESIGN: prints one JSON object per line:
 *   {"bench":"mem_read","threads":T,"bytes":B,"best_gbs":..,"median_gbs":..,"reps":R}
 *   {"bench":"bf16_dot_peak","threads":T,"best_gflops":..,"median_gflops":..}
 *   {"bench":"f32_fma_peak", ...}
 *   {"bench":"int8_vnni_peak","width":512|256, ...} (GOP/s, vpdpbusd)
 * for T = 1 and 2 (or --threads N as the upper value).  The buffer is
 * SGLC_BENCH_MEM_MB MiB (default 1024), touched before timing.
 *
 * Usage: build/bench/bench_ceilings [--threads N] [--reps R] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "bench_common.h"
#include "util/cpu.h"
#include "util/threadpool.h"

int main(int argc, char **argv)
{
    int max_threads = 2, reps = 7;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--threads")) max_threads = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--reps")) reps = atoi(argv[i + 1]);
        else {
            fprintf(stderr, "usage: %s [--threads N] [--reps R]\n", argv[0]);
            return 2;
        }
    }
    if (max_threads < 1 || reps < 1 || reps > 64) {
        fprintf(stderr, "bad --threads/--reps\n");
        return 2;
    }
    const char *mb_env = getenv("SGLC_BENCH_MEM_MB");
    size_t mb = mb_env ? (size_t)atol(mb_env) : 1024;
    if (mb < 16) mb = 16;
    size_t bytes = mb << 20;
    char *buf = aligned_alloc((size_t)2 << 20, bytes);
    if (buf) (void)madvise(buf, bytes, MADV_HUGEPAGE); /* like packed weights */
    if (!buf) {
        fprintf(stderr, "cannot allocate %zu MiB\n", mb);
        return 1;
    }
    memset(buf, 0x5a, bytes);
    const cpu_features *f = cpu_get();
    printf("{\"bench\":\"machine\",\"cpu\":\"%s\",\"cores\":%d,\"avx2\":%d,\"avx512f\":%d,"
           "\"avx512bf16\":%d}\n",
           f->brand, f->n_cores, f->avx2, f->avx512f, f->avx512bf16);
    double v[64], vc[64];
    int ts[2] = {1, max_threads};
    for (int ti = 0; ti < (max_threads > 1 ? 2 : 1); ti++) {
        int t = ts[ti];
        tpool *pool = tpool_create(t);
        if (!pool) return 1;
        bench_mem_read(pool, buf, bytes, reps, v, vc);
        double best = bench_max(v, reps), med = bench_median(v, reps);
        printf("{\"bench\":\"mem_read\",\"threads\":%d,\"bytes\":%zu,\"best_gbs\":%.2f,"
               "\"median_gbs\":%.2f,\"cpu_best_gbs\":%.2f,\"cpu_median_gbs\":%.2f,\"reps\":%d}\n",
               t, bytes, best, med, bench_max(vc, reps), bench_median(vc, reps), reps);
        printf("{\"bench\":\"mem_read_pieces\",\"threads\":%d,\"piece_mib\":4,\"p90_gbs\":%.2f}\n", t,
               bench_mem_read_p90(pool, buf, bytes, 3));
        fflush(stdout);
        if (f->avx512f && f->avx512bf16) {
            bench_peak(pool, 1, reps, v, vc);
            best = bench_max(v, reps), med = bench_median(v, reps);
            printf("{\"bench\":\"bf16_dot_peak\",\"threads\":%d,\"best_gflops\":%.1f,"
                   "\"median_gflops\":%.1f,\"cpu_best_gflops\":%.1f,\"cpu_median_gflops\":%.1f,"
                   "\"reps\":%d}\n",
                   t, best, med, bench_max(vc, reps), bench_median(vc, reps), reps);
        }
        for (int kind = 2; kind <= 3 && f->avx512f && f->avx512vnni; kind++) {
            bench_peak(pool, kind, reps, v, vc);
            printf("{\"bench\":\"int8_vnni_peak\",\"width\":%d,\"threads\":%d,\"best_gops\":%.1f,"
                   "\"median_gops\":%.1f,\"cpu_best_gops\":%.1f,\"cpu_median_gops\":%.1f,\"reps\":%d}\n",
                   kind == 2 ? 512 : 256, t, bench_max(v, reps), bench_median(v, reps), bench_max(vc, reps),
                   bench_median(vc, reps), reps);
        }
        if (f->avx512f) {
            bench_peak(pool, 0, reps, v, vc);
            best = bench_max(v, reps), med = bench_median(v, reps);
            printf("{\"bench\":\"f32_fma_peak\",\"threads\":%d,\"best_gflops\":%.1f,"
                   "\"median_gflops\":%.1f,\"cpu_best_gflops\":%.1f,\"cpu_median_gflops\":%.1f,"
                   "\"reps\":%d}\n",
                   t, best, med, bench_max(vc, reps), bench_median(vc, reps), reps);
        }
        fflush(stdout);
        tpool_destroy(pool);
    }
    free(buf);
    return 0;
}
