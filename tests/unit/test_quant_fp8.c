/* test_quant_fp8 — the fp8 weight type (kernels/quant_fp8.h) through
 * kern_mat / kern_matmul and the type table, for every ISA this CPU runs.
 *
 * DESIGN: weights are random e4m3 codes (every finite code occurs; the
 * NaN codes 0x7F / 0xFF are out of the format's contract) with a random
 * f32 scale per 128 inputs.  The reference is computed here in double on
 * the weights decoded by this file's own e4m3 decoder (sign, 4-bit
 * exponent with bias 7, 3-bit mantissa, subnormals at exponent 0),
 * independent of util/dtype.h and of the kernels' F16C decode.  Bound:
 * |y - ref| <= 1e-5 * sum_i |w_i x_i| + 1e-6 (weight-only f32 arithmetic:
 * only the f32 products and sums round; k / 8 <= 512 terms per chain).
 * Shapes: m 1 (GEMV), 2, 3, 4, 5, 7, 13 (the GEMM's 3-row steps and
 * tails), n odd and past the 16-row panel, k of 1, 3, 9 blocks (9 crosses
 * the 1024-input panel) and 2048; threads nth 1 and 3, each share with its
 * own scratch; a bias.  The type's row dot, the traits' matmul slot (what
 * linear() calls) and the f32 -> type quantizer are checked too. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "kernels/kern_types.h"
#include "kernels/kernels.h"
#include "kernels/quant_fp8.h"
#include "util/cpu.h"
#include "util/dtype.h"

static const char *const k_isas[] = {"scalar", "avx2", "avx512"};

static int use_isa(int idx)
{
    const cpu_features *c = cpu_get();
    if (idx == 1 && !(c->avx2 && c->fma && c->f16c)) return 0;
    if (idx == 2 && !(c->avx512f && c->avx512bw && c->avx512vl && c->avx512dq && c->avx512bf16 &&
                      c->avx512vnni))
        return 0;
    return kernels_init(k_isas[idx]) == 0;
}

static uint64_t g_rng = 0x6A09E667F3BCC908ull;
static uint32_t rnd(void)
{
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return (uint32_t)(g_rng >> 32);
}
static float frand(void) { return (float)(rnd() & 0xFFFFFF) / (float)(1 << 23) - 1.0f; }

/* e4m3fn from its definition (finite codes only) */
static double e4m3(uint8_t c)
{
    int s = c >> 7, e = (c >> 3) & 15, m = c & 7;
    double v = e ? ldexp(1.0 + m / 8.0, e - 7) : ldexp(m / 8.0, -6);
    return s ? -v : v;
}

static block_f8b *rand_weight(int n, int k)
{
    block_f8b *b = malloc(sizeof(block_f8b) * (size_t)n * (k / QK_F8B));
    assert_non_null(b);
    for (int i = 0; i < n * (k / QK_F8B); i++) {
        b[i].d = ldexpf(0.5f + 0.5f * (float)(rnd() & 1023) / 1024.0f, -(int)(rnd() % 12));
        for (int j = 0; j < QK_F8B; j++) {
            uint8_t c = (uint8_t)rnd();
            b[i].q[j] = (c & 0x7F) == 0x7F ? (uint8_t)(c ^ 1) : c;
        }
    }
    return b;
}

/* y_ref (m, n) in double and the bound per element */
static void reference(const block_f8b *w, const float *x, const float *bias, int m, int n, int k, double *ref,
                      double *tol)
{
    const int nb = k / QK_F8B;
    for (int r = 0; r < m; r++)
        for (int j = 0; j < n; j++) {
            double s = bias ? bias[j] : 0.0, a = bias ? fabs(bias[j]) : 0.0;
            for (int i = 0; i < k; i++) {
                const block_f8b *b = w + (size_t)j * nb + i / QK_F8B;
                double p = e4m3(b->q[i % QK_F8B]) * b->d * x[(size_t)r * k + i];
                s += p, a += fabs(p);
            }
            ref[(size_t)r * n + j] = s;
            tol[(size_t)r * n + j] = 1e-5 * a + 1e-6;
        }
}

