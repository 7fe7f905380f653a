/* kernels_avx2 — AVX2 + FMA variants of every kernel (x86-64-v3 machines).
 *
 * DESIGN: the same shapes as kernels_avx512.c at half the width.
 * Matmul weights are repacked at load into panels of NB = 16 output columns,
 * contiguous over k:
 *   bf16 (LAYOUT_BF16): k-pair p -> 16 x (W[c][2p], W[c][2p+1]) = 64 bytes;
 *     each 32-bit pair splits into two f32 vectors with a shift and a mask,
 *     so activations stay f32 (no bf16 rounding) and the weights stream at
 *     half the bytes of f32;
 *   f32 (LAYOUT_F32): k -> 16 f32 = 64 bytes.
 * Activations are packed per block of RB = 6 rows (xp[(s * R + r) * E + e],
 * zero past k) so the micro-kernel (6 rows x 16 columns = 12 ymm
 * accumulators) reads one sequential stream; k is cut in KC blocks that
 * keep the panel block in L1.  Threads own disjoint panel ranges.
 * Attention: online softmax over blocks of 8 keys; the frame (work
 * units, K/V gather, scratch layout) is kernels_attn_impl.h, shared with
 * the AVX-512 file; per block a scores pass over all rows, then the
 * per-row max / rescale / P.V pass.  Scalar loops handle the tails of row
 * ops. */
#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels_impl.h"

#define NB 16
#define RB 6
#define MC 240        /* multiple of RB */
#define KC_PAIRS 256  /* 16 KiB of bf16 panel */
#define KC_F32 256    /* 16 KiB of f32 panel; <= 2 * KC_PAIRS */
#define PF_BYTES 1024

enum { LAYOUT_BF16 = 0x0221, LAYOUT_F32 = 0x0222 };

#define AINLINE static inline __attribute__((always_inline))

static inline size_t round_up(size_t v, size_t a) { return (v + a - 1) / a * a; }

