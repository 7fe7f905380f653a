/* test_hfquant — reference dequantization of Hugging Face quantized
 * weights (model/hfquant.h).
 *
 * - bit-exact against the PyTorch reference tests/ref/hf_quants_ref.py on
 *   random tensors: AWQ (group 128 and one group), GPTQ 4-bit v1 zeros,
 *   4-bit act-order g_idx, 8-bit v2 zeros, symmetric without qzeros, 2-bit;
 *   int8 per channel / per tensor / group with zero points; pack-quantized
 *   4-bit with a ragged row; fp8 e4m3 per tensor, per channel and 128x128
 *   blocks with partial edge blocks (skipped without /usr/bin/python3 +
 *   torch);
 * - the packing orders by hand: AWQ's [0,2,4,6,1,3,5,7] nibble order,
 *   GPTQ's +1 zero of v1 checkpoints, packed int4's offset 8;
 * - fp8 e4m3: every code decodes and re-encodes to itself, ties round to
 *   even, saturation at 448, NaN;
 * - bad shapes and out-of-range g_idx are errors.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "model/hfquant.h"
#include "util/dtype.h"

static uint64_t g_rng = 0xD1B54A32D192ED03ull;
static uint32_t rnd32(void)
{
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return (uint32_t)(g_rng >> 32);
}
static float frand(void) { return (float)((rnd32() >> 8) / 16777216.0 * 2.0 - 1.0); }

/* ---- case files for the torch reference ------------------------------- */

typedef struct {
    char dir[256];
    FILE *spec;
} tcase;

static void case_open(tcase *c, const char *format, int64_t out, int64_t in)
{
    strcpy(c->dir, "/tmp/test_hfquant_XXXXXX");
    assert_non_null(mkdtemp(c->dir));
    char p[512];
    snprintf(p, sizeof p, "%s/case.txt", c->dir);
    c->spec = fopen(p, "w");
    assert_non_null(c->spec);
    fprintf(c->spec, "format %s\nout %lld\nin %lld\n", format, (long long)out, (long long)in);
}

static void case_kv(tcase *c, const char *k, long long v) { fprintf(c->spec, "%s %lld\n", k, v); }

static void case_file(tcase *c, const char *name, const void *data, size_t bytes)
{
    char p[512];
    snprintf(p, sizeof p, "%s/%s.bin", c->dir, name);
    FILE *f = fopen(p, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, bytes, f), bytes);
    fclose(f);
    fprintf(c->spec, "%s %s.bin\n", name, name);
}

static int have_torch(void)
{
    if (access("/usr/bin/python3", X_OK) != 0) return 0;
    return system("/usr/bin/python3 -c 'import torch, numpy' >/dev/null 2>&1") == 0;
}

/* Run the reference on the case and compare with mine (out x in). */
static void case_check(tcase *c, const char *what, const float *mine, int64_t out, int64_t in)
{
    fclose(c->spec);
    const char *root = getenv("SGLC_ROOT") ? getenv("SGLC_ROOT") : ".";
    char cmd[1024], p[512];
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 %s/tests/ref/hf_quants_ref.py %s", root, c->dir);
    int rc = system(cmd);
    size_t n = (size_t)(out * in);
    float *ref = malloc(n * 4);
    snprintf(p, sizeof p, "%s/ref.f32", c->dir);
    FILE *f = fopen(p, "rb");
    size_t got = f ? fread(ref, 4, n, f) : 0;
    if (f) fclose(f);
    snprintf(cmd, sizeof cmd, "rm -rf %s", c->dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", c->dir);
    if (rc != 0 || got != n) fail_msg("%s: torch reference failed (rc %d, %zu of %zu values)", what, rc, got, n);
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < n; i++) {
        int both_nan = isnan(mine[i]) && isnan(ref[i]);
        if (!both_nan && memcmp(&mine[i], &ref[i], 4) && !bad++) first = i;
    }
    if (bad)
        fail_msg("%s: %zu of %zu values differ; first (%zu, %zu): %.9g vs torch %.9g", what, bad, n,
                 first / (size_t)in, first % (size_t)in, (double)mine[first], (double)ref[first]);
    fprintf(stderr, "%-28s %zu values bit-exact with torch\n", what, n);
    free(ref);
}

