/* mamba2 — the Mamba2 mixer of hybrid models (NemotronH) and the
 * per-request recurrent states it carries between forwards.
 *
 * DESIGN
 * One Mamba2 layer, for the rows of a batch (T tokens of n_seqs
 * sequences), as transformers' torch_forward of Mamba2 / Zamba2 defines it:
 *
 *   zxbcdt = xn in_proj^T              (T, di + conv_dim + nh)   columns | barrier
 *            = [ z (di) | xBC (conv_dim = di + 2 G N) | dt (nh) ]
 *   xBC    = silu(causal depthwise conv1d over each sequence's xBC,
 *            kernel K, with the K-1 previous inputs from its conv state)
 *                                      channels                  | barrier
 *   per head h (group g = h / (nh / G)), per token, sequentially:
 *     dt   = clamp(softplus(dt + dt_bias), time_step_limit)
 *     S    = S * exp(dt A) + dt x_h B_g^T       S: (P, N) SSM state
 *     y_h  = S C_g + D x_h
 *                                      (sequence, head) pairs    | barrier
 *   y      = gated RMSNorm(y * silu(z)) over groups of di / G    rows | barrier
 *   xn     = y out_proj^T              columns                   | barrier
 *
 * Two forms of the scan.  The recurrence, token by token inside each
 * sequence, per (sequence, head) pair: O(T P N) per head like decode.  And
 * for a sequence with at least SGLC_MAMBA_SSD_MIN_TOKENS new rows in this
 * forward (w->mamba_ssd_min; default 32, "off" = never), the chunked SSD
 * form of mamba2_ssd.c per (sequence, group, run of the group's heads):
 * the same values as matrix products over chunks of SGLC_MAMBA_SSD_CHUNK
 * rows (default 64; not config.chunk_size, which is the GPU kernels' tile:
 * on these CPUs 32..64 measured fastest, docs/PERF.md).  Its chunks are cut
 * at multiples of the chunk size in absolute positions, so a prompt split
 * into pieces (the scheduler's chunked prefill, the decoder's row chunks)
 * gives the same state at every piece boundary, within rounding, as one
 * pass: each piece starts from the state the previous one left.
 * The per-token step has a scalar body here and an AVX2 + FMA one in
 * mamba2_avx2.c (used unless the kernels run scalar: SGLC_KERNELS=scalar);
 * the chunked scan likewise (mamba2_ssd.c / mamba2_ssd_avx2.c).
 *
 * States: a mamba2_cache (one per model_kv) holds, per state slot and per
 * Mamba layer, the conv window (K-1 last xBC inputs, f32) and the SSM
 * state (nh, P, N) in f32 or bf16 (--mamba-ssm-dtype; bf16 states are
 * widened to f32 for a sequence's run and rounded once at its end).
 * Slot s also records how many tokens it has absorbed: a sequence that
 * continues (first new position > 0) must continue exactly there, which
 * catches a rolled-back speculative draft or a scheduler bug instead of
 * computing from a wrong state.
 *
 * Checkpoints (model_batch.seq_snap, the scheduler's extra_buffer
 * strategy): a sequence's new rows are scanned in pieces that end at its
 * checkpoint positions, and after each piece the heads' states are copied
 * into the checkpoint's slot (the conv window of that position is
 * gathered from the old window and the new rows before the window moves
 * on).  With the chunked scan each piece is one mamba2_ssd_scan call that
 * starts from the state the last one left; a checkpoint interval that is
 * a multiple of the chunk size keeps the chunks where a single pass would
 * cut them.  A request that matches a cached prefix gets a copy of the
 * checkpoint (model_kv_mamba_copy) and continues from there.
 *
 * Tensor / pipeline parallelism (model_tp_setup_mamba): a rank runs the
 * mixer above on its own shape (mdims: its heads, its groups or the one
 * group it shares with N / n_groups - 1 other ranks), its weights cut to
 * it at load (nemotron_h.c).  The gated norm is per group, so a rank
 * holding whole groups normalizes alone; a shared group's sums of squares
 * are all-reduced first.  out_proj's partial sums are all-reduced.  A
 * state pool holds this rank's heads for this stage's Mamba layers;
 * rank 0 forwards the pool's size and slot copies (model_tp_mamba_*).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/mamba2_ssd.h"
#include "model/model_impl.h"
#include "util/cpu.h"
#include "util/log.h"

/* mamba2_avx2.c: one token of one head (the loop body of scan_head). */
void mamba2_step_avx2(float *S, int P, int N, const float *x, const float *B, const float *C,
                      float dt, float dA, float D, float *y);

