/* dtype — element types of weights, activations and KV, and conversions.
 *
 * bf16 is the top 16 bits of an f32 (round-to-nearest-even on the way
 * down); f16 is IEEE half.  The two 8-bit floats are the OCP FP8 formats
 * PyTorch calls float8_e4m3fn (bias 7, 3 mantissa bits, no infinities,
 * S.1111.111 is NaN, largest finite 448, smallest subnormal 2^-9) and
 * float8_e5m2 (bias 15, 2 mantissa bits, IEEE-style infinities and NaN,
 * largest finite 57344, smallest subnormal 2^-16).  Conversions to them
 * round to nearest even and saturate at the largest finite value (as
 * vLLM's and SGLang's scaled fp8 casts clamp before converting); NaN stays
 * NaN.  Conversions here are scalar and exact; the kernels have their own
 * SIMD versions. */
#ifndef SGLC_UTIL_DTYPE_H
#define SGLC_UTIL_DTYPE_H
#include <stddef.h>
#include <stdint.h>
#include <string.h>

typedef enum dtype {
    DTYPE_F32 = 0,
    DTYPE_F16 = 1,
    DTYPE_BF16 = 2,
    DTYPE_F8_E4M3 = 3, /* float8_e4m3fn */
    DTYPE_F8_E5M2 = 4, /* float8_e5m2 */
    DTYPE_I8 = 5,      /* int8: only sglc's own KV cache type (--kv-cache-dtype int8: a byte per
                        * value plus an f32 scale per token and KV head, kernels.h); never a
                        * weight or activation type, and dtype_parse does not accept it */
    DTYPE_COUNT
} dtype;

size_t dtype_size(dtype t);
const char *dtype_name(dtype t); /* "float32", "float16", "bfloat16", "float8_e4m3fn", "float8_e5m2", "int8" */
/* Accepts float32/float/fp32, float16/half/fp16, bfloat16/bf16,
 * float8_e4m3fn/fp8_e4m3/F8_E4M3, float8_e5m2/fp8_e5m2/F8_E5M2. -1 if unknown. */
int dtype_parse(const char *s);

/* The 8-bit floats: code -> f32 (exact), f32 -> code (see above). */
float f8e4m3_to_f32(uint8_t c);
float f8e5m2_to_f32(uint8_t c);
uint8_t f32_to_f8e4m3(float f);
uint8_t f32_to_f8e5m2(float f);
/* The 256 values of an 8-bit float type as f32 (t DTYPE_F8_*), for
 * table-driven kernels; NULL for other types.  Thread-safe. */
const float *dtype_f8_table(dtype t);

static inline float bf16_to_f32(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static inline uint16_t f32_to_bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40); /* quiet NaN */
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

float f16_to_f32(uint16_t h);
uint16_t f32_to_f16(float f);

/* v rounded to the nearest value of type t (f32: v itself), as f32. */
static inline float dtype_round(float v, dtype t)
{
    if (t == DTYPE_BF16) return bf16_to_f32(f32_to_bf16(v));
    if (t == DTYPE_F16) return f16_to_f32(f32_to_f16(v));
    if (t == DTYPE_F8_E4M3) return f8e4m3_to_f32(f32_to_f8e4m3(v));
    if (t == DTYPE_F8_E5M2) return f8e5m2_to_f32(f32_to_f8e5m2(v));
    return v;
}

/* Convert n elements of type t at src to f32 at dst. */
void dtype_to_f32(float *dst, const void *src, dtype t, size_t n);
/* Convert n f32 to type t. */
void dtype_from_f32(void *dst, dtype t, const float *src, size_t n);

#endif
