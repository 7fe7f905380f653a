/* bench_mla_prefill — MLA (DeepSeek) prefill chunks, expanded vs absorbed
 * attention (src/model/mla.c), end to end through model_forward.
 *
 * DESIGN: a chunk of N new tokens over a cached prefix of P tokens is what
 * chunked prefill and radix-cache hits run; `sglc bench-one-batch` has no
 * prefix.  This program loads a DeepSeek config with dummy weights (bf16,
 * --layers and --override change the config), and per case P:N writes P
 * random latent rows (kv_lora_rank + rope values, unit scale, through the
 * model's own store kern_kv_store_tok) into every layer of a bf16 cache,
 * then times forwards of the N tokens at positions P..P+N-1 (last row's
 * logits), the three modes alternately (model_set_mla_expand_min 1 =
 * expanded, INT_MAX = absorbed, 0 = the automatic rule, which should pick
 * the faster one), `--rounds` rounds after one untimed forward of each.
 * Prints one JSON line per timed forward, then per case the medians and
 * absorbed / expanded.
 *
 * Usage: build/bench/bench_mla_prefill --model-path CONFIG_DIR [--layers L]
 *            [--override JSON] [--cases 0:512,0:2048,2048:64] [--rounds R] [--threads T] */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_common.h"
#include "kernels/kernels.h"
#include "model/arch.h"
#include "model/model.h"
#include "util/dtype.h"
#include "util/threadpool.h"
#include "util/timeutil.h"

