/* quant_fp8 — private to src/kernels: the fp8 (e4m3fn) weight type kept
 * as one byte per weight, and its weight-only f32 matmul.
 *
 * DESIGN: a row of k weights is k / 128 blocks
 *
 *     block_f8b { float d; uint8_t q[128]; }     132 bytes, 1.03 B / weight
 *
 * value i = e4m3(q[i]) * d.  One scale per 128 inputs of a row covers the
 * three layouts fp8 checkpoints ship: per tensor (the same d everywhere),
 * per output channel (the same d along a row) and DeepSeek-V3 / Qwen3-FP8
 * 128 x 128 blocks (d of block (row / 128, col / 128)), at 4 / 128 bytes
 * of overhead.  d is the checkpoint's f32 scale, unrounded.
 *
 * Arithmetic is weight-only and f32 (no fp8 arithmetic on these CPUs, and
 * no activation rounding, so the result is the dequantized model's up to
 * the f32 summation order):
 *   - GEMV (m == 1): per block, sum e4m3(q) * x in f32, times d;
 *   - GEMM (m > 1): 16 weight rows x QF8_KC inputs are dequantized to f32
 *     (e4m3(q) * d: the same bits hfquant.c's dequantization gives) into a
 *     panel in scratch, which every activation row then meets (3 rows x 4
 *     weight rows per micro-kernel step), so the conversion is paid once
 *     per m rows.
 * AVX2 decodes e4m3 with F16C: (int16)(int8)q << 7 & 0xBF80 is the f16 of
 * value * 2^-8 for every finite code, subnormals included (the exponent
 * bias moves from 7 to 15; f16 subnormals line up with e4m3's), and
 * vcvtph2ps widens it; the 2^8 goes into the scale.  The NaN codes
 * (0x7F / 0xFF) decode to +-480 there (checkpoints hold none); the scalar
 * reference uses util/dtype.h's table. */
#ifndef SGLC_KERNELS_QUANT_FP8_H
#define SGLC_KERNELS_QUANT_FP8_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/kern_types.h"
#include "kernels/kernels.h"

#define QK_F8B 128
#define QF8_NB 16   /* weight rows per GEMM panel */
#define QF8_KC 1024 /* inputs per GEMM panel (a multiple of QK_F8B): 64 KiB of f32 */

typedef struct {
    float d;             /* scale of the 128 values */
    uint8_t q[QK_F8B];   /* e4m3fn codes */
} block_f8b;

_Static_assert(sizeof(block_f8b) == 132, "block_f8b");

/* Row conversions for the traits (k a multiple of 128). from_f32: d =
 * amax / 448 per block (1 for an all-zero block), codes rounded to
 * nearest even. */
void qf8_row_to_f32(float *dst, const void *src, int64_t k);
void qf8_row_from_f32(void *dst, const float *src, int64_t k);

/* Dot of one stored row with f32 x (k values): scalar and AVX2. */
float qf8_dot_scalar(const void *row, const float *x, int k);
float qf8_dot_avx2(const void *row, const float *x, int k);

/* y (m, n) = x (m, k) · Wᵀ (+ bias): thread ith's kern_split share of the
 * output columns; scratch of qf8_matmul_scratch(m, k) bytes.  isa picks
 * the kernels (AVX-512 runs the AVX2 ones). */
void qf8_matmul(float *y, const float *x, int m, const kern_mat *w, const float *bias, int ith, int nth,
                void *scratch, kern_isa isa);
void qf8_matmul_scalar(float *y, const float *x, int m, const kern_mat *w, const float *bias, int ith,
                       int nth, void *scratch);
void qf8_matmul_avx2(float *y, const float *x, int m, const kern_mat *w, const float *bias, int ith,
                     int nth, void *scratch);
size_t qf8_matmul_scratch(int m, int k);

/* The AVX2 column range [lo, hi) (quant_fp8_avx2.c); panel: QF8_NB *
 * QF8_KC floats, 32-byte aligned. */
void qf8_cols_avx2(float *y, const float *x, int m, const kern_mat *w, int lo, int hi, float *panel);

#endif
