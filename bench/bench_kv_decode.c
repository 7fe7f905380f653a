/* bench_kv_decode — end-to-end decode steps (model_forward, every layer and
 * the LM head) at a long context, per KV cache dtype.
 *
 * DESIGN: `sglc bench-one-batch --input-len 4096` spends minutes in the
 * prefill before its first decode step (on this 2-core machine 131 s for
 * ONE sequence of a 2-layer Llama-3.2-1B; 16 sequences of the full model
 * would take hours), and a decode step's cost does not depend on what the
 * cached K/V values are.  So this program loads the model (dummy weights
 * from a config, as bench-one-batch --load-format dummy), makes one KV
 * cache per dtype, writes `--context` tokens of random K/V rows into every
 * layer of every sequence through the same store the model uses
 * (kern_kv_store_tok: bf16 rounding, fp8 encoding, int8 per-token-head
 * scales), and then times real decode steps: B new tokens at positions
 * context, context + 1, ... through model_forward.  The dtypes run
 * alternately, `--rounds` times, each round `--steps` timed steps after one
 * untimed one; reported per round and dtype: the median step (s) and
 * tokens/s, JSON lines, then the median over rounds.  The filled values
 * are random: this times steps, it produces no meaningful tokens, and it
 * is a bench binary only (nothing in sglc can start from such a cache).
 * "cpu_s": the step's process CPU time / threads (less sensitive to other
 * processes holding the cores than the wall time).
 *
 * --model-path may also be a GGUF file (e.g. a Q4_0 Llama-3.2-1B): its real
 * weights are loaded instead of dummy bf16 ones, so a step reads fewer
 * weight bytes and the KV cache's share of a step is larger.
 *
 * Usage: build/bench/bench_kv_decode --model-path CONFIG_DIR [--batch B]
 *            [--context C] [--steps N] [--rounds R] [--threads T]
 *            [--kv bf16,fp8_e4m3,int8] [--layers L (override num_hidden_layers)] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_common.h"
#include "kernels/kernels.h"
#include "model/arch.h"
#include "model/model.h"
#include "util/dtype.h"
#include "util/threadpool.h"
#include "util/timeutil.h"

static double proc_cpu(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int kv_of(const char *s)
{
    return !strcmp(s, "bf16") ? DTYPE_BF16 : !strcmp(s, "fp8_e4m3") ? DTYPE_F8_E4M3 : !strcmp(s, "fp8_e5m2") ? DTYPE_F8_E5M2
           : !strcmp(s, "int8") ? DTYPE_I8 : !strcmp(s, "f32") ? DTYPE_F32 : -1;
}

int main(int argc, char **argv)
{
    const char *mp = NULL, *kvs = "bf16,fp8_e4m3,int8";
    int B = 1, C = 4096, steps = 5, rounds = 3, threads = 2, layers = 0;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--model-path")) mp = argv[i + 1];
        else if (!strcmp(argv[i], "--batch")) B = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--context")) C = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--steps")) steps = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--rounds")) rounds = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--threads")) threads = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--kv")) kvs = argv[i + 1];
        else if (!strcmp(argv[i], "--layers")) layers = atoi(argv[i + 1]);
        else {
            fprintf(stderr, "unknown option %s\n", argv[i]);
            return 2;
        }
    }
    if (!mp || B < 1 || B > 256 || C < 1 || steps < 1 || steps > 64 || rounds < 1 || rounds > 16 ||
        threads < 1 || threads > 256) {
        fprintf(stderr, "usage: %s --model-path DIR [--batch B] [--context C] [--steps N] [--rounds R] "
                        "[--threads T] [--kv LIST] [--layers L]\n", argv[0]);
        return 2;
    }
    enum { MAXKV = 5 };
    int kd[MAXKV], nkv = 0;
    char names[MAXKV][16];
    for (const char *p = kvs; *p && nkv < MAXKV;) {
        const char *e = strchr(p, ',');
        size_t l = e ? (size_t)(e - p) : strlen(p);
        snprintf(names[nkv], sizeof names[nkv], "%.*s", (int)(l < 15 ? l : 15), p);
        if ((kd[nkv] = kv_of(names[nkv])) < 0) {
            fprintf(stderr, "unknown kv dtype %s\n", names[nkv]);
            return 2;
        }
        nkv++;
        if (!e) break;
        p = e + 1;
    }
    if (kernels_init(NULL)) return 1;
    char err[1024], ovr[64];
    snprintf(ovr, sizeof ovr, "{\"num_hidden_layers\": %d}", layers);
    size_t mpl = strlen(mp);
    const int gguf = mpl > 5 && !strcmp(mp + mpl - 5, ".gguf");
    model_load_opts lo = {.model_path = mp, .dtype = DTYPE_BF16, .load_format = gguf ? MODEL_LOAD_AUTO : MODEL_LOAD_DUMMY,
                          .random_seed = 1, .override_json = layers > 0 ? ovr : NULL};
    model *m = model_load(&lo, err, sizeof err);
    if (!m) {
        fprintf(stderr, "bench_kv_decode: %s\n", err);
        return 1;
    }
    const model_config *c = model_get_config(m);
    if (c->arch && c->arch->mla) {
        fprintf(stderr, "bench_kv_decode: MLA models are not supported here (latent rows)\n");
        return 2;
    }
    const int V = c->vocab_size, L = C + steps + 1, nkh = c->n_kv_head, hd = c->head_dim;
    const int row = nkh * hd;
    tpool *pool = tpool_create(threads);
    if (!pool || model_reserve(m, B, L, threads)) return 1;
    printf("{\"bench\":\"setup\",\"isa\":\"%s\",\"threads\":%d,\"layers\":%d,\"batch\":%d,\"context\":%d,"
           "\"weight_bytes\":%zu}\n", kernels_isa_name(kernels_isa()), threads, c->n_layer, B, C, model_weight_bytes(m));
    /* slots: sequence s owns [s L, (s + 1) L) */
    int32_t *slots = malloc(sizeof(int32_t) * (size_t)B * L), *tok = malloc(sizeof(int32_t) * B);
    int32_t *pos = malloc(sizeof(int32_t) * B), *start = malloc(sizeof(int32_t) * (B + 1));
    int32_t *kvl = malloc(sizeof(int32_t) * B), *rows = malloc(sizeof(int32_t) * B);
    const int32_t **sl = malloc(sizeof(int32_t *) * B);
    float *logits = malloc(sizeof(float) * (size_t)B * V), *x = malloc(sizeof(float) * row);
    model_kv *kv[MAXKV] = {0};
    if (!slots || !tok || !pos || !start || !kvl || !rows || !sl || !logits || !x) return 1;
    for (int s = 0; s < B; s++) {
        for (int p = 0; p < L; p++) slots[(size_t)s * L + p] = s * L + p;
        sl[s] = slots + (size_t)s * L;
    }
    uint64_t r = 0x9E3779B97F4A7C15ull;
    for (int k = 0; k < nkv; k++) {
        kv[k] = model_kv_create(m, B * L, (dtype)kd[k]);
        if (!kv[k]) return 1;
        double t0 = time_now_sec();
        for (int il = 0; il < c->n_layer; il++)
            for (int s = 0; s < B; s++)
                for (int p = 0; p < C; p++)
                    for (int w = 0; w < 2; w++) {
                        for (int i = 0; i < row; i++) {
                            r ^= r << 13, r ^= r >> 7, r ^= r << 17;
                            x[i] = ((float)((r >> 40) & 0xFFFF) / 32768.0f - 1.0f) * (w ? 1.0f : 2.0f);
                        }
                        void *cache = w ? kv[k]->v[il] : kv[k]->k[il];
                        float *ts = kv[k]->k_tok ? (w ? kv[k]->v_tok[il] : kv[k]->k_tok[il]) : NULL;
                        kern_kv_store_tok(cache, ts, kv[k]->dt, s * L + p, nkh, hd, x, w ? kv[k]->v_scale[il] : kv[k]->k_scale[il]);
                    }
        printf("{\"bench\":\"fill\",\"kv\":\"%s\",\"kv_bytes\":%zu,\"s\":%.1f}\n", names[k], kv[k]->bytes,
               time_now_sec() - t0);
        fflush(stdout);
    }
    double med[MAXKV][16], cmed[MAXKV][16], lat[65], clat[65];
    for (int rd = 0; rd < rounds; rd++)
        for (int k = 0; k < nkv; k++) {
            int n = 0;
            for (int st = 0; st <= steps; st++) {
                for (int s = 0; s < B; s++) {
                    tok[s] = (int32_t)((s * 7919 + st * 104729) % (V < 10000 ? V : 10000));
                    pos[s] = C + st;
                    start[s] = s;
                    kvl[s] = C + st + 1;
                    rows[s] = s;
                }
                start[B] = B;
                model_batch b = {.n_tokens = B, .tokens = tok, .positions = pos, .n_seqs = B, .seq_start = start,
                                 .seq_kv_len = kvl, .seq_slots = sl, .n_logits = B, .logit_rows = rows};
                double t0 = time_now_sec(), c0 = proc_cpu();
                if (model_forward(m, kv[k], &b, logits, pool)) return 1;
                if (st > 0) { /* the first step is untimed */
                    clat[n] = (proc_cpu() - c0) / threads;
                    lat[n++] = time_now_sec() - t0;
                }
            }
            med[k][rd] = bench_median(lat, n);
            cmed[k][rd] = bench_median(clat, n);
            printf("{\"bench\":\"decode\",\"round\":%d,\"kv\":\"%s\",\"batch\":%d,\"context\":%d,\"step_s\":%.4f,"
                   "\"tok_s\":%.2f,\"cpu_s\":%.4f}\n", rd, names[k], B, C, med[k][rd], B / med[k][rd], cmed[k][rd]);
            fflush(stdout);
        }
    for (int k = 0; k < nkv; k++) {
        double mm = bench_median(med[k], rounds), cm = bench_median(cmed[k], rounds);
        printf("{\"bench\":\"decode_median\",\"kv\":\"%s\",\"batch\":%d,\"context\":%d,\"step_s\":%.4f,\"tok_s\":%.2f,"
               "\"vs_first\":%.3f,\"cpu_s\":%.4f,\"cpu_vs_first\":%.3f}\n", names[k], B, C, mm, B / mm,
               bench_median(med[0], rounds) / mm, cm, bench_median(cmed[0], rounds) / cm);
    }
    for (int k = 0; k < nkv; k++) model_kv_destroy(kv[k]);
    free(slots), free(tok), free(pos), free(start), free(kvl), free(rows), free(sl), free(logits), free(x);
    tpool_destroy(pool);
    model_free(m);
    return 0;
}
