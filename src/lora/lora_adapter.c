/* lora_adapter — load one PEFT adapter folder against a base model (see
 * lora.h for the format and the checks).
 *
 * DESIGN: two passes over the archive's tensors.  The first names every
 * tensor (layer, projection, A or B; anything else is an error naming the
 * tensor) and checks its shape against the model, so a bad adapter fails
 * before any allocation; the second converts all pairs into one f32
 * allocation: A (r, k) copied, B (n, r) transposed to Bᵀ (r, n), bf16
 * pairs kept bf16, others as f32.  Fused pairs (qkv_proj, gate_up_proj)
 * are set aside in pass 1 and become per-part views (A shared, B's rows
 * offset) in the same slots, so pass 2 never sees them.  Slots beyond
 * the dense projections (slot_map): DeepSeek's MLA modules and every
 * expert / shared expert part of each layer; kv_b_proj is converted into
 * per-head views on the absorbed matrices (see mla.c).  The
 * safetensors file is closed afterwards: nothing is borrowed from it.
 * Under tensor / pipeline parallelism each rank keeps its slice of every
 * pair and rank 0 ships the load to the other ranks (lora_shard.c). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "lora/lora.h"
#include "lora/lora_shard.h"
#include "model/safetensors.h"
#include "util/errmsg.h"
#include "util/fileio.h"
#include "util/timeutil.h"

#define CONFIG_MAX (1u << 20)

static const char *const PROJ_NAMES[MODEL_NPROJ] = {
    "self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
    "mlp.gate_proj",    "mlp.up_proj",      "mlp.down_proj",
};

/* Slots of one adapter's pairs, in this order: the dense projections
 * (layer * MODEL_NPROJ + proj), the MLA ones (mla0 + layer * 4 + q_a /
 * q_b / kv_a / kv_b), the experts (moe0 + (layer * (E + 1) + e) * 3 +
 * gate / up / down, e = E the shared expert), the LM head, embed_tokens. */
typedef struct slot_map {
    int L, E, mla0, moe0, head, emb, n;
} slot_map;

static slot_map slot_map_of(int L, int E)
{
    slot_map sm = {.L = L, .E = E, .mla0 = L * MODEL_NPROJ};
    sm.moe0 = sm.mla0 + L * 4;
    sm.head = sm.moe0 + L * (E + 1) * 3;
    sm.emb = sm.head + 1;
    sm.n = sm.emb + 1;
    return sm;
}

/* One tensor's role. */
typedef struct tinfo {
    int slot;
    int is_b;
    int fused;    /* 0, FUSED_QKV (slot = layer's q) or FUSED_GATE_UP (slot = its gate) */
    unsigned bit; /* its target_modules bit(s) */
} tinfo;

enum { FUSED_QKV = 1, FUSED_GATE_UP = 2 };

static const char *const MLA_NAMES[4] = {
    "self_attn.q_a_proj", "self_attn.q_b_proj", "self_attn.kv_a_proj_with_mqa", "self_attn.kv_b_proj",
};
static const unsigned MLA_BITS[4] = {1u << LORA_T_Q_A, 1u << LORA_T_Q_B, 1u << LORA_T_KV_A,
                                     1u << LORA_T_KV_B};
static const unsigned EXPERT_BITS[3] = {1u << MODEL_PROJ_GATE, 1u << MODEL_PROJ_UP,
                                        1u << MODEL_PROJ_DOWN};

/* The expert part named by s[0, n): gate/up/down_proj or Mixtral's w1 /
 * w3 / w2; -1 when none. */
static int expert_part(const char *s, size_t n)
{
    static const char *const nm[2][3] = {{"gate_proj", "up_proj", "down_proj"}, {"w1", "w3", "w2"}};
    for (int st = 0; st < 2; st++)
        for (int j = 0; j < 3; j++)
            if (strlen(nm[st][j]) == n && !strncmp(s, nm[st][j], n)) return j;
    return -1;
}

