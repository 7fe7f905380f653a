/* quant_dot_avx512 — AVX-512 VNNI int8 dots of the block-quantized weight
 * types (see quant_dot.h for the contract; quant_dot.c's scalar decoder is
 * the reference these are tested against, quant_dot_avx2.c the kernels
 * they replace where they measure faster).
 *
 * DESIGN: the same blocks, activations and loop structure as the AVX2
 * kernels, with the integer products on vpdpbusd (unsigned x signed bytes,
 * four products summed straight into an int32 lane: one instruction for
 * AVX2's vpmaddubsw + vpmaddwd + vpaddd, and no int16 intermediate) and the
 * int16 sub-block scales applied with vpdpwssd (multiply int16 pairs and
 * accumulate in int32).  A dword whose value fits int16 is read by vpdpwssd
 * as the pair (value, sign extension); a scale vector whose dwords are
 * (scale, 0) multiplies the value and drops the extension, so a per-dword
 * scale costs one instruction.  Vectors are 256-bit EVEX (ymm): on Zen 4
 * a zmm op issues as two ymm halves, the plain blocks of 32 values fill a
 * ymm exactly, and ymm keeps vpsignb (the sign trick has no zmm form).
 * Bounds: |a| <= 127 (the activation quantizers), so every int32 sum of
 * <= 256 products of |w| <= 255 fits, and the vpdpwssd operands
 * (4 products of |w| <= 63: 4 * 63 * 127 = 32004) fit int16.
 *
 * The repacked 8-row layouts (quant_dot.h) gain most: a 32-byte chunk is
 * 4 codes of each of 8 rows, one vpdpbusd against 4 broadcast activation
 * bytes adds each row's 4 products into its own lane, and the codes' offsets
 * (-8 for Q4_0, the +128 that makes Q8_0's signed codes unsigned) start the
 * accumulator from the activation block sums the driver precomputes, so a
 * block costs one vpdpbusd per chunk and row and one float FMA per row.
 *
 * Which types use these kernels on an AVX-512 CPU is quant_avx512_uses()
 * (a table checked by bench_quant on the CPUs measured; see qkern.md). */
#include <immintrin.h>
#include <string.h>

#include "kernels/quant_blocks.h"
#include "kernels/quant_dot.h"

#define AI static inline __attribute__((always_inline))

AI float h2f(uint16_t h) { return quant_f16_table[h]; }

AI float hsum8(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

AI int hsumi8(__m256i v)
{
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
    return _mm_cvtsi128_si32(s);
}

/* acc + unsigned u x signed s, 4 products per int32 lane */
AI __m256i dpbu(__m256i acc, __m256i u, __m256i s) { return _mm256_dpbusd_epi32(acc, u, s); }
/* acc + p * scale per dword, where p's dwords fit int16 and sc = (scale, 0) dwords */
AI __m256i dpsc(__m256i acc, __m256i p, __m256i sc) { return _mm256_dpwssd_epi32(acc, p, sc); }

/* 16 bytes of nibbles -> 32 bytes: low nibbles (values 0..15), then high ones (16..31) */
AI __m256i nibbles32(const uint8_t *p)
{
    __m128i t = _mm_loadu_si128((const __m128i *)p);
    __m256i b = _mm256_set_m128i(_mm_srli_epi16(t, 4), t);
    return _mm256_and_si256(b, _mm256_set1_epi8(0x0F));
}

/* 32 bits -> a byte mask: bit i set -> byte i = 0xFF */
AI __m256i bits32(const uint8_t *p)
{
    uint32_t x;
    memcpy(&x, p, 4);
    return _mm256_movm_epi8(x);
}

AI __m256i bcast32(const void *p)
{
    int32_t v;
    memcpy(&v, p, 4);
    return _mm256_set1_epi32(v);
}

#define ACT(r) ((const char *)a + (size_t)(r) * as)
#define STORE_ACC                                                          \
    for (int r = 0; r < R; r++) out[(size_t)r * os] = hsum8(acc[r]);

/* ---- 32-value block types on Q8_0 / Q8_1 ------------------------------- */

/* a signed weight block qx (32 int8, scale dw) against Q8_0 rows */
AI void blk_signed(__m256i qx, float dw, int b, const void *a, size_t as, const int R, __m256 *acc)
{
    const __m256i ax = _mm256_abs_epi8(qx);
    const __m256 vdw = _mm256_set1_ps(dw);
    for (int r = 0; r < R; r++) {
        const block_q8_0 *y = (const block_q8_0 *)ACT(r) + b;
        __m256i s = dpbu(_mm256_setzero_si256(), ax, _mm256_sign_epi8(_mm256_loadu_si256((const __m256i *)y->qs), qx));
        __m256 sc = _mm256_mul_ps(vdw, _mm256_broadcast_ss(&quant_f16_table[y->d]));
        acc[r] = _mm256_fmadd_ps(sc, _mm256_cvtepi32_ps(s), acc[r]);
    }
}

AI void blk_q8_0(const void *w, int b, const void *a, size_t as, const int R, __m256 *acc)
{
    const block_q8_0 *x = (const block_q8_0 *)w + b;
    blk_signed(_mm256_loadu_si256((const __m256i *)x->qs), h2f(x->d), b, a, as, R, acc);
}

AI void blk_q4_0(const void *w, int b, const void *a, size_t as, const int R, __m256 *acc)
{
    const block_q4_0 *x = (const block_q4_0 *)w + b;
    blk_signed(_mm256_sub_epi8(nibbles32(x->qs), _mm256_set1_epi8(8)), h2f(x->d), b, a, as, R, acc);
}

AI void blk_q5_0(const void *w, int b, const void *a, size_t as, const int R, __m256 *acc)
{
    const block_q5_0 *x = (const block_q5_0 *)w + b;
    /* a clear fifth bit means value - 16: or 0xF0 into the nibble */
    __m256i hi = _mm256_andnot_si256(bits32(x->qh), _mm256_set1_epi8((char)0xF0));
    blk_signed(_mm256_or_si256(nibbles32(x->qs), hi), h2f(x->d), b, a, as, R, acc);
}

AI void blk_iq4_nl(const void *w, int b, const void *a, size_t as, const int R, __m256 *acc)
{
    const block_iq4_nl *x = (const block_iq4_nl *)w + b;
    const __m256i tab = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)quant_iq4nl_values));
    blk_signed(_mm256_shuffle_epi8(tab, nibbles32(x->qs)), h2f(x->d), b, a, as, R, acc);
}

/* Q4_1 / Q5_1: w = d q + m with unsigned q; y = d da sum(q qa) + m da sum(qa) */
AI void blk_unsigned(__m256i qx, float dw, float mw, int b, const void *a, size_t as, const int R, __m256 *acc)
{
    const __m256i one8 = _mm256_set1_epi8(1), z = _mm256_setzero_si256();
    for (int r = 0; r < R; r++) {
        const block_q8_1 *y = (const block_q8_1 *)ACT(r) + b;
        __m256i qy = _mm256_loadu_si256((const __m256i *)y->qs);
        float da = h2f(y->d);
        acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(dw * da), _mm256_cvtepi32_ps(dpbu(z, qx, qy)), acc[r]);
        acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(mw * da), _mm256_cvtepi32_ps(dpbu(z, one8, qy)), acc[r]);
    }
}

