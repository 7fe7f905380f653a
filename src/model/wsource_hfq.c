/* wsource_hfq — a weight source over a Hugging Face quantized safetensors
 * checkpoint (see hfq.h).
 *
 * DESIGN: find("X.weight", 2-D) looks for the packed tensors of module X
 * in the inner safetensors source; when there are none the tensor passes
 * through.  A quantized module is first unpacked into a code grid
 * (qgrid: unsigned or signed integer code c, zero z and f32 scale s per
 * (output row, group of `g` inputs); W = (c - z) * s), then stored:
 *   - Q4_0 when every zero is 8 (GPTQ symmetric, compressed-tensors
 *     pack-quantized): d = f16(s), codes as stored;
 *   - Q4_1 for 4-bit codes with any zeros (AWQ, GPTQ asymmetric):
 *     d = f16(s), m = f16(-s * z);
 *   - Q8_0 for 8-bit codes with one zero per block (compressed-tensors /
 *     w8a8_int8 int8, GPTQ 8-bit symmetric): qs = c - z, d = f16(s);
 * each needing the group size and `in` to be multiples of 32 and the
 * scales within f16's normal range;
 *   - fp8 (per tensor, per channel, 128 x 128 blocks): KERN_TYPE_F8_B128,
 *     the codes as stored with the f32 scale of each 128 inputs
 *     (kernels/quant_fp8.h, weight-only f32 kernels), when `in` % 128 == 0
 *     and the scale blocks do not cut a 128-block;
 * otherwise (and for act-order g_idx, 2-bit, asymmetric 8-bit) the
 * hfquant.c dequantization, stored in the checkpoint's torch_dtype.
 * At-load quantization of an unquantized checkpoint: w8a8_int8 -> Q8_0
 * through the type's own quantizer; fp8 -> e4m3 codes with a per-row
 * scale amax / 448, kept as KERN_TYPE_F8_B128 (dequantized when `in` %
 * 128 != 0).
 * A malformed module (missing scales, wrong shapes or dtypes) is returned
 * with type -1 and the reason as its type name, which the loader reports
 * with the tensor's name. */
#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels.h"
#include "kernels/quant_blocks.h"
#include "kernels/quant_fp8.h"
#include "model/hfq.h"
#include "model/hfquant.h"
#include "util/errmsg.h"
#include "util/fileio.h"
#include "util/log.h"

typedef struct hfq_ent {
    char name[256];
    void *buf;       /* owned bytes (NULL after release) */
    int kept;
    char why[256];   /* malformed: the reason (type name) */
    int32_t *perm;   /* (in) owned, or NULL: act-order columns stored sorted by group (see do_awq_gptq) */
} hfq_ent;

typedef struct hfq_src {
    wsrc inner;
    hfq_config q;
    dtype out_dt;    /* dequantized weights */
    hfq_ent **ents;
    int n_ents, cap_ents;
    int n_block, n_deq; /* counts for the load log */
    size_t block_bytes;  /* bytes of the weights kept block-quantized / as fp8 */
    size_t block_ckpt;   /* bytes of the checkpoint tensors they were made from */
} hfq_src;

/* ---- the code grid ------------------------------------------------------ */

typedef struct qgrid {
    int64_t out, in, g, ng;
    int16_t *c;      /* (out, in) */
    int16_t *z;      /* (out, ng) */
    float *s;        /* (out, ng) */
} qgrid;

static void qgrid_free(qgrid *q)
{
    free(q->c), free(q->z), free(q->s);
    memset(q, 0, sizeof *q);
}

static int qgrid_alloc(qgrid *q, int64_t out, int64_t in, int64_t g)
{
    q->out = out, q->in = in, q->g = g > 0 ? g : in;
    q->ng = (in + q->g - 1) / q->g;
    q->c = malloc(sizeof(int16_t) * (size_t)(out * in));
    q->z = malloc(sizeof(int16_t) * (size_t)(out * q->ng));
    q->s = malloc(sizeof(float) * (size_t)(out * q->ng));
    if (!q->c || !q->z || !q->s) {
        qgrid_free(q);
        return -1;
    }
    return 0;
}

static int f16_ok(float v) { return v == 0.0f || (fabsf(v) >= 6.103515625e-05f && fabsf(v) <= 65504.0f); }

/* Which block type the grid maps onto (Q4_0 / Q4_1 / Q8_0), or -1. */
static int qgrid_target(const qgrid *q, int bits)
{
    if (q->in % 32 || q->g % 32) return -1;
    int all8 = 1;
    for (int64_t i = 0; i < q->out * q->ng; i++) {
        if (!f16_ok(q->s[i]) || !f16_ok(q->s[i] * (float)q->z[i])) return -1;
        if (q->z[i] != (bits == 4 ? 8 : 0)) all8 = 0;
    }
    if (bits == 4) return all8 ? KERN_TYPE_Q4_0 : KERN_TYPE_Q4_1;
    if (bits == 8) {
        for (int64_t i = 0; i < q->out * q->in; i++) {
            int v = q->c[i] - q->z[(i / q->in) * q->ng + (i % q->in) / q->g];
            if (v < -128 || v > 127) return -1;
        }
        return KERN_TYPE_Q8_0;
    }
    return -1;
}

