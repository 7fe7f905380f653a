/* test_quant_kernels — the int8 matmul of block-quantized weights
 * (kernels/quant_dot*.c) through kern_mat / linear, for every weight type
 * and every ISA this CPU runs.
 *
 * DESIGN: weights are random blocks (random bytes, scales set to sane
 * f16 values), so every bit pattern of the packed values occurs.  The
 * reference is computed here in double: the weight dequantized by this
 * file's own decoders (written from the format descriptions, ggml-style
 * loops, independent of the kernels' int8 decoder) times the activation
 * quantized by the kernel's activation quantizer and dequantized (d * q).
 * Tolerance: |y - ref| <= 1e-5 * sum_i |w_i a_i| + 1e-6 — the kernels sum
 * exact integer dots per (sub-)block and only the per-block scaling and
 * the sum over blocks round in f32 (k / 16 <= 512 terms, 6e-8 each).
 * A second bound ties the product to the unquantized activations: the
 * activation rounding moves each x_i by at most d_a / 2, so
 * |y - w.x| <= sum_i |w_i| d_a(i) / 2 (+ the f32 tolerance).
 * Shapes: odd m (1, 3, 5, 13: below, at and past the 4-row GEMM block;
 * 65, 67: past the 64-row activation chunk),
 * odd n, k of 1..12 blocks and Llama's 2048 / 8192, threads nth 1 and 3
 * (each share computed with its own scratch).  The ISA paths are
 * compared with each other too; on an AVX-512 CPU twice: the kernels the
 * per-type table picks, and every VNNI kernel (SGLC_QUANT_AVX512=all). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "kernels/kern_types.h"
#include "kernels/kernels.h"
#include "kernels/quant_blocks.h"
#include "kernels/quant_dot.h"
#include "model/linear.h"
#include "util/cpu.h"
#include "util/dtype.h"
#include "util/threadpool.h"

/* avx512: the kernels quant_avx512_uses picks (VNNI or AVX2 per type);
 * avx512-vnni: every VNNI kernel (SGLC_QUANT_AVX512=all), whatever the
 * table says, so each one is checked on an AVX-512 CPU */
static const char *const k_isas[] = {"scalar", "avx2", "avx512", "avx512-vnni", "avx512-vnni-x8"};
#define N_ISAS 5 /* avx512-vnni-x8: every VNNI kernel, the one-group x8 GEMM kernels (SGLC_QUANT_X16=0) */

static int use_isa(int idx)
{
    const cpu_features *c = cpu_get();
    if (idx == 1 && !(c->avx2 && c->fma && c->f16c)) return 0;
    if (idx >= 2 && !(c->avx512f && c->avx512bw && c->avx512vl && c->avx512dq && c->avx512bf16 &&
                      c->avx512vnni))
        return 0;
    if (idx >= 3) setenv("SGLC_QUANT_AVX512", "all", 1);
    else unsetenv("SGLC_QUANT_AVX512");
    if (idx == 4) setenv("SGLC_QUANT_X16", "0", 1);
    else unsetenv("SGLC_QUANT_X16");
    int rc = kernels_init(idx >= 2 ? "avx512" : k_isas[idx]);
    if (idx >= 2 && rc == 0) assert_int_equal(quant_x16_on, idx != 4);
    if (idx >= 3 && rc == 0) /* the VNNI kernels really are the ones that run */
        for (int t = KERN_TYPE_FLOAT_COUNT; t < KERN_TYPE_COUNT; t++)
            if (quant_dot_avx512((kern_type)t)) {
                assert_true(quant_avx512_uses((kern_type)t, 0, 1) && quant_avx512_uses((kern_type)t, 0, 2));
                assert_int_equal(quant_avx512_uses((kern_type)t, 1, 1),
                                 t == KERN_TYPE_Q4_0 || t == KERN_TYPE_Q4_K || t == KERN_TYPE_Q8_0 ||
                                     t == KERN_TYPE_Q6_K);
                assert_ptr_equal(quant_ops_for((kern_type)t, KERN_ISA_AVX512)->dot,
                                 quant_dot_avx512((kern_type)t));
            }
    unsetenv("SGLC_QUANT_AVX512");
    unsetenv("SGLC_QUANT_X16");
    return rc == 0;
}

static uint64_t g_rng = 0x9E3779B97F4A7C15ull;
static uint32_t rnd(void)
{
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return (uint32_t)(g_rng >> 32);
}
static float frand(void) { return (float)(rnd() & 0xFFFFFF) / (float)(1 << 23) - 1.0f; } /* [-1, 1) */

static const kern_type k_wtypes[] = {KERN_TYPE_Q4_0, KERN_TYPE_Q4_1, KERN_TYPE_Q5_0, KERN_TYPE_Q5_1,
                                     KERN_TYPE_Q8_0, KERN_TYPE_Q2_K, KERN_TYPE_Q3_K, KERN_TYPE_Q4_K,
                                     KERN_TYPE_Q5_K, KERN_TYPE_Q6_K, KERN_TYPE_IQ4_NL, KERN_TYPE_IQ4_XS};
#define N_WTYPES (int)(sizeof k_wtypes / sizeof k_wtypes[0])

/* ---- random blocks ----------------------------------------------------- */

static uint16_t h(float v) { return f32_to_f16(v); }
static float hf(uint16_t v) { return f16_to_f32(v); }

/* n_blocks random blocks of t: random bytes, then the f16 scale fields set
 * to positive d (and signed mins for the types that have them). */