AI void blk_q4_1(const void *w, int b, const void *a, size_t as, const int R, __m256 *acc)
{
    const block_q4_1 *x = (const block_q4_1 *)w + b;
    blk_unsigned(nibbles32(x->qs), h2f(x->d), h2f(x->m), b, a, as, R, acc);
}

AI void blk_q5_1(const void *w, int b, const void *a, size_t as, const int R, __m256 *acc)
{
    const block_q5_1 *x = (const block_q5_1 *)w + b;
    __m256i qx = _mm256_or_si256(nibbles32(x->qs), _mm256_and_si256(bits32(x->qh), _mm256_set1_epi8(0x10)));
    blk_unsigned(qx, h2f(x->d), h2f(x->m), b, a, as, R, acc);
}

/* two blocks per step into separate accumulators with one or two rows */
#define BODY32(T)                                                                                   \
    AI void body_##T(int k, const void *w, const void *a, size_t as, const int R, float *out,       \
                     size_t os)                                                                     \
    {                                                                                               \
        __m256 acc[QUANT_MAX_R], acc2[QUANT_MAX_R];                                                 \
        for (int r = 0; r < R; r++) acc[r] = acc2[r] = _mm256_setzero_ps();                         \
        int nb = k / 32, b = 0;                                                                     \
        if (R <= 2)                                                                                 \
            for (; b + 1 < nb; b += 2) {                                                            \
                blk_##T(w, b, a, as, R, acc);                                                       \
                blk_##T(w, b + 1, a, as, R, acc2);                                                  \
            }                                                                                       \
        for (; b < nb; b++) blk_##T(w, b, a, as, R, acc);                                           \
        for (int r = 0; r < R; r++) out[(size_t)r * os] = hsum8(_mm256_add_ps(acc[r], acc2[r]));    \
    }
BODY32(q8_0)
BODY32(q4_0)
BODY32(q5_0)
BODY32(iq4_nl)
BODY32(q4_1)
BODY32(q5_1)

/* ---- K-quants on Q8_K -------------------------------------------------- */

/* Q4_K's 12 scale bytes -> sc[0..7] scales, sc[8..15] mins (6 bits each) */
AI void k4_scales(const uint8_t *s12, uint8_t *sc)
{
    uint32_t u[4];
    memcpy(u, s12, 12);
    const uint32_t m1 = 0x3f3f3f3f, m2 = 0x0f0f0f0f, m3 = 0x03030303;
    u[3] = ((u[2] >> 4) & m2) | (((u[1] >> 6) & m3) << 4);
    uint32_t mins_lo = u[1] & m1;
    u[1] = (u[2] & m2) | (((u[0] >> 6) & m3) << 4);
    u[2] = mins_lo;
    u[0] &= m1;
    memcpy(sc, u, 16);
}

/* sum over the 8 sub-blocks of 32 of min[j] * (activation sum of sub-block j) */
AI int k4_min_dot(__m128i mins16, const block_q8_K *y)
{
    __m256i bs = _mm256_loadu_si256((const __m256i *)y->bsums);
    __m128i s = _mm_hadd_epi16(_mm256_castsi256_si128(bs), _mm256_extracti128_si256(bs, 1));
    __m128i p = _mm_madd_epi16(mins16, s);
    p = _mm_add_epi32(p, _mm_shuffle_epi32(p, 0x4E));
    p = _mm_add_epi32(p, _mm_shuffle_epi32(p, 0xB1));
    return _mm_cvtsi128_si32(p);
}

/* Q4_K / Q5_K: a sub-block of 32 is one vpdpbusd (dwords <= 4 * 31 * 127,
 * int16), its 6-bit scale one vpdpwssd */
AI void body_q45_K(int k, const void *w, const void *a, size_t as, const int R, float *out, size_t os,
                   const int five)
{
    __m256 acc[QUANT_MAX_R];
    float macc[QUANT_MAX_R];
    for (int r = 0; r < R; r++) acc[r] = _mm256_setzero_ps(), macc[r] = 0.0f;
    const __m256i m4 = _mm256_set1_epi8(0x0F), one = _mm256_set1_epi8(1), z = _mm256_setzero_si256();
    for (int b = 0; b < k / QK_K; b++) {
        const uint8_t *qs, *s12, *qh = NULL;
        float d, dmin;
        if (five) {
            const block_q5_K *x = (const block_q5_K *)w + b;
            qs = x->qs, s12 = x->scales, qh = x->qh, d = h2f(x->d), dmin = h2f(x->dmin);
        } else {
            const block_q4_K *x = (const block_q4_K *)w + b;
            qs = x->qs, s12 = x->scales, d = h2f(x->d), dmin = h2f(x->dmin);
        }
        uint8_t sc[16];
        k4_scales(s12, sc);
        __m128i sc8 = _mm_loadu_si128((const __m128i *)sc);
        __m128i mins16 = _mm_cvtepu8_epi16(_mm_srli_si128(sc8, 8));
        const __m256i scd = _mm256_cvtepu8_epi32(sc8); /* the 8 scales as dwords */
        __m256i hb = five ? _mm256_loadu_si256((const __m256i *)qh) : _mm256_setzero_si256();
        __m256i sumi[QUANT_MAX_R], sum2[QUANT_MAX_R]; /* two chains: vpdpwssd's latency */
        for (int r = 0; r < R; r++) sumi[r] = sum2[r] = _mm256_setzero_si256();
        for (int j = 0; j < 4; j++) {
            __m256i q = _mm256_loadu_si256((const __m256i *)(qs + 32 * j));
            __m256i ql = _mm256_and_si256(q, m4), qhh = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
            if (five) {
                ql = _mm256_or_si256(ql, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 2 * j), one), 4));
                qhh = _mm256_or_si256(qhh, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 2 * j + 1), one), 4));
            }
            const __m256i s_l = _mm256_permutevar8x32_epi32(scd, _mm256_set1_epi32(2 * j));
            const __m256i s_h = _mm256_permutevar8x32_epi32(scd, _mm256_set1_epi32(2 * j + 1));
            for (int r = 0; r < R; r++) {
                const block_q8_K *y = (const block_q8_K *)ACT(r) + b;
                __m256i yl = _mm256_loadu_si256((const __m256i *)(y->qs + 64 * j));
                __m256i yh = _mm256_loadu_si256((const __m256i *)(y->qs + 64 * j + 32));
                sumi[r] = dpsc(sumi[r], dpbu(z, ql, yl), s_l);
                sum2[r] = dpsc(sum2[r], dpbu(z, qhh, yh), s_h);
            }
        }
        for (int r = 0; r < R; r++) {
            const block_q8_K *y = (const block_q8_K *)ACT(r) + b;
            acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(d * y->d), _mm256_cvtepi32_ps(_mm256_add_epi32(sumi[r], sum2[r])),
                                     acc[r]);
            macc[r] += dmin * y->d * (float)k4_min_dot(mins16, y);
        }
    }
    for (int r = 0; r < R; r++) out[(size_t)r * os] = hsum8(acc[r]) - macc[r];
}
AI void body_q4_K(int k, const void *w, const void *a, size_t as, const int R, float *out, size_t os)
{
    body_q45_K(k, w, a, as, R, out, os, 0);
}
AI void body_q5_K(int k, const void *w, const void *a, size_t as, const int R, float *out, size_t os)
{
    body_q45_K(k, w, a, as, R, out, os, 1);
}

/* 16 int16 scales -> two vectors of (scale, 0) dwords (scales 0..7, 8..15;
 * zero-extended: the high half must stay 0 for a negative scale) */
