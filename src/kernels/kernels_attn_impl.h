/* kernels_attn_impl — the frame of the SIMD attention kernel, shared by
 * the ISA files; private to src/kernels.
 *
 * DESIGN: both ISA kernels do the same thing at different vector widths:
 * cut the work into units (kern_attn_plan_make: kv-head range x query-head
 * chunk x query block, at most AR rows), set up each row's scaled query,
 * causal / sliding-window key range and online-softmax state (and, for a
 * draft tree, each block's per-row lane mask of visible tree keys), then walk
 * the unit's keys in blocks of KB = one vector of lanes: prefetch the next
 * block's scattered K/V pieces, gather the block into f32 scratch, and let
 * the ISA's attn_block() score it and fold it into the accumulators;
 * finally normalise.  Only attn_block (the math of one key block) and the
 * two row helpers differ per ISA, so this header is the one place the
 * traversal, masking ranges and scratch layout live.
 *
 * Included twice by kernels_avx2.c / kernels_avx512.c (compiled with
 * their own -m flags):
 *
 *   #define ATTN_VW 16                 f32 lanes of one vector: keys per
 *   #define ATTN_ROW_STATS 4           block, padding of head_dim; per-row
 *   #include "kernels_attn_impl.h"     floats of state (2: mx, sm; 4: also
 *                                      bm, alpha); gives attn_blk and
 *                                      AR / KB / HKMAX
 *   ... the ISA's helpers, then:
 *   #define ATTN_DEFINE_KERNEL
 *   #define ATTN_NAME attention512
 *   #define ATTN_SCRATCH_NAME attention_scratch512
 *   #include "kernels_attn_impl.h"     defines the two functions
 *
 * The helpers (with AINLINE and round_up) the ISA file defines in between:
 *   attn_load_kv_row(float *dst, const void *src, dtype dt, int hd, int dp)
 *       one K or V row of f32 or bf16 -> f32, zero-padded to dp
 *   attn_load_kv_row8(float *dst, const uint8_t *src, int e5m2, float scale, int hd, int dp)
 *       one row of an 8-bit float type (e5m2: 1, e4m3: 0) -> f32 * scale
 *   attn_load_kv_rowi8(float *dst, const int8_t *src, float scale, int hd, int dp)
 *       one row of sglc's int8 cache -> f32 * its token-head scale
 *   attn_block(const attn_blk *b)
 *       scores of rows [0, R) against the block's keys, masked to
 *       [rlo[r], rhi[r]) and soft-capped, then the online-softmax update
 *       of mx, sm and acc
 *   attn_store_row(float *o, const float *acc, float inv, int hd, int nc)
 *       o[0..hd) = acc * inv */
#ifndef SGLC_KERNELS_ATTN_IMPL_H
#define SGLC_KERNELS_ATTN_IMPL_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "kernels/kernels_impl.h"

#define AR 32       /* rows (query x head) per unit */
#define KB ATTN_VW  /* keys per block */
#define HKMAX 4     /* kv heads per unit */

/* One key block as attn_block sees it.  Row r of the unit: query
 * r / (nkh nh), kv head r / nh % nkh, head r % nh.  kbuf/vbuf: (KB, nkh,
 * dp) f32, key j of kv head khl at (j * nkh + khl) * dp, so kst = nkh * dp
 * between keys; keys j >= nk are zero.  qbuf, acc: (AR, dp); mx, sm, bm,
 * alpha: (AR) running max, running sum, block max, rescale factor (bm
 * and alpha are the ISA's scratch, NULL unless ATTN_ROW_STATS is 4);
 * sbuf: (AR, KB) scores, 64-byte aligned. */
