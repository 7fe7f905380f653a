/* kernels_rows_impl — the one body of the AVX2 and AVX-512 matmul panels and
 * row kernels; private to src/kernels.
 *
 * DESIGN: both ISA files do the same thing at two vector widths, so the
 * code is written once against the vocabulary of kernels_simd.h and
 * included by kernels_avx2.c and kernels_avx512.c, each compiled with its
 * own -m flags, after it has chosen the mapping and set its blocking:
 *
 *   #define SIMD_AVX512 1
 *   #include "kernels/kernels_simd.h"
 *   #define NB 32  RB 12  MC 240  KC_PAIRS 192  KC_F32 192  PF_BYTES 1024
 *   enum { LAYOUT_BF16 = ..., LAYOUT_F32 = ... };
 *   #include "kernels/kernels_rows_impl.h"   acc_init / acc_store and the
 *                                           shared micro-kernels
 *   [AINLINE mk_bf16d(...) built on them, #define ROWS_BF16_DOT 1: AVX-512]
 *   #define ROWS_DEFINE_KERNELS
 *   #include "kernels/kernels_rows_impl.h"   the table, driver, row kernels
 *
 * (AVX2 defines ROWS_DEFINE_KERNELS before a single include.)
 *
 * It defines (static, named with the ISA's suffix: rmsnorm512 ...):
 *   matmul_panels<S>(..., kind)   the panel matmul for one micro-kernel kind
 *                                 (the ISA's vtable wrapper picks the kind,
 *                                 and on AVX-512 the AMX hand-off)
 *   matmul_scratch_panels<S>, pack<S>, rmsnorm<S>, rope<S>, silu_mul<S>,
 *   gelu_tanh_mul<S>, add<S>, softmax<S>, argmax<S>, dot<S>
 *
 * Matmul layout (kernels_pack.c): panels of NB = 2 vectors of output
 * columns, contiguous over k; bf16 as k-pairs (W[c][2p], W[c][2p+1]), which
 * is also the vdpbf16ps layout and what kernels_amx.c reads as tiles (do not
 * change it); f32 per k.  Activations are packed per block of RB rows,
 * step by step along k (xp[(s * R + r) * E + e] = x[r][s E + e], zero past
 * k; the dot kind packs bf16 pairs xb[s * R + r]), so the micro-kernel
 * (R rows x NB columns = 2 R accumulators) reads one sequential stream; k
 * is cut in KC blocks that keep the panel block in L1 when m > RB; threads
 * own disjoint panel ranges.  Every output element is one fixed sequence of
 * multiply-adds whatever m, the thread split or the blocking (partial sums
 * go through y as f32): results are batch-invariant.
 *
 * Row kernels: full vectors, then the tail: one masked vector step where
 * SIMD_MASKED_TAILS (AVX-512), else scalar code (AVX2).  Each ISA's results
 * are bit-identical to its separate implementation before the merge (the
 * same operations per element in the same order). */
#ifndef SGLC_KERNELS_ROWS_IMPL_H
#define SGLC_KERNELS_ROWS_IMPL_H

#include <math.h>
#include <string.h>

#include "kernels/kernels_impl.h"

_Static_assert(NB == 2 * SIMD_W, "a panel is two vectors of columns");
_Static_assert(MC % RB == 0, "MC is a multiple of RB");
_Static_assert(KC_F32 <= 2 * KC_PAIRS, "scratch is sized for KC_PAIRS pairs");

/* ---- weight packing ---------------------------------------------------- */

static int SIMD_FN(pack)(kern_mat *m, const void *src, dtype sdt)
{
    return kern_pack_panels(m, src, sdt, NB, LAYOUT_BF16, LAYOUT_F32);
}

/* ---- matmul micro-kernels ---------------------------------------------- */

/* y[R][NB] (+)= x[R][block] . panel[block][NB]: masks m0 / m1 select the
 * valid columns of the two vectors; load_y accumulates onto y (k blocks
 * after the first); bias, when non-NULL, is added (the last k block). */
