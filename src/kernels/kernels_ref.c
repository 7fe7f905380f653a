/* kernels_ref — portable scalar reference of every kernel.
 *
 * DESIGN: written for clarity, not speed.  Accumulation is f32 in input
 * order (attention uses a two-pass softmax over the full score row), so the
 * SIMD variants are checked against these with a relative tolerance. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels.h"
#include "kernels/quant_dot.h"

void kern_ref_matmul(float *y, const float *x, int m, const kern_mat *w, const float *bias,
                     int ith, int nth, void *scratch)
{
    if (w->qtype) { /* block-quantized weight: the scalar int8 dots */
        quant_matmul(y, x, m, w, bias, ith, nth, scratch, KERN_ISA_SCALAR);
        return;
    }
    int lo, hi;
    kern_split(w->n, ith, nth, &lo, &hi);
    for (int r = 0; r < m; r++) {
        const float *xr = x + (size_t)r * w->k;
        for (int j = lo; j < hi; j++) {
            float acc = 0.0f;
            if (w->dt == DTYPE_F32) {
                const float *wr = (const float *)w->data + (size_t)j * w->k;
                for (int i = 0; i < w->k; i++) acc += xr[i] * wr[i];
            } else {
                const uint16_t *wr = (const uint16_t *)w->data + (size_t)j * w->k;
                for (int i = 0; i < w->k; i++) acc += xr[i] * bf16_to_f32(wr[i]);
            }
            y[(size_t)r * w->n + j] = acc + (bias ? bias[j] : 0.0f);
        }
    }
}

static float kv_elem(const void *cache, dtype dt, size_t idx, float scale)
{
    if (dt == DTYPE_F32) return ((const float *)cache)[idx];
    if (dt == DTYPE_F8_E4M3) return f8e4m3_to_f32(((const uint8_t *)cache)[idx]) * (scale > 0.0f ? scale : 1.0f);
    if (dt == DTYPE_F8_E5M2) return f8e5m2_to_f32(((const uint8_t *)cache)[idx]) * (scale > 0.0f ? scale : 1.0f);
    if (dt == DTYPE_I8) return (float)((const int8_t *)cache)[idx] * scale; /* scale: the token-head's */
    return bf16_to_f32(((const uint16_t *)cache)[idx]);
}

void kern_ref_attention(const kern_attn_args *a, int ith, int nth, void *scratch)
{
    float *scores = scratch; /* (n_kv) */
    int group = a->n_head / a->n_kv_head;
    size_t row = (size_t)a->n_kv_head * a->head_dim;
    int lo, hi;
    kern_split(a->n_q * a->n_head, ith, nth, &lo, &hi);
    for (int t = lo; t < hi; t++) {
        int i = t / a->n_head, h = t % a->n_head, kh = h / group;
        int pos = a->n_kv - a->n_q + i;
        int start = kern_attn_first_key(a, pos);
        const float *q = a->q + (size_t)i * a->q_stride + (size_t)h * a->head_dim;
        float mx = -INFINITY;
        const int i8 = a->kv_dt == DTYPE_I8; /* per token-head scales */
        for (int p = start; p <= pos; p++) {
            size_t base = (size_t)a->slots[p] * row + (size_t)kh * a->head_dim;
            float ksc = i8 ? a->k_tok_scale[(size_t)a->slots[p] * a->n_kv_head + kh] : a->k_scale;
            float s = 0.0f;
            for (int d = 0; d < a->head_dim; d++) s += q[d] * kv_elem(a->k_cache, a->kv_dt, base + d, ksc);
            s *= a->scale;
            if (a->softcap > 0.0f) s = a->softcap * tanhf(s / a->softcap);
            if (!kern_attn_tree_sees(a, pos, p)) s = -INFINITY; /* not an ancestor (tree) */
            scores[p] = s;
            if (s > mx) mx = s;
        }
        float sum = 0.0f;
        for (int p = start; p <= pos; p++) {
            scores[p] = scores[p] == -INFINITY ? 0.0f : expf(scores[p] - mx);
            sum += scores[p];
        }
        float *o = a->out + (size_t)i * a->out_stride + (size_t)h * a->head_dim;
        for (int d = 0; d < a->head_dim; d++) o[d] = 0.0f;
        for (int p = start; p <= pos; p++) {
            size_t base = (size_t)a->slots[p] * row + (size_t)kh * a->head_dim;
            float wgt = scores[p] / sum;
            float vsc = i8 ? a->v_tok_scale[(size_t)a->slots[p] * a->n_kv_head + kh] : a->v_scale;
            for (int d = 0; d < a->head_dim; d++) o[d] += wgt * kv_elem(a->v_cache, a->kv_dt, base + d, vsc);
        }
    }
}