typedef struct attn_blk {
    int R, p0, nk, nh, nkh, dp, nc;
    size_t kst;
    const int *rlo, *rhi; /* (R) visible keys: rlo <= p < rhi */
    const uint32_t *tmask; /* NULL, or (R) lane masks of a block inside a draft tree:
                            * bit j = key p0 + j passes kern_attn_tree_sees */
    const float *qbuf, *kbuf, *vbuf;
    float *acc, *mx, *sm, *bm, *alpha, *sbuf;
    float softcap; /* > 0: s = cap * tanh(s / cap) */
    float *pv_dummy;      /* (dp) scratch an ISA may write as a padding row's accumulator */
    const float *pv_zero; /* (KB) zeros: a padding row's probabilities */
    /* int8-q scores (ISAs that define ATTN_I8QDOT; kt NULL otherwise): kt (nkh, ng, KB)
     * 32-bit groups, ng = qb / 4: group g of key j of kv head khl = bytes 4g..4g+3 of its
     * K row + 128 (as u8), at kt[(khl * ng + g) * KB + j]; keys >= nk and bytes >= hd are
     * 128; ksc (nkh, KB) the keys' token-head scales (0 past nk); qi (AR, qb) bytes of each
     * row's quantized q as 32-bit groups (zero-padded), qsc its scale, qcor 128 * sum qi. */
    const uint32_t *kt, *qi;
    const float *ksc, *qsc;
    const int32_t *qcor;
    int ng;
    /* int8-q with head_dim a multiple of ATTN_VW: V is read from the cache in P.V (vrow
     * (nkh, KB) row pointers, NULL past nk) and its token-head scales vsc (nkh, KB) are
     * folded into the probabilities; vrow NULL otherwise (V in vbuf) */
    const int8_t *const *vrow;
    const float *vsc;
    /* integer P.V (kern_ref_attention_i8qp's numerics; vrow set, head_dim a multiple of 64, every
     * row of the unit starting at p0 of the first block): vt (nkh, hd / 64, 4, 4) vectors of 64
     * bytes, V of the block interleaved by 4 keys (ISA layout); pu (AR, KB) bytes: each row's
     * quantized p', psc (AR) its scale; acc is then in the ISA's P.V order (attn_pv_unperm
     * restores it); vt NULL otherwise */
    const uint8_t *vt;
    uint8_t *pu;
    float *psc;
} attn_blk;

#endif /* SGLC_KERNELS_ATTN_IMPL_H */

#ifdef ATTN_DEFINE_KERNEL

/* Scratch layout (floats, dp = head_dim rounded up to ATTN_VW):
 *   kbuf (KB, HKMAX, dp) | vbuf (KB, HKMAX, dp) | qbuf (AR, dp) | acc (AR, dp) |
 *   mx, sum[, block max, alpha] (AR each, ATTN_ROW_STATS of them) |
 *   scores (AR, KB), 64-byte aligned | a padding row's acc (dp) | zeros (KB) */
#ifndef ATTN_I8QDOT
#define ATTN_I8QDOT 0
#endif
/* int8-q extra (ATTN_I8QDOT): kt (HKMAX, qb / 4, KB) u32 | qi (AR, qb) | ksc (HKMAX, KB) |
 * qsc, qcor (AR each), qb = head_dim rounded up to 64 bytes | vsc, vrow | vt (HKMAX, qb * KB)
 * bytes | pu (AR, KB) bytes | psc (AR) */
static size_t ATTN_SCRATCH_NAME(int n_kv, int head_dim)
{
    (void)n_kv;
    size_t dp = round_up((size_t)(head_dim > 0 ? head_dim : 1), ATTN_VW);
    size_t qb = round_up((size_t)(head_dim > 0 ? head_dim : 1), 64);
    size_t extra = ATTN_I8QDOT ? HKMAX * qb * KB + AR * qb + (2 * HKMAX * KB + 2 * AR) * 4 + HKMAX * KB * sizeof(void *) + 128 + HKMAX * qb * KB + AR * KB + AR * 4 + 128 : 0;
    return (2 * KB * HKMAX * dp + 2 * AR * dp + ATTN_ROW_STATS * AR + AR * KB + dp + KB) * sizeof(float) + 192 + extra;
}