/* The module of slot s, for messages ("self_attn.q_proj", "mlp.experts.3.up_proj"). */
static void slot_name(const slot_map *sm, int s, char *buf, size_t len)
{
    static const char *const part[3] = {"gate_proj", "up_proj", "down_proj"};
    if (s < sm->mla0) snprintf(buf, len, "%s", PROJ_NAMES[s % MODEL_NPROJ]);
    else if (s < sm->moe0) snprintf(buf, len, "%s", MLA_NAMES[(s - sm->mla0) % 4]);
    else if (s < sm->head) {
        int i = (s - sm->moe0) / 3, e = i % (sm->E + 1);
        if (e == sm->E) snprintf(buf, len, "the shared expert's %s", part[(s - sm->moe0) % 3]);
        else snprintf(buf, len, "mlp.experts.%d.%s", e, part[(s - sm->moe0) % 3]);
    } else snprintf(buf, len, "%s", s == sm->head ? "lm_head" : "embed_tokens");
}

/* The layer of a layer slot. */
static int slot_layer(const slot_map *sm, int s)
{
    if (s < sm->mla0) return s / MODEL_NPROJ;
    if (s < sm->moe0) return (s - sm->mla0) / 4;
    return (s - sm->moe0) / 3 / (sm->E + 1);
}


/* Name a tensor.  0 ok; -1 with a message (unknown name, unsupported
 * variant). */
