/* test_kv_int8 — sglc's int8 KV cache (--kv-cache-dtype int8): the
 * per-token-head quantizer and the attention kernels that read it.
 *
 * DESIGN: three layers of checks.
 *  1. kern_kv_store_i8 against its definition on random rows (scale =
 *     absmax / 127 exactly, every code = round-half-even(x / scale) within
 *     [-127, 127], the absmax element at +-127, |dequantized - x| <=
 *     scale / 2), exact ties (scale 1: 2.5 -> 2, 3.5 -> 4), a zero head
 *     (scale 0, codes 0) and a NaN that must not become the scale.
 *  2. Every ISA's kern_attention over an int8 cache against the scalar
 *     reference (kern_ref_attention), nth = 1..3, relative 1e-4 of the sum
 *     of |terms| as test_kernels: decode and prefill, odd head dims (3, 17,
 *     40, 80), GQA / MQA / MHA, window, softcap, and slots laid out as
 *     pages of 16 in shuffled order with kv lengths that end inside, at and
 *     one past a page boundary.
 *  3. The scalar reference over int8 equals attention over an f32 cache
 *     holding the dequantized values (q * scale, the semantics), to 2e-6;
 *     and stays within the bound the quantization error implies of the
 *     attention over the original f32 values: every K/V element moves by at
 *     most its head's scale / 2, so a score moves by at most
 *     d_s = attn_scale * sum_d |q_d| * kscale_max / 2, the softmax weights
 *     by a factor within exp(+-2 d_s), and the output by at most
 *     vscale_max / 2 + vmax * (exp(2 d_s) - 1) (derivation in
 *     docs/notes/kv.md).
 * The ISA paths compiled but not runnable on this CPU are skipped (the
 * test prints which ran). */
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
#include "util/cpu.h"
#include "util/dtype.h"

static const char *const k_isas[] = {"scalar", "avx2", "avx512", "amx"};

static uint64_t g_rng = 0xD1B54A32D192ED03ull;
static float frand(void) /* uniform in [-1, 1) */
{
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return (float)((g_rng >> 40) & 0xFFFFFF) / (float)(1 << 23) - 1.0f;
}

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

/* ---- 1. the quantizer ---------------------------------------------------- */

static void test_store_definition(void **state)
{
    (void)state;
    enum { NKH = 5, HD = 37, NS = 40 };
    int8_t *c = malloc((size_t)NS * NKH * HD);
    float *sc = malloc(sizeof(float) * NS * NKH), x[NKH * HD];
    assert_non_null(c);
    assert_non_null(sc);
    for (int s = 0; s < NS; s++) {
        float amp = s % 3 == 0 ? 1e-3f : s % 3 == 1 ? 1.0f : 300.0f;
        for (int i = 0; i < NKH * HD; i++) x[i] = frand() * amp;
        kern_kv_store_i8(c, sc, s, NKH, HD, x);
        for (int h = 0; h < NKH; h++) {
            const float *xh = x + h * HD;
            float amax = 0.0f;
            for (int i = 0; i < HD; i++) amax = fmaxf(amax, fabsf(xh[i]));
            float s1 = sc[s * NKH + h];
            assert_true(s1 == amax / 127.0f);
            int hit127 = 0;
            for (int i = 0; i < HD; i++) {
                int q = c[((size_t)s * NKH + h) * HD + i];
                float want = fminf(127.0f, fmaxf(-127.0f, rintf(xh[i] / s1)));
                if ((float)q != want) fail_msg("slot %d head %d [%d]: code %d, want %g", s, h, i, q, (double)want);
                if (fabsf((float)q * s1 - xh[i]) > 0.5f * s1 * (1.0f + 1e-5f))
                    fail_msg("slot %d head %d [%d]: error %g > scale/2", s, h, i, (double)fabsf((float)q * s1 - xh[i]));
                if (fabsf(xh[i]) == amax && abs(q) == 127) hit127 = 1;
            }
            assert_true(hit127);
        }
    }
    /* ties with scale exactly 1, a zero head, a NaN that must not be the scale */
    float t[3 * 4] = {127.0f, 2.5f, 3.5f, -2.5f, 0, 0, 0, 0, NAN, 1.0f, -2.0f, 0.5f};
    kern_kv_store_i8(c, sc, 0, 3, 4, t);
    assert_true(sc[0] == 1.0f);
    assert_int_equal(c[0], 127), assert_int_equal(c[1], 2), assert_int_equal(c[2], 4), assert_int_equal(c[3], -2);
    assert_true(sc[1] == 0.0f);
    for (int i = 4; i < 8; i++) assert_int_equal(c[i], 0);
    assert_true(sc[2] == 2.0f / 127.0f);
    assert_int_equal(c[8], 0), assert_int_equal(c[9], 64), assert_int_equal(c[10], -127), assert_int_equal(c[11], 32);
    free(c), free(sc);
}

