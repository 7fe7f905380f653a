/* quant_dot_avx2 — AVX2 int8 dots of the block-quantized weight types
 * (see quant_dot.h for the contract; quant_dot.c's scalar decoder is the
 * reference these are tested against).
 *
 * DESIGN: the integer products use vpmaddubsw (unsigned x signed bytes ->
 * saturating int16 pair sums) and vpmaddwd (int16 pairs -> int32), as
 * ggml's x86 kernels do.  Weight values that are unsigned after decoding
 * (4/5/6-bit codes of the K-quants, Q4_1, Q5_1) go in as the unsigned
 * operand directly and their offsets are applied through the activation
 * sums (Q8_K's bsums, or a maddubs of the offset for Q3_K); signed ones
 * (Q4_0, Q5_0, Q8_0, IQ4_*) use the sign trick |w| x sign(a, w).  The
 * bounds: |a| <= 127 (quant_dot.h's activation quantizers), so the
 * largest pair sum is 2 * 128 * 127 = 32512 < 32767: no saturation for
 * any type.  Sub-block scales are applied in int32 (vpmaddwd with the
 * scale) and the block scale once per block in f32.
 *
 * Each kernel body takes R activation rows (1..QUANT_MAX_R, a compile-time
 * constant after inlining): the weight block is loaded and unpacked once
 * and meets every row, which is what makes the GEMM compute-bound. */
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

AI __m256i ones16(void) { return _mm256_set1_epi16(1); }

/* signed x signed bytes -> 8 int32 sums of 4 products */
AI __m256i dot_ss(__m256i ax, __m256i x, __m256i y)
{
    return _mm256_madd_epi16(_mm256_maddubs_epi16(ax, _mm256_sign_epi8(y, x)), ones16());
}
/* unsigned x signed bytes -> 8 int32 sums of 4 products */
AI __m256i dot_us(__m256i u, __m256i y) { return _mm256_madd_epi16(_mm256_maddubs_epi16(u, y), ones16()); }

/* 16 bytes of nibbles -> 32 bytes: low nibbles (values 0..15), then high ones (16..31) */
AI __m256i nibbles32(const uint8_t *p)
{
    __m128i t = _mm_loadu_si128((const __m128i *)p);
    __m256i b = _mm256_set_m128i(_mm_srli_epi16(t, 4), t);
    return _mm256_and_si256(b, _mm256_set1_epi8(0x0F));
}

/* 32 bits -> 32 bytes: 0xFF where bit i is set */
AI __m256i bits32(const uint8_t *p)
{
    uint32_t x;
    memcpy(&x, p, 4);
    const __m256i shuf = _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202, 0x0101010101010101, 0);
    __m256i b = _mm256_shuffle_epi8(_mm256_set1_epi32((int)x), shuf);
    b = _mm256_or_si256(b, _mm256_set1_epi64x(0x7fbfdfeff7fbfdfe));
    return _mm256_cmpeq_epi8(b, _mm256_set1_epi64x(-1));
}


/* vpshufb controls over a vector of int16 scales (the same 8 in each
 * 128-bit lane): every int16 lane gets element i, or element i0 in the low
 * lane and i1 in the high one.  Constants, hoisted out of the loops. */
AI short ctl16(int i) { return (short)(((2 * i + 1) << 8) | (2 * i)); }
AI __m256i pick16(__m256i v, int i) { return _mm256_shuffle_epi8(v, _mm256_set1_epi16(ctl16(i))); }
AI __m256i pick16_pair(__m256i v, int i0, int i1)
{
    return _mm256_shuffle_epi8(v, _mm256_set_m128i(_mm_set1_epi16(ctl16(i1)), _mm_set1_epi16(ctl16(i0))));
}
/* 16 int16 scales (lanes 0..15) -> (scales 0..7 in both lanes, 8..15 in both lanes) */
AI void split16(__m256i v, __m256i *lo, __m256i *hi)
{
    *lo = _mm256_permute2x128_si256(v, v, 0x00);
    *hi = _mm256_permute2x128_si256(v, v, 0x11);
}

#define ACT(r) ((const char *)a + (size_t)(r) * as)
#define STORE_ACC                                                          \
    for (int r = 0; r < R; r++) out[(size_t)r * os] = hsum8(acc[r]);

/* ---- 32-value block types on Q8_0 / Q8_1 ------------------------------- */

/* Each blk_* adds weight block b's products with the R activation rows'
 * block b into acc[r]. */