static void random_blocks(kern_type t, void *dst, size_t n_blocks)
{
    const kern_type_traits *tr = kern_type_get(t);
    unsigned char *p = dst;
    for (size_t i = 0; i < n_blocks * tr->block_bytes; i++) p[i] = (unsigned char)rnd();
    for (size_t b = 0; b < n_blocks; b++) {
        void *blk = p + b * tr->block_bytes;
        float d = 0.002f + 0.02f * (float)(rnd() % 1000) / 1000.0f, mn = 0.05f * frand();
        switch (t) {
        case KERN_TYPE_Q4_0: ((block_q4_0 *)blk)->d = h(d); break;
        case KERN_TYPE_Q4_1: ((block_q4_1 *)blk)->d = h(d), ((block_q4_1 *)blk)->m = h(mn); break;
        case KERN_TYPE_Q5_0: ((block_q5_0 *)blk)->d = h(d); break;
        case KERN_TYPE_Q5_1: ((block_q5_1 *)blk)->d = h(d), ((block_q5_1 *)blk)->m = h(mn); break;
        case KERN_TYPE_Q8_0: ((block_q8_0 *)blk)->d = h(d); break;
        case KERN_TYPE_Q2_K: ((block_q2_K *)blk)->d = h(d), ((block_q2_K *)blk)->dmin = h(fabsf(mn)); break;
        case KERN_TYPE_Q3_K: ((block_q3_K *)blk)->d = h(d); break;
        case KERN_TYPE_Q4_K: ((block_q4_K *)blk)->d = h(d), ((block_q4_K *)blk)->dmin = h(fabsf(mn)); break;
        case KERN_TYPE_Q5_K: ((block_q5_K *)blk)->d = h(d), ((block_q5_K *)blk)->dmin = h(fabsf(mn)); break;
        case KERN_TYPE_Q6_K: ((block_q6_K *)blk)->d = h(d * 0.1f); break;
        case KERN_TYPE_IQ4_NL: ((block_iq4_nl *)blk)->d = h(d * 0.1f); break;
        case KERN_TYPE_IQ4_XS: ((block_iq4_xs *)blk)->d = h(d * 0.1f); break;
        default: fail();
        }
    }
}

/* ---- the test's own dequantizers (from the format descriptions) ------- */

