/* bench_kv_i8dot — the score phase (q . k for every key) of decode attention
 * over sglc's int8 KV cache, two ways, AVX2, one thread.
 *
 * DESIGN: the question the int8 cache raises is whether to convert K to f32
 * (what kern_attention does: exact, q stays f32) or to quantize q per head
 * to int8 as well and use integer dot products (_mm256_maddubs_epi16 on
 * |q| and sign(k, q), then _mm256_madd_epi16 to int32: 4x the lanes of an
 * f32 FMA, but a second rounding).  Shapes of Llama-3.2-1B decode: 8 kv
 * heads x 4 query heads each, head_dim 64, 4,096 keys in pages of 16
 * consecutive slots.  A: per key and kv head, convert the row to f32 once,
 * then 4 FMA dots; B: 4 integer dots on the raw bytes.  Both finish 8 keys
 * at a time with the same horizontal sums and multiply by the scales.
 * Reported: median and best ns per (key, query head) over repeats (on a
 * loaded machine the best is the less disturbed figure), and B's error
 * against A (max |ds| / max |s|).  Only this phase is measured; softmax and
 * P.V are the same either way.
 *
 * Usage: build/bench/bench_kv_i8dot [--reps R] */
#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_common.h"
#include "kernels/kernels.h"
#include "util/cpu.h"
#include "util/timeutil.h"

enum { NKV = 4096, NKH = 8, G = 4, HD = 64 };

#define AVX2 __attribute__((target("avx2,fma")))

AVX2 static __m256 hsum8(const __m256 v[8])
{
    __m256 t01 = _mm256_hadd_ps(v[0], v[1]), t23 = _mm256_hadd_ps(v[2], v[3]);
    __m256 t45 = _mm256_hadd_ps(v[4], v[5]), t67 = _mm256_hadd_ps(v[6], v[7]);
    __m256 a = _mm256_hadd_ps(t01, t23), b = _mm256_hadd_ps(t45, t67);
    return _mm256_add_ps(_mm256_permute2f128_ps(a, b, 0x20), _mm256_permute2f128_ps(a, b, 0x31));
}

/* A: K row -> f32 (once per kv head), f32 FMA dots with the G query heads */
AVX2 static void scores_f32(float *s, const float *q, const int8_t *k, const float *ks, const int32_t *slots)
{
    float kb[8][HD] __attribute__((aligned(32)));
    for (int kh = 0; kh < NKH; kh++)
        for (int p0 = 0; p0 < NKV; p0 += 8) {
            for (int j = 0; j < 8; j++) {
                const int8_t *src = k + ((size_t)slots[p0 + j] * NKH + kh) * HD;
                for (int d = 0; d < HD; d += 8)
                    _mm256_store_ps(kb[j] + d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(src + d)))));
            }
            __m256 sc = _mm256_setr_ps(ks[slots[p0] * NKH + kh], ks[slots[p0 + 1] * NKH + kh], ks[slots[p0 + 2] * NKH + kh],
                                       ks[slots[p0 + 3] * NKH + kh], ks[slots[p0 + 4] * NKH + kh], ks[slots[p0 + 5] * NKH + kh],
                                       ks[slots[p0 + 6] * NKH + kh], ks[slots[p0 + 7] * NKH + kh]);
            for (int g = 0; g < G; g++) {
                const float *qr = q + (size_t)(kh * G + g) * HD;
                __m256 part[8];
                for (int j = 0; j < 8; j++) {
                    __m256 a = _mm256_mul_ps(_mm256_loadu_ps(qr), _mm256_load_ps(kb[j]));
                    for (int d = 8; d < HD; d += 8) a = _mm256_fmadd_ps(_mm256_loadu_ps(qr + d), _mm256_load_ps(kb[j] + d), a);
                    part[j] = a;
                }
                _mm256_storeu_ps(s + (size_t)(kh * G + g) * NKV + p0, _mm256_mul_ps(hsum8(part), sc));
            }
        }
}

/* B: q quantized per head (|q| and its signs precomputed), integer dots on the raw K bytes */
AVX2 static void scores_i8(float *s, const int8_t *qi, const float *qs, const int8_t *k, const float *ks,
                           const int32_t *slots)
{
    const __m256i ones = _mm256_set1_epi16(1);
    for (int kh = 0; kh < NKH; kh++) {
        __m256i qa[G][2], qq[G][2];
        for (int g = 0; g < G; g++)
            for (int c = 0; c < 2; c++) {
                qq[g][c] = _mm256_loadu_si256((const __m256i *)(qi + (size_t)(kh * G + g) * HD + 32 * c));
                qa[g][c] = _mm256_abs_epi8(qq[g][c]);
            }
        for (int p0 = 0; p0 < NKV; p0 += 8) {
            __m256i kr[8][2];
            for (int j = 0; j < 8; j++)
                for (int c = 0; c < 2; c++)
                    kr[j][c] = _mm256_loadu_si256((const __m256i *)(k + ((size_t)slots[p0 + j] * NKH + kh) * HD + 32 * c));
            __m256 sc = _mm256_setr_ps(ks[slots[p0] * NKH + kh], ks[slots[p0 + 1] * NKH + kh], ks[slots[p0 + 2] * NKH + kh],
                                       ks[slots[p0 + 3] * NKH + kh], ks[slots[p0 + 4] * NKH + kh], ks[slots[p0 + 5] * NKH + kh],
                                       ks[slots[p0 + 6] * NKH + kh], ks[slots[p0 + 7] * NKH + kh]);
            for (int g = 0; g < G; g++) {
                __m256 part[8];
                for (int j = 0; j < 8; j++) {
                    __m256i a = _mm256_madd_epi16(_mm256_maddubs_epi16(qa[g][0], _mm256_sign_epi8(kr[j][0], qq[g][0])), ones);
                    __m256i b = _mm256_madd_epi16(_mm256_maddubs_epi16(qa[g][1], _mm256_sign_epi8(kr[j][1], qq[g][1])), ones);
                    part[j] = _mm256_cvtepi32_ps(_mm256_add_epi32(a, b));
                }
                __m256 v = _mm256_mul_ps(hsum8(part), _mm256_mul_ps(sc, _mm256_set1_ps(qs[kh * G + g])));
                _mm256_storeu_ps(s + (size_t)(kh * G + g) * NKV + p0, v);
            }
        }
    }
}

