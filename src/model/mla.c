/* mla — DeepSeek's multi-head latent attention with a compressed KV cache.
 *
 * DESIGN: the cache holds, per token and layer, ONE row of kvr + rope
 * values: the kv_a_layernorm'ed latent c_kv (kv_lora_rank) and the
 * rotated shared rope key k_pe (qk_rope_head_dim) -- 576 values for
 * V2-Lite / V3 where full attention would keep nh * (192 + 128).  Decode
 * and short chunks never re-expand K or V: kv_b_proj is absorbed (the
 * "absorbed" formulation of the DeepSeek-V2 paper, as SGLang's MLA):
 *   score(h, j) = q_nope[h] . (Wk[h] c_j) + q_pe[h] . k_pe_j
 *               = [Wk[h]^T q_nope[h] | q_pe[h]] . [c_j | k_pe_j]
 *   out[h]      = Wv[h] (sum_j p_j c_j)
 * so each head's query becomes a (kvr + rope) vector and the whole layer
 * is MQA (one KV head) over the cache rows, run by the shared attention
 * kernel with K = V = the cache row; the kernel's output per head is
 * [sum_j p_j c_j | sum_j p_j k_pe_j], and only the first kvr values are
 * used (Wv[h] applied after).  Wk[h]^T and Wv[h] are per-head matrices
 * split out of kv_b_proj at load (mla_split_kv_b), so each is one small
 * linear() per head, every thread taking its share of columns.
 *
 * Rope: DeepSeek rotates q_pe / k_pe as (x[2i], x[2i+1]) pairs (HF's
 * modeling_deepseek de-interleaves then rotates halves; the dot products
 * are the same), i.e. kern_rope_apply with neox = 0, on the tables the
 * decoder built (yarn inv_freq and attention factor from rope.c with
 * rot_dim = qk_rope_head_dim).  Softmax scale: config's mla_scale.
 *
 * Steps of one layer (| = barrier), T rows:
 *   [q_a = xn Wqa |  q_a = norm(q_a) |] q = q_a Wqb or xn Wq; kv = xn Wkva   | 
 *   per row: norm(c_kv), rope(k_pe), store [c|k_pe] at the slot; rope(q_pe);
 *            q_pe -> qabs; (T > 1: gather q_nope head-major)                 |
 *   per head: qabs[h][:kvr] = Wk[h]^T q_nope[h]                              |
 *   (T > 1: scatter into qabs                                                |)
 *   attention over the cache (MQA, head dim kvr + rope) -> aout              |
 *   (T > 1: gather aout[:, h, :kvr] head-major                               |)
 *   per head: att[h] = Wv[h] aout[h][:kvr]                                   |
 *   (T > 1: scatter into att                                                 |)
 *   xn = att Wo
 * With T = 1 (decode of one sequence) rows need no gather: the per-head
 * products read and write the token-major buffers in place.
 *
 * Expanded prefill: the absorbed dot products are kvr + rope = 576 wide
 * (score and value), the expanded ones nope + rope = 192 (V padded from
 * 128 to the kernel's one head dim), so a long chunk costs ~3x fewer
 * attention FLOPs expanded, paying (nope + v) kvr per head and CONTEXT row
 * to decompress where absorbing pays the same per NEW row.  mla_prepare
 * (before the threads start) picks per sequence: SGLC_MLA_EXPAND_MIN=N
 * expands sequences with >= N new tokens; unset / auto: >= MLA_AUTO_MIN
 * new tokens and exp_wins (the FLOP count above).  An expanded sequence
 * (mla_expanded, after the latents of this forward are stored): read its
 * whole context back from the latent cache as f32 (prefix + new rows, any
 * cache type, so it sees what decode will see), per head K_nope = Wk[h] c
 * (Wk[h] kept at load as wkb[h]) and V = Wv[h] c, K = [K_nope | k_pe],
 * then kern_attention as plain causal MHA (head dim nope + rope, q =
 * [q_nope | rotated q_pe] straight from the projection) into att.  Heads
 * go in groups so the buffer stays under MLA_EXPAND_BYTES.  The absorbed
 * rows of the same forward (decode rows of a mixed batch) run as above on
 * a compacted row set (abs_row).  kv_b_proj LoRA adapters run absorbed.
 * The cache is written exactly as before either way.
 */
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/model_impl.h"
#include "util/errmsg.h"
#include "util/log.h"

