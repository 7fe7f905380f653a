/* mamba2_ssd_avx2 — the chunked Mamba2 scan (mamba2_ssd_impl.h's body,
 * compiled here with AVX2 + FMA so its row loops vectorize) and its matrix
 * products with AVX2 + FMA intrinsics: register blocks of 4 rows x 16
 * columns (8 accumulators), then 4 x 8, a scalar column tail and 1-row
 * blocks for the row tail.  Same contract as mamba2_ssd_gemm; the sum over
 * k runs in the same order, only FMA rounding differs. */
#include <immintrin.h>
#include <stddef.h>
#include <string.h>

#include "model/mamba2_ssd.h"

/* A's element (r, kk) at A + r*rs + kk*ks (ks = 1: row-major, rs = 1: transposed) */
static inline __attribute__((always_inline)) void block16(int mr, int k, const float *A, size_t rs,
                                                          size_t ks, const float *B, int ldb,
                                                          float *C, int ldc, int acc)
{
    __m256 c0[4], c1[4];
    for (int r = 0; r < mr; r++) {
        c0[r] = acc ? _mm256_loadu_ps(C + (size_t)r * ldc) : _mm256_setzero_ps();
        c1[r] = acc ? _mm256_loadu_ps(C + (size_t)r * ldc + 8) : _mm256_setzero_ps();
    }
    for (int kk = 0; kk < k; kk++) {
        const __m256 b0 = _mm256_loadu_ps(B + (size_t)kk * ldb),
                     b1 = _mm256_loadu_ps(B + (size_t)kk * ldb + 8);
        for (int r = 0; r < mr; r++) {
            const __m256 av = _mm256_broadcast_ss(A + (size_t)r * rs + (size_t)kk * ks);
            c0[r] = _mm256_fmadd_ps(av, b0, c0[r]);
            c1[r] = _mm256_fmadd_ps(av, b1, c1[r]);
        }
    }
    for (int r = 0; r < mr; r++) {
        _mm256_storeu_ps(C + (size_t)r * ldc, c0[r]);
        _mm256_storeu_ps(C + (size_t)r * ldc + 8, c1[r]);
    }
}

static inline __attribute__((always_inline)) void block8(int mr, int k, const float *A, size_t rs,
                                                         size_t ks, const float *B, int ldb, float *C,
                                                         int ldc, int acc)
{
    __m256 c0[4];
    for (int r = 0; r < mr; r++)
        c0[r] = acc ? _mm256_loadu_ps(C + (size_t)r * ldc) : _mm256_setzero_ps();
    for (int kk = 0; kk < k; kk++) {
        const __m256 b0 = _mm256_loadu_ps(B + (size_t)kk * ldb);
        for (int r = 0; r < mr; r++)
            c0[r] = _mm256_fmadd_ps(_mm256_broadcast_ss(A + (size_t)r * rs + (size_t)kk * ks), b0, c0[r]);
    }
    for (int r = 0; r < mr; r++) _mm256_storeu_ps(C + (size_t)r * ldc, c0[r]);
}

static void rows(int mr, int n, int k, const float *A, size_t rs, size_t ks, const float *B, int ldb,
                 float *C, int ldc, int acc)
{
    int j = 0;
    if (mr == 4) {
        for (; j + 16 <= n; j += 16) block16(4, k, A, rs, ks, B + j, ldb, C + j, ldc, acc);
        for (; j + 8 <= n; j += 8) block8(4, k, A, rs, ks, B + j, ldb, C + j, ldc, acc);
    } else {
        for (; j + 16 <= n; j += 16) block16(1, k, A, rs, ks, B + j, ldb, C + j, ldc, acc);
        for (; j + 8 <= n; j += 8) block8(1, k, A, rs, ks, B + j, ldb, C + j, ldc, acc);
    }
    for (int r = 0; r < mr && j < n; r++) {
        float *c = C + (size_t)r * ldc;
        const float *a = A + (size_t)r * rs;
        for (int jj = j; jj < n; jj++) {
            float s = acc ? c[jj] : 0.0f;
            for (int kk = 0; kk < k; kk++) s = fmaf(a[(size_t)kk * ks], B[(size_t)kk * ldb + jj], s);
            c[jj] = s;
        }
    }
}

void mamba2_ssd_gemm_avx2(int m, int n, int k, const float *A, int lda, int ta, const float *B,
                          int ldb, float *C, int ldc, int acc)
{
    const size_t rs = ta ? 1 : (size_t)lda, ks = ta ? (size_t)lda : 1;
    int i = 0;
    for (; i + 4 <= m; i += 4)
        rows(4, n, k, A + (size_t)i * rs, rs, ks, B, ldb, C + (size_t)i * ldc, ldc, acc);
    for (; i < m; i++) rows(1, n, k, A + (size_t)i * rs, rs, ks, B, ldb, C + (size_t)i * ldc, ldc, acc);
}

#define SSD_GEMM mamba2_ssd_gemm_avx2
#define SSD_SCAN mamba2_ssd_scan_avx2
#include "model/mamba2_ssd_impl.h"
