/* test_kernels — every SIMD kernel of every ISA this CPU supports against
 * its scalar reference (kern_ref_*), on odd sizes, both weight dtypes, all
 * (ith, nth) splits for nth = 1, 2, 3, and attention with prefix + new
 * queries, sliding window, softcap, GQA/MQA, bf16 KV and scattered slots.
 *
 * Tolerances: f32 paths |got - ref| <= 1e-5 * scale + 1e-6 where scale is
 * the sum of |terms| (so cancellation cannot hide errors or fake them);
 * paths that round activations to bf16 (AVX-512 bf16 matmul) are checked
 * tightly against the reference run on bf16-rounded activations and loosely
 * (rel 1e-2 of the row scale) against the f32 one. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "kernels/kernels.h"
#include "kernels/kernels_impl.h"
#include "kernels/kern_types.h"
#include "kernels/quant_dot.h"
#include "kernels/quant_select.h"
#include "util/cpu.h"
#include "util/dtype.h"

static const char *const k_isas[] = {"scalar", "avx2", "avx512", "amx"};

static uint64_t g_rng = 0x9E3779B97F4A7C15ull;
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

/* Select ISA idx if this CPU runs it (checked first so unsupported ones do
 * not log); each test loops over all three and restores auto at the end. */
static int use_isa(int idx)
{
    const cpu_features *c = cpu_get();
    if (idx == 1 && !(c->avx2 && c->fma && c->f16c)) return 0;
    if (idx == 3 && !(c->amx_tile && c->amx_bf16)) return 0;
    if (idx >= 2 && !(c->avx512f && c->avx512bw && c->avx512vl && c->avx512dq && c->avx512bf16 &&
                      c->avx512vnni))
        return 0;
    return kernels_init(k_isas[idx]) == 0;
}

static void check_close(const float *got, const float *ref, const float *scale, size_t n,
                        float rtol, float atol, const char *what)
{
    for (size_t i = 0; i < n; i++) {
        float s = scale ? scale[i] : fabsf(ref[i]);
        float err = fabsf(got[i] - ref[i]);
        if (!(err <= rtol * s + atol)) {
            fail_msg("%s [isa %s]: element %zu got %.9g ref %.9g (scale %.3g)", what,
                     kernels_isa_name(kernels_isa()), i, (double)got[i], (double)ref[i], (double)s);
        }
    }
}

/* ---- matmul ------------------------------------------------------------ */

static void ref_mat(kern_mat *m, const void *data, dtype dt, int n, int k)
{
    memset(m, 0, sizeof *m);
    m->n = n;
    m->k = k;
    m->dt = dt;
    m->layout = 0;
    m->isa = KERN_ISA_SCALAR;
    m->data = data;
}

static void run_matmul_case(int m, int n, int k, dtype wdt, dtype src_dt, int with_bias)
{
    float *x = malloc(sizeof(float) * (size_t)m * k);
    float *xr = malloc(sizeof(float) * (size_t)m * k); /* x rounded to bf16 */
    float *wf = malloc(sizeof(float) * (size_t)n * k);
    uint16_t *wb = malloc(2 * (size_t)n * k);
    uint16_t *wsrc16 = malloc(2 * (size_t)n * k);
    float *bias = malloc(sizeof(float) * (size_t)n);
    float *y = malloc(sizeof(float) * (size_t)m * n);
    float *yref = malloc(sizeof(float) * (size_t)m * n);
    float *yref_r = malloc(sizeof(float) * (size_t)m * n);
    float *scale = calloc((size_t)m * n, sizeof(float));
    assert_non_null(x && xr && wf && wb && wsrc16 && bias && y && yref && yref_r && scale);
    fill(x, (size_t)m * k, 2.0f);
    fill(wf, (size_t)n * k, 0.5f);
    fill(bias, (size_t)n, 1.0f);
    for (size_t i = 0; i < (size_t)m * k; i++) xr[i] = bf16_to_f32(f32_to_bf16(x[i]));
    /* wf: the exact weight values the kernel must use; wsrc16: the 16-bit source */
    for (size_t i = 0; i < (size_t)n * k; i++) {
        if (src_dt == DTYPE_F16) {
            wsrc16[i] = f32_to_f16(wf[i]);
            wf[i] = f16_to_f32(wsrc16[i]);
        } else if (src_dt == DTYPE_BF16) {
            wsrc16[i] = f32_to_bf16(wf[i]);
            wf[i] = bf16_to_f32(wsrc16[i]);
        }
        wb[i] = f32_to_bf16(wf[i]);
        if (wdt == DTYPE_BF16) wf[i] = bf16_to_f32(wb[i]);
    }
    const float *bp = with_bias ? bias : NULL;

    kern_mat rm;
    ref_mat(&rm, wdt == DTYPE_F32 ? (const void *)wf : (const void *)wb, wdt, n, k);
    kern_ref_matmul(yref, x, m, &rm, bp, 0, 1, NULL);
    kern_ref_matmul(yref_r, xr, m, &rm, bp, 0, 1, NULL);
    for (int r = 0; r < m; r++)
        for (int j = 0; j < n; j++) {
            float s = with_bias ? fabsf(bias[j]) : 0.0f;
            for (int i = 0; i < k; i++) {
                float wv = wdt == DTYPE_F32 ? wf[(size_t)j * k + i] : bf16_to_f32(wb[(size_t)j * k + i]);
                s += fabsf(x[(size_t)r * k + i] * wv);
            }
            scale[(size_t)r * n + j] = s;
        }

    const void *src = src_dt == DTYPE_F32 ? (const void *)wf : (const void *)wsrc16;
    /* variants 0..2: the ISAs (2: AVX-512 with the widen + FMA bf16 body,
     * SGLC_BF16_DOT=0); 3: AVX-512 with the vdpbf16ps body (bf16
     * activations, SGLC_BF16_DOT=1); 4: AVX-512 + AMX tiles (m >= 16:
     * activations split in hi + lo bf16, close to f32; below, the fma
     * body); 5: AMX with one bf16 rounding; 6: AVX-512 with the measured
     * choice (kern_choice), the weight x_exact for odd m (it must then stay
     * exact in x whatever was chosen, unless SGLC_BF16_DOT=1) */
    for (int var = 0; var < 7; var++) {
        if (var == 2 || var == 4 || var == 5) setenv("SGLC_BF16_DOT", "0", 1);
        if (var == 3) setenv("SGLC_BF16_DOT", "1", 1);
        if (var == 5) setenv("SGLC_AMX_BF16", "1", 1);
        int ok = use_isa(var < 3 ? var : var == 3 || var == 6 ? 2 : 3);
        unsetenv("SGLC_BF16_DOT");
        if (var == 5) unsetenv("SGLC_AMX_BF16");
        if (!ok) continue;
        kern_mat w;
        assert_int_equal(kern_mat_init(&w, src, src_dt, n, k, wdt, 0), 0);
        if (var == 6) w.x_exact = m & 1;
        const int chosen = kernels_choice()->bf16_dot;
        if (var == 2 || var == 4 || var == 5) assert_int_equal(chosen, 0);
        if (var == 3) assert_int_equal(chosen, 2);
        /* the source may be freed after packing: poison a copy's worth by
         * checking the kernel never reads src (data must be owned) */
        assert_true(w.data != src);
        size_t ss = kern_matmul_scratch(m, k);
        void *scratch = malloc(ss + 1);
        assert_non_null(scratch);
        for (int nth = 1; nth <= 3; nth++) {
            for (size_t i = 0; i < (size_t)m * n; i++) y[i] = NAN;
            for (int ith = nth - 1; ith >= 0; ith--) kern_matmul(y, x, m, &w, bp, ith, nth, scratch);
            char what[128];
            snprintf(what, sizeof what, "matmul m=%d n=%d k=%d w=%s src=%s bias=%d nth=%d var=%d", m, n,
                     k, dtype_name(wdt), dtype_name(src_dt), with_bias, nth, var);
            int bf16_act = wdt == DTYPE_BF16 && (var == 3 || (var == 5 && m >= 16) ||
                                                 (var == 6 && (chosen == 2 || (chosen == 1 && !w.x_exact))));
            if (bf16_act) {
                check_close(y, yref_r, scale, (size_t)m * n, 2e-5f, 1e-6f, what);
                check_close(y, yref, scale, (size_t)m * n, 1e-2f, 1e-6f, what);
            } else {
                check_close(y, yref, scale, (size_t)m * n, 2e-5f, 1e-6f, what);
            }
        }
        free(scratch);
        kern_mat_free(&w);
    }
    kernels_init(NULL);
    free(x), free(xr), free(wf), free(wb), free(wsrc16), free(bias), free(y), free(yref);
    free(yref_r), free(scale);
}