static int name_tensor(const char *name, const slot_map *sm, tinfo *ti, char *err, size_t errlen)
{
    const int n_layer = sm->L;
    const char *p = name;
    static const char pre[] = "base_model.model.";
    if (!strncmp(p, pre, sizeof pre - 1)) p += sizeof pre - 1;
    /* multimodal wrappers (Gemma3ForConditionalGeneration): the text model
     * under language_model.model.* (older transformers) or
     * model.language_model.* (>= 4.52), the head language_model.lm_head */
    char norm[512];
    static const char mm_old[] = "language_model.model.", mm_new[] = "model.language_model.",
                      mm_head[] = "language_model.lm_head.";
    const char *rest = !strncmp(p, mm_old, sizeof mm_old - 1)   ? p + sizeof mm_old - 1
                       : !strncmp(p, mm_new, sizeof mm_new - 1) ? p + sizeof mm_new - 1
                                                                : NULL;
    if (rest && strlen(rest) < sizeof norm - 8) {
        snprintf(norm, sizeof norm, "model.%s", rest);
        p = norm;
    } else if (!strncmp(p, mm_head, sizeof mm_head - 1)) {
        p += sizeof "language_model." - 1;
    }
    if (strstr(p, "lora_magnitude_vector")) {
        errmsg_set(err, errlen, "tensor %s: DoRA adapters are not supported", name);
        return -1;
    }
    static const char emb[] = "model.embed_tokens.lora_embedding_";
    if (!strncmp(p, emb, sizeof emb - 1)) { /* (r, vocab) / (hidden, r), no ".weight" */
        const char *q = p + sizeof emb - 1;
        if ((*q == 'A' || *q == 'B') && (!q[1] || !strcmp(q + 1, ".weight"))) {
            ti->slot = sm->emb;
            ti->bit = 1u << LORA_T_EMBED;
            ti->is_b = *q == 'B';
            return 0;
        }
        goto unknown;
    }
    const char *suf = strstr(p, ".lora_A.weight");
    int is_b = 0;
    if (!suf) {
        suf = strstr(p, ".lora_B.weight");
        is_b = 1;
    }
    if (!suf || strlen(suf) != strlen(".lora_A.weight")) goto unknown;
    size_t mlen = (size_t)(suf - p);
    ti->is_b = is_b;
    if (mlen == 7 && !strncmp(p, "lm_head", 7)) {
        ti->slot = sm->head;
        ti->bit = 1u << LORA_T_LM_HEAD;
        return 0;
    }
    static const char lpre[] = "model.layers.";
    if (strncmp(p, lpre, sizeof lpre - 1)) goto unknown;
    const char *q = p + sizeof lpre - 1;
    char *end;
    errno = 0;
    long layer = strtol(q, &end, 10);
    if (end == q || *end != '.' || errno || layer < 0) goto unknown;
    if (layer >= n_layer) {
        errmsg_set(err, errlen, "tensor %s: layer %ld, the model has %d layers", name, layer,
                   n_layer);
        return -1;
    }
    const char *mod = end + 1;
    size_t modlen = (size_t)(suf - mod);
    ti->fused = 0;
    static const char qkv[] = "self_attn.qkv_proj", gu[] = "mlp.gate_up_proj";
    if (modlen == sizeof qkv - 1 && !strncmp(mod, qkv, modlen)) {
        ti->slot = (int)layer * MODEL_NPROJ + MODEL_PROJ_Q, ti->fused = FUSED_QKV;
        ti->bit = (1u << MODEL_PROJ_Q) | (1u << MODEL_PROJ_K) | (1u << MODEL_PROJ_V);
        return 0;
    }
    if (modlen == sizeof gu - 1 && !strncmp(mod, gu, modlen)) {
        ti->slot = (int)layer * MODEL_NPROJ + MODEL_PROJ_GATE, ti->fused = FUSED_GATE_UP;
        ti->bit = (1u << MODEL_PROJ_GATE) | (1u << MODEL_PROJ_UP);
        return 0;
    }
    for (int i = 0; i < MODEL_NPROJ; i++)
        if (strlen(PROJ_NAMES[i]) == modlen && !strncmp(mod, PROJ_NAMES[i], modlen)) {
            ti->slot = (int)layer * MODEL_NPROJ + i;
            ti->bit = 1u << i;
            return 0;
        }
    for (int i = 0; i < 4; i++)
        if (strlen(MLA_NAMES[i]) == modlen && !strncmp(mod, MLA_NAMES[i], modlen)) {
            ti->slot = sm->mla0 + (int)layer * 4 + i;
            ti->bit = MLA_BITS[i];
            return 0;
        }
    /* experts: mlp.experts.E.<part> / block_sparse_moe.experts.E.<part>; shared:
     * mlp.shared_expert.<part> (Qwen2-MoE) / mlp.shared_experts.<part> (DeepSeek) */
    static const char ex1[] = "mlp.experts.", ex2[] = "block_sparse_moe.experts.",
                      sh1[] = "mlp.shared_expert.", sh2[] = "mlp.shared_experts.";
    const char *mend = mod + modlen;
    const char *xp = !strncmp(mod, ex1, sizeof ex1 - 1)   ? mod + sizeof ex1 - 1
                     : !strncmp(mod, ex2, sizeof ex2 - 1) ? mod + sizeof ex2 - 1
                                                          : NULL;
    if (xp && xp < mend) {
        errno = 0;
        long e = strtol(xp, &end, 10);
        if (end == xp || *end != '.' || errno || e < 0 || end >= mend) goto unknown;
        int part = expert_part(end + 1, (size_t)(mend - end - 1));
        if (part < 0) goto unknown;
        if (e >= sm->E) {
            if (sm->E) errmsg_set(err, errlen, "tensor %s: expert %ld, the model has %d experts per "
                                  "MoE layer", name, e, sm->E);
            else errmsg_set(err, errlen, "tensor %s: expert %ld, the model has no experts", name, e);
            return -1;
        }
        ti->slot = sm->moe0 + ((int)layer * (sm->E + 1) + (int)e) * 3 + part;
        ti->bit = EXPERT_BITS[part];
        return 0;
    }
    const char *sp = !strncmp(mod, sh2, sizeof sh2 - 1)   ? mod + sizeof sh2 - 1
                     : !strncmp(mod, sh1, sizeof sh1 - 1) ? mod + sizeof sh1 - 1
                                                          : NULL;
    if (sp && sp < mend) {
        int part = expert_part(sp, (size_t)(mend - sp));
        if (part < 0) goto unknown;
        ti->slot = sm->moe0 + ((int)layer * (sm->E + 1) + sm->E) * 3 + part;
        ti->bit = EXPERT_BITS[part];
        return 0;
    }
unknown:
    errmsg_set(err, errlen,
               "tensor %s is not a LoRA weight of a module sglc can adapt (q/k/v/o_proj, "
               "qkv_proj, gate/up/down_proj, gate_up_proj, MoE experts and shared experts, "
               "q_a_proj, q_b_proj, kv_a_proj_with_mqa, kv_b_proj, lm_head, embed_tokens)",
               name);
    return -1;
}

/* The error for a projection model_proj_shape refused (rc), naming the
 * module. */