static void check_matmul(int isa, int m, int n, int k, int nth, int with_bias)
{
    block_f8b *w = rand_weight(n, k);
    float *x = malloc(sizeof(float) * (size_t)m * k), *y = malloc(sizeof(float) * (size_t)m * n);
    float *y2 = malloc(sizeof(float) * (size_t)m * n), *bias = malloc(sizeof(float) * (size_t)n);
    double *ref = malloc(sizeof(double) * (size_t)m * n), *tol = malloc(sizeof(double) * (size_t)m * n);
    assert_true(x && y && y2 && bias && ref && tol);
    for (int i = 0; i < m * k; i++) x[i] = frand();
    for (int j = 0; j < n; j++) bias[j] = frand();
    reference(w, x, with_bias ? bias : NULL, m, n, k, ref, tol);
    kern_mat mat;
    assert_int_equal(kern_mat_init_kt(&mat, w, KERN_TYPE_F8_B128, n, k, KERN_TYPE_F8_B128, 1), 0);
    assert_ptr_equal(mat.data, w); /* borrowed: the bytes are the kernels' layout */
    assert_int_equal(mat.bytes, (size_t)n * (k / QK_F8B) * sizeof(block_f8b));
    size_t ss = kern_matmul_scratch(m, k);
    char *scratch = malloc(ss * (size_t)nth);
    assert_non_null(scratch);
    memset(y, 0xFF, sizeof(float) * (size_t)m * n); /* NaN: every element must be written */
    for (int t = 0; t < nth; t++) kern_matmul(y, x, m, &mat, with_bias ? bias : NULL, t, nth, scratch + t * ss);
    /* the traits' slot for the weight's ISA: what linear() calls */
    kern_matmul_fn mm = kern_type_get(KERN_TYPE_F8_B128)->matmul[mat.isa];
    assert_non_null(mm);
    for (int t = 0; t < nth; t++) mm(y2, x, m, &mat, with_bias ? bias : NULL, t, nth, scratch + t * ss);
    for (int i = 0; i < m * n; i++) {
        if (!(fabs(y[i] - ref[i]) <= tol[i]))
            fail_msg("%s m %d n %d k %d nth %d: y[%d] = %.9g, ref %.9g (tol %.3g)", k_isas[isa], m, n, k, nth, i,
                     (double)y[i], ref[i], tol[i]);
        assert_memory_equal(&y[i], &y2[i], sizeof(float));
    }
    /* the row dot */
    for (int j = 0; j < n; j++) {
        float d = kern_type_dot(KERN_TYPE_F8_B128, (const char *)w + (size_t)j * kern_type_row_bytes(KERN_TYPE_F8_B128, k),
                                x, k);
        double rb = ref[j] - (with_bias ? bias[j] : 0.0);
        assert_true(fabs(d - rb) <= tol[j] + (with_bias ? 1e-6 * fabs(bias[j]) : 0.0));
    }
    kern_mat_free(&mat);
    free(w), free(x), free(y), free(y2), free(bias), free(ref), free(tol), free(scratch);
}

static void test_matmul(void **state)
{
    (void)state;
    static const int ms[] = {1, 2, 3, 4, 5, 7, 13};
    static const int ns[] = {1, 5, 17, 37};
    static const int ks[] = {128, 384, 1152};
    int ran = 0;
    for (int isa = 0; isa < 3; isa++) {
        if (!use_isa(isa)) continue;
        ran++;
        for (size_t a = 0; a < sizeof ms / sizeof ms[0]; a++)
            for (size_t b = 0; b < sizeof ns / sizeof ns[0]; b++)
                for (size_t c = 0; c < sizeof ks / sizeof ks[0]; c++)
                    check_matmul(isa, ms[a], ns[b], ks[c], (int)((a + b + c) % 2) ? 3 : 1, (int)(a + c) % 2);
        check_matmul(isa, 1, 64, 2048, 3, 0);
        check_matmul(isa, 19, 48, 2048, 2, 1);
    }
    assert_true(ran >= 1);
    kernels_init(NULL);
}

/* AVX2 and scalar on the same weight: both within the bound of the
 * reference (checked above); here the GEMM's panel (weights dequantized
 * to f32) must hold the dequantized weights bit for bit: a matmul against
 * unit vectors e_i returns column i of W exactly. */