static void test_matmul_sizes(void **state)
{
    (void)state;
    static const int ks[] = {1, 3, 17, 63, 129, 1000};
    static const int ns[] = {1, 5, 33, 255};
    static const int ms[] = {1, 2, 7, 65};
    int c = 0;
    for (size_t a = 0; a < sizeof ks / sizeof *ks; a++)
        for (size_t b = 0; b < sizeof ns / sizeof *ns; b++)
            for (size_t d = 0; d < sizeof ms / sizeof *ms; d++, c++) {
                run_matmul_case(ms[d], ns[b], ks[a], DTYPE_BF16, DTYPE_BF16, c & 1);
                run_matmul_case(ms[d], ns[b], ks[a], DTYPE_F32, DTYPE_F32, !(c & 1));
            }
}

/* Every micro-kernel row count of both ISAs (R = 1..12, a full block plus
 * a partial one), full and partial panels of both widths, k past one KC
 * block (partial sums through y), odd k (the zero-padded last pair). */
static void test_matmul_every_r(void **state)
{
    (void)state;
    static const int ns[] = {16, 47, 64};
    static const int ks[] = {5, 401};
    for (int m = 1; m <= 25; m++)
        for (size_t b = 0; b < sizeof ns / sizeof *ns; b++)
            for (size_t a = 0; a < sizeof ks / sizeof *ks; a++) {
                if (ks[a] > 100 && m % 6 != 1 && m != 12) continue; /* keep it short */
                run_matmul_case(m, ns[b], ks[a], DTYPE_BF16, DTYPE_BF16, m & 1);
                run_matmul_case(m, ns[b], ks[a], DTYPE_F32, DTYPE_F32, !(m & 1));
            }
}

static void test_matmul_sources_and_big(void **state)
{
    (void)state;
    run_matmul_case(3, 40, 77, DTYPE_BF16, DTYPE_F32, 1);  /* f32 -> bf16 weight */
    run_matmul_case(3, 40, 77, DTYPE_BF16, DTYPE_F16, 0);  /* f16 -> bf16 weight */
    run_matmul_case(2, 40, 77, DTYPE_F32, DTYPE_BF16, 1);  /* bf16 -> f32 weight */
    run_matmul_case(2, 40, 77, DTYPE_F32, DTYPE_F16, 0);   /* f16 -> f32 weight */
    run_matmul_case(300, 70, 520, DTYPE_BF16, DTYPE_BF16, 1); /* several row chunks and k blocks */
    run_matmul_case(300, 70, 520, DTYPE_F32, DTYPE_F32, 0);
}

/* AMX tiles: partial row tiles (m % 16, m % 32), partial panels (n % 32),
 * k tails (k % 32, odd k), several panel chunks and row blocks. */
static void test_matmul_amx(void **state)
{
    (void)state;
    const cpu_features *c = cpu_get();
    if (!(c->amx_tile && c->amx_bf16) || kernels_init("amx") != 0) {
        kernels_init(NULL);
        print_message("skipped: this CPU (or its OS) has no AMX-BF16 tiles\n");
        return;
    }
    kernels_init(NULL);
    static const int ms[] = {16, 17, 33, 64, 100};
    static const int ns[] = {32, 48, 100};
    static const int ks[] = {32, 64, 96, 100, 129};
    int i = 0;
    for (size_t a = 0; a < sizeof ms / sizeof *ms; a++)
        for (size_t b = 0; b < sizeof ns / sizeof *ns; b++)
            for (size_t d = 0; d < sizeof ks / sizeof *ks; d++, i++)
                run_matmul_case(ms[a], ns[b], ks[d], DTYPE_BF16, DTYPE_BF16, i & 1);
    run_matmul_case(33, 2048, 129, DTYPE_BF16, DTYPE_BF16, 1);
    run_matmul_case(100, 2048, 64, DTYPE_BF16, DTYPE_BF16, 0);
    run_matmul_case(40, 300, 4100, DTYPE_BF16, DTYPE_BF16, 1); /* 10 panels of 256 KiB: 3 chunks */
}

/* A weight packed under one ISA stays usable after switching the selection. */
static void test_matmul_isa_switch(void **state)
{
    (void)state;
    int m = 3, n = 37, k = 45;
    float *x = malloc(sizeof(float) * m * k), *wf = malloc(sizeof(float) * n * k);
    float *y = malloc(sizeof(float) * m * n), *yref = malloc(sizeof(float) * m * n);
    fill(x, (size_t)m * k, 1.0f);
    fill(wf, (size_t)n * k, 1.0f);
    kern_mat rm;
    ref_mat(&rm, wf, DTYPE_F32, n, k);
    kern_ref_matmul(yref, x, m, &rm, NULL, 0, 1, NULL);
    for (int isa = 0; isa < 3; isa++) {
        if (!use_isa(isa)) continue;
        kern_mat w;
        assert_int_equal(kern_mat_init(&w, wf, DTYPE_F32, n, k, DTYPE_F32, 1), 0);
        assert_int_equal(kernels_init("scalar"), 0);
        void *scratch = malloc(kern_matmul_scratch(m, k) + 1);
        kern_matmul(y, x, m, &w, NULL, 0, 1, scratch);
        check_close(y, yref, NULL, (size_t)m * n, 1e-4f, 1e-4f, "matmul after isa switch");
        free(scratch);
        kern_mat_free(&w);
    }
    kernels_init(NULL);
    assert_int_equal(kernels_init("bogus"), -1);
    free(x), free(wf), free(y), free(yref);
}

/* kern_set_pack_threads: a large weight packed by several threads is
 * byte-identical to the one-thread packing (f32 and bf16 sources, odd k,
 * a ragged last panel), for every SIMD ISA this CPU runs. */
