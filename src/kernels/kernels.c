/* kernels — dispatch and the ISA-independent pieces (weight preparation,
 * rope tables, KV stores).  See kernels.h.
 *
 * The vtable is written by kernels_init() at start-up, before any compute
 * thread exists, and only read afterwards. */
#include "kernels/kernels.h"

#include <cpuid.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

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

/* ---- the bf16 path choice ----------------------------------------------
 * A table of the cores measured (the prior, which wins near ties), checked
 * by timing both bodies at start-up (kern_bf16_decide). */
typedef struct cpu_model_row {
    const char *vendor;
    int family, model_lo, model_hi;
    const char *name;
    int dot; /* 1: vdpbf16ps measured faster than widen + FMA */
} cpu_model_row;

static const cpu_model_row k_cpu_models[] = {
    /* family 19h with AVX-512 BF16 is Zen 4: bench_ceilings vdpbf16ps 446
     * vs FMA 224 GFLOP/s (2 threads), GEMM m = 512 1.4-1.8x (PERF.md) */
    {"AuthenticAMD", 0x19, 0x00, 0xff, "amd-zen4", 1},
    /* Sapphire Rapids: vdpbf16ps zmm at half the FMA rate (108 vs 213
     * GFLOP/s per core), GEMM 1.5-1.9x faster through FMA (kernels.md) */
    {"GenuineIntel", 6, 0x8f, 0x8f, "intel-sapphire-rapids", 0},
};

static const cpu_model_row *cpu_model_lookup(void)
{
    unsigned a, b, c, d;
    if (!__get_cpuid(0, &a, &b, &c, &d)) return NULL;
    char vendor[13];
    memcpy(vendor, &b, 4);
    memcpy(vendor + 4, &d, 4);
    memcpy(vendor + 8, &c, 4);
    vendor[12] = 0;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return NULL;
    int fam = (a >> 8) & 0xf, model = (a >> 4) & 0xf;
    if (fam == 0xf) fam += (a >> 20) & 0xff;
    if (fam == 0x6 || fam >= 0xf) model |= ((a >> 16) & 0xf) << 4;
    for (size_t i = 0; i < sizeof k_cpu_models / sizeof k_cpu_models[0]; i++) {
        const cpu_model_row *r = &k_cpu_models[i];
        if (!strcmp(vendor, r->vendor) && fam == r->family && model >= r->model_lo && model <= r->model_hi)
            return r;
    }
    return NULL;
}

int kern_bf16_decide(const double *t_fma, int nf, const double *t_dot, int nd, int prior, double margin)
{
    double bf = INFINITY, bd = INFINITY;
    for (int i = 0; i < nf; i++)
        if (t_fma[i] > 0.0 && t_fma[i] < bf) bf = t_fma[i]; /* NaN fails both tests */
    for (int i = 0; i < nd; i++)
        if (t_dot[i] > 0.0 && t_dot[i] < bd) bd = t_dot[i];
    const int tie_pick = prior == 1 ? 1 : 0;
    if (!isfinite(bf) || !isfinite(bd)) return tie_pick;
    if (bf > bd * (1.0 + margin)) return 1;
    if (bd > bf * (1.0 + margin)) return 0;
    return tie_pick;
}

/* The measurement: one thread, a GEMM of BM_M rows on a bf16 weight of
 * BM_N x BM_K (384 KiB: stays in a 1 MiB L2; two k blocks; 12 panels, so
 * the per-thread activation packing weighs about as much as in a model's
 * GEMMs) through each body, BM_REPS timed runs each after one warm-up,
 * interleaved (the order alternates) so a burst of load on the shared
 * machine hits both; the best run of each counts.  2-4 ms in all. */
#define BM_M 36
#define BM_N 384
#define BM_K 512
#define BM_REPS 7
#define BM_MARGIN 0.10

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* 0 and the best times (seconds) of each body in t[2][BM_REPS], or -1. */
static int bf16_measure(double t[2][BM_REPS], double *wall_ms)
{
    const kern_vtable *tab = isa_table(KERN_ISA_AVX512);
    double w0 = now_s();
    uint16_t *src = malloc(sizeof(uint16_t) * BM_N * BM_K);
    float *x = malloc(sizeof(float) * BM_M * BM_K);
    float *y = malloc(sizeof(float) * BM_M * BM_N);
    void *scratch = malloc(tab->matmul_scratch(BM_M, BM_K));
    kern_mat w;
    memset(&w, 0, sizeof w);
    int rc = -1;
    if (!src || !x || !y || !scratch) goto out;
    uint32_t s = 0x2545F491u;
    for (int i = 0; i < BM_N * BM_K; i++) {
        s = s * 1664525u + 1013904223u;
        src[i] = f32_to_bf16(((float)(s >> 8) / (float)(1 << 24) - 0.5f) * 0.25f);
    }
    for (int i = 0; i < BM_M * BM_K; i++) {
        s = s * 1664525u + 1013904223u;
        x[i] = (float)(s >> 8) / (float)(1 << 24) - 0.5f;
    }
    w.n = BM_N;
    w.k = BM_K;
    w.dt = DTYPE_BF16;
    w.isa = KERN_ISA_AVX512;
    if (!tab->mat_pack || tab->mat_pack(&w, src, DTYPE_BF16)) goto out;
    kern_avx512_set_amx(0); /* BM_M >= KERN_AMX_MIN_M: time the panel bodies */
    for (int rep = -1; rep < BM_REPS; rep++)
        for (int j = 0; j < 2; j++) {
            int body = (rep & 1) ? 1 - j : j;
            kern_avx512_set_bf16_dot(body ? 2 : 0);
            double t0 = now_s();
            tab->matmul(y, x, BM_M, &w, NULL, 0, 1, scratch);
            double dt = now_s() - t0;
            if (rep >= 0) t[body][rep] = dt;
        }
    rc = 0;
out:
    if (w.owned) free(w.owned);
    free(src);
    free(x);
    free(y);
    free(scratch);
    *wall_ms = (now_s() - w0) * 1e3;
    return rc;
}

