/* test_quant_ref — the scalar reference (de)quantizers (kernels/quant_ref.h).
 *
 * - bit-exact dequantization against tests/ref/gguf_quants.py, an
 *   independent numpy decoder written from the format's description, on
 *   random blocks (random bytes, f16/f32 scales forced finite) of every
 *   type (skipped when /usr/bin/python3 with numpy is missing);
 * - round-trip error on gaussian data, per type, under a bound, and in
 *   llama.cpp's quality order (Q8_0 < Q6_K < Q5_K < Q4_K < Q4_0 < Q3_K <
 *   Q2_K, ...); the RMSE table is printed;
 * - values a type holds exactly survive quantization bit for bit (and for
 *   the round-to-nearest types any once-quantized row survives a second
 *   trip);
 * - geometry (row bytes, traits slots, bad shapes), Q8_K's bsums and
 *   Q8_1's s, and NaN / Inf / huge / tiny inputs giving finite output.
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

#include "kernels/kern_types.h"
#include "kernels/quant_blocks.h"
#include "kernels/quant_ref.h"
#include "util/dtype.h"

/* every block-quantized type, with where its scales live */
typedef struct {
    kern_type t;
    int f16_off[2]; /* byte offsets of f16 fields (-1: none) */
    int f32_off;    /* byte offset of an f32 scale (-1: none) */
    double bound;   /* RMSE / sigma bound on gaussian data */
} qtype;

static const qtype k_types[] = {
    /* bounds: about 15% over what this quantizer measures (see the table
     * the test prints), so a regression in a search fails */
    {KERN_TYPE_Q4_0, {0, -1}, -1, 0.098},   {KERN_TYPE_Q4_1, {0, 2}, -1, 0.090},
    {KERN_TYPE_Q5_0, {0, -1}, -1, 0.049},   {KERN_TYPE_Q5_1, {0, 2}, -1, 0.044},
    {KERN_TYPE_Q8_0, {0, -1}, -1, 0.0062},  {KERN_TYPE_Q8_1, {0, 2}, -1, 0.0062},
    {KERN_TYPE_Q2_K, {80, 82}, -1, 0.34},   {KERN_TYPE_Q3_K, {108, -1}, -1, 0.175},
    {KERN_TYPE_Q4_K, {0, 2}, -1, 0.082},    {KERN_TYPE_Q5_K, {0, 2}, -1, 0.042},
    {KERN_TYPE_Q6_K, {208, -1}, -1, 0.0205}, {KERN_TYPE_Q8_K, {-1, -1}, 0, 0.0080},
    {KERN_TYPE_IQ4_NL, {0, -1}, -1, 0.087}, {KERN_TYPE_IQ4_XS, {0, -1}, -1, 0.088},
};
#define N_TYPES (sizeof k_types / sizeof k_types[0])

static uint64_t g_rng = 0x9E3779B97F4A7C15ull;
static uint64_t rnd(void)
{
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return g_rng;
}
static double urand(void) { return ((double)(rnd() >> 11) + 0.5) / 9007199254740992.0; }
static float gauss(void) { return (float)(sqrt(-2.0 * log(urand())) * cos(6.283185307179586 * urand())); }

static const kern_type_traits *traits(kern_type t)
{
    const kern_type_traits *tr = kern_type_get(t);
    assert_non_null(tr);
    return tr;
}

static double rmse(const float *a, const float *b, size_t n)
{
    double s = 0;
    for (size_t i = 0; i < n; i++) s += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
    return sqrt(s / (double)n);
}

/* ---- geometry ---------------------------------------------------------- */

