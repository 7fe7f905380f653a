/* kernels_impl — private to src/kernels: the per-ISA vtable.
 *
 * Each ISA file (kernels_avx2.c, kernels_avx512.c) defines its table and
 * points kern_vtable_<isa> at it; a slot left NULL falls back to the scalar
 * reference.  mat_pack, when set, prepares weights in the ISA's own layout
 * (it must fill m->data, m->owned, m->bytes, m->layout). */
#ifndef SGLC_KERNELS_IMPL_H
#define SGLC_KERNELS_IMPL_H

#include "kernels/kernels.h"

typedef struct kern_vtable {
    int (*mat_pack)(kern_mat *m, const void *src, dtype src_dt);
    size_t (*matmul_scratch)(int m, int k);
    void (*matmul)(float *y, const float *x, int m, const kern_mat *w, const float *bias, int ith,
                   int nth, void *scratch);
    size_t (*attention_scratch)(int n_kv, int head_dim);
    void (*attention)(const kern_attn_args *a, int ith, int nth, void *scratch);
    void (*rmsnorm)(float *y, const float *x, const float *w, int n, float eps, float w_offset);
    void (*rope_apply)(float *x, int n_head, int head_dim, int rot_dim, const float *cos_t,
                       const float *sin_t, int neox);
    void (*silu_mul)(float *y, const float *gate, const float *up, int n);
    void (*gelu_tanh_mul)(float *y, const float *gate, const float *up, int n);
    void (*add)(float *y, const float *a, const float *b, int n);
    void (*softmax)(float *x, int n);
    int (*argmax)(const float *x, int n);
    float (*dot_f32)(const float *a, const float *b, int n);
} kern_vtable;

/* Pack a weight into nb-column panels (kernels_pack.c); 0 or -1 (OOM). */
int kern_pack_panels(kern_mat *m, const void *src, dtype sdt, int nb, int layout_bf16,
                     int layout_f32);

/* NULL until an ISA file provides one. */
extern const kern_vtable *const kern_vtable_avx2;
extern const kern_vtable *const kern_vtable_avx512;

/* How the ISA attention kernels cut the work (see kernels_avx512.c).  A
 * unit is: a range of hk consecutive kv heads (their K/V rows are adjacent
 * in a slot, so a unit reads one contiguous piece per key), a chunk of gh
 * query heads of each kv head's group, and a block of qb queries; at most
 * `ar` rows (query x head) per unit.  Prefill favours qb (K/V reused by
 * more queries), decode favours hk (longer contiguous reads); units are cut
 * finer until every thread has one. */
typedef struct kern_attn_plan {
    int gh, n_hc;   /* query heads per unit within a group; chunks per group */
    int hk, n_khc;  /* kv heads per unit; kv-head chunks */
    int qb, n_qb;   /* queries per unit; query blocks */
    int n_units;
} kern_attn_plan;

static inline void kern_attn_plan_make(kern_attn_plan *p, const kern_attn_args *a, int nth,
                                       int ar, int hk_max)
{
    int group = a->n_head / a->n_kv_head;
    p->gh = group < ar ? group : ar;
    p->n_hc = (group + p->gh - 1) / p->gh;
    p->qb = ar / p->gh;
    if (p->qb > a->n_q) p->qb = a->n_q;
    if (p->qb < 1) p->qb = 1;
    p->hk = p->n_hc > 1 ? 1 : ar / (p->qb * p->gh);
    if (p->hk > hk_max) p->hk = hk_max;
    if (p->hk > a->n_kv_head) p->hk = a->n_kv_head;
    if (p->hk < 1) p->hk = 1;
    for (;;) {
        p->n_khc = (a->n_kv_head + p->hk - 1) / p->hk;
        p->n_qb = (a->n_q + p->qb - 1) / p->qb;
        p->n_units = p->n_khc * p->n_hc * p->n_qb;
        if (p->n_units >= nth) break;
        if (p->hk > 1) {
            p->hk = (p->hk + 1) / 2;
        } else if (p->qb > 1) {
            p->qb = (p->qb + 1) / 2;
        } else if (p->gh > 1) {
            p->gh = (p->gh + 1) / 2;
            p->n_hc = (group + p->gh - 1) / p->gh;
        } else {
            break;
        }
    }
}

/* AVX-512 bf16-weight matmul body (kern_choice.bf16_dot): 0 = widen to f32
 * + FMA; 1 = vdpbf16ps on bf16-rounded activations except for x_exact
 * weights (those stay on FMA); 2 = vdpbf16ps for every bf16 weight.
 * kernels_init() sets it (SGLC_BF16_DOT, else measured) before compute
 * threads exist; the start-up measurement also switches it while it times
 * the two bodies. */
void kern_avx512_set_bf16_dot(int mode);

/* AMX (kernels_amx.c).  kern_amx_request asks the OS for the tile data
 * state (once per process); 0 = granted.  kernels_avx512.c's matmul hands
 * bf16 weights with m >= KERN_AMX_MIN_M rows to kern_amx_matmul while
 * kern_avx512_set_amx(1) is in force (set by kernels_init before compute
 * threads exist).  Scratch: kern_amx_matmul_scratch (0 below the cut). */
#define KERN_AMX_MIN_M 16
int kern_amx_request(void);
/* 1 = hi + lo bf16 split of the activations (default), 0 = one rounding. */
void kern_amx_set_split(int on);
void kern_avx512_set_amx(int on);
int kern_avx512_amx_ok(void);
size_t kern_amx_matmul_scratch(int m, int k);
void kern_amx_matmul(float *y, const float *x, int m, const kern_mat *w, const float *bias,
                     int ith, int nth, void *scratch);

#endif
