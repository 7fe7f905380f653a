/* linear_lora_avx2 — AVX2/FMA shrink and expand of the adapter pass
 * (linear.c holds the scalar references and the contract).
 *
 * DESIGN: shrink reads each rank row of A once per tile of up to 4 token
 * rows (4 accumulators, one per token row, 8 lanes each); expand walks the
 * thread's columns 32 at a time, keeping 4 accumulators across the r rows
 * of Bᵀ, then adds scale · acc to y (one read-modify-write of y).  A and
 * Bᵀ are f32 or bf16 (widened in registers: bf16 bits << 16 are the f32).
 * Each (row, rank) dot and each output column accumulate in a fixed
 * order whatever the other rows of the tile are. */
#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>

static inline float hsum8(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* 8 values at element i of p (f32, or bf16 when bf16) as f32 lanes. */
static inline __m256 ld8(const void *p, int bf16, size_t i)
{
    if (!bf16) return _mm256_loadu_ps((const float *)p + i);
    __m128i h = _mm_loadu_si128((const __m128i *)((const uint16_t *)p + i));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

static inline float ld1(const void *p, int bf16, size_t i)
{
    if (!bf16) return ((const float *)p)[i];
    union {
        uint32_t u;
        float f;
    } v = {.u = (uint32_t)((const uint16_t *)p)[i] << 16};
    return v.f;
}

void linear_lora_shrink_avx2(float *u, const float *const *xr, int nr, const void *a, int bf16, int r,
                             int k);
void linear_lora_expand_avx2(float *y, const float *u, const void *bt, int bf16, int r, int n, int c0,
                             int c1, float scale);

void linear_lora_shrink_avx2(float *u, const float *const *xr, int nr, const void *a, int bf16, int r,
                             int k)
{
    const float *x0 = xr[0], *x1 = nr > 1 ? xr[1] : xr[0];
    const float *x2 = nr > 2 ? xr[2] : xr[0], *x3 = nr > 3 ? xr[3] : xr[0];
    for (int j = 0; j < r; j++) {
        const size_t o = (size_t)j * k;
        __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
        int c = 0;
        for (; c + 8 <= k; c += 8) {
            __m256 av = ld8(a, bf16, o + (size_t)c);
            s0 = _mm256_fmadd_ps(av, _mm256_loadu_ps(x0 + c), s0);
            s1 = _mm256_fmadd_ps(av, _mm256_loadu_ps(x1 + c), s1);
            s2 = _mm256_fmadd_ps(av, _mm256_loadu_ps(x2 + c), s2);
            s3 = _mm256_fmadd_ps(av, _mm256_loadu_ps(x3 + c), s3);
        }
        float t0 = hsum8(s0), t1 = hsum8(s1), t2 = hsum8(s2), t3 = hsum8(s3);
        for (; c < k; c++) {
            float av = ld1(a, bf16, o + (size_t)c);
            t0 += av * x0[c], t1 += av * x1[c];
            t2 += av * x2[c], t3 += av * x3[c];
        }
        u[j] = t0;
        if (nr > 1) u[r + j] = t1;
        if (nr > 2) u[2 * r + j] = t2;
        if (nr > 3) u[3 * r + j] = t3;
    }
}

void linear_lora_expand_avx2(float *y, const float *u, const void *bt, int bf16, int r, int n, int c0,
                             int c1, float scale)
{
    const __m256 sc = _mm256_set1_ps(scale);
    int c = c0;
    for (; c + 32 <= c1; c += 32) {
        __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
        for (int j = 0; j < r; j++) {
            const size_t o = (size_t)j * n + (size_t)c;
            __m256 uj = _mm256_set1_ps(u[j]);
            a0 = _mm256_fmadd_ps(uj, ld8(bt, bf16, o), a0);
            a1 = _mm256_fmadd_ps(uj, ld8(bt, bf16, o + 8), a1);
            a2 = _mm256_fmadd_ps(uj, ld8(bt, bf16, o + 16), a2);
            a3 = _mm256_fmadd_ps(uj, ld8(bt, bf16, o + 24), a3);
        }
        _mm256_storeu_ps(y + c, _mm256_fmadd_ps(sc, a0, _mm256_loadu_ps(y + c)));
        _mm256_storeu_ps(y + c + 8, _mm256_fmadd_ps(sc, a1, _mm256_loadu_ps(y + c + 8)));
        _mm256_storeu_ps(y + c + 16, _mm256_fmadd_ps(sc, a2, _mm256_loadu_ps(y + c + 16)));
        _mm256_storeu_ps(y + c + 24, _mm256_fmadd_ps(sc, a3, _mm256_loadu_ps(y + c + 24)));
    }
    for (; c + 8 <= c1; c += 8) {
        __m256 a0 = _mm256_setzero_ps();
        for (int j = 0; j < r; j++)
            a0 = _mm256_fmadd_ps(_mm256_set1_ps(u[j]), ld8(bt, bf16, (size_t)j * n + (size_t)c), a0);
        _mm256_storeu_ps(y + c, _mm256_fmadd_ps(sc, a0, _mm256_loadu_ps(y + c)));
    }
    for (; c < c1; c++) {
        float s = 0;
        for (int j = 0; j < r; j++) s += u[j] * ld1(bt, bf16, (size_t)j * n + (size_t)c);
        y[c] += scale * s;
    }
}
