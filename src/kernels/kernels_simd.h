/* kernels_simd — a small SIMD vocabulary mapped to AVX2 or AVX-512; private
 * to src/kernels.
 *
 * DESIGN: the shared kernel bodies (kernels_rows_impl.h, and the attention
 * frame's helpers) are written once against this vocabulary; each ISA file
 * picks the mapping before including it and is compiled with its own -m
 * flags (Makefile: *_avx2.c, *_avx512.c):
 *
 *   #define SIMD_AVX512 1          (or SIMD_AVX2)
 *   #include "kernels/kernels_simd.h"
 *
 * Vocabulary (all static inline, f32 lanes unless said):
 *   simd_v, simd_vi, simd_m     vector, integer vector, lane mask
 *   SIMD_W                      lanes (8 / 16); SIMD_SFX: name suffix
 *                               (256 / 512) for the kernels' symbols
 *   SIMD_MASKED_TAILS           1: a row's tail (< SIMD_W elements) is one
 *                               more vector step under a lane mask (AVX-512);
 *                               0: the bodies finish the row in scalar code
 *                               (AVX2, whose tails have always been scalar,
 *                               with libm expf: keeping them keeps its
 *                               results bit-identical)
 *   simd_zero, simd_set1, simd_load (64/32-byte aligned), simd_loadu,
 *   simd_store, simd_storeu, simd_bcast (broadcast *p)
 *   simd_add, _sub, _mul, _div, _max (IEEE maxps operand order), _min,
 *   simd_fmadd(a, b, c) = a b + c, simd_fmsub = a b - c
 *   simd_reduce_add, simd_reduce_max   horizontal, in the ISA's fixed tree
 *   simd_mask_n(n)              lanes [0, n), n >= 0 (all lanes if n >= W)
 *   simd_maskz_loadu(m, p)      masked-out lanes read 0 and are not touched
 *   simd_mask_loadu_fill(f, m, p)  masked-out lanes take f's
 *   simd_mask_storeu(p, m, v), simd_maskz_mov(m, v)
 *   simd_cmpeq_bits(a, b)       bit j set where a[j] == b[j] (ordered)
 *   simd_loadi                  aligned integer load
 *   simd_bf16_even / _odd(vi)   the low / high bf16 of each 32-bit pair
 *                               widened to f32 (a shift / a mask: exact)
 *   simd_load_half_dup(p)       W/2 floats, each into a pair of lanes
 *   simd_swap_pairs, simd_alt_sign  (lane pairs swapped; -1, +1, ...)
 *   simd_exp, simd_tanh         polynomial exp, ~1 ulp; the two ISAs
 *                               differ only in the clamp and in how 2^n is
 *                               applied (AVX2: flush below -87.3 to 0;
 *                               AVX-512: scalef, denormals down to -104)
 *
 * Not here: what one ISA alone has (vdpbf16ps, the AVX-512 attention
 * block's 16-row max pass, the transpose-add trees of the attention
 * scores): those stay in their ISA file. */
#ifndef SGLC_KERNELS_SIMD_H
#define SGLC_KERNELS_SIMD_H

#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>

#define AINLINE static inline __attribute__((always_inline))

static inline size_t round_up(size_t v, size_t a) { return (v + a - 1) / a * a; }

#if defined(SIMD_AVX512)

typedef __m512 simd_v;
typedef __m512i simd_vi;
typedef __mmask16 simd_m;
#define SIMD_W 16
#define SIMD_SFX 512
#define SIMD_MASKED_TAILS 1