static uint64_t g_rng = 0x2545F4914F6CDD1Dull;
static float frand(void)
{
    g_rng ^= g_rng << 13, g_rng ^= g_rng >> 7, g_rng ^= g_rng << 17;
    return (float)((g_rng >> 40) & 0xFFFFFF) / (float)(1 << 23) - 1.0f;
}

int main(int argc, char **argv)
{
    int reps = 21;
    if (argc == 3 && !strcmp(argv[1], "--reps")) reps = atoi(argv[2]);
    if (reps < 1 || reps > 64) return 2;
    const cpu_features *cf = cpu_get();
    if (!(cf->avx2 && cf->fma)) {
        printf("{\"bench\":\"kv_i8dot\",\"skipped\":\"no AVX2\"}\n");
        return 0;
    }
    int n_slots = NKV + 64;
    int8_t *k = malloc((size_t)n_slots * NKH * HD), *qi = malloc(NKH * G * HD);
    float *ks = malloc(sizeof(float) * n_slots * NKH), *q = malloc(sizeof(float) * NKH * G * HD);
    float *qs = malloc(sizeof(float) * NKH * G), *x = malloc(sizeof(float) * NKH * HD);
    float *sa = malloc(sizeof(float) * NKH * G * NKV), *sb = malloc(sizeof(float) * NKH * G * NKV);
    int32_t *slots = malloc(sizeof(int32_t) * NKV), *pg = malloc(sizeof(int32_t) * (n_slots / 16));
    if (!k || !qi || !ks || !q || !qs || !x || !sa || !sb || !slots || !pg) return 1;
    for (int s = 0; s < n_slots; s++) {
        for (int i = 0; i < NKH * HD; i++) x[i] = frand() * 2.0f;
        kern_kv_store_i8(k, ks, s, NKH, HD, x);
    }
    for (int i = 0; i < NKH * G * HD; i++) q[i] = frand() * 2.0f / 8.0f; /* q * 1/sqrt(64) */
    kern_kv_store_i8(qi, qs, 0, NKH * G, HD, q); /* q per head: the same symmetric int8 */
    int np = n_slots / 16;
    for (int i = 0; i < np; i++) pg[i] = i;
    for (int i = np - 1; i > 0; i--) {
        int j = (int)((frand() + 1.0f) * 0.5f * (float)i);
        int32_t t = pg[i];
        pg[i] = pg[j], pg[j] = t;
    }
    for (int p = 0; p < NKV; p++) slots[p] = pg[p / 16] * 16 + p % 16;
    double ta[64], tb[64];
    for (int r = 0; r < reps; r++) {
        double t0 = time_now_sec();
        scores_f32(sa, q, k, ks, slots);
        double t1 = time_now_sec();
        scores_i8(sb, qi, qs, k, ks, slots);
        ta[r] = t1 - t0, tb[r] = time_now_sec() - t1;
    }
    double emax = 0, smax = 0;
    for (int i = 0; i < NKH * G * NKV; i++) {
        emax = fmax(emax, fabs((double)sa[i] - sb[i]));
        smax = fmax(smax, fabs((double)sa[i]));
    }
    double ba = ta[0], bb = tb[0];
    for (int r = 1; r < reps; r++) ba = fmin(ba, ta[r]), bb = fmin(bb, tb[r]);
    double ma = bench_median(ta, reps), mb = bench_median(tb, reps), n = (double)NKV * NKH * G;
    printf("{\"bench\":\"kv_i8dot\",\"keys\":%d,\"kv_heads\":%d,\"group\":%d,\"head_dim\":%d,"
           "\"f32_convert_ns\":%.3f,\"int8_q_ns\":%.3f,\"speedup_int8_q\":%.2f,\"f32_convert_best_ns\":%.3f,"
           "\"int8_q_best_ns\":%.3f,\"speedup_best\":%.2f,\"int8_q_max_err_rel\":%.3g}\n",
           NKV, NKH, G, HD, ma / n * 1e9, mb / n * 1e9, ma / mb, ba / n * 1e9, bb / n * 1e9, ba / bb, emax / smax);
    free(k), free(qi), free(ks), free(q), free(qs), free(x), free(sa), free(sb), free(slots), free(pg);
    return 0;
}
