/* quant_fp8 — the fp8 weight type's row conversions, scalar reference
 * kernels and matmul driver (see quant_fp8.h).
 *
 * The scalar reference sums each block's e4m3(q) * x in input order (f32),
 * scales it by d and adds the blocks in order; the AVX2 kernels
 * (quant_fp8_avx2.c) are checked against it (tests/unit/test_quant_fp8.c).
 * The driver splits output columns with kern_split like every matmul. */
#include "kernels/quant_fp8.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "util/dtype.h"

void qf8_row_to_f32(float *dst, const void *src, int64_t k)
{
    const block_f8b *b = src;
    const float *tab = dtype_f8_table(DTYPE_F8_E4M3);
    for (int64_t i = 0; i < k / QK_F8B; i++)
        for (int j = 0; j < QK_F8B; j++) dst[i * QK_F8B + j] = tab[b[i].q[j]] * b[i].d;
}

void qf8_row_from_f32(void *dst, const float *src, int64_t k)
{
    block_f8b *b = dst;
    for (int64_t i = 0; i < k / QK_F8B; i++) {
        const float *x = src + i * QK_F8B;
        float amax = 0.0f;
        for (int j = 0; j < QK_F8B; j++) amax = fmaxf(amax, fabsf(x[j]));
        float d = amax > 0.0f ? amax / 448.0f : 1.0f;
        b[i].d = d;
        for (int j = 0; j < QK_F8B; j++) b[i].q[j] = f32_to_f8e4m3(x[j] / d);
    }
}

float qf8_dot_scalar(const void *row, const float *x, int k)
{
    const block_f8b *b = row;
    const float *tab = dtype_f8_table(DTYPE_F8_E4M3);
    float sum = 0.0f;
    for (int i = 0; i < k / QK_F8B; i++) {
        float s = 0.0f;
        for (int j = 0; j < QK_F8B; j++) s += tab[b[i].q[j]] * x[i * QK_F8B + j];
        sum += s * b[i].d;
    }
    return sum;
}

void qf8_matmul_scalar(float *y, const float *x, int m, const kern_mat *w, const float *bias, int ith,
                       int nth, void *scratch)
{
    qf8_matmul(y, x, m, w, bias, ith, nth, scratch, KERN_ISA_SCALAR);
}

void qf8_matmul_avx2(float *y, const float *x, int m, const kern_mat *w, const float *bias, int ith,
                     int nth, void *scratch)
{
    qf8_matmul(y, x, m, w, bias, ith, nth, scratch, KERN_ISA_AVX2);
}

size_t qf8_matmul_scratch(int m, int k)
{
    (void)m, (void)k;
    return (size_t)QF8_NB * QF8_KC * sizeof(float) + 64;
}

void qf8_matmul(float *y, const float *x, int m, const kern_mat *w, const float *bias, int ith, int nth,
                void *scratch, kern_isa isa)
{
    const int n = w->n, k = w->k;
    const size_t rb = (size_t)(k / QK_F8B) * sizeof(block_f8b);
    int lo, hi;
    kern_split(n, ith, nth, &lo, &hi);
    if (lo >= hi) return;
    if (isa == KERN_ISA_SCALAR) {
        for (int r = 0; r < m; r++)
            for (int j = lo; j < hi; j++)
                y[(size_t)r * n + j] = qf8_dot_scalar((const char *)w->data + (size_t)j * rb, x + (size_t)r * k, k);
    } else {
        float *panel = (float *)(((uintptr_t)scratch + 63) & ~(uintptr_t)63);
        qf8_cols_avx2(y, x, m, w, lo, hi, panel);
    }
    if (bias)
        for (int r = 0; r < m; r++)
            for (int j = lo; j < hi; j++) y[(size_t)r * n + j] += bias[j];
}