struct mamba2_cache {
    int n_states, n_mamba;             /* slots, Mamba layers */
    int conv_dim, kc;                  /* channels, K - 1 window rows */
    int nh, P, N;                      /* heads, head dim, state size */
    dtype ssm_dt;                      /* DTYPE_F32 or DTYPE_BF16 */
    size_t conv_per, ssm_per;          /* elements per (layer, slot) */
    float *conv;                       /* (n_mamba, n_states, kc, conv_dim) owned */
    void *ssm;                         /* (n_mamba, n_states, nh, P, N) of ssm_dt, owned */
    int32_t *len;                      /* (n_states) tokens each slot has absorbed */
};

static int conv_dim_of(const model_config *c)
{
    return c->ssm_heads * c->ssm_head_dim + 2 * c->ssm_groups * c->ssm_state;
}

/* This rank's Mamba2 shape (model_tp: its heads and groups under tensor
 * parallelism, all of them in one process) and the widths that follow. */
typedef struct mdims {
    int nh, P, N, G;          /* local heads, head dim, state size, local groups */
    int di, GN, cd, proj;     /* local y width, B (or C) width, conv channels, in_proj rows */
    int hpg;                  /* heads per local group */
    int gs;                   /* the gated norm's group width (the full model's di / n_groups) */
    int nl;                   /* this stage's Mamba layers */
} mdims;

static mdims dims_of(const model_weights *w)
{
    const model_config *c = &w->cfg;
    mdims d = {.nh = w->tp.ssm_nh, .P = c->ssm_head_dim, .N = c->ssm_state, .G = w->tp.ssm_ng,
               .nl = w->tp.ssm_nl};
    d.di = d.nh * d.P, d.GN = d.G * d.N, d.cd = d.di + 2 * d.GN, d.proj = d.di + d.cd + d.nh;
    d.hpg = d.G > 0 ? d.nh / d.G : 0;
    d.gs = c->ssm_heads * c->ssm_head_dim / c->ssm_groups;
    return d;
}

int model_tp_setup_mamba(model_weights *w, char *err, size_t errlen)
{
    const model_config *c = &w->cfg;
    model_tp *t = &w->tp;
    const int N = t->tp_n, r = t->tp_rank, G = c->ssm_groups;
    if (N > 1 && c->ssm_heads % N) {
        snprintf(err, errlen, "--tp-size %d: mamba_num_heads (%d) is not divisible by it", N, c->ssm_heads);
        return -1;
    }
    if (N > 1 && G % N && N % G) {
        snprintf(err, errlen, "--tp-size %d: n_groups (%d) neither divides it nor is divisible by it", N, G);
        return -1;
    }
    t->ssm_nh = c->ssm_heads / N;
    t->ssm_h0 = r * t->ssm_nh;
    if (G % N == 0) { /* each rank its own groups */
        t->ssm_ng = G / N;
        t->ssm_g0 = r * t->ssm_ng;
    } else { /* fewer groups than ranks: N / G ranks share one (its B / C rows replicated) */
        t->ssm_ng = 1;
        t->ssm_g0 = r / (N / G);
    }
    /* pipeline stages: the Mamba layers of [layer0, layer1), and the most
     * any stage holds (rank 0 sizes every stage's state pool) */
    t->ssm_l0 = t->ssm_nl = t->ssm_nl_max = 0;
    for (int s = 0; s < t->pp_n; s++) {
        const int l0 = c->n_layer * s / t->pp_n, l1 = c->n_layer * (s + 1) / t->pp_n;
        int n = 0;
        for (int il = l0; il < l1; il++) n += c->layer_kinds[il] == 'M';
        if (n > t->ssm_nl_max) t->ssm_nl_max = n;
        if (s == t->stage) t->ssm_nl = n;
    }
    for (int il = 0; il < t->layer0; il++) t->ssm_l0 += c->layer_kinds[il] == 'M';
    return 0;
}