AINLINE void acc_init(const int R, simd_v acc[RB][2], const float *y, size_t ldy, simd_m m0,
                      simd_m m1, int load_y)
{
    for (int r = 0; r < R; r++) {
        if (load_y) {
            acc[r][0] = simd_maskz_loadu(m0, y + r * ldy);
            acc[r][1] = simd_maskz_loadu(m1, y + r * ldy + SIMD_W);
        } else {
            acc[r][0] = simd_zero();
            acc[r][1] = simd_zero();
        }
    }
}

AINLINE void acc_store(const int R, simd_v acc[RB][2], float *y, size_t ldy, simd_m m0, simd_m m1,
                       const float *bias)
{
    simd_v b0 = simd_zero(), b1 = simd_zero();
    if (bias) {
        b0 = simd_maskz_loadu(m0, bias);
        b1 = simd_maskz_loadu(m1, bias + SIMD_W);
    }
    for (int r = 0; r < R; r++) {
        simd_mask_storeu(y + r * ldy, m0, simd_add(acc[r][0], b0));
        simd_mask_storeu(y + r * ldy + SIMD_W, m1, simd_add(acc[r][1], b1));
    }
}

/* bf16 pair panels, f32 activations (xp[(p * R + r) * 2 + e]): each 32-bit
 * weight pair widens to two f32 vectors (even k, odd k) for FMA.  The even
 * half goes through every row before the odd half is widened: AVX2's 16
 * registers then hold 12 accumulators + 2 weights + 1 broadcast. */
AINLINE void mk_bf16f(const int R, const float *xp, const uint16_t *w, int np, float *y,
                      size_t ldy, simd_m m0, simd_m m1, int load_y, const float *bias)
{
    simd_v acc[RB][2];
    acc_init(R, acc, y, ldy, m0, m1, load_y);
    for (int p = 0; p < np; p++) {
        const uint16_t *wp = w + (size_t)p * 2 * NB;
        if (R <= 2)
            for (int o = 0; o < 4 * NB; o += 64) _mm_prefetch((const char *)wp + PF_BYTES + o, _MM_HINT_T0);
        simd_vi v0 = simd_loadi(wp), v1 = simd_loadi(wp + NB);
        const float *xs = xp + (size_t)p * R * 2;
        simd_v e0 = simd_bf16_even(v0), e1 = simd_bf16_even(v1);
        for (int r = 0; r < R; r++) {
            simd_v xe = simd_bcast(xs + 2 * r);
            acc[r][0] = simd_fmadd(xe, e0, acc[r][0]);
            acc[r][1] = simd_fmadd(xe, e1, acc[r][1]);
        }
        simd_v o0 = simd_bf16_odd(v0), o1 = simd_bf16_odd(v1);
        for (int r = 0; r < R; r++) {
            simd_v xo = simd_bcast(xs + 2 * r + 1);
            acc[r][0] = simd_fmadd(xo, o0, acc[r][0]);
            acc[r][1] = simd_fmadd(xo, o1, acc[r][1]);
        }
    }
    acc_store(R, acc, y, ldy, m0, m1, bias);
}

/* f32 panels, f32 activations (xp[i * R + r]). */
AINLINE void mk_f32(const int R, const float *xp, const float *w, int nk, float *y, size_t ldy,
                    simd_m m0, simd_m m1, int load_y, const float *bias)
{
    simd_v acc[RB][2];
    acc_init(R, acc, y, ldy, m0, m1, load_y);
    for (int i = 0; i < nk; i++) {
        const float *wp = w + (size_t)i * NB;
        if (R <= 2) _mm_prefetch((const char *)wp + PF_BYTES, _MM_HINT_T0);
        simd_v w0 = simd_load(wp), w1 = simd_load(wp + SIMD_W);
        for (int r = 0; r < R; r++) {
            simd_v xv = simd_bcast(xp + (size_t)i * R + r);
            acc[r][0] = simd_fmadd(xv, w0, acc[r][0]);
            acc[r][1] = simd_fmadd(xv, w1, acc[r][1]);
        }
    }
    acc_store(R, acc, y, ldy, m0, m1, bias);
}