float kern_attn_quant_q_i8(int8_t *qi, const float *q, float scale, int hd)
{
    float amax = 0.0f;
    for (int d = 0; d < hd; d++) {
        float v = fabsf(q[d] * scale);
        if (v > amax) amax = v;
    }
    float qs = amax / 127.0f;
    for (int d = 0; d < hd; d++) {
        float t = qs > 0.0f ? rintf(q[d] * scale / qs) : 0.0f; /* half to even */
        qi[d] = (int8_t)(t > 127.0f ? 127 : t < -127.0f ? -127 : t == t ? (int)t : 0);
    }
    return qs;
}

int kern_attn_i8qdot_on(void)
{
    const char *e = getenv("SGLC_KV_INT8_QDOT");
    return !(e && e[0] == '0' && e[1] == 0);
}

int kern_attn_i8pdot_on(void)
{
    const char *e = getenv("SGLC_KV_INT8_PDOT");
    return !(e && e[0] == '0' && e[1] == 0);
}

float kern_attn_quant_p_u8(uint8_t *pu, const float *p, int n)
{
    float mx = 0.0f;
    for (int j = 0; j < n; j++)
        if (p[j] > mx) mx = p[j];
    const float ps = mx / 255.0f;
    for (int j = 0; j < n; j++) {
        float t = ps > 0.0f ? rintf(p[j] / ps) : 0.0f; /* half to even; p >= 0 */
        pu[j] = (uint8_t)(t > 255.0f ? 255 : t > 0.0f ? (int)t : 0);
    }
    return ps;
}

/* kern_ref_attention_i8qp's P.V: one row's keys [start, pos] in blocks of KB_PV from start,
 * online softmax with the kernel's order of operations (see kernels.h). */
#define KB_PV 16
static void ref_pv_u8(const kern_attn_args *a, const float *scores, int start, int pos, int kh, float *o)
{
    size_t row = (size_t)a->n_kv_head * a->head_dim;
    float mx = -INFINITY, sum = 0.0f;
    for (int d = 0; d < a->head_dim; d++) o[d] = 0.0f;
    for (int p0 = start; p0 <= pos; p0 += KB_PV) {
        int nk = pos + 1 - p0 < KB_PV ? pos + 1 - p0 : KB_PV;
        float bm = -INFINITY;
        for (int j = 0; j < nk; j++)
            if (scores[p0 + j] > bm) bm = scores[p0 + j];
        if (bm == -INFINITY) continue; /* nothing visible in this block */
        float mn = mx > bm ? mx : bm, alpha = mx == -INFINITY ? 1.0f : expf(mx - mn);
        mx = mn;
        float p[KB_PV], pv[KB_PV], bs = 0.0f;
        uint8_t pu[KB_PV];
        for (int j = 0; j < nk; j++) {
            p[j] = scores[p0 + j] == -INFINITY ? 0.0f : expf(scores[p0 + j] - mx);
            bs += p[j];
            pv[j] = p[j] * a->v_tok_scale[(size_t)a->slots[p0 + j] * a->n_kv_head + kh]; /* V's scale */
        }
        sum = sum * alpha + bs;
        const float ps = kern_attn_quant_p_u8(pu, pv, nk);
        for (int d = 0; d < a->head_dim; d++) {
            int32_t isum = 0;
            for (int j = 0; j < nk; j++)
                isum += (int32_t)pu[j] * ((const int8_t *)a->v_cache)[(size_t)a->slots[p0 + j] * row + (size_t)kh * a->head_dim + d];
            o[d] = o[d] * alpha + (float)isum * ps;
        }
    }
    const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
    for (int d = 0; d < a->head_dim; d++) o[d] *= inv;
}