AI void sc_dwords(__m256i sc16, __m256i *lo, __m256i *hi)
{
    *lo = _mm256_cvtepu16_epi32(_mm256_castsi256_si128(sc16));
    *hi = _mm256_cvtepu16_epi32(_mm256_extracti128_si256(sc16, 1));
}
/* the scale pair (i, i + 1) of 8 dword scales: lanes 0..3 scale i, 4..7 scale i + 1 */
AI __m256i sc_pair(__m256i scd, int i)
{
    return _mm256_permutevar8x32_epi32(scd, _mm256_setr_epi32(i, i, i, i, i + 1, i + 1, i + 1, i + 1));
}

/* Q6_K: q in 0..63, w = d sc (q - 32); the -32 goes through the bsums.
 * 32 codes = two scales of 16: one vpdpbusd (dwords <= 4 * 63 * 127, int16)
 * and one vpdpwssd with the pair */
AI void body_q6_K(int k, const void *w, const void *a, size_t as, const int R, float *out, size_t os)
{
    const block_q6_K *x = w;
    __m256 acc[QUANT_MAX_R];
    for (int r = 0; r < R; r++) acc[r] = _mm256_setzero_ps();
    const __m256i m4 = _mm256_set1_epi8(0x0F), m2 = _mm256_set1_epi8(0x03), m2b = _mm256_set1_epi8(0x0C),
                  m30 = _mm256_set1_epi8(0x30), z = _mm256_setzero_si256();
    for (int b = 0; b < k / QK_K; b++) {
        const block_q6_K *xb = x + b;
        const int8_t *sc = xb->scales;
        __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)sc)), scd[2];
        sc_dwords(sc16, &scd[0], &scd[1]);
        __m256i sumi[QUANT_MAX_R], sum2[QUANT_MAX_R]; /* two chains: vpdpwssd's latency */
        for (int r = 0; r < R; r++) {
            const block_q8_K *y = (const block_q8_K *)ACT(r) + b;
            /* start at -32 * sum_g sc[g] * bsums[g] */
            __m256i off = _mm256_madd_epi16(sc16, _mm256_loadu_si256((const __m256i *)y->bsums));
            sumi[r] = _mm256_sub_epi32(z, _mm256_slli_epi32(off, 5));
            sum2[r] = z;
        }
        for (int hh = 0; hh < 2; hh++) {
            __m256i q4a = _mm256_loadu_si256((const __m256i *)(xb->ql + 64 * hh));
            __m256i q4b = _mm256_loadu_si256((const __m256i *)(xb->ql + 64 * hh + 32));
            __m256i qhv = _mm256_loadu_si256((const __m256i *)(xb->qh + 32 * hh));
            __m256i c[4];
            c[0] = _mm256_or_si256(_mm256_and_si256(q4a, m4), _mm256_slli_epi16(_mm256_and_si256(qhv, m2), 4));
            c[1] = _mm256_or_si256(_mm256_and_si256(q4b, m4), _mm256_slli_epi16(_mm256_and_si256(qhv, m2b), 2));
            c[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q4a, 4), m4), _mm256_and_si256(qhv, m30));
            c[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q4b, 4), m4),
                                   _mm256_and_si256(_mm256_srli_epi16(qhv, 2), m30));
            for (int ci = 0; ci < 4; ci += 2) {
                const __m256i s0 = sc_pair(scd[hh], 2 * ci), s1 = sc_pair(scd[hh], 2 * ci + 2);
                for (int r = 0; r < R; r++) {
                    const block_q8_K *y = (const block_q8_K *)ACT(r) + b;
                    const int8_t *qy = y->qs + 128 * hh + 32 * ci;
                    sumi[r] = dpsc(sumi[r], dpbu(z, c[ci], _mm256_loadu_si256((const __m256i *)qy)), s0);
                    sum2[r] = dpsc(sum2[r], dpbu(z, c[ci + 1], _mm256_loadu_si256((const __m256i *)(qy + 32))), s1);
                }
            }
        }
        float d = h2f(xb->d);
        for (int r = 0; r < R; r++) {
            const block_q8_K *y = (const block_q8_K *)ACT(r) + b;
            acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(d * y->d), _mm256_cvtepi32_ps(_mm256_add_epi32(sumi[r], sum2[r])),
                                     acc[r]);
        }
    }
    STORE_ACC
}

/* Q2_K: q in 0..3, w = d (sc & 15) q - dmin (sc >> 4) per 16 */
AI void body_q2_K(int k, const void *w, const void *a, size_t as, const int R, float *out, size_t os)
{
    const block_q2_K *x = w;
    __m256 acc[QUANT_MAX_R];
    float macc[QUANT_MAX_R];
    for (int r = 0; r < R; r++) acc[r] = _mm256_setzero_ps(), macc[r] = 0.0f;
    const __m256i m3 = _mm256_set1_epi8(3), z = _mm256_setzero_si256();
    for (int b = 0; b < k / QK_K; b++) {
        const block_q2_K *xb = x + b;
        __m128i s8 = _mm_loadu_si128((const __m128i *)xb->scales);
        __m256i mins16 = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(s8, 4), _mm_set1_epi8(0x0F)));
        __m256i scd[2];
        sc_dwords(_mm256_cvtepu8_epi16(_mm_and_si128(s8, _mm_set1_epi8(0x0F))), &scd[0], &scd[1]);
        __m256i sumi[QUANT_MAX_R], sum2[QUANT_MAX_R];
        for (int r = 0; r < R; r++) sumi[r] = sum2[r] = z;
        for (int hh = 0; hh < 2; hh++) {
            __m256i qv = _mm256_loadu_si256((const __m256i *)(xb->qs + 32 * hh));
            for (int j = 0; j < 4; j += 2) {
                __m256i c0 = _mm256_and_si256(_mm256_srli_epi16(qv, 2 * j), m3);
                __m256i c1 = _mm256_and_si256(_mm256_srli_epi16(qv, 2 * j + 2), m3);
                const __m256i s0 = sc_pair(scd[hh], 2 * j), s1 = sc_pair(scd[hh], 2 * j + 2);
                for (int r = 0; r < R; r++) {
                    const block_q8_K *y = (const block_q8_K *)ACT(r) + b;
                    const int8_t *qy = y->qs + 128 * hh + 32 * j;
                    sumi[r] = dpsc(sumi[r], dpbu(z, c0, _mm256_loadu_si256((const __m256i *)qy)), s0);
                    sum2[r] = dpsc(sum2[r], dpbu(z, c1, _mm256_loadu_si256((const __m256i *)(qy + 32))), s1);
                }
            }
        }
        float d = h2f(xb->d), dmin = h2f(xb->dmin);
        for (int r = 0; r < R; r++) {
            const block_q8_K *y = (const block_q8_K *)ACT(r) + b;
            acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(d * y->d), _mm256_cvtepi32_ps(_mm256_add_epi32(sumi[r], sum2[r])),
                                     acc[r]);
            __m256i mp = _mm256_madd_epi16(mins16, _mm256_loadu_si256((const __m256i *)y->bsums));
            macc[r] += dmin * y->d * (float)hsumi8(mp);
        }
    }
    for (int r = 0; r < R; r++) out[(size_t)r * os] = hsum8(acc[r]) - macc[r];
}

/* Q3_K: q = (2 low bits) - 4 * (high bit clear); w = d (sc - 32) q per 16.
 * Codes go in unsigned as q + 4 = low bits + 4 * high bit (0..7); the -4
 * goes through the bsums (start at -4 sum_g (sc_g - 32) bsums_g). */