static void *qgrid_blocks(const qgrid *q, int type)
{
    size_t bytes = kern_type_mat_bytes((kern_type)type, q->out, q->in);
    char *buf = malloc(bytes ? bytes : 1);
    if (!buf) return NULL;
    int64_t nb = q->in / 32;
    for (int64_t o = 0; o < q->out; o++)
        for (int64_t b = 0; b < nb; b++) {
            int64_t gi = o * q->ng + (b * 32) / q->g;
            const int16_t *c = q->c + o * q->in + b * 32;
            float s = q->s[gi];
            int z = q->z[gi];
            if (type == KERN_TYPE_Q8_0) {
                block_q8_0 *y = (block_q8_0 *)buf + o * nb + b;
                y->d = f32_to_f16(s);
                for (int j = 0; j < 32; j++) y->qs[j] = (int8_t)(c[j] - z);
            } else if (type == KERN_TYPE_Q4_0) {
                block_q4_0 *y = (block_q4_0 *)buf + o * nb + b;
                y->d = f32_to_f16(s);
                for (int j = 0; j < 16; j++) y->qs[j] = (uint8_t)(c[j] | c[j + 16] << 4);
            } else {
                block_q4_1 *y = (block_q4_1 *)buf + o * nb + b;
                y->d = f32_to_f16(s);
                y->m = f32_to_f16(-s * (float)z);
                for (int j = 0; j < 16; j++) y->qs[j] = (uint8_t)(c[j] | c[j + 16] << 4);
            }
        }
    return buf;
}

/* ---- helpers over the inner source -------------------------------------- */

typedef struct job {
    hfq_src *h;
    const char *base;  /* module name */
    hfq_ent *e;        /* e->why gets the first problem */
    const char *origin;
    const void *seen[8]; /* data of the checkpoint tensors counted in ckpt */
    int n_seen;
    size_t ckpt;         /* their bytes */
    int32_t *perm;       /* out: act-order column order of the blocks (owned; moves to the ent) */
} job;

/* Count t's bytes once into j->ckpt. */
static void count(job *j, const wsrc_tensor *t)
{
    for (int i = 0; i < j->n_seen; i++)
        if (j->seen[i] == t->data) return;
    if (j->n_seen < 8) j->seen[j->n_seen++] = t->data;
    j->ckpt += t->nbytes;
}

static int bad(job *j, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int bad(job *j, const char *fmt, ...)
{
    if (!j->e->why[0]) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(j->e->why, sizeof j->e->why, fmt, ap);
        va_end(ap);
    }
    return -1;
}

/* Tensor base + suffix; 1 found. */
static int get(job *j, const char *suffix, wsrc_tensor *t)
{
    char nm[300];
    snprintf(nm, sizeof nm, "%s.%s", j->base, suffix);
    int found = wsrc_find(&j->h->inner, nm, 0, NULL, t);
    if (found) count(j, t);
    return found;
}

/* Required tensor base.suffix of safetensors dtype `dt` (NULL: a float
 * type) and element count n (0: any); 0 or -1 (reason recorded). */
static int need(job *j, const char *suffix, const char *dt, int64_t n, wsrc_tensor *t)
{
    if (!get(j, suffix, t)) return bad(j, "%s quantized (missing tensor '%s.%s')", j->h->q.name, j->base, suffix);
    if (dt ? strcmp(t->type_name, dt) != 0 : !(t->type == DTYPE_F32 || t->type == DTYPE_F16 || t->type == DTYPE_BF16))
        return bad(j, "%s quantized ('%s.%s' is %s, expected %s)", j->h->q.name, j->base, suffix, t->type_name,
                   dt ? dt : "F32/F16/BF16");
    if (n && wsrc_numel(t) != n)
        return bad(j, "%s quantized ('%s.%s' has %lld elements, expected %lld)", j->h->q.name, j->base, suffix,
                   (long long)wsrc_numel(t), (long long)n);
    return 0;
}

/* An aligned copy of t's bytes. */
static void *raw(const wsrc_tensor *t)
{
    void *p = malloc(t->nbytes ? t->nbytes : 1);
    if (p) memcpy(p, t->data, t->nbytes);
    return p;
}

static float *floats(job *j, const wsrc_tensor *t)
{
    float *p = malloc(sizeof(float) * (size_t)(wsrc_numel(t) ? wsrc_numel(t) : 1));
    if (p && wsrc_read(&j->h->inner, t, p, DTYPE_F32)) {
        free(p);
        return NULL;
    }
    return p;
}

/* f32 (out, in) -> the output dtype (in place ownership: returns the buffer). */
static void *to_out_dt(hfq_src *h, float *w, int64_t n)
{
    if (h->out_dt == DTYPE_F32) return w;
    uint16_t *b = malloc(sizeof(uint16_t) * (size_t)n);
    if (b) dtype_from_f32(b, h->out_dt, w, (size_t)n);
    free(w);
    return b;
}

/* ---- formats ------------------------------------------------------------ */

static const int k_awq_inv[8] = {0, 4, 1, 5, 2, 6, 3, 7}; /* column c%8 -> nibble */

