/* test_lora — src/lora and the adapter pass of linear():
 *   - adapter_config.json parsing: fields, defaults, every refused variant
 *     (DoRA, rank/alpha patterns, biases, modules_to_save, fan_in_fan_out,
 *     regex targets) with a message; --lora-paths entry forms;
 *   - the shrink / expand kernels: AVX2 against the scalar reference over
 *     odd sizes, several adapters (f32 and bf16), rows without one, thread
 *     splits;
 *   - PEFT folders written here by hand against TinyStories-656K: shape,
 *     rank, name, missing-file and pickle checks, each with its message;
 *     the whole forward against merged weights
 *     is the golden test's job (tests/ref/lora_ref.py); here a batch mixing 8 adapters
 *     and the base gives every sequence the logits it gets alone (to the
 *     base product's own batch invariance, 1e-5; the base row bit for bit
 *     as in the same batch without adapters);
 *   - the registry: duplicate names, unload while held, --max-loaded-loras
 *     eviction by lru and fifo, pinned adapters stay. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "kernels/kernels.h"
#include "lora/lora.h"
#include "model/linear.h"
#include "model/model.h"
#include "util/cpu.h"

static const char *shared_dir(void)
{
    const char *s = getenv("SGLC_SHARED");
    return s && *s ? s : "../shared";
}

static uint64_t rs = 12345;
static float frand(void)
{
    rs = rs * 6364136223846793005ull + 1442695040888963407ull;
    return (float)(rs >> 40) / (float)(1 << 24) - 0.5f;
}

/* ---- config ------------------------------------------------------------ */

static int parse(const char *j, lora_config *c, char *err)
{
    return lora_config_parse(j, strlen(j), c, err, 512);
}

