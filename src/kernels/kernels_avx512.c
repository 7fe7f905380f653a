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
 * For bf16 weights the activations are rounded to bf16 once per call into
 * per-thread scratch (row-major (rows, k-pairs) of packed bf16 pairs); every
 * output element is then one fixed sequence of vdpbf16ps, independent of m,
 * of the thread split and of the blocking (partial sums go through y as f32,
 * which is exact), so results are bitwise batch-invariant.
 *
 * Blocking (GEMM): threads own disjoint ranges of panels.  Rows come in
 * chunks of MC (the bf16 copy of one chunk is the scratch); inside a chunk,
 * k is cut in KC blocks so a panel block (KC pairs x 128 B = 24 KiB) stays in
 * L1 while the micro-kernel walks the chunk RB = 12 rows at a time (24 zmm
 * accumulators).  For m <= RB (decode) there is no k blocking: each thread
 * streams its contiguous slab of panels once, with software prefetch.
 *
 * Attention: flash-style online softmax.  A work unit is (kv head, block of
 * queries x query heads of that group), up to AR = 32 rows, so every K/V row
 * is loaded (and converted from bf16) once per unit.  Keys go 16 at a time:
 * 16 rows of K are copied to f32 scratch, each query row's 16 dot products
 * are summed with a transpose-add tree into one zmm of scores, masked
 * (causal / sliding window), soft-capped, and folded into the running max,
 * sum and accumulator.  Units are dealt round-robin to threads (causal
 * prefill has more work in late queries).  Scratch is O(AR * head_dim).
 *
 * Elementwise: vector exp (Cephes-style polynomial, ~1 ulp, scalef for
 * 2^n); sigmoid/tanh/gelu built on it. */
#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels_impl.h"

#define NB 32          /* output columns per panel */
#define RB 12          /* rows per micro-kernel call */
#define MC 240         /* rows per activation chunk (multiple of RB) */
#define KC_PAIRS 192   /* k pairs per L1 block (bf16): 24 KiB of panel */
#define KC_F32 192     /* k per L1 block (f32): 24 KiB of panel */
#define PF_BYTES 1024  /* decode prefetch distance */

enum { LAYOUT_BF16 = 0x5121, LAYOUT_F32 = 0x5122 };

#define AINLINE static inline __attribute__((always_inline))

static inline size_t round_up(size_t v, size_t a) { return (v + a - 1) / a * a; }

/* ---- vector math ------------------------------------------------------- */

/* exp(x) for 16 lanes, ~1 ulp; exp(-inf) = 0, overflow -> inf. */
AINLINE __m512 exp512(__m512 x)
{
    x = _mm512_max_ps(x, _mm512_set1_ps(-104.0f));
    x = _mm512_min_ps(x, _mm512_set1_ps(89.0f));
    __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
    __m512 p = _mm512_set1_ps(1.9875691500e-4f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
    p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
    return _mm512_scalef_ps(p, n);
}

/* tanh(x) = sign(x) * (1 - 2 / (exp(2|x|) + 1)); absolute error ~1e-7. */
AINLINE __m512 tanh512(__m512 x)
{
    __m512 ax = _mm512_abs_ps(x);
    __m512 e = exp512(_mm512_add_ps(ax, ax));
    __m512 t = _mm512_sub_ps(_mm512_set1_ps(1.0f),
                             _mm512_div_ps(_mm512_set1_ps(2.0f), _mm512_add_ps(e, _mm512_set1_ps(1.0f))));
    /* copy the sign of x */
    return _mm512_castsi512_ps(_mm512_or_si512(
        _mm512_castps_si512(t),
        _mm512_and_si512(_mm512_castps_si512(x), _mm512_set1_epi32((int)0x80000000u))));
}

AINLINE __mmask16 tail_mask(int n) { return n >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << n) - 1u); }

/* ---- weight packing ---------------------------------------------------- */

static inline float src_get(const void *src, dtype dt, size_t idx)
{
    switch (dt) {
    case DTYPE_F32: return ((const float *)src)[idx];
    case DTYPE_F16: return f16_to_f32(((const uint16_t *)src)[idx]);
    default: return bf16_to_f32(((const uint16_t *)src)[idx]);
    }
}