static kern_choice g_choice;

static void choose_bf16(kern_isa isa)
{
    static int measured; /* once per process: kernels_init may run many times */
    static double t[2][BM_REPS], wall_ms;
    static int meas_rc = -1;
    const cpu_model_row *row = cpu_model_lookup();
    g_choice.table = row ? row->name : NULL;
    g_choice.table_dot = row ? row->dot : -1;
    g_choice.fma_gflops = g_choice.dot_gflops = g_choice.measure_ms = 0.0;
    if (isa != KERN_ISA_AVX512) {
        g_choice.bf16_dot = 0;
        g_choice.bf16_why = isa == KERN_ISA_AVX2 ? "avx2: no vdpbf16ps" : "scalar";
        return;
    }
    const char *env = getenv("SGLC_BF16_DOT");
    if (env && *env && strcmp(env, "auto") != 0) {
        int on = strcmp(env, "0") != 0;
        g_choice.bf16_dot = on ? 2 : 0;
        g_choice.bf16_why = on ? "SGLC_BF16_DOT=1" : "SGLC_BF16_DOT=0";
        kern_avx512_set_bf16_dot(g_choice.bf16_dot);
        return;
    }
    if (!measured) {
        meas_rc = bf16_measure(t, &wall_ms);
        measured = 1;
    }
    int dot;
    if (meas_rc != 0) {
        dot = g_choice.table_dot == 1;
        g_choice.bf16_why = "measurement failed (out of memory): table";
    } else {
        double bf = INFINITY, bd = INFINITY;
        for (int i = 0; i < BM_REPS; i++) {
            if (t[0][i] < bf) bf = t[0][i];
            if (t[1][i] < bd) bd = t[1][i];
        }
        const double flop = 2.0 * BM_M * BM_N * BM_K;
        g_choice.fma_gflops = bf > 0 ? flop / bf * 1e-9 : 0.0;
        g_choice.dot_gflops = bd > 0 ? flop / bd * 1e-9 : 0.0;
        g_choice.measure_ms = wall_ms;
        dot = kern_bf16_decide(t[0], BM_REPS, t[1], BM_REPS, g_choice.table_dot, BM_MARGIN);
        int clear = kern_bf16_decide(t[0], BM_REPS, t[1], BM_REPS, 1 - dot, BM_MARGIN) == dot;
        const int against = clear && g_choice.table_dot >= 0 && g_choice.table_dot != dot;
        if (!clear) g_choice.bf16_why = g_choice.table ? "measured: near tie, table" : "measured: near tie, fma";
        else g_choice.bf16_why = against ? "measured: against the table" : "measured";
        static int warned;
        if (against && !warned++)
            log_warn("kernels: the bf16 matmul measurement (fma %.1f, dot %.1f GFLOP/s) contradicts the %s table "
                     "entry; using %s", g_choice.fma_gflops, g_choice.dot_gflops, g_choice.table, dot ? "dot" : "fma");
    }
    g_choice.bf16_dot = dot;
    kern_avx512_set_bf16_dot(dot);
}

const kern_choice *kernels_choice(void) { return &g_choice; }

char *kernels_choice_line(char *buf, size_t n)
{
    const kern_choice *c = &g_choice;
    int o = snprintf(buf, n, "bf16 matmul: %s (%s", c->bf16_dot ? "dot" : "fma", c->bf16_why ? c->bf16_why : "?");
    if (c->fma_gflops > 0 && o >= 0 && (size_t)o < n)
        o += snprintf(buf + o, n - (size_t)o, "; 1 thread, m=%d n=%d k=%d, best of %d: fma %.1f, dot %.1f GFLOP/s, %.1f ms",
                      BM_M, BM_N, BM_K, BM_REPS, c->fma_gflops, c->dot_gflops, c->measure_ms);
    if (c->table && o >= 0 && (size_t)o < n)
        o += snprintf(buf + o, n - (size_t)o, "; table %s: %s", c->table, c->table_dot ? "dot" : "fma");
    if (c->bf16_dot == 1 && o >= 0 && (size_t)o < n) o += snprintf(buf + o, n - (size_t)o, "; LM head fma");
    if (o >= 0 && (size_t)o < n)
        snprintf(buf + o, n - (size_t)o, "); amx: %s (%s)", c->amx ? "on for m >= 16" : "off", c->amx_why ? c->amx_why : "?");
    return buf;
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
    choose_bf16(want);
    if (want == KERN_ISA_AVX512) {
        kern_avx512_set_amx(amx);
        const char *one = getenv("SGLC_AMX_BF16");
        kern_amx_set_split(!(one && *one && strcmp(one, "0") != 0));
        g_amx = amx && kern_avx512_amx_ok();
        const cpu_features *c = cpu_get();
        g_choice.amx_why = g_amx ? "cpuid + OS grant"
                           : !amx ? "forced avx512 (SGLC_KERNELS=avx512)"
                           : c->amx_tile && c->amx_bf16 ? "the OS refused the tile state"
                                                        : "no AMX";
    } else {
        g_amx = 0;
        if (kern_vtable_avx512) kern_avx512_set_amx(0);
        g_choice.amx_why = "not avx512";
    }
    g_choice.amx = g_amx;
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
