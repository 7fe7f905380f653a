/* hfquant — reference dequantization of Hugging Face quantized checkpoints
 * (see hfquant.h for the layouts).
 *
 * DESIGN: plain loops over the logical (out, in) matrix, one element at a
 * time, reading each code from where its format packs it; validation
 * happens before any element is written.  Speed is the kernels' business
 * (they will repack these weights); this is the meaning of the bits that
 * they and the tests are checked against. */
#include "model/hfquant.h"

#include <math.h>
#include <stddef.h>

#include "util/log.h"

static float scale_at(const void *data, dtype dt, size_t idx)
{
    switch (dt) {
    case DTYPE_F32: return ((const float *)data)[idx];
    case DTYPE_F16: return f16_to_f32(((const uint16_t *)data)[idx]);
    case DTYPE_BF16: return bf16_to_f32(((const uint16_t *)data)[idx]);
    default: return NAN;
    }
}

static int dt_ok(dtype dt) { return dt == DTYPE_F32 || dt == DTYPE_F16 || dt == DTYPE_BF16; }

static int grid_ok(const char *fn, const hfq_scales *s, int64_t out, int64_t in)
{
    if (!s || !s->data || !dt_ok(s->dt) || s->block_out < 1 || s->block_in < 1 || out <= 0 || in <= 0) {
        log_error("%s: bad shape or scales (out %lld, in %lld)", fn, (long long)out, (long long)in);
        return 0;
    }
    return 1;
}

static inline size_t grid_index(const hfq_scales *s, int64_t in, int64_t o, int64_t i)
{
    int64_t cols = (in + s->block_in - 1) / s->block_in;
    return (size_t)((o / s->block_out) * cols + i / s->block_in);
}

/* ---- AWQ --------------------------------------------------------------- */

int hfquant_awq_dequant(float *dst, const hfq_awq *w)
{
    if (!dst || !w || !w->qweight || !w->qzeros || !w->scales || !dt_ok(w->scale_dt) || w->in <= 0 ||
        w->out <= 0 || w->out % 8) {
        log_error("bad AWQ tensor (in %lld, out %lld; out must be a multiple of 8)", w ? (long long)w->in : 0LL,
                  w ? (long long)w->out : 0LL);
        return -1;
    }
    /* nibble p of a word holds column 8c + k_order[p] (AutoAWQ's GEMM order) */
    static const int k_order[8] = {0, 2, 4, 6, 1, 3, 5, 7};
    int64_t g = w->group_size > 0 ? w->group_size : w->in, words = w->out / 8;
    for (int64_t i = 0; i < w->in; i++) {
        int64_t grp = i / g;
        for (int64_t c = 0; c < words; c++) {
            uint32_t qw = (uint32_t)w->qweight[i * words + c], zw = (uint32_t)w->qzeros[grp * words + c];
            for (int p = 0; p < 8; p++) {
                int64_t o = 8 * c + k_order[p];
                int q = (int)((qw >> (4 * p)) & 0xF), z = (int)((zw >> (4 * p)) & 0xF);
                dst[o * w->in + i] = (float)(q - z) * scale_at(w->scales, w->scale_dt, (size_t)(grp * w->out + o));
            }
        }
    }
    return 0;
}

/* ---- GPTQ -------------------------------------------------------------- */

int hfquant_gptq_dequant(float *dst, const hfq_gptq *w)
{
    if (!dst || !w || !w->qweight || !w->scales || !dt_ok(w->scale_dt) || w->in <= 0 || w->out <= 0 ||
        (w->bits != 2 && w->bits != 4 && w->bits != 8)) {
        log_error("bad GPTQ tensor (bits %d)", w ? w->bits : 0);
        return -1;
    }
    int pf = 32 / w->bits; /* codes per int32 */
    if (w->in % pf || (w->qzeros && w->out % pf)) {
        log_error("GPTQ %d-bit: in (%lld)%s must be a multiple of %d", w->bits, (long long)w->in,
                  w->qzeros ? " and out (with qzeros)" : "", pf);
        return -1;
    }
    int64_t g = w->group_size > 0 ? w->group_size : w->in;
    int64_t ng = w->n_groups > 0 ? w->n_groups : (w->in + g - 1) / g;
    for (int64_t i = 0; i < w->in; i++) {
        int64_t grp = w->g_idx ? w->g_idx[i] : i / g;
        if (grp < 0 || grp >= ng) {
            log_error("GPTQ g_idx[%lld] = %lld is not a group (0..%lld)", (long long)i, (long long)grp,
                      (long long)ng - 1);
            return -1;
        }
    }
    uint32_t mask = (1u << w->bits) - 1u;
    int64_t zwords = w->out / pf;
    for (int64_t i = 0; i < w->in; i++) {
        int64_t grp = w->g_idx ? w->g_idx[i] : i / g, r = i / pf;
        int sh = (int)(i % pf) * w->bits;
        for (int64_t o = 0; o < w->out; o++) {
            int q = (int)(((uint32_t)w->qweight[r * w->out + o] >> sh) & mask);
            int z = 1 << (w->bits - 1);
            if (w->qzeros)
                z = (int)(((uint32_t)w->qzeros[grp * zwords + o / pf] >> ((o % pf) * w->bits)) & mask) +
                    (w->zeros_v2 ? 0 : 1);
            dst[o * w->in + i] = (float)(q - z) * scale_at(w->scales, w->scale_dt, (size_t)(grp * w->out + o));
        }
    }
    return 0;
}

