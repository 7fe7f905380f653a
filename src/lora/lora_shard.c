/* lora_shard — LoRA adapters under tensor parallelism (--tp-size) and
 * pipeline parallelism (--pp-size): each rank's slice of an adapter, and
 * the worker ranks' side of loading one.
 *
 * DESIGN: every rank holds only its shard of every adapter, cut the way
 * its base weight is (the weight's linear_shard, set at model load):
 *   - column-parallel projections (q/k/v, gate/up, Phi-3's fused parts
 *     after their split, the vocabulary-parallel LM head): the rank owns
 *     output rows [row0, row0 + rows) of W, so it keeps A whole and B's
 *     rows of that slice; its delta is exactly its rows of the full delta;
 *   - row-parallel projections (o, down): the rank owns input columns
 *     [col0, col0 + cols) and computes a partial output that the decoder's
 *     all-reduce sums.  It keeps A's columns of its slice and B whole:
 *     u_r = x_r · A_rᵀ is the rank's part of the shrink, and because the
 *     expand is linear, Σ_r scale · u_r · Bᵀ = scale · (Σ_r u_r) · Bᵀ =
 *     scale · (x · Aᵀ) · Bᵀ, the full delta — so each rank adds its partial
 *     delta to its partial output before the same all-reduce (no extra
 *     collective; the price is the expand, r x hidden per row, on every
 *     rank instead of one: cheap next to the base product);
 *   - the embedding is replicated, so is its adapter (whole).
 * Under pipeline parallelism a rank keeps only its stage's layers, the
 * embedding adapter on stage 0 and the LM head's on the last stage; the
 * other tensors are named and target-checked on every rank but shape-
 * checked only by the stage that owns them, whose error then is the
 * load's.  The kernels see a rank's slice as an ordinary adapter of its
 * (local) weight: nothing in linear.c knows about ranks.
 *
 * Shipping: rank 0 loads its own shard first (its checks come first and
 * cost the workers nothing), then model_tp_lora_load sends the folder's
 * path, the adapter's name and the limits; each worker reads the folder
 * itself (same machine or a shared filesystem, as SGLang), loads its shard
 * through lora_adapter_load (the same checks) and keeps it under rank 0's
 * uid; a failure on any rank fails the load and no rank keeps it.  A
 * batch names adapters by that uid; when rank 0's adapter is freed (its
 * last reference gone) the uid is queued and the workers free theirs with
 * the next step (model_tp_lora_release).
 */
#include "lora/lora_shard.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/model_impl.h"
#include "util/errmsg.h"
#include "util/log.h"

static const linear_weight *proj_weight(const model_layer *l, model_proj p)
{
    switch (p) {
    case MODEL_PROJ_Q: return &l->wq;
    case MODEL_PROJ_K: return &l->wk;
    case MODEL_PROJ_V: return &l->wv;
    case MODEL_PROJ_O: return &l->wo;
    case MODEL_PROJ_GATE: return &l->wgate;
    case MODEL_PROJ_UP: return &l->wup;
    case MODEL_PROJ_DOWN: return &l->wdown;
    default: return NULL;
    }
}

int lora_shard_proj(const model *m, int layer, model_proj p, linear_shard *sh)
{
    const model_tp *t = &m->w->tp;
    if (layer >= 0 && layer < m->w->cfg.n_layer && (layer < t->layer0 || layer >= t->layer1)) return 1;
    int n, k, rc = model_proj_shape(m, layer, p, &n, &k);
    if (rc) return rc;
    *sh = proj_weight(&m->w->layers[layer], p)->shard;
    if (sh->rows != n || sh->cols != k) *sh = linear_shard_full(n, k); /* not sliced at load */
    return 0;
}

int lora_shard_lm_head(const model *m, linear_shard *sh)
{
    const model_tp *t = &m->w->tp;
    if (t->pp_n > 1 && t->stage != t->pp_n - 1) return 1;
    int n, k;
    model_lm_head_shape(m, &n, &k);
    *sh = m->w->lm_head.shard;
    if (sh->rows != n || sh->cols != k) *sh = linear_shard_full(n, k);
    return 0;
}

int lora_shard_embed_elsewhere(const model *m) { return m->w->tp.layer0 != 0; }

size_t lora_shard_pair_bytes(const linear_shard *sh, int r, bool bf16)
{
    return (bf16 ? 2 : 4) * (size_t)r * ((size_t)sh->cols + (size_t)sh->rows);
}

/* Element i of t as f32. */
static float at_f32(const st_tensor *t, size_t i)
{
    const char *p = t->data;
    if (t->dt == DTYPE_F32) {
        float v;
        memcpy(&v, p + i * 4, 4);
        return v;
    }
    uint16_t h;
    memcpy(&h, p + i * 2, 2);
    return t->dt == DTYPE_BF16 ? bf16_to_f32(h) : f16_to_f32(h);
}

