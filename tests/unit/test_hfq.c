/* test_hfq — Hugging Face quantized checkpoints without torch: the
 * quantization_config parser and flag rules (hfq_config.c), and the weight
 * source (wsource_hfq.c) on small safetensors files written here:
 *   - AWQ 4-bit group 32 -> Q4_1 blocks with d = f16(s), m = f16(-s z),
 *     every decoded weight within 2^-11 s (q + z) of hfquant's exact value;
 *   - GPTQ act-order (permuted g_idx, g columns per group) -> Q4_1 / Q4_0
 *     blocks over the columns sorted by group with the permutation (Q4_0
 *     with f16 scales bit-identical to hfquant; read gives input order);
 *     unequal groups -> f32, bit-identical to hfquant;
 *   - compressed-tensors int8 per channel -> Q8_0 codes as stored, d = f16(s);
 *   - fp8 per tensor / channel / 128x128 block -> KERN_TYPE_F8_B128, each
 *     weight bit-equal to hfquant's, <= 1.1x the checkpoint's bytes;
 *   - missing scales / wrong qweight size -> type -1 naming the tensor;
 *   - tensors without packed parts pass through untouched. */
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

#include "kernels/kern_types.h"
#include "kernels/kernels.h"
#include "kernels/quant_blocks.h"
#include "model/hfq.h"
#include "model/hfquant.h"
#include "util/dtype.h"
#include "util/rng.h"

static char g_tmp[256];

static int parse(hfq_config *q, const char *json, const char *flag, char *err)
{
    return hfq_config_parse(q, json, json ? strlen(json) : 0, flag, err, 512);
}

static void test_config(void **state)
{
    (void)state;
    hfq_config q;
    char err[512] = "";
    const char *awq = "{\"quantization_config\":{\"quant_method\":\"awq\",\"bits\":4,\"group_size\":128,"
                      "\"zero_point\":true,\"modules_to_not_convert\":[\"lm_head\",\"gate\"]}}";
    assert_int_equal(parse(&q, awq, NULL, err), 0);
    assert_int_equal(q.method, HFQ_AWQ);
    assert_int_equal(q.bits, 4);
    assert_int_equal(q.group_size, 128);
    assert_int_equal(q.at_load, 0);
    assert_true(hfq_ignored(&q, "lm_head"));
    assert_true(hfq_ignored(&q, "model.layers.0.mlp.gate"));
    assert_false(hfq_ignored(&q, "model.layers.0.mlp.gate_proj"));
    assert_int_equal(parse(&q, awq, "awq_marlin", err), 0);
    assert_int_equal(parse(&q, awq, "gptq", err), -1);
    assert_non_null(strstr(err, "model config (awq) does not match"));
    assert_int_equal(parse(&q, awq, "marlin", err), -1);
    assert_non_null(strstr(err, "not supported"));
    assert_int_equal(parse(&q, awq, "nonsense", err), -1);
    assert_non_null(strstr(err, "unknown --quantization"));

    const char *plain = "{\"torch_dtype\":\"bfloat16\"}";
    assert_int_equal(parse(&q, plain, NULL, err), 0);
    assert_int_equal(q.method, HFQ_NONE);
    assert_int_equal(parse(&q, plain, "w8a8_int8", err), 0);
    assert_int_equal(q.method, HFQ_W8A8_INT8);
    assert_int_equal(q.at_load, 1);
    assert_int_equal(parse(&q, plain, "fp8", err), 0);
    assert_int_equal(q.at_load, 1);
    assert_int_equal(parse(&q, plain, "gptq", err), -1);
    assert_non_null(strstr(err, "no quantization_config"));
    assert_int_equal(parse(&q, plain, "gguf", err), 0);
    assert_int_equal(q.method, HFQ_NONE);

    assert_int_equal(parse(&q, "{\"quantization_config\":{\"quant_method\":\"gptq\",\"bits\":3}}", NULL, err), -1);
    assert_non_null(strstr(err, "3-bit"));
    assert_int_equal(parse(&q, "{\"quantization_config\":{\"quant_method\":\"bitsandbytes\"}}", NULL, err), -1);
    assert_int_equal(parse(&q, "{\"quantization_config\":{\"bits\":4}}", NULL, err), -1);
    assert_non_null(strstr(err, "no quant_method"));
    const char *fp8 = "{\"quantization_config\":{\"quant_method\":\"fp8\",\"weight_block_size\":[128,128]}}";
    assert_int_equal(parse(&q, fp8, NULL, err), 0);
    assert_int_equal(q.block_out, 128);
    assert_int_equal(q.block_in, 128);
    const char *ct = "{\"quantization_config\":{\"quant_method\":\"compressed-tensors\",\"format\":\"pack-quantized\","
                     "\"config_groups\":{\"g\":{\"weights\":{\"num_bits\":4,\"type\":\"int\",\"symmetric\":true,"
                     "\"strategy\":\"group\",\"group_size\":64}}},\"ignore\":[\"re:.*lm_head\"]}}";
    assert_int_equal(parse(&q, ct, NULL, err), 0);
    assert_int_equal(q.method, HFQ_CT);
    assert_int_equal(q.bits, 4);
    assert_int_equal(q.group_size, 64);
    assert_string_equal(q.ct_format, "pack-quantized");
    assert_true(hfq_ignored(&q, "lm_head"));
    const char *ct3 = "{\"quantization_config\":{\"quant_method\":\"compressed-tensors\","
                      "\"config_groups\":{\"g\":{\"weights\":{\"num_bits\":3,\"type\":\"int\"}}}}}";
    assert_int_equal(parse(&q, ct3, NULL, err), -1);
}