static int at_load_skips(const char *base);

/* The columns of an act-order g_idx sorted by group (stable): perm[c] is
 * the input column at sorted position c, so sorted column c is in group
 * c / g -- when every group 0..ng-2 has exactly g members and the last
 * the rest; else NULL (the weight is dequantized). */
static int32_t *act_order_perm(const int32_t *gi, int64_t in, int64_t g, int64_t ng)
{
    if (g <= 0 || ng != (in + g - 1) / g) return NULL;
    int64_t *cnt = calloc((size_t)ng + 1, sizeof *cnt);
    int32_t *perm = malloc(sizeof(int32_t) * (size_t)in);
    int ok = cnt && perm;
    for (int64_t i = 0; ok && i < in; i++) {
        if (gi[i] < 0 || gi[i] >= ng) ok = 0;
        else cnt[gi[i] + 1]++;
    }
    for (int64_t k = 0; ok && k < ng; k++)
        if (cnt[k + 1] != (k + 1 < ng ? g : in - (ng - 1) * g)) ok = 0;
    if (ok) {
        for (int64_t k = 0; k < ng; k++) cnt[k + 1] += cnt[k]; /* group starts */
        for (int64_t i = 0; i < in; i++) perm[cnt[gi[i]]++] = (int32_t)i;
    }
    free(cnt);
    if (!ok) free(perm);
    return ok ? perm : NULL;
}

/* AWQ and GPTQ: *type and the buffer, or NULL (reason in j->e->why).  An
 * act-order GPTQ weight (g_idx not i / g) whose groups all have g
 * columns keeps its blocks with the columns sorted by group (j->perm: the
 * kernels gather x[perm]); routers stay dequantized (the loader reads
 * them as float). */
static void *do_awq_gptq(job *j, int64_t out, int64_t in, int *type)
{
    const hfq_config *q = &j->h->q;
    int awq = q->method == HFQ_AWQ, bits = awq ? 4 : q->bits, pf = 32 / bits;
    int64_t g = q->group_size > 0 ? q->group_size : in;
    int64_t ng = (in + g - 1) / g;
    wsrc_tensor tw, tz, ts, tg;
    int has_z = 1, has_g = 0;
    if (awq) {
        if (out % 8) return bad(j, "awq (out_features %lld not a multiple of 8)", (long long)out), NULL;
        if (need(j, "qweight", "I32", in * out / 8, &tw) || need(j, "qzeros", "I32", ng * out / 8, &tz)) return NULL;
    } else {
        if (in % pf) return bad(j, "gptq (in_features %lld not a multiple of %d)", (long long)in, pf), NULL;
        if (need(j, "qweight", "I32", in / pf * out, &tw)) return NULL;
        has_z = get(j, "qzeros", &tz);
        if (has_z && (out % pf || need(j, "qzeros", "I32", ng * (out / pf), &tz))) {
            if (out % pf) bad(j, "gptq (out_features %lld not a multiple of %d)", (long long)out, pf);
            return NULL;
        }
        has_g = get(j, "g_idx", &tg);
        if (has_g && need(j, "g_idx", "I32", in, &tg)) return NULL;
    }
    if (need(j, "scales", NULL, ng * out, &ts)) return NULL;
    if (tw.shape[0] != (awq ? in : in / pf))
        return bad(j, "%s ('%s.qweight' has %lld rows, expected %lld)", q->name, j->base, (long long)tw.shape[0],
                   (long long)(awq ? in : in / pf)), NULL;
    int32_t *qw = raw(&tw), *qz = has_z ? raw(&tz) : NULL, *gi = has_g ? raw(&tg) : NULL;
    float *s = floats(j, &ts);
    void *res = NULL;
    qgrid gr = {0};
    if (!qw || (has_z && !qz) || (has_g && !gi) || !s) goto done;
    int trivial = 1;
    for (int64_t i = 0; has_g && i < in; i++)
        if (gi[i] != i / g) trivial = 0;
    int32_t *perm = !trivial && !awq && bits != 2 && !at_load_skips(j->base) ? act_order_perm(gi, in, g, ng) : NULL;
    if ((trivial || perm) && bits != 2 && !qgrid_alloc(&gr, out, in, g)) {
        uint32_t mask = (1u << bits) - 1u;
        for (int64_t c = 0; c < in; c++) {
            const int64_t i = perm ? perm[c] : c; /* the input column stored at c */
            for (int64_t o = 0; o < out; o++) {
                uint32_t v = awq ? (uint32_t)qw[i * (out / 8) + o / 8] >> (4 * k_awq_inv[o % 8])
                                 : (uint32_t)qw[(i / pf) * out + o] >> (bits * (i % pf));
                gr.c[o * in + c] = (int16_t)(v & mask);
            }
        }
        for (int64_t k = 0; k < ng; k++)
            for (int64_t o = 0; o < out; o++) {
                int z = 1 << (bits - 1);
                if (awq) z = (int)(((uint32_t)qz[k * (out / 8) + o / 8] >> (4 * k_awq_inv[o % 8])) & 15u);
                else if (has_z)
                    z = (int)(((uint32_t)qz[k * (out / pf) + o / pf] >> (bits * (o % pf))) & mask) + (q->zeros_v2 ? 0 : 1);
                gr.z[o * ng + k] = (int16_t)z;
                gr.s[o * ng + k] = s[k * out + o];
            }
        int t = qgrid_target(&gr, bits);
        if (t >= 0 && (res = qgrid_blocks(&gr, t))) {
            *type = t;
            j->perm = perm;
            perm = NULL;
            goto done;
        }
    }
    free(perm);
    float *w = malloc(sizeof(float) * (size_t)(out * in));
    if (!w) goto done;
    int rc;
    if (awq) {
        hfq_awq a = {qw, qz, s, DTYPE_F32, in, out, g};
        rc = hfquant_awq_dequant(w, &a);
    } else {
        hfq_gptq p = {qw, qz, s, DTYPE_F32, gi, in, out, bits, g, ng, q->zeros_v2};
        rc = hfquant_gptq_dequant(w, &p);
    }
    if (rc) {
        free(w);
        bad(j, "%s (bad codes or g_idx)", q->name);
        goto done;
    }
    res = to_out_dt(j->h, w, out * in);
    *type = (int)j->h->out_dt;
done:
    qgrid_free(&gr);
    free(qw), free(qz), free(gi), free(s);
    return res;
}

