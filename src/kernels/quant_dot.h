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
 * else scalar; on AVX-512 the VNNI dot where quant_avx512_uses() says so
 * for the GEMM (m > 1), else the AVX2 ops. */
const quant_ops *quant_ops_for(kern_type t, kern_isa isa);

/* ---- AVX-512 VNNI (quant_dot_avx512.c) --------------------------------
 * The VNNI dot of t (NULL where there is none); it reads the activation
 * rows the AVX2 ops' quantizer writes. */
quant_dot_fn quant_dot_avx512(kern_type t);
/* Whether an AVX-512 CPU runs t's VNNI kernel instead of the AVX2 one for
 * m activation rows (x8 != 0: the repacked 8-row layout of t, else the
 * plain one, decode m == 1 and GEMM m > 1 apart): a table of what measured
 * faster (qkern.md), overridden by SGLC_QUANT_AVX512 = all | none, read by
 * quant_avx512_select (kern_types_init). */
int quant_avx512_uses(kern_type t, int x8, int m);
void quant_avx512_select(const char *spec);

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

/* ---- Q4_0 repacked 8 rows at a time (layout QUANT_LAYOUT_Q4_0X8) ------
 * Rows 8g..8g+7 are one group; per block b a group holds the 8 scales and
 * then, for c < 4, the bytes qs[4c..4c+3] of each of the 8 rows:
 *   { uint16 d[8]; uint8 qs[4][8][4]; } = 144 bytes (the 8 blocks' size).
 * A 32-byte load is then 4 codes of each of 8 rows, so one vpmaddubsw
 * against 4 broadcast activation bytes gives every row its partial sum in
 * its own lane: no horizontal sums, the 8 scales convert with one
 * vcvtph2ps, and the 16-bit sums of a block need one vpmaddwd.  Codes stay
 * unsigned (0..15); the -8 goes through the activation block sums.
 * Used for Q4_0 weights with n % 8 == 0 that are owned anyway (quantized
 * at load, or borrow_ok == 0) on AVX2 / AVX-512 CPUs. */
#define QUANT_LAYOUT_Q4_0X8 0x0408
typedef struct { uint16_t d[8]; uint8_t qs[4][8][4]; } quant_q4_0x8;
/* Repack n rows (n % 8 == 0) of Q4_0 blocks (nb per row) from src to dst. */
void quant_repack_q4_0x8(void *dst, const void *src, int n, int nb);
/* The AVX2 kernel: groups [g0, g1) of w (nb blocks per row) against R rows
 * of Q8_0 activations (a, stride as) with per-block float pairs
 * aux[r * 2 nb + 2 b] = d_a, [.. + 1] = 8 d_a sum(q_a); y row r at y + r * ys. */
void quant_q4_0x8_avx2(const void *w, int nb, int g0, int g1, const void *a, size_t as,
                       const float *aux, int R, float *y, size_t ys);

/* ---- Q4_K repacked 8 rows at a time (layout QUANT_LAYOUT_Q4_KX8) ------
 * The same idea for Q4_K: per super-block a group holds the 8 rows' d and
 * dmin, the 6-bit sub-block scales and mins unpacked to bytes ([j][row];
 * mins as [pair][row][2] so one vpmaddwd meets two activation sums), and
 * the codes as [chunk j][c][row][4 bytes of qs[32 j + 4 c ..]]:
 *   1184 bytes for 8 x 144 (+2.8%).  Sub-block sums stay in int16 (8 x
 *   2 * 15 * 127 < 32767), the row's scale is applied with one vpmaddwd. */
#define QUANT_LAYOUT_Q4_KX8 0x0412
typedef struct {
    uint16_t d[8], dmin[8];
    uint8_t sc[8][8];       /* [sub-block][row] */
    uint8_t mn[4][8][2];    /* [sub-block pair][row][which] */
    uint8_t qs[4][8][8][4]; /* [chunk][c][row][4] */
} quant_q4_Kx8;
void quant_repack_q4_Kx8(void *dst, const void *src, int n, int nb);
/* groups [g0, g1) of w (nb super-blocks per row) against R rows of Q8_K */
void quant_q4_Kx8_avx2(const void *w, int nb, int g0, int g1, const void *a, size_t as, int R,
                       float *y, size_t ys);

