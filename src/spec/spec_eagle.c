/* spec_eagle — the EAGLE / EAGLE3 draft head; see spec_eagle.h.
 *
 * Layer forward over n rows of one request (pairs at positions pos0..):
 *   EAGLE-1  x = fc(cat(e, h)); a = x            (no input_layernorm)
 *   EAGLE3   x = h (fc(h) when h is the 3H target capture);
 *            a = cat(input_layernorm(e), hidden_norm(x))
 *   q,k,v = a W; rope; store k,v at the draft slots; att = attention
 *   r = x + att Wo; y = r + mlp(post_attention_layernorm(r))
 *   EAGLE-1  logits = target lm_head(y)           next hidden = y
 *   EAGLE3   logits = lm_head(norm(y)) -> d2t     next hidden = y
 *
 * Tree drafts (topk > 1, spec_eagle_propose_tree) run the same layer over
 * a frontier of topk rows per step:
 *
 *   pairs 0..len-2 | f0 f1 f2 f3 | f4 f5 f6 f7 | ...   draft KV positions
 *   (catch-up)       depth 1       depth 2            rope: len-2+depth
 *
 * frontier node f sees every pair and, among the f's, its ancestors and
 * itself (the attention kernel's tree mask, tree_base = len - 1).
 */
#include "spec/spec_eagle.h"

#include <jansson.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "kernels/kernels.h"
#include "model/config.h"
#include "model/rope.h"
#include "model/safetensors.h"
#include "util/dtype.h"
#include "util/log.h"

struct spec_eagle {
    int eagle3;
    model *target;               /* borrowed */
    int H, V, Vd, nh, nkv, hd, I, rot, half, ctx;
    int n_cap;                   /* target hidden rows per slot (1 or 3) */
    float eps;
    model_config cfg;            /* the head's (rope) */
    float *inv_freq;             /* (half) */
    float attn_factor;
    kern_mat fc, wq, wk, wv, wo, wg, wu, wd, lm; /* lm: EAGLE3's own head (lm.data NULL = target's) */
    float *fc_b, *bq, *bk, *bv, *bo;             /* optional biases */
    float *in_norm, *hid_norm, *post_norm, *fnorm;
    int64_t *d2t;                /* (Vd) EAGLE3: target id = id + d2t[id]; NULL = identity */
    const spec_tokmap *hot;      /* EAGLE-1 --speculative-token-map, borrowed; NULL = none */
    spec_tokmap_head hot_head;   /* the LM head cut to hot's rows (mat.data NULL: mask the full head) */
    float *cap;                  /* (cap_slots, n_cap * H) capture store (mmap) */
    size_t cap_bytes;
    int64_t cap_slots;
    float *kc, *vc;              /* (n_slots, nkv * hd) draft KV */
    size_t kv_bytes;
    int32_t *free_slots;
    int64_t n_free, n_slots;
    /* forward scratch for cap_rows rows */
    int cap_rows, cap_kvl;
    float *emb, *hin, *x, *a, *q, *k, *v, *att, *r, *xn, *g, *u, *y, *cs, *sn, *lg, *lrow;
    void *mscr, *ascr;
    int32_t *tok, *pos;
    float *tlg;                  /* (tlg_rows, Vd) tree steps: the logits of every frontier row */
    int tlg_rows;
};

/* ---- loading ------------------------------------------------------------------ */

static const st_tensor *find(const st_archive *a, const char *name)
{
    const st_tensor *t = st_find(a, name);
    if (!t) {
        char buf[256];
        snprintf(buf, sizeof buf, "model.%s", name);
        t = st_find(a, buf);
    }
    return t;
}

/* Tensor `name` of shape (n[, k]) (k = 0: a vector); NULL with err set. */
static const st_tensor *get(const st_archive *a, const char *name, int64_t n, int64_t k, int required, char *err,
                            size_t errlen)
{
    const st_tensor *t = find(a, name);
    if (!t) {
        if (required) snprintf(err, errlen, "the EAGLE head has no tensor %s", name);
        return NULL;
    }
    bool ok = t->dt == DTYPE_F32 || t->dt == DTYPE_BF16 || t->dt == DTYPE_F16;
    if (ok) ok = k ? t->ndim == 2 && t->shape[0] == n && t->shape[1] == k : t->ndim == 1 && t->shape[0] == n;
    if (!ok) {
        if (k)
            snprintf(err, errlen, "EAGLE head tensor %s: expected a float [%lld, %lld] (got %s of %d dims [%lld, %lld])",
                     name, (long long)n, (long long)k, t->dtype_str, t->ndim, (long long)t->shape[0],
                     (long long)(t->ndim > 1 ? t->shape[1] : 0));
        else
            snprintf(err, errlen, "EAGLE head tensor %s: expected a float [%lld] (got %s of %d dims [%lld])", name,
                     (long long)n, t->dtype_str, t->ndim, (long long)t->shape[0]);
        return NULL;
    }
    return t;
}

static float *vec_f32(const st_tensor *t)
{
    size_t n = (size_t)t->shape[0];
    float *v = malloc(sizeof(float) * n);
    if (!v) return NULL;
    for (size_t i = 0; i < n; i++) {
        if (t->dt == DTYPE_F32) v[i] = ((const float *)t->data)[i];
        else if (t->dt == DTYPE_BF16) v[i] = bf16_to_f32(((const uint16_t *)t->data)[i]);
        else v[i] = f16_to_f32(((const uint16_t *)t->data)[i]);
    }
    return v;
}

