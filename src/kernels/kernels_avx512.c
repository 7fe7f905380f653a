/* kernels_avx512 — AVX-512 (F/BW/VL/DQ + BF16 + VNNI) variants of every kernel.
 *
 * DESIGN
 * Matmul.  Weights are repacked once at load (mat_pack) into column panels
 * of NB = 32 output columns, each panel contiguous over all of k:
 *
 *   bf16 (LAYOUT_BF16): panel b, k-pair p  ->  64 bf16 = 128 bytes
 *       [W[c0][2p], W[c0][2p+1], W[c1][2p], W[c1][2p+1], ... W[c31][2p+1]]
 *     which is what vdpbf16ps wants: one 32-bit broadcast of the activation
 *     pair (x[2p], x[2p+1]) times two zmm of weights adds to 32 columns.
 *   f32 (LAYOUT_F32): panel b, index i  ->  32 f32 = 128 bytes [W[c0][i] .. W[c31][i]]
 *
 * Tails are zero padded (columns >= n, the odd k of the last pair), so the
 * inner loops have no bounds checks; y is written with masked stores.
 *
 * bf16 weights, two bodies, one chosen per process by kernels_init()
 * (kern_choice in kernels.h: SGLC_BF16_DOT, else a start-up measurement):
 * "fma" widens each 32-bit pair in registers to two f32 vectors (even k:
 * << 16, odd k: & 0xffff0000) and multiplies f32 activations by
 * vfmadd231ps (exact in x; faster where vdpbf16ps zmm issues at half the
 * FMA rate, e.g. Sapphire Rapids); "dot" runs vdpbf16ps on x rounded to
 * bf16 (faster where it issues at twice the FMA rate, e.g. Zen 4).  Weights
 * marked x_exact (the LM head) keep the fma body unless SGLC_BF16_DOT=1.
 * Either way every output element is one fixed sequence of multiply-adds,
 * independent of m, of the thread split and of the blocking (partial sums
 * go through y as f32, which is exact): results are batch-invariant.
 * Unless SGLC_KERNELS=avx512, bf16 weights with m >= KERN_AMX_MIN_M rows go
 * to the AMX tiles instead (kernels_amx.c), which breaks that invariance at
 * the ~1e-6 level.
 *
 * Blocking: threads own disjoint ranges of panels.  Rows come in chunks of
 * MC; k is cut in KC blocks so a panel block (KC pairs x 128 B = 24 KiB)
 * stays in L1 while the micro-kernel walks the chunk RB = 12 rows at a time
 * (24 zmm accumulators).  The activation block is first packed into the
 * per-thread scratch in the order the micro-kernel reads it (rows
 * interleaved per k step): one sequential stream instead of 12 rows 4 KiB
 * apart that collide in the same L1 sets.  For m <= RB (decode) there is no
 * k blocking: each thread streams its contiguous slab of panels once, with
 * software prefetch, and a single row with even k is read in place.
 *
 * Attention: flash-style online softmax.  A work unit is (consecutive kv
 * heads, the query heads of their groups, a block of queries), up to AR =
 * 32 rows (see kern_attn_plan_make): prefill units take 8 queries of one kv
 * head, decode units take several kv heads, whose K/V rows are adjacent in
 * a slot.  Keys go 16 at a time: their K/V rows are gathered by slot (and
 * widened from bf16) into f32 scratch, with the next block prefetched;
 * then three passes over the rows -- masked, soft-capped scores (16 dot
 * products per row summed by a transpose-add tree), the running max and
 * rescale factors for 16 rows per vector, and P.V into the accumulators --
 * so independent rows overlap instead of each row waiting on its own
 * max -> exp -> sum chain.  Units are dealt round-robin to threads (causal
 * prefill has more work in late queries).  Scratch is O(AR * head_dim).
 *
 * One body with AVX2: the panel micro-kernels and driver and the row
 * kernels are kernels_rows_impl.h, written against kernels_simd.h's SIMD
 * vocabulary (mapped here to AVX-512: masked tails, scalef exp); the
 * attention frame is kernels_attn_impl.h.  What stays here is AVX-512's
 * own: the vdpbf16ps micro-kernel (no AVX2 form), the AMX hand-off and its
 * scratch, and the attention block's math (three passes with a 16-row
 * vector max, transpose-add score trees) with the masked K/V row helpers.
 * The bf16 panel layout is shared with kernels_amx.c, which reads it as
 * tiles: it must not change. */
#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels_impl.h"
#include "util/cpu.h"

#define SIMD_AVX512 1
#include "kernels/kernels_simd.h"

#define NB 32          /* output columns per panel */
#define RB 12          /* rows per micro-kernel call */
#define MC 240         /* rows per activation chunk (multiple of RB) */
#define KC_PAIRS 192   /* k pairs per L1 block (bf16): 24 KiB of panel */
#define KC_F32 192     /* k per L1 block (f32): 24 KiB of panel; must be <= 2 * KC_PAIRS */
#define PF_BYTES 1024  /* decode prefetch distance */

enum { LAYOUT_BF16 = 0x5121, LAYOUT_F32 = 0x5122 };

