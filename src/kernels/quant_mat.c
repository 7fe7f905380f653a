/* quant_mat — kern_mat_init_kt: weights of any storage type, including
 * block-quantized ones kept quantized (see kernels.h).
 *
 * DESIGN: a quantized kern_mat is the GGUF bytes themselves (row-major
 * blocks, layout 0, qtype = the kern_type): the int8 kernels read blocks
 * with unaligned loads, so a weight in a mapped file is used in place.
 * Conversions go through f32 one row at a time (a row of scratch, never
 * a whole f32 copy of a quantized matrix, except when the target is a
 * float type, which kern_mat_init needs whole). */
#include <stdlib.h>
#include <string.h>

#include "kernels/kern_types.h"
#include "kernels/kernels.h"
#include "kernels/quant_dot.h"
#include "util/log.h"

static int is_float(int t) { return t >= 0 && t < KERN_TYPE_FLOAT_COUNT; }

/* One row of src_t -> f32. */
static void row_to_f32(int src_t, float *dst, const void *src, int k)
{
    const kern_type_traits *tr = kern_type_get((kern_type)src_t);
    if (tr->row_to_f32) tr->row_to_f32(dst, src, k);
    else quant_dequant_row((kern_type)src_t, dst, src, k);
}

/* f32 row -> want_t; -1 when nothing writes that type. */
static int row_from_f32(int want_t, void *dst, const float *src, int k)
{
    const kern_type_traits *tr = kern_type_get((kern_type)want_t);
    if (tr->row_from_f32) tr->row_from_f32(dst, src, k);
    else if (want_t == KERN_TYPE_Q8_0) quant_act_q8_0(dst, src, k); /* the same format */
    else return -1;
    return 0;
}

int kern_quant_repacks(int t, int n) { return quant_x8_layout((kern_type)t, n, kernels_isa()) != 0; }

int kern_mat_init_kt(kern_mat *m, const void *src, int src_t, int n, int k, int want_t,
                     int borrow_ok)
{
    memset(m, 0, sizeof *m);
    const kern_type_traits *st = kern_type_get((kern_type)src_t), *wt = kern_type_get((kern_type)want_t);
    if (!st || !wt || n <= 0 || k <= 0 || !src) {
        log_error("bad arguments (src type %d, want %d, %d x %d)", src_t, want_t, n, k);
        return -1;
    }
    if (!kern_type_row_ok((kern_type)src_t, k) || !kern_type_row_ok((kern_type)want_t, k)) {
        log_error("k = %d is not a whole number of %s / %s blocks", k, st->name, wt->name);
        return -1;
    }
    if (is_float(want_t) && is_float(src_t))
        return kern_mat_init(m, src, (dtype)src_t, n, k, (dtype)want_t, borrow_ok);
    if (is_float(want_t)) { /* quantized -> f32 / bf16: dequantize, then the float path */
        if (want_t == KERN_TYPE_F16) {
            log_error("f16 is not a matmul weight type");
            return -1;
        }
        float *tmp = malloc((size_t)n * k * sizeof(float));
        if (!tmp) {
            log_error("out of memory (%d x %d f32)", n, k);
            return -1;
        }
        size_t srb = kern_type_row_bytes((kern_type)src_t, k);
        for (int j = 0; j < n; j++) row_to_f32(src_t, tmp + (size_t)j * k, (const char *)src + j * srb, k);
        int rc = kern_mat_init(m, tmp, DTYPE_F32, n, k, (dtype)want_t, 0);
        free(tmp);
        return rc;
    }
    if (!quant_ops_scalar((kern_type)want_t) && want_t != KERN_TYPE_F8_B128) {
        log_error("%s is not a weight type", wt->name);
        return -1;
    }
    m->n = n;
    m->k = k;
    m->dt = DTYPE_F32;
    m->qtype = want_t;
    m->isa = kernels_isa();
    m->bytes = kern_type_mat_bytes((kern_type)want_t, n, k);
    if (src_t == want_t && borrow_ok) {
        m->data = src;
        return 0;
    }
    /* an owned Q4_0 / Q4_K / Q5_K / Q6_K / Q8_0 weight on a SIMD ISA: the 8-row
     * repacked layout (quant_dot.h; large ones repacked on kern_pack_threads) */
    const int layout = quant_x8_layout((kern_type)want_t, n, m->isa), repack = layout != 0;
    const size_t plain_bytes = m->bytes;
    if (repack) m->bytes = quant_x8_bytes(layout, n, k);
    m->owned = kern_weight_alloc(m->bytes);
    if (!m->owned) {
        log_error("out of memory (%zu bytes)", m->bytes);
        memset(m, 0, sizeof *m);
        return -1;
    }
    m->data = m->owned;
    if (src_t == want_t && !repack) {
        memcpy(m->owned, src, m->bytes);
        return 0;
    }
    if (src_t == want_t) {
        quant_repack_x8(layout, m->owned, src, n, k, kern_pack_threads());
        m->layout = layout;
        return 0;
    }
    float *row = malloc((size_t)k * sizeof(float));
    if (!row) {
        kern_mat_free(m);
        log_error("out of memory");
        return -1;
    }
    size_t srb = kern_type_row_bytes((kern_type)src_t, k), wrb = kern_type_row_bytes((kern_type)want_t, k);
    int rc = 0;
    for (int j = 0; j < n && !rc; j++) {
        const char *s = (const char *)src + (size_t)j * srb;
        if (is_float(src_t)) dtype_to_f32(row, s, (dtype)src_t, (size_t)k);
        else row_to_f32(src_t, row, s, k);
        rc = row_from_f32(want_t, (char *)m->owned + (size_t)j * wrb, row, k);
    }
    free(row);
    if (rc) {
        log_error("no f32 -> %s quantizer yet", wt->name);
        kern_mat_free(m);
        return -1;
    }
    if (repack) { /* quantized in row order above; repack through a copy */
        void *plain = malloc(plain_bytes);
        if (!plain) {
            kern_mat_free(m);
            log_error("out of memory");
            return -1;
        }
        memcpy(plain, m->owned, plain_bytes);
        quant_repack_x8(layout, m->owned, plain, n, k, kern_pack_threads());
        m->layout = layout;
        free(plain);
    }
    return 0;
}