static int pack512(kern_mat *m, const void *src, dtype sdt)
{
    int n = m->n, k = m->k;
    if (sdt != DTYPE_F32 && sdt != DTYPE_F16 && sdt != DTYPE_BF16) return -1;
    size_t npan = (size_t)(n + NB - 1) / NB;
    if (m->dt == DTYPE_BF16) {
        size_t k2 = (size_t)(k + 1) / 2;
        size_t bytes = npan * k2 * NB * 2 * sizeof(uint16_t);
        uint16_t *d = aligned_alloc(64, bytes);
        if (!d) return -1;
        memset(d, 0, bytes);
        for (size_t b = 0; b < npan; b++) {
            uint16_t *pan = d + b * k2 * NB * 2;
            for (int j = 0; j < NB; j++) {
                size_t c = b * NB + (size_t)j;
                if (c >= (size_t)n) break;
                size_t row = c * (size_t)k;
                if (sdt == DTYPE_BF16) {
                    const uint16_t *s = (const uint16_t *)src + row;
                    for (int i = 0; i < k; i++) pan[((size_t)(i >> 1) * NB + j) * 2 + (i & 1)] = s[i];
                } else {
                    for (int i = 0; i < k; i++)
                        pan[((size_t)(i >> 1) * NB + j) * 2 + (i & 1)] =
                            f32_to_bf16(src_get(src, sdt, row + (size_t)i));
                }
            }
        }
        m->owned = d;
        m->bytes = bytes;
        m->layout = LAYOUT_BF16;
    } else {
        size_t bytes = npan * (size_t)k * NB * sizeof(float);
        float *d = aligned_alloc(64, bytes);
        if (!d) return -1;
        memset(d, 0, bytes);
        for (size_t b = 0; b < npan; b++) {
            float *pan = d + b * (size_t)k * NB;
            for (int j = 0; j < NB; j++) {
                size_t c = b * NB + (size_t)j;
                if (c >= (size_t)n) break;
                for (int i = 0; i < k; i++)
                    pan[(size_t)i * NB + j] = src_get(src, sdt, c * (size_t)k + (size_t)i);
            }
        }
        m->owned = d;
        m->bytes = bytes;
        m->layout = LAYOUT_F32;
    }
    m->data = m->owned;
    return 0;
}

/* ---- matmul micro-kernels ---------------------------------------------- */

/* y[R][32] (+)= xb[R][np pairs] . panel[np pairs][32]; masks select the
 * valid columns; load_y: accumulate onto y; bias (when non-NULL) added. */
AINLINE void mk_bf16(const int R, const uint32_t *xb, size_t xs, const uint16_t *w, int np,
                     float *y, size_t ldy, __mmask16 m0, __mmask16 m1, int load_y,
                     const float *bias)
{
    __m512 acc[RB][2];
    for (int r = 0; r < R; r++) {
        if (load_y) {
            acc[r][0] = _mm512_maskz_loadu_ps(m0, y + r * ldy);
            acc[r][1] = _mm512_maskz_loadu_ps(m1, y + r * ldy + 16);
        } else {
            acc[r][0] = _mm512_setzero_ps();
            acc[r][1] = _mm512_setzero_ps();
        }
    }
    if (R == 1) {
        /* decode: memory bound; two independent chains per half and prefetch */
        __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps();
        int p = 0;
        for (; p + 2 <= np; p += 2) {
            const uint16_t *wp = w + (size_t)p * 64;
            _mm_prefetch((const char *)wp + PF_BYTES, _MM_HINT_T0);
            _mm_prefetch((const char *)wp + PF_BYTES + 64, _MM_HINT_T0);
            _mm_prefetch((const char *)wp + PF_BYTES + 128, _MM_HINT_T0);
            _mm_prefetch((const char *)wp + PF_BYTES + 192, _MM_HINT_T0);
            __m512bh x0 = (__m512bh)_mm512_set1_epi32((int)xb[p]);
            __m512bh x1 = (__m512bh)_mm512_set1_epi32((int)xb[p + 1]);
            acc[0][0] = _mm512_dpbf16_ps(acc[0][0], x0, (__m512bh)_mm512_load_si512(wp));
            acc[0][1] = _mm512_dpbf16_ps(acc[0][1], x0, (__m512bh)_mm512_load_si512(wp + 32));
            a0 = _mm512_dpbf16_ps(a0, x1, (__m512bh)_mm512_load_si512(wp + 64));
            a1 = _mm512_dpbf16_ps(a1, x1, (__m512bh)_mm512_load_si512(wp + 96));
        }
        for (; p < np; p++) {
            const uint16_t *wp = w + (size_t)p * 64;
            __m512bh x0 = (__m512bh)_mm512_set1_epi32((int)xb[p]);
            acc[0][0] = _mm512_dpbf16_ps(acc[0][0], x0, (__m512bh)_mm512_load_si512(wp));
            acc[0][1] = _mm512_dpbf16_ps(acc[0][1], x0, (__m512bh)_mm512_load_si512(wp + 32));
        }
        acc[0][0] = _mm512_add_ps(acc[0][0], a0);
        acc[0][1] = _mm512_add_ps(acc[0][1], a1);
    } else {
        for (int p = 0; p < np; p++) {
            __m512bh w0 = (__m512bh)_mm512_load_si512(w + (size_t)p * 64);
            __m512bh w1 = (__m512bh)_mm512_load_si512(w + (size_t)p * 64 + 32);
            for (int r = 0; r < R; r++) {
                __m512bh xv = (__m512bh)_mm512_set1_epi32((int)xb[r * xs + p]);
                acc[r][0] = _mm512_dpbf16_ps(acc[r][0], xv, w0);
                acc[r][1] = _mm512_dpbf16_ps(acc[r][1], xv, w1);
            }
        }
    }
    __m512 b0 = _mm512_setzero_ps(), b1 = _mm512_setzero_ps();
    if (bias) {
        b0 = _mm512_maskz_loadu_ps(m0, bias);
        b1 = _mm512_maskz_loadu_ps(m1, bias + 16);
    }
    for (int r = 0; r < R; r++) {
        _mm512_mask_storeu_ps(y + r * ldy, m0, _mm512_add_ps(acc[r][0], b0));
        _mm512_mask_storeu_ps(y + r * ldy + 16, m1, _mm512_add_ps(acc[r][1], b1));
    }
}