/* ---- Q8_0 repacked 8 rows at a time (layout QUANT_LAYOUT_Q8_0X8) ------
 * { uint16 d[8]; int8 qs[8][8][4] ([c][row][4 codes]) } = 272 bytes = 8
 * blocks; signed codes go through the sign trick, one vpmaddwd per chunk. */
#define QUANT_LAYOUT_Q8_0X8 0x0420
typedef struct { uint16_t d[8]; int8_t qs[8][8][4]; } quant_q8_0x8;
void quant_repack_q8_0x8(void *dst, const void *src, int n, int nb);
void quant_q8_0x8_avx2(const void *w, int nb, int g0, int g1, const void *a, size_t as, int R,
                       float *y, size_t ys);

/* The AVX-512 VNNI kernels of the Q4_0 / Q4_K / Q8_0 layouts above (Q5_K / Q6_K x8 run their AVX2 kernels on AVX-512 CPUs) (same arguments as
 * the AVX2 ones, but the Q4_0 / Q8_0 code offsets come as int32 starts:
 * off[r * nb + b] = -8 (Q4_0) or -128 (Q8_0: codes go in as code + 128)
 * times the code sum of row r's activation block b). */
#define QUANT_X8_MAX_R512 8 /* activation rows per call of the three below (R <= this) */
void quant_q4_0x8_avx512(const void *w, int nb, int g0, int g1, const void *a, size_t as,
                         const int32_t *off, int R, float *y, size_t ys);
void quant_q8_0x8_avx512(const void *w, int nb, int g0, int g1, const void *a, size_t as,
                         const int32_t *off, int R, float *y, size_t ys);
void quant_q4_Kx8_avx512(const void *w, int nb, int g0, int g1, const void *a, size_t as, int R,
                         float *y, size_t ys);

/* The GEMM micro-kernels over two groups at a time (rows 8g .. 8g + 15 in
 * one zmm; quant_dot_avx512.c): the same arguments and results as the
 * three above for [g0, g1) holding an even number of groups. */
void quant_q4_0x16_avx512(const void *w, int nb, int g0, int g1, const void *a, size_t as,
                          const int32_t *off, int R, float *y, size_t ys);
void quant_q8_0x16_avx512(const void *w, int nb, int g0, int g1, const void *a, size_t as,
                          const int32_t *off, int R, float *y, size_t ys);
void quant_q4_Kx16_avx512(const void *w, int nb, int g0, int g1, const void *a, size_t as, int R,
                          float *y, size_t ys);
/* Q6_K x8 (layout below) on Q8_K activations: off[(r * nb + b) * 16 + s] =
 * -32 * bsums[s] of activation row r's super-block b.  There is no
 * one-group VNNI Q6_K kernel: odd groups, R < 4 and decode run the AVX2 one. */
void quant_q6_Kx16_avx512(const void *w, int nb, int g0, int g1, const void *a, size_t as,
                          const int32_t *off, int R, float *y, size_t ys);
/* Whether the driver runs them (default 1; SGLC_QUANT_X16=0 keeps the
 * one-group kernels, for A/B runs and the test); set by quant_avx512_select. */
extern int quant_x16_on;

