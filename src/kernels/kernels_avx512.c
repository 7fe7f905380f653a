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
 * bf16 weights, default path: each 32-bit pair is widened in registers to
 * two f32 vectors (even k: << 16, odd k: & 0xffff0000) and multiplied with
 * f32 activations by vfmadd231ps.  On the CPUs measured vdpbf16ps zmm
 * issues at half the FMA rate (bench_ceilings), so this is faster and keeps
 * x exact.  SGLC_BF16_DOT=1 selects vdpbf16ps on bf16-rounded x instead.
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
 * Elementwise: vector exp (Cephes-style polynomial, ~1 ulp, scalef for
 * 2^n); sigmoid/tanh/gelu built on it. */
#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels_impl.h"
#include "util/cpu.h"

#define NB 32          /* output columns per panel */
#define RB 12          /* rows per micro-kernel call */
#define MC 240         /* rows per activation chunk (multiple of RB) */
#define KC_PAIRS 192   /* k pairs per L1 block (bf16): 24 KiB of panel */
#define KC_F32 192     /* k per L1 block (f32): 24 KiB of panel; must be <= 2 * KC_PAIRS */
#define PF_BYTES 1024  /* decode prefetch distance */

enum { LAYOUT_BF16 = 0x5121, LAYOUT_F32 = 0x5122 };

/* bf16 weights: 0 = f32 activations through vfmadd231ps (default: on the
 * CPUs measured, vdpbf16ps zmm issues at half the FMA rate, so this is both
 * faster and exact in the activations); 1 = activations rounded to bf16 and
 * vdpbf16ps.  Set by kernels_init() before compute threads exist. */
static int g_bf16_dot;
void kern_avx512_set_bf16_dot(int on) { g_bf16_dot = on; }

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

static int pack512(kern_mat *m, const void *src, dtype sdt)
{
    return kern_pack_panels(m, src, sdt, NB, LAYOUT_BF16, LAYOUT_F32);
}

/* ---- matmul micro-kernels ---------------------------------------------- */

/* Activations reach the micro-kernels packed per block of R rows, step by
 * step along k: xp[(s * R + r) * E + e] is x[r][s * E + e] (E = 2 for bf16
 * weight pairs, 1 for f32 weights), zero past k.  Reading them is then one
 * sequential stream instead of R rows 4 KiB apart that fight for the same L1
 * sets.  The dot path packs bf16 pairs: xb[s * R + r].
 *
 * Each micro-kernel computes y[R][32] (+)= x[R][block] . panel[block][32];
 * masks select the valid columns; load_y accumulates onto y (k blocks after
 * the first); bias, when non-NULL, is added (the last k block). */

/* bf16 weights, f32 activations: a 32-bit weight pair splits into two f32
 * vectors (even k: << 16, odd k: & 0xffff0000) for vfmadd231ps. */