/* mat (n, k) (required) and its optional bias. */
static int load_mat(const st_archive *a, const char *name, int n, int k, kern_mat *m, float **bias, char *err,
                    size_t errlen)
{
    char nm[192];
    snprintf(nm, sizeof nm, "%s.weight", name);
    const st_tensor *t = get(a, nm, n, k, 1, err, errlen);
    if (!t) return -1;
    /* a bf16 head stays bf16 (half the bytes a draft step reads); others run in f32 */
    if (kern_mat_init(m, t->data, (dtype)t->dt, n, k, t->dt == DTYPE_BF16 ? DTYPE_BF16 : DTYPE_F32, 0)) {
        snprintf(err, errlen, "out of memory for EAGLE head tensor %s", nm);
        return -1;
    }
    if (!bias) return 0;
    snprintf(nm, sizeof nm, "%s.bias", name);
    const st_tensor *b = get(a, nm, n, 0, 0, err, errlen);
    if (!b && find(a, nm)) return -1; /* present but malformed */
    if (b && !(*bias = vec_f32(b))) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    return 0;
}

static int load_norm(const st_archive *a, const char *name, int n, float **out, char *err, size_t errlen)
{
    const st_tensor *t = get(a, name, n, 0, 1, err, errlen);
    if (!t) return -1;
    if (!(*out = vec_f32(t))) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    return 0;
}

static char *read_text(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *buf = NULL;
    if (fseek(f, 0, SEEK_END) == 0) {
        long n = ftell(f);
        if (n >= 0 && fseek(f, 0, SEEK_SET) == 0 && (buf = malloc((size_t)n + 1))) {
            if (fread(buf, 1, (size_t)n, f) != (size_t)n) {
                free(buf);
                buf = NULL;
            } else {
                buf[n] = 0;
                *len = (size_t)n;
            }
        }
    }
    fclose(f);
    return buf;
}

static int cmp_int(const void *a, const void *b) { return *(const int *)a - *(const int *)b; }

int spec_eagle_config_parse(const char *txt, size_t len, const model_config *tc, int eagle3, spec_eagle_config *out,
                            char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    out->at[0] = MODEL_CAPTURE_FINAL_NORM;
    out->n_at = eagle3 ? 3 : 1;
    int rc = -1;
    json_error_t je;
    json_t *root = json_loadb(txt, len, 0, &je);
    if (!json_is_object(root)) {
        snprintf(err, errlen, "config.json: not a JSON object (%s)", je.text);
        goto out;
    }
    json_t *archs = json_object_get(root, "architectures");
    const char *arch = json_string_value(json_array_get(archs, 0));
    int is3 = arch && strstr(arch, "Eagle3") != NULL;
    if (!arch || (!strstr(arch, "Eagle") && !strstr(arch, "EAGLE"))) {
        snprintf(err, errlen,
                 "config.json: architectures[0] %.64s is not an EAGLE head (LlamaForCausalLMEagle / LlamaForCausalLMEagle3)",
                 arch ? arch : "(none)");
        goto out;
    }
    if (is3 != eagle3) {
        snprintf(err, errlen, "config.json: the head is %.64s but --speculative-algorithm is %s", arch,
                 eagle3 ? "EAGLE3" : "EAGLE");
        goto out;
    }
    json_t *nl = json_object_get(root, "num_hidden_layers");
    if (nl && json_integer_value(nl) != 1) {
        snprintf(err, errlen, "config.json: num_hidden_layers %lld: sglc runs EAGLE heads of one layer",
                 (long long)json_integer_value(nl));
        goto out;
    }
    if (model_config_parse(&out->cfg, txt, len, "{\"architectures\":[\"LlamaForCausalLM\"]}", 0, err, errlen))
        goto out;
    json_t *th = json_object_get(root, "target_hidden_size");
    if (out->cfg.hidden_size != tc->hidden_size || (th && json_integer_value(th) != tc->hidden_size)) {
        snprintf(err, errlen, "the EAGLE head's hidden size (%lld) differs from the target model's (%d)",
                 th ? (long long)json_integer_value(th) : (long long)out->cfg.hidden_size, tc->hidden_size);
        goto out;
    }
    if (out->cfg.vocab_size != tc->vocab_size) {
        snprintf(err, errlen, "the EAGLE head's vocab_size (%d) differs from the target model's (%d)",
                 out->cfg.vocab_size, tc->vocab_size);
        goto out;
    }
    json_t *dv = json_object_get(root, "draft_vocab_size");
    if (json_is_integer(dv) && (json_integer_value(dv) < 1 || json_integer_value(dv) > tc->vocab_size)) {
        snprintf(err, errlen, "config.json: draft_vocab_size %lld outside [1, %d]", (long long)json_integer_value(dv),
                 tc->vocab_size);
        goto out;
    }
    out->draft_vocab = json_is_integer(dv) ? (int)json_integer_value(dv) : 0; /* 0: decided by the lm_head tensor */
    if (eagle3) {
        json_t *ids = json_object_get(json_object_get(root, "eagle_config"), "eagle_aux_hidden_state_layer_ids");
        int L = tc->n_layer;
        int *at = out->at;
        if (json_is_array(ids)) {
            if (json_array_size(ids) != 3) {
                snprintf(err, errlen, "config.json: eagle_aux_hidden_state_layer_ids must list 3 layers");
                goto out;
            }
            for (int i = 0; i < 3; i++) {
                json_int_t v = json_integer_value(json_array_get(ids, (size_t)i));
                at[i] = v < -1 || v > L ? L : (int)v + 1;
            }
        } else {
            at[0] = 2, at[1] = L / 2, at[2] = L - 3; /* SGLang's default */
        }
        qsort(at, 3, sizeof(int), cmp_int);
        for (int i = 0; i < 3; i++)
            if (at[i] < 0 || at[i] >= L) {
                snprintf(err, errlen,
                         "EAGLE3 captures the input of target layer %d, outside the target's %d layers (set "
                         "eagle_config.eagle_aux_hidden_state_layer_ids in the head's config.json)",
                         at[i], L);
                goto out;
            }
    }
    rc = 0;
out:
    json_decref(root);
    return rc;
}

