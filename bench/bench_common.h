/* bench_common — machine ceilings shared by bench_ceilings and bench_matmul.
 *
 * DESIGN: the ceilings the kernels are judged against, measured in the same
 * process that measures the kernels (the machine is shared and noisy):
 *   - memory read bandwidth: threads stream disjoint halves of a buffer
 *     (>= 1 GiB, touched first so it is resident) with 512/256-bit loads;
 *   - bf16 dot-product peak: vdpbf16ps on 24 independent zmm accumulators
 *     (64 FLOP per instruction: 16 lanes x 2 products x (mul + add));
 *   - f32 FMA peak: vfmadd231ps zmm on 24 accumulators (32 FLOP each).
 * ISA-specific loops use target attributes so this file builds with the
 * generic flags; they run only when cpu_get() reports the feature.
 * Every measurement is repeated; callers report best and median. */
#ifndef SGLC_BENCH_COMMON_H
#define SGLC_BENCH_COMMON_H

#include <immintrin.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/cpu.h"
#include "util/threadpool.h"
#include "util/timeutil.h"

/* CPU time of the calling thread: unlike wall time it does not count the
 * time other processes held this core, so on a shared machine it measures
 * what the kernel itself achieves (frequency and cache sharing still leak in). */
static inline double bench_thread_cpu(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static inline int bench_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}
static inline double bench_median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, bench_cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}
static inline double bench_max(const double *v, int n)
{
    double m = v[0];
    for (int i = 1; i < n; i++)
        if (v[i] > m) m = v[i];
    return m;
}

/* ---- memory read bandwidth --------------------------------------------- */

__attribute__((target("avx512f"))) static inline uint64_t bench_read_avx512(const char *p, size_t bytes)
{
    __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0;
    for (size_t i = 0; i + 256 <= bytes; i += 256) {
        a0 = _mm512_xor_si512(a0, _mm512_load_si512(p + i));
        a1 = _mm512_xor_si512(a1, _mm512_load_si512(p + i + 64));
        a2 = _mm512_xor_si512(a2, _mm512_load_si512(p + i + 128));
        a3 = _mm512_xor_si512(a3, _mm512_load_si512(p + i + 192));
    }
    a0 = _mm512_xor_si512(_mm512_xor_si512(a0, a1), _mm512_xor_si512(a2, a3));
    return (uint64_t)_mm_cvtsi128_si64(_mm512_castsi512_si128(a0));
}

__attribute__((target("avx2"))) static inline uint64_t bench_read_avx2(const char *p, size_t bytes)
{
    __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
    for (size_t i = 0; i + 128 <= bytes; i += 128) {
        a0 = _mm256_xor_si256(a0, _mm256_load_si256((const __m256i *)(p + i)));
        a1 = _mm256_xor_si256(a1, _mm256_load_si256((const __m256i *)(p + i + 32)));
        a2 = _mm256_xor_si256(a2, _mm256_load_si256((const __m256i *)(p + i + 64)));
        a3 = _mm256_xor_si256(a3, _mm256_load_si256((const __m256i *)(p + i + 96)));
    }
    a0 = _mm256_xor_si256(_mm256_xor_si256(a0, a1), _mm256_xor_si256(a2, a3));
    return (uint64_t)_mm_cvtsi128_si64(_mm256_castsi256_si128(a0));
}

typedef struct {
    const char *buf;
    size_t bytes;
    volatile uint64_t sink[64];
    double cpu[64]; /* per-thread CPU seconds of the last run */
} bench_read_ctx;

static inline void bench_read_task(void *vctx, int ith, int nth)
{
    bench_read_ctx *c = vctx;
    size_t chunk = c->bytes / (size_t)nth / 4096 * 4096;
    const char *p = c->buf + chunk * (size_t)ith;
    const cpu_features *f = cpu_get();
    double c0 = bench_thread_cpu();
    uint64_t s;
    if (f->avx512f) s = bench_read_avx512(p, chunk);
    else if (f->avx2) s = bench_read_avx2(p, chunk);
    else {
        s = 0;
        for (size_t i = 0; i < chunk; i += 8) s ^= *(const uint64_t *)(p + i);
    }
    c->sink[ith * 8 % 64] = s;
    c->cpu[ith] = bench_thread_cpu() - c0;
}

static inline double bench_max_cpu(const double *cpu, int n)
{
    double m = cpu[0];
    for (int i = 1; i < n; i++)
        if (cpu[i] > m) m = cpu[i];
    return m;
}

/* Read bandwidth in GB/s (1e9 B/s) of pool's threads over buf; rep values in
 * out (wall time) and, when out_cpu is non-NULL, per thread-CPU-second. */