static size_t ssm_elem_bytes(dtype d) { return d == DTYPE_BF16 ? 2 : 4; }

/* One state of this rank: its heads' conv channels and SSM states, for
 * the Mamba layers of the stage that holds the most (every stage's pool
 * has rank 0's number of states). */
size_t model_mamba_state_bytes(const model *m, dtype ssm_dt)
{
    const model_config *c = m->cfg;
    if (!c->n_mamba) return 0;
    const mdims d = dims_of(m->w);
    size_t conv = (size_t)(c->ssm_conv - 1) * (size_t)d.cd * 4;
    size_t ssm = (size_t)d.nh * d.P * d.N * ssm_elem_bytes(ssm_dt);
    return (conv + ssm) * (size_t)m->w->tp.ssm_nl_max + sizeof(int32_t);
}

struct mamba2_cache *mamba2_cache_create(const model *m, int n_states, dtype ssm_dt)
{
    const model_config *c = m->cfg;
    const mdims d = dims_of(m->w);
    if (!c->n_mamba || n_states < 1 || (ssm_dt != DTYPE_F32 && ssm_dt != DTYPE_BF16)) {
        log_error("bad Mamba state cache: %d states of %s for %d Mamba layers", n_states,
                  dtype_name(ssm_dt), c->n_mamba);
        return NULL;
    }
    struct mamba2_cache *mc = calloc(1, sizeof *mc);
    if (!mc) return NULL;
    mc->n_states = n_states, mc->n_mamba = d.nl; /* this stage's layers, this rank's heads */
    mc->conv_dim = d.cd, mc->kc = c->ssm_conv - 1;
    mc->nh = d.nh, mc->P = d.P, mc->N = d.N;
    mc->ssm_dt = ssm_dt;
    mc->conv_per = (size_t)mc->kc * mc->conv_dim;
    mc->ssm_per = (size_t)mc->nh * mc->P * mc->N;
    size_t nslot = (size_t)n_states * mc->n_mamba;
    /* calloc: large zeroed blocks come from mmap, committed as slots get used */
    mc->conv = calloc(nslot * mc->conv_per + 1, sizeof(float));
    mc->ssm = calloc(nslot * mc->ssm_per + 1, ssm_elem_bytes(ssm_dt));
    mc->len = calloc((size_t)n_states, sizeof(int32_t));
    if (!mc->conv || !mc->ssm || !mc->len) {
        log_error("out of memory for %d Mamba states (%.2f GiB)", n_states,
                  (double)nslot * (mc->conv_per * 4 + mc->ssm_per * ssm_elem_bytes(ssm_dt)) / 1073741824.0);
        mamba2_cache_free(mc);
        return NULL;
    }
    return mc;
}

void mamba2_cache_free(struct mamba2_cache *mc)
{
    if (!mc) return;
    free(mc->conv), free(mc->ssm), free(mc->len);
    free(mc);
}

int model_kv_set_mamba_states(model *m, model_kv *kv, int n_states, dtype ssm_dt)
{
    if (!m->cfg->n_mamba || !kv) {
        log_error("%s has no Mamba layers: no recurrent states to size", m->cfg->architecture);
        return -1;
    }
    struct mamba2_cache *mc = mamba2_cache_create(m, n_states, ssm_dt);
    if (!mc) return -1;
    if (model_tp_mamba_states(m, kv, n_states, ssm_dt)) { /* the other ranks make theirs */
        mamba2_cache_free(mc);
        return -1;
    }
    mamba2_cache_free(kv->ssm);
    kv->ssm = mc;
    return 0;
}

int model_kv_mamba_states(const model_kv *kv) { return kv && kv->ssm ? kv->ssm->n_states : 0; }

static float *conv_at(const struct mamba2_cache *mc, int layer, int slot);
static char *ssm_at(const struct mamba2_cache *mc, int layer, int slot);