/* Sub-buffers of m->mla for up to T rows (floats, in this order). */
typedef struct mla_bufs {
    float *qa, *kva, *qabs, *aout, *hx, *hy;
} mla_bufs;

static size_t al16(size_t n) { return (n + 15) & ~(size_t)15; }

/* Expanded prefill.  The automatic rule (SGLC_MLA_EXPAND_MIN unset or
 * "auto"): a sequence runs expanded when it has at least MLA_AUTO_MIN new
 * tokens and the FLOP count says so (exp_wins; measured, docs/PERF.md "MLA
 * prefill").  MLA_EXPAND_BYTES: the most bytes of expansion buffer (heads
 * go in groups beyond it; a context whose one head does not fit runs
 * absorbed). */
#define MLA_AUTO_MIN 64
#define MLA_EXPAND_BYTES ((size_t)256 << 20)

static void mla_sizes(const model_config *c, size_t T, size_t sz[6])
{
    size_t nh = (size_t)c->n_head, dl = (size_t)(c->kv_lora_rank + c->qk_rope_dim);
    size_t md = (size_t)c->kv_lora_rank;
    if ((size_t)c->qk_nope_dim > md) md = (size_t)c->qk_nope_dim;
    if ((size_t)c->v_head_dim > md) md = (size_t)c->v_head_dim;
    sz[0] = al16(T * (size_t)c->q_lora_rank);
    sz[1] = al16(T * dl);
    sz[2] = al16(T * nh * dl);
    sz[3] = al16(T * nh * dl);
    sz[4] = al16(T * nh * md);
    sz[5] = al16(T * nh * md);
}

size_t mla_scratch_floats(const model_config *c, size_t T)
{
    if (!c->arch || !c->arch->mla) return 0;
    size_t sz[6], n = 0;
    mla_sizes(c, T, sz);
    for (int i = 0; i < 6; i++) n += sz[i];
    return n;
}

static mla_bufs mla_carve(const model *m)
{
    size_t sz[6];
    mla_sizes(m->cfg, (size_t)m->cap_tokens, sz);
    float *p = m->mla;
    mla_bufs b;
    float **slot[6] = {&b.qa, &b.kva, &b.qabs, &b.aout, &b.hx, &b.hy};
    for (int i = 0; i < 6; i++) {
        *slot[i] = p;
        p += sz[i];
    }
    return b;
}

int mla_split_kv_b(model_layer *l, const model_config *c, int nh, const float *kvb, dtype wdt,
                   size_t *bytes)
{
    const int kvr = c->kv_lora_rank, nope = c->qk_nope_dim, vd = c->v_head_dim;
    l->wkb_t = calloc((size_t)nh, sizeof(linear_weight));
    l->wvb = calloc((size_t)nh, sizeof(linear_weight));
    l->wkb = calloc((size_t)nh, sizeof(linear_weight));
    float *tr = malloc(sizeof(float) * (size_t)kvr * nope);
    int rc = -1;
    if (!l->wkb_t || !l->wvb || !l->wkb || !tr) goto out;
    for (int h = 0; h < nh; h++) {
        const float *kn = kvb + (size_t)h * (nope + vd) * kvr; /* (nope, kvr) rows */
        for (int r = 0; r < kvr; r++)
            for (int d = 0; d < nope; d++) tr[(size_t)r * nope + d] = kn[(size_t)d * kvr + r];
        if (linear_init(&l->wkb_t[h], tr, DTYPE_F32, kvr, nope, wdt, 0)) goto out;
        if (linear_init(&l->wvb[h], kn + (size_t)nope * kvr, DTYPE_F32, vd, kvr, wdt, 0)) goto out;
        if (linear_init(&l->wkb[h], kn, DTYPE_F32, nope, kvr, wdt, 0)) goto out;
        *bytes += linear_bytes(&l->wkb_t[h]) + linear_bytes(&l->wvb[h]) + linear_bytes(&l->wkb[h]);
    }
    rc = 0;
out:
    free(tr);
    return rc;
}

