/* bench_quant — the int8 kernels of block-quantized weights
 * (kernels/quant_dot*.c) on the Llama-3.2-1B shapes.
 *
 * DESIGN: validate, then time, then compare with the read bandwidth
 * measured in the same process (bench_common.h).  Per weight type:
 *  - validation: m = 1 and m = 5 products of the 2048x2048 weight against
 *    kern_ref_matmul (the scalar int8 path), relative to max |y|; the bench
 *    stops on a mismatch;
 *  - GEMV (m = 1) of qo 2048x2048, kv 512x2048, gate/up 8192x2048, down
 *    2048x8192, lm_head 128256x2048: each weight replicated into >= 256 MiB
 *    (SGLC_BENCH_MEM_MB) of distinct copies walked in turn, so every call
 *    reads from memory; GB/s = weight bytes / time per call;
 *  - l2_resident: 128x2048, one copy (it stays in L2): the kernel's compute
 *    rate, what the GEMV would reach if memory were not the limit;
 *  - decode step estimate: 16 x (2 qo + 2 kv + 2 gate/up + down) + lm_head
 *    from the per-shape medians: all weight bytes of a step / step time;
 *  - GEMM (m = 512, 2048x2048): GFLOP/s = 2 m n k / time.
 * Threads 1 and --threads (2).  Weights are random blocks with sane f16
 * scales (the kernels' speed does not depend on the values).  Output:
 * JSON lines; "frac" is the median GB/s over the median read bandwidth of
 * the same thread count.
 *
 * Types: the GGUF block types, f8_e4m3_b128 (fp8 weights kept as bytes,
 * weight-only f32 kernels, kernels/quant_fp8.h) and, for comparison, the
 * bf16 / f32 weights a dequantized fp8 checkpoint was stored as (the ISA's
 * packed panels; not validated here: bench_matmul validates them).
 *
 * --owned 1 makes every weight an owned copy, so Q4_0 / Q4_K / Q8_0 run
 * in their repacked 8-row layouts ("layout":"x8"); the default borrows the
 * blocks in place ("plain"), as a GGUF mmap would be.
 *
 * Usage: build/bench/bench_quant [--threads N] [--reps R] [--types q4_0,q4_K,...]
 *        [--only gemv|gemm] [--owned 0|1] [--shape qo_proj|...|l2_resident] [--gemm-shapes all]
 *        (--shape: GEMV of that shape only; SGLC_KERNELS=scalar|avx2 forces an ISA) */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>

#include "bench_common.h"
#include "kernels/kern_types.h"
#include "kernels/kernels.h"
#include "kernels/quant_blocks.h"
#include "util/dtype.h"
#include "util/threadpool.h"
#include "util/timeutil.h"

typedef struct {
    const char *name;
    int n, k, per_layer; /* per_layer: matrices of this shape in one layer (0: lm_head) */
} shape;

static const shape k_shapes[] = {
    {"qo_proj", 2048, 2048, 2}, {"kv_proj", 512, 2048, 2}, {"gate_up_proj", 8192, 2048, 2},
    {"down_proj", 2048, 8192, 1}, {"lm_head", 128256, 2048, 0},
    /* 128 x 2048: one copy that stays in L2, so the kernel's compute rate (not in the step) */
    {"l2_resident", 128, 2048, -1},
};
#define N_SHAPES (int)(sizeof k_shapes / sizeof *k_shapes)
#define N_LAYERS 16

static const kern_type k_types[] = {KERN_TYPE_Q8_0, KERN_TYPE_Q4_0, KERN_TYPE_Q4_K, KERN_TYPE_Q6_K,
                                    KERN_TYPE_Q5_K, KERN_TYPE_Q4_1, KERN_TYPE_Q5_0, KERN_TYPE_Q5_1,
                                    KERN_TYPE_Q2_K, KERN_TYPE_Q3_K, KERN_TYPE_IQ4_NL, KERN_TYPE_IQ4_XS,
                                    KERN_TYPE_F8_B128, /* fp8 weight-only f32 (quant_fp8.h) */
                                    /* the float weights the fp8 one replaces (a dequantized checkpoint),
                                     * in the ISA's packed panels; validated by bench_matmul, not here */
                                    KERN_TYPE_BF16, KERN_TYPE_F32};