int model_kv_mamba_copy(model_kv *kv, int dst, int src)
{
    struct mamba2_cache *mc = kv ? kv->ssm : NULL;
    if (!mc || dst < 0 || src < 0 || dst >= mc->n_states || src >= mc->n_states) {
        log_error("cannot copy Mamba state slot %d to %d (%d slots)", src, dst, mc ? mc->n_states : 0);
        return -1;
    }
    if (dst == src) return 0;
    if (model_tp_mamba_copy(kv, dst, src)) return -1; /* the other ranks copy their slices */
    const size_t sb = mc->ssm_per * ssm_elem_bytes(mc->ssm_dt);
    for (int il = 0; il < mc->n_mamba; il++) {
        memcpy(conv_at(mc, il, dst), conv_at(mc, il, src), mc->conv_per * sizeof(float));
        memcpy(ssm_at(mc, il, dst), ssm_at(mc, il, src), sb);
    }
    mc->len[dst] = mc->len[src];
    return 0;
}

int model_kv_mamba_len(const model_kv *kv, int slot)
{
    const struct mamba2_cache *mc = kv ? kv->ssm : NULL;
    return mc && slot >= 0 && slot < mc->n_states ? mc->len[slot] : -1;
}

static float *conv_at(const struct mamba2_cache *mc, int layer, int slot)
{
    return mc->conv + ((size_t)layer * mc->n_states + (size_t)slot) * mc->conv_per;
}

static char *ssm_at(const struct mamba2_cache *mc, int layer, int slot)
{
    return (char *)mc->ssm +
           ((size_t)layer * mc->n_states + (size_t)slot) * mc->ssm_per * ssm_elem_bytes(mc->ssm_dt);
}

/* Per-thread floats: the conv's ones row or a widened bf16 state, or with
 * the chunked scan one group's widened states and its scratch. */
static size_t thread_floats(const model_config *c, int ssd_chunk)
{
    size_t per = (size_t)c->ssm_head_dim * c->ssm_state, cd = (size_t)conv_dim_of(c);
    if (ssd_chunk > 0) {
        const int hpg = c->ssm_heads / c->ssm_groups;
        per = (size_t)hpg * per + mamba2_ssd_scratch_floats(c->ssm_head_dim, c->ssm_state, ssd_chunk, hpg);
    }
    return per > cd ? per : cd;
}

static int slot_of(const model_batch *b, int s) { return b->seq_state ? b->seq_state[s] : s; }

int mamba2_begin(const model *m, model_kv *kv, const model_batch *b)
{
    struct mamba2_cache *mc = kv->ssm;
    if (!mc) {
        log_error("%s: the KV cache has no Mamba states", m->cfg->architecture);
        return -1;
    }
    for (int s = 0; s < b->n_seqs; s++) {
        int sl = slot_of(b, s), nq = b->seq_start[s + 1] - b->seq_start[s];
        int start = b->seq_kv_len[s] - nq;
        if (sl < 0 || sl >= mc->n_states) {
            log_error("sequence %d: Mamba state slot %d outside [0, %d)", s, sl, mc->n_states);
            return -1;
        }
        for (int u = 0; u < s; u++)
            if (slot_of(b, u) == sl) {
                log_error("sequences %d and %d share Mamba state slot %d", u, s, sl);
                return -1;
            }
        if (start > 0 && mc->len[sl] != start) {
            log_error("sequence %d continues at position %d but its Mamba state (slot %d) holds %d "
                      "tokens: a recurrent state cannot be rolled back (a cached prefix resumes "
                      "only from a checkpoint's copy)", s, start, sl, mc->len[sl]);
            return -1;
        }
        for (int k = b->seq_snap ? b->seq_snap[s] : 0; b->seq_snap && k < b->seq_snap[s + 1]; k++) {
            const int p = b->snap_pos[k], d = b->snap_state[k];
            if (p <= (k > b->seq_snap[s] ? b->snap_pos[k - 1] : start) || p > b->seq_kv_len[s] ||
                d < 0 || d >= mc->n_states) {
                log_error("sequence %d: Mamba checkpoint %d (position %d, slot %d) outside its new "
                          "positions (%d, %d] or the %d slots, or out of order", s, k, p, d, start,
                          b->seq_kv_len[s], mc->n_states);
                return -1;
            }
            for (int u = 0; u < b->n_seqs; u++)
                if (slot_of(b, u) == d) {
                    log_error("Mamba checkpoint slot %d is sequence %d's own state", d, u);
                    return -1;
                }
            for (int j = 0; j < k; j++)
                if (b->snap_state[j] == d) {
                    log_error("two Mamba checkpoints share slot %d", d);
                    return -1;
                }
        }
    }
    for (int s = 0; s < b->n_seqs; s++) {
        int sl = slot_of(b, s);
        if (b->seq_kv_len[s] - (b->seq_start[s + 1] - b->seq_start[s]) > 0) continue;
        for (int il = 0; il < mc->n_mamba; il++) {
            memset(conv_at(mc, il, sl), 0, mc->conv_per * sizeof(float));
            memset(ssm_at(mc, il, sl), 0, mc->ssm_per * ssm_elem_bytes(mc->ssm_dt));
        }
        mc->len[sl] = 0;
    }
    return 0;
}

