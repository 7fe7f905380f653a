/* test_kv_i8q — int8-q ("qdot") attention over sglc's int8 KV cache: the
 * AVX-512 VNNI kernel quantizes each query row to int8 and scores keys with
 * integer dot products (kern_ref_attention_i8q defines the numerics; on
 * unless SGLC_KV_INT8_QDOT=0).
 *
 * DESIGN
 *  1. The q quantizer (kern_attn_quant_q_i8) against an independent
 *     re-statement: absmax / 127, round half to even, clamp, zero rows.
 *  2. Integer sums exactly: key 0 of every head is all zeros (score 0) and
 *     V row j is one-hot at dim j with scale 1, so out[j] / out[0] =
 *     exp(s_j) and log(out[j] / out[0]) recovers each score.  K codes in [-7, 7],
 *     scales chosen so one unit of the integer sum moves a score by >= 2.5e-3, far
 *     above the ~1e-6 of the f32 exp / log, and each recovered score must
 *     be within 5e-4 of (float)(sum qi ki) * (qs * ks) computed here
 *     (unit errors in the sum, the +128 correction, the transpose lanes or
 *     a lost chunk all fail).  Keys over 2 blocks (all 16 lanes), head dims
 *     17 / 64 / 80 / 128 (partial and several 64-byte chunks), GQA 32/8
 *     (4 rows sharing K loads) and MHA 6/6 (one row at a time).
 *  3. Random int8 caches (shuffled pages, +-127 / 0 codes, zero scales)
 *     against kern_ref_attention_i8q at 1e-4 of max |out| (the tolerance the
 *     exact path has against kern_ref_attention), and against the exact f32
 *     kern_ref_attention within the propagated q-rounding bound: q * scale
 *     is off by at most qs / 2 = absmax / 254 per element, so score j is
 *     off by eps_j <= absmax / 254 * sum_d |k_jd| (k dequantized); scores all
 *     within +-eps move each softmax weight by a factor in [e^-2eps, e^2eps],
 *     so |d out_d| <= (e^(2 eps) - 1) * max_j |v_jd|, plus the 1e-4 * max
 *     |out| of f32 ordering.  With SGLC_KV_INT8_QDOT=0 the AVX-512 kernel
 *     must match kern_ref_attention at 1e-4 (the exact path), and with it
 *     on it must be much closer to the int8-q reference than to the exact
 *     one (the switch really switches).
 * Needs AVX-512 VNNI; skipped (and says so) elsewhere, since the other ISAs
 * keep the exact path. */
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

static uint64_t g_rng = 0x243F6A8885A308D3ull;
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

static int have_avx512(void)
{
    const cpu_features *c = cpu_get();
    return c->avx512f && c->avx512bw && c->avx512vl && c->avx512dq && c->avx512bf16 && c->avx512vnni &&
           kernels_init("avx512") == 0;
}

/* 0 kernel, 1 exact ref, 2 int8-q ref, 3 int8-q ref with integer P.V */
static void run(const kern_attn_args *a, int nth, int which)
{
    char *scratch = malloc(kern_attention_scratch(a->n_kv, a->head_dim) + 64);
    assert_non_null(scratch);
    for (int ith = 0; ith < nth; ith++) {
        if (which == 1) kern_ref_attention(a, ith, nth, scratch);
        else if (which == 2) kern_ref_attention_i8q(a, ith, nth, scratch);
        else if (which == 3) kern_ref_attention_i8qp(a, ith, nth, scratch);
        else kern_attention(a, ith, nth, scratch);
    }
    free(scratch);
}

