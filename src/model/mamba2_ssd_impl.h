/* mamba2_ssd_impl — the body of the chunked Mamba2 scan (math in
 * mamba2_ssd.h), included by mamba2_ssd.c (plain flags, SSD_GEMM =
 * mamba2_ssd_gemm) and mamba2_ssd_avx2.c (AVX2 + FMA flags, so the row
 * loops below vectorize; SSD_GEMM = mamba2_ssd_gemm_avx2).  Defines
 * SSD_SCAN(args, scratch).
 *
 * DESIGN
 * One call covers one (sequence, group) and a run of that group's heads:
 * B and C are shared by the group's heads, so a chunk's packing and C B^T
 * are done once for all of them.  The heads' states are held transposed,
 * S^T (N, P), for the whole call (transposed in at the start, out at the
 * end).  Per chunk of Lc rows [t0, t0 + Lc):
 *   Bp, Cp = the chunk's B, C rows packed (Lc, N)   (the source rows are
 *            cd floats apart, a power of two in real models; contiguous
 *            operands for the products)
 *   Bt  = Bp^T (N, Lc);  CB = Cp Bt, lower triangle, by row blocks of RB
 *   per head:
 *     dt_s, e_s = exp(dt_s A), q_t (prefix products), r_s (suffix products)
 *     Xp  = x rows packed (Lc, P);  Xr = r_s dt_s Xp
 *     M   = CB o w(t,s) o dt_s   (Lc, Lc) causal; w(t,s) = w(t-1,s) e_t
 *     y   = M Xp                 written into the output rows
 *     y  += q_t (Cp S^T) + D x
 *     S^T = q_end S^T + Bp^T Xr  (the product reads Bp transposed)
 * Decay products below 1e-30 are flushed to 0: their terms are lost in
 * rounding anyway, and subnormal operands cost the FMAs ~100x (a long
 * chunk with strong decays is full of them).
 * Work per token and head: 2 P N (state and off-chunk output, as the
 * recurrence) + Lc P / 2 (intra-chunk) + Lc N / (heads per group) (C B^T),
 * as matrix products instead of P N rank-1 updates per token.
 */
#include <stdint.h>
#include <string.h>

#ifndef SSD_RB
#define SSD_RB 16 /* row block of the triangular products */
static inline float ssd_flush(float v) { return v < 1e-30f ? 0.0f : v; }
#endif

void SSD_SCAN(const mamba2_ssd_args *a, float *scratch);