/* A scale grid for an (out, in) weight from a scale tensor of n elements:
 * per tensor (1), per channel (out), per group (out * ceil(in / g)) or
 * blocks (ceil(out / bo) * ceil(in / bi)). */
static int scale_grid(job *j, const wsrc_tensor *ts, int64_t out, int64_t in, int64_t *bo, int64_t *bi)
{
    const hfq_config *q = &j->h->q;
    int64_t n = wsrc_numel(ts);
    if (q->block_out > 0) {
        *bo = q->block_out, *bi = q->block_in;
    } else if (n == 1) {
        *bo = out, *bi = in;
    } else if (n == out) {
        *bo = 1, *bi = in;
    } else if (q->group_size > 0) {
        *bo = 1, *bi = q->group_size;
    } else {
        return bad(j, "%s ('%s' has %lld scales for a %lld x %lld weight)", q->name, ts->name, (long long)n,
                   (long long)out, (long long)in);
    }
    int64_t want = ((out + *bo - 1) / *bo) * ((in + *bi - 1) / *bi);
    if (n != want)
        return bad(j, "%s ('%s' has %lld scales, expected %lld)", q->name, ts->name, (long long)n, (long long)want);
    return 0;
}

/* fp8 codes (out, in) with the scale grid s (blocks bo x bi) as
 * KERN_TYPE_F8_B128 rows (one f32 scale per 128 inputs, codes as stored);
 * NULL when in is not a multiple of 128, a scale column would cut a
 * 128-block (bi < in and bi % 128 != 0), a scale is not finite and
 * positive-or-zero below 2^120 (the AVX2 decode multiplies it by 2^8), or
 * out of memory: the caller dequantizes instead. */
static void *fp8_blocks(const uint8_t *qb, int64_t out, int64_t in, const float *s, int64_t bo, int64_t bi)
{
    if (in % QK_F8B || (bi < in && bi % QK_F8B)) return NULL;
    int64_t cols = (in + bi - 1) / bi, nb = in / QK_F8B;
    for (int64_t i = 0, ns = ((out + bo - 1) / bo) * cols; i < ns; i++)
        if (!(fabsf(s[i]) < 0x1p120f)) return NULL;
    block_f8b *b = malloc(sizeof(block_f8b) * (size_t)(out * nb));
    if (!b) return NULL;
    for (int64_t o = 0; o < out; o++)
        for (int64_t k = 0; k < nb; k++) {
            block_f8b *d = b + o * nb + k;
            d->d = s[(o / bo) * cols + (k * QK_F8B) / bi];
            memcpy(d->q, qb + o * in + k * QK_F8B, QK_F8B);
        }
    return b;
}

/* int8 (compressed-tensors int-quantized, w8a8_int8), fp8 and
 * pack-quantized weights on a scale grid. */