#define N_TYPES (int)(sizeof k_types / sizeof *k_types)

typedef struct {
    float *y;
    const float *x;
    int m;
    const kern_mat *w;
    void **scratch;
    double cpu[64]; /* per-thread CPU seconds of the last call */
} mm_ctx;

static void mm_task(void *vctx, int ith, int nth)
{
    mm_ctx *c = vctx;
    double c0 = bench_thread_cpu();
    kern_matmul(c->y, c->x, c->m, c->w, NULL, ith, nth, c->scratch[ith]);
    c->cpu[ith] = bench_thread_cpu() - c0;
}

static uint64_t g_rng = 0x2545F4914F6CDD1Dull;
static uint64_t rnd64(void)
{
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return g_rng;
}

/* offsets of a block's f16 scale and (or -1) its f16 min / dmin */
static void scale_offsets(kern_type t, int *od, int *om)
{
    *om = -1;
    switch (t) {
    case KERN_TYPE_Q4_1: *od = offsetof(block_q4_1, d), *om = offsetof(block_q4_1, m); break;
    case KERN_TYPE_Q5_1: *od = offsetof(block_q5_1, d), *om = offsetof(block_q5_1, m); break;
    case KERN_TYPE_Q2_K: *od = offsetof(block_q2_K, d), *om = offsetof(block_q2_K, dmin); break;
    case KERN_TYPE_Q3_K: *od = offsetof(block_q3_K, d); break;
    case KERN_TYPE_Q4_K: *od = offsetof(block_q4_K, d), *om = offsetof(block_q4_K, dmin); break;
    case KERN_TYPE_Q5_K: *od = offsetof(block_q5_K, d), *om = offsetof(block_q5_K, dmin); break;
    case KERN_TYPE_Q6_K: *od = offsetof(block_q6_K, d); break;
    default: *od = 0; break; /* Q4_0, Q5_0, Q8_0, IQ4_NL, IQ4_XS: d first */
    }
}

/* one random (n, k) weight of t at dst */
static void fill_weight(kern_type t, unsigned char *dst, size_t bytes)
{
    size_t i = 0;
    for (; i + 8 <= bytes; i += 8) {
        uint64_t v = rnd64();
        memcpy(dst + i, &v, 8);
    }
    for (; i < bytes; i++) dst[i] = (unsigned char)rnd64();
    const kern_type_traits *tr = kern_type_get(t);
    if (t == KERN_TYPE_BF16 || t == KERN_TYPE_F32) { /* values in [-0.01, 0.01] */
        for (size_t e = 0; e < bytes / tr->block_bytes; e++) {
            float v = (float)((int64_t)(rnd64() >> 40) - (1 << 23)) / (float)(1 << 30);
            if (t == KERN_TYPE_F32) memcpy(dst + 4 * e, &v, 4);
            else {
                uint16_t b = f32_to_bf16(v);
                memcpy(dst + 2 * e, &b, 2);
            }
        }
        return;
    }
    if (t == KERN_TYPE_F8_B128) { /* f32 scale first, no NaN codes */
        const float d = 0.01f;
        for (size_t b = 0; b < bytes / tr->block_bytes; b++) {
            unsigned char *p = dst + b * tr->block_bytes;
            memcpy(p, &d, 4);
            for (size_t j = 4; j < tr->block_bytes; j++)
                if ((p[j] & 0x7F) == 0x7F) p[j] ^= 1;
        }
        return;
    }
    int od, om;
    scale_offsets(t, &od, &om);
    uint16_t d = f32_to_f16(0.01f), mn = f32_to_f16(0.02f);
    for (size_t b = 0; b < bytes / tr->block_bytes; b++) {
        memcpy(dst + b * tr->block_bytes + od, &d, 2);
        if (om >= 0) memcpy(dst + b * tr->block_bytes + om, &mn, 2);
    }
}