AINLINE void mk_f32(const int R, const float *x, size_t ldx, const float *w, int nk, float *y,
                    size_t ldy, __mmask16 m0, __mmask16 m1, int load_y, const float *bias)
{
    __m512 acc[RB][2];
    for (int r = 0; r < R; r++) {
        if (load_y) {
            acc[r][0] = _mm512_maskz_loadu_ps(m0, y + r * ldy);
            acc[r][1] = _mm512_maskz_loadu_ps(m1, y + r * ldy + 16);
        } else {
            acc[r][0] = _mm512_setzero_ps();
            acc[r][1] = _mm512_setzero_ps();
        }
    }
    for (int i = 0; i < nk; i++) {
        const float *wp = w + (size_t)i * NB;
        if (R == 1) _mm_prefetch((const char *)wp + PF_BYTES, _MM_HINT_T0);
        __m512 w0 = _mm512_load_ps(wp), w1 = _mm512_load_ps(wp + 16);
        for (int r = 0; r < R; r++) {
            __m512 xv = _mm512_set1_ps(x[r * ldx + i]);
            acc[r][0] = _mm512_fmadd_ps(xv, w0, acc[r][0]);
            acc[r][1] = _mm512_fmadd_ps(xv, w1, acc[r][1]);
        }
    }
    __m512 b0 = _mm512_setzero_ps(), b1 = _mm512_setzero_ps();
    if (bias) {
        b0 = _mm512_maskz_loadu_ps(m0, bias);
        b1 = _mm512_maskz_loadu_ps(m1, bias + 16);
    }
    for (int r = 0; r < R; r++) {
        _mm512_mask_storeu_ps(y + r * ldy, m0, _mm512_add_ps(acc[r][0], b0));
        _mm512_mask_storeu_ps(y + r * ldy + 16, m1, _mm512_add_ps(acc[r][1], b1));
    }
}

typedef void (*mk_bf16_fn)(const uint32_t *, size_t, const uint16_t *, int, float *, size_t,
                           __mmask16, __mmask16, int, const float *);
typedef void (*mk_f32_fn)(const float *, size_t, const float *, int, float *, size_t, __mmask16,
                          __mmask16, int, const float *);

#define MK_INST(R)                                                                               \
    static void mk_bf16_##R(const uint32_t *xb, size_t xs, const uint16_t *w, int np, float *y,  \
                            size_t ldy, __mmask16 m0, __mmask16 m1, int ly, const float *b)      \
    {                                                                                            \
        mk_bf16(R, xb, xs, w, np, y, ldy, m0, m1, ly, b);                                        \
    }                                                                                            \
    static void mk_f32_##R(const float *x, size_t ldx, const float *w, int nk, float *y,         \
                           size_t ldy, __mmask16 m0, __mmask16 m1, int ly, const float *b)       \
    {                                                                                            \
        mk_f32(R, x, ldx, w, nk, y, ldy, m0, m1, ly, b);                                         \
    }
