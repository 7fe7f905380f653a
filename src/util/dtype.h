/* dtype — element types of weights, activations and KV, and conversions.
 *
 * bf16 is the top 16 bits of an f32 (round-to-nearest-even on the way
 * down); f16 is IEEE half.  Conversions here are scalar and exact; the
 * kernels have their own SIMD versions. */
#ifndef SGLC_UTIL_DTYPE_H
#define SGLC_UTIL_DTYPE_H
#include <stddef.h>
#include <stdint.h>
#include <string.h>

typedef enum dtype { DTYPE_F32 = 0, DTYPE_F16 = 1, DTYPE_BF16 = 2, DTYPE_COUNT } dtype;

size_t dtype_size(dtype t);
const char *dtype_name(dtype t); /* "float32", "float16", "bfloat16" */
/* Accepts float32/float/fp32, float16/half/fp16, bfloat16/bf16. -1 if unknown. */
int dtype_parse(const char *s);

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
    return v;
}

/* Convert n elements of type t at src to f32 at dst. */
void dtype_to_f32(float *dst, const void *src, dtype t, size_t n);
/* Convert n f32 to type t. */
void dtype_from_f32(void *dst, dtype t, const float *src, size_t n);

#endif