/* ---- expanded prefill: the plan ------------------------------------------ */

struct mla_plan {
    int cap_seqs;
    int *g;       /* (n_seqs) heads per group of an expanded sequence; 0 = absorbed */
    int *co;      /* (n_seqs) absorbed sequences: first row among the absorbed rows */
    int ta;       /* absorbed rows of the forward */
    int logged;   /* the first expanded forward was logged */
    float *buf;   /* expansion buffer, 64-byte aligned */
    size_t cap;   /* floats in buf */
};

void mla_plan_free(struct mla_plan *p)
{
    if (!p) return;
    free(p->g), free(p->co), free(p->buf);
    free(p);
}

int mla_expand_min_env(int *out, char *err, size_t errlen)
{
    const char *v = getenv("SGLC_MLA_EXPAND_MIN");
    *out = 0; /* the automatic rule */
    if (!v || !*v || !strcmp(v, "auto")) return 0;
    char *end;
    errno = 0;
    long n = strtol(v, &end, 10);
    if (errno || *end || n < 1 || n > INT_MAX) {
        errmsg_set(err, errlen, "SGLC_MLA_EXPAND_MIN=%s: want auto or an integer in [1, %d] (new "
                   "tokens from which a sequence's prefill runs the expanded MLA attention)", v, INT_MAX);
        return -1;
    }
    *out = (int)n;
    return 0;
}

/* The expansion buffer of one sequence (nkv context rows, nq new, g heads
 * per group), floats in this order:
 *   c (nkv, kvr) | kpe (nkv, rope) | ident (nkv) int32 | kn (g, nkv, nope) |
 *   vn (g, nkv, v) | k (nkv, g, nope + rope) | vv (nkv, g, nope + rope) |
 *   o (nq, g, nope + rope)
 * Returns the floats; sets e's pointers from base when base is not NULL. */
typedef struct exp_bufs {
    float *c, *kpe, *kn, *vn, *k, *vv, *o;
    int32_t *ident;
} exp_bufs;

static size_t exp_carve(const model_config *c, size_t nkv, size_t nq, size_t g, float *base, exp_bufs *e)
{
    const size_t qhd = (size_t)(c->qk_nope_dim + c->qk_rope_dim);
    const size_t sz[8] = {al16(nkv * c->kv_lora_rank), al16(nkv * c->qk_rope_dim), al16(nkv),
                          al16(g * nkv * c->qk_nope_dim), al16(g * nkv * c->v_head_dim),
                          al16(nkv * g * qhd), al16(nkv * g * qhd), al16(nq * g * qhd)};
    size_t off[8], n = 0;
    for (int i = 0; i < 8; i++) off[i] = n, n += sz[i];
    if (base) {
        e->c = base + off[0], e->kpe = base + off[1], e->ident = (int32_t *)(base + off[2]);
        e->kn = base + off[3], e->vn = base + off[4], e->k = base + off[5], e->vv = base + off[6];
        e->o = base + off[7];
    }
    return n;
}

/* Heads per group for an expanded sequence: all nh when the buffer fits
 * MLA_EXPAND_BYTES, else fewer; 0 when one head does not fit. */
static int exp_group(const model_config *c, int nh, int nkv, int nq)
{
    for (int g = nh; g >= 1; g = g > 1 ? (g + 1) / 2 : 0)
        if (exp_carve(c, (size_t)nkv, (size_t)nq, (size_t)g, NULL, NULL) * sizeof(float) <= MLA_EXPAND_BYTES)
            return g;
    return 0;
}

