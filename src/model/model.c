/* model — loading weights (safetensors or dummy) into a model.
 *
 * DESIGN: weights are resident once.  A matrix goes through kern_mat_init
 * with borrow_ok: if the kernels can use the checkpoint bytes as they are
 * (same dtype, row-major, aligned) the kern_mat points into the mmap and the
 * tensor is marked `keep`; otherwise it is converted/repacked into an owned
 * buffer.  After all weights are prepared st_release_unused() drops the
 * mapped pages of everything not kept, so a bf16 -> f32 or repacked
 * checkpoint does not stay resident twice.  The embedding table is read
 * row by row from its source (mmap or dummy buffer) and converted on
 * lookup, so it costs only the pages of tokens actually seen; when the
 * embeddings are tied and lm_head borrows, both share the same bytes.
 *
 * Tied embeddings come in two storage conventions: HF models store only
 * model.embed_tokens.weight; TinyStories-656K stores only lm_head.weight
 * (its metadata aliases the embedding to it).  Either one is used for both.
 *
 * Vectors (norms, biases) are converted to f32 into one arena.  All values
 * are rounded to the precision --dtype asked for (bf16 / f16), so results
 * match a reference that casts the model to that dtype.
 *
 * Missing tensors are collected and reported together by name.
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/model_impl.h"
#include "util/errmsg.h"
#include "util/fileio.h"
#include "model/rope.h"
#include "util/log.h"
#include "util/timeutil.h"
#include "util/rng.h"


size_t model_rss_bytes(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return 0;
    char line[256];
    size_t kb = 0;
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, "VmRSS:", 6)) {
            kb = strtoull(line + 6, NULL, 10);
            break;
        }
    fclose(f);
    return kb * 1024;
}

/* ---- loader state ------------------------------------------------------ */

typedef struct loader {
    model *m;
    char *err;
    size_t errlen;
    int failed;          /* a hard error is in err */
    char missing[1024];  /* names of missing tensors, comma-separated */
    int n_missing;
    /* dummy */
    int dummy;
    uint64_t rng;
} loader;

static int add_block(model *m, void *p)
{
    if (m->n_blocks == m->cap_blocks) {
        int nc = m->cap_blocks ? m->cap_blocks * 2 : 64;
        void **g = realloc(m->blocks, sizeof(void *) * (size_t)nc);
        if (!g) return -1;
        m->blocks = g;
        m->cap_blocks = nc;
    }
    m->blocks[m->n_blocks++] = p;
    return 0;
}

static void note_missing(loader *L, const char *name)
{
    size_t used = strlen(L->missing);
    if (used + strlen(name) + 8 < sizeof L->missing)
        snprintf(L->missing + used, sizeof L->missing - used, "%s%s", L->n_missing ? ", " : "",
                 name);
    else if (!strstr(L->missing, ", ..."))
        snprintf(L->missing + used, sizeof L->missing - used, ", ...");
    L->n_missing++;
}