AI void body_q3_K(int k, const void *w, const void *a, size_t as, const int R, float *out, size_t os)
{
    const block_q3_K *x = w;
    __m256 acc[QUANT_MAX_R];
    for (int r = 0; r < R; r++) acc[r] = _mm256_setzero_ps();
    const __m256i m3 = _mm256_set1_epi8(3), four = _mm256_set1_epi8(4), z = _mm256_setzero_si256();
    for (int b = 0; b < k / QK_K; b++) {
        const block_q3_K *xb = x + b;
        const uint8_t *s = xb->scales;
        /* the 16 6-bit scales as 4 dwords (scale j = byte j): low nibbles
         * from bytes 0..7 (j < 8) or their high nibbles (j >= 8), the two
         * high bits from bytes 8..11, bit pair j / 4 */
        uint32_t u0, u1, u2;
        memcpy(&u0, s, 4), memcpy(&u1, s + 4, 4), memcpy(&u2, s + 8, 4);
        const uint32_t m4 = 0x0f0f0f0f, m2 = 0x03030303;
        __m128i sc8 = _mm_setr_epi32((int)((u0 & m4) | ((u2 & m2) << 4)), (int)((u1 & m4) | (((u2 >> 2) & m2) << 4)),
                                     (int)(((u0 >> 4) & m4) | (((u2 >> 4) & m2) << 4)),
                                     (int)(((u1 >> 4) & m4) | (((u2 >> 6) & m2) << 4)));
        __m256i sc16 = _mm256_sub_epi16(_mm256_cvtepu8_epi16(sc8), _mm256_set1_epi16(32)), scd[2];
        sc_dwords(sc16, &scd[0], &scd[1]);
        __m256i hm = _mm256_loadu_si256((const __m256i *)xb->hmask);
        __m256i sumi[QUANT_MAX_R], sum2[QUANT_MAX_R];
        for (int r = 0; r < R; r++) {
            const block_q8_K *y = (const block_q8_K *)ACT(r) + b;
            __m256i off = _mm256_madd_epi16(sc16, _mm256_loadu_si256((const __m256i *)y->bsums));
            sumi[r] = _mm256_sub_epi32(z, _mm256_slli_epi32(off, 2));
            sum2[r] = z;
        }
        for (int hh = 0; hh < 2; hh++) {
            __m256i qv = _mm256_loadu_si256((const __m256i *)(xb->qs + 32 * hh));
            for (int j = 0; j < 4; j++) {
                __m256i lo = _mm256_and_si256(_mm256_srli_epi16(qv, 2 * j), m3);
                /* bit 4 hh + j of each hmask byte, moved to bit 2 */
                __m256i hb = _mm256_srli_epi16(hm, 4 * hh + j);
                __m256i c = _mm256_or_si256(lo, _mm256_and_si256(_mm256_slli_epi16(hb, 2), four));
                const __m256i sv = sc_pair(scd[hh], 2 * j);
                for (int r = 0; r < R; r++) {
                    const block_q8_K *y = (const block_q8_K *)ACT(r) + b;
                    __m256i qy = _mm256_loadu_si256((const __m256i *)(y->qs + 128 * hh + 32 * j));
                    if (j & 1) sum2[r] = dpsc(sum2[r], dpbu(z, c, qy), sv);
                    else sumi[r] = dpsc(sumi[r], dpbu(z, c, qy), sv);
                }
            }
        }
        float d = h2f(xb->d);
        for (int r = 0; r < R; r++) {
            const block_q8_K *y = (const block_q8_K *)ACT(r) + b;
            acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(d * y->d), _mm256_cvtepi32_ps(_mm256_add_epi32(sumi[r], sum2[r])),
                                     acc[r]);
        }
    }
    STORE_ACC
}

/* IQ4_XS: table values, w = d (ls - 32) v per 32; |v| <= 127, so a dword
 * (4 products <= 64516) does not fit int16: the scale is a vpmulld */
AI void body_iq4_xs(int k, const void *w, const void *a, size_t as, const int R, float *out, size_t os)
{
    const block_iq4_xs *x = w;
    const __m256i tab = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)quant_iq4nl_values));
    const __m256i z = _mm256_setzero_si256();
    __m256 acc[QUANT_MAX_R];
    for (int r = 0; r < R; r++) acc[r] = _mm256_setzero_ps();
    for (int b = 0; b < k / QK_K; b++) {
        const block_iq4_xs *xb = x + b;
        __m256i sumi[QUANT_MAX_R];
        for (int r = 0; r < R; r++) sumi[r] = z;
        for (int ib = 0; ib < 8; ib++) {
            int ls = ((xb->scales_l[ib / 2] >> (4 * (ib % 2))) & 0xF) | (((xb->scales_h >> (2 * ib)) & 3) << 4);
            __m256i qx = _mm256_shuffle_epi8(tab, nibbles32(xb->qs + 16 * ib));
            __m256i ax = _mm256_abs_epi8(qx);
            __m256i sv = _mm256_set1_epi32(ls - 32);
            for (int r = 0; r < R; r++) {
                const block_q8_K *y = (const block_q8_K *)ACT(r) + b;
                __m256i qy = _mm256_loadu_si256((const __m256i *)(y->qs + 32 * ib));
                __m256i p = dpbu(z, ax, _mm256_sign_epi8(qy, qx));
                sumi[r] = _mm256_add_epi32(sumi[r], _mm256_mullo_epi32(p, sv));
            }
        }
        float d = h2f(xb->d);
        for (int r = 0; r < R; r++) {
            const block_q8_K *y = (const block_q8_K *)ACT(r) + b;
            acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(d * y->d), _mm256_cvtepi32_ps(sumi[r]), acc[r]);
        }
    }
    STORE_ACC
}

/* ---- repacked 8-row layouts (quant_dot.h) ------------------------------ */

/* Q4_0 / Q8_0 x8 take up to Q512_XR activation rows (EVEX has 32 ymm) */
#define Q512_XR QUANT_X8_MAX_R512

/* Q4_0 x8: off[r * nb + b] = -8 * (activation block b's code sum) */
AI void body_q4_0x8(const void *w, int nb, int g0, int g1, const void *a, size_t as, const int32_t *off,
                    const int R, float *y, size_t ys)
{
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    for (int g = g0; g < g1; g++) {
        const quant_q4_0x8 *grp = (const quant_q4_0x8 *)w + (size_t)g * nb;
        __m256 acc[Q512_XR];
        for (int r = 0; r < R; r++) acc[r] = _mm256_setzero_ps();
        for (int b = 0; b < nb; b++) {
            const quant_q4_0x8 *x = grp + b;
            __m256 dv = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)x->d));
            /* two chains per row (the low and the high nibbles: vpdpbusd's
             * latency), a chunk unpacked at a time: 2 x 8 + 8 + 3 registers at R = 8 */
            __m256i s0[Q512_XR], s1[Q512_XR];
            for (int r = 0; r < R; r++) s0[r] = _mm256_set1_epi32(off[(size_t)r * nb + b]), s1[r] = _mm256_setzero_si256();
            for (int c = 0; c < 4; c++) {
                __m256i v = _mm256_loadu_si256((const __m256i *)x->qs[c]);
                __m256i lo = _mm256_and_si256(v, m4), hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
                for (int r = 0; r < R; r++) {
                    const int8_t *q = ((const block_q8_0 *)ACT(r) + b)->qs;
                    s0[r] = dpbu(s0[r], lo, bcast32(q + 4 * c));
                    s1[r] = dpbu(s1[r], hi, bcast32(q + 16 + 4 * c));
                }
            }
            for (int r = 0; r < R; r++) {
                const block_q8_0 *yb = (const block_q8_0 *)ACT(r) + b;
                __m256 f = _mm256_cvtepi32_ps(_mm256_add_epi32(s0[r], s1[r]));
                acc[r] = _mm256_fmadd_ps(_mm256_mul_ps(dv, _mm256_broadcast_ss(&quant_f16_table[yb->d])), f, acc[r]);
            }
        }
        for (int r = 0; r < R; r++) _mm256_storeu_ps(y + (size_t)r * ys + 8 * (size_t)g, acc[r]);
    }
}