/* lanes [0, n) set (n clamped to [0, 8]) */
AINLINE __m256i lane_mask(int n)
{
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/* ---- vector math ------------------------------------------------------- */

/* exp(x), ~1 ulp over [-87.3, 88.3]; 0 below (and for -inf), clamped above. */
AINLINE __m256 exp256(__m256 x)
{
    __m256 under = _mm256_cmp_ps(x, _mm256_set1_ps(-87.3f), _CMP_LT_OQ);
    x = _mm256_max_ps(x, _mm256_set1_ps(-87.3f));
    x = _mm256_min_ps(x, _mm256_set1_ps(88.3f));
    __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 p = _mm256_set1_ps(1.9875691500e-4f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
    p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_andnot_ps(under, _mm256_mul_ps(p, _mm256_castsi256_ps(e)));
}

AINLINE __m256 tanh256(__m256 x)
{
    const __m256 sign = _mm256_set1_ps(-0.0f);
    __m256 ax = _mm256_andnot_ps(sign, x);
    __m256 e = exp256(_mm256_add_ps(ax, ax));
    __m256 t = _mm256_sub_ps(_mm256_set1_ps(1.0f),
                             _mm256_div_ps(_mm256_set1_ps(2.0f), _mm256_add_ps(e, _mm256_set1_ps(1.0f))));
    return _mm256_or_ps(t, _mm256_and_ps(sign, x));
}

AINLINE float hsum256(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

AINLINE float hmax256(__m256 v)
{
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    s = _mm_max_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* ---- weight packing ---------------------------------------------------- */

static int pack256(kern_mat *m, const void *src, dtype sdt)
{
    return kern_pack_panels(m, src, sdt, NB, LAYOUT_BF16, LAYOUT_F32);
}

/* ---- matmul micro-kernels ---------------------------------------------- */

AINLINE void acc_init(const int R, __m256 acc[RB][2], const float *y, size_t ldy, __m256i m0,
                      __m256i m1, int load_y)
{
    for (int r = 0; r < R; r++) {
        if (load_y) {
            acc[r][0] = _mm256_maskload_ps(y + r * ldy, m0);
            acc[r][1] = _mm256_maskload_ps(y + r * ldy + 8, m1);
        } else {
            acc[r][0] = _mm256_setzero_ps();
            acc[r][1] = _mm256_setzero_ps();
        }
    }
}

AINLINE void acc_store(const int R, __m256 acc[RB][2], float *y, size_t ldy, __m256i m0,
                       __m256i m1, const float *bias)
{
    __m256 b0 = _mm256_setzero_ps(), b1 = _mm256_setzero_ps();
    if (bias) {
        b0 = _mm256_maskload_ps(bias, m0);
        b1 = _mm256_maskload_ps(bias + 8, m1);
    }
    for (int r = 0; r < R; r++) {
        _mm256_maskstore_ps(y + r * ldy, m0, _mm256_add_ps(acc[r][0], b0));
        _mm256_maskstore_ps(y + r * ldy + 8, m1, _mm256_add_ps(acc[r][1], b1));
    }
}

/* bf16 pair panels, f32 activations (xp[(p * R + r) * 2 + e]). */
AINLINE void mk_bf16f(const int R, const float *xp, const uint16_t *w, int np, float *y,
                      size_t ldy, __m256i m0, __m256i m1, int load_y, const float *bias)
{
    __m256 acc[RB][2];
    acc_init(R, acc, y, ldy, m0, m1, load_y);
    const __m256i hi = _mm256_set1_epi32((int)0xFFFF0000u);
    for (int p = 0; p < np; p++) {
        const uint16_t *wp = w + (size_t)p * 32;
        if (R <= 2) _mm_prefetch((const char *)wp + PF_BYTES, _MM_HINT_T0);
        __m256i v0 = _mm256_load_si256((const __m256i *)wp);
        __m256i v1 = _mm256_load_si256((const __m256i *)(wp + 16));
        const float *xs = xp + (size_t)p * R * 2;
        __m256 e0 = _mm256_castsi256_ps(_mm256_slli_epi32(v0, 16));
        __m256 e1 = _mm256_castsi256_ps(_mm256_slli_epi32(v1, 16));
        for (int r = 0; r < R; r++) {
            __m256 xe = _mm256_broadcast_ss(xs + 2 * r);
            acc[r][0] = _mm256_fmadd_ps(xe, e0, acc[r][0]);
            acc[r][1] = _mm256_fmadd_ps(xe, e1, acc[r][1]);
        }
        __m256 o0 = _mm256_castsi256_ps(_mm256_and_si256(v0, hi));
        __m256 o1 = _mm256_castsi256_ps(_mm256_and_si256(v1, hi));
        for (int r = 0; r < R; r++) {
            __m256 xo = _mm256_broadcast_ss(xs + 2 * r + 1);
            acc[r][0] = _mm256_fmadd_ps(xo, o0, acc[r][0]);
            acc[r][1] = _mm256_fmadd_ps(xo, o1, acc[r][1]);
        }
    }
    acc_store(R, acc, y, ldy, m0, m1, bias);
}

/* f32 panels, f32 activations (xp[i * R + r]). */
AINLINE void mk_f32(const int R, const float *xp, const float *w, int nk, float *y, size_t ldy,
                    __m256i m0, __m256i m1, int load_y, const float *bias)
{
    __m256 acc[RB][2];
    acc_init(R, acc, y, ldy, m0, m1, load_y);
    for (int i = 0; i < nk; i++) {
        const float *wp = w + (size_t)i * NB;
        if (R <= 2) _mm_prefetch((const char *)wp + PF_BYTES, _MM_HINT_T0);
        __m256 w0 = _mm256_load_ps(wp), w1 = _mm256_load_ps(wp + 8);
        for (int r = 0; r < R; r++) {
            __m256 xv = _mm256_broadcast_ss(xp + (size_t)i * R + r);
            acc[r][0] = _mm256_fmadd_ps(xv, w0, acc[r][0]);
            acc[r][1] = _mm256_fmadd_ps(xv, w1, acc[r][1]);
        }
    }
    acc_store(R, acc, y, ldy, m0, m1, bias);
}

typedef void (*mk_fn)(const float *xp, const void *w, int nsteps, float *y, size_t ldy,
                      __m256i m0, __m256i m1, int load_y, const float *bias);

#define MK_INST(R)                                                                               \
    static void mk_bf16f_##R(const float *x, const void *w, int ns, float *y, size_t ldy,        \
                             __m256i m0, __m256i m1, int ly, const float *b)                     \
    {                                                                                            \
        mk_bf16f(R, x, w, ns, y, ldy, m0, m1, ly, b);                                            \
    }                                                                                            \
    static void mk_f32_##R(const float *x, const void *w, int ns, float *y, size_t ldy,          \
                           __m256i m0, __m256i m1, int ly, const float *b)                       \
    {                                                                                            \
        mk_f32(R, x, w, ns, y, ldy, m0, m1, ly, b);                                              \
    }
MK_INST(1) MK_INST(2) MK_INST(3) MK_INST(4) MK_INST(5) MK_INST(6)

static const mk_fn mk_tab[2][RB + 1] = {
    {NULL, mk_bf16f_1, mk_bf16f_2, mk_bf16f_3, mk_bf16f_4, mk_bf16f_5, mk_bf16f_6},
    {NULL, mk_f32_1, mk_f32_2, mk_f32_3, mk_f32_4, mk_f32_5, mk_f32_6},
};

/* ---- matmul driver ----------------------------------------------------- */

static size_t matmul_scratch256(int m, int k)
{
    /* monotonic in m and k: a caller sizes scratch once for its largest
     * batch, and m <= RB packs the whole k while larger m packs KC blocks */
    if (m <= 0 || k <= 0) return 64;
    size_t small = (size_t)(m < RB ? m : RB) * round_up((size_t)k + 1, 16);
    size_t per_row = 2 * (size_t)KC_PAIRS < (size_t)k + 1 ? 2 * (size_t)KC_PAIRS : (size_t)k + 1;
    size_t big = m > RB ? (size_t)(m < MC ? m : MC) * round_up(per_row, 16) : 0;
    return (small > big ? small : big) * sizeof(float) + 128;
}

/* Pack rows [0, mc) of x (row stride k), steps [s0, s0 + sc), E k-elements
 * per step, into RB-row blocks at dst + rb * kc * E. */
static void pack_x(float *dst, const float *x, int mc, int k, int s0, int sc, int kc, int E)
{
    for (int rb = 0; rb < mc; rb += RB) {
        int R = mc - rb < RB ? mc - rb : RB;
        for (int r = 0; r < R; r++) {
            const float *src = x + (size_t)(rb + r) * k;
            float *d = dst + (size_t)rb * kc * E + (size_t)E * r;
            if (E == 1) {
                for (int s = 0; s < sc; s++) d[(size_t)s * R] = src[s0 + s];
            } else {
                int full = (k - 2 * s0) / 2;
                if (full > sc) full = sc;
                int s = 0;
                for (; s < full; s++) memcpy(d + (size_t)s * R * 2, src + 2 * (s0 + s), 8);
                for (; s < sc; s++) {
                    int i = 2 * (s0 + s);
                    d[(size_t)s * R * 2] = i < k ? src[i] : 0.0f;
                    d[(size_t)s * R * 2 + 1] = i + 1 < k ? src[i + 1] : 0.0f;
                }
            }
        }
    }
}

static void matmul256(float *y, const float *x, int m, const kern_mat *w, const float *bias,
                      int ith, int nth, void *scratch)
{
    if (w->layout != LAYOUT_BF16 && w->layout != LAYOUT_F32) {
        kern_ref_matmul(y, x, m, w, bias, ith, nth, scratch);
        return;
    }
    const int n = w->n, k = w->k;
    const int npan = (n + NB - 1) / NB;
    int plo, phi;
    kern_split(npan, ith, nth, &plo, &phi);
    if (plo >= phi || m <= 0) return;

    const int bf16 = w->layout == LAYOUT_BF16;
    const int E = bf16 ? 2 : 1;
    const int nsteps = (k + E - 1) / E;
    const size_t wstep = bf16 ? NB * 2 * sizeof(uint16_t) : NB * sizeof(float);
    int kc = bf16 ? KC_PAIRS : KC_F32;
    if (m <= RB || kc > nsteps) kc = nsteps;
    const int direct = m == 1 && k % E == 0;
    float *xp = (float *)round_up((uintptr_t)scratch, 64);
    const char *wd = w->data;

    for (int r0 = 0; r0 < m; r0 += MC) {
        int mc = m - r0 < MC ? m - r0 : MC;
        for (int s0 = 0; s0 < nsteps; s0 += kc) {
            int sc = nsteps - s0 < kc ? nsteps - s0 : kc;
            int last = s0 + sc == nsteps;
            if (!direct) pack_x(xp, x + (size_t)r0 * k, mc, k, s0, sc, kc, E);
            for (int b = plo; b < phi; b++) {
                const char *wp = wd + ((size_t)b * nsteps + s0) * wstep;
                int nc = n - b * NB;
                __m256i m0 = lane_mask(nc), m1 = lane_mask(nc - 8);
                const float *bp = last && bias ? bias + (size_t)b * NB : NULL;
                for (int rb = 0; rb < mc; rb += RB) {
                    int R = mc - rb < RB ? mc - rb : RB;
                    const float *xr = direct ? x + (size_t)s0 * E : xp + (size_t)rb * kc * E;
                    mk_tab[bf16 ? 0 : 1][R](xr, wp, sc, y + (size_t)(r0 + rb) * n + (size_t)b * NB,
                                           (size_t)n, m0, m1, s0 > 0, bp);
                }
            }
        }
    }
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
            s = _mm256_mul_ps(cap, tanh256(_mm256_div_ps(s, cap)));
        }
        /* valid: rlo <= p < rhi */
        __m256i ok = _mm256_andnot_si256(_mm256_cmpgt_epi32(_mm256_set1_epi32(rlo[r]), vp),
                                         _mm256_cmpgt_epi32(_mm256_set1_epi32(rhi[r]), vp));
        s = _mm256_blendv_ps(_mm256_set1_ps(neg_inf), s, _mm256_castsi256_ps(ok));
        _mm256_store_ps(sbuf + r * KB, s);
    }
    for (int r = 0; r < R; r++) {
        if (rhi[r] <= p0 || rlo[r] >= p0 + nk) continue;
        const float *vr = vbuf + (size_t)(r / nh % nkh) * dp;
        __m256 s = _mm256_load_ps(sbuf + r * KB);
        __m256 okf = _mm256_cmp_ps(s, _mm256_set1_ps(neg_inf), _CMP_NEQ_OQ);
        float bmax = hmax256(s);
        float mnew = bmax > mx[r] ? bmax : mx[r];
        float alpha = mx[r] == neg_inf ? 0.0f : expf(mx[r] - mnew);
        __m256 pr = _mm256_and_ps(okf, exp256(_mm256_sub_ps(s, _mm256_set1_ps(mnew))));
        sm[r] = sm[r] * alpha + hsum256(pr);
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

/* ---- elementwise ------------------------------------------------------- */

static void rmsnorm256(float *y, const float *x, const float *w, int n, float eps, float w_offset)
{
    __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
    int i = 0;
    for (; i + 16 <= n; i += 16) {
        __m256 a = _mm256_loadu_ps(x + i), b = _mm256_loadu_ps(x + i + 8);
        s0 = _mm256_fmadd_ps(a, a, s0);
        s1 = _mm256_fmadd_ps(b, b, s1);
    }
    float ss = hsum256(_mm256_add_ps(s0, s1));
    for (; i < n; i++) ss += x[i] * x[i];
    float inv = 1.0f / sqrtf(ss / (float)n + eps);
    __m256 vi = _mm256_set1_ps(inv), off = _mm256_set1_ps(w_offset);
    for (i = 0; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(x + i), vi),
                                              _mm256_add_ps(_mm256_loadu_ps(w + i), off)));
    for (; i < n; i++) y[i] = x[i] * inv * (w[i] + w_offset);
}

