/* bench_spec_verify — what one speculative verify forward costs: a
 * forward of T = 1 + k tokens of one sequence (every row's logits, as the
 * scheduler's verify asks) against a 1-token decode forward, at a fixed
 * context length.  T * t(1) / t(T) is the decode speedup speculation can
 * reach when every draft is accepted (forced acceptance: each forward
 * then yields T tokens) — the ceiling on this machine.
 *
 * DESIGN: the context (--ctx tokens) is prefilled once; each timed forward
 * writes positions ctx .. ctx + T - 1 (the same slots every time, as a
 * rejected draft's KV is overwritten).  Median of --reps runs per T after
 * one untimed run; the best run is printed too (on a shared machine the
 * fastest run is the one least disturbed).
 *
 *   bench_spec_verify MODEL_DIR [--dummy] [--dtype bf16|f32|auto] [--ctx N]
 *                     [--tmax 16] [--reps 9] [--threads N]
 * Prints one line per T and a JSON line (--json). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_common.h"
#include "kernels/kernels.h"
#include "model/model.h"
#include "util/dtype.h"
#include "util/log.h"

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s MODEL_DIR [--dummy] [--dtype bf16|f32|auto] [--ctx N] [--tmax N] [--reps N] "
                        "[--threads N] [--json]\n", argv[0]);
        return 2;
    }
    const char *dir = argv[1];
    int dummy = 0, ctx = 256, tmax = 16, reps = 9, threads = 0, json = 0, dt = -1;
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "--dummy")) dummy = 1;
        else if (!strcmp(argv[i], "--json")) json = 1;
        else if (i + 1 < argc && !strcmp(argv[i], "--ctx")) ctx = atoi(argv[++i]);
        else if (i + 1 < argc && !strcmp(argv[i], "--tmax")) tmax = atoi(argv[++i]);
        else if (i + 1 < argc && !strcmp(argv[i], "--reps")) reps = atoi(argv[++i]);
        else if (i + 1 < argc && !strcmp(argv[i], "--threads")) threads = atoi(argv[++i]);
        else if (i + 1 < argc && !strcmp(argv[i], "--dtype")) {
            i++;
            dt = !strcmp(argv[i], "auto") ? -1 : dtype_parse(argv[i]);
        } else {
            fprintf(stderr, "unknown argument %s\n", argv[i]);
            return 2;
        }
    }
    if (ctx < 1 || tmax < 1 || tmax > 64 || reps < 1) {
        fprintf(stderr, "bad --ctx / --tmax / --reps\n");
        return 2;
    }
    kernels_init(NULL);
    log_set_level(LOG_WARNING);
    model_load_opts o = {.model_path = dir, .dtype = dt, .load_format = dummy ? MODEL_LOAD_DUMMY : MODEL_LOAD_AUTO};
    char err[1024];
    model *m = model_load(&o, err, sizeof err);
    if (!m) {
        fprintf(stderr, "load: %s\n", err);
        return 1;
    }
    const model_config *c = model_get_config(m);
    int V = c->vocab_size, L = ctx + tmax;
    if (threads <= 0) threads = cpu_get()->n_cores > 0 ? cpu_get()->n_cores : 1;
    tpool *pool = tpool_create(threads);
    model_kv *kv = model_kv_create(m, L, DTYPE_F32);
    int32_t *tok = malloc(sizeof(int32_t) * (size_t)L), *pos = malloc(sizeof(int32_t) * (size_t)L);
    int32_t *slots = malloc(sizeof(int32_t) * (size_t)L), *rows = malloc(sizeof(int32_t) * (size_t)L);
    float *logits = malloc(sizeof(float) * (size_t)V * (size_t)(tmax > 1 ? tmax : 1));
    double *lat = malloc(sizeof(double) * (size_t)reps), *med = malloc(sizeof(double) * (size_t)(tmax + 1));
    double *best = malloc(sizeof(double) * (size_t)(tmax + 1));
    if (!pool || !kv || !tok || !pos || !slots || !rows || !logits || !lat || !med || !best) {
        fprintf(stderr, "out of memory\n");
        return 1;
    }
    uint64_t st = 12345;
    for (int i = 0; i < L; i++) {
        st = st * 6364136223846793005ULL + 1442695040888963407ULL;
        tok[i] = (int32_t)((st >> 33) % (uint64_t)V);
        pos[i] = i;
        slots[i] = i;
    }
    model_reserve(m, ctx > tmax ? ctx : tmax, L, threads);
    /* the context */
    int32_t start[2] = {0, ctx}, kvl[1] = {ctx}, lrow[1] = {ctx - 1};
    const int32_t *sl[1] = {slots};
    model_batch pb = {.n_tokens = ctx, .tokens = tok, .positions = pos, .n_seqs = 1, .seq_start = start,
                      .seq_kv_len = kvl, .seq_slots = sl, .n_logits = 1, .logit_rows = lrow};
    if (model_forward(m, kv, &pb, logits, pool)) return 1;
    if (!json)
        printf("%s%s: ctx %d, %d threads, weights %.1f MiB (%s)\n", dir, dummy ? " (dummy)" : "", ctx, threads,
               model_weight_bytes(m) / 1048576.0, dtype_name(model_weight_dtype(m)));
    for (int T = 1; T <= tmax; T++) {
        int32_t s2[2] = {0, T}, kv2[1] = {ctx + T};
        for (int j = 0; j < T; j++) rows[j] = j;
        model_batch b = {.n_tokens = T, .tokens = tok + ctx, .positions = pos + ctx, .n_seqs = 1, .seq_start = s2,
                         .seq_kv_len = kv2, .seq_slots = sl, .n_logits = T, .logit_rows = rows};
        if (model_forward(m, kv, &b, logits, pool)) return 1; /* untimed */
        for (int r = 0; r < reps; r++) {
            double t0 = time_now_sec();
            if (model_forward(m, kv, &b, logits, pool)) return 1;
            lat[r] = time_now_sec() - t0;
        }
        med[T] = bench_median(lat, reps); /* sorts lat */
        best[T] = lat[0];
        if (!json)
            printf("T=%2d (k=%2d drafts): median %8.3f ms  x%.3f of T=1  ceiling %.2fx | best %8.3f ms  x%.3f  ceiling %.2fx\n",
                   T, T - 1, med[T] * 1e3, med[T] / med[1], T * med[1] / med[T], best[T] * 1e3, best[T] / best[1],
                   T * best[1] / best[T]);
    }
    if (json) {
        printf("{\"model\":\"%s\",\"dummy\":%s,\"ctx\":%d,\"threads\":%d,\"ms\":[", dir, dummy ? "true" : "false", ctx,
               threads);
        for (int T = 1; T <= tmax; T++) printf("%s%.4f", T > 1 ? "," : "", med[T] * 1e3);
        printf("],\"best_ms\":[");
        for (int T = 1; T <= tmax; T++) printf("%s%.4f", T > 1 ? "," : "", best[T] * 1e3);
        printf("]}\n");
    }
    free(tok), free(pos), free(slots), free(rows), free(logits), free(lat), free(med), free(best);
    model_kv_destroy(kv);
    tpool_destroy(pool);
    model_free(m);
    return 0;
}
