/* kernels_amx — Intel AMX (AMX-TILE + AMX-BF16) matmul for bf16 weights
 * with many activation rows (prefill).
 *
 * DESIGN
 * The AVX-512 bf16 panels (kernels_pack.c, 32 columns, layout
 * [k-pair p][32 columns][2 bf16], 128 bytes per pair) already are AMX B
 * tiles: a B tile is 16 k-pairs x 16 columns x 2 bf16 (64 bytes a row), so
 * columns 0-15 of a panel are the tile at offset 0 and columns 16-31 the
 * tile at offset 64, both with a row stride of 128 bytes.  No other weight
 * layout and no extra memory: weights stay packed by kernels_avx512.c
 * (this file is called from its matmul when AMX is enabled).
 *
 * Per call each thread converts all m rows of x into its scratch as
 * bf16 pairs: hi = bf16(x) and lo = bf16(x - hi) (round to nearest even),
 * (mp, kp) each with mp = m rounded up to 32 rows and kp = k rounded up to
 * 32, padding zero.  Both are multiplied into the same f32 accumulators, so
 * x is carried to ~2^-17 relative (close to the FMA path, which uses f32
 * x); SGLC_AMX_BF16=1 keeps only hi (one rounding, as SGLang's AMX kernels
 * and PyTorch's bf16 matmul do; half the tile work).  A tiles are 16 rows x
 * 32 bf16.  Tiles: 0-3 accumulators (2 row tiles x 2 column tiles = 32 rows
 * x one 32-column panel), 4-5 A (hi, lo), 6-7 B.  The last k step of a
 * panel may hold fewer than 16 pairs (k2 = ceil(k/2) not a multiple of
 * 16): its rows are copied into a zero-padded 2 KiB tile pair, so no load
 * reads past the panel.  Accumulators go through a small f32 scratch; bias
 * is added and only valid rows and columns are written to y (masked).
 *
 * Threads own disjoint ranges of panels (as in kernels_avx512.c).  A
 * thread walks its panels in chunks of about 1 MiB of weights (L2), and for
 * each chunk all 32-row blocks of x; so both the chunk and one row block
 * (32 x kp bf16) stay in L2.
 *
 * Numerics: products of bf16 pairs are exact in f32 and accumulated in
 * f32, in another order than the FMA path, so a row's result depends on
 * whether its matmul took this path (m >= KERN_AMX_MIN_M): not bitwise
 * batch-invariant.  Weights with kern_mat.x_exact (the LM head) never come
 * here. */
#include <immintrin.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "kernels/kernels_impl.h"
#include "util/log.h"

#define ARCH_REQ_XCOMP_PERM 0x1023
#define XFEATURE_XTILEDATA 18
#define AMX_NB 32                     /* panel width (kernels_avx512.c NB) */
#define AMX_CHUNK_BYTES ((size_t)1 << 20) /* weights per panel chunk and k block */
#define AMX_KSTEPS 64                 /* k steps (16 pairs each) per k block: 2048 of k */
#define AMX_NPC_MAX 8                 /* panels per chunk at most (accumulator scratch) */

static inline size_t rup(size_t v, size_t a) { return (v + a - 1) / a * a; }

int kern_amx_request(void)
{
#ifdef SYS_arch_prctl
    long r = syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA);
    if (r != 0) {
        log_info("AMX: the kernel refused XTILEDATA (arch_prctl): AMX disabled");
        return -1;
    }
    return 0;
#else
    return -1;
#endif
}

/* Tile configuration, palette 1 (64 bytes, layout fixed by the ISA). */
typedef struct amx_cfg {
    uint8_t palette, start_row;
    uint8_t rsvd[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} amx_cfg;

size_t kern_amx_matmul_scratch(int m, int k)
{
    if (m <= 0 || k <= 0) return 0;
    size_t kp = rup((size_t)k, 32), mp = rup((size_t)m, 32);
    return 2 * mp * kp * 2 + mp * AMX_NB * AMX_NPC_MAX * sizeof(float) + 16 * 128 + 128;
}

/* x rounded to bf16 (hi) and, when lo != NULL, the rounding remainder
 * rounded to bf16 (lo = bf16(x - hi)): (mp, kp) each, padding zero. */
static void amx_pack_x(uint16_t *hi, uint16_t *lo, const float *x, int m, int mp, int k, int kp)
{
    for (int r = 0; r < mp; r++) {
        uint16_t *dh = hi + (size_t)r * kp, *dl = lo ? lo + (size_t)r * kp : NULL;
        if (r >= m) {
            memset(dh, 0, (size_t)kp * 2);
            if (dl) memset(dl, 0, (size_t)kp * 2);
            continue;
        }
        const float *s = x + (size_t)r * k;
        for (int i = 0; i < kp; i += 16) {
            int rem = k - i;
            __mmask16 mk = rem >= 16 ? (__mmask16)0xFFFF : rem <= 0 ? 0 : (__mmask16)((1u << rem) - 1u);
            __m512 v = _mm512_maskz_loadu_ps(mk, s + i);
            __m256bh h = _mm512_cvtneps_pbh(v);
            _mm256_storeu_si256((__m256i *)(dh + i), (__m256i)h);
            if (dl) {
                __m512 hf = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32((__m256i)h), 16));
                __m256bh l = _mm512_cvtneps_pbh(_mm512_sub_ps(v, hf));
                _mm256_storeu_si256((__m256i *)(dl + i), (__m256i)l);
            }
        }
    }
}