static uint16_t *rand_f16(size_t n)
{
    uint16_t *s = malloc(n * 2);
    for (size_t i = 0; i < n; i++) s[i] = f32_to_f16(frand() * 0.05f);
    return s;
}
static int32_t *rand_words(size_t n)
{
    int32_t *w = malloc(n * 4);
    for (size_t i = 0; i < n; i++) w[i] = (int32_t)rnd32();
    return w;
}

/* ---- torch cross-checks ------------------------------------------------ */

static void check_awq(int64_t out, int64_t in, int64_t g)
{
    int64_t gg = g > 0 ? g : in, ng = (in + gg - 1) / gg;
    int32_t *qw = rand_words((size_t)(in * out / 8)), *qz = rand_words((size_t)(ng * out / 8));
    uint16_t *s = rand_f16((size_t)(ng * out));
    float *w = malloc((size_t)(out * in) * 4);
    hfq_awq a = {.qweight = qw, .qzeros = qz, .scales = s, .scale_dt = DTYPE_F16, .in = in, .out = out, .group_size = g};
    assert_int_equal(hfquant_awq_dequant(w, &a), 0);
    tcase c;
    case_open(&c, "awq", out, in);
    case_kv(&c, "group", g);
    fprintf(c.spec, "scale_dtype f16\n");
    case_file(&c, "qweight", qw, (size_t)(in * out / 8) * 4);
    case_file(&c, "qzeros", qz, (size_t)(ng * out / 8) * 4);
    case_file(&c, "scales", s, (size_t)(ng * out) * 2);
    char what[64];
    snprintf(what, sizeof what, "awq g%lld", (long long)g);
    case_check(&c, what, w, out, in);
    free(qw), free(qz), free(s), free(w);
}

static void check_gptq(int bits, int64_t out, int64_t in, int64_t g, int act_order, int with_zeros, int v2,
                       dtype sdt)
{
    int pf = 32 / bits;
    int64_t ng = (in + g - 1) / g;
    int32_t *qw = rand_words((size_t)(in / pf * out)), *qz = rand_words((size_t)(ng * out / pf));
    size_t ns = (size_t)(ng * out);
    void *s = malloc(ns * 4);
    for (size_t i = 0; i < ns; i++) {
        float v = frand() * 0.02f;
        if (sdt == DTYPE_F32) ((float *)s)[i] = v;
        else if (sdt == DTYPE_BF16) ((uint16_t *)s)[i] = f32_to_bf16(v);
        else ((uint16_t *)s)[i] = f32_to_f16(v);
    }
    int32_t *gi = malloc((size_t)in * 4);
    for (int64_t i = 0; i < in; i++) gi[i] = (int32_t)(i / g);
    if (act_order) /* desc_act: rows in a permuted order of groups */
        for (int64_t i = in - 1; i > 0; i--) {
            int64_t j = rnd32() % (uint32_t)(i + 1);
            int32_t t = gi[i];
            gi[i] = gi[j], gi[j] = t;
        }
    float *w = malloc((size_t)(out * in) * 4);
    hfq_gptq q = {.qweight = qw, .qzeros = with_zeros ? qz : NULL, .scales = s, .scale_dt = sdt,
                  .g_idx = act_order ? gi : NULL, .in = in, .out = out, .bits = bits, .group_size = g,
                  .zeros_v2 = v2};
    assert_int_equal(hfquant_gptq_dequant(w, &q), 0);
    tcase c;
    case_open(&c, "gptq", out, in);
    case_kv(&c, "bits", bits), case_kv(&c, "group", g), case_kv(&c, "zeros_v2", v2);
    fprintf(c.spec, "scale_dtype %s\n", sdt == DTYPE_F32 ? "f32" : sdt == DTYPE_BF16 ? "bf16" : "f16");
    case_file(&c, "qweight", qw, (size_t)(in / pf * out) * 4);
    if (with_zeros) case_file(&c, "qzeros", qz, (size_t)(ng * out / pf) * 4);
    case_file(&c, "scales", s, ns * (sdt == DTYPE_F32 ? 4 : 2));
    if (act_order) case_file(&c, "g_idx", gi, (size_t)in * 4);
    char what[64];
    snprintf(what, sizeof what, "gptq %d-bit g%lld%s%s%s", bits, (long long)g, act_order ? " act-order" : "",
             with_zeros ? (v2 ? " v2" : " v1") : " sym", sdt == DTYPE_BF16 ? " bf16" : "");
    case_check(&c, what, w, out, in);
    free(qw), free(qz), free(s), free(gi), free(w);
}