static void test_geometry(void **state)
{
    (void)state;
    for (size_t i = 0; i < N_TYPES; i++) {
        const kern_type_traits *tr = traits(k_types[i].t);
        assert_true(tr->is_quantized);
        assert_non_null(tr->row_to_f32);
        assert_non_null(tr->row_from_f32);
        int bs = tr->block_size;
        assert_true(bs == 32 || bs == 256);
        for (int nb = 0; nb < 5; nb++)
            assert_int_equal(kern_type_row_bytes(k_types[i].t, (int64_t)nb * bs), (size_t)nb * tr->block_bytes);
        assert_int_equal(kern_type_row_bytes(k_types[i].t, bs + 1), 0);
        assert_int_equal(kern_type_row_bytes(k_types[i].t, bs / 2), 0);
        /* by-id entry points check the shape */
        float f[256];
        uint8_t raw[512];
        memset(raw, 0, sizeof raw);
        assert_int_equal(quant_ref_dequantize(k_types[i].t, f, raw, bs), 0);
        assert_int_equal(quant_ref_dequantize(k_types[i].t, f, raw, bs + 1), -1);
        assert_int_equal(quant_ref_quantize(k_types[i].t, raw, f, bs - 1), -1);
    }
    float f[4] = {0};
    uint8_t raw[16];
    assert_int_equal(quant_ref_dequantize(KERN_TYPE_F32, f, raw, 4), -1);
    assert_int_equal(quant_ref_quantize(KERN_TYPE_BF16, raw, f, 4), -1);
    assert_int_equal(kern_type_row_bytes(KERN_TYPE_Q6_K, 512), 420);
    assert_int_equal(kern_type_row_bytes(KERN_TYPE_Q3_K, 256), 110);
    assert_int_equal(kern_type_row_bytes(KERN_TYPE_Q2_K, 768), 3 * 84);
    assert_int_equal(kern_type_row_bytes(KERN_TYPE_Q8_K, 256), 292);
}

/* ---- numpy cross-check ------------------------------------------------- */

static int have_numpy(void)
{
    if (access("/usr/bin/python3", X_OK) != 0) return 0;
    return system("/usr/bin/python3 -c 'import numpy' >/dev/null 2>&1") == 0;
}

/* Random bytes with every f16 / f32 field made finite (a non-finite scale
 * is no format's business). */
static void random_blocks(const qtype *q, uint8_t *raw, int nb)
{
    const kern_type_traits *tr = traits(q->t);
    for (size_t i = 0; i < (size_t)nb * tr->block_bytes; i++) raw[i] = (uint8_t)(rnd() >> 56);
    for (int b = 0; b < nb; b++) {
        uint8_t *blk = raw + (size_t)b * tr->block_bytes;
        for (int f = 0; f < 2; f++) {
            int o = q->f16_off[f];
            if (o < 0) continue;
            uint16_t h = (uint16_t)(blk[o] | blk[o + 1] << 8);
            if (((h >> 10) & 0x1F) == 0x1F) h &= (uint16_t)~0x0400u;
            if (b == 0) h = 0;             /* a zero scale */
            if (b == 1) h = (uint16_t)(h & 0x83FF); /* a subnormal one */
            blk[o] = (uint8_t)h, blk[o + 1] = (uint8_t)(h >> 8);
        }
        if (q->f32_off >= 0) {
            uint32_t u;
            memcpy(&u, blk + q->f32_off, 4);
            u = (u & 0x807FFFFFu) | (uint32_t)(((u >> 23) & 0xFF) % 160 + 40) << 23; /* 2^-87 .. 2^32 */
            memcpy(blk + q->f32_off, &u, 4);
        }
    }
}

static void test_numpy_bit_exact(void **state)
{
    (void)state;
    if (!have_numpy()) {
        fprintf(stderr, "skip: /usr/bin/python3 with numpy not found\n");
        skip();
    }
    const char *root = getenv("SGLC_ROOT") ? getenv("SGLC_ROOT") : ".";
    char script[1024];
    snprintf(script, sizeof script, "%s/tests/ref/gguf_quants.py", root);
    assert_int_equal(access(script, R_OK), 0);
    const int nb = 300;
    for (size_t i = 0; i < N_TYPES; i++) {
        const qtype *q = &k_types[i];
        const kern_type_traits *tr = traits(q->t);
        size_t n = (size_t)nb * (size_t)tr->block_size, bytes = (size_t)nb * tr->block_bytes;
        uint8_t *raw = malloc(bytes);
        float *mine = malloc(n * 4), *ref = malloc(n * 4);
        random_blocks(q, raw, nb);
        tr->row_to_f32(mine, raw, (int64_t)n);
        char in[] = "/tmp/test_quant_ref_in_XXXXXX", out[] = "/tmp/test_quant_ref_out_XXXXXX";
        int fi = mkstemp(in), fo = mkstemp(out);
        assert_true(fi >= 0 && fo >= 0);
        assert_int_equal(write(fi, raw, bytes), (ssize_t)bytes);
        close(fi), close(fo);
        char cmd[4096];
        snprintf(cmd, sizeof cmd, "/usr/bin/python3 %s dequant %s %s %s", script, tr->name, in, out);
        int rc = system(cmd);
        FILE *f = fopen(out, "rb");
        size_t got = f ? fread(ref, 4, n, f) : 0;
        if (f) fclose(f);
        unlink(in), unlink(out);
        if (rc != 0 || got != n) fail_msg("%s: numpy reference failed (rc %d, %zu of %zu values)", tr->name, rc, got, n);
        size_t bad = 0, first = 0;
        for (size_t j = 0; j < n; j++)
            if (memcmp(&mine[j], &ref[j], 4) && !bad++) first = j;
        if (bad)
            fail_msg("%s: %zu of %zu values differ from numpy; first [%zu] (block %zu): %.9g vs %.9g", tr->name, bad, n,
                     first, first / (size_t)tr->block_size, (double)mine[first], (double)ref[first]);
        fprintf(stderr, "%-7s %zu values bit-exact with numpy\n", tr->name, n);
        free(raw), free(mine), free(ref);
    }
}