void mamba2_end(model_kv *kv, const model_batch *b)
{
    for (int s = 0; s < b->n_seqs; s++) kv->ssm->len[slot_of(b, s)] = b->seq_kv_len[s];
    for (int k = 0; b->seq_snap && k < b->seq_snap[b->n_seqs]; k++) kv->ssm->len[b->snap_state[k]] = b->snap_pos[k];
}

/* Sequence s's checkpoints: entries [*k0, *k1) of snap_pos / snap_state. */
static void snaps_of(const model_batch *b, int s, int *k0, int *k1)
{
    *k0 = b->seq_snap ? b->seq_snap[s] : 0;
    *k1 = b->seq_snap ? b->seq_snap[s + 1] : 0;
}

/* The SSM states of heads [h0, h0 + nhd) (f32, nhd x (P, N)) into slot's
 * layer `layer` (rounded once when the states are bf16). */
static void store_heads(const struct mamba2_cache *mc, int layer, int slot, int h0, int nhd, const float *S)
{
    const size_t PN = (size_t)mc->P * mc->N, esz = ssm_elem_bytes(mc->ssm_dt);
    char *dst = ssm_at(mc, layer, slot) + (size_t)h0 * PN * esz;
    if (mc->ssm_dt == DTYPE_BF16) {
        uint16_t *bs = (uint16_t *)dst;
        for (size_t i = 0; i < (size_t)nhd * PN; i++) bs[i] = f32_to_bf16(S[i]);
    } else {
        memcpy(dst, S, (size_t)nhd * PN * sizeof(float));
    }
}

size_t mamba2_scratch_floats(const model_config *c, size_t T, int nth, int ssd_chunk)
{
    if (!c->n_mamba) return 0;
    size_t di = (size_t)c->ssm_heads * c->ssm_head_dim, cd = (size_t)conv_dim_of(c);
    size_t proj = di + cd + (size_t)c->ssm_heads;
    /* + the gated norm's per-group sums of squares (summed over the ranks
     * when a group spans several) */
    return T * (proj + cd + di + (size_t)c->ssm_groups) + (size_t)(nth > 0 ? nth : 1) * (thread_floats(c, ssd_chunk) + 16);
}

/* One head's recurrence over the rows [r0, r1) of a sequence: S (P, N)
 * f32 in place; x/B/C read from xc (rows of cd), dt from zx (rows of
 * proj), y written into yo (rows of di). */
static void scan_head(float *S, int P, int N, int r0, int r1, const float *xc, int cd,
                      const float *zx, int proj, int dt_off, float *yo, int di, int h, int xoff,
                      int boff, int coff, float A, float D, float dt_bias, float lo, float hi,
                      int simd)
{
    for (int t = r0; t < r1; t++) {
        const float dt = mamba2_dt(zx[(size_t)t * proj + dt_off + h], dt_bias, lo, hi);
        const float dA = expf(dt * A);
        const float *x = xc + (size_t)t * cd + xoff, *B = xc + (size_t)t * cd + boff,
                    *C = xc + (size_t)t * cd + coff;
        float *y = yo + (size_t)t * di + xoff;
        if (simd) {
            mamba2_step_avx2(S, P, N, x, B, C, dt, dA, D, y);
            continue;
        }
        for (int p = 0; p < P; p++) {
            float *st = S + (size_t)p * N;
            const float xd = x[p] * dt;
            float acc = 0.0f;
            for (int n = 0; n < N; n++) {
                st[n] = st[n] * dA + xd * B[n];
                acc += st[n] * C[n];
            }
            y[p] = acc + D * x[p];
        }
    }
}

