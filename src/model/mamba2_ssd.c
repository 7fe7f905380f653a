/* mamba2_ssd — the chunked Mamba2 scan (math in mamba2_ssd.h, the body in
 * mamba2_ssd_impl.h): the plain-C matrix product, the body compiled with
 * it (SGLC_KERNELS=scalar or a CPU without AVX2 + FMA), the dispatch to
 * mamba2_ssd_avx2.c's copy, and the environment settings. */
#include "model/mamba2_ssd.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "util/errmsg.h"

size_t mamba2_ssd_scratch_floats(int P, int N, int L, int nhead)
{
    const size_t l = (size_t)L, p = (size_t)P, n = (size_t)N;
    /* S^T of the heads, Bt, CB, M, Yo, Bp, Cp, Xp, Xr, then dt e q r w */
    return (size_t)nhead * p * n + n * l + 2 * l * l + l * p + 2 * l * n + 2 * l * p + 5 * l + 16;
}

void mamba2_ssd_gemm(int m, int n, int k, const float *A, int lda, int ta, const float *B, int ldb,
                     float *C, int ldc, int acc)
{
    const size_t rs = ta ? 1 : (size_t)lda, ks = ta ? (size_t)lda : 1;
    for (int i = 0; i < m; i++) {
        float *c = C + (size_t)i * ldc;
        if (!acc) memset(c, 0, sizeof(float) * (size_t)n);
        const float *a = A + (size_t)i * rs;
        for (int kk = 0; kk < k; kk++) {
            const float av = a[(size_t)kk * ks];
            const float *b = B + (size_t)kk * ldb;
            for (int j = 0; j < n; j++) c[j] += av * b[j];
        }
    }
}

#define SSD_GEMM mamba2_ssd_gemm
#define SSD_SCAN ssd_scan_scalar
#include "model/mamba2_ssd_impl.h"

void mamba2_ssd_scan_avx2(const mamba2_ssd_args *a, float *scratch);

void mamba2_ssd_scan(const mamba2_ssd_args *a, float *scratch, int simd)
{
    if (simd) mamba2_ssd_scan_avx2(a, scratch);
    else ssd_scan_scalar(a, scratch);
}

static int env_int(const char *name, int dflt, int lo, int hi, int allow_off, int *out, char *err,
                   size_t errlen)
{
    const char *v = getenv(name);
    *out = dflt;
    if (!v || !*v) return 0;
    if (allow_off && !strcmp(v, "off")) {
        *out = 0;
        return 0;
    }
    char *end;
    errno = 0;
    long n = strtol(v, &end, 10);
    if (errno || *end || n < (allow_off ? 0 : lo) || n > hi) {
        errmsg_set(err, errlen, "%s=%s: want %san integer in [%d, %d]", name, v,
                   allow_off ? "off, 0 or " : "", lo, hi);
        return -1;
    }
    *out = (int)n;
    return 0;
}

int mamba2_ssd_env(int *min_tokens, int *chunk, char *err, size_t errlen)
{
    if (env_int("SGLC_MAMBA_SSD_MIN_TOKENS", MAMBA2_SSD_MIN_DEFAULT, 1, INT_MAX, 1, min_tokens, err,
                errlen))
        return -1;
    return env_int("SGLC_MAMBA_SSD_CHUNK", MAMBA2_SSD_CHUNK_DEFAULT, 8, MAMBA2_SSD_CHUNK_MAX, 0,
                   chunk, err, errlen);
}
