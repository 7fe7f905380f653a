/* quant_blocks — the byte layout of the block-quantized weight types.
 *
 * These are the public layouts of ggml's quantized types, as GGUF files
 * store them (ggml-common.h and the GGUF spec in ggml's docs describe
 * them); sglc reads the bytes of a GGUF tensor in place, so a block here
 * must be the same bytes as there.  Values are little-endian; every f16 is
 * IEEE half stored as uint16_t.  QK_K (256) types are "K-quants": one
 * super-block of 256 values in sub-blocks of 16 or 32 with quantized
 * scales.
 *
 * Decoding (the meaning of the bits) lives in quant_ref.c, the scalar
 * reference; the SIMD kernels follow it.  The static asserts pin each
 * size to the format.
 */
#ifndef SGLC_KERNELS_QUANT_BLOCKS_H
#define SGLC_KERNELS_QUANT_BLOCKS_H

#include <assert.h>
#include <stdint.h>

#define QK4_0 32
#define QK4_1 32
#define QK5_0 32
#define QK5_1 32
#define QK8_0 32
#define QK8_1 32
#define QK4_NL 32
#define QK_K 256
#define K_SCALE_SIZE 12

/* x = d * (q - 8), q in 0..15; qs[j] holds value j (low nibble) and j+16 (high). */
typedef struct { uint16_t d; uint8_t qs[QK4_0 / 2]; } block_q4_0;
/* x = d * q + m */
typedef struct { uint16_t d, m; uint8_t qs[QK4_1 / 2]; } block_q4_1;
/* 5-bit: low 4 bits as q4_0, bit 4 of value j in bit j of qh (little-endian u32); x = d * (q - 16) */
typedef struct { uint16_t d; uint8_t qh[4]; uint8_t qs[QK5_0 / 2]; } block_q5_0;
/* x = d * q + m */
typedef struct { uint16_t d, m; uint8_t qh[4]; uint8_t qs[QK5_1 / 2]; } block_q5_1;
/* x = d * q */
typedef struct { uint16_t d; int8_t qs[QK8_0]; } block_q8_0;
/* activations of the 4/5-bit _1 types: d, and s = d * sum(qs) */
typedef struct { uint16_t d, s; int8_t qs[QK8_1]; } block_q8_1;

/* 2-bit: 16 sub-blocks of 16; scales[i]: low nibble scale, high nibble min (4 bits each) */
typedef struct { uint8_t scales[QK_K / 16]; uint8_t qs[QK_K / 4]; uint16_t d, dmin; } block_q2_K;
/* 3-bit: low 2 bits in qs, high bit in hmask; 16 6-bit scales packed in 12 bytes */
typedef struct { uint8_t hmask[QK_K / 8]; uint8_t qs[QK_K / 4]; uint8_t scales[12]; uint16_t d; } block_q3_K;
/* 4-bit: 8 sub-blocks of 32, 6-bit scales and mins packed in 12 bytes; x = d*sc*q - dmin*m */
typedef struct { uint16_t d, dmin; uint8_t scales[K_SCALE_SIZE]; uint8_t qs[QK_K / 2]; } block_q4_K;
/* 5-bit: as q4_K plus the high bit in qh */
typedef struct { uint16_t d, dmin; uint8_t scales[K_SCALE_SIZE]; uint8_t qh[QK_K / 8]; uint8_t qs[QK_K / 2]; } block_q5_K;
/* 6-bit: low 4 bits in ql, high 2 in qh, 16 int8 scales; x = d * sc * (q - 32) */
typedef struct { uint8_t ql[QK_K / 2]; uint8_t qh[QK_K / 4]; int8_t scales[QK_K / 16]; uint16_t d; } block_q6_K;
/* activations of the K-quants: f32 scale, int8 values, sums of each 16 */
typedef struct { float d; int8_t qs[QK_K]; int16_t bsums[QK_K / 16]; } block_q8_K;

/* 4-bit non-linear: q indexes a fixed 16-entry table (kern_iq4nl_values) */
typedef struct { uint16_t d; uint8_t qs[QK4_NL / 2]; } block_iq4_nl;
/* 4-bit non-linear with 8 sub-blocks of 32 and 6-bit scales (low 4 in scales_l, high 2 in scales_h) */
typedef struct { uint16_t d; uint16_t scales_h; uint8_t scales_l[QK_K / 64]; uint8_t qs[QK_K / 2]; } block_iq4_xs;

static_assert(sizeof(block_q4_0) == 18, "q4_0");
static_assert(sizeof(block_q4_1) == 20, "q4_1");
static_assert(sizeof(block_q5_0) == 22, "q5_0");
static_assert(sizeof(block_q5_1) == 24, "q5_1");
static_assert(sizeof(block_q8_0) == 34, "q8_0");
static_assert(sizeof(block_q8_1) == 36, "q8_1");
static_assert(sizeof(block_q2_K) == 84, "q2_K");
static_assert(sizeof(block_q3_K) == 110, "q3_K");
static_assert(sizeof(block_q4_K) == 144, "q4_K");
static_assert(sizeof(block_q5_K) == 176, "q5_K");
static_assert(sizeof(block_q6_K) == 210, "q6_K");
static_assert(sizeof(block_q8_K) == 292, "q8_K");
static_assert(sizeof(block_iq4_nl) == 18, "iq4_nl");
static_assert(sizeof(block_iq4_xs) == 136, "iq4_xs");

/* GGUF's tensor type ids (ggml_type), for the GGUF reader and writer. */
enum gguf_ggml_type {
    GGML_T_F32 = 0, GGML_T_F16 = 1, GGML_T_Q4_0 = 2, GGML_T_Q4_1 = 3,
    GGML_T_Q5_0 = 6, GGML_T_Q5_1 = 7, GGML_T_Q8_0 = 8, GGML_T_Q8_1 = 9,
    GGML_T_Q2_K = 10, GGML_T_Q3_K = 11, GGML_T_Q4_K = 12, GGML_T_Q5_K = 13,
    GGML_T_Q6_K = 14, GGML_T_Q8_K = 15, GGML_T_IQ4_NL = 20, GGML_T_IQ4_XS = 23,
    GGML_T_I8 = 24, GGML_T_I16 = 25, GGML_T_I32 = 26, GGML_T_I64 = 27,
    GGML_T_F64 = 28, GGML_T_BF16 = 30
};

#endif