#endif /* SGLC_KERNELS_ROWS_IMPL_H */

/* ---- second part: the kernels ------------------------------------------ */
#if defined(ROWS_DEFINE_KERNELS) && !defined(SGLC_KERNELS_ROWS_IMPL_KERNELS)
#define SGLC_KERNELS_ROWS_IMPL_KERNELS

/* One signature for every kind (x is float * or uint32_t * by kind). */
typedef void (*mk_fn)(const void *xp, const void *w, int nsteps, float *y, size_t ldy, simd_m m0,
                      simd_m m1, int load_y, const float *bias);

enum { MK_BF16F = 0, MK_BF16D = 1, MK_F32 = 2 };

#if RB == 6
#define ROWS_EACH_R(X) X(1) X(2) X(3) X(4) X(5) X(6)
#elif RB == 12
#define ROWS_EACH_R(X) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11) X(12)
#else
#error "RB must be 6 or 12"
#endif

#define MK_WRAP(kind, R)                                                                         \
    static void mk_##kind##_##R(const void *x, const void *w, int ns, float *y, size_t ldy,      \
                                simd_m m0, simd_m m1, int ly, const float *b)                    \
    {                                                                                            \
        mk_##kind(R, x, w, ns, y, ldy, m0, m1, ly, b);                                           \
    }
#define MK_WRAP_F(R) MK_WRAP(bf16f, R) MK_WRAP(f32, R)
ROWS_EACH_R(MK_WRAP_F)
#define MK_ENT_F(R) mk_bf16f_##R,
#define MK_ENT_32(R) mk_f32_##R,
#ifdef ROWS_BF16_DOT
#define MK_WRAP_D(R) MK_WRAP(bf16d, R)
ROWS_EACH_R(MK_WRAP_D)
#define MK_ENT_D(R) mk_bf16d_##R,
#else
#define MK_ENT_D(R) NULL,
#endif

static const mk_fn mk_tab[3][RB + 1] = {
    [MK_BF16F] = {NULL, ROWS_EACH_R(MK_ENT_F)},
    [MK_BF16D] = {NULL, ROWS_EACH_R(MK_ENT_D)},
    [MK_F32] = {NULL, ROWS_EACH_R(MK_ENT_32)},
};

/* ---- matmul driver ----------------------------------------------------- */

/* Scratch: the packed activation block, rows x steps x E floats; for m <= RB
 * the whole k in one block, else KC steps (k extent <= 2 * KC_PAIRS).
 * Monotonic in m and k: a caller sizes scratch once for its largest batch. */
static size_t SIMD_FN(matmul_scratch_panels)(int m, int k)
{
    if (m <= 0 || k <= 0) return 64;
    size_t small = (size_t)(m < RB ? m : RB) * round_up((size_t)k + 1, 16);
    size_t per_row = 2 * (size_t)KC_PAIRS < (size_t)k + 1 ? 2 * (size_t)KC_PAIRS : (size_t)k + 1;
    size_t big = m > RB ? (size_t)(m < MC ? m : MC) * round_up(per_row, 16) : 0;
    return (small > big ? small : big) * sizeof(float) + 128;
}

/* Pack rows [0, mc) of x (row stride k) for steps [s0, s0 + sc) into blocks of
 * RB rows; block rb starts at dst + rb * kc * (words per step). */