/* Scales on a grid (bo, bi) of dtype sdt, into the case and an hfq_scales. */
static void *grid_scales(tcase *c, int64_t out, int64_t in, int64_t bo, int64_t bi, dtype sdt, hfq_scales *hs)
{
    size_t n = (size_t)(((out + bo - 1) / bo) * ((in + bi - 1) / bi));
    void *s = malloc(n * 4);
    for (size_t i = 0; i < n; i++) {
        float v = frand() * 0.03f + 0.001f;
        if (sdt == DTYPE_F32) ((float *)s)[i] = v;
        else if (sdt == DTYPE_BF16) ((uint16_t *)s)[i] = f32_to_bf16(v);
        else ((uint16_t *)s)[i] = f32_to_f16(v);
    }
    case_kv(c, "block_out", bo), case_kv(c, "block_in", bi);
    fprintf(c->spec, "scale_dtype %s\n", sdt == DTYPE_F32 ? "f32" : sdt == DTYPE_BF16 ? "bf16" : "f16");
    case_file(c, "scales", s, n * (sdt == DTYPE_F32 ? 4 : 2));
    *hs = (hfq_scales){.data = s, .dt = sdt, .block_out = bo, .block_in = bi};
    return s;
}

static void check_int8(int64_t out, int64_t in, int64_t bo, int64_t bi, dtype sdt, int zp, const char *what)
{
    tcase c;
    case_open(&c, "int8", out, in);
    hfq_scales hs;
    void *s = grid_scales(&c, out, in, bo, bi, sdt, &hs);
    size_t n = (size_t)(out * in), nz = (size_t)(((out + bo - 1) / bo) * ((in + bi - 1) / bi));
    int8_t *q = malloc(n), *z = malloc(nz);
    for (size_t i = 0; i < n; i++) q[i] = (int8_t)rnd32();
    for (size_t i = 0; i < nz; i++) z[i] = (int8_t)(rnd32() % 31) - 15;
    case_file(&c, "qweight", q, n);
    if (zp) case_file(&c, "zero_point", z, nz);
    float *w = malloc(n * 4);
    assert_int_equal(hfquant_int8_dequant(w, q, out, in, &hs, zp ? z : NULL), 0);
    case_check(&c, what, w, out, in);
    free(s), free(q), free(z), free(w);
}

static void check_packed(int bits, int64_t out, int64_t in, int64_t group)
{
    tcase c;
    case_open(&c, "packed", out, in);
    case_kv(&c, "bits", bits);
    hfq_scales hs;
    void *s = grid_scales(&c, out, in, 1, group, DTYPE_BF16, &hs);
    int pf = 32 / bits;
    size_t nw = (size_t)(out * ((in + pf - 1) / pf));
    int32_t *p = rand_words(nw);
    case_file(&c, "qweight", p, nw * 4);
    float *w = malloc((size_t)(out * in) * 4);
    assert_int_equal(hfquant_packed_dequant(w, p, out, in, bits, &hs), 0);
    char what[64];
    snprintf(what, sizeof what, "packed %d-bit g%lld in%lld", bits, (long long)group, (long long)in);
    case_check(&c, what, w, out, in);
    free(s), free(p), free(w);
}

static void check_fp8(int64_t out, int64_t in, int64_t bo, int64_t bi, dtype sdt, const char *what)
{
    tcase c;
    case_open(&c, "fp8", out, in);
    hfq_scales hs;
    void *s = grid_scales(&c, out, in, bo, bi, sdt, &hs);
    size_t n = (size_t)(out * in);
    uint8_t *q = malloc(n);
    for (size_t i = 0; i < n; i++) q[i] = (uint8_t)rnd32(); /* all 256 codes, NaN included */
    case_file(&c, "qweight", q, n);
    float *w = malloc(n * 4);
    assert_int_equal(hfquant_fp8_dequant(w, q, out, in, &hs), 0);
    case_check(&c, what, w, out, in);
    free(s), free(q), free(w);
}