void quant_q4_0x8_avx512(const void *w, int nb, int g0, int g1, const void *a, size_t as, const int32_t *off,
                         int R, float *y, size_t ys)
{
    switch (R) {
#define C(n) case n: body_q4_0x8(w, nb, g0, g1, a, as, off, n, y, ys); break;
        C(1) C(2) C(3) C(4) C(5) C(6) C(7)
#undef C
    default: body_q4_0x8(w, nb, g0, g1, a, as, off, Q512_XR, y, ys); break;
    }
}

/* Q8_0 x8: codes + 128 (xor 0x80) go in unsigned; off[r * nb + b] =
 * -128 * (activation block b's code sum) */
AI void body_q8_0x8(const void *w, int nb, int g0, int g1, const void *a, size_t as, const int32_t *off,
                    const int R, float *y, size_t ys)
{
    const __m256i flip = _mm256_set1_epi8((char)0x80);
    for (int g = g0; g < g1; g++) {
        const quant_q8_0x8 *grp = (const quant_q8_0x8 *)w + (size_t)g * nb;
        __m256 acc[Q512_XR];
        for (int r = 0; r < R; r++) acc[r] = _mm256_setzero_ps();
        for (int b = 0; b < nb; b++) {
            const quant_q8_0x8 *x = grp + b;
            /* two chains per row for R <= 2 (vpdpbusd's latency), one for more
             * (two measured 0.94-0.98x at R = 8) */
            __m256i s0[Q512_XR], s1[Q512_XR];
            for (int r = 0; r < R; r++)
                s0[r] = _mm256_set1_epi32(off[(size_t)r * nb + b]), s1[r] = _mm256_setzero_si256();
            for (int c = 0; c < 8; c += 2) {
                __m256i u0 = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)x->qs[c]), flip);
                __m256i u1 = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)x->qs[c + 1]), flip);
                for (int r = 0; r < R; r++) {
                    const int8_t *q = ((const block_q8_0 *)ACT(r) + b)->qs + 4 * c;
                    s0[r] = dpbu(s0[r], u0, bcast32(q));
                    if (R <= 2) s1[r] = dpbu(s1[r], u1, bcast32(q + 4));
                    else s0[r] = dpbu(s0[r], u1, bcast32(q + 4));
                }
            }
            __m256 dv = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)x->d));
            for (int r = 0; r < R; r++) {
                const block_q8_0 *yb = (const block_q8_0 *)ACT(r) + b;
                __m256 sc = _mm256_mul_ps(dv, _mm256_broadcast_ss(&quant_f16_table[yb->d]));
                acc[r] = _mm256_fmadd_ps(sc, _mm256_cvtepi32_ps(_mm256_add_epi32(s0[r], s1[r])), acc[r]);
            }
        }
        for (int r = 0; r < R; r++) _mm256_storeu_ps(y + (size_t)r * ys + 8 * (size_t)g, acc[r]);
    }
}

void quant_q8_0x8_avx512(const void *w, int nb, int g0, int g1, const void *a, size_t as, const int32_t *off,
                         int R, float *y, size_t ys)
{
    switch (R) {
#define C(n) case n: body_q8_0x8(w, nb, g0, g1, a, as, off, n, y, ys); break;
        C(1) C(2) C(3) C(4) C(5) C(6) C(7)
#undef C
    default: body_q8_0x8(w, nb, g0, g1, a, as, off, Q512_XR, y, ys); break;
    }
}

/* Q4_K x8, R <= 4: both sub-blocks of a chunk at once (each chunk loaded
 * once, two independent chains per row).  A row's sub-block sum is one
 * int32 lane after 8 vpdpbusd (<= 32 * 15 * 127, past int16), so its scale
 * is a vpmulld. */
AI void body_q4_Kx8_pairs(const void *w, int nb, int g0, int g1, const void *a, size_t as, const int R,
                    float *y, size_t ys)
{
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    for (int g = g0; g < g1; g++) {
        const quant_q4_Kx8 *grp = (const quant_q4_Kx8 *)w + (size_t)g * nb;
        __m256 acc[QUANT_MAX_R];
        for (int r = 0; r < R; r++) acc[r] = _mm256_setzero_ps();
        for (int b = 0; b < nb; b++) {
            const quant_q4_Kx8 *x = grp + b;
            __m256i sumi[QUANT_MAX_R];
            for (int r = 0; r < R; r++) sumi[r] = _mm256_setzero_si256();
            for (int j = 0; j < 4; j++) {
                __m256i slo[QUANT_MAX_R], shi[QUANT_MAX_R];
                for (int r = 0; r < R; r++) slo[r] = shi[r] = _mm256_setzero_si256();
                for (int c = 0; c < 8; c++) {
                    __m256i v = _mm256_loadu_si256((const __m256i *)x->qs[j][c]);
                    __m256i lo = _mm256_and_si256(v, m4), hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
                    for (int r = 0; r < R; r++) {
                        const int8_t *q = ((const block_q8_K *)ACT(r) + b)->qs + 64 * j + 4 * c;
                        /* sub-block 2j: codes 64j + 4c.. ; 2j + 1: 64j + 32 + 4c.. */
                        slo[r] = dpbu(slo[r], lo, bcast32(q));
                        shi[r] = dpbu(shi[r], hi, bcast32(q + 32));
                    }
                }
                __m256i sl = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)x->sc[2 * j]));
                __m256i sh = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)x->sc[2 * j + 1]));
                for (int r = 0; r < R; r++)
                    sumi[r] = _mm256_add_epi32(sumi[r], _mm256_add_epi32(_mm256_mullo_epi32(slo[r], sl),
                                                                         _mm256_mullo_epi32(shi[r], sh)));
            }
            __m256 dv = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)x->d));
            __m256 mv = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)x->dmin));
            for (int r = 0; r < R; r++) {
                const block_q8_K *yb = (const block_q8_K *)ACT(r) + b;
                __m256i bs = _mm256_loadu_si256((const __m256i *)yb->bsums);
                /* sums of the 8 sub-blocks of 32 as int16; dword p = the pair (2p, 2p + 1) */
                __m128i s8 = _mm_hadd_epi16(_mm256_castsi256_si128(bs), _mm256_extracti128_si256(bs, 1));
                int32_t s8v[4];
                _mm_storeu_si128((__m128i *)s8v, s8);
                __m256i ms = _mm256_setzero_si256();
                for (int p = 0; p < 4; p++) {
                    __m256i mn = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)x->mn[p]));
                    ms = dpsc(ms, mn, _mm256_set1_epi32(s8v[p]));
                }
                __m256 da = _mm256_set1_ps(yb->d);
                acc[r] = _mm256_fmadd_ps(_mm256_mul_ps(dv, da), _mm256_cvtepi32_ps(sumi[r]), acc[r]);
                acc[r] = _mm256_fnmadd_ps(_mm256_mul_ps(mv, da), _mm256_cvtepi32_ps(ms), acc[r]);
            }
        }
        for (int r = 0; r < R; r++) _mm256_storeu_ps(y + (size_t)r * ys + 8 * (size_t)g, acc[r]);
    }
}