void SSD_SCAN(const mamba2_ssd_args *a, float *scratch)
{
    const int P = a->P, N = a->N, L = a->L, ld = a->ld, RB = SSD_RB;
    const size_t PN = (size_t)P * N;
    float *ST = scratch, *Bt = ST + (size_t)a->nhead * PN, *CB = Bt + (size_t)N * L,
          *M = CB + (size_t)L * L, *Yo = M + (size_t)L * L, *Bp = Yo + (size_t)L * P,
          *Cp = Bp + (size_t)L * N, *Xp = Cp + (size_t)L * N, *Xr = Xp + (size_t)L * P,
          *dtv = Xr + (size_t)L * P, *ev = dtv + L, *qv = ev + L, *rv = qv + L, *wv = rv + L;
    int zero = a->state_zero;
    for (int j = 0; j < a->nhead; j++) {
        const float *S = a->S + (size_t)j * PN;
        float *T = ST + (size_t)j * PN;
        if (zero) memset(T, 0, sizeof(float) * PN);
        else
            for (int p = 0; p < P; p++)
                for (int n = 0; n < N; n++) T[(size_t)n * P + p] = S[(size_t)p * N + n];
    }
    for (int t0 = 0; t0 < a->n;) {
        int Lc = L - (int)(((int64_t)a->pos0 + t0) % L); /* cut at multiples of L */
        if (Lc > a->n - t0) Lc = a->n - t0;
        for (int s = 0; s < Lc; s++) {
            memcpy(Bp + (size_t)s * N, a->B + (size_t)(t0 + s) * ld, sizeof(float) * (size_t)N);
            memcpy(Cp + (size_t)s * N, a->C + (size_t)(t0 + s) * ld, sizeof(float) * (size_t)N);
        }
        for (int s = 0; s < Lc; s++)
            for (int n = 0; n < N; n++) Bt[(size_t)n * Lc + s] = Bp[(size_t)s * N + n];
        for (int i0 = 0; i0 < Lc; i0 += RB) {
            const int i1 = i0 + RB < Lc ? i0 + RB : Lc;
            SSD_GEMM(i1 - i0, i1, N, Cp + (size_t)i0 * N, N, 0, Bt, Lc, CB + (size_t)i0 * Lc, Lc, 0);
        }
        for (int j = 0; j < a->nhead; j++) {
            float *T = ST + (size_t)j * PN;
            float *Y = a->y + (size_t)t0 * a->ldy + (size_t)j * P;
            const float A = a->A[j], D = a->D[j];
            for (int s = 0; s < Lc; s++) {
                dtv[s] = mamba2_dt(a->dt[(size_t)(t0 + s) * a->lddt + j], a->dt_bias[j], a->dt_lo,
                                   a->dt_hi);
                ev[s] = expf(dtv[s] * A);
            }
            qv[0] = ssd_flush(ev[0]);
            for (int s = 1; s < Lc; s++) qv[s] = ssd_flush(qv[s - 1] * ev[s]);
            rv[Lc - 1] = 1.0f;
            for (int s = Lc - 2; s >= 0; s--) rv[s] = ssd_flush(rv[s + 1] * ev[s + 1]);
            for (int s = 0; s < Lc; s++) {
                const float *x = a->x + (size_t)(t0 + s) * ld + (size_t)j * P;
                float *xp = Xp + (size_t)s * P, *xr = Xr + (size_t)s * P;
                const float f = rv[s] * dtv[s];
                for (int p = 0; p < P; p++) xp[p] = x[p], xr[p] = f * x[p];
            }
            /* M (Lc, Lc): causal, zero above the diagonal up to each row block's end */
            for (int t = 0; t < Lc; t++) {
                const float e = ev[t];
                for (int s = 0; s < t; s++) wv[s] = ssd_flush(wv[s] * e);
                wv[t] = 1.0f;
                float *mr = M + (size_t)t * Lc;
                const float *cr = CB + (size_t)t * Lc;
                for (int s = 0; s <= t; s++) mr[s] = cr[s] * wv[s] * dtv[s];
                const int bend = (t / RB + 1) * RB < Lc ? (t / RB + 1) * RB : Lc;
                for (int s = t + 1; s < bend; s++) mr[s] = 0.0f;
            }
            for (int i0 = 0; i0 < Lc; i0 += RB) {
                const int i1 = i0 + RB < Lc ? i0 + RB : Lc;
                SSD_GEMM(i1 - i0, P, i1, M + (size_t)i0 * Lc, Lc, 0, Xp, P, Y + (size_t)i0 * a->ldy,
                         a->ldy, 0);
            }
            if (!zero) {
                SSD_GEMM(Lc, P, N, Cp, N, 0, T, P, Yo, P, 0);
                for (int t = 0; t < Lc; t++) {
                    float *y = Y + (size_t)t * a->ldy;
                    const float *yo = Yo + (size_t)t * P, *x = Xp + (size_t)t * P;
                    const float q = qv[t];
                    for (int p = 0; p < P; p++) y[p] += q * yo[p] + D * x[p];
                }
            } else {
                for (int t = 0; t < Lc; t++) {
                    float *y = Y + (size_t)t * a->ldy;
                    const float *x = Xp + (size_t)t * P;
                    for (int p = 0; p < P; p++) y[p] += D * x[p];
                }
            }
            /* S^T = q_end S^T + Bp^T Xr */
            if (zero) {
                SSD_GEMM(N, P, Lc, Bp, N, 1, Xr, P, T, P, 0);
            } else {
                const float qe = qv[Lc - 1];
                for (size_t i = 0; i < PN; i++) T[i] *= qe;
                SSD_GEMM(N, P, Lc, Bp, N, 1, Xr, P, T, P, 1);
            }
        }
        zero = 0;
        t0 += Lc;
    }
    for (int j = 0; j < a->nhead && a->n > 0; j++) {
        float *S = a->S + (size_t)j * PN;
        const float *T = ST + (size_t)j * PN;
        for (int p = 0; p < P; p++)
            for (int n = 0; n < N; n++) S[(size_t)p * N + n] = T[(size_t)n * P + p];
    }
}
