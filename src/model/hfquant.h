/* hfquant — reference dequantization of Hugging Face quantized checkpoints.
 *
 * DESIGN: the weight formats SGLang / vLLM load from `quantization_config`,
 * each decoded to an f32 matrix in nn.Linear's layout, (out_features,
 * in_features) row-major — the layout of sglc's linear weights — whatever
 * the checkpoint's own orientation:
 *
 *   AWQ (GEMM packing)  qweight int32 (in, out/8): 8 4-bit codes per int32
 *                       along out, nibble p holding column 8c + {0,2,4,6,1,3,5,7}[p];
 *                       qzeros int32 (in/g, out/8) packed the same way;
 *                       scales (in/g, out).  W[o][i] = (q - z) * s.
 *   GPTQ (4 / 8 / 2 bit) qweight int32 (in*bits/32, out): codes packed along
 *                       in, code j of a word at bits j*bits; qzeros int32
 *                       (groups, out*bits/32) packed along out; scales
 *                       (groups, out); g_idx (in) gives each input row's group
 *                       (desc_act / act-order checkpoints), else i / g.
 *                       Stored zeros are zero - 1 in the original GPTQ
 *                       format (AutoGPTQ "gptq", the v1 convention) and the
 *                       zero itself in "gptq_v2"; with no qzeros (symmetric)
 *                       the zero is 2^(bits-1).  W = (q - z) * s.
 *   int8 (compressed-tensors W8A8 / w8a8_int8) weight int8 (out, in), scales
 *                       per tensor, per channel or per group, optional
 *                       zero points: W = (q - zp) * s.
 *   pack-quantized (compressed-tensors W4A16 and other < 8 bit): int32
 *                       (out, ceil(in*bits/32)), code j of a row at word
 *                       j*bits/32, bits (j % (32/bits))*bits, stored
 *                       unsigned with offset 2^(bits-1).
 *   fp8 e4m3fn           weight (out, in) bytes; scales per tensor, per
 *                       channel or per 128x128 block (DeepSeek-V3 /
 *                       Qwen3-FP8 `weight_scale_inv`): W = fp8(q) * s.
 *
 * Scales are a grid described by hfq_scales: element (o, i) uses
 * s[(o / block_out) * cols + i / block_in] with cols = ceil(in / block_in);
 * per tensor is block (out, in), per channel (1, in), group g (1, g), the
 * DeepSeek blocks (128, 128).  AWQ/GPTQ scales come as stored, (groups,
 * out).  Each product is one f32 multiply of the exact integer difference
 * (or exact fp8 value) by the scale widened to f32 — more precise than the
 * f16 / bf16 arithmetic some CUDA kernels use, and what the PyTorch
 * reference tests/ref/hf_quants_ref.py computes.
 *
 * Every function checks shapes and indices (-1 with a message, dst left
 * undefined) and is pure and thread-safe.  Not wired into the loader yet.
 */
#ifndef SGLC_MODEL_HFQUANT_H
#define SGLC_MODEL_HFQUANT_H

#include <stdint.h>

#include "util/dtype.h"

/* A scale grid (see above); data holds ceil(out/block_out) x
 * ceil(in/block_in) values of type dt (f32, f16 or bf16). */
typedef struct hfq_scales {
    const void *data;  /* borrowed */
    dtype dt;
    int64_t block_out; /* output rows per scale row (>= 1) */
    int64_t block_in;  /* input columns per scale column (>= 1) */
} hfq_scales;

typedef struct hfq_awq {
    const int32_t *qweight; /* (in, out / 8) */
    const int32_t *qzeros;  /* (in / group, out / 8) */
    const void *scales;     /* (in / group, out), scale_dt */
    dtype scale_dt;
    int64_t in, out;
    int64_t group_size;     /* <= 0: one group (in) */
} hfq_awq;

typedef struct hfq_gptq {
    const int32_t *qweight; /* (in * bits / 32, out) */
    const int32_t *qzeros;  /* (n_groups, out * bits / 32); NULL: zero 2^(bits-1) */
    const void *scales;     /* (n_groups, out), scale_dt */
    dtype scale_dt;
    const int32_t *g_idx;   /* (in) group of each input row; NULL: i / group_size */
    int64_t in, out;
    int bits;               /* 2, 4 or 8 */
    int64_t group_size;     /* <= 0: one group (in) */
    int64_t n_groups;       /* rows of scales / qzeros; 0: ceil(in / group_size) */
    int zeros_v2;           /* 1: qzeros store the zero (gptq_v2); 0: zero - 1 (v1) */
} hfq_gptq;

int hfquant_awq_dequant(float *dst, const hfq_awq *w);
int hfquant_gptq_dequant(float *dst, const hfq_gptq *w);
/* zero_point: int8 on the same grid as s, or NULL (symmetric). */
int hfquant_int8_dequant(float *dst, const int8_t *q, int64_t out, int64_t in, const hfq_scales *s,
                         const int8_t *zero_point);
/* bits 2, 4 or 8 (32 % bits == 0); rows of ceil(in * bits / 32) words. */
int hfquant_packed_dequant(float *dst, const int32_t *packed, int64_t out, int64_t in, int bits,
                           const hfq_scales *s);
int hfquant_fp8_dequant(float *dst, const uint8_t *q, int64_t out, int64_t in, const hfq_scales *s);

/* e4m3fn (1 sign, 4 exponent bits biased 7, 3 mantissa bits; no infinity,
 * S.1111.111 is NaN; largest 448) to f32, exactly. */
float hfquant_fp8_e4m3_to_f32(uint8_t v);
/* f32 to e4m3fn, rounding to nearest even, saturating at +-448; NaN -> NaN. */
uint8_t hfquant_f32_to_fp8_e4m3(float f);

#endif