/* The recurrence for head h of sequence s (a bf16 state widened into tmp). */
static void scan_pair(const model_config *c, const mdims *d, struct mamba2_cache *mc, const model_layer *l,
                      const model_batch *b, int s, int h, const float *xc, const float *zx,
                      float *yo, float *tmp, int simd)
{
    const int P = d->P, N = d->N, di = d->di, GN = d->GN, cd = d->cd, proj = d->proj, g = h / d->hpg;
    char *raw = ssm_at(mc, l->ssm_idx, slot_of(b, s)) + (size_t)h * P * N * ssm_elem_bytes(mc->ssm_dt);
    float *S = (float *)raw;
    if (mc->ssm_dt == DTYPE_BF16) {
        const uint16_t *bs = (const uint16_t *)raw;
        for (int i = 0; i < P * N; i++) tmp[i] = bf16_to_f32(bs[i]);
        S = tmp;
    }
    /* in pieces that end at the sequence's checkpoints (one piece without) */
    const int r1 = b->seq_start[s + 1], start = b->seq_kv_len[s] - (r1 - b->seq_start[s]);
    int k0, k1, r = b->seq_start[s];
    snaps_of(b, s, &k0, &k1);
    for (int k = k0; k <= k1; k++) {
        const int e = k < k1 ? b->seq_start[s] + (b->snap_pos[k] - start) : r1;
        scan_head(S, P, N, r, e, xc, cd, zx, proj, di + cd, yo, di, h, h * P, di + g * N,
                  di + GN + g * N, l->ssm_a[h], l->ssm_d[h], l->ssm_dt_bias[h], c->ssm_dt_lo,
                  c->ssm_dt_hi, simd);
        r = e;
        if (k < k1) store_heads(mc, l->ssm_idx, b->snap_state[k], h, 1, S);
    }
    if (mc->ssm_dt == DTYPE_BF16) {
        uint16_t *bs = (uint16_t *)raw;
        for (int i = 0; i < P * N; i++) bs[i] = f32_to_bf16(tmp[i]);
    }
}

