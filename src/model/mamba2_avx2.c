/* mamba2_avx2 — the AVX2 + FMA step of the Mamba2 scan (see mamba2.c):
 * one token of one head, S (P, N) updated in place.  Same math as the
 * scalar step in mamba2.c (FMA rounding and an 8-lane sum order differ;
 * tests/scripts/test_arch_mamba.sh holds both to the reference). */
#include <immintrin.h>

void mamba2_step_avx2(float *S, int P, int N, const float *x, const float *B, const float *C,
                      float dt, float dA, float D, float *y);

void mamba2_step_avx2(float *S, int P, int N, const float *x, const float *B, const float *C,
                      float dt, float dA, float D, float *y)
{
    const __m256 va = _mm256_set1_ps(dA);
    const int N8 = N & ~7;
    for (int p = 0; p < P; p++) {
        float *st = S + (size_t)p * N;
        const float xd = x[p] * dt;
        const __m256 vx = _mm256_set1_ps(xd);
        __m256 acc = _mm256_setzero_ps();
        int n = 0;
        for (; n < N8; n += 8) {
            __m256 s = _mm256_fmadd_ps(_mm256_loadu_ps(st + n), va, _mm256_mul_ps(vx, _mm256_loadu_ps(B + n)));
            _mm256_storeu_ps(st + n, s);
            acc = _mm256_fmadd_ps(s, _mm256_loadu_ps(C + n), acc);
        }
        __m128 h = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
        h = _mm_add_ps(h, _mm_movehl_ps(h, h));
        h = _mm_add_ss(h, _mm_shuffle_ps(h, h, 1));
        float sum = _mm_cvtss_f32(h);
        for (; n < N; n++) {
            st[n] = st[n] * dA + xd * B[n];
            sum += st[n] * C[n];
        }
        y[p] = sum + D * x[p];
    }
}
