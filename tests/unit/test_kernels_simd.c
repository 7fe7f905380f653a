/* test_kernels_simd — the shared AVX2 / AVX-512 kernel body
 * (src/kernels/kernels_rows_impl.h) instantiated with a plain-C model of
 * the AVX-512 mapping: 16 lanes, masked tails, RB = 12, NB = 32.
 *
 * DESIGN: the AVX-512 paths of the shared body (the masked tail steps,
 * the 12-row micro-kernel table, two-vector panels of 32 columns) run
 * natively only on AVX-512 machines; this test runs the same control flow
 * everywhere.  The model's masked loads read only the selected lanes and
 * its masked stores write only them, so an off-by-one in a tail reads or
 * writes out of bounds (caught by the sentinels here, and by ASan in the
 * sanitizer build).  Each kernel is checked against kern_ref_* with the
 * tolerances of test_kernels.c, over every tail length.  The model is not
 * bit-exact to the hardware (its reductions run in lane order); that is
 * not what this test is for. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "kernels/kernels_impl.h"
#include "util/dtype.h"

/* ---- the model of the AVX-512 vocabulary ------------------------------- */

#define SIMD_W 16
#define SIMD_SFX emu
#define SIMD_MASKED_TAILS 1
#define SIMD_MAPPING_EXTERNAL 1

typedef struct { float f[SIMD_W]; } simd_v;
typedef struct { uint32_t u[SIMD_W]; } simd_vi;
typedef uint32_t simd_m;

#define EMU static inline
#define LANES for (int j = 0; j < SIMD_W; j++)
EMU simd_v simd_set1(float f) { simd_v r; LANES r.f[j] = f; return r; }
EMU simd_v simd_zero(void) { return simd_set1(0.0f); }
EMU simd_v simd_loadu(const float *p) { simd_v r; LANES r.f[j] = p[j]; return r; }
EMU simd_v simd_load(const float *p)
{
    assert_true((uintptr_t)p % 64 == 0);
    return simd_loadu(p);
}
EMU void simd_storeu(float *p, simd_v v) { LANES p[j] = v.f[j]; }
EMU simd_v simd_bcast(const float *p) { return simd_set1(*p); }
#define EMU_OP2(name, expr) \
    EMU simd_v name(simd_v a, simd_v b) { simd_v r; LANES r.f[j] = (expr); return r; }
EMU_OP2(simd_add, a.f[j] + b.f[j])
EMU_OP2(simd_sub, a.f[j] - b.f[j])
EMU_OP2(simd_mul, a.f[j] * b.f[j])
EMU_OP2(simd_div, a.f[j] / b.f[j])
EMU_OP2(simd_max, a.f[j] > b.f[j] ? a.f[j] : b.f[j]) /* maxps: b on NaN / equal */
EMU_OP2(simd_min, a.f[j] < b.f[j] ? a.f[j] : b.f[j])
EMU simd_v simd_fmadd(simd_v a, simd_v b, simd_v c) { simd_v r; LANES r.f[j] = fmaf(a.f[j], b.f[j], c.f[j]); return r; }
EMU simd_v simd_fmsub(simd_v a, simd_v b, simd_v c) { simd_v r; LANES r.f[j] = fmaf(a.f[j], b.f[j], -c.f[j]); return r; }
EMU simd_v simd_fnmadd(simd_v a, simd_v b, simd_v c) { simd_v r; LANES r.f[j] = fmaf(-a.f[j], b.f[j], c.f[j]); return r; }
EMU float simd_reduce_add(simd_v v) { float s = 0.0f; LANES s += v.f[j]; return s; }
EMU float simd_reduce_max(simd_v v) { float s = v.f[0]; LANES s = s > v.f[j] ? s : v.f[j]; return s; }