static double time_call(tpool *pool, mm_ctx *c)
{
    double t0 = time_now_sec();
    tpool_run(pool, mm_task, c);
    return time_now_sec() - t0;
}

/* kern_matmul on the current ISA vs kern_ref_matmul (scalar int8 path) */
static int g_gemm_all = 0; /* --gemm-shapes all: the m = 512 GEMM of every layer shape, not only qo_proj */
static int g_borrow = 1; /* 0 with --owned: owned copies (the repacked 8-row layouts) */

static const char *layout_name(const kern_mat *w) { return !w->qtype ? "panels" : w->layout ? "x8" : "plain"; }

static int validate(kern_type t, const void *wq, int n, int k, void **scr)
{
    const int m = 5;
    kern_mat w;
    if (kern_mat_init_kt(&w, wq, t, n, k, t, g_borrow)) return -1;
    float *x = malloc(sizeof(float) * m * k), *y = malloc(sizeof(float) * m * n),
          *yr = malloc(sizeof(float) * m * n);
    for (int i = 0; i < m * k; i++) x[i] = (float)((int64_t)(rnd64() >> 40) - (1 << 23)) / (float)(1 << 23);
    int bad = 0;
    for (int mm = 1; mm <= m; mm += m - 1) {
        kern_matmul(y, x, mm, &w, NULL, 0, 1, scr[0]);
        kern_ref_matmul(yr, x, mm, &w, NULL, 0, 1, scr[0]);
        double mx = 0;
        for (int i = 0; i < mm * n; i++) mx = fmax(mx, fabs(yr[i]));
        for (int i = 0; i < mm * n && !bad; i++)
            if (fabs(y[i] - yr[i]) > 1e-4 * (mx + 1e-6)) {
                fprintf(stderr, "validation failed: %s m=%d [%d] %.9g vs %.9g\n", kern_type_get(t)->name,
                        mm, i, (double)y[i], (double)yr[i]);
                bad = 1;
            }
    }
    free(x), free(y), free(yr);
    kern_mat_free(&w);
    return bad ? -1 : 0;
}