static void pack_x(void *dst, const float *x, int mc, int k, int s0, int sc, int kc, int kind)
{
    for (int rb = 0; rb < mc; rb += RB) {
        int R = mc - rb < RB ? mc - rb : RB;
        for (int r = 0; r < R; r++) {
            const float *src = x + (size_t)(rb + r) * k;
            if (kind == MK_F32) {
                float *d = (float *)dst + (size_t)rb * kc + r;
                for (int s = 0; s < sc; s++) d[(size_t)s * R] = src[s0 + s];
            } else if (kind == MK_BF16F) {
                float *d = (float *)dst + (size_t)rb * kc * 2 + 2 * r;
                int full = (k - 2 * s0) / 2;
                if (full > sc) full = sc;
                int s = 0;
                for (; s < full; s++) memcpy(d + (size_t)s * R * 2, src + 2 * (s0 + s), 8);
                for (; s < sc; s++) {
                    int i = 2 * (s0 + s);
                    d[(size_t)s * R * 2] = i < k ? src[i] : 0.0f;
                    d[(size_t)s * R * 2 + 1] = i + 1 < k ? src[i + 1] : 0.0f;
                }
            } else {
                uint32_t *d = (uint32_t *)dst + (size_t)rb * kc + r;
                int s = 0;
#ifdef ROWS_BF16_PAIRS16
                /* full steps 16 at a time: ROWS_BF16_PAIRS16(out, src) writes the 16
                 * pairs of 32 floats, bit-identical to f32_to_bf16 below */
                int full = (k - 2 * s0) / 2;
                if (full > sc) full = sc;
                for (; s + 16 <= full; s += 16) {
                    uint32_t t16[16];
                    ROWS_BF16_PAIRS16(t16, src + 2 * (s0 + s));
                    for (int j = 0; j < 16; j++) d[(size_t)(s + j) * R] = t16[j];
                }
#endif
                for (; s < sc; s++) {
                    int i = 2 * (s0 + s);
                    uint32_t lo = i < k ? f32_to_bf16(src[i]) : 0;
                    uint32_t hi = i + 1 < k ? f32_to_bf16(src[i + 1]) : 0;
                    d[(size_t)s * R] = lo | hi << 16;
                }
            }
        }
    }
}

/* y (m, n) = x (m, k) . W^T (+ bias) for this thread's panels, W packed in
 * LAYOUT_BF16 (kind MK_BF16F or MK_BF16D) or LAYOUT_F32 (MK_F32). */
AINLINE void SIMD_FN(matmul_panels)(float *y, const float *x, int m, const kern_mat *w,
                                    const float *bias, int ith, int nth, void *scratch, int kind)
{
    const int n = w->n, k = w->k;
    const int npan = (n + NB - 1) / NB;
    int plo, phi;
    kern_split(npan, ith, nth, &plo, &phi);
    if (plo >= phi || m <= 0) return;

    const int bf16 = w->layout == LAYOUT_BF16;
    const int E = kind == MK_F32 ? 1 : 2;   /* k elements per step */
    const int xe = kind == MK_BF16F ? 2 : 1; /* packed x words per step and row */
    const int nsteps = (k + E - 1) / E;
    const size_t wstep = bf16 ? NB * 2 * sizeof(uint16_t) : NB * sizeof(float);
    int kc = bf16 ? KC_PAIRS : KC_F32;
    if (m <= RB || kc > nsteps) kc = nsteps; /* block stride of the packed x */
    /* a single row needs no packing when its steps are all full */
    const int direct = m == 1 && kind != MK_BF16D && k % E == 0;
    float *xp = (float *)round_up((uintptr_t)scratch, 64);
    const char *wd = w->data;

    for (int r0 = 0; r0 < m; r0 += MC) {
        int mc = m - r0 < MC ? m - r0 : MC;
        for (int s0 = 0; s0 < nsteps; s0 += kc) {
            int sc = nsteps - s0 < kc ? nsteps - s0 : kc;
            int last = s0 + sc == nsteps;
            if (!direct) pack_x(xp, x + (size_t)r0 * k, mc, k, s0, sc, kc, kind);
            for (int b = plo; b < phi; b++) {
                const char *wp = wd + ((size_t)b * nsteps + s0) * wstep;
                int nc = n - b * NB;
                simd_m m0 = simd_mask_n(nc), m1 = simd_mask_n(nc - SIMD_W > 0 ? nc - SIMD_W : 0);
                const float *bp = last && bias ? bias + (size_t)b * NB : NULL;
                for (int rb = 0; rb < mc; rb += RB) {
                    int R = mc - rb < RB ? mc - rb : RB;
                    const float *xr = direct ? x + (size_t)s0 * E : xp + (size_t)rb * kc * xe;
                    mk_tab[kind][R](xr, wp, sc, y + (size_t)(r0 + rb) * n + (size_t)b * NB,
                                    (size_t)n, m0, m1, s0 > 0, bp);
                }
            }
        }
    }
}

