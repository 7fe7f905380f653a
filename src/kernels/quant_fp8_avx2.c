/* quant_fp8_avx2 — AVX2 + F16C kernels of the fp8 weight type (see
 * quant_fp8.h for the format and the e4m3 -> f16 decode; quant_fp8.c's
 * scalar kernels are the reference they are tested against).
 *
 * DESIGN: decode is 3 integer ops per 16 codes (sign-extend to int16,
 * shift left 7, mask 0xBF80) and two vcvtph2ps; the 2^8 the f16 trick
 * leaves out is folded into the block scale.
 *   - GEMV: one weight row at a time, four independent FMA chains per
 *     block (32 codes per step), the block's sum scaled once;
 *   - GEMM: a panel of QF8_NB weight rows x QF8_KC inputs dequantized to
 *     f32 (e4m3 * d, bit-equal to the dequantized weights), then a 3 x 4
 *     dot-form micro-kernel (12 accumulators: 3 activation rows against 4
 *     panel rows, 7 loads per 12 FMAs) with a hadd reduction of the four
 *     columns per row at the end of each panel. */
#include <immintrin.h>
#include <string.h>

#include "kernels/quant_fp8.h"

#define AI static inline __attribute__((always_inline))

AI float hsum8(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* the four lane sums of a0..a3 */
AI __m128 hsum4(__m256 a0, __m256 a1, __m256 a2, __m256 a3)
{
    __m256 t = _mm256_hadd_ps(_mm256_hadd_ps(a0, a1), _mm256_hadd_ps(a2, a3));
    return _mm_add_ps(_mm256_castps256_ps128(t), _mm256_extractf128_ps(t, 1));
}

/* 16 e4m3 codes -> 16 f16 of value * 2^-8 */
AI __m256i f16x16(const uint8_t *q)
{
    __m256i v = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)q));
    return _mm256_and_si256(_mm256_slli_epi16(v, 7), _mm256_set1_epi16((short)0xBF80));
}
AI __m256 lo8(__m256i h) { return _mm256_cvtph_ps(_mm256_castsi256_si128(h)); }
AI __m256 hi8(__m256i h) { return _mm256_cvtph_ps(_mm256_extracti128_si256(h, 1)); }

float qf8_dot_avx2(const void *row, const float *x, int k)
{
    const block_f8b *b = row;
    __m256 tot = _mm256_setzero_ps();
    for (int i = 0; i < k / QK_F8B; i++, x += QK_F8B) {
        __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
        const uint8_t *q = b[i].q;
        for (int j = 0; j < QK_F8B; j += 32) {
            __m256i h0 = f16x16(q + j), h1 = f16x16(q + j + 16);
            a0 = _mm256_fmadd_ps(lo8(h0), _mm256_loadu_ps(x + j), a0);
            a1 = _mm256_fmadd_ps(hi8(h0), _mm256_loadu_ps(x + j + 8), a1);
            a2 = _mm256_fmadd_ps(lo8(h1), _mm256_loadu_ps(x + j + 16), a2);
            a3 = _mm256_fmadd_ps(hi8(h1), _mm256_loadu_ps(x + j + 24), a3);
        }
        __m256 s = _mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3));
        tot = _mm256_fmadd_ps(s, _mm256_set1_ps(b[i].d * 256.0f), tot);
    }
    return hsum8(tot);
}

/* panel[c * QF8_KC + t] = W[j0 + c][kc0 + t] for c < nc, t < kc */
static void build_panel(float *panel, const kern_mat *w, int j0, int nc, int kc0, int kc)
{
    const size_t rb = (size_t)(w->k / QK_F8B) * sizeof(block_f8b);
    for (int c = 0; c < nc; c++) {
        const block_f8b *b = (const block_f8b *)((const char *)w->data + (size_t)(j0 + c) * rb) + kc0 / QK_F8B;
        float *p = panel + (size_t)c * QF8_KC;
        for (int i = 0; i < kc / QK_F8B; i++, p += QK_F8B) {
            const __m256 dv = _mm256_set1_ps(b[i].d * 256.0f);
            for (int j = 0; j < QK_F8B; j += 16) {
                __m256i h = f16x16(b[i].q + j);
                _mm256_store_ps(p + j, _mm256_mul_ps(lo8(h), dv));
                _mm256_store_ps(p + j + 8, _mm256_mul_ps(hi8(h), dv));
            }
        }
    }
}