static const int k_iq4nl[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

static void deq_block(kern_type t, const void *blk, double *y)
{
    switch (t) {
    case KERN_TYPE_Q4_0: {
        const block_q4_0 *b = blk;
        for (int j = 0; j < 16; j++) {
            y[j] = hf(b->d) * ((b->qs[j] & 15) - 8);
            y[j + 16] = hf(b->d) * ((b->qs[j] >> 4) - 8);
        }
        break;
    }
    case KERN_TYPE_Q4_1: {
        const block_q4_1 *b = blk;
        for (int j = 0; j < 16; j++) {
            y[j] = (double)hf(b->d) * (b->qs[j] & 15) + hf(b->m);
            y[j + 16] = (double)hf(b->d) * (b->qs[j] >> 4) + hf(b->m);
        }
        break;
    }
    case KERN_TYPE_Q5_0:
    case KERN_TYPE_Q5_1: {
        const uint8_t *qh8 = t == KERN_TYPE_Q5_0 ? ((const block_q5_0 *)blk)->qh : ((const block_q5_1 *)blk)->qh;
        const uint8_t *qs = t == KERN_TYPE_Q5_0 ? ((const block_q5_0 *)blk)->qs : ((const block_q5_1 *)blk)->qs;
        double d = t == KERN_TYPE_Q5_0 ? hf(((const block_q5_0 *)blk)->d) : hf(((const block_q5_1 *)blk)->d);
        double m = t == KERN_TYPE_Q5_0 ? 0.0 : hf(((const block_q5_1 *)blk)->m);
        uint32_t qh;
        memcpy(&qh, qh8, 4);
        for (int j = 0; j < 16; j++) {
            int x0 = (qs[j] & 15) | (int)(((qh >> j) << 4) & 0x10);
            int x1 = (qs[j] >> 4) | (int)((qh >> (j + 12)) & 0x10);
            if (t == KERN_TYPE_Q5_0) x0 -= 16, x1 -= 16;
            y[j] = d * x0 + m;
            y[j + 16] = d * x1 + m;
        }
        break;
    }
    case KERN_TYPE_Q8_0: {
        const block_q8_0 *b = blk;
        for (int j = 0; j < 32; j++) y[j] = (double)hf(b->d) * b->qs[j];
        break;
    }
    case KERN_TYPE_Q2_K: {
        const block_q2_K *b = blk;
        double d = hf(b->d), mn = hf(b->dmin);
        const uint8_t *q = b->qs;
        int is = 0;
        for (int n = 0; n < QK_K; n += 128) {
            for (int shift = 0; shift < 8; shift += 2) {
                for (int half = 0; half < 2; half++) {
                    int sc = b->scales[is++];
                    for (int l = 0; l < 16; l++)
                        *y++ = d * (sc & 15) * ((q[l + 16 * half] >> shift) & 3) - mn * (sc >> 4);
                }
            }
            q += 32;
        }
        break;
    }
    case KERN_TYPE_Q3_K: {
        const block_q3_K *b = blk;
        uint32_t aux[4];
        memcpy(aux, b->scales, 12);
        uint32_t tmp = aux[2];
        aux[2] = ((aux[0] >> 4) & 0x0f0f0f0f) | (((tmp >> 4) & 0x03030303) << 4);
        aux[3] = ((aux[1] >> 4) & 0x0f0f0f0f) | (((tmp >> 6) & 0x03030303) << 4);
        aux[0] = (aux[0] & 0x0f0f0f0f) | (((tmp >> 0) & 0x03030303) << 4);
        aux[1] = (aux[1] & 0x0f0f0f0f) | (((tmp >> 2) & 0x03030303) << 4);
        const int8_t *scales = (const int8_t *)aux;
        double d = hf(b->d);
        const uint8_t *q = b->qs;
        uint8_t mbit = 1;
        int is = 0;
        for (int n = 0; n < QK_K; n += 128) {
            for (int shift = 0; shift < 8; shift += 2) {
                for (int half = 0; half < 2; half++) {
                    double dl = d * (scales[is++] - 32);
                    for (int l = 16 * half; l < 16 * half + 16; l++)
                        *y++ = dl * (((q[l] >> shift) & 3) - ((b->hmask[l] & mbit) ? 0 : 4));
                }
                mbit <<= 1;
            }
            q += 32;
        }
        break;
    }
    case KERN_TYPE_Q4_K:
    case KERN_TYPE_Q5_K: {
        const uint8_t *sc = t == KERN_TYPE_Q4_K ? ((const block_q4_K *)blk)->scales : ((const block_q5_K *)blk)->scales;
        const uint8_t *ql = t == KERN_TYPE_Q4_K ? ((const block_q4_K *)blk)->qs : ((const block_q5_K *)blk)->qs;
        const uint8_t *qh = t == KERN_TYPE_Q5_K ? ((const block_q5_K *)blk)->qh : NULL;
        uint16_t dh = t == KERN_TYPE_Q4_K ? ((const block_q4_K *)blk)->d : ((const block_q5_K *)blk)->d;
        uint16_t mh = t == KERN_TYPE_Q4_K ? ((const block_q4_K *)blk)->dmin : ((const block_q5_K *)blk)->dmin;
        double d = hf(dh), mn = hf(mh);
        uint8_t u1 = 1, u2 = 2;
        for (int j = 0, is = 0; j < QK_K; j += 64, is += 2) {
            int s[2], m[2];
            for (int i = 0; i < 2; i++) {
                int jj = is + i;
                if (jj < 4) s[i] = sc[jj] & 63, m[i] = sc[jj + 4] & 63;
                else s[i] = (sc[jj + 4] & 0xF) | ((sc[jj - 4] >> 6) << 4), m[i] = (sc[jj + 4] >> 4) | ((sc[jj] >> 6) << 4);
            }
            for (int l = 0; l < 32; l++) *y++ = d * s[0] * ((ql[l] & 0xF) + (qh && (qh[l] & u1) ? 16 : 0)) - mn * m[0];
            for (int l = 0; l < 32; l++) *y++ = d * s[1] * ((ql[l] >> 4) + (qh && (qh[l] & u2) ? 16 : 0)) - mn * m[1];
            ql += 32;
            u1 <<= 2, u2 <<= 2;
        }
        break;
    }
    case KERN_TYPE_Q6_K: {
        const block_q6_K *b = blk;
        double d = hf(b->d);
        const uint8_t *ql = b->ql, *qh = b->qh;
        const int8_t *sc = b->scales;
        for (int n = 0; n < QK_K; n += 128) {
            for (int l = 0; l < 32; l++) {
                int is = l / 16;
                y[l] = d * sc[is] * (((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32);
                y[l + 32] = d * sc[is + 2] * (((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32);
                y[l + 64] = d * sc[is + 4] * (((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32);
                y[l + 96] = d * sc[is + 6] * (((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32);
            }
            y += 128, ql += 64, qh += 32, sc += 8;
        }
        break;
    }
    case KERN_TYPE_IQ4_NL: {
        const block_iq4_nl *b = blk;
        for (int j = 0; j < 16; j++) {
            y[j] = (double)hf(b->d) * k_iq4nl[b->qs[j] & 15];
            y[j + 16] = (double)hf(b->d) * k_iq4nl[b->qs[j] >> 4];
        }
        break;
    }
    case KERN_TYPE_IQ4_XS: {
        const block_iq4_xs *b = blk;
        const uint8_t *qs = b->qs;
        for (int ib = 0; ib < 8; ib++) {
            int ls = ((b->scales_l[ib / 2] >> 4 * (ib % 2)) & 0xf) | (((b->scales_h >> 2 * ib) & 3) << 4);
            double dl = (double)hf(b->d) * (ls - 32);
            for (int j = 0; j < 16; j++) {
                y[j] = dl * k_iq4nl[qs[j] & 0xf];
                y[j + 16] = dl * k_iq4nl[qs[j] >> 4];
            }
            y += 32, qs += 16;
        }
        break;
    }
    default: fail();
    }
}

static void deq_row(kern_type t, const void *row, double *y, int k)
{
    const kern_type_traits *tr = kern_type_get(t);
    for (int b = 0; b < k / tr->block_size; b++)
        deq_block(t, (const char *)row + (size_t)b * tr->block_bytes, y + (size_t)b * tr->block_size);
}

/* activation row of type at -> (value, scale) per element */
static void deq_act(kern_type at, const void *a, double *y, double *d, int k)
{
    for (int i = 0; i < k; i++) {
        if (at == KERN_TYPE_Q8_K) {
            const block_q8_K *b = (const block_q8_K *)a + i / QK_K;
            d[i] = b->d, y[i] = (double)b->d * b->qs[i % QK_K];
        } else if (at == KERN_TYPE_Q8_1) {
            const block_q8_1 *b = (const block_q8_1 *)a + i / 32;
            d[i] = hf(b->d), y[i] = (double)hf(b->d) * b->qs[i % 32];
        } else {
            const block_q8_0 *b = (const block_q8_0 *)a + i / 32;
            d[i] = hf(b->d), y[i] = (double)hf(b->d) * b->qs[i % 32];
        }
    }
}

/* ---- tests ------------------------------------------------------------- */

/* The kernels' decoder (and qtypes' row_to_f32 when present) against this
 * file's dequantizers: the same values, bit for bit in f32. */
static void test_decode(void **state)
{
    (void)state;
    kernels_init("scalar");
    for (int ti = 0; ti < N_WTYPES; ti++) {
        kern_type t = k_wtypes[ti];
        const kern_type_traits *tr = kern_type_get(t);
        int k = tr->block_size * 3;
        void *row = malloc(kern_type_row_bytes(t, k));
        double *ref = malloc(sizeof(double) * k);
        float *got = malloc(sizeof(float) * k);
        for (int rep = 0; rep < 20; rep++) {
            random_blocks(t, row, 3);
            deq_row(t, row, ref, k);
            quant_dequant_row(t, got, row, k);
            for (int i = 0; i < k; i++)
                if (fabs(got[i] - ref[i]) > 1e-6 * fabs(ref[i]) + 1e-9)
                    fail_msg("%s [%d]: decoder %.9g, reference %.9g", tr->name, i, (double)got[i], ref[i]);
            if (tr->row_to_f32) {
                tr->row_to_f32(got, row, k);
                for (int i = 0; i < k; i++)
                    if (fabs(got[i] - ref[i]) > 1e-6 * fabs(ref[i]) + 1e-9)
                        fail_msg("%s [%d]: row_to_f32 %.9g, reference %.9g", tr->name, i, (double)got[i], ref[i]);
            }
        }
        assert_true(tr->matmul_ok);
        free(row), free(ref), free(got);
    }
}

/* Activation quantizers: |q| <= 127, round-to-nearest (|x - d q| <= d / 2),
 * the scale is max|x| / 127, Q8_K's bsums and Q8_1's s match the values. */
static void test_act_quant(void **state)
{
    (void)state;
    const int k = 512;
    float x[512];
    double y[512], d[512];
    for (int rep = 0; rep < 30; rep++) {
        float scale = rep == 0 ? 0.0f : powf(10.0f, (float)(rep % 7) - 3.0f);
        for (int i = 0; i < k; i++) x[i] = frand() * scale;
        if (rep == 1) x[7] = 1e4f; /* one outlier */
        block_q8_0 a0[16];
        block_q8_1 a1[16];
        block_q8_K ak[2];
        quant_act_q8_0(a0, x, k);
        quant_act_q8_1(a1, x, k);
        quant_act_q8_K(ak, x, k);
        const kern_type ats[3] = {KERN_TYPE_Q8_0, KERN_TYPE_Q8_1, KERN_TYPE_Q8_K};
        const void *as[3] = {a0, a1, ak};
        for (int ai = 0; ai < 3; ai++) {
            deq_act(ats[ai], as[ai], y, d, k);
            for (int i = 0; i < k; i++) {
                /* d is stored rounded (f16 for Q8_0/1): allow its relative
                 * error, and below f16's normal range (6.1e-5) its absolute
                 * one (2^-25) times |q| <= 127 */
                double tol = d[i] * 0.5 + fabs(x[i]) * (ai < 2 ? 1e-3 : 1e-6) + (ai < 2 ? 127 * 3e-8 : 1e-30);
                if (fabs(y[i] - x[i]) > tol)
                    fail_msg("act %d [%d]: x %.9g -> %.9g (d %.3g)", ai, i, (double)x[i], y[i], d[i]);
            }
        }
        for (int b = 0; b < 16; b++) {
            int s = 0;
            for (int j = 0; j < 32; j++) {
                assert_true(a0[b].qs[j] >= -127 && a1[b].qs[j] >= -127);
                s += a1[b].qs[j];
            }
            assert_true(fabsf(hf(a1[b].s) - hf(a1[b].d) * (float)s) <= 1e-3f * fabsf(hf(a1[b].d) * (float)s) +
                                                                    (float)(abs(s) + 1) * 6e-8f);
        }
        for (int b = 0; b < 2; b++)
            for (int g = 0; g < 16; g++) {
                int s = 0;
                for (int j = 0; j < 16; j++) s += ak[b].qs[g * 16 + j];
                assert_int_equal(ak[b].bsums[g], s);
            }
    }
}

typedef struct { int m, n, k, nth; } shape;

/* y of one quantized matmul through linear(), its nth shares computed
 * one after another, each with its own scratch. */
static void run_linear(float *y, const float *x, const linear_weight *w, int m, int nth)
{
    size_t ss = kern_matmul_scratch(m, w->mat.k);
    assert_true(ss >= quant_matmul_scratch(m, w->mat.k));
    for (int ith = 0; ith < nth; ith++) {
        void *scr = malloc(ss);
        linear_exec ex = {.ith = ith, .nth = nth, .scratch = scr};
        linear(y, x, m, w, &ex);
        free(scr);
    }
}

/* Check y (m, n) of weight rows wq (n, k) of t with activations x. */
static void check_product(kern_type t, const void *wq, const float *x, const float *bias, const float *y,
                          int m, int n, int k, const char *isa)
{
    const quant_ops *op = quant_ops_scalar(t);
    size_t arb = kern_type_row_bytes(op->act_type, k), wrb = kern_type_row_bytes(t, k);
    void *a = malloc(arb);
    double *wd = malloc(sizeof(double) * k), *ad = malloc(sizeof(double) * k), *dd = malloc(sizeof(double) * k);
    for (int r = 0; r < m; r++) {
        op->act(a, x + (size_t)r * k, k);
        deq_act(op->act_type, a, ad, dd, k);
        for (int j = 0; j < n; j++) {
            deq_row(t, (const char *)wq + (size_t)j * wrb, wd, k);
            double ref = 0, mag = 0, exact = 0, abound = 0;
            for (int i = 0; i < k; i++) {
                ref += wd[i] * ad[i];
                mag += fabs(wd[i] * ad[i]);
                exact += wd[i] * x[(size_t)r * k + i];
                abound += fabs(wd[i]) * (dd[i] * 0.5 + fabs(x[(size_t)r * k + i]) * 1e-3 + 127 * 3e-8);
            }
            double b = bias ? bias[j] : 0.0;
            double got = y[(size_t)r * n + j], tol = 1e-5 * mag + 1e-6;
            if (fabs(got - (ref + b)) > tol)
                fail_msg("%s %s m=%d n=%d k=%d y[%d][%d] = %.9g, reference %.9g (tol %.3g)",
                         kern_type_get(t)->name, isa, m, n, k, r, j, got, ref + b, tol);
            if (fabs(got - (exact + b)) > abound + tol)
                fail_msg("%s %s: y[%d][%d] = %.9g, unquantized %.9g beyond the activation bound %.3g",
                         kern_type_get(t)->name, isa, r, j, got, exact + b, abound);
        }
    }
    free(a), free(wd), free(ad), free(dd);
}

static void test_matmul_all(void **state)
{
    (void)state;
    const shape shapes32[] = {{1, 1, 32, 1}, {1, 7, 96, 3}, {3, 5, 288, 1}, {4, 9, 64, 2},
                              {5, 33, 160, 3}, {13, 11, 384, 2}, {2, 3, 2048, 1},
                              {67, 5, 64, 2}, /* m past one 64-row activation chunk */
                              /* n % 8 == 0: Q4_0's repacked 8-row layout when owned */
                              {1, 16, 64, 1}, {5, 24, 96, 3}, {3, 40, 2048, 2}, {67, 8, 64, 2}, {2, 72, 32, 4},
                              /* the AVX-512 x8 kernels take 8 rows a call: tails of 4, 6, 7 */
                              {12, 16, 96, 2}, {14, 8, 64, 1}, {15, 24, 64, 3},
                              /* the two-group zmm GEMM kernels (R >= 4, pairs of groups): R tails
                               * of 4..7, an odd group left to the one-group kernel, a 64-row chunk */
                              {12, 32, 96, 1}, {13, 40, 64, 2}, {71, 48, 64, 1}, {7, 16, 32, 1}};
    const shape shapes256[] = {{1, 1, 256, 1}, {1, 7, 512, 3}, {3, 5, 768, 1},
                               {5, 33, 256, 3}, {13, 11, 512, 2}, {2, 3, 2048, 2},
                               {65, 3, 256, 3}, {4, 16, 256, 2}, {5, 24, 512, 3},
                               {1, 8, 2048, 1}, {66, 40, 256, 2},
                               {15, 16, 256, 2}, {14, 8, 512, 1}, /* 8-row tails of 7, 6 */
                               /* two-group zmm kernels: R tails, an odd group, past a chunk */
                               {12, 32, 256, 1}, {13, 40, 512, 2}, {69, 16, 256, 1}, {6, 48, 256, 1}};
    for (int ti = 0; ti < N_WTYPES; ti++) {
        kern_type t = k_wtypes[ti];
        const kern_type_traits *tr = kern_type_get(t);
        const shape *sh = tr->block_size == 32 ? shapes32 : shapes256;
        int ns = tr->block_size == 32 ? (int)(sizeof shapes32 / sizeof shapes32[0])
                                      : (int)(sizeof shapes256 / sizeof shapes256[0]);
        for (int si = 0; si < ns; si++) {
            const shape s = sh[si];
            size_t wb = kern_type_mat_bytes(t, s.n, s.k);
            void *wq = malloc(wb);
            random_blocks(t, wq, wb / tr->block_bytes);
            float *x = malloc(sizeof(float) * s.m * s.k), *bias = malloc(sizeof(float) * s.n);
            for (int i = 0; i < s.m * s.k; i++) x[i] = frand() * (i % 5 == 0 ? 4.0f : 1.0f);
            for (int j = 0; j < s.n; j++) bias[j] = frand();
            float *y0 = NULL;
            for (int isa = 0; isa < N_ISAS; isa++) {
                if (!use_isa(isa)) continue;
                linear_weight w;
                assert_int_equal(linear_init_kt(&w, wq, t, s.n, s.k, t, 1), 0);
                assert_ptr_equal(w.mat.data, wq); /* borrowed in place */
                assert_int_equal(linear_type(&w), t);
                assert_int_equal(linear_bytes(&w), wb);
                w.bias = si % 2 ? bias : NULL;
                float *y = malloc(sizeof(float) * s.m * s.n);
                for (int i = 0; i < s.m * s.n; i++) y[i] = NAN;
                run_linear(y, x, &w, s.m, s.nth);
                check_product(t, wq, x, w.bias, y, s.m, s.n, s.k, k_isas[isa]);
                /* kern_matmul on the same kern_mat: same bits as linear() */
                float *y2 = malloc(sizeof(float) * s.m * s.n);
                void *scr = malloc(kern_matmul_scratch(s.m, s.k));
                for (int ith = 0; ith < s.nth; ith++) kern_matmul(y2, x, s.m, &w.mat, w.bias, ith, s.nth, scr);
                assert_memory_equal(y, y2, sizeof(float) * s.m * s.n);
                free(scr), free(y2);
                /* an owned copy (borrow_ok 0): Q4_0 repacks 8 rows at a time on SIMD ISAs */
                linear_weight wc;
                assert_int_equal(linear_init_kt(&wc, wq, t, s.n, s.k, t, 0), 0);
                assert_non_null(wc.mat.owned);
                int repacked = (t == KERN_TYPE_Q4_0 || t == KERN_TYPE_Q4_K || t == KERN_TYPE_Q8_0 ||
                                t == KERN_TYPE_Q6_K || t == KERN_TYPE_Q5_K) &&
                               s.n % 8 == 0 && isa > 0;
                assert_int_equal(wc.mat.layout, !repacked                ? 0
                                                : t == KERN_TYPE_Q4_0 ? QUANT_LAYOUT_Q4_0X8
                                                : t == KERN_TYPE_Q8_0 ? QUANT_LAYOUT_Q8_0X8
                                                : t == KERN_TYPE_Q6_K ? QUANT_LAYOUT_Q6_KX8
                                                : t == KERN_TYPE_Q5_K ? QUANT_LAYOUT_Q5_KX8
                                                                      : QUANT_LAYOUT_Q4_KX8);
                assert_int_equal(kern_quant_repacks(t, s.n), repacked);
                if (t == KERN_TYPE_Q6_K && repacked) assert_int_equal(linear_bytes(&wc), wb); /* same size */
                if (!repacked) assert_memory_equal(wc.mat.data, wq, wb);
                wc.bias = w.bias;
                float *y3 = malloc(sizeof(float) * s.m * s.n);
                for (int i = 0; i < s.m * s.n; i++) y3[i] = NAN;
                run_linear(y3, x, &wc, s.m, s.nth);
                check_product(t, wq, x, wc.bias, y3, s.m, s.n, s.k, repacked ? "repacked" : k_isas[isa]);
                /* the scalar reference reads the same (possibly repacked) weight */
                void *scr3 = malloc(kern_matmul_scratch(s.m, s.k));
                for (int i = 0; i < s.m * s.n; i++) y3[i] = NAN;
                for (int ith = 0; ith < s.nth; ith++) kern_ref_matmul(y3, x, s.m, &wc.mat, wc.bias, ith, s.nth, scr3);
                check_product(t, wq, x, wc.bias, y3, s.m, s.n, s.k, "scalar on the owned copy");
                free(scr3), free(y3);
                linear_free(&wc);
                if (!y0) {
                    y0 = y;
                } else { /* this ISA against the scalar path */
                    for (int i = 0; i < s.m * s.n; i++)
                        if (fabsf(y[i] - y0[i]) > 1e-4f * (fabsf(y0[i]) + 1.0f))
                            fail_msg("%s %s vs scalar [%d]: %.9g vs %.9g", tr->name, k_isas[isa], i,
                                     (double)y[i], (double)y0[i]);
                    free(y);
                }
                linear_free(&w);
            }
            free(y0), free(wq), free(x), free(bias);
        }
    }
}

/* Quantize-at-load: f32 and bf16 sources stored as Q8_0 hold every value
 * within half a step; a quantized source is copied (borrow_ok 0) or
 * dequantized into f32; bad shapes are refused. */
static void test_load_paths(void **state)
{
    (void)state;
    kernels_init(NULL);
    const int n = 5, k = 96;
    float src[5 * 96];
    uint16_t srcb[5 * 96];
    for (int i = 0; i < n * k; i++) src[i] = frand() * 3.0f, srcb[i] = f32_to_bf16(src[i]);
    kern_mat m;
    assert_int_equal(kern_mat_init_kt(&m, src, KERN_TYPE_F32, n, k, KERN_TYPE_Q8_0, 1), 0);
    assert_non_null(m.owned);
    assert_int_equal(m.qtype, KERN_TYPE_Q8_0);
    assert_int_equal(m.bytes, kern_type_mat_bytes(KERN_TYPE_Q8_0, n, k));
    double v[96];
    for (int j = 0; j < n; j++) {
        deq_row(KERN_TYPE_Q8_0, (const char *)m.data + j * kern_type_row_bytes(KERN_TYPE_Q8_0, k), v, k);
        for (int i = 0; i < k; i++) {
            const block_q8_0 *b = (const block_q8_0 *)m.data + (j * k + i) / 32;
            assert_true(fabs(v[i] - src[j * k + i]) <= hf(b->d) * 0.5 + 1e-3 * fabs(src[j * k + i]));
        }
    }
    /* bf16 source: the same bytes as quantizing its f32 values */
    kern_mat mb;
    float srcr[5 * 96];
    for (int i = 0; i < n * k; i++) srcr[i] = bf16_to_f32(srcb[i]);
    kern_mat mr;
    assert_int_equal(kern_mat_init_kt(&mb, srcb, KERN_TYPE_BF16, n, k, KERN_TYPE_Q8_0, 1), 0);
    assert_int_equal(kern_mat_init_kt(&mr, srcr, KERN_TYPE_F32, n, k, KERN_TYPE_Q8_0, 1), 0);
    assert_memory_equal(mb.data, mr.data, mb.bytes);
    /* copy instead of borrow */
    kern_mat mc;
    assert_int_equal(kern_mat_init_kt(&mc, m.data, KERN_TYPE_Q8_0, n, k, KERN_TYPE_Q8_0, 0), 0);
    assert_true(mc.data != m.data);
    assert_memory_equal(mc.data, m.data, m.bytes);
    /* dequantize to f32: matmul equals the f32 product of the dequantized rows */
    kern_mat mf;
    assert_int_equal(kern_mat_init_kt(&mf, m.data, KERN_TYPE_Q8_0, n, k, KERN_TYPE_F32, 1), 0);
    assert_int_equal(mf.qtype, 0);
    float y[5], x[96];
    for (int i = 0; i < k; i++) x[i] = frand();
    void *scr = malloc(kern_matmul_scratch(1, k));
    kern_matmul(y, x, 1, &mf, NULL, 0, 1, scr);
    for (int j = 0; j < n; j++) {
        deq_row(KERN_TYPE_Q8_0, (const char *)m.data + j * kern_type_row_bytes(KERN_TYPE_Q8_0, k), v, k);
        double r = 0, mag = 0;
        for (int i = 0; i < k; i++) r += v[i] * x[i], mag += fabs(v[i] * x[i]);
        assert_true(fabs(y[j] - r) <= 1e-5 * mag + 1e-6);
        /* the traits' dot slot: the dequantized row against f32 x */
        float dt = kern_type_dot(KERN_TYPE_Q8_0, (const char *)m.data + j * kern_type_row_bytes(KERN_TYPE_Q8_0, k), x, k);
        assert_true(fabs(dt - r) <= 1e-5 * mag + 1e-6);
    }
    free(scr);
    /* refused: k not whole blocks; an activation-only type as a weight */
    kern_mat bad;
    assert_int_equal(kern_mat_init_kt(&bad, src, KERN_TYPE_F32, n, 40, KERN_TYPE_Q8_0, 1), -1);
    assert_int_equal(kern_mat_init_kt(&bad, src, KERN_TYPE_F32, 1, 256, KERN_TYPE_Q8_K, 1), -1);
    assert_int_equal(kern_mat_init_kt(&bad, src, KERN_TYPE_F32, 0, 32, KERN_TYPE_Q8_0, 1), -1);
    /* the float path is kern_mat_init's */
    kern_mat ff;
    assert_int_equal(kern_mat_init_kt(&ff, src, KERN_TYPE_F32, n, k, KERN_TYPE_BF16, 1), 0);
    assert_int_equal(ff.qtype, 0);
    assert_int_equal(ff.dt, DTYPE_BF16);
    kern_mat_free(&ff);
    kern_mat_free(&m), kern_mat_free(&mb), kern_mat_free(&mr), kern_mat_free(&mc), kern_mat_free(&mf);
}

/* f32 / bf16 -> every type that has a row_from_f32 (qtypes' quantizers):
 * the stored rows are that quantizer's bytes for the source rows, and a
 * quantized source re-stored as another type goes through its f32 values. */
static void test_load_any_type(void **state)
{
    (void)state;
    kernels_init(NULL);
    const int n = 3, k = 512;
    float *src = malloc(sizeof(float) * n * k), *deq = malloc(sizeof(float) * k);
    for (int i = 0; i < n * k; i++) src[i] = frand() * 2.0f;
    int tested = 0;
    for (int ti = 0; ti < N_WTYPES; ti++) {
        kern_type t = k_wtypes[ti];
        const kern_type_traits *tr = kern_type_get(t);
        /* without qtypes' quantizers, Q8_0 is written by the activation quantizer */
        void (*from)(void *, const float *, int64_t) = tr->row_from_f32;
        if (!from && t != KERN_TYPE_Q8_0) continue;
        tested++;
        size_t rb = kern_type_row_bytes(t, k);
        unsigned char *want = malloc(rb);
        kern_mat m;
        assert_int_equal(kern_mat_init_kt(&m, src, KERN_TYPE_F32, n, k, t, 1), 0);
        assert_int_equal(m.qtype, t);
        for (int j = 0; j < n; j++) {
            if (from) from(want, src + (size_t)j * k, k);
            else quant_act_q8_0(want, src + (size_t)j * k, k);
            assert_memory_equal((const char *)m.data + j * rb, want, rb);
        }
        /* Q8_0 source -> t: the Q8_0 values, quantized by t's quantizer */
        kern_mat q8, mt;
        assert_int_equal(kern_mat_init_kt(&q8, src, KERN_TYPE_F32, n, k, KERN_TYPE_Q8_0, 1), 0);
        assert_int_equal(kern_mat_init_kt(&mt, q8.data, KERN_TYPE_Q8_0, n, k, t, 1), 0);
        for (int j = 0; j < n; j++) {
            quant_dequant_row(KERN_TYPE_Q8_0, deq, (const char *)q8.data + j * kern_type_row_bytes(KERN_TYPE_Q8_0, k), k);
            if (from) from(want, deq, k);
            else quant_act_q8_0(want, deq, k);
            assert_memory_equal((const char *)mt.data + j * rb, want, rb);
        }
        kern_mat_free(&m), kern_mat_free(&q8), kern_mat_free(&mt);
        free(want);
    }
    print_message("quantize-at-load checked for %d types with a row_from_f32\n", tested);
    free(src), free(deq);
}

/* All-zero activation rows (scale 0) give exactly the bias. */
static void test_zero_rows(void **state)
{
    (void)state;
    for (int isa = 0; isa < N_ISAS; isa++) {
        if (!use_isa(isa)) continue;
        for (int ti = 0; ti < N_WTYPES; ti++) {
            kern_type t = k_wtypes[ti];
            int k = kern_type_get(t)->block_size * 2, n = 3, mrows = 6;
            void *wq = malloc(kern_type_mat_bytes(t, n, k));
            random_blocks(t, wq, (size_t)n * k / kern_type_get(t)->block_size);
            float *x = calloc((size_t)mrows * k, sizeof(float)), y[18], bias[3] = {0.5f, -1.0f, 2.0f};
            linear_weight w;
            assert_int_equal(linear_init_kt(&w, wq, t, n, k, t, 1), 0);
            w.bias = bias;
            run_linear(y, x, &w, mrows, 1);
            for (int i = 0; i < mrows * n; i++) assert_true(y[i] == bias[i % n]);
            linear_free(&w);
            free(wq), free(x);
        }
    }
}

typedef struct {
    float *y;
    const float *x;
    int m;
    const linear_weight *w;
    char *scr;
    size_t ss;
} pool_ctx;

static void pool_task(void *vctx, int ith, int nth)
{
    pool_ctx *c = vctx;
    linear_exec ex = {.ith = ith, .nth = nth, .scratch = c->scr + (size_t)ith * c->ss};
    linear(c->y, c->x, c->m, c->w, &ex);
}

/* Real threads (the compute pool, 3 threads) give the same bits as the
 * shares computed one after another: no shared state in the driver. */
static void test_pool_threads(void **state)
{
    (void)state;
    kernels_init(NULL);
    tpool *pool = tpool_create(3);
    assert_non_null(pool);
    const kern_type ts[] = {KERN_TYPE_Q8_0, KERN_TYPE_Q4_K, KERN_TYPE_Q6_K};
    for (int ti = 0; ti < 3; ti++) {
        kern_type t = ts[ti];
        int n = 37, k = 512, m = 9;
        size_t wb = kern_type_mat_bytes(t, n, k);
        void *wq = malloc(wb);
        random_blocks(t, wq, wb / kern_type_get(t)->block_bytes);
        float *x = malloc(sizeof(float) * m * k), *y1 = malloc(sizeof(float) * m * n), *y2 = malloc(sizeof(float) * m * n);
        for (int i = 0; i < m * k; i++) x[i] = frand();
        linear_weight w;
        assert_int_equal(linear_init_kt(&w, wq, t, n, k, t, 1), 0);
        for (int mm = 1; mm <= m; mm += m - 1) {
            run_linear(y1, x, &w, mm, 3);
            pool_ctx c = {.y = y2, .x = x, .m = mm, .w = &w, .ss = kern_matmul_scratch(mm, k)};
            c.scr = malloc(c.ss * 3);
            tpool_run(pool, pool_task, &c);
            assert_memory_equal(y1, y2, sizeof(float) * mm * n);
            free(c.scr);
        }
        linear_free(&w);
        free(wq), free(x), free(y1), free(y2);
    }
    tpool_destroy(pool);
}

/* The repack of a large weight split over threads (kern_pack_threads)
 * writes the bytes of the one-thread repack, for every 8-row layout. */
static void test_repack_threads(void **state)
{
    (void)state;
    const kern_type ts[] = {KERN_TYPE_Q4_0, KERN_TYPE_Q4_K, KERN_TYPE_Q5_K, KERN_TYPE_Q6_K, KERN_TYPE_Q8_0};
    const int n = 1024, k = 8192; /* >= 4 MiB each: the threaded path */
    for (int ti = 0; ti < 5; ti++) {
        kern_type t = ts[ti];
        int layout = quant_x8_layout(t, n, KERN_ISA_AVX2);
        assert_int_not_equal(layout, 0);
        assert_int_equal(quant_x8_layout(t, n + 4, KERN_ISA_AVX2), 0);
        assert_int_equal(quant_x8_layout(t, n, KERN_ISA_SCALAR), 0);
        size_t wb = kern_type_mat_bytes(t, n, k), xb = quant_x8_bytes(layout, n, k);
        void *wq = malloc(wb), *d1 = malloc(xb), *d3 = malloc(xb);
        random_blocks(t, wq, wb / kern_type_get(t)->block_bytes);
        memset(d1, 0xAA, xb), memset(d3, 0x55, xb);
        quant_repack_x8(layout, d1, wq, n, k, 1);
        quant_repack_x8(layout, d3, wq, n, k, 3);
        assert_memory_equal(d1, d3, xb);
        if (t != KERN_TYPE_Q4_K && t != KERN_TYPE_Q5_K) assert_int_equal(xb, wb);
        free(wq), free(d1), free(d3);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_decode),      cmocka_unit_test(test_act_quant),
        cmocka_unit_test(test_matmul_all),  cmocka_unit_test(test_load_paths),
        cmocka_unit_test(test_zero_rows),   cmocka_unit_test(test_pool_threads),
        cmocka_unit_test(test_load_any_type), cmocka_unit_test(test_repack_threads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