static void rope256(float *x, int n_head, int head_dim, int rot_dim, const float *cos_t,
                    const float *sin_t, int neox)
{
    int half = rot_dim / 2;
    const __m256i dup = _mm256_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3);
    const __m256 sign = _mm256_setr_ps(-1, 1, -1, 1, -1, 1, -1, 1);
    for (int h = 0; h < n_head; h++) {
        float *v = x + (size_t)h * head_dim;
        int i = 0;
        if (neox) {
            for (; i + 8 <= half; i += 8) {
                __m256 c = _mm256_loadu_ps(cos_t + i), s = _mm256_loadu_ps(sin_t + i);
                __m256 x0 = _mm256_loadu_ps(v + i), x1 = _mm256_loadu_ps(v + half + i);
                _mm256_storeu_ps(v + i, _mm256_fmsub_ps(x0, c, _mm256_mul_ps(x1, s)));
                _mm256_storeu_ps(v + half + i, _mm256_fmadd_ps(x1, c, _mm256_mul_ps(x0, s)));
            }
            for (; i < half; i++) {
                float x0 = v[i], x1 = v[i + half];
                v[i] = x0 * cos_t[i] - x1 * sin_t[i];
                v[i + half] = x1 * cos_t[i] + x0 * sin_t[i];
            }
        } else {
            for (; i + 4 <= half; i += 4) {
                __m256 c = _mm256_permutevar8x32_ps(_mm256_castps128_ps256(_mm_loadu_ps(cos_t + i)), dup);
                __m256 s = _mm256_permutevar8x32_ps(_mm256_castps128_ps256(_mm_loadu_ps(sin_t + i)), dup);
                __m256 xv = _mm256_loadu_ps(v + 2 * i);
                __m256 sw = _mm256_permute_ps(xv, _MM_SHUFFLE(2, 3, 0, 1));
                _mm256_storeu_ps(v + 2 * i, _mm256_fmadd_ps(xv, c, _mm256_mul_ps(_mm256_mul_ps(sw, s), sign)));
            }
            for (; i < half; i++) {
                float x0 = v[2 * i], x1 = v[2 * i + 1];
                v[2 * i] = x0 * cos_t[i] - x1 * sin_t[i];
                v[2 * i + 1] = x1 * cos_t[i] + x0 * sin_t[i];
            }
        }
    }
}

