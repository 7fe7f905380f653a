/* bench_attention — kern_attention on Llama-3.2-1B attention shapes.
 *
 * DESIGN: 32 query heads, 8 kv heads, head_dim 64, bf16, f32, the two
 * 8-bit float (--kv-cache-dtype fp8_e4m3 / fp8_e5m2) and sglc's int8
 * (--kv-cache-dtype int8: a byte per value, an f32 scale per token and kv
 * head) KV caches in a slot pool with scattered slots (pages of 16 in
 * shuffled order).  Cases: decode (n_q = 1) over n_kv = 512, 4096 and
 * 16384 past tokens; decode of a batch of 16 sequences of 4096 tokens each
 * (one kern_attention call per sequence, as decoder.c does, no barrier
 * between them); prefill of 512 new tokens (n_q = n_kv = 512) and 512 new
 * tokens after a 1536-token prefix.  Each case is first validated against
 * kern_ref_attention (absolute error on outputs of magnitude ~1), then
 * timed: median over repeats of one call (one layer) through the thread
 * pool.  Reported: microseconds per call, KV bytes read per second
 * (decode; int8 counts its scales) and GFLOP/s with 4 * head_dim FLOP per
 * visible (query, key, head) (prefill).  JSON lines.
 *
 * Usage: build/bench/bench_attention [--threads N] [--reps R]
 *            [--kv f32,bf16,fp8_e4m3,fp8_e5m2,int8] [--cases decode4k,...]
 *            [--contiguous 1: pages in order, every sequence's slots consecutive]
 * (--cases names: decode512 decode4k decode16k decode4k_b16 prefill
 * prefill_after_prefix; default all.) */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_common.h"
#include "kernels/kernels.h"
#include "util/dtype.h"
#include "util/threadpool.h"
#include "util/timeutil.h"

static uint64_t g_rng = 0x2545F4914F6CDD1Dull;
static float frand(void)
{
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return (float)((g_rng >> 40) & 0xFFFFFF) / (float)(1 << 23) - 1.0f;
}

/* 1 when name is in the comma-separated list (NULL list = everything). */
static int in_list(const char *list, const char *name)
{
    if (!list) return 1;
    size_t n = strlen(name);
    for (const char *p = list; *p;) {
        const char *e = strchr(p, ',');
        size_t l = e ? (size_t)(e - p) : strlen(p);
        if (l == n && !strncmp(p, name, n)) return 1;
        if (!e) break;
        p = e + 1;
    }
    return 0;
}

typedef struct {
    const kern_attn_args *a; /* (nseq) */
    int nseq;
    void **scratch;
    double cpu[64]; /* per-thread CPU seconds of the last call */
} atb_ctx;

static void atb_task(void *vctx, int ith, int nth)
{
    atb_ctx *c = vctx;
    double c0 = bench_thread_cpu();
    for (int s = 0; s < c->nseq; s++) kern_attention(&c->a[s], ith, nth, c->scratch[ith]);
    c->cpu[ith] = bench_thread_cpu() - c0;
}