/* Q4_K x8, R > 4: one sub-block at a time (the chunk is loaded again for
 * the high nibbles), so 8 rows fit the 32 registers. */
AI void body_q4_Kx8(const void *w, int nb, int g0, int g1, const void *a, size_t as, const int R,
                    float *y, size_t ys)
{
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    for (int g = g0; g < g1; g++) {
        const quant_q4_Kx8 *grp = (const quant_q4_Kx8 *)w + (size_t)g * nb;
        __m256 acc[Q512_XR];
        for (int r = 0; r < R; r++) acc[r] = _mm256_setzero_ps();
        for (int b = 0; b < nb; b++) {
            const quant_q4_Kx8 *x = grp + b;
            __m256i sumi[Q512_XR];
            for (int r = 0; r < R; r++) sumi[r] = _mm256_setzero_si256();
            for (int sb = 0; sb < 8; sb++) { /* sub-block sb: chunk j = sb / 2, the low or high nibbles */
                const int j = sb / 2, hi = sb % 2;
                __m256i ss[Q512_XR];
                for (int r = 0; r < R; r++) ss[r] = _mm256_setzero_si256();
                for (int c = 0; c < 8; c++) {
                    __m256i v = _mm256_loadu_si256((const __m256i *)x->qs[j][c]);
                    __m256i u = _mm256_and_si256(hi ? _mm256_srli_epi16(v, 4) : v, m4);
                    for (int r = 0; r < R; r++) {
                        /* codes 64j + 32 hi + 4c.. */
                        const int8_t *q = ((const block_q8_K *)ACT(r) + b)->qs + 64 * j + 32 * hi + 4 * c;
                        ss[r] = dpbu(ss[r], u, bcast32(q));
                    }
                }
                __m256i sc = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)x->sc[sb]));
                for (int r = 0; r < R; r++) sumi[r] = _mm256_add_epi32(sumi[r], _mm256_mullo_epi32(ss[r], sc));
            }
            __m256 dv = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)x->d));
            __m256 mv = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)x->dmin));
            for (int r = 0; r < R; r++) {
                const block_q8_K *yb = (const block_q8_K *)ACT(r) + b;
                __m256i bs = _mm256_loadu_si256((const __m256i *)yb->bsums);
                /* sums of the 8 sub-blocks of 32 as int16; dword p = the pair (2p, 2p + 1) */
                __m128i s8 = _mm_hadd_epi16(_mm256_castsi256_si128(bs), _mm256_extracti128_si256(bs, 1));
                int32_t s8v[4];
                _mm_storeu_si128((__m128i *)s8v, s8);
                __m256i ms = _mm256_setzero_si256();
                for (int p = 0; p < 4; p++) {
                    __m256i mn = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)x->mn[p]));
                    ms = dpsc(ms, mn, _mm256_set1_epi32(s8v[p]));
                }
                __m256 da = _mm256_set1_ps(yb->d);
                acc[r] = _mm256_fmadd_ps(_mm256_mul_ps(dv, da), _mm256_cvtepi32_ps(sumi[r]), acc[r]);
                acc[r] = _mm256_fnmadd_ps(_mm256_mul_ps(mv, da), _mm256_cvtepi32_ps(ms), acc[r]);
            }
        }
        for (int r = 0; r < R; r++) _mm256_storeu_ps(y + (size_t)r * ys + 8 * (size_t)g, acc[r]);
    }
}

void quant_q4_Kx8_avx512(const void *w, int nb, int g0, int g1, const void *a, size_t as, int R, float *y,
                         size_t ys)
{
    switch (R) {
#define C(n) case n: body_q4_Kx8(w, nb, g0, g1, a, as, n, y, ys); break;
        C(5) C(6) C(7)
#undef C
    case 1: body_q4_Kx8_pairs(w, nb, g0, g1, a, as, 1, y, ys); break;
    case 2: body_q4_Kx8_pairs(w, nb, g0, g1, a, as, 2, y, ys); break;
    case 3: body_q4_Kx8_pairs(w, nb, g0, g1, a, as, 3, y, ys); break;
    case 4: body_q4_Kx8_pairs(w, nb, g0, g1, a, as, 4, y, ys); break;
    default: body_q4_Kx8(w, nb, g0, g1, a, as, Q512_XR, y, ys); break;
    }
}

/* ---- two 8-row groups at once in zmm (the GEMM micro-kernels) ----------
 * Groups g and g + 1 of an x8 layout are rows 8g .. 8g + 15: a chunk of each
 * (32 bytes) goes into one zmm (vinserti64x4), so one vpdpbusd with a
 * {1to16} broadcast of 4 activation bytes serves 16 weight rows, the 16
 * outputs of an activation row are one contiguous 64-byte store, and the
 * per-block epilogue (convert, scale, FMA) is one zmm op per 16 rows.  Per
 * 4 values and R rows: 2 weight loads + R broadcasts for R zmm vpdpbusd
 * (the ymm kernels above: 1 + R for R ymm ones).  One accumulator chain
 * per activation row (R of them in flight).  [g0, g1) must hold an even
 * number of groups; R <= QUANT_X8_MAX_R512. */

AI __m512i ld2(const void *p0, const void *p1)
{
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)p0)),
                              _mm256_loadu_si256((const __m256i *)p1), 1);
}

AI __m512 ld2_f16(const uint16_t *d0, const uint16_t *d1)
{
    __m256i h = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)d0)),
                                        _mm_loadu_si128((const __m128i *)d1), 1);
    return _mm512_cvtph_ps(h);
}

AI __m512i bcast32z(const void *p)
{
    int32_t v;
    memcpy(&v, p, 4);
    return _mm512_set1_epi32(v);
}

AI void body_q8_0x16(const void *w, int nb, int g0, int g1, const void *a, size_t as, const int32_t *off,
                     const int R, float *y, size_t ys)
{
    const __m512i flip = _mm512_set1_epi8((char)0x80);
    for (int g = g0; g + 1 < g1; g += 2) {
        const quant_q8_0x8 *p0 = (const quant_q8_0x8 *)w + (size_t)g * nb, *p1 = p0 + nb;
        __m512 acc[Q512_XR];
        for (int r = 0; r < R; r++) acc[r] = _mm512_setzero_ps();
        for (int b = 0; b < nb; b++) {
            const quant_q8_0x8 *x0 = p0 + b, *x1 = p1 + b;
            __m512i s[Q512_XR];
            for (int r = 0; r < R; r++) s[r] = _mm512_set1_epi32(off[(size_t)r * nb + b]);
            for (int c = 0; c < 8; c++) {
                __m512i u = _mm512_xor_si512(ld2(x0->qs[c], x1->qs[c]), flip);
                for (int r = 0; r < R; r++)
                    s[r] = _mm512_dpbusd_epi32(s[r], u, bcast32z(((const block_q8_0 *)ACT(r) + b)->qs + 4 * c));
            }
            __m512 dv = ld2_f16(x0->d, x1->d);
            for (int r = 0; r < R; r++) {
                const block_q8_0 *yb = (const block_q8_0 *)ACT(r) + b;
                __m512 sc = _mm512_mul_ps(dv, _mm512_set1_ps(quant_f16_table[yb->d]));
                acc[r] = _mm512_fmadd_ps(sc, _mm512_cvtepi32_ps(s[r]), acc[r]);
            }
        }
        for (int r = 0; r < R; r++) _mm512_storeu_ps(y + (size_t)r * ys + 8 * (size_t)g, acc[r]);
    }
}

