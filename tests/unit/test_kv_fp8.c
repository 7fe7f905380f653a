/* test_kv_fp8 — the attention kernels reading 8-bit KV caches directly
 * (--kv-cache-dtype fp8_e4m3 / fp8_e5m2, and sglc's int8) against the
 * scalar reference, with the byte patterns random stores never make.
 *
 * DESIGN: the SIMD kernels decode fp8 by bit moves to f16 (vcvtph2ps; e4m3
 * with a 2^8 folded into the scale and a compare for its NaN codes), so the
 * checks aim at the corners of that trick:
 *  1. Every code, exactly: with one visible key the softmax weight is 1 and
 *     the output is the V row, so a row holding codes c0 .. c0 + hd - 1 must
 *     come back as table[c] * v_scale bit for bit (NaN codes as NaN, e5m2's
 *     infinities as infinities), for every ISA the CPU runs, scales 1,
 *     0.37 and 2^-10, head dims 17, 64 and 80 (tails of both vector widths).
 *  2. K decoding: two keys, K rows of chosen codes (subnormals, the largest
 *     finite value, the codes next to NaN / infinity, zeros of both signs),
 *     V rows of 1 and 0 in one lane: the output lane is the first key's
 *     softmax weight, against the reference computed from the table.
 *  3. Random caches of codes drawn over every finite code (weighted to
 *     subnormals and the extremes) against kern_ref_attention, relative
 *     1e-4 of the largest |output|: decode at n_kv 5000 (long context),
 *     prefill 40 queries over 300, GQA 32/8, MQA, MHA, odd head_dim 17 and
 *     80, 128, scales != 1, slots as shuffled pages of 16, nth 1..3; int8
 *     with codes +-127, 0 and random per-token-head scales (0 included).
 * The ISAs not runnable on this CPU are skipped (the test prints which
 * ran). */
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

static const char *const k_isas[] = {"scalar", "avx2", "avx512"};

static uint64_t g_rng = 0x9E3779B97F4A7C15ull;
static uint32_t rnd(void)
{
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return (uint32_t)(g_rng >> 32);
}
static float frand(void) /* [-1, 1) */
{
    return (float)(rnd() & 0xFFFFFF) / (float)(1 << 23) - 1.0f;
}

static int use_isa(int idx)
{
    const cpu_features *c = cpu_get();
    if (idx == 1 && !(c->avx2 && c->fma && c->f16c)) return 0;
    if (idx == 2 && !(c->avx512f && c->avx512bw && c->avx512vl && c->avx512dq && c->avx512bf16 &&
                      c->avx512vnni))
        return 0;
    return kernels_init(k_isas[idx]) == 0;
}

static void run(const kern_attn_args *a, int nth, int ref)
{
    char *scratch = malloc(kern_attention_scratch(a->n_kv, a->head_dim) + 64);
    assert_non_null(scratch);
    for (int ith = 0; ith < nth; ith++) {
        if (ref) kern_ref_attention(a, ith, nth, scratch);
        else kern_attention(a, ith, nth, scratch);
    }
    free(scratch);
}

static int is_f8_nan(dtype dt, int c)
{
    return dt == DTYPE_F8_E4M3 ? (c & 0x7f) == 0x7f : (c & 0x7f) > 0x7c;
}