static void test_pack_threads(void **state)
{
    (void)state;
    int n = 2053, k = 1027; /* > 4 MiB packed, bf16 too: the threaded path */
    float *wf = malloc(sizeof(float) * (size_t)n * k);
    uint16_t *wb = malloc(sizeof(uint16_t) * (size_t)n * (k + 1));
    assert_non_null(wf);
    assert_non_null(wb);
    fill(wf, (size_t)n * k, 1.0f);
    for (size_t i = 0; i < (size_t)n * (k + 1); i++) wb[i] = f32_to_bf16(frand());
    int checked = 0;
    for (int isa = 1; isa < 3; isa++) {
        if (!use_isa(isa)) continue;
        for (int c = 0; c < 3; c++) {
            /* f32 -> f32; f32 -> bf16 (odd k); bf16 -> bf16 (even k) */
            const void *src = c == 2 ? (const void *)wb : (const void *)wf;
            dtype sdt = c == 2 ? DTYPE_BF16 : DTYPE_F32, want = c == 0 ? DTYPE_F32 : DTYPE_BF16;
            int kk = c == 2 ? k + 1 : k;
            kern_mat one, many;
            kern_set_pack_threads(1);
            assert_int_equal(kern_mat_init(&one, src, sdt, n, kk, want, 0), 0);
            kern_set_pack_threads(3);
            assert_int_equal(kern_pack_threads(), 3);
            assert_int_equal(kern_mat_init(&many, src, sdt, n, kk, want, 0), 0);
            assert_non_null(one.owned);
            assert_int_equal(one.bytes, many.bytes);
            assert_true(one.bytes >= ((size_t)4 << 20));
            assert_memory_equal(one.data, many.data, one.bytes);
            kern_mat_free(&one);
            kern_mat_free(&many);
            checked++;
        }
    }
    kern_set_pack_threads(0);
    assert_int_equal(kern_pack_threads(), 1); /* clamped */
    kernels_init(NULL);
    if (!checked) print_message("no SIMD ISA on this CPU: packing not exercised\n");
    free(wf);
    free(wb);
}

/* Callers size matmul scratch once for their largest batch and k. */
static void test_matmul_scratch_monotonic(void **state)
{
    (void)state;
    static const int ks[] = {1, 2, 100, 2048, 8192};
    for (int isa = 0; isa < 3; isa++) {
        if (!use_isa(isa)) continue;
        for (size_t a = 0; a < sizeof ks / sizeof *ks; a++) {
            size_t prev = 0;
            for (int m = 1; m <= 600; m++) {
                size_t s = kern_matmul_scratch(m, ks[a]);
                assert_true(s >= prev);
                if (a > 0) assert_true(s >= kern_matmul_scratch(m, ks[a - 1]));
                prev = s;
            }
        }
    }
    kernels_init(NULL);
}

/* ---- attention --------------------------------------------------------- */

typedef struct {
    int n_q, n_kv, n_head, n_kv_head, head_dim, window;
    float softcap;
    dtype kv_dt;
    float kv_scale; /* 8-bit caches: K and V stored as value / scale (0 = 1) */
} attn_case;