/* a signed weight block qx (32 int8, scale dw) against Q8_0 rows */
AI void blk_signed(__m256i qx, float dw, int b, const void *a, size_t as, const int R, __m256 *acc)
{
    __m256i ax = _mm256_sign_epi8(qx, qx);
    const __m256 vdw = _mm256_set1_ps(dw);
    for (int r = 0; r < R; r++) {
        const block_q8_0 *y = (const block_q8_0 *)ACT(r) + b;
        __m256i s = dot_ss(ax, qx, _mm256_loadu_si256((const __m256i *)y->qs));
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
    const __m256i one8 = _mm256_set1_epi8(1);
    for (int r = 0; r < R; r++) {
        const block_q8_1 *y = (const block_q8_1 *)ACT(r) + b;
        __m256i qy = _mm256_loadu_si256((const __m256i *)y->qs);
        float da = h2f(y->d);
        acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(dw * da), _mm256_cvtepi32_ps(dot_us(qx, qy)), acc[r]);
        acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(mw * da), _mm256_cvtepi32_ps(dot_us(one8, qy)), acc[r]);
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

/* The row loop of a 32-value type: with one or two rows, two blocks per
 * step into separate accumulators (one FMA chain per row would bound
 * decode at the FMA latency, 4 cycles a block). */
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

AI void body_q45_K(int k, const void *w, const void *a, size_t as, const int R, float *out, size_t os,
                   const int five)
{
    __m256 acc[QUANT_MAX_R];
    float macc[QUANT_MAX_R];
    for (int r = 0; r < R; r++) acc[r] = _mm256_setzero_ps(), macc[r] = 0.0f;
    const __m256i m4 = _mm256_set1_epi8(0x0F), one = _mm256_set1_epi8(1);
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
        __m256i s16 = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(sc8));
        __m256i hb = five ? _mm256_loadu_si256((const __m256i *)qh) : _mm256_setzero_si256();
        __m256i sumi[QUANT_MAX_R];
        for (int r = 0; r < R; r++) sumi[r] = _mm256_setzero_si256();
        for (int j = 0; j < 4; j++) {
            __m256i q = _mm256_loadu_si256((const __m256i *)(qs + 32 * j));
            __m256i ql = _mm256_and_si256(q, m4), qhh = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
            if (five) {
                ql = _mm256_or_si256(ql, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 2 * j), one), 4));
                qhh = _mm256_or_si256(qhh, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 2 * j + 1), one), 4));
            }
            __m256i s_l = pick16(s16, 2 * j), s_h = pick16(s16, 2 * j + 1);
            for (int r = 0; r < R; r++) {
                const block_q8_K *y = (const block_q8_K *)ACT(r) + b;
                __m256i yl = _mm256_loadu_si256((const __m256i *)(y->qs + 64 * j));
                __m256i yh = _mm256_loadu_si256((const __m256i *)(y->qs + 64 * j + 32));
                __m256i pl = _mm256_madd_epi16(_mm256_maddubs_epi16(ql, yl), s_l);
                __m256i ph = _mm256_madd_epi16(_mm256_maddubs_epi16(qhh, yh), s_h);
                sumi[r] = _mm256_add_epi32(sumi[r], _mm256_add_epi32(pl, ph));
            }
        }
        for (int r = 0; r < R; r++) {
            const block_q8_K *y = (const block_q8_K *)ACT(r) + b;
            acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(d * y->d), _mm256_cvtepi32_ps(sumi[r]), acc[r]);
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

/* Q6_K: q in 0..63, w = d sc (q - 32); the -32 goes through the bsums */
AI void body_q6_K(int k, const void *w, const void *a, size_t as, const int R, float *out, size_t os)
{
    const block_q6_K *x = w;
    __m256 acc[QUANT_MAX_R];
    for (int r = 0; r < R; r++) acc[r] = _mm256_setzero_ps();
    const __m256i m4 = _mm256_set1_epi8(0x0F), m2 = _mm256_set1_epi8(0x03), m2b = _mm256_set1_epi8(0x0C),
                  m30 = _mm256_set1_epi8(0x30);
    for (int b = 0; b < k / QK_K; b++) {
        const block_q6_K *xb = x + b;
        const int8_t *sc = xb->scales;
        __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)sc)), sh[2];
        split16(sc16, &sh[0], &sh[1]);
        __m256i sumi[QUANT_MAX_R];
        for (int r = 0; r < R; r++) {
            const block_q8_K *y = (const block_q8_K *)ACT(r) + b;
            /* start at -32 * sum_g sc[g] * bsums[g] */
            __m256i off = _mm256_madd_epi16(sc16, _mm256_loadu_si256((const __m256i *)y->bsums));
            sumi[r] = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(off, 5));
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
            for (int ci = 0; ci < 4; ci++) {
                __m256i s = pick16_pair(sh[hh], 2 * ci, 2 * ci + 1);
                for (int r = 0; r < R; r++) {
                    const block_q8_K *y = (const block_q8_K *)ACT(r) + b;
                    __m256i qy = _mm256_loadu_si256((const __m256i *)(y->qs + 128 * hh + 32 * ci));
                    sumi[r] = _mm256_add_epi32(sumi[r], _mm256_madd_epi16(_mm256_maddubs_epi16(c[ci], qy), s));
                }
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

/* Q2_K: q in 0..3, w = d (sc & 15) q - dmin (sc >> 4) per 16 */
AI void body_q2_K(int k, const void *w, const void *a, size_t as, const int R, float *out, size_t os)
{
    const block_q2_K *x = w;
    __m256 acc[QUANT_MAX_R];
    float macc[QUANT_MAX_R];
    for (int r = 0; r < R; r++) acc[r] = _mm256_setzero_ps(), macc[r] = 0.0f;
    const __m256i m3 = _mm256_set1_epi8(3);
    for (int b = 0; b < k / QK_K; b++) {
        const block_q2_K *xb = x + b;
        __m128i s8 = _mm_loadu_si128((const __m128i *)xb->scales);
        __m256i mins16 = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(s8, 4), _mm_set1_epi8(0x0F)));
        __m256i sh[2];
        split16(_mm256_cvtepu8_epi16(_mm_and_si128(s8, _mm_set1_epi8(0x0F))), &sh[0], &sh[1]);
        __m256i sumi[QUANT_MAX_R];
        for (int r = 0; r < R; r++) sumi[r] = _mm256_setzero_si256();
        for (int hh = 0; hh < 2; hh++) {
            __m256i qv = _mm256_loadu_si256((const __m256i *)(xb->qs + 32 * hh));
            for (int j = 0; j < 4; j++) {
                __m256i c = _mm256_and_si256(_mm256_srli_epi16(qv, 2 * j), m3);
                __m256i s = pick16_pair(sh[hh], 2 * j, 2 * j + 1);
                for (int r = 0; r < R; r++) {
                    const block_q8_K *y = (const block_q8_K *)ACT(r) + b;
                    __m256i qy = _mm256_loadu_si256((const __m256i *)(y->qs + 128 * hh + 32 * j));
                    sumi[r] = _mm256_add_epi32(sumi[r], _mm256_madd_epi16(_mm256_maddubs_epi16(c, qy), s));
                }
            }
        }
        float d = h2f(xb->d), dmin = h2f(xb->dmin);
        for (int r = 0; r < R; r++) {
            const block_q8_K *y = (const block_q8_K *)ACT(r) + b;
            acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(d * y->d), _mm256_cvtepi32_ps(sumi[r]), acc[r]);
            __m256i mp = _mm256_madd_epi16(mins16, _mm256_loadu_si256((const __m256i *)y->bsums));
            macc[r] += dmin * y->d * (float)hsumi8(mp);
        }
    }
    for (int r = 0; r < R; r++) out[(size_t)r * os] = hsum8(acc[r]) - macc[r];
}