/* The automatic rule: whether expanding a chunk of nq new tokens over
 * nkv - nq cached ones costs fewer multiply-adds than absorbing it.  Per
 * head, expanding costs (nope + v) kvr per context row where absorbing
 * costs the same per new row, and the attention's dot products (score +
 * value) are 2 (nope + rope) wide expanded (V padded) vs 2 (kvr + rope)
 * absorbed, over nq (P + (nq + 1) / 2) (query, key) pairs (causal):
 *   expand  <=>  P (nope + v) kvr < nq (P + (nq + 1) / 2) 2 (kvr - nope).
 * The break-even chunk grows with the prefix P towards (nope + v) kvr /
 * (2 (kvr - nope)) = 171 tokens for DeepSeek's 128 / 128 / 512; with no
 * prefix expanding always wins. */
static int exp_wins(const model_config *c, int nq, int nkv)
{
    const double P = (double)(nkv - nq), kvr = c->kv_lora_rank, nope = c->qk_nope_dim;
    const double pairs = (double)nq * (P + (nq + 1) / 2.0);
    return P * (nope + c->v_head_dim) * kvr < pairs * 2.0 * (kvr - nope);
}

/* LoRA: whether any adapter of b changes kv_b_proj of any layer. */
static int kvb_lora_batch(const model_batch *b, const int32_t *row_ad, int n_layer, int nh)
{
    if (!row_ad) return 0;
    for (int i = 0; i < b->n_adapters; i++) {
        const linear_adapter *k = b->adapters[i]->kvb;
        if (!k) continue;
        for (size_t j = 0; j < (size_t)n_layer * nh * 2; j++)
            if (k[j].rank > 0) return 1;
    }
    return 0;
}

int mla_prepare(model *m, const model_batch *b, const int32_t *row_ad)
{
    const model_config *c = m->cfg;
    struct mla_plan *P = m->mla_plan;
    if (!P) {
        P = m->mla_plan = calloc(1, sizeof *P);
        if (!P) goto oom;
    }
    if (b->n_seqs > P->cap_seqs) {
        int n = b->n_seqs;
        int *g = realloc(P->g, sizeof(int) * (size_t)n);
        if (!g) goto oom;
        P->g = g;
        int *co = realloc(P->co, sizeof(int) * (size_t)n);
        if (!co) goto oom;
        P->co = co;
        P->cap_seqs = n;
    }
    /* the expanded attention's query and K are nope + rope wide, V is padded to it */
    const int can = c->v_head_dim <= c->qk_nope_dim + c->qk_rope_dim &&
                    !kvb_lora_batch(b, row_ad, c->n_layer, c->n_head);
    size_t need = 0;
    int ta = 0;
    for (int s = 0; s < b->n_seqs; s++) {
        int nq = b->seq_start[s + 1] - b->seq_start[s], nkv = b->seq_kv_len[s];
        const int thr = m->mla_expand_min;
        const int want = thr > 0 ? nq >= thr : nq >= MLA_AUTO_MIN && exp_wins(c, nq, nkv);
        int g = can && want ? exp_group(c, m->w->tp.n_head, nkv, nq) : 0;
        P->g[s] = g;
        P->co[s] = ta;
        if (!g) ta += nq;
        else {
            size_t n = exp_carve(c, (size_t)nkv, (size_t)nq, (size_t)g, NULL, NULL);
            if (n > need) need = n;
            if (!P->logged) {
                P->logged = 1;
                char rule[64];
                if (m->mla_expand_min > 0) snprintf(rule, sizeof rule, "%d", m->mla_expand_min);
                else snprintf(rule, sizeof rule, "auto: >= %d new tokens and fewer FLOPs", MLA_AUTO_MIN);
                log_info("MLA: expanded attention for %d new tokens over %d context rows, %d of %d "
                         "heads at a time (SGLC_MLA_EXPAND_MIN=%s; other chunks and decode run absorbed)",
                         nq, nkv, g, m->w->tp.n_head, rule);
            }
        }
    }
    P->ta = ta;
    if (need > P->cap) {
        free(P->buf);
        P->cap = 0;
        P->buf = aligned_alloc(64, (need * sizeof(float) + 63) & ~(size_t)63);
        if (!P->buf) { /* run everything absorbed */
            log_warn("MLA: no memory for a %zu-byte expansion buffer; prefill runs absorbed",
                     need * sizeof(float));
            for (int s = 0; s < b->n_seqs; s++) P->g[s] = 0, P->co[s] = b->seq_start[s];
            P->ta = b->n_tokens;
            return 0;
        }
        P->cap = need;
    }
    return 0;
oom:
    log_error("out of memory planning the MLA attention of %d sequences", b->n_seqs);
    return -1;
}