/* ---- row kernels ------------------------------------------------------- */

/* y = x / rms(x) * (w + w_offset) */
static void SIMD_FN(rmsnorm)(float *y, const float *x, const float *w, int n, float eps, float w_offset)
{
    simd_v s0 = simd_zero(), s1 = simd_zero();
    int i = 0;
    for (; i + 2 * SIMD_W <= n; i += 2 * SIMD_W) {
        simd_v a = simd_loadu(x + i), b = simd_loadu(x + i + SIMD_W);
        s0 = simd_fmadd(a, a, s0);
        s1 = simd_fmadd(b, b, s1);
    }
    if (SIMD_MASKED_TAILS)
        for (; i < n; i += SIMD_W) {
            simd_v a = simd_maskz_loadu(simd_mask_n(n - i), x + i);
            s0 = simd_fmadd(a, a, s0);
        }
    float ss = simd_reduce_add(simd_add(s0, s1));
    for (; i < n; i++) ss += x[i] * x[i];
    float inv = 1.0f / sqrtf(ss / (float)n + eps);
    simd_v vi = simd_set1(inv), off = simd_set1(w_offset);
    for (i = 0; i + SIMD_W <= n; i += SIMD_W)
        simd_storeu(y + i, simd_mul(simd_mul(simd_loadu(x + i), vi), simd_add(simd_loadu(w + i), off)));
    if (SIMD_MASKED_TAILS && i < n) {
        simd_m mk = simd_mask_n(n - i);
        simd_v a = simd_maskz_loadu(mk, x + i), wv = simd_add(simd_maskz_loadu(mk, w + i), off);
        simd_mask_storeu(y + i, mk, simd_mul(simd_mul(a, vi), wv));
        i = n;
    }
    for (; i < n; i++) y[i] = x[i] * inv * (w[i] + w_offset);
}

/* neox: (x[i], x[i + half]) rotate; gptj: (x[2i], x[2i + 1]) rotate */
static void SIMD_FN(rope)(float *x, int n_head, int head_dim, int rot_dim, const float *cos_t,
                          const float *sin_t, int neox)
{
    int half = rot_dim / 2;
    const simd_v sign = simd_alt_sign();
    for (int h = 0; h < n_head; h++) {
        float *v = x + (size_t)h * head_dim;
        int i = 0;
        if (neox) {
            for (; i + SIMD_W <= half; i += SIMD_W) {
                simd_v c = simd_loadu(cos_t + i), s = simd_loadu(sin_t + i);
                simd_v x0 = simd_loadu(v + i), x1 = simd_loadu(v + half + i);
                simd_storeu(v + i, simd_fmsub(x0, c, simd_mul(x1, s)));
                simd_storeu(v + half + i, simd_fmadd(x1, c, simd_mul(x0, s)));
            }
            if (SIMD_MASKED_TAILS && i < half) {
                simd_m mk = simd_mask_n(half - i);
                simd_v c = simd_maskz_loadu(mk, cos_t + i), s = simd_maskz_loadu(mk, sin_t + i);
                simd_v x0 = simd_maskz_loadu(mk, v + i), x1 = simd_maskz_loadu(mk, v + half + i);
                simd_mask_storeu(v + i, mk, simd_fmsub(x0, c, simd_mul(x1, s)));
                simd_mask_storeu(v + half + i, mk, simd_fmadd(x1, c, simd_mul(x0, s)));
                i = half;
            }
            for (; i < half; i++) {
                float x0 = v[i], x1 = v[i + half];
                v[i] = x0 * cos_t[i] - x1 * sin_t[i];
                v[i + half] = x1 * cos_t[i] + x0 * sin_t[i];
            }
        } else {
            for (; i + SIMD_W / 2 <= half; i += SIMD_W / 2) {
                simd_v c = simd_load_half_dup(cos_t + i), s = simd_load_half_dup(sin_t + i);
                simd_v xv = simd_loadu(v + 2 * i);
                /* even: x0 c - x1 s ; odd: x1 c + x0 s */
                simd_storeu(v + 2 * i, simd_fmadd(xv, c, simd_mul(simd_mul(simd_swap_pairs(xv), s), sign)));
            }
            for (; i < half; i++) {
                float x0 = v[2 * i], x1 = v[2 * i + 1];
                v[2 * i] = x0 * cos_t[i] - x1 * sin_t[i];
                v[2 * i + 1] = x1 * cos_t[i] + x0 * sin_t[i];
            }
        }
    }
}