/* Q3_K: q = (2 low bits) - 4 * (high bit clear); w = d (sc - 32) q per 16 */
AI void body_q3_K(int k, const void *w, const void *a, size_t as, const int R, float *out, size_t os)
{
    const block_q3_K *x = w;
    __m256 acc[QUANT_MAX_R];
    for (int r = 0; r < R; r++) acc[r] = _mm256_setzero_ps();
    const __m256i m3 = _mm256_set1_epi8(3), one = _mm256_set1_epi8(1);
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
        __m256i sh[2];
        split16(_mm256_sub_epi16(_mm256_cvtepu8_epi16(sc8), _mm256_set1_epi16(32)), &sh[0], &sh[1]);
        __m256i hm = _mm256_loadu_si256((const __m256i *)xb->hmask);
        __m256i sumi[QUANT_MAX_R];
        for (int r = 0; r < R; r++) sumi[r] = _mm256_setzero_si256();
        for (int hh = 0; hh < 2; hh++) {
            __m256i qv = _mm256_loadu_si256((const __m256i *)(xb->qs + 32 * hh));
            for (int j = 0; j < 4; j++) {
                __m256i lo = _mm256_and_si256(_mm256_srli_epi16(qv, 2 * j), m3);
                __m256i hbit = _mm256_and_si256(_mm256_srli_epi16(hm, 4 * hh + j), one);
                __m256i neg = _mm256_slli_epi16(_mm256_xor_si256(hbit, one), 2); /* 4 where clear */
                __m256i sv = pick16_pair(sh[hh], 2 * j, 2 * j + 1);
                for (int r = 0; r < R; r++) {
                    const block_q8_K *y = (const block_q8_K *)ACT(r) + b;
                    __m256i qy = _mm256_loadu_si256((const __m256i *)(y->qs + 128 * hh + 32 * j));
                    __m256i p = _mm256_sub_epi16(_mm256_maddubs_epi16(lo, qy), _mm256_maddubs_epi16(neg, qy));
                    sumi[r] = _mm256_add_epi32(sumi[r], _mm256_madd_epi16(p, sv));
                }
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

/* IQ4_XS: table values, w = d (ls - 32) v per 32 */
AI void body_iq4_xs(int k, const void *w, const void *a, size_t as, const int R, float *out, size_t os)
{
    const block_iq4_xs *x = w;
    const __m256i tab = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)quant_iq4nl_values));
    __m256 acc[QUANT_MAX_R];
    for (int r = 0; r < R; r++) acc[r] = _mm256_setzero_ps();
    for (int b = 0; b < k / QK_K; b++) {
        const block_iq4_xs *xb = x + b;
        __m256i sumi[QUANT_MAX_R];
        for (int r = 0; r < R; r++) sumi[r] = _mm256_setzero_si256();
        for (int ib = 0; ib < 8; ib++) {
            int ls = ((xb->scales_l[ib / 2] >> (4 * (ib % 2))) & 0xF) | (((xb->scales_h >> (2 * ib)) & 3) << 4);
            __m256i qx = _mm256_shuffle_epi8(tab, nibbles32(xb->qs + 16 * ib));
            __m256i ax = _mm256_sign_epi8(qx, qx);
            __m256i sv = _mm256_set1_epi16((short)(ls - 32));
            for (int r = 0; r < R; r++) {
                const block_q8_K *y = (const block_q8_K *)ACT(r) + b;
                __m256i qy = _mm256_loadu_si256((const __m256i *)(y->qs + 32 * ib));
                __m256i p = _mm256_maddubs_epi16(ax, _mm256_sign_epi8(qy, qx));
                sumi[r] = _mm256_add_epi32(sumi[r], _mm256_madd_epi16(p, sv));
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

/* ---- Q4_0 repacked 8 rows at a time (quant_dot.h) --------------------- */

AI __m256i bcast32(const int8_t *p)
{
    int32_t v;
    memcpy(&v, p, 4);
    return _mm256_set1_epi32(v);
}

AI void body_q4_0x8(const void *w, int nb, int g0, int g1, const void *a, size_t as, const float *aux,
                    const int R, float *y, size_t ys)
{
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    for (int g = g0; g < g1; g++) {
        const quant_q4_0x8 *grp = (const quant_q4_0x8 *)w + (size_t)g * nb;
        __m256 acc[QUANT_MAX_R];
        for (int r = 0; r < R; r++) acc[r] = _mm256_setzero_ps();
        for (int b = 0; b < nb; b++) {
            const quant_q4_0x8 *x = grp + b;
            __m256 dv = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)x->d));
            __m256i lo[4], hi[4];
            for (int c = 0; c < 4; c++) {
                __m256i v = _mm256_loadu_si256((const __m256i *)x->qs[c]);
                lo[c] = _mm256_and_si256(v, m4);
                hi[c] = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
            }
            for (int r = 0; r < R; r++) {
                const int8_t *q = ((const block_q8_0 *)ACT(r) + b)->qs;
                /* codes 4c..4c+3 (low nibbles) meet q[4c..], 16 + 4c.. (high) q[16 + 4c..];
                 * 8 int16 sums of <= 2 * 15 * 127 each stay below 32767 */
                __m256i s = _mm256_maddubs_epi16(lo[0], bcast32(q));
                s = _mm256_add_epi16(s, _mm256_maddubs_epi16(hi[0], bcast32(q + 16)));
                for (int c = 1; c < 4; c++) {
                    s = _mm256_add_epi16(s, _mm256_maddubs_epi16(lo[c], bcast32(q + 4 * c)));
                    s = _mm256_add_epi16(s, _mm256_maddubs_epi16(hi[c], bcast32(q + 16 + 4 * c)));
                }
                __m256 f = _mm256_cvtepi32_ps(_mm256_madd_epi16(s, ones16()));
                const float *au = aux + (size_t)r * 2 * nb + 2 * b;
                acc[r] = _mm256_fmadd_ps(_mm256_mul_ps(dv, _mm256_set1_ps(au[0])), f, acc[r]);
                acc[r] = _mm256_fnmadd_ps(dv, _mm256_set1_ps(au[1]), acc[r]);
            }
        }
        for (int r = 0; r < R; r++) _mm256_storeu_ps(y + (size_t)r * ys + 8 * (size_t)g, acc[r]);
    }
}

void quant_q4_0x8_avx2(const void *w, int nb, int g0, int g1, const void *a, size_t as,
                       const float *aux, int R, float *y, size_t ys)
{
    switch (R) {
    case 1: body_q4_0x8(w, nb, g0, g1, a, as, aux, 1, y, ys); break;
    case 2: body_q4_0x8(w, nb, g0, g1, a, as, aux, 2, y, ys); break;
    case 3: body_q4_0x8(w, nb, g0, g1, a, as, aux, 3, y, ys); break;
    default: body_q4_0x8(w, nb, g0, g1, a, as, aux, 4, y, ys); break;
    }
}

/* ---- Q8_0 repacked 8 rows at a time (quant_dot.h) --------------------- */

AI void body_q8_0x8(const void *w, int nb, int g0, int g1, const void *a, size_t as, const int R,
                    float *y, size_t ys)
{
    for (int g = g0; g < g1; g++) {
        const quant_q8_0x8 *grp = (const quant_q8_0x8 *)w + (size_t)g * nb;
        __m256 acc[QUANT_MAX_R];
        for (int r = 0; r < R; r++) acc[r] = _mm256_setzero_ps();
        for (int b = 0; b < nb; b++) {
            const quant_q8_0x8 *x = grp + b;
            __m256i s[QUANT_MAX_R];
            for (int r = 0; r < R; r++) s[r] = _mm256_setzero_si256();
            for (int c = 0; c < 8; c++) {
                __m256i v = _mm256_loadu_si256((const __m256i *)x->qs[c]);
                __m256i av = _mm256_sign_epi8(v, v);
                for (int r = 0; r < R; r++) {
                    const int8_t *q = ((const block_q8_0 *)ACT(r) + b)->qs + 4 * c;
                    s[r] = _mm256_add_epi32(s[r], dot_ss(av, v, bcast32(q)));
                }
            }
            __m256 dv = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)x->d));
            for (int r = 0; r < R; r++) {
                const block_q8_0 *yb = (const block_q8_0 *)ACT(r) + b;
                __m256 sc = _mm256_mul_ps(dv, _mm256_broadcast_ss(&quant_f16_table[yb->d]));
                acc[r] = _mm256_fmadd_ps(sc, _mm256_cvtepi32_ps(s[r]), acc[r]);
            }
        }
        for (int r = 0; r < R; r++) _mm256_storeu_ps(y + (size_t)r * ys + 8 * (size_t)g, acc[r]);
    }
}