AINLINE simd_v simd_zero(void) { return _mm512_setzero_ps(); }
AINLINE simd_v simd_set1(float f) { return _mm512_set1_ps(f); }
AINLINE simd_v simd_load(const float *p) { return _mm512_load_ps(p); }
AINLINE simd_v simd_loadu(const float *p) { return _mm512_loadu_ps(p); }
AINLINE void simd_store(float *p, simd_v v) { _mm512_store_ps(p, v); }
AINLINE void simd_storeu(float *p, simd_v v) { _mm512_storeu_ps(p, v); }
AINLINE simd_v simd_bcast(const float *p) { return _mm512_set1_ps(*p); }
AINLINE simd_v simd_add(simd_v a, simd_v b) { return _mm512_add_ps(a, b); }
AINLINE simd_v simd_sub(simd_v a, simd_v b) { return _mm512_sub_ps(a, b); }
AINLINE simd_v simd_mul(simd_v a, simd_v b) { return _mm512_mul_ps(a, b); }
AINLINE simd_v simd_div(simd_v a, simd_v b) { return _mm512_div_ps(a, b); }
AINLINE simd_v simd_max(simd_v a, simd_v b) { return _mm512_max_ps(a, b); }
AINLINE simd_v simd_min(simd_v a, simd_v b) { return _mm512_min_ps(a, b); }
AINLINE simd_v simd_fmadd(simd_v a, simd_v b, simd_v c) { return _mm512_fmadd_ps(a, b, c); }
AINLINE simd_v simd_fmsub(simd_v a, simd_v b, simd_v c) { return _mm512_fmsub_ps(a, b, c); }
AINLINE simd_v simd_fnmadd(simd_v a, simd_v b, simd_v c) { return _mm512_fnmadd_ps(a, b, c); }
AINLINE float simd_reduce_add(simd_v v) { return _mm512_reduce_add_ps(v); }
AINLINE float simd_reduce_max(simd_v v) { return _mm512_reduce_max_ps(v); }

AINLINE simd_m simd_mask_n(int n) { return n >= 16 ? (simd_m)0xFFFF : (simd_m)((1u << n) - 1u); }
AINLINE simd_v simd_maskz_loadu(simd_m m, const float *p) { return _mm512_maskz_loadu_ps(m, p); }
AINLINE simd_v simd_mask_loadu_fill(simd_v f, simd_m m, const float *p) { return _mm512_mask_loadu_ps(f, m, p); }
AINLINE void simd_mask_storeu(float *p, simd_m m, simd_v v) { _mm512_mask_storeu_ps(p, m, v); }
AINLINE simd_v simd_maskz_mov(simd_m m, simd_v v) { return _mm512_maskz_mov_ps(m, v); }
AINLINE unsigned simd_cmpeq_bits(simd_v a, simd_v b) { return _mm512_cmp_ps_mask(a, b, _CMP_EQ_OQ); }

AINLINE simd_vi simd_loadi(const void *p) { return _mm512_load_si512(p); }
AINLINE simd_v simd_bf16_even(simd_vi v) { return _mm512_castsi512_ps(_mm512_slli_epi32(v, 16)); }
AINLINE simd_v simd_bf16_odd(simd_vi v)
{
    return _mm512_castsi512_ps(_mm512_and_si512(v, _mm512_set1_epi32((int)0xFFFF0000u)));
}

AINLINE simd_v simd_load_half_dup(const float *p)
{
    const __m512i dup = _mm512_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7);
    return _mm512_permutexvar_ps(dup, _mm512_castps256_ps512(_mm256_loadu_ps(p)));
}
AINLINE simd_v simd_swap_pairs(simd_v v) { return _mm512_permute_ps(v, _MM_SHUFFLE(2, 3, 0, 1)); }
AINLINE simd_v simd_alt_sign(void)
{
    return _mm512_setr_ps(-1, 1, -1, 1, -1, 1, -1, 1, -1, 1, -1, 1, -1, 1, -1, 1);
}

/* exp helpers: clamp range, round to nearest, 2^n by scalef (no flush) */
#define SIMD_EXP_LO -104.0f
#define SIMD_EXP_HI 89.0f
AINLINE simd_v simd_round(simd_v v)
{
    return _mm512_roundscale_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}
AINLINE simd_v simd_exp_under(simd_v x) { (void)x; return _mm512_setzero_ps(); }
AINLINE simd_v simd_exp_scale(simd_v p, simd_v n, simd_v under)
{
    (void)under;
    return _mm512_scalef_ps(p, n);
}
AINLINE simd_v simd_abs(simd_v x) { return _mm512_abs_ps(x); }
/* t with the sign bit of x or-ed in (t >= 0) */
AINLINE simd_v simd_or_sign(simd_v t, simd_v x)
{
    return _mm512_castsi512_ps(_mm512_or_si512(
        _mm512_castps_si512(t), _mm512_and_si512(_mm512_castps_si512(x), _mm512_set1_epi32((int)0x80000000u))));
}