/* bf16 weights: 0 = f32 activations through vfmadd231ps; 1 = activations
 * rounded to bf16 and vdpbf16ps, except x_exact weights; 2 = vdpbf16ps for
 * all (kernels_impl.h).  Set by kernels_init() before compute threads exist. */
static int g_bf16_dot;
void kern_avx512_set_bf16_dot(int mode) { g_bf16_dot = mode; }

/* AMX tiles for bf16 weights with m >= KERN_AMX_MIN_M (kernels_amx.c).
 * g_amx_ok: the CPU has AMX and the OS granted the tile state (scratch is
 * sized for it whenever so); g_amx: in use.  Set by kernels_init(). */
static int g_amx, g_amx_ok = -1;
int kern_avx512_amx_ok(void)
{
    if (g_amx_ok < 0) {
        const cpu_features *c = cpu_get();
        g_amx_ok = c->amx_tile && c->amx_bf16 && kern_amx_request() == 0;
    }
    return g_amx_ok;
}
void kern_avx512_set_amx(int on) { g_amx = on && kern_avx512_amx_ok(); }

/* ---- matmul ------------------------------------------------------------ */

/* the shared micro-kernels (kernels_rows_impl.h, first part) */
#include "kernels/kernels_rows_impl.h"

/* bf16 weights, bf16 activation pairs (xb[s * R + r]), vdpbf16ps: AVX-512
 * BF16 only, so it is not in the shared body; it plugs into its micro-kernel
 * table through ROWS_BF16_DOT. */
AINLINE void mk_bf16d(const int R, const uint32_t *xb, const uint16_t *w, int np, float *y,
                      size_t ldy, simd_m m0, simd_m m1, int load_y, const float *bias)
{
    simd_v acc[RB][2];
    acc_init(R, acc, y, ldy, m0, m1, load_y);
    for (int p = 0; p < np; p++) {
        const uint16_t *wp = w + (size_t)p * 64;
        if (R <= 2) {
            _mm_prefetch((const char *)wp + PF_BYTES, _MM_HINT_T0);
            _mm_prefetch((const char *)wp + PF_BYTES + 64, _MM_HINT_T0);
        }
        __m512bh w0 = (__m512bh)_mm512_load_si512(wp);
        __m512bh w1 = (__m512bh)_mm512_load_si512(wp + 32);
        for (int r = 0; r < R; r++) {
            __m512bh xv = (__m512bh)_mm512_set1_epi32((int)xb[(size_t)p * R + r]);
            acc[r][0] = _mm512_dpbf16_ps(acc[r][0], xv, w0);
            acc[r][1] = _mm512_dpbf16_ps(acc[r][1], xv, w1);
        }
    }
    acc_store(R, acc, y, ldy, m0, m1, bias);
}

/* 32 floats -> 16 bf16 pairs (lo = even k) for the vdpbf16ps activation
 * pack: f32_to_bf16's integer rounding (nearest even, NaN quieted; not
 * vcvtne2ps2bf16, which treats denormal inputs as zero), 16 lanes at a time,
 * then the high halves of the 32 rounded words gathered by one vpermt2w. */
static void bf16_pairs16(uint32_t *out, const float *src)
{
    const __m512i one = _mm512_set1_epi32(1), bias = _mm512_set1_epi32(0x7fff);
    const __m512i absm = _mm512_set1_epi32(0x7fffffff), inf = _mm512_set1_epi32(0x7f800000);
    const __m512i qbit = _mm512_set1_epi32(0x00400000);
    __m512i r[2];
    for (int h = 0; h < 2; h++) {
        __m512i u = _mm512_castps_si512(_mm512_loadu_ps(src + 16 * h));
        __m512i v = _mm512_add_epi32(u, _mm512_add_epi32(bias, _mm512_and_si512(_mm512_srli_epi32(u, 16), one)));
        __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, absm), inf);
        r[h] = _mm512_mask_or_epi32(v, nan, u, qbit);
    }
    const __m512i hi_words = _mm512_set_epi16(63, 61, 59, 57, 55, 53, 51, 49, 47, 45, 43, 41, 39, 37, 35, 33, 31, 29,
                                              27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
    _mm512_storeu_si512(out, _mm512_permutex2var_epi16(r[0], hi_words, r[1]));
}

#define ROWS_BF16_DOT 1
#define ROWS_BF16_PAIRS16 bf16_pairs16
#define ROWS_DEFINE_KERNELS
#include "kernels/kernels_rows_impl.h"

static size_t matmul_scratch512(int m, int k)
{
    size_t amx = m > 0 && k > 0 && kern_avx512_amx_ok() && m >= KERN_AMX_MIN_M ? kern_amx_matmul_scratch(m, k) : 0;
    size_t s = matmul_scratch_panels512(m, k);
    return s > amx ? s : amx;
}