/* DIR/config.json into e (cfg, Vd) and the capture points at. */
static int load_config(spec_eagle *e, const char *dir, const model_config *tc, int *at, char *err, size_t errlen)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/config.json", dir);
    size_t len = 0;
    char *txt = read_text(path, &len);
    if (!txt) {
        snprintf(err, errlen, "the EAGLE head %s has no readable config.json", dir);
        return -1;
    }
    spec_eagle_config hc;
    int rc = spec_eagle_config_parse(txt, len, tc, e->eagle3, &hc, err, errlen);
    free(txt);
    if (rc) return -1;
    e->cfg = hc.cfg;
    e->Vd = hc.draft_vocab;
    memcpy(at, hc.at, sizeof hc.at);
    return 0;
}

static int load_weights(spec_eagle *e, const char *dir, char *err, size_t errlen)
{
    st_archive a;
    if (st_open(&a, dir, err, errlen)) return -1;
    int rc = -1;
    const int H = e->H, qd = e->nh * e->hd, kvd = e->nkv * e->hd, I = e->I, ain = e->eagle3 ? 2 * H : H;
    const char *L = e->eagle3 ? (find(&a, "midlayer.self_attn.q_proj.weight") ? "midlayer" : "midlayers.0") : "layers.0";
    char nm[160];
#define LAYER(s) (snprintf(nm, sizeof nm, "%s.%s", L, s), nm)
    if (load_mat(&a, "fc", H, e->n_cap * H + (e->eagle3 ? 0 : H), &e->fc, &e->fc_b, err, errlen)) goto out;
    if (load_mat(&a, LAYER("self_attn.q_proj"), qd, ain, &e->wq, &e->bq, err, errlen)) goto out;
    if (load_mat(&a, LAYER("self_attn.k_proj"), kvd, ain, &e->wk, &e->bk, err, errlen)) goto out;
    if (load_mat(&a, LAYER("self_attn.v_proj"), kvd, ain, &e->wv, &e->bv, err, errlen)) goto out;
    if (load_mat(&a, LAYER("self_attn.o_proj"), H, qd, &e->wo, &e->bo, err, errlen)) goto out;
    if (load_mat(&a, LAYER("mlp.gate_proj"), I, H, &e->wg, NULL, err, errlen)) goto out;
    if (load_mat(&a, LAYER("mlp.up_proj"), I, H, &e->wu, NULL, err, errlen)) goto out;
    if (load_mat(&a, LAYER("mlp.down_proj"), H, I, &e->wd, NULL, err, errlen)) goto out;
    if (load_norm(&a, LAYER("post_attention_layernorm.weight"), H, &e->post_norm, err, errlen)) goto out;
    if (e->eagle3) {
        if (load_norm(&a, LAYER("input_layernorm.weight"), H, &e->in_norm, err, errlen)) goto out;
        if (load_norm(&a, LAYER("hidden_norm.weight"), H, &e->hid_norm, err, errlen)) goto out;
        if (load_norm(&a, "norm.weight", H, &e->fnorm, err, errlen)) goto out;
        const st_tensor *lm = find(&a, "lm_head.weight");
        if (lm) {
            if (lm->ndim != 2) {
                snprintf(err, errlen, "EAGLE head tensor lm_head.weight: expected 2 dims");
                goto out;
            }
            if (!e->Vd) e->Vd = (int)lm->shape[0];
            if (load_mat(&a, "lm_head", e->Vd, H, &e->lm, NULL, err, errlen)) goto out;
            if (e->Vd != e->V) {
                const st_tensor *d = find(&a, "d2t");
                if (!d || strcmp(d->dtype_str, "I64") || d->ndim != 1 || d->shape[0] != e->Vd) {
                    snprintf(err, errlen, "the EAGLE3 head's draft vocabulary (%d) needs d2t, an I64 [%d]", e->Vd, e->Vd);
                    goto out;
                }
                if (!(e->d2t = malloc(sizeof(int64_t) * (size_t)e->Vd))) goto oom;
                memcpy(e->d2t, d->data, sizeof(int64_t) * (size_t)e->Vd);
                for (int i = 0; i < e->Vd; i++)
                    if (i + e->d2t[i] < 0 || i + e->d2t[i] >= e->V) {
                        snprintf(err, errlen, "EAGLE3 d2t[%d] maps to %lld, outside the target vocabulary", i,
                                 (long long)(i + e->d2t[i]));
                        goto out;
                    }
            }
        } else {
            e->Vd = e->V; /* SGLang: no draft vocabulary -> the target's head */
        }
    } else {
        e->Vd = e->V;
    }
#undef LAYER
    rc = 0;
    goto out;
oom:
    snprintf(err, errlen, "out of memory loading the EAGLE head");
out:
    st_close(&a);
    return rc;
}

