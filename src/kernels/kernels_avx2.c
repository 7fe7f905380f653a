/* kernels_avx2 — AVX2 + FMA variants of every kernel (x86-64-v3 machines).
 *
 * DESIGN: the same shapes as kernels_avx512.c at half the width, and the
 * same code: the matmul panels and the row kernels are the one body in
 * kernels_rows_impl.h, written against the SIMD vocabulary of
 * kernels_simd.h (mapped here to AVX2); the attention frame is
 * kernels_attn_impl.h.  This file sets the AVX2 blocking and keeps what
 * is AVX2's own: the attention block's math (two passes; 8 keys per
 * block, hadd-based 8x8 score sums) and the two K/V row helpers.
 * Matmul weights are repacked at load into panels of NB = 16 output
 * columns, contiguous over k:
 *   bf16 (LAYOUT_BF16): k-pair p -> 16 x (W[c][2p], W[c][2p+1]) = 64 bytes;
 *     each 32-bit pair splits into two f32 vectors with a shift and a mask,
 *     so activations stay f32 (no bf16 rounding) and the weights stream at
 *     half the bytes of f32;
 *   f32 (LAYOUT_F32): k -> 16 f32 = 64 bytes.
 * Activations are packed per block of RB = 6 rows (xp[(s * R + r) * E + e],
 * zero past k) so the micro-kernel (6 rows x 16 columns = 12 ymm
 * accumulators) reads one sequential stream; k is cut in KC blocks that
 * keep the panel block in L1.  Threads own disjoint panel ranges.
 * Attention: online softmax over blocks of 8 keys; per block a scores pass
 * over all rows, then the per-row max / rescale / P.V pass.  Row kernels
 * finish their tails in scalar code (SIMD_MASKED_TAILS 0). */
#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels_impl.h"

#define SIMD_AVX2 1
#include "kernels/kernels_simd.h"

#define NB 16
#define RB 6
#define MC 240        /* multiple of RB */
#define KC_PAIRS 256  /* 16 KiB of bf16 panel */
#define KC_F32 256    /* 16 KiB of f32 panel; <= 2 * KC_PAIRS */
#define PF_BYTES 1024

enum { LAYOUT_BF16 = 0x0221, LAYOUT_F32 = 0x0222 };

#define ROWS_DEFINE_KERNELS
#include "kernels/kernels_rows_impl.h"

static void matmul256(float *y, const float *x, int m, const kern_mat *w, const float *bias,
                      int ith, int nth, void *scratch)
{
    if (w->layout != LAYOUT_BF16 && w->layout != LAYOUT_F32) {
        kern_ref_matmul(y, x, m, w, bias, ith, nth, scratch);
        return;
    }
    matmul_panels256(y, x, m, w, bias, ith, nth, scratch, w->layout == LAYOUT_BF16 ? MK_BF16F : MK_F32);
}

/* ---- attention --------------------------------------------------------- */

/* The frame (units, row setup, K/V gather, normalisation) is shared with
 * the AVX-512 file: kernels_attn_impl.h.  Here: the math of one key block. */
#define ATTN_VW 8
#define ATTN_ROW_STATS 2
#include "kernels/kernels_attn_impl.h"

/* out[j] = sum of the lanes of v[j], j < 8 */
AINLINE __m256 hsum8x8(const __m256 v[8])
{
    __m256 t01 = _mm256_hadd_ps(v[0], v[1]), t23 = _mm256_hadd_ps(v[2], v[3]);
    __m256 t45 = _mm256_hadd_ps(v[4], v[5]), t67 = _mm256_hadd_ps(v[6], v[7]);
    __m256 a = _mm256_hadd_ps(t01, t23), b = _mm256_hadd_ps(t45, t67);
    return _mm256_add_ps(_mm256_permute2f128_ps(a, b, 0x20), _mm256_permute2f128_ps(a, b, 0x31));
}

