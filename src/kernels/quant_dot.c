/* quant_dot — scalar reference of the quantized dots and the matmul
 * driver (GEMV / GEMM) shared by every ISA.  See quant_dot.h.
 *
 * The driver: each of nth threads quantizes the activation rows into its
 * own scratch (O(m k), against O(m n k / nth) for its share of the
 * product: no barrier, no shared buffer), QCHUNK rows at a time so the
 * scratch stays bounded, then computes its kern_split range of output
 * columns for them.  Decode (m = 1) walks its weight rows once.
 * The GEMM cuts its range into blocks of weight rows that stay in L2
 * (QBLOCK_BYTES) and, per block, walks the activation rows QUANT_MAX_R at
 * a time, so each weight block is read from memory once and unpacked once
 * per QUANT_MAX_R rows. */
#include "kernels/quant_dot.h"
#include "kernels/quant_select.h"

#include <math.h>
#include <stdlib.h>
#include <pthread.h>
#include <string.h>

#include "kernels/quant_blocks.h"
#include "kernels/quant_fp8.h"
#include "util/dtype.h"

const int8_t quant_iq4nl_values[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                       1,    13,   25,  38,  53,  69,  89,  113};

float quant_f16_table[65536];

void quant_init(void)
{
    static int done;
    if (done) return;
    for (int i = 0; i < 65536; i++) quant_f16_table[i] = f16_to_f32((uint16_t)i);
    done = 1;
}

/* ---- activation quantizers --------------------------------------------- */

/* q = round-half-even(x * 127 / amax), |q| <= 127; returns the scale amax / 127. */
static float quant_group(int8_t *q, const float *x, int n)
{
    float amax = 0.0f;
    for (int i = 0; i < n; i++) {
        float a = fabsf(x[i]);
        if (a > amax) amax = a;
    }
    float d = amax / 127.0f, id = amax > 0.0f ? 127.0f / amax : 0.0f;
    for (int i = 0; i < n; i++) {
        float v = nearbyintf(x[i] * id);
        q[i] = (int8_t)(v > 127.0f ? 127 : v < -127.0f ? -127 : v);
    }
    return d;
}

void quant_act_q8_0(void *dst, const float *x, int k)
{
    block_q8_0 *b = dst;
    for (int i = 0; i < k / QK8_0; i++) b[i].d = f32_to_f16(quant_group(b[i].qs, x + i * QK8_0, QK8_0));
}

void quant_act_q8_1(void *dst, const float *x, int k)
{
    block_q8_1 *b = dst;
    for (int i = 0; i < k / QK8_1; i++) {
        float d = quant_group(b[i].qs, x + i * QK8_1, QK8_1);
        int s = 0;
        for (int j = 0; j < QK8_1; j++) s += b[i].qs[j];
        b[i].d = f32_to_f16(d);
        b[i].s = f32_to_f16(d * (float)s);
    }
}

void quant_act_q8_K(void *dst, const float *x, int k)
{
    block_q8_K *b = dst;
    for (int i = 0; i < k / QK_K; i++) {
        b[i].d = quant_group(b[i].qs, x + i * QK_K, QK_K);
        for (int g = 0; g < QK_K / 16; g++) {
            int s = 0;
            for (int j = 0; j < 16; j++) s += b[i].qs[g * 16 + j];
            b[i].bsums[g] = (int16_t)s;
        }
    }
}

/* ---- generic decode ---------------------------------------------------- */

static float h2f(uint16_t h) { return f16_to_f32(h); }