static void *do_grid(job *j, const wsrc_tensor *tw, int packed, int64_t out, int64_t in, int *type)
{
    const hfq_config *q = &j->h->q;
    int fp8 = !packed && !strcmp(tw->type_name, "F8_E4M3");
    int bits = packed ? q->bits : 8;
    wsrc_tensor ts, tz;
    const char *sname = "weight_scale";
    if (fp8 && !get(j, "weight_scale", &ts) && get(j, "weight_scale_inv", &ts)) sname = "weight_scale_inv";
    if (need(j, sname, NULL, 0, &ts)) return NULL;
    int64_t bo = 1, bi = 1;
    if (scale_grid(j, &ts, out, in, &bo, &bi)) return NULL;
    int has_zp = !fp8 && !packed && get(j, "weight_zero_point", &tz);
    if (has_zp && (need(j, "weight_zero_point", "I8", wsrc_numel(&ts), &tz))) return NULL;
    int64_t pf = 32 / bits, words = (in + pf - 1) / pf;
    if (packed ? (wsrc_numel(tw) != out * words || strcmp(tw->type_name, "I32"))
               : (wsrc_numel(tw) != out * in || tw->ndim != 2 || tw->shape[0] != out))
        return bad(j, "%s ('%s' has the wrong shape or dtype %s for [%lld, %lld])", q->name, tw->name, tw->type_name,
                   (long long)out, (long long)in), NULL;
    void *qb = raw(tw);
    int8_t *zp = has_zp ? raw(&tz) : NULL;
    float *s = floats(j, &ts);
    void *res = NULL;
    qgrid gr = {0};
    if (!qb || !s || (has_zp && !zp)) goto done;
    hfq_scales sc = {s, DTYPE_F32, bo, bi};
    if (!fp8 && !has_zp && bo >= 1 && (bi >= in || bi % 32 == 0) && bits != 2 &&
        !qgrid_alloc(&gr, out, in, bi >= in ? in : bi)) {
        int64_t cols = (in + bi - 1) / bi;
        for (int64_t o = 0; o < out; o++) {
            for (int64_t i = 0; i < in; i++) {
                if (packed)
                    gr.c[o * in + i] =
                        (int16_t)(((uint32_t)((int32_t *)qb)[o * words + i / pf] >> ((i % pf) * bits)) & ((1u << bits) - 1u));
                else
                    gr.c[o * in + i] = ((int8_t *)qb)[o * in + i];
            }
            for (int64_t k = 0; k < gr.ng; k++) {
                gr.s[o * gr.ng + k] = s[(o / bo) * cols + (k * gr.g) / bi];
                gr.z[o * gr.ng + k] = packed ? (int16_t)(1 << (bits - 1)) : 0;
            }
        }
        int t = qgrid_target(&gr, bits);
        if (t >= 0 && (res = qgrid_blocks(&gr, t))) {
            *type = t;
            goto done;
        }
    }
    if (fp8 && (res = fp8_blocks(qb, out, in, s, bo, bi))) {
        *type = KERN_TYPE_F8_B128;
        goto done;
    }
    float *w = malloc(sizeof(float) * (size_t)(out * in));
    if (!w) goto done;
    int rc = fp8 ? hfquant_fp8_dequant(w, qb, out, in, &sc)
             : packed ? hfquant_packed_dequant(w, qb, out, in, bits, &sc)
                      : hfquant_int8_dequant(w, qb, out, in, &sc, zp);
    if (rc) {
        free(w);
        bad(j, "%s (cannot dequantize)", q->name);
        goto done;
    }
    res = to_out_dt(j->h, w, out * in);
    *type = (int)j->h->out_dt;
done:
    qgrid_free(&gr);
    free(qb), free(zp), free(s);
    return res;
}

/* Rows [r0, r1) of a quantize-at-load: W8A8 (Q8_0 blocks into q8) or
 * fp8 (codes into f8, or rounded in place in w). */
typedef struct qal_job {
    const kern_type_traits *tr; /* W8A8: Q8_0's; NULL for fp8 */
    float *w;
    int64_t in, r0, r1;
    char *q8;
    block_f8b *f8;
} qal_job;

static void qal_rows(const qal_job *J)
{
    const int64_t in = J->in;
    if (J->tr) {
        size_t rb = kern_type_row_bytes(KERN_TYPE_Q8_0, in);
        for (int64_t o = J->r0; o < J->r1; o++) J->tr->row_from_f32(J->q8 + rb * (size_t)o, J->w + o * in, in);
        return;
    }
    /* fp8: per-row scale amax / 448, e4m3 codes */
    const int64_t nb = in / QK_F8B;
    for (int64_t o = J->r0; o < J->r1; o++) {
        float *r = J->w + o * in, amax = 0.0f;
        for (int64_t i = 0; i < in; i++) amax = fmaxf(amax, fabsf(r[i]));
        float sc = amax > 0.0f ? amax / 448.0f : 1.0f;
        if (J->f8) {
            for (int64_t k = 0; k < nb; k++) {
                block_f8b *d = J->f8 + o * nb + k;
                d->d = sc;
                for (int i = 0; i < QK_F8B; i++) d->q[i] = f32_to_f8e4m3(r[k * QK_F8B + i] / sc);
            }
        } else {
            for (int64_t i = 0; i < in; i++) r[i] = f8e4m3_to_f32(f32_to_f8e4m3(r[i] / sc)) * sc;
        }
    }
}

static void *qal_thread(void *arg)
{
    qal_rows(arg);
    return NULL;
}

#define QAL_MAX_THREADS 64
/* The out rows of J split over the load's pack threads (kern_pack_threads:
 * the compute threads unless --model-loader-extra-config says otherwise)
 * for a weight of >= 1M values; each row is one thread's, so the bytes are
 * the one-thread bytes.  A thread that cannot start leaves its rows to the
 * caller. */