static void silu_mul256(float *y, const float *gate, const float *up, int n)
{
    const __m256 one = _mm256_set1_ps(1.0f);
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 g = _mm256_loadu_ps(gate + i);
        __m256 e = exp256(_mm256_sub_ps(_mm256_setzero_ps(), g));
        _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_div_ps(g, _mm256_add_ps(one, e)), _mm256_loadu_ps(up + i)));
    }
    for (; i < n; i++) y[i] = gate[i] / (1.0f + expf(-gate[i])) * up[i];
}

static void gelu_tanh_mul256(float *y, const float *gate, const float *up, int n)
{
    const float c = 0.7978845608028654f;
    const __m256 one = _mm256_set1_ps(1.0f), c2 = _mm256_set1_ps(-2.0f * c), c3 = _mm256_set1_ps(0.044715f);
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 g = _mm256_loadu_ps(gate + i);
        __m256 g3 = _mm256_mul_ps(_mm256_mul_ps(g, g), g);
        __m256 e = exp256(_mm256_mul_ps(c2, _mm256_fmadd_ps(c3, g3, g)));
        _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_div_ps(g, _mm256_add_ps(one, e)), _mm256_loadu_ps(up + i)));
    }
    for (; i < n; i++) {
        float g = gate[i];
        y[i] = g / (1.0f + expf(-2.0f * c * (g + 0.044715f * g * g * g))) * up[i];
    }
}