static void test_torch_reference(void **state)
{
    (void)state;
    if (!have_torch()) {
        fprintf(stderr, "skip: /usr/bin/python3 with torch not found\n");
        skip();
    }
    check_awq(64, 256, 128);
    check_awq(32, 96, -1);
    check_gptq(4, 64, 256, 128, 0, 1, 0, DTYPE_F16);
    check_gptq(4, 48, 256, 32, 1, 1, 0, DTYPE_F16);
    check_gptq(8, 40, 128, 64, 1, 1, 1, DTYPE_BF16);
    check_gptq(4, 24, 64, 16, 0, 0, 0, DTYPE_F32);
    check_gptq(2, 32, 128, 64, 0, 1, 0, DTYPE_F16);
    check_int8(37, 96, 1, 96, DTYPE_F32, 0, "int8 per-channel f32");
    check_int8(16, 40, 16, 40, DTYPE_BF16, 0, "int8 per-tensor bf16");
    check_int8(12, 128, 1, 32, DTYPE_F16, 1, "int8 group32 zero-points");
    check_packed(4, 24, 100, 32);
    check_packed(8, 8, 64, 64);
    check_fp8(300, 260, 128, 128, DTYPE_F32, "fp8 block128 (ragged)");
    check_fp8(20, 64, 20, 64, DTYPE_F32, "fp8 per-tensor");
    check_fp8(33, 48, 1, 48, DTYPE_BF16, "fp8 per-channel bf16");
}

/* ---- by hand ----------------------------------------------------------- */

static void test_packing_orders(void **state)
{
    (void)state;
    /* AWQ: nibble p of the word holds column {0,2,4,6,1,3,5,7}[p] */
    int32_t qw = 0x76543210, qz = 0;
    uint16_t one = f32_to_f16(1.0f);
    uint16_t s8[8];
    for (int i = 0; i < 8; i++) s8[i] = one;
    float w[8];
    hfq_awq a = {.qweight = &qw, .qzeros = &qz, .scales = s8, .scale_dt = DTYPE_F16, .in = 1, .out = 8};
    assert_int_equal(hfquant_awq_dequant(w, &a), 0);
    const float want_awq[8] = {0, 4, 1, 5, 2, 6, 3, 7};
    assert_memory_equal(w, want_awq, sizeof w);
    /* GPTQ v1: stored zero 7 means 8; v2: stored 8 is 8 */
    int32_t gq[1] = {(int32_t)0x87654321u}; /* rows 0..7 of column 0: 1..8 */
    int32_t z7 = 7, z8 = 8;
    float s1 = 1.0f, g8[8];
    hfq_gptq q = {.qweight = gq, .qzeros = &z7, .scales = &s1, .scale_dt = DTYPE_F32, .in = 8, .out = 1, .bits = 4};
    /* out = 1 is not a multiple of 8 with qzeros: rejected */
    assert_int_equal(hfquant_gptq_dequant(g8, &q), -1);
    int32_t gq8[8], z7w = 0x77777777, z8w = (int32_t)0x88888888u;
    float s8f[8];
    for (int i = 0; i < 8; i++) gq8[i] = (int32_t)0x87654321u, s8f[i] = 1.0f;
    float g64[64];
    q = (hfq_gptq){.qweight = gq8, .qzeros = &z7w, .scales = s8f, .scale_dt = DTYPE_F32, .in = 8, .out = 8, .bits = 4};
    assert_int_equal(hfquant_gptq_dequant(g64, &q), 0);
    for (int o = 0; o < 8; o++)
        for (int i = 0; i < 8; i++) assert_true(g64[o * 8 + i] == (float)(i + 1 - 8));
    q.qzeros = &z8w, q.zeros_v2 = 1;
    float g64b[64];
    assert_int_equal(hfquant_gptq_dequant(g64b, &q), 0);
    assert_memory_equal(g64, g64b, sizeof g64);
    q.qzeros = NULL, q.zeros_v2 = 0; /* symmetric: zero 8 */
    assert_int_equal(hfquant_gptq_dequant(g64b, &q), 0);
    assert_memory_equal(g64, g64b, sizeof g64);
    (void)z7, (void)z8, (void)g8;
    /* packed int4: code c stands for c - 8; value j at bits 4*(j%8) of word j/8 */
    int32_t pw[2] = {0x76543210, (int32_t)0xFEDCBA98u};
    float sc = 0.5f, pv[16];
    hfq_scales hs = {.data = &sc, .dt = DTYPE_F32, .block_out = 1, .block_in = 16};
    assert_int_equal(hfquant_packed_dequant(pv, pw, 1, 16, 4, &hs), 0);
    for (int j = 0; j < 16; j++) assert_true(pv[j] == (float)(j - 8) * 0.5f);
}

