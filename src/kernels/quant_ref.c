/* quant_ref — scalar reference (de)quantization of the block types (see
 * quant_ref.h for the contract).
 *
 * DESIGN: decoders are written element by element in the order of the
 * format's description (ggml-common.h / ggml-quants.c): for every output
 * element, find its code bits and its (sub-)block scale, then one f32
 * product per factor in ggml's order (d * sc first, then * q; a min is
 * subtracted last).  The compiler must not fuse these into FMAs: this file
 * is built without -mfma and in ISO C mode (-ffp-contract=off), which keeps
 * the results bit-identical to ggml's reference and to the numpy reference.
 *
 * Encoders: the legacy 32-element types follow ggml's round-to-nearest
 * rules; the K-quants and IQ4 types pick each sub-block's scale (and min)
 * by a weighted least-squares search over a grid of candidate scales (the
 * method of llama.cpp's make_qkx2_quants / make_qx_quants / IQ4 search,
 * written from its description), then quantize the sub-block scales to the
 * format's 4/6/8 bits and re-pick every code against the scale that will
 * actually be stored.  All float-to-int conversions go through round_i(),
 * which saturates first, so NaN or huge inputs are never undefined
 * behaviour; inputs are cleaned (NaN -> 0, saturated) before any search.
 */
#include "kernels/quant_ref.h"

#include <float.h>
#include <math.h>
#include <string.h>

#include "kernels/quant_blocks.h"
#include "util/dtype.h"
#include "util/log.h"

const int8_t kern_iq4nl_values[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                      1,    13,   25,  38,  53,  69,  89,  113};

#define F16_MAX 65504.0f

/* ---- helpers ----------------------------------------------------------- */

static inline float h2f(uint16_t h) { return f16_to_f32(h); }

/* f32 -> f16, saturating at +-65504 (a finite scale stays finite). */
static inline uint16_t f2h(float f)
{
    if (f > F16_MAX) f = F16_MAX;
    if (f < -F16_MAX) f = -F16_MAX;
    return f32_to_f16(f);
}

/* Nearest integer, ties to even, of v saturated to +-2^22 (NaN -> -2^22):
 * defined for every input. */
static inline int round_i(float v)
{
    if (!(v >= -4194303.0f)) v = -4194303.0f;
    if (v > 4194303.0f) v = 4194303.0f;
    float t = v + 12582912.0f; /* 1.5 * 2^23: the sum's ulp is 1 */
    int32_t i;
    memcpy(&i, &t, sizeof i);
    return (i & 0x007fffff) - 0x00400000;
}