static void test_panel_exact(void **state)
{
    (void)state;
    const int n = 21, k = 256, m = 5;
    block_f8b *w = rand_weight(n, k);
    float *x = calloc((size_t)m * k, sizeof(float)), *y = malloc(sizeof(float) * (size_t)m * n);
    float row[256];
    assert_true(x && y);
    for (int isa = 0; isa < 3; isa++) {
        if (!use_isa(isa)) continue;
        kern_mat mat;
        assert_int_equal(kern_mat_init_kt(&mat, w, KERN_TYPE_F8_B128, n, k, KERN_TYPE_F8_B128, 1), 0);
        size_t ss = kern_matmul_scratch(m, k);
        char *scratch = malloc(ss);
        for (int i0 = 0; i0 < k; i0 += m) {
            memset(x, 0, sizeof(float) * (size_t)m * k);
            for (int r = 0; r < m && i0 + r < k; r++) x[(size_t)r * k + i0 + r] = 1.0f;
            kern_matmul(y, x, m, &mat, NULL, 0, 1, scratch);
            for (int j = 0; j < n; j++) {
                kern_type_get(KERN_TYPE_F8_B128)->row_to_f32(row, (const char *)w + (size_t)j * (k / QK_F8B) * sizeof(block_f8b), k);
                for (int r = 0; r < m && i0 + r < k; r++) {
                    float want = (float)(e4m3(w[(size_t)j * (k / QK_F8B) + (i0 + r) / QK_F8B].q[(i0 + r) % QK_F8B]) *
                                         w[(size_t)j * (k / QK_F8B) + (i0 + r) / QK_F8B].d);
                    assert_memory_equal(&row[i0 + r], &want, sizeof want);
                    /* bit for bit, but +0 for the code -0 (a sum of zero products) */
                    float got = y[(size_t)r * n + j];
                    if (want == 0.0f) assert_true(got == 0.0f);
                    else assert_memory_equal(&got, &want, sizeof want);
                }
            }
        }
        free(scratch);
        kern_mat_free(&mat);
    }
    free(w), free(x), free(y);
    kernels_init(NULL);
}

/* f32 -> type: d = amax / 448 per block, every value within half an e4m3
 * step of x / d (round to nearest), and an f32 source through
 * kern_mat_init_kt quantizes at load into an owned buffer. */
static void test_from_f32(void **state)
{
    (void)state;
    const int n = 3, k = 384;
    float x[3 * 384], back[384];
    for (int i = 0; i < n * k; i++) x[i] = frand() * (i % 7 == 0 ? 10.0f : 1.0f);
    for (int i = 0; i < 128; i++) x[128 + i] = 0.0f; /* an all-zero block */
    block_f8b b[3 * 3];
    for (int j = 0; j < n; j++) kern_type_get(KERN_TYPE_F8_B128)->row_from_f32(b + j * 3, x + j * k, k);
    for (int j = 0; j < n; j++) {
        kern_type_get(KERN_TYPE_F8_B128)->row_to_f32(back, b + j * 3, k);
        for (int i = 0; i < k; i++) {
            const block_f8b *bl = &b[j * 3 + i / 128];
            float amax = 0.0f;
            for (int t = 0; t < 128; t++) amax = fmaxf(amax, fabsf(x[j * k + (i / 128) * 128 + t]));
            assert_true(bl->d == (amax > 0.0f ? amax / 448.0f : 1.0f));
            double v = x[j * k + i] / bl->d, a = fabs(v);
            int e = a > 0 ? (int)floor(log2(a)) : -6;
            double step = ldexp(1.0, (e < -6 ? -6 : e) - 3);
            assert_true(fabs(back[i] / bl->d - v) <= step / 2 * (1 + 1e-6));
        }
    }
    kern_mat mat;
    assert_int_equal(kern_mat_init_kt(&mat, x, KERN_TYPE_F32, n, k, KERN_TYPE_F8_B128, 1), 0);
    assert_non_null(mat.owned);
    assert_memory_equal(mat.data, b, sizeof b);
    kern_mat_free(&mat);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matmul),
        cmocka_unit_test(test_panel_exact),
        cmocka_unit_test(test_from_f32),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