EMU simd_m simd_mask_n(int n)
{
    assert_true(n >= 0); /* the AVX-512 mapping's contract */
    return n >= SIMD_W ? 0xFFFFu : (1u << n) - 1u;
}
EMU simd_v simd_mask_loadu_fill(simd_v f, simd_m m, const float *p)
{
    LANES if (m >> j & 1) f.f[j] = p[j];
    return f;
}
EMU simd_v simd_maskz_loadu(simd_m m, const float *p) { return simd_mask_loadu_fill(simd_zero(), m, p); }
EMU void simd_mask_storeu(float *p, simd_m m, simd_v v) { LANES if (m >> j & 1) p[j] = v.f[j]; }
EMU simd_v simd_maskz_mov(simd_m m, simd_v v) { LANES if (!(m >> j & 1)) v.f[j] = 0.0f; return v; }
EMU unsigned simd_cmpeq_bits(simd_v a, simd_v b) { unsigned r = 0; LANES r |= (unsigned)(a.f[j] == b.f[j]) << j; return r; }

EMU simd_vi simd_loadi(const void *p)
{
    assert_true((uintptr_t)p % 64 == 0);
    simd_vi r;
    memcpy(r.u, p, sizeof r.u);
    return r;
}
EMU simd_v simd_bf16_even(simd_vi v) { simd_v r; LANES { uint32_t u = v.u[j] << 16; memcpy(&r.f[j], &u, 4); } return r; }
EMU simd_v simd_bf16_odd(simd_vi v) { simd_v r; LANES { uint32_t u = v.u[j] & 0xFFFF0000u; memcpy(&r.f[j], &u, 4); } return r; }
EMU simd_v simd_load_half_dup(const float *p) { simd_v r; LANES r.f[j] = p[j / 2]; return r; }
EMU simd_v simd_swap_pairs(simd_v v) { simd_v r; LANES r.f[j] = v.f[j ^ 1]; return r; }
EMU simd_v simd_alt_sign(void) { simd_v r; LANES r.f[j] = j & 1 ? 1.0f : -1.0f; return r; }

#define SIMD_EXP_LO -104.0f
#define SIMD_EXP_HI 89.0f
EMU simd_v simd_round(simd_v v) { LANES v.f[j] = rintf(v.f[j]); return v; }
EMU simd_v simd_exp_under(simd_v x) { (void)x; return simd_zero(); }
EMU simd_v simd_exp_scale(simd_v p, simd_v n, simd_v under) /* scalef */
{
    (void)under;
    LANES p.f[j] = ldexpf(p.f[j], (int)n.f[j]);
    return p;
}
EMU simd_v simd_abs(simd_v x) { LANES x.f[j] = fabsf(x.f[j]); return x; }
EMU simd_v simd_or_sign(simd_v t, simd_v x) { LANES t.f[j] = copysignf(t.f[j], x.f[j]); return t; }

#include "kernels/kernels_simd.h"

#define NB 32
#define RB 12
#define MC 240
#define KC_PAIRS 192
#define KC_F32 192
#define PF_BYTES 1024
enum { LAYOUT_BF16 = 0x7e01, LAYOUT_F32 = 0x7e02 };
#define ROWS_DEFINE_KERNELS
#include "kernels/kernels_rows_impl.h"

/* ---- checks ------------------------------------------------------------ */

static uint64_t g_rng = 0x243F6A8885A308D3ull;
static float frand(void) /* uniform in [-1, 1) */
{
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return (float)((g_rng >> 40) & 0xFFFFFF) / (float)(1 << 23) - 1.0f;
}
static void fill(float *x, size_t n, float amp)
{
    for (size_t i = 0; i < n; i++) x[i] = frand() * amp;
}

static void check_close(const float *got, const float *ref, const float *scale, size_t n,
                        float rtol, float atol, const char *what, int len)
{
    for (size_t i = 0; i < n; i++) {
        float s = scale ? scale[i] : fabsf(ref[i]);
        if (!(fabsf(got[i] - ref[i]) <= rtol * s + atol))
            fail_msg("%s n=%d: element %zu got %.9g ref %.9g", what, len, i, (double)got[i], (double)ref[i]);
    }
}

#define SENT 16
static void set_sent(float *p) { for (int i = 0; i < SENT; i++) p[i] = 1234.5f; }
static void check_sent(const float *p, const char *what, int len)
{
    for (int i = 0; i < SENT; i++)
        if (p[i] != 1234.5f) fail_msg("%s n=%d: wrote past the row (+%d)", what, len, i);
}

