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

int hfquant_fp8_dequant(float *dst, const uint8_t *q, int64_t out, int64_t in, const hfq_scales *s)
{
    if (!dst || !q || !grid_ok(__func__, s, out, in)) return -1;
    const float *lut = dtype_f8_table(DTYPE_F8_E4M3); /* util/dtype.h's exact decode */
    for (int64_t o = 0; o < out; o++)
        for (int64_t i = 0; i < in; i++)
            dst[o * in + i] = lut[q[o * in + i]] * scale_at(s->data, s->dt, grid_index(s, in, o, i));
    return 0;
}

/* ---- quantizers --------------------------------------------------------- */

/* NaN -> 0, magnitudes above 1e38 -> 1e38 (so amax / 127 * 127 stays finite). */
static inline float finite_or_sat(float v)
{
    if (v != v) return 0.0f;
    return v > 1e38f ? 1e38f : v < -1e38f ? -1e38f : v;
}

int hfquant_int8_quantize_rows(int8_t *q, float *scales, const float *w, int64_t out, int64_t in)
{
    if (!q || !scales || !w || out <= 0 || in <= 0) {
        log_error("bad int8 quantize shape (out %lld, in %lld)", (long long)out, (long long)in);
        return -1;
    }
    for (int64_t o = 0; o < out; o++) {
        const float *r = w + o * in;
        float amax = 0.0f;
        for (int64_t i = 0; i < in; i++) amax = fmaxf(amax, fabsf(finite_or_sat(r[i])));
        amax = fmaxf(amax, 1e-10f);
        float iscale = (1.0f / amax) * 127.0f; /* torch evaluates 127 / amax as reciprocal * 127 */
        for (int64_t i = 0; i < in; i++) {
            float v = nearbyintf(finite_or_sat(r[i]) * iscale); /* default rounding: nearest even */
            q[o * in + i] = (int8_t)(v > 127.0f ? 127 : v < -127.0f ? -127 : (int)v);
        }
        scales[o] = amax / 127.0f;
    }
    return 0;
}

int hfquant_fp8_quantize(uint8_t *q, float *scales, const float *w, int64_t out, int64_t in, int64_t block_out,
                         int64_t block_in)
{
    if (!q || !scales || !w || out <= 0 || in <= 0 || block_out < 1 || block_in < 1) {
        log_error("bad fp8 quantize shape (out %lld, in %lld, block %lld x %lld)", (long long)out, (long long)in,
                  (long long)block_out, (long long)block_in);
        return -1;
    }
    int64_t cols = (in + block_in - 1) / block_in;
    for (int64_t bo = 0; bo < out; bo += block_out)
        for (int64_t bi = 0; bi < in; bi += block_in) {
            int64_t o1 = bo + block_out < out ? bo + block_out : out, i1 = bi + block_in < in ? bi + block_in : in;
            float amax = 0.0f;
            for (int64_t o = bo; o < o1; o++)
                for (int64_t i = bi; i < i1; i++) amax = fmaxf(amax, fabsf(finite_or_sat(w[o * in + i])));
            amax = fmaxf(amax, 1e-12f);
            float inv = (1.0f / amax) * 448.0f; /* as torch evaluates SGLang's 448 / amax */
            for (int64_t o = bo; o < o1; o++)
                for (int64_t i = bi; i < i1; i++) q[o * in + i] = f32_to_f8e4m3(finite_or_sat(w[o * in + i]) * inv);
            scales[(bo / block_out) * cols + bi / block_in] = 1.0f / inv;
        }
    return 0;
}