/* Context row j of layer il's latent cache as f32: c (kvr), pe (rope). */
static void latent_row(const model_kv *kv, int il, int32_t slot, int kvr, int rope, float *c, float *pe)
{
    const size_t esz = dtype_size(kv->dt), dl = (size_t)(kvr + rope);
    const char *src = (const char *)kv->k[il] + (size_t)slot * dl * esz;
    if (kv->dt == DTYPE_I8) {
        const int8_t *q = (const int8_t *)src;
        const float sc = kv->k_tok[il][slot];
        for (int i = 0; i < kvr; i++) c[i] = (float)q[i] * sc;
        for (int i = 0; i < rope; i++) pe[i] = (float)q[kvr + i] * sc;
        return;
    }
    dtype_to_f32(c, src, kv->dt, (size_t)kvr);
    dtype_to_f32(pe, src + (size_t)kvr * esz, kv->dt, (size_t)rope);
    if ((kv->dt == DTYPE_F8_E4M3 || kv->dt == DTYPE_F8_E5M2) && kv->k_scale[il] > 0.0f) {
        const float sc = kv->k_scale[il];
        for (int i = 0; i < kvr; i++) c[i] *= sc;
        for (int i = 0; i < rope; i++) pe[i] *= sc;
    }
}

/* Expanded attention of sequence s (g heads per group): its whole context
 * (cached prefix + this forward's rows, already stored) read back from the
 * latent cache, K_nope[h] = Wk[h] c and V[h] = Wv[h] c per head, then
 * plain causal multi-head attention with head dim nope + rope (V padded
 * with zeros to it) by the shared kernel; out: att rows of s, (nh, v). */
static void mla_expanded(model *m, const model_kv *kv, const model_batch *b, const model_layer *l, int il,
                         const linear_exec *ex, struct tpool *pool, int s, int g)
{
    const model_config *c = m->cfg;
    const int nh = m->w->tp.n_head, kvr = c->kv_lora_rank, nope = c->qk_nope_dim, rope = c->qk_rope_dim;
    const int vd = c->v_head_dim, qhd = nope + rope;
    const int r0 = b->seq_start[s], nq = b->seq_start[s + 1] - r0, nkv = b->seq_kv_len[s];
    const int32_t *sl = b->seq_slots[s];
    exp_bufs e;
    exp_carve(c, (size_t)nkv, (size_t)nq, (size_t)g, m->mla_plan->buf, &e);
    int jlo, jhi, ilo, ihi;
    kern_split(nkv, ex->ith, ex->nth, &jlo, &jhi);
    kern_split(nq, ex->ith, ex->nth, &ilo, &ihi);
    for (int j = jlo; j < jhi; j++) {
        latent_row(kv, il, sl[j], kvr, rope, e.c + (size_t)j * kvr, e.kpe + (size_t)j * rope);
        e.ident[j] = j;
    }
    tpool_barrier(pool);
    const int cap = m->cap_tokens; /* the matmul scratch holds this many rows */
    for (int h0 = 0; h0 < nh; h0 += g) {
        const int gl = nh - h0 < g ? nh - h0 : g;
        for (int hl = 0; hl < gl; hl++)
            for (int j0 = 0; j0 < nkv; j0 += cap) {
                int n = nkv - j0 < cap ? nkv - j0 : cap;
                const float *x = e.c + (size_t)j0 * kvr;
                linear(e.kn + ((size_t)hl * nkv + j0) * nope, x, n, &l->wkb[h0 + hl], ex);
                linear(e.vn + ((size_t)hl * nkv + j0) * vd, x, n, &l->wvb[h0 + hl], ex);
            }
        tpool_barrier(pool);
        for (int j = jlo; j < jhi; j++)
            for (int hl = 0; hl < gl; hl++) {
                float *k = e.k + ((size_t)j * gl + hl) * qhd, *v = e.vv + ((size_t)j * gl + hl) * qhd;
                memcpy(k, e.kn + ((size_t)hl * nkv + j) * nope, sizeof(float) * (size_t)nope);
                memcpy(k + nope, e.kpe + (size_t)j * rope, sizeof(float) * (size_t)rope);
                memcpy(v, e.vn + ((size_t)hl * nkv + j) * vd, sizeof(float) * (size_t)vd);
                memset(v + vd, 0, sizeof(float) * (size_t)(qhd - vd));
            }
        tpool_barrier(pool);
        kern_attn_args a = {
            .n_q = nq,
            .n_kv = nkv,
            .n_head = gl,
            .n_kv_head = gl,
            .head_dim = qhd,
            .q = m->q + (size_t)r0 * nh * qhd + (size_t)h0 * qhd, /* q_pe already rotated */
            .q_stride = (size_t)nh * qhd,
            .k_cache = e.k,
            .v_cache = e.vv,
            .kv_dt = DTYPE_F32,
            .slots = e.ident,
            .scale = c->mla_scale,
            .out = e.o,
            .out_stride = (size_t)gl * qhd,
        };
        model_tree_args(b, s, &a); /* positions = kv indices here too (ident slots) */
        kern_attention(&a, ex->ith, ex->nth, ex->scratch);
        tpool_barrier(pool);
        for (int i = ilo; i < ihi; i++)
            for (int hl = 0; hl < gl; hl++)
                memcpy(m->att + ((size_t)(r0 + i) * nh + h0 + hl) * vd, e.o + ((size_t)i * gl + hl) * qhd,
                       sizeof(float) * (size_t)vd);
        /* the next group writes kn / vn, then (after a barrier) k / vv, then o after another */
    }
}