int main(int argc, char **argv)
{
    int max_threads = 2, reps = 7, do_gemv = 1, do_gemm = 1;
    const char *types = NULL, *only_shape = NULL;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--threads")) max_threads = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--reps")) reps = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--types")) types = argv[i + 1];
        else if (!strcmp(argv[i], "--owned")) g_borrow = !atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--gemm-shapes")) g_gemm_all = !strcmp(argv[i + 1], "all");
        else if (!strcmp(argv[i], "--shape")) only_shape = argv[i + 1];
        else if (!strcmp(argv[i], "--only")) do_gemv = !strcmp(argv[i + 1], "gemv"), do_gemm = !do_gemv;
        else {
            fprintf(stderr, "usage: %s [--threads N] [--reps R] [--types a,b] [--only gemv|gemm] [--owned 0|1] [--shape NAME] [--gemm-shapes all]\n", argv[0]);
            return 2;
        }
    }
    if (max_threads < 1 || max_threads > 64 || reps < 1 || reps > 64) {
        fprintf(stderr, "bad --threads/--reps\n");
        return 2;
    }
    if (kernels_init(NULL)) return 1;
    const char *mb_env = getenv("SGLC_BENCH_MEM_MB");
    size_t ws = (mb_env ? (size_t)atol(mb_env) : 256) << 20;
    if (ws < ((size_t)16 << 20)) ws = (size_t)16 << 20;
    int tcount = max_threads > 1 ? 2 : 1, tlist[2] = {1, max_threads};
    tpool *pools[2] = {NULL, NULL};
    double bw[2], bwc[2];
    {
        char *buf = kern_weight_alloc(ws);
        if (!buf) return 1;
        memset(buf, 0x5a, ws);
        for (int ti = 0; ti < tcount; ti++) {
            pools[ti] = tpool_create(tlist[ti]);
            if (!pools[ti]) return 1;
            double v[64], vc[64];
            bench_mem_read(pools[ti], buf, ws, reps, v, vc);
            bw[ti] = bench_median(v, reps);
            bwc[ti] = bench_median(vc, reps);
            printf("{\"bench\":\"mem_read\",\"threads\":%d,\"bytes\":%zu,\"median_gbs\":%.2f,\"best_gbs\":%.2f,"
                   "\"cpu_median_gbs\":%.2f}\n",
                   tlist[ti], ws, bw[ti], bench_max(v, reps), bwc[ti]);
        }
        free(buf);
    }
    printf("{\"bench\":\"machine\",\"kernels\":\"%s\",\"cpu\":\"%s\"}\n", kernels_desc(), cpu_get()->brand);
    fflush(stdout);
    size_t ss = kern_matmul_scratch(512, 8192);
    void *scr[64];
    for (int i = 0; i < max_threads; i++)
        if (!(scr[i] = kern_weight_alloc(ss))) return 1;
    float *x = malloc(sizeof(float) * 512 * 8192), *y = malloc(sizeof(float) * 512 * 128256);
    if (!x || !y) return 1;
    for (int i = 0; i < 512 * 8192; i++) x[i] = (float)((int64_t)(rnd64() >> 40) - (1 << 23)) / (float)(1 << 23);

    for (int tyi = 0; tyi < N_TYPES; tyi++) {
        kern_type t = k_types[tyi];
        const char *tn = kern_type_get(t)->name;
        if (types) { /* comma-separated list, exact names */
            size_t ln = strlen(tn);
            const char *p = types;
            int found = 0;
            while (*p) {
                const char *e = strchr(p, ',');
                size_t l = e ? (size_t)(e - p) : strlen(p);
                if (l == ln && !strncasecmp(p, tn, l)) found = 1;
                p += l + (e ? 1 : 0);
            }
            if (!found) continue;
        }
        double t_shape[2][N_SHAPES], tc_shape[2][N_SHAPES];
        size_t b_shape[N_SHAPES];
        for (int si = 0; si < N_SHAPES; si++) {
            const shape *s = &k_shapes[si];
            size_t wb = kern_type_mat_bytes(t, s->n, s->k);
            b_shape[si] = wb;
            int copies = s->per_layer < 0 ? 1 : (int)((ws + wb - 1) / wb);
            const int gemm_here = do_gemm && (si == 0 || (g_gemm_all && s->per_layer > 0));
            if (!do_gemv && !gemm_here && si > 0) break;
            const int gemv_here = do_gemv && (!only_shape || !strcmp(only_shape, s->name));
            if (!gemv_here && !gemm_here) continue;
            unsigned char *buf = kern_weight_alloc(wb * (size_t)copies);
            if (!buf) return 1;
            fill_weight(t, buf, wb);
            for (int c = 1; c < copies; c++) memcpy(buf + (size_t)c * wb, buf, wb);
            if (si == 0 && t >= KERN_TYPE_FLOAT_COUNT && validate(t, buf, s->n, s->k, scr)) return 1;
            if (gemm_here) {
                kern_mat w;
                if (kern_mat_init_kt(&w, buf, t, s->n, s->k, t, g_borrow)) return 1;
                for (int ti = 0; ti < tcount; ti++) {
                    mm_ctx c = {.y = y, .x = x, .m = 512, .w = &w, .scratch = scr};
                    double v[64], vc[64];
                    int gr = reps < 3 ? reps : 3;
                    double fl = 2.0 * 512 * s->n * s->k;
                    time_call(pools[ti], &c); /* warm */
                    for (int r = 0; r < gr; r++) {
                        v[r] = fl / time_call(pools[ti], &c) * 1e-9;
                        vc[r] = fl / bench_max_cpu(c.cpu, tlist[ti]) * 1e-9;
                    }
                    printf("{\"bench\":\"quant_gemm\",\"type\":\"%s\",\"layout\":\"%s\",\"m\":512,\"n\":%d,\"k\":%d,\"threads\":%d,"
                           "\"median_gflops\":%.1f,\"best_gflops\":%.1f,\"cpu_median_gflops\":%.1f}\n",
                           tn, layout_name(&w), s->n, s->k, tlist[ti], bench_median(v, gr), bench_max(v, gr), bench_median(vc, gr));
                    fflush(stdout);
                }
                kern_mat_free(&w);
            }
            if (gemv_here) {
                kern_mat *ws_m = malloc(sizeof(kern_mat) * (size_t)copies);
                for (int c = 0; c < copies; c++)
                    if (kern_mat_init_kt(&ws_m[c], buf + (size_t)c * wb, t, s->n, s->k, t, g_borrow)) return 1;
                for (int ti = 0; ti < tcount; ti++) {
                    /* one pass over the copies per rep, >= 8 calls (200 for the L2-resident one) */
                    int calls = s->per_layer < 0 ? 200 : copies < 8 ? 8 : copies;
                    double v[64], vc[64];
                    mm_ctx c = {.y = y, .x = x, .m = 1, .scratch = scr};
                    for (int r = 0; r <= reps; r++) { /* rep 0 warms */
                        double t0 = time_now_sec(), cpu = 0;
                        for (int q = 0; q < calls; q++) {
                            c.w = &ws_m[q % copies];
                            tpool_run(pools[ti], mm_task, &c);
                            cpu += bench_max_cpu(c.cpu, tlist[ti]);
                        }
                        if (r) v[r - 1] = (time_now_sec() - t0) / calls, vc[r - 1] = cpu / calls;
                    }
                    double med = bench_median(v, reps), medc = bench_median(vc, reps);
                    t_shape[ti][si] = med;
                    tc_shape[ti][si] = medc;
                    printf("{\"bench\":\"quant_gemv\",\"type\":\"%s\",\"layout\":\"%s\",\"shape\":\"%s\",\"n\":%d,\"k\":%d,"
                           "\"threads\":%d,\"bytes\":%zu,\"median_us\":%.1f,\"median_gbs\":%.2f,"
                           "\"frac\":%.3f,\"cpu_gbs\":%.2f,\"cpu_frac\":%.3f}\n",
                           tn, layout_name(&ws_m[0]), s->name, s->n, s->k, tlist[ti], wb, med * 1e6, wb / med * 1e-9,
                           wb / med * 1e-9 / bw[ti], wb / medc * 1e-9, wb / medc * 1e-9 / bwc[ti]);
                    fflush(stdout);
                }
                free(ws_m);
            }
            free(buf);
        }
        if (do_gemv && !only_shape)
            for (int ti = 0; ti < tcount; ti++) {
                double tt = 0, tc = 0, bb = 0;
                for (int si = 0; si < N_SHAPES; si++) {
                    if (k_shapes[si].per_layer < 0) continue;
                    int mult = k_shapes[si].per_layer ? N_LAYERS * k_shapes[si].per_layer : 1;
                    tt += mult * t_shape[ti][si];
                    tc += mult * tc_shape[ti][si];
                    bb += mult * (double)b_shape[si];
                }
                printf("{\"bench\":\"quant_decode_step_est\",\"type\":\"%s\",\"owned\":%d,\"threads\":%d,\"bytes\":%.0f,"
                       "\"step_ms\":%.2f,\"gbs\":%.2f,\"frac\":%.3f,\"cpu_gbs\":%.2f,\"cpu_frac\":%.3f}\n",
                       tn, !g_borrow, tlist[ti], bb, tt * 1e3, bb / tt * 1e-9, bb / tt * 1e-9 / bw[ti], bb / tc * 1e-9,
                       bb / tc * 1e-9 / bwc[ti]);
                fflush(stdout);
            }
    }
    for (int ti = 0; ti < tcount; ti++) tpool_destroy(pools[ti]);
    for (int i = 0; i < max_threads; i++) free(scr[i]);
    free(x), free(y);
    return 0;
}
