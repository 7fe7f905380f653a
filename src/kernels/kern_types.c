/* kern_types — the storage-type table (see kern_types.h).
 *
 * The float types point at the existing kernels: matmul is the ISA
 * vtable's matmul (which handles f32 and bf16 weights in the ISA's own
 * layout), dot is the ISA's f32 dot, fed with the stored row converted to
 * f32 in stack-sized chunks for the 16-bit types. */
#include "kernels/kern_types.h"

#include "kernels/kernels_impl.h"
#include "kernels/quant_blocks.h"
#include "kernels/quant_dot.h"
#include "kernels/quant_fp8.h"
#include "kernels/quant_ref.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static void f32_to_f32_row(float *dst, const void *src, int64_t k)
{
    memcpy(dst, src, (size_t)k * sizeof(float));
}
static void f32_from_f32_row(void *dst, const float *src, int64_t k)
{
    memcpy(dst, src, (size_t)k * sizeof(float));
}
static void bf16_to_f32_row(float *dst, const void *src, int64_t k)
{
    dtype_to_f32(dst, src, DTYPE_BF16, (size_t)k);
}
static void bf16_from_f32_row(void *dst, const float *src, int64_t k)
{
    dtype_from_f32(dst, DTYPE_BF16, src, (size_t)k);
}
static void f16_to_f32_row(float *dst, const void *src, int64_t k)
{
    dtype_to_f32(dst, src, DTYPE_F16, (size_t)k);
}
static void f16_from_f32_row(void *dst, const float *src, int64_t k)
{
    dtype_from_f32(dst, DTYPE_F16, src, (size_t)k);
}
static void e4m3_to_f32_row(float *dst, const void *src, int64_t k) { dtype_to_f32(dst, src, DTYPE_F8_E4M3, (size_t)k); }
static void e4m3_from_f32_row(void *dst, const float *src, int64_t k) { dtype_from_f32(dst, DTYPE_F8_E4M3, src, (size_t)k); }
static void e5m2_to_f32_row(float *dst, const void *src, int64_t k) { dtype_to_f32(dst, src, DTYPE_F8_E5M2, (size_t)k); }
static void e5m2_from_f32_row(void *dst, const float *src, int64_t k) { dtype_from_f32(dst, DTYPE_F8_E5M2, src, (size_t)k); }

/* ---- dots -------------------------------------------------------------- */

typedef float (*f32_dot_fn)(const float *a, const float *b, int n);

/* The ISA's f32 dot, or the reference where the ISA is absent. */
static f32_dot_fn isa_dot(kern_isa isa)
{
    const kern_vtable *t = isa == KERN_ISA_AVX2     ? kern_vtable_avx2
                           : isa == KERN_ISA_AVX512 ? kern_vtable_avx512
                                                    : NULL;
    return t && t->dot_f32 ? t->dot_f32 : kern_ref_dot_f32;
}

#define DOT_CHUNK 256 /* floats converted per step (1 KiB of stack) */

/* Dot of a 16-bit row: convert DOT_CHUNK elements, dot them on `isa`. */
static float dot16(const uint16_t *row, const float *x, int k, dtype dt, kern_isa isa)
{
    f32_dot_fn dot = isa_dot(isa);
    float buf[DOT_CHUNK];
    float sum = 0.0f;
    for (int i = 0; i < k; i += DOT_CHUNK) {
        int c = k - i < DOT_CHUNK ? k - i : DOT_CHUNK;
        dtype_to_f32(buf, row + i, dt, (size_t)c);
        sum += dot(buf, x + i, c);
    }
    return sum;
}