/* g * sigmoid(g) * u */
AINLINE simd_v silu_v(simd_v g, simd_v u)
{
    simd_v e = simd_exp(simd_sub(simd_zero(), g));
    return simd_mul(simd_div(g, simd_add(simd_set1(1.0f), e)), u);
}

static void SIMD_FN(silu_mul)(float *y, const float *gate, const float *up, int n)
{
    int i = 0;
    for (; i + SIMD_W <= n; i += SIMD_W) simd_storeu(y + i, silu_v(simd_loadu(gate + i), simd_loadu(up + i)));
    if (SIMD_MASKED_TAILS && i < n) {
        simd_m mk = simd_mask_n(n - i);
        simd_mask_storeu(y + i, mk, silu_v(simd_maskz_loadu(mk, gate + i), simd_maskz_loadu(mk, up + i)));
        i = n;
    }
    for (; i < n; i++) y[i] = gate[i] / (1.0f + expf(-gate[i])) * up[i];
}

/* 0.5 g (1 + tanh(t)) u = g sigmoid(2t) u = g / (1 + exp(-2t)) u,
 * t = c (g + 0.044715 g^3) */
#define GELU_C 0.7978845608028654f
AINLINE simd_v gelu_v(simd_v g, simd_v u)
{
    simd_v g3 = simd_mul(simd_mul(g, g), g);
    simd_v e = simd_exp(simd_mul(simd_set1(-2.0f * GELU_C), simd_fmadd(simd_set1(0.044715f), g3, g)));
    return simd_mul(simd_div(g, simd_add(simd_set1(1.0f), e)), u);
}

static void SIMD_FN(gelu_tanh_mul)(float *y, const float *gate, const float *up, int n)
{
    int i = 0;
    for (; i + SIMD_W <= n; i += SIMD_W) simd_storeu(y + i, gelu_v(simd_loadu(gate + i), simd_loadu(up + i)));
    if (SIMD_MASKED_TAILS && i < n) {
        simd_m mk = simd_mask_n(n - i);
        simd_mask_storeu(y + i, mk, gelu_v(simd_maskz_loadu(mk, gate + i), simd_maskz_loadu(mk, up + i)));
        i = n;
    }
    for (; i < n; i++) {
        float g = gate[i];
        y[i] = g / (1.0f + expf(-2.0f * GELU_C * (g + 0.044715f * g * g * g))) * up[i];
    }
}

static void SIMD_FN(add)(float *y, const float *a, const float *b, int n)
{
    int i = 0;
    for (; i + SIMD_W <= n; i += SIMD_W) simd_storeu(y + i, simd_add(simd_loadu(a + i), simd_loadu(b + i)));
    if (SIMD_MASKED_TAILS && i < n) {
        simd_m mk = simd_mask_n(n - i);
        simd_mask_storeu(y + i, mk, simd_add(simd_maskz_loadu(mk, a + i), simd_maskz_loadu(mk, b + i)));
        i = n;
    }
    for (; i < n; i++) y[i] = a[i] + b[i];
}