static void qal_run(qal_job J, int64_t out)
{
    int nth = kern_pack_threads();
    if (nth > QAL_MAX_THREADS) nth = QAL_MAX_THREADS;
    if (nth > out) nth = (int)out;
    if (nth < 1 || out * J.in < ((int64_t)1 << 20)) nth = 1;
    qal_job jobs[QAL_MAX_THREADS];
    pthread_t th[QAL_MAX_THREADS];
    int started[QAL_MAX_THREADS] = {0};
    for (int i = 0; i < nth; i++) {
        jobs[i] = J;
        jobs[i].r0 = out * i / nth;
        jobs[i].r1 = out * (i + 1) / nth;
    }
    for (int i = 1; i < nth; i++) started[i] = pthread_create(&th[i], NULL, qal_thread, &jobs[i]) == 0;
    qal_rows(&jobs[0]);
    for (int i = 1; i < nth; i++) {
        if (started[i]) pthread_join(th[i], NULL);
        else qal_rows(&jobs[i]);
    }
}

/* Quantize-at-load of an unquantized weight (rows split over threads,
 * qal_run). */
static void *do_at_load(job *j, const wsrc_tensor *t, int64_t out, int64_t in, int *type)
{
    float *w = floats(j, t);
    if (!w) return bad(j, "cannot read for %s", j->h->q.name), NULL;
    if (j->h->q.method == HFQ_W8A8_INT8) {
        const kern_type_traits *tr = kern_type_get(KERN_TYPE_Q8_0);
        if (in % 32 || !tr->row_from_f32) {
            /* stays as it is */
            free(w);
            return NULL;
        }
        size_t rb = kern_type_row_bytes(KERN_TYPE_Q8_0, in);
        char *b = malloc(rb * (size_t)out);
        if (b) qal_run((qal_job){.tr = tr, .w = w, .in = in, .q8 = b}, out);
        free(w);
        *type = KERN_TYPE_Q8_0;
        return b;
    }
    /* fp8: per-row scale amax / 448, e4m3 codes: kept as codes
     * (KERN_TYPE_F8_B128, the row's scale in each block) when in % 128
     * == 0, else the dequantized values */
    if (in % QK_F8B == 0) {
        int64_t nb = in / QK_F8B;
        block_f8b *b = malloc(sizeof(block_f8b) * (size_t)(out * nb));
        if (!b) {
            free(w);
            return NULL;
        }
        qal_run((qal_job){.w = w, .in = in, .f8 = b}, out);
        free(w);
        *type = KERN_TYPE_F8_B128;
        return b;
    }
    qal_run((qal_job){.w = w, .in = in}, out);
    *type = t->type == DTYPE_F32 ? DTYPE_F32 : DTYPE_BF16;
    if (*type == DTYPE_F32) return w;
    uint16_t *b = malloc(sizeof(uint16_t) * (size_t)(out * in));
    if (b) dtype_from_f32(b, DTYPE_BF16, w, (size_t)(out * in));
    free(w);
    return b;
}

/* ---- the source --------------------------------------------------------- */

static hfq_ent *ent_new(hfq_src *h, const char *name)
{
    if (h->n_ents == h->cap_ents) {
        int nc = h->cap_ents ? h->cap_ents * 2 : 64;
        hfq_ent **g = realloc(h->ents, sizeof *g * (size_t)nc);
        if (!g) return NULL;
        h->ents = g, h->cap_ents = nc;
    }
    hfq_ent *e = calloc(1, sizeof *e);
    if (!e) return NULL;
    snprintf(e->name, sizeof e->name, "%s", name);
    h->ents[h->n_ents++] = e;
    return e;
}

static hfq_ent *ent_of(const hfq_src *h, const void *priv)
{
    for (int i = 0; i < h->n_ents; i++)
        if (h->ents[i] == priv) return h->ents[i];
    return NULL;
}

/* Modules never quantized at load: embeddings, lm_head, MoE routers. */
static int at_load_skips(const char *base)
{
    static const char *const tails[] = {"embed_tokens", "lm_head", "mlp.gate", "router", "router.layer"};
    size_t lb = strlen(base);
    for (size_t i = 0; i < sizeof tails / sizeof tails[0]; i++) {
        size_t lt = strlen(tails[i]);
        if (lb >= lt && !strcmp(base + lb - lt, tails[i]) && (lb == lt || base[lb - lt - 1] == '.')) return 1;
    }
    return 0;
}