static void matmul512(float *y, const float *x, int m, const kern_mat *w, const float *bias,
                      int ith, int nth, void *scratch)
{
    if (w->layout != LAYOUT_BF16 && w->layout != LAYOUT_F32) {
        kern_ref_matmul(y, x, m, w, bias, ith, nth, scratch);
        return;
    }
    if (g_amx && w->layout == LAYOUT_BF16 && m >= KERN_AMX_MIN_M && !w->x_exact) {
        kern_amx_matmul(y, x, m, w, bias, ith, nth, scratch);
        return;
    }
    const int dot = g_bf16_dot == 2 || (g_bf16_dot == 1 && !w->x_exact);
    const int kind = w->layout != LAYOUT_BF16 ? MK_F32 : dot ? MK_BF16D : MK_BF16F;
    matmul_panels512(y, x, m, w, bias, ith, nth, scratch, kind);
}

/* ---- attention --------------------------------------------------------- */

/* The frame (units, row setup, K/V gather, normalisation) is shared with
 * the AVX2 file: kernels_attn_impl.h.  Here: the math of one key block. */
#define ATTN_VW 16
#define ATTN_ROW_STATS 4
#include "kernels/kernels_attn_impl.h"

/* Sum each of 16 vectors: out[j] = sum of lanes of v[j]. */
AINLINE __m512 hsum16x16(const __m512 v[16])
{
    __m512 q[4];
    for (int g = 0; g < 4; g++) {
        const __m512 *u = v + 4 * g;
        __m512 s01 = _mm512_add_ps(_mm512_unpacklo_ps(u[0], u[1]), _mm512_unpackhi_ps(u[0], u[1]));
        __m512 s23 = _mm512_add_ps(_mm512_unpacklo_ps(u[2], u[3]), _mm512_unpackhi_ps(u[2], u[3]));
        q[g] = _mm512_add_ps(_mm512_shuffle_ps(s01, s23, _MM_SHUFFLE(1, 0, 1, 0)),
                             _mm512_shuffle_ps(s01, s23, _MM_SHUFFLE(3, 2, 3, 2)));
    }
    __m512 r01 = _mm512_add_ps(_mm512_shuffle_f32x4(q[0], q[1], _MM_SHUFFLE(2, 0, 2, 0)),
                               _mm512_shuffle_f32x4(q[0], q[1], _MM_SHUFFLE(3, 1, 3, 1)));
    __m512 r23 = _mm512_add_ps(_mm512_shuffle_f32x4(q[2], q[3], _MM_SHUFFLE(2, 0, 2, 0)),
                               _mm512_shuffle_f32x4(q[2], q[3], _MM_SHUFFLE(3, 1, 3, 1)));
    return _mm512_add_ps(_mm512_shuffle_f32x4(r01, r23, _MM_SHUFFLE(2, 0, 2, 0)),
                         _mm512_shuffle_f32x4(r01, r23, _MM_SHUFFLE(3, 1, 3, 1)));
}

/* Scores of one query row (q, nc chunks of 16) against 16 keys at kr + j * kst. */
AINLINE __m512 qk16(const float *q, const float *kr, size_t kst, const int nc)
{
    __m512 qv[8], part[16];
    for (int c = 0; c < nc; c++) qv[c] = _mm512_load_ps(q + c * 16);
    for (int j = 0; j < 16; j++) {
        __m512 s = _mm512_mul_ps(qv[0], _mm512_load_ps(kr + j * kst));
        for (int c = 1; c < nc; c++) s = _mm512_fmadd_ps(qv[c], _mm512_load_ps(kr + j * kst + c * 16), s);
        part[j] = s;
    }
    return hsum16x16(part);
}

static __m512 qk16_any(const float *q, const float *kr, size_t kst, int nc)
{
    __m512 part[16];
    for (int j = 0; j < 16; j++) {
        __m512 s = _mm512_mul_ps(_mm512_load_ps(q), _mm512_load_ps(kr + j * kst));
        for (int c = 1; c < nc; c++)
            s = _mm512_fmadd_ps(_mm512_load_ps(q + c * 16), _mm512_load_ps(kr + j * kst + c * 16), s);
        part[j] = s;
    }
    return hsum16x16(part);
}

/* Copy one K/V row (head_dim of kv_dt) to f32 dst padded with zeros to dp. */
AINLINE void attn_load_kv_row(float *dst, const void *src, dtype dt, int hd, int dp)
{
    for (int d = 0; d < dp; d += 16) {
        __mmask16 mk = simd_mask_n(hd - d > 0 ? hd - d : 0);
        __m512 v;
        if (dt == DTYPE_F32) {
            v = _mm512_maskz_loadu_ps(mk, (const float *)src + d);
        } else {
            __m256i h = _mm256_maskz_loadu_epi16(mk, (const uint16_t *)src + d);
            v = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
        }
        _mm512_store_ps(dst + d, v);
    }
}

