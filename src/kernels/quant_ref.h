/* quant_ref — scalar reference (de)quantization of the block types.
 *
 * DESIGN: one to_f32 / from_f32 pair per type of kernels/quant_blocks.h,
 * with ggml's meaning of every bit (so a GGUF tensor's bytes decode to the
 * same f32 values llama.cpp gets from its reference dequantizer, bit for
 * bit: the products are taken in the same order, in f32, with no fused
 * multiply-add).  The SIMD kernels follow these; the numpy reference
 * tests/ref/gguf_quants.py, written separately from the format's
 * description, checks them.
 *
 * Quantizers: Q8_0, Q8_1, Q8_K and the 4/5-bit legacy types round to
 * nearest (ggml's reference rules); the K-quants and IQ4 types search the
 * scales to minimise a weighted squared error of the same quality as
 * llama.cpp's reference quantizers without an importance matrix (the
 * bytes are not promised to be identical to llama.cpp's).  Inputs that are
 * not finite are handled without undefined behaviour: NaN is taken as 0,
 * and values are saturated to what the type's f16 scales can represent
 * (|x| <= 65504; Q8_K, whose scale is f32, to +-1e38).
 *
 * All functions take k elements, a multiple of the type's block size (the
 * caller checks with kern_type_row_ok); they are pure and thread-safe.
 */
#ifndef SGLC_KERNELS_QUANT_REF_H
#define SGLC_KERNELS_QUANT_REF_H

#include <stdint.h>

#include "kernels/kern_types.h"

/* The 16 values an IQ4_NL / IQ4_XS nibble indexes (ggml's kvalues_iq4nl). */
extern const int8_t kern_iq4nl_values[16];

#define QUANT_REF_DECL(t)                                                \
    void quant_ref_to_f32_##t(float *dst, const void *src, int64_t k); \
    void quant_ref_from_f32_##t(void *dst, const float *src, int64_t k);
QUANT_REF_DECL(q4_0)
QUANT_REF_DECL(q4_1)
QUANT_REF_DECL(q5_0)
QUANT_REF_DECL(q5_1)
QUANT_REF_DECL(q8_0)
QUANT_REF_DECL(q8_1)
QUANT_REF_DECL(q2_K)
QUANT_REF_DECL(q3_K)
QUANT_REF_DECL(q4_K)
QUANT_REF_DECL(q5_K)
QUANT_REF_DECL(q6_K)
QUANT_REF_DECL(q8_K)
QUANT_REF_DECL(iq4_nl)
QUANT_REF_DECL(iq4_xs)
#undef QUANT_REF_DECL

/* The 6-bit scale and min of sub-block j (0..7) of a Q4_K / Q5_K block's
 * 12 packed scale bytes (ggml's get_scale_min_k4). */
void quant_ref_scale_min_k4(int j, const uint8_t *q, uint8_t *sc, uint8_t *m);

/* Dequantize / quantize a row of any block-quantized type by id; -1 (with
 * a message) for a type that is not block-quantized or a k that is not
 * whole blocks. */
int quant_ref_dequantize(kern_type t, float *dst, const void *src, int64_t k);
int quant_ref_quantize(kern_type t, void *dst, const float *src, int64_t k);

#endif