/* ---- 2./3. attention ----------------------------------------------------- */

typedef struct {
    int n_q, n_kv, n_head, n_kv_head, head_dim, window;
    float softcap;
} i8_case;

typedef struct {
    int n_slots;
    int8_t *kc, *vc;
    float *ks, *vs;     /* (n_slots, n_kv_head) */
    float *kf, *vf;     /* the original f32 values */
    float *kd, *vd;     /* dequantized: code * scale */
    int32_t *slots;
} i8_pool;

static void pool_make(i8_pool *p, const i8_case *c)
{
    int n_pages = c->n_kv / 16 + 3;
    p->n_slots = n_pages * 16;
    size_t row = (size_t)c->n_kv_head * c->head_dim, n = row * p->n_slots;
    p->kc = malloc(n), p->vc = malloc(n);
    p->ks = malloc(sizeof(float) * c->n_kv_head * p->n_slots);
    p->vs = malloc(sizeof(float) * c->n_kv_head * p->n_slots);
    p->kf = malloc(sizeof(float) * n), p->vf = malloc(sizeof(float) * n);
    p->kd = malloc(sizeof(float) * n), p->vd = malloc(sizeof(float) * n);
    p->slots = malloc(sizeof(int32_t) * (size_t)c->n_kv);
    assert_true(p->kc && p->vc && p->ks && p->vs && p->kf && p->vf && p->kd && p->vd && p->slots);
    for (int s = 0; s < p->n_slots; s++) {
        float *k = p->kf + row * s, *v = p->vf + row * s;
        for (size_t i = 0; i < row; i++) k[i] = frand() * 1.5f * (1.0f + (float)(s % 4)), v[i] = frand();
        kern_kv_store_i8(p->kc, p->ks, s, c->n_kv_head, c->head_dim, k);
        kern_kv_store_i8(p->vc, p->vs, s, c->n_kv_head, c->head_dim, v);
        for (size_t i = 0; i < row; i++) {
            int h = (int)(i / (size_t)c->head_dim);
            p->kd[row * s + i] = (float)p->kc[row * s + i] * p->ks[s * c->n_kv_head + h];
            p->vd[row * s + i] = (float)p->vc[row * s + i] * p->vs[s * c->n_kv_head + h];
        }
    }
    /* pages of 16 consecutive slots in shuffled order */
    int32_t *pg = malloc(sizeof(int32_t) * n_pages);
    assert_non_null(pg);
    for (int i = 0; i < n_pages; i++) pg[i] = i;
    for (int i = n_pages - 1; i > 0; i--) {
        int j = (int)((frand() + 1.0f) * 0.5f * (float)(i + 1));
        if (j > i) j = i;
        int32_t t = pg[i];
        pg[i] = pg[j], pg[j] = t;
    }
    for (int i = 0; i < c->n_kv; i++) p->slots[i] = pg[i / 16] * 16 + i % 16;
    free(pg);
}