static void no_proj_msg(int rc, const char *name, const char *tname, int layer, const char *mod,
                        char *err, size_t errlen)
{
    if (rc == -2 && (strstr(mod, "expert")))
        errmsg_set(err, errlen, "LoRA adapter %s: tensor %s targets %s of layer %d, which is not a "
                   "mixture-of-experts layer", name, tname, mod, layer);
    else if (rc == -2)
        errmsg_set(err, errlen, "LoRA adapter %s: tensor %s targets %s of layer %d, whose MLP is "
                   "mixture-of-experts (adapt its experts: mlp.experts.E.%s)", name, tname, mod,
                   layer, strchr(mod, '.') ? strchr(mod, '.') + 1 : mod);
    else if (rc == -3)
        errmsg_set(err, errlen, "LoRA adapter %s: tensor %s targets %s of layer %d, which %s "
                   "multi-head latent attention (DeepSeek)", name, tname, mod, layer,
                   strstr(mod, "k_proj") || strstr(mod, "v_proj") ? "has no such projection in its"
                                                                   : "does not use");
    else
        errmsg_set(err, errlen, "LoRA adapter %s: tensor %s targets %s, which layer %d of this "
                   "model does not have", name, tname, mod, layer);
}

/* The (n, k) of slot s of model m (model_proj_shape / model_mla_shape /
 * model_expert_shape's codes). */
static int slot_shape(const model *m, const slot_map *sm, int s, int *n, int *k)
{
    if (s < sm->mla0) return model_proj_shape(m, s / MODEL_NPROJ, (model_proj)(s % MODEL_NPROJ), n, k);
    if (s < sm->moe0) {
        int j = (s - sm->mla0) % 4;
        return model_mla_shape(m, (s - sm->mla0) / 4, j == 3 ? MODEL_NMLA : j, n, k);
    }
    int i = (s - sm->moe0) / 3, e = i % (sm->E + 1);
    return model_expert_shape(m, i / (sm->E + 1), e == sm->E ? -1 : e, (s - sm->moe0) % 3, n, k);
}

/* Elements [i0, i0 + n) of t as f32 into out (one loop per dtype). */
static void row_f32(const st_tensor *t, size_t i0, size_t n, float *out)
{
    const char *p = t->data;
    if (t->dt == DTYPE_F32) {
        memcpy(out, p + i0 * 4, n * 4);
        return;
    }
    uint16_t h[256];
    for (size_t o = 0; o < n; o += 256) {
        size_t m = n - o < 256 ? n - o : 256;
        memcpy(h, p + (i0 + o) * 2, m * 2);
        if (t->dt == DTYPE_BF16)
            for (size_t i = 0; i < m; i++) out[o + i] = bf16_to_f32(h[i]);
        else
            for (size_t i = 0; i < m; i++) out[o + i] = f16_to_f32(h[i]);
    }
}