static void run_attn_case(const attn_case *c)
{
    int n_slots = c->n_kv * 2 + 3;
    size_t row = (size_t)c->n_kv_head * c->head_dim;
    size_t esz = dtype_size(c->kv_dt);
    void *kc = malloc(esz * row * n_slots), *vc = malloc(esz * row * n_slots);
    int32_t *slots = malloc(sizeof(int32_t) * c->n_kv);
    size_t q_stride = (size_t)c->n_head * c->head_dim + 5; /* padded rows */
    size_t o_stride = (size_t)c->n_head * c->head_dim + 3;
    float *q = malloc(sizeof(float) * q_stride * c->n_q);
    float *out = malloc(sizeof(float) * o_stride * c->n_q);
    float *ref = malloc(sizeof(float) * o_stride * c->n_q);
    float *tmp = malloc(sizeof(float) * row);
    assert_non_null(kc && vc && slots && q && out && ref && tmp);
    /* scattered, non-monotonic slots: a shuffled subset of the pool */
    int32_t *perm = malloc(sizeof(int32_t) * n_slots);
    for (int i = 0; i < n_slots; i++) perm[i] = i;
    for (int i = n_slots - 1; i > 0; i--) {
        int j = (int)((frand() + 1.0f) * 0.5f * (float)(i + 1));
        if (j > i) j = i;
        int32_t t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    for (int i = 0; i < c->n_kv; i++) slots[i] = perm[i];
    free(perm);
    for (int s = 0; s < n_slots; s++) {
        fill(tmp, row, 1.5f);
        kern_kv_store_scaled(kc, c->kv_dt, s, (int)row, tmp, c->kv_scale > 0 ? c->kv_scale : 1.0f);
        fill(tmp, row, 1.0f);
        kern_kv_store_scaled(vc, c->kv_dt, s, (int)row, tmp, c->kv_scale > 0 ? c->kv_scale : 1.0f);
    }
    fill(q, q_stride * c->n_q, 1.5f);
    kern_attn_args a = {
        .n_q = c->n_q, .n_kv = c->n_kv, .n_head = c->n_head, .n_kv_head = c->n_kv_head,
        .head_dim = c->head_dim, .q = q, .q_stride = q_stride, .k_cache = kc, .v_cache = vc,
        .kv_dt = c->kv_dt, .slots = slots, .sliding_window = c->window,
        .scale = 1.0f / sqrtf((float)c->head_dim), .softcap = c->softcap, .out = ref,
        .out_stride = o_stride, .k_scale = c->kv_scale, .v_scale = c->kv_scale,
    };
    for (size_t i = 0; i < o_stride * c->n_q; i++) ref[i] = 7.0f;
    float *rs = malloc(sizeof(float) * (size_t)c->n_kv + 64);
    kern_ref_attention(&a, 0, 1, rs);
    free(rs);
    for (int isa = 0; isa < 3; isa++) {
        if (!use_isa(isa)) continue;
        size_t ss = kern_attention_scratch(c->n_kv, c->head_dim);
        char *scratch = malloc(ss + 1);
        a.out = out;
        for (int nth = 1; nth <= 3; nth++) {
            for (size_t i = 0; i < o_stride * c->n_q; i++) out[i] = 7.0f; /* padding must stay */
            for (int ith = 0; ith < nth; ith++) kern_attention(&a, ith, nth, scratch);
            char what[160];
            snprintf(what, sizeof what,
                     "attention n_q=%d n_kv=%d heads=%d/%d hd=%d win=%d cap=%g kv=%s nth=%d", c->n_q,
                     c->n_kv, c->n_head, c->n_kv_head, c->head_dim, c->window, (double)c->softcap,
                     dtype_name(c->kv_dt), nth);
            check_close(out, ref, NULL, o_stride * c->n_q, 1e-4f, 2e-5f, what);
        }
        free(scratch);
    }
    kernels_init(NULL);
    free(kc), free(vc), free(slots), free(q), free(out), free(ref), free(tmp);
}

static void test_attention(void **state)
{
    (void)state;
    static const attn_case cases[] = {
        {1, 1, 4, 2, 64, 0, 0, DTYPE_F32, 0},       /* first token */
        {1, 300, 32, 8, 64, 0, 0, DTYPE_F32, 0},    /* decode over a long kv */
        {1, 300, 32, 8, 64, 0, 0, DTYPE_BF16, 0},
        {5, 37, 8, 2, 64, 0, 0, DTYPE_F32, 0},      /* prefix + new queries */
        {5, 37, 8, 2, 64, 0, 0, DTYPE_BF16, 0},
        {70, 70, 6, 2, 40, 0, 0, DTYPE_F32, 0},     /* prefill, head_dim not a multiple of 16 */
        {33, 90, 4, 4, 17, 16, 0, DTYPE_F32, 0},    /* MHA, sliding window, odd head_dim */
        {40, 100, 8, 1, 128, 24, 30.0f, DTYPE_BF16, 0}, /* MQA, window, softcap */
        {3, 50, 16, 2, 256, 0, 50.0f, DTYPE_F32, 0},    /* big group, softcap */
        {2, 9, 3, 3, 80, 5, 0, DTYPE_BF16, 0},
        {3, 40, 48, 1, 32, 0, 0, DTYPE_F32, 0},     /* group 48 > 32 rows: head chunks */
        {1, 70, 15, 3, 64, 0, 0, DTYPE_BF16, 0},    /* decode, 3 kv heads: uneven kv-head chunks */
        {1, 33, 40, 5, 64, 20, 0, DTYPE_F32, 0},    /* decode, group 8, 5 kv heads, window */
        /* 8-bit float caches (--kv-cache-dtype fp8_e4m3 / fp8_e5m2), with and without a scale */
        {1, 300, 32, 8, 64, 0, 0, DTYPE_F8_E4M3, 0},
        {5, 37, 8, 2, 64, 0, 0, DTYPE_F8_E5M2, 0},
        {70, 70, 6, 2, 40, 0, 0, DTYPE_F8_E4M3, 0.01f},  /* head_dim not a multiple of 8/16 */
        {1, 33, 40, 5, 17, 20, 0, DTYPE_F8_E5M2, 4.0f},  /* odd head_dim, window */
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) run_attn_case(&cases[i]);
}

/* Tree verification masks (speculative decoding): n_t draft-tree nodes at
 * kv positions [base, base + n_t), node u's parent par[u] < u (-1 = hangs
 * off the prefix).  The expected output is computed here naively in double,
 * from the parent list (ancestor walk), not from the mask the kernels get:
 * node u sees the prefix (within the window, counted from its true
 * position base + depth) and its ancestors and itself (depth distance <
 * window).  The queries are the last n_q nodes (n_q < n_t: a chunked
 * forward).  Checked for the scalar reference and every ISA, nth 1..3. */
typedef struct {
    int base, n_t, n_q, n_head, n_kv_head, head_dim, window;
    float softcap;
    dtype kv_dt;
    int chain; /* 1: par[u] = u - 1 (then also equal to the causal kernel) */
} tree_case;

static void run_tree_case(const tree_case *c)
{
    const int n_kv = c->base + c->n_t, n_slots = n_kv + 7;
    const size_t row = (size_t)c->n_kv_head * c->head_dim, esz = dtype_size(c->kv_dt);
    void *kc = malloc(esz * row * n_slots), *vc = malloc(esz * row * n_slots);
    float *kf = malloc(sizeof(float) * row * n_slots), *vf = malloc(sizeof(float) * row * n_slots);
    int32_t *slots = malloc(sizeof(int32_t) * n_kv), *par = malloc(sizeof(int32_t) * c->n_t);
    int32_t *dep = malloc(sizeof(int32_t) * c->n_t);
    uint8_t *mask = calloc((size_t)c->n_t * c->n_t, 1);
    size_t qs = (size_t)c->n_head * c->head_dim;
    float *q = malloc(sizeof(float) * qs * c->n_q), *out = malloc(sizeof(float) * qs * c->n_q);
    float *want = malloc(sizeof(float) * qs * c->n_q), *tmp = malloc(sizeof(float) * row);
    double *sc = malloc(sizeof(double) * n_kv);
    assert_true(kc && vc && kf && vf && slots && par && dep && mask && q && out && want && tmp && sc);
    for (int p = 0; p < n_kv; p++) slots[p] = (p * 5 + 3) % n_slots; /* scattered */
    for (int sl = 0; sl < n_slots; sl++) {
        fill(tmp, row, 1.5f);
        kern_kv_store(kc, c->kv_dt, sl, (int)row, tmp);
        fill(tmp, row, 1.0f);
        kern_kv_store(vc, c->kv_dt, sl, (int)row, tmp);
    }
    /* what the cache holds, as f32 (bf16 rounding included) */
    for (int sl = 0; sl < n_slots; sl++)
        for (size_t d = 0; d < row; d++) {
            size_t i = (size_t)sl * row + d;
            kf[i] = c->kv_dt == DTYPE_F32 ? ((float *)kc)[i] : bf16_to_f32(((uint16_t *)kc)[i]);
            vf[i] = c->kv_dt == DTYPE_F32 ? ((float *)vc)[i] : bf16_to_f32(((uint16_t *)vc)[i]);
        }
    for (int u = 0; u < c->n_t; u++) {
        par[u] = u == 0 ? -1 : c->chain ? u - 1 : (int)((frand() + 1.0f) * 0.5f * (float)u) - (u > 3 && frand() > 0.8f);
        if (par[u] >= u) par[u] = u - 1;
        dep[u] = par[u] < 0 ? 0 : dep[par[u]] + 1;
        for (int v = u; v >= 0; v = par[v]) mask[(size_t)u * c->n_t + v] = 1;
    }
    fill(q, qs * c->n_q, 1.5f);
    const float scale = 1.0f / sqrtf((float)c->head_dim);
    const int group = c->n_head / c->n_kv_head;
    for (int i = 0; i < c->n_q; i++) {
        int u = c->n_t - c->n_q + i, tpos = c->base + dep[u];
        for (int h = 0; h < c->n_head; h++) {
            int kh = h / group;
            double mx = -INFINITY;
            for (int p = 0; p < n_kv; p++) {
                int vis;
                if (p < c->base) {
                    vis = c->window <= 0 || p > tpos - c->window;
                } else {
                    int v = p - c->base, anc = 0;
                    for (int w = u; w >= 0; w = par[w]) anc |= w == v;
                    vis = anc && (c->window <= 0 || dep[u] - dep[v] < c->window);
                }
                sc[p] = -INFINITY;
                if (!vis) continue;
                double d = 0;
                for (int e = 0; e < c->head_dim; e++)
                    d += (double)q[i * qs + (size_t)h * c->head_dim + e] * kf[(size_t)slots[p] * row + (size_t)kh * c->head_dim + e];
                d *= scale;
                if (c->softcap > 0) d = c->softcap * tanh(d / c->softcap);
                sc[p] = d;
                if (d > mx) mx = d;
            }
            double sum = 0;
            for (int p = 0; p < n_kv; p++) sum += sc[p] == -INFINITY ? 0 : exp(sc[p] - mx);
            for (int e = 0; e < c->head_dim; e++) {
                double o = 0;
                for (int p = 0; p < n_kv; p++)
                    if (sc[p] != -INFINITY)
                        o += exp(sc[p] - mx) / sum * vf[(size_t)slots[p] * row + (size_t)kh * c->head_dim + e];
                want[i * qs + (size_t)h * c->head_dim + e] = (float)o;
            }
        }
    }
    kern_attn_args a = {
        .n_q = c->n_q, .n_kv = n_kv, .n_head = c->n_head, .n_kv_head = c->n_kv_head, .head_dim = c->head_dim,
        .q = q, .q_stride = qs, .k_cache = kc, .v_cache = vc, .kv_dt = c->kv_dt, .slots = slots,
        .sliding_window = c->window, .scale = scale, .softcap = c->softcap, .out = out, .out_stride = qs,
        .tree_mask = mask, .tree_depth = dep, .tree_base = c->base, .tree_n = c->n_t,
    };
    char what[200];
    snprintf(what, sizeof what, "tree attention base=%d nodes=%d n_q=%d heads=%d/%d hd=%d win=%d cap=%g kv=%s chain=%d",
             c->base, c->n_t, c->n_q, c->n_head, c->n_kv_head, c->head_dim, c->window, (double)c->softcap,
             dtype_name(c->kv_dt), c->chain);
    float *rs = malloc(sizeof(float) * (size_t)n_kv + 64);
    for (size_t i = 0; i < qs * c->n_q; i++) out[i] = 7.0f;
    kern_ref_attention(&a, 0, 1, rs);
    check_close(out, want, NULL, qs * c->n_q, 2e-4f, 3e-5f, what);
    free(rs);
    for (int isa = 0; isa < 3; isa++) {
        if (!use_isa(isa)) continue;
        char *scratch = malloc(kern_attention_scratch(n_kv, c->head_dim) + 1);
        for (int nth = 1; nth <= 3; nth++) {
            for (size_t i = 0; i < qs * c->n_q; i++) out[i] = 7.0f;
            for (int ith = 0; ith < nth; ith++) kern_attention(&a, ith, nth, scratch);
            check_close(out, want, NULL, qs * c->n_q, 2e-4f, 3e-5f, what);
        }
        if (c->chain && c->window == 0) { /* a chain is plain causal attention */
            kern_attn_args b = a;
            b.tree_mask = NULL;
            for (size_t i = 0; i < qs * c->n_q; i++) out[i] = 7.0f;
            kern_attention(&b, 0, 1, scratch);
            check_close(out, want, NULL, qs * c->n_q, 2e-4f, 3e-5f, what);
        }
        free(scratch);
    }
    kernels_init(NULL);
    free(kc), free(vc), free(kf), free(vf), free(slots), free(par), free(dep), free(mask);
    free(q), free(out), free(want), free(tmp), free(sc);
}

static void test_attention_tree(void **state)
{
    (void)state;
    static const tree_case cases[] = {
        {37, 9, 9, 8, 2, 64, 0, 0, DTYPE_F32, 0},      /* decode verify: prefix + 9 nodes */
        {37, 9, 9, 8, 2, 64, 0, 0, DTYPE_F32, 1},      /* a chain = causal */
        {100, 40, 40, 4, 1, 32, 0, 0, DTYPE_BF16, 0},  /* 40 nodes: several key blocks and query units */
        {5, 23, 23, 6, 2, 40, 0, 20.0f, DTYPE_F32, 0}, /* odd head_dim, softcap, tree across a 16-key block */
        {60, 17, 17, 4, 4, 17, 8, 0, DTYPE_F32, 0},    /* sliding window counts depth */
        {60, 17, 17, 4, 4, 17, 3, 0, DTYPE_BF16, 0},   /* window shorter than the tree */
        {0, 12, 12, 3, 3, 80, 0, 0, DTYPE_F32, 0},     /* no prefix */
        {29, 30, 11, 16, 2, 64, 0, 0, DTYPE_F32, 0},   /* queries = the last 11 nodes (a chunk) */
        {300, 13, 13, 32, 8, 128, 0, 0, DTYPE_BF16, 0}, /* long prefix, GQA 4 */
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) run_tree_case(&cases[i]);
}

/* The 8-bit float conversions: every code decodes to the value its fields
 * define; encoding is round-to-nearest (ties to the even code) and
 * saturating; an 8-bit cache keeps attention within the format's
 * precision of the f32 cache. */
static double f8_value(int c, int mbits, int bias, int fn)
{
    int e = (c >> mbits) & ((1 << (7 - mbits)) - 1), m = c & ((1 << mbits) - 1);
    int emax = (1 << (7 - mbits)) - 1;
    double v;
    if (fn && e == emax && m == (1 << mbits) - 1) return NAN;
    if (!fn && e == emax) return m ? NAN : (c & 0x80 ? -INFINITY : INFINITY);
    if (e == 0) v = ldexp((double)m / (1 << mbits), 1 - bias);
    else v = ldexp(1.0 + (double)m / (1 << mbits), e - bias);
    return c & 0x80 ? -v : v;
}

static void test_f8_formats(void **state)
{
    (void)state;
    for (int fmt = 0; fmt < 2; fmt++) {
        int mbits = fmt ? 2 : 3, bias = fmt ? 15 : 7;
        double maxv = fmt ? 57344.0 : 448.0;
        for (int c = 0; c < 256; c++) {
            double want = f8_value(c, mbits, bias, !fmt);
            float got = fmt ? f8e5m2_to_f32((uint8_t)c) : f8e4m3_to_f32((uint8_t)c);
            if (isnan(want)) assert_true(isnan(got));
            else assert_true((double)got == want);
        }
        /* encode: the nearest finite code, ties to even, saturating */
        for (int i = 0; i < 20000; i++) {
            float x = frand() * (float)(i % 4 == 0 ? maxv * 1.5 : i % 4 == 1 ? 1.0 : i % 4 == 2 ? 1e-3 : 1e-5);
            uint8_t code = fmt ? f32_to_f8e5m2(x) : f32_to_f8e4m3(x);
            double best = INFINITY;
            int bestc = -1;
            for (int c = 0; c < 256; c++) {
                double v = f8_value(c, mbits, bias, !fmt);
                if (isnan(v) || isinf(v) || (v == 0 && !signbit(v) != !signbit(x))) continue;
                double d = fabs(v - (double)x);
                if (d < best || (d == best && !(c & 1))) best = d, bestc = c;
            }
            if (fabs((double)x) > maxv) bestc = (x < 0 ? 0x80 : 0) | (fmt ? 0x7b : 0x7e);
            if (code != bestc) fail_msg("fmt %d: %.9g -> 0x%02x, want 0x%02x", fmt, (double)x, code, bestc);
        }
        assert_true(isnan(fmt ? f8e5m2_to_f32(f32_to_f8e5m2(NAN)) : f8e4m3_to_f32(f32_to_f8e4m3(NAN))));
    }
    /* attention over an fp8 cache is close to the f32 cache's */
    int n_kv = 200, nh = 8, nkh = 2, hd = 64;
    size_t row = (size_t)nkh * hd;
    float *kf = malloc(sizeof(float) * row * n_kv), *vf = malloc(sizeof(float) * row * n_kv);
    uint8_t *k8 = malloc(row * n_kv), *v8 = malloc(row * n_kv);
    float *q = malloc(sizeof(float) * nh * hd), *o32 = malloc(sizeof(float) * nh * hd), *o8 = malloc(sizeof(float) * nh * hd);
    int32_t *slots = malloc(sizeof(int32_t) * n_kv);
    fill(kf, row * n_kv, 2.0f);
    fill(vf, row * n_kv, 1.0f);
    fill(q, (size_t)nh * hd, 2.0f);
    for (int i = 0; i < n_kv; i++) {
        slots[i] = i;
        kern_kv_store_scaled(k8, DTYPE_F8_E4M3, i, (int)row, kf + (size_t)i * row, 1.0f);
        kern_kv_store_scaled(v8, DTYPE_F8_E4M3, i, (int)row, vf + (size_t)i * row, 1.0f);
    }
    kern_attn_args a = {.n_q = 1, .n_kv = n_kv, .n_head = nh, .n_kv_head = nkh, .head_dim = hd, .q = q,
                        .q_stride = (size_t)nh * hd, .k_cache = kf, .v_cache = vf, .kv_dt = DTYPE_F32,
                        .slots = slots, .scale = 0.125f, .out = o32, .out_stride = (size_t)nh * hd};
    char *scratch = malloc(kern_attention_scratch(n_kv, hd));
    kern_attention(&a, 0, 1, scratch);
    a.k_cache = k8, a.v_cache = v8, a.kv_dt = DTYPE_F8_E4M3, a.out = o8;
    kern_attention(&a, 0, 1, scratch);
    double err = 0, mag = 0;
    for (int i = 0; i < nh * hd; i++) {
        err = fmax(err, fabs((double)o8[i] - o32[i]));
        mag = fmax(mag, fabs((double)o32[i]));
    }
    /* e4m3 keeps 3 mantissa bits: each value within 2^-4 relative; the
     * weighted average of V is within that of the outputs' scale */
    if (!(err <= 0.0625 * mag)) fail_msg("fp8 attention: max err %g vs magnitude %g", err, mag);
    free(kf), free(vf), free(k8), free(v8), free(q), free(o32), free(o8), free(slots), free(scratch);
}

/* ---- elementwise / row ops --------------------------------------------- */

static const int k_sizes[] = {1, 3, 15, 16, 17, 31, 33, 63, 64, 100, 1000, 4099};
#define N_SIZES (sizeof k_sizes / sizeof *k_sizes)

static void test_rows(void **state)
{
    (void)state;
    for (size_t si = 0; si < N_SIZES; si++) {
        int n = k_sizes[si];
        float *a = malloc(sizeof(float) * n), *b = malloc(sizeof(float) * n);
        float *w = malloc(sizeof(float) * n), *y = malloc(sizeof(float) * n);
        float *r = malloc(sizeof(float) * n), *sc = malloc(sizeof(float) * n);
        fill(a, n, 6.0f);
        fill(b, n, 2.0f);
        fill(w, n, 1.0f);
        for (int isa = 0; isa < 3; isa++) {
            if (!use_isa(isa)) continue;
            kern_ref_rmsnorm(r, a, w, n, 1e-6f, 0.0f);
            kern_rmsnorm(y, a, w, n, 1e-6f, 0.0f);
            check_close(y, r, NULL, n, 1e-5f, 1e-6f, "rmsnorm");
            kern_ref_rmsnorm(r, a, w, n, 1e-6f, 1.0f);
            memcpy(y, a, sizeof(float) * n);
            kern_rmsnorm(y, y, w, n, 1e-6f, 1.0f); /* aliasing */
            check_close(y, r, NULL, n, 1e-5f, 1e-6f, "rmsnorm offset aliased");

            for (int i = 0; i < n; i++) sc[i] = fabsf(a[i] * b[i]);
            kern_ref_silu_mul(r, a, b, n);
            kern_silu_mul(y, a, b, n);
            check_close(y, r, sc, n, 1e-5f, 1e-6f, "silu_mul");
            kern_ref_gelu_tanh_mul(r, a, b, n);
            kern_gelu_tanh_mul(y, a, b, n);
            check_close(y, r, sc, n, 1e-5f, 1e-6f, "gelu_tanh_mul");

            kern_ref_add(r, a, b, n);
            memcpy(y, a, sizeof(float) * n);
            kern_add(y, y, b, n);
            check_close(y, r, NULL, n, 0.0f, 0.0f, "add");

            memcpy(r, a, sizeof(float) * n);
            memcpy(y, a, sizeof(float) * n);
            if (n > 2) r[1] = y[1] = -INFINITY; /* masked logit */
            kern_ref_softmax(r, n);
            kern_softmax(y, n);
            check_close(y, r, NULL, n, 1e-5f, 1e-7f, "softmax");

            for (int i = 0; i < n; i++) sc[i] = a[i];
            if (n > 20) sc[n - 3] = sc[7] = 100.0f; /* tie: the first wins */
            assert_int_equal(kern_argmax(sc, n), kern_ref_argmax(sc, n));
            sc[n - 1] = 1000.0f;
            assert_int_equal(kern_argmax(sc, n), n - 1);

            float s = 0.0f;
            for (int i = 0; i < n; i++) s += fabsf(a[i] * b[i]);
            float d = kern_dot_f32(a, b, n), dr = kern_ref_dot_f32(a, b, n);
            check_close(&d, &dr, &s, 1, 1e-5f, 1e-6f, "dot");
        }
        kernels_init(NULL);
        free(a), free(b), free(w), free(y), free(r), free(sc);
    }
}

static void test_rope(void **state)
{
    (void)state;
    static const int dims[][2] = {{64, 64}, {128, 128}, {128, 64}, {80, 80}, {40, 20}, {6, 6}, {34, 34}};
    for (size_t di = 0; di < sizeof dims / sizeof *dims; di++) {
        int hd = dims[di][0], rot = dims[di][1], nh = 3, half = rot / 2;
        float inv_freq[128], cs[128], sn[128];
        for (int i = 0; i < half; i++) inv_freq[i] = powf(10000.0f, -2.0f * (float)i / (float)rot);
        kern_rope_cache(cs, sn, 4097, inv_freq, half, 1.0f);
        float *x = malloc(sizeof(float) * nh * hd), *y = malloc(sizeof(float) * nh * hd);
        float *r = malloc(sizeof(float) * nh * hd);
        fill(x, (size_t)nh * hd, 3.0f);
        for (int neox = 0; neox <= 1; neox++)
            for (int isa = 0; isa < 3; isa++) {
                if (!use_isa(isa)) continue;
                memcpy(r, x, sizeof(float) * nh * hd);
                memcpy(y, x, sizeof(float) * nh * hd);
                kern_ref_rope_apply(r, nh, hd, rot, cs, sn, neox);
                kern_rope_apply(y, nh, hd, rot, cs, sn, neox);
                check_close(y, r, NULL, (size_t)nh * hd, 1e-6f, 1e-6f, neox ? "rope neox" : "rope gptj");
            }
        kernels_init(NULL);
        free(x), free(y), free(r);
    }
}

/* Every tail length of both vector widths (n = 1..80: n mod 8, n mod 16,
 * n mod 32, with and without full vectors before the tail) and one long
 * row; each output is followed by sentinels that masked tails must not
 * touch.  Inputs reach exp's clamps (AVX2 flushes below -87.3, AVX-512
 * goes denormal) in the tails too. */
#define SENT 16
static void check_sentinels(const float *p, const char *what, int n)
{
    for (int i = 0; i < SENT; i++)
        if (p[i] != 1234.5f)
            fail_msg("%s [isa %s] n=%d: wrote past the row (+%d)", what, kernels_isa_name(kernels_isa()), n, i);
}

static void test_rows_tails(void **state)
{
    (void)state;
    for (int n = 1; n <= 81; n++) {
        int len = n == 81 ? 4097 : n;
        size_t sz = sizeof(float) * (size_t)(len + SENT);
        float *a = malloc(sz), *b = malloc(sz), *w = malloc(sz), *y = malloc(sz), *r = malloc(sz);
        float *sc = malloc(sz);
        fill(a, len, 6.0f);
        fill(b, len, 2.0f);
        fill(w, len, 1.0f);
        for (int i = len - 3; i < len; i++)
            if (i >= 0) a[i] *= 20.0f; /* exp clamp territory in the tail */
        for (int isa = 0; isa < 3; isa++) {
            if (!use_isa(isa)) continue;
            for (int i = 0; i < SENT; i++) y[len + i] = 1234.5f;
            kern_ref_rmsnorm(r, a, w, len, 1e-6f, 1.0f);
            kern_rmsnorm(y, a, w, len, 1e-6f, 1.0f);
            check_close(y, r, NULL, len, 1e-5f, 1e-6f, "rmsnorm tail");
            check_sentinels(y + len, "rmsnorm", len);

            for (int i = 0; i < len; i++) sc[i] = fabsf(a[i] * b[i]);
            kern_ref_silu_mul(r, a, b, len);
            kern_silu_mul(y, a, b, len);
            check_close(y, r, sc, len, 1e-5f, 1e-6f, "silu_mul tail");
            check_sentinels(y + len, "silu_mul", len);
            kern_ref_gelu_tanh_mul(r, a, b, len);
            kern_gelu_tanh_mul(y, a, b, len);
            check_close(y, r, sc, len, 1e-5f, 1e-6f, "gelu_tanh_mul tail");
            check_sentinels(y + len, "gelu_tanh_mul", len);
            kern_ref_add(r, a, b, len);
            kern_add(y, a, b, len);
            check_close(y, r, NULL, len, 0.0f, 0.0f, "add tail");
            check_sentinels(y + len, "add", len);

            /* logits spread over ~120 so some underflow; max in the tail */
            for (int i = 0; i < len; i++) r[i] = y[i] = a[i] * 1.0f;
            r[len - 1] = y[len - 1] = 8.0f;
            if (len > 2) r[len / 2] = y[len / 2] = -INFINITY;
            kern_ref_softmax(r, len);
            kern_softmax(y, len);
            check_close(y, r, NULL, len, 1e-5f, 1e-7f, "softmax tail");
            check_sentinels(y + len, "softmax", len);

            /* argmax: the max at each of the last positions, ties across the
             * vector part and the tail (the first index wins) */
            for (int j = len - 1; j >= 0 && j >= len - 17; j--) {
                for (int i = 0; i < len; i++) sc[i] = a[i];
                sc[j] = 500.0f;
                assert_int_equal(kern_argmax(sc, len), j);
                if (j > 0) {
                    sc[j / 3] = 500.0f;
                    assert_int_equal(kern_argmax(sc, len), j / 3);
                }
            }

            float s = 0.0f;
            for (int i = 0; i < len; i++) s += fabsf(a[i] * b[i]);
            float d = kern_dot_f32(a, b, len), dr = kern_ref_dot_f32(a, b, len);
            check_close(&d, &dr, &s, 1, 1e-5f, 1e-6f, "dot tail");
        }
        kernels_init(NULL);
        free(a), free(b), free(w), free(y), free(r), free(sc);
    }
}

/* Rope: every rotary half 1..40 (neox tails of both widths; gptj vectors of
 * W/2 pairs plus scalar pairs), partial rotary, sentinels after the heads. */
static void test_rope_tails(void **state)
{
    (void)state;
    for (int half = 1; half <= 40; half++)
        for (int extra = 0; extra <= 3; extra += 3) {
            int rot = 2 * half, hd = rot + extra, nh = 3;
            float inv_freq[64], cs[64], sn[64];
            for (int i = 0; i < half; i++) inv_freq[i] = powf(10000.0f, -2.0f * (float)i / (float)rot);
            kern_rope_cache(cs, sn, 777, inv_freq, half, 1.0f);
            size_t len = (size_t)nh * hd;
            float *x = malloc(sizeof(float) * (len + SENT)), *y = malloc(sizeof(float) * (len + SENT));
            float *r = malloc(sizeof(float) * len);
            fill(x, len, 3.0f);
            for (int neox = 0; neox <= 1; neox++)
                for (int isa = 0; isa < 3; isa++) {
                    if (!use_isa(isa)) continue;
                    memcpy(r, x, sizeof(float) * len);
                    memcpy(y, x, sizeof(float) * len);
                    for (int i = 0; i < SENT; i++) y[len + i] = 1234.5f;
                    kern_ref_rope_apply(r, nh, hd, rot, cs, sn, neox);
                    kern_rope_apply(y, nh, hd, rot, cs, sn, neox);
                    check_close(y, r, NULL, len, 1e-6f, 1e-6f, neox ? "rope neox tail" : "rope gptj tail");
                    check_sentinels(y + len, "rope", (int)len);
                }
            kernels_init(NULL);
            free(x), free(y), free(r);
        }
}

/* kern_bf16_decide with injected timings: clear wins either way whatever
 * the prior, near ties (inside the margin, and exactly on it) go to the
 * prior (fma without one), the best run counts (slow outliers from a busy
 * machine do not matter), invalid times are ignored. */
static void test_bf16_decide(void **state)
{
    (void)state;
    const double m = 0.10;
    const double f_slow[] = {10.0, 11.0, 12.5}, d_fast[] = {5.2, 5.0, 6.1};
    for (int prior = -1; prior <= 1; prior++) {
        assert_int_equal(kern_bf16_decide(f_slow, 3, d_fast, 3, prior, m), 1);
        assert_int_equal(kern_bf16_decide(d_fast, 3, f_slow, 3, prior, m), 0);
    }
    /* near tie: 10 vs 9.5 (5 %) */
    const double f10[] = {10.0}, d95[] = {9.5};
    assert_int_equal(kern_bf16_decide(f10, 1, d95, 1, 1, m), 1);
    assert_int_equal(kern_bf16_decide(f10, 1, d95, 1, 0, m), 0);
    assert_int_equal(kern_bf16_decide(f10, 1, d95, 1, -1, m), 0);
    assert_int_equal(kern_bf16_decide(d95, 1, f10, 1, 1, m), 1);
    /* exactly on the margin is still a tie; just past it is not */
    const double f11[] = {11.0}, f111[] = {11.1};
    assert_int_equal(kern_bf16_decide(f11, 1, f10, 1, 0, m), 0);
    assert_int_equal(kern_bf16_decide(f111, 1, f10, 1, 0, m), 1);
    assert_int_equal(kern_bf16_decide(f10, 1, f11, 1, 1, m), 1);
    assert_int_equal(kern_bf16_decide(f10, 1, f111, 1, 1, m), 0);
    /* noise: preempted runs only ever look slower; the best run decides */
    const double f_noisy[] = {80.0, 10.0, 55.0, 31.0}, d_noisy[] = {40.0, 70.0, 6.0, 90.0};
    assert_int_equal(kern_bf16_decide(f_noisy, 4, d_noisy, 4, 0, m), 1);
    const double d_noisy_tie[] = {40.0, 9.6, 90.0};
    assert_int_equal(kern_bf16_decide(f_noisy, 4, d_noisy_tie, 3, 0, m), 0);
    assert_int_equal(kern_bf16_decide(f_noisy, 4, d_noisy_tie, 3, 1, m), 1);
    /* invalid entries (0, negative, NaN) are skipped; none valid: the prior */
    const double f_bad[] = {0.0, -1.0, NAN, 10.0}, d_bad[] = {NAN, 0.0, 4.0};
    assert_int_equal(kern_bf16_decide(f_bad, 4, d_bad, 3, 0, m), 1);
    const double none[] = {0.0, NAN};
    assert_int_equal(kern_bf16_decide(none, 2, d_bad, 3, 0, m), 0);
    assert_int_equal(kern_bf16_decide(none, 2, d_bad, 3, 1, m), 1);
    assert_int_equal(kern_bf16_decide(f10, 1, none, 0, -1, m), 0);
    /* margin 0: any difference decides */
    const double d999[] = {9.99};
    assert_int_equal(kern_bf16_decide(f10, 1, d999, 1, 0, 0.0), 1);
}

/* The start-up choice: SGLC_BF16_DOT=0 / 1 force it (no measurement
 * reported), auto measures once per process and follows kern_bf16_decide's
 * rule on the rates it reports; non-AVX-512 ISAs always report fma. */
static void test_bf16_choice(void **state)
{
    (void)state;
    char line[512];
    assert_int_equal(kernels_init("scalar"), 0);
    assert_int_equal(kernels_choice()->bf16_dot, 0);
    assert_non_null(strstr(kernels_choice_line(line, sizeof line), "bf16 matmul: fma"));
    if (!use_isa(2)) {
        kernels_init(NULL);
        print_message("skipped: no AVX-512 BF16 (%s)\n", kernels_choice_line(line, sizeof line));
        return;
    }
    setenv("SGLC_BF16_DOT", "0", 1);
    assert_int_equal(kernels_init("avx512"), 0);
    assert_int_equal(kernels_choice()->bf16_dot, 0);
    assert_string_equal(kernels_choice()->bf16_why, "SGLC_BF16_DOT=0");
    assert_true(kernels_choice()->fma_gflops == 0.0);
    setenv("SGLC_BF16_DOT", "1", 1);
    assert_int_equal(kernels_init("avx512"), 0);
    assert_int_equal(kernels_choice()->bf16_dot, 2);
    assert_non_null(strstr(kernels_choice_line(line, sizeof line), "bf16 matmul: dot (SGLC_BF16_DOT=1"));
    for (int pass = 0; pass < 2; pass++) {
        if (pass) setenv("SGLC_BF16_DOT", "auto", 1);
        else unsetenv("SGLC_BF16_DOT");
        assert_int_equal(kernels_init("avx512"), 0);
        const kern_choice *c = kernels_choice();
        assert_true(c->fma_gflops > 0.0 && c->dot_gflops > 0.0);
        assert_true(c->bf16_dot == 0 || c->bf16_dot == 1);
        assert_non_null(c->bf16_why);
        assert_true(!strncmp(c->bf16_why, "measured", 8));
        /* the rule, on the reported rates (time ~ 1 / rate) */
        double tf = 1.0 / c->fma_gflops, td = 1.0 / c->dot_gflops;
        assert_int_equal(c->bf16_dot, kern_bf16_decide(&tf, 1, &td, 1, c->table_dot, 0.10));
        static double first_fma, first_dot;
        if (!pass) first_fma = c->fma_gflops, first_dot = c->dot_gflops;
        else assert_true(first_fma == c->fma_gflops && first_dot == c->dot_gflops); /* measured once */
        print_message("%s\n", kernels_choice_line(line, sizeof line));
    }
    unsetenv("SGLC_BF16_DOT");
    kernels_init(NULL);
}

/* The quantized kernels' VNNI-or-AVX2 choice: SGLC_QUANT_AVX512=table is
 * the table alone (nothing measured); the default checks it by timing and
 * follows the rule: the table's pick unless the other kernel measured more
 * than 10 % faster; all / none still force. */
static void test_quant_choice(void **state)
{
    (void)state;
    if (!use_isa(2)) {
        kernels_init(NULL);
        print_message("skipped: no AVX-512\n");
        return;
    }
    int table[KERN_TYPE_COUNT][2];
    setenv("SGLC_QUANT_AVX512", "table", 1);
    assert_int_equal(kernels_init("avx512"), 0);
    assert_int_equal(quant_select_get()->n_checked, 0);
    assert_string_equal(quant_select_get()->how, "SGLC_QUANT_AVX512=table");
    for (int t = 0; t < KERN_TYPE_COUNT; t++)
        for (int p = 0; p < 2; p++) table[t][p] = quant_avx512_uses((kern_type)t, 0, p ? 2 : 1);
    unsetenv("SGLC_QUANT_AVX512");
    assert_int_equal(kernels_init("avx512"), 0);
    const quant_select_info *qi = quant_select_get();
    assert_string_equal(qi->how, "table checked by measurement");
    assert_true(qi->n_checked >= 10); /* every type with both kernels */
    int overturned = 0;
    for (int t = 0; t < KERN_TYPE_COUNT; t++)
        for (int p = 0; p < 2; p++) {
            double r = quant_select_ratio((kern_type)t, p);
            int got = quant_avx512_uses((kern_type)t, 0, p ? 2 : 1);
            if (r <= 0) {
                assert_int_equal(got, table[t][p]); /* not measured: the table */
                continue;
            }
            int want = r > 1.1 ? 1 : r < 1.0 / 1.1 ? 0 : table[t][p];
            if (got != want)
                fail_msg("type %d path %d: ratio %.3f table %d -> %d, want %d", t, p, r, table[t][p], got, want);
            overturned += got != table[t][p];
        }
    assert_int_equal(overturned, qi->n_overturned);
    setenv("SGLC_QUANT_AVX512", "all", 1);
    assert_int_equal(kernels_init("avx512"), 0);
    assert_int_equal(quant_select_get()->n_checked, 0);
    assert_int_equal(quant_avx512_uses(KERN_TYPE_IQ4_XS, 0, 1), 1);
    setenv("SGLC_QUANT_AVX512", "none", 1);
    assert_int_equal(kernels_init("avx512"), 0);
    assert_int_equal(quant_avx512_uses(KERN_TYPE_Q4_K, 0, 2), 0);
    unsetenv("SGLC_QUANT_AVX512");
    kernels_init(NULL);
}

/* Batch invariance under each bf16 body: row r of an m-row product is
 * bit-identical to the same row computed alone (m = 1) and inside other
 * batch sizes, for the fma body, the dot body and x_exact under mode 1. */
static void test_bf16_batch_invariance(void **state)
{
    (void)state;
    if (!use_isa(2)) {
        kernels_init(NULL);
        print_message("skipped: no AVX-512 BF16\n");
        return;
    }
    const int n = 70, k = 520, mmax = 40;
    float *x = malloc(sizeof(float) * mmax * k), *wf = malloc(sizeof(float) * n * k);
    float *y = malloc(sizeof(float) * mmax * n), *y1 = malloc(sizeof(float) * n);
    fill(x, (size_t)mmax * k, 2.0f);
    fill(wf, (size_t)n * k, 0.5f);
    static const int ms[] = {1, 2, 12, 13, 16, 25, 40};
    float *yall[3][2];
    for (int mode = 0; mode <= 2; mode++)
        for (int xe = 0; xe <= 1; xe++) {
            assert_int_equal(kernels_init("avx512"), 0); /* no AMX: the panel bodies */
            kern_avx512_set_bf16_dot(mode);
            kern_mat w;
            assert_int_equal(kern_mat_init(&w, wf, DTYPE_F32, n, k, DTYPE_BF16, 0), 0);
            w.x_exact = xe;
            void *scratch = malloc(kern_matmul_scratch(mmax, k));
            for (size_t a = 0; a < sizeof ms / sizeof *ms; a++) {
                int m = ms[a];
                kern_matmul(y, x, m, &w, NULL, 0, 1, scratch);
                for (int r = 0; r < m; r += 7) {
                    kern_matmul(y1, x + (size_t)r * k, 1, &w, NULL, 0, 1, scratch);
                    if (memcmp(y1, y + (size_t)r * n, sizeof(float) * n) != 0)
                        fail_msg("bf16 mode %d x_exact %d: row %d of m=%d differs from m=1", mode, xe, r, m);
                }
            }
            yall[mode][xe] = malloc(sizeof(float) * mmax * n);
            memcpy(yall[mode][xe], y, sizeof(float) * mmax * n); /* the m = 40 product */
            free(scratch);
            kern_mat_free(&w);
        }
    /* which body ran: mode 0 is fma for both, mode 2 dot for both, mode 1
     * dot except x_exact; the two bodies differ (x is rounded to bf16) */
    const size_t yb = sizeof(float) * mmax * n;
    assert_memory_equal(yall[0][0], yall[0][1], yb);
    assert_memory_equal(yall[2][0], yall[2][1], yb);
    assert_memory_equal(yall[1][1], yall[0][0], yb);
    assert_memory_equal(yall[1][0], yall[2][0], yb);
    assert_memory_not_equal(yall[0][0], yall[2][0], yb);
    for (int i = 0; i < 6; i++) free(yall[i / 2][i % 2]);
    kernels_init(NULL);
    free(x), free(wf), free(y), free(y1);
}

static void test_isa_names(void **state)
{
    (void)state;
    assert_int_equal(kernels_init("scalar"), 0);
    assert_int_equal(kernels_isa(), KERN_ISA_SCALAR);
    assert_int_equal(kernels_init(NULL), 0);
    print_message("selected kernels: %s\n", kernels_isa_name(kernels_isa()));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_isa_names),
        cmocka_unit_test(test_rows),
        cmocka_unit_test(test_rope),
        cmocka_unit_test(test_rows_tails),
        cmocka_unit_test(test_rope_tails),
        cmocka_unit_test(test_attention),
        cmocka_unit_test(test_attention_tree),
        cmocka_unit_test(test_f8_formats),
        cmocka_unit_test(test_matmul_isa_switch),
        cmocka_unit_test(test_matmul_scratch_monotonic),
        cmocka_unit_test(test_matmul_sources_and_big),
        cmocka_unit_test(test_matmul_sizes),
        cmocka_unit_test(test_matmul_every_r),
        cmocka_unit_test(test_matmul_amx),
        cmocka_unit_test(test_pack_threads),
        cmocka_unit_test(test_bf16_decide),
        cmocka_unit_test(test_bf16_choice),
        cmocka_unit_test(test_bf16_batch_invariance),
        cmocka_unit_test(test_quant_choice),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