int main(int argc, char **argv)
{
    int nthreads = 2, reps = 7, contiguous = 0;
    const char *kv_list = NULL, *case_list = NULL;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--threads")) nthreads = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--reps")) reps = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--kv")) kv_list = argv[i + 1];
        else if (!strcmp(argv[i], "--cases")) case_list = argv[i + 1];
        else if (!strcmp(argv[i], "--contiguous")) contiguous = atoi(argv[i + 1]);
        else {
            fprintf(stderr, "usage: %s [--threads N] [--reps R] [--kv LIST] [--cases LIST] [--contiguous 0|1]\n", argv[0]);
            return 2;
        }
    }
    if (nthreads < 1 || nthreads > 64 || reps < 1 || reps > 64) return 2;
    if (kernels_init(NULL) != 0) return 1;
    tpool *pool = tpool_create(nthreads);
    if (!pool) return 1;
    printf("{\"bench\":\"setup\",\"isa\":\"%s\",\"threads\":%d,\"reps\":%d,\"contiguous\":%d}\n",
           kernels_isa_name(kernels_isa()), nthreads, reps, contiguous);

    enum { B16 = 16, L16 = 4096 };
    const int n_head = 32, n_kv_head = 8, hd = 64, max_kv = 16384;
    const int n_slots = B16 * L16 + 1024; /* the batch case's 16 sequences need their own slots */
    const size_t row = (size_t)n_kv_head * hd;
    enum { NT = 5 };
    static const dtype kv_types[NT] = {DTYPE_F32, DTYPE_BF16, DTYPE_F8_E4M3, DTYPE_F8_E5M2, DTYPE_I8};
    static const char *kv_names[NT] = {"f32", "bf16", "fp8_e4m3", "fp8_e5m2", "int8"};
    float *tmp = malloc(sizeof(float) * row);
    /* slots: pages of 16 consecutive slots in shuffled page order */
    int32_t *slots = malloc(sizeof(int32_t) * (size_t)B16 * L16);
    int n_pages = n_slots / 16;
    int32_t *pages = malloc(sizeof(int32_t) * n_pages);
    for (int i = 0; i < n_pages; i++) pages[i] = i;
    for (int i = n_pages - 1; i > 0 && !contiguous; i--) {
        int j = (int)((frand() + 1.0f) * 0.5f * (float)i);
        int32_t t = pages[i];
        pages[i] = pages[j];
        pages[j] = t;
    }
    for (int p = 0; p < B16 * L16; p++) slots[p] = pages[p / 16] * 16 + p % 16;

    const int max_q = 512;
    size_t qs = (size_t)n_head * hd;
    float *q = malloc(sizeof(float) * qs * max_q), *out = malloc(sizeof(float) * qs * max_q);
    float *ref = malloc(sizeof(float) * qs * max_q);
    for (size_t i = 0; i < qs * max_q; i++) q[i] = frand() * 2.0f;
    void *scr[64];
    size_t ss = kern_attention_scratch(max_kv, hd);
    for (int t = 0; t < nthreads; t++) scr[t] = malloc(ss);
    float *ref_scr = malloc(sizeof(float) * (max_kv + 64));
    if (!tmp || !slots || !pages || !q || !out || !ref || !ref_scr) return 1;

    struct {
        const char *name, *id;
        int n_q, n_kv, nseq;
    } cases[] = {{"decode", "decode512", 1, 512, 1},      {"decode", "decode4k", 1, 4096, 1},
                 {"decode", "decode16k", 1, 16384, 1},    {"decode_b16", "decode4k_b16", 1, L16, B16},
                 {"prefill", "prefill", 512, 512, 1},     {"prefill_after_prefix", "prefill_after_prefix", 512, 2048, 1}};
    double v[64], vcpu[64];
    static const int order[NT] = {1, 2, 3, 4, 0}; /* bf16, the 8-bit types, then f32 */
    for (int oi = 0; oi < NT; oi++) {
        int d = order[oi];
        if (!in_list(kv_list, kv_names[d])) continue;
        /* this type's caches, filled from the same random stream for every type */
        const int i8 = kv_types[d] == DTYPE_I8;
        size_t esz = dtype_size(kv_types[d]);
        void *kc = malloc(esz * row * n_slots), *vc = malloc(esz * row * n_slots);
        float *ksc = i8 ? malloc(sizeof(float) * n_kv_head * n_slots) : NULL;
        float *vsc = i8 ? malloc(sizeof(float) * n_kv_head * n_slots) : NULL;
        if (!kc || !vc || (i8 && (!ksc || !vsc))) return 1;
        uint64_t rng_save = g_rng;
        g_rng = 0x9E3779B97F4A7C15ull;
        for (int s = 0; s < n_slots; s++) {
            for (size_t i = 0; i < row; i++) tmp[i] = frand() * 2.0f;
            kern_kv_store_tok(kc, ksc, kv_types[d], s, n_kv_head, hd, tmp, 1.0f);
            for (size_t i = 0; i < row; i++) tmp[i] = frand();
            kern_kv_store_tok(vc, vsc, kv_types[d], s, n_kv_head, hd, tmp, 1.0f);
        }
        g_rng = rng_save;
        for (size_t ci = 0; ci < sizeof cases / sizeof *cases; ci++) {
            if (!in_list(case_list, cases[ci].id)) continue;
            kern_attn_args as[B16];
            int nseq = cases[ci].nseq;
            for (int sq = 0; sq < nseq; sq++) {
                as[sq] = (kern_attn_args){
                    .n_q = cases[ci].n_q, .n_kv = cases[ci].n_kv, .n_head = n_head,
                    .n_kv_head = n_kv_head, .head_dim = hd, .q = q + qs * (size_t)sq, .q_stride = qs,
                    .k_cache = kc, .v_cache = vc, .kv_dt = kv_types[d], .k_tok_scale = ksc, .v_tok_scale = vsc,
                    .slots = slots + (size_t)sq * L16, .scale = 1.0f / sqrtf((float)hd),
                    .out = out + qs * (size_t)sq, .out_stride = qs,
                };
            }
            const kern_attn_args *a = &as[0];
            atb_ctx c = {as, nseq, scr, {0}};
            tpool_run(pool, atb_task, &c);
            /* validate the last (up to) 8 queries of the first sequence: same positions, same kv */
            int nv = a->n_q < 8 ? a->n_q : 8;
            kern_attn_args ar = *a;
            ar.n_q = nv;
            ar.q = a->q + qs * (size_t)(a->n_q - nv);
            ar.out = ref;
            /* int8: the AVX-512 kernel scores with an int8 q unless SGLC_KV_INT8_QDOT=0
             * (kern_ref_attention_i8q) and, at head_dim 64k, also does P.V with integer dots
             * unless SGLC_KV_INT8_PDOT=0 (kern_ref_attention_i8qp); the others are exact: the
             * nearest reference counts */
            double worst = 1e30;
            for (int rk = 0; rk < (a->kv_dt == DTYPE_I8 ? 3 : 1); rk++) {
                if (rk == 2) kern_ref_attention_i8qp(&ar, 0, 1, ref_scr);
                else if (rk) kern_ref_attention_i8q(&ar, 0, 1, ref_scr);
                else kern_ref_attention(&ar, 0, 1, ref_scr);
                double w = 0.0;
                for (size_t i = 0; i < qs * (size_t)nv; i++) {
                    double e = fabs((double)out[qs * (size_t)(a->n_q - nv) + i] - ref[i]);
                    if (e > w) w = e;
                }
                if (w < worst) worst = w;
            }
            if (worst > 1e-4) {
                printf("{\"bench\":\"validate\",\"case\":\"%s\",\"n_kv\":%d,\"max_abs_err\":%.3g,\"ok\":false}\n",
                       cases[ci].name, a->n_kv, worst);
                return 1;
            }
            for (int r = 0; r < reps; r++) {
                double t0 = time_now_sec();
                tpool_run(pool, atb_task, &c);
                v[r] = time_now_sec() - t0;
                vcpu[r] = bench_max_cpu(c.cpu, nthreads);
            }
            double med = bench_median(v, reps), mcpu = bench_median(vcpu, reps);
            double kv_bytes = 2.0 * nseq * a->n_kv * ((double)row * (double)esz + (i8 ? 4.0 * n_kv_head : 0.0));
            double pairs = 0.0; /* visible (query, key) pairs */
            for (int i = 0; i < a->n_q; i++) pairs += a->n_kv - a->n_q + i + 1;
            double flops = 4.0 * hd * n_head * pairs * nseq;
            printf("{\"bench\":\"attention\",\"case\":\"%s\",\"kv\":\"%s\",\"n_q\":%d,\"n_kv\":%d,\"batch\":%d,"
                   "\"max_abs_err\":%.2g,\"us_median\":%.1f,\"us_best\":%.1f,\"kv_gbs\":%.2f,\"gflops\":%.1f,"
                   "\"us_cpu\":%.1f,\"kv_gbs_cpu\":%.2f,\"gflops_cpu\":%.1f}\n",
                   cases[ci].name, kv_names[d], a->n_q, a->n_kv, nseq, worst, med * 1e6, v[0] * 1e6,
                   kv_bytes / med * 1e-9, flops / med * 1e-9, mcpu * 1e6, kv_bytes / mcpu * 1e-9,
                   flops / mcpu * 1e-9);
            fflush(stdout);
        }
        free(kc), free(vc), free(ksc), free(vsc);
    }
    for (int t = 0; t < nthreads; t++) free(scr[t]);
    free(tmp), free(slots), free(pages), free(q), free(out), free(ref), free(ref_scr);
    tpool_destroy(pool);
    return 0;
}
