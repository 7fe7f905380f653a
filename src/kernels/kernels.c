/* kernels — dispatch and the ISA-independent pieces (weight preparation,
 * rope tables, KV stores).  See kernels.h.
 *
 * The vtable is written by kernels_init() at start-up, before any compute
 * thread exists, and only read afterwards. */
#include "kernels/kernels.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "kernels/kern_types.h"
#include "kernels/kernels_impl.h"
#include "kernels/quant_dot.h"
#include "util/cpu.h"
#include "util/log.h"

static const kern_vtable vt_scalar = {
    .matmul = kern_ref_matmul,
    .attention = kern_ref_attention,
    .rmsnorm = kern_ref_rmsnorm,
    .rope_apply = kern_ref_rope_apply,
    .silu_mul = kern_ref_silu_mul,
    .gelu_tanh_mul = kern_ref_gelu_tanh_mul,
    .add = kern_ref_add,
    .softmax = kern_ref_softmax,
    .argmax = kern_ref_argmax,
    .dot_f32 = kern_ref_dot_f32,
};

static kern_vtable g_vt = {
    .matmul = kern_ref_matmul,
    .attention = kern_ref_attention,
    .rmsnorm = kern_ref_rmsnorm,
    .rope_apply = kern_ref_rope_apply,
    .silu_mul = kern_ref_silu_mul,
    .gelu_tanh_mul = kern_ref_gelu_tanh_mul,
    .add = kern_ref_add,
    .softmax = kern_ref_softmax,
    .argmax = kern_ref_argmax,
    .dot_f32 = kern_ref_dot_f32,
};
static kern_isa g_isa = KERN_ISA_SCALAR;
static int g_amx;

const char *kernels_isa_name(kern_isa isa)
{
    switch (isa) {
    case KERN_ISA_AVX2: return "avx2";
    case KERN_ISA_AVX512: return "avx512";
    default: return "scalar";
    }
}

static int isa_supported(kern_isa isa)
{
    const cpu_features *c = cpu_get();
    switch (isa) {
    case KERN_ISA_SCALAR: return 1;
    case KERN_ISA_AVX2: return c->avx2 && c->fma && c->f16c && kern_vtable_avx2 != NULL;
    case KERN_ISA_AVX512:
        return c->avx512f && c->avx512bw && c->avx512vl && c->avx512dq && c->avx512bf16 &&
               c->avx512vnni && kern_vtable_avx512 != NULL;
    }
    return 0;
}

static const kern_vtable *isa_table(kern_isa isa)
{
    switch (isa) {
    case KERN_ISA_AVX2: return kern_vtable_avx2;
    case KERN_ISA_AVX512: return kern_vtable_avx512;
    default: return &vt_scalar;
    }
}

int kernels_init(const char *force)
{
    kern_types_init();
    if (!force) force = getenv("SGLC_KERNELS");
    kern_isa want;
    int amx = 1; /* with avx512: use AMX when available */
    if (!force || !*force || !strcmp(force, "auto")) {
        want = isa_supported(KERN_ISA_AVX512) ? KERN_ISA_AVX512
               : isa_supported(KERN_ISA_AVX2) ? KERN_ISA_AVX2
                                              : KERN_ISA_SCALAR;
    } else if (!strcmp(force, "scalar")) {
        want = KERN_ISA_SCALAR;
    } else if (!strcmp(force, "avx2")) {
        want = KERN_ISA_AVX2;
    } else if (!strcmp(force, "avx512")) {
        want = KERN_ISA_AVX512;
        amx = 0;
    } else if (!strcmp(force, "amx")) {
        if (!isa_supported(KERN_ISA_AVX512) || !kern_avx512_amx_ok()) {
            log_error("kernel ISA 'amx' is not supported by this CPU (or the OS refused the tile state)");
            return -1;
        }
        want = KERN_ISA_AVX512;
    } else {
        log_error("unknown kernel ISA '%s' (expected auto, scalar, avx2, avx512, amx)", force);
        return -1;
    }
    if (!isa_supported(want)) {
        log_error("kernel ISA '%s' is not supported by this CPU", kernels_isa_name(want));
        return -1;
    }
    const kern_vtable *t = isa_table(want);
    g_vt = *t;
    /* An ISA file may leave a slot NULL: fall back to the reference. */
    if (!g_vt.matmul) g_vt.matmul = vt_scalar.matmul;
    if (!g_vt.attention) g_vt.attention = vt_scalar.attention;
    if (!g_vt.rmsnorm) g_vt.rmsnorm = vt_scalar.rmsnorm;
    if (!g_vt.rope_apply) g_vt.rope_apply = vt_scalar.rope_apply;
    if (!g_vt.silu_mul) g_vt.silu_mul = vt_scalar.silu_mul;
    if (!g_vt.gelu_tanh_mul) g_vt.gelu_tanh_mul = vt_scalar.gelu_tanh_mul;
    if (!g_vt.add) g_vt.add = vt_scalar.add;
    if (!g_vt.softmax) g_vt.softmax = vt_scalar.softmax;
    if (!g_vt.argmax) g_vt.argmax = vt_scalar.argmax;
    if (!g_vt.dot_f32) g_vt.dot_f32 = vt_scalar.dot_f32;
    g_isa = want;
    if (want == KERN_ISA_AVX512) {
        const char *dot = getenv("SGLC_BF16_DOT");
        kern_avx512_set_bf16_dot(dot && *dot && strcmp(dot, "0") != 0);
        kern_avx512_set_amx(amx);
        const char *one = getenv("SGLC_AMX_BF16");
        kern_amx_set_split(!(one && *one && strcmp(one, "0") != 0));
        g_amx = amx && kern_avx512_amx_ok();
    } else {
        g_amx = 0;
        if (kern_vtable_avx512) kern_avx512_set_amx(0);
    }
    return 0;
}

