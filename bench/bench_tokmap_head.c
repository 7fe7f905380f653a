/* bench_tokmap_head — one EAGLE draft step's LM head with and without
 * --speculative-token-map (spec_tokmap_head): the full (vocab, hidden)
 * head + mask against the head cut to n_hot rows + scatter, one row, one
 * thread, as spec_eagle runs it.
 *
 *   build/bench/bench_tokmap_head [vocab hidden n_hot reps]
 *   (default 32000 2048 8192 30: a Llama-2-7B-sized vocabulary, bf16)
 *
 * Validates first (the two give the same logits, bit for bit), then times
 * reps alternating A/B steps and reports medians (thread CPU time: the
 * machine is shared) and the ratio. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_common.h"
#include "kernels/kernels.h"
#include "spec/spec_tokmap.h"

int main(int argc, char **argv)
{
    int V = argc > 1 ? atoi(argv[1]) : 32000, H = argc > 2 ? atoi(argv[2]) : 2048;
    int n = argc > 3 ? atoi(argv[3]) : 8192, reps = argc > 4 ? atoi(argv[4]) : 30;
    if (V < 2 || H < 1 || n < 1 || n > V || reps < 1 || reps > 1000) {
        fprintf(stderr, "usage: bench_tokmap_head [vocab hidden n_hot reps]\n");
        return 2;
    }
    kernels_init(NULL);
    float *w = malloc(sizeof(float) * (size_t)V * H), *x = malloc(sizeof(float) * H);
    float *full = malloc(sizeof(float) * V), *cut = malloc(sizeof(float) * V);
    int64_t *ids = malloc(sizeof(int64_t) * (size_t)n);
    int32_t *perm = malloc(sizeof(int32_t) * (size_t)V);
    if (!w || !x || !full || !cut || !ids || !perm) return 1;
    uint64_t s = 42;
    for (size_t i = 0; i < (size_t)V * H; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        w[i] = (float)((s >> 40) & 0xFFFF) / 65536.0f - 0.5f;
    }
    for (int i = 0; i < H; i++) x[i] = sinf(0.1f * (float)i);
    for (int i = 0; i < V; i++) perm[i] = i;
    for (int i = 0; i < n; i++) { /* n distinct ids: a partial Fisher-Yates shuffle */
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        int j = i + (int)((s >> 33) % (uint64_t)(V - i));
        int32_t t = perm[i];
        perm[i] = perm[j], perm[j] = t;
        ids[i] = perm[i];
    }
    kern_mat lm;
    if (kern_mat_init(&lm, w, DTYPE_F32, V, H, DTYPE_BF16, 0)) return 1;
    lm.x_exact = 1; /* as the model's LM head */
    free(w);
    char err[256];
    spec_tokmap *m = spec_tokmap_from_ids(ids, n, err, sizeof err);
    if (!m || spec_tokmap_bind(m, V, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    spec_tokmap_head h;
    if (spec_tokmap_head_init(&h, m, &lm)) {
        fprintf(stderr, "the head could not be cut\n");
        return 1;
    }
    void *scr = aligned_alloc(64, (kern_matmul_scratch(1, H) + 63) & ~(size_t)63);
    /* validate */
    kern_matmul(full, x, 1, &lm, NULL, 0, 1, scr);
    spec_tokmap_mask(m, full);
    spec_tokmap_head_logits(&h, m, x, cut);
    for (int i = 0; i < V; i++)
        if (!(full[i] == cut[i] || (isinf(full[i]) && isinf(cut[i])))) {
            fprintf(stderr, "mismatch at %d: full %g cut %g\n", i, full[i], cut[i]);
            return 1;
        }
    double *ta = malloc(sizeof(double) * reps), *tb = malloc(sizeof(double) * reps);
    for (int r = 0; r < reps; r++) {
        double t0 = bench_thread_cpu();
        kern_matmul(full, x, 1, &lm, NULL, 0, 1, scr);
        spec_tokmap_mask(m, full);
        double t1 = bench_thread_cpu();
        spec_tokmap_head_logits(&h, m, x, cut);
        double t2 = bench_thread_cpu();
        ta[r] = t1 - t0, tb[r] = t2 - t1;
    }
    double a = bench_median(ta, reps), b = bench_median(tb, reps);
    printf("vocab %d hidden %d hot %d (bf16, 1 row, 1 thread, %d reps): full head + mask %.3f ms, cut head + "
           "scatter %.3f ms, ratio %.2fx (rows %.2fx)\n",
           V, H, n, reps, a * 1e3, b * 1e3, a / b, (double)V / n);
    spec_tokmap_head_free(&h);
    spec_tokmap_destroy(m);
    kern_mat_free(&lm);
    free(scr), free(x), free(full), free(cut), free(ids), free(perm), free(ta), free(tb);
    return 0;
}