/* Dot of an 8-bit-float row: table-convert DOT_CHUNK elements, dot them on `isa`. */
static float dot8(const uint8_t *row, const float *x, int k, dtype dt, kern_isa isa)
{
    f32_dot_fn dot = isa_dot(isa);
    const float *tab = dtype_f8_table(dt);
    float buf[DOT_CHUNK];
    float sum = 0.0f;
    for (int i = 0; i < k; i += DOT_CHUNK) {
        int c = k - i < DOT_CHUNK ? k - i : DOT_CHUNK;
        for (int j = 0; j < c; j++) buf[j] = tab[row[i + j]];
        sum += dot(buf, x + i, c);
    }
    return sum;
}
static float e4m3_dot_scalar(const void *r, const float *x, int k) { return dot8(r, x, k, DTYPE_F8_E4M3, KERN_ISA_SCALAR); }
static float e4m3_dot_avx2(const void *r, const float *x, int k) { return dot8(r, x, k, DTYPE_F8_E4M3, KERN_ISA_AVX2); }
static float e4m3_dot_avx512(const void *r, const float *x, int k) { return dot8(r, x, k, DTYPE_F8_E4M3, KERN_ISA_AVX512); }
static float e5m2_dot_scalar(const void *r, const float *x, int k) { return dot8(r, x, k, DTYPE_F8_E5M2, KERN_ISA_SCALAR); }
static float e5m2_dot_avx2(const void *r, const float *x, int k) { return dot8(r, x, k, DTYPE_F8_E5M2, KERN_ISA_AVX2); }
static float e5m2_dot_avx512(const void *r, const float *x, int k) { return dot8(r, x, k, DTYPE_F8_E5M2, KERN_ISA_AVX512); }

static float f32_dot_scalar(const void *r, const float *x, int k) { return kern_ref_dot_f32(r, x, k); }
static float f32_dot_avx2(const void *r, const float *x, int k)
{
    return isa_dot(KERN_ISA_AVX2)(r, x, k);
}
static float f32_dot_avx512(const void *r, const float *x, int k)
{
    return isa_dot(KERN_ISA_AVX512)(r, x, k);
}
static float bf16_dot_scalar(const void *r, const float *x, int k)
{
    const uint16_t *w = r;
    float s = 0.0f;
    for (int i = 0; i < k; i++) s += bf16_to_f32(w[i]) * x[i];
    return s;
}
static float bf16_dot_avx2(const void *r, const float *x, int k)
{
    return dot16(r, x, k, DTYPE_BF16, KERN_ISA_AVX2);
}
static float bf16_dot_avx512(const void *r, const float *x, int k)
{
    return dot16(r, x, k, DTYPE_BF16, KERN_ISA_AVX512);
}
static float f16_dot_scalar(const void *r, const float *x, int k)
{
    const uint16_t *w = r;
    float s = 0.0f;
    for (int i = 0; i < k; i++) s += f16_to_f32(w[i]) * x[i];
    return s;
}
static float f16_dot_avx2(const void *r, const float *x, int k)
{
    return dot16(r, x, k, DTYPE_F16, KERN_ISA_AVX2);
}
static float f16_dot_avx512(const void *r, const float *x, int k)
{
    return dot16(r, x, k, DTYPE_F16, KERN_ISA_AVX512);
}

/* ---- the table --------------------------------------------------------- */