/* ---- a small safetensors writer ---------------------------------------- */

typedef struct st_t {
    const char *name, *dt;
    int ndim;
    int64_t shape[2];
    const void *data;
    size_t bytes;
} st_t;

static void write_model(const char *dir, const char *config, const st_t *ts, int n)
{
    char path[512], hdr[8192];
    snprintf(path, sizeof path, "%s/config.json", dir);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    fputs(config, f);
    fclose(f);
    size_t off = 0, u = 0;
    u += (size_t)snprintf(hdr + u, sizeof hdr - u, "{");
    for (int i = 0; i < n; i++) {
        u += (size_t)snprintf(hdr + u, sizeof hdr - u, "%s\"%s\":{\"dtype\":\"%s\",\"shape\":[", i ? "," : "",
                              ts[i].name, ts[i].dt);
        for (int d = 0; d < ts[i].ndim; d++)
            u += (size_t)snprintf(hdr + u, sizeof hdr - u, "%s%lld", d ? "," : "", (long long)ts[i].shape[d]);
        u += (size_t)snprintf(hdr + u, sizeof hdr - u, "],\"data_offsets\":[%zu,%zu]}", off, off + ts[i].bytes);
        off += ts[i].bytes;
    }
    u += (size_t)snprintf(hdr + u, sizeof hdr - u, "}");
    while (u % 8) hdr[u++] = ' ';
    hdr[u] = 0;
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    f = fopen(path, "wb");
    assert_non_null(f);
    uint64_t hl = u;
    fwrite(&hl, 8, 1, f);
    fwrite(hdr, 1, u, f);
    for (int i = 0; i < n; i++) fwrite(ts[i].data, 1, ts[i].bytes, f);
    fclose(f);
}

#define O 64
#define I 64
#define G 32

static const int k_awq_order[8] = {0, 2, 4, 6, 1, 3, 5, 7};