/* the 6-bit scale and min of sub-block j of a Q4_K / Q5_K block */
static void scale_min_k4(int j, const uint8_t *q, int *d, int *m)
{
    if (j < 4) {
        *d = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *d = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
        *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
}

/* Q3_K's 16 6-bit scales (unbiased: 0..63, the format subtracts 32) */
static void q3k_scales(const uint8_t *s, int *out)
{
    for (int j = 0; j < 16; j++) {
        int lo = j < 8 ? (s[j] & 0xF) : (s[j - 8] >> 4);
        int hi = (s[8 + j % 4] >> (2 * (j / 4))) & 3;
        out[j] = lo | (hi << 4);
    }
}

void quant_decode_block(kern_type t, const void *blk, int8_t *q, float *d16, float *m16)
{
    switch (t) {
    case KERN_TYPE_Q4_0: {
        const block_q4_0 *b = blk;
        for (int j = 0; j < 16; j++) {
            q[j] = (int8_t)((b->qs[j] & 0xF) - 8);
            q[j + 16] = (int8_t)((b->qs[j] >> 4) - 8);
        }
        d16[0] = d16[1] = h2f(b->d);
        m16[0] = m16[1] = 0.0f;
        break;
    }
    case KERN_TYPE_Q4_1: {
        const block_q4_1 *b = blk;
        for (int j = 0; j < 16; j++) {
            q[j] = (int8_t)(b->qs[j] & 0xF);
            q[j + 16] = (int8_t)(b->qs[j] >> 4);
        }
        d16[0] = d16[1] = h2f(b->d);
        m16[0] = m16[1] = h2f(b->m);
        break;
    }
    case KERN_TYPE_Q5_0:
    case KERN_TYPE_Q5_1: {
        const uint8_t *qh8, *qs;
        if (t == KERN_TYPE_Q5_0) {
            const block_q5_0 *b = blk;
            qh8 = b->qh, qs = b->qs;
            d16[0] = d16[1] = h2f(b->d);
            m16[0] = m16[1] = 0.0f;
        } else {
            const block_q5_1 *b = blk;
            qh8 = b->qh, qs = b->qs;
            d16[0] = d16[1] = h2f(b->d);
            m16[0] = m16[1] = h2f(b->m);
        }
        uint32_t qh = (uint32_t)qh8[0] | (uint32_t)qh8[1] << 8 | (uint32_t)qh8[2] << 16 |
                      (uint32_t)qh8[3] << 24;
        int off = t == KERN_TYPE_Q5_0 ? 16 : 0;
        for (int j = 0; j < 16; j++) {
            q[j] = (int8_t)(((qs[j] & 0xF) | (((qh >> j) & 1) << 4)) - off);
            q[j + 16] = (int8_t)(((qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4)) - off);
        }
        break;
    }
    case KERN_TYPE_Q8_0: {
        const block_q8_0 *b = blk;
        memcpy(q, b->qs, QK8_0);
        d16[0] = d16[1] = h2f(b->d);
        m16[0] = m16[1] = 0.0f;
        break;
    }
    case KERN_TYPE_Q2_K: {
        const block_q2_K *b = blk;
        float d = h2f(b->d), dmin = h2f(b->dmin);
        /* value 128 h + 32 j + l (h < 2, j < 4, l < 32): bits 2j of qs[32 h + l];
         * sub-block of 16 = 8 h + 2 j + l / 16 */
        for (int h = 0; h < 2; h++)
            for (int j = 0; j < 4; j++)
                for (int l = 0; l < 32; l++) q[128 * h + 32 * j + l] = (int8_t)((b->qs[32 * h + l] >> (2 * j)) & 3);
        for (int s = 0; s < 16; s++) {
            d16[s] = d * (float)(b->scales[s] & 0xF);
            m16[s] = -(dmin * (float)(b->scales[s] >> 4));
        }
        break;
    }
    case KERN_TYPE_Q3_K: {
        const block_q3_K *b = blk;
        float d = h2f(b->d);
        int sc[16];
        q3k_scales(b->scales, sc);
        /* value 128 h + 32 j + l: low bits 2j of qs[32 h + l]; high bit (4 h + j) of
         * hmask[l]; a clear high bit subtracts 4 */
        for (int h = 0; h < 2; h++)
            for (int j = 0; j < 4; j++)
                for (int l = 0; l < 32; l++) {
                    int lo = (b->qs[32 * h + l] >> (2 * j)) & 3;
                    int hb = (b->hmask[l] >> (4 * h + j)) & 1;
                    q[128 * h + 32 * j + l] = (int8_t)(lo - (hb ? 0 : 4));
                }
        for (int s = 0; s < 16; s++) {
            d16[s] = d * (float)(sc[s] - 32);
            m16[s] = 0.0f;
        }
        break;
    }
    case KERN_TYPE_Q4_K:
    case KERN_TYPE_Q5_K: {
        const uint8_t *scales, *qs, *qh = NULL;
        float d, dmin;
        if (t == KERN_TYPE_Q4_K) {
            const block_q4_K *b = blk;
            scales = b->scales, qs = b->qs, d = h2f(b->d), dmin = h2f(b->dmin);
        } else {
            const block_q5_K *b = blk;
            scales = b->scales, qs = b->qs, qh = b->qh, d = h2f(b->d), dmin = h2f(b->dmin);
        }
        /* chunk c < 4 of 64: value 64 c + l is the low nibble of qs[32 c + l],
         * 64 c + 32 + l the high one; Q5_K's fifth bit is bit 2c (2c + 1) of qh[l] */
        for (int c = 0; c < 4; c++)
            for (int l = 0; l < 32; l++) {
                int lo = qs[32 * c + l] & 0xF, hi = qs[32 * c + l] >> 4;
                if (qh) {
                    lo |= ((qh[l] >> (2 * c)) & 1) << 4;
                    hi |= ((qh[l] >> (2 * c + 1)) & 1) << 4;
                }
                q[64 * c + l] = (int8_t)lo;
                q[64 * c + 32 + l] = (int8_t)hi;
            }
        for (int j = 0; j < 8; j++) {
            int sc, mn;
            scale_min_k4(j, scales, &sc, &mn);
            d16[2 * j] = d16[2 * j + 1] = d * (float)sc;
            m16[2 * j] = m16[2 * j + 1] = -(dmin * (float)mn);
        }
        break;
    }
    case KERN_TYPE_Q6_K: {
        const block_q6_K *b = blk;
        float d = h2f(b->d);
        /* half h < 2, l < 32: ql[64 h + l] low / high nibble -> values 128 h + l /
         * 128 h + 64 + l, ql[64 h + 32 + l] -> 128 h + 32 + l / 128 h + 96 + l;
         * the two high bits of each are bits 0, 2, 4, 6 of qh[32 h + l] */
        for (int h = 0; h < 2; h++)
            for (int l = 0; l < 32; l++) {
                const uint8_t *ql = b->ql + 64 * h, hb = b->qh[32 * h + l];
                int8_t *o = q + 128 * h;
                o[l] = (int8_t)(((ql[l] & 0xF) | ((hb & 3) << 4)) - 32);
                o[l + 32] = (int8_t)(((ql[l + 32] & 0xF) | (((hb >> 2) & 3) << 4)) - 32);
                o[l + 64] = (int8_t)(((ql[l] >> 4) | (((hb >> 4) & 3) << 4)) - 32);
                o[l + 96] = (int8_t)(((ql[l + 32] >> 4) | (((hb >> 6) & 3) << 4)) - 32);
            }
        for (int s = 0; s < 16; s++) {
            d16[s] = d * (float)b->scales[s];
            m16[s] = 0.0f;
        }
        break;
    }
    case KERN_TYPE_IQ4_NL: {
        const block_iq4_nl *b = blk;
        for (int j = 0; j < 16; j++) {
            q[j] = quant_iq4nl_values[b->qs[j] & 0xF];
            q[j + 16] = quant_iq4nl_values[b->qs[j] >> 4];
        }
        d16[0] = d16[1] = h2f(b->d);
        m16[0] = m16[1] = 0.0f;
        break;
    }
    case KERN_TYPE_IQ4_XS: {
        const block_iq4_xs *b = blk;
        float d = h2f(b->d);
        for (int ib = 0; ib < 8; ib++) {
            int ls = ((b->scales_l[ib / 2] >> (4 * (ib % 2))) & 0xF) | (((b->scales_h >> (2 * ib)) & 3) << 4);
            const uint8_t *qs = b->qs + 16 * ib;
            for (int j = 0; j < 16; j++) {
                q[32 * ib + j] = quant_iq4nl_values[qs[j] & 0xF];
                q[32 * ib + 16 + j] = quant_iq4nl_values[qs[j] >> 4];
            }
            d16[2 * ib] = d16[2 * ib + 1] = d * (float)(ls - 32);
            m16[2 * ib] = m16[2 * ib + 1] = 0.0f;
        }
        break;
    }
    default:
        memset(q, 0, 16);
        d16[0] = m16[0] = 0.0f;
        break;
    }
}

void quant_dequant_row(kern_type t, float *dst, const void *src, int64_t k)
{
    const kern_type_traits *tr = kern_type_get(t);
    int bs = tr->block_size;
    int8_t q[QK_K];
    float d16[QK_K / 16], m16[QK_K / 16];
    for (int64_t b = 0; b < k / bs; b++) {
        quant_decode_block(t, (const char *)src + (size_t)b * tr->block_bytes, q, d16, m16);
        for (int i = 0; i < bs; i++) dst[b * bs + i] = d16[i / 16] * (float)q[i] + m16[i / 16];
    }
}

/* ---- scalar dot -------------------------------------------------------- */

/* Activation group g (16 values) of a row of type at: its int8 values and scale. */
static const int8_t *act_group(kern_type at, const void *a, int g, float *d)
{
    if (at == KERN_TYPE_Q8_K) {
        const block_q8_K *b = (const block_q8_K *)a + g / 16;
        *d = b->d;
        return b->qs + (g % 16) * 16;
    }
    if (at == KERN_TYPE_Q8_1) {
        const block_q8_1 *b = (const block_q8_1 *)a + g / 2;
        *d = h2f(b->d);
        return b->qs + (g % 2) * 16;
    }
    const block_q8_0 *b = (const block_q8_0 *)a + g / 2;
    *d = h2f(b->d);
    return b->qs + (g % 2) * 16;
}

/* One generic body: decode each weight block once, meet all R rows. */
static void dot_generic(kern_type t, kern_type at, int k, const void *w, const void *a,
                        size_t astride, int R, float *out, size_t ostride)
{
    const kern_type_traits *tr = kern_type_get(t);
    const int bs = tr->block_size, ng = bs / 16;
    int8_t q[QK_K];
    float d16[QK_K / 16], m16[QK_K / 16];
    float acc[QUANT_MAX_R] = {0};
    for (int b = 0; b < k / bs; b++) {
        quant_decode_block(t, (const char *)w + (size_t)b * tr->block_bytes, q, d16, m16);
        for (int r = 0; r < R; r++) {
            const void *ar = (const char *)a + (size_t)r * astride;
            for (int g = 0; g < ng; g++) {
                float da;
                const int8_t *qa = act_group(at, ar, b * ng + g, &da);
                int dot = 0, sum = 0;
                for (int i = 0; i < 16; i++) {
                    dot += q[g * 16 + i] * qa[i];
                    sum += qa[i];
                }
                acc[r] += da * (d16[g] * (float)dot + m16[g] * (float)sum);
            }
        }
    }
    for (int r = 0; r < R; r++) out[(size_t)r * ostride] = acc[r];
}

#define SCALAR_OPS(T, AT, ACT)                                                                  \
    static void dot_scalar_##T(int k, const void *w, const void *a, size_t as, int R, float *o, \
                               size_t os)                                                       \
    {                                                                                           \
        dot_generic(KERN_TYPE_##T, KERN_TYPE_##AT, k, w, a, as, R, o, os);                      \
    }                                                                                           \
    static const quant_ops ops_scalar_##T = {KERN_TYPE_##AT, ACT, dot_scalar_##T};              \
    static float row_dot_##T(const void *row, const float *x, int k)                            \
    {                                                                                           \
        return quant_row_dot(KERN_TYPE_##T, row, x, k);                                         \
    }

SCALAR_OPS(Q4_0, Q8_0, quant_act_q8_0)
SCALAR_OPS(Q4_1, Q8_1, quant_act_q8_1)
SCALAR_OPS(Q5_0, Q8_0, quant_act_q8_0)
SCALAR_OPS(Q5_1, Q8_1, quant_act_q8_1)
SCALAR_OPS(Q8_0, Q8_0, quant_act_q8_0)
SCALAR_OPS(Q2_K, Q8_K, quant_act_q8_K)
SCALAR_OPS(Q3_K, Q8_K, quant_act_q8_K)
SCALAR_OPS(Q4_K, Q8_K, quant_act_q8_K)
SCALAR_OPS(Q5_K, Q8_K, quant_act_q8_K)
SCALAR_OPS(Q6_K, Q8_K, quant_act_q8_K)
SCALAR_OPS(IQ4_NL, Q8_0, quant_act_q8_0)
SCALAR_OPS(IQ4_XS, Q8_K, quant_act_q8_K)

const quant_ops *quant_ops_scalar(kern_type t)
{
    switch (t) {
#define C(T) case KERN_TYPE_##T: return &ops_scalar_##T;
        C(Q4_0) C(Q4_1) C(Q5_0) C(Q5_1) C(Q8_0) C(Q2_K) C(Q3_K) C(Q4_K) C(Q5_K) C(Q6_K) C(IQ4_NL) C(IQ4_XS)
#undef C
    default: return NULL;
    }
}

kern_row_dot_fn quant_row_dot_slot(kern_type t)
{
    switch (t) {
#define C(T) case KERN_TYPE_##T: return row_dot_##T;
        C(Q4_0) C(Q4_1) C(Q5_0) C(Q5_1) C(Q8_0) C(Q2_K) C(Q3_K) C(Q4_K) C(Q5_K) C(Q6_K) C(IQ4_NL) C(IQ4_XS)
#undef C
    default: return NULL;
    }
}

/* ---- AVX-512 choice ----------------------------------------------------
 * Per type and layout, whether the VNNI kernel runs: set from the
 * measurements on the CPUs measured (bench_quant on Zen 4, qkern.md and
 * PERF.md): plain layout decode (m = 1, the l2_resident compute rate),
 * plain GEMM (m > 1, the m = 512 rate) and the x8 layout; where the VNNI
 * kernel did not beat AVX2 the AVX2 one stays. */
enum { Q512_GEMV = 1, Q512_GEMM = 2, Q512_X8 = 4, Q512_ALL = 7 };
static const unsigned char g_q512_default[KERN_TYPE_COUNT] = {
    [KERN_TYPE_Q8_0] = Q512_GEMM | Q512_X8, /* plain GEMV: AVX2 0.87-0.99x of it */
    [KERN_TYPE_Q4_0] = Q512_ALL,
    [KERN_TYPE_Q4_K] = Q512_ALL,
    [KERN_TYPE_Q5_K] = Q512_ALL,
    [KERN_TYPE_Q6_K] = Q512_ALL,
    [KERN_TYPE_Q4_1] = Q512_ALL,
    [KERN_TYPE_Q5_0] = Q512_ALL,
    [KERN_TYPE_Q5_1] = Q512_ALL,
    [KERN_TYPE_Q2_K] = Q512_ALL,
    [KERN_TYPE_Q3_K] = Q512_ALL,
    [KERN_TYPE_IQ4_NL] = Q512_ALL,
    [KERN_TYPE_IQ4_XS] = 0, /* 0.95x (GEMV), 0.8-1.0x (GEMM) */
};
static unsigned char g_q512[KERN_TYPE_COUNT];
static quant_ops g_ops512[KERN_TYPE_COUNT];

int quant_x16_on = 1;

void quant_avx512_select(const char *spec)
{
    const char *x16 = getenv("SGLC_QUANT_X16");
    quant_x16_on = !(x16 && !strcmp(x16, "0"));
    const int all = spec && !strcmp(spec, "all"), none = spec && !strcmp(spec, "none");
    /* default: the table, each plain-layout entry checked by a start-up
     * timing (quant_select.c); "table": the table alone */
    const int measure = !all && !none && !(spec && !strcmp(spec, "table"));
    quant_select_reset(all ? "SGLC_QUANT_AVX512=all" : none ? "SGLC_QUANT_AVX512=none"
                       : measure ? "table checked by measurement" : "SGLC_QUANT_AVX512=table");
    for (int t = 0; t < KERN_TYPE_COUNT; t++) {
        const quant_ops *o2 = quant_ops_avx2((kern_type)t);
        quant_dot_fn d = quant_dot_avx512((kern_type)t);
        g_q512[t] = 0;
        if (!o2 || !d) continue;
        g_ops512[t] = (quant_ops){o2->act_type, o2->act, d};
        /* VNNI x8 kernels exist for these layouts only (Q6_K: the GEMM x16 one) */
        const int x8 = t == KERN_TYPE_Q4_0 || t == KERN_TYPE_Q4_K || t == KERN_TYPE_Q8_0 || t == KERN_TYPE_Q6_K
                           ? Q512_X8 : 0;
        g_q512[t] = (none ? 0 : all ? Q512_ALL : g_q512_default[t]) & (Q512_GEMV | Q512_GEMM | x8);
        int gv, gm;
        const int tv = (g_q512[t] & Q512_GEMV) != 0, tm = (g_q512[t] & Q512_GEMM) != 0;
        if (measure && quant_avx512_measure((kern_type)t, tv, tm, &gv, &gm) == 0) {
            quant_select_note((kern_type)t, 0, tv, gv);
            quant_select_note((kern_type)t, 1, tm, gm);
            g_q512[t] = (unsigned char)((g_q512[t] & ~(Q512_GEMV | Q512_GEMM)) | (gv ? Q512_GEMV : 0) | (gm ? Q512_GEMM : 0));
        }
    }
}

int quant_avx512_uses(kern_type t, int x8, int m)
{
    if ((int)t < 0 || t >= KERN_TYPE_COUNT) return 0;
    return (g_q512[t] & (x8 ? Q512_X8 : m == 1 ? Q512_GEMV : Q512_GEMM)) != 0;
}

/* The ops for m activation rows of plain-layout t under isa. */
static const quant_ops *quant_ops_for_m(kern_type t, kern_isa isa, int m)
{
    if (isa == KERN_ISA_AVX512 && quant_avx512_uses(t, 0, m)) return &g_ops512[t];
    const quant_ops *o = isa != KERN_ISA_SCALAR ? quant_ops_avx2(t) : NULL;
    return o ? o : quant_ops_scalar(t);
}

const quant_ops *quant_ops_for(kern_type t, kern_isa isa) { return quant_ops_for_m(t, isa, 2); }

/* Dot of a stored row with f32 x: dequantize a block at a time, f32 sum
 * (no activation rounding: the reference the traits' dot slot promises). */
float quant_row_dot(kern_type t, const void *row, const float *x, int k)
{
    const kern_type_traits *tr = kern_type_get(t);
    float buf[QK_K], s = 0.0f;
    for (int b = 0; b < k / tr->block_size; b++) {
        quant_dequant_row(t, buf, (const char *)row + (size_t)b * tr->block_bytes, tr->block_size);
        for (int i = 0; i < tr->block_size; i++) s += buf[i] * x[(size_t)b * tr->block_size + i];
    }
    return s;
}

/* ---- the driver -------------------------------------------------------- */

#define QBLOCK_BYTES (96 << 10) /* weight rows per GEMM block: about this many bytes */
#define QCHUNK 64               /* activation rows quantized at a time (bounds the scratch) */

size_t quant_matmul_scratch(int m, int k)
{
    /* the largest activation row: Q8_K at 292 / 256 bytes per value, Q8_1 at
     * 36 / 32; plus the repacked Q4_0 path's two floats per block */
    size_t row = (size_t)(k / 32 + 1) * (37 + 8);
    /* + one unpacked row (<= 34 bytes per 32 values: Q8_0) for the
     * repacked layouts' scalar path */
    size_t s = (size_t)(m < QCHUNK ? m : QCHUNK) * row + (size_t)(k / 32 + 1) * 36 + 256;
    size_t f8 = qf8_matmul_scratch(m, k); /* the fp8 type's panel */
    /* + the gathered activation rows of a permuted (act-order) weight */
    /* + the Q6_K x16 kernel's offsets: 16 int32 per 256 values and row */
    s += (size_t)(m < QCHUNK ? m : QCHUNK) * (size_t)(k / 256 + 1) * 64;
    return (s > f8 ? s : f8) + (size_t)(m < QCHUNK ? m : QCHUNK) * k * sizeof(float) + 64;
}

void quant_repack_q4_0x8(void *dst, const void *src, int n, int nb)
{
    const block_q4_0 *s = src;
    quant_q4_0x8 *d = dst;
    for (int g = 0; g < n / 8; g++)
        for (int b = 0; b < nb; b++) {
            quant_q4_0x8 *o = d + (size_t)g * nb + b;
            for (int r = 0; r < 8; r++) {
                const block_q4_0 *x = s + (size_t)(8 * g + r) * nb + b;
                o->d[r] = x->d;
                for (int c = 0; c < 4; c++) memcpy(o->qs[c][r], x->qs + 4 * c, 4);
            }
        }
}

/* Row j of a repacked Q4_0 weight back as plain blocks (the scalar path). */
static void unpack_q4_0x8_row(block_q4_0 *dst, const void *w, int nb, int j)
{
    const quant_q4_0x8 *grp = (const quant_q4_0x8 *)w + (size_t)(j / 8) * nb;
    int r = j % 8;
    for (int b = 0; b < nb; b++) {
        dst[b].d = grp[b].d[r];
        for (int c = 0; c < 4; c++) memcpy(dst[b].qs + 4 * c, grp[b].qs[c][r], 4);
    }
}

/* The 6-bit scales and mins of row r of a K-quant super-block (Q4_K's and
 * Q5_K's 12-byte form) into the x8 layouts' byte arrays, and back: the exact
 * inverse of scale_min_k4. */
static void kx8_put_scales(uint8_t sc[8][8], uint8_t mn[4][8][2], int r, const uint8_t *scales)
{
    for (int j = 0; j < 8; j++) {
        int s, m;
        scale_min_k4(j, scales, &s, &m);
        sc[j][r] = (uint8_t)s;
        mn[j / 2][r][j % 2] = (uint8_t)m;
    }
}

static void kx8_get_scales(uint8_t *scales, const uint8_t sc8[8][8], const uint8_t mn8[4][8][2], int r)
{
    uint8_t sc[8], mn[8];
    for (int i = 0; i < 8; i++) sc[i] = sc8[i][r], mn[i] = mn8[i / 2][r][i % 2];
    for (int i = 0; i < 4; i++) {
        scales[i] = (uint8_t)(sc[i] | ((sc[i + 4] >> 4) << 6));
        scales[i + 4] = (uint8_t)(mn[i] | ((mn[i + 4] >> 4) << 6));
        scales[i + 8] = (uint8_t)((sc[i + 4] & 0xF) | ((mn[i + 4] & 0xF) << 4));
    }
}

void quant_repack_q4_Kx8(void *dst, const void *src, int n, int nb)
{
    const block_q4_K *s = src;
    quant_q4_Kx8 *d = dst;
    for (int g = 0; g < n / 8; g++)
        for (int b = 0; b < nb; b++) {
            quant_q4_Kx8 *o = d + (size_t)g * nb + b;
            for (int r = 0; r < 8; r++) {
                const block_q4_K *x = s + (size_t)(8 * g + r) * nb + b;
                o->d[r] = x->d;
                o->dmin[r] = x->dmin;
                kx8_put_scales(o->sc, o->mn, r, x->scales);
                for (int j = 0; j < 4; j++)
                    for (int c = 0; c < 8; c++) memcpy(o->qs[j][c][r], x->qs + 32 * j + 4 * c, 4);
            }
        }
}

/* Row j of a repacked Q4_K weight back as plain blocks. */
static void unpack_q4_Kx8_row(block_q4_K *dst, const void *w, int nb, int j)
{
    const quant_q4_Kx8 *grp = (const quant_q4_Kx8 *)w + (size_t)(j / 8) * nb;
    int r = j % 8;
    for (int b = 0; b < nb; b++) {
        const quant_q4_Kx8 *x = grp + b;
        dst[b].d = x->d[r];
        dst[b].dmin = x->dmin[r];
        kx8_get_scales(dst[b].scales, x->sc, x->mn, r);
        for (int q = 0; q < 4; q++)
            for (int c = 0; c < 8; c++) memcpy(dst[b].qs + 32 * q + 4 * c, x->qs[q][c][r], 4);
    }
}

void quant_repack_q8_0x8(void *dst, const void *src, int n, int nb)
{
    const block_q8_0 *s = src;
    quant_q8_0x8 *d = dst;
    for (int g = 0; g < n / 8; g++)
        for (int b = 0; b < nb; b++) {
            quant_q8_0x8 *o = d + (size_t)g * nb + b;
            for (int r = 0; r < 8; r++) {
                const block_q8_0 *x = s + (size_t)(8 * g + r) * nb + b;
                o->d[r] = x->d;
                for (int c = 0; c < 8; c++) memcpy(o->qs[c][r], x->qs + 4 * c, 4);
            }
        }
}

static void unpack_q8_0x8_row(block_q8_0 *dst, const void *w, int nb, int j)
{
    const quant_q8_0x8 *grp = (const quant_q8_0x8 *)w + (size_t)(j / 8) * nb;
    int r = j % 8;
    for (int b = 0; b < nb; b++) {
        dst[b].d = grp[b].d[r];
        for (int c = 0; c < 8; c++) memcpy(dst[b].qs + 4 * c, grp[b].qs[c][r], 4);
    }
}

void quant_repack_q6_Kx8(void *dst, const void *src, int n, int nb)
{
    const block_q6_K *s = src;
    quant_q6_Kx8 *d = dst;
    for (int g = 0; g < n / 8; g++)
        for (int b = 0; b < nb; b++) {
            quant_q6_Kx8 *o = d + (size_t)g * nb + b;
            for (int r = 0; r < 8; r++) {
                const block_q6_K *x = s + (size_t)(8 * g + r) * nb + b;
                o->d[r] = x->d;
                for (int j = 0; j < 16; j++) o->sc[j / 2][r][j % 2] = x->scales[j];
                for (int h = 0; h < 2; h++)
                    for (int c = 0; c < 8; c++) {
                        memcpy(o->q[h][c][0][r], x->ql + 64 * h + 4 * c, 4);
                        memcpy(o->q[h][c][1][r], x->ql + 64 * h + 32 + 4 * c, 4);
                        memcpy(o->q[h][c][2][r], x->qh + 32 * h + 4 * c, 4);
                    }
            }
        }
}

static void unpack_q6_Kx8_row(block_q6_K *dst, const void *w, int nb, int j)
{
    const quant_q6_Kx8 *grp = (const quant_q6_Kx8 *)w + (size_t)(j / 8) * nb;
    int r = j % 8;
    for (int b = 0; b < nb; b++) {
        const quant_q6_Kx8 *x = grp + b;
        dst[b].d = x->d[r];
        for (int i = 0; i < 16; i++) dst[b].scales[i] = x->sc[i / 2][r][i % 2];
        for (int h = 0; h < 2; h++)
            for (int c = 0; c < 8; c++) {
                memcpy(dst[b].ql + 64 * h + 4 * c, x->q[h][c][0][r], 4);
                memcpy(dst[b].ql + 64 * h + 32 + 4 * c, x->q[h][c][1][r], 4);
                memcpy(dst[b].qh + 32 * h + 4 * c, x->q[h][c][2][r], 4);
            }
    }
}

void quant_repack_q5_Kx8(void *dst, const void *src, int n, int nb)
{
    const block_q5_K *s = src;
    quant_q5_Kx8 *d = dst;
    for (int g = 0; g < n / 8; g++)
        for (int b = 0; b < nb; b++) {
            quant_q5_Kx8 *o = d + (size_t)g * nb + b;
            for (int r = 0; r < 8; r++) {
                const block_q5_K *x = s + (size_t)(8 * g + r) * nb + b;
                o->d[r] = x->d;
                o->dmin[r] = x->dmin;
                kx8_put_scales(o->sc, o->mn, r, x->scales);
                for (int c = 0; c < 8; c++) memcpy(o->qh[c][r], x->qh + 4 * c, 4);
                for (int j = 0; j < 4; j++)
                    for (int c = 0; c < 8; c++) memcpy(o->qs[j][c][r], x->qs + 32 * j + 4 * c, 4);
            }
        }
}

static void unpack_q5_Kx8_row(block_q5_K *dst, const void *w, int nb, int j)
{
    const quant_q5_Kx8 *grp = (const quant_q5_Kx8 *)w + (size_t)(j / 8) * nb;
    int r = j % 8;
    for (int b = 0; b < nb; b++) {
        const quant_q5_Kx8 *x = grp + b;
        dst[b].d = x->d[r];
        dst[b].dmin = x->dmin[r];
        kx8_get_scales(dst[b].scales, x->sc, x->mn, r);
        for (int c = 0; c < 8; c++) memcpy(dst[b].qh + 4 * c, x->qh[c][r], 4);
        for (int q = 0; q < 4; q++)
            for (int c = 0; c < 8; c++) memcpy(dst[b].qs + 32 * q + 4 * c, x->qs[q][c][r], 4);
    }
}

int quant_x8_layout(kern_type t, int n, kern_isa isa)
{
    if (n % 8 || isa == KERN_ISA_SCALAR) return 0;
    switch (t) {
    case KERN_TYPE_Q4_0: return QUANT_LAYOUT_Q4_0X8;
    case KERN_TYPE_Q4_K: return QUANT_LAYOUT_Q4_KX8;
    case KERN_TYPE_Q5_K: return QUANT_LAYOUT_Q5_KX8;
    case KERN_TYPE_Q6_K: return QUANT_LAYOUT_Q6_KX8;
    case KERN_TYPE_Q8_0: return QUANT_LAYOUT_Q8_0X8;
    default: return 0;
    }
}

/* the plain type, the group struct's size and the values per block of a layout */
static void x8_info(int layout, kern_type *t, size_t *gbytes, int *bs)
{
    switch (layout) {
    case QUANT_LAYOUT_Q4_0X8: *t = KERN_TYPE_Q4_0, *gbytes = sizeof(quant_q4_0x8), *bs = QK4_0; break;
    case QUANT_LAYOUT_Q4_KX8: *t = KERN_TYPE_Q4_K, *gbytes = sizeof(quant_q4_Kx8), *bs = QK_K; break;
    case QUANT_LAYOUT_Q5_KX8: *t = KERN_TYPE_Q5_K, *gbytes = sizeof(quant_q5_Kx8), *bs = QK_K; break;
    case QUANT_LAYOUT_Q6_KX8: *t = KERN_TYPE_Q6_K, *gbytes = sizeof(quant_q6_Kx8), *bs = QK_K; break;
    default: *t = KERN_TYPE_Q8_0, *gbytes = sizeof(quant_q8_0x8), *bs = QK8_0; break;
    }
}

size_t quant_x8_bytes(int layout, int n, int k)
{
    kern_type t;
    size_t gb;
    int bs;
    x8_info(layout, &t, &gb, &bs);
    return (size_t)(n / 8) * (size_t)(k / bs) * gb;
}

typedef struct {
    int layout, nb;
    size_t gbytes, rbytes; /* group struct bytes; plain bytes of one row */
    char *dst;
    const char *src;
    int g0, g1;
} x8_job;

static void *x8_thread(void *arg)
{
    const x8_job *J = arg;
    char *d = J->dst + (size_t)J->g0 * J->nb * J->gbytes;
    const char *s = J->src + (size_t)J->g0 * 8 * J->rbytes;
    int n = 8 * (J->g1 - J->g0);
    switch (J->layout) {
    case QUANT_LAYOUT_Q4_0X8: quant_repack_q4_0x8(d, s, n, J->nb); break;
    case QUANT_LAYOUT_Q4_KX8: quant_repack_q4_Kx8(d, s, n, J->nb); break;
    case QUANT_LAYOUT_Q5_KX8: quant_repack_q5_Kx8(d, s, n, J->nb); break;
    case QUANT_LAYOUT_Q6_KX8: quant_repack_q6_Kx8(d, s, n, J->nb); break;
    default: quant_repack_q8_0x8(d, s, n, J->nb); break;
    }
    return NULL;
}

#define X8_MAX_THREADS 64
#define X8_PAR_MIN_BYTES ((size_t)1 << 20) /* smaller weights: one thread */

void quant_repack_x8(int layout, void *dst, const void *src, int n, int k, int nth)
{
    kern_type t;
    x8_job J = {.layout = layout, .dst = dst, .src = src};
    int bs;
    x8_info(layout, &t, &J.gbytes, &bs);
    J.nb = k / bs;
    J.rbytes = kern_type_row_bytes(t, k);
    const int ng = n / 8;
    if (nth > X8_MAX_THREADS) nth = X8_MAX_THREADS;
    if (nth > ng) nth = ng;
    if (nth < 1 || J.rbytes * (size_t)n < X8_PAR_MIN_BYTES) nth = 1;
    x8_job jobs[X8_MAX_THREADS];
    pthread_t th[X8_MAX_THREADS];
    int started[X8_MAX_THREADS] = {0};
    for (int i = 0; i < nth; i++) {
        jobs[i] = J;
        jobs[i].g0 = (int)((int64_t)ng * i / nth);
        jobs[i].g1 = (int)((int64_t)ng * (i + 1) / nth);
    }
    for (int i = 1; i < nth; i++) started[i] = pthread_create(&th[i], NULL, x8_thread, &jobs[i]) == 0;
    x8_thread(&jobs[0]);
    for (int i = 1; i < nth; i++) {
        if (started[i]) pthread_join(th[i], NULL);
        else x8_thread(&jobs[i]);
    }
}

/* The repacked products (see quant_dot.h); threads split groups of 8 rows. */
#define X16_MIN_R 4 /* activation rows from which the two-group zmm kernels run (not decode) */

/* The VNNI kernels of the repacked layouts: the activation rows of a chunk,
 * then (Q4_0, Q8_0) each block's code sum times -8 / -128 as the int32
 * start of its accumulators, then the blocks of gb groups. */
static void matmul_x8_avx512(float *y, const float *x, int m, const kern_mat *w, kern_type t, int nb,
                             int g0, int g1, int gb, char *a)
{
    const int n = w->n, k = w->k, is_k = t == KERN_TYPE_Q4_K, is_6 = t == KERN_TYPE_Q6_K;
    const size_t arb = kern_type_row_bytes(is_k || is_6 ? KERN_TYPE_Q8_K : KERN_TYPE_Q8_0, k);
    const quant_ops *op = quant_ops_for(t, KERN_ISA_AVX512);
    const int mul = t == KERN_TYPE_Q4_0 ? -8 : -128;
    for (int c0 = 0; c0 < m; c0 += QCHUNK) {
        const int mc = m - c0 < QCHUNK ? m - c0 : QCHUNK;
        int32_t *off = (int32_t *)(a + (size_t)mc * arb + 64 - (((uintptr_t)(a + (size_t)mc * arb)) & 63));
        for (int r = 0; r < mc; r++) {
            op->act(a + (size_t)r * arb, x + (size_t)(c0 + r) * k, k);
            if (is_k) continue;
            if (is_6) { /* -32 x the sums of 16 */
                const block_q8_K *ab = (const block_q8_K *)(a + (size_t)r * arb);
                for (int b = 0; b < nb; b++)
                    for (int i = 0; i < 16; i++) off[((size_t)r * nb + b) * 16 + i] = -32 * ab[b].bsums[i];
                continue;
            }
            const block_q8_0 *ab = (const block_q8_0 *)(a + (size_t)r * arb);
            for (int b = 0; b < nb; b++) {
                int sum = 0;
                for (int i = 0; i < QK8_0; i++) sum += ab[b].qs[i];
                off[(size_t)r * nb + b] = mul * sum;
            }
        }
        for (int gg = g0; gg < g1; gg += gb) {
            int ge = gg + gb < g1 ? gg + gb : g1;
            const int rmax = QUANT_X8_MAX_R512;
            for (int r0 = 0; r0 < mc; r0 += rmax) {
                int R = mc - r0 < rmax ? mc - r0 : rmax;
                const char *ar = a + (size_t)r0 * arb;
                float *yr = y + (size_t)(c0 + r0) * n;
                const int32_t *o = off + (size_t)r0 * nb * (is_6 ? 16 : 1);
                if (is_6) { /* pairs in zmm, the rest on the AVX2 kernel (R <= 4) */
                    int gp = R >= X16_MIN_R ? gg + ((ge - gg) & ~1) : gg;
                    if (gp > gg) quant_q6_Kx16_avx512(w->data, nb, gg, gp, ar, arb, o, R, yr, (size_t)n);
                    for (int q0 = 0; q0 < R && gp < ge; q0 += QUANT_MAX_R)
                        quant_q6_Kx8_avx2(w->data, nb, gp, ge, ar + (size_t)q0 * arb, arb,
                                          R - q0 < QUANT_MAX_R ? R - q0 : QUANT_MAX_R, yr + (size_t)q0 * n, (size_t)n);
                    continue;
                }
                /* pairs of groups in zmm for the GEMM (R >= X16_MIN_R), the odd one left in ymm */
                int gp = quant_x16_on && R >= X16_MIN_R ? gg + ((ge - gg) & ~1) : gg;
                if (gp > gg) {
                    if (is_k) quant_q4_Kx16_avx512(w->data, nb, gg, gp, ar, arb, R, yr, (size_t)n);
                    else if (t == KERN_TYPE_Q8_0) quant_q8_0x16_avx512(w->data, nb, gg, gp, ar, arb, o, R, yr, (size_t)n);
                    else quant_q4_0x16_avx512(w->data, nb, gg, gp, ar, arb, o, R, yr, (size_t)n);
                }
                if (gp == ge) continue;
                if (is_k) quant_q4_Kx8_avx512(w->data, nb, gp, ge, ar, arb, R, yr, (size_t)n);
                else if (t == KERN_TYPE_Q8_0) quant_q8_0x8_avx512(w->data, nb, gp, ge, ar, arb, o, R, yr, (size_t)n);
                else quant_q4_0x8_avx512(w->data, nb, gp, ge, ar, arb, o, R, yr, (size_t)n);
            }
        }
    }
}

/* The repacked Q4_0 / Q4_K products (see quant_dot.h); threads split
 * groups of 8 rows. */
static void matmul_x8(float *y, const float *x, int m, const kern_mat *w, int ith, int nth, char *a,
                      kern_isa isa)
{
    const int is_k = w->layout == QUANT_LAYOUT_Q4_KX8, is_8 = w->layout == QUANT_LAYOUT_Q8_0X8,
              is_6 = w->layout == QUANT_LAYOUT_Q6_KX8, is_5 = w->layout == QUANT_LAYOUT_Q5_KX8;
    const kern_type t = is_k ? KERN_TYPE_Q4_K : is_8 ? KERN_TYPE_Q8_0 : is_6 ? KERN_TYPE_Q6_K
                      : is_5 ? KERN_TYPE_Q5_K : KERN_TYPE_Q4_0;
    const int n = w->n, k = w->k, nb = k / kern_type_get(t)->block_size;
    const size_t arb = kern_type_row_bytes(is_k || is_6 || is_5 ? KERN_TYPE_Q8_K : KERN_TYPE_Q8_0, k);
    int g0, g1;
    kern_split(n / 8, ith, nth, &g0, &g1);
    if (g0 >= g1) return;
    if (isa == KERN_ISA_SCALAR) { /* unpack a row at a time, scalar dots */
        const quant_ops *op = quant_ops_scalar(t);
        void *row = a + (size_t)(m < QCHUNK ? m : QCHUNK) * arb;
        for (int c0 = 0; c0 < m; c0 += QCHUNK) {
            const int mc = m - c0 < QCHUNK ? m - c0 : QCHUNK;
            for (int r = 0; r < mc; r++) op->act(a + (size_t)r * arb, x + (size_t)(c0 + r) * k, k);
            for (int j = 8 * g0; j < 8 * g1; j++) {
                if (is_k) unpack_q4_Kx8_row(row, w->data, nb, j);
                else if (is_8) unpack_q8_0x8_row(row, w->data, nb, j);
                else if (is_6) unpack_q6_Kx8_row(row, w->data, nb, j);
                else if (is_5) unpack_q5_Kx8_row(row, w->data, nb, j);
                else unpack_q4_0x8_row(row, w->data, nb, j);
                for (int r0 = 0; r0 < mc; r0 += QUANT_MAX_R) {
                    int R = mc - r0 < QUANT_MAX_R ? mc - r0 : QUANT_MAX_R;
                    op->dot(k, row, a + (size_t)r0 * arb, arb, R, y + (size_t)(c0 + r0) * n + j, (size_t)n);
                }
            }
        }
        return;
    }
    const int gb = 8; /* groups per block of the GEMM (8 x 8 rows x k / 2 bytes) */
    /* Q6_K: VNNI only through the two-group GEMM kernel */
    if (isa == KERN_ISA_AVX512 && quant_avx512_uses(t, 1, m) &&
        (!is_6 || (quant_x16_on && m >= X16_MIN_R))) {
        matmul_x8_avx512(y, x, m, w, t, nb, g0, g1, gb, a);
        return;
    }
    for (int c0 = 0; c0 < m && (is_k || is_8 || is_6 || is_5); c0 += QCHUNK) {
        const int mc = m - c0 < QCHUNK ? m - c0 : QCHUNK;
        const quant_ops *op = quant_ops_for(t, isa);
        for (int r = 0; r < mc; r++) op->act(a + (size_t)r * arb, x + (size_t)(c0 + r) * k, k);
        for (int gg = g0; gg < g1; gg += gb) {
            int ge = gg + gb < g1 ? gg + gb : g1;
            for (int r0 = 0; r0 < mc; r0 += QUANT_MAX_R) {
                int R = mc - r0 < QUANT_MAX_R ? mc - r0 : QUANT_MAX_R;
                (is_k ? quant_q4_Kx8_avx2 : is_6 ? quant_q6_Kx8_avx2 : is_5 ? quant_q5_Kx8_avx2 : quant_q8_0x8_avx2)(
                    w->data, nb, gg, ge, a + (size_t)r0 * arb, arb, R, y + (size_t)(c0 + r0) * n, (size_t)n);
            }
        }
    }
    for (int c0 = 0; c0 < m && !is_k && !is_8 && !is_6 && !is_5; c0 += QCHUNK) {
        const int mc = m - c0 < QCHUNK ? m - c0 : QCHUNK;
        float *aux = (float *)(a + (size_t)mc * arb + 64 - (((uintptr_t)(a + (size_t)mc * arb)) & 63));
        for (int r = 0; r < mc; r++) {
            block_q8_0 *ab = (block_q8_0 *)(a + (size_t)r * arb);
            quant_ops_for(KERN_TYPE_Q4_0, isa)->act(ab, x + (size_t)(c0 + r) * k, k);
            for (int b = 0; b < nb; b++) {
                int sum = 0;
                for (int i = 0; i < QK8_0; i++) sum += ab[b].qs[i];
                float da = h2f(ab[b].d);
                aux[(size_t)r * 2 * nb + 2 * b] = da;
                aux[(size_t)r * 2 * nb + 2 * b + 1] = 8.0f * da * (float)sum;
            }
        }
        for (int gg = g0; gg < g1; gg += gb) {
            int ge = gg + gb < g1 ? gg + gb : g1;
            for (int r0 = 0; r0 < mc; r0 += QUANT_MAX_R) {
                int R = mc - r0 < QUANT_MAX_R ? mc - r0 : QUANT_MAX_R;
                quant_q4_0x8_avx2(w->data, nb, gg, ge, a + (size_t)r0 * arb, arb, aux + (size_t)r0 * 2 * nb, R,
                                  y + (size_t)(c0 + r0) * n, (size_t)n);
            }
        }
    }
}

static void quant_matmul_rows(float *y, const float *x, int m, const kern_mat *w, const quant_ops *op,
                              int lo, int hi, char *a);

void quant_matmul(float *y, const float *x, int m, const kern_mat *w, const float *bias, int ith,
                  int nth, void *scratch, kern_isa isa)
{
    if (w->perm) { /* act-order: x[perm] gathered QCHUNK rows at a time into scratch, then the same product */
        const int k = w->k, n = w->n;
        float *xp = (float *)(((uintptr_t)scratch + 63) & ~(uintptr_t)63);
        void *rest = xp + (size_t)(m < QCHUNK ? m : QCHUNK) * k;
        kern_mat w2 = *w;
        w2.perm = NULL;
        for (int r0 = 0; r0 < m; r0 += QCHUNK) {
            const int mc = m - r0 < QCHUNK ? m - r0 : QCHUNK;
            for (int r = 0; r < mc; r++) {
                const float *xr = x + (size_t)(r0 + r) * k;
                float *d = xp + (size_t)r * k;
                for (int c = 0; c < k; c++) d[c] = xr[w->perm[c]];
            }
            quant_matmul(y + (size_t)r0 * n, xp, mc, &w2, bias, ith, nth, rest, isa);
        }
        return;
    }
    if (w->qtype == KERN_TYPE_F8_B128) { /* weight-only f32 kernels (quant_fp8.c) */
        qf8_matmul(y, x, m, w, bias, ith, nth, scratch, isa);
        return;
    }
    const int n = w->n;
    const quant_ops *op = quant_ops_for_m((kern_type)w->qtype, isa, m);
    char *a = (char *)(((uintptr_t)scratch + 63) & ~(uintptr_t)63);
    int lo, hi;
    if (w->layout == QUANT_LAYOUT_Q4_0X8 || w->layout == QUANT_LAYOUT_Q4_KX8 ||
        w->layout == QUANT_LAYOUT_Q8_0X8 || w->layout == QUANT_LAYOUT_Q6_KX8 || w->layout == QUANT_LAYOUT_Q5_KX8) {
        int g0, g1;
        kern_split(n / 8, ith, nth, &g0, &g1);
        matmul_x8(y, x, m, w, ith, nth, a, isa);
        lo = 8 * g0, hi = 8 * g1;
    } else {
        kern_split(n, ith, nth, &lo, &hi);
        if (lo >= hi || !op) return;
        quant_matmul_rows(y, x, m, w, op, lo, hi, a);
    }
    if (bias)
        for (int r = 0; r < m; r++)
            for (int j = lo; j < hi; j++) y[(size_t)r * n + j] += bias[j];
}

/* The plain layout: rows [lo, hi) of w, one weight row per dot call. */
static void quant_matmul_rows(float *y, const float *x, int m, const kern_mat *w, const quant_ops *op,
                              int lo, int hi, char *a)
{
    const int n = w->n, k = w->k;
    const size_t wrb = kern_type_row_bytes((kern_type)w->qtype, k);
    const size_t arb = kern_type_row_bytes(op->act_type, k);
    const char *wd = w->data;
    int nb = (int)(QBLOCK_BYTES / wrb);
    if (nb < 4) nb = 4;
    for (int c0 = 0; c0 < m; c0 += QCHUNK) {
        const int mc = m - c0 < QCHUNK ? m - c0 : QCHUNK;
        for (int r = 0; r < mc; r++) op->act(a + (size_t)r * arb, x + (size_t)(c0 + r) * k, k);
        float *yc = y + (size_t)c0 * n;
        if (mc == 1) {
            for (int j = lo; j < hi; j++) op->dot(k, wd + (size_t)j * wrb, a, arb, 1, yc + j, 0);
            continue;
        }
        for (int j0 = lo; j0 < hi; j0 += nb) {
            int j1 = j0 + nb < hi ? j0 + nb : hi;
            for (int r0 = 0; r0 < mc; r0 += QUANT_MAX_R) {
                int R = mc - r0 < QUANT_MAX_R ? mc - r0 : QUANT_MAX_R;
                const char *ar = a + (size_t)r0 * arb;
                float *yr = yc + (size_t)r0 * n;
                for (int j = j0; j < j1; j++) op->dot(k, wd + (size_t)j * wrb, ar, arb, R, yr + j, (size_t)n);
            }
        }
    }
}

static void qmm_scalar(float *y, const float *x, int m, const kern_mat *w, const float *bias, int ith,
                       int nth, void *scratch)
{
    quant_matmul(y, x, m, w, bias, ith, nth, scratch, KERN_ISA_SCALAR);
}
static void qmm_avx2(float *y, const float *x, int m, const kern_mat *w, const float *bias, int ith,
                     int nth, void *scratch)
{
    quant_matmul(y, x, m, w, bias, ith, nth, scratch, KERN_ISA_AVX2);
}

static void qmm_avx512(float *y, const float *x, int m, const kern_mat *w, const float *bias, int ith,
                       int nth, void *scratch)
{
    quant_matmul(y, x, m, w, bias, ith, nth, scratch, KERN_ISA_AVX512);
}

kern_matmul_fn quant_matmul_slot(kern_isa isa)
{
    return isa == KERN_ISA_SCALAR ? qmm_scalar : isa == KERN_ISA_AVX512 ? qmm_avx512 : qmm_avx2;
}