static void test_fp8_codes(void **state)
{
    (void)state;
    for (int v = 0; v < 256; v++) {
        float f = hfquant_fp8_e4m3_to_f32((uint8_t)v);
        if ((v & 0x7F) == 0x7F) {
            assert_true(isnan(f));
            assert_int_equal(hfquant_f32_to_fp8_e4m3(f) & 0x7F, 0x7F);
            continue;
        }
        assert_int_equal(hfquant_f32_to_fp8_e4m3(f), v); /* -0 is 0x80 */
        /* the midpoint to the next code up rounds to the even mantissa */
        if ((v & 0x7F) < 0x7E) {
            float g = hfquant_fp8_e4m3_to_f32((uint8_t)(v + 1));
            float mid = (f + g) / 2.0f;
            int want = (v & 1) ? v + 1 : v;
            assert_int_equal(hfquant_f32_to_fp8_e4m3(mid), want);
        }
    }
    assert_true(hfquant_fp8_e4m3_to_f32(0x7E) == 448.0f);
    assert_true(hfquant_fp8_e4m3_to_f32(0x01) == ldexpf(1.0f, -9));
    assert_int_equal(hfquant_f32_to_fp8_e4m3(1e9f), 0x7E);
    assert_int_equal(hfquant_f32_to_fp8_e4m3(-INFINITY), 0xFE);
    assert_int_equal(hfquant_f32_to_fp8_e4m3(ldexpf(1.0f, -11)), 0x00); /* a quarter of the least subnormal */
    assert_int_equal(hfquant_f32_to_fp8_e4m3(470.0f), 0x7E);
}

static void test_errors(void **state)
{
    (void)state;
    float w[64], s = 1.0f;
    int32_t words[64] = {0};
    uint16_t s16[64] = {0};
    hfq_awq a = {.qweight = words, .qzeros = words, .scales = s16, .scale_dt = DTYPE_F16, .in = 4, .out = 12};
    assert_int_equal(hfquant_awq_dequant(w, &a), -1); /* out % 8 */
    a.out = 8, a.scale_dt = (dtype)7;
    assert_int_equal(hfquant_awq_dequant(w, &a), -1); /* scale type */
    int32_t gi[8] = {0, 0, 0, 0, 0, 0, 0, 3};
    hfq_gptq q = {.qweight = words, .scales = &s, .scale_dt = DTYPE_F32, .g_idx = gi, .in = 8, .out = 1, .bits = 4,
                  .group_size = 8};
    assert_int_equal(hfquant_gptq_dequant(w, &q), -1); /* g_idx past the groups */
    gi[7] = 0;
    assert_int_equal(hfquant_gptq_dequant(w, &q), 0);
    q.bits = 3;
    assert_int_equal(hfquant_gptq_dequant(w, &q), -1);
    q.bits = 8, q.in = 6;
    assert_int_equal(hfquant_gptq_dequant(w, &q), -1); /* in % 4 */
    hfq_scales hs = {.data = &s, .dt = DTYPE_F32, .block_out = 0, .block_in = 1};
    int8_t q8[4] = {0};
    assert_int_equal(hfquant_int8_dequant(w, q8, 2, 2, &hs, NULL), -1);
    hs.block_out = 2, hs.block_in = 2;
    assert_int_equal(hfquant_int8_dequant(w, q8, 2, 2, &hs, NULL), 0);
    assert_int_equal(hfquant_packed_dequant(w, words, 2, 2, 3, &hs), -1);
    assert_int_equal(hfquant_fp8_dequant(w, (const uint8_t *)q8, 0, 2, &hs), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_torch_reference),
        cmocka_unit_test(test_packing_orders),
        cmocka_unit_test(test_fp8_codes),
        cmocka_unit_test(test_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