static inline void bench_mem_read(tpool *pool, const char *buf, size_t bytes, int reps, double *out,
                           double *out_cpu)
{
    bench_read_ctx c = {.buf = buf, .bytes = bytes};
    tpool_run(pool, bench_read_task, &c); /* warm (TLB, page tables) */
    size_t chunk = bytes / (size_t)tpool_size(pool) / 4096 * 4096;
    for (int r = 0; r < reps; r++) {
        double t0 = time_now_sec();
        tpool_run(pool, bench_read_task, &c);
        out[r] = (double)(chunk * (size_t)tpool_size(pool)) / (time_now_sec() - t0) * 1e-9;
        if (out_cpu)
            out_cpu[r] = (double)(chunk * (size_t)tpool_size(pool)) /
                         bench_max_cpu(c.cpu, tpool_size(pool)) * 1e-9;
    }
}

/* "Quiet" read bandwidth: the buffer is read in 4 MiB pieces, each piece
 * split over the pool's threads and timed alone; returns the 90th
 * percentile of the per-piece rates (GB/s).  On a shared machine most
 * pieces that ran while another process held a core are slow, so the fast
 * tail estimates what the memory delivers to these threads when they have
 * the cores; kernels are reported against the same statistic. */
static inline double bench_mem_read_p90(tpool *pool, const char *buf, size_t bytes, int passes)
{
    size_t piece = (size_t)4 << 20;
    int n = (int)(bytes / piece);
    if (n < 1) return 0.0;
    double *r = malloc(sizeof(double) * (size_t)n * passes);
    if (!r) return 0.0;
    int q = 0;
    for (int ps = 0; ps < passes; ps++)
        for (int i = 0; i < n; i++) {
            bench_read_ctx c = {.buf = buf + piece * (size_t)i, .bytes = piece};
            double t0 = time_now_sec();
            tpool_run(pool, bench_read_task, &c);
            r[q++] = (double)piece / (time_now_sec() - t0) * 1e-9;
        }
    qsort(r, (size_t)q, sizeof *r, bench_cmp_double);
    double v = r[(int)(0.9 * (q - 1))];
    free(r);
    return v;
}

/* ---- compute peaks ----------------------------------------------------- */

#define BENCH_PEAK_ITERS 4000000L

__attribute__((target("avx512f,avx512bf16"))) static inline float bench_bf16_loop(long iters)
{
    __m512bh a = (__m512bh)_mm512_set1_epi32(0x3f803f80), b = a; /* (1.0, 1.0) pairs */
    __m512 acc[24];
    for (int i = 0; i < 24; i++) acc[i] = _mm512_set1_ps((float)i);
    for (long it = 0; it < iters; it++) {
#pragma GCC unroll 24
        for (int i = 0; i < 24; i++) acc[i] = _mm512_dpbf16_ps(acc[i], a, b);
        __asm__ volatile("" : "+v"(a)); /* keep the loop */
    }
    __m512 s = acc[0];
    for (int i = 1; i < 24; i++) s = _mm512_add_ps(s, acc[i]);
    return _mm512_reduce_add_ps(s);
}

__attribute__((target("avx512f,fma"))) static inline float bench_f32_loop(long iters)
{
    __m512 a = _mm512_set1_ps(1.0f), b = _mm512_set1_ps(1e-7f);
    __m512 acc[24];
    for (int i = 0; i < 24; i++) acc[i] = _mm512_set1_ps((float)i);
    for (long it = 0; it < iters; it++) {
#pragma GCC unroll 24
        for (int i = 0; i < 24; i++) acc[i] = _mm512_fmadd_ps(a, b, acc[i]);
        __asm__ volatile("" : "+v"(a));
    }
    __m512 s = acc[0];
    for (int i = 1; i < 24; i++) s = _mm512_add_ps(s, acc[i]);
    return _mm512_reduce_add_ps(s);
}

/* int8 VNNI: vpdpbusd on 12 independent accumulators, in asm (with
 * arrays of vector accumulators GCC spills them to the stack every
 * iteration, which measures the stores); zmm (128 int ops an
 * instruction) or ymm (64). */
#define BENCH_VNNI_STEP(W)                                                                        \
    __asm__ volatile("vpdpbusd %[b], %[a], %[x0]\n\tvpdpbusd %[b], %[a], %[x1]\n\t"                \
                     "vpdpbusd %[b], %[a], %[x2]\n\tvpdpbusd %[b], %[a], %[x3]\n\t"                \
                     "vpdpbusd %[b], %[a], %[x4]\n\tvpdpbusd %[b], %[a], %[x5]\n\t"                \
                     "vpdpbusd %[b], %[a], %[x6]\n\tvpdpbusd %[b], %[a], %[x7]\n\t"                \
                     "vpdpbusd %[b], %[a], %[x8]\n\tvpdpbusd %[b], %[a], %[x9]\n\t"                \
                     "vpdpbusd %[b], %[a], %[x10]\n\tvpdpbusd %[b], %[a], %[x11]\n\t"              \
                     : [x0] "+v"(x0), [x1] "+v"(x1), [x2] "+v"(x2), [x3] "+v"(x3), [x4] "+v"(x4),     \
                       [x5] "+v"(x5), [x6] "+v"(x6), [x7] "+v"(x7), [x8] "+v"(x8), [x9] "+v"(x9),      \
                       [x10] "+v"(x10), [x11] "+v"(x11)                                              \
                     : [a] "v"(a), [b] "v"(b))
__attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni"))) static inline float bench_vnni_loop(long iters,
                                                                                                   int zmm)
{
    int s = 0;
    if (zmm) {
        __m512i a = _mm512_set1_epi8(1), b = a, x0 = a, x1 = a, x2 = a, x3 = a, x4 = a, x5 = a, x6 = a,
                x7 = a, x8 = a, x9 = a, x10 = a, x11 = a;
        for (long it = 0; it < 2 * iters; it++) BENCH_VNNI_STEP(512);
        __m512i t = _mm512_add_epi32(_mm512_add_epi32(_mm512_add_epi32(x0, x1), _mm512_add_epi32(x2, x3)),
                                     _mm512_add_epi32(_mm512_add_epi32(x4, x5), _mm512_add_epi32(x6, x7)));
        t = _mm512_add_epi32(t, _mm512_add_epi32(_mm512_add_epi32(x8, x9), _mm512_add_epi32(x10, x11)));
        s = _mm512_reduce_add_epi32(t);
    } else {
        __m256i a = _mm256_set1_epi8(1), b = a, x0 = a, x1 = a, x2 = a, x3 = a, x4 = a, x5 = a, x6 = a,
                x7 = a, x8 = a, x9 = a, x10 = a, x11 = a;
        for (long it = 0; it < 2 * iters; it++) BENCH_VNNI_STEP(256);
        __m256i t = _mm256_add_epi32(_mm256_add_epi32(_mm256_add_epi32(x0, x1), _mm256_add_epi32(x2, x3)),
                                     _mm256_add_epi32(_mm256_add_epi32(x4, x5), _mm256_add_epi32(x6, x7)));
        t = _mm256_add_epi32(t, _mm256_add_epi32(_mm256_add_epi32(x8, x9), _mm256_add_epi32(x10, x11)));
        int32_t v[8];
        _mm256_storeu_si256((__m256i *)v, t);
        for (int j = 0; j < 8; j++) s += v[j];
    }
    return (float)s;
}

typedef struct {
    int bf16; /* 0 f32 FMA, 1 bf16 dot, 2 int8 VNNI zmm, 3 int8 VNNI ymm */
    long iters;
    volatile float sink[64];
    double cpu[64];
} bench_peak_ctx;

static inline void bench_peak_task(void *vctx, int ith, int nth)
{
    (void)nth;
    bench_peak_ctx *c = vctx;
    double c0 = bench_thread_cpu();
    c->sink[ith * 8 % 64] = c->bf16 == 1   ? bench_bf16_loop(c->iters)
                            : c->bf16 >= 2 ? bench_vnni_loop(c->iters, c->bf16 == 2)
                                           : bench_f32_loop(c->iters);
    c->cpu[ith] = bench_thread_cpu() - c0;
}

/* Peak GFLOP/s of the pool's threads together (wall time in out, per
 * thread-CPU time in out_cpu if non-NULL); needs avx512f (+bf16); kind 0
 * f32 FMA, 1 bf16 dot, 2 / 3 int8 vpdpbusd zmm / ymm (+vnni: GOP/s, a
 * multiply-add counted as 2 ops like a FLOP). */
static inline void bench_peak(tpool *pool, int bf16, int reps, double *out, double *out_cpu)
{
    bench_peak_ctx c = {.bf16 = bf16, .iters = BENCH_PEAK_ITERS / 10};
    tpool_run(pool, bench_peak_task, &c); /* warm the clocks */
    c.iters = BENCH_PEAK_ITERS;
    double flop_per_inst = bf16 == 1 ? 64.0 : bf16 == 2 ? 128.0 : bf16 == 3 ? 64.0 : 32.0;
    for (int r = 0; r < reps; r++) {
        double t0 = time_now_sec();
        tpool_run(pool, bench_peak_task, &c);
        double dt = time_now_sec() - t0;
        out[r] = flop_per_inst * 24.0 * (double)c.iters * tpool_size(pool) / dt * 1e-9;
        if (out_cpu)
            out_cpu[r] = flop_per_inst * 24.0 * (double)c.iters * tpool_size(pool) /
                         bench_max_cpu(c.cpu, tpool_size(pool)) * 1e-9;
    }
}

#endif