/* R (1..3) activation rows x 4 panel rows over kc inputs; y rows at
 * y + r * n (columns 0..3), stored (first panel) or added. */
AI void micro_r4(int R, const float *x, size_t xs, const float *p, int kc, float *y, size_t n, int add)
{
    __m256 acc[3][4];
    for (int r = 0; r < 3; r++)
        for (int c = 0; c < 4; c++) acc[r][c] = _mm256_setzero_ps();
    for (int t = 0; t < kc; t += 8) {
        __m256 w0 = _mm256_load_ps(p + t), w1 = _mm256_load_ps(p + QF8_KC + t);
        __m256 w2 = _mm256_load_ps(p + 2 * QF8_KC + t), w3 = _mm256_load_ps(p + 3 * QF8_KC + t);
        for (int r = 0; r < R; r++) {
            __m256 xv = _mm256_loadu_ps(x + r * xs + t);
            acc[r][0] = _mm256_fmadd_ps(xv, w0, acc[r][0]);
            acc[r][1] = _mm256_fmadd_ps(xv, w1, acc[r][1]);
            acc[r][2] = _mm256_fmadd_ps(xv, w2, acc[r][2]);
            acc[r][3] = _mm256_fmadd_ps(xv, w3, acc[r][3]);
        }
    }
    for (int r = 0; r < R; r++) {
        __m128 s = hsum4(acc[r][0], acc[r][1], acc[r][2], acc[r][3]);
        float *yr = y + r * n;
        if (add) s = _mm_add_ps(s, _mm_loadu_ps(yr));
        _mm_storeu_ps(yr, s);
    }
}

/* the column tail: one panel row at a time */
static void micro_1(int R, const float *x, size_t xs, const float *p, int kc, float *y, size_t n, int add)
{
    for (int r = 0; r < R; r++) {
        __m256 a = _mm256_setzero_ps();
        for (int t = 0; t < kc; t += 8) a = _mm256_fmadd_ps(_mm256_loadu_ps(x + r * xs + t), _mm256_load_ps(p + t), a);
        float s = hsum8(a);
        y[r * n] = add ? y[r * n] + s : s;
    }
}

void qf8_cols_avx2(float *y, const float *x, int m, const kern_mat *w, int lo, int hi, float *panel)
{
    const int n = w->n, k = w->k;
    const size_t rb = (size_t)(k / QK_F8B) * sizeof(block_f8b);
    if (m == 1) {
        for (int j = lo; j < hi; j++) y[j] = qf8_dot_avx2((const char *)w->data + (size_t)j * rb, x, k);
        return;
    }
    for (int j0 = lo; j0 < hi; j0 += QF8_NB) {
        const int nc = hi - j0 < QF8_NB ? hi - j0 : QF8_NB;
        for (int kc0 = 0; kc0 < k; kc0 += QF8_KC) {
            const int kc = k - kc0 < QF8_KC ? k - kc0 : QF8_KC, add = kc0 > 0;
            build_panel(panel, w, j0, nc, kc0, kc);
            for (int r0 = 0; r0 < m; r0 += 3) {
                const int R = m - r0 < 3 ? m - r0 : 3;
                const float *xr = x + (size_t)r0 * k + kc0;
                float *yr = y + (size_t)r0 * n + j0;
                int c = 0;
                for (; c + 4 <= nc; c += 4) {
                    const float *p = panel + (size_t)c * QF8_KC;
                    if (R == 3) micro_r4(3, xr, (size_t)k, p, kc, yr + c, (size_t)n, add);
                    else if (R == 2) micro_r4(2, xr, (size_t)k, p, kc, yr + c, (size_t)n, add);
                    else micro_r4(1, xr, (size_t)k, p, kc, yr + c, (size_t)n, add);
                }
                for (; c < nc; c++) micro_1(R, xr, (size_t)k, panel + (size_t)c * QF8_KC, kc, yr + c, (size_t)n, add);
            }
        }
    }
}