/* One row of an 8-bit float cache -> f32 * scale, zero-padded to dp, by
 * bit moves to f16 and vcvtph2ps (no table):
 *   e5m2: the f16 pattern is the byte << 8 (e5m2 is f16 cut to 8 bits:
 *         subnormals, infinities and NaNs come out exact);
 *   e4m3: sign-extend to 16 bits, << 7 (exponent and mantissa land in the
 *         f16 fields, the sign in bits 14 and 15), clear bit 14: the f16
 *         value is the e4m3 value * 2^-8 for every finite code, subnormals
 *         included (f16 has 2 more exponent bits, so e4m3's subnormals are
 *         f16 subnormals with the same mantissa), so scale4 = scale * 256;
 *         the NaN codes 0x7f / 0xff would read as +-480 and are set to NaN
 *         by a compare.
 * scale4 * (value * 2^-8) rounds exactly as scale * value (a power of 2). */
AINLINE void attn_load_kv_row8(float *dst, const uint8_t *src, int e5m2, float scale, int hd, int dp)
{
    const __m512 sc = _mm512_set1_ps(e5m2 ? scale : scale * 256.0f);
    for (int d = 0; d < dp; d += 16) {
        __mmask16 mk = simd_mask_n(hd - d > 0 ? hd - d : 0);
        __m128i b = _mm_maskz_loadu_epi8(mk, src + d);
        __m512 v;
        if (e5m2) {
            v = _mm512_cvtph_ps(_mm256_slli_epi16(_mm256_cvtepu8_epi16(b), 8));
        } else {
            __m256i h = _mm256_and_si256(_mm256_slli_epi16(_mm256_cvtepi8_epi16(b), 7), _mm256_set1_epi16((short)0xBF80));
            __mmask16 nan = _mm_cmpeq_epi8_mask(_mm_and_si128(b, _mm_set1_epi8(0x7f)), _mm_set1_epi8(0x7f));
            v = _mm512_mask_mov_ps(_mm512_cvtph_ps(h), nan, _mm512_set1_ps(NAN));
        }
        _mm512_store_ps(dst + d, _mm512_mul_ps(v, sc));
    }
}

/* One row of sglc's int8 cache: sign-extend, convert, times the row's
 * token-head scale; zero-padded to dp (masked lanes load 0). */
AINLINE void attn_load_kv_rowi8(float *dst, const int8_t *src, float scale, int hd, int dp)
{
    const __m512 sc = _mm512_set1_ps(scale);
    for (int d = 0; d < dp; d += 16) {
        __mmask16 mk = simd_mask_n(hd - d > 0 ? hd - d : 0);
        __m128i b = _mm_maskz_loadu_epi8(mk, src + d);
        _mm512_store_ps(dst + d, _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(b)), sc));
    }
}

/* int8-q scores (sglc's int8 cache, kern_ref_attention_i8q's numerics).
 * vpdpbusd multiplies u8 by s8 in groups of 4 bytes per 32-bit lane, so
 * the K rows of one block are regrouped once per kv head (shared by its
 * query heads): 16 rows of 64 bytes, each + 128 (xor 0x80: u8), as a 16 x 16
 * transpose of 32-bit groups -> vector g holds group g (bytes 4g..4g+3) of
 * the 16 keys, so one vpdpbusd with q's group g broadcast adds 4 dims to
 * all 16 scores and no horizontal sums are needed.  The +128 adds
 * 128 * sum(qi) to every score: the row's qcor, subtracted at the end. */
AINLINE void attn_i8_kt(uint32_t *kt, const int8_t *const kp[16], int hd, int ng)
{
    const __m512i x80 = _mm512_set1_epi8((char)0x80);
    for (int cb = 0; cb < ng / 16; cb++) {
        __mmask64 mk = hd - 64 * cb >= 64 ? ~(__mmask64)0 : (((__mmask64)1 << (hd - 64 * cb)) - 1);
        __m512i v[16], a[16], b[16];
        for (int j = 0; j < 16; j++)
            v[j] = _mm512_xor_si512(kp[j] ? _mm512_maskz_loadu_epi8(mk, kp[j] + 64 * cb) : _mm512_setzero_si512(), x80);
        for (int i = 0; i < 8; i++) {
            a[2 * i] = _mm512_unpacklo_epi32(v[2 * i], v[2 * i + 1]);
            a[2 * i + 1] = _mm512_unpackhi_epi32(v[2 * i], v[2 * i + 1]);
        }
        for (int i = 0; i < 4; i++) {
            b[4 * i + 0] = _mm512_unpacklo_epi64(a[4 * i], a[4 * i + 2]);
            b[4 * i + 1] = _mm512_unpackhi_epi64(a[4 * i], a[4 * i + 2]);
            b[4 * i + 2] = _mm512_unpacklo_epi64(a[4 * i + 1], a[4 * i + 3]);
            b[4 * i + 3] = _mm512_unpackhi_epi64(a[4 * i + 1], a[4 * i + 3]);
        }
        /* b[4i + e], 128-bit lane L: rows 4i..4i+3 of group 4L + e */
        __m512i *t = (__m512i *)(kt + (size_t)cb * 16 * 16);
        for (int e = 0; e < 4; e++) {
            __m512i c0 = _mm512_shuffle_i32x4(b[e], b[4 + e], 0x44), c1 = _mm512_shuffle_i32x4(b[e], b[4 + e], 0xEE);
            __m512i c2 = _mm512_shuffle_i32x4(b[8 + e], b[12 + e], 0x44), c3 = _mm512_shuffle_i32x4(b[8 + e], b[12 + e], 0xEE);
            _mm512_store_si512(t + e, _mm512_shuffle_i32x4(c0, c2, 0x88));
            _mm512_store_si512(t + 4 + e, _mm512_shuffle_i32x4(c0, c2, 0xDD));
            _mm512_store_si512(t + 8 + e, _mm512_shuffle_i32x4(c1, c3, 0x88));
            _mm512_store_si512(t + 12 + e, _mm512_shuffle_i32x4(c1, c3, 0xDD));
        }
    }
}