/* y rows [0, m) x panel columns [c0, c0 + nc) <- acc (+ bias); acc is
 * (>= m, 32) f32, row stride 32. */
static void amx_store(float *y, int n, int m, int c0, int nc, const float *acc, const float *bias)
{
    __mmask16 m0 = nc >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << nc) - 1u);
    int n1 = nc - 16;
    __mmask16 m1 = n1 <= 0 ? 0 : n1 >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << n1) - 1u);
    __m512 b0 = bias ? _mm512_maskz_loadu_ps(m0, bias + c0) : _mm512_setzero_ps();
    __m512 b1 = bias ? _mm512_maskz_loadu_ps(m1, bias + c0 + 16) : _mm512_setzero_ps();
    for (int r = 0; r < m; r++) {
        const float *t = acc + (size_t)r * AMX_NB;
        float *yr = y + (size_t)r * n + c0;
        _mm512_mask_storeu_ps(yr, m0, _mm512_add_ps(_mm512_load_ps(t), b0));
        if (m1) _mm512_mask_storeu_ps(yr + 16, m1, _mm512_add_ps(_mm512_load_ps(t + 16), b1));
    }
}

/* One k step (16 pairs) of the 32-row x 32-column block: B tiles at bp
 * (row stride bst), A tiles at a0/a1 (hi) and a0 + lo_off / a1 + lo_off
 * (lo, split only).  two: the second row tile has valid rows. */
static inline __attribute__((always_inline)) void amx_step(const char *a0, const char *a1, size_t astride,
                                                           size_t lo_off, const char *bp, int two, int split)
{
    _tile_loadd(6, bp, 128);
    _tile_loadd(7, bp + 64, 128);
    _tile_loadd(4, a0, astride);
    if (split) _tile_loadd(5, a0 + lo_off, astride);
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    if (split) {
        _tile_dpbf16ps(0, 5, 6);
        _tile_dpbf16ps(1, 5, 7);
    }
    if (two) {
        if (split) {
            _tile_loadd(4, a1, astride);
            _tile_loadd(5, a1 + lo_off, astride);
            _tile_dpbf16ps(2, 4, 6);
            _tile_dpbf16ps(3, 4, 7);
            _tile_dpbf16ps(2, 5, 6);
            _tile_dpbf16ps(3, 5, 7);
        } else {
            _tile_loadd(5, a1, astride);
            _tile_dpbf16ps(2, 5, 6);
            _tile_dpbf16ps(3, 5, 7);
        }
    }
}

#define AMX_LOOP(two, split)                                                                     \
    for (; s < sf; s++)                                                                          \
        amx_step(a0 + (size_t)s * 64, a1 + (size_t)s * 64, astride, lo_off,                      \
                 pan + (size_t)s * 16 * 128, two, split)

/* 1 (default): activations as hi + lo bf16 pairs, two tile products, error
 * ~2^-16 relative per activation (close to the f32 path); 0: one bf16
 * rounding (SGLang's AMX numerics, half the tile work).  SGLC_AMX_BF16=1
 * selects 0; set by kernels_init() before compute threads exist. */
static int g_amx_split = 1;
void kern_amx_set_split(int on) { g_amx_split = on; }