static int hq_find(void *self, const char *name, int ndim, const int64_t *expect, wsrc_tensor *out)
{
    hfq_src *h = self;
    size_t ln = strlen(name);
    if (ndim != 2 || !expect || ln < 8 || ln > 240 || strcmp(name + ln - 7, ".weight"))
        return wsrc_find(&h->inner, name, ndim, expect, out);
    char base[256];
    memcpy(base, name, ln - 7);
    base[ln - 7] = 0;
    int64_t o = expect[0], in = expect[1];
    wsrc_tensor t, aux;
    int have = wsrc_find(&h->inner, name, ndim, expect, &t);
    const hfq_config *q = &h->q;
    int kind = 0; /* 1 awq/gptq, 2 int8/fp8 grid, 3 packed, 4 at load */
    job j = {h, base, NULL, NULL, {0}, 0, 0, NULL};
    if (q->method == HFQ_AWQ || q->method == HFQ_GPTQ) {
        if (!have && wsrc_find(&h->inner, (snprintf(base + ln - 7, 16, ".qweight"), base), 0, NULL, &aux)) {
            kind = 1;
            j.origin = aux.origin;
        }
        base[ln - 7] = 0;
    } else if (q->method == HFQ_CT && !have) {
        if (wsrc_find(&h->inner, (snprintf(base + ln - 7, 16, ".weight_packed"), base), 0, NULL, &aux)) {
            kind = 3;
            t = aux;
            j.origin = aux.origin;
        }
        base[ln - 7] = 0;
    } else if (have && (t.type < 0 || t.type == DTYPE_F8_E4M3) && !q->at_load &&
               (!strcmp(t.type_name, "I8") || !strcmp(t.type_name, "F8_E4M3"))) {
        kind = 2;
        j.origin = t.origin;
    } else if (have && q->at_load && t.type >= 0 && t.type < KERN_TYPE_FLOAT_COUNT && t.type != DTYPE_F8_E4M3 &&
               t.type != DTYPE_F8_E5M2 && !at_load_skips(base) && !hfq_ignored(q, base) && t.ndim == 2 &&
               t.shape[0] == o && t.shape[1] == in) {
        kind = 4;
        j.origin = t.origin;
    }
    if (!kind) {
        if (have) *out = t;
        return have;
    }
    if (kind != 1) count(&j, &t); /* the codes (AWQ / GPTQ's qweight comes through get) */
    hfq_ent *e = ent_new(h, name);
    if (!e) return have;
    j.e = e;
    int type = -1;
    void *buf = kind == 1   ? do_awq_gptq(&j, o, in, &type)
                : kind == 4 ? do_at_load(&j, &t, o, in, &type)
                            : do_grid(&j, &t, kind == 3, o, in, &type);
    memset(out, 0, sizeof *out);
    out->name = e->name;
    out->ndim = 2;
    out->shape[0] = o, out->shape[1] = in;
    out->origin = j.origin;
    out->priv = e;
    if (!buf) {
        if (kind == 4 && !e->why[0]) return wsrc_find(&h->inner, name, ndim, expect, out);
        if (!e->why[0]) snprintf(e->why, sizeof e->why, "%s quantized (out of memory)", q->name);
        log_error("%s: %s", name, e->why);
        out->type = -1;
        out->type_name = e->why;
        return 1;
    }
    e->buf = buf;
    e->perm = j.perm;
    out->perm = e->perm;
    out->perm_n = e->perm ? in : 0;
    out->type = type;
    out->type_name = kern_type_get((kern_type)type)->name;
    out->data = buf;
    out->nbytes = kern_type_mat_bytes((kern_type)type, o, in);
    if (type >= KERN_TYPE_FLOAT_COUNT) {
        h->n_block++;
        h->block_bytes += out->nbytes;
        h->block_ckpt += j.ckpt;
    } else {
        h->n_deq++;
    }
    return 1;
}

/* Row-major rows of n floats stored with columns in perm order back in
 * input order (dst row c' = perm[c] <- c); -1 out of memory. */
static int unpermute_rows(float *dst, int64_t rows, int64_t n, const int32_t *perm)
{
    float *tmp = malloc(sizeof(float) * (size_t)n);
    if (!tmp) return -1;
    for (int64_t r = 0; r < rows; r++) {
        memcpy(tmp, dst + r * n, sizeof(float) * (size_t)n);
        for (int64_t c = 0; c < n; c++) dst[r * n + perm[c]] = tmp[c];
    }
    free(tmp);
    return 0;
}

static int hq_read(void *self, const wsrc_tensor *t, void *dst, dtype dst_dt)
{
    hfq_src *h = self;
    hfq_ent *e = ent_of(h, t->priv);
    if (!e) return wsrc_read(&h->inner, t, dst, dst_dt);
    if (!e->perm) return wsrc_convert(dst, dst_dt, t->data, t->type, (size_t)wsrc_numel(t));
    /* act-order blocks: through f32, columns back in input order */
    if (t->perm_n != t->shape[1]) return -1;
    size_t n = (size_t)wsrc_numel(t);
    float *f = dst_dt == DTYPE_F32 ? dst : malloc(sizeof(float) * n);
    if (!f) return -1;
    int rc = wsrc_convert(f, DTYPE_F32, t->data, t->type, n);
    if (!rc) rc = unpermute_rows(f, t->shape[0], t->shape[1], e->perm);
    if (!rc && f != dst) rc = wsrc_convert(dst, dst_dt, f, DTYPE_F32, n);
    if (f != dst) free(f);
    return rc;
}

static void hq_bind_rows(void *self, wsrc_tensor *t)
{
    hfq_src *h = self;
    if (h->inner.ops->bind_rows) h->inner.ops->bind_rows(h->inner.self, t);
}