/* Integer scores of NR rows (quantized q at qr[i], ng groups) against the
 * 16 keys of kt: each K vector loaded once for the NR rows. */
AINLINE void qk16_i8(__m512i out[], const uint32_t *kt, const uint32_t *const qr[], int ng, const int NR)
{
    __m512i s[4][2];
#pragma GCC unroll 4
    for (int i = 0; i < NR; i++) s[i][0] = s[i][1] = _mm512_setzero_si512();
    for (int g = 0; g < ng; g += 2) {
        __m512i k0 = _mm512_load_si512(kt + (size_t)g * 16), k1 = _mm512_load_si512(kt + (size_t)(g + 1) * 16);
#pragma GCC unroll 4
        for (int i = 0; i < NR; i++) {
            s[i][0] = _mm512_dpbusd_epi32(s[i][0], k0, _mm512_set1_epi32((int)qr[i][g]));
            s[i][1] = _mm512_dpbusd_epi32(s[i][1], k1, _mm512_set1_epi32((int)qr[i][g + 1]));
        }
    }
#pragma GCC unroll 4
    for (int i = 0; i < NR; i++) out[i] = _mm512_add_epi32(s[i][0], s[i][1]);
}

/* One 16-value chunk c of key j's V row: f32 at vr + j * kst, or (I8) sglc's
 * int8 cache row vp[j] widened (its scale folded into p by the caller). */
AINLINE __m512 pv_v16(const float *vr, size_t kst, const int8_t *const vp[], int j, int c, const int I8)
{
    if (I8) return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(vp[j] + c * 16))));
    return _mm512_load_ps(vr + j * kst + c * 16);
}

/* acc rows ar[0..NR) = ar * al + sum_j pr[j] V[j] over nk keys (V per
 * pv_v16), NC chunks of 16: NR * NC accumulators in registers, each V vector
 * loaded once for the NR rows.  Called with constant NC, NR, I8. */
AINLINE void pv_rows(const float *vr, size_t kst, const int8_t *const vp[], int nk, float *const ar[],
                     const float *const pr[], const float al[], const int NC, const int NR, const int I8)
{
    __m512 o[4][8];
#pragma GCC unroll 4
    for (int i = 0; i < NR; i++) {
        __m512 va = _mm512_set1_ps(al[i]);
#pragma GCC unroll 8
        for (int c = 0; c < NC; c++) o[i][c] = _mm512_mul_ps(_mm512_load_ps(ar[i] + c * 16), va);
    }
    for (int j = 0; j < nk; j++) {
        __m512 pj[4];
#pragma GCC unroll 4
        for (int i = 0; i < NR; i++) pj[i] = _mm512_set1_ps(pr[i][j]);
#pragma GCC unroll 8
        for (int c = 0; c < NC; c++) {
            __m512 vv = pv_v16(vr, kst, vp, j, c, I8);
#pragma GCC unroll 4
            for (int i = 0; i < NR; i++) o[i][c] = _mm512_fmadd_ps(pj[i], vv, o[i][c]);
        }
    }
#pragma GCC unroll 4
    for (int i = 0; i < NR; i++)
#pragma GCC unroll 8
        for (int c = 0; c < NC; c++) _mm512_store_ps(ar[i] + c * 16, o[i][c]);
}

/* One row, any number of chunks (the fallback of pv_rows). */
AINLINE void pv_row_any(const float *vr, size_t kst, const int8_t *const vp[], int nk, float *ar, const float *pr,
                        float al, int nc, const int I8)
{
    __m512 va = _mm512_set1_ps(al);
    for (int c = 0; c < nc; c++) {
        __m512 o = _mm512_mul_ps(_mm512_load_ps(ar + c * 16), va);
        for (int j = 0; j < nk; j++) o = _mm512_fmadd_ps(_mm512_set1_ps(pr[j]), pv_v16(vr, kst, vp, j, c, I8), o);
        _mm512_store_ps(ar + c * 16, o);
    }
}

/* P.V of up to 4 rows (rb) over nk keys, by the shapes pv_rows is built for. */
AINLINE void pv_dispatch(const float *vr, size_t kst, const int8_t *const vp[], int nk, int rb, float *const ar[],
                         const float *const pr[], const float al[], int nc, const int I8)
{
    if (rb == 4 && nk == KB) pv_rows(vr, kst, vp, KB, ar, pr, al, 4, 4, I8);
    else if (rb == 4) pv_rows(vr, kst, vp, nk, ar, pr, al, 4, 4, I8);
    else if (rb == 2 && nk == KB) pv_rows(vr, kst, vp, KB, ar, pr, al, 8, 2, I8);
    else if (rb == 2) pv_rows(vr, kst, vp, nk, ar, pr, al, 8, 2, I8);
    else pv_row_any(vr, kst, vp, nk, ar[0], pr[0], al[0], nc, I8);
}