static void test_awq_q4_1(void **state)
{
    (void)state;
    uint64_t r = 7;
    static int32_t qw[I * O / 8], qz[(I / G) * O / 8];
    static uint16_t sc[(I / G) * O];
    static int codes[I][O], zeros[I / G][O];
    memset(qw, 0, sizeof qw), memset(qz, 0, sizeof qz);
    for (int i = 0; i < I; i++)
        for (int o = 0; o < O; o++) codes[i][o] = (int)(rng_next(&r) % 16);
    for (int g = 0; g < I / G; g++)
        for (int o = 0; o < O; o++) {
            zeros[g][o] = (int)(rng_next(&r) % 16);
            sc[g * O + o] = f32_to_f16(0.001f + (float)(rng_next(&r) % 1000) * 1e-5f);
        }
    for (int i = 0; i < I; i++)
        for (int c = 0; c < O / 8; c++)
            for (int p = 0; p < 8; p++) {
                qw[i * (O / 8) + c] |= (int32_t)((uint32_t)codes[i][8 * c + k_awq_order[p]] << (4 * p));
                if (i < I / G) qz[i * (O / 8) + c] |= (int32_t)((uint32_t)zeros[i][8 * c + k_awq_order[p]] << (4 * p));
            }
    static float plain[4 * O];
    for (int i = 0; i < 4 * O; i++) plain[i] = (float)i;
    st_t ts[] = {
        {"l.qweight", "I32", 2, {I, O / 8}, qw, sizeof qw},
        {"l.qzeros", "I32", 2, {I / G, O / 8}, qz, sizeof qz},
        {"l.scales", "F16", 2, {I / G, O}, sc, sizeof sc},
        {"p.weight", "F32", 2, {4, O}, plain, sizeof plain},
        {"m.qweight", "I32", 2, {I, O / 8}, qw, sizeof qw},
        {"m.qzeros", "I32", 2, {I / G, O / 8}, qz, sizeof qz},
    };
    char dir[300];
    snprintf(dir, sizeof dir, "%s/awq", g_tmp);
    if (access(dir, F_OK)) assert_int_equal(mkdir(dir, 0700), 0);
    write_model(dir, "{\"torch_dtype\":\"float32\",\"quantization_config\":{\"quant_method\":\"awq\",\"bits\":4,"
                     "\"group_size\":32,\"zero_point\":true}}", ts, 6);
    wsrc s;
    char err[512];
    assert_int_equal(wsrc_open_hfq(&s, dir, NULL, err, sizeof err), 0);
    wsrc_tensor t;
    const int64_t want[2] = {O, I};
    assert_int_equal(wsrc_find(&s, "l.weight", 2, want, &t), 1);
    assert_int_equal(t.type, KERN_TYPE_Q4_1);
    assert_non_null(t.data);
    float exact[O * I], dec[I];
    hfq_awq a = {qw, qz, sc, DTYPE_F16, I, O, G};
    assert_int_equal(hfquant_awq_dequant(exact, &a), 0);
    const block_q4_1 *b = t.data;
    for (int o = 0; o < O; o++) {
        kern_type_get(KERN_TYPE_Q4_1)->row_to_f32(dec, b + o * (I / 32), I);
        for (int i = 0; i < I; i++) {
            float s1 = f16_to_f32(sc[(i / G) * O + o]);
            int z = zeros[i / G][o];
            assert_int_equal(b[o * (I / 32) + i / 32].d, sc[(i / G) * O + o]);
            assert_int_equal(b[o * (I / 32) + i / 32].m, f32_to_f16(-s1 * (float)z));
            float bound = ldexpf(s1 * (float)(codes[i][o] + z), -11) + 1e-9f;
            assert_true(fabsf(dec[i] - exact[o * I + i]) <= bound);
        }
    }
    /* plain tensors pass through; a module without scales names them */
    assert_int_equal(wsrc_find(&s, "p.weight", 2, (int64_t[]){4, O}, &t), 1);
    assert_int_equal(t.type, KERN_TYPE_F32);
    assert_int_equal(wsrc_find(&s, "m.weight", 2, want, &t), 1);
    assert_int_equal(t.type, -1);
    assert_non_null(strstr(t.type_name, "m.scales"));
    assert_int_equal(wsrc_find(&s, "absent.weight", 2, want, &t), 0);
    wsrc_release_unused(&s);
    wsrc_close(&s);
}