AINLINE void attn_load_kv_row(float *dst, const void *src, dtype dt, int hd, int dp)
{
    int d = 0;
    if (dt == DTYPE_F32) {
        const float *s = src;
        for (; d + 8 <= hd; d += 8) _mm256_store_ps(dst + d, _mm256_loadu_ps(s + d));
        for (; d < hd; d++) dst[d] = s[d];
    } else {
        const uint16_t *s = src;
        for (; d + 8 <= hd; d += 8) {
            __m128i h = _mm_loadu_si128((const __m128i *)(s + d));
            _mm256_store_ps(dst + d, _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16)));
        }
        for (; d < hd; d++) dst[d] = bf16_to_f32(s[d]);
    }
    for (; d < dp; d++) dst[d] = 0.0f;
}

/* One row of an 8-bit float cache -> f32 * scale, 8 values at a time by
 * bit moves to f16 and vcvtph2ps (the AVX-512 file's attn_load_kv_row8
 * says why this is exact; scale4 = scale * 256 for e4m3); the tail from
 * the type's table. */
AINLINE void attn_load_kv_row8(float *dst, const uint8_t *src, int e5m2, float scale, int hd, int dp)
{
    int d = 0;
    const float *tab = dtype_f8_table(e5m2 ? DTYPE_F8_E5M2 : DTYPE_F8_E4M3);
    const __m256 sc = _mm256_set1_ps(e5m2 ? scale : scale * 256.0f);
    for (; d + 8 <= hd; d += 8) {
        __m128i b = _mm_loadl_epi64((const __m128i *)(src + d));
        __m256 v;
        if (e5m2) {
            v = _mm256_cvtph_ps(_mm_slli_epi16(_mm_cvtepu8_epi16(b), 8));
        } else {
            __m128i h = _mm_and_si128(_mm_slli_epi16(_mm_cvtepi8_epi16(b), 7), _mm_set1_epi16((short)0xBF80));
            __m128i nan = _mm_cmpeq_epi8(_mm_and_si128(b, _mm_set1_epi8(0x7f)), _mm_set1_epi8(0x7f));
            v = _mm256_blendv_ps(_mm256_cvtph_ps(h), _mm256_set1_ps(NAN), _mm256_castsi256_ps(_mm256_cvtepi8_epi32(nan)));
        }
        _mm256_store_ps(dst + d, _mm256_mul_ps(v, sc));
    }
    for (; d < hd; d++) dst[d] = tab[src[d]] * scale;
    for (; d < dp; d++) dst[d] = 0.0f;
}

/* One row of sglc's int8 cache: sign-extend 8 bytes at a time, convert,
 * times the row's token-head scale. */
AINLINE void attn_load_kv_rowi8(float *dst, const int8_t *src, float scale, int hd, int dp)
{
    int d = 0;
    const __m256 sc = _mm256_set1_ps(scale);
    for (; d + 8 <= hd; d += 8) {
        __m128i b = _mm_loadl_epi64((const __m128i *)(src + d));
        _mm256_store_ps(dst + d, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(b)), sc));
    }
    for (; d < hd; d++) dst[d] = (float)src[d] * scale;
    for (; d < dp; d++) dst[d] = 0.0f;
}

/* One block of KB keys for every row of the unit (see attn_blk).  Pass 1:
 * masked scores of every row (independent iterations, so rows overlap);
 * pass 2: the per-row online-softmax update. */