/* ---- int8 / packed / fp8 on a scale grid ------------------------------ */

int hfquant_int8_dequant(float *dst, const int8_t *q, int64_t out, int64_t in, const hfq_scales *s,
                         const int8_t *zero_point)
{
    if (!dst || !q || !grid_ok(__func__, s, out, in)) return -1;
    for (int64_t o = 0; o < out; o++)
        for (int64_t i = 0; i < in; i++) {
            size_t si = grid_index(s, in, o, i);
            int zp = zero_point ? zero_point[si] : 0;
            dst[o * in + i] = (float)((int)q[o * in + i] - zp) * scale_at(s->data, s->dt, si);
        }
    return 0;
}

int hfquant_packed_dequant(float *dst, const int32_t *packed, int64_t out, int64_t in, int bits,
                           const hfq_scales *s)
{
    if (!dst || !packed || !grid_ok(__func__, s, out, in)) return -1;
    if (bits != 2 && bits != 4 && bits != 8) {
        log_error("pack-quantized: %d bits unsupported", bits);
        return -1;
    }
    int pf = 32 / bits;
    int64_t words = (in + pf - 1) / pf;
    uint32_t mask = (1u << bits) - 1u;
    int offset = 1 << (bits - 1);
    for (int64_t o = 0; o < out; o++)
        for (int64_t i = 0; i < in; i++) {
            int c = (int)(((uint32_t)packed[o * words + i / pf] >> ((i % pf) * bits)) & mask);
            dst[o * in + i] = (float)(c - offset) * scale_at(s->data, s->dt, grid_index(s, in, o, i));
        }
    return 0;
}

float hfquant_fp8_e4m3_to_f32(uint8_t v)
{
    int e = (v >> 3) & 15, m = v & 7;
    float r;
    if (e == 15 && m == 7) r = NAN;
    else if (e == 0) r = ldexpf((float)m, -9); /* subnormal: m * 2^-9 */
    else r = ldexpf((float)(8 + m), e - 10);   /* (1 + m/8) * 2^(e-7) */
    return v & 0x80 ? -r : r;
}

uint8_t hfquant_f32_to_fp8_e4m3(float f)
{
    if (f != f) return 0x7F;
    uint8_t sign = signbit(f) ? 0x80 : 0;
    float a = fabsf(f);
    if (a >= 448.0f) return sign | 0x7E; /* saturate (infinity too) */
    if (a == 0.0f) return sign;
    int e;
    (void)frexpf(a, &e); /* a in [2^(e-1), 2^e) */
    int E = e - 1 < -6 ? -6 : e - 1;
    float qv = nearbyintf(ldexpf(a, 3 - E)); /* units of 2^(E-3), to nearest even */
    if (qv >= 16.0f) qv = 8.0f, E++;
    int q = (int)qv;
    if (q < 8) return sign | (uint8_t)q; /* subnormal (E == -6) or zero */
    int ebits = E + 7;
    if (ebits > 15 || (ebits == 15 && q - 8 == 7)) return sign | 0x7E;
    return sign | (uint8_t)(ebits << 3 | (q - 8));
}

int hfquant_fp8_dequant(float *dst, const uint8_t *q, int64_t out, int64_t in, const hfq_scales *s)
{
    if (!dst || !q || !grid_ok(__func__, s, out, in)) return -1;
    float lut[256];
    for (int v = 0; v < 256; v++) lut[v] = hfquant_fp8_e4m3_to_f32((uint8_t)v);
    for (int64_t o = 0; o < out; o++)
        for (int64_t i = 0; i < in; i++)
            dst[o * in + i] = lut[q[o * in + i]] * scale_at(s->data, s->dt, grid_index(s, in, o, i));
    return 0;
}