static void ATTN_NAME(const kern_attn_args *a, int ith, int nth, void *scratch)
{
    const int hd = a->head_dim, dp = (int)round_up((size_t)hd, ATTN_VW), nc = dp / ATTN_VW;
    const int group = a->n_head / a->n_kv_head;
    const size_t kv_row = (size_t)a->n_kv_head * hd;
    const size_t esz = dtype_size(a->kv_dt);
    const int f8 = a->kv_dt == DTYPE_F8_E4M3 || a->kv_dt == DTYPE_F8_E5M2, e5m2 = a->kv_dt == DTYPE_F8_E5M2;
    const float ks = a->k_scale > 0.0f ? a->k_scale : 1.0f, vs = a->v_scale > 0.0f ? a->v_scale : 1.0f;
    float *kbuf = (float *)round_up((uintptr_t)scratch, 64);
    float *vbuf = kbuf + KB * HKMAX * dp, *qbuf = vbuf + KB * HKMAX * dp, *acc = qbuf + AR * dp;
    float *mx = acc + AR * dp, *sm = mx + AR;
    float *bm = ATTN_ROW_STATS >= 4 ? sm + AR : NULL, *alpha = ATTN_ROW_STATS >= 4 ? sm + 2 * AR : NULL;
    float *sbuf = (float *)round_up((uintptr_t)(mx + ATTN_ROW_STATS * AR), 64); /* (AR, KB) scores */
    float *pv_dummy = sbuf + AR * KB, *pv_zero = pv_dummy + dp;
    memset(pv_zero, 0, sizeof(float) * KB);
    /* int8-q scores: sglc's int8 cache on an ISA with integer dots, unless SGLC_KV_INT8_QDOT=0 */
    const int qd = ATTN_I8QDOT && a->kv_dt == DTYPE_I8 && kern_attn_i8qdot_on();
    const int qb = (int)round_up((size_t)hd, 64), ng = qb / 4;
    uint32_t *kt = (uint32_t *)round_up((uintptr_t)(pv_zero + KB), 64);
    uint32_t *qi = kt + (size_t)HKMAX * ng * KB; /* (AR, ng) */
    float *ksc = (float *)(qi + (size_t)AR * ng), *qsc = ksc + HKMAX * KB;
    int32_t *qcor = (int32_t *)(qsc + AR);
    float *vsc = (float *)(qcor + AR);
    const int8_t **vrow = (const int8_t **)round_up((uintptr_t)(vsc + HKMAX * KB), sizeof(void *));
    const int vdirect = qd && hd % ATTN_VW == 0; /* V read in P.V, no f32 copy */
    uint8_t *vt = (uint8_t *)round_up((uintptr_t)(vrow + HKMAX * KB), 64);
    uint8_t *pu = vt + (size_t)HKMAX * qb * KB;
    float *psc = (float *)(pu + AR * KB);
    /* integer P.V: unless SGLC_KV_INT8_PDOT=0; per unit only when its rows share a first key */
    const int pdot_ok = ATTN_I8QDOT && vdirect && hd % 64 == 0 && kern_attn_i8pdot_on();

    kern_attn_plan pl;
    kern_attn_plan_make(&pl, a, nth, AR, HKMAX);
    const float neg_inf = -INFINITY;

    for (int u = ith; u < pl.n_units; u += nth) {
        int qbi = u % pl.n_qb, rest = u / pl.n_qb;
        int hc = rest % pl.n_hc, khc = rest / pl.n_hc;
        int kh0 = khc * pl.hk;
        int nkh = a->n_kv_head - kh0 < pl.hk ? a->n_kv_head - kh0 : pl.hk;
        int nh = group - hc * pl.gh < pl.gh ? group - hc * pl.gh : pl.gh;
        int i0 = qbi * pl.qb, nq = a->n_q - i0 < pl.qb ? a->n_q - i0 : pl.qb;
        int R = nq * nkh * nh; /* row r: query r / (nkh nh), kv head r / nh % nkh, head r % nh */
        int lo_all = a->n_kv, hi_all = 0; /* key range of the unit: [lo_all, hi_all) */
        int rlo[AR], rhi[AR];
        uint32_t tm[AR]; /* tree verification: per-row lane masks of the current block */
        for (int r = 0; r < R; r++) {
            int i = i0 + r / (nkh * nh), khl = r / nh % nkh;
            int h = (kh0 + khl) * group + hc * pl.gh + r % nh;
            int pos = a->n_kv - a->n_q + i;
            int start = kern_attn_first_key(a, pos);
            rlo[r] = start;
            rhi[r] = pos + 1;
            if (start < lo_all) lo_all = start;
            if (pos + 1 > hi_all) hi_all = pos + 1;
            const float *q = a->q + (size_t)i * a->q_stride + (size_t)h * hd;
            for (int d = 0; d < dp; d++) {
                qbuf[r * dp + d] = d < hd ? q[d] * a->scale : 0.0f;
                acc[r * dp + d] = 0.0f;
            }
            if (qd) {
                int8_t *qr = (int8_t *)(qi + (size_t)r * ng);
                memset(qr, 0, (size_t)qb);
                qsc[r] = kern_attn_quant_q_i8(qr, q, a->scale, hd);
                int32_t sq = 0;
                for (int d = 0; d < hd; d++) sq += qr[d];
                qcor[r] = 128 * sq;
            }
            mx[r] = neg_inf;
            sm[r] = 0.0f;
        }
        int pdot = pdot_ok;
        for (int r = 1; r < R; r++)
            if (rlo[r] != rlo[0]) pdot = 0;
        const size_t seg = (size_t)nkh * hd * esz; /* bytes of the unit's heads in one slot */
        for (int p0 = lo_all; p0 < hi_all; p0 += KB) {
            int nk = hi_all - p0 < KB ? hi_all - p0 : KB;
            /* prefetch the next block's K/V pieces: the slots are scattered */
            for (int j = 0; j < KB && p0 + KB + j < hi_all; j++) {
                size_t off = ((size_t)a->slots[p0 + KB + j] * kv_row + (size_t)kh0 * hd) * esz;
                if (a->kv_dt == DTYPE_I8) { /* and the int8 rows' token-head scales */
                    size_t si = (size_t)a->slots[p0 + KB + j] * a->n_kv_head + (size_t)kh0;
                    _mm_prefetch((const char *)(a->k_tok_scale + si), _MM_HINT_T1);
                    _mm_prefetch((const char *)(a->v_tok_scale + si), _MM_HINT_T1);
                }
                for (size_t l = 0; l < seg; l += 64) {
                    _mm_prefetch((const char *)a->k_cache + off + l, _MM_HINT_T1);
                    _mm_prefetch((const char *)a->v_cache + off + l, _MM_HINT_T1);
                }
            }
            /* int8-q: K stays int8, regrouped for the integer dots (kt, ksc) */
#if ATTN_I8QDOT
            if (qd)
                for (int khl = 0; khl < nkh; khl++) {
                    const int8_t *kp[KB];
                    for (int j = 0; j < KB; j++) {
                        size_t si = j < nk ? (size_t)a->slots[p0 + j] * a->n_kv_head + (size_t)(kh0 + khl) : 0;
                        kp[j] = j < nk ? (const int8_t *)a->k_cache + si * hd : NULL;
                        ksc[khl * KB + j] = j < nk ? a->k_tok_scale[si] : 0.0f;
                        vrow[khl * KB + j] = j < nk ? (const int8_t *)a->v_cache + si * hd : NULL;
                        vsc[khl * KB + j] = j < nk ? a->v_tok_scale[si] : 0.0f;
                    }
                    attn_i8_kt(kt + (size_t)khl * ng * KB, kp, hd, ng);
                    if (pdot) attn_i8_vt(vt + (size_t)khl * qb * KB, vrow + khl * KB, hd);
                }
#endif
            /* kbuf/vbuf: (KB, nkh, dp) f32 */
            for (int j = 0; j < KB; j++) {
                for (int khl = 0; khl < nkh; khl++) {
                    float *kd = kbuf + ((size_t)j * nkh + khl) * dp, *vd = vbuf + ((size_t)j * nkh + khl) * dp;
                    if (j < nk) {
                        size_t off = ((size_t)a->slots[p0 + j] * kv_row + (size_t)(kh0 + khl) * hd) * esz;
                        if (a->kv_dt == DTYPE_I8) {
                            size_t si = (size_t)a->slots[p0 + j] * a->n_kv_head + (size_t)(kh0 + khl);
                            if (!qd) attn_load_kv_rowi8(kd, (const int8_t *)a->k_cache + off, a->k_tok_scale[si], hd, dp);
                            if (!vdirect) attn_load_kv_rowi8(vd, (const int8_t *)a->v_cache + off, a->v_tok_scale[si], hd, dp);
                        } else if (f8) {
                            attn_load_kv_row8(kd, (const uint8_t *)a->k_cache + off, e5m2, ks, hd, dp);
                            attn_load_kv_row8(vd, (const uint8_t *)a->v_cache + off, e5m2, vs, hd, dp);
                        } else {
                            attn_load_kv_row(kd, (const char *)a->k_cache + off, a->kv_dt, hd, dp);
                            attn_load_kv_row(vd, (const char *)a->v_cache + off, a->kv_dt, hd, dp);
                        }
                    } else {
                        memset(kd, 0, sizeof(float) * dp);
                        memset(vd, 0, sizeof(float) * dp);
                    }
                }
            }
            const int in_tree = a->tree_mask && p0 + nk > a->tree_base;
            if (in_tree)
                for (int r = 0; r < R; r++) {
                    int pos = a->n_kv - a->n_q + i0 + r / (nkh * nh);
                    uint32_t bits = 0;
                    for (int j = 0; j < nk; j++) bits |= (uint32_t)kern_attn_tree_sees(a, pos, p0 + j) << j;
                    tm[r] = bits;
                }
            const attn_blk b = {
                .R = R, .p0 = p0, .nk = nk, .nh = nh, .nkh = nkh, .dp = dp, .nc = nc,
                .kst = (size_t)nkh * dp, .rlo = rlo, .rhi = rhi, .tmask = in_tree ? tm : NULL,
                .qbuf = qbuf, .kbuf = kbuf, .vbuf = vbuf,
                .acc = acc, .mx = mx, .sm = sm, .bm = bm, .alpha = alpha, .sbuf = sbuf,
                .softcap = a->softcap, .pv_dummy = pv_dummy, .pv_zero = pv_zero,
                .kt = qd ? kt : NULL, .qi = qi, .ksc = ksc, .qsc = qsc, .qcor = qcor, .ng = ng,
                .vrow = vdirect ? vrow : NULL, .vsc = vsc,
                .vt = pdot ? vt : NULL, .pu = pu, .psc = psc,
            };
            attn_block(&b);
        }
        for (int r = 0; r < R; r++) {
            int i = i0 + r / (nkh * nh), h = (kh0 + r / nh % nkh) * group + hc * pl.gh + r % nh;
            float *o = a->out + (size_t)i * a->out_stride + (size_t)h * hd;
#if ATTN_I8QDOT
            if (pdot) { /* integer P.V left acc in its own order */
                attn_pv_unperm(pv_dummy, acc + r * dp, hd);
                attn_store_row(o, pv_dummy, sm[r] > 0.0f ? 1.0f / sm[r] : 0.0f, hd, nc);
                continue;
            }
#endif
            attn_store_row(o, acc + r * dp, sm[r] > 0.0f ? 1.0f / sm[r] : 0.0f, hd, nc);
        }
    }
}

#undef AR
#undef KB
#undef HKMAX
#endif /* ATTN_DEFINE_KERNEL */