/* Integer P.V (kern_ref_attention_i8qp's numerics).  vpdpbusd adds 4 u8 x s8
 * products per 32-bit lane, so V's rows (token-major bytes) are interleaved
 * once per block and kv head, shared by its query heads: per 64-dim chunk and
 * group of 4 keys, two byte unpacks and two word unpacks of the 4 rows give
 * W_k (k = 0..3) with dword i of 128-bit lane L = the 4 keys' bytes of dim
 * 16L + 4k + i.  vt: (hd / 64, 4 groups, 4 k) vectors; keys past nk are 0. */
AINLINE void attn_i8_vt(uint8_t *vt, const int8_t *const vp[16], int hd)
{
    __m512i *t = (__m512i *)vt;
    for (int ch = 0; ch < hd / 64; ch++)
        for (int g = 0; g < 4; g++) {
            __m512i r[4];
            for (int i = 0; i < 4; i++)
                r[i] = vp[4 * g + i] ? _mm512_loadu_si512(vp[4 * g + i] + 64 * ch) : _mm512_setzero_si512();
            __m512i a = _mm512_unpacklo_epi8(r[0], r[1]), b = _mm512_unpackhi_epi8(r[0], r[1]);
            __m512i c = _mm512_unpacklo_epi8(r[2], r[3]), d = _mm512_unpackhi_epi8(r[2], r[3]);
            __m512i *w = t + (ch * 4 + g) * 4;
            _mm512_store_si512(w + 0, _mm512_unpacklo_epi16(a, c));
            _mm512_store_si512(w + 1, _mm512_unpackhi_epi16(a, c));
            _mm512_store_si512(w + 2, _mm512_unpacklo_epi16(b, d));
            _mm512_store_si512(w + 3, _mm512_unpackhi_epi16(b, d));
        }
}

/* The accumulators of integer P.V hold, per 64-dim chunk, dim 16L + 4k + i at
 * 16k + 4L + i (the vt order): dst = acc in dim order (the map swaps L, k). */
static void attn_pv_unperm(float *dst, const float *acc, int hd)
{
    for (int c = 0; c < hd; c += 64)
        for (int k = 0; k < 4; k++)
            for (int l = 0; l < 4; l++)
                for (int i = 0; i < 4; i++) dst[c + 16 * l + 4 * k + i] = acc[c + 16 * k + 4 * l + i];
}

/* acc rows ar[0..4) = ar * al + psc * sum_j pu_j V_j over the block (vt of one
 * kv head, nch 64-dim chunks), 16 integer accumulators per chunk, each vt
 * vector loaded once for the 4 rows. */
AINLINE void pv_rows_u8(const uint8_t *vt, int nch, float *const ar[4], const uint8_t *const pu[4],
                        const float ps[4], const float al[4])
{
    const __m512i *t = (const __m512i *)vt;
    for (int ch = 0; ch < nch; ch++) {
        __m512i s[4][4];
#pragma GCC unroll 4
        for (int i = 0; i < 4; i++)
#pragma GCC unroll 4
            for (int k = 0; k < 4; k++) s[i][k] = _mm512_setzero_si512();
#pragma GCC unroll 4
        for (int g = 0; g < 4; g++) {
            __m512i w[4];
#pragma GCC unroll 4
            for (int k = 0; k < 4; k++) w[k] = _mm512_load_si512(t + (ch * 4 + g) * 4 + k);
#pragma GCC unroll 4
            for (int i = 0; i < 4; i++) {
                uint32_t pg;
                memcpy(&pg, pu[i] + 4 * g, 4);
                __m512i bp = _mm512_set1_epi32((int)pg);
#pragma GCC unroll 4
                for (int k = 0; k < 4; k++) s[i][k] = _mm512_dpbusd_epi32(s[i][k], bp, w[k]);
            }
        }
#pragma GCC unroll 4
        for (int i = 0; i < 4; i++) {
            __m512 va = _mm512_set1_ps(al[i]), vs = _mm512_set1_ps(ps[i]);
#pragma GCC unroll 4
            for (int k = 0; k < 4; k++) {
                float *o = ar[i] + ch * 64 + k * 16;
                _mm512_store_ps(o, _mm512_fmadd_ps(_mm512_cvtepi32_ps(s[i][k]), vs, _mm512_mul_ps(_mm512_load_ps(o), va)));
            }
        }
    }
}

