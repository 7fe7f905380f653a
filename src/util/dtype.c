/* dtype — see dtype.h. */
#include "util/dtype.h"

#include <math.h>
#include <pthread.h>
#include <string.h>

size_t dtype_size(dtype t)
{
    switch (t) {
    case DTYPE_F32: return 4;
    case DTYPE_F16: return 2;
    case DTYPE_BF16: return 2;
    case DTYPE_F8_E4M3:
    case DTYPE_F8_E5M2:
    case DTYPE_I8: return 1;
    default: return 0;
    }
}

const char *dtype_name(dtype t)
{
    switch (t) {
    case DTYPE_F32: return "float32";
    case DTYPE_F16: return "float16";
    case DTYPE_BF16: return "bfloat16";
    case DTYPE_F8_E4M3: return "float8_e4m3fn";
    case DTYPE_F8_E5M2: return "float8_e5m2";
    case DTYPE_I8: return "int8";
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
    if (!strcmp(s, "float8_e4m3fn") || !strcmp(s, "fp8_e4m3") || !strcmp(s, "F8_E4M3")) return DTYPE_F8_E4M3;
    if (!strcmp(s, "float8_e5m2") || !strcmp(s, "fp8_e5m2") || !strcmp(s, "F8_E5M2")) return DTYPE_F8_E5M2;
    return -1;
}

/* ---- 8-bit floats ------------------------------------------------------ */

float f8e4m3_to_f32(uint8_t c)
{
    int e = (c >> 3) & 15, m = c & 7;
    float v;
    if (e == 15 && m == 7) v = NAN;
    else if (e == 0) v = ldexpf((float)m, -9);
    else v = ldexpf((float)(8 + m), e - 10); /* (1 + m/8) 2^(e-7) */
    return c & 0x80 ? -v : v;
}

float f8e5m2_to_f32(uint8_t c)
{
    int e = (c >> 2) & 31, m = c & 3;
    float v;
    if (e == 31) v = m ? NAN : INFINITY;
    else if (e == 0) v = ldexpf((float)m, -16);
    else v = ldexpf((float)(4 + m), e - 17); /* (1 + m/4) 2^(e-15) */
    return c & 0x80 ? -v : v;
}

/* |f| in an 8-bit float of `mbits` mantissa bits and exponent bias
 * `bias`: round to nearest even, saturate at `maxcode`. */
static uint8_t f32_to_f8(float f, int mbits, int bias, uint8_t maxcode, uint8_t nan)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    uint8_t sign = (uint8_t)((u >> 24) & 0x80);
    uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return sign | nan;
    float af;
    memcpy(&af, &a, 4);
    int min_exp = 1 - bias; /* smallest normal exponent */
    if (af < ldexpf(1.0f, min_exp)) {
        /* subnormal (or the smallest normal after rounding): steps of 2^(min_exp - mbits) */
        long q = lrintf(ldexpf(af, mbits - min_exp)); /* default rounding: nearest even */
        return sign | (uint8_t)q;
    }
    int shift = 23 - mbits;
    uint32_t r = (a + ((1u << (shift - 1)) - 1) + ((a >> shift) & 1u)) >> shift;
    uint32_t code = r - ((uint32_t)(127 - bias) << mbits);
    if (code > maxcode) code = maxcode;
    return sign | (uint8_t)code;
}

uint8_t f32_to_f8e4m3(float f) { return f32_to_f8(f, 3, 7, 0x7e, 0x7f); }
uint8_t f32_to_f8e5m2(float f) { return f32_to_f8(f, 2, 15, 0x7b, 0x7f); }

static float g_f8_tab[2][256];
static pthread_once_t g_f8_once = PTHREAD_ONCE_INIT;
static void f8_tables_init(void)
{
    for (int c = 0; c < 256; c++) {
        g_f8_tab[0][c] = f8e4m3_to_f32((uint8_t)c);
        g_f8_tab[1][c] = f8e5m2_to_f32((uint8_t)c);
    }
}

const float *dtype_f8_table(dtype t)
{
    if (t != DTYPE_F8_E4M3 && t != DTYPE_F8_E5M2) return NULL;
    pthread_once(&g_f8_once, f8_tables_init);
    return g_f8_tab[t == DTYPE_F8_E5M2];
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
    case DTYPE_F8_E4M3:
    case DTYPE_F8_E5M2: {
        const uint8_t *s = src;
        const float *tab = dtype_f8_table(t);
        for (size_t i = 0; i < n; i++) dst[i] = tab[s[i]];
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
    case DTYPE_F8_E4M3: {
        uint8_t *d = dst;
        for (size_t i = 0; i < n; i++) d[i] = f32_to_f8e4m3(src[i]);
        break;
    }
    case DTYPE_F8_E5M2: {
        uint8_t *d = dst;
        for (size_t i = 0; i < n; i++) d[i] = f32_to_f8e5m2(src[i]);
        break;
    }
    default: break;
    }
}
