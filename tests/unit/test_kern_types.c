/* test_kern_types — the storage-type table (kernels/kern_types.h): block
 * geometry and bytes per row on odd sizes, row-to-f32 / f32-to-row round
 * trips (exact for values the type holds, round-to-nearest-even otherwise),
 * every type's dot for every ISA this CPU runs against a double-precision
 * scalar reference, and the matmul slots: the ISA's own kernel, giving the
 * same bits as kern_matmul on a weight packed for that ISA. */
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

static uint64_t g_rng = 0x243F6A8885A308D3ull;
static float frand(void) /* uniform in [-1, 1) */
{
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return (float)((g_rng >> 40) & 0xFFFFFF) / (float)(1 << 23) - 1.0f;
}

static void test_geometry(void **state)
{
    (void)state;
    kernels_init("scalar");
    const kern_type_traits *f = kern_type_get(KERN_TYPE_F32), *h = kern_type_get(KERN_TYPE_F16),
                           *b = kern_type_get(KERN_TYPE_BF16);
    assert_non_null(f), assert_non_null(h), assert_non_null(b);
    assert_string_equal(f->name, "f32");
    assert_string_equal(h->name, "f16");
    assert_string_equal(b->name, "bf16");
    assert_null(kern_type_get(KERN_TYPE_COUNT));
    assert_null(kern_type_get((kern_type)-1));
    /* ids equal util/dtype.h's */
    assert_int_equal(kern_type_of_dtype(DTYPE_F32), KERN_TYPE_F32);
    assert_int_equal(kern_type_of_dtype(DTYPE_F16), KERN_TYPE_F16);
    assert_int_equal(kern_type_of_dtype(DTYPE_BF16), KERN_TYPE_BF16);
    const int64_t ks[] = {0, 1, 3, 7, 31, 33, 1023, 4097};
    for (size_t i = 0; i < sizeof ks / sizeof ks[0]; i++) {
        int64_t k = ks[i];
        assert_int_equal(kern_type_row_bytes(KERN_TYPE_F32, k), (size_t)k * 4);
        assert_int_equal(kern_type_row_bytes(KERN_TYPE_F16, k), (size_t)k * 2);
        assert_int_equal(kern_type_row_bytes(KERN_TYPE_BF16, k), (size_t)k * 2);
        for (int t = 0; t < KERN_TYPE_FLOAT_COUNT; t++) {
            const kern_type_traits *tr = kern_type_get((kern_type)t);
            assert_int_equal(tr->block_size, 1);
            assert_true(kern_type_row_ok((kern_type)t, k));
            assert_int_equal(kern_type_row_bytes((kern_type)t, k), dtype_size((dtype)t) * (size_t)k);
            assert_int_equal(kern_type_mat_bytes((kern_type)t, 5, k), 5 * kern_type_row_bytes((kern_type)t, k));
        }
    }
    assert_false(kern_type_row_ok(KERN_TYPE_F32, -1));
    assert_int_equal(kern_type_row_bytes(KERN_TYPE_F32, -1), 0);
    assert_int_equal(kern_type_row_bytes((kern_type)KERN_TYPE_COUNT, 8), 0);
    /* matmul-capable types are the ones kern_mat_init accepts */
    assert_true(f->matmul_ok);
    assert_true(b->matmul_ok);
    assert_false(h->matmul_ok);
}

static void test_round_trip(void **state)
{
    (void)state;
    const int ks[] = {1, 3, 17, 257, 1001};
    for (size_t ki = 0; ki < sizeof ks / sizeof ks[0]; ki++) {
        int k = ks[ki];
        float *x = malloc(sizeof(float) * (size_t)k), *y = malloc(sizeof(float) * (size_t)k);
        float *z = malloc(sizeof(float) * (size_t)k);
        unsigned char *row = malloc((size_t)k * 4);
        for (int i = 0; i < k; i++) x[i] = frand() * 100.0f;
        for (int t = 0; t < KERN_TYPE_FLOAT_COUNT; t++) {
            const kern_type_traits *tr = kern_type_get((kern_type)t);
            tr->row_from_f32(row, x, k);
            tr->row_to_f32(y, row, k);
            for (int i = 0; i < k; i++) {
                /* the scalar conversions of util/dtype.h are the reference */
                float want = t == KERN_TYPE_BF16 ? bf16_to_f32(f32_to_bf16(x[i]))
                             : t == KERN_TYPE_F16 ? f16_to_f32(f32_to_f16(x[i]))
                             : t == KERN_TYPE_F8_E4M3 ? f8e4m3_to_f32(f32_to_f8e4m3(x[i]))
                             : t == KERN_TYPE_F8_E5M2 ? f8e5m2_to_f32(f32_to_f8e5m2(x[i]))
                                                  : x[i];
                if (memcmp(&y[i], &want, 4))
                    fail_msg("%s k=%d [%d]: %.9g -> %.9g, want %.9g", tr->name, k, i,
                             (double)x[i], (double)y[i], (double)want);
            }
            /* values the type holds survive a second trip bit for bit */
            tr->row_from_f32(row, y, k);
            tr->row_to_f32(z, row, k);
            assert_memory_equal(y, z, sizeof(float) * (size_t)k);
        }
        free(x), free(y), free(z), free(row);
    }
}