/* ---- round trips ------------------------------------------------------- */

#define GK 4096 /* row length */
#define GROWS 16

static double type_rmse(kern_type t, const float *x, float *y)
{
    const kern_type_traits *tr = traits(t);
    uint8_t *row = malloc(kern_type_row_bytes(t, GK));
    for (int r = 0; r < GROWS; r++) {
        tr->row_from_f32(row, x + (size_t)r * GK, GK);
        tr->row_to_f32(y + (size_t)r * GK, row, GK);
    }
    free(row);
    return rmse(x, y, (size_t)GROWS * GK);
}

static void test_gaussian_round_trip(void **state)
{
    (void)state;
    size_t n = (size_t)GROWS * GK;
    float *x = malloc(n * 4), *y = malloc(n * 4);
    double sd = 0;
    for (size_t i = 0; i < n; i++) x[i] = gauss(), sd += (double)x[i] * x[i];
    sd = sqrt(sd / (double)n);
    double e[KERN_TYPE_COUNT] = {0};
    int over = 0;
    fprintf(stderr, "RMSE / sigma on %zu gaussian values:\n", n);
    for (size_t i = 0; i < N_TYPES; i++) {
        kern_type t = k_types[i].t;
        e[t] = type_rmse(t, x, y) / sd;
        fprintf(stderr, "  %-7s %.5f  (bound %.4f, %.3f bits/weight)\n", traits(t)->name, e[t], k_types[i].bound,
                8.0 * (double)traits(t)->block_bytes / traits(t)->block_size);
        for (size_t j = 0; j < n; j++) assert_true(isfinite(y[j]));
        if (!(e[t] <= k_types[i].bound)) over++;
    }
    for (size_t i = 0; i < N_TYPES; i++)
        if (!(e[k_types[i].t] <= k_types[i].bound))
            fail_msg("%s: RMSE %.5f over %.4f (%d types over)", traits(k_types[i].t)->name, e[k_types[i].t],
                     k_types[i].bound, over);
    /* llama.cpp's quality order */
    const kern_type order[] = {KERN_TYPE_Q8_0, KERN_TYPE_Q6_K, KERN_TYPE_Q5_K, KERN_TYPE_Q4_K, KERN_TYPE_Q4_0,
                               KERN_TYPE_Q3_K, KERN_TYPE_Q2_K};
    for (size_t i = 0; i + 1 < sizeof order / sizeof order[0]; i++)
        if (!(e[order[i]] < e[order[i + 1]]))
            fail_msg("%s (%.5f) not better than %s (%.5f)", traits(order[i])->name, e[order[i]],
                     traits(order[i + 1])->name, e[order[i + 1]]);
    assert_true(e[KERN_TYPE_Q5_1] < e[KERN_TYPE_Q5_0]);
    assert_true(e[KERN_TYPE_Q4_1] < e[KERN_TYPE_Q4_0]);
    assert_true(e[KERN_TYPE_Q5_0] < e[KERN_TYPE_Q4_1]);
    assert_true(e[KERN_TYPE_IQ4_NL] < e[KERN_TYPE_Q4_0]);
    assert_true(e[KERN_TYPE_IQ4_XS] < e[KERN_TYPE_Q4_0]);
    assert_true(e[KERN_TYPE_Q5_K] < e[KERN_TYPE_Q5_1] * 1.05);
    free(x), free(y);
}