char *lora_shard_copy(const st_tensor *A, const st_tensor *B, int r, const linear_shard *sh,
                      bool bf16, char *p, linear_adapter *la)
{
    const size_t k = (size_t)sh->full_cols, c0 = (size_t)sh->col0, kc = (size_t)sh->cols;
    const size_t r0 = (size_t)sh->row0, nr = (size_t)sh->rows;
    la->a = p;
    if (bf16) {
        uint16_t *q = (uint16_t *)p;
        const char *as = A->data, *bs = B->data;
        for (int j = 0; j < r; j++) memcpy(q + (size_t)j * kc, as + ((size_t)j * k + c0) * 2, kc * 2);
        q += (size_t)r * kc;
        la->bt = q;
        for (size_t o = 0; o < nr; o++)
            for (int j = 0; j < r; j++) memcpy(&q[(size_t)j * nr + o], bs + ((r0 + o) * r + j) * 2, 2);
        return (char *)(q + (size_t)r * nr);
    }
    float *q = (float *)p;
    for (int j = 0; j < r; j++)
        for (size_t c = 0; c < kc; c++) q[(size_t)j * kc + c] = at_f32(A, (size_t)j * k + c0 + c);
    q += (size_t)r * kc;
    la->bt = q;
    for (size_t o = 0; o < nr; o++)
        for (int j = 0; j < r; j++) q[(size_t)j * nr + o] = at_f32(B, (r0 + o) * r + j);
    return (char *)(q + (size_t)r * nr);
}

int lora_shard_name_ok(const model *m, const char *aname, const char *tname, char *err, size_t errlen)
{
    const model_tp *t = &m->w->tp;
    if (t->size > 1 && m->w->arch && m->w->arch->mla) { /* per-head absorbed slices not cut yet */
        errmsg_set(err, errlen, "LoRA adapter %s: tensor %s adapts a DeepSeek (multi-head latent attention) "
                   "model, whose adapters sglc does not shard across the %d %s-parallel ranks yet (load it "
                   "with --tp-size 1 --pp-size 1)", aname, tname, t->size, t->pp_n > 1 ? "pipeline" : "tensor");
        return -1;
    }
    if (t->size <= 1 || (!strstr(tname, ".experts.") && !strstr(tname, "shared_expert"))) return 0;
    errmsg_set(err, errlen, "LoRA adapter %s: tensor %s adapts an MoE expert, which sglc does not "
               "shard across the %d %s-parallel ranks yet (load it with --tp-size 1 --pp-size 1, or "
               "target attention only)", aname, tname, t->size, t->pp_n > 1 ? "pipeline" : "tensor");
    return -1;
}

/* The load message: int32 max_rank, uint32 allowed, name NUL, path NUL. */
int lora_shard_ship(lora_adapter *a, const model *m, const lora_limits *lim, char *err,
                    size_t errlen)
{
    if (model_tp_size(m) <= 1 || model_tp_rank(m) != 0) return 0;
    size_t nl = strlen(a->name) + 1, pl = strlen(a->path) + 1, len = 8 + nl + pl;
    char *msg = malloc(len);
    if (!msg) {
        errmsg_set(err, errlen, "LoRA adapter %s: out of memory", a->name);
        return -1;
    }
    int32_t mr = lim ? lim->max_rank : 0;
    uint32_t al = lim ? lim->allowed : 0;
    memcpy(msg, &mr, 4);
    memcpy(msg + 4, &al, 4);
    memcpy(msg + 8, a->name, nl);
    memcpy(msg + 8 + nl, a->path, pl);
    char e2[480];
    int rc = model_tp_lora_load((model *)m, a->uid, msg, len, e2, sizeof e2);
    free(msg);
    if (rc) {
        errmsg_set(err, errlen, "LoRA adapter %s: loading it on the other ranks failed: %s", a->name, e2);
        return -1;
    }
    a->ma.tp_uid = a->uid;
    return 0;
}

static const model_adapter *worker_load(model *m, const void *msg, size_t len, uint64_t uid,
                                        char *err, size_t errlen)
{
    const char *s = msg;
    if (len < 10 || s[len - 1]) {
        errmsg_set(err, errlen, "malformed LoRA load message");
        return NULL;
    }
    int32_t mr;
    uint32_t al;
    memcpy(&mr, s, 4);
    memcpy(&al, s + 4, 4);
    const char *name = s + 8, *path = memchr(name, 0, len - 8);
    if (!path || ++path >= s + len) {
        errmsg_set(err, errlen, "malformed LoRA load message");
        return NULL;
    }
    lora_limits lim = {.max_rank = mr, .allowed = al};
    lora_adapter *a = lora_adapter_load(name, path, m, &lim, err, errlen);
    if (!a) return NULL;
    a->uid = uid;
    log_info("rank %d: LoRA adapter %s (id %llu): this rank's shard, %zu bytes", model_tp_rank(m), name,
             (unsigned long long)uid, a->bytes);
    return &a->ma;
}

static void worker_release(const model_adapter *ad)
{
    if (!ad) return;
    lora_adapter *a = (lora_adapter *)((const char *)ad - offsetof(lora_adapter, ma));
    log_info("worker rank: LoRA adapter %s (id %llu) freed", a->name, (unsigned long long)a->uid);
    lora_adapter_unref(a);
}

void lora_shard_install(void)
{
    static const model_tp_lora_hooks h = {worker_load, worker_release};
    model_tp_set_lora_hooks(&h);
}