AI void body_q4_0x16(const void *w, int nb, int g0, int g1, const void *a, size_t as, const int32_t *off,
                     const int R, float *y, size_t ys)
{
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    for (int g = g0; g + 1 < g1; g += 2) {
        const quant_q4_0x8 *p0 = (const quant_q4_0x8 *)w + (size_t)g * nb, *p1 = p0 + nb;
        __m512 acc[Q512_XR];
        for (int r = 0; r < R; r++) acc[r] = _mm512_setzero_ps();
        for (int b = 0; b < nb; b++) {
            const quant_q4_0x8 *x0 = p0 + b, *x1 = p1 + b;
            __m512i s[Q512_XR];
            for (int r = 0; r < R; r++) s[r] = _mm512_set1_epi32(off[(size_t)r * nb + b]);
            for (int c = 0; c < 4; c++) {
                __m512i v = ld2(x0->qs[c], x1->qs[c]);
                __m512i lo = _mm512_and_si512(v, m4), hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
                for (int r = 0; r < R; r++) {
                    const int8_t *q = ((const block_q8_0 *)ACT(r) + b)->qs;
                    s[r] = _mm512_dpbusd_epi32(s[r], lo, bcast32z(q + 4 * c));
                    s[r] = _mm512_dpbusd_epi32(s[r], hi, bcast32z(q + 16 + 4 * c));
                }
            }
            __m512 dv = ld2_f16(x0->d, x1->d);
            for (int r = 0; r < R; r++) {
                const block_q8_0 *yb = (const block_q8_0 *)ACT(r) + b;
                __m512 sc = _mm512_mul_ps(dv, _mm512_set1_ps(quant_f16_table[yb->d]));
                acc[r] = _mm512_fmadd_ps(sc, _mm512_cvtepi32_ps(s[r]), acc[r]);
            }
        }
        for (int r = 0; r < R; r++) _mm512_storeu_ps(y + (size_t)r * ys + 8 * (size_t)g, acc[r]);
    }
}

/* Q4_K: a sub-block (32 values: 8 chunks of one nibble half) per step,
 * its int32 sums times the 6-bit scales (vpmulld), the mins through the
 * Q8_K bsums as in body_q4_Kx8 */
AI void body_q4_Kx16(const void *w, int nb, int g0, int g1, const void *a, size_t as, const int R, float *y,
                     size_t ys)
{
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    for (int g = g0; g + 1 < g1; g += 2) {
        const quant_q4_Kx8 *p0 = (const quant_q4_Kx8 *)w + (size_t)g * nb, *p1 = p0 + nb;
        __m512 acc[Q512_XR];
        for (int r = 0; r < R; r++) acc[r] = _mm512_setzero_ps();
        for (int b = 0; b < nb; b++) {
            const quant_q4_Kx8 *x0 = p0 + b, *x1 = p1 + b;
            __m512i sumi[Q512_XR];
            for (int r = 0; r < R; r++) sumi[r] = _mm512_setzero_si512();
            for (int sb = 0; sb < 8; sb++) {
                const int j = sb / 2, hi = sb % 2;
                __m512i ss[Q512_XR];
                for (int r = 0; r < R; r++) ss[r] = _mm512_setzero_si512();
                for (int c = 0; c < 8; c++) {
                    __m512i v = ld2(x0->qs[j][c], x1->qs[j][c]);
                    __m512i u = _mm512_and_si512(hi ? _mm512_srli_epi16(v, 4) : v, m4);
                    for (int r = 0; r < R; r++)
                        ss[r] = _mm512_dpbusd_epi32(
                            ss[r], u, bcast32z(((const block_q8_K *)ACT(r) + b)->qs + 64 * j + 32 * hi + 4 * c));
                }
                __m128i sc8 = _mm_unpacklo_epi64(_mm_loadl_epi64((const __m128i *)x0->sc[sb]),
                                                 _mm_loadl_epi64((const __m128i *)x1->sc[sb]));
                __m512i sc = _mm512_cvtepu8_epi32(sc8);
                for (int r = 0; r < R; r++) sumi[r] = _mm512_add_epi32(sumi[r], _mm512_mullo_epi32(ss[r], sc));
            }
            __m512i mn[4];
            for (int p = 0; p < 4; p++)
                mn[p] = _mm512_cvtepu8_epi16(_mm256_inserti128_si256(
                    _mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)x0->mn[p])),
                    _mm_loadu_si128((const __m128i *)x1->mn[p]), 1));
            __m512 dv = ld2_f16(x0->d, x1->d), mv = ld2_f16(x0->dmin, x1->dmin);
            for (int r = 0; r < R; r++) {
                const block_q8_K *yb = (const block_q8_K *)ACT(r) + b;
                __m256i bs = _mm256_loadu_si256((const __m256i *)yb->bsums);
                /* sums of the 8 sub-blocks of 32 as int16; dword p = the pair (2p, 2p + 1) */
                __m128i s8 = _mm_hadd_epi16(_mm256_castsi256_si128(bs), _mm256_extracti128_si256(bs, 1));
                __m512i ms = _mm512_dpwssd_epi32(_mm512_setzero_si512(), mn[0],
                                                 _mm512_set1_epi32(_mm_cvtsi128_si32(s8)));
                ms = _mm512_dpwssd_epi32(ms, mn[1], _mm512_set1_epi32(_mm_extract_epi32(s8, 1)));
                ms = _mm512_dpwssd_epi32(ms, mn[2], _mm512_set1_epi32(_mm_extract_epi32(s8, 2)));
                ms = _mm512_dpwssd_epi32(ms, mn[3], _mm512_set1_epi32(_mm_extract_epi32(s8, 3)));
                __m512 da = _mm512_set1_ps(yb->d);
                acc[r] = _mm512_fmadd_ps(_mm512_mul_ps(dv, da), _mm512_cvtepi32_ps(sumi[r]), acc[r]);
                acc[r] = _mm512_fnmadd_ps(_mm512_mul_ps(mv, da), _mm512_cvtepi32_ps(ms), acc[r]);
            }
        }
        for (int r = 0; r < R; r++) _mm512_storeu_ps(y + (size_t)r * ys + 8 * (size_t)g, acc[r]);
    }
}

void quant_q4_Kx16_avx512(const void *w, int nb, int g0, int g1, const void *a, size_t as, int R, float *y,
                          size_t ys)
{
    switch (R) {
#define C(n) case n: body_q4_Kx16(w, nb, g0, g1, a, as, n, y, ys); break;
        C(1) C(2) C(3) C(4) C(5) C(6) C(7)
#undef C
    default: body_q4_Kx16(w, nb, g0, g1, a, as, Q512_XR, y, ys); break;
    }
}