/* ---- Q6_K repacked 8 rows at a time (layout QUANT_LAYOUT_Q6_KX8) ------
 * Per super-block b (256 values) a group of rows 8g..8g+7 holds, at
 * ((quant_q6_Kx8 *)w)[g * nb + b]:
 *   d[r]                 the row's f16 d;
 *   sc[p][r][i]          the row's int8 scale of sub-block (of 16 values) 2p + i;
 *   q[h][c][0][r][0..3]  the row's bytes ql[64 h + 4 c .. + 3]       ("A"),
 *   q[h][c][1][r][0..3]  the row's bytes ql[64 h + 32 + 4 c .. + 3]  ("B"),
 *   q[h][c][2][r][0..3]  the row's bytes qh[32 h + 4 c .. + 3]       ("H"),
 * for half h < 2, chunk c < 8: 1680 bytes = 8 x 210, the same size.  For
 * l = 4 c + i (i < 4) the unsigned 6-bit codes (0..63) of the row's values
 *   128 h + l      = (A & 15) | (H & 3) << 4         sub-block 8 h + c / 4
 *   128 h + 32 + l = (B & 15) | (H >> 2 & 3) << 4    sub-block 8 h + 2 + c / 4
 *   128 h + 64 + l = (A >> 4) | (H >> 4 & 3) << 4    sub-block 8 h + 4 + c / 4
 *   128 h + 96 + l = (B >> 4) | (H >> 6) << 4        sub-block 8 h + 6 + c / 4
 * (GGUF's own bit assignment, regrouped), and value = d sc (code - 32).
 * So a 32-byte load of A, B or H is 4 consecutive codes of each of the 8
 * rows, and one vpmaddubsw with 4 broadcast activation bytes gives every
 * row its partial sum in its own lane.  AVX2: two chunks' pair sums add in
 * int16 (4 x 63 x 127 < 32767), then one vpmaddwd with (sc, sc) per row;
 * the -32 goes through the Q8_K bsums: sc[p] as int16 lanes (row, i) meets
 * the bsum pair (2p, 2p + 1) in one vpmaddwd.  The codes lie in the order
 * the kernel reads them (h, c, A B H): one forward stream per group, which
 * the hardware prefetchers follow (three interleaved streams did not: the
 * GEMV ran at a quarter of the read bandwidth). */
#define QUANT_LAYOUT_Q6_KX8 0x0414
typedef struct {
    uint16_t d[8];
    int8_t sc[8][8][2];         /* [sub-block pair][row][which] */
    uint8_t q[2][8][3][8][4];   /* [half][chunk][A, B, H][row][4] */
} quant_q6_Kx8;
void quant_repack_q6_Kx8(void *dst, const void *src, int n, int nb);
void quant_q6_Kx8_avx2(const void *w, int nb, int g0, int g1, const void *a, size_t as, int R,
                       float *y, size_t ys);

/* ---- Q5_K repacked 8 rows at a time (layout QUANT_LAYOUT_Q5_KX8) ------
 * Q4_Kx8's fields and order (d, dmin, sc, mn, qs with the low 4 bits of
 * each code) plus, before qs, the fifth bits: qh[c][r][0..3] = the row's
 * bytes qh[4 c .. 4 c + 3] (c < 8), whose bit 2 j (2 j + 1) is the fifth
 * bit of the code in the low (high) nibble of qs[j][c][r][same byte], i.e.
 * of value 64 j + 4 c + i (64 j + 32 + 4 c + i): 1440 bytes for 8 x 176
 * (+2.3%).  Codes reach 31, so AVX2 adds 4 chunks' pair sums in int16
 * (4 x 2 x 31 x 127 < 32767) before each vpmaddwd with the scales. */
#define QUANT_LAYOUT_Q5_KX8 0x0413
typedef struct {
    uint16_t d[8], dmin[8];
    uint8_t sc[8][8];       /* [sub-block][row] */
    uint8_t mn[4][8][2];    /* [sub-block pair][row][which] */
    uint8_t qh[8][8][4];    /* [c][row][4] */
    uint8_t qs[4][8][8][4]; /* [chunk][c][row][4] */
} quant_q5_Kx8;
void quant_repack_q5_Kx8(void *dst, const void *src, int n, int nb);
void quant_q5_Kx8_avx2(const void *w, int nb, int g0, int g1, const void *a, size_t as, int R,
                       float *y, size_t ys);

/* The repacked layout an owned weight of type t with n rows gets on isa
 * (0 = plain), and the bytes it takes (n rows of k values). */
int quant_x8_layout(kern_type t, int n, kern_isa isa);
size_t quant_x8_bytes(int layout, int n, int k);
/* Repack n rows (plain blocks at src) into dst in `layout`, groups split
 * over up to `nth` threads (large weights only). */
void quant_repack_x8(int layout, void *dst, const void *src, int n, int k, int nth);

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
