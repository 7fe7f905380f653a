/* bench_matmul — kern_matmul on the Llama-3.2-1B layer shapes, bf16 weights.
 *
 * DESIGN: validate, then time, then compare with the ceilings measured in
 * the same process (bench_common.h).  Shapes (n x k, HF (out, in)):
 *   qo 2048x2048, kv 512x2048, gate_up 8192x2048, down 2048x8192,
 *   lm_head 128256x2048.
 *  - validation: each shape, m = 1 and m = 3 (all rows) and rows of the m =
 *    512 GEMM, against kern_ref_matmul on the same bf16 weights (relative to
 *    the sum of |terms|); the bench stops on a mismatch.
 *  - GEMV (m = 1): memory bound, so each shape is replicated into >= 1 GiB
 *    of distinct packed copies that are walked in turn (nothing stays in the
 *    L2/L3); GB/s = weight bytes / time per call.
 *  - decode step: the 16 layers x 7 matrices + lm_head of the model, all
 *    distinct memory (2.47 GB), one GEMV each, like one decode step of the
 *    weights; GB/s = all weight bytes / step time.
 *  - GEMM (m = 512, or --m N): GFLOP/s = 2 m n k / time.
 * Medians (and best) over repeats; the pool has --threads threads (2).
 * Output: JSON lines.
 *
 * Usage: build/bench/bench_matmul [--threads N] [--reps R] [--no-step] [--only gemv|gemm] [--m N]
 * (SGLC_KERNELS=avx2|scalar forces an ISA; SGLC_BF16_DOT=0|1 the AVX-512
 * bf16 body, else the start-up choice, printed in the setup line.) */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_common.h"
#include "kernels/kernels.h"
#include "util/dtype.h"
#include "util/threadpool.h"
#include "util/timeutil.h"

typedef struct {
    const char *name;
    int n, k;
} shape;

static const shape k_shapes[] = {
    {"qo_proj", 2048, 2048}, {"kv_proj", 512, 2048}, {"gate_up_proj", 8192, 2048},
    {"down_proj", 2048, 8192}, {"lm_head", 128256, 2048},
};
#define N_SHAPES (int)(sizeof k_shapes / sizeof *k_shapes)