void quant_q8_0x8_avx2(const void *w, int nb, int g0, int g1, const void *a, size_t as, int R,
                       float *y, size_t ys)
{
    switch (R) {
    case 1: body_q8_0x8(w, nb, g0, g1, a, as, 1, y, ys); break;
    case 2: body_q8_0x8(w, nb, g0, g1, a, as, 2, y, ys); break;
    case 3: body_q8_0x8(w, nb, g0, g1, a, as, 3, y, ys); break;
    default: body_q8_0x8(w, nb, g0, g1, a, as, 4, y, ys); break;
    }
}

/* ---- Q4_K repacked 8 rows at a time (quant_dot.h) --------------------- */

/* 8 bytes (one per row) -> int16 pairs (v_r, v_r) in int32 lane r */
AI __m256i rows_pair16(const uint8_t *p)
{
    __m256i v = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)p));
    return _mm256_or_si256(v, _mm256_slli_epi32(v, 16));
}

AI void body_q4_Kx8(const void *w, int nb, int g0, int g1, const void *a, size_t as, const int R,
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
                        slo[r] = _mm256_add_epi16(slo[r], _mm256_maddubs_epi16(lo, bcast32(q)));
                        shi[r] = _mm256_add_epi16(shi[r], _mm256_maddubs_epi16(hi, bcast32(q + 32)));
                    }
                }
                __m256i sl = rows_pair16(x->sc[2 * j]), sh = rows_pair16(x->sc[2 * j + 1]);
                for (int r = 0; r < R; r++)
                    sumi[r] = _mm256_add_epi32(sumi[r], _mm256_add_epi32(_mm256_madd_epi16(slo[r], sl),
                                                                         _mm256_madd_epi16(shi[r], sh)));
            }
            __m256 dv = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)x->d));
            __m256 mv = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)x->dmin));
            for (int r = 0; r < R; r++) {
                const block_q8_K *yb = (const block_q8_K *)ACT(r) + b;
                __m256i bs = _mm256_loadu_si256((const __m256i *)yb->bsums);
                /* sums of the 8 sub-blocks of 32 as int16; dword p = the pair (2p, 2p + 1) */
                __m128i s8 = _mm_hadd_epi16(_mm256_castsi256_si128(bs), _mm256_extracti128_si256(bs, 1));
                __m256i ms = _mm256_setzero_si256();
                int32_t s8v[4]; /* _mm_extract_epi32 needs a constant lane (clang rejects a loop index) */
                _mm_storeu_si128((__m128i *)s8v, s8);
                for (int p = 0; p < 4; p++) {
                    __m256i pair = _mm256_set1_epi32(s8v[p]);
                    __m256i mn = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)x->mn[p]));
                    ms = _mm256_add_epi32(ms, _mm256_madd_epi16(mn, pair));
                }
                __m256 da = _mm256_set1_ps(yb->d);
                acc[r] = _mm256_fmadd_ps(_mm256_mul_ps(dv, da), _mm256_cvtepi32_ps(sumi[r]), acc[r]);
                acc[r] = _mm256_fnmadd_ps(_mm256_mul_ps(mv, da), _mm256_cvtepi32_ps(ms), acc[r]);
            }
        }
        for (int r = 0; r < R; r++) _mm256_storeu_ps(y + (size_t)r * ys + 8 * (size_t)g, acc[r]);
    }
}