static void test_dot_per_isa(void **state)
{
    (void)state;
    const int ks[] = {1, 5, 16, 33, 255, 256, 257, 1000};
    for (int isa = 0; isa < 3; isa++) {
        if (!use_isa(isa)) continue;
        for (size_t ki = 0; ki < sizeof ks / sizeof ks[0]; ki++) {
            int k = ks[ki];
            float *x = malloc(sizeof(float) * (size_t)k), *w = malloc(sizeof(float) * (size_t)k);
            unsigned char *row = malloc((size_t)k * 4);
            for (int i = 0; i < k; i++) x[i] = frand(), w[i] = frand();
            for (int t = 0; t < KERN_TYPE_FLOAT_COUNT; t++) {
                const kern_type_traits *tr = kern_type_get((kern_type)t);
                tr->row_from_f32(row, w, k);
                float *wv = malloc(sizeof(float) * (size_t)k);
                tr->row_to_f32(wv, row, k);
                double ref = 0.0, scale = 0.0;
                for (int i = 0; i < k; i++) {
                    ref += (double)wv[i] * x[i];
                    scale += fabs((double)wv[i] * x[i]);
                }
                kern_row_dot_fn f = tr->dot[isa];
                assert_non_null(f); /* every ISA the CPU runs has a dot for every type */
                float got = f(row, x, k), cur = kern_type_dot((kern_type)t, row, x, k);
                if (!(fabs(got - ref) <= 2e-5 * scale + 1e-6))
                    fail_msg("%s dot [isa %s] k=%d: %.9g vs %.9g", tr->name, k_isas[isa], k,
                             (double)got, ref);
                assert_memory_equal(&got, &cur, sizeof got); /* current ISA's slot */
                free(wv);
            }
            free(x), free(w), free(row);
        }
    }
    kernels_init(NULL);
}

/* The matmul slot of each matmul type is the ISA's kernel: bit-identical
 * to kern_matmul on a weight packed under that ISA. */
static void test_matmul_slots(void **state)
{
    (void)state;
    const int m = 3, n = 37, k = 45;
    float *x = malloc(sizeof(float) * m * k), *w = malloc(sizeof(float) * n * k);
    float *y1 = malloc(sizeof(float) * m * n), *y2 = malloc(sizeof(float) * m * n);
    for (int i = 0; i < m * k; i++) x[i] = frand();
    for (int i = 0; i < n * k; i++) w[i] = frand();
    for (int isa = 0; isa < 3; isa++) {
        if (!use_isa(isa)) continue;
        const dtype dts[2] = {DTYPE_F32, DTYPE_BF16};
        for (int d = 0; d < 2; d++) {
            kern_mat mat;
            assert_int_equal(kern_mat_init(&mat, w, DTYPE_F32, n, k, dts[d], 0), 0);
            /* packing may pad a matrix, never shrink it */
            assert_true(mat.bytes >= kern_type_mat_bytes(kern_type_of_dtype(dts[d]), n, k));
            size_t sb = kern_matmul_scratch(m, k);
            void *scr = malloc(sb ? sb : 1);
            const kern_type_traits *tr = kern_type_get(kern_type_of_dtype(dts[d]));
            assert_non_null(tr->matmul[mat.isa]);
            kern_matmul(y1, x, m, &mat, NULL, 0, 1, scr);
            tr->matmul[mat.isa](y2, x, m, &mat, NULL, 0, 1, scr);
            assert_memory_equal(y1, y2, sizeof(float) * m * n);
            free(scr);
            kern_mat_free(&mat);
        }
    }
    kernels_init(NULL);
    free(x), free(w), free(y1), free(y2);
}

/* The quantized types' geometry is the GGUF layout (ggml-common.h's block
 * sizes: Q4_0 18 bytes per 32, Q8_0 34 per 32, Q4_K 144 per 256, Q6_K 210
 * per 256, IQ4_XS 136 per 256), and the ggml ids map both ways. */
static void test_quant_geometry(void **state)
{
    (void)state;
    assert_int_equal(kern_type_row_bytes(KERN_TYPE_Q4_0, 64), 36);
    assert_int_equal(kern_type_row_bytes(KERN_TYPE_Q8_0, 4096), 4096 / 32 * 34);
    assert_int_equal(kern_type_row_bytes(KERN_TYPE_Q4_K, 2048), 8 * 144);
    assert_int_equal(kern_type_row_bytes(KERN_TYPE_Q6_K, 256), 210);
    assert_int_equal(kern_type_row_bytes(KERN_TYPE_IQ4_XS, 512), 272);
    assert_int_equal(kern_type_row_bytes(KERN_TYPE_Q4_K, 100), 0); /* not whole blocks */
    assert_false(kern_type_row_ok(KERN_TYPE_Q5_0, 48));
    for (int t = KERN_TYPE_FLOAT_COUNT; t < KERN_TYPE_COUNT; t++) {
        const kern_type_traits *tr = kern_type_get((kern_type)t);
        assert_non_null(tr->name);
        assert_true(tr->is_quantized);
        if (t != KERN_TYPE_F8_B128) /* the one quantized type GGUF has no id for */
            assert_int_equal(kern_type_of_ggml(kern_type_to_ggml((kern_type)t)), t);
        assert_int_equal(kern_type_by_name(tr->name), t);
    }
    assert_int_equal(kern_type_of_ggml(12), KERN_TYPE_Q4_K); /* GGML_TYPE_Q4_K = 12 */
    assert_int_equal(kern_type_of_ggml(30), KERN_TYPE_BF16);
    assert_int_equal(kern_type_of_ggml(16), -1); /* IQ2_XXS: not supported */
    assert_int_equal(kern_type_by_name("Q4_K"), KERN_TYPE_Q4_K);
    assert_int_equal(kern_type_by_name("nope"), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_geometry),
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_quant_geometry),
        cmocka_unit_test(test_dot_per_isa),
        cmocka_unit_test(test_matmul_slots),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