MK_INST(1) MK_INST(2) MK_INST(3) MK_INST(4) MK_INST(5) MK_INST(6)
MK_INST(7) MK_INST(8) MK_INST(9) MK_INST(10) MK_INST(11) MK_INST(12)

static const mk_bf16_fn mk_bf16_tab[RB + 1] = {
    NULL, mk_bf16_1, mk_bf16_2, mk_bf16_3, mk_bf16_4, mk_bf16_5, mk_bf16_6,
    mk_bf16_7, mk_bf16_8, mk_bf16_9, mk_bf16_10, mk_bf16_11, mk_bf16_12};
static const mk_f32_fn mk_f32_tab[RB + 1] = {
    NULL, mk_f32_1, mk_f32_2, mk_f32_3, mk_f32_4, mk_f32_5, mk_f32_6,
    mk_f32_7, mk_f32_8, mk_f32_9, mk_f32_10, mk_f32_11, mk_f32_12};

/* ---- matmul driver ----------------------------------------------------- */

/* Row stride of the bf16 activation copy, in k-pairs (64-byte rows). */
static inline size_t xb_stride(int k) { return round_up((size_t)(k + 1) / 2, 16); }

static size_t matmul_scratch512(int m, int k)
{
    if (m <= 0 || k <= 0) return 64;
    size_t rows = (size_t)(m < MC ? m : MC);
    return rows * xb_stride(k) * sizeof(uint32_t) + 64;
}

/* x rows (rows, k) f32 -> xb (rows, xs) bf16 pairs, zero padded. */
static void x_to_bf16(uint32_t *xb, size_t xs, const float *x, int rows, int k)
{
    for (int r = 0; r < rows; r++) {
        const float *xr = x + (size_t)r * k;
        __m512i *d = (__m512i *)(xb + (size_t)r * xs);
        for (size_t i = 0; i < xs * 2; i += 32) {
            int left = k - (int)i;
            __m512 lo = _mm512_setzero_ps(), hi = _mm512_setzero_ps();
            if (left > 0) lo = _mm512_maskz_loadu_ps(tail_mask(left), xr + i);
            if (left > 16) hi = _mm512_maskz_loadu_ps(tail_mask(left - 16), xr + i + 16);
            _mm512_store_si512(d + i / 32, (__m512i)_mm512_cvtne2ps_pbh(hi, lo));
        }
    }
}

static void matmul512(float *y, const float *x, int m, const kern_mat *w, const float *bias,
                      int ith, int nth, void *scratch)
{
    if (w->layout != LAYOUT_BF16 && w->layout != LAYOUT_F32) {
        kern_ref_matmul(y, x, m, w, bias, ith, nth, scratch);
        return;
    }
    int n = w->n, k = w->k;
    int npan = (n + NB - 1) / NB;
    int plo, phi;
    kern_split(npan, ith, nth, &plo, &phi);
    if (plo >= phi || m <= 0) return;

    if (w->layout == LAYOUT_BF16) {
        int k2 = (k + 1) / 2;
        size_t xs = xb_stride(k);
        uint32_t *xb = (uint32_t *)round_up((uintptr_t)scratch, 64);
        const uint16_t *wd = w->data;
        int kc = m <= RB ? k2 : KC_PAIRS;
        for (int r0 = 0; r0 < m; r0 += MC) {
            int mc = m - r0 < MC ? m - r0 : MC;
            x_to_bf16(xb, xs, x + (size_t)r0 * k, mc, k);
            for (int p0 = 0; p0 < k2; p0 += kc) {
                int pc = k2 - p0 < kc ? k2 - p0 : kc;
                int last = p0 + pc == k2;
                for (int b = plo; b < phi; b++) {
                    const uint16_t *wp = wd + ((size_t)b * k2 + p0) * NB * 2;
                    int nc = n - b * NB;
                    __mmask16 m0 = tail_mask(nc), m1 = tail_mask(nc - 16 > 0 ? nc - 16 : 0);
                    const float *bp = last && bias ? bias + (size_t)b * NB : NULL;
                    for (int r = 0; r < mc; r += RB) {
                        int R = mc - r < RB ? mc - r : RB;
                        mk_bf16_tab[R](xb + (size_t)r * xs + p0, xs, wp, pc,
                                       y + (size_t)(r0 + r) * n + (size_t)b * NB, (size_t)n, m0,
                                       m1, p0 > 0, bp);
                    }
                }
            }
        }
    } else {
        const float *wd = w->data;
        int kc = m <= RB ? k : KC_F32;
        for (int r0 = 0; r0 < m; r0 += MC) {
            int mc = m - r0 < MC ? m - r0 : MC;
            for (int i0 = 0; i0 < k; i0 += kc) {
                int ic = k - i0 < kc ? k - i0 : kc;
                int last = i0 + ic == k;
                for (int b = plo; b < phi; b++) {
                    const float *wp = wd + ((size_t)b * k + i0) * NB;
                    int nc = n - b * NB;
                    __mmask16 m0 = tail_mask(nc), m1 = tail_mask(nc - 16 > 0 ? nc - 16 : 0);
                    const float *bp = last && bias ? bias + (size_t)b * NB : NULL;
                    for (int r = 0; r < mc; r += RB) {
                        int R = mc - r < RB ? mc - r : RB;
                        mk_f32_tab[R](x + (size_t)(r0 + r) * k + i0, (size_t)k, wp, ic,
                                      y + (size_t)(r0 + r) * n + (size_t)b * NB, (size_t)n, m0,
                                      m1, i0 > 0, bp);
                    }
                }
            }
        }
    }
}

