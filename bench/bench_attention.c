/* bench_attention — kern_attention on Llama-3.2-1B attention shapes.
 *
 * DESIGN: 32 query heads, 8 kv heads, head_dim 64, bf16, f32 and the two
 * 8-bit float (--kv-cache-dtype fp8_e4m3 / fp8_e5m2) KV caches in a
 * slot pool with scattered slots.  Cases: decode (n_q = 1) over n_kv =
 * 512, 4096 and 16384 past tokens; prefill of 512 new tokens (n_q = n_kv =
 * 512) and 512 new tokens after a 1536-token prefix.  Each case is first
 * validated against kern_ref_attention (absolute error on outputs of
 * magnitude ~1), then timed: median over repeats of one call (one layer)
 * through the thread pool.  Reported: microseconds per call, KV bytes
 * read per second (decode) and GFLOP/s with 4 * head_dim FLOP per visible
 * (query, key, head) (prefill).  JSON lines.
 *
 * Usage: build/bench/bench_attention [--threads N] [--reps R] */
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
    const kern_attn_args *a;
    void **scratch;
    double cpu[64]; /* per-thread CPU seconds of the last call */
} at_ctx;

static void at_task(void *vctx, int ith, int nth)
{
    at_ctx *c = vctx;
    double c0 = bench_thread_cpu();
    kern_attention(c->a, ith, nth, c->scratch[ith]);
    c->cpu[ith] = bench_thread_cpu() - c0;
}

static uint64_t g_rng = 0x2545F4914F6CDD1Dull;
static float frand(void)
{
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return (float)((g_rng >> 40) & 0xFFFFFF) / (float)(1 << 23) - 1.0f;
}