kern_isa kernels_isa(void) { return g_isa; }
int kernels_amx(void) { return g_amx; }
const char *kernels_desc(void) { return g_amx ? "avx512+amx" : kernels_isa_name(g_isa); }

void *kern_weight_alloc(size_t bytes)
{
    /* From 1 MiB (MoE experts are 1-3 MiB): 2 MiB-aligned so the whole
     * 2 MiB spans inside the buffer can be huge pages (the hardware
     * prefetcher stops at 4 KiB page boundaries; with small pages Qwen3-MoE
     * experts streamed at half the speed).  The size is not rounded up to
     * 2 MiB, so a 3 MiB expert costs 3 MiB of RSS, not 4 (posix_memalign:
     * no size-multiple rule, unlike C11 aligned_alloc). */
    size_t align = bytes >= ((size_t)1 << 20) ? ((size_t)2 << 20) : 64;
    size_t size = (bytes + 63) / 64 * 64;
    if (size == 0) size = 64;
    void *p = NULL;
    if (posix_memalign(&p, align, size)) p = NULL;
    if (p && align > 64) (void)madvise(p, size, MADV_HUGEPAGE); /* advisory: ignore failure */
    return p;
}

int kern_mat_init(kern_mat *m, const void *src, dtype src_dt, int n, int k, dtype want,
                  int borrow_ok)
{
    memset(m, 0, sizeof *m);
    if (n <= 0 || k <= 0 || (want != DTYPE_F32 && want != DTYPE_BF16)) return -1;
    m->n = n;
    m->k = k;
    m->dt = want;
    m->isa = g_isa;
    const kern_vtable *t = isa_table(g_isa);
    if (t->mat_pack) return t->mat_pack(m, src, src_dt);
    size_t count = (size_t)n * k;
    m->bytes = kern_type_mat_bytes(kern_type_of_dtype(want), n, k);
    if (src_dt == want && borrow_ok) {
        m->data = src;
        return 0;
    }
    m->owned = kern_weight_alloc(m->bytes);
    if (!m->owned) return -1;
    if (src_dt == want) {
        memcpy(m->owned, src, m->bytes);
    } else if (want == DTYPE_F32) {
        dtype_to_f32(m->owned, src, src_dt, count);
    } else { /* want bf16 */
        uint16_t *d = m->owned;
        const uint16_t *s16 = src;
        const float *s32 = src;
        for (size_t i = 0; i < count; i++) {
            float v = src_dt == DTYPE_F32 ? s32[i] : f16_to_f32(s16[i]);
            d[i] = f32_to_bf16(v);
        }
    }
    m->data = m->owned;
    return 0;
}

void kern_mat_free(kern_mat *m)
{
    if (m->owned) free(m->owned);
    memset(m, 0, sizeof *m);
}

/* Sized for every ISA this CPU supports, so a weight packed under one ISA
 * can still be multiplied after kernels_init() switched to another. */
size_t kern_matmul_scratch(int m, int k)
{
    size_t best = quant_matmul_scratch(m, k); /* a quantized weight's activation rows */
    for (int i = KERN_ISA_AVX2; i <= KERN_ISA_AVX512; i++) {
        if (!isa_supported((kern_isa)i)) continue;
        const kern_vtable *t = isa_table((kern_isa)i);
        if (t->matmul_scratch) {
            size_t s = t->matmul_scratch(m, k);
            if (s > best) best = s;
        }
    }
    return best;
}

/* Dispatch on the ISA the weight was packed for (its layout is private to
 * that ISA file), not on the current selection. */
void kern_matmul(float *y, const float *x, int m, const kern_mat *w, const float *bias, int ith,
                 int nth, void *scratch)
{
    if (w->qtype) {
        quant_matmul(y, x, m, w, bias, ith, nth, scratch, isa_supported(w->isa) ? w->isa : KERN_ISA_SCALAR);
        return;
    }
    if (w->isa == g_isa) {
        g_vt.matmul(y, x, m, w, bias, ith, nth, scratch);
        return;
    }
    const kern_vtable *t = isa_table(w->isa);
    if (t && t->matmul && isa_supported(w->isa))
        t->matmul(y, x, m, w, bias, ith, nth, scratch);
    else
        kern_ref_matmul(y, x, m, w, bias, ith, nth, scratch);
}