static void test_gptq_act_order_and_int8(void **state)
{
    (void)state;
    uint64_t r = 11;
    static int32_t qw[I / 8 * O], qz[(I / G) * O / 8], gidx[I];
    static float sc[(I / G) * O];
    for (size_t i = 0; i < sizeof qw / 4; i++) qw[i] = (int32_t)(uint32_t)rng_next(&r);
    for (size_t i = 0; i < sizeof qz / 4; i++) qz[i] = (int32_t)(uint32_t)rng_next(&r);
    for (size_t i = 0; i < sizeof sc / 4; i++) sc[i] = 0.01f + (float)(rng_next(&r) % 100) * 1e-4f;
    for (int i = 0; i < I; i++) gidx[i] = (i * 7) % (I / G); /* not i / G */
    static int32_t gidx_u[I];
    for (int i = 0; i < I; i++) gidx_u[i] = (i % 8) < 5 ? 0 : 1; /* 40 and 24 columns */
    static float sc16[(I / G) * O];
    for (size_t i = 0; i < sizeof sc16 / 4; i++) sc16[i] = f16_to_f32(f32_to_f16(sc[i]));
    static int8_t w8[O * I];
    static float s8[O];
    for (int i = 0; i < O * I; i++) w8[i] = (int8_t)(int)(rng_next(&r) % 255 - 127);
    for (int o = 0; o < O; o++) s8[o] = 1e-3f * (float)(o + 1) / 3.0f;
    st_t ts[] = {
        {"g.qweight", "I32", 2, {I / 8, O}, qw, sizeof qw},
        {"g.qzeros", "I32", 2, {I / G, O / 8}, qz, sizeof qz},
        {"g.scales", "F32", 2, {I / G, O}, sc, sizeof sc},
        {"g.g_idx", "I32", 1, {I}, gidx, sizeof gidx},
        {"gs.qweight", "I32", 2, {I / 8, O}, qw, sizeof qw},
        {"gs.scales", "F32", 2, {I / G, O}, sc16, sizeof sc16},
        {"gs.g_idx", "I32", 1, {I}, gidx, sizeof gidx},
        {"gu.qweight", "I32", 2, {I / 8, O}, qw, sizeof qw},
        {"gu.qzeros", "I32", 2, {I / G, O / 8}, qz, sizeof qz},
        {"gu.scales", "F32", 2, {I / G, O}, sc, sizeof sc},
        {"gu.g_idx", "I32", 1, {I}, gidx_u, sizeof gidx_u},
        {"bad.qweight", "I32", 2, {I / 16, O}, qw, sizeof qw / 2},
        {"bad.qzeros", "I32", 2, {I / G, O / 8}, qz, sizeof qz},
        {"bad.scales", "F32", 2, {I / G, O}, sc, sizeof sc},
    };
    char dir[300], err[512];
    snprintf(dir, sizeof dir, "%s/gptq", g_tmp);
    if (access(dir, F_OK)) assert_int_equal(mkdir(dir, 0700), 0);
    write_model(dir, "{\"quantization_config\":{\"quant_method\":\"gptq\",\"bits\":4,\"group_size\":32,"
                     "\"desc_act\":true}}", ts, 14);
    wsrc s;
    assert_int_equal(wsrc_open_hfq(&s, dir, NULL, err, sizeof err), 0);
    wsrc_tensor t;
    const int64_t want[2] = {O, I};
    /* act-order with g columns per group: Q4_1 blocks (random zeros) over
     * the columns sorted by group; column c holds input perm[c] */
    assert_int_equal(wsrc_find(&s, "g.weight", 2, want, &t), 1);
    assert_int_equal(t.type, KERN_TYPE_Q4_1);
    assert_non_null(t.perm);
    assert_int_equal(t.perm_n, I);
    static float exact[O * I], got[O * I];
    hfq_gptq p = {qw, qz, sc, DTYPE_F32, gidx, I, O, 4, G, 0, 0};
    assert_int_equal(hfquant_gptq_dequant(exact, &p), 0);
    for (int c = 0; c < I; c++) {
        assert_int_equal(gidx[t.perm[c]], c / G); /* sorted by group */
        if (c % G) assert_true(t.perm[c] > t.perm[c - 1]); /* stable */
    }
    assert_int_equal(wsrc_read(&s, &t, got, DTYPE_F32), 0); /* read: input order again */
    for (int o = 0; o < O; o++)
        for (int i = 0; i < I; i++) {
            float sv = sc[gidx[i] * O + o];
            assert_true(fabsf(got[o * I + i] - exact[o * I + i]) <= 0x1p-11f * sv * 30.0f);
        }
    /* symmetric (no qzeros) with f16 scales: Q4_0, every weight bit-equal to hfquant's */
    assert_int_equal(wsrc_find(&s, "gs.weight", 2, want, &t), 1);
    assert_int_equal(t.type, KERN_TYPE_Q4_0);
    assert_non_null(t.perm);
    hfq_gptq ps = {qw, NULL, sc16, DTYPE_F32, gidx, I, O, 4, G, 0, 0};
    assert_int_equal(hfquant_gptq_dequant(exact, &ps), 0);
    for (int o = 0; o < O; o++) {
        float row[I];
        kern_type_get(KERN_TYPE_Q4_0)->row_to_f32(row, (const char *)t.data + o * kern_type_row_bytes(KERN_TYPE_Q4_0, I), I);
        for (int c = 0; c < I; c++) assert_memory_equal(&row[c], &exact[o * I + t.perm[c]], sizeof(float));
    }
    /* groups of unequal size (40 / 24 columns): no block layout, dequantized */
    assert_int_equal(wsrc_find(&s, "gu.weight", 2, want, &t), 1);
    assert_int_equal(t.type, KERN_TYPE_F32);
    assert_null(t.perm);
    hfq_gptq pu = {qw, qz, sc, DTYPE_F32, gidx_u, I, O, 4, G, 0, 0};
    assert_int_equal(hfquant_gptq_dequant(exact, &pu), 0);
    assert_memory_equal(t.data, exact, sizeof exact);
    assert_int_equal(wsrc_find(&s, "bad.weight", 2, want, &t), 1);
    assert_int_equal(t.type, -1);
    assert_non_null(strstr(t.type_name, "bad.qweight"));
    wsrc_close(&s);

    st_t t8[] = {
        {"c.weight", "I8", 2, {O, I}, w8, sizeof w8},
        {"c.weight_scale", "F32", 2, {O, 1}, s8, sizeof s8},
    };
    snprintf(dir, sizeof dir, "%s/ct", g_tmp);
    if (access(dir, F_OK)) assert_int_equal(mkdir(dir, 0700), 0);
    write_model(dir, "{\"quantization_config\":{\"quant_method\":\"compressed-tensors\",\"format\":\"int-quantized\","
                     "\"config_groups\":{\"g\":{\"weights\":{\"num_bits\":8,\"type\":\"int\",\"symmetric\":true,"
                     "\"strategy\":\"channel\"}}}}}", t8, 2);
    assert_int_equal(wsrc_open_hfq(&s, dir, NULL, err, sizeof err), 0);
    assert_int_equal(wsrc_find(&s, "c.weight", 2, want, &t), 1);
    assert_int_equal(t.type, KERN_TYPE_Q8_0);
    const block_q8_0 *b = t.data;
    for (int o = 0; o < O; o++)
        for (int k = 0; k < I / 32; k++) {
            assert_int_equal(b[o * (I / 32) + k].d, f32_to_f16(s8[o]));
            assert_memory_equal(b[o * (I / 32) + k].qs, w8 + o * I + k * 32, 32);
        }
    wsrc_close(&s);
}