#elif defined(SIMD_AVX2)

typedef __m256 simd_v;
typedef __m256i simd_vi;
typedef __m256i simd_m; /* all-ones / zero 32-bit lanes (maskload's form) */
#define SIMD_W 8
#define SIMD_SFX 256
#define SIMD_MASKED_TAILS 0

AINLINE simd_v simd_zero(void) { return _mm256_setzero_ps(); }
AINLINE simd_v simd_set1(float f) { return _mm256_set1_ps(f); }
AINLINE simd_v simd_load(const float *p) { return _mm256_load_ps(p); }
AINLINE simd_v simd_loadu(const float *p) { return _mm256_loadu_ps(p); }
AINLINE void simd_store(float *p, simd_v v) { _mm256_store_ps(p, v); }
AINLINE void simd_storeu(float *p, simd_v v) { _mm256_storeu_ps(p, v); }
AINLINE simd_v simd_bcast(const float *p) { return _mm256_broadcast_ss(p); }
AINLINE simd_v simd_add(simd_v a, simd_v b) { return _mm256_add_ps(a, b); }
AINLINE simd_v simd_sub(simd_v a, simd_v b) { return _mm256_sub_ps(a, b); }
AINLINE simd_v simd_mul(simd_v a, simd_v b) { return _mm256_mul_ps(a, b); }
AINLINE simd_v simd_div(simd_v a, simd_v b) { return _mm256_div_ps(a, b); }
AINLINE simd_v simd_max(simd_v a, simd_v b) { return _mm256_max_ps(a, b); }
AINLINE simd_v simd_min(simd_v a, simd_v b) { return _mm256_min_ps(a, b); }
AINLINE simd_v simd_fmadd(simd_v a, simd_v b, simd_v c) { return _mm256_fmadd_ps(a, b, c); }
AINLINE simd_v simd_fmsub(simd_v a, simd_v b, simd_v c) { return _mm256_fmsub_ps(a, b, c); }
AINLINE simd_v simd_fnmadd(simd_v a, simd_v b, simd_v c) { return _mm256_fnmadd_ps(a, b, c); }
AINLINE float simd_reduce_add(simd_v v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}
AINLINE float simd_reduce_max(simd_v v)
{
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    s = _mm_max_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* any n: lanes j < n */
AINLINE simd_m simd_mask_n(int n)
{
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}
AINLINE simd_v simd_maskz_loadu(simd_m m, const float *p) { return _mm256_maskload_ps(p, m); }
AINLINE simd_v simd_mask_loadu_fill(simd_v f, simd_m m, const float *p)
{
    return _mm256_blendv_ps(f, _mm256_maskload_ps(p, m), _mm256_castsi256_ps(m));
}
AINLINE void simd_mask_storeu(float *p, simd_m m, simd_v v) { _mm256_maskstore_ps(p, m, v); }
AINLINE simd_v simd_maskz_mov(simd_m m, simd_v v) { return _mm256_and_ps(_mm256_castsi256_ps(m), v); }
AINLINE unsigned simd_cmpeq_bits(simd_v a, simd_v b)
{
    return (unsigned)_mm256_movemask_ps(_mm256_cmp_ps(a, b, _CMP_EQ_OQ));
}

AINLINE simd_vi simd_loadi(const void *p) { return _mm256_load_si256((const __m256i *)p); }
AINLINE simd_v simd_bf16_even(simd_vi v) { return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16)); }
AINLINE simd_v simd_bf16_odd(simd_vi v)
{
    return _mm256_castsi256_ps(_mm256_and_si256(v, _mm256_set1_epi32((int)0xFFFF0000u)));
}

