/* test_quant_perm — kern_mat.perm, the act-order input permutation of a
 * block-quantized weight (kernels/quant_dot.c gathers x[perm] before the
 * product; wsource_hfq.c stores act-order GPTQ columns sorted by group).
 *
 * DESIGN: the permuted product must be bit-identical to the same weight
 * without perm applied to x gathered here (the same kernels on the same
 * rows), for Q4_0 (plain and the repacked 8-row layout), Q4_1 and Q8_0,
 * every ISA this CPU runs, m past the 64-row gather chunk (1, 5, 70), odd
 * n, threads 1 and 2 with their own scratch; and a permutation that is
 * not the identity must change the result (the gather is not skipped). */
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

static uint64_t g_rng = 0xBB67AE8584CAA73Bull;
static uint32_t rnd(void)
{
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return (uint32_t)(g_rng >> 32);
}
static float frand(void) { return (float)(rnd() & 0xFFFFFF) / (float)(1 << 23) - 1.0f; }

static void run(const kern_mat *w, const float *x, int m, float *y, int nth)
{
    size_t ss = kern_matmul_scratch(m, w->k);
    char *scr = malloc(ss * (size_t)nth);
    assert_non_null(scr);
    for (int t = 0; t < nth; t++) kern_matmul(y, x, m, w, NULL, t, nth, scr + t * ss);
    free(scr);
}

static void check(kern_type t, int owned, int m, int n, int k, int nth)
{
    float *wf = malloc(sizeof(float) * (size_t)n * k), *x = malloc(sizeof(float) * (size_t)m * k);
    float *xg = malloc(sizeof(float) * (size_t)m * k), *y = malloc(sizeof(float) * (size_t)m * n);
    float *y2 = malloc(sizeof(float) * (size_t)m * n);
    int32_t *perm = malloc(sizeof(int32_t) * (size_t)k);
    assert_true(wf && x && xg && y && y2 && perm);
    for (int i = 0; i < n * k; i++) wf[i] = frand();
    for (int i = 0; i < m * k; i++) x[i] = frand() * (i % 5 == 0 ? 4.0f : 1.0f);
    for (int c = 0; c < k; c++) perm[c] = c;
    for (int c = k - 1; c > 0; c--) { /* Fisher-Yates */
        int j = (int)(rnd() % (uint32_t)(c + 1)), tmp = perm[c];
        perm[c] = perm[j], perm[j] = tmp;
    }
    for (int r = 0; r < m; r++)
        for (int c = 0; c < k; c++) xg[(size_t)r * k + c] = x[(size_t)r * k + perm[c]];
    kern_mat w;
    /* borrow_ok 0: an owned copy (the 8-row layout for Q4_0 / Q8_0 on SIMD ISAs) */
    assert_int_equal(kern_mat_init_kt(&w, wf, KERN_TYPE_F32, n, k, t, owned ? 0 : 1), 0);
    run(&w, xg, m, y2, nth);
    w.perm = perm;
    run(&w, x, m, y, nth);
    assert_memory_equal(y, y2, sizeof(float) * (size_t)m * n);
    w.perm = NULL;
    run(&w, x, m, y, nth); /* unpermuted x: a different product */
    int differ = 0;
    for (int i = 0; i < m * n; i++) differ |= y[i] != y2[i];
    assert_true(differ);
    kern_mat_free(&w);
    free(wf), free(x), free(xg), free(y), free(y2), free(perm);
}

static void test_perm(void **state)
{
    (void)state;
    static const kern_type ts[] = {KERN_TYPE_Q4_0, KERN_TYPE_Q4_1, KERN_TYPE_Q8_0};
    static const int ms[] = {1, 5, 70};
    int ran = 0;
    for (int isa = 0; isa < 3; isa++) {
        if (!use_isa(isa)) continue;
        ran++;
        for (size_t a = 0; a < sizeof ts / sizeof ts[0]; a++)
            for (size_t b = 0; b < sizeof ms / sizeof ms[0]; b++) {
                check(ts[a], 0, ms[b], 37, 256, 1 + (int)(b % 2));
                check(ts[a], 1, ms[b], 40, 256, 2 - (int)(b % 2));
            }
    }
    assert_true(ran >= 1);
    kernels_init(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_perm),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