static void test_rows_emu(void **state)
{
    (void)state;
    for (int n = 1; n <= 100; n++) {
        int len = n == 100 ? 1031 : n;
        size_t sz = sizeof(float) * (size_t)(len + SENT);
        float *a = malloc(sz), *b = malloc(sz), *w = malloc(sz), *y = malloc(sz), *r = malloc(sz);
        float *sc = malloc(sz);
        assert_non_null(a && b && w && y && r && sc);
        fill(a, len, 6.0f);
        fill(b, len, 2.0f);
        fill(w, len, 1.0f);
        set_sent(y + len);

        kern_ref_rmsnorm(r, a, w, len, 1e-6f, 1.0f);
        rmsnormemu(y, a, w, len, 1e-6f, 1.0f);
        check_close(y, r, NULL, len, 1e-5f, 1e-6f, "rmsnorm", len);
        check_sent(y + len, "rmsnorm", len);
        for (int i = 0; i < len; i++) sc[i] = fabsf(a[i] * b[i]);
        kern_ref_silu_mul(r, a, b, len);
        silu_mulemu(y, a, b, len);
        check_close(y, r, sc, len, 1e-5f, 1e-6f, "silu_mul", len);
        kern_ref_gelu_tanh_mul(r, a, b, len);
        gelu_tanh_mulemu(y, a, b, len);
        check_close(y, r, sc, len, 1e-5f, 1e-6f, "gelu_tanh_mul", len);
        kern_ref_add(r, a, b, len);
        addemu(y, a, b, len);
        check_close(y, r, NULL, len, 0.0f, 0.0f, "add", len);
        check_sent(y + len, "add", len);

        for (int i = 0; i < len; i++) r[i] = y[i] = a[i] * 20.0f;
        r[len - 1] = y[len - 1] = 125.0f; /* the max in the tail */
        if (len > 2) r[len / 2] = y[len / 2] = -INFINITY;
        kern_ref_softmax(r, len);
        softmaxemu(y, len);
        check_close(y, r, NULL, len, 1e-5f, 1e-7f, "softmax", len);
        check_sent(y + len, "softmax", len);

        for (int j = len - 1; j >= 0 && j >= len - 17; j--) {
            memcpy(sc, a, sizeof(float) * len);
            sc[j] = 500.0f;
            assert_int_equal(argmaxemu(sc, len), j);
            if (j > 0) {
                sc[j / 3] = 500.0f;
                assert_int_equal(argmaxemu(sc, len), j / 3);
            }
        }

        float s = 0.0f;
        for (int i = 0; i < len; i++) s += fabsf(a[i] * b[i]);
        float d = dotemu(a, b, len), dr = kern_ref_dot_f32(a, b, len);
        check_close(&d, &dr, &s, 1, 1e-5f, 1e-6f, "dot", len);
        free(a), free(b), free(w), free(y), free(r), free(sc);
    }
}

static void test_rope_emu(void **state)
{
    (void)state;
    for (int half = 1; half <= 40; half++)
        for (int extra = 0; extra <= 3; extra += 3) {
            int rot = 2 * half, hd = rot + extra, nh = 3;
            float inv_freq[64], cs[64], sn[64];
            for (int i = 0; i < half; i++) inv_freq[i] = powf(10000.0f, -2.0f * (float)i / (float)rot);
            kern_rope_cache(cs, sn, 777, inv_freq, half, 1.0f);
            size_t len = (size_t)nh * hd;
            float *x = malloc(sizeof(float) * len), *y = malloc(sizeof(float) * (len + SENT));
            float *r = malloc(sizeof(float) * len);
            assert_non_null(x && y && r);
            fill(x, len, 3.0f);
            for (int neox = 0; neox <= 1; neox++) {
                memcpy(r, x, sizeof(float) * len);
                memcpy(y, x, sizeof(float) * len);
                set_sent(y + len);
                kern_ref_rope_apply(r, nh, hd, rot, cs, sn, neox);
                ropeemu(y, nh, hd, rot, cs, sn, neox);
                check_close(y, r, NULL, len, 1e-6f, 1e-6f, neox ? "rope neox" : "rope gptj", rot);
                check_sent(y + len, "rope", rot);
            }
            free(x), free(y), free(r);
        }
}