/* 1: every code through V, bit-exact */
static void test_every_code_v(void **state)
{
    (void)state;
    const dtype dts[2] = {DTYPE_F8_E4M3, DTYPE_F8_E5M2};
    const int hds[3] = {17, 64, 80};
    const float scales[3] = {1.0f, 0.37f, 1.0f / 1024};
    int ran[3] = {0};
    for (int isa = 0; isa < 3; isa++) {
        if (!use_isa(isa)) continue;
        ran[isa] = 1;
        for (int t = 0; t < 2; t++)
            for (int h = 0; h < 3; h++)
                for (int si = 0; si < 3; si++) {
                    const int hd = hds[h], nkh = 2, nh = 4, row = nkh * hd;
                    const float *tab = dtype_f8_table(dts[t]);
                    uint8_t *k = calloc((size_t)row, 1), *v = calloc((size_t)row, 1);
                    float *q = calloc((size_t)nh * hd, sizeof(float)), *o = calloc((size_t)nh * hd, sizeof(float));
                    int32_t slot = 0;
                    for (int c0 = 0; c0 < 256; c0 += row) {
                        for (int i = 0; i < row; i++) v[i] = (uint8_t)(c0 + i);
                        kern_attn_args a = {.n_q = 1, .n_kv = 1, .n_head = nh, .n_kv_head = nkh, .head_dim = hd,
                                            .q = q, .q_stride = (size_t)nh * hd, .k_cache = k, .v_cache = v,
                                            .kv_dt = dts[t], .k_scale = 0.5f, .v_scale = scales[si],
                                            .slots = &slot, .scale = 0.125f, .out = o,
                                            .out_stride = (size_t)nh * hd};
                        run(&a, 1, 0);
                        for (int hh = 0; hh < nh; hh++)
                            for (int d = 0; d < hd; d++) {
                                int c = (uint8_t)(c0 + (hh / (nh / nkh)) * hd + d);
                                float want = 0.0f + tab[c] * scales[si], got = o[hh * hd + d]; /* 0 + -0 = +0 */
                                if (is_f8_nan(dts[t], c)) {
                                    if (!isnan(got))
                                        fail_msg("[%s] %s code 0x%02x: got %g, want NaN", k_isas[isa],
                                                 dtype_name(dts[t]), c, (double)got);
                                } else if (memcmp(&want, &got, sizeof got) != 0) {
                                    fail_msg("[%s] %s code 0x%02x hd %d scale %g: got %.9g want %.9g", k_isas[isa],
                                             dtype_name(dts[t]), c, hd, (double)scales[si], (double)got,
                                             (double)want);
                                }
                            }
                    }
                    free(k), free(v), free(q), free(o);
                }
    }
    kernels_init(NULL);
    printf("  every code through V: scalar %d avx2 %d avx512 %d\n", ran[0], ran[1], ran[2]);
}

/* 2: chosen K codes, two keys: out lane 0 = softmax weight of key 0 */
static void test_k_codes(void **state)
{
    (void)state;
    const uint8_t e4[] = {0x00, 0x80, 0x01, 0x81, 0x07, 0x08, 0x0f, 0x7e, 0xfe, 0x7d, 0x38, 0xb8, 0x3f, 0x40};
    const uint8_t e5[] = {0x00, 0x80, 0x01, 0x81, 0x03, 0x04, 0x7b, 0xfb, 0x7a, 0x3c, 0xbc, 0x3f, 0x40};
    for (int isa = 1; isa < 3; isa++) {
        if (!use_isa(isa)) continue;
        for (int t = 0; t < 2; t++) {
            const dtype dt = t ? DTYPE_F8_E5M2 : DTYPE_F8_E4M3;
            const uint8_t *codes = t ? e5 : e4;
            const int nc = t ? (int)sizeof e5 : (int)sizeof e4;
            const int hd = 24, nkh = 1, nh = 2;
            uint8_t k[2 * 24], v[2 * 24];
            float q[2 * 24], o[2 * 24], oref[2 * 24];
            int32_t slots[2] = {1, 0};
            for (int ci = 0; ci < nc; ci++)
                for (int cj = 0; cj < nc; cj++) {
                    memset(v, 0, sizeof v);
                    v[24 + 0] = t ? 0x3c : 0x38; /* slot 1 (key 0): 1.0 in lane 0 */
                    for (int d = 0; d < hd; d++) {
                        k[24 + d] = codes[(ci + d) % nc];
                        k[d] = codes[(cj + 3 * d) % nc];
                    }
                    /* small q: scores of the largest codes stay moderate */
                    for (int i = 0; i < nh * hd; i++) q[i] = (float)((i * 37) % 11 - 5) * (t ? 1e-6f : 1e-4f);
                    kern_attn_args a = {.n_q = 1, .n_kv = 2, .n_head = nh, .n_kv_head = nkh, .head_dim = hd,
                                        .q = q, .q_stride = (size_t)nh * hd, .k_cache = k, .v_cache = v, .kv_dt = dt,
                                        .k_scale = 3.0f, .v_scale = 1.0f, .slots = slots, .scale = 1.0f,
                                        .out = oref, .out_stride = (size_t)nh * hd};
                    run(&a, 1, 1);
                    a.out = o;
                    run(&a, 1, 0);
                    for (int i = 0; i < nh * hd; i++)
                        if (fabsf(o[i] - oref[i]) > 1e-5f)
                            fail_msg("[%s] %s K codes %d/%d: out[%d] %.8g ref %.8g", k_isas[isa], dtype_name(dt), ci,
                                     cj, i, (double)o[i], (double)oref[i]);
                }
        }
    }
    kernels_init(NULL);
}