typedef struct {
    float *y;
    const float *x;
    int m;
    const kern_mat *w;
    void **scratch;
    double cpu[64]; /* per-thread CPU seconds of this call */
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

/* Returns the slowest thread's CPU seconds for the call. */
static double run_mm(tpool *pool, float *y, const float *x, int m, const kern_mat *w, void **scr)
{
    mm_ctx c = {y, x, m, w, scr, {0}};
    tpool_run(pool, mm_task, &c);
    return bench_max_cpu(c.cpu, tpool_size(pool));
}

/* Compare rows `rows` of y (m, n) with the reference. Returns 0 if close. */
static int validate(const char *what, const float *y, const float *x, int n, int k,
                    const uint16_t *wsrc, const int *rows, int nrows)
{
    kern_mat rm = {.n = n, .k = k, .dt = DTYPE_BF16, .layout = 0, .isa = KERN_ISA_SCALAR, .data = wsrc};
    float *yr = malloc(sizeof(float) * n);
    double worst = 0.0;
    for (int ri = 0; ri < nrows; ri++) {
        int r = rows[ri];
        kern_ref_matmul(yr, x + (size_t)r * k, 1, &rm, NULL, 0, 1, NULL);
        for (int j = 0; j < n; j++) {
            double s = 0.0;
            for (int i = 0; i < k; i++)
                s += fabs((double)x[(size_t)r * k + i] * bf16_to_f32(wsrc[(size_t)j * k + i]));
            double err = fabs((double)y[(size_t)r * n + j] - yr[j]) / (s + 1e-30);
            if (err > worst) worst = err;
            if (j > 4096) j += 7; /* sample the long lm_head rows */
        }
    }
    free(yr);
    int ok = worst < 1e-2;
    printf("{\"bench\":\"validate\",\"what\":\"%s\",\"max_rel_err\":%.3g,\"ok\":%s}\n", what, worst,
           ok ? "true" : "false");
    return ok ? 0 : -1;
}

int main(int argc, char **argv)
{
    int nthreads = 2, reps = 5, do_step = 1, do_gemv = 1, do_gemm = 1, gemm_m = 512;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--threads") && i + 1 < argc) nthreads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--no-step")) do_step = 0;
        else if (!strcmp(argv[i], "--m") && i + 1 < argc) gemm_m = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--only") && i + 1 < argc) {
            i++;
            do_gemv = !strcmp(argv[i], "gemv");
            do_gemm = !strcmp(argv[i], "gemm");
            do_step = do_gemv && do_step;
        } else {
            fprintf(stderr, "usage: %s [--threads N] [--reps R] [--no-step] [--only gemv|gemm] [--m N]\n", argv[0]);
            return 2;
        }
    }
    if (nthreads < 1 || reps < 1 || reps > 64 || gemm_m < 1 || gemm_m > 4096) return 2;
    if (kernels_init(NULL) != 0) return 1;
    tpool *pool = tpool_create(nthreads);
    if (!pool) return 1;
    const cpu_features *f = cpu_get();
    char choice[512];
    printf("{\"bench\":\"setup\",\"isa\":\"%s\",\"threads\":%d,\"cpu\":\"%s\",\"reps\":%d,\"bf16_body\":\"%s\","
           "\"choice\":\"%s\"}\n",
           kernels_isa_name(kernels_isa()), nthreads, f->brand, reps, kernels_choice()->bf16_dot ? "dot" : "fma",
           kernels_choice_line(choice, sizeof choice));

    /* ceilings, measured now */
    double v[64], vc[64];
    size_t cbytes = (size_t)1 << 30;
    char *cbuf = kern_weight_alloc(cbytes); /* same pages as the weights */
    if (!cbuf) return 1;
    memset(cbuf, 1, cbytes);
    bench_mem_read(pool, cbuf, cbytes, reps, v, vc);
    double bw = bench_median(v, reps), bw_best = bench_max(v, reps), bw_cpu = bench_median(vc, reps);
    double bw_p90 = bench_mem_read_p90(pool, cbuf, cbytes, 3);
    free(cbuf);
    double peak = 0.0, peak_best = 0.0, peak_cpu = 0.0;
    if (f->avx512f && f->avx512bf16) {
        bench_peak(pool, 1, reps, v, vc);
        peak = bench_median(v, reps);
        peak_best = bench_max(v, reps);
        peak_cpu = bench_median(vc, reps);
    }
    printf("{\"bench\":\"ceilings\",\"mem_read_gbs_median\":%.2f,\"mem_read_gbs_best\":%.2f,"
           "\"mem_read_gbs_cpu\":%.2f,\"mem_read_gbs_p90_pieces\":%.2f,\"bf16_peak_gflops_median\":%.1f,"
           "\"bf16_peak_gflops_best\":%.1f,\"bf16_peak_gflops_cpu\":%.1f}\n",
           bw, bw_best, bw_cpu, bw_p90, peak, peak_best, peak_cpu);
    fflush(stdout);

    const int M = gemm_m > 512 ? gemm_m : 512; /* x rows allocated (validation reads row 511) */
    int kmax = 8192;
    size_t ss = kern_matmul_scratch(M, kmax);
    void *scr[64];
    for (int t = 0; t < nthreads; t++) {
        scr[t] = aligned_alloc(64, (ss + 63) / 64 * 64);
        if (!scr[t]) return 1;
    }
    float *x = malloc(sizeof(float) * (size_t)M * kmax);
    float *y = malloc(sizeof(float) * (size_t)M * 128256);
    if (!x || !y) return 1;
    for (size_t i = 0; i < (size_t)M * kmax; i++) x[i] = frand();

    kern_mat packed[N_SHAPES];
    int rc = 0;
    for (int s = 0; s < N_SHAPES && !rc; s++) {
        const shape *sh = &k_shapes[s];
        size_t cnt = (size_t)sh->n * sh->k;
        uint16_t *wsrc = malloc(2 * cnt);
        if (!wsrc) return 1;
        for (size_t i = 0; i < cnt; i++) wsrc[i] = f32_to_bf16(frand() * 0.05f);
        double t0 = time_now_sec();
        if (kern_mat_init(&packed[s], wsrc, DTYPE_BF16, sh->n, sh->k, DTYPE_BF16, 0) != 0) return 1;
        double tpack = time_now_sec() - t0;
        /* validate m = 1, m = 3 and sampled rows of m = 512 */
        char what[96];
        int rows3[] = {0, 1, 2}, rows512[] = {0, 11, 12, 255, 511};
        run_mm(pool, y, x, 1, &packed[s], scr);
        snprintf(what, sizeof what, "%s m=1", sh->name);
        rc |= validate(what, y, x, sh->n, sh->k, wsrc, rows3, 1);
        run_mm(pool, y, x, 3, &packed[s], scr);
        snprintf(what, sizeof what, "%s m=3", sh->name);
        rc |= validate(what, y, x, sh->n, sh->k, wsrc, rows3, 3);
        if (do_gemm) {
            run_mm(pool, y, x, M, &packed[s], scr);
            snprintf(what, sizeof what, "%s m=%d", sh->name, M);
            rc |= validate(what, y, x, sh->n, sh->k, wsrc, rows512, 5);
        }
        printf("{\"bench\":\"pack\",\"shape\":\"%s\",\"seconds\":%.3f,\"bytes\":%zu}\n", sh->name, tpack,
               packed[s].bytes);
        free(wsrc);
    }
    if (rc) {
        fprintf(stderr, "validation failed\n");
        return 1;
    }
    fflush(stdout);

    /* GEMV over >= 1 GiB of distinct copies */
    if (do_gemv) {
        for (int s = 0; s < N_SHAPES; s++) {
            const kern_mat *w = &packed[s];
            int copies = (int)(((size_t)1 << 30) / w->bytes) + 1;
            char *big = kern_weight_alloc((w->bytes + 4095) / 4096 * 4096 * (size_t)copies);
            if (!big) return 1;
            size_t stride = (w->bytes + 4095) / 4096 * 4096;
            kern_mat *cp = malloc(sizeof(kern_mat) * copies);
            for (int c = 0; c < copies; c++) {
                memcpy(big + stride * c, w->data, w->bytes);
                cp[c] = *w;
                cp[c].owned = NULL;
                cp[c].data = big + stride * c;
            }
            for (int c = 0; c < copies; c++) run_mm(pool, y, x, 1, &cp[c], scr); /* warm */
            double *pc = malloc(sizeof(double) * (size_t)copies * reps);
            int npc = 0;
            for (int r = 0; r < reps; r++) {
                double t0 = time_now_sec(), cpu = 0.0;
                for (int c = 0; c < copies; c++) {
                    double t1 = time_now_sec();
                    cpu += run_mm(pool, y, x, 1, &cp[c], scr);
                    pc[npc++] = (double)w->bytes / (time_now_sec() - t1) * 1e-9;
                }
                double dt = (time_now_sec() - t0) / copies;
                v[r] = (double)w->bytes / dt * 1e-9;
                vc[r] = (double)w->bytes / (cpu / copies) * 1e-9;
            }
            qsort(pc, (size_t)npc, sizeof *pc, bench_cmp_double);
            double p90 = pc[(int)(0.9 * (npc - 1))];
            free(pc);
            double best = bench_max(v, reps), med = bench_median(v, reps), mcpu = bench_median(vc, reps);
            printf("{\"bench\":\"gemv_calls\",\"shape\":\"%s\",\"calls\":%d,\"p90_gbs\":%.2f,"
                   "\"pct_of_mem_read_p90\":%.1f}\n",
                   k_shapes[s].name, npc, p90, bw_p90 > 0 ? 100.0 * p90 / bw_p90 : 0.0);
            printf("{\"bench\":\"gemv\",\"shape\":\"%s\",\"n\":%d,\"k\":%d,\"bytes\":%zu,\"copies\":%d,"
                   "\"gbs_median\":%.2f,\"gbs_best\":%.2f,\"pct_of_mem_read\":%.1f,\"us_per_call\":%.1f,"
                   "\"gbs_cpu\":%.2f,\"pct_of_mem_read_cpu\":%.1f}\n",
                   k_shapes[s].name, w->n, w->k, w->bytes, copies, med, best, 100.0 * med / bw,
                   (double)w->bytes / med * 1e-3, mcpu, 100.0 * mcpu / bw_cpu);
            fflush(stdout);
            free(cp);
            free(big);
        }
    }

    /* one decode step of weights: 16 layers x (q, k, v, o, gate, up, down) + lm_head */
    if (do_step) {
        const int layer_shapes[7] = {0, 1, 1, 0, 2, 2, 3};
        int nm = 16 * 7 + 1;
        kern_mat *mats = malloc(sizeof(kern_mat) * nm);
        size_t total = 0;
        int ok = 1;
        for (int i = 0; i < nm && ok; i++) {
            const kern_mat *src = &packed[i < 16 * 7 ? layer_shapes[i % 7] : 4];
            mats[i] = *src;
            mats[i].owned = kern_weight_alloc(src->bytes);
            if (!mats[i].owned) {
                ok = 0;
                nm = i;
                break;
            }
            memcpy(mats[i].owned, src->data, src->bytes);
            mats[i].data = mats[i].owned;
            total += src->bytes;
        }
        if (ok) {
            for (int i = 0; i < nm; i++) run_mm(pool, y, x, 1, &mats[i], scr);
            /* also the best time of each matrix over the repeats: their sum
             * estimates a step that no other process interrupted */
            double *bestm = malloc(sizeof(double) * nm);
            for (int i = 0; i < nm; i++) bestm[i] = 1e30;
            for (int r = 0; r < reps; r++) {
                double t0 = time_now_sec(), cpu = 0.0;
                for (int i = 0; i < nm; i++) {
                    double t1 = time_now_sec();
                    cpu += run_mm(pool, y, x, 1, &mats[i], scr);
                    double dt = time_now_sec() - t1;
                    if (dt < bestm[i]) bestm[i] = dt;
                }
                v[r] = time_now_sec() - t0;
                vc[r] = cpu;
            }
            double sum_best = 0.0;
            for (int i = 0; i < nm; i++) sum_best += bestm[i];
            free(bestm);
            printf("{\"bench\":\"decode_step_best_calls\",\"ms\":%.2f,\"gbs\":%.2f,\"pct_of_mem_read_p90\":%.1f}\n",
                   sum_best * 1e3, (double)total / sum_best * 1e-9,
                   bw_p90 > 0 ? 100.0 * (double)total / sum_best * 1e-9 / bw_p90 : 0.0);
            double med = bench_median(v, reps), best = v[0], mcpu = bench_median(vc, reps);
            printf("{\"bench\":\"decode_step_weights\",\"matrices\":%d,\"bytes\":%zu,\"ms_median\":%.2f,"
                   "\"ms_best\":%.2f,\"gbs_median\":%.2f,\"pct_of_mem_read\":%.1f,\"gbs_cpu\":%.2f,"
                   "\"pct_of_mem_read_cpu\":%.1f,\"gbs_best\":%.2f,\"pct_best_of_mem_read_p90\":%.1f}\n",
                   nm, total, med * 1e3, best * 1e3, (double)total / med * 1e-9,
                   100.0 * (double)total / med * 1e-9 / bw, (double)total / mcpu * 1e-9,
                   100.0 * (double)total / mcpu * 1e-9 / bw_cpu, (double)total / best * 1e-9,
                   bw_p90 > 0 ? 100.0 * (double)total / best * 1e-9 / bw_p90 : 0.0);
        } else {
            printf("{\"bench\":\"decode_step_weights\",\"error\":\"out of memory\"}\n");
        }
        for (int i = 0; i < nm; i++) kern_mat_free(&mats[i]);
        free(mats);
        fflush(stdout);
    }

    /* GEMM m = 512 (--m) */
    if (do_gemm) {
        const int GM = gemm_m;
        for (int s = 0; s < N_SHAPES; s++) {
            const kern_mat *w = &packed[s];
            int r_reps = w->n > 100000 ? (reps < 3 ? reps : 3) : reps;
            run_mm(pool, y, x, GM, w, scr);
            for (int r = 0; r < r_reps; r++) {
                double t0 = time_now_sec();
                double cpu = run_mm(pool, y, x, GM, w, scr);
                double dt = time_now_sec() - t0;
                v[r] = 2.0 * GM * (double)w->n * w->k / dt * 1e-9;
                vc[r] = 2.0 * GM * (double)w->n * w->k / cpu * 1e-9;
            }
            double best = bench_max(v, r_reps), med = bench_median(v, r_reps), mcpu = bench_median(vc, r_reps);
            printf("{\"bench\":\"gemm\",\"shape\":\"%s\",\"m\":%d,\"n\":%d,\"k\":%d,\"gflops_median\":%.1f,"
                   "\"gflops_best\":%.1f,\"pct_of_bf16_peak\":%.1f,\"gflops_cpu\":%.1f,"
                   "\"pct_of_bf16_peak_cpu\":%.1f,\"reps\":%d}\n",
                   k_shapes[s].name, GM, w->n, w->k, med, best, peak > 0 ? 100.0 * med / peak : 0.0, mcpu,
                   peak_cpu > 0 ? 100.0 * mcpu / peak_cpu : 0.0, r_reps);
            fflush(stdout);
        }
    }
    for (int s = 0; s < N_SHAPES; s++) kern_mat_free(&packed[s]);
    for (int t = 0; t < nthreads; t++) free(scr[t]);
    free(x);
    free(y);
    tpool_destroy(pool);
    return 0;
}