/* fp8 e4m3 per tensor, per channel and in 128 x 128 blocks -> kept as
 * KERN_TYPE_F8_B128 (codes as stored, one f32 scale per 128 inputs): each
 * weight decodes bit for bit to hfquant's dequantization, the bytes are
 * <= 1.1x the checkpoint's (codes + scales), and an `in` that is not a
 * multiple of 128 falls back to the dequantized f32. */
#define FO 136
#define FI 256
static void test_fp8_kept(void **state)
{
    (void)state;
    static uint8_t q[FO * FI], q2[FO * 96];
    uint64_t r = 7;
    for (int i = 0; i < FO * FI; i++) {
        uint8_t c = (uint8_t)(rng_next(&r) & 0xFF);
        q[i] = (c & 0x7F) == 0x7F ? 0x7E : c; /* no NaN codes */
    }
    memcpy(q2, q, sizeof q2);
    static float st[1] = {0.0123f}, sch[FO], sbl[2 * 2];
    for (int o = 0; o < FO; o++) sch[o] = 0.001f * (float)(o + 1);
    for (int i = 0; i < 4; i++) sbl[i] = 0.5f + 0.25f * (float)i;
    struct {
        const char *name, *cfg;
        const float *s;
        int64_t s0, s1;
        const char *sname;
        int64_t bo, bi;
    } cs[] = {
        {"tensor", "{\"quantization_config\":{\"quant_method\":\"fp8\"}}", st, 1, 0, "weight_scale", FO, FI},
        {"channel", "{\"quantization_config\":{\"quant_method\":\"w8a8_fp8\"}}", sch, FO, 1, "weight_scale", 1, FI},
        {"block", "{\"quantization_config\":{\"quant_method\":\"fp8\",\"weight_block_size\":[128,128]}}", sbl, 2,
         2, "weight_scale_inv", 128, 128},
    };
    for (size_t c = 0; c < sizeof cs / sizeof cs[0]; c++) {
        char dir[300], err[512], sn[64];
        snprintf(dir, sizeof dir, "%s/fp8-%s", g_tmp, cs[c].name);
        if (access(dir, F_OK)) assert_int_equal(mkdir(dir, 0700), 0);
        snprintf(sn, sizeof sn, "f.%s", cs[c].sname);
        int64_t ns = cs[c].s0 * (cs[c].s1 ? cs[c].s1 : 1);
        st_t ts[] = {
            {"f.weight", "F8_E4M3", 2, {FO, FI}, q, sizeof q},
            {sn, "F32", cs[c].s1 ? 2 : 0, {cs[c].s0, cs[c].s1}, cs[c].s, (size_t)ns * 4},
            {"h.weight", "F8_E4M3", 2, {FO, 96}, q2, sizeof q2},
            {"h.weight_scale", "F32", 0, {1, 0}, st, 4},
        };
        write_model(dir, cs[c].cfg, ts, 4);
        wsrc s;
        assert_int_equal(wsrc_open_hfq(&s, dir, NULL, err, sizeof err), 0);
        wsrc_tensor t;
        const int64_t want[2] = {FO, FI};
        assert_int_equal(wsrc_find(&s, "f.weight", 2, want, &t), 1);
        assert_int_equal(t.type, KERN_TYPE_F8_B128);
        size_t ck = sizeof q + (size_t)ns * 4;
        assert_true(t.nbytes <= ck + ck / 10);
        assert_int_equal(t.nbytes, kern_type_mat_bytes(KERN_TYPE_F8_B128, FO, FI));
        static float exact[FO * FI], got[FI];
        hfq_scales sc = {cs[c].s, DTYPE_F32, cs[c].bo, cs[c].bi};
        assert_int_equal(hfquant_fp8_dequant(exact, q, FO, FI, &sc), 0);
        size_t rb = kern_type_row_bytes(KERN_TYPE_F8_B128, FI);
        for (int o = 0; o < FO; o++) {
            kern_type_get(KERN_TYPE_F8_B128)->row_to_f32(got, (const char *)t.data + o * rb, FI);
            assert_memory_equal(got, exact + o * FI, sizeof got);
        }
        const int64_t want2[2] = {FO, 96};
        if (c == 0) { /* 96 inputs: not whole 128-blocks -> dequantized */
            assert_int_equal(wsrc_find(&s, "h.weight", 2, want2, &t), 1);
            assert_int_equal(t.type, KERN_TYPE_F32);
        }
        wsrc_close(&s);
    }
}

static int setup(void **state)
{
    (void)state;
    kernels_init(NULL);
    snprintf(g_tmp, sizeof g_tmp, "/tmp/test_hfq.XXXXXX");
    return mkdtemp(g_tmp) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_tmp);
    return system(cmd) == 0 ? 0 : -1;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_config),
        cmocka_unit_test(test_awq_q4_1),
        cmocka_unit_test(test_gptq_act_order_and_int8),
        cmocka_unit_test(test_fp8_kept),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
