/* dtype — see dtype.h. */
#include "util/dtype.h"

#include <math.h>
#include <string.h>

size_t dtype_size(dtype t)
{
    switch (t) {
    case DTYPE_F32: return 4;
    case DTYPE_F16: return 2;
    case DTYPE_BF16: return 2;
    default: return 0;
    }
}

const char *dtype_name(dtype t)
{
    switch (t) {
    case DTYPE_F32: return "float32";
    case DTYPE_F16: return "float16";
    case DTYPE_BF16: return "bfloat16";
    default: return "unknown";
    }
}

int dtype_parse(const char *s)
{
    if (!strcmp(s, "float32") || !strcmp(s, "float") || !strcmp(s, "fp32") || !strcmp(s, "F32"))
        return DTYPE_F32;
    if (!strcmp(s, "float16") || !strcmp(s, "half") || !strcmp(s, "fp16") || !strcmp(s, "F16"))
        return DTYPE_F16;
    if (!strcmp(s, "bfloat16") || !strcmp(s, "bf16") || !strcmp(s, "BF16")) return DTYPE_BF16;
    return -1;
}

float f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1f;
    uint32_t mant = h & 0x3ff;
    uint32_t u;
    if (exp == 0) {
        if (mant == 0) {
            u = sign;
        } else { /* subnormal: value = mant * 2^-24 */
            float f = (float)mant * 5.9604644775390625e-8f;
            memcpy(&u, &f, 4);
            u |= sign;
        }
    } else if (exp == 31) {
        u = sign | 0x7f800000u | (mant << 13);
    } else {
        u = sign | ((exp + 112) << 23) | (mant << 13);
    }
    float f;
    memcpy(&f, &u, 4);
    return f;
}

uint16_t f32_to_f16(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000);
    uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return sign | 0x7e00; /* NaN */
    if (a >= 0x477ff000u) return sign | 0x7c00; /* overflow -> inf (>= 65520) */
    if (a < 0x38800000u) { /* subnormal or zero in f16 */
        float af;
        memcpy(&af, &a, 4);
        float scaled = af * 16777216.0f; /* 2^24 */
        uint32_t m = (uint32_t)lrintf(scaled); /* round to nearest even */
        return sign | (uint16_t)m;
    }
    uint32_t mant_odd = (a >> 13) & 1u;
    a += 0xfffu + mant_odd;
    a -= 112u << 23;
    return sign | (uint16_t)(a >> 13);
}

void dtype_to_f32(float *dst, const void *src, dtype t, size_t n)
{
    switch (t) {
    case DTYPE_F32: memcpy(dst, src, n * 4); break;
    case DTYPE_F16: {
        const uint16_t *s = src;
        for (size_t i = 0; i < n; i++) dst[i] = f16_to_f32(s[i]);
        break;
    }
    case DTYPE_BF16: {
        const uint16_t *s = src;
        for (size_t i = 0; i < n; i++) dst[i] = bf16_to_f32(s[i]);
        break;
    }
    default: break;
    }
}

void dtype_from_f32(void *dst, dtype t, const float *src, size_t n)
{
    switch (t) {
    case DTYPE_F32: memcpy(dst, src, n * 4); break;
    case DTYPE_F16: {
        uint16_t *d = dst;
        for (size_t i = 0; i < n; i++) d[i] = f32_to_f16(src[i]);
        break;
    }
    case DTYPE_BF16: {
        uint16_t *d = dst;
        for (size_t i = 0; i < n; i++) d[i] = f32_to_bf16(src[i]);
        break;
    }
    default: break;
    }
}