void quant_q4_Kx8_avx2(const void *w, int nb, int g0, int g1, const void *a, size_t as, int R,
                       float *y, size_t ys)
{
    switch (R) {
    case 1: body_q4_Kx8(w, nb, g0, g1, a, as, 1, y, ys); break;
    case 2: body_q4_Kx8(w, nb, g0, g1, a, as, 2, y, ys); break;
    case 3: body_q4_Kx8(w, nb, g0, g1, a, as, 3, y, ys); break;
    default: body_q4_Kx8(w, nb, g0, g1, a, as, 4, y, ys); break;
    }
}

/* ---- Q5_K repacked 8 rows at a time (quant_dot.h) --------------------- */

AI void body_q5_Kx8(const void *w, int nb, int g0, int g1, const void *a, size_t as, const int R,
                    float *y, size_t ys)
{
    const __m256i m4 = _mm256_set1_epi8(0x0F), one = _mm256_set1_epi8(1);
    for (int g = g0; g < g1; g++) {
        const quant_q5_Kx8 *grp = (const quant_q5_Kx8 *)w + (size_t)g * nb;
        __m256 acc[QUANT_MAX_R];
        for (int r = 0; r < R; r++) acc[r] = _mm256_setzero_ps();
        for (int b = 0; b < nb; b++) {
            const quant_q5_Kx8 *x = grp + b;
            __m256i sumi[QUANT_MAX_R];
            for (int r = 0; r < R; r++) sumi[r] = _mm256_setzero_si256();
            for (int j = 0; j < 4; j++) {
                __m256i sl = rows_pair16(x->sc[2 * j]), sh = rows_pair16(x->sc[2 * j + 1]);
                for (int c0 = 0; c0 < 8; c0 += 4) {
                    __m256i slo[QUANT_MAX_R], shi[QUANT_MAX_R];
                    for (int r = 0; r < R; r++) slo[r] = shi[r] = _mm256_setzero_si256();
                    for (int c = c0; c < c0 + 4; c++) {
                        __m256i v = _mm256_loadu_si256((const __m256i *)x->qs[j][c]);
                        __m256i hv = _mm256_loadu_si256((const __m256i *)x->qh[c]);
                        __m256i lo = _mm256_or_si256(
                            _mm256_and_si256(v, m4),
                            _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hv, 2 * j), one), 4));
                        __m256i hi = _mm256_or_si256(
                            _mm256_and_si256(_mm256_srli_epi16(v, 4), m4),
                            _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hv, 2 * j + 1), one), 4));
                        for (int r = 0; r < R; r++) {
                            const int8_t *q = ((const block_q8_K *)ACT(r) + b)->qs + 64 * j + 4 * c;
                            slo[r] = _mm256_add_epi16(slo[r], _mm256_maddubs_epi16(lo, bcast32(q)));
                            shi[r] = _mm256_add_epi16(shi[r], _mm256_maddubs_epi16(hi, bcast32(q + 32)));
                        }
                    }
                    for (int r = 0; r < R; r++)
                        sumi[r] = _mm256_add_epi32(sumi[r], _mm256_add_epi32(_mm256_madd_epi16(slo[r], sl),
                                                                             _mm256_madd_epi16(shi[r], sh)));
                }
            }
            __m256 dv = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)x->d));
            __m256 mv = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)x->dmin));
            for (int r = 0; r < R; r++) {
                const block_q8_K *yb = (const block_q8_K *)ACT(r) + b;
                __m256i bs = _mm256_loadu_si256((const __m256i *)yb->bsums);
                __m128i s8 = _mm_hadd_epi16(_mm256_castsi256_si128(bs), _mm256_extracti128_si256(bs, 1));
                __m256i ms = _mm256_setzero_si256();
                int32_t s8v[4];
                _mm_storeu_si128((__m128i *)s8v, s8);
                for (int p = 0; p < 4; p++) {
                    __m256i mn = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)x->mn[p]));
                    ms = _mm256_add_epi32(ms, _mm256_madd_epi16(mn, _mm256_set1_epi32(s8v[p])));
                }
                __m256 da = _mm256_set1_ps(yb->d);
                acc[r] = _mm256_fmadd_ps(_mm256_mul_ps(dv, da), _mm256_cvtepi32_ps(sumi[r]), acc[r]);
                acc[r] = _mm256_fnmadd_ps(_mm256_mul_ps(mv, da), _mm256_cvtepi32_ps(ms), acc[r]);
            }
        }
        for (int r = 0; r < R; r++) _mm256_storeu_ps(y + (size_t)r * ys + 8 * (size_t)g, acc[r]);
    }
}