/* ---- the layer ------------------------------------------------------------ */

/* Row t's index among the absorbed rows (the head-major buffers hold only
 * those), or -1 when its sequence runs expanded. */
static inline int abs_row(const struct mla_plan *P, const model *m, const model_batch *b, int t)
{
    if (!P) return t;
    int s = m->tok_seq[t];
    return P->g[s] ? -1 : P->co[s] + t - b->seq_start[s];
}

/* Copy a (rows, width) block between a token-major buffer (row stride
 * tstride, head h at h * hoff) and a head-major one ((nh, ta, width)
 * contiguous, absorbed rows only): to_head = 1 gathers, 0 scatters.  Rows
 * [lo, hi) of the forward. */
static void head_copy(const struct mla_plan *P, const model *m, const model_batch *b, float *tok,
                      size_t tstride, size_t hoff, float *hm, int ta, int nh, int width, int lo, int hi,
                      int to_head)
{
    for (int t = lo; t < hi; t++) {
        int r = abs_row(P, m, b, t);
        if (r < 0) continue;
        for (int h = 0; h < nh; h++) {
            float *x = tok + (size_t)t * tstride + (size_t)h * hoff;
            float *y = hm + ((size_t)h * ta + r) * width;
            if (to_head) memcpy(y, x, sizeof(float) * (size_t)width);
            else memcpy(x, y, sizeof(float) * (size_t)width);
        }
    }
}

/* LoRA: whether any adapter of b changes kv_b_proj of layer il. */
static int kvb_lora_any(const model_batch *b, const int32_t *row_ad, int il, int nh)
{
    if (!row_ad) return 0;
    for (int i = 0; i < b->n_adapters; i++)
        if (b->adapters[i]->kvb && b->adapters[i]->kvb[(size_t)il * nh * 2].rank > 0) return 1;
    return 0;
}

