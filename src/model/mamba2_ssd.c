/* mamba2_ssd — the chunked Mamba2 scan (see mamba2_ssd.h for the math).
 *
 * DESIGN
 * One call covers one (sequence, group) and a run of that group's heads:
 * B and C are shared by the group's heads, so C B^T of a chunk is computed
 * once for all of them.  Per chunk of Lc rows [t0, t0 + Lc):
 *   Bt  = B^T                     (N, Lc)  packed
 *   CB  = C Bt, lower triangle    (Lc, Lc) by row blocks of RB
 *   per head:
 *     dt_s, e_s = exp(dt_s A), q_t (prefix products), r_s (suffix products)
 *     M   = CB o w(t,s) o dt_s    (Lc, Lc) causal; w built row by row
 *                                 (w(t,s) = w(t-1,s) e_t: Lc^2/2 multiplies)
 *     y   = M x                   (Lc, P)  written into the output rows
 *     y  += q_t (C S0^T) + D x    S0^T packed (N, P)
 *     S   = q_end S + Xr^T B      Xr^T[p][s] = r_s dt_s x_s[p]  (P, Lc)
 * The products go through mamba2_ssd_gemm (plain loops here; AVX2 + FMA
 * register blocks in mamba2_ssd_avx2.c).  Work per token and head:
 * 2 P N (state and off-chunk output, as the recurrence) + Lc P / 2
 * (intra-chunk) + Lc N / (heads per group) (C B^T), but as matrix
 * products instead of P N rank-1 updates per token.
 */
#include "model/mamba2_ssd.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "util/errmsg.h"

enum { RB = 16 }; /* row block of the triangular products */

size_t mamba2_ssd_scratch_floats(int P, int N, int L)
{
    const size_t l = (size_t)L, p = (size_t)P, n = (size_t)N;
    /* Bt, CB, M, Xt, S0t, Yoff, then dt e q r w */
    return n * l + 2 * l * l + p * l + n * p + l * p + 5 * l + 16;
}

void mamba2_ssd_gemm(int m, int n, int k, const float *A, int lda, const float *B, int ldb,
                     float *C, int ldc, int acc)
{
    for (int i = 0; i < m; i++) {
        float *c = C + (size_t)i * ldc;
        if (!acc) memset(c, 0, sizeof(float) * (size_t)n);
        const float *a = A + (size_t)i * lda;
        for (int kk = 0; kk < k; kk++) {
            const float av = a[kk];
            const float *b = B + (size_t)kk * ldb;
            for (int j = 0; j < n; j++) c[j] += av * b[j];
        }
    }
}

typedef void (*gemm_fn)(int, int, int, const float *, int, const float *, int, float *, int, int);

void mamba2_ssd_scan(const mamba2_ssd_args *a, float *scratch, int simd)
{
    const int P = a->P, N = a->N, L = a->L, ld = a->ld;
    const gemm_fn gemm = simd ? mamba2_ssd_gemm_avx2 : mamba2_ssd_gemm;
    float *Bt = scratch, *CB = Bt + (size_t)N * L, *M = CB + (size_t)L * L, *Xt = M + (size_t)L * L,
          *S0t = Xt + (size_t)P * L, *Yo = S0t + (size_t)N * P, *dtv = Yo + (size_t)L * P,
          *ev = dtv + L, *qv = ev + L, *rv = qv + L, *wv = rv + L;
    int zero = a->state_zero;
    for (int t0 = 0; t0 < a->n;) {
        int Lc = L - (int)(((long)a->pos0 + t0) % L); /* cut at multiples of L */
        if (Lc > a->n - t0) Lc = a->n - t0;
        const float *Bc = a->B + (size_t)t0 * ld, *Cc = a->C + (size_t)t0 * ld;
        for (int s = 0; s < Lc; s++)
            for (int nn = 0; nn < N; nn++) Bt[(size_t)nn * Lc + s] = Bc[(size_t)s * ld + nn];
        for (int i0 = 0; i0 < Lc; i0 += RB) {
            const int i1 = i0 + RB < Lc ? i0 + RB : Lc;
            gemm(i1 - i0, i1, N, Cc + (size_t)i0 * ld, ld, Bt, Lc, CB + (size_t)i0 * Lc, Lc, 0);
        }
        for (int j = 0; j < a->nhead; j++) {
            float *S = a->S + (size_t)j * P * N;
            const float *X = a->x + (size_t)t0 * ld + (size_t)j * P;
            float *Y = a->y + (size_t)t0 * a->ldy + (size_t)j * P;
            const float A = a->A[j], D = a->D[j];
            for (int s = 0; s < Lc; s++) {
                dtv[s] = mamba2_dt(a->dt[(size_t)(t0 + s) * a->lddt + j], a->dt_bias[j], a->dt_lo,
                                   a->dt_hi);
                ev[s] = expf(dtv[s] * A);
            }
            qv[0] = ev[0];
            for (int s = 1; s < Lc; s++) qv[s] = qv[s - 1] * ev[s];
            rv[Lc - 1] = 1.0f;
            for (int s = Lc - 2; s >= 0; s--) rv[s] = rv[s + 1] * ev[s + 1];
            /* M (Lc, Lc): causal, zero above the diagonal up to each row block's end */
            for (int t = 0; t < Lc; t++) {
                for (int s = 0; s < t; s++) wv[s] *= ev[t];
                wv[t] = 1.0f;
                float *mr = M + (size_t)t * Lc;
                const float *cr = CB + (size_t)t * Lc;
                for (int s = 0; s <= t; s++) mr[s] = cr[s] * wv[s] * dtv[s];
                const int bend = (t / RB + 1) * RB < Lc ? (t / RB + 1) * RB : Lc;
                for (int s = t + 1; s < bend; s++) mr[s] = 0.0f;
            }
            for (int i0 = 0; i0 < Lc; i0 += RB) {
                const int i1 = i0 + RB < Lc ? i0 + RB : Lc;
                gemm(i1 - i0, P, i1, M + (size_t)i0 * Lc, Lc, X, ld, Y + (size_t)i0 * a->ldy,
                     a->ldy, 0);
            }
            if (!zero) {
                for (int p = 0; p < P; p++)
                    for (int nn = 0; nn < N; nn++) S0t[(size_t)nn * P + p] = S[(size_t)p * N + nn];
                gemm(Lc, P, N, Cc, ld, S0t, P, Yo, P, 0);
                for (int t = 0; t < Lc; t++) {
                    float *y = Y + (size_t)t * a->ldy;
                    const float *yo = Yo + (size_t)t * P, *x = X + (size_t)t * ld;
                    for (int p = 0; p < P; p++) y[p] += qv[t] * yo[p] + D * x[p];
                }
            } else {
                for (int t = 0; t < Lc; t++) {
                    float *y = Y + (size_t)t * a->ldy;
                    const float *x = X + (size_t)t * ld;
                    for (int p = 0; p < P; p++) y[p] += D * x[p];
                }
            }
            /* S = q_end S + Xr^T B */
            for (int s = 0; s < Lc; s++) {
                const float f = rv[s] * dtv[s];
                const float *x = X + (size_t)s * ld;
                for (int p = 0; p < P; p++) Xt[(size_t)p * Lc + s] = f * x[p];
            }
            const float qe = qv[Lc - 1];
            if (zero)
                gemm(P, N, Lc, Xt, Lc, Bc, ld, S, N, 0);
            else {
                for (size_t i = 0; i < (size_t)P * N; i++) S[i] *= qe;
                gemm(P, N, Lc, Xt, Lc, Bc, ld, S, N, 1);
            }
        }
        zero = 0;
        t0 += Lc;
    }
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