AINLINE void attn_block(const attn_blk *b)
{
    /* fields in locals: the vector stores below may alias *b, so reading
     * through b would reload every field after each store */
    const int R = b->R, p0 = b->p0, nk = b->nk, nh = b->nh, nkh = b->nkh, dp = b->dp, nc = b->nc;
    const size_t kst = b->kst;
    const int *const rlo = b->rlo, *const rhi = b->rhi;
    const uint32_t *const tmask = b->tmask;
    const float *const qbuf = b->qbuf, *const kbuf = b->kbuf, *const vbuf = b->vbuf;
    float *const acc = b->acc, *const mx = b->mx, *const sm = b->sm, *const sbuf = b->sbuf;
    const float softcap = b->softcap;
    const float neg_inf = -INFINITY;
    const __m256i vp = _mm256_add_epi32(_mm256_set1_epi32(p0), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    for (int r = 0; r < R; r++) {
        if (rhi[r] <= p0 || rlo[r] >= p0 + nk) continue;
        const float *qr = qbuf + r * dp;
        const float *kr = kbuf + (size_t)(r / nh % nkh) * dp;
        __m256 part[8];
        for (int j = 0; j < 8; j++) {
            __m256 s = _mm256_mul_ps(_mm256_load_ps(qr), _mm256_load_ps(kr + j * kst));
            for (int c = 1; c < nc; c++)
                s = _mm256_fmadd_ps(_mm256_load_ps(qr + c * 8), _mm256_load_ps(kr + j * kst + c * 8), s);
            part[j] = s;
        }
        __m256 s = hsum8x8(part);
        if (softcap > 0.0f) {
            __m256 cap = _mm256_set1_ps(softcap);
            s = _mm256_mul_ps(cap, simd_tanh(_mm256_div_ps(s, cap)));
        }
        /* valid: rlo <= p < rhi */
        __m256i ok = _mm256_andnot_si256(_mm256_cmpgt_epi32(_mm256_set1_epi32(rlo[r]), vp),
                                         _mm256_cmpgt_epi32(_mm256_set1_epi32(rhi[r]), vp));
        if (tmask) { /* draft tree: ancestors only (bit j of tmask[r] = lane j) */
            const __m256i bit = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
            __m256i tb = _mm256_and_si256(_mm256_set1_epi32((int)tmask[r]), bit);
            ok = _mm256_and_si256(ok, _mm256_cmpeq_epi32(tb, bit));
        }
        s = _mm256_blendv_ps(_mm256_set1_ps(neg_inf), s, _mm256_castsi256_ps(ok));
        _mm256_store_ps(sbuf + r * KB, s);
    }
    for (int r = 0; r < R; r++) {
        if (rhi[r] <= p0 || rlo[r] >= p0 + nk) continue;
        const float *vr = vbuf + (size_t)(r / nh % nkh) * dp;
        __m256 s = _mm256_load_ps(sbuf + r * KB);
        __m256 okf = _mm256_cmp_ps(s, _mm256_set1_ps(neg_inf), _CMP_NEQ_OQ);
        float bmax = simd_reduce_max(s);
        float mnew = bmax > mx[r] ? bmax : mx[r];
        float alpha = mx[r] == neg_inf ? 0.0f : expf(mx[r] - mnew);
        __m256 pr = _mm256_and_ps(okf, simd_exp(_mm256_sub_ps(s, _mm256_set1_ps(mnew))));
        sm[r] = sm[r] * alpha + simd_reduce_add(pr);
        mx[r] = mnew;
        float pj[8];
        _mm256_storeu_ps(pj, pr);
        __m256 va = _mm256_set1_ps(alpha);
        float *ar = acc + r * dp;
        for (int c = 0; c < nc; c++) {
            __m256 o = _mm256_mul_ps(_mm256_load_ps(ar + c * 8), va);
            for (int j = 0; j < nk; j++)
                o = _mm256_fmadd_ps(_mm256_set1_ps(pj[j]), _mm256_load_ps(vr + j * kst + c * 8), o);
            _mm256_store_ps(ar + c * 8, o);
        }
    }
}

AINLINE void attn_store_row(float *o, const float *acc, float inv, int hd, int nc)
{
    (void)nc;
    for (int d = 0; d < hd; d++) o[d] = acc[d] * inv;
}

#define ATTN_DEFINE_KERNEL
#define ATTN_NAME attention256
#define ATTN_SCRATCH_NAME attention_scratch256
#include "kernels/kernels_attn_impl.h"

static const kern_vtable vt_avx2 = {
    .mat_pack = pack256,
    .matmul_scratch = matmul_scratch_panels256,
    .matmul = matmul256,
    .attention_scratch = attention_scratch256,
    .attention = attention256,
    .rmsnorm = rmsnorm256,
    .rope_apply = rope256,
    .silu_mul = silu_mul256,
    .gelu_tanh_mul = gelu_tanh_mul256,
    .add = add256,
    .softmax = softmax256,
    .argmax = argmax256,
    .dot_f32 = dot256,
};

const kern_vtable *const kern_vtable_avx2 = &vt_avx2;
