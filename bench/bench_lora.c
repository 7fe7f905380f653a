/* bench_lora — batched decode with many LoRA adapters against the base
 * model, and the time to load one adapter (issue 14's speed targets).
 *
 * DESIGN: a dummy-weight model from a real config (default Llama-3.2-1B,
 * bf16 weights), B sequences with a P-token prefix each (one base
 * prefill), then decode steps of B rows that alternate base-only steps
 * and steps where row i runs adapter i % A (A random rank-R adapters on
 * all seven projections, built in memory), so both kinds see the same KV
 * lengths and the same machine noise.  Before timing: a LoRA step's
 * logits must be finite and differ from the base step's.  Reported per
 * kind: median wall seconds per step and tokens/s, and the CPU-normalized
 * rate (B tokens over the step's process CPU time / threads; pool workers
 * spin at barriers, so this counts waiting too, but not time another
 * process held the core).  Load time: one rank-R adapter on all seven
 * projections written as a PEFT folder (BF16 safetensors) and loaded with
 * lora_adapter_load, median of 5 loads (the first, colder one printed too).
 * JSON lines.
 *
 * Usage: build/bench/bench_lora [--model-path DIR] [--batch 16] [--adapters 8]
 *        [--rank 16] [--prefix 128] [--steps 8] [--threads 2] [--adapter-dtype bf16|f32] */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "bench_common.h"
#include "lora/lora.h"
#include "model/model.h"
#include "util/dtype.h"
#include "util/threadpool.h"
#include "util/timeutil.h"

static uint64_t rs = 88172645463325252ull;
static float frand(void)
{
    rs ^= rs << 13, rs ^= rs >> 7, rs ^= rs << 17;
    return (float)(rs >> 40) / (float)(1 << 24) - 0.5f;
}