static void test_config(void **state)
{
    (void)state;
    lora_config c;
    char err[512];
    assert_int_equal(parse("{\"peft_type\":\"LORA\",\"r\":16,\"lora_alpha\":32,\"use_rslora\":true,"
                           "\"target_modules\":[\"q_proj\",\"v_proj\",\"down_proj\"],\"bias\":\"none\","
                           "\"use_dora\":false,\"modules_to_save\":null,\"rank_pattern\":{},"
                           "\"lora_dropout\":0.1,\"base_model_name_or_path\":\"m/x\"}",
                           &c, err),
                     0);
    assert_int_equal(c.r, 16);
    assert_true(c.alpha == 32.0);
    assert_true(c.use_rslora);
    assert_int_equal(c.targets, (1u << MODEL_PROJ_Q) | (1u << MODEL_PROJ_V) | (1u << MODEL_PROJ_DOWN));
    assert_string_equal(c.base_model, "m/x");
    char names[128];
    lora_targets_str(c.targets, names, sizeof names);
    assert_string_equal(names, "q_proj,v_proj,down_proj");
    /* PEFT defaults: r 8, alpha 8; "all-linear" */
    assert_int_equal(parse("{\"target_modules\":\"all-linear\"}", &c, err), 0);
    assert_int_equal(c.r, 8);
    assert_true(c.alpha == 8.0);
    assert_int_equal(c.targets, LORA_T_ALL_LINEAR);
    assert_int_equal(parse("{\"r\":4,\"target_modules\":[\"lm_head\",\"qkv_proj\"]}", &c, err), 0);
    assert_int_equal(c.targets, (1u << LORA_T_LM_HEAD) | 7u);
    static const struct {
        const char *json, *msg;
    } bad[] = {
        {"{\"r\":4,\"target_modules\":[\"q_proj\"],\"use_dora\":true}", "DoRA"},
        {"{\"r\":4,\"target_modules\":[\"q_proj\"],\"rank_pattern\":{\"q\":2}}", "rank_pattern"},
        {"{\"r\":4,\"target_modules\":[\"q_proj\"],\"alpha_pattern\":{\"q\":2}}", "alpha_pattern"},
        {"{\"r\":4,\"target_modules\":[\"q_proj\"],\"bias\":\"all\"}", "biases"},
        {"{\"r\":4,\"target_modules\":[\"q_proj\"],\"modules_to_save\":[\"lm_head\"]}", "modules_to_save"},
        {"{\"r\":4,\"target_modules\":[\"q_proj\"],\"fan_in_fan_out\":true}", "fan_in_fan_out"},
        {"{\"peft_type\":\"IA3\",\"target_modules\":[\"q_proj\"]}", "IA3"},
        {"{\"r\":4,\"target_modules\":\".*q_proj\"}", "regular expression"},
        {"{\"r\":4,\"target_modules\":[\"c_attn\"]}", "c_attn"},
        {"{\"r\":0,\"target_modules\":[\"q_proj\"]}", "r must be"},
        {"{\"r\":4}", "target_modules is missing"},
        {"{\"r\":4,\"target_modules\":[]}", "empty"},
        {"{\"r\":4,\"lora_alpha\":\"x\",\"target_modules\":[\"q_proj\"]}", "lora_alpha"},
        {"[1]", "not a JSON object"},
        {"{\"r\":4,", "invalid JSON"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err[0] = 0;
        assert_int_equal(parse(bad[i].json, &c, err), -1);
        if (!strstr(err, bad[i].msg)) fail_msg("%s: message '%s' lacks '%s'", bad[i].json, err, bad[i].msg);
    }
}

static void test_path_arg(void **state)
{
    (void)state;
    char *n, *p, err[256];
    bool pin;
    assert_int_equal(lora_parse_path_arg("lora0=/a/b", &n, &p, &pin, err, sizeof err), 0);
    assert_string_equal(n, "lora0");
    assert_string_equal(p, "/a/b");
    assert_false(pin);
    free(n), free(p);
    assert_int_equal(lora_parse_path_arg("/a/b", &n, &p, &pin, err, sizeof err), 0);
    assert_string_equal(n, "/a/b");
    assert_string_equal(p, "/a/b");
    free(n), free(p);
    assert_int_equal(lora_parse_path_arg("{\"lora_name\":\"x\",\"lora_path\":\"/q\",\"pinned\":true}", &n, &p,
                                         &pin, err, sizeof err),
                     0);
    assert_string_equal(n, "x");
    assert_string_equal(p, "/q");
    assert_true(pin);
    free(n), free(p);
    assert_int_equal(lora_parse_path_arg("{\"lora_name\":\"x\"}", &n, &p, &pin, err, sizeof err), -1);
    assert_non_null(strstr(err, "lora_path"));
    assert_int_equal(lora_parse_path_arg("=x", &n, &p, &pin, err, sizeof err), -1);
    /* an empty name in the JSON form (found by fuzz_lora_config) */
    assert_int_equal(lora_parse_path_arg("{\"lora_name\":\"\",\"lora_path\":\"/p\"}", &n, &p, &pin, err, sizeof err), -1);
    assert_null(n);
    assert_int_equal(lora_target_bits("all"), LORA_T_ALL_LINEAR | (1u << LORA_T_LM_HEAD) | (1u << LORA_T_EMBED));
    assert_int_equal(lora_target_bits("gate_up_proj"), (1u << MODEL_PROJ_GATE) | (1u << MODEL_PROJ_UP));
    assert_int_equal(lora_target_bits("nope"), 0);
    /* DeepSeek MLA names, Mixtral's expert names (w1 gate, w3 up, w2 down) */
    assert_int_equal(lora_target_bits("kv_b_proj"), 1u << LORA_T_KV_B);
    assert_int_equal(lora_target_bits("kv_a_proj_with_mqa"), 1u << LORA_T_KV_A);
    assert_int_equal(lora_target_bits("w1"), 1u << MODEL_PROJ_GATE);
    assert_int_equal(lora_target_bits("w3"), 1u << MODEL_PROJ_UP);
    assert_int_equal(lora_target_bits("w2"), 1u << MODEL_PROJ_DOWN);
    assert_true(lora_target_bits("all-linear") & (1u << LORA_T_Q_A));
    char names[256];
    lora_targets_str((1u << LORA_T_Q_B) | (1u << MODEL_PROJ_O) | (1u << LORA_T_KV_B), names, sizeof names);
    assert_string_equal(names, "o_proj,q_b_proj,kv_b_proj");
    lora_config c;
    static const char mla[] = "{\"r\": 4, \"target_modules\": [\"q_a_proj\", \"kv_b_proj\", \"w2\"]}";
    assert_int_equal(lora_config_parse(mla, strlen(mla), &c, err, sizeof err), 0);
    assert_int_equal(c.targets, (1u << LORA_T_Q_A) | (1u << LORA_T_KV_B) | (1u << MODEL_PROJ_DOWN));
}

/* ---- kernels ----------------------------------------------------------- */

static void test_kernels(void **state)
{
    (void)state;
    const int M = 11, N = 77, K = 45;
    const int ranks[3] = {5, 16, 1};
    float *a[3], *bt[3];
    uint16_t *a16 = malloc(2 * (size_t)ranks[1] * K), *b16 = malloc(2 * (size_t)ranks[1] * N);
    linear_adapter ads[3];
    for (int i = 0; i < 3; i++) {
        a[i] = malloc(sizeof(float) * (size_t)ranks[i] * K);
        bt[i] = malloc(sizeof(float) * (size_t)ranks[i] * N);
        for (int j = 0; j < ranks[i] * K; j++) a[i][j] = frand();
        for (int j = 0; j < ranks[i] * N; j++) bt[i][j] = frand();
        ads[i] = (linear_adapter){.id = 10 + i, .rank = ranks[i], .scale = 0.5f + (float)i, .a = a[i], .bt = bt[i]};
    }
    /* adapter 11 is stored bf16: the reference uses the same rounded values */
    for (int j = 0; j < ranks[1] * K; j++) a[1][j] = bf16_to_f32(a16[j] = f32_to_bf16(a[1][j]));
    for (int j = 0; j < ranks[1] * N; j++) bt[1][j] = bf16_to_f32(b16[j] = f32_to_bf16(bt[1][j]));
    ads[1].dt = DTYPE_BF16, ads[1].a = a16, ads[1].bt = b16;
    float x[11 * 45], y0[11 * 77], want[11 * 77], y1[11 * 77], y2[11 * 77];
    for (int i = 0; i < M * K; i++) x[i] = frand();
    for (int i = 0; i < M * N; i++) y0[i] = frand();
    const int32_t rows[11] = {10, -1, 11, 10, 12, 10, 10, 10, -1, 11, 99};
    /* naive double reference */
    memcpy(want, y0, sizeof want);
    for (int t = 0; t < M; t++) {
        int ai = rows[t] - 10;
        if (ai < 0 || ai > 2) continue;
        for (int c = 0; c < N; c++) {
            double d = 0;
            for (int j = 0; j < ranks[ai]; j++) {
                double u = 0;
                for (int k = 0; k < K; k++) u += (double)a[ai][j * K + k] * x[t * K + k];
                d += u * bt[ai][j * N + c];
            }
            want[t * N + c] += ads[ai].scale * (float)d;
        }
    }
    int isas[2] = {1, 2}, n_isa = cpu_get()->avx2 && cpu_get()->fma ? 2 : 1;
    for (int ii = 0; ii < n_isa; ii++) {
        memcpy(y1, y0, sizeof y1);
        linear_adapters_apply(y1, x, M, N, K, ads, 3, rows, 0, 1, isas[ii]);
        for (int i = 0; i < M * N; i++)
            if (fabsf(y1[i] - want[i]) > 1e-4f * (1 + fabsf(want[i]))) fail_msg("isa %d elem %d: %g vs %g", isas[ii], i, y1[i], want[i]);
        /* rows without an adapter (or an id not in the list) are untouched */
        assert_memory_equal(y1 + 1 * N, y0 + 1 * N, sizeof(float) * N);
        assert_memory_equal(y1 + 10 * N, y0 + 10 * N, sizeof(float) * N);
        /* three threads' column shares make the same result */
        memcpy(y2, y0, sizeof y2);
        for (int th = 0; th < 3; th++) linear_adapters_apply(y2, x, M, N, K, ads, 3, rows, th, 3, isas[ii]);
        for (int i = 0; i < M * N; i++) assert_true(fabsf(y2[i] - y1[i]) <= 1e-5f * (1 + fabsf(y1[i])));
        /* a row's delta does not depend on the other rows: row 4 alone */
        float ya[77];
        memcpy(ya, y0 + 4 * N, sizeof ya);
        int32_t one = 12;
        linear_adapters_apply(ya, x + 4 * K, 1, N, K, ads, 3, &one, 0, 1, isas[ii]);
        assert_memory_equal(ya, y1 + 4 * N, sizeof ya);
    }
    for (int i = 0; i < 3; i++) free(a[i]), free(bt[i]);
    free(a16), free(b16);
}

/* ---- PEFT folders on TinyStories-656K ---------------------------------- */

typedef struct wt {
    char name[160];
    int64_t d0, d1;
    const float *v;
} wt;

/* Write tensors as an F32 safetensors file. */
static void write_st(const char *path, const wt *t, int n)
{
    char hdr[65536];
    size_t o = 0, off = 0;
    o += (size_t)snprintf(hdr + o, sizeof hdr - o, "{\"__metadata__\":{\"format\":\"pt\"}");
    for (int i = 0; i < n; i++) {
        size_t nb = (size_t)(t[i].d0 * t[i].d1) * 4;
        o += (size_t)snprintf(hdr + o, sizeof hdr - o,
                              ",\"%s\":{\"dtype\":\"F32\",\"shape\":[%lld,%lld],\"data_offsets\":[%zu,%zu]}",
                              t[i].name, (long long)t[i].d0, (long long)t[i].d1, off, off + nb);
        off += nb;
    }
    o += (size_t)snprintf(hdr + o, sizeof hdr - o, "}");
    while (o % 8) hdr[o++] = ' ';
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    uint64_t hl = o;
    fwrite(&hl, 8, 1, f);
    fwrite(hdr, 1, o, f);
    for (int i = 0; i < n; i++) fwrite(t[i].v, 4, (size_t)(t[i].d0 * t[i].d1), f);
    fclose(f);
}

static void write_file(const char *dir, const char *name, const char *text)
{
    char p[512];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static const char *PNAME[7] = {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
                               "mlp.gate_proj",    "mlp.up_proj",      "mlp.down_proj"};

/* A random adapter folder for m: rank r on the projections in mask (bit p)
 * of every layer.  Values are kept in *keep (freed by the caller). */
static void make_adapter(const char *dir, const model *m, int r, unsigned mask, float alpha, float **keep)
{
    mkdir(dir, 0755);
    const model_config *c = model_get_config(m);
    wt t[64];
    int n = 0;
    size_t tot = 0;
    for (int l = 0; l < c->n_layer; l++)
        for (int p = 0; p < 7; p++) {
            int on, k;
            if (!(mask & (1u << p)) || model_proj_shape(m, l, (model_proj)p, &on, &k)) continue;
            tot += (size_t)r * (size_t)(on + k);
        }
    float *v = malloc(sizeof(float) * tot), *q = v;
    for (int l = 0; l < c->n_layer; l++)
        for (int p = 0; p < 7; p++) {
            int on, k;
            if (!(mask & (1u << p)) || model_proj_shape(m, l, (model_proj)p, &on, &k)) continue;
            for (int i = 0; i < r * k; i++) q[i] = frand() * 0.5f;
            snprintf(t[n].name, sizeof t[n].name, "base_model.model.model.layers.%d.%s.lora_A.weight", l, PNAME[p]);
            t[n].d0 = r, t[n].d1 = k, t[n++].v = q;
            q += (size_t)r * k;
            for (int i = 0; i < on * r; i++) q[i] = frand() * 0.5f;
            snprintf(t[n].name, sizeof t[n].name, "base_model.model.model.layers.%d.%s.lora_B.weight", l, PNAME[p]);
            t[n].d0 = on, t[n].d1 = r, t[n++].v = q;
            q += (size_t)on * r;
        }
    char p[512], names[128], cfg[512];
    snprintf(p, sizeof p, "%s/adapter_model.safetensors", dir);
    write_st(p, t, n);
    lora_targets_str(mask, names, sizeof names);
    char list[256] = "";
    for (char *s = names, *e; *s; s = e) { /* "a,b" -> "\"a\",\"b\"" */
        e = strchr(s, ',');
        size_t len = e ? (size_t)(e - s) : strlen(s);
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s\"%.*s\"", list[0] ? "," : "", (int)len, s);
        e = e ? e + 1 : s + len;
    }
    snprintf(cfg, sizeof cfg, "{\"peft_type\":\"LORA\",\"r\":%d,\"lora_alpha\":%g,\"target_modules\":[%s]}", r, alpha,
             list);
    write_file(dir, "adapter_config.json", cfg);
    *keep = v;
}

typedef struct fx {
    model *m;
    char dir[256];
} fx;

static int setup(void **state)
{
    static fx f;
    char md[512], err[512];
    snprintf(md, sizeof md, "%s/models/TinyStories-656K", shared_dir());
    if (access(md, R_OK)) {
        *state = NULL;
        return 0;
    }
    model_load_opts o = {.model_path = md, .dtype = DTYPE_F32};
    f.m = model_load(&o, err, sizeof err);
    assert_non_null(f.m);
    snprintf(f.dir, sizeof f.dir, "/tmp/sglc-test-lora-%d", (int)getpid());
    mkdir(f.dir, 0755);
    *state = &f;
    return 0;
}

static int teardown(void **state)
{
    fx *f = *state;
    if (!f) return 0;
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", f->dir);
    if (system(cmd)) { /* best effort */
    }
    model_free(f->m);
    return 0;
}

/* Prefill logits (last row of each sequence) of n sequences in one batch;
 * seq i has len[i] tokens (chosen by seed[i]) and adapter index ad[i]
 * into ads. */
static void run_batch(model *m, int n, const int *len, const int *ad, const model_adapter *const *ads, int n_ads,
                      const int *seed, float *out)
{
    int T = 0;
    for (int i = 0; i < n; i++) T += len[i];
    int32_t *tok = malloc(sizeof(int32_t) * (size_t)T), *pos = malloc(sizeof(int32_t) * (size_t)T);
    int32_t start[16], kvl[16], rows[16], sad[16];
    int32_t *slots = malloc(sizeof(int32_t) * (size_t)T);
    const int32_t *sl[16];
    int t = 0;
    for (int i = 0; i < n; i++) {
        start[i] = t;
        kvl[i] = len[i];
        sl[i] = slots + t;
        sad[i] = ad[i];
        for (int j = 0; j < len[i]; j++, t++) {
            tok[t] = 1 + (j * 37 + seed[i] * 11) % 2000;
            pos[t] = j;
            slots[t] = t;
        }
        rows[i] = t - 1;
    }
    start[n] = t;
    model_kv *kv = model_kv_create(m, T, DTYPE_F32);
    tpool *pool = tpool_create(3);
    model_batch b = {.n_tokens = T, .tokens = tok, .positions = pos, .n_seqs = n, .seq_start = start,
                     .seq_kv_len = kvl, .seq_slots = sl, .n_logits = n, .logit_rows = rows,
                     .n_adapters = n_ads, .adapters = ads, .seq_adapter = sad};
    assert_int_equal(model_forward(m, kv, &b, out, pool), 0);
    tpool_destroy(pool);
    model_kv_destroy(kv);
    free(tok), free(pos), free(slots);
}

static void test_adapters_model(void **state)
{
    fx *f = *state;
    if (!f) skip();
    const model_config *c = model_get_config(f->m);
    const int V = c->vocab_size;
    char d[9][320], err[1024];
    float *keep[9];
    lora_adapter *ad[9];
    const int ranks[8] = {1, 2, 4, 8, 16, 3, 5, 7};
    const unsigned masks[8] = {0x7f, 0x01, 0x0f, 0x70, 0x7f, 0x44, 0x12, 0x7f};
    const model_adapter *mas[8];
    for (int i = 0; i < 8; i++) {
        snprintf(d[i], sizeof d[i], "%s/a%d", f->dir, i);
        make_adapter(d[i], f->m, ranks[i], masks[i], 2.0f * (float)ranks[i], &keep[i]);
        lora_limits lim = {.max_rank = 16};
        ad[i] = lora_adapter_load("t", d[i], f->m, &lim, err, sizeof err);
        if (!ad[i]) fail_msg("%s", err);
        mas[i] = &ad[i]->ma;
        assert_true(ad[i]->ma.proj[0].rank == ((masks[i] & 1) ? ranks[i] : 0));
    }
    /* batch of 9 (8 adapters + base), different lengths, vs each alone */
    int len[9] = {5, 9, 3, 12, 7, 4, 8, 6, 10}, adi[9] = {3, 0, 7, -1, 5, 1, 6, 2, 4};
    float *all = malloc(sizeof(float) * (size_t)V * 9), *one = malloc(sizeof(float) * (size_t)V);
    float *base = malloc(sizeof(float) * (size_t)V), *allbase = malloc(sizeof(float) * (size_t)V * 9);
    const int seeds[9] = {0, 1, 2, 3, 4, 5, 6, 7, 8};
    run_batch(f->m, 9, len, adi, mas, 8, seeds, all);
    /* the same batch without adapters: the base row (3) is bit for bit the
     * same, other rows' adapters do not touch it */
    const int nobody[9] = {-1, -1, -1, -1, -1, -1, -1, -1, -1};
    run_batch(f->m, 9, len, nobody, mas, 8, seeds, allbase);
    assert_memory_equal(all + 3 * (size_t)V, allbase + 3 * (size_t)V, sizeof(float) * V);
    for (int i = 0; i < 9; i++) {
        int l1[1] = {len[i]}, a1[1];
        /* alone: only its own adapter in the batch list.  The base product
         * is batch-invariant to rounding (test_model's batched_vs_single,
         * 1e-5) and the adapter pass exactly (test_kernels), so the
         * tolerance is the base's */
        const model_adapter *m1[1] = {adi[i] >= 0 ? mas[adi[i]] : NULL};
        a1[0] = adi[i] >= 0 ? 0 : -1;
        run_batch(f->m, 1, l1, a1, m1, adi[i] >= 0 ? 1 : 0, seeds + i, one);
        float mx = 0, md = 0;
        for (int v = 0; v < V; v++) {
            mx = fmaxf(mx, fabsf(one[v]));
            md = fmaxf(md, fabsf(one[v] - all[(size_t)i * V + v]));
        }
        if (md > 1e-5f * mx) fail_msg("sequence %d (adapter %d): batch row differs by %g (max %g)", i, adi[i], md, mx);
        int a0[1] = {-1};
        run_batch(f->m, 1, l1, a0, NULL, 0, seeds + i, base);
        float dd = 0;
        for (int v = 0; v < V; v++) dd = fmaxf(dd, fabsf(one[v] - base[v]));
        if (adi[i] >= 0 && dd < 1e-2f * mx) fail_msg("adapter %d changes the logits by only %g", adi[i], dd);
    }
    free(allbase);
    free(all), free(one), free(base);
    for (int i = 0; i < 8; i++) lora_adapter_unref(ad[i]), free(keep[i]);
}

static void expect_fail(fx *f, const char *dir, int max_rank, const char *msg)
{
    char err[1024] = "";
    lora_limits lim = {.max_rank = max_rank};
    lora_adapter *a = lora_adapter_load("bad", dir, f->m, &lim, err, sizeof err);
    if (a) fail_msg("%s loaded, expected an error with '%s'", dir, msg);
    if (!strstr(err, msg)) fail_msg("message '%s' lacks '%s'", err, msg);
}

static void test_bad_adapters(void **state)
{
    fx *f = *state;
    if (!f) skip();
    char d[320], p[400];
    float *keep, v[4096];
    for (int i = 0; i < 4096; i++) v[i] = frand();
    snprintf(d, sizeof d, "%s/rank", f->dir);
    make_adapter(d, f->m, 8, 0x7f, 16, &keep);
    free(keep);
    expect_fail(f, d, 4, "rank 8 exceeds --max-lora-rank 4");
    lora_limits lim = {.allowed = 1u << MODEL_PROJ_Q};
    char err[512];
    assert_null(lora_adapter_load("x", d, f->m, &lim, err, sizeof err));
    assert_non_null(strstr(err, "not in --lora-target-modules"));
    /* wrong shape: A (4, 100) for a hidden size of 128 */
    snprintf(d, sizeof d, "%s/shape", f->dir);
    mkdir(d, 0755);
    write_file(d, "adapter_config.json", "{\"r\":4,\"target_modules\":[\"q_proj\"]}");
    wt t[2] = {{"base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight", 4, 100, v},
               {"base_model.model.model.layers.0.self_attn.q_proj.lora_B.weight", 128, 4, v}};
    snprintf(p, sizeof p, "%s/adapter_model.safetensors", d);
    write_st(p, t, 2);
    expect_fail(f, d, 0, "expected [4, 128]");
    /* a missing partner */
    write_st(p, t + 1, 1);
    expect_fail(f, d, 0, "no lora_A partner");
    /* a layer the model lacks */
    wt t2[2] = {{"base_model.model.model.layers.7.self_attn.q_proj.lora_A.weight", 4, 128, v},
                {"base_model.model.model.layers.7.self_attn.q_proj.lora_B.weight", 128, 4, v}};
    write_st(p, t2, 2);
    expect_fail(f, d, 0, "the model has 2 layers");
    /* a module outside target_modules, an unknown tensor, DoRA */
    wt t3[2] = {{"base_model.model.model.layers.0.self_attn.k_proj.lora_A.weight", 4, 128, v},
                {"base_model.model.model.layers.0.self_attn.k_proj.lora_B.weight", 64, 4, v}};
    write_st(p, t3, 2);
    expect_fail(f, d, 0, "not in target_modules");
    wt t4[1] = {{"base_model.model.model.layers.0.self_attn.q_proj.weight", 4, 128, v}};
    write_st(p, t4, 1);
    expect_fail(f, d, 0, "is not a LoRA weight");
    wt t5[1] = {{"base_model.model.model.layers.0.self_attn.q_proj.lora_magnitude_vector", 1, 128, v}};
    write_st(p, t5, 1);
    expect_fail(f, d, 0, "DoRA");
    /* pickle only, nothing, config refused */
    unlink(p);
    expect_fail(f, d, 0, "adapter_model.safetensors not found");
    write_file(d, "adapter_model.bin", "pickle");
    expect_fail(f, d, 0, "pickle");
    write_file(d, "adapter_config.json", "{\"r\":4,\"target_modules\":[\"q_proj\"],\"use_dora\":true}");
    expect_fail(f, d, 0, "DoRA");
    snprintf(d, sizeof d, "%s/none", f->dir);
    expect_fail(f, d, 0, "cannot read");
}

static void test_registry(void **state)
{
    fx *f = *state;
    if (!f) skip();
    char d[320], err[512];
    float *keep;
    snprintf(d, sizeof d, "%s/reg", f->dir);
    make_adapter(d, f->m, 4, 0x0f, 8, &keep);
    free(keep);
    for (int pol = 0; pol < 2; pol++) {
        lora_registry_opts o = {.m = f->m, .max_loaded = 2, .policy = (lora_evict_policy)pol};
        lora_registry *r = lora_registry_create(&o);
        assert_int_equal(lora_registry_load(r, "a", d, false, err, sizeof err), 0);
        assert_int_equal(lora_registry_load(r, "a", d, false, err, sizeof err), -1);
        assert_non_null(strstr(err, "has already been loaded"));
        assert_int_equal(lora_registry_load(r, "b", d, false, err, sizeof err), 0);
        lora_adapter *ga = lora_registry_get(r, "a"); /* a is now the most recently used */
        assert_non_null(ga);
        uint64_t uid_a = ga->uid;
        /* a third load evicts: lru -> b (a was used last), fifo -> a (loaded first) */
        assert_int_equal(lora_registry_load(r, "c", d, false, err, sizeof err), 0);
        assert_int_equal(lora_registry_count(r), 2);
        lora_adapter *gb = lora_registry_get(r, "b");
        if (pol == LORA_EVICT_LRU) {
            assert_null(gb);
            assert_true(ga->listed);
        } else {
            assert_non_null(gb);
            assert_false(ga->listed); /* evicted, but our reference keeps it valid */
            assert_int_equal(ga->ma.n_layer, 2);
        }
        lora_adapter_unref(gb);
        lora_adapter_unref(ga);
        /* each load has its own uid (radix isolation), never reused */
        lora_adapter *gc = lora_registry_get(r, "c");
        assert_true(gc->uid != uid_a);
        lora_adapter_unref(gc);
        assert_int_equal(lora_registry_unload(r, "c", err, sizeof err), 0);
        assert_int_equal(lora_registry_unload(r, "c", err, sizeof err), -1);
        lora_registry_destroy(r);
    }
    /* pinned adapters are never evicted: a full registry of pinned ones refuses */
    lora_registry_opts o = {.m = f->m, .max_loaded = 1};
    lora_registry *r = lora_registry_create(&o);
    assert_int_equal(lora_registry_load(r, "p", d, true, err, sizeof err), 0);
    assert_int_equal(lora_registry_load(r, "q", d, false, err, sizeof err), -1);
    assert_non_null(strstr(err, "all are pinned"));
    lora_adapter **v;
    int n = lora_registry_list(r, &v);
    assert_int_equal(n, 1);
    assert_string_equal(v[0]->name, "p");
    assert_true(v[0]->pinned);
    lora_registry_list_free(v, n);
    lora_registry_destroy(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_config),
        cmocka_unit_test(test_path_arg),
        cmocka_unit_test(test_kernels),
        cmocka_unit_test(test_adapters_model),
        cmocka_unit_test(test_bad_adapters),
        cmocka_unit_test(test_registry),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
