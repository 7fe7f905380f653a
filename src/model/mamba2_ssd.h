/* mamba2_ssd — the chunked ("state-space duality") form of the Mamba2 scan
 * for long prefills (the body in mamba2_ssd_impl.h, compiled plain in
 * mamba2_ssd.c and with AVX2 + FMA products in mamba2_ssd_avx2.c, used
 * where the CPU and SGLC_KERNELS allow).
 *
 * For one head with decays e_t = exp(dt_t A), inside a chunk of Lc rows
 * that starts from the state S0 (P, N):
 *   y_t   = q_t S0 C_t + sum_{s<=t} w(t,s) (C_t . B_s) dt_s x_s + D x_t
 *   S_end = q_end S0 + sum_s r_s dt_s x_s B_s^T
 * with q_t = e_0..e_t, w(t,s) = e_{s+1}..e_t, r_s = e_{s+1}..e_{Lc-1}
 * (products, never ratios of exponentials).  The same values as the
 * token-by-token recurrence S = S e_t + dt_t x_t B_t^T, y_t = S C_t + D x_t,
 * rounded differently.  Chunks are cut at multiples of the chunk size in
 * absolute positions (the first chunk of a continued sequence is shorter),
 * so a state after position k*L is the one a chunk boundary produced.
 */
#ifndef SGLC_MAMBA2_SSD_H
#define SGLC_MAMBA2_SSD_H

#include <math.h>
#include <stddef.h>

/* dt = clamp(softplus(raw + bias), [lo, hi]) — torch's softplus (beta 1,
 * threshold 20); shared by the recurrence and the chunked scan. */
static inline float mamba2_dt(float raw, float bias, float lo, float hi)
{
    float v = raw + bias;
    float dt = v > 20.0f ? v : log1pf(expf(v));
    if (dt < lo) dt = lo;
    if (dt > hi) dt = hi;
    return dt;
}

/* One group's heads over n rows of one sequence.  Row t of head j:
 * x at x + t*ld + j*P, B at B + t*ld, C at C + t*ld, raw dt at
 * dt + t*lddt + j, y written at y + t*ldy + j*P.  S: nhead states (P, N)
 * f32, head j at S + j*P*N, updated in place.  A, D, dt_bias: per head
 * (index j).  pos0: the absolute position of row 0 (chunk alignment);
 * state_zero: S is all zeros (skips the first chunk's S0 terms). */
typedef struct mamba2_ssd_args {
    int n, pos0, L;           /* rows, first position, chunk size */
    int P, N, nhead;
    const float *x, *B, *C, *dt;
    int ld, lddt, ldy;
    float *y, *S;
    const float *A, *D, *dt_bias;
    float dt_lo, dt_hi;
    int state_zero;
} mamba2_ssd_args;

/* Floats of scratch mamba2_ssd_scan needs for (P, N, L) and nhead heads. */
size_t mamba2_ssd_scratch_floats(int P, int N, int L, int nhead);

/* The chunked scan; simd: use the AVX2 + FMA products (the caller checks
 * the CPU).  scratch: mamba2_ssd_scratch_floats floats. */
void mamba2_ssd_scan(const mamba2_ssd_args *a, float *scratch, int simd);

/* C (m, n; ldc) = (acc ? C : 0) + op(A) B (k, n; ldb), row-major; op(A)
 * is A (m, k; lda), or with ta the transpose of A (k, m; lda): the
 * products of the scan (scalar and AVX2 + FMA bodies). */
void mamba2_ssd_gemm(int m, int n, int k, const float *A, int lda, int ta, const float *B, int ldb,
                     float *C, int ldc, int acc);
void mamba2_ssd_gemm_avx2(int m, int n, int k, const float *A, int lda, int ta, const float *B,
                          int ldb, float *C, int ldc, int acc);

/* SGLC_MAMBA_SSD_MIN_TOKENS (a sequence with at least this many new rows
 * in a forward runs the chunked scan; "off" or 0: never) and
 * SGLC_MAMBA_SSD_CHUNK (rows per chunk, 8..1024).  Unset: the defaults
 * below.  Returns -1 with err set on a bad value. */
#define MAMBA2_SSD_MIN_DEFAULT 32
#define MAMBA2_SSD_CHUNK_DEFAULT 64
#define MAMBA2_SSD_CHUNK_MAX 1024
int mamba2_ssd_env(int *min_tokens, int *chunk, char *err, size_t errlen);

#endif