int main(int argc, char **argv)
{
    int nthreads = 2, reps = 7;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--threads")) nthreads = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--reps")) reps = atoi(argv[i + 1]);
        else {
            fprintf(stderr, "usage: %s [--threads N] [--reps R]\n", argv[0]);
            return 2;
        }
    }
    if (nthreads < 1 || nthreads > 64 || reps < 1 || reps > 64) return 2;
    if (kernels_init(NULL) != 0) return 1;
    tpool *pool = tpool_create(nthreads);
    if (!pool) return 1;
    printf("{\"bench\":\"setup\",\"isa\":\"%s\",\"threads\":%d,\"reps\":%d}\n",
           kernels_isa_name(kernels_isa()), nthreads, reps);

    const int n_head = 32, n_kv_head = 8, hd = 64, max_kv = 16384;
    const int n_slots = max_kv + 1000;
    const size_t row = (size_t)n_kv_head * hd;
    enum { NT = 4 };
    static const dtype kv_types[NT] = {DTYPE_F32, DTYPE_BF16, DTYPE_F8_E4M3, DTYPE_F8_E5M2};
    static const char *kv_names[NT] = {"f32", "bf16", "fp8_e4m3", "fp8_e5m2"};
    void *kc[NT], *vc[NT];
    for (int d = 0; d < NT; d++) {
        size_t esz = dtype_size(kv_types[d]);
        kc[d] = malloc(esz * row * n_slots);
        vc[d] = malloc(esz * row * n_slots);
        if (!kc[d] || !vc[d]) return 1;
    }
    float *tmp = malloc(sizeof(float) * row);
    for (int s = 0; s < n_slots; s++) {
        for (size_t i = 0; i < row; i++) tmp[i] = frand() * 2.0f;
        for (int d = 0; d < NT; d++) kern_kv_store(kc[d], kv_types[d], s, (int)row, tmp);
        for (size_t i = 0; i < row; i++) tmp[i] = frand();
        for (int d = 0; d < NT; d++) kern_kv_store(vc[d], kv_types[d], s, (int)row, tmp);
    }
    /* slots: pages of 16 consecutive slots in shuffled page order */
    int32_t *slots = malloc(sizeof(int32_t) * max_kv);
    int n_pages = n_slots / 16;
    int32_t *pages = malloc(sizeof(int32_t) * n_pages);
    for (int i = 0; i < n_pages; i++) pages[i] = i;
    for (int i = n_pages - 1; i > 0; i--) {
        int j = (int)((frand() + 1.0f) * 0.5f * (float)i);
        int32_t t = pages[i];
        pages[i] = pages[j];
        pages[j] = t;
    }
    for (int p = 0; p < max_kv; p++) slots[p] = pages[p / 16] * 16 + p % 16;

    const int max_q = 512;
    size_t qs = (size_t)n_head * hd;
    float *q = malloc(sizeof(float) * qs * max_q), *out = malloc(sizeof(float) * qs * max_q);
    float *ref = malloc(sizeof(float) * qs * max_q);
    for (size_t i = 0; i < qs * max_q; i++) q[i] = frand() * 2.0f;
    void *scr[64];
    size_t ss = kern_attention_scratch(max_kv, hd);
    for (int t = 0; t < nthreads; t++) scr[t] = malloc(ss);
    float *ref_scr = malloc(sizeof(float) * (max_kv + 64));

    struct {
        const char *name;
        int n_q, n_kv;
    } cases[] = {{"decode", 1, 512}, {"decode", 1, 4096}, {"decode", 1, 16384},
                 {"prefill", 512, 512}, {"prefill_after_prefix", 512, 2048}};
    double v[64], vcpu[64];
    static const int order[NT] = {1, 2, 3, 0}; /* bf16, the fp8 types, then f32 */
    for (int oi = 0; oi < NT; oi++) {
        int d = order[oi];
        for (size_t ci = 0; ci < sizeof cases / sizeof *cases; ci++) {
            kern_attn_args a = {
                .n_q = cases[ci].n_q, .n_kv = cases[ci].n_kv, .n_head = n_head,
                .n_kv_head = n_kv_head, .head_dim = hd, .q = q, .q_stride = qs,
                .k_cache = kc[d], .v_cache = vc[d], .kv_dt = kv_types[d],
                .slots = slots, .scale = 1.0f / sqrtf((float)hd), .out = out, .out_stride = qs,
            };
            at_ctx c = {&a, scr, {0}};
            tpool_run(pool, at_task, &c);
            /* validate the last (up to) 8 queries: same positions, same kv */
            int nv = a.n_q < 8 ? a.n_q : 8;
            kern_attn_args ar = a;
            ar.n_q = nv;
            ar.q = q + qs * (size_t)(a.n_q - nv);
            ar.out = ref;
            kern_ref_attention(&ar, 0, 1, ref_scr);
            double worst = 0.0;
            for (size_t i = 0; i < qs * (size_t)nv; i++) {
                double e = fabs((double)out[qs * (size_t)(a.n_q - nv) + i] - ref[i]);
                if (e > worst) worst = e;
            }
            if (worst > 1e-4) {
                printf("{\"bench\":\"validate\",\"case\":\"%s\",\"n_kv\":%d,\"max_abs_err\":%.3g,\"ok\":false}\n",
                       cases[ci].name, a.n_kv, worst);
                return 1;
            }
            for (int r = 0; r < reps; r++) {
                double t0 = time_now_sec();
                tpool_run(pool, at_task, &c);
                v[r] = time_now_sec() - t0;
                vcpu[r] = bench_max_cpu(c.cpu, nthreads);
            }
            double med = bench_median(v, reps), mcpu = bench_median(vcpu, reps);
            double kv_bytes = 2.0 * a.n_kv * (double)row * (double)dtype_size(kv_types[d]);
            double pairs = 0.0; /* visible (query, key) pairs */
            for (int i = 0; i < a.n_q; i++) pairs += a.n_kv - a.n_q + i + 1;
            double flops = 4.0 * hd * n_head * pairs;
            printf("{\"bench\":\"attention\",\"case\":\"%s\",\"kv\":\"%s\",\"n_q\":%d,\"n_kv\":%d,"
                   "\"max_abs_err\":%.2g,\"us_median\":%.1f,\"us_best\":%.1f,\"kv_gbs\":%.2f,\"gflops\":%.1f,"
                   "\"us_cpu\":%.1f,\"kv_gbs_cpu\":%.2f,\"gflops_cpu\":%.1f}\n",
                   cases[ci].name, kv_names[d], a.n_q, a.n_kv, worst, med * 1e6, v[0] * 1e6,
                   kv_bytes / med * 1e-9, flops / med * 1e-9, mcpu * 1e6, kv_bytes / mcpu * 1e-9,
                   flops / mcpu * 1e-9);
            fflush(stdout);
        }
    }
    for (int t = 0; t < nthreads; t++) free(scr[t]);
    for (int d = 0; d < NT; d++) free(kc[d]), free(vc[d]);
    free(tmp), free(slots), free(pages), free(q), free(out), free(ref), free(ref_scr);
    tpool_destroy(pool);
    return 0;
}