static void fail(loader *L, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fail(loader *L, const char *fmt, ...)
{
    if (L->failed) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(L->err, L->errlen, fmt, ap);
    va_end(ap);
    L->failed = 1;
}

/* splitmix64 -> uniform float in [lo, hi) */
static float rng_uniform(uint64_t *s, float lo, float hi)
{
    uint64_t z = rng_next(s);
    return lo + (hi - lo) * (float)((double)(z >> 40) / (double)(1ull << 24));
}

static float round_prec(float v, model_prec p)
{
    if (p == MODEL_PREC_BF16) return bf16_to_f32(f32_to_bf16(v));
    if (p == MODEL_PREC_F16) return f16_to_f32(f32_to_f16(v));
    return v;
}

/* Dummy weights: uniform in [-1e-3, 1e-3) like SGLang's dummy loader, four
 * 16-bit draws per xorshift64 step so a 1B model fills in about a second. */
static void fill_dummy(void *buf, dtype dt, size_t n, uint64_t *state, model_prec prec)
{
    uint64_t s = *state | 1;
    for (size_t i = 0; i < n; i += 4) {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        for (size_t j = 0; j < 4 && i + j < n; j++) {
            float u = (float)((s >> (16 * j)) & 0xffff) * (1.0f / 65536.0f);
            float v = -1e-3f + 2e-3f * u;
            if (dt == DTYPE_BF16) ((uint16_t *)buf)[i + j] = f32_to_bf16(v);
            else ((float *)buf)[i + j] = round_prec(v, prec);
        }
    }
    *state = s;
}

void model_dummy_embed_row(const model *m, int token, float *out)
{
    uint64_t st = m->dummy_seed ^ ((uint64_t)(token + 1) * 0x9e3779b97f4a7c15ull);
    st ^= st >> 29;
    st *= 0xbf58476d1ce4e5b9ull;
    st ^= st >> 32;
    int H = m->cfg.hidden_size;
    for (int i = 0; i < H; i += 4) {
        st ^= st << 13;
        st ^= st >> 7;
        st ^= st << 17;
        for (int j = 0; j < 4 && i + j < H; j++) {
            float u = (float)((st >> (16 * j)) & 0xffff) * (1.0f / 65536.0f);
            out[i + j] = round_prec(-1e-3f + 2e-3f * u, m->prec);
        }
    }
    if (m->wdt == DTYPE_BF16)
        for (int i = 0; i < H; i++) out[i] = bf16_to_f32(f32_to_bf16(out[i]));
}

/* Find a supported-dtype tensor of the expected shape ((d0) or (d0, d1)
 * when d1 > 0).  NULL (and a note/failure) if absent or malformed. */
static const st_tensor *find_tensor(loader *L, const char *name, int64_t d0, int64_t d1,
                                    int optional)
{
    const st_tensor *t = st_find(&L->m->st, name);
    if (!t) {
        if (!optional) note_missing(L, name);
        return NULL;
    }
    const char *file = L->m->st.files[t->file].path;
    if (t->dt < 0) {
        fail(L, "%s: tensor '%s' has dtype %s; only F32, F16 and BF16 weights are supported",
             file, name, t->dtype_str);
        return NULL;
    }
    int ok = d1 > 0 ? (t->ndim == 2 && t->shape[0] == d0 && t->shape[1] == d1)
                    : (t->ndim == 1 && t->shape[0] == d0);
    if (!ok) {
        char got[128] = "";
        size_t u = 0;
        for (int i = 0; i < t->ndim && u < sizeof got - 24; i++)
            u += (size_t)snprintf(got + u, sizeof got - u, "%s%lld", i ? ", " : "",
                                  (long long)t->shape[i]);
        if (d1 > 0)
            fail(L, "%s: tensor '%s' has shape [%s], expected [%lld, %lld] from config.json", file,
                 name, got, (long long)d0, (long long)d1);
        else
            fail(L, "%s: tensor '%s' has shape [%s], expected [%lld] from config.json", file, name,
                 got, (long long)d0);
        return NULL;
    }
    return t;
}

static float *vec_alloc(model *m, size_t n)
{
    SGLC_ASSERT(m->vecs_used + n <= m->vecs_cap);
    float *p = m->vecs + m->vecs_used;
    m->vecs_used += (n + 15) & ~(size_t)15;
    return p;
}

/* A vector weight (n) as rounded f32 in the arena; NULL if absent. */
static const float *load_vec(loader *L, const char *name, int n, int optional)
{
    model *m = L->m;
    if (L->dummy) {
        if (optional) return NULL;
        float *v = vec_alloc(m, (size_t)n);
        for (int i = 0; i < n; i++) v[i] = round_prec(rng_uniform(&L->rng, -1e-3f, 1e-3f), m->prec);
        return v;
    }
    const st_tensor *t = find_tensor(L, name, n, 0, optional);
    if (!t) return NULL;
    float *v = vec_alloc(m, (size_t)n);
    void *tmp = malloc(t->nbytes ? t->nbytes : 1);
    if (!tmp) {
        fail(L, "out of memory");
        return NULL;
    }
    memcpy(tmp, t->data, t->nbytes); /* the mapping may be unaligned */
    dtype_to_f32(v, tmp, (dtype)t->dt, (size_t)n);
    free(tmp);
    for (int i = 0; i < n; i++) v[i] = round_prec(v[i], m->prec);
    return v;
}

/* Source bytes for a matrix in the dtype kern_mat_init should see:
 * the mapping itself when aligned and no rounding is needed, else an
 * owned temporary (*tmp, freed by the caller). */
static const void *mat_source(loader *L, const st_tensor *t, dtype *src_dt, void **tmp)
{
    model *m = L->m;
    size_t esz = dtype_size((dtype)t->dt);
    size_t n = t->nbytes / esz;
    *tmp = NULL;
    *src_dt = (dtype)t->dt;
    int aligned = ((uintptr_t)t->data % esz) == 0; /* enough for the kernels to borrow */
    /* f16 precision stored as f32: round non-f16 sources through f16 first */
    if (m->prec == MODEL_PREC_F16 && t->dt != DTYPE_F16) {
        uint16_t *h = malloc(n * 2 + 64);
        float *row = malloc(4096 * sizeof(float));
        char *raw = malloc(4096 * esz);
        if (!h || !row || !raw) {
            free(h), free(row), free(raw);
            return NULL;
        }
        for (size_t i = 0; i < n; i += 4096) {
            size_t c = n - i < 4096 ? n - i : 4096;
            memcpy(raw, (const char *)t->data + i * esz, c * esz);
            dtype_to_f32(row, raw, (dtype)t->dt, c);
            for (size_t j = 0; j < c; j++) h[i + j] = f32_to_f16(row[j]);
        }
        free(row);
        free(raw);
        *tmp = h;
        *src_dt = DTYPE_F16;
        return h;
    }
    if (!aligned) {
        void *c = aligned_alloc(64, (t->nbytes + 63) & ~(size_t)63);
        if (!c) return NULL;
        memcpy(c, t->data, t->nbytes);
        *tmp = c;
        return c;
    }
    return t->data;
}

/* Load matrix (n, k) named name into *w, stored as `want` (F32 or BF16;
 * values are rounded to the model's precision either way). */
/* Prepare *w (n, k) from `part`: a whole checkpoint tensor, or a 2-D view
 * (same dtype, data/nbytes/shape narrowed) of a slice of `owner`, which is
 * what gets marked resident when the kernels borrow the bytes. */
static void load_mat_part(loader *L, kern_mat *w, const st_tensor *owner, const st_tensor *part,
                          const char *name, int n, int k, dtype want)
{
    model *m = L->m;
    dtype sdt;
    void *tmp;
    const void *src = mat_source(L, part, &sdt, &tmp);
    if (!src) {
        fail(L, "out of memory preparing '%s'", name);
        return;
    }
    if (want == DTYPE_F32 && m->prec == MODEL_PREC_BF16 && sdt != DTYPE_BF16) {
        /* kept in f32 but rounded to bf16 values like every other weight */
        size_t count = (size_t)n * k;
        float *r = aligned_alloc(64, (count * 4 + 63) & ~(size_t)63);
        if (!r) {
            free(tmp);
            fail(L, "out of memory preparing '%s'", name);
            return;
        }
        if (sdt == DTYPE_F32) memcpy(r, src, count * 4);
        else dtype_to_f32(r, src, sdt, count);
        for (size_t i = 0; i < count; i++) r[i] = round_prec(r[i], MODEL_PREC_BF16);
        free(tmp);
        tmp = r;
        src = r;
        sdt = DTYPE_F32;
    }
    if (kern_mat_init(w, src, sdt, n, k, want, 1)) {
        free(tmp);
        fail(L, "cannot prepare weight '%s' (out of memory?)", name);
        return;
    }
    if (!w->owned) {
        if (tmp) {
            if (add_block(m, tmp)) fail(L, "out of memory");
        } else {
            st_mark_keep(&m->st, owner);
        }
    } else {
        free(tmp);
    }
    m->weight_bytes += w->bytes;
}

static void load_mat_as(loader *L, kern_mat *w, const char *name, int n, int k, dtype want)
{
    model *m = L->m;
    if (L->failed) return;
    if (L->dummy) {
        size_t count = (size_t)n * k, esz = dtype_size(want);
        void *buf = aligned_alloc(64, (count * esz + 63) & ~(size_t)63);
        if (!buf) {
            fail(L, "out of memory for dummy weight '%s' (%zu bytes)", name, count * esz);
            return;
        }
        fill_dummy(buf, want, count, &L->rng, m->prec);
        if (kern_mat_init(w, buf, want, n, k, want, 1)) {
            free(buf);
            fail(L, "cannot prepare dummy weight '%s'", name);
            return;
        }
        if (w->owned) free(buf);
        else if (add_block(m, buf)) {
            free(buf);
            fail(L, "out of memory");
        }
        m->weight_bytes += w->bytes;
        return;
    }
    const st_tensor *t = find_tensor(L, name, n, k, 0);
    if (!t) return;
    load_mat_part(L, w, t, t, name, n, k, want);
}

static void load_mat(loader *L, kern_mat *w, const char *name, int n, int k)
{
    load_mat_as(L, w, name, n, k, L->m->wdt);
}

static void load_proj(loader *L, kern_mat *w, const float **bias, const char *pat, int il, int n,
                      int k, int has_bias)
{
    char name[256];
    snprintf(name, sizeof name, pat, il);
    strcat(name, ".weight");
    load_mat(L, w, name, n, k);
    if (bias) {
        *bias = NULL;
        if (has_bias) {
            snprintf(name, sizeof name, pat, il);
            strcat(name, ".bias");
            *bias = load_vec(L, name, n, 0);
        }
    }
}

/* GraniteMoE: experts of layer il from input_linear (E, 2*Ie, H) -- rows
 * [0, Ie) gate, [Ie, 2*Ie) up -- and output_linear (E, H, Ie).  Each
 * expert's matrices are 2-D views into the 3-D tensors. */
static void load_packed_experts(loader *L, model_layer *l, int il)
{
    model *m = L->m;
    const model_config *c = &m->cfg;
    const model_tensor_names *nm = m->arch->names;
    int H = c->hidden_size, Ie = c->moe_inter, E = c->n_expert;
    char nin[256], nout[256], name[300];
    snprintf(nin, sizeof nin, nm->expert_in, il);
    snprintf(nout, sizeof nout, nm->expert_out, il);
    if (L->dummy) {
        for (int e = 0; e < E && !L->failed; e++) {
            snprintf(name, sizeof name, "%s[%d]", nin, e);
            load_mat(L, &l->egate[e], name, Ie, H);
            load_mat(L, &l->eup[e], name, Ie, H);
            snprintf(name, sizeof name, "%s[%d]", nout, e);
            load_mat(L, &l->edown[e], name, H, Ie);
        }
        return;
    }
    const st_tensor *ti = st_find(&m->st, nin), *to = st_find(&m->st, nout);
    if (!ti) note_missing(L, nin);
    if (!to) note_missing(L, nout);
    if (!ti || !to) return;
    const int64_t want[2][3] = {{E, 2 * (int64_t)Ie, H}, {E, H, Ie}};
    const st_tensor *ts[2] = {ti, to};
    for (int j = 0; j < 2; j++) {
        const st_tensor *t = ts[j];
        const char *file = m->st.files[t->file].path;
        if (t->dt < 0) {
            fail(L, "%s: tensor '%s' has dtype %s; only F32, F16 and BF16 weights are supported",
                 file, t->name, t->dtype_str);
            return;
        }
        if (t->ndim != 3 || t->shape[0] != want[j][0] || t->shape[1] != want[j][1] ||
            t->shape[2] != want[j][2]) {
            fail(L, "%s: tensor '%s' must have shape [%lld, %lld, %lld] from config.json", file,
                 t->name, (long long)want[j][0], (long long)want[j][1], (long long)want[j][2]);
            return;
        }
    }
    size_t esz = dtype_size((dtype)ti->dt), eso = dtype_size((dtype)to->dt);
    size_t mat = (size_t)Ie * H; /* elements of one Ie x H (or H x Ie) matrix */
    for (int e = 0; e < E && !L->failed; e++) {
        st_tensor v = *ti;
        v.ndim = 2, v.shape[0] = Ie, v.shape[1] = H, v.nbytes = mat * esz;
        v.data = (const char *)ti->data + (size_t)e * 2 * mat * esz;
        snprintf(name, sizeof name, "%s[%d] (gate)", nin, e);
        load_mat_part(L, &l->egate[e], ti, &v, name, Ie, H, m->wdt);
        v.data = (const char *)v.data + mat * esz;
        snprintf(name, sizeof name, "%s[%d] (up)", nin, e);
        load_mat_part(L, &l->eup[e], ti, &v, name, Ie, H, m->wdt);
        st_tensor d = *to;
        d.ndim = 2, d.shape[0] = H, d.shape[1] = Ie, d.nbytes = mat * eso;
        d.data = (const char *)to->data + (size_t)e * mat * eso;
        snprintf(name, sizeof name, "%s[%d]", nout, e);
        load_mat_part(L, &l->edown[e], to, &d, name, H, Ie, m->wdt);
    }
}

/* Load the router and the E experts of MoE layer il. */
static void load_moe(loader *L, model_layer *l, int il)
{
    model *m = L->m;
    const model_config *c = &m->cfg;
    const model_tensor_names *nm = m->arch->names;
    int H = c->hidden_size, Ie = c->moe_inter, E = c->n_expert;
    char name[256];
    l->moe = 1;
    /* The router is stored as f32 (its values still rounded to --dtype):
     * the kernels then compute its logits in f32 from f32 activations, so
     * top-k choices near a tie do not flip on bf16 rounding of the
     * activations.  It is small (E x H). */
    snprintf(name, sizeof name, nm->router, il);
    load_mat_as(L, &l->wrouter, name, E, H, DTYPE_F32);
    l->egate = calloc((size_t)E, sizeof(kern_mat));
    l->eup = calloc((size_t)E, sizeof(kern_mat));
    l->edown = calloc((size_t)E, sizeof(kern_mat));
    if (!l->egate || !l->eup || !l->edown) {
        fail(L, "out of memory");
        return;
    }
    struct { const char *pat; kern_mat *w; int n, k; } p[3] = {
        {nm->expert_gate, l->egate, Ie, H},
        {nm->expert_up, l->eup, Ie, H},
        {nm->expert_down, l->edown, H, Ie},
    };
    size_t before = m->weight_bytes;
    if (nm->expert_in) {
        load_packed_experts(L, l, il);
    } else {
        for (int e = 0; e < E && !L->failed; e++)
            for (int j = 0; j < 3; j++) {
                snprintf(name, sizeof name, p[j].pat, il, e);
                strcat(name, ".weight");
                load_mat(L, &p[j].w[e], name, p[j].n, p[j].k);
            }
    }
    if (!L->failed) {
        m->all_expert_bytes += m->weight_bytes - before;
        m->expert_bytes = l->egate[0].bytes + l->eup[0].bytes + l->edown[0].bytes;
    }
}

static const float *load_layer_vec(loader *L, const char *pat, int il, int n, int optional)
{
    if (!pat) return NULL;
    char name[256];
    snprintf(name, sizeof name, pat, il);
    return load_vec(L, name, n, optional);
}

/* Embedding table + lm_head, honoring both tied conventions. */
static void load_embeddings(loader *L)
{
    model *m = L->m;
    const model_config *c = &m->cfg;
    const model_tensor_names *nm = m->arch->names;
    int V = c->vocab_size, H = c->hidden_size;
    if (L->dummy) {
        /* Rows are a pure function of (seed, row): the embedding table is
         * never stored; lookups regenerate the row, lm_head is built from a
         * temporary copy (borrowed when tied and the kernels keep row-major). */
        m->embed = NULL;
        m->embed_dt = DTYPE_F32;
        m->dummy_seed = L->rng;
        L->rng = L->rng * 6364136223846793005ull + 1442695040888963407ull;
        if (!c->tie_word_embeddings) {
            load_mat(L, &m->lm_head, nm->lm_head, V, H);
            return;
        }
        size_t count = (size_t)V * H, esz = dtype_size(m->wdt);
        void *buf = aligned_alloc(64, (count * esz + 63) & ~(size_t)63);
        float *row = malloc(sizeof(float) * (size_t)H);
        if (!buf || !row) {
            free(buf), free(row);
            fail(L, "out of memory for dummy embeddings");
            return;
        }
        for (int r = 0; r < V; r++) {
            model_dummy_embed_row(m, r, row);
            dtype_from_f32((char *)buf + (size_t)r * H * esz, m->wdt, row, (size_t)H);
        }
        free(row);
        if (kern_mat_init(&m->lm_head, buf, m->wdt, V, H, m->wdt, 1)) {
            free(buf);
            fail(L, "cannot prepare lm_head");
            return;
        }
        m->lm_head.x_exact = 1; /* logits from f32 activations (no AMX rounding) */
        m->weight_bytes += m->lm_head.bytes;
        if (m->lm_head.owned) {
            free(buf);
        } else if (add_block(m, buf)) {
            free(buf);
            fail(L, "out of memory");
        }
        return;
    }
    const st_tensor *te = st_find(&m->st, nm->embed);
    const st_tensor *tl = st_find(&m->st, nm->lm_head);
    if (c->tie_word_embeddings) {
        const st_tensor *t = te ? te : tl;
        if (!t) {
            note_missing(L, nm->embed);
            return;
        }
        te = find_tensor(L, t->name, V, H, 0);
        if (!te) return;
        load_mat(L, &m->lm_head, te->name, V, H);
    } else {
        te = find_tensor(L, nm->embed, V, H, 0);
        load_mat(L, &m->lm_head, nm->lm_head, V, H);
        if (!te) return;
    }
    if (L->failed) return;
    /* embedding rows are read from the source; keep them mapped */
    size_t esz = dtype_size((dtype)te->dt);
    if ((uintptr_t)te->data % esz) {
        void *cpy = aligned_alloc(64, (te->nbytes + 63) & ~(size_t)63);
        if (!cpy || add_block(m, cpy)) {
            free(cpy);
            fail(L, "out of memory");
            return;
        }
        memcpy(cpy, te->data, te->nbytes);
        m->embed = cpy;
    } else {
        m->embed = te->data;
        /* Only keep the pages resident when lm_head shares them; otherwise
         * they are dropped after load and fault back in per token seen. */
        if (m->lm_head.data == te->data) st_mark_keep(&m->st, te);
    }
    m->embed_dt = (dtype)te->dt;
    m->lm_head.x_exact = 1; /* logits from f32 activations (no AMX rounding) */
    if (m->embed != m->lm_head.data) m->weight_bytes += te->nbytes;
}

static int choose_dtype(model *m, int want, char *err, size_t errlen)
{
    int d = want >= 0 ? want : m->cfg.torch_dtype;
    switch (d) {
    case DTYPE_BF16:
        m->prec = MODEL_PREC_BF16;
        m->wdt = DTYPE_BF16;
        return 0;
    case DTYPE_F16:
        m->prec = MODEL_PREC_F16;
        m->wdt = DTYPE_F32;
        return 0;
    case DTYPE_F32:
    case -1:
        m->prec = MODEL_PREC_F32;
        m->wdt = DTYPE_F32;
        return 0;
    }
    errmsg_set(err, errlen, "unsupported --dtype");
    return -1;
}

void model_free(model *m)
{
    if (!m) return;
    if (m->layers) {
        for (int i = 0; i < m->cfg.n_layer; i++) {
            model_layer *l = &m->layers[i];
            kern_mat_free(&l->wq), kern_mat_free(&l->wk), kern_mat_free(&l->wv);
            kern_mat_free(&l->wo), kern_mat_free(&l->wgate), kern_mat_free(&l->wup);
            kern_mat_free(&l->wdown);
            kern_mat_free(&l->wrouter);
            for (int e = 0; e < m->cfg.n_expert; e++) {
                if (l->egate) kern_mat_free(&l->egate[e]);
                if (l->eup) kern_mat_free(&l->eup[e]);
                if (l->edown) kern_mat_free(&l->edown[e]);
            }
            free(l->egate), free(l->eup), free(l->edown);
        }
    }
    kern_mat_free(&m->lm_head);
    free(m->layers);
    for (int i = 0; i < m->n_blocks; i++) free(m->blocks[i]);
    free(m->blocks);
    free(m->vecs);
    free(m->inv_freq);
    free(m->scratch_mem);
    st_close(&m->st);
    free(m);
}

model *model_load(const model_load_opts *o, char *err, size_t errlen)
{
    if (!o || !o->model_path) {
        errmsg_set(err, errlen, "no model path");
        return NULL;
    }
    model *m = calloc(1, sizeof *m);
    if (!m) {
        errmsg_set(err, errlen, "out of memory");
        return NULL;
    }
    double t0 = time_now_sec();
    if (model_config_load(&m->cfg, o->model_path, o->override_json, o->context_length, err,
                          errlen))
        goto fail;
    m->arch = m->cfg.arch;
    if (choose_dtype(m, o->dtype, err, errlen)) goto fail;
    const model_config *c = &m->cfg;
    int H = c->hidden_size, I = c->intermediate_size, hd = c->head_dim;
    int qd = c->n_head * hd, kvd = c->n_kv_head * hd;
    loader L = {.m = m, .err = err, .errlen = errlen};
    L.dummy = o->load_format == MODEL_LOAD_DUMMY;
    L.rng = o->random_seed * 0x2545F4914F6CDD1Dull + 1;
    if (!L.dummy && st_open(&m->st, o->model_path, err, errlen)) goto fail;

    /* vector arena: norms, biases, q/k norms (+ padding per vector) */
    /* norms (2H), q/k norms (2hd), q/k/v/o biases, gate/up/down biases, padding */
    size_t per_layer = 2 * ((size_t)H + 16) + 2 * ((size_t)hd + 16) + (size_t)qd + 2 * (size_t)kvd +
                       (size_t)H + 2 * (size_t)I + (size_t)H + 16 * 8;
    m->vecs_cap = per_layer * (size_t)c->n_layer + (size_t)H + 16;
    m->vecs = aligned_alloc(64, ((m->vecs_cap * 4) + 63) & ~(size_t)63);
    m->layers = calloc((size_t)c->n_layer, sizeof *m->layers);
    if (!m->vecs || !m->layers) {
        errmsg_set(err, errlen, "out of memory");
        goto fail;
    }
    const model_tensor_names *nm = m->arch->names;
    int qkv_bias = m->arch->qkv_bias < 0 ? c->attention_bias : m->arch->qkv_bias;
    int o_bias = m->arch->o_bias < 0 ? c->attention_bias : m->arch->o_bias;
    int mlp_bias = m->arch->mlp_bias < 0 ? c->mlp_bias : m->arch->mlp_bias;
    load_embeddings(&L);
    for (int il = 0; il < c->n_layer && !L.failed; il++) {
        model_layer *l = &m->layers[il];
        l->attn_norm = load_layer_vec(&L, nm->attn_norm, il, H, 0);
        l->ffn_norm = load_layer_vec(&L, nm->ffn_norm, il, H, 0);
        if (m->arch->qk_norm) {
            l->q_norm = load_layer_vec(&L, nm->q_norm, il, hd, 0);
            l->k_norm = load_layer_vec(&L, nm->k_norm, il, hd, 0);
        }
        load_proj(&L, &l->wq, &l->bq, nm->q, il, qd, H, qkv_bias);
        load_proj(&L, &l->wk, &l->bk, nm->k, il, kvd, H, qkv_bias);
        load_proj(&L, &l->wv, &l->bv, nm->v, il, kvd, H, qkv_bias);
        load_proj(&L, &l->wo, &l->bo, nm->o, il, H, qd, o_bias);
        if (model_config_layer_moe(c, il)) {
            load_moe(&L, l, il);
        } else {
            load_proj(&L, &l->wgate, &l->bgate, nm->gate, il, I, H, mlp_bias);
            load_proj(&L, &l->wup, &l->bup, nm->up, il, I, H, mlp_bias);
            load_proj(&L, &l->wdown, &l->bdown, nm->down, il, H, I, mlp_bias);
        }
        l->window = model_config_layer_window(c, il) ? c->sliding_window : 0;
    }
    m->final_norm = L.failed ? NULL : load_vec(&L, nm->final_norm, H, 0);
    if (L.failed) goto fail;
    if (L.n_missing) {
        errmsg_set(err, errlen, "%s: %d tensor(s) missing from the checkpoint: %s", o->model_path,
               L.n_missing, L.missing);
        goto fail;
    }
    m->weight_bytes += m->vecs_used * sizeof(float);
    if (!L.dummy) st_release_unused(&m->st);

    m->rot_dim = model_rope_dim(c);
    m->inv_freq = malloc(sizeof(float) * (size_t)(m->rot_dim / 2));
    if (!m->inv_freq) {
        errmsg_set(err, errlen, "out of memory");
        goto fail;
    }
    m->attn_factor = model_rope_inv_freq(c, 0, m->inv_freq);
    {
        double dt = time_now_sec() - t0;
        size_t rss = model_rss_bytes();
        log_info("loaded %s (%s, %d layers, hidden %d, vocab %d) from %s in %.2f s: weights %.1f "
                 "MiB as %s, VmRSS %.1f MiB (%.0f%% of weights)",
                 c->architecture, L.dummy ? "dummy weights" : "safetensors", c->n_layer, H,
                 c->vocab_size, o->model_path, dt, m->weight_bytes / 1048576.0,
                 m->prec == MODEL_PREC_F16 ? "float16 values in float32" : dtype_name(m->wdt),
                 rss / 1048576.0, m->weight_bytes ? 100.0 * rss / m->weight_bytes : 0.0);
    }
    return m;
fail:
    model_free(m);
    return NULL;
}

const model_config *model_get_config(const model *m) { return &m->cfg; }
size_t model_weight_bytes(const model *m) { return m->weight_bytes; }
size_t model_last_read_bytes(const model *m)
{
    return m->weight_bytes - m->all_expert_bytes + m->touched_bytes;
}
dtype model_weight_dtype(const model *m) { return m->wdt; }
