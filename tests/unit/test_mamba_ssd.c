/* test_mamba_ssd — the chunked Mamba2 scan (model/mamba2_ssd.h) against a
 * float64 token-by-token recurrence written here, on random inputs laid
 * out as the mixer lays them (x | B | C columns of one row, dt in another
 * array): lengths that are and are not multiples of the chunk, chunk sizes
 * 8..128, 1, 2 and 4 groups of 1..4 heads, head dims and state sizes off
 * the vector widths, from a zero and from a nonzero state, a first position
 * that is not chunk-aligned, a sequence cut in two calls, dt bias, softplus,
 * dt limits, D, strong decays (underflow); scalar and AVX2 products.  Also
 * the products alone and the environment parsing. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "model/mamba2_ssd.h"
#include "util/cpu.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static float frand(void) /* [-1, 1) */
{
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((double)(rng >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

static int have_avx2(void)
{
    const cpu_features *cf = cpu_get();
    return cf->avx2 && cf->fma;
}

typedef struct prob {
    int T, nh, G, P, N;
    int cd, lddt, di;
    float *row;       /* (T, cd): x (nh P) | B (G N) | C (G N) */
    float *dt;        /* (T, lddt) raw dt, head h at column h */
    float *A, *D, *bias;
    float lo, hi;
    float *S0;        /* (nh, P, N) */
} prob;

static void prob_make(prob *p, int T, int nh, int G, int P, int N, float amax, int limits)
{
    p->T = T, p->nh = nh, p->G = G, p->P = P, p->N = N;
    p->di = nh * P, p->cd = p->di + 2 * G * N, p->lddt = nh + 3;
    p->row = malloc(sizeof(float) * (size_t)T * p->cd);
    p->dt = malloc(sizeof(float) * (size_t)T * p->lddt);
    p->A = malloc(sizeof(float) * nh), p->D = malloc(sizeof(float) * nh);
    p->bias = malloc(sizeof(float) * nh);
    p->S0 = malloc(sizeof(float) * (size_t)nh * P * N);
    for (size_t i = 0; i < (size_t)T * p->cd; i++) p->row[i] = frand();
    for (size_t i = 0; i < (size_t)T * p->lddt; i++) p->dt[i] = 3.0f * frand();
    for (int h = 0; h < nh; h++) {
        p->A[h] = -amax * (0.05f + 0.95f * (frand() * 0.5f + 0.5f));
        p->D[h] = frand();
        p->bias[h] = frand();
    }
    for (size_t i = 0; i < (size_t)nh * P * N; i++) p->S0[i] = frand();
    p->lo = limits ? 0.05f : 0.0f;
    p->hi = limits ? 1.5f : INFINITY;
}

static void prob_free(prob *p)
{
    free(p->row), free(p->dt), free(p->A), free(p->D), free(p->bias), free(p->S0);
}

/* float64 recurrence over all rows: y (T, di), S (nh, P, N) */
static void reference(const prob *p, int zero, double *y, double *S)
{
    const int P = p->P, N = p->N, hpg = p->nh / p->G;
    for (size_t i = 0; i < (size_t)p->nh * P * N; i++) S[i] = zero ? 0.0 : p->S0[i];
    for (int t = 0; t < p->T; t++) {
        const float *r = p->row + (size_t)t * p->cd;
        for (int h = 0; h < p->nh; h++) {
            const int g = h / hpg;
            const float *x = r + h * P, *B = r + p->di + g * N, *C = r + p->di + p->G * N + g * N;
            double v = (double)p->dt[(size_t)t * p->lddt + h] + p->bias[h];
            double dt = v > 20.0 ? v : log1p(exp(v));
            if (dt < p->lo) dt = p->lo;
            if (dt > p->hi) dt = p->hi;
            const double e = exp(dt * p->A[h]);
            double *St = S + (size_t)h * P * N;
            for (int i = 0; i < P; i++) {
                double acc = 0.0;
                for (int n = 0; n < N; n++) {
                    St[i * N + n] = St[i * N + n] * e + dt * x[i] * B[n];
                    acc += St[i * N + n] * C[n];
                }
                y[(size_t)t * p->di + h * P + i] = acc + p->D[h] * x[i];
            }
        }
    }
}

/* the chunked scan over rows [r0, r1) of every group, as the mixer calls
 * it (one call per group and head run of hr heads) */
static void run_ssd(const prob *p, int r0, int r1, int pos0, int L, int hr, int zero, float *y,
                    float *S, int simd)
{
    const int hpg = p->nh / p->G;
    float *scr = malloc(sizeof(float) * mamba2_ssd_scratch_floats(p->P, p->N, L, hr));
    for (int g = 0; g < p->G; g++)
        for (int h0 = g * hpg; h0 < (g + 1) * hpg; h0 += hr) {
            const int nhd = h0 + hr <= (g + 1) * hpg ? hr : (g + 1) * hpg - h0;
            const float *row = p->row + (size_t)r0 * p->cd;
            const mamba2_ssd_args a = {
                .n = r1 - r0, .pos0 = pos0, .L = L, .P = p->P, .N = p->N, .nhead = nhd,
                .x = row + (size_t)h0 * p->P, .B = row + p->di + (size_t)g * p->N,
                .C = row + p->di + (size_t)(p->G + g) * p->N, .dt = p->dt + (size_t)r0 * p->lddt + h0,
                .ld = p->cd, .lddt = p->lddt, .ldy = p->di,
                .y = y + (size_t)r0 * p->di + (size_t)h0 * p->P, .S = S + (size_t)h0 * p->P * p->N,
                .A = p->A + h0, .D = p->D + h0, .dt_bias = p->bias + h0, .dt_lo = p->lo,
                .dt_hi = p->hi, .state_zero = zero,
            };
            mamba2_ssd_scan(&a, scr, simd);
        }
    free(scr);
}

/* max |a - b| / max |b| over n values (and no NaN) */
static double rel_err(const float *a, const double *b, size_t n)
{
    double e = 0.0, m = 0.0;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(a[i])) return INFINITY;
        double d = fabs((double)a[i] - b[i]);
        if (d > e) e = d;
        if (fabs(b[i]) > m) m = fabs(b[i]);
    }
    return m > 0.0 ? e / m : e;
}

/* one case, whole and cut in two calls at `cut` (0: not cut) */
static void check(int T, int nh, int G, int P, int N, int L, int hr, int pos0, int zero, int cut,
                  float amax, int limits, int simd)
{
    prob p;
    prob_make(&p, T, nh, G, P, N, amax, limits);
    const size_t ny = (size_t)T * p.di, ns = (size_t)nh * P * N;
    double *yr = malloc(sizeof(double) * ny), *Sr = malloc(sizeof(double) * ns);
    reference(&p, zero, yr, Sr);
    float *y = malloc(sizeof(float) * ny), *S = malloc(sizeof(float) * ns);
    for (size_t i = 0; i < ny; i++) y[i] = NAN; /* every output must be written */
    for (size_t i = 0; i < ns; i++) S[i] = zero ? 0.0f : p.S0[i];
    if (cut > 0 && cut < T) {
        run_ssd(&p, 0, cut, pos0, L, hr, zero, y, S, simd);
        run_ssd(&p, cut, T, pos0 + cut, L, hr, 0, y, S, simd);
    } else {
        run_ssd(&p, 0, T, pos0, L, hr, zero, y, S, simd);
    }
    const double ey = rel_err(y, yr, ny), es = rel_err(S, Sr, ns);
    if (!(ey < 2e-5 && es < 2e-5))
        print_error("T %d nh %d G %d P %d N %d L %d hr %d pos0 %d zero %d cut %d amax %g limits %d "
                    "simd %d: y err %.3g, S err %.3g\n", T, nh, G, P, N, L, hr, pos0, zero, cut,
                    (double)amax, limits, simd, ey, es);
    assert_true(ey < 2e-5);
    assert_true(es < 2e-5);
    free(yr), free(Sr), free(y), free(S);
    prob_free(&p);
}

static void test_scan(void **state)
{
    (void)state;
    const int lens[] = {1, 2, 7, 63, 64, 65, 130, 300};
    const int chunks[] = {8, 16, 64, 128};
    for (int simd = 0; simd <= have_avx2(); simd++)
        for (size_t li = 0; li < sizeof lens / sizeof *lens; li++)
            for (size_t ci = 0; ci < sizeof chunks / sizeof *chunks; ci++) {
                const int T = lens[li], L = chunks[ci];
                check(T, 4, 2, 8, 16, L, 2, 0, 1, 0, 1.0f, 0, simd);    /* from zero */
                check(T, 4, 2, 8, 16, L, 2, 0, 0, 0, 1.0f, 0, simd);    /* nonzero state */
                check(T, 8, 4, 16, 32, L, 1, 37, 0, 0, 1.0f, 1, simd);  /* 4 groups, unaligned */
                check(T, 4, 1, 17, 13, L, 3, 5, 0, 0, 0.5f, 1, simd);   /* tails, head runs 3 + 1 */
                check(T, 6, 2, 24, 40, L, 3, 3, 0, T / 3, 2.0f, 0, simd); /* cut in two calls */
            }
}

static void test_strong_decay(void **state)
{
    (void)state;
    /* exp(dt A) far below 1: products underflow to 0 where the recurrence's
     * state forgets, never NaN (exp(-cum) ratios would overflow) */
    for (int simd = 0; simd <= have_avx2(); simd++) {
        check(200, 4, 2, 8, 16, 64, 4, 0, 0, 0, 60.0f, 0, simd);
        check(200, 4, 2, 8, 16, 128, 4, 11, 0, 70, 200.0f, 0, simd);
    }
}

static void test_nemotron_shape(void **state)
{
    (void)state;
    /* the head shape of Nemotron-H (P 64, N 128), two heads per group */
    for (int simd = 0; simd <= have_avx2(); simd++) check(150, 4, 2, 64, 128, 64, 2, 0, 0, 0, 1.0f, 1, simd);
}

static void test_gemm(void **state)
{
    (void)state;
    /* both products, plain and with A transposed, against a float64 sum;
     * columns past n untouched */
    const int ms[] = {1, 3, 4, 5, 16, 17}, ns[] = {1, 7, 8, 9, 16, 17, 40, 64}, ks[] = {1, 5, 64};
    for (int simd = 0; simd <= have_avx2(); simd++)
        for (size_t a = 0; a < 6; a++)
            for (size_t b = 0; b < 8; b++)
                for (size_t c = 0; c < 3; c++)
                    for (int acc = 0; acc < 2; acc++)
                        for (int ta = 0; ta < 2; ta++) {
                            const int m = ms[a], n = ns[b], k = ks[c], lda = (ta ? m : k) + 2,
                                      ldb = n + 3, ldc = n + 1, ar = ta ? k : m;
                            float *A = malloc(sizeof(float) * ar * lda), *B = malloc(sizeof(float) * k * ldb);
                            float *C = malloc(sizeof(float) * m * ldc), *C0 = malloc(sizeof(float) * m * ldc);
                            for (int i = 0; i < ar * lda; i++) A[i] = frand();
                            for (int i = 0; i < k * ldb; i++) B[i] = frand();
                            for (int i = 0; i < m * ldc; i++) C[i] = C0[i] = frand();
                            (simd ? mamba2_ssd_gemm_avx2 : mamba2_ssd_gemm)(m, n, k, A, lda, ta, B, ldb,
                                                                            C, ldc, acc);
                            for (int i = 0; i < m; i++)
                                for (int j = 0; j < ldc; j++) {
                                    if (j >= n) {
                                        assert_true(C[i * ldc + j] == C0[i * ldc + j]);
                                        continue;
                                    }
                                    double r = acc ? C0[i * ldc + j] : 0.0;
                                    for (int kk = 0; kk < k; kk++)
                                        r += (double)(ta ? A[kk * lda + i] : A[i * lda + kk]) * B[kk * ldb + j];
                                    assert_true(fabs(C[i * ldc + j] - r) <= 1e-5 * (1.0 + fabs(r)));
                                }
                            free(A), free(B), free(C), free(C0);
                        }
}

static void test_env(void **state)
{
    (void)state;
    int mn, ch;
    char err[256];
    unsetenv("SGLC_MAMBA_SSD_MIN_TOKENS"), unsetenv("SGLC_MAMBA_SSD_CHUNK");
    assert_int_equal(mamba2_ssd_env(&mn, &ch, err, sizeof err), 0);
    assert_int_equal(mn, MAMBA2_SSD_MIN_DEFAULT);
    assert_int_equal(ch, MAMBA2_SSD_CHUNK_DEFAULT);
    setenv("SGLC_MAMBA_SSD_MIN_TOKENS", "off", 1), setenv("SGLC_MAMBA_SSD_CHUNK", "32", 1);
    assert_int_equal(mamba2_ssd_env(&mn, &ch, err, sizeof err), 0);
    assert_int_equal(mn, 0);
    assert_int_equal(ch, 32);
    setenv("SGLC_MAMBA_SSD_MIN_TOKENS", "1", 1);
    assert_int_equal(mamba2_ssd_env(&mn, &ch, err, sizeof err), 0);
    assert_int_equal(mn, 1);
    const char *bad_min[] = {"-1", "x", "12x", "99999999999"};
    for (int i = 0; i < 4; i++) {
        setenv("SGLC_MAMBA_SSD_MIN_TOKENS", bad_min[i], 1);
        assert_int_equal(mamba2_ssd_env(&mn, &ch, err, sizeof err), -1);
        assert_non_null(strstr(err, "SGLC_MAMBA_SSD_MIN_TOKENS"));
    }
    setenv("SGLC_MAMBA_SSD_MIN_TOKENS", "8", 1);
    const char *bad_chunk[] = {"0", "7", "1025", "off", "abc"};
    for (int i = 0; i < 5; i++) {
        setenv("SGLC_MAMBA_SSD_CHUNK", bad_chunk[i], 1);
        assert_int_equal(mamba2_ssd_env(&mn, &ch, err, sizeof err), -1);
        assert_non_null(strstr(err, "SGLC_MAMBA_SSD_CHUNK"));
    }
    unsetenv("SGLC_MAMBA_SSD_MIN_TOKENS"), unsetenv("SGLC_MAMBA_SSD_CHUNK");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_scan),
        cmocka_unit_test(test_strong_decay),
        cmocka_unit_test(test_nemotron_shape),
        cmocka_unit_test(test_gemm),
        cmocka_unit_test(test_env),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