int main(int argc, char **argv)
{
    const char *mp = NULL, *cases = "0:512,0:2048", *override = NULL;
    int rounds = 3, threads = 2, layers = 0;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--model-path")) mp = argv[i + 1];
        else if (!strcmp(argv[i], "--cases")) cases = argv[i + 1];
        else if (!strcmp(argv[i], "--override")) override = argv[i + 1];
        else if (!strcmp(argv[i], "--rounds")) rounds = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--threads")) threads = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--layers")) layers = atoi(argv[i + 1]);
        else {
            fprintf(stderr, "unknown option %s\n", argv[i]);
            return 2;
        }
    }
    if (!mp || rounds < 1 || rounds > 64 || threads < 1 || threads > 256) {
        fprintf(stderr, "usage: %s --model-path DIR [--layers L] [--override JSON] [--cases P:N,...] "
                        "[--rounds R] [--threads T]\n", argv[0]);
        return 2;
    }
    if (kernels_init(NULL)) return 1;
    char err[1024], ovr[4096];
    if (layers > 0 && override && override[0] == '{')
        snprintf(ovr, sizeof ovr, "{\"num_hidden_layers\": %d, %s", layers, override + 1);
    else if (layers > 0)
        snprintf(ovr, sizeof ovr, "{\"num_hidden_layers\": %d}", layers);
    else
        snprintf(ovr, sizeof ovr, "%s", override ? override : "");
    model_load_opts lo = {.model_path = mp, .dtype = DTYPE_BF16, .load_format = MODEL_LOAD_DUMMY,
                          .random_seed = 1, .override_json = ovr[0] ? ovr : NULL};
    model *m = model_load(&lo, err, sizeof err);
    if (!m) {
        fprintf(stderr, "bench_mla_prefill: %s\n", err);
        return 1;
    }
    const model_config *c = model_get_config(m);
    if (!c->arch || !c->arch->mla) {
        fprintf(stderr, "bench_mla_prefill: %s has no multi-head latent attention\n", mp);
        return 2;
    }
    const int V = c->vocab_size, dl = c->kv_lora_rank + c->qk_rope_dim;
    tpool *pool = tpool_create(threads);
    if (!pool) return 1;
    printf("{\"bench\":\"setup\",\"isa\":\"%s\",\"threads\":%d,\"layers\":%d,\"heads\":%d,\"kv_lora_rank\":%d,"
           "\"rope\":%d,\"nope\":%d,\"v\":%d,\"weight_bytes\":%zu}\n", kernels_isa_name(kernels_isa()), threads,
           c->n_layer, c->n_head, c->kv_lora_rank, c->qk_rope_dim, c->qk_nope_dim, c->v_head_dim,
           model_weight_bytes(m));
    fflush(stdout);
    float *logits = malloc(sizeof(float) * (size_t)V), *x = malloc(sizeof(float) * (size_t)dl);
    if (!logits || !x) return 1;
    uint64_t r = 0x9E3779B97F4A7C15ull;
    for (const char *p = cases; *p;) {
        int P = 0, N = 0;
        if (sscanf(p, "%d:%d", &P, &N) != 2 || P < 0 || N < 1) {
            fprintf(stderr, "bad case '%s' (want PREFIX:NEW)\n", p);
            return 2;
        }
        const int L = P + N;
        int32_t *slots = malloc(sizeof(int32_t) * (size_t)L), *tok = malloc(sizeof(int32_t) * (size_t)N);
        int32_t *pos = malloc(sizeof(int32_t) * (size_t)N);
        if (!slots || !tok || !pos) return 1;
        for (int i = 0; i < L; i++) slots[i] = i;
        model_kv *kv = model_kv_create(m, L, DTYPE_BF16);
        if (!kv || model_reserve(m, N < MODEL_DEFAULT_CHUNK ? N : MODEL_DEFAULT_CHUNK, L, threads)) return 1;
        for (int il = 0; il < c->n_layer; il++)
            for (int i = 0; i < P; i++) {
                for (int d = 0; d < dl; d++) {
                    r ^= r << 13, r ^= r >> 7, r ^= r << 17;
                    x[d] = (float)((r >> 40) & 0xFFFF) / 32768.0f - 1.0f;
                }
                kern_kv_store_tok(kv->k[il], kv->k_tok ? kv->k_tok[il] : NULL, kv->dt, i, 1, dl, x, kv->k_scale[il]);
            }
        for (int i = 0; i < N; i++) {
            tok[i] = (int32_t)((i * 7919 + 13) % (V < 10000 ? V : 10000));
            pos[i] = P + i;
        }
        const int32_t start[2] = {0, N}, kvl[1] = {L}, row[1] = {N - 1};
        const int32_t *sl[1] = {slots};
        model_batch b = {.n_tokens = N, .tokens = tok, .positions = pos, .n_seqs = 1, .seq_start = start,
                         .seq_kv_len = kvl, .seq_slots = sl, .n_logits = 1, .logit_rows = row};
        double t[3][64];
        static const char *const mode[3] = {"expanded", "absorbed", "auto"};
        for (int rd = -1; rd < rounds; rd++)
            for (int k = 0; k < 3; k++) {
                model_set_mla_expand_min(m, k == 0 ? 1 : k == 1 ? INT_MAX : 0);
                double t0 = time_now_sec();
                if (model_forward(m, kv, &b, logits, pool)) return 1;
                double dt = time_now_sec() - t0;
                if (rd < 0) continue; /* untimed: scratch and expansion buffer grow here */
                t[k][rd] = dt;
                printf("{\"bench\":\"forward\",\"round\":%d,\"mode\":\"%s\",\"prefix\":%d,\"new\":%d,\"s\":%.4f}\n",
                       rd, mode[k], P, N, dt);
                fflush(stdout);
            }
        double me = bench_median(t[0], rounds), ma = bench_median(t[1], rounds), mu = bench_median(t[2], rounds);
        printf("{\"bench\":\"median\",\"prefix\":%d,\"new\":%d,\"expanded_s\":%.4f,\"absorbed_s\":%.4f,"
               "\"auto_s\":%.4f,\"absorbed_over_expanded\":%.3f}\n", P, N, me, ma, mu, ma / me);
        fflush(stdout);
        model_kv_destroy(kv);
        free(slots), free(tok), free(pos);
        const char *e = strchr(p, ',');
        if (!e) break;
        p = e + 1;
    }
    free(logits), free(x);
    tpool_destroy(pool);
    model_free(m);
    return 0;
}