static void SIMD_FN(softmax)(float *x, int n)
{
    if (n <= 0) return;
    const simd_v neg_inf = simd_set1(-INFINITY);
    simd_v mv = neg_inf;
    int i = 0;
    for (; i + SIMD_W <= n; i += SIMD_W) mv = simd_max(mv, simd_loadu(x + i));
    if (SIMD_MASKED_TAILS && i < n) {
        mv = simd_max(mv, simd_mask_loadu_fill(neg_inf, simd_mask_n(n - i), x + i));
        i = n;
    }
    float mx = simd_reduce_max(mv);
    for (; i < n; i++)
        if (x[i] > mx) mx = x[i];
    simd_v m = simd_set1(mx), sv = simd_zero();
    for (i = 0; i + SIMD_W <= n; i += SIMD_W) {
        simd_v e = simd_exp(simd_sub(simd_loadu(x + i), m));
        sv = simd_add(sv, e);
        simd_storeu(x + i, e);
    }
    if (SIMD_MASKED_TAILS && i < n) {
        simd_m mk = simd_mask_n(n - i);
        simd_v e = simd_maskz_mov(mk, simd_exp(simd_sub(simd_maskz_loadu(mk, x + i), m)));
        sv = simd_add(sv, e);
        simd_mask_storeu(x + i, mk, e);
        i = n;
    }
    float sum = 0.0f; /* the scalar tail's sum, then the vector lanes' */
    for (; i < n; i++) {
        x[i] = expf(x[i] - mx);
        sum += x[i];
    }
    sum += simd_reduce_add(sv);
    float inv = 1.0f / sum;
    simd_v vi = simd_set1(inv);
    for (i = 0; i + SIMD_W <= n; i += SIMD_W) simd_storeu(x + i, simd_mul(simd_loadu(x + i), vi));
    if (SIMD_MASKED_TAILS && i < n) {
        simd_m mk = simd_mask_n(n - i);
        simd_mask_storeu(x + i, mk, simd_mul(simd_maskz_loadu(mk, x + i), vi));
        i = n;
    }
    for (; i < n; i++) x[i] *= inv;
}

/* first index of the max; rows with NaN (or shorter than a vector) go to
 * the reference, which defines that case */
static int SIMD_FN(argmax)(const float *x, int n)
{
    if (n < SIMD_W || isnan(x[0])) return kern_ref_argmax(x, n);
    simd_v mv = simd_loadu(x);
    int i = SIMD_W;
    for (; i + SIMD_W <= n; i += SIMD_W) mv = simd_max(simd_loadu(x + i), mv);
    float best = simd_reduce_max(mv);
    for (; i < n; i++)
        if (x[i] > best) best = x[i];
    simd_v bv = simd_set1(best);
    for (i = 0; i + SIMD_W <= n; i += SIMD_W) {
        unsigned eq = simd_cmpeq_bits(simd_loadu(x + i), bv);
        if (eq) return i + __builtin_ctz(eq);
    }
    for (; i < n; i++)
        if (x[i] == best) return i;
    return kern_ref_argmax(x, n); /* NaNs in the row */
}

static float SIMD_FN(dot)(const float *a, const float *b, int n)
{
    simd_v s0 = simd_zero(), s1 = simd_zero();
    int i = 0;
    for (; i + 2 * SIMD_W <= n; i += 2 * SIMD_W) {
        s0 = simd_fmadd(simd_loadu(a + i), simd_loadu(b + i), s0);
        s1 = simd_fmadd(simd_loadu(a + i + SIMD_W), simd_loadu(b + i + SIMD_W), s1);
    }
    if (SIMD_MASKED_TAILS)
        for (; i < n; i += SIMD_W) {
            simd_m mk = simd_mask_n(n - i);
            s0 = simd_fmadd(simd_maskz_loadu(mk, a + i), simd_maskz_loadu(mk, b + i), s0);
        }
    float s = simd_reduce_add(simd_add(s0, s1));
    for (; i < n; i++) s += a[i] * b[i];
    return s;
}

#endif /* ROWS_DEFINE_KERNELS */