static inline int clampi(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

/* floor(v) as an int, saturated to [lo, hi] (NaN -> lo). */
static inline int floor_clamp(float v, int lo, int hi)
{
    if (!(v >= (float)lo)) return lo;
    if (v >= (float)hi) return hi;
    return (int)floorf(v);
}

/* dst = src with NaN -> 0 and values saturated to +-lim. */
static void clean(float *dst, const float *src, int n, float lim)
{
    for (int i = 0; i < n; i++) {
        float v = src[i];
        if (v != v) v = 0.0f;
        dst[i] = v > lim ? lim : v < -lim ? -lim : v;
    }
}

/* The value of largest magnitude (first one on ties) and its magnitude. */
static float signed_amax(const float *x, int n, float *amax)
{
    float a = 0.0f, m = 0.0f;
    for (int i = 0; i < n; i++)
        if (fabsf(x[i]) > a) a = fabsf(x[i]), m = x[i];
    *amax = a;
    return m;
}

static inline uint32_t rd32(const uint8_t *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }

/* ---- legacy 32-element types ------------------------------------------ */

void quant_ref_to_f32_q4_0(float *dst, const void *src, int64_t k)
{
    const block_q4_0 *x = src;
    for (int64_t b = 0; b < k / QK4_0; b++, dst += QK4_0) {
        float d = h2f(x[b].d);
        for (int j = 0; j < QK4_0; j++) {
            int q = j < 16 ? x[b].qs[j] & 0xF : x[b].qs[j - 16] >> 4;
            dst[j] = (float)(q - 8) * d;
        }
    }
}

void quant_ref_to_f32_q4_1(float *dst, const void *src, int64_t k)
{
    const block_q4_1 *x = src;
    for (int64_t b = 0; b < k / QK4_1; b++, dst += QK4_1) {
        float d = h2f(x[b].d), m = h2f(x[b].m);
        for (int j = 0; j < QK4_1; j++) {
            int q = j < 16 ? x[b].qs[j] & 0xF : x[b].qs[j - 16] >> 4;
            dst[j] = (float)q * d + m;
        }
    }
}

/* 5-bit code j of a q5 block: low nibble as q4, bit 4 from bit j of qh. */
static inline int q5_code(const uint8_t *qs, const uint8_t *qh, int j)
{
    int lo = j < 16 ? qs[j] & 0xF : qs[j - 16] >> 4;
    return lo | (int)((rd32(qh) >> j) & 1u) << 4;
}

void quant_ref_to_f32_q5_0(float *dst, const void *src, int64_t k)
{
    const block_q5_0 *x = src;
    for (int64_t b = 0; b < k / QK5_0; b++, dst += QK5_0) {
        float d = h2f(x[b].d);
        for (int j = 0; j < QK5_0; j++) dst[j] = (float)(q5_code(x[b].qs, x[b].qh, j) - 16) * d;
    }
}

void quant_ref_to_f32_q5_1(float *dst, const void *src, int64_t k)
{
    const block_q5_1 *x = src;
    for (int64_t b = 0; b < k / QK5_1; b++, dst += QK5_1) {
        float d = h2f(x[b].d), m = h2f(x[b].m);
        for (int j = 0; j < QK5_1; j++) dst[j] = (float)q5_code(x[b].qs, x[b].qh, j) * d + m;
    }
}

void quant_ref_to_f32_q8_0(float *dst, const void *src, int64_t k)
{
    const block_q8_0 *x = src;
    for (int64_t b = 0; b < k / QK8_0; b++, dst += QK8_0) {
        float d = h2f(x[b].d);
        for (int j = 0; j < QK8_0; j++) dst[j] = (float)x[b].qs[j] * d;
    }
}

void quant_ref_to_f32_q8_1(float *dst, const void *src, int64_t k)
{
    const block_q8_1 *x = src;
    for (int64_t b = 0; b < k / QK8_1; b++, dst += QK8_1) {
        float d = h2f(x[b].d);
        for (int j = 0; j < QK8_1; j++) dst[j] = (float)x[b].qs[j] * d;
    }
}

void quant_ref_to_f32_iq4_nl(float *dst, const void *src, int64_t k)
{
    const block_iq4_nl *x = src;
    for (int64_t b = 0; b < k / QK4_NL; b++, dst += QK4_NL) {
        float d = h2f(x[b].d);
        for (int j = 0; j < QK4_NL; j++) {
            int q = j < 16 ? x[b].qs[j] & 0xF : x[b].qs[j - 16] >> 4;
            dst[j] = d * (float)kern_iq4nl_values[q];
        }
    }
}

/* Symmetric 4/5-bit (Q4_0: nmax 8, Q5_0: nmax 16): the value of largest
 * magnitude maps onto code 0 (-nmax), codes = floor(x/d + nmax + 0.5). */
static float quant_sym_legacy(const float *src, int nmax, int *codes)
{
    float x[32], amax;
    clean(x, src, 32, F16_MAX);
    float vmax = signed_amax(x, 32, &amax);
    float d = vmax / (float)-nmax;
    float id = d != 0.0f ? 1.0f / d : 0.0f;
    for (int j = 0; j < 32; j++) codes[j] = floor_clamp(x[j] * id + (float)nmax + 0.5f, 0, 2 * nmax - 1);
    return d;
}

/* Asymmetric (Q4_1: 15, Q5_1: 31): x = min + d * code, codes rounded. */
static float quant_asym_legacy(const float *src, int nmax, int *codes, float *minv)
{
    float x[32];
    clean(x, src, 32, F16_MAX);
    float lo = x[0], hi = x[0];
    for (int j = 1; j < 32; j++) lo = x[j] < lo ? x[j] : lo, hi = x[j] > hi ? x[j] : hi;
    float d = (hi - lo) / (float)nmax;
    float id = d != 0.0f ? 1.0f / d : 0.0f;
    for (int j = 0; j < 32; j++) codes[j] = floor_clamp((x[j] - lo) * id + 0.5f, 0, nmax);
    *minv = lo;
    return d;
}

void quant_ref_from_f32_q4_0(void *dst, const float *src, int64_t k)
{
    block_q4_0 *y = dst;
    for (int64_t b = 0; b < k / QK4_0; b++, src += QK4_0) {
        int c[32];
        y[b].d = f2h(quant_sym_legacy(src, 8, c));
        for (int j = 0; j < 16; j++) y[b].qs[j] = (uint8_t)(c[j] | c[j + 16] << 4);
    }
}

void quant_ref_from_f32_q4_1(void *dst, const float *src, int64_t k)
{
    block_q4_1 *y = dst;
    for (int64_t b = 0; b < k / QK4_1; b++, src += QK4_1) {
        int c[32];
        float mn;
        y[b].d = f2h(quant_asym_legacy(src, 15, c, &mn));
        y[b].m = f2h(mn);
        for (int j = 0; j < 16; j++) y[b].qs[j] = (uint8_t)(c[j] | c[j + 16] << 4);
    }
}

static void pack_q5(const int *c, uint8_t *qs, uint8_t *qh)
{
    uint32_t h = 0;
    for (int j = 0; j < 16; j++) qs[j] = (uint8_t)((c[j] & 0xF) | (c[j + 16] & 0xF) << 4);
    for (int j = 0; j < 32; j++) h |= (uint32_t)((c[j] >> 4) & 1) << j;
    for (int i = 0; i < 4; i++) qh[i] = (uint8_t)(h >> (8 * i));
}

void quant_ref_from_f32_q5_0(void *dst, const float *src, int64_t k)
{
    block_q5_0 *y = dst;
    for (int64_t b = 0; b < k / QK5_0; b++, src += QK5_0) {
        int c[32];
        y[b].d = f2h(quant_sym_legacy(src, 16, c));
        pack_q5(c, y[b].qs, y[b].qh);
    }
}

void quant_ref_from_f32_q5_1(void *dst, const float *src, int64_t k)
{
    block_q5_1 *y = dst;
    for (int64_t b = 0; b < k / QK5_1; b++, src += QK5_1) {
        int c[32];
        float mn;
        y[b].d = f2h(quant_asym_legacy(src, 31, c, &mn));
        y[b].m = f2h(mn);
        pack_q5(c, y[b].qs, y[b].qh);
    }
}

/* 8-bit, d = amax / 127, codes = round-half-away(x / d) (ggml uses roundf). */
static float quant_q8(const float *src, int n, int8_t *qs, float lim)
{
    float x[QK_K], amax;
    clean(x, src, n, lim);
    (void)signed_amax(x, n, &amax);
    float d = amax / 127.0f;
    float id = d != 0.0f ? 1.0f / d : 0.0f;
    for (int j = 0; j < n; j++) {
        float v = x[j] * id;
        v = v > 127.0f ? 127.0f : v < -127.0f ? -127.0f : v;
        qs[j] = (int8_t)roundf(v);
    }
    return d;
}

void quant_ref_from_f32_q8_0(void *dst, const float *src, int64_t k)
{
    block_q8_0 *y = dst;
    for (int64_t b = 0; b < k / QK8_0; b++, src += QK8_0) y[b].d = f2h(quant_q8(src, QK8_0, y[b].qs, F16_MAX));
}

void quant_ref_from_f32_q8_1(void *dst, const float *src, int64_t k)
{
    block_q8_1 *y = dst;
    for (int64_t b = 0; b < k / QK8_1; b++, src += QK8_1) {
        float d = quant_q8(src, QK8_1, y[b].qs, F16_MAX);
        int sum = 0;
        for (int j = 0; j < QK8_1; j++) sum += y[b].qs[j];
        y[b].d = f2h(d);
        y[b].s = f2h((float)sum * d);
    }
}

/* ---- Q8_K (activations of the K-quant dots) --------------------------- */

void quant_ref_to_f32_q8_K(float *dst, const void *src, int64_t k)
{
    const block_q8_K *x = src;
    for (int64_t b = 0; b < k / QK_K; b++, dst += QK_K) {
        float d;
        memcpy(&d, &x[b].d, sizeof d);
        for (int j = 0; j < QK_K; j++) dst[j] = d * (float)x[b].qs[j];
    }
}

/* d = amax / 127 (positive), codes = round-to-nearest-even(x * 127 / amax);
 * bsums are the sums of each 16 codes.  (ggml maps the signed max onto
 * -127 instead; a dot product cannot tell the difference.) */
void quant_ref_from_f32_q8_K(void *dst, const float *src, int64_t k)
{
    block_q8_K *y = dst;
    for (int64_t b = 0; b < k / QK_K; b++, src += QK_K) {
        float x[QK_K], amax;
        clean(x, src, QK_K, 1e38f); /* d * 127 stays finite */
        (void)signed_amax(x, QK_K, &amax);
        float d = 0.0f;
        if (amax > 0.0f) {
            float iscale = 127.0f / amax;
            for (int j = 0; j < QK_K; j++) y[b].qs[j] = (int8_t)clampi(round_i(iscale * x[j]), -127, 127);
            d = amax / 127.0f;
        } else {
            memset(y[b].qs, 0, sizeof y[b].qs);
        }
        memcpy(&y[b].d, &d, sizeof d);
        for (int g = 0; g < QK_K / 16; g++) {
            int s = 0;
            for (int j = 0; j < 16; j++) s += y[b].qs[16 * g + j];
            y[b].bsums[g] = (int16_t)s;
        }
    }
}

/* ---- K-quant decoders -------------------------------------------------- */

void quant_ref_scale_min_k4(int j, const uint8_t *q, uint8_t *sc, uint8_t *m)
{
    if (j < 4) { /* low 6 bits of bytes 0..3 (scale) and 4..7 (min) */
        *sc = q[j] & 63;
        *m = q[j + 4] & 63;
    } else { /* low 4 bits in bytes 8..11, top 2 bits in the spare bits 6-7 of bytes 0..7 */
        *sc = (uint8_t)((q[j + 4] & 0xF) | (q[j - 4] >> 6) << 4);
        *m = (uint8_t)((q[j + 4] >> 4) | (q[j] >> 6) << 4);
    }
}

/* Q2_K / Q3_K element e of 256: 2-bit code in qs[32*(e/128) + e%32] at
 * bits 2*((e%128)/32); sub-block e/16. */
static inline int k2_code(const uint8_t *qs, int e) { return (qs[32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3; }

void quant_ref_to_f32_q2_K(float *dst, const void *src, int64_t k)
{
    const block_q2_K *x = src;
    for (int64_t b = 0; b < k / QK_K; b++, dst += QK_K) {
        float d = h2f(x[b].d), dmin = h2f(x[b].dmin);
        for (int e = 0; e < QK_K; e++) {
            uint8_t s = x[b].scales[e / 16];
            float dl = d * (float)(s & 0xF), ml = dmin * (float)(s >> 4);
            dst[e] = dl * (float)k2_code(x[b].qs, e) - ml;
        }
    }
}

/* Q3_K sub-block scale j (0..15): 6 bits, low 4 in nibble j/8 of byte j%8,
 * high 2 in bits 2*(j/4) of byte 8 + j%4; stored +32. */
static inline int q3k_scale(const uint8_t *s, int j)
{
    int lo = j < 8 ? s[j] & 0xF : s[j - 8] >> 4;
    int hi = (s[8 + j % 4] >> (2 * (j / 4))) & 3;
    return (lo | hi << 4) - 32;
}

void quant_ref_to_f32_q3_K(float *dst, const void *src, int64_t k)
{
    const block_q3_K *x = src;
    for (int64_t b = 0; b < k / QK_K; b++, dst += QK_K) {
        float d = h2f(x[b].d);
        for (int e = 0; e < QK_K; e++) {
            float dl = d * (float)q3k_scale(x[b].scales, e / 16);
            /* the high bit of element e is bit e/32 of hmask[e%32]; clear means -4 */
            int hbit = (x[b].hmask[e % 32] >> (e / 32)) & 1;
            dst[e] = dl * (float)(k2_code(x[b].qs, e) - (hbit ? 0 : 4));
        }
    }
}

/* Q4_K / Q5_K element e: sub-block e/32; low nibble of qs[32*(e/64) + e%32]
 * for the even sub-block of each pair, high nibble for the odd one; the
 * fifth bit (Q5_K) is bit e/32 of qh[e%32]. */
void quant_ref_to_f32_q4_K(float *dst, const void *src, int64_t k)
{
    const block_q4_K *x = src;
    for (int64_t b = 0; b < k / QK_K; b++, dst += QK_K) {
        float d = h2f(x[b].d), dmin = h2f(x[b].dmin);
        for (int sb = 0; sb < 8; sb++) {
            uint8_t sc, m;
            quant_ref_scale_min_k4(sb, x[b].scales, &sc, &m);
            float d1 = d * (float)sc, m1 = dmin * (float)m;
            const uint8_t *q = x[b].qs + 32 * (sb / 2);
            for (int l = 0; l < 32; l++) {
                int c = sb % 2 ? q[l] >> 4 : q[l] & 0xF;
                dst[32 * sb + l] = d1 * (float)c - m1;
            }
        }
    }
}

void quant_ref_to_f32_q5_K(float *dst, const void *src, int64_t k)
{
    const block_q5_K *x = src;
    for (int64_t b = 0; b < k / QK_K; b++, dst += QK_K) {
        float d = h2f(x[b].d), dmin = h2f(x[b].dmin);
        for (int sb = 0; sb < 8; sb++) {
            uint8_t sc, m;
            quant_ref_scale_min_k4(sb, x[b].scales, &sc, &m);
            float d1 = d * (float)sc, m1 = dmin * (float)m;
            const uint8_t *q = x[b].qs + 32 * (sb / 2);
            for (int l = 0; l < 32; l++) {
                int c = (sb % 2 ? q[l] >> 4 : q[l] & 0xF) | ((x[b].qh[l] >> sb) & 1) << 4;
                dst[32 * sb + l] = d1 * (float)c - m1;
            }
        }
    }
}

/* Q6_K element e: half h = e/128, quarter g = (e%128)/32, l = e%32; low 4
 * bits in ql[64h + 32*(g%2) + l] (low nibble for g < 2, high for g >= 2),
 * high 2 bits in qh[32h + l] at bits 2g; scale sc[e/16]; stored +32. */
void quant_ref_to_f32_q6_K(float *dst, const void *src, int64_t k)
{
    const block_q6_K *x = src;
    for (int64_t b = 0; b < k / QK_K; b++, dst += QK_K) {
        float d = h2f(x[b].d);
        for (int e = 0; e < QK_K; e++) {
            int h = e / 128, g = (e % 128) / 32, l = e % 32;
            uint8_t lq = x[b].ql[64 * h + 32 * (g % 2) + l];
            int lo = g < 2 ? lq & 0xF : lq >> 4;
            int hi = (x[b].qh[32 * h + l] >> (2 * g)) & 3;
            dst[e] = d * (float)x[b].scales[e / 16] * (float)((lo | hi << 4) - 32);
        }
    }
}

/* IQ4_XS sub-block ib (0..7): 6-bit scale, low 4 in nibble ib%2 of
 * scales_l[ib/2], high 2 in bits 2*ib of scales_h; stored +32.  Codes as
 * IQ4_NL, 16 bytes per sub-block. */
void quant_ref_to_f32_iq4_xs(float *dst, const void *src, int64_t k)
{
    const block_iq4_xs *x = src;
    for (int64_t b = 0; b < k / QK_K; b++, dst += QK_K) {
        float d = h2f(x[b].d);
        for (int ib = 0; ib < 8; ib++) {
            int ls = ((x[b].scales_l[ib / 2] >> (4 * (ib % 2))) & 0xF) | ((x[b].scales_h >> (2 * ib)) & 3) << 4;
            float dl = d * (float)(ls - 32);
            const uint8_t *q = x[b].qs + 16 * ib;
            for (int j = 0; j < 32; j++) {
                int c = j < 16 ? q[j] & 0xF : q[j - 16] >> 4;
                dst[32 * ib + j] = dl * (float)kern_iq4nl_values[c];
            }
        }
    }
}

/* ---- scale searches ----------------------------------------------------- */

/* Fit x[i] ~ scale * L[i] - mn with codes L[i] in [0, nmax] and mn >= 0,
 * minimising sum w[i] * e^2 (|e| when use_mad).  Starts from the range fit
 * (min(x, 0)..max(x) onto 0..nmax); then for each inverse scale
 * (nmax + rmin + rdelta * s) / (max - base), s = 0..nstep, rounds the codes
 * of x - base and solves the weighted least squares for (scale, offset)
 * given those codes (offset clamped to <= 0); the smallest error wins, and
 * base follows the best offset found so far (the search re-centres on
 * it).  Returns the scale, *mn_out the min. */
static float fit_scale_min(int n, int nmax, const float *x, const float *w, uint8_t *L, float *mn_out,
                           float rmin, float rdelta, int nstep, int use_mad)
{
    float lo = x[0], hi = x[0];
    double sw = 0, sx = 0;
    for (int i = 0; i < n; i++) {
        lo = x[i] < lo ? x[i] : lo;
        hi = x[i] > hi ? x[i] : hi;
        sw += w[i], sx += (double)w[i] * x[i];
    }
    if (lo > 0.0f) lo = 0.0f;
    if (hi == lo) {
        memset(L, 0, (size_t)n);
        *mn_out = -lo;
        return 0.0f;
    }
    float iscale = (float)nmax / (hi - lo), scale = 1.0f / iscale, off = lo;
    double best = 0;
    for (int i = 0; i < n; i++) {
        L[i] = (uint8_t)clampi(round_i(iscale * (x[i] - lo)), 0, nmax);
        double e = (double)scale * L[i] + off - x[i];
        best += w[i] * (use_mad ? fabs(e) : e * e);
    }
    uint8_t la[QK_K];
    float base = lo;
    for (int s = 0; s <= nstep; s++) {
        float is = ((float)nmax + rmin + rdelta * (float)s) / (hi - base);
        double sl = 0, sl2 = 0, sxl = 0;
        for (int i = 0; i < n; i++) {
            int l = clampi(round_i(is * (x[i] - base)), 0, nmax);
            la[i] = (uint8_t)l;
            sl += (double)w[i] * l, sl2 += (double)w[i] * l * l, sxl += (double)w[i] * l * x[i];
        }
        double det = sw * sl2 - sl * sl;
        if (!(det > 0)) continue;
        double a = (sw * sxl - sx * sl) / det, o = (sl2 * sx - sl * sxl) / det;
        if (o > 0) o = 0, a = sxl / sl2;
        double err = 0;
        for (int i = 0; i < n; i++) {
            double e = a * la[i] + o - x[i];
            err += w[i] * (use_mad ? fabs(e) : e * e);
        }
        if (err < best) {
            memcpy(L, la, (size_t)n);
            best = err, scale = (float)a, off = (float)o;
            base = off;
        }
    }
    *mn_out = -off;
    return scale;
}

/* Fit x[i] ~ scale * l[i], l[i] in [-nmax, nmax - 1], minimising
 * sum w (x - scale l)^2, i.e. maximising (sum w x l)^2 / sum w l^2.
 * Candidates: inverse scales -(nmax + 0.1 s) / vmax for s = -ngrid..ngrid
 * (vmax the value of largest magnitude, landing on -nmax at s = 0; Q6_K
 * uses llama.cpp's +-0.9, Q3_K +-0.4: with x^2 weights a wider grid trades
 * the small values for the largest and measures worse), then (refine)
 * up to 5 passes moving single codes to the value the fit of the others
 * asks for when that raises the objective.  L[i] = l[i] + nmax.  Returns
 * the least-squares scale (0 for an all-zero group). */
static float fit_scale_sym(int n, int nmax, const float *x, const float *w, int8_t *L, int ngrid, int refine)
{
    float amax;
    float vmax = signed_amax(x, n, &amax);
    if (amax < 1e-15f) {
        memset(L, nmax, (size_t)n);
        return 0.0f;
    }
    int8_t l[QK_K];
    double bx = 0, b2 = 0;
    int have = 0;
    for (int s = -ngrid; s <= ngrid; s++) {
        float is = -((float)nmax + 0.1f * (float)s) / vmax;
        double slx = 0, sl2 = 0;
        int8_t t[QK_K];
        for (int i = 0; i < n; i++) {
            int li = clampi(round_i(is * x[i]), -nmax, nmax - 1);
            t[i] = (int8_t)li;
            slx += (double)w[i] * x[i] * li, sl2 += (double)w[i] * li * li;
        }
        if (sl2 > 0 && (!have || slx * slx * b2 > bx * bx * sl2)) {
            memcpy(l, t, (size_t)n);
            bx = slx, b2 = sl2, have = 1;
        }
    }
    if (!have) {
        memset(L, nmax, (size_t)n);
        return 0.0f;
    }
    for (int pass = 0; refine && pass < 5; pass++) {
        int changed = 0;
        for (int i = 0; i < n; i++) {
            double ox = bx - (double)w[i] * x[i] * l[i], o2 = b2 - (double)w[i] * l[i] * l[i];
            if (!(o2 > 0) || ox == 0) continue;
            int nl = clampi(round_i((float)(x[i] * o2 / ox)), -nmax, nmax - 1);
            if (nl == l[i]) continue;
            double nx = ox + (double)w[i] * x[i] * nl, n2 = o2 + (double)w[i] * nl * nl;
            if (nx * nx * b2 > bx * bx * n2) {
                l[i] = (int8_t)nl, bx = nx, b2 = n2;
                changed++;
            }
        }
        if (!changed) break;
    }
    for (int i = 0; i < n; i++) L[i] = (int8_t)(l[i] + nmax);
    return (float)(bx / b2);
}

/* Index of the kern_iq4nl_values entry nearest v (ties to the upper one;
 * NaN -> 8, the entry nearest 0). */
static int iq4_index(float v)
{
    const int8_t *kv = kern_iq4nl_values;
    if (v != v) return 8;
    if (v <= kv[0]) return 0;
    if (v >= kv[15]) return 15;
    int lo = 0, hi = 15;
    while (hi - lo > 1) {
        int mid = (lo + hi) / 2;
        if (v < kv[mid]) hi = mid;
        else lo = mid;
    }
    return v - kv[lo] < kv[hi] - v ? lo : hi;
}

/* Codes of x against scale d, and the weighted squared error. */
static double iq4_codes(int n, const float *x, const float *w, float d, uint8_t *L)
{
    float id = d != 0.0f ? 1.0f / d : 0.0f;
    double err = 0;
    for (int i = 0; i < n; i++) {
        L[i] = (uint8_t)iq4_index(id * x[i]);
        double e = x[i] - (double)d * kern_iq4nl_values[L[i]];
        err += w[i] * e * e;
    }
    return err;
}

/* IQ4 group scale: d minimising sum w (x - d v[L])^2.  Candidate inverse
 * scales put vmax (the value of largest magnitude) on the table's ends,
 * (-127 + t) / vmax and (113 + t) / vmax for t = -7..7; each one's codes
 * get the least-squares d, and the best d is tried once more with its own
 * codes.  Returns d (0 for an all-zero group); L gets the codes. */
static float fit_iq4(int n, const float *x, const float *w, uint8_t *L)
{
    const int8_t *kv = kern_iq4nl_values;
    float amax;
    float vmax = signed_amax(x, n, &amax);
    memset(L, 0, (size_t)n);
    if (amax < 1e-15f) return 0.0f;
    double best = -1;
    float bestd = 0.0f;
    uint8_t t[QK_K];
    for (int cand = 0; cand <= 30; cand++) {
        float id;
        if (cand < 30) id = ((float)(cand < 15 ? kv[0] : kv[15]) + (float)(cand % 15 - 7)) / vmax;
        else if (bestd != 0.0f) id = 1.0f / bestd;
        else break;
        double sqx = 0, sq2 = 0;
        for (int i = 0; i < n; i++) {
            t[i] = (uint8_t)iq4_index(id * x[i]);
            double q = kv[t[i]];
            sqx += w[i] * q * x[i], sq2 += w[i] * q * q;
        }
        if (!(sq2 > 0)) continue;
        if (sqx * sqx / sq2 > best) {
            best = sqx * sqx / sq2, bestd = (float)(sqx / sq2);
            memcpy(L, t, (size_t)n);
        }
    }
    return bestd;
}

/* ---- K-quant and IQ4 encoders ----------------------------------------- */

/* Pack 256 2-bit codes (Q2_K, Q3_K's low bits): the inverse of k2_code. */
static void pack_k2(const uint8_t *L, uint8_t *qs)
{
    for (int h = 0; h < 2; h++)
        for (int l = 0; l < 32; l++) {
            const uint8_t *c = L + 128 * h + l;
            qs[32 * h + l] = (uint8_t)((c[0] & 3) | (c[32] & 3) << 2 | (c[64] & 3) << 4 | (c[96] & 3) << 6);
        }
}

void quant_ref_from_f32_q2_K(void *dst, const float *src, int64_t k)
{
    block_q2_K *y = dst;
    for (int64_t b = 0; b < k / QK_K; b++, src += QK_K) {
        float x[QK_K], w[16], scales[16], mins[16], max_scale = 0.0f, max_min = 0.0f;
        uint8_t L[QK_K];
        clean(x, src, QK_K, F16_MAX);
        for (int j = 0; j < 16; j++) {
            for (int l = 0; l < 16; l++) w[l] = fabsf(x[16 * j + l]);
            scales[j] = fit_scale_min(16, 3, x + 16 * j, w, L + 16 * j, &mins[j], -0.5f, 0.1f, 15, 1);
            max_scale = scales[j] > max_scale ? scales[j] : max_scale;
            max_min = mins[j] > max_min ? mins[j] : max_min;
        }
        float is = max_scale > 0.0f ? 15.0f / max_scale : 0.0f, im = max_min > 0.0f ? 15.0f / max_min : 0.0f;
        for (int j = 0; j < 16; j++)
            y[b].scales[j] = (uint8_t)(clampi(round_i(is * scales[j]), 0, 15) | clampi(round_i(im * mins[j]), 0, 15) << 4);
        y[b].d = f2h(max_scale / 15.0f);
        y[b].dmin = f2h(max_min / 15.0f);
        float d = h2f(y[b].d), dmin = h2f(y[b].dmin);
        for (int j = 0; j < 16; j++) {
            float dl = d * (float)(y[b].scales[j] & 0xF);
            if (dl == 0.0f) continue;
            float ml = dmin * (float)(y[b].scales[j] >> 4);
            for (int l = 0; l < 16; l++) L[16 * j + l] = (uint8_t)clampi(round_i((x[16 * j + l] + ml) / dl), 0, 3);
        }
        pack_k2(L, y[b].qs);
    }
}

void quant_ref_from_f32_q3_K(void *dst, const float *src, int64_t k)
{
    block_q3_K *y = dst;
    for (int64_t b = 0; b < k / QK_K; b++, src += QK_K) {
        float x[QK_K], w[16], scales[16], amax = 0.0f, max_scale = 0.0f;
        int8_t L[QK_K];
        clean(x, src, QK_K, F16_MAX);
        for (int j = 0; j < 16; j++) {
            for (int l = 0; l < 16; l++) w[l] = x[16 * j + l] * x[16 * j + l];
            scales[j] = fit_scale_sym(16, 4, x + 16 * j, w, L + 16 * j, 4, 1);
            if (fabsf(scales[j]) > amax) amax = fabsf(scales[j]), max_scale = scales[j];
        }
        memset(y[b].scales, 0, sizeof y[b].scales);
        y[b].d = 0;
        if (max_scale != 0.0f) {
            float iscale = -32.0f / max_scale;
            for (int j = 0; j < 16; j++) {
                int l = clampi(round_i(iscale * scales[j]), -32, 31) + 32;
                y[b].scales[j % 8] |= (uint8_t)((l & 0xF) << (4 * (j / 8)));
                y[b].scales[8 + j % 4] |= (uint8_t)((l >> 4) << (2 * (j / 4)));
            }
            y[b].d = f2h(1.0f / iscale);
        }
        float d = h2f(y[b].d);
        for (int j = 0; j < 16; j++) {
            float dl = d * (float)q3k_scale(y[b].scales, j);
            if (dl == 0.0f) continue;
            for (int l = 0; l < 16; l++) L[16 * j + l] = (int8_t)(clampi(round_i(x[16 * j + l] / dl), -4, 3) + 4);
        }
        uint8_t lo[QK_K];
        memset(y[b].hmask, 0, sizeof y[b].hmask);
        for (int e = 0; e < QK_K; e++) {
            int c = clampi(L[e], 0, 7);
            if (c > 3) y[b].hmask[e % 32] |= (uint8_t)(1u << (e / 32));
            lo[e] = (uint8_t)(c & 3);
        }
        pack_k2(lo, y[b].qs);
    }
}

/* The 12 scale bytes of Q4_K / Q5_K from 8 6-bit scales and mins: the
 * inverse of quant_ref_scale_min_k4. */
static void pack_scale_min_k4(const uint8_t *ls, const uint8_t *lm, uint8_t *q)
{
    memset(q, 0, K_SCALE_SIZE);
    for (int j = 0; j < 8; j++) {
        if (j < 4) {
            q[j] |= ls[j] & 63;
            q[j + 4] |= lm[j] & 63;
        } else {
            q[j + 4] = (uint8_t)((ls[j] & 0xF) | (lm[j] & 0xF) << 4);
            q[j - 4] |= (uint8_t)((ls[j] >> 4) << 6);
            q[j] |= (uint8_t)((lm[j] >> 4) << 6);
        }
    }
}

/* Q4_K (nmax 15) and Q5_K (31): 8 sub-blocks of 32, each fitted with
 * weights sqrt(mean x^2) + |x|; 6-bit scales and mins against the block's
 * largest; codes re-picked against the stored values.  L gets 256 codes. */
static void quant_k_scale_min(const float *src, int nmax, uint16_t *dh, uint16_t *dminh, uint8_t *scales12,
                              uint8_t *L, float rmin, int nstep)
{
    float x[QK_K], w[32], sc[8], mn[8], max_scale = 0.0f, max_min = 0.0f;
    clean(x, src, QK_K, F16_MAX);
    for (int j = 0; j < 8; j++) {
        const float *xb = x + 32 * j;
        float s2 = 0.0f;
        for (int l = 0; l < 32; l++) s2 += xb[l] * xb[l];
        float av = sqrtf(s2 / 32.0f);
        for (int l = 0; l < 32; l++) w[l] = av + fabsf(xb[l]);
        sc[j] = fit_scale_min(32, nmax, xb, w, L + 32 * j, &mn[j], rmin, 0.1f, nstep, 0);
        max_scale = sc[j] > max_scale ? sc[j] : max_scale;
        max_min = mn[j] > max_min ? mn[j] : max_min;
    }
    float is = max_scale > 0.0f ? 63.0f / max_scale : 0.0f, im = max_min > 0.0f ? 63.0f / max_min : 0.0f;
    uint8_t ls[8], lm[8];
    for (int j = 0; j < 8; j++) {
        ls[j] = (uint8_t)clampi(round_i(is * sc[j]), 0, 63);
        lm[j] = (uint8_t)clampi(round_i(im * mn[j]), 0, 63);
    }
    pack_scale_min_k4(ls, lm, scales12);
    *dh = f2h(max_scale / 63.0f);
    *dminh = f2h(max_min / 63.0f);
    float d = h2f(*dh), dmin = h2f(*dminh);
    for (int j = 0; j < 8; j++) {
        float dl = d * (float)ls[j];
        if (dl == 0.0f) continue;
        float ml = dmin * (float)lm[j];
        for (int l = 0; l < 32; l++) L[32 * j + l] = (uint8_t)clampi(round_i((x[32 * j + l] + ml) / dl), 0, nmax);
    }
}

void quant_ref_from_f32_q4_K(void *dst, const float *src, int64_t k)
{
    block_q4_K *y = dst;
    for (int64_t b = 0; b < k / QK_K; b++, src += QK_K) {
        uint8_t L[QK_K];
        quant_k_scale_min(src, 15, &y[b].d, &y[b].dmin, y[b].scales, L, -1.0f, 20);
        for (int p = 0; p < 4; p++)
            for (int l = 0; l < 32; l++) y[b].qs[32 * p + l] = (uint8_t)(L[64 * p + l] | L[64 * p + 32 + l] << 4);
    }
}

void quant_ref_from_f32_q5_K(void *dst, const float *src, int64_t k)
{
    block_q5_K *y = dst;
    for (int64_t b = 0; b < k / QK_K; b++, src += QK_K) {
        uint8_t L[QK_K];
        quant_k_scale_min(src, 31, &y[b].d, &y[b].dmin, y[b].scales, L, -0.5f, 15);
        memset(y[b].qh, 0, sizeof y[b].qh);
        for (int p = 0; p < 4; p++)
            for (int l = 0; l < 32; l++) {
                int c0 = L[64 * p + l], c1 = L[64 * p + 32 + l];
                y[b].qs[32 * p + l] = (uint8_t)((c0 & 0xF) | (c1 & 0xF) << 4);
                y[b].qh[l] |= (uint8_t)(((c0 >> 4) & 1) << (2 * p) | ((c1 >> 4) & 1) << (2 * p + 1));
            }
    }
}

void quant_ref_from_f32_q6_K(void *dst, const float *src, int64_t k)
{
    block_q6_K *y = dst;
    for (int64_t b = 0; b < k / QK_K; b++, src += QK_K) {
        float x[QK_K], w[16], scales[16], amax = 0.0f, max_scale = 0.0f;
        int8_t L[QK_K];
        clean(x, src, QK_K, F16_MAX);
        for (int j = 0; j < 16; j++) {
            for (int l = 0; l < 16; l++) w[l] = x[16 * j + l] * x[16 * j + l];
            scales[j] = fit_scale_sym(16, 32, x + 16 * j, w, L + 16 * j, 9, 1);
            if (fabsf(scales[j]) > amax) amax = fabsf(scales[j]), max_scale = scales[j];
        }
        memset(&y[b], 0, sizeof y[b]);
        if (amax < 1e-15f) {
            for (int e = 0; e < QK_K; e++) L[e] = 32; /* code 32: value 0 */
        } else {
            float iscale = -128.0f / max_scale;
            y[b].d = f2h(1.0f / iscale);
            for (int j = 0; j < 16; j++) y[b].scales[j] = (int8_t)clampi(round_i(iscale * scales[j]), -128, 127);
            float d = h2f(y[b].d);
            for (int j = 0; j < 16; j++) {
                float dl = d * (float)y[b].scales[j];
                if (dl == 0.0f) continue;
                for (int l = 0; l < 16; l++) L[16 * j + l] = (int8_t)(clampi(round_i(x[16 * j + l] / dl), -32, 31) + 32);
            }
        }
        for (int h = 0; h < 2; h++)
            for (int l = 0; l < 32; l++) {
                const int8_t *c = L + 128 * h + l;
                int c0 = clampi(c[0], 0, 63), c1 = clampi(c[32], 0, 63), c2 = clampi(c[64], 0, 63), c3 = clampi(c[96], 0, 63);
                y[b].ql[64 * h + l] = (uint8_t)((c0 & 0xF) | (c2 & 0xF) << 4);
                y[b].ql[64 * h + 32 + l] = (uint8_t)((c1 & 0xF) | (c3 & 0xF) << 4);
                y[b].qh[32 * h + l] = (uint8_t)((c0 >> 4) | (c1 >> 4) << 2 | (c2 >> 4) << 4 | (c3 >> 4) << 6);
            }
    }
}

static void pack_nibbles32(const uint8_t *L, uint8_t *qs)
{
    for (int j = 0; j < 16; j++) qs[j] = (uint8_t)((L[j] & 0xF) | (L[j + 16] & 0xF) << 4);
}

void quant_ref_from_f32_iq4_nl(void *dst, const float *src, int64_t k)
{
    block_iq4_nl *y = dst;
    for (int64_t b = 0; b < k / QK4_NL; b++, src += QK4_NL) {
        float x[QK4_NL], w[QK4_NL];
        uint8_t L[QK4_NL];
        clean(x, src, QK4_NL, F16_MAX);
        for (int j = 0; j < QK4_NL; j++) w[j] = x[j] * x[j];
        y[b].d = f2h(fit_iq4(QK4_NL, x, w, L));
        (void)iq4_codes(QK4_NL, x, w, h2f(y[b].d), L); /* against the stored scale */
        pack_nibbles32(L, y[b].qs);
    }
}

/* IQ4_XS: per sub-block scales from fit_iq4, a 6-bit signed code each
 * against d = -max/32 (the largest lands on -32); each sub-block tries the
 * rounded code and its two neighbours and keeps the least error. */
void quant_ref_from_f32_iq4_xs(void *dst, const float *src, int64_t k)
{
    block_iq4_xs *y = dst;
    for (int64_t b = 0; b < k / QK_K; b++, src += QK_K) {
        float x[QK_K], w[QK_K], sc[8], amax = 0.0f, max_scale = 0.0f;
        uint8_t L[QK_K];
        clean(x, src, QK_K, F16_MAX);
        for (int j = 0; j < QK_K; j++) w[j] = x[j] * x[j];
        for (int ib = 0; ib < 8; ib++) {
            sc[ib] = fit_iq4(32, x + 32 * ib, w + 32 * ib, L + 32 * ib);
            if (fabsf(sc[ib]) > amax) amax = fabsf(sc[ib]), max_scale = sc[ib];
        }
        y[b].d = f2h(-max_scale / 32.0f);
        y[b].scales_h = 0;
        memset(y[b].scales_l, 0, sizeof y[b].scales_l);
        float d = h2f(y[b].d), id = d != 0.0f ? 1.0f / d : 0.0f;
        for (int ib = 0; ib < 8; ib++) {
            int l0 = clampi(round_i(id * sc[ib]), -32, 31), best_l = l0;
            double best = -1;
            uint8_t t[32];
            for (int l = l0 - 1; l <= l0 + 1; l++) {
                if (l < -32 || l > 31) continue;
                double err = iq4_codes(32, x + 32 * ib, w + 32 * ib, d * (float)l, t);
                if (best < 0 || err < best) {
                    best = err, best_l = l;
                    memcpy(L + 32 * ib, t, 32);
                }
            }
            int ls = best_l + 32;
            y[b].scales_l[ib / 2] |= (uint8_t)((ls & 0xF) << (4 * (ib % 2)));
            y[b].scales_h |= (uint16_t)((ls >> 4) << (2 * ib));
            pack_nibbles32(L + 32 * ib, y[b].qs + 16 * ib);
        }
    }
}

/* ---- dispatch ---------------------------------------------------------- */

typedef void (*to_fn)(float *, const void *, int64_t);
typedef void (*from_fn)(void *, const float *, int64_t);

static int lookup(kern_type t, int64_t k, to_fn *to, from_fn *from)
{
    static const struct { kern_type t; to_fn to; from_fn from; } tab[] = {
        {KERN_TYPE_Q4_0, quant_ref_to_f32_q4_0, quant_ref_from_f32_q4_0},
        {KERN_TYPE_Q4_1, quant_ref_to_f32_q4_1, quant_ref_from_f32_q4_1},
        {KERN_TYPE_Q5_0, quant_ref_to_f32_q5_0, quant_ref_from_f32_q5_0},
        {KERN_TYPE_Q5_1, quant_ref_to_f32_q5_1, quant_ref_from_f32_q5_1},
        {KERN_TYPE_Q8_0, quant_ref_to_f32_q8_0, quant_ref_from_f32_q8_0},
        {KERN_TYPE_Q8_1, quant_ref_to_f32_q8_1, quant_ref_from_f32_q8_1},
        {KERN_TYPE_Q2_K, quant_ref_to_f32_q2_K, quant_ref_from_f32_q2_K},
        {KERN_TYPE_Q3_K, quant_ref_to_f32_q3_K, quant_ref_from_f32_q3_K},
        {KERN_TYPE_Q4_K, quant_ref_to_f32_q4_K, quant_ref_from_f32_q4_K},
        {KERN_TYPE_Q5_K, quant_ref_to_f32_q5_K, quant_ref_from_f32_q5_K},
        {KERN_TYPE_Q6_K, quant_ref_to_f32_q6_K, quant_ref_from_f32_q6_K},
        {KERN_TYPE_Q8_K, quant_ref_to_f32_q8_K, quant_ref_from_f32_q8_K},
        {KERN_TYPE_IQ4_NL, quant_ref_to_f32_iq4_nl, quant_ref_from_f32_iq4_nl},
        {KERN_TYPE_IQ4_XS, quant_ref_to_f32_iq4_xs, quant_ref_from_f32_iq4_xs},
    };
    for (size_t i = 0; i < sizeof tab / sizeof tab[0]; i++) {
        if (tab[i].t != t) continue;
        if (!kern_type_row_ok(t, k)) {
            log_error("%lld elements are not whole %s blocks", (long long)k, kern_type_get(t)->name);
            return -1;
        }
        *to = tab[i].to, *from = tab[i].from;
        return 0;
    }
    log_error("type %d is not a block-quantized type", (int)t);
    return -1;
}

int quant_ref_dequantize(kern_type t, float *dst, const void *src, int64_t k)
{
    to_fn to;
    from_fn from;
    if (lookup(t, k, &to, &from) < 0) return -1;
    to(dst, src, k);
    return 0;
}

int quant_ref_quantize(kern_type t, void *dst, const float *src, int64_t k)
{
    to_fn to;
    from_fn from;
    if (lookup(t, k, &to, &from) < 0) return -1;
    from(dst, src, k);
    return 0;
}