static void test_quantizer(void **state)
{
    (void)state;
    /* half to even: with amax 127 * 0.5, qs = 0.5 and x / qs = 2.5 -> 2, 3.5 -> 4, -2.5 -> -2 */
    const float q[6] = {1.25f, 1.75f, -1.25f, 63.5f, -0.2f, 0.0f};
    int8_t qi[6];
    float qs = kern_attn_quant_q_i8(qi, q, 1.0f, 6);
    assert_true(qs == 63.5f / 127.0f);
    const int8_t want[6] = {2, 4, -2, 127, 0, 0};
    assert_memory_equal(qi, want, 6);
    float z[5] = {0};
    memset(qi, 7, sizeof qi);
    assert_true(kern_attn_quant_q_i8(qi, z, 0.125f, 5) == 0.0f);
    for (int d = 0; d < 5; d++) assert_int_equal(qi[d], 0);
    for (int t = 0; t < 200; t++) { /* independent restatement on random rows, scale folded first */
        float x[80], sc = 0.125f + 0.01f * (float)(t % 7);
        int hd = 1 + (int)(rnd() % 80);
        for (int d = 0; d < hd; d++) x[d] = frand() * 3.0f;
        int8_t got[80];
        float s = kern_attn_quant_q_i8(got, x, sc, hd), amax = 0.0f;
        for (int d = 0; d < hd; d++) amax = fmaxf(amax, fabsf(x[d] * sc));
        assert_true(s == amax / 127.0f);
        for (int d = 0; d < hd; d++) {
            float r = nearbyintf(x[d] * sc / s);
            int w = r > 127.0f ? 127 : r < -127.0f ? -127 : (int)r;
            assert_int_equal(got[d], w);
            assert_true(fabsf(x[d] * sc - s * (float)got[d]) <= s * 0.5f * 1.0001f);
        }
    }
}

static void test_integer_sums(void **state)
{
    (void)state;
    if (!have_avx512()) {
        printf("  integer sums: skipped (no AVX-512 VNNI)\n");
        return;
    }
    unsetenv("SGLC_KV_INT8_QDOT");
    setenv("SGLC_KV_INT8_PDOT", "0", 1); /* the scores (P.V's rounding would blur them) */
    const int shapes[][3] = {{32, 8, 64}, {32, 8, 128}, {6, 6, 80}, {4, 1, 17}, {8, 2, 64}};
    int checked = 0;
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        const int nh = shapes[si][0], nkh = shapes[si][1], hd = shapes[si][2];
        const int n_kv = hd < 34 ? hd : 34, row = nkh * hd;
        int8_t *k = calloc((size_t)n_kv * row, 1), *v = calloc((size_t)n_kv * row, 1);
        float *kts = malloc(sizeof(float) * n_kv * nkh), *vts = malloc(sizeof(float) * n_kv * nkh);
        float *q = malloc(sizeof(float) * nh * hd), *o = malloc(sizeof(float) * nh * hd);
        int32_t *slots = malloc(sizeof(int32_t) * n_kv);
        for (int j = 0; j < n_kv; j++) slots[j] = n_kv - 1 - j; /* reversed slots */
        for (int j = 1; j < n_kv; j++)
            for (int i = 0; i < row; i++) k[(size_t)slots[j] * row + i] = (int8_t)((int)(rnd() % 15) - 7);
        for (int j = 0; j < n_kv; j++)
            for (int kh = 0; kh < nkh; kh++) {
                v[(size_t)slots[j] * row + kh * hd + j] = 1; /* one-hot at dim j */
                vts[slots[j] * nkh + kh] = 1.0f;
            }
        /* K codes in [-7, 7] keep the sums small: a unit of the sum moves the score by
         * u = qs * ks, chosen so typical scores (sums ~ sqrt(hd) * 64 * 4.3) are ~8, which
         * makes u >= 2.5e-3 at these head dims, 5x the tolerance below */
        const float u = 8.0f / (sqrtf((float)hd) * 64.0f * 4.3f);
        for (int i = 0; i < nh * hd; i++) q[i] = frand();
        for (int t = 0; t < 3; t++) {
            const float scale = 1.0f / sqrtf((float)hd);
            int8_t qi[128];
            float qs[32];
            for (int h = 0; h < nh; h++) qs[h] = kern_attn_quant_q_i8(qi, q + h * hd, scale, hd);
            for (int j = 0; j < n_kv; j++)
                for (int kh = 0; kh < nkh; kh++) kts[slots[j] * nkh + kh] = u / qs[kh * (nh / nkh)] * (1.0f + 0.1f * (float)t);
            kern_attn_args a = {.n_q = 1, .n_kv = n_kv, .n_head = nh, .n_kv_head = nkh, .head_dim = hd, .q = q,
                                .q_stride = (size_t)nh * hd, .k_cache = k, .v_cache = v, .kv_dt = DTYPE_I8,
                                .k_tok_scale = kts, .v_tok_scale = vts, .slots = slots, .scale = scale,
                                .out = o, .out_stride = (size_t)nh * hd};
            run(&a, 1 + t % 2, 0);
            for (int h = 0; h < nh; h++) {
                const int kh = h / (nh / nkh);
                float qsh = kern_attn_quant_q_i8(qi, q + h * hd, scale, hd);
                const float *oh = o + h * hd;
                assert_true(oh[0] > 0.0f);
                for (int j = 1; j < n_kv; j++) {
                    const int8_t *kr = k + (size_t)slots[j] * row + kh * hd;
                    int32_t isum = 0;
                    for (int d = 0; d < hd; d++) isum += (int32_t)qi[d] * kr[d];
                    float want = (float)isum * (qsh * kts[slots[j] * nkh + kh]);
                    float got = logf(oh[j] / oh[0]);
                    if (!(fabsf(got - want) <= 5e-4f + 1e-5f * fabsf(want)))
                        fail_msg("shape %zu h %d key %d: score %.7g, integer sum %d gives %.7g (unit %g)", si, h, j,
                                 (double)got, isum, (double)want, (double)(qsh * kts[slots[j] * nkh + kh]));
                    checked++;
                }
            }
            for (int i = 0; i < nh * hd; i++) q[i] = frand() * (t == 0 ? 0.3f : 2.0f);
        }
        free(k), free(v), free(kts), free(vts), free(q), free(o), free(slots);
    }
    unsetenv("SGLC_KV_INT8_PDOT");
    kernels_init(NULL);
    printf("  integer sums: %d scores recovered exactly\n", checked);
}

