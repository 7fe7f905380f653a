/* bench_mamba_ssd — the scan of one Mamba2 layer over a prefill of T
 * tokens: the token-by-token recurrence (mamba2.c's loop over the AVX2 step
 * mamba2_step_avx2) against the chunked scan (mamba2_ssd.c) at several
 * chunk sizes, on one thread.
 *
 * DESIGN: random inputs laid out as the mixer lays them (x | B | C columns
 * of the conv output rows, dt in the in_proj rows), the whole layer's heads
 * (nh heads in G groups, head dim P, state N; default the NemotronH-mid
 * bench shape 32 x 64, 8 groups, N 128 — --shape 8b for Nemotron-H-8B's
 * 128 heads), from a zero state as a prompt starts.  Per T the methods run
 * alternately, `--rounds` rounds after one untimed run of each; thread CPU
 * time (the machine is shared).  Prints one JSON line per (T, method) with
 * the median and the ratio recurrence / method (> 1: faster than the
 * recurrence), and checks the chunked outputs against the recurrence's.
 *
 * Usage: build/bench/bench_mamba_ssd [--lens 64,256,1024,2048] [--chunks 32,64,128,256]
 *            [--rounds R] [--shape mid|8b] [--scalar] */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_common.h"
#include "model/mamba2_ssd.h"

void mamba2_step_avx2(float *S, int P, int N, const float *x, const float *B, const float *C,
                      float dt, float dA, float D, float *y);

typedef struct shape {
    int nh, P, N, G;
} shape;