static void ref_attention_i8q(const kern_attn_args *a, int ith, int nth, void *scratch, int pdot)
{
    if (a->kv_dt != DTYPE_I8) {
        kern_ref_attention(a, ith, nth, scratch);
        return;
    }
    float *scores = scratch; /* (n_kv) */
    int8_t qi[4096];
    int group = a->n_head / a->n_kv_head;
    size_t row = (size_t)a->n_kv_head * a->head_dim;
    int lo, hi;
    kern_split(a->n_q * a->n_head, ith, nth, &lo, &hi);
    for (int t = lo; t < hi; t++) {
        int i = t / a->n_head, h = t % a->n_head, kh = h / group;
        int pos = a->n_kv - a->n_q + i;
        int start = kern_attn_first_key(a, pos);
        const float qs = kern_attn_quant_q_i8(qi, a->q + (size_t)i * a->q_stride + (size_t)h * a->head_dim,
                                              a->scale, a->head_dim);
        float mx = -INFINITY;
        for (int p = start; p <= pos; p++) {
            const int8_t *k = (const int8_t *)a->k_cache + (size_t)a->slots[p] * row + (size_t)kh * a->head_dim;
            float ksc = a->k_tok_scale[(size_t)a->slots[p] * a->n_kv_head + kh];
            int32_t isum = 0;
            for (int d = 0; d < a->head_dim; d++) isum += (int32_t)qi[d] * k[d];
            float s = (float)isum * (qs * ksc);
            if (a->softcap > 0.0f) s = a->softcap * tanhf(s / a->softcap);
            if (!kern_attn_tree_sees(a, pos, p)) s = -INFINITY;
            scores[p] = s;
            if (s > mx) mx = s;
        }
        float *o = a->out + (size_t)i * a->out_stride + (size_t)h * a->head_dim;
        if (pdot) {
            ref_pv_u8(a, scores, start, pos, kh, o);
            continue;
        }
        float sum = 0.0f;
        for (int p = start; p <= pos; p++) {
            scores[p] = scores[p] == -INFINITY ? 0.0f : expf(scores[p] - mx);
            sum += scores[p];
        }
        for (int d = 0; d < a->head_dim; d++) o[d] = 0.0f;
        for (int p = start; p <= pos; p++) {
            size_t base = (size_t)a->slots[p] * row + (size_t)kh * a->head_dim;
            float wgt = scores[p] / sum;
            float vsc = a->v_tok_scale[(size_t)a->slots[p] * a->n_kv_head + kh];
            for (int d = 0; d < a->head_dim; d++) o[d] += wgt * kv_elem(a->v_cache, a->kv_dt, base + d, vsc);
        }
    }
}

void kern_ref_attention_i8q(const kern_attn_args *a, int ith, int nth, void *scratch)
{
    ref_attention_i8q(a, ith, nth, scratch, 0);
}

void kern_ref_attention_i8qp(const kern_attn_args *a, int ith, int nth, void *scratch)
{
    ref_attention_i8q(a, ith, nth, scratch, 1);
}

void kern_ref_rmsnorm(float *y, const float *x, const float *w, int n, float eps, float w_offset)
{
    float ss = 0.0f;
    for (int i = 0; i < n; i++) ss += x[i] * x[i];
    float inv = 1.0f / sqrtf(ss / (float)n + eps);
    for (int i = 0; i < n; i++) y[i] = x[i] * inv * (w[i] + w_offset);
}

void kern_ref_rope_apply(float *x, int n_head, int head_dim, int rot_dim, const float *cos_t,
                         const float *sin_t, int neox)
{
    int half = rot_dim / 2;
    for (int h = 0; h < n_head; h++) {
        float *v = x + (size_t)h * head_dim;
        for (int i = 0; i < half; i++) {
            int a = neox ? i : 2 * i, b = neox ? i + half : 2 * i + 1;
            float x0 = v[a], x1 = v[b];
            v[a] = x0 * cos_t[i] - x1 * sin_t[i];
            v[b] = x1 * cos_t[i] + x0 * sin_t[i];
        }
    }
}

void kern_ref_silu_mul(float *y, const float *gate, const float *up, int n)
{
    for (int i = 0; i < n; i++) {
        float g = gate[i];
        y[i] = g / (1.0f + expf(-g)) * up[i];
    }
}

void kern_ref_gelu_tanh_mul(float *y, const float *gate, const float *up, int n)
{
    const float c = 0.7978845608028654f; /* sqrt(2/pi) */
    for (int i = 0; i < n; i++) {
        float g = gate[i];
        y[i] = 0.5f * g * (1.0f + tanhf(c * (g + 0.044715f * g * g * g))) * up[i];
    }
}

void kern_ref_add(float *y, const float *a, const float *b, int n)
{
    for (int i = 0; i < n; i++) y[i] = a[i] + b[i];
}

void kern_ref_softmax(float *x, int n)
{
    float mx = -INFINITY;
    for (int i = 0; i < n; i++)
        if (x[i] > mx) mx = x[i];
    float sum = 0.0f;
    for (int i = 0; i < n; i++) {
        x[i] = expf(x[i] - mx);
        sum += x[i];
    }
    float inv = 1.0f / sum;
    for (int i = 0; i < n; i++) x[i] *= inv;
}

int kern_ref_argmax(const float *x, int n)
{
    int best = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return best;
}

float kern_ref_dot_f32(const float *a, const float *b, int n)
{
    float s = 0.0f;
    for (int i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}