/* Integer P.V sums exactly: q = 0 makes every score 0 and p = 1, so block b's
 * p' are V's token-head scales s_j, quantized here independently (pu_j =
 * round(255 s_j / max_b s), the s_j chosen 0.2 away from a rounding tie) with
 * ps_b = max_b / 255.  Block b's keys have V codes only in dims [16 b', 16 b'
 * + 16) (b' = b mod hd / 16), so for those dims out_d = ps_b I_bd / n_kv, I_bd
 * = sum_j pu_j v_jd, and out_d * n_kv / ps_b must be I_bd (the sums are
 * < 2^19, f32 keeps them to ~0.05).  Wrong key lanes, dim lanes, chunks, a
 * lost block or tail, the scale: all change some I. */
static void test_pv_integer_sums(void **state)
{
    (void)state;
    if (!have_avx512()) {
        printf("  P.V integer sums: skipped (no AVX-512 VNNI)\n");
        return;
    }
    unsetenv("SGLC_KV_INT8_QDOT");
    unsetenv("SGLC_KV_INT8_PDOT");
    const int shapes[][3] = {{32, 8, 64}, {8, 2, 128}, {4, 4, 64}, {16, 1, 576}, {12, 3, 192}};
    int checked = 0;
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        const int nh = shapes[si][0], nkh = shapes[si][1], hd = shapes[si][2], row = nkh * hd;
        const int nb = hd / 16 < 6 ? hd / 16 : 6, n_kv = 16 * nb - 5; /* the last block 11 keys */
        int8_t *k = calloc((size_t)n_kv * row, 1), *v = calloc((size_t)n_kv * row, 1);
        float *kts = malloc(sizeof(float) * n_kv * nkh), *vts = malloc(sizeof(float) * n_kv * nkh);
        float *q = calloc((size_t)nh * hd, sizeof(float)), *o = malloc(sizeof(float) * nh * hd);
        int32_t *slots = malloc(sizeof(int32_t) * n_kv);
        int *want = malloc(sizeof(int) * n_kv * nkh);
        for (int j = 0; j < n_kv; j++) slots[j] = (j * 11) % n_kv; /* 11 is prime to these n_kv (59, 91) */
        for (int j = 0; j < n_kv; j++)
            for (int kh = 0; kh < nkh; kh++) {
                const int b = j / 16, d0 = 16 * (b % (hd / 16));
                for (int i = 0; i < row; i++) k[(size_t)slots[j] * row + i] = (int8_t)((int)(rnd() % 255) - 127);
                for (int d = 0; d < 16; d++)
                    v[(size_t)slots[j] * row + kh * hd + d0 + d] = (int8_t)((int)(rnd() % 255) - 127);
                /* s = (m + off) / 255 * 2^-6, m in 1..254, |off| <= 0.3; key 3 of a block: m = 255 */
                int m = j % 16 == 3 ? 255 : 1 + (int)(rnd() % 254);
                float off = m == 255 ? 0.0f : 0.3f * frand();
                vts[slots[j] * nkh + kh] = ((float)m + off) / 255.0f * 0.015625f;
                want[j * nkh + kh] = m;
            }
        for (int j = 0; j < n_kv * nkh; j++) kts[j] = 0.01f;
        kern_attn_args a = {.n_q = 1, .n_kv = n_kv, .n_head = nh, .n_kv_head = nkh, .head_dim = hd, .q = q,
                            .q_stride = (size_t)nh * hd, .k_cache = k, .v_cache = v, .kv_dt = DTYPE_I8,
                            .k_tok_scale = kts, .v_tok_scale = vts, .slots = slots, .scale = 0.125f,
                            .out = o, .out_stride = (size_t)nh * hd};
        for (int which = 3; which >= 0; which -= 3) /* the reference, then the kernel */
            for (int nth = 1; nth <= 2; nth++) {
                memset(o, 0xff, sizeof(float) * nh * hd);
                run(&a, nth, which);
                for (int h = 0; h < nh; h++) {
                    const int kh = h / (nh / nkh);
                    for (int b = 0; b < nb; b++) {
                        const int j0 = 16 * b, nk = n_kv - j0 < 16 ? n_kv - j0 : 16, d0 = 16 * (b % (hd / 16));
                        const float ps = 0.015625f / 255.0f; /* max_b s / 255 */
                        for (int d = d0; d < d0 + 16; d++) {
                            int32_t isum = 0;
                            for (int j = j0; j < j0 + nk; j++)
                                isum += want[j * nkh + kh] * v[(size_t)slots[j] * row + kh * hd + d];
                            double got = (double)o[h * hd + d] * n_kv / ps;
                            if (!(fabs(got - isum) <= 0.25))
                                fail_msg("shape %zu %s nth %d h %d block %d dim %d: sum %.3f, want %d", si,
                                         which ? "ref" : "kernel", nth, h, b, d, got, isum);
                            checked++;
                        }
                    }
                }
            }
        free(k), free(v), free(kts), free(vts), free(q), free(o), free(slots), free(want);
    }
    kernels_init(NULL);
    printf("  P.V integer sums: %d sums recovered exactly (kernel and reference)\n", checked);
}