AINLINE void mk_bf16f(const int R, const float *xp, const uint16_t *w, int np, float *y,
                      size_t ldy, __mmask16 m0, __mmask16 m1, int load_y, const float *bias)
{
    __m512 acc[RB][2];
    const __m512i hi_mask = _mm512_set1_epi32((int)0xFFFF0000u);
    for (int r = 0; r < R; r++) {
        if (load_y) {
            acc[r][0] = _mm512_maskz_loadu_ps(m0, y + r * ldy);
            acc[r][1] = _mm512_maskz_loadu_ps(m1, y + r * ldy + 16);
        } else {
            acc[r][0] = _mm512_setzero_ps();
            acc[r][1] = _mm512_setzero_ps();
        }
    }
    for (int p = 0; p < np; p++) {
        const uint16_t *wp = w + (size_t)p * 64;
        if (R <= 2) {
            _mm_prefetch((const char *)wp + PF_BYTES, _MM_HINT_T0);
            _mm_prefetch((const char *)wp + PF_BYTES + 64, _MM_HINT_T0);
        }
        __m512i v0 = _mm512_load_si512(wp), v1 = _mm512_load_si512(wp + 32);
        __m512 e0 = _mm512_castsi512_ps(_mm512_slli_epi32(v0, 16));
        __m512 o0 = _mm512_castsi512_ps(_mm512_and_si512(v0, hi_mask));
        __m512 e1 = _mm512_castsi512_ps(_mm512_slli_epi32(v1, 16));
        __m512 o1 = _mm512_castsi512_ps(_mm512_and_si512(v1, hi_mask));
        const float *xs = xp + (size_t)p * R * 2;
        for (int r = 0; r < R; r++) {
            __m512 xe = _mm512_set1_ps(xs[2 * r]);
            __m512 xo = _mm512_set1_ps(xs[2 * r + 1]);
            acc[r][0] = _mm512_fmadd_ps(xe, e0, acc[r][0]);
            acc[r][1] = _mm512_fmadd_ps(xe, e1, acc[r][1]);
            acc[r][0] = _mm512_fmadd_ps(xo, o0, acc[r][0]);
            acc[r][1] = _mm512_fmadd_ps(xo, o1, acc[r][1]);
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

/* bf16 weights, bf16 activation pairs, vdpbf16ps. */
AINLINE void mk_bf16d(const int R, const uint32_t *xb, const uint16_t *w, int np, float *y,
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

/* f32 weights, f32 activations. */
AINLINE void mk_f32(const int R, const float *xp, const float *w, int nk, float *y, size_t ldy,
                    __mmask16 m0, __mmask16 m1, int load_y, const float *bias)
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
        if (R <= 2) _mm_prefetch((const char *)wp + PF_BYTES, _MM_HINT_T0);
        __m512 w0 = _mm512_load_ps(wp), w1 = _mm512_load_ps(wp + 16);
        for (int r = 0; r < R; r++) {
            __m512 xv = _mm512_set1_ps(xp[(size_t)i * R + r]);
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

/* One signature for the three (x is float* or uint32_t* by kind). */
typedef void (*mk_fn)(const void *xp, const void *w, int nsteps, float *y, size_t ldy,
                      __mmask16 m0, __mmask16 m1, int load_y, const float *bias);

#define MK_INST(R)                                                                               \
    static void mk_bf16f_##R(const void *x, const void *w, int ns, float *y, size_t ldy,         \
                             __mmask16 m0, __mmask16 m1, int ly, const float *b)                 \
    {                                                                                            \
        mk_bf16f(R, x, w, ns, y, ldy, m0, m1, ly, b);                                            \
    }                                                                                            \
    static void mk_bf16d_##R(const void *x, const void *w, int ns, float *y, size_t ldy,         \
                             __mmask16 m0, __mmask16 m1, int ly, const float *b)                 \
    {                                                                                            \
        mk_bf16d(R, x, w, ns, y, ldy, m0, m1, ly, b);                                            \
    }                                                                                            \
    static void mk_f32_##R(const void *x, const void *w, int ns, float *y, size_t ldy,           \
                           __mmask16 m0, __mmask16 m1, int ly, const float *b)                   \
    {                                                                                            \
        mk_f32(R, x, w, ns, y, ldy, m0, m1, ly, b);                                              \
    }
MK_INST(1) MK_INST(2) MK_INST(3) MK_INST(4) MK_INST(5) MK_INST(6)
MK_INST(7) MK_INST(8) MK_INST(9) MK_INST(10) MK_INST(11) MK_INST(12)

enum { MK_BF16F = 0, MK_BF16D = 1, MK_F32 = 2 };
static const mk_fn mk_tab[3][RB + 1] = {
    {NULL, mk_bf16f_1, mk_bf16f_2, mk_bf16f_3, mk_bf16f_4, mk_bf16f_5, mk_bf16f_6, mk_bf16f_7,
     mk_bf16f_8, mk_bf16f_9, mk_bf16f_10, mk_bf16f_11, mk_bf16f_12},
    {NULL, mk_bf16d_1, mk_bf16d_2, mk_bf16d_3, mk_bf16d_4, mk_bf16d_5, mk_bf16d_6, mk_bf16d_7,
     mk_bf16d_8, mk_bf16d_9, mk_bf16d_10, mk_bf16d_11, mk_bf16d_12},
    {NULL, mk_f32_1, mk_f32_2, mk_f32_3, mk_f32_4, mk_f32_5, mk_f32_6, mk_f32_7, mk_f32_8,
     mk_f32_9, mk_f32_10, mk_f32_11, mk_f32_12},
};

/* ---- matmul driver ----------------------------------------------------- */

/* Scratch: the packed activation block, rows x steps x E floats; for m <= RB
 * the whole k in one block, else KC steps (k extent <= 2 * KC_PAIRS). */
static size_t matmul_scratch512(int m, int k)
{
    /* monotonic in m and k: a caller sizes scratch once for its largest
     * batch, and m <= RB packs the whole k while larger m packs KC blocks */
    if (m <= 0 || k <= 0) return 64;
    size_t amx = kern_avx512_amx_ok() && m >= KERN_AMX_MIN_M ? kern_amx_matmul_scratch(m, k) : 0;
    size_t small = (size_t)(m < RB ? m : RB) * round_up((size_t)k + 1, 16);
    size_t per_row = 2 * (size_t)KC_PAIRS < (size_t)k + 1 ? 2 * (size_t)KC_PAIRS : (size_t)k + 1;
    size_t big = m > RB ? (size_t)(m < MC ? m : MC) * round_up(per_row, 16) : 0;
    size_t s = (small > big ? small : big) * sizeof(float) + 128;
    return s > amx ? s : amx;
}

/* Pack rows [0, mc) of x (row stride k) for steps [s0, s0 + sc) into blocks of
 * RB rows; block rb starts at dst + rb * kc * E (floats). */
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
                for (int s = 0; s < sc; s++) {
                    int i = 2 * (s0 + s);
                    uint32_t lo = i < k ? f32_to_bf16(src[i]) : 0;
                    uint32_t hi = i + 1 < k ? f32_to_bf16(src[i + 1]) : 0;
                    d[(size_t)s * R] = lo | hi << 16;
                }
            }
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
    if (g_amx && w->layout == LAYOUT_BF16 && m >= KERN_AMX_MIN_M && !w->x_exact) {
        kern_amx_matmul(y, x, m, w, bias, ith, nth, scratch);
        return;
    }
    const int n = w->n, k = w->k;
    const int npan = (n + NB - 1) / NB;
    int plo, phi;
    kern_split(npan, ith, nth, &plo, &phi);
    if (plo >= phi || m <= 0) return;

    const int bf16 = w->layout == LAYOUT_BF16;
    const int kind = !bf16 ? MK_F32 : g_bf16_dot ? MK_BF16D : MK_BF16F;
    const int E = kind == MK_F32 ? 1 : 2;           /* k elements per step */
    const int xe = kind == MK_BF16F ? 2 : 1;         /* packed x words per step and row */
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
                __mmask16 m0 = tail_mask(nc), m1 = tail_mask(nc - 16 > 0 ? nc - 16 : 0);
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
    const float *const qbuf = b->qbuf, *const kbuf = b->kbuf, *const vbuf = b->vbuf;
    float *const acc = b->acc, *const mx = b->mx, *const sm = b->sm, *const sbuf = b->sbuf;
    const float softcap = b->softcap;
    float *const bm = b->bm, *const alpha = b->alpha;
    const float neg_inf = -INFINITY;
    const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    const __m512i vp = _mm512_add_epi32(_mm512_set1_epi32(p0), lane);
    /* 1: masked scores */
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
            s = _mm512_mul_ps(cap, tanh512(_mm512_div_ps(s, cap)));
        }
        __mmask16 ok = _mm512_cmpge_epi32_mask(vp, _mm512_set1_epi32(rlo[r])) &
                       _mm512_cmplt_epi32_mask(vp, _mm512_set1_epi32(rhi[r]));
        s = _mm512_mask_blend_ps(ok, _mm512_set1_ps(neg_inf), s);
        _mm512_store_ps(srow, s);
        bm[r] = _mm512_reduce_max_ps(s);
    }
    /* 2: running max and rescale factor, 16 rows per vector; a row that
     * has seen no key yet keeps max -inf and alpha 1 */
    for (int r = 0; r < R; r += 16) {
        __mmask16 mk = tail_mask(R - r);
        __m512 mo = _mm512_mask_loadu_ps(_mm512_set1_ps(neg_inf), mk, mx + r);
        __m512 mn = _mm512_max_ps(mo, _mm512_mask_loadu_ps(_mm512_set1_ps(neg_inf), mk, bm + r));
        __mmask16 fin = _mm512_cmp_ps_mask(mn, _mm512_set1_ps(neg_inf), _CMP_NEQ_OQ);
        __m512 al = _mm512_mask_blend_ps(fin, _mm512_set1_ps(1.0f), exp512(_mm512_sub_ps(mo, mn)));
        _mm512_mask_storeu_ps(mx + r, mk, mn);
        _mm512_mask_storeu_ps(alpha + r, mk, al);
    }
    /* 3: probabilities, sums, acc = acc * alpha + P V */
    for (int r = 0; r < R; r++) {
        if (bm[r] == neg_inf) continue; /* nothing visible: alpha is 1 */
        __m512 sv = _mm512_load_ps(sbuf + r * KB);
        __mmask16 ok = _mm512_cmp_ps_mask(sv, _mm512_set1_ps(neg_inf), _CMP_NEQ_OQ);
        __m512 pr = _mm512_maskz_mov_ps(ok, exp512(_mm512_sub_ps(sv, _mm512_set1_ps(mx[r]))));
        sm[r] = sm[r] * alpha[r] + _mm512_reduce_add_ps(pr);
        float pj[16];
        _mm512_storeu_ps(pj, pr);
        __m512 va = _mm512_set1_ps(alpha[r]);
        const float *vr = vbuf + (size_t)(r / nh % nkh) * dp;
        float *ar = acc + r * dp;
        for (int c = 0; c < nc; c++) {
            __m512 o = _mm512_mul_ps(_mm512_load_ps(ar + c * 16), va);
            for (int j = 0; j < nk; j++)
                o = _mm512_fmadd_ps(_mm512_set1_ps(pj[j]), _mm512_load_ps(vr + j * kst + c * 16), o);
            _mm512_store_ps(ar + c * 16, o);
        }
    }
}

AINLINE void attn_store_row(float *o, const float *acc, float inv, int hd, int nc)
{
    __m512 vi = _mm512_set1_ps(inv);
    for (int c = 0; c < nc; c++)
        _mm512_mask_storeu_ps(o + c * 16, tail_mask(hd - c * 16), _mm512_mul_ps(_mm512_load_ps(acc + c * 16), vi));
}

#define ATTN_DEFINE_KERNEL
#define ATTN_NAME attention512
#define ATTN_SCRATCH_NAME attention_scratch512
#include "kernels/kernels_attn_impl.h"

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