static uint64_t rng = 12345;
static float frand(void)
{
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((double)(rng >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

typedef struct inputs {
    shape s;
    int T, di, cd, proj;
    float *xc, *zx, *A, *D, *bias, *S, *y;
} inputs;

static void recurrence(inputs *in, int simd)
{
    const shape s = in->s;
    const int hpg = s.nh / s.G;
    memset(in->S, 0, sizeof(float) * (size_t)s.nh * s.P * s.N);
    for (int h = 0; h < s.nh; h++) {
        const int g = h / hpg;
        float *S = in->S + (size_t)h * s.P * s.N;
        for (int t = 0; t < in->T; t++) {
            const float *row = in->xc + (size_t)t * in->cd;
            const float dt = mamba2_dt(in->zx[(size_t)t * in->proj + h], in->bias[h], 0.0f, INFINITY);
            const float dA = expf(dt * in->A[h]);
            const float *x = row + h * s.P, *B = row + in->di + g * s.N,
                        *C = row + in->di + s.G * s.N + g * s.N;
            float *y = in->y + (size_t)t * in->di + h * s.P;
            if (simd) {
                mamba2_step_avx2(S, s.P, s.N, x, B, C, dt, dA, in->D[h], y);
                continue;
            }
            for (int p = 0; p < s.P; p++) {
                float *st = S + (size_t)p * s.N, acc = 0.0f;
                for (int n = 0; n < s.N; n++) {
                    st[n] = st[n] * dA + x[p] * dt * B[n];
                    acc += st[n] * C[n];
                }
                y[p] = acc + in->D[h] * x[p];
            }
        }
    }
}

static void chunked(inputs *in, int L, float *scr, int simd)
{
    const shape s = in->s;
    const int hpg = s.nh / s.G;
    memset(in->S, 0, sizeof(float) * (size_t)s.nh * s.P * s.N);
    for (int g = 0; g < s.G; g++) {
        const int h0 = g * hpg;
        const mamba2_ssd_args a = {
            .n = in->T, .pos0 = 0, .L = L, .P = s.P, .N = s.N, .nhead = hpg,
            .x = in->xc + (size_t)h0 * s.P, .B = in->xc + in->di + (size_t)g * s.N,
            .C = in->xc + in->di + (size_t)(s.G + g) * s.N, .dt = in->zx + h0, .ld = in->cd,
            .lddt = in->proj, .ldy = in->di, .y = in->y + (size_t)h0 * s.P,
            .S = in->S + (size_t)h0 * s.P * s.N, .A = in->A + h0, .D = in->D + h0,
            .dt_bias = in->bias + h0, .dt_lo = 0.0f, .dt_hi = INFINITY, .state_zero = 1,
        };
        mamba2_ssd_scan(&a, scr, simd);
    }
}

int main(int argc, char **argv)
{
    const char *lens = "64,256,1024,2048", *chunks = "32,64,128,256";
    int rounds = 5, simd = 1;
    shape s = {32, 64, 128, 8};
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--scalar")) simd = 0;
        else if (i + 1 < argc && !strcmp(argv[i], "--lens")) lens = argv[++i];
        else if (i + 1 < argc && !strcmp(argv[i], "--chunks")) chunks = argv[++i];
        else if (i + 1 < argc && !strcmp(argv[i], "--rounds")) rounds = atoi(argv[++i]);
        else if (i + 1 < argc && !strcmp(argv[i], "--shape")) {
            const char *v = argv[++i];
            if (!strcmp(v, "8b")) s = (shape){128, 64, 128, 8};
            else if (strcmp(v, "mid")) {
                fprintf(stderr, "--shape: mid or 8b\n");
                return 2;
            }
        } else {
            fprintf(stderr, "usage: %s [--lens T,...] [--chunks L,...] [--rounds R] [--shape mid|8b] "
                            "[--scalar]\n", argv[0]);
            return 2;
        }
    }
    const cpu_features *cf = cpu_get();
    if (simd && !(cf->avx2 && cf->fma)) {
        fprintf(stderr, "no AVX2 + FMA on this CPU: run with --scalar\n");
        return 77;
    }
    if (rounds < 1 || rounds > 100) return 2;
    int Ls[16], nL = 0;
    for (const char *p = chunks; *p && nL < 16;) {
        Ls[nL] = atoi(p);
        if (Ls[nL] < 8 || Ls[nL] > MAMBA2_SSD_CHUNK_MAX) {
            fprintf(stderr, "chunk sizes in [8, %d]\n", MAMBA2_SSD_CHUNK_MAX);
            return 2;
        }
        nL++;
        p = strchr(p, ',');
        if (!p) break;
        p++;
    }
    size_t scr_n = 0;
    for (int i = 0; i < nL; i++) {
        size_t n = mamba2_ssd_scratch_floats(s.P, s.N, Ls[i], s.nh / s.G);
        if (n > scr_n) scr_n = n;
    }
    float *scr = malloc(sizeof(float) * scr_n);
    for (const char *p = lens; *p;) {
        const int T = atoi(p);
        if (T < 1 || T > 65536) return 2;
        inputs in = {.s = s, .T = T};
        in.di = s.nh * s.P, in.cd = in.di + 2 * s.G * s.N, in.proj = s.nh + 1;
        in.xc = malloc(sizeof(float) * (size_t)T * in.cd);
        in.zx = malloc(sizeof(float) * (size_t)T * in.proj);
        in.y = malloc(sizeof(float) * (size_t)T * in.di);
        in.S = malloc(sizeof(float) * (size_t)s.nh * s.P * s.N);
        in.A = malloc(sizeof(float) * s.nh), in.D = malloc(sizeof(float) * s.nh);
        in.bias = malloc(sizeof(float) * s.nh);
        for (size_t i = 0; i < (size_t)T * in.cd; i++) in.xc[i] = frand();
        for (size_t i = 0; i < (size_t)T * in.proj; i++) in.zx[i] = 2.0f * frand();
        for (int h = 0; h < s.nh; h++)
            in.A[h] = -(1.0f + 7.5f * (frand() + 1.0f)), in.D[h] = 1.0f, in.bias[h] = frand() - 2.0f;
        /* reference outputs and state of the recurrence, then each chunk size's error */
        const size_t ny = (size_t)T * in.di, ns = (size_t)s.nh * s.P * s.N;
        float *yr = malloc(sizeof(float) * ny), *Sr = malloc(sizeof(float) * ns);
        recurrence(&in, simd);
        memcpy(yr, in.y, sizeof(float) * ny), memcpy(Sr, in.S, sizeof(float) * ns);
        double err[16];
        for (int i = 0; i < nL; i++) {
            chunked(&in, Ls[i], scr, simd);
            double e = 0.0, m = 0.0;
            for (size_t k = 0; k < ny; k++) {
                e = fmax(e, fabs(in.y[k] - yr[k])), m = fmax(m, fabs(yr[k]));
            }
            for (size_t k = 0; k < ns; k++) {
                e = fmax(e, fabs(in.S[k] - Sr[k])), m = fmax(m, fabs(Sr[k]));
            }
            err[i] = e / m;
        }
        double tr[100], tc[16][100];
        for (int r = 0; r < rounds; r++) {
            double t0 = bench_thread_cpu();
            recurrence(&in, simd);
            tr[r] = bench_thread_cpu() - t0;
            for (int i = 0; i < nL; i++) {
                t0 = bench_thread_cpu();
                chunked(&in, Ls[i], scr, simd);
                tc[i][r] = bench_thread_cpu() - t0;
            }
        }
        const double mr = bench_median(tr, rounds);
        printf("{\"T\": %d, \"nh\": %d, \"P\": %d, \"N\": %d, \"G\": %d, \"simd\": %d, "
               "\"method\": \"recurrence\", \"median_ms\": %.3f}\n", T, s.nh, s.P, s.N, s.G, simd,
               mr * 1e3);
        for (int i = 0; i < nL; i++) {
            const double mc = bench_median(tc[i], rounds);
            printf("{\"T\": %d, \"nh\": %d, \"P\": %d, \"N\": %d, \"G\": %d, \"simd\": %d, "
                   "\"method\": \"chunked\", \"chunk\": %d, \"median_ms\": %.3f, "
                   "\"speedup_vs_recurrence\": %.2f, \"max_rel_err\": %.2e}\n", T, s.nh, s.P, s.N,
                   s.G, simd, Ls[i], mc * 1e3, mr / mc, err[i]);
        }
        fflush(stdout);
        free(yr), free(Sr), free(in.xc), free(in.zx), free(in.y), free(in.S), free(in.A), free(in.D),
            free(in.bias);
        p = strchr(p, ',');
        if (!p) break;
        p++;
    }
    free(scr);
    return 0;
}