/* The panel matmul with 32-column panels and 12-row micro-kernels: every
 * R, partial panels, k past one KC block, odd k, thread splits. */
static void run_matmul(int m, int n, int k, dtype wdt, int with_bias)
{
    float *x = malloc(sizeof(float) * (size_t)m * k), *wf = malloc(sizeof(float) * (size_t)n * k);
    float *bias = malloc(sizeof(float) * n), *yref = malloc(sizeof(float) * (size_t)m * n);
    float *y = malloc(sizeof(float) * ((size_t)m * n + SENT)), *scale = malloc(sizeof(float) * (size_t)m * n);
    assert_non_null(x && wf && bias && yref && y && scale);
    fill(x, (size_t)m * k, 2.0f);
    fill(wf, (size_t)n * k, 0.5f);
    fill(bias, n, 1.0f);
    if (wdt == DTYPE_BF16)
        for (size_t i = 0; i < (size_t)n * k; i++) wf[i] = bf16_to_f32(f32_to_bf16(wf[i]));
    const float *bp = with_bias ? bias : NULL;
    kern_mat rm = {.n = n, .k = k, .dt = DTYPE_F32, .data = wf};
    kern_ref_matmul(yref, x, m, &rm, bp, 0, 1, NULL);
    for (int r = 0; r < m; r++)
        for (int j = 0; j < n; j++) {
            float s = with_bias ? fabsf(bias[j]) : 0.0f;
            for (int i = 0; i < k; i++) s += fabsf(x[(size_t)r * k + i] * wf[(size_t)j * k + i]);
            scale[(size_t)r * n + j] = s;
        }
    kern_mat w = {.n = n, .k = k, .dt = wdt};
    assert_int_equal(packemu(&w, wf, DTYPE_F32), 0);
    assert_int_equal(w.layout, wdt == DTYPE_BF16 ? LAYOUT_BF16 : LAYOUT_F32);
    void *scratch = malloc(matmul_scratch_panelsemu(m, k));
    assert_non_null(scratch);
    for (int nth = 1; nth <= 3; nth++) {
        for (size_t i = 0; i < (size_t)m * n; i++) y[i] = NAN;
        set_sent(y + (size_t)m * n);
        for (int ith = 0; ith < nth; ith++)
            matmul_panelsemu(y, x, m, &w, bp, ith, nth, scratch, wdt == DTYPE_BF16 ? MK_BF16F : MK_F32);
        char what[96];
        snprintf(what, sizeof what, "matmul m=%d n=%d k=%d %s nth=%d", m, n, k, dtype_name(wdt), nth);
        check_close(y, yref, scale, (size_t)m * n, 2e-5f, 1e-6f, what, m);
        check_sent(y + (size_t)m * n, what, m);
    }
    free(scratch);
    kern_mat_free(&w);
    free(x), free(wf), free(bias), free(yref), free(y), free(scale);
}

static void test_matmul_emu(void **state)
{
    (void)state;
    static const int ns[] = {1, 17, 32, 47, 70};
    for (int m = 1; m <= 25; m++)
        for (size_t b = 0; b < sizeof ns / sizeof *ns; b++) {
            run_matmul(m, ns[b], 5, DTYPE_BF16, m & 1);
            run_matmul(m, ns[b], 6, DTYPE_F32, !(m & 1));
        }
    run_matmul(13, 40, 401, DTYPE_BF16, 1); /* k blocks: partial sums through y */
    run_matmul(13, 40, 401, DTYPE_F32, 0);
    run_matmul(250, 33, 64, DTYPE_BF16, 0); /* two row chunks (MC = 240) */
    run_matmul(1, 70, 400, DTYPE_BF16, 1);  /* one row read in place */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rows_emu),
        cmocka_unit_test(test_rope_emu),
        cmocka_unit_test(test_matmul_emu),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