static kern_type_traits g_traits[KERN_TYPE_COUNT] = {
    [KERN_TYPE_F32] = {
        .name = "f32", .block_size = 1, .block_bytes = 4, .matmul_ok = 1,
        .row_to_f32 = f32_to_f32_row, .row_from_f32 = f32_from_f32_row,
        .dot = {f32_dot_scalar, NULL, NULL},
        .matmul = {kern_ref_matmul, NULL, NULL},
    },
    [KERN_TYPE_F16] = {
        /* a checkpoint / KV type; the matmul kernels take f32 or bf16 weights */
        .name = "f16", .block_size = 1, .block_bytes = 2, .matmul_ok = 0,
        .row_to_f32 = f16_to_f32_row, .row_from_f32 = f16_from_f32_row,
        .dot = {f16_dot_scalar, NULL, NULL},
    },
    [KERN_TYPE_BF16] = {
        .name = "bf16", .block_size = 1, .block_bytes = 2, .matmul_ok = 1,
        .row_to_f32 = bf16_to_f32_row, .row_from_f32 = bf16_from_f32_row,
        .dot = {bf16_dot_scalar, NULL, NULL},
        .matmul = {kern_ref_matmul, NULL, NULL},
    },
    [KERN_TYPE_F8_E4M3] = {
        .name = "f8_e4m3", .block_size = 1, .block_bytes = 1, .matmul_ok = 0,
        .row_to_f32 = e4m3_to_f32_row, .row_from_f32 = e4m3_from_f32_row,
        .dot = {e4m3_dot_scalar, NULL, NULL},
    },
    [KERN_TYPE_F8_E5M2] = {
        .name = "f8_e5m2", .block_size = 1, .block_bytes = 1, .matmul_ok = 0,
        .row_to_f32 = e5m2_to_f32_row, .row_from_f32 = e5m2_from_f32_row,
        .dot = {e5m2_dot_scalar, NULL, NULL},
    },
    /* block-quantized types: row conversion from quant_ref.c; dot/matmul
     * slots are filled by kern_types_init where the type has kernels */
#define QT(id, nm, bs, blk, fn)                                                                      \
    [id] = {.name = nm, .block_size = bs, .block_bytes = sizeof(blk), .is_quantized = 1,           \
            .row_to_f32 = quant_ref_to_f32_##fn, .row_from_f32 = quant_ref_from_f32_##fn}
    QT(KERN_TYPE_Q4_0, "q4_0", QK4_0, block_q4_0, q4_0),
    QT(KERN_TYPE_Q4_1, "q4_1", QK4_1, block_q4_1, q4_1),
    QT(KERN_TYPE_Q5_0, "q5_0", QK5_0, block_q5_0, q5_0),
    QT(KERN_TYPE_Q5_1, "q5_1", QK5_1, block_q5_1, q5_1),
    QT(KERN_TYPE_Q8_0, "q8_0", QK8_0, block_q8_0, q8_0),
    QT(KERN_TYPE_Q2_K, "q2_K", QK_K, block_q2_K, q2_K),
    QT(KERN_TYPE_Q3_K, "q3_K", QK_K, block_q3_K, q3_K),
    QT(KERN_TYPE_Q4_K, "q4_K", QK_K, block_q4_K, q4_K),
    QT(KERN_TYPE_Q5_K, "q5_K", QK_K, block_q5_K, q5_K),
    QT(KERN_TYPE_Q6_K, "q6_K", QK_K, block_q6_K, q6_K),
    QT(KERN_TYPE_IQ4_NL, "iq4_nl", QK4_NL, block_iq4_nl, iq4_nl),
    QT(KERN_TYPE_IQ4_XS, "iq4_xs", QK_K, block_iq4_xs, iq4_xs),
    QT(KERN_TYPE_Q8_K, "q8_K", QK_K, block_q8_K, q8_K),
    QT(KERN_TYPE_Q8_1, "q8_1", QK8_1, block_q8_1, q8_1),
#undef QT
    /* fp8 weights kept as bytes (quant_fp8.h): weight-only f32 kernels */
    [KERN_TYPE_F8_B128] = {
        .name = "f8_e4m3_b128", .block_size = QK_F8B, .block_bytes = sizeof(block_f8b), .is_quantized = 1,
        .matmul_ok = 1, .row_to_f32 = qf8_row_to_f32, .row_from_f32 = qf8_row_from_f32,
        .dot = {qf8_dot_scalar, NULL, NULL},
        .matmul = {qf8_matmul_scalar, NULL, NULL},
    },
};

static const struct { int ggml; kern_type kt; } k_ggml_map[] = {
    {GGML_T_F32, KERN_TYPE_F32},     {GGML_T_F16, KERN_TYPE_F16},       {GGML_T_BF16, KERN_TYPE_BF16},
    {GGML_T_Q4_0, KERN_TYPE_Q4_0},   {GGML_T_Q4_1, KERN_TYPE_Q4_1},     {GGML_T_Q5_0, KERN_TYPE_Q5_0},
    {GGML_T_Q5_1, KERN_TYPE_Q5_1},   {GGML_T_Q8_0, KERN_TYPE_Q8_0},     {GGML_T_Q8_1, KERN_TYPE_Q8_1},
    {GGML_T_Q2_K, KERN_TYPE_Q2_K},   {GGML_T_Q3_K, KERN_TYPE_Q3_K},     {GGML_T_Q4_K, KERN_TYPE_Q4_K},
    {GGML_T_Q5_K, KERN_TYPE_Q5_K},   {GGML_T_Q6_K, KERN_TYPE_Q6_K},     {GGML_T_Q8_K, KERN_TYPE_Q8_K},
    {GGML_T_IQ4_NL, KERN_TYPE_IQ4_NL}, {GGML_T_IQ4_XS, KERN_TYPE_IQ4_XS},
};

int kern_type_of_ggml(int ggml_type)
{
    for (size_t i = 0; i < sizeof k_ggml_map / sizeof k_ggml_map[0]; i++)
        if (k_ggml_map[i].ggml == ggml_type) return (int)k_ggml_map[i].kt;
    return -1;
}

int kern_type_to_ggml(kern_type t)
{
    for (size_t i = 0; i < sizeof k_ggml_map / sizeof k_ggml_map[0]; i++)
        if (k_ggml_map[i].kt == t) return k_ggml_map[i].ggml;
    return -1;
}

int kern_type_by_name(const char *name)
{
    if (!name) return -1;
    for (int t = 0; t < KERN_TYPE_COUNT; t++)
        if (g_traits[t].name && !strcasecmp(g_traits[t].name, name)) return t;
    return -1;
}

void kern_types_init(void)
{
    const kern_vtable *avx2 = kern_vtable_avx2, *avx512 = kern_vtable_avx512;
    kern_type_traits *f = &g_traits[KERN_TYPE_F32], *b = &g_traits[KERN_TYPE_BF16];
    kern_type_traits *h = &g_traits[KERN_TYPE_F16];
    if (avx2) {
        f->dot[KERN_ISA_AVX2] = f32_dot_avx2;
        b->dot[KERN_ISA_AVX2] = bf16_dot_avx2;
        h->dot[KERN_ISA_AVX2] = f16_dot_avx2;
        g_traits[KERN_TYPE_F8_E4M3].dot[KERN_ISA_AVX2] = e4m3_dot_avx2;
        g_traits[KERN_TYPE_F8_E5M2].dot[KERN_ISA_AVX2] = e5m2_dot_avx2;
        f->matmul[KERN_ISA_AVX2] = b->matmul[KERN_ISA_AVX2] =
            avx2->matmul ? avx2->matmul : kern_ref_matmul;
    }
    if (avx512) {
        f->dot[KERN_ISA_AVX512] = f32_dot_avx512;
        b->dot[KERN_ISA_AVX512] = bf16_dot_avx512;
        h->dot[KERN_ISA_AVX512] = f16_dot_avx512;
        g_traits[KERN_TYPE_F8_E4M3].dot[KERN_ISA_AVX512] = e4m3_dot_avx512;
        g_traits[KERN_TYPE_F8_E5M2].dot[KERN_ISA_AVX512] = e5m2_dot_avx512;
        f->matmul[KERN_ISA_AVX512] = b->matmul[KERN_ISA_AVX512] =
            avx512->matmul ? avx512->matmul : kern_ref_matmul;
    }
    /* block-quantized weight types: the int8 dots of quant_dot*.c (the
     * AVX-512 slot runs the VNNI kernels of the types quant_avx512_uses
     * picks, the AVX2 ones otherwise); dot is the dequantizing f32 one */
    quant_init();
    if (avx512) quant_avx512_select(getenv("SGLC_QUANT_AVX512"));
    for (int t = KERN_TYPE_FLOAT_COUNT; t < KERN_TYPE_COUNT; t++) {
        if (!quant_ops_scalar((kern_type)t)) continue; /* Q8_K, Q8_1: activations only */
        kern_type_traits *q = &g_traits[t];
        q->matmul_ok = 1;
        q->dot[KERN_ISA_SCALAR] = quant_row_dot_slot((kern_type)t);
        q->matmul[KERN_ISA_SCALAR] = quant_matmul_slot(KERN_ISA_SCALAR);
        if (avx2) q->matmul[KERN_ISA_AVX2] = quant_matmul_slot(KERN_ISA_AVX2);
        if (avx512)
            q->matmul[KERN_ISA_AVX512] =
                quant_matmul_slot(quant_avx512_uses((kern_type)t, 0, 1) || quant_avx512_uses((kern_type)t, 0, 2) ||
                                          quant_avx512_uses((kern_type)t, 1, 1)
                                      ? KERN_ISA_AVX512
                                      : KERN_ISA_AVX2);
    }
    kern_type_traits *f8 = &g_traits[KERN_TYPE_F8_B128]; /* the AVX-512 slot runs the AVX2 kernels */
    if (avx2) f8->dot[KERN_ISA_AVX2] = qf8_dot_avx2, f8->matmul[KERN_ISA_AVX2] = qf8_matmul_avx2;
    if (avx512) f8->dot[KERN_ISA_AVX512] = qf8_dot_avx2, f8->matmul[KERN_ISA_AVX512] = qf8_matmul_avx2;
}

const char *kern_type_avx512_partial(kern_type t)
{
    static char buf[KERN_TYPE_COUNT][24];
    if ((int)t < KERN_TYPE_FLOAT_COUNT || t >= KERN_TYPE_COUNT || !quant_dot_avx512(t)) return NULL;
    const int has_x8 = quant_x8_layout(t, 8, KERN_ISA_AVX512) != 0; /* Q5_K / Q6_K x8: AVX2 kernels */
    const int u[3] = {quant_avx512_uses(t, 0, 1), quant_avx512_uses(t, 0, 2), has_x8 && quant_avx512_uses(t, 1, 1)};
    const char *nm[3] = {"gemv", "gemm", "x8"};
    int on = u[0] + u[1] + u[2];
    if (on == 0 || on == 2 + has_x8) return NULL;
    char *b = buf[t];
    b[0] = 0;
    for (int i = 0; i < 3; i++)
        if (u[i]) snprintf(b + strlen(b), sizeof buf[t] - strlen(b), "%s%s", b[0] ? "," : "", nm[i]);
    return b;
}

const kern_type_traits *kern_type_get(kern_type t)
{
    if ((int)t < 0 || t >= KERN_TYPE_COUNT) return NULL;
    return &g_traits[t];
}

int kern_type_row_ok(kern_type t, int64_t k)
{
    const kern_type_traits *tr = kern_type_get(t);
    return tr && k >= 0 && k % tr->block_size == 0;
}

size_t kern_type_row_bytes(kern_type t, int64_t k)
{
    if (!kern_type_row_ok(t, k)) return 0;
    const kern_type_traits *tr = &g_traits[t];
    return (size_t)(k / tr->block_size) * tr->block_bytes;
}

size_t kern_type_mat_bytes(kern_type t, int64_t n, int64_t k)
{
    if (n < 0) return 0;
    return (size_t)n * kern_type_row_bytes(t, k);
}

float kern_type_dot(kern_type t, const void *row, const float *x, int k)
{
    const kern_type_traits *tr = kern_type_get(t);
    kern_row_dot_fn f = tr->dot[kernels_isa()];
    return (f ? f : tr->dot[KERN_ISA_SCALAR])(row, x, k);
}