void quant_q5_Kx8_avx2(const void *w, int nb, int g0, int g1, const void *a, size_t as, int R,
                       float *y, size_t ys)
{
    switch (R) {
    case 1: body_q5_Kx8(w, nb, g0, g1, a, as, 1, y, ys); break;
    case 2: body_q5_Kx8(w, nb, g0, g1, a, as, 2, y, ys); break;
    case 3: body_q5_Kx8(w, nb, g0, g1, a, as, 3, y, ys); break;
    default: body_q5_Kx8(w, nb, g0, g1, a, as, 4, y, ys); break;
    }
}

/* ---- Q6_K repacked 8 rows at a time (quant_dot.h) --------------------- */

AI void body_q6_Kx8(const void *w, int nb, int g0, int g1, const void *a, size_t as, const int R,
                    float *y, size_t ys)
{
    const __m256i m4 = _mm256_set1_epi8(0x0F), m3 = _mm256_set1_epi8(0x03), m30 = _mm256_set1_epi8(0x30);
    /* int16 lanes (row, i) of a scale pair -> (sc_i, sc_i) in the row's int32 lane */
    const __m256i dup[2] = {_mm256_setr_epi8(0, 1, 0, 1, 4, 5, 4, 5, 8, 9, 8, 9, 12, 13, 12, 13, 0, 1, 0, 1, 4, 5, 4,
                                             5, 8, 9, 8, 9, 12, 13, 12, 13),
                            _mm256_setr_epi8(2, 3, 2, 3, 6, 7, 6, 7, 10, 11, 10, 11, 14, 15, 14, 15, 2, 3, 2, 3, 6,
                                             7, 6, 7, 10, 11, 10, 11, 14, 15, 14, 15)};
    for (int g = g0; g < g1; g++) {
        const quant_q6_Kx8 *grp = (const quant_q6_Kx8 *)w + (size_t)g * nb;
        __m256 acc[QUANT_MAX_R];
        for (int r = 0; r < R; r++) acc[r] = _mm256_setzero_ps();
        for (int b = 0; b < nb; b++) {
            const quant_q6_Kx8 *x = grp + b;
            /* two super-blocks ahead (the next group's first ones past the end) */
            for (int o = 0; o < (int)sizeof *x; o += 64) _mm_prefetch((const char *)(x + 2) + o, _MM_HINT_T0);
            __m256i sumi[QUANT_MAX_R], off[QUANT_MAX_R];
            for (int r = 0; r < R; r++) sumi[r] = off[r] = _mm256_setzero_si256();
            for (int h = 0; h < 2; h++)
                for (int c = 0; c < 8; c += 2) {
                    /* codes of chunks c, c + 1: value groups 128 h + 32 i + 4 c' */
                    __m256i v[4][2];
                    for (int e = 0; e < 2; e++) {
                        __m256i A = _mm256_loadu_si256((const __m256i *)x->q[h][c + e][0]);
                        __m256i B = _mm256_loadu_si256((const __m256i *)x->q[h][c + e][1]);
                        __m256i H = _mm256_loadu_si256((const __m256i *)x->q[h][c + e][2]);
                        v[0][e] = _mm256_or_si256(_mm256_and_si256(A, m4), _mm256_slli_epi16(_mm256_and_si256(H, m3), 4));
                        v[1][e] = _mm256_or_si256(_mm256_and_si256(B, m4),
                                                  _mm256_and_si256(_mm256_slli_epi16(H, 2), m30));
                        v[2][e] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(A, 4), m4),
                                                  _mm256_and_si256(H, m30));
                        v[3][e] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(B, 4), m4),
                                                  _mm256_and_si256(_mm256_srli_epi16(H, 2), m30));
                    }
                    for (int i = 0; i < 4; i++) {
                        /* sub-block 8 h + 2 i + c / 4 = pair 4 h + i, member c / 4 */
                        __m256i sp = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)x->sc[4 * h + i]));
                        __m256i s = _mm256_shuffle_epi8(sp, dup[c / 4]);
                        for (int r = 0; r < R; r++) {
                            const int8_t *q = ((const block_q8_K *)ACT(r) + b)->qs + 128 * h + 32 * i + 4 * c;
                            /* 2 chunks x 2 products of <= 63 * 127: int16 */
                            __m256i t = _mm256_add_epi16(_mm256_maddubs_epi16(v[i][0], bcast32(q)),
                                                         _mm256_maddubs_epi16(v[i][1], bcast32(q + 4)));
                            sumi[r] = _mm256_add_epi32(sumi[r], _mm256_madd_epi16(t, s));
                        }
                    }
                }
            for (int r = 0; r < R; r++) { /* the -32: sum_j sc[j] bsums[j] per row */
                const block_q8_K *yb = (const block_q8_K *)ACT(r) + b;
                int32_t bs2[8];
                memcpy(bs2, yb->bsums, sizeof bs2);
                for (int p = 0; p < 8; p++) {
                    __m256i sp = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)x->sc[p]));
                    off[r] = _mm256_add_epi32(off[r], _mm256_madd_epi16(sp, _mm256_set1_epi32(bs2[p])));
                }
            }
            __m256 dv = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)x->d));
            for (int r = 0; r < R; r++) {
                const block_q8_K *yb = (const block_q8_K *)ACT(r) + b;
                __m256i t = _mm256_sub_epi32(sumi[r], _mm256_slli_epi32(off[r], 5));
                acc[r] = _mm256_fmadd_ps(_mm256_mul_ps(dv, _mm256_set1_ps(yb->d)), _mm256_cvtepi32_ps(t), acc[r]);
            }
        }
        for (int r = 0; r < R; r++) _mm256_storeu_ps(y + (size_t)r * ys + 8 * (size_t)g, acc[r]);
    }
}