/* Round-to-nearest types: a once-quantized row is a fixed point. */
static void test_second_trip_rtn(void **state)
{
    (void)state;
    const kern_type rtn[] = {KERN_TYPE_Q4_0, KERN_TYPE_Q4_1, KERN_TYPE_Q5_0, KERN_TYPE_Q5_1,
                             KERN_TYPE_Q8_0, KERN_TYPE_Q8_1, KERN_TYPE_Q8_K};
    size_t n = 8 * 256;
    float *x = malloc(n * 4), *y = malloc(n * 4), *z = malloc(n * 4);
    uint8_t *row = malloc(n * 4);
    for (size_t i = 0; i < n; i++) x[i] = gauss() * (i % 512 < 256 ? 1.0f : 0.01f);
    for (size_t i = 0; i < sizeof rtn / sizeof rtn[0]; i++) {
        const kern_type_traits *tr = traits(rtn[i]);
        tr->row_from_f32(row, x, (int64_t)n);
        tr->row_to_f32(y, row, (int64_t)n);
        tr->row_from_f32(row, y, (int64_t)n);
        tr->row_to_f32(z, row, (int64_t)n);
        for (size_t j = 0; j < n; j++)
            if (memcmp(&y[j], &z[j], 4)) fail_msg("%s second trip [%zu]: %.9g -> %.9g", tr->name, j, (double)y[j], (double)z[j]);
    }
    free(x), free(y), free(z), free(row);
}

/* Data every type holds exactly: in each group (the sub-block a scale
 * covers) codes spanning the type's full range, a random permutation of
 * them, times a step that the type's scale arithmetic reproduces exactly
 * (powers of two over the scale code's largest value).  Quantizing it
 * must give the same values back bit for bit. */
static void exact_data(kern_type t, float *x, int n)
{
    int group, lo, hi, rng_cnt;
    double step;
    const int8_t *table = NULL;
    switch (t) {
    case KERN_TYPE_Q8_0: case KERN_TYPE_Q8_1: group = 32, lo = -127, hi = 127, step = 1.0 / 128; break;
    case KERN_TYPE_Q8_K: group = 256, lo = -127, hi = 127, step = 1.0 / 64; break;
    case KERN_TYPE_Q4_0: group = 32, lo = -8, hi = 7, step = 1.0 / 16; break;
    case KERN_TYPE_Q5_0: group = 32, lo = -16, hi = 15, step = 1.0 / 32; break;
    case KERN_TYPE_Q4_1: group = 32, lo = 0, hi = 15, step = 1.0 / 16; break;
    case KERN_TYPE_Q5_1: group = 32, lo = 0, hi = 31, step = 1.0 / 32; break;
    case KERN_TYPE_Q2_K: group = 16, lo = 0, hi = 3, step = 15.0 / 256; break;
    case KERN_TYPE_Q3_K: group = 16, lo = -4, hi = 3, step = 32.0 / 1024; break;
    case KERN_TYPE_Q4_K: group = 32, lo = 0, hi = 15, step = 63.0 / 2048; break;
    case KERN_TYPE_Q5_K: group = 32, lo = 0, hi = 31, step = 63.0 / 4096; break;
    case KERN_TYPE_Q6_K: group = 16, lo = -32, hi = 31, step = 128.0 / 8192; break;
    case KERN_TYPE_IQ4_NL: group = 32, lo = 0, hi = 15, step = 1.0 / 256, table = kern_iq4nl_values; break;
    case KERN_TYPE_IQ4_XS: group = 32, lo = 0, hi = 15, step = 32.0 / 8192, table = kern_iq4nl_values; break;
    default: fail_msg("no exact data for type %d", (int)t); return;
    }
    rng_cnt = hi - lo + 1;
    for (int g = 0; g < n / group; g++) {
        float *xg = x + g * group;
        for (int i = 0; i < group; i++) {
            int c = i < rng_cnt ? lo + i : lo + (int)(rnd() % (uint64_t)rng_cnt);
            xg[i] = (float)((table ? table[c] : c) * step);
        }
        for (int i = group - 1; i > 0; i--) { /* shuffle */
            int j = (int)(rnd() % (uint64_t)(i + 1));
            float tmp = xg[i];
            xg[i] = xg[j], xg[j] = tmp;
        }
    }
}