spec_eagle *spec_eagle_create(const char *dir, int eagle3, model *target, int64_t target_slots, int64_t kv_tokens,
                              char *err, size_t errlen)
{
    const model_config *tc = model_get_config(target);
    if (model_tp_size(target) > 1) {
        snprintf(err, errlen, "EAGLE with --tp-size > 1 is not supported by sglc yet");
        return NULL;
    }
    if (kv_tokens < 16 || kv_tokens > INT32_MAX / 2 || target_slots < 1) {
        snprintf(err, errlen, "bad EAGLE KV size %lld", (long long)kv_tokens);
        return NULL;
    }
    spec_eagle *e = calloc(1, sizeof *e);
    if (!e) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    e->eagle3 = eagle3;
    e->target = target;
    int at[3] = {MODEL_CAPTURE_FINAL_NORM, 0, 0};
    if (load_config(e, dir, tc, at, err, errlen)) goto fail;
    e->H = tc->hidden_size;
    e->V = tc->vocab_size;
    e->nh = e->cfg.n_head;
    e->nkv = e->cfg.n_kv_head;
    e->hd = e->cfg.head_dim;
    e->I = e->cfg.intermediate_size;
    e->eps = e->cfg.rms_norm_eps;
    e->ctx = e->cfg.max_position_embeddings > tc->context_length ? e->cfg.max_position_embeddings : tc->context_length;
    e->n_cap = eagle3 ? 3 : 1;
    e->rot = model_rope_dim(&e->cfg);
    e->half = e->rot / 2;
    if (e->nh <= 0 || e->nkv <= 0 || e->nh % e->nkv || e->hd <= 0 || e->I <= 0) {
        snprintf(err, errlen, "the EAGLE head's config has bad attention sizes");
        goto fail;
    }
    if (e->cfg.rope.kind == MODEL_ROPE_DYNAMIC || e->cfg.rope.kind == MODEL_ROPE_LONGROPE) {
        snprintf(err, errlen, "the EAGLE head's rope_scaling (%s) is not supported by sglc yet",
                 model_rope_kind_name(e->cfg.rope.kind));
        goto fail;
    }
    if (!(e->inv_freq = malloc(sizeof(float) * (size_t)(e->half + 1)))) goto oom;
    e->attn_factor = model_rope_inv_freq(&e->cfg, 1, e->inv_freq);
    if (load_weights(e, dir, err, errlen)) goto fail;
    /* the capture store and the draft KV: lazily committed anonymous maps */
    e->cap_slots = target_slots;
    e->cap_bytes = (size_t)target_slots * (size_t)e->n_cap * (size_t)e->H * sizeof(float);
    e->cap = mmap(NULL, e->cap_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (e->cap == MAP_FAILED) {
        e->cap = NULL;
        goto oom;
    }
    e->n_slots = kv_tokens;
    e->kv_bytes = (size_t)kv_tokens * (size_t)(e->nkv * e->hd) * sizeof(float);
    e->kc = mmap(NULL, 2 * e->kv_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (e->kc == MAP_FAILED) {
        e->kc = NULL;
        goto oom;
    }
    e->vc = (float *)((char *)e->kc + e->kv_bytes);
    if (!(e->free_slots = malloc(sizeof(int32_t) * (size_t)kv_tokens))) goto oom;
    for (int64_t i = 0; i < kv_tokens; i++) e->free_slots[i] = (int32_t)(kv_tokens - 1 - i);
    e->n_free = kv_tokens;
    if (model_set_capture(target, e->cap, target_slots, at, e->n_cap)) {
        snprintf(err, errlen, "the target model cannot capture hidden states for EAGLE (see the log)");
        goto fail;
    }
    return e;
oom:
    snprintf(err, errlen, "out of memory for the EAGLE head");
fail:
    spec_eagle_destroy(e);
    return NULL;
}

static void free_scratch(spec_eagle *e)
{
    float **f[] = {&e->emb, &e->hin, &e->x, &e->a, &e->q, &e->k, &e->v, &e->att, &e->r,
                   &e->xn, &e->g, &e->u, &e->y, &e->cs, &e->sn, &e->lg, &e->lrow};
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
        free(*f[i]);
        *f[i] = NULL;
    }
    free(e->mscr), free(e->ascr), free(e->tok), free(e->pos);
    e->mscr = e->ascr = NULL;
    e->tok = e->pos = NULL;
    e->cap_rows = e->cap_kvl = 0;
}

void spec_eagle_destroy(spec_eagle *e)
{
    if (!e) return;
    if (e->cap) {
        model_set_capture(e->target, NULL, 0, NULL, 0);
        munmap(e->cap, e->cap_bytes);
    }
    if (e->kc) munmap(e->kc, 2 * e->kv_bytes);
    kern_mat *m[] = {&e->fc, &e->wq, &e->wk, &e->wv, &e->wo, &e->wg, &e->wu, &e->wd, &e->lm};
    for (size_t i = 0; i < sizeof m / sizeof m[0]; i++) kern_mat_free(m[i]);
    free(e->fc_b), free(e->bq), free(e->bk), free(e->bv), free(e->bo);
    free(e->in_norm), free(e->hid_norm), free(e->post_norm), free(e->fnorm);
    free(e->d2t), free(e->inv_freq), free(e->free_slots);
    spec_tokmap_head_free(&e->hot_head);
    free_scratch(e);
    free(e->tlg);
    free(e);
}

/* ---- forward --------------------------------------------------------------------- */

/* Scratch for n rows and kv length kvl.  0 or -1. */
static int reserve(spec_eagle *e, int n, int kvl)
{
    if (n <= e->cap_rows && kvl <= e->cap_kvl) return 0;
    int rows = n > e->cap_rows ? n : e->cap_rows, kl = kvl > e->cap_kvl ? kvl : e->cap_kvl;
    free_scratch(e);
    const size_t R = (size_t)rows, H = (size_t)e->H, qd = (size_t)(e->nh * e->hd), kvd = (size_t)(e->nkv * e->hd);
    const size_t I = (size_t)e->I, hin = (size_t)e->n_cap * H;
    struct {
        float **p;
        size_t n;
    } f[] = {{&e->emb, R * H},  {&e->hin, R * (hin > H ? hin : H)}, {&e->x, R * H},   {&e->a, R * 2 * H},
             {&e->q, R * qd},   {&e->k, R * kvd},                   {&e->v, R * kvd}, {&e->att, R * qd},
             {&e->r, R * H},    {&e->xn, R * H},                    {&e->g, R * I},   {&e->u, R * I},
             {&e->y, R * H},    {&e->cs, R * (size_t)e->half + 1},  {&e->sn, R * (size_t)e->half + 1},
             {&e->lg, (size_t)(e->Vd > e->V ? e->Vd : e->V)},       {&e->lrow, H}};
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
        if (!(*f[i].p = malloc(sizeof(float) * f[i].n))) goto oom;
    int maxk = (int)(hin + H > 2 * H ? hin + H : 2 * H);
    if ((int)I > maxk) maxk = (int)I;
    if ((int)qd > maxk) maxk = (int)qd;
    size_t ms = kern_matmul_scratch(rows, maxk), as = kern_attention_scratch(kl, e->hd);
    e->mscr = aligned_alloc(64, (ms + 63) & ~(size_t)63);
    e->ascr = aligned_alloc(64, (as + 63) & ~(size_t)63);
    e->tok = malloc(sizeof(int32_t) * R);
    e->pos = malloc(sizeof(int32_t) * R);
    if (!e->mscr || !e->ascr || !e->tok || !e->pos) goto oom;
    e->cap_rows = rows;
    e->cap_kvl = kl;
    return 0;
oom:
    free_scratch(e);
    return -1;
}

static void mm(spec_eagle *e, float *y, const float *x, int n, const kern_mat *w, const float *bias)
{
    kern_matmul(y, x, n, w, bias, 0, 1, e->mscr);
}

/* The layer over n rows: e->tok (tokens p+1), e->hin (n, hin_w) hidden
 * inputs, kv positions pos0..pos0+n-1 over slots (rope at the same
 * positions), causal.  Writes e->y (n, H), and the logits of the last row
 * into e->lg (draft vocabulary).  A tree step (tree non-NULL) instead
 * turns row t by rpos[t], masks the attention with tree's tree_* fields
 * and leaves the logits to the caller (tree_logits).  0 or -1. */
static int layer_forward(spec_eagle *e, int n, int hin_w, int64_t pos0, const int32_t *slots, const int32_t *rpos,
                         const kern_attn_args *tree)
{
    const int H = e->H, nh = e->nh, nkv = e->nkv, hd = e->hd, qd = nh * hd, kvd = nkv * hd, I = e->I;
    const int kvl = (int)(pos0 + n);
    if (reserve(e, n, kvl)) return -1;
    model_embed_tokens(e->target, e->tok, n, e->emb);
    if (!e->eagle3) { /* x = fc(cat(e, h)) */
        for (int t = 0; t < n; t++) {
            memcpy(e->a + (size_t)t * 2 * H, e->emb + (size_t)t * H, sizeof(float) * H);
            memcpy(e->a + (size_t)t * 2 * H + H, e->hin + (size_t)t * hin_w, sizeof(float) * H);
        }
        mm(e, e->x, e->a, n, &e->fc, e->fc_b);
        memcpy(e->a, e->x, sizeof(float) * (size_t)n * H); /* no input_layernorm */
    } else {
        if (hin_w != H) mm(e, e->x, e->hin, n, &e->fc, e->fc_b);
        else memcpy(e->x, e->hin, sizeof(float) * (size_t)n * H);
        for (int t = 0; t < n; t++) {
            kern_rmsnorm(e->a + (size_t)t * 2 * H, e->emb + (size_t)t * H, e->in_norm, H, e->eps, 0.0f);
            kern_rmsnorm(e->a + (size_t)t * 2 * H + H, e->x + (size_t)t * H, e->hid_norm, H, e->eps, 0.0f);
        }
    }
    mm(e, e->q, e->a, n, &e->wq, e->bq);
    mm(e, e->k, e->a, n, &e->wk, e->bk);
    mm(e, e->v, e->a, n, &e->wv, e->bv);
    for (int t = 0; t < n; t++) {
        int p = (int)pos0 + t;
        kern_rope_cache(e->cs, e->sn, rpos ? rpos[t] : p, e->inv_freq, e->half, e->attn_factor);
        kern_rope_apply(e->q + (size_t)t * qd, nh, hd, e->rot, e->cs, e->sn, 1);
        kern_rope_apply(e->k + (size_t)t * kvd, nkv, hd, e->rot, e->cs, e->sn, 1);
        kern_kv_store(e->kc, DTYPE_F32, slots[p], kvd, e->k + (size_t)t * kvd);
        kern_kv_store(e->vc, DTYPE_F32, slots[p], kvd, e->v + (size_t)t * kvd);
    }
    kern_attn_args aa = {.n_q = n, .n_kv = kvl, .n_head = nh, .n_kv_head = nkv, .head_dim = hd, .q = e->q,
                         .q_stride = (size_t)qd, .k_cache = e->kc, .v_cache = e->vc, .kv_dt = DTYPE_F32,
                         .k_scale = 1.0f, .v_scale = 1.0f, .slots = slots, .scale = 1.0f / sqrtf((float)hd),
                         .out = e->att, .out_stride = (size_t)qd};
    if (tree) {
        aa.tree_mask = tree->tree_mask;
        aa.tree_depth = tree->tree_depth;
        aa.tree_base = tree->tree_base;
        aa.tree_n = tree->tree_n;
    }
    kern_attention(&aa, 0, 1, e->ascr);
    mm(e, e->r, e->att, n, &e->wo, e->bo);
    for (int t = 0; t < n; t++) {
        float *r = e->r + (size_t)t * H;
        kern_add(r, r, e->x + (size_t)t * H, H);
        kern_rmsnorm(e->xn + (size_t)t * H, r, e->post_norm, H, e->eps, 0.0f);
    }
    mm(e, e->g, e->xn, n, &e->wg, NULL);
    mm(e, e->u, e->xn, n, &e->wu, NULL);
    for (int t = 0; t < n; t++) kern_silu_mul(e->g + (size_t)t * I, e->g + (size_t)t * I, e->u + (size_t)t * I, I);
    mm(e, e->y, e->g, n, &e->wd, NULL);
    for (int t = 0; t < n; t++) kern_add(e->y + (size_t)t * H, e->y + (size_t)t * H, e->r + (size_t)t * H, H);
    if (tree) return 0;
    const float *last = e->y + (size_t)(n - 1) * H;
    if (!e->eagle3) {
        if (e->hot && e->hot_head.mat.data) { /* the LM head cut to the hot rows */
            spec_tokmap_head_logits(&e->hot_head, e->hot, last, e->lg);
            return 0;
        }
        int rc = model_lm_head_rows(e->target, last, 1, e->lg);
        if (!rc && e->hot) spec_tokmap_mask(e->hot, e->lg);
        return rc;
    }
    kern_rmsnorm(e->lrow, last, e->fnorm, H, e->eps, 0.0f);
    if (e->lm.data) {
        mm(e, e->lg, e->lrow, 1, &e->lm, NULL);
        return 0;
    }
    return model_lm_head_rows(e->target, e->lrow, 1, e->lg);
}

/* argmax of e->lg as a target id. */
static int32_t pick(const spec_eagle *e)
{
    int best = kern_argmax(e->lg, e->Vd);
    return e->d2t ? (int32_t)(best + e->d2t[best]) : best;
}

/* ---- requests ---------------------------------------------------------------------- */

int64_t spec_eagle_slots_used(const spec_eagle *e) { return e->n_slots - e->n_free; }
int spec_eagle_vocab(const spec_eagle *e) { return e->Vd; }

int spec_eagle_set_token_map(spec_eagle *e, const spec_tokmap *m, char *err, size_t errlen)
{
    if (m && (e->eagle3 || m->vocab != e->V)) {
        snprintf(err, errlen, e->eagle3 ? "EAGLE3 heads carry their own token map (d2t)"
                                        : "the token map is not bound to the target's vocabulary");
        return -1;
    }
    spec_tokmap_head_free(&e->hot_head);
    e->hot = m;
    if (m && spec_tokmap_head_init(&e->hot_head, m, model_lm_head_mat(e->target)) < 0) {
        snprintf(err, errlen, "out of memory for the token map's LM head");
        return -1;
    }
    if (m)
        log_info("token map: %d of %d ids; %s", m->n, e->V,
                 e->hot_head.mat.data ? "the draft's LM head is cut to them"
                                      : "the target's LM head cannot be read back: the full head runs, masked");
    return 0;
}

void spec_eagle_req_release(spec_eagle *e, spec_draft_req *r)
{
    for (int64_t i = 0; i < r->cap && r->slots; i++)
        if (r->slots[i] >= 0) e->free_slots[e->n_free++] = r->slots[i];
    free(r->slots);
    free(r->fed);
    memset(r, 0, sizeof *r);
}

/* Slots for positions [0, n) (fed gets n + 1 entries): 0 or -1. */
static int ensure_slots(spec_eagle *e, spec_draft_req *r, int64_t n)
{
    if (n + 1 > r->cap) {
        int64_t nc = r->cap ? r->cap : 64;
        while (nc < n + 1) nc *= 2;
        int32_t *s = realloc(r->slots, sizeof(int32_t) * (size_t)nc);
        if (!s) return -1;
        r->slots = s;
        int32_t *f = realloc(r->fed, sizeof(int32_t) * (size_t)nc);
        if (!f) return -1;
        r->fed = f;
        for (int64_t i = r->cap; i < nc; i++) r->slots[i] = -1;
        r->cap = nc;
    }
    for (int64_t i = 0; i < n; i++) {
        if (r->slots[i] >= 0) continue;
        if (e->n_free == 0) return -1;
        r->slots[i] = e->free_slots[--e->n_free];
    }
    return 0;
}

/* Give back the slots of positions >= from. */
static void trim_slots(spec_eagle *e, spec_draft_req *r, int64_t from)
{
    for (int64_t i = from; i < r->cap; i++)
        if (r->slots[i] >= 0) {
            e->free_slots[e->n_free++] = r->slots[i];
            r->slots[i] = -1;
        }
}

/* The catch-up forward: pairs not in the draft KV up to len-2; leaves the
 * last row's logits in e->lg and its output in e->y (scratch reserved for
 * k - 1 chain steps after it).  Returns the row count, or -1. */
static int64_t catch_up(spec_eagle *e, spec_draft_req *r, const int32_t *seq, int64_t len, const int32_t *tslots, int k)
{
    const int64_t np = len - 1; /* pairs 0..len-2 */
    /* pair p is valid while fed[0..p+1] (the tokens it was computed from) match */
    int64_t same = 0, lim = r->n_fed > 0 ? r->n_fed + 1 : 0;
    if (lim > len) lim = len;
    while (same < lim && r->fed[same] == seq[same]) same++;
    int64_t valid = same > 0 ? same - 1 : 0;
    if (valid >= np) valid = np - 1; /* the last pair's row gives d0 */
    const int64_t n = np - valid;
    if (n > INT32_MAX / 4 || reserve(e, (int)n, (int)(np + k))) return -1;
    const int W = e->n_cap * e->H;
    for (int64_t i = 0; i < n; i++) {
        int64_t p = valid + i;
        int32_t ts = tslots[p];
        if (ts < 0 || ts >= e->cap_slots) return -1;
        e->tok[i] = seq[p + 1];
        memcpy(e->hin + (size_t)i * W, e->cap + (size_t)ts * W, sizeof(float) * W);
    }
    if (layer_forward(e, (int)n, W, valid, r->slots, NULL, NULL)) return -1;
    memcpy(r->fed, seq, sizeof(int32_t) * (size_t)len);
    r->n_fed = np;
    return n;
}

int spec_eagle_propose(spec_eagle *e, spec_draft_req *r, const int32_t *seq, int64_t len, const int32_t *tslots,
                       int32_t *draft, int k)
{
    if (k <= 0 || len < 2 || !tslots) return 0;
    if (len + k > e->ctx) k = (int)(e->ctx - len);
    if (k <= 0) return 0;
    /* positions 0..len-2 (pairs) and len-1..len+k-3 (the chain) */
    if (ensure_slots(e, r, len - 1 + k - 1)) {
        trim_slots(e, r, 0);
        r->n_fed = 0;
        return 0;
    }
    int nd = 0;
    int64_t n = catch_up(e, r, seq, len, tslots, k);
    if (n < 0) {
        r->n_fed = 0;
        goto out;
    }
    draft[nd++] = pick(e);
    const float *last = e->y + (size_t)(n - 1) * e->H;
    while (nd < k) {
        /* (the previous step's output, its token) at position len-2+nd */
        memmove(e->hin, last, sizeof(float) * (size_t)e->H);
        e->tok[0] = draft[nd - 1];
        if (layer_forward(e, 1, e->H, len - 2 + nd, r->slots, NULL, NULL)) break;
        draft[nd++] = pick(e);
        last = e->y;
    }
out:
    trim_slots(e, r, len - 1);
    return nd;
}

/* ---- tree drafts (topk > 1) ---------------------------------------------------------- */

/* Draft id -> target id. */
static int32_t to_target(const spec_eagle *e, int id) { return e->d2t ? (int32_t)(id + e->d2t[id]) : id; }

int32_t spec_eagle_target_id(const spec_eagle *e, int draft_id) { return to_target(e, draft_id); }

/* Logits of the n rows of e->y into e->tlg (n, Vd): the tail of
 * layer_forward for every row (EAGLE-1 with a token map: the cut head or
 * the masked full one, as there).  0 or -1. */
static int tree_logits(spec_eagle *e, int n)
{
    if (n > e->tlg_rows) {
        float *t = realloc(e->tlg, sizeof(float) * (size_t)n * (size_t)(e->Vd > e->V ? e->Vd : e->V));
        if (!t) return -1;
        e->tlg = t;
        e->tlg_rows = n;
    }
    if (!e->eagle3) {
        if (e->hot && e->hot_head.mat.data) {
            for (int t = 0; t < n; t++)
                spec_tokmap_head_logits(&e->hot_head, e->hot, e->y + (size_t)t * e->H, e->tlg + (size_t)t * e->Vd);
            return 0;
        }
        int rc = model_lm_head_rows(e->target, e->y, n, e->tlg);
        for (int t = 0; !rc && e->hot && t < n; t++) spec_tokmap_mask(e->hot, e->tlg + (size_t)t * e->Vd);
        return rc;
    }
    for (int t = 0; t < n; t++)
        kern_rmsnorm(e->xn + (size_t)t * e->H, e->y + (size_t)t * e->H, e->fnorm, e->H, e->eps, 0.0f);
    if (e->lm.data) {
        mm(e, e->tlg, e->xn, n, &e->lm, NULL);
        return 0;
    }
    return model_lm_head_rows(e->target, e->xn, n, e->tlg);
}

/* The kk best entries of row (nv logits) by log-softmax, best first, ties
 * to the lower id: ids into id, log-probabilities into lp.  NaN rows give
 * -inf. */
static void row_topk(const float *row, int nv, int kk, int32_t *id, double *lp)
{
    float mx = row[0];
    for (int i = 1; i < nv; i++)
        if (row[i] > mx) mx = row[i];
    double sum = 0;
    for (int i = 0; i < nv; i++) sum += exp((double)row[i] - mx);
    double lse = (double)mx + log(sum);
    int n = 0;
    for (int i = 0; i < nv; i++) {
        float v = row[i];
        if (n == kk && !(v > row[id[n - 1]])) continue;
        int j = n < kk ? n++ : n - 1;
        while (j > 0 && v > row[id[j - 1]]) id[j] = id[j - 1], j--;
        id[j] = i;
    }
    for (int j = 0; j < n; j++) {
        double l = (double)row[id[j]] - lse;
        lp[j] = isnan(l) ? -INFINITY : l;
    }
}

/* Indices of the kk best of score[0..n) (ties to the lower index), best
 * first, into out; returns how many. */
static int best_of(const double *score, int n, int kk, int32_t *out)
{
    int m = 0;
    for (int i = 0; i < n; i++) {
        double v = score[i];
        if (m == kk && !(v > score[out[m - 1]])) continue;
        int j = m < kk ? m++ : m - 1;
        while (j > 0 && v > score[out[j - 1]]) out[j] = out[j - 1], j--;
        out[j] = i;
    }
    return m;
}

static int cmp_i32(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

int spec_eagle_propose_tree(spec_eagle *e, spec_draft_req *r, const int32_t *seq, int64_t len, const int32_t *tslots,
                            int32_t *draft, int32_t *parent, double *score, int k, int steps, int topk)
{
    if (k <= 0 || steps <= 0 || topk <= 0 || len < 2 || !tslots) return 0;
    if (topk > e->Vd) topk = e->Vd;
    if (topk > 64) topk = 64;
    if (steps > k) steps = k; /* k nodes are at most k deep */
    if (len + steps > e->ctx) steps = (int)(e->ctx - len);
    if (steps <= 0) return 0;
    /* candidates: topk children of the root, then topk x topk per later step; the
     * frontier nodes forwarded (steps - 1 times topk) get draft KV past len - 2 */
    const int C = topk + (steps - 1) * topk * topk, N = (steps - 1) * topk;
    const size_t ni = (size_t)C * 4 + (size_t)N * 3 + (size_t)topk * 2 + 2;
    int32_t *ib = malloc(sizeof(int32_t) * ni);
    double *cs = malloc(sizeof(double) * ((size_t)C + (size_t)topk));
    uint8_t *mask = N ? calloc((size_t)N * (size_t)N, 1) : NULL;
    int nd = 0;
    if (!ib || !cs || (N && !mask)) goto done;
    int32_t *ctok = ib, *cpar = ctok + C, *cfn = cpar + C, *map = cfn + C; /* (C) each */
    int32_t *fcand = map + C, *fpar = fcand + N, *fdep = fpar + N;       /* (N) each */
    int32_t *rpos = fdep + N, *tid = rpos + topk;                         /* (topk) each */
    double *tlp = cs + C;
    if (ensure_slots(e, r, len - 1 + N) || reserve(e, topk, (int)(len - 1 + N))) {
        trim_slots(e, r, 0);
        r->n_fed = 0;
        goto done;
    }
    int64_t n = catch_up(e, r, seq, len, tslots, N > 0 ? N : 1);
    if (n < 0) {
        r->n_fed = 0;
        goto out;
    }
    /* depth 1: the root's topk */
    row_topk(e->lg, e->Vd, topk, tid, tlp);
    int nc = 0;
    for (int j = 0; j < topk; j++) ctok[nc] = tid[j], cpar[nc] = -1, cs[nc] = tlp[j], cfn[nc] = -1, nc++;
    int lo = 0, hi = nc;                        /* this depth's candidates */
    int nf = 0;                                 /* frontier nodes forwarded so far */
    int fprev = 0;                              /* the first frontier node of the last forward (its rows in e->y) */
    const float *root_y = e->y + (size_t)(n - 1) * e->H;
    memcpy(e->hin, root_y, sizeof(float) * (size_t)e->H); /* row 0 keeps it for depth 1 */
    for (int d = 1; d < steps; d++) {
        /* the frontier: the topk best of depth d, forwarded at position len - 2 + d */
        int32_t sel[64];
        int m = best_of(cs + lo, hi - lo, topk, sel);
        const int f0 = nf;
        for (int t = 0; t < m; t++) {
            int c = lo + sel[t];
            int f = nf++;
            fcand[f] = c;
            cfn[c] = f;
            fpar[f] = cpar[c] < 0 ? -1 : cfn[cpar[c]];
            fdep[f] = d - 1;
            rpos[t] = (int32_t)(len - 2 + d);
            e->tok[t] = to_target(e, ctok[c]);
        }
        /* hidden inputs: the layer output of each node's parent (depth 1: the root's) */
        for (int t = m - 1; t >= 0; t--) { /* (row 0 last: at depth 1 it is the source) */
            int pf = fpar[f0 + t];
            const float *src = pf < 0 ? e->hin : e->y + (size_t)(pf - fprev) * e->H;
            memmove(e->hin + (size_t)t * e->H, src, sizeof(float) * (size_t)e->H);
        }
        fprev = f0;
        for (int u = 0; u < nf; u++) {
            memset(mask + (size_t)u * nf, 0, (size_t)nf);
            for (int v = u; v >= 0; v = fpar[v]) mask[(size_t)u * nf + v] = 1;
        }
        kern_attn_args ta = {.tree_mask = mask, .tree_depth = fdep, .tree_base = (int)(len - 1), .tree_n = nf};
        if (layer_forward(e, m, e->H, len - 1 + f0, r->slots, rpos, &ta) || tree_logits(e, m)) goto out;
        lo = nc;
        for (int t = 0; t < m; t++) {
            int pc = fcand[f0 + t];
            row_topk(e->tlg + (size_t)t * e->Vd, e->Vd, topk, tid, tlp);
            for (int j = 0; j < topk; j++)
                ctok[nc] = tid[j], cpar[nc] = pc, cs[nc] = cs[pc] + tlp[j], cfn[nc] = -1, nc++;
        }
        hi = nc;
    }
    /* the k best of the whole tree, in candidate order (parents first); a
     * child's score never exceeds its parent's (log-probabilities <= 0, ties
     * to the lower index), so the kept set is closed under parents, checked */
    int32_t best[64];
    int kk = k < 64 ? k : 64;
    int nb = best_of(cs, nc, kk, best);
    qsort(best, (size_t)nb, sizeof(int32_t), cmp_i32);
    for (int c = 0; c < nc; c++) map[c] = -1;
    for (int i = 0; i < nb; i++) {
        int c = best[i];
        if (cpar[c] >= 0 && map[cpar[c]] < 0) continue;
        map[c] = nd;
        draft[nd] = to_target(e, ctok[c]);
        parent[nd] = cpar[c] < 0 ? -1 : map[cpar[c]];
        if (score) score[nd] = cs[c];
        nd++;
    }
out:
    trim_slots(e, r, len - 1);
done:
    free(ib), free(cs), free(mask);
    return nd;
}

int spec_eagle_path_logits(spec_eagle *e, const int32_t *seq, int64_t len, const int32_t *tslots, const int32_t *path,
                           int n_path, float *out)
{
    spec_draft_req r = {0};
    int rc = -1;
    if (len < 2 || n_path < 0 || ensure_slots(e, &r, len - 1 + n_path)) goto fail;
    int64_t n = catch_up(e, &r, seq, len, tslots, n_path + 1);
    if (n < 0) goto fail;
    const float *last = e->y + (size_t)(n - 1) * e->H;
    for (int j = 0; j < n_path; j++) { /* the chain step with a given token */
        memmove(e->hin, last, sizeof(float) * (size_t)e->H);
        e->tok[0] = path[j];
        if (layer_forward(e, 1, e->H, len - 1 + j, r.slots, NULL, NULL)) goto fail;
        last = e->y;
    }
    memcpy(out, e->lg, sizeof(float) * (size_t)e->Vd);
    rc = 0;
fail:
    spec_eagle_req_release(e, &r);
    return rc;
}

int spec_eagle_first_logits(spec_eagle *e, const int32_t *seq, int64_t len, const int32_t *tslots, float *out,
                            int *n_vocab)
{
    spec_draft_req r = {0};
    int rc = -1;
    if (len >= 2 && !ensure_slots(e, &r, len - 1) && catch_up(e, &r, seq, len, tslots, 1) >= 0) {
        memcpy(out, e->lg, sizeof(float) * (size_t)e->Vd);
        *n_vocab = e->Vd;
        rc = 0;
    }
    spec_eagle_req_release(e, &r);
    return rc;
}