void quant_q6_Kx8_avx2(const void *w, int nb, int g0, int g1, const void *a, size_t as, int R,
                       float *y, size_t ys)
{
    switch (R) {
    case 1: body_q6_Kx8(w, nb, g0, g1, a, as, 1, y, ys); break;
    case 2: body_q6_Kx8(w, nb, g0, g1, a, as, 2, y, ys); break;
    case 3: body_q6_Kx8(w, nb, g0, g1, a, as, 3, y, ys); break;
    default: body_q6_Kx8(w, nb, g0, g1, a, as, 4, y, ys); break;
    }
}

/* ---- activation quantizers (bit-identical to quant_dot.c's) ------------ */

/* 32 floats -> 32 int8 at q; returns amax */
AI float amax32(const float *x)
{
    const __m256 sign = _mm256_set1_ps(-0.0f);
    __m256 m = _mm256_andnot_ps(sign, _mm256_loadu_ps(x));
    for (int i = 8; i < 32; i += 8) m = _mm256_max_ps(m, _mm256_andnot_ps(sign, _mm256_loadu_ps(x + i)));
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    s = _mm_max_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

AI void quant32(int8_t *q, const float *x, float id)
{
    const __m256 vid = _mm256_set1_ps(id), hi = _mm256_set1_ps(127.0f), lo = _mm256_set1_ps(-127.0f);
    __m256i v[4];
    for (int i = 0; i < 4; i++) {
        __m256 f = _mm256_round_ps(_mm256_mul_ps(_mm256_loadu_ps(x + 8 * i), vid),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        v[i] = _mm256_cvtps_epi32(_mm256_min_ps(_mm256_max_ps(f, lo), hi));
    }
    /* packs interleave the 128-bit lanes: undo with a dword permute */
    __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(v[0], v[1]), _mm256_packs_epi32(v[2], v[3]));
    p = _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm256_storeu_si256((__m256i *)q, p);
}

static void act_q8_0_avx2(void *dst, const float *x, int k)
{
    block_q8_0 *b = dst;
    for (int i = 0; i < k / QK8_0; i++) {
        float amax = amax32(x + 32 * i);
        quant32(b[i].qs, x + 32 * i, amax > 0.0f ? 127.0f / amax : 0.0f);
        b[i].d = _cvtss_sh(amax / 127.0f, 0);
    }
}

static void act_q8_K_avx2(void *dst, const float *x, int k)
{
    block_q8_K *b = dst;
    for (int i = 0; i < k / QK_K; i++) {
        const float *xb = x + (size_t)QK_K * i;
        float amax = 0.0f;
        for (int j = 0; j < QK_K; j += 32) {
            float m = amax32(xb + j);
            if (m > amax) amax = m;
        }
        float id = amax > 0.0f ? 127.0f / amax : 0.0f;
        for (int j = 0; j < QK_K; j += 32) {
            quant32(b[i].qs + j, xb + j, id);
            /* the two sums of 16 of these 32 */
            __m256i q = _mm256_loadu_si256((const __m256i *)(b[i].qs + j));
            __m256i s16 = _mm256_maddubs_epi16(_mm256_set1_epi8(1), q);
            __m256i s32 = _mm256_madd_epi16(s16, ones16());
            __m128i t = _mm_hadd_epi32(_mm256_castsi256_si128(s32), _mm256_extracti128_si256(s32, 1));
            t = _mm_hadd_epi32(t, t);
            b[i].bsums[j / 16] = (int16_t)_mm_cvtsi128_si32(t);
            b[i].bsums[j / 16 + 1] = (int16_t)_mm_extract_epi32(t, 1);
        }
        b[i].d = amax / 127.0f;
    }
}

/* f16 of the scale through F16C: the same rounding as util/dtype.h's f32_to_f16 */

/* ---- the table --------------------------------------------------------- */

#define AVX2_OPS(T, AT, ACTF, body)                                                                \
    static void dot_avx2_##T(int k, const void *w, const void *a, size_t as, int R, float *o,      \
                             size_t os)                                                            \
    {                                                                                              \
        switch (R) {                                                                               \
        case 1: body(k, w, a, as, 1, o, os); break;                                                \
        case 2: body(k, w, a, as, 2, o, os); break;                                                \
        case 3: body(k, w, a, as, 3, o, os); break;                                                \
        default: body(k, w, a, as, 4, o, os); break;                                               \
        }                                                                                          \
    }                                                                                              \
    static const quant_ops ops_avx2_##T = {KERN_TYPE_##AT, ACTF, dot_avx2_##T};