static void test_exact_values_survive(void **state)
{
    (void)state;
    const int n = 1024;
    float x[1024], y[1024];
    static uint8_t row[1024 * 4];
    for (size_t i = 0; i < N_TYPES; i++) {
        const kern_type_traits *tr = traits(k_types[i].t);
        for (int rep = 0; rep < 4; rep++) {
            exact_data(k_types[i].t, x, n);
            tr->row_from_f32(row, x, n);
            tr->row_to_f32(y, row, n);
            for (int j = 0; j < n; j++)
                if (memcmp(&x[j], &y[j], 4))
                    fail_msg("%s: exactly held [%d] %.9g came back %.9g", tr->name, j, (double)x[j], (double)y[j]);
        }
    }
}

/* ---- activation types' side fields ------------------------------------ */

static void test_activation_sums(void **state)
{
    (void)state;
    float x[512];
    for (int i = 0; i < 512; i++) x[i] = gauss() * 3.0f;
    block_q8_K k8[2];
    quant_ref_from_f32_q8_K(k8, x, 512);
    for (int b = 0; b < 2; b++)
        for (int g = 0; g < 16; g++) {
            int s = 0;
            for (int j = 0; j < 16; j++) s += k8[b].qs[16 * g + j];
            assert_int_equal(k8[b].bsums[g], s);
        }
    block_q8_1 k1[16];
    quant_ref_from_f32_q8_1(k1, x, 512);
    for (int b = 0; b < 16; b++) {
        int s = 0;
        for (int j = 0; j < 32; j++) s += k1[b].qs[j];
        float d = f16_to_f32(k1[b].d), sv = f16_to_f32(k1[b].s);
        /* s = f16(d_f32 * sum): within f16 rounding of d_f16 * sum */
        assert_true(fabsf(sv - d * (float)s) <= 2e-3f * fabsf(d * (float)s) + 1e-6f);
    }
}

/* ---- non-finite and extreme inputs ------------------------------------ */

static void test_nonfinite_inputs(void **state)
{
    (void)state;
    const int n = 512;
    float x[512], y[512];
    static uint8_t row[512 * 4];
    const float specials[] = {NAN, INFINITY, -INFINITY, 1e30f, -1e30f, 3.4e38f, 1e-40f, -1e-45f, 0.0f, -0.0f, 70000.0f};
    const int ns = (int)(sizeof specials / sizeof specials[0]);
    for (size_t i = 0; i < N_TYPES; i++) {
        const kern_type_traits *tr = traits(k_types[i].t);
        for (int pat = 0; pat < 6; pat++) {
            for (int j = 0; j < n; j++) {
                switch (pat) {
                case 0: x[j] = specials[j % ns]; break;             /* mixed */
                case 1: x[j] = j % 37 ? gauss() : NAN; break;       /* a few NaN */
                case 2: x[j] = j % 5 ? gauss() : INFINITY; break;   /* some Inf */
                case 3: x[j] = NAN; break;                           /* all NaN */
                case 4: x[j] = gauss() * 1e-30f; break;              /* below f16 */
                default: x[j] = (j & 1 ? -1 : 1) * 3e38f; break;     /* huge */
                }
            }
            tr->row_from_f32(row, x, n);
            tr->row_to_f32(y, row, n);
            for (int j = 0; j < n; j++)
                if (!isfinite(y[j])) fail_msg("%s pattern %d: [%d] %g -> %g", tr->name, pat, j, (double)x[j], (double)y[j]);
            if (pat == 3)
                for (int j = 0; j < n; j++) assert_true(y[j] == 0.0f); /* NaN reads as 0 */
        }
        /* zeros stay zeros */
        memset(x, 0, sizeof x);
        tr->row_from_f32(row, x, n);
        tr->row_to_f32(y, row, n);
        for (int j = 0; j < n; j++) assert_true(y[j] == 0.0f);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_geometry),
        cmocka_unit_test(test_numpy_bit_exact),
        cmocka_unit_test(test_gaussian_round_trip),
        cmocka_unit_test(test_second_trip_rtn),
        cmocka_unit_test(test_exact_values_survive),
        cmocka_unit_test(test_activation_sums),
        cmocka_unit_test(test_nonfinite_inputs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