size_t kern_attention_scratch(int n_kv, int head_dim)
{
    const kern_vtable *t = isa_table(g_isa);
    if (t->attention_scratch) return t->attention_scratch(n_kv, head_dim);
    return (size_t)n_kv * sizeof(float) + 64;
}

void kern_attention(const kern_attn_args *a, int ith, int nth, void *scratch)
{
    g_vt.attention(a, ith, nth, scratch);
}

void kern_kv_store(void *cache, dtype kv_dt, int32_t slot, int row_len, const float *src)
{
    kern_kv_store_scaled(cache, kv_dt, slot, row_len, src, 1.0f);
}

void kern_kv_store_scaled(void *cache, dtype kv_dt, int32_t slot, int row_len, const float *src, float scale)
{
    if (kv_dt == DTYPE_F8_E4M3 || kv_dt == DTYPE_F8_E5M2) {
        uint8_t *d = (uint8_t *)cache + (size_t)slot * row_len;
        float inv = scale > 0.0f ? 1.0f / scale : 1.0f;
        if (kv_dt == DTYPE_F8_E4M3)
            for (int i = 0; i < row_len; i++) d[i] = f32_to_f8e4m3(src[i] * inv);
        else
            for (int i = 0; i < row_len; i++) d[i] = f32_to_f8e5m2(src[i] * inv);
    } else if (kv_dt == DTYPE_F32) {
        memcpy((float *)cache + (size_t)slot * row_len, src, (size_t)row_len * 4);
    } else {
        uint16_t *d = (uint16_t *)cache + (size_t)slot * row_len;
        for (int i = 0; i < row_len; i++) d[i] = f32_to_bf16(src[i]);
    }
}

void kern_kv_store_i8(int8_t *cache, float *tok_scale, int32_t slot, int n_kv_head, int head_dim,
                      const float *src)
{
    for (int h = 0; h < n_kv_head; h++) {
        const float *x = src + (size_t)h * head_dim;
        int8_t *d = cache + ((size_t)slot * n_kv_head + h) * head_dim;
        float amax = 0.0f;
        for (int i = 0; i < head_dim; i++) {
            float v = fabsf(x[i]);
            if (v > amax) amax = v; /* NaN never wins: the head stays finite */
        }
        float sc = amax / 127.0f;
        tok_scale[(size_t)slot * n_kv_head + h] = sc;
        for (int i = 0; i < head_dim; i++) {
            float q = sc > 0.0f ? rintf(x[i] / sc) : 0.0f; /* default rounding: half to even */
            d[i] = (int8_t)(q > 127.0f ? 127 : q < -127.0f ? -127 : q == q ? (int)q : 0);
        }
    }
}

void kern_kv_store_tok(void *cache, float *tok_scale, dtype kv_dt, int32_t slot, int n_kv_head,
                       int head_dim, const float *src, float scale)
{
    if (kv_dt == DTYPE_I8)
        kern_kv_store_i8(cache, tok_scale, slot, n_kv_head, head_dim, src);
    else
        kern_kv_store_scaled(cache, kv_dt, slot, n_kv_head * head_dim, src, scale);
}

void kern_rope_cache(float *cos_out, float *sin_out, int pos, const float *inv_freq, int half,
                     float mscale)
{
    for (int i = 0; i < half; i++) {
        /* double keeps long positions exact enough (pos * freq can reach 1e5 rad) */
        double ang = (double)pos * (double)inv_freq[i];
        cos_out[i] = (float)cos(ang) * mscale;
        sin_out[i] = (float)sin(ang) * mscale;
    }
}

void kern_rmsnorm(float *y, const float *x, const float *w, int n, float eps, float w_offset)
{
    g_vt.rmsnorm(y, x, w, n, eps, w_offset);
}
void kern_rope_apply(float *x, int n_head, int head_dim, int rot_dim, const float *cos_t,
                     const float *sin_t, int neox)
{
    g_vt.rope_apply(x, n_head, head_dim, rot_dim, cos_t, sin_t, neox);
}
void kern_silu_mul(float *y, const float *gate, const float *up, int n) { g_vt.silu_mul(y, gate, up, n); }
void kern_gelu_tanh_mul(float *y, const float *gate, const float *up, int n)
{
    g_vt.gelu_tanh_mul(y, gate, up, n);
}
void kern_add(float *y, const float *a, const float *b, int n) { g_vt.add(y, a, b, n); }
void kern_softmax(float *x, int n) { g_vt.softmax(x, n); }
int kern_argmax(const float *x, int n) { return g_vt.argmax(x, n); }
float kern_dot_f32(const float *a, const float *b, int n) { return g_vt.dot_f32(a, b, n); }