/* a code of dt, finite, weighted to the corners */
static uint8_t f8_code(dtype dt)
{
    uint32_t r = rnd();
    int sign = (r >> 31) << 7, sel = (int)(r >> 24) & 7;
    int maxc = dt == DTYPE_F8_E4M3 ? 0x7e : 0x7b, subn = dt == DTYPE_F8_E4M3 ? 8 : 4;
    int c;
    if (sel == 0) c = (int)(r % (uint32_t)subn);              /* zero and subnormals */
    else if (sel == 1) c = maxc - (int)(r % 3);               /* the largest values */
    else c = (int)(r % (uint32_t)(maxc + 1));
    return (uint8_t)(sign | c);
}

typedef struct {
    int n_q, n_kv, n_head, n_kv_head, head_dim;
    dtype dt;
    float ks, vs, qmag;
} rcase;

static void test_random_vs_ref(void **state)
{
    (void)state;
    const rcase cases[] = {
        {1, 5000, 32, 8, 64, DTYPE_F8_E4M3, 0.02f, 0.7f, 0.02f},
        {1, 5000, 32, 8, 64, DTYPE_F8_E5M2, 1.0f, 0.001f, 0.0002f},
        {1, 5000, 32, 8, 64, DTYPE_I8, 0, 0, 0.05f},
        {40, 300, 32, 8, 64, DTYPE_F8_E4M3, 0.01f, 1.0f, 0.05f},
        {3, 1029, 8, 1, 128, DTYPE_F8_E5M2, 0.05f, 2.0f, 0.0005f},
        {2, 777, 6, 6, 17, DTYPE_F8_E4M3, 0.05f, 0.3f, 0.05f},
        {1, 2049, 12, 3, 80, DTYPE_F8_E5M2, 0.01f, 1.0f, 0.002f},
        {5, 2049, 12, 3, 80, DTYPE_I8, 0, 0, 0.05f},
        {1, 513, 4, 1, 17, DTYPE_I8, 0, 0, 0.05f},
    };
    int ran[3] = {0};
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        const rcase *c = &cases[ci];
        const int row = c->n_kv_head * c->head_dim, npages = (c->n_kv + 15) / 16;
        const size_t nslot = (size_t)npages * 16;
        uint8_t *k = malloc(nslot * row), *v = malloc(nslot * row);
        float *kts = NULL, *vts = NULL;
        float *q = malloc(sizeof(float) * (size_t)c->n_q * c->n_head * c->head_dim);
        float *oref = malloc(sizeof(float) * (size_t)c->n_q * c->n_head * c->head_dim);
        float *o = malloc(sizeof(float) * (size_t)c->n_q * c->n_head * c->head_dim);
        int32_t *slots = malloc(sizeof(int32_t) * (size_t)c->n_kv), *perm = malloc(sizeof(int32_t) * npages);
        assert_true(k && v && q && oref && o && slots && perm);
        for (int p = 0; p < npages; p++) perm[p] = p;
        for (int p = npages - 1; p > 0; p--) {
            int j = (int)(rnd() % (uint32_t)(p + 1)), t = perm[p];
            perm[p] = perm[j], perm[j] = t;
        }
        for (int i = 0; i < c->n_kv; i++) slots[i] = perm[i / 16] * 16 + i % 16;
        if (c->dt == DTYPE_I8) {
            kts = malloc(sizeof(float) * nslot * c->n_kv_head);
            vts = malloc(sizeof(float) * nslot * c->n_kv_head);
            for (size_t i = 0; i < nslot * row; i++) {
                uint32_t r = rnd() % 8;
                int x = r == 0 ? 127 : r == 1 ? -127 : r == 2 ? 0 : (int)(rnd() % 255) - 127;
                k[i] = (uint8_t)(int8_t)x;
                v[i] = (uint8_t)(int8_t)(-x / 2 + (int)(rnd() % 3) - 1);
            }
            for (size_t i = 0; i < nslot * c->n_kv_head; i++) {
                kts[i] = rnd() % 17 == 0 ? 0.0f : 0.001f + 0.02f * (frand() + 1.0f);
                vts[i] = rnd() % 17 == 0 ? 0.0f : 0.01f * (frand() + 1.5f);
            }
        } else {
            for (size_t i = 0; i < nslot * row; i++) k[i] = f8_code(c->dt), v[i] = f8_code(c->dt);
        }
        for (size_t i = 0; i < (size_t)c->n_q * c->n_head * c->head_dim; i++) q[i] = frand() * c->qmag;
        kern_attn_args a = {.n_q = c->n_q, .n_kv = c->n_kv, .n_head = c->n_head, .n_kv_head = c->n_kv_head,
                            .head_dim = c->head_dim, .q = q, .q_stride = (size_t)c->n_head * c->head_dim,
                            .k_cache = k, .v_cache = v, .kv_dt = c->dt, .k_scale = c->ks, .v_scale = c->vs,
                            .k_tok_scale = kts, .v_tok_scale = vts, .slots = slots,
                            .scale = 1.0f / sqrtf((float)c->head_dim), .out = oref,
                            .out_stride = (size_t)c->n_head * c->head_dim};
        run(&a, 1, 1);
        const size_t no = (size_t)c->n_q * c->n_head * c->head_dim;
        float omax = 0.0f;
        for (size_t i = 0; i < no; i++) {
            assert_false(isnan(oref[i]));
            if (fabsf(oref[i]) > omax) omax = fabsf(oref[i]);
        }
        assert_true(omax > 0.0f);
        for (int isa = 1; isa < 3; isa++) {
            if (!use_isa(isa)) continue;
            ran[isa] = 1;
            for (int nth = 1; nth <= 3; nth++) {
                a.out = o;
                memset(o, 0xff, sizeof(float) * no);
                run(&a, nth, 0);
                for (size_t i = 0; i < no; i++)
                    if (!(fabsf(o[i] - oref[i]) <= 1e-4f * omax))
                        fail_msg("[%s] case %zu (%s n_q %d n_kv %d hd %d) nth %d: out[%zu] %.8g ref %.8g (max %g)",
                                 k_isas[isa], ci, dtype_name(c->dt), c->n_q, c->n_kv, c->head_dim, nth, i,
                                 (double)o[i], (double)oref[i], (double)omax);
            }
        }
        kernels_init(NULL);
        free(k), free(v), free(kts), free(vts), free(q), free(oref), free(o), free(slots), free(perm);
    }
    printf("  random caches vs reference: avx2 %d avx512 %d\n", ran[1], ran[2]);
}

int main(void)
{
    setenv("SGLC_KV_INT8_QDOT", "0", 1); /* int8 here: the exact path; int8-q: test_kv_i8q */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_code_v),
        cmocka_unit_test(test_k_codes),
        cmocka_unit_test(test_random_vs_ref),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