static void pool_free(i8_pool *p)
{
    free(p->kc), free(p->vc), free(p->ks), free(p->vs), free(p->kf), free(p->vf), free(p->kd), free(p->vd);
    free(p->slots);
}

static void run_case(const i8_case *c, int *isas_run)
{
    i8_pool p;
    pool_make(&p, c);
    size_t q_stride = (size_t)c->n_head * c->head_dim + 3, o_stride = (size_t)c->n_head * c->head_dim + 5;
    size_t no = o_stride * c->n_q;
    float *q = malloc(sizeof(float) * q_stride * c->n_q), *ref = malloc(sizeof(float) * no);
    float *out = malloc(sizeof(float) * no), *deq = malloc(sizeof(float) * no), *orig = malloc(sizeof(float) * no);
    float *mag = malloc(sizeof(float) * no), *rs = malloc(sizeof(float) * ((size_t)c->n_kv + 64));
    assert_true(q && ref && out && deq && orig && mag && rs);
    for (size_t i = 0; i < q_stride * c->n_q; i++) q[i] = frand() * 1.5f;
    kern_attn_args a = {
        .n_q = c->n_q, .n_kv = c->n_kv, .n_head = c->n_head, .n_kv_head = c->n_kv_head,
        .head_dim = c->head_dim, .q = q, .q_stride = q_stride, .k_cache = p.kc, .v_cache = p.vc,
        .kv_dt = DTYPE_I8, .k_tok_scale = p.ks, .v_tok_scale = p.vs, .slots = p.slots,
        .sliding_window = c->window, .scale = 1.0f / sqrtf((float)c->head_dim), .softcap = c->softcap,
        .out = ref, .out_stride = o_stride,
    };
    for (size_t i = 0; i < no; i++) ref[i] = out[i] = deq[i] = orig[i] = 7.0f;
    kern_ref_attention(&a, 0, 1, rs);
    /* 3a: the int8 cache means code * scale */
    kern_attn_args af = a;
    af.kv_dt = DTYPE_F32, af.k_cache = p.kd, af.v_cache = p.vd, af.k_tok_scale = af.v_tok_scale = NULL;
    af.out = deq;
    kern_ref_attention(&af, 0, 1, rs);
    for (size_t i = 0; i < no; i++)
        if (!(fabsf(ref[i] - deq[i]) <= 2e-6f + 2e-6f * fabsf(deq[i])))
            fail_msg("int8 ref vs dequantized f32 [%zu]: %g vs %g", i, (double)ref[i], (double)deq[i]);
    /* 3b: within the quantization bound of the original values */
    af.k_cache = p.kf, af.v_cache = p.vf, af.out = orig;
    kern_ref_attention(&af, 0, 1, rs);
    float ksmax = 0, vsmax = 0, vmax = 0;
    for (int i = 0; i < p.n_slots * c->n_kv_head; i++) ksmax = fmaxf(ksmax, p.ks[i]), vsmax = fmaxf(vsmax, p.vs[i]);
    for (size_t i = 0; i < (size_t)p.n_slots * c->n_kv_head * c->head_dim; i++) vmax = fmaxf(vmax, fabsf(p.vf[i]));
    double worst_ratio = 0.0;
    for (int i = 0; i < c->n_q; i++)
        for (int h = 0; h < c->n_head; h++) {
            double sq = 0.0;
            for (int d = 0; d < c->head_dim; d++) sq += fabs(q[(size_t)i * q_stride + (size_t)h * c->head_dim + d]);
            double ds = a.scale * sq * ksmax * 0.5; /* softcap only shrinks score differences */
            double bound = vsmax * 0.5 + vmax * (exp(2.0 * ds) - 1.0) + 1e-5;
            for (int d = 0; d < c->head_dim; d++) {
                size_t o = (size_t)i * o_stride + (size_t)h * c->head_dim + d;
                double e = fabs((double)ref[o] - orig[o]);
                if (e > bound) fail_msg("int8 vs f32 attention [q %d head %d dim %d]: %g > bound %g", i, h, d, e, bound);
                if (e / bound > worst_ratio) worst_ratio = e / bound;
            }
        }
    /* 2: every ISA against the reference (relative to the sum of |terms|) */
    for (size_t i = 0; i < no; i++) mag[i] = 0.0f;
    for (int i = 0; i < c->n_q; i++)
        for (int h = 0; h < c->n_head; h++)
            for (int d = 0; d < c->head_dim; d++) {
                size_t o = (size_t)i * o_stride + (size_t)h * c->head_dim + d;
                mag[o] = 1.0f; /* values |v| <= 1, weights sum to 1 */
            }
    for (int isa = 0; isa < 3; isa++) {
        if (!use_isa(isa)) continue;
        isas_run[isa] = 1;
        char *scratch = malloc(kern_attention_scratch(c->n_kv, c->head_dim) + 1);
        assert_non_null(scratch);
        a.out = out;
        for (int nth = 1; nth <= 3; nth++) {
            for (size_t i = 0; i < no; i++) out[i] = 7.0f; /* padding must stay */
            for (int ith = 0; ith < nth; ith++) kern_attention(&a, ith, nth, scratch);
            for (size_t i = 0; i < no; i++)
                if (!(fabsf(out[i] - ref[i]) <= 1e-4f * mag[i] + 2e-6f))
                    fail_msg("int8 attention [isa %s] n_q=%d n_kv=%d heads=%d/%d hd=%d win=%d cap=%g nth=%d: "
                             "[%zu] got %.9g ref %.9g",
                             k_isas[isa], c->n_q, c->n_kv, c->n_head, c->n_kv_head, c->head_dim, c->window,
                             (double)c->softcap, nth, i, (double)out[i], (double)ref[i]);
        }
        free(scratch);
    }
    kernels_init(NULL);
    (void)worst_ratio;
    free(q), free(ref), free(out), free(deq), free(orig), free(mag), free(rs);
    pool_free(&p);
}

