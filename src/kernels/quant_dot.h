/* quant_dot — private to src/kernels: the int8 dot products of the
 * block-quantized weight types and the matmul driver built on them.
 *
 * DESIGN: a quantized weight is kept in its GGUF block layout
 * (kernels/quant_blocks.h), row-major, one row = k / block_size blocks.
 * Activations are quantized per row to the 8-bit companion type of the
 * weight (ggml's pairing):
 *   Q8_0 (32 int8 + f16 scale)  for Q4_0, Q5_0, Q8_0, IQ4_NL;
 *   Q8_1 (Q8_0 + f16 d*sum)     for Q4_1, Q5_1;
 *   Q8_K (256 int8, f32 scale, sums of each 16) for Q2_K..Q6_K, IQ4_XS;
 * then every weight block meets its activation blocks as integer dot
 * products scaled once per (sub-)block.  Activation quantizers here round
 * to nearest (ties to even) with scale = max|x| / 127, so |q| <= 127 (the
 * maddubs kernels rely on that bound: 2 * 128 * 127 fits int16).
 *
 * Per ISA, a type has a quant_ops: the activation type, its row
 * quantizer, and `dot`, which takes ONE weight row and R (1..QUANT_MAX_R)
 * activation rows: the GEMM reuses each unpacked weight block for R rows
 * (register blocking), decode calls it with R = 1.
 *
 * The scalar reference (quant_dot.c) decodes any weight block into int8
 * values with a scale and an offset per 16 values (w = d16 * q + m16),
 * which covers every type with one dot loop; the AVX2 kernels
 * (quant_dot_avx2.c) are per type and are checked against it. */
#ifndef SGLC_KERNELS_QUANT_DOT_H
#define SGLC_KERNELS_QUANT_DOT_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/kern_types.h"
#include "kernels/kernels.h"

#define QUANT_MAX_R 4 /* activation rows per dot call (GEMM register block) */

/* Quantize k f32 values (a multiple of the activation block) into dst. */
typedef void (*quant_act_fn)(void *dst, const float *x, int k);
/* For r < R: out[r * ostride] = dot(weight row w (k values), activation row
 * r at (const char *)a + r * astride).  k is a multiple of both block sizes. */
typedef void (*quant_dot_fn)(int k, const void *w, const void *a, size_t astride, int R, float *out,
                             size_t ostride);

typedef struct quant_ops {
    kern_type act_type;
    quant_act_fn act;
    quant_dot_fn dot;
} quant_ops;

/* The scalar ops of weight type t; NULL when t is not a quantized weight type. */
const quant_ops *quant_ops_scalar(kern_type t);
/* The AVX2 ops of t (quant_dot_avx2.c; NULL where there is no AVX2 kernel:
 * the driver then uses the scalar ops). */
const quant_ops *quant_ops_avx2(kern_type t);
/* The ops the driver uses for a weight packed under isa: the ISA's own,
 * else scalar (AVX-512 CPUs run the AVX2 kernels). */
const quant_ops *quant_ops_for(kern_type t, kern_isa isa);

/* Scalar activation quantizers (shared with the AVX2 file's tails and tests). */
void quant_act_q8_0(void *dst, const float *x, int k);
void quant_act_q8_1(void *dst, const float *x, int k);
void quant_act_q8_K(void *dst, const float *x, int k);

/* The generic decode: block blk of type t -> q[block_size] int8 values and
 * per 16 values a scale d16 and offset m16, so value i = d16[i/16] * q[i] + m16[i/16]. */
void quant_decode_block(kern_type t, const void *blk, int8_t *q, float *d16, float *m16);
/* Dequantize k values of type t (through quant_decode_block). */
void quant_dequant_row(kern_type t, float *dst, const void *src, int64_t k);

/* f16 -> f32 of every half (256 KiB): one load per block scale in the
 * kernels, cheaper than F16C's insert + convert; filled by quant_init(). */
extern float quant_f16_table[65536];
void quant_init(void);

/* The IQ4_NL / IQ4_XS value table. */
extern const int8_t quant_iq4nl_values[16];

/* Matmul of a quantized weight on the ops of `isa` (see kern_matmul). */
void quant_matmul(float *y, const float *x, int m, const kern_mat *w, const float *bias, int ith,
                  int nth, void *scratch, kern_isa isa);
/* The per-ISA kern_matmul_fn slots for kern_types_init. */
kern_matmul_fn quant_matmul_slot(kern_isa isa);
/* The f32-vector row dot (dequantize, f32 dot) for the traits' dot slot. */
float quant_row_dot(kern_type t, const void *row, const float *x, int k);
kern_row_dot_fn quant_row_dot_slot(kern_type t);
/* Per-thread scratch bytes quant_matmul needs for m rows of k inputs. */
size_t quant_matmul_scratch(int m, int k);

#endif