typedef struct {
    int n_q, n_kv, n_head, n_kv_head, head_dim;
    float qmag, softcap;
} rcase;

static void test_random(void **state)
{
    (void)state;
    if (!have_avx512()) {
        printf("  random caches: skipped (no AVX-512 VNNI)\n");
        return;
    }
    const rcase cases[] = {
        {1, 5000, 32, 8, 64, 1.0f, 0}, {1, 4096, 32, 8, 64, 0.2f, 0}, {40, 300, 32, 8, 64, 1.0f, 0},
        {3, 1029, 8, 1, 128, 0.5f, 0},  {2, 777, 6, 6, 17, 1.0f, 0},   {5, 2049, 12, 3, 80, 1.0f, 0},
        {1, 513, 4, 1, 17, 2.0f, 30.0f}, {1, 300, 16, 16, 576, 0.5f, 0},
    };
    double worst_frac = 0.0;
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        const rcase *c = &cases[ci];
        const int row = c->n_kv_head * c->head_dim, npages = (c->n_kv + 15) / 16, hd = c->head_dim;
        const size_t nslot = (size_t)npages * 16, no = (size_t)c->n_q * c->n_head * hd;
        int8_t *k = malloc(nslot * row), *v = malloc(nslot * row);
        float *kts = malloc(sizeof(float) * nslot * c->n_kv_head), *vts = malloc(sizeof(float) * nslot * c->n_kv_head);
        float *q = malloc(sizeof(float) * no), *oex = malloc(sizeof(float) * no), *oiq = malloc(sizeof(float) * no);
        float *o = malloc(sizeof(float) * no), *oip = malloc(sizeof(float) * no);
        int32_t *slots = malloc(sizeof(int32_t) * (size_t)c->n_kv), *perm = malloc(sizeof(int32_t) * npages);
        assert_true(k && v && kts && vts && q && oex && oiq && o && slots && perm);
        for (int p = 0; p < npages; p++) perm[p] = p;
        for (int p = npages - 1; p > 0; p--) {
            int j = (int)(rnd() % (uint32_t)(p + 1)), t = perm[p];
            perm[p] = perm[j], perm[j] = t;
        }
        for (int i = 0; i < c->n_kv; i++) slots[i] = perm[i / 16] * 16 + i % 16;
        for (size_t i = 0; i < nslot * row; i++) {
            uint32_t r = rnd() % 8;
            int x = r == 0 ? 127 : r == 1 ? -127 : r == 2 ? 0 : (int)(rnd() % 255) - 127;
            k[i] = (int8_t)x;
            v[i] = (int8_t)(-x / 2 + (int)(rnd() % 3) - 1);
        }
        for (size_t i = 0; i < nslot * c->n_kv_head; i++) {
            kts[i] = rnd() % 17 == 0 ? 0.0f : 0.005f + 0.02f * (frand() + 1.0f);
            vts[i] = rnd() % 17 == 0 ? 0.0f : 0.01f * (frand() + 1.5f);
        }
        for (size_t i = 0; i < no; i++) q[i] = frand() * c->qmag * (i % 7 == 0 ? 3.0f : 1.0f);
        kern_attn_args a = {.n_q = c->n_q, .n_kv = c->n_kv, .n_head = c->n_head, .n_kv_head = c->n_kv_head,
                            .head_dim = hd, .q = q, .q_stride = (size_t)c->n_head * hd, .k_cache = k,
                            .v_cache = v, .kv_dt = DTYPE_I8, .k_tok_scale = kts, .v_tok_scale = vts,
                            .slots = slots, .scale = 1.0f / sqrtf((float)hd), .softcap = c->softcap, .out = oex,
                            .out_stride = (size_t)c->n_head * hd};
        run(&a, 1, 1);
        a.out = oiq;
        run(&a, 1, 2);
        a.out = oip;
        run(&a, 1, 3);
        const int pd = hd % 64 == 0; /* the kernel does integer P.V (no sliding window here) */
        const float *oref = pd ? oip : oiq;
        float omax = 0.0f;
        for (size_t i = 0; i < no; i++) omax = fmaxf(omax, fabsf(oex[i]));
        assert_true(omax > 0.0f);
        /* the propagated bound per (query, head, dim) */
        float *bound = malloc(sizeof(float) * no);
        const int group = c->n_head / c->n_kv_head;
        for (int i = 0; i < c->n_q; i++)
            for (int h = 0; h < c->n_head; h++) {
                const float *qr = q + ((size_t)i * c->n_head + h) * hd;
                const int kh = h / group, pos = c->n_kv - c->n_q + i;
                float amax = 0.0f, eps = 0.0f;
                for (int d = 0; d < hd; d++) amax = fmaxf(amax, fabsf(qr[d] * a.scale));
                for (int p = 0; p <= pos; p++) {
                    const int8_t *kr = k + (size_t)slots[p] * row + kh * hd;
                    float s1 = 0.0f;
                    for (int d = 0; d < hd; d++) s1 += fabsf((float)kr[d]);
                    eps = fmaxf(eps, amax / 254.0f * s1 * kts[(size_t)slots[p] * c->n_kv_head + kh] * 1.001f);
                }
                if (c->softcap > 0.0f) { /* |d tanh| <= |d x|: the bound holds after the cap */ }
                /* integer P.V: p' of a key is off by <= ps_b / 2 = max_b p' / 510 (block b, p'
                 * = w s with the int8-q weights w' <= w e^(2 eps), w exact): per dim
                 * <= e^(2 eps) max_j (w_j s_j) / 510 * sum_j |v_jd| (codes), for any blocking */
                double wsm = 0.0;
                if (pd) {
                    double *sc = malloc(sizeof(double) * (pos + 1)), mxs = -INFINITY, sum = 0.0;
                    for (int p = 0; p <= pos; p++) {
                        const int8_t *kr = k + (size_t)slots[p] * row + kh * hd;
                        double t = 0.0;
                        for (int d = 0; d < hd; d++) t += (double)qr[d] * a.scale * kr[d];
                        sc[p] = t * kts[(size_t)slots[p] * c->n_kv_head + kh];
                        if (c->softcap > 0.0f) sc[p] = c->softcap * tanh(sc[p] / c->softcap);
                        mxs = fmax(mxs, sc[p]);
                    }
                    for (int p = 0; p <= pos; p++) sum += exp(sc[p] - mxs);
                    for (int p = 0; p <= pos; p++)
                        wsm = fmax(wsm, exp(sc[p] - mxs) / sum * vts[(size_t)slots[p] * c->n_kv_head + kh]);
                    wsm *= exp(2.0 * eps) / 510.0 * 1.001;
                    free(sc);
                }
                for (int d = 0; d < hd; d++) {
                    float vm = 0.0f, va = 0.0f;
                    for (int p = 0; p <= pos; p++) {
                        const int8_t vc = v[(size_t)slots[p] * row + kh * hd + d];
                        vm = fmaxf(vm, fabsf((float)vc * vts[(size_t)slots[p] * c->n_kv_head + kh]));
                        va += fabsf((float)vc);
                    }
                    bound[((size_t)i * c->n_head + h) * hd + d] =
                        expm1f(2.0f * eps) * vm + (float)(wsm * va) + 1e-4f * omax;
                }
            }
        /* sw 0: default (int8-q, integer P.V at head_dim 64k); 2: SGLC_KV_INT8_QDOT=0 (exact);
         * 1: SGLC_KV_INT8_PDOT=0 (int8-q scores, f32 P.V) */
        for (int sw = 0; sw < 3; sw++) {
            if (sw == 2) setenv("SGLC_KV_INT8_QDOT", "0", 1);
            else unsetenv("SGLC_KV_INT8_QDOT");
            if (sw == 1) setenv("SGLC_KV_INT8_PDOT", "0", 1);
            else unsetenv("SGLC_KV_INT8_PDOT");
            if (sw == 1 && !pd) continue;
            for (int nth = 1; nth <= 3; nth++) {
                a.out = o;
                memset(o, 0xff, sizeof(float) * no);
                run(&a, nth, 0);
                double e_iq = 0.0, e_ex = 0.0, e_q = 0.0, e_qp = 0.0;
                for (size_t i = 0; i < no; i++) {
                    e_iq = fmax(e_iq, fabsf(o[i] - oref[i]));
                    e_ex = fmax(e_ex, fabsf(o[i] - oex[i]));
                    e_q = fmax(e_q, fabsf(o[i] - oiq[i]));
                    e_qp = fmax(e_qp, fabsf(o[i] - oip[i]));
                    if (!sw && !(fabsf(o[i] - oref[i]) <= 1e-4f * omax))
                        fail_msg("case %zu nth %d: out[%zu] %.8g int8-q%s ref %.8g (max %g)", ci, nth, i, (double)o[i],
                                 pd ? " integer-P.V" : "", (double)oref[i], (double)omax);
                    if (sw == 1 && !(fabsf(o[i] - oiq[i]) <= 1e-4f * omax))
                        fail_msg("case %zu nth %d SGLC_KV_INT8_PDOT=0: out[%zu] %.8g int8-q ref %.8g", ci, nth, i,
                                 (double)o[i], (double)oiq[i]);
                    if (!sw && !(fabsf(o[i] - oex[i]) <= bound[i]))
                        fail_msg("case %zu nth %d: out[%zu] %.8g exact ref %.8g: over the q-rounding bound %g", ci,
                                 nth, i, (double)o[i], (double)oex[i], (double)bound[i]);
                    if (!sw) worst_frac = fmax(worst_frac, fabsf(o[i] - oex[i]) / bound[i]);
                    if (sw == 2 && !(fabsf(o[i] - oex[i]) <= 1e-4f * omax))
                        fail_msg("case %zu nth %d SGLC_KV_INT8_QDOT=0: out[%zu] %.8g exact ref %.8g", ci, nth, i,
                                 (double)o[i], (double)oex[i]);
                }
                if (!sw && nth == 1) {
                    printf("  case %zu: int8-q%s vs its ref %.2e, vs exact ref %.2e (max |out| %.3g)\n", ci,
                           pd ? " integer-P.V" : "", e_iq, e_ex, (double)omax);
                    if (!(e_iq * 4.0 < e_ex)) fail_msg("case %zu: int8-q output not distinguishable from exact", ci);
                    if (pd && !(e_qp * 4.0 < e_q)) fail_msg("case %zu: integer P.V not distinguishable from f32 P.V", ci);
                }
                if (sw == 1 && !(e_q * 4.0 < e_qp)) fail_msg("case %zu: SGLC_KV_INT8_PDOT=0 did not switch", ci);
            }
        }
        unsetenv("SGLC_KV_INT8_QDOT");
        unsetenv("SGLC_KV_INT8_PDOT");
        free(oip);
        free(bound), free(k), free(v), free(kts), free(vts), free(q), free(oex), free(oiq), free(o), free(slots),
            free(perm);
    }
    kernels_init(NULL);
    printf("  random caches: largest error vs exact / bound %.3f\n", worst_frac);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_quantizer),
        cmocka_unit_test(test_integer_sums),
        cmocka_unit_test(test_pv_integer_sums),
        cmocka_unit_test(test_random),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