/* One block of KB keys for every row of the unit (see attn_blk).  Three
 * passes over the rows, each with independent iterations so the core
 * overlaps rows (one fused pass was latency bound on the per-row max ->
 * exp -> sum chain). */
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
    float *const bm = b->bm, *const alpha = b->alpha;
    const float neg_inf = -INFINITY;
    const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    const __m512i vp = _mm512_add_epi32(_mm512_set1_epi32(p0), lane);
    /* 1: masked scores */
    if (b->kt) { /* int8-q: integer dots, 4 rows of one kv head at a time */
        const int step = nh % 4 == 0 ? 4 : 1;
        for (int r0 = 0; r0 < R; r0 += step) {
            const int khl = r0 / nh % nkh;
            const uint32_t *kt = b->kt + (size_t)khl * b->ng * KB;
            const uint32_t *qr[4];
            __m512i is[4];
            for (int i = 0; i < step; i++) qr[i] = b->qi + (size_t)(r0 + i) * b->ng;
            if (step == 4) qk16_i8(is, kt, qr, b->ng, 4);
            else qk16_i8(is, kt, qr, b->ng, 1);
            const __m512 ks = _mm512_load_ps(b->ksc + khl * KB);
            for (int i = 0; i < step; i++) {
                const int r = r0 + i;
                float *srow = sbuf + r * KB;
                if (rhi[r] <= p0 || rlo[r] >= p0 + nk) {
                    _mm512_store_ps(srow, _mm512_set1_ps(neg_inf));
                    bm[r] = neg_inf;
                    continue;
                }
                __m512 s = _mm512_cvtepi32_ps(_mm512_sub_epi32(is[i], _mm512_set1_epi32(b->qcor[r])));
                s = _mm512_mul_ps(s, _mm512_mul_ps(_mm512_set1_ps(b->qsc[r]), ks));
                if (softcap > 0.0f) {
                    __m512 cap = _mm512_set1_ps(softcap);
                    s = _mm512_mul_ps(cap, simd_tanh(_mm512_div_ps(s, cap)));
                }
                __mmask16 ok = _mm512_cmpge_epi32_mask(vp, _mm512_set1_epi32(rlo[r])) &
                               _mm512_cmplt_epi32_mask(vp, _mm512_set1_epi32(rhi[r]));
                if (tmask) ok &= (__mmask16)tmask[r];
                s = _mm512_mask_blend_ps(ok, _mm512_set1_ps(neg_inf), s);
                _mm512_store_ps(srow, s);
                bm[r] = _mm512_reduce_max_ps(s);
            }
        }
    } else
    for (int r = 0; r < R; r++) {
        float *srow = sbuf + r * KB;
        if (rhi[r] <= p0 || rlo[r] >= p0 + nk) {
            _mm512_store_ps(srow, _mm512_set1_ps(neg_inf));
            bm[r] = neg_inf;
            continue;
        }
        const float *kr = kbuf + (size_t)(r / nh % nkh) * dp;
        __m512 s;
        switch (nc) {
        case 4: s = qk16(qbuf + r * dp, kr, kst, 4); break;
        case 8: s = qk16(qbuf + r * dp, kr, kst, 8); break;
        default: s = qk16_any(qbuf + r * dp, kr, kst, nc); break;
        }
        if (softcap > 0.0f) {
            __m512 cap = _mm512_set1_ps(softcap);
            s = _mm512_mul_ps(cap, simd_tanh(_mm512_div_ps(s, cap)));
        }
        __mmask16 ok = _mm512_cmpge_epi32_mask(vp, _mm512_set1_epi32(rlo[r])) &
                       _mm512_cmplt_epi32_mask(vp, _mm512_set1_epi32(rhi[r]));
        if (tmask) ok &= (__mmask16)tmask[r]; /* draft tree: ancestors only */
        s = _mm512_mask_blend_ps(ok, _mm512_set1_ps(neg_inf), s);
        _mm512_store_ps(srow, s);
        bm[r] = _mm512_reduce_max_ps(s);
    }
    /* 2: running max and rescale factor, 16 rows per vector; a row that
     * has seen no key yet keeps max -inf and alpha 1 */
    for (int r = 0; r < R; r += 16) {
        __mmask16 mk = simd_mask_n(R - r);
        __m512 mo = _mm512_mask_loadu_ps(_mm512_set1_ps(neg_inf), mk, mx + r);
        __m512 mn = _mm512_max_ps(mo, _mm512_mask_loadu_ps(_mm512_set1_ps(neg_inf), mk, bm + r));
        __mmask16 fin = _mm512_cmp_ps_mask(mn, _mm512_set1_ps(neg_inf), _CMP_NEQ_OQ);
        __m512 al = _mm512_mask_blend_ps(fin, _mm512_set1_ps(1.0f), simd_exp(_mm512_sub_ps(mo, mn)));
        _mm512_mask_storeu_ps(mx + r, mk, mn);
        _mm512_mask_storeu_ps(alpha + r, mk, al);
    }
    /* 3a: probabilities (over the scores, in place) and sums */
    for (int r = 0; r < R; r++) {
        if (bm[r] == neg_inf) continue; /* nothing visible: alpha is 1 */
        __m512 sv = _mm512_load_ps(sbuf + r * KB);
        __mmask16 ok = _mm512_cmp_ps_mask(sv, _mm512_set1_ps(neg_inf), _CMP_NEQ_OQ);
        __m512 pr = _mm512_maskz_mov_ps(ok, simd_exp(_mm512_sub_ps(sv, _mm512_set1_ps(mx[r]))));
        sm[r] = sm[r] * alpha[r] + _mm512_reduce_add_ps(pr);
        if (b->vrow) pr = _mm512_mul_ps(pr, _mm512_loadu_ps(b->vsc + (r / nh % nkh) * KB)); /* V's scales */
        if (b->vt) { /* integer P.V: p' to u8, ps = max / 255, round half to even */
            const float ps = _mm512_reduce_max_ps(pr) / 255.0f;
            __m512i u = _mm512_setzero_si512();
            if (ps > 0.0f) u = _mm512_min_epi32(_mm512_cvtps_epi32(_mm512_div_ps(pr, _mm512_set1_ps(ps))), _mm512_set1_epi32(255));
            _mm_store_si128((__m128i *)(b->pu + r * KB), _mm512_cvtepi32_epi8(u));
            b->psc[r] = ps;
            continue;
        }
        _mm512_store_ps(sbuf + r * KB, pr);
    }
    if (b->vt) { /* 3b with integer P.V: rows of one kv head 4 at a time */
        static const uint8_t zero_pu[KB] = {0};
        const size_t vst = (size_t)(dp / 64) * 16 * 64; /* vt bytes per kv head */
        for (int g0 = 0; g0 < R; g0 += nh) {
            int rl[AR], nr = 0;
            for (int r = g0; r < g0 + nh; r++)
                if (bm[r] != neg_inf) rl[nr++] = r;
            for (int i0 = 0; i0 < nr; i0 += 4) {
                float *ar[4], al[4], ps[4];
                const uint8_t *pq[4];
                for (int i = 0; i < 4; i++) {
                    int ok = i0 + i < nr, r = ok ? rl[i0 + i] : 0;
                    ar[i] = ok ? acc + r * dp : b->pv_dummy;
                    pq[i] = ok ? b->pu + r * KB : zero_pu;
                    ps[i] = ok ? b->psc[r] : 0.0f;
                    al[i] = ok ? alpha[r] : 1.0f;
                }
                pv_rows_u8(b->vt + (size_t)(g0 / nh % nkh) * vst, dp / 64, ar, pq, ps, al);
            }
        }
        return;
    }
    /* 3b: acc = acc * alpha + P V.  The rows of one kv head (nh consecutive
     * rows) read the same V rows: up to 16 / nc of them at a time share each
     * V load (a group padded with rows of p = 0 into a dummy accumulator) */
    const int rb = nc == 4 ? 4 : nc == 8 ? 2 : 1;
    for (int g0 = 0; g0 < R; g0 += nh) {
        const float *vr = vbuf + (size_t)(g0 / nh % nkh) * dp;
        int rl[AR], nr = 0;
        for (int r = g0; r < g0 + nh; r++)
            if (bm[r] != neg_inf) rl[nr++] = r;
        for (int i0 = 0; i0 < nr; i0 += rb) {
            float *ar[4];
            const float *pr[4];
            float al[4];
            for (int i = 0; i < rb; i++) {
                int ok = i0 + i < nr, r = ok ? rl[i0 + i] : 0;
                ar[i] = ok ? acc + r * dp : b->pv_dummy;
                pr[i] = ok ? sbuf + r * KB : b->pv_zero;
                al[i] = ok ? alpha[r] : 1.0f;
            }
            if (b->vrow) {
                const int8_t *const *vp = b->vrow + (size_t)(g0 / nh % nkh) * KB;
                pv_dispatch(NULL, 0, vp, nk, rb, ar, pr, al, nc, 1);
            } else {
                pv_dispatch(vr, kst, NULL, nk, rb, ar, pr, al, nc, 0);
            }
        }
    }
}

AINLINE void attn_store_row(float *o, const float *acc, float inv, int hd, int nc)
{
    __m512 vi = _mm512_set1_ps(inv);
    for (int c = 0; c < nc; c++)
        _mm512_mask_storeu_ps(o + c * 16, simd_mask_n(hd - c * 16), _mm512_mul_ps(_mm512_load_ps(acc + c * 16), vi));
}

#define ATTN_I8QDOT 1
#define ATTN_DEFINE_KERNEL
#define ATTN_NAME attention512
#define ATTN_SCRATCH_NAME attention_scratch512
#include "kernels/kernels_attn_impl.h"

static const kern_vtable vt_avx512 = {
    .mat_pack = pack512,
    .matmul_scratch = matmul_scratch512,
    .matmul = matmul512,
    .attention_scratch = attention_scratch512,
    .attention = attention512,
    .rmsnorm = rmsnorm512,
    .rope_apply = rope512,
    .silu_mul = silu_mul512,
    .gelu_tanh_mul = gelu_tanh_mul512,
    .add = add512,
    .softmax = softmax512,
    .argmax = argmax512,
    .dot_f32 = dot512,
};

const kern_vtable *const kern_vtable_avx512 = &vt_avx512;