void kern_amx_matmul(float *y, const float *x, int m, const kern_mat *w, const float *bias,
                     int ith, int nth, void *scratch)
{
    const int n = w->n, k = w->k;
    const int npan = (n + AMX_NB - 1) / AMX_NB;
    int plo, phi;
    kern_split(npan, ith, nth, &plo, &phi);
    if (plo >= phi || m <= 0) return;
    const size_t k2 = (size_t)(k + 1) / 2;       /* pairs per panel */
    const int kp = (int)rup((size_t)k, 32);      /* bf16 per padded x row */
    const int mp = (int)rup((size_t)m, 32);
    const int full = (int)(k2 / 16);             /* full k steps */
    const int tail = (int)(k2 % 16);             /* pairs in the last, partial step */
    const size_t pan_bytes = k2 * AMX_NB * 2 * sizeof(uint16_t);
    const size_t astride = (size_t)kp * 2;
    const int split = g_amx_split;
    const size_t lo_off = (size_t)mp * astride;  /* lo copy follows hi */

    char *base = (char *)rup((uintptr_t)scratch, 64);
    uint16_t *xa = (uint16_t *)base;
    float *acc = (float *)(base + 2 * lo_off);   /* (npc, mp, 32) partial sums */
    char *btail = (char *)(acc + (size_t)mp * AMX_NB * AMX_NPC_MAX);
    amx_pack_x(xa, split ? (uint16_t *)(base + lo_off) : NULL, x, m, mp, k, kp);

    amx_cfg cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.palette = 1;
    for (int t = 0; t < 8; t++) {
        cfg.rows[t] = 16;
        cfg.colsb[t] = 64;
    }
    _tile_loadconfig(&cfg);

    const int nsteps = full + (tail ? 1 : 0);
    const int kbs = nsteps < AMX_KSTEPS ? nsteps : AMX_KSTEPS;   /* steps per k block */
    int npc = (int)(AMX_CHUNK_BYTES / ((size_t)kbs * 16 * 128));
    if (npc < 1) npc = 1;
    if (npc > AMX_NPC_MAX) npc = AMX_NPC_MAX;
    const char *wd = w->data;
    for (int c0 = plo; c0 < phi; c0 += npc) {
        int c1 = phi - c0 < npc ? phi : c0 + npc;
        for (int s0 = 0; s0 < nsteps; s0 += kbs) {
            const int s1 = nsteps - s0 < kbs ? nsteps : s0 + kbs;
            const int sf = s1 < full ? s1 : full; /* full steps end here */
            for (int r0 = 0; r0 < mp; r0 += 32) {
                const char *a0 = (const char *)xa + (size_t)r0 * astride;
                const char *a1 = a0 + 16 * astride;
                const int two = r0 + 16 < m; /* second row tile has valid rows */
                for (int b = c0; b < c1; b++) {
                    const char *pan = wd + (size_t)b * pan_bytes;
                    float *ap = acc + ((size_t)(b - c0) * mp + (size_t)r0) * AMX_NB;
                    if (s0 == 0) {
                        _tile_zero(0);
                        _tile_zero(1);
                        _tile_zero(2);
                        _tile_zero(3);
                    } else {
                        _tile_loadd(0, ap, AMX_NB * 4);
                        _tile_loadd(1, ap + 16, AMX_NB * 4);
                        if (two) {
                            _tile_loadd(2, ap + 16 * AMX_NB, AMX_NB * 4);
                            _tile_loadd(3, ap + 16 * AMX_NB + 16, AMX_NB * 4);
                        }
                    }
                    int s = s0;
                    if (two && split) AMX_LOOP(1, 1);
                    else if (two) AMX_LOOP(1, 0);
                    else if (split) AMX_LOOP(0, 1);
                    else AMX_LOOP(0, 0);
                    if (tail && s1 == nsteps) {
                        /* the last step's pairs, zero-padded to a full tile pair */
                        memcpy(btail, pan + (size_t)full * 16 * 128, (size_t)tail * 128);
                        memset(btail + (size_t)tail * 128, 0, (size_t)(16 - tail) * 128);
                        amx_step(a0 + (size_t)full * 64, a1 + (size_t)full * 64, astride, lo_off, btail,
                                 two, split);
                    }
                    _tile_stored(0, ap, AMX_NB * 4);
                    _tile_stored(1, ap + 16, AMX_NB * 4);
                    if (two) {
                        _tile_stored(2, ap + 16 * AMX_NB, AMX_NB * 4);
                        _tile_stored(3, ap + 16 * AMX_NB + 16, AMX_NB * 4);
                    }
                }
            }
        }
        for (int b = c0; b < c1; b++)
            amx_store(y, n, m, b * AMX_NB, n - b * AMX_NB, acc + (size_t)(b - c0) * mp * AMX_NB, bias);
    }
    _tile_release();
}