static void hq_read_row(void *self, const wsrc_tensor *t, int64_t r, float *dst)
{
    hfq_src *h = self;
    if (ent_of(h, t->priv)) {
        size_t rb = kern_type_row_bytes((kern_type)t->type, t->shape[1]);
        (void)wsrc_convert(dst, DTYPE_F32, (const char *)t->data + (size_t)r * rb, t->type, (size_t)t->shape[1]);
        hfq_ent *e = ent_of(h, t->priv);
        if (e->perm && (t->perm_n != t->shape[1] || unpermute_rows(dst, 1, t->shape[1], e->perm))) {
            log_error("%s: cannot read an act-order row", t->name);
            memset(dst, 0, sizeof(float) * (size_t)t->shape[1]);
        }
        return;
    }
    h->inner.ops->read_row(h->inner.self, t, r, dst);
}

static void hq_keep(void *self, const wsrc_tensor *t)
{
    hfq_src *h = self;
    hfq_ent *e = ent_of(h, t->priv);
    if (e) e->kept = 1;
    else wsrc_keep(&h->inner, t);
}

static void hq_release(void *self)
{
    hfq_src *h = self;
    if (h->n_block + h->n_deq)
        log_info("%s checkpoint: %d weight(s) kept block-quantized, %d dequantized to %s (block-quantized: %zu "
                 "bytes from %zu bytes of checkpoint tensors)", h->q.name, h->n_block, h->n_deq,
                 dtype_name(h->out_dt), h->block_bytes, h->block_ckpt);
    for (int i = 0; i < h->n_ents; i++)
        if (!h->ents[i]->kept) {
            free(h->ents[i]->buf);
            free(h->ents[i]->perm);
            h->ents[i]->buf = NULL;
            h->ents[i]->perm = NULL;
        }
    wsrc_release_unused(&h->inner);
}

static void hq_close(void *self)
{
    hfq_src *h = self;
    for (int i = 0; i < h->n_ents; i++) {
        free(h->ents[i]->buf);
        free(h->ents[i]->perm);
        free(h->ents[i]);
    }
    free(h->ents);
    wsrc_close(&h->inner);
    free(h);
}

static const wsrc_ops hq_ops = {
    .kind = "safetensors (Hugging Face quantized)",
    .find = hq_find,
    .read = hq_read,
    .bind_rows = hq_bind_rows,
    .read_row = hq_read_row,
    .keep = hq_keep,
    .release_unused = hq_release,
    .close = hq_close,
};

/* Read DIR/NAME (NULL when absent). */
static char *read_json(const char *path, const char *name, size_t *len)
{
    char p[4096];
    snprintf(p, sizeof p, "%s/%s", path, name);
    return fileio_read(p, 16u << 20, len);
}

/* Wrap the open source s (its ops and self move into the wrapper) with
 * the quantized view of q; 0, or -1 (s closed) with the message in err. */
static int wrap(wsrc *s, const hfq_config *q, dtype out_dt, const char *path, char *err, size_t errlen)
{
    hfq_src *h = calloc(1, sizeof *h);
    if (!h) {
        wsrc_close(s);
        errmsg_set(err, errlen, "out of memory");
        return -1;
    }
    h->inner = *s;
    h->q = *q;
    h->out_dt = out_dt;
    s->ops = &hq_ops;
    s->self = h;
    log_info("%s: %s%s (bits %d, group %d%s)", path, q->name, q->at_load ? " at load" : " checkpoint", q->bits,
             q->group_size, q->desc_act ? ", act-order" : "");
    return 0;
}

int wsrc_open_hfq(wsrc *s, const char *path, const char *flag, char *err, size_t errlen)
{
    size_t len = 0;
    char *text = read_json(path, "config.json", &len);
    hfq_config q;
    int rc = hfq_config_parse(&q, text, len, flag, err, errlen);
    if (!rc && q.method == HFQ_NONE && text && !strstr(text, "\"quantization_config\"")) {
        /* older GPTQ / AWQ folders keep it in quantize_config.json */
        size_t l2;
        char *t2 = read_json(path, "quantize_config.json", &l2);
        if (t2) rc = hfq_config_parse(&q, t2, l2, flag, err, errlen);
        free(t2);
    }
    dtype out_dt = DTYPE_F32; /* dequantized weights: the checkpoint's torch_dtype */
    json_t *root = text ? json_loadb(text, len, 0, NULL) : NULL;
    const char *td = json_string_value(json_object_get(root, "torch_dtype"));
    if (td && !strcmp(td, "bfloat16")) out_dt = DTYPE_BF16;
    else if (td && !strcmp(td, "float16")) out_dt = DTYPE_F16;
    json_decref(root);
    free(text);
    if (rc) return -1;
    if (wsrc_open_safetensors(s, path, err, errlen)) return -1;
    if (q.method == HFQ_NONE) return 0;
    return wrap(s, &q, out_dt, path, err, errlen);
}

int wsrc_wrap_hfq_at_load(wsrc *s, const char *flag, char *err, size_t errlen)
{
    hfq_config q;
    if (!flag || !*flag) return 0;
    if (hfq_config_parse(&q, NULL, 0, flag, err, errlen)) return -1;
    if (q.method == HFQ_NONE) return 0;
    if (!q.at_load) {
        errmsg_set(err, errlen, "--quantization %s needs a quantized checkpoint (dummy weights have none)", flag);
        return -1;
    }
    return wrap(s, &q, DTYPE_F32, "dummy weights", err, errlen);
}