/* Q6_K: the 6-bit codes of 16 rows rebuilt from the A / B / H planes per
 * chunk (quant_dot.h's bit map); the -32 starts each sub-block's
 * accumulator (off[(r nb + b) 16 + s] = -32 x bsums[s] of the activation
 * row), so a sub-block of 16 values (4 chunks) sums (code - 32) a exactly,
 * |sum| <= 16 x 32 x 127, times its int8 scale with one vpmulld. */
AI void body_q6_Kx16(const void *w, int nb, int g0, int g1, const void *a, size_t as, const int32_t *off,
                     const int R, float *y, size_t ys)
{
    const __m512i m4 = _mm512_set1_epi8(0x0F), m3 = _mm512_set1_epi8(0x03), m30 = _mm512_set1_epi8(0x30);
    for (int g = g0; g + 1 < g1; g += 2) {
        const quant_q6_Kx8 *p0 = (const quant_q6_Kx8 *)w + (size_t)g * nb, *p1 = p0 + nb;
        __m512 acc[Q512_XR];
        for (int r = 0; r < R; r++) acc[r] = _mm512_setzero_ps();
        for (int b = 0; b < nb; b++) {
            const quant_q6_Kx8 *x0 = p0 + b, *x1 = p1 + b;
            __m512i sumi[Q512_XR];
            for (int r = 0; r < R; r++) sumi[r] = _mm512_setzero_si512();
            for (int h = 0; h < 2; h++)
                for (int i = 0; i < 4; i++) {
                    /* the pair 4 h + i of scales: int16 (sc0, sc1) per row -> one int32 per row each */
                    __m512i sp = _mm512_cvtepi8_epi16(_mm256_inserti128_si256(
                        _mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)x0->sc[4 * h + i])),
                        _mm_loadu_si128((const __m128i *)x1->sc[4 * h + i]), 1));
                    const __m512i scw[2] = {_mm512_srai_epi32(_mm512_slli_epi32(sp, 16), 16),
                                            _mm512_srai_epi32(sp, 16)};
                    for (int hc = 0; hc < 2; hc++) {
                        const int sb = 8 * h + 2 * i + hc;
                        __m512i ss[Q512_XR];
                        for (int r = 0; r < R; r++) ss[r] = _mm512_set1_epi32(off[((size_t)r * nb + b) * 16 + sb]);
                        for (int c = 4 * hc; c < 4 * hc + 4; c++) {
                            __m512i L = ld2(x0->q[h][c][i & 1], x1->q[h][c][i & 1]);
                            __m512i H = ld2(x0->q[h][c][2], x1->q[h][c][2]);
                            __m512i lo = _mm512_and_si512(i < 2 ? L : _mm512_srli_epi16(L, 4), m4);
                            __m512i hb = i == 0   ? _mm512_slli_epi16(_mm512_and_si512(H, m3), 4)
                                         : i == 1 ? _mm512_and_si512(_mm512_slli_epi16(H, 2), m30)
                                         : i == 2 ? _mm512_and_si512(H, m30)
                                                  : _mm512_and_si512(_mm512_srli_epi16(H, 2), m30);
                            __m512i v = _mm512_or_si512(lo, hb);
                            for (int r = 0; r < R; r++)
                                ss[r] = _mm512_dpbusd_epi32(
                                    ss[r], v, bcast32z(((const block_q8_K *)ACT(r) + b)->qs + 128 * h + 32 * i + 4 * c));
                        }
                        for (int r = 0; r < R; r++) sumi[r] = _mm512_add_epi32(sumi[r], _mm512_mullo_epi32(ss[r], scw[hc]));
                    }
                }
            __m512 dv = ld2_f16(x0->d, x1->d);
            for (int r = 0; r < R; r++) {
                const block_q8_K *yb = (const block_q8_K *)ACT(r) + b;
                acc[r] = _mm512_fmadd_ps(_mm512_mul_ps(dv, _mm512_set1_ps(yb->d)), _mm512_cvtepi32_ps(sumi[r]), acc[r]);
            }
        }
        for (int r = 0; r < R; r++) _mm512_storeu_ps(y + (size_t)r * ys + 8 * (size_t)g, acc[r]);
    }
}

#define X16_SWITCH(body)                                                                           \
    switch (R) {                                                                                   \
    case 1: body(w, nb, g0, g1, a, as, off, 1, y, ys); break;                                      \
    case 2: body(w, nb, g0, g1, a, as, off, 2, y, ys); break;                                      \
    case 3: body(w, nb, g0, g1, a, as, off, 3, y, ys); break;                                      \
    case 4: body(w, nb, g0, g1, a, as, off, 4, y, ys); break;                                      \
    case 5: body(w, nb, g0, g1, a, as, off, 5, y, ys); break;                                      \
    case 6: body(w, nb, g0, g1, a, as, off, 6, y, ys); break;                                      \
    case 7: body(w, nb, g0, g1, a, as, off, 7, y, ys); break;                                      \
    default: body(w, nb, g0, g1, a, as, off, Q512_XR, y, ys); break;                               \
    }

void quant_q8_0x16_avx512(const void *w, int nb, int g0, int g1, const void *a, size_t as, const int32_t *off,
                          int R, float *y, size_t ys)
{
    X16_SWITCH(body_q8_0x16)
}

void quant_q4_0x16_avx512(const void *w, int nb, int g0, int g1, const void *a, size_t as, const int32_t *off,
                          int R, float *y, size_t ys)
{
    X16_SWITCH(body_q4_0x16)
}

void quant_q6_Kx16_avx512(const void *w, int nb, int g0, int g1, const void *a, size_t as, const int32_t *off,
                          int R, float *y, size_t ys)
{
    X16_SWITCH(body_q6_Kx16)
}

/* ---- the table --------------------------------------------------------- */

/* The activation quantizers are the AVX2 ones (quant_ops_avx2's act: the
 * same bits as the scalar ones); only the dots differ. */
#define AVX512_OPS(T, body)                                                                        \
    static void dot_avx512_##T(int k, const void *w, const void *a, size_t as, int R, float *o,    \
                               size_t os)                                                          \
    {                                                                                              \
        switch (R) {                                                                               \
        case 1: body(k, w, a, as, 1, o, os); break;                                                \
        case 2: body(k, w, a, as, 2, o, os); break;                                                \
        case 3: body(k, w, a, as, 3, o, os); break;                                                \
        default: body(k, w, a, as, 4, o, os); break;                                               \
        }                                                                                          \
    }

AVX512_OPS(Q4_0, body_q4_0)
AVX512_OPS(Q4_1, body_q4_1)
AVX512_OPS(Q5_0, body_q5_0)
AVX512_OPS(Q5_1, body_q5_1)
AVX512_OPS(Q8_0, body_q8_0)
AVX512_OPS(Q2_K, body_q2_K)
AVX512_OPS(Q3_K, body_q3_K)
AVX512_OPS(Q4_K, body_q4_K)
AVX512_OPS(Q5_K, body_q5_K)
AVX512_OPS(Q6_K, body_q6_K)
AVX512_OPS(IQ4_NL, body_iq4_nl)
AVX512_OPS(IQ4_XS, body_iq4_xs)

quant_dot_fn quant_dot_avx512(kern_type t)
{
    switch (t) {
#define C(T) case KERN_TYPE_##T: return dot_avx512_##T;
        C(Q4_0) C(Q4_1) C(Q5_0) C(Q5_1) C(Q8_0) C(Q2_K) C(Q3_K) C(Q4_K) C(Q5_K) C(Q6_K) C(IQ4_NL) C(IQ4_XS)
#undef C
    default: return NULL;
    }
}