AVX2_OPS(Q4_0, Q8_0, act_q8_0_avx2, body_q4_0)
AVX2_OPS(Q4_1, Q8_1, quant_act_q8_1, body_q4_1)
AVX2_OPS(Q5_0, Q8_0, act_q8_0_avx2, body_q5_0)
AVX2_OPS(Q5_1, Q8_1, quant_act_q8_1, body_q5_1)
AVX2_OPS(Q8_0, Q8_0, act_q8_0_avx2, body_q8_0)
AVX2_OPS(Q2_K, Q8_K, act_q8_K_avx2, body_q2_K)
AVX2_OPS(Q3_K, Q8_K, act_q8_K_avx2, body_q3_K)
AVX2_OPS(Q4_K, Q8_K, act_q8_K_avx2, body_q4_K)
AVX2_OPS(Q5_K, Q8_K, act_q8_K_avx2, body_q5_K)
AVX2_OPS(Q6_K, Q8_K, act_q8_K_avx2, body_q6_K)
AVX2_OPS(IQ4_NL, Q8_0, act_q8_0_avx2, body_iq4_nl)
AVX2_OPS(IQ4_XS, Q8_K, act_q8_K_avx2, body_iq4_xs)

const quant_ops *quant_ops_avx2(kern_type t)
{
    switch (t) {
#define C(T) case KERN_TYPE_##T: return &ops_avx2_##T;
        C(Q4_0) C(Q4_1) C(Q5_0) C(Q5_1) C(Q8_0) C(Q2_K) C(Q3_K) C(Q4_K) C(Q5_K) C(Q6_K) C(IQ4_NL) C(IQ4_XS)
#undef C
    default: return NULL;
    }
}