static double proc_cpu(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* One in-memory adapter: rank r on every projection of m, f32 or bf16
 * (what a BF16 PEFT file loads as). */
static model_adapter make_adapter(const model *m, int r, int bf16, float **mem)
{
    const model_config *c = model_get_config(m);
    size_t tot = 0;
    for (int l = 0; l < c->n_layer; l++)
        for (int p = 0; p < MODEL_NPROJ; p++) {
            int n, k;
            if (!model_proj_shape(m, l, (model_proj)p, &n, &k)) tot += (size_t)r * (size_t)(n + k);
        }
    float *v = malloc(sizeof(float) * tot), *q = v;
    linear_adapter *proj = calloc((size_t)c->n_layer * MODEL_NPROJ, sizeof *proj);
    for (int l = 0; l < c->n_layer; l++)
        for (int p = 0; p < MODEL_NPROJ; p++) {
            int n, k;
            if (model_proj_shape(m, l, (model_proj)p, &n, &k)) continue;
            linear_adapter *la = &proj[l * MODEL_NPROJ + p];
            la->rank = r, la->scale = 2.0f, la->a = q, la->dt = bf16 ? DTYPE_BF16 : DTYPE_F32;
            uint16_t *h = (uint16_t *)q;
            for (size_t i = 0; i < (size_t)r * k; i++) {
                float x = frand() / sqrtf((float)k);
                if (bf16) h[i] = f32_to_bf16(x);
                else q[i] = x;
            }
            q = bf16 ? (float *)(h + (size_t)r * k) : q + (size_t)r * k;
            la->bt = q;
            h = (uint16_t *)q;
            for (size_t i = 0; i < (size_t)r * n; i++) {
                float x = frand() * 0.05f;
                if (bf16) h[i] = f32_to_bf16(x);
                else q[i] = x;
            }
            q = bf16 ? (float *)(h + (size_t)r * n) : q + (size_t)r * n;
        }
    *mem = v;
    model_adapter ma = {.n_layer = c->n_layer, .proj = proj};
    return ma;
}

/* A PEFT folder (BF16) for m: rank r on all seven projections. */
static int write_peft(const char *dir, const model *m, int r)
{
    static const char *pn[MODEL_NPROJ] = {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj",
                                          "self_attn.o_proj", "mlp.gate_proj",    "mlp.up_proj",
                                          "mlp.down_proj"};
    const model_config *c = model_get_config(m);
    mkdir(dir, 0755);
    char path[600];
    snprintf(path, sizeof path, "%s/adapter_config.json", dir);
    FILE *f = fopen(path, "w");
    if (!f) return -1;
    fprintf(f, "{\"peft_type\":\"LORA\",\"r\":%d,\"lora_alpha\":%d,\"target_modules\":[\"q_proj\",\"k_proj\","
               "\"v_proj\",\"o_proj\",\"gate_proj\",\"up_proj\",\"down_proj\"]}", r, 2 * r);
    fclose(f);
    size_t cap = 1 << 20, o = 0, off = 0;
    char *hdr = malloc(cap);
    o += (size_t)snprintf(hdr, cap, "{");
    for (int l = 0; l < c->n_layer; l++)
        for (int p = 0; p < MODEL_NPROJ; p++) {
            int n, k;
            if (model_proj_shape(m, l, (model_proj)p, &n, &k)) continue;
            for (int ab = 0; ab < 2; ab++) {
                int d0 = ab ? n : r, d1 = ab ? r : k;
                size_t nb = (size_t)d0 * d1 * 2;
                o += (size_t)snprintf(hdr + o, cap - o,
                                      "%s\"base_model.model.model.layers.%d.%s.lora_%c.weight\":{\"dtype\":\"BF16\","
                                      "\"shape\":[%d,%d],\"data_offsets\":[%zu,%zu]}",
                                      o > 1 ? "," : "", l, pn[p], ab ? 'B' : 'A', d0, d1, off, off + nb);
                off += nb;
            }
        }
    o += (size_t)snprintf(hdr + o, cap - o, "}");
    while (o % 8) hdr[o++] = ' ';
    snprintf(path, sizeof path, "%s/adapter_model.safetensors", dir);
    f = fopen(path, "wb");
    if (!f) return -1;
    uint64_t hl = o;
    fwrite(&hl, 8, 1, f);
    fwrite(hdr, 1, o, f);
    uint16_t buf[4096];
    for (size_t i = 0; i < off / 2; i += 4096) {
        size_t nn = off / 2 - i < 4096 ? off / 2 - i : 4096;
        for (size_t j = 0; j < nn; j++) buf[j] = f32_to_bf16(frand() * 0.05f);
        fwrite(buf, 2, nn, f);
    }
    fclose(f);
    free(hdr);
    return 0;
}

int main(int argc, char **argv)
{
    const char *mp = "../shared/models/configs/meta-llama__Llama-3.2-1B-Instruct";
    int B = 16, A = 8, R = 16, P = 128, steps = 8, threads = 2, abf16 = 1;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--model-path")) mp = argv[i + 1];
        else if (!strcmp(argv[i], "--batch")) B = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--adapters")) A = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--rank")) R = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--prefix")) P = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--steps")) steps = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--threads")) threads = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--adapter-dtype")) abf16 = strcmp(argv[i + 1], "f32") != 0;
        else {
            fprintf(stderr, "unknown option %s\n", argv[i]);
            return 2;
        }
    }
    if (B < 1 || B > 256 || A < 1 || A > 64 || R < 1 || R > LINEAR_MAX_RANK || P < 1 || steps < 1) return 2;
    kernels_init(NULL);
    char err[1024];
    model_load_opts lo = {.model_path = mp, .dtype = DTYPE_BF16, .load_format = MODEL_LOAD_DUMMY,
                          .random_seed = 1};
    model *m = model_load(&lo, err, sizeof err);
    if (!m) {
        fprintf(stderr, "bench_lora: %s\n", err);
        return 1;
    }
    const model_config *c = model_get_config(m);
    const int V = c->vocab_size, L = P + 2 * steps + 4;

    /* load time of one PEFT folder */
    char dir[256];
    snprintf(dir, sizeof dir, "/tmp/sglc-bench-lora-%d", (int)getpid());
    if (write_peft(dir, m, R)) return 1;
    double lt[5], first = 0;
    size_t abytes = 0;
    for (int i = 0; i < 5; i++) {
        lora_limits lim = {0};
        double t0 = time_now_sec();
        lora_adapter *ad = lora_adapter_load("bench", dir, m, &lim, err, sizeof err);
        lt[i] = (time_now_sec() - t0) * 1e3;
        if (!ad) {
            fprintf(stderr, "bench_lora: %s\n", err);
            return 1;
        }
        abytes = ad->bytes;
        lora_adapter_unref(ad);
        if (i == 0) first = lt[0];
    }
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd)) { /* best effort */
    }
    printf("{\"bench\":\"lora_load\",\"rank\":%d,\"targets\":7,\"layers\":%d,\"file\":\"bf16\",\"stored_mib\":%.1f,\"first_ms\":%.1f,"
           "\"median_ms\":%.1f}\n",
           R, c->n_layer, abytes / 1048576.0, first, bench_median(lt, 5));
    fflush(stdout);

    /* adapters in memory, KV, the prefix */
    float **mems = calloc((size_t)A, sizeof *mems);
    model_adapter *ads = calloc((size_t)A, sizeof *ads);
    const model_adapter **adp = calloc((size_t)A, sizeof *adp);
    for (int i = 0; i < A; i++) ads[i] = make_adapter(m, R, abf16, &mems[i]), adp[i] = &ads[i];
    model_kv *kv = model_kv_create(m, B * L, DTYPE_BF16);
    tpool *pool = tpool_create(threads);
    if (!kv || !pool || model_reserve(m, B * P, L, threads)) return 1;
    int32_t *slots = malloc(sizeof(int32_t) * (size_t)B * L);
    const int32_t **sl = malloc(sizeof(int32_t *) * (size_t)B);
    for (int i = 0; i < B * L; i++) slots[i] = i;
    for (int s = 0; s < B; s++) sl[s] = slots + (size_t)s * L;
    int32_t *tok = malloc(sizeof(int32_t) * (size_t)B * P), *pos = malloc(sizeof(int32_t) * (size_t)B * P);
    int32_t *start = malloc(sizeof(int32_t) * (size_t)(B + 1)), *kvl = malloc(sizeof(int32_t) * (size_t)B);
    int32_t *rows = malloc(sizeof(int32_t) * (size_t)B), *sad = malloc(sizeof(int32_t) * (size_t)B);
    float *lg = malloc(sizeof(float) * (size_t)B * V), *lg2 = malloc(sizeof(float) * (size_t)B * V);
    for (int s = 0; s < B; s++) {
        start[s] = s * P;
        kvl[s] = P;
        rows[s] = s * P + P - 1;
        sad[s] = s % A;
        for (int j = 0; j < P; j++) tok[s * P + j] = (int32_t)((s * 977 + j * 131 + 7) % V), pos[s * P + j] = j;
    }
    start[B] = B * P;
    model_batch pb = {.n_tokens = B * P, .tokens = tok, .positions = pos, .n_seqs = B, .seq_start = start,
                      .seq_kv_len = kvl, .seq_slots = sl, .n_logits = B, .logit_rows = rows};
    if (model_forward(m, kv, &pb, lg, pool)) return 1;

    /* decode steps: even = base, odd = LoRA */
    int len = P;
    double tw[2][64], tc[2][64];
    int nt[2] = {0, 0};
    for (int st = -2; st < 2 * steps; st++) {
        int lora = (st + 2) % 2;
        for (int s = 0; s < B; s++) {
            start[s] = s;
            tok[s] = (int32_t)((s * 31 + len * 7) % V);
            pos[s] = len;
            kvl[s] = len + 1;
            rows[s] = s;
        }
        start[B] = B;
        model_batch db = {.n_tokens = B, .tokens = tok, .positions = pos, .n_seqs = B, .seq_start = start,
                          .seq_kv_len = kvl, .seq_slots = sl, .n_logits = B, .logit_rows = rows,
                          .n_adapters = lora ? A : 0, .adapters = adp, .seq_adapter = lora ? sad : NULL};
        double w0 = time_now_sec(), c0 = proc_cpu();
        if (model_forward(m, kv, &db, lora ? lg2 : lg, pool)) return 1;
        double w = time_now_sec() - w0, cpu = proc_cpu() - c0;
        len++;
        if (st == -1) { /* validation: the LoRA step vs the base step just before (kv one longer) */
            int finite = 1;
            double d = 0;
            for (size_t i = 0; i < (size_t)B * V; i++) {
                finite &= isfinite(lg2[i]);
                d = fmax(d, fabs((double)lg2[i] - lg[i]));
            }
            if (!finite || d == 0) {
                fprintf(stderr, "bench_lora: validation failed (finite %d, max diff %g)\n", finite, d);
                return 1;
            }
        }
        if (st < 0 || nt[lora] >= 64) continue;
        tw[lora][nt[lora]] = w;
        tc[lora][nt[lora]++] = cpu / threads;
    }
    double wb = bench_median(tw[0], nt[0]), wl = bench_median(tw[1], nt[1]);
    double cb = bench_median(tc[0], nt[0]), cl = bench_median(tc[1], nt[1]);
    printf("{\"bench\":\"lora_decode\",\"model\":\"%s\",\"dtype\":\"bf16\",\"threads\":%d,\"batch\":%d,"
           "\"adapters\":%d,\"adapter_dtype\":\"%s\",\"rank\":%d,\"targets\":7,\"prefix\":%d,\"steps\":%d,"
           "\"base_tok_s\":%.2f,\"lora_tok_s\":%.2f,\"ratio_wall\":%.3f,"
           "\"base_tok_s_cpu\":%.2f,\"lora_tok_s_cpu\":%.2f,\"ratio_cpu\":%.3f}\n",
           mp, threads, B, A, abf16 ? "bf16" : "f32", R, P, steps, B / wb, B / wl, wb / wl, B / cb, B / cl, cb / cl);
    for (int i = 0; i < A; i++) free(mems[i]), free((void *)ads[i].proj);
    free(mems), free(ads), free(adp), free(slots), free(sl), free(tok), free(pos), free(start), free(kvl);
    free(rows), free(sad), free(lg), free(lg2);
    tpool_destroy(pool);
    model_kv_destroy(kv);
    model_free(m);
    return 0;
}