static int is_file(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

void lora_adapter_ref(lora_adapter *a) { __atomic_add_fetch(&a->refs, 1, __ATOMIC_ACQ_REL); }

void lora_adapter_unref(lora_adapter *a)
{
    if (!a || __atomic_sub_fetch(&a->refs, 1, __ATOMIC_ACQ_REL) > 0) return;
    model_tp_lora_release(a->ma.tp_uid); /* rank 0: the workers' shards go too */
    free(a->name);
    free(a->path);
    free((void *)a->ma.proj);
    free((void *)a->ma.mla), free((void *)a->ma.kvb), free((void *)a->ma.moe);
    free(a->mem);
    free(a);
}

lora_adapter *lora_adapter_load(const char *name, const char *path, const model *m,
                                const lora_limits *lim, char *err, size_t errlen)
{
    static uint64_t next_uid = 1;
    double t0 = time_now_sec();
    const model_config *mc = model_get_config(m);
    const int L = mc->n_layer;
    const slot_map sm = slot_map_of(L, mc->n_expert > 0 ? mc->n_expert : 0);
    char dir[4096], fpath[4200];
    snprintf(dir, sizeof dir, "%s", path);
    size_t dl = strlen(dir);
    if (dl > 12 && !strcmp(dir + dl - 12, ".safetensors")) {
        char *sl = strrchr(dir, '/');
        if (sl) *sl = 0;
        else snprintf(dir, sizeof dir, ".");
    }
    snprintf(fpath, sizeof fpath, "%s/adapter_config.json", dir);
    size_t clen = 0;
    char *ctext = fileio_read(fpath, CONFIG_MAX, &clen);
    if (!ctext) {
        errmsg_set(err, errlen, "LoRA adapter %s: cannot read %s (a PEFT adapter folder holds "
                   "adapter_config.json and adapter_model.safetensors)", name, fpath);
        return NULL;
    }
    lora_config cfg;
    char e2[512];
    int prc = lora_config_parse(ctext, clen, &cfg, e2, sizeof e2);
    free(ctext);
    if (prc) {
        errmsg_set(err, errlen, "LoRA adapter %s: %s", name, e2);
        return NULL;
    }
    int max_rank = lim && lim->max_rank > 0 ? lim->max_rank : LINEAR_MAX_RANK;
    if (cfg.r > max_rank) {
        errmsg_set(err, errlen, "LoRA adapter %s: rank %d exceeds --max-lora-rank %d", name, cfg.r,
                   max_rank);
        return NULL;
    }
    if (lim && lim->allowed && (cfg.targets & ~lim->allowed)) {
        char want[256], have[256];
        lora_targets_str(cfg.targets & ~lim->allowed, want, sizeof want);
        lora_targets_str(lim->allowed, have, sizeof have);
        errmsg_set(err, errlen, "LoRA adapter %s: target modules %s are not in --lora-target-modules "
                   "(%s)", name, want, have);
        return NULL;
    }
    snprintf(fpath, sizeof fpath, "%s/adapter_model.safetensors", dir);
    if (!is_file(fpath)) {
        char bin[4200];
        snprintf(bin, sizeof bin, "%s/adapter_model.bin", dir);
        if (is_file(bin))
            errmsg_set(err, errlen, "LoRA adapter %s: %s is a pickle file, which sglc does not load; "
                       "save the adapter with safe_serialization=True (adapter_model.safetensors)",
                       name, bin);
        else errmsg_set(err, errlen, "LoRA adapter %s: %s not found", name, fpath);
        return NULL;
    }
    st_archive ar;
    if (st_open(&ar, fpath, e2, sizeof e2)) {
        errmsg_set(err, errlen, "LoRA adapter %s: %s", name, e2);
        return NULL;
    }
    lora_adapter *a = NULL;
    const int nslot = sm.n;
    const int s_head = sm.head, s_emb = sm.emb;
    const st_tensor **ta = calloc((size_t)nslot * 2, sizeof *ta);
    linear_adapter *proj = calloc((size_t)L * MODEL_NPROJ, sizeof *proj);
    linear_adapter *mla = NULL, *kvb = NULL, *moe = NULL; /* made when a pair needs them */
    /* fused checkpoints (Phi-3): the qkv_proj / gate_up_proj pairs per layer
     * [layer][group][is_b], and the per-part views of them put into ta */
    const st_tensor **fta = calloc((size_t)L * 4, sizeof *fta);
    st_tensor *views = calloc((size_t)L * 10, sizeof *views);
    linear_shard *shs = calloc((size_t)nslot, sizeof *shs); /* this rank's slice of each pair */
    if (!ta || !proj || !fta || !views || !shs) {
        errmsg_set(err, errlen, "LoRA adapter %s: out of memory", name);
        goto fail;
    }
    char mname[96];
    /* pass 1: name, shape-check */
    size_t floats = 0; /* bytes of the converted pairs */
    for (int i = 0; i < ar.n_tensors; i++) {
        const st_tensor *t = &ar.tensors[i];
        tinfo ti = {0};
        if (lora_shard_name_ok(m, name, t->name, err, errlen)) goto fail; /* TP / PP: unsliced kinds */
        if (name_tensor(t->name, &sm, &ti, e2, sizeof e2)) {
            errmsg_set(err, errlen, "LoRA adapter %s: %s", name, e2);
            goto fail;
        }
        int slot = ti.slot;
        unsigned bit = ti.bit;
        if ((cfg.targets & bit) != bit) {
            errmsg_set(err, errlen, "LoRA adapter %s: tensor %s is for a module not in target_modules",
                       name, t->name);
            goto fail;
        }
        if (t->dt != DTYPE_F32 && t->dt != DTYPE_F16 && t->dt != DTYPE_BF16) {
            errmsg_set(err, errlen, "LoRA adapter %s: tensor %s has dtype %s (F32, F16 or BF16 only)",
                       name, t->name, t->dtype_str);
            goto fail;
        }
        const st_tensor **dst = ti.fused ? &fta[((slot / MODEL_NPROJ) * 2 + ti.fused - 1) * 2 +
                                                ti.is_b]
                                         : &ta[slot * 2 + ti.is_b];
        if (*dst) {
            errmsg_set(err, errlen, "LoRA adapter %s: tensor %s appears twice", name, t->name);
            goto fail;
        }
        *dst = t;
    }
    int n_pairs = 0;
    /* fused pairs: A is shared by the parts, B's rows split (q, k, v rows;
     * gate, up rows), each part then checked and stored as its own pair */
    for (int f = 0; f < L * 2; f++) {
        const st_tensor *A = fta[f * 2], *B = fta[f * 2 + 1];
        if (!A && !B) continue;
        if (!A || !B) {
            errmsg_set(err, errlen, "LoRA adapter %s: %s has no lora_%s partner", name,
                       (A ? A : B)->name, A ? "B" : "A");
            goto fail;
        }
        const int layer = f / 2, np = f % 2 ? 2 : 3;
        const model_proj p0 = f % 2 ? MODEL_PROJ_GATE : MODEL_PROJ_Q;
        int rows[3], total = 0, here = 1;
        for (int j = 0; j < np; j++) {
            linear_shard sh = {0};
            int rc = lora_shard_proj(m, layer, (model_proj)(p0 + j), &sh);
            if (rc == 1) here = 0; /* another pipeline stage's layer: checked there */
            else if (rc) {
                no_proj_msg(rc, name, B->name, layer, PROJ_NAMES[p0 + j], err, errlen);
                goto fail;
            }
            rows[j] = sh.full_rows, total += rows[j];
        }
        if (!here) {
            n_pairs++;
            continue;
        }
        if (B->ndim != 2 || B->shape[0] != total || B->shape[1] != cfg.r) {
            errmsg_set(err, errlen, "LoRA adapter %s: tensor %s has shape [%lld, %lld], expected "
                       "[%d, %d] (out_features of the fused module, r)", name, B->name,
                       (long long)B->shape[0], B->ndim > 1 ? (long long)B->shape[1] : -1LL, total,
                       cfg.r);
            goto fail;
        }
        const size_t es = B->dt == DTYPE_F32 ? 4 : 2;
        for (int j = 0, off = 0; j < np; off += rows[j], j++) {
            int s = layer * MODEL_NPROJ + p0 + j;
            if (ta[s * 2] || ta[s * 2 + 1]) {
                errmsg_set(err, errlen, "LoRA adapter %s: tensor %s and a %s tensor of layer %d both "
                           "adapt %s", name, B->name, PROJ_NAMES[p0 + j], layer, PROJ_NAMES[p0 + j]);
                goto fail;
            }
            st_tensor *va = &views[(layer * 5 + (f % 2) * 3 + j) * 2], *vb = va + 1;
            *va = *A, *vb = *B;
            vb->shape[0] = rows[j];
            vb->data = (const char *)B->data + (size_t)off * cfg.r * es;
            vb->nbytes = (size_t)rows[j] * cfg.r * es;
            ta[s * 2] = va, ta[s * 2 + 1] = vb;
        }
    }
    for (int s = 0; s < nslot; s++) {
        const st_tensor *A = ta[s * 2], *B = ta[s * 2 + 1];
        if (!A && !B) continue;
        const st_tensor *have = A ? A : B;
        if (!A || !B) {
            errmsg_set(err, errlen, "LoRA adapter %s: %s has no lora_%s partner", name, have->name,
                       A ? "B" : "A");
            goto fail;
        }
        int n, k, there = 0; /* there: another pipeline stage keeps (and checks) it */
        if (s == s_head) {
            there = lora_shard_lm_head(m, &shs[s]);
        } else if (s == s_emb) { /* A (r, vocab), B (hidden, r), replicated */
            there = lora_shard_embed_elsewhere(m);
            shs[s] = linear_shard_full(mc->hidden_size, mc->vocab_size);
        } else {
            int rc = s < sm.mla0 ? lora_shard_proj(m, s / MODEL_NPROJ, (model_proj)(s % MODEL_NPROJ), &shs[s])
                                 : slot_shape(m, &sm, s, &n, &k);
            if (rc < 0) {
                slot_name(&sm, s, mname, sizeof mname);
                no_proj_msg(rc, name, have->name, slot_layer(&sm, s), mname, err, errlen);
                goto fail;
            }
            if (s >= sm.mla0) shs[s] = linear_shard_full(n, k); /* MLA / experts: whole (refused under TP / PP) */
            there = rc == 1;
            if (s >= sm.mla0 && s < sm.moe0 && !mla &&
                !(mla = calloc((size_t)L * MODEL_NMLA, sizeof *mla))) goto oom;
            if (s >= sm.mla0 && s < sm.moe0 && (s - sm.mla0) % 4 == 3 && !kvb &&
                !(kvb = calloc((size_t)L * mc->n_head * 2, sizeof *kvb))) goto oom;
            if (s >= sm.moe0 && s < sm.head && !moe &&
                !(moe = calloc((size_t)L * (sm.E + 1) * 3, sizeof *moe))) goto oom;
        }
        n_pairs++;
        if (there) {
            ta[s * 2] = ta[s * 2 + 1] = NULL; /* not kept on this rank */
            continue;
        }
        n = shs[s].full_rows, k = shs[s].full_cols; /* checked against the full projection */
        const int r = cfg.r;
        if (A->ndim != 2 || A->shape[0] != r || A->shape[1] != k) {
            errmsg_set(err, errlen, "LoRA adapter %s: tensor %s has shape [%lld, %lld], expected "
                       "[%d, %d] (r, in_features)", name, A->name, (long long)A->shape[0],
                       A->ndim > 1 ? (long long)A->shape[1] : -1LL, r, k);
            goto fail;
        }
        if (B->ndim != 2 || B->shape[0] != n || B->shape[1] != r) {
            errmsg_set(err, errlen, "LoRA adapter %s: tensor %s has shape [%lld, %lld], expected "
                       "[%d, %d] (out_features, r)", name, B->name, (long long)B->shape[0],
                       B->ndim > 1 ? (long long)B->shape[1] : -1LL, n, r);
            goto fail;
        }
        const int is_kvb = s >= sm.mla0 && s < sm.moe0 && (s - sm.mla0) % 4 == 3;
        floats += lora_shard_pair_bytes(&shs[s], r, A->dt == DTYPE_BF16 && B->dt == DTYPE_BF16 && s != s_emb && !is_kvb);
    }
    if (!n_pairs) {
        errmsg_set(err, errlen, "LoRA adapter %s: %s holds no LoRA weights", name, fpath);
        goto fail;
    }
    a = calloc(1, sizeof *a);
    if (!a || !(a->mem = malloc(floats ? floats : 1)) || !(a->name = strdup(name)) ||
        !(a->path = strdup(path))) {
        errmsg_set(err, errlen, "LoRA adapter %s: out of memory", name);
        goto fail;
    }
    /* pass 2: convert */
    const float scale = (float)(cfg.use_rslora ? cfg.alpha / sqrt((double)cfg.r)
                                               : cfg.alpha / (double)cfg.r);
    char *p = a->mem;
    for (int s = 0; s < nslot; s++) {
        const st_tensor *A = ta[s * 2], *B = ta[s * 2 + 1];
        if (!A) continue;
        const int r = cfg.r, k = (int)A->shape[1], n = (int)B->shape[0];
        const int is_kvb = s >= sm.mla0 && s < sm.moe0 && (s - sm.mla0) % 4 == 3;
        const bool bf = A->dt == DTYPE_BF16 && B->dt == DTYPE_BF16 && s != s_emb && !is_kvb;
        linear_adapter dummy;
        linear_adapter *la = s == s_head    ? &a->ma.lm_head
                             : s == s_emb   ? &a->ma.embed
                             : s < sm.mla0  ? &proj[s]
                             : is_kvb       ? &dummy /* the per-head views in kvb instead */
                             : s < sm.moe0  ? &mla[(s - sm.mla0) / 4 * MODEL_NMLA + (s - sm.mla0) % 4]
                                            : &moe[s - sm.moe0];
        la->rank = r, la->scale = scale, la->a = p, la->dt = bf ? DTYPE_BF16 : DTYPE_F32;
        if (is_kvb) {
            /* kv_b_proj (nh (nope + v), kvr) as the absorbed form's per-head
             * deltas (mla.c): on Wk[h]ᵀ (kvr, nope) "A" = Bk[h]ᵀ (r, nope),
             * "Bᵀ" = A (r, kvr); on Wv[h] (v, kvr) A and Bv[h]ᵀ (r, v).  Stored
             * as A (r, kvr), then per head Bk[h]ᵀ, Bv[h]ᵀ (f32). */
            const int nh = mc->n_head, nope = mc->qk_nope_dim, vd = mc->v_head_dim;
            const int layer = (s - sm.mla0) / 4;
            float *q = (float *)p, brow[LINEAR_MAX_RANK];
            row_f32(A, 0, (size_t)r * k, q);
            const float *af = q;
            q += (size_t)r * k;
            for (int h = 0; h < nh; h++) {
                float *bk = q, *bv = q + (size_t)r * nope;
                for (int d = 0; d < nope + vd; d++) {
                    row_f32(B, ((size_t)h * (nope + vd) + d) * r, (size_t)r, brow);
                    for (int j = 0; j < r; j++) {
                        if (d < nope) bk[(size_t)j * nope + d] = brow[j];
                        else bv[(size_t)j * vd + d - nope] = brow[j];
                    }
                }
                linear_adapter *vk = &kvb[((size_t)layer * nh + h) * 2], *vv = vk + 1;
                *vk = (linear_adapter){.rank = r, .scale = scale, .dt = DTYPE_F32, .a = bk, .bt = af};
                *vv = (linear_adapter){.rank = r, .scale = scale, .dt = DTYPE_F32, .a = af, .bt = bv};
                q += (size_t)r * (nope + vd);
            }
            p = (char *)q;
        } else if (s == s_emb) { /* Aᵀ (vocab, r): a token's r values in a row */
            float *q = (float *)p, *col = malloc(sizeof(float) * (size_t)k);
            if (!col) {
                errmsg_set(err, errlen, "LoRA adapter %s: out of memory", name);
                goto fail_a;
            }
            for (int j = 0; j < r; j++) {
                row_f32(A, (size_t)j * k, (size_t)k, col);
                for (int t = 0; t < k; t++) q[(size_t)t * r + j] = col[t];
            }
            free(col);
            q += (size_t)r * k;
            la->bt = q;
            float brow[LINEAR_MAX_RANK];
            for (int o = 0; o < n; o++) {
                row_f32(B, (size_t)o * r, (size_t)r, brow);
                for (int j = 0; j < r; j++) q[(size_t)j * n + o] = brow[j];
            }
            p = (char *)(q + (size_t)r * n);
        } else { /* this rank's slice (all of it in one process) */
            p = lora_shard_copy(A, B, r, &shs[s], bf, p, la);
        }
    }
    a->bytes = floats;
    a->ma.n_layer = L;
    a->ma.proj = proj;
    a->ma.mla = mla, a->ma.kvb = kvb, a->ma.moe = moe;
    a->ma.n_expert = sm.E;
    a->cfg = cfg;
    a->refs = 1;
    a->uid = __atomic_fetch_add(&next_uid, 1, __ATOMIC_RELAXED);
    free(ta);
    free(fta);
    free(views);
    free(shs);
    st_close(&ar);
    if (lora_shard_ship(a, m, lim, err, errlen)) { /* rank 0 of a group: the workers load theirs */
        lora_adapter_unref(a);
        return NULL;
    }
    a->load_ms = (time_now_sec() - t0) * 1e3;
    return a;
oom:
    errmsg_set(err, errlen, "LoRA adapter %s: out of memory", name);
fail_a:
fail:
    if (a) {
        free(a->mem), free(a->name), free(a->path), free(a);
    }
    free(ta);
    free(fta);
    free(views);
    free(shs);
    free(proj);
    free(mla), free(kvb), free(moe);
    st_close(&ar);
    return NULL;
}