AINLINE simd_v simd_load_half_dup(const float *p)
{
    const __m256i dup = _mm256_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3);
    return _mm256_permutevar8x32_ps(_mm256_castps128_ps256(_mm_loadu_ps(p)), dup);
}
AINLINE simd_v simd_swap_pairs(simd_v v) { return _mm256_permute_ps(v, _MM_SHUFFLE(2, 3, 0, 1)); }
AINLINE simd_v simd_alt_sign(void) { return _mm256_setr_ps(-1, 1, -1, 1, -1, 1, -1, 1); }

/* exp helpers: lanes below -87.3 (and -inf) flush to 0; 2^n built in the
 * exponent field */
#define SIMD_EXP_LO -87.3f
#define SIMD_EXP_HI 88.3f
AINLINE simd_v simd_round(simd_v v)
{
    return _mm256_round_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}
AINLINE simd_v simd_exp_under(simd_v x) { return _mm256_cmp_ps(x, _mm256_set1_ps(-87.3f), _CMP_LT_OQ); }
AINLINE simd_v simd_exp_scale(simd_v p, simd_v n, simd_v under)
{
    __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_andnot_ps(under, _mm256_mul_ps(p, _mm256_castsi256_ps(e)));
}
AINLINE simd_v simd_abs(simd_v x) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), x); }
AINLINE simd_v simd_or_sign(simd_v t, simd_v x)
{
    return _mm256_or_ps(t, _mm256_and_ps(_mm256_set1_ps(-0.0f), x));
}

#elif defined(SIMD_MAPPING_EXTERNAL)
/* The includer has defined the vocabulary itself (SIMD_W, SIMD_SFX,
 * SIMD_MASKED_TAILS, the types and functions above, SIMD_EXP_LO / _HI,
 * simd_round, simd_exp_under / _scale, simd_abs, simd_or_sign):
 * tests/unit/test_kernels_simd.c models the AVX-512 mapping in plain C so
 * that the masked-tail paths of the shared body run on any CPU. */
#else
#error "define SIMD_AVX2, SIMD_AVX512 or SIMD_MAPPING_EXTERNAL before including kernels_simd.h"
#endif

/* exp(x), ~1 ulp (Cephes-style: x = n ln2 + r, degree-6 polynomial in r);
 * exp(-inf) = 0; overflow clamps (AVX2) or gives inf (AVX-512). */
AINLINE simd_v simd_exp(simd_v x)
{
    simd_v under = simd_exp_under(x);
    x = simd_max(x, simd_set1(SIMD_EXP_LO));
    x = simd_min(x, simd_set1(SIMD_EXP_HI));
    simd_v n = simd_round(simd_mul(x, simd_set1(1.44269504088896341f)));
    simd_v r = simd_fnmadd(n, simd_set1(0.693359375f), x);
    r = simd_fnmadd(n, simd_set1(-2.12194440e-4f), r);
    simd_v p = simd_set1(1.9875691500e-4f);
    p = simd_fmadd(p, r, simd_set1(1.3981999507e-3f));
    p = simd_fmadd(p, r, simd_set1(8.3334519073e-3f));
    p = simd_fmadd(p, r, simd_set1(4.1665795894e-2f));
    p = simd_fmadd(p, r, simd_set1(1.6666665459e-1f));
    p = simd_fmadd(p, r, simd_set1(5.0000001201e-1f));
    p = simd_fmadd(p, simd_mul(r, r), simd_add(r, simd_set1(1.0f)));
    return simd_exp_scale(p, n, under);
}

/* tanh(x) = sign(x) (1 - 2 / (exp(2|x|) + 1)); absolute error ~1e-7. */
AINLINE simd_v simd_tanh(simd_v x)
{
    simd_v ax = simd_abs(x);
    simd_v e = simd_exp(simd_add(ax, ax));
    simd_v t = simd_sub(simd_set1(1.0f), simd_div(simd_set1(2.0f), simd_add(e, simd_set1(1.0f))));
    return simd_or_sign(t, x);
}

/* SIMD_FN(rmsnorm) -> rmsnorm256 / rmsnorm512: the kernels keep their
 * per-ISA names (profiles, disassembly). */
#define SIMD_CAT2(a, b) a##b
#define SIMD_CAT(a, b) SIMD_CAT2(a, b)
#define SIMD_FN(name) SIMD_CAT(name, SIMD_SFX)

#endif