void mla_attention(model *m, model_kv *kv, const model_batch *b, const model_layer *l, int il,
                   const linear_exec *ex, const int32_t *row_ad, struct tpool *pool, int lo, int hi)
{
    const model_weights *w = m->w;
    const model_config *c = &w->cfg;
    /* this rank's heads (tensor parallelism: q / q_b rows, kv_b's per-head
     * matrices and o's columns of heads [head0, head0 + nh); the latent
     * projection, its norm and the cache rows are whole on every rank) */
    const int T = b->n_tokens, nh = w->tp.n_head, qr = c->q_lora_rank, kvr = c->kv_lora_rank;
    const int nope = c->qk_nope_dim, rope = c->qk_rope_dim, vd = c->v_head_dim;
    const int qhd = nope + rope, dl = kvr + rope, half = w->rot_dim / 2;
    const float eps = c->rms_norm_eps;
    const size_t qst = (size_t)nh * qhd, ast = (size_t)nh * dl;
    mla_bufs B = mla_carve(m);
    float *q = m->q, *att = m->att;
    /* this forward's split (mla_prepare): ta absorbed rows; with none
     * expanded they are all T rows in order, as before the split */
    const struct mla_plan *P = m->mla_plan;
    const int ta = P ? P->ta : T;
    const int one = T == 1 && ta == 1; /* one absorbed row: no head-major copies */
    /* LoRA: the execs of this layer's projections with the batch's adapters */
    linear_exec lx[2];
    linear_adapter lb[2][MODEL_MAX_BATCH_ADAPTERS];
#define MX(kind, p, i) model_lora_exec_at(b, row_ad, ex, (kind), il, (p), nh, &lx[i], lb[i])

    {
        const linear_exec *e[2] = {qr ? MX(MODEL_LORA_MLA, MODEL_MLA_Q_A, 0)
                                      : MX(MODEL_LORA_PROJ, MODEL_PROJ_Q, 0),
                                   MX(MODEL_LORA_MLA, MODEL_MLA_KV_A, 1)};
        float *const y[2] = {qr ? B.qa : q, B.kva};
        const linear_weight *const lw[2] = {qr ? &l->wq_a : &l->wq, &l->wkv_a};
        model_lora_linear_group(2, y, m->xn, T, lw, e);
    }
    if (qr) {
        tpool_barrier(pool);
        for (int t = lo; t < hi; t++)
            kern_rmsnorm(B.qa + (size_t)t * qr, B.qa + (size_t)t * qr, l->q_a_norm, qr, eps, 0.0f);
        tpool_barrier(pool);
        linear(q, B.qa, T, &l->wq_b, MX(MODEL_LORA_MLA, MODEL_MLA_Q_B, 0));
    }
    tpool_barrier(pool);
    /* kv_b adapters run only with every row absorbed (mla_prepare), so the
     * absorbed rows are the batch's rows and row_ad lines up with them */
    const int kvb = kvb_lora_any(b, row_ad, il, nh);
    for (int t = lo; t < hi; t++) {
        const float *ct = m->cos_t + (size_t)t * half, *st = m->sin_t + (size_t)t * half;
        float *kr = B.kva + (size_t)t * dl;
        kern_rmsnorm(kr, kr, l->kv_a_norm, kvr, eps, 0.0f);
        kern_rope_apply(kr + kvr, 1, rope, rope, ct, st, 0);
        int32_t slot = b->seq_slots[m->tok_seq[t]][b->positions[t]];
        kern_kv_store_tok(kv->k[il], kv->k_tok ? kv->k_tok[il] : NULL, kv->dt, slot, 1, dl, kr, kv->k_scale[il]);
        float *qt = q + (size_t)t * qst, *qa = B.qabs + (size_t)t * ast;
        for (int h = 0; h < nh; h++) {
            float *qpe = qt + (size_t)h * qhd + nope;
            kern_rope_apply(qpe, 1, rope, rope, ct, st, 0);
            memcpy(qa + (size_t)h * dl + kvr, qpe, sizeof(float) * (size_t)rope);
        }
    }
    if (!one) head_copy(P, m, b, q, qst, (size_t)qhd, B.hx, ta, nh, nope, lo, hi, 1);
    tpool_barrier(pool); /* every new row's latent is in the cache from here on */
    if (ta > 0) {
        /* absorbed query: qabs[t][h][:kvr] = Wk[h]^T q_nope[t][h] */
        for (int h = 0; h < nh; h++) {
            if (one) linear(B.qabs + (size_t)h * dl, q + (size_t)h * qhd, 1, &l->wkb_t[h], ex);
            else linear(B.hy + (size_t)h * ta * kvr, B.hx + (size_t)h * ta * nope, ta, &l->wkb_t[h], ex);
        }
        if (kvb) { /* kv_b_proj adapters: + scale Aᵀ (Bk[h]ᵀ q_nope[h]) */
            tpool_barrier(pool);
            for (int h = 0; h < nh; h++) {
                const linear_exec *e = MX(MODEL_LORA_KVB, h * 2, 0);
                if (one) model_lora_apply(B.qabs + (size_t)h * dl, q + (size_t)h * qhd, 1, kvr, nope, e);
                else model_lora_apply(B.hy + (size_t)h * ta * kvr, B.hx + (size_t)h * ta * nope, ta, kvr, nope, e);
            }
        }
        tpool_barrier(pool);
        if (!one) {
            head_copy(P, m, b, B.qabs, ast, (size_t)dl, B.hy, ta, nh, kvr, lo, hi, 0);
            tpool_barrier(pool);
        }
        char *scr = ex->scratch;
        for (int s = 0; s < b->n_seqs; s++) {
            if (P && P->g[s]) continue;
            int r0 = b->seq_start[s], nq = b->seq_start[s + 1] - r0;
            kern_attn_args a = {
                .n_q = nq,
                .n_kv = b->seq_kv_len[s],
                .n_head = nh,
                .n_kv_head = 1,
                .head_dim = dl,
                .q = B.qabs + (size_t)r0 * ast,
                .q_stride = ast,
                .k_cache = kv->k[il],
                .v_cache = kv->k[il],
                .kv_dt = kv->dt,
                .k_scale = kv->k_scale[il],
                .v_scale = kv->k_scale[il],
                .k_tok_scale = kv->k_tok ? kv->k_tok[il] : NULL,
                .v_tok_scale = kv->k_tok ? kv->k_tok[il] : NULL, /* the latent row is K and V */
                .slots = b->seq_slots[s],
                .scale = c->mla_scale,
                .out = B.aout + (size_t)r0 * ast,
                .out_stride = ast,
            };
            model_tree_args(b, s, &a);
            kern_attention(&a, ex->ith, ex->nth, scr);
        }
        tpool_barrier(pool);
        if (!one) {
            head_copy(P, m, b, B.aout, ast, (size_t)dl, B.hx, ta, nh, kvr, lo, hi, 1);
            tpool_barrier(pool);
        }
        /* values: att[t][h] = Wv[h] (latent attention output of head h) */
        for (int h = 0; h < nh; h++) {
            if (one) linear(att + (size_t)h * vd, B.aout + (size_t)h * dl, 1, &l->wvb[h], ex);
            else linear(B.hy + (size_t)h * ta * vd, B.hx + (size_t)h * ta * kvr, ta, &l->wvb[h], ex);
        }
        if (kvb) { /* + scale Bv[h] (A latent[h]) */
            tpool_barrier(pool);
            for (int h = 0; h < nh; h++) {
                const linear_exec *e = MX(MODEL_LORA_KVB, h * 2 + 1, 0);
                if (one) model_lora_apply(att + (size_t)h * vd, B.aout + (size_t)h * dl, 1, vd, kvr, e);
                else model_lora_apply(B.hy + (size_t)h * ta * vd, B.hx + (size_t)h * ta * kvr, ta, vd, kvr, e);
            }
        }
        tpool_barrier(pool);
        if (!one) {
            head_copy(P, m, b, att, (size_t)nh * vd, (size_t)vd, B.hy, ta, nh, vd, lo, hi, 0);
            tpool_barrier(pool);
        }
    }
    if (P && ta < T) { /* the expanded sequences write their own att rows */
        for (int s = 0; s < b->n_seqs; s++)
            if (P->g[s]) mla_expanded(m, kv, b, l, il, ex, pool, s, P->g[s]);
        tpool_barrier(pool);
    }
    linear(m->xn, att, T, &l->wo, MX(MODEL_LORA_PROJ, MODEL_PROJ_O, 0));
#undef MX
}
