/* bench_eagle_tree — what an EAGLE tree step costs against a chain step, in
 * its two parts, on one sequence at a fixed context:
 *   draft   spec_eagle_propose (a chain of --steps tokens) against
 *           spec_eagle_propose_tree (--steps, --topk, --ndt - 1 nodes), the
 *           draft KV of the context already in place (as between steps: a
 *           one-row catch-up, then the chain / frontier forwards);
 *   verify  the target forward of 1 + steps rows (a chain, causal) against
 *           1 + (ndt - 1) rows whose draft rows carry the tree's parents
 *           (model_batch.seq_tree_parent: the tree mask), every row's
 *           logits as the scheduler's verify asks; and 1 + (ndt - 1) causal
 *           rows (the mask's own cost).
 * Median (and best) of --reps timed runs after one untimed run, wall time.
 *
 *   bench_eagle_tree TARGET_DIR HEAD_DIR [--ctx 256] [--steps 5] [--topk 4]
 *                    [--ndt 8] [--reps 21] [--threads 1]
 * TARGET_DIR: a Llama-family model; HEAD_DIR: an EAGLE-1 head for it
 * (tests/ref/eagle_ref.py make / fit). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_common.h"
#include "kernels/kernels.h"
#include "model/model.h"
#include "spec/spec_eagle.h"
#include "util/log.h"

static double med_best(double *lat, int reps, double *best)
{
    double m = bench_median(lat, reps); /* sorts */
    *best = lat[0];
    return m;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: %s TARGET_DIR HEAD_DIR [--ctx N] [--steps N] [--topk N] [--ndt N] [--reps N] "
                        "[--threads N]\n", argv[0]);
        return 2;
    }
    int ctx = 256, steps = 5, topk = 4, ndt = 8, reps = 21, threads = 1;
    for (int i = 3; i < argc; i++) {
        if (i + 1 >= argc) {
            fprintf(stderr, "%s needs a value\n", argv[i]);
            return 2;
        }
        int *v = !strcmp(argv[i], "--ctx") ? &ctx : !strcmp(argv[i], "--steps") ? &steps
                 : !strcmp(argv[i], "--topk") ? &topk : !strcmp(argv[i], "--ndt") ? &ndt
                 : !strcmp(argv[i], "--reps") ? &reps : !strcmp(argv[i], "--threads") ? &threads : NULL;
        if (!v) {
            fprintf(stderr, "unknown argument %s\n", argv[i]);
            return 2;
        }
        *v = atoi(argv[++i]);
    }
    if (ctx < 2 || steps < 1 || steps > 63 || topk < 1 || topk > SPEC_EAGLE_TOPK_MAX || ndt < 2 || ndt > 64 ||
        reps < 1 || threads < 1) {
        fprintf(stderr, "bad --ctx / --steps / --topk / --ndt / --reps / --threads\n");
        return 2;
    }
    kernels_init(NULL);
    log_set_level(LOG_WARNING);
    model_load_opts o = {.model_path = argv[1], .dtype = -1, .load_format = MODEL_LOAD_AUTO};
    char err[1024];
    model *m = model_load(&o, err, sizeof err);
    if (!m) {
        fprintf(stderr, "load: %s\n", err);
        return 1;
    }
    const int V = model_get_config(m)->vocab_size, L = ctx + 64, K = ndt - 1;
    tpool *pool = tpool_create(threads);
    model_kv *kv = model_kv_create(m, L, DTYPE_F32);
    spec_eagle *e = spec_eagle_create(argv[2], 0, m, L, 4096, err, sizeof err);
    if (!e) {
        fprintf(stderr, "head: %s\n", err);
        return 1;
    }
    int32_t *tok = malloc(sizeof(int32_t) * (size_t)L), *pos = malloc(sizeof(int32_t) * (size_t)L);
    int32_t *slots = malloc(sizeof(int32_t) * (size_t)L), rows[64], par[64], tpar[65];
    float *logits = malloc(sizeof(float) * (size_t)V * 65);
    double *lat = malloc(sizeof(double) * (size_t)reps);
    if (!pool || !kv || !tok || !pos || !slots || !logits || !lat) {
        fprintf(stderr, "out of memory\n");
        return 1;
    }
    uint64_t st = 12345;
    for (int i = 0; i < L; i++) {
        st = st * 6364136223846793005ULL + 1442695040888963407ULL;
        tok[i] = (int32_t)((st >> 33) % (uint64_t)V);
        pos[i] = i, slots[i] = i;
    }
    model_reserve(m, ctx > 65 ? ctx : 65, L, threads);
    /* the context: the target over ctx - 1 tokens (token ctx - 1 is the one just sampled) */
    int32_t start[2] = {0, ctx - 1}, kvl[1] = {ctx - 1}, lrow[1] = {ctx - 2};
    const int32_t *sl[1] = {slots};
    model_batch pb = {.n_tokens = ctx - 1, .tokens = tok, .positions = pos, .n_seqs = 1, .seq_start = start,
                      .seq_kv_len = kvl, .seq_slots = sl, .n_logits = 1, .logit_rows = lrow};
    if (model_forward(m, kv, &pb, logits, pool)) return 1;
    spec_draft_req r = {0};
    int32_t draft[64];
    double t_chain, t_tree, b_chain, b_tree, v_chain = 0, v_tree = 0, bv_chain = 0, bv_tree = 0, v_same = 0, bv_same = 0;
    /* draft: chain */
    if (spec_eagle_propose(e, &r, tok, ctx, slots, draft, steps) != steps) return 1;
    for (int i = 0; i < reps; i++) {
        double t0 = time_now_sec();
        spec_eagle_propose(e, &r, tok, ctx, slots, draft, steps);
        lat[i] = time_now_sec() - t0;
    }
    t_chain = med_best(lat, reps, &b_chain);
    /* draft: tree */
    int n = spec_eagle_propose_tree(e, &r, tok, ctx, slots, draft, par, NULL, K, steps, topk);
    if (n < 1) return 1;
    for (int i = 0; i < reps; i++) {
        double t0 = time_now_sec();
        spec_eagle_propose_tree(e, &r, tok, ctx, slots, draft, par, NULL, K, steps, topk);
        lat[i] = time_now_sec() - t0;
    }
    t_tree = med_best(lat, reps, &b_tree);
    int depth = 0, dep[64];
    for (int i = 0; i < n; i++) {
        dep[i] = par[i] < 0 ? 1 : dep[par[i]] + 1;
        if (dep[i] > depth) depth = dep[i];
    }
    /* verify: 1 + steps causal rows; 1 + n rows with the tree (row 0 the root); 1 + n causal
     * rows (what the mask itself costs) */
    for (int pass = 0; pass < 3; pass++) {
        int T = pass ? 1 + n : 1 + steps;
        tpar[0] = -1;
        for (int i = 0; i < n; i++) tpar[1 + i] = par[i] + 1;
        const int32_t *pp[1] = {tpar};
        int32_t s2[2] = {0, T}, kv2[1] = {ctx - 1 + T};
        for (int j = 0; j < T; j++) rows[j] = j;
        model_batch b = {.n_tokens = T, .tokens = tok + ctx - 1, .positions = pos + ctx - 1, .n_seqs = 1,
                         .seq_start = s2, .seq_kv_len = kv2, .seq_slots = sl, .n_logits = T, .logit_rows = rows,
                         .seq_tree_parent = pass == 1 ? pp : NULL};
        if (model_forward(m, kv, &b, logits, pool)) return 1;
        for (int i = 0; i < reps; i++) {
            double t0 = time_now_sec();
            model_forward(m, kv, &b, logits, pool);
            lat[i] = time_now_sec() - t0;
        }
        if (pass == 1) v_tree = med_best(lat, reps, &bv_tree);
        else if (pass == 2) v_same = med_best(lat, reps, &bv_same);
        else v_chain = med_best(lat, reps, &bv_chain);
    }
    printf("%s + %s: ctx %d, %d thread(s), chain %d steps vs tree (%d steps, topk %d, %d nodes, depth %d)\n", argv[1],
           argv[2], ctx, threads, steps, steps, topk, n, depth);
    printf("draft   chain %8.3f ms  tree %8.3f ms  x%.2f | best %8.3f / %8.3f ms  x%.2f\n", t_chain * 1e3,
           t_tree * 1e3, t_tree / t_chain, b_chain * 1e3, b_tree * 1e3, b_tree / b_chain);
    printf("verify  chain %8.3f ms  tree %8.3f ms  x%.2f | best %8.3f / %8.3f ms  x%.2f  (%d vs %d rows)\n",
           v_chain * 1e3, v_tree * 1e3, v_tree / v_chain, bv_chain * 1e3, bv_tree * 1e3, bv_tree / bv_chain,
           1 + steps, 1 + n);
    printf("verify  %d causal rows %8.3f ms: the tree mask costs x%.2f | best %8.3f ms  x%.2f\n", 1 + n, v_same * 1e3,
           v_tree / v_same, bv_same * 1e3, bv_tree / bv_same);
    printf("{\"ctx\":%d,\"steps\":%d,\"topk\":%d,\"nodes\":%d,\"draft_ms\":[%.4f,%.4f],\"verify_ms\":[%.4f,%.4f,%.4f]}\n",
           ctx, steps, topk, n, t_chain * 1e3, t_tree * 1e3, v_chain * 1e3, v_tree * 1e3, v_same * 1e3);
    spec_eagle_req_release(e, &r);
    spec_eagle_destroy(e);
    free(tok), free(pos), free(slots), free(logits), free(lat);
    model_kv_destroy(kv);
    tpool_destroy(pool);
    model_free(m);
    return 0;
}