void mamba2_mixer(model *m, model_kv *kv, const model_batch *b, const model_layer *l,
                  const linear_exec *ex, struct tpool *pool, int lo, int hi)
{
    const model_config *c = m->cfg;
    struct mamba2_cache *mc = kv->ssm;
    const int ith = ex->ith, nth = ex->nth, T = b->n_tokens;
    /* this rank's heads and groups (tensor parallelism: the layer's weights
     * were cut to them at load, heads h and groups g below are local) */
    const mdims d = dims_of(m->w);
    const int nh = d.nh, P = d.P, N = d.N, G = d.G;
    const int di = d.di, GN = d.GN, cd = d.cd, proj = d.proj, K = c->ssm_conv, kc = K - 1;
    float *gss = m->ssm, *zx = gss + (size_t)T * c->ssm_groups, *xc = zx + (size_t)T * proj, *yo = xc + (size_t)T * cd;
    const int ssd_chunk = m->w->mamba_ssd_min ? m->w->mamba_ssd_chunk : 0;
    const size_t per = thread_floats(c, ssd_chunk);
    float *tmp = yo + (size_t)T * di + (size_t)ith * (per + 16);

    linear(zx, m->xn, T, &l->wq, ex); /* in_proj -> z | xBC | dt */
    tpool_barrier(pool);

    /* causal depthwise conv + silu, channels [c0, c1) of every sequence,
     * row by row (the rows of zx and of the window are contiguous) */
    int c0, c1;
    kern_split(cd, ith, nth, &c0, &c1);
    float *ones = tmp; /* (c1 - c0) for kern_silu_mul; the scan reuses tmp after the barrier */
    for (int ch = 0; ch < c1 - c0; ch++) ones[ch] = 1.0f;
    for (int s = 0; s < b->n_seqs && c0 < c1; s++) {
        const int r0 = b->seq_start[s], n = b->seq_start[s + 1] - r0;
        float *cs = conv_at(mc, l->ssm_idx, slot_of(b, s)); /* (kc, cd) */
        for (int i = 0; i < n; i++) {
            float *o = xc + (size_t)(r0 + i) * cd;
            for (int ch = c0; ch < c1; ch++) o[ch] = l->ssm_conv_b ? l->ssm_conv_b[ch] : 0.0f;
            for (int k = 0; k < K; k++) {
                const int j = i - kc + k; /* input row; < 0: from the window */
                const float *in = j >= 0 ? zx + (size_t)(r0 + j) * proj + di : cs + (size_t)(kc + j) * cd;
                for (int ch = c0; ch < c1; ch++) o[ch] += l->ssm_conv_w[(size_t)ch * K + k] * in[ch];
            }
            kern_silu_mul(o + c0, o + c0, ones, c1 - c0);
        }
        /* checkpoints: the window of position p holds the inputs of
         * positions p - kc .. p - 1 (new row i = position start + i; i < 0
         * is row kc + i of the old window), gathered before it moves on */
        int k0, k1;
        snaps_of(b, s, &k0, &k1);
        for (int k = k0; k < k1; k++) {
            const int start = b->seq_kv_len[s] - n, p = b->snap_pos[k] - start;
            float *dw = conv_at(mc, l->ssm_idx, b->snap_state[k]);
            for (int q = 0; q < kc; q++) {
                const int i = p - kc + q;
                const float *src = i >= 0 ? zx + (size_t)(r0 + i) * proj + di : cs + (size_t)(kc + i) * cd;
                memcpy(dw + (size_t)q * cd + c0, src + c0, sizeof(float) * (size_t)(c1 - c0));
            }
        }
        /* the window keeps the last kc inputs of (window ++ new rows); row
         * q reads row n + q >= q + 1 before it is overwritten */
        for (int q = 0; q < kc; q++) {
            const int e = n + q;
            const float *src = e < kc ? cs + (size_t)e * cd : zx + (size_t)(r0 + e - kc) * proj + di;
            memmove(cs + (size_t)q * cd + c0, src + c0, sizeof(float) * (size_t)(c1 - c0));
        }
    }
    tpool_barrier(pool);

    /* the scan: (sequence, head) pairs of the recurrence, or with a
     * sequence of at least mamba_ssd_min new rows (sequence, group, head
     * run) units, the long ones by the chunked scan (mamba2_ssd.c) */
    const cpu_features *cf = cpu_get();
    const int simd = cf->avx2 && cf->fma && kernels_isa() != KERN_ISA_SCALAR;
    const int hpg = nh / G, bf = mc->ssm_dt == DTYPE_BF16;
    const size_t esz = ssm_elem_bytes(mc->ssm_dt), PN = (size_t)P * N;
    int use_ssd = 0;
    for (int s = 0; ssd_chunk && s < b->n_seqs; s++)
        use_ssd |= b->seq_start[s + 1] - b->seq_start[s] >= m->w->mamba_ssd_min;
    int p0, p1;
    if (!use_ssd) {
        kern_split(b->n_seqs * nh, ith, nth, &p0, &p1);
        for (int pr = p0; pr < p1; pr++)
            scan_pair(c, &d, mc, l, b, pr / nh, pr % nh, xc, zx, yo, tmp, simd);
    } else {
        const int units = b->n_seqs * G;
        int f = (nth + units - 1) / units; /* head runs per group: enough units for the threads */
        if (f > hpg) f = hpg;
        kern_split(units * f, ith, nth, &p0, &p1);
        for (int u = p0; u < p1; u++) {
            const int s = u / (G * f), g = (u / f) % G, part = u % f;
            const int h0 = g * hpg + part * hpg / f, h1 = g * hpg + (part + 1) * hpg / f;
            const int r0 = b->seq_start[s], n = b->seq_start[s + 1] - r0;
            if (n < m->w->mamba_ssd_min) {
                for (int h = h0; h < h1; h++) scan_pair(c, &d, mc, l, b, s, h, xc, zx, yo, tmp, simd);
                continue;
            }
            const int nhd = h1 - h0;
            char *raw = ssm_at(mc, l->ssm_idx, slot_of(b, s)) + (size_t)h0 * PN * esz;
            float *S = (float *)raw, *scr = tmp;
            if (bf) {
                const uint16_t *bs = (const uint16_t *)raw;
                for (size_t i = 0; i < (size_t)nhd * PN; i++) tmp[i] = bf16_to_f32(bs[i]);
                S = tmp, scr = tmp + (size_t)nhd * PN;
            }
            /* one call per piece between checkpoints (one call without):
             * each continues the state the last one left */
            const int start = b->seq_kv_len[s] - n;
            int k0, k1, i0 = 0;
            snaps_of(b, s, &k0, &k1);
            for (int k = k0; k <= k1; k++) {
                const int i1 = k < k1 ? b->snap_pos[k] - start : n;
                if (i1 > i0) {
                    const float *row = xc + (size_t)(r0 + i0) * cd;
                    const mamba2_ssd_args sa = {
                        .n = i1 - i0, .pos0 = start + i0, .L = ssd_chunk, .P = P, .N = N, .nhead = nhd,
                        .x = row + (size_t)h0 * P, .B = row + di + (size_t)g * N,
                        .C = row + di + GN + (size_t)g * N,
                        .dt = zx + (size_t)(r0 + i0) * proj + di + cd + h0, .ld = cd, .lddt = proj,
                        .ldy = di, .y = yo + (size_t)(r0 + i0) * di + (size_t)h0 * P, .S = S,
                        .A = l->ssm_a + h0, .D = l->ssm_d + h0, .dt_bias = l->ssm_dt_bias + h0,
                        .dt_lo = c->ssm_dt_lo, .dt_hi = c->ssm_dt_hi,
                        .state_zero = start == 0 && i0 == 0, /* mamba2_begin zeroed it */
                    };
                    mamba2_ssd_scan(&sa, scr, simd);
                }
                i0 = i1;
                if (k < k1) store_heads(mc, l->ssm_idx, b->snap_state[k], h0, nhd, S);
            }
            if (bf) {
                uint16_t *bs = (uint16_t *)raw;
                for (size_t i = 0; i < (size_t)nhd * PN; i++) bs[i] = f32_to_bf16(tmp[i]);
            }
        }
    }
    tpool_barrier(pool);

    /* y * silu(z), RMSNorm over groups of gs = the model's di / n_groups,
     * weight.  A rank holds whole groups (n_groups % ranks == 0), or a
     * part di of one group that several ranks share: then the rows' sums
     * of squares go through the group's all-reduce (slot g0 of a row of
     * n_groups, zeros elsewhere) before the division. */
    const int gs = d.gs, split = di < gs, NG = c->ssm_groups;
    for (int t = lo; t < hi; t++) {
        float *y = yo + (size_t)t * di;
        kern_silu_mul(y, zx + (size_t)t * proj, y, di); /* y * silu(z) */
        if (!split) continue;
        float ss = 0.0f;
        for (int i = 0; i < di; i++) ss += y[i] * y[i];
        for (int g = 0; g < NG; g++) gss[(size_t)t * NG + g] = g == m->w->tp.ssm_g0 ? ss : 0.0f;
    }
    if (split) {
        tpool_barrier(pool);
        model_tp_allreduce(m, gss, (size_t)T * NG, ith, pool); /* barrier inside */
    }
    for (int t = lo; t < hi; t++) {
        float *y = yo + (size_t)t * di;
        for (int g0 = 0; g0 < di; g0 += split ? di : gs) {
            const int n = split ? di : gs;
            float ss = 0.0f;
            if (split) ss = gss[(size_t)t * NG + m->w->tp.ssm_g0];
            else
                for (int i = g0; i < g0 + n; i++) ss += y[i] * y[i];
            const float r = 1.0f / sqrtf(ss / (float)gs + c->rms_norm_eps);
            for (int i = g0; i < g0 + n; i++) y[i] = y[i] * r * l->ssm_norm[i];
        }
    }
    tpool_barrier(pool);
    linear(m->xn, yo, T, &l->wo, ex); /* out_proj: row-parallel over the heads */
    tpool_barrier(pool);
    model_tp_allreduce(m, m->xn, (size_t)T * m->cfg->hidden_size, ith, pool);
}