static void add256(float *y, const float *a, const float *b, int n)
{
    int i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_add_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i)));
    for (; i < n; i++) y[i] = a[i] + b[i];
}

static void softmax256(float *x, int n)
{
    if (n <= 0) return;
    float mx = -INFINITY;
    int i = 0;
    if (n >= 8) {
        __m256 mv = _mm256_loadu_ps(x);
        for (i = 8; i + 8 <= n; i += 8) mv = _mm256_max_ps(mv, _mm256_loadu_ps(x + i));
        mx = hmax256(mv);
    }
    for (; i < n; i++)
        if (x[i] > mx) mx = x[i];
    __m256 m = _mm256_set1_ps(mx), sv = _mm256_setzero_ps();
    float sum = 0.0f;
    for (i = 0; i + 8 <= n; i += 8) {
        __m256 e = exp256(_mm256_sub_ps(_mm256_loadu_ps(x + i), m));
        sv = _mm256_add_ps(sv, e);
        _mm256_storeu_ps(x + i, e);
    }
    for (; i < n; i++) {
        x[i] = expf(x[i] - mx);
        sum += x[i];
    }
    sum += hsum256(sv);
    float inv = 1.0f / sum;
    __m256 vi = _mm256_set1_ps(inv);
    for (i = 0; i + 8 <= n; i += 8) _mm256_storeu_ps(x + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), vi));
    for (; i < n; i++) x[i] *= inv;
}

static int argmax256(const float *x, int n)
{
    if (n < 8 || isnan(x[0])) return kern_ref_argmax(x, n);
    __m256 mv = _mm256_loadu_ps(x);
    int i = 8;
    for (; i + 8 <= n; i += 8) mv = _mm256_max_ps(_mm256_loadu_ps(x + i), mv);
    float best = hmax256(mv);
    for (; i < n; i++)
        if (x[i] > best) best = x[i];
    __m256 bv = _mm256_set1_ps(best);
    for (i = 0; i + 8 <= n; i += 8) {
        int eq = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(x + i), bv, _CMP_EQ_OQ));
        if (eq) return i + __builtin_ctz((unsigned)eq);
    }
    for (; i < n; i++)
        if (x[i] == best) return i;
    return kern_ref_argmax(x, n);
}

static float dot256(const float *a, const float *b, int n)
{
    __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
    int i = 0;
    for (; i + 16 <= n; i += 16) {
        s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
        s1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), s1);
    }
    float s = hsum256(_mm256_add_ps(s0, s1));
    for (; i < n; i++) s += a[i] * b[i];
    return s;
}

static const kern_vtable vt_avx2 = {
    .mat_pack = pack256,
    .matmul_scratch = matmul_scratch256,
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