/* ---- attention --------------------------------------------------------- */

#define AR 32   /* rows (query x head) per unit */
#define KB 16   /* keys per block */

/* Scratch layout (floats, Dp = head_dim rounded up to 16):
 *   kbuf (KB, Dp) | vbuf (KB, Dp) | qbuf (AR, Dp) | acc (AR, Dp) | mx (AR) | sum (AR) */
static size_t attention_scratch512(int n_kv, int head_dim)
{
    (void)n_kv;
    size_t dp = round_up((size_t)(head_dim > 0 ? head_dim : 1), 16);
    return (2 * KB * dp + 2 * AR * dp + 2 * AR) * sizeof(float) + 128;
}

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

/* Copy one K/V row (head_dim of kv_dt) to f32 dst padded with zeros to dp. */
AINLINE void load_kv_row(float *dst, const void *src, dtype dt, int hd, int dp)
{
    for (int d = 0; d < dp; d += 16) {
        __mmask16 mk = tail_mask(hd - d > 0 ? hd - d : 0);
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

static void attention512(const kern_attn_args *a, int ith, int nth, void *scratch)
{
    const int hd = a->head_dim, dp = (int)round_up((size_t)hd, 16), nc = dp / 16;
    const int group = a->n_head / a->n_kv_head;
    const size_t kv_row = (size_t)a->n_kv_head * hd;
    const size_t esz = a->kv_dt == DTYPE_F32 ? 4 : 2;
    float *kbuf = (float *)round_up((uintptr_t)scratch, 64);
    float *vbuf = kbuf + KB * dp, *qbuf = vbuf + KB * dp, *acc = qbuf + AR * dp;
    float *mx = acc + AR * dp, *sm = mx + AR;

    /* unit shape: gh query heads x qb queries; shrink gh when there would be
     * too few units to keep every thread busy (decode, MQA) */
    int gh = group < AR ? group : AR;
    int n_hc = (group + gh - 1) / gh;
    while (gh > 1 && a->n_kv_head * n_hc * a->n_q < 2 * nth) {
        gh = (gh + 1) / 2;
        n_hc = (group + gh - 1) / gh;
    }
    int qb = AR / gh;
    int n_qb = (a->n_q + qb - 1) / qb;
    int n_units = a->n_kv_head * n_hc * n_qb;
    const float neg_inf = -INFINITY;
    const __m512 vscale = _mm512_set1_ps(a->scale);

    for (int u = ith; u < n_units; u += nth) {
        int qbi = u % n_qb, rest = u / n_qb;
        int hc = rest % n_hc, kh = rest / n_hc;
        int h0 = kh * group + hc * gh;
        int nh = group - hc * gh < gh ? group - hc * gh : gh;
        int i0 = qbi * qb, nq = a->n_q - i0 < qb ? a->n_q - i0 : qb;
        int R = nq * nh;
        int lo_all = a->n_kv, hi_all = 0; /* key range of the unit: [lo_all, hi_all) */
        int rlo[AR], rhi[AR];
        for (int r = 0; r < R; r++) {
            int i = i0 + r / nh, h = h0 + r % nh;
            int pos = a->n_kv - a->n_q + i;
            int start = 0;
            if (a->sliding_window > 0 && pos - a->sliding_window + 1 > 0)
                start = pos - a->sliding_window + 1;
            rlo[r] = start;
            rhi[r] = pos + 1;
            if (start < lo_all) lo_all = start;
            if (pos + 1 > hi_all) hi_all = pos + 1;
            const float *q = a->q + (size_t)i * a->q_stride + (size_t)h * hd;
            for (int c = 0; c < nc; c++) {
                int left = hd - c * 16;
                __m512 v = _mm512_maskz_loadu_ps(tail_mask(left > 0 ? left : 0), q + c * 16);
                _mm512_store_ps(qbuf + r * dp + c * 16, _mm512_mul_ps(v, vscale));
                _mm512_store_ps(acc + r * dp + c * 16, _mm512_setzero_ps());
            }
            mx[r] = neg_inf;
            sm[r] = 0.0f;
        }
        for (int p0 = lo_all; p0 < hi_all; p0 += KB) {
            int nk = hi_all - p0 < KB ? hi_all - p0 : KB;
            for (int j = 0; j < KB; j++) {
                if (j < nk) {
                    size_t off = ((size_t)a->slots[p0 + j] * kv_row + (size_t)kh * hd) * esz;
                    load_kv_row(kbuf + j * dp, (const char *)a->k_cache + off, a->kv_dt, hd, dp);
                    load_kv_row(vbuf + j * dp, (const char *)a->v_cache + off, a->kv_dt, hd, dp);
                } else {
                    for (int c = 0; c < nc; c++) {
                        _mm512_store_ps(kbuf + j * dp + c * 16, _mm512_setzero_ps());
                        _mm512_store_ps(vbuf + j * dp + c * 16, _mm512_setzero_ps());
                    }
                }
            }
            const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
            const __m512i vp = _mm512_add_epi32(_mm512_set1_epi32(p0), lane);
            for (int r = 0; r < R; r++) {
                if (rhi[r] <= p0 || rlo[r] >= p0 + nk) continue;
                const float *qr = qbuf + r * dp;
                __m512 part[16];
                for (int j = 0; j < 16; j++) {
                    __m512 s = _mm512_mul_ps(_mm512_load_ps(qr), _mm512_load_ps(kbuf + j * dp));
                    for (int c = 1; c < nc; c++)
                        s = _mm512_fmadd_ps(_mm512_load_ps(qr + c * 16),
                                            _mm512_load_ps(kbuf + j * dp + c * 16), s);
                    part[j] = s;
                }
                __m512 s = hsum16x16(part);
                if (a->softcap > 0.0f) {
                    __m512 cap = _mm512_set1_ps(a->softcap);
                    s = _mm512_mul_ps(cap, tanh512(_mm512_div_ps(s, cap)));
                }
                __mmask16 ok = _mm512_cmpge_epi32_mask(vp, _mm512_set1_epi32(rlo[r])) &
                               _mm512_cmplt_epi32_mask(vp, _mm512_set1_epi32(rhi[r]));
                s = _mm512_mask_blend_ps(ok, _mm512_set1_ps(neg_inf), s);
                float bmax = _mm512_reduce_max_ps(s);
                float mnew = bmax > mx[r] ? bmax : mx[r];
                float alpha = mx[r] == neg_inf ? 0.0f : expf(mx[r] - mnew);
                __m512 pr = exp512(_mm512_sub_ps(s, _mm512_set1_ps(mnew)));
                pr = _mm512_maskz_mov_ps(ok, pr);
                sm[r] = sm[r] * alpha + _mm512_reduce_add_ps(pr);
                mx[r] = mnew;
                float pj[16];
                _mm512_storeu_ps(pj, pr);
                __m512 va = _mm512_set1_ps(alpha);
                float *ar = acc + r * dp;
                for (int c = 0; c < nc; c++) {
                    __m512 o = _mm512_mul_ps(_mm512_load_ps(ar + c * 16), va);
                    for (int j = 0; j < nk; j++)
                        o = _mm512_fmadd_ps(_mm512_set1_ps(pj[j]), _mm512_load_ps(vbuf + j * dp + c * 16), o);
                    _mm512_store_ps(ar + c * 16, o);
                }
            }
        }
        for (int r = 0; r < R; r++) {
            int i = i0 + r / nh, h = h0 + r % nh;
            float *o = a->out + (size_t)i * a->out_stride + (size_t)h * hd;
            __m512 inv = _mm512_set1_ps(sm[r] > 0.0f ? 1.0f / sm[r] : 0.0f);
            for (int c = 0; c < nc; c++) {
                int left = hd - c * 16;
                _mm512_mask_storeu_ps(o + c * 16, tail_mask(left), _mm512_mul_ps(_mm512_load_ps(acc + r * dp + c * 16), inv));
            }
        }
    }
}

/* ---- elementwise ------------------------------------------------------- */

static void rmsnorm512(float *y, const float *x, const float *w, int n, float eps, float w_offset)
{
    __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
    int i = 0;
    for (; i + 32 <= n; i += 32) {
        __m512 a = _mm512_loadu_ps(x + i), b = _mm512_loadu_ps(x + i + 16);
        s0 = _mm512_fmadd_ps(a, a, s0);
        s1 = _mm512_fmadd_ps(b, b, s1);
    }
    for (; i < n; i += 16) {
        __m512 a = _mm512_maskz_loadu_ps(tail_mask(n - i), x + i);
        s0 = _mm512_fmadd_ps(a, a, s0);
    }
    float ss = _mm512_reduce_add_ps(_mm512_add_ps(s0, s1));
    __m512 inv = _mm512_set1_ps(1.0f / sqrtf(ss / (float)n + eps));
    __m512 off = _mm512_set1_ps(w_offset);
    for (i = 0; i < n; i += 16) {
        __mmask16 mk = tail_mask(n - i);
        __m512 a = _mm512_maskz_loadu_ps(mk, x + i);
        __m512 wv = _mm512_add_ps(_mm512_maskz_loadu_ps(mk, w + i), off);
        _mm512_mask_storeu_ps(y + i, mk, _mm512_mul_ps(_mm512_mul_ps(a, inv), wv));
    }
}

static void rope512(float *x, int n_head, int head_dim, int rot_dim, const float *cos_t,
                    const float *sin_t, int neox)
{
    int half = rot_dim / 2;
    const __m512i dup = _mm512_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7);
    const __m512 sign = _mm512_setr_ps(-1, 1, -1, 1, -1, 1, -1, 1, -1, 1, -1, 1, -1, 1, -1, 1);
    for (int h = 0; h < n_head; h++) {
        float *v = x + (size_t)h * head_dim;
        if (neox) {
            for (int i = 0; i < half; i += 16) {
                __mmask16 mk = tail_mask(half - i);
                __m512 c = _mm512_maskz_loadu_ps(mk, cos_t + i), s = _mm512_maskz_loadu_ps(mk, sin_t + i);
                __m512 x0 = _mm512_maskz_loadu_ps(mk, v + i), x1 = _mm512_maskz_loadu_ps(mk, v + half + i);
                _mm512_mask_storeu_ps(v + i, mk, _mm512_fmsub_ps(x0, c, _mm512_mul_ps(x1, s)));
                _mm512_mask_storeu_ps(v + half + i, mk, _mm512_fmadd_ps(x1, c, _mm512_mul_ps(x0, s)));
            }
        } else {
            int i = 0;
            for (; i + 8 <= half; i += 8) {
                __m512 c = _mm512_permutexvar_ps(dup, _mm512_castps256_ps512(_mm256_loadu_ps(cos_t + i)));
                __m512 s = _mm512_permutexvar_ps(dup, _mm512_castps256_ps512(_mm256_loadu_ps(sin_t + i)));
                __m512 xv = _mm512_loadu_ps(v + 2 * i);
                __m512 sw = _mm512_permute_ps(xv, _MM_SHUFFLE(2, 3, 0, 1));
                /* even: x0*c - x1*s ; odd: x1*c + x0*s */
                _mm512_storeu_ps(v + 2 * i, _mm512_fmadd_ps(xv, c, _mm512_mul_ps(_mm512_mul_ps(sw, s), sign)));
            }
            for (; i < half; i++) {
                float x0 = v[2 * i], x1 = v[2 * i + 1];
                v[2 * i] = x0 * cos_t[i] - x1 * sin_t[i];
                v[2 * i + 1] = x1 * cos_t[i] + x0 * sin_t[i];
            }
        }
    }
}

static void silu_mul512(float *y, const float *gate, const float *up, int n)
{
    const __m512 one = _mm512_set1_ps(1.0f);
    for (int i = 0; i < n; i += 16) {
        __mmask16 mk = tail_mask(n - i);
        __m512 g = _mm512_maskz_loadu_ps(mk, gate + i), u = _mm512_maskz_loadu_ps(mk, up + i);
        __m512 e = exp512(_mm512_sub_ps(_mm512_setzero_ps(), g));
        _mm512_mask_storeu_ps(y + i, mk, _mm512_mul_ps(_mm512_div_ps(g, _mm512_add_ps(one, e)), u));
    }
}

/* 0.5 g (1 + tanh(t)) = g * sigmoid(2t) = g / (1 + exp(-2t)) */
static void gelu_tanh_mul512(float *y, const float *gate, const float *up, int n)
{
    const __m512 one = _mm512_set1_ps(1.0f), c2 = _mm512_set1_ps(-2.0f * 0.7978845608028654f);
    const __m512 c3 = _mm512_set1_ps(0.044715f);
    for (int i = 0; i < n; i += 16) {
        __mmask16 mk = tail_mask(n - i);
        __m512 g = _mm512_maskz_loadu_ps(mk, gate + i), u = _mm512_maskz_loadu_ps(mk, up + i);
        __m512 g3 = _mm512_mul_ps(_mm512_mul_ps(g, g), g);
        __m512 t = _mm512_mul_ps(c2, _mm512_fmadd_ps(c3, g3, g));
        __m512 e = exp512(t);
        _mm512_mask_storeu_ps(y + i, mk, _mm512_mul_ps(_mm512_div_ps(g, _mm512_add_ps(one, e)), u));
    }
}

static void add512(float *y, const float *a, const float *b, int n)
{
    for (int i = 0; i < n; i += 16) {
        __mmask16 mk = tail_mask(n - i);
        _mm512_mask_storeu_ps(y + i, mk, _mm512_add_ps(_mm512_maskz_loadu_ps(mk, a + i),
                                                       _mm512_maskz_loadu_ps(mk, b + i)));
    }
}

static void softmax512(float *x, int n)
{
    if (n <= 0) return;
    __m512 mv = _mm512_set1_ps(-INFINITY);
    for (int i = 0; i < n; i += 16)
        mv = _mm512_max_ps(mv, _mm512_mask_loadu_ps(_mm512_set1_ps(-INFINITY), tail_mask(n - i), x + i));
    __m512 m = _mm512_set1_ps(_mm512_reduce_max_ps(mv));
    __m512 sv = _mm512_setzero_ps();
    for (int i = 0; i < n; i += 16) {
        __mmask16 mk = tail_mask(n - i);
        __m512 e = exp512(_mm512_sub_ps(_mm512_maskz_loadu_ps(mk, x + i), m));
        e = _mm512_maskz_mov_ps(mk, e);
        sv = _mm512_add_ps(sv, e);
        _mm512_mask_storeu_ps(x + i, mk, e);
    }
    __m512 inv = _mm512_set1_ps(1.0f / _mm512_reduce_add_ps(sv));
    for (int i = 0; i < n; i += 16) {
        __mmask16 mk = tail_mask(n - i);
        _mm512_mask_storeu_ps(x + i, mk, _mm512_mul_ps(_mm512_maskz_loadu_ps(mk, x + i), inv));
    }
}

static int argmax512(const float *x, int n)
{
    if (n < 16 || isnan(x[0])) return kern_ref_argmax(x, n);
    __m512 mv = _mm512_loadu_ps(x);
    int i = 16;
    for (; i + 16 <= n; i += 16) mv = _mm512_max_ps(_mm512_loadu_ps(x + i), mv);
    float best = _mm512_reduce_max_ps(mv);
    for (; i < n; i++)
        if (x[i] > best) best = x[i];
    /* first index holding the max */
    __m512 bv = _mm512_set1_ps(best);
    for (i = 0; i + 16 <= n; i += 16) {
        __mmask16 eq = _mm512_cmp_ps_mask(_mm512_loadu_ps(x + i), bv, _CMP_EQ_OQ);
        if (eq) return i + __builtin_ctz(eq);
    }
    for (; i < n; i++)
        if (x[i] == best) return i;
    return kern_ref_argmax(x, n); /* NaNs in the row */
}

static float dot512(const float *a, const float *b, int n)
{
    __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
    int i = 0;
    for (; i + 32 <= n; i += 32) {
        s0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), s0);
        s1 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 16), _mm512_loadu_ps(b + i + 16), s1);
    }
    for (; i < n; i += 16) {
        __mmask16 mk = tail_mask(n - i);
        s0 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(mk, a + i), _mm512_maskz_loadu_ps(mk, b + i), s0);
    }
    return _mm512_reduce_add_ps(_mm512_add_ps(s0, s1));
}

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