static void test_attention_int8(void **state)
{
    (void)state;
    static const i8_case cases[] = {
        {1, 1, 4, 2, 64, 0, 0},        /* first token */
        {1, 300, 32, 8, 64, 0, 0},     /* decode, Llama-3.2-1B heads */
        {1, 16, 8, 2, 64, 0, 0},       /* kv ends at a page boundary */
        {1, 17, 8, 2, 64, 0, 0},       /* one past it */
        {1, 47, 15, 3, 17, 0, 0},      /* odd head_dim, uneven kv-head chunks, inside a page */
        {5, 37, 8, 2, 40, 0, 0},       /* prefix + new queries, head_dim not a multiple of 16 */
        {70, 70, 6, 2, 80, 0, 0},      /* prefill */
        {33, 90, 4, 4, 3, 16, 0},      /* MHA, window, head_dim 3 */
        {40, 100, 8, 1, 128, 24, 30.0f}, /* MQA, window, softcap */
        {3, 40, 48, 1, 32, 0, 0},      /* group 48: head chunks */
        {1, 33, 40, 5, 64, 20, 0},     /* decode, window */
        {1, 64, 16, 1, 576, 0, 0},     /* MLA-like: one latent head of 512 + 64 */
    };
    int run[3] = {0};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) run_case(&cases[i], run);
    printf("int8 attention checked on:%s%s%s\n", run[0] ? " scalar" : "", run[1] ? " avx2" : "",
           run[2] ? " avx512" : "");
    assert_true(run[0]);
}

int main(void)
{
    setenv("SGLC_KV_INT8_QDOT", "0", 1); /* the exact path; int8-q: test_kv_i8q */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_store_definition),
        cmocka_unit_test(test_attention_int8),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
