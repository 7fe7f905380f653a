/* test_lora_shard — lora_shard_copy, the slice a tensor- or pipeline-
 * parallel rank keeps of one adapter pair (src/lora/lora_shard.c):
 *   - for every (row, column) slice of odd sizes — whole, column-parallel
 *     (B's rows), row-parallel (A's columns), both — and F32 / F16 / BF16
 *     files, A's columns and Bᵀ's columns are exactly the full pair's
 *     (f32 kept for F32/F16, bf16 bits kept for BF16 pairs);
 *   - the shards' deltas add up: summed over the ranks of a row-parallel
 *     split, Σ_r scale·(x_r·A_rᵀ)·Bᵀ equals the full scale·(x·Aᵀ)·Bᵀ, and
 *     the ranks of a column-parallel split give disjoint row blocks of it
 *     (the math the decoder's all-reduce relies on);
 *   - lora_shard_pair_bytes matches what the copy wrote. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "lora/lora_shard.h"
#include "util/dtype.h"

/* A (r, k) or B (n, r) of dtype dt with values v (row-major), as a file would hold it. */
static st_tensor make_t(int dt, int rows, int cols, const float *v, void **buf)
{
    size_t n = (size_t)rows * cols, es = dt == DTYPE_F32 ? 4 : 2;
    char *p = malloc(n * es);
    for (size_t i = 0; i < n; i++) {
        if (dt == DTYPE_F32) memcpy(p + 4 * i, &v[i], 4);
        else {
            uint16_t h = dt == DTYPE_BF16 ? f32_to_bf16(v[i]) : f32_to_f16(v[i]);
            memcpy(p + 2 * i, &h, 2);
        }
    }
    *buf = p;
    st_tensor t = {.dt = dt, .ndim = 2, .shape = {rows, cols}, .nbytes = n * es, .data = p};
    return t;
}

static float stored(int dt, float v)
{
    return dt == DTYPE_BF16 ? bf16_to_f32(f32_to_bf16(v)) : dt == DTYPE_F16 ? f16_to_f32(f32_to_f16(v)) : v;
}

static float get(const linear_adapter *la, const void *base, size_t i)
{
    if (la->dt == DTYPE_BF16) {
        uint16_t h;
        memcpy(&h, (const char *)base + 2 * i, 2);
        return bf16_to_f32(h);
    }
    return ((const float *)base)[i];
}

static void test_copy_slices(void **st)
{
    (void)st;
    const int r = 3, k = 13, n = 11;
    float *A = malloc(sizeof(float) * r * k), *B = malloc(sizeof(float) * n * r);
    for (int i = 0; i < r * k; i++) A[i] = sinf(0.37f * (float)i + 0.1f);
    for (int i = 0; i < n * r; i++) B[i] = cosf(0.53f * (float)i - 0.2f);
    const int dts[3] = {DTYPE_F32, DTYPE_F16, DTYPE_BF16};
    /* (row0, rows, col0, cols) of the (n, k) weight */
    const int sl[5][4] = {{0, n, 0, k}, {4, 5, 0, k}, {0, n, 6, 7}, {3, 1, 12, 1}, {10, 1, 0, 13}};
    for (int d = 0; d < 3; d++) {
        void *ab, *bb;
        st_tensor ta = make_t(dts[d], r, k, A, &ab), tb = make_t(dts[d], n, r, B, &bb);
        for (int s = 0; s < 5; s++) {
            linear_shard sh = {sl[s][0], sl[s][1], n, sl[s][2], sl[s][3], k};
            const bool bf = dts[d] == DTYPE_BF16;
            size_t bytes = lora_shard_pair_bytes(&sh, r, bf);
            char *mem = malloc(bytes);
            linear_adapter la = {.rank = r, .dt = bf ? DTYPE_BF16 : DTYPE_F32};
            char *end = lora_shard_copy(&ta, &tb, r, &sh, bf, mem, &la);
            assert_int_equal((size_t)(end - mem), bytes);
            for (int j = 0; j < r; j++)
                for (int c = 0; c < sh.cols; c++)
                    assert_true(get(&la, la.a, (size_t)j * sh.cols + c) ==
                                stored(dts[d], A[j * k + sh.col0 + c]));
            for (int j = 0; j < r; j++)
                for (int o = 0; o < sh.rows; o++)
                    assert_true(get(&la, la.bt, (size_t)j * sh.rows + o) ==
                                stored(dts[d], B[(sh.row0 + o) * r + j]));
            free(mem);
        }
        free(ab), free(bb);
    }
    free(A), free(B);
}

/* scale·(x·Aᵀ)·Bᵀ of a sliced f32 pair: y (rows) from x (cols). */
static void delta(const linear_adapter *la, const linear_shard *sh, const float *x, double *y)
{
    const float *a = la->a, *bt = la->bt;
    double u[8] = {0};
    for (int j = 0; j < la->rank; j++)
        for (int c = 0; c < sh->cols; c++) u[j] += (double)a[j * sh->cols + c] * x[c];
    for (int o = 0; o < sh->rows; o++) {
        y[o] = 0;
        for (int j = 0; j < la->rank; j++) y[o] += la->scale * u[j] * bt[j * sh->rows + o];
    }
}

static void test_shards_sum(void **st)
{
    (void)st;
    const int r = 4, k = 12, n = 10, N = 2;
    float A[4 * 12], B[10 * 4], x[12];
    for (int i = 0; i < r * k; i++) A[i] = sinf(0.7f * (float)i);
    for (int i = 0; i < n * r; i++) B[i] = cosf(0.3f * (float)i + 1.0f);
    for (int i = 0; i < k; i++) x[i] = 0.5f - 0.1f * (float)i;
    void *ab, *bb;
    st_tensor ta = make_t(DTYPE_F32, r, k, A, &ab), tb = make_t(DTYPE_F32, n, r, B, &bb);
    double full[10], sum[10] = {0}, part[10];
    float mem[4 * (12 + 10)];
    linear_adapter la = {.rank = r, .scale = 1.5f, .dt = DTYPE_F32};
    linear_shard whole = linear_shard_full(n, k);
    lora_shard_copy(&ta, &tb, r, &whole, false, (char *)mem, &la);
    delta(&la, &whole, x, full);
    for (int rk = 0; rk < N; rk++) { /* row-parallel: input columns split, outputs summed */
        linear_shard sh = {0, n, n, rk * k / N, k / N, k};
        lora_shard_copy(&ta, &tb, r, &sh, false, (char *)mem, &la);
        delta(&la, &sh, x + sh.col0, part);
        for (int o = 0; o < n; o++) sum[o] += part[o];
    }
    for (int o = 0; o < n; o++) assert_true(fabs(sum[o] - full[o]) <= 1e-9 * (1 + fabs(full[o])));
    for (int rk = 0; rk < N; rk++) { /* column-parallel: each rank its output rows */
        linear_shard sh = {rk * n / N, n / N, n, 0, k, k};
        lora_shard_copy(&ta, &tb, r, &sh, false, (char *)mem, &la);
        delta(&la, &sh, x, part);
        for (int o = 0; o < sh.rows; o++) assert_true(fabs(part[o] - full[sh.row0 + o]) <= 1e-12);
    }
    free(ab), free(bb);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_copy_slices),
        cmocka_unit_test(test_shards_sum),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
