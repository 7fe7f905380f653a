/* model_load — the weight loader's helpers (split from model.c).
 *
 * DESIGN: model.c's load() walks the layers and calls these; they find
 * each tensor in the weight source, check its shape, and prepare it the
 * way model.c's DESIGN comment describes (borrow the source bytes or
 * convert into owned memory, vectors into the f32 arena, block-quantized
 * matrices kept in their type), loading only this rank's slice under
 * tensor parallelism (shard_sel, model_load.h).  Errors go to the
 * loader's err once (fail), missing tensors are collected by name.
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/model_load.h"
#include "model/gguf_model.h"
#include "model/model_ep.h"
#include "model/moe.h"
#include "util/errmsg.h"
#include "util/log.h"
#include "util/timeutil.h"

static int add_block(model_weights *m, void *p)
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

static void note_missing(loader *L, const char *hf_name)
{
    /* a GGUF file: say the name the file would hold too */
    char buf[400], gn[200];
    const char *name = hf_name;
    const gguf_file *gf = wsrc_gguf_file(L->src);
    gguf_str ga = {0};
    int expert;
    if (gf && gguf_get_str(gf, "general.architecture", &ga, NULL, 0) > 0) {
        char arch[32];
        snprintf(arch, sizeof arch, "%.*s", (int)(ga.len < 31 ? ga.len : 31), ga.s);
        if (gguf_name_from_hf_arch(arch, hf_name, gn, sizeof gn, &expert)) {
            snprintf(buf, sizeof buf, "%s (GGUF %s%s)", hf_name, gn, expert >= 0 ? ", an expert slice" : "");
            name = buf;
        }
    }
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


/* Find a supported-type tensor of the expected shape ((d0) or (d0, d1)
 * when d1 > 0) into *t.  0 (and a note/failure) if absent or malformed. */
static int find_tensor(loader *L, const char *name, int64_t d0, int64_t d1, int optional,
                       wsrc_tensor *t)
{
    const int64_t want[2] = {d0, d1};
    if (!wsrc_find(L->src, name, d1 > 0 ? 2 : 1, want, t)) {
        if (!optional) note_missing(L, name);
        return 0;
    }
    const char *file = t->origin;
    if (t->type < 0) {
        fail(L, "%s: tensor '%s' has type %s, which sglc cannot load (F32, F16, BF16 and the "
             "block-quantized types with a dequantizer are supported)", file, name, t->type_name);
        return 0;
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
        return 0;
    }
    return 1;
}

static float *vec_alloc(model_weights *m, size_t n)
{
    SGLC_ASSERT(m->vecs_used + n <= m->vecs_cap);
    float *p = m->vecs + m->vecs_used;
    m->vecs_used += (n + 15) & ~(size_t)15;
    return p;
}

/* The model precision as a storage type (what dummy tensors report). */
dtype prec_dtype(model_prec p)
{
    return p == MODEL_PREC_BF16 ? DTYPE_BF16 : p == MODEL_PREC_F16 ? DTYPE_F16 : DTYPE_F32;
}

/* Alignment the kernels need to borrow stored bytes in place. */
static size_t borrow_align(int type)
{
    const kern_type_traits *tr = kern_type_get((kern_type)type);
    return tr->block_size == 1 ? tr->block_bytes : 1;
}

/* A vector weight (n) as rounded f32 in the arena; NULL if absent. */
const float *load_vec(loader *L, const char *name, int n, int optional)
{
    model_weights *m = L->m;
    wsrc_tensor t;
    if (!find_tensor(L, name, n, 0, optional, &t)) return NULL;
    float *v = vec_alloc(m, (size_t)n);
    if (wsrc_read(L->src, &t, v, DTYPE_F32)) {
        fail(L, "out of memory reading '%s'", name);
        return NULL;
    }
    if (!L->keep_f32)
        for (int i = 0; i < n; i++) v[i] = dtype_round(v[i], prec_dtype(m->prec));
    return v;
}

/* Source bytes for a matrix in the type kern_mat_init should see: the
 * stored bytes themselves when aligned and no rounding is needed, else an
 * owned temporary (*tmp, freed by the caller). */
static const void *mat_source(loader *L, const wsrc_tensor *t, dtype *src_dt, void **tmp)
{
    model_weights *m = L->m;
    const kern_type_traits *tr = kern_type_get((kern_type)t->type);
    size_t n = (size_t)wsrc_numel(t);
    *tmp = NULL;
    *src_dt = (dtype)t->type;
    int aligned = ((uintptr_t)t->data % borrow_align(t->type)) == 0;
    /* f16 precision stored as f32: round non-f16 sources through f16 first */
    if (m->prec == MODEL_PREC_F16 && t->type != KERN_TYPE_F16) {
        const size_t chunk = 4096; /* a multiple of every block size */
        uint16_t *h = malloc(n * 2 + 64);
        float *row = malloc(chunk * sizeof(float));
        char *raw = malloc(kern_type_row_bytes((kern_type)t->type, chunk));
        if (!h || !row || !raw) {
            free(h), free(row), free(raw);
            return NULL;
        }
        for (size_t i = 0; i < n; i += chunk) {
            size_t c = n - i < chunk ? n - i : chunk;
            memcpy(raw, (const char *)t->data + kern_type_row_bytes((kern_type)t->type, (int64_t)i),
                   kern_type_row_bytes((kern_type)t->type, (int64_t)c));
            tr->row_to_f32(row, raw, (int64_t)c);
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

/* A matrix whose values exist only through the source (no bytes): read
 * into a buffer of `want`, rounded to the model precision. */
static void load_mat_read(loader *L, linear_weight *w, const wsrc_tensor *t, const char *name,
                          int n, int k, dtype want)
{
    model_weights *m = L->m;
    size_t bytes = kern_type_mat_bytes(kern_type_of_dtype(want), n, k);
    void *buf = aligned_alloc(64, (bytes + 63) & ~(size_t)63);
    if (!buf) {
        fail(L, "out of memory for weight '%s' (%zu bytes)", name, bytes);
        return;
    }
    if (wsrc_read(L->src, t, buf, want)) {
        free(buf);
        fail(L, "cannot read weight '%s' from %s", name, t->origin);
        return;
    }
    if (want == DTYPE_F32 && m->prec != MODEL_PREC_F32 && t->type != (int)prec_dtype(m->prec))
        for (size_t i = 0, c = (size_t)n * k; i < c; i++)
            ((float *)buf)[i] = dtype_round(((float *)buf)[i], prec_dtype(m->prec));
    if (linear_init(w, buf, want, n, k, want, 1)) {
        free(buf);
        fail(L, "cannot prepare weight '%s'", name);
        return;
    }
    if (w->mat.owned) free(buf);
    else if (add_block(m, buf)) {
        free(buf);
        fail(L, "out of memory");
    }
    m->weight_bytes += linear_bytes(w);
}

/* A block-quantized tensor with bytes (a GGUF file's blocks, or a Hugging
 * Face quantized checkpoint through wsource_hfq, which made the blocks):
 * kept in its own type, the kernels use the bytes in place; a matrix the
 * loader wants as float (no_quant: the MoE router) is dequantized to want. */
static void load_mat_quant(loader *L, linear_weight *w, const wsrc_tensor *part, const char *name,
                           int n, int k, dtype want)
{
    kern_type kt = (kern_type)part->type;
    if (part->perm && (L->no_quant || part->perm_n != k)) { /* act-order GPTQ columns (wsource_hfq.c) */
        fail(L, "act-order weight '%s' cannot be %s", name,
             L->no_quant ? "read as float here" : "split by input columns (tensor parallelism)");
        return;
    }
    /* Q4_0 / Q4_K / Q5_K / Q6_K / Q8_0 with whole 8-row groups: an owned copy,
     * which the SIMD kernels repack 8 rows at a time (about 2x the GEMV
     * compute rate of the file's layout, which is compute-bound on AVX2);
     * the mapped pages of the tensor are dropped as soon as it is copied
     * (wsrc_drop), so resident stays ~1x during the load as after it.  The
     * embedding table as a tied LM head too when it lives in a GGUF
     * mapping: lookups read the mapped rows, whose pages fault back in one
     * per token seen; from other sources (an HF quantized checkpoint's
     * blocks in memory) a copy would double it.  SGLC_QUANT_REPACK=0 (a
     * debug switch) keeps every stored layout (borrowed in place). */
    int tied = part->name && (strstr(part->name, "token_embd") || strstr(part->name, "embed_tokens"));
    static int no_repack = -1;
    if (no_repack < 0) {
        const char *e = getenv("SGLC_QUANT_REPACK");
        no_repack = e && !strcmp(e, "0");
    }
    int repack = !L->no_quant && !no_repack && (!tied || wsrc_gguf_file(L->src)) &&
                 kern_quant_repacks(kt, n);
    double t0 = time_now_sec();
    if (linear_init_kt(w, part->data, kt, n, k, L->no_quant ? kern_type_of_dtype(want) : kt, !repack)) {
        fail(L, "cannot prepare %s weight '%s'", kern_type_get(kt)->name, name);
        return;
    }
    if (repack && !L->shard_buf) wsrc_drop(L->src, part);
    L->t_quant += time_now_sec() - t0;
    if (!w->mat.owned) {
        if (L->shard_buf) { /* a slice's own copy: the weights keep it */
            if (add_block(L->m, L->shard_buf)) fail(L, "out of memory");
            L->shard_buf = NULL;
        } else {
            wsrc_keep(L->src, part);
        }
    }
    L->m->weight_bytes += linear_bytes(w);
    if (w->mat.qtype) L->n_quant++;
    if (w->mat.qtype && w->mat.layout) L->n_repacked++;
    if (part->perm) { /* the kernels gather x[perm]: a copy the weights own */
        int32_t *p = malloc(sizeof(int32_t) * (size_t)k);
        if (!p || add_block(L->m, p)) {
            free(p);
            fail(L, "out of memory");
            return;
        }
        memcpy(p, part->perm, sizeof(int32_t) * (size_t)k);
        w->mat.perm = p;
        L->m->weight_bytes += sizeof(int32_t) * (size_t)k;
    }
}

/* Prepare *w (n, k), stored as `want` (F32 or BF16; values rounded to the
 * model's precision either way), from `part`: a whole tensor, or a 2-D
 * view (wsrc_view2) of a slice of one; keep() marks the whole tensor
 * resident when the kernels borrow the bytes. */
static void load_mat_part(loader *L, linear_weight *w, const wsrc_tensor *part, const char *name,
                          int n, int k, dtype want)
{
    model_weights *m = L->m;
    if (L->failed) return;
    if (!part->data) {
        load_mat_read(L, w, part, name, n, k, want);
        return;
    }
    if (part->type >= KERN_TYPE_FLOAT_COUNT) {
        load_mat_quant(L, w, part, name, n, k, want);
        return;
    }
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
        for (size_t i = 0; i < count; i++) r[i] = dtype_round(r[i], DTYPE_BF16);
        free(tmp);
        tmp = r;
        src = r;
        sdt = DTYPE_F32;
    }
    if (linear_init(w, src, sdt, n, k, want, 1)) {
        free(tmp);
        fail(L, "cannot prepare weight '%s' (out of memory?)", name);
        return;
    }
    if (!w->mat.owned) {
        if (tmp) {
            if (add_block(m, tmp)) fail(L, "out of memory");
        } else if (L->shard_buf) { /* a slice's own copy: the weights keep it */
            if (add_block(m, L->shard_buf)) fail(L, "out of memory");
            L->shard_buf = NULL;
        } else {
            wsrc_keep(L->src, part);
        }
    } else {
        free(tmp);
    }
    m->weight_bytes += linear_bytes(w);
}

/* The bytes a slice is cut from: t's own (stored type), or, for a tensor
 * without bytes, the whole (n rows of rb_full bytes) read through the
 * source as `want` into *full (p then reports that type).  NULL after
 * fail(). */
static const char *shard_source(loader *L, const wsrc_tensor *t, const char *name, int n, size_t rb_full,
                                dtype want, kern_type ty, wsrc_tensor *p, char **full)
{
    *full = NULL;
    if (t->data) return t->data;
    *full = aligned_alloc(64, ((size_t)n * rb_full + 63) & ~(size_t)63);
    if (!*full) {
        fail(L, "out of memory for the slice of weight '%s'", name);
        return NULL;
    }
    if (wsrc_read(L->src, t, *full, want)) {
        free(*full), *full = NULL;
        fail(L, "cannot read weight '%s' from %s", name, t->origin);
        return NULL;
    }
    p->type = (int)ty;
    p->type_name = dtype_name(want);
    return *full;
}

/* Load the owned slice buf (bytes, rows x cols) described by p as w; the
 * kernels copy it, so buf is freed here. */
static void load_shard_buf(loader *L, linear_weight *w, wsrc_tensor *p, char *buf, size_t bytes,
                           const char *name, int rows, int cols, dtype want)
{
    p->data = buf;
    p->nbytes = bytes;
    L->shard_buf = buf;
    load_mat_part(L, w, p, name, rows, cols, want);
    free(L->shard_buf); /* not borrowed: the kernels made their own copy */
    L->shard_buf = NULL;
}

/* As load_mat_part for this rank's slice `sel` of the (n, k) tensor t: the
 * slice is copied into an owned buffer first (in the stored type when t
 * has bytes, block-aligned for block types; else the whole tensor is read
 * through the source as `want` — a dummy source's values then follow the
 * one-process order — and sliced), so only the shard stays resident. */
static void load_mat_sel(loader *L, linear_weight *w, const wsrc_tensor *t, const char *name, int n,
                         int k, dtype want, shard_sel sel)
{
    if (L->failed) return;
    if (sel.kind == SH_FULL || (sel.off == 0 && sel.len == (sel.kind == SH_ROWS ? n : k))) {
        load_mat_part(L, w, t, name, n, k, want);
        return;
    }
    const int rows = sel.kind == SH_ROWS ? sel.len : n, cols = sel.kind == SH_COLS ? sel.len : k;
    wsrc_tensor p = *t;
    p.ndim = 2, p.shape[0] = rows, p.shape[1] = cols, p.priv = NULL;
    kern_type ty = t->data ? (kern_type)t->type : kern_type_of_dtype(want);
    const kern_type_traits *tr = kern_type_get(ty);
    if (sel.kind == SH_COLS && tr->block_size > 1 && (sel.off % tr->block_size || cols % tr->block_size)) {
        fail(L, "%s: tensor-parallel slice [%d, %d) of '%s' cuts %s blocks of %d", t->origin, sel.off,
             sel.off + cols, name, tr->name, tr->block_size);
        return;
    }
    size_t rb_full = kern_type_row_bytes(ty, k), rb = kern_type_row_bytes(ty, cols);
    size_t off_b = kern_type_row_bytes(ty, sel.off), bytes = (size_t)rows * rb;
    char *buf = aligned_alloc(64, (bytes + 63) & ~(size_t)63), *full;
    if (!buf) {
        fail(L, "out of memory for the slice of weight '%s'", name);
        return;
    }
    const char *src = shard_source(L, t, name, n, rb_full, want, ty, &p, &full);
    if (!src) {
        free(buf);
        return;
    }
    if (sel.kind == SH_ROWS)
        memcpy(buf, src + (size_t)sel.off * rb_full, bytes);
    else
        for (int i = 0; i < rows; i++) memcpy(buf + (size_t)i * rb, src + (size_t)i * rb_full + off_b, rb);
    free(full);
    load_shard_buf(L, w, &p, buf, bytes, name, rows, cols, want);
    if (!L->failed)
        w->shard = (linear_shard){sel.kind == SH_ROWS ? sel.off : 0, rows, n,
                                  sel.kind == SH_COLS ? sel.off : 0, cols, k};
}

static void load_mat_as(loader *L, linear_weight *w, const char *name, int n, int k, dtype want,
                        shard_sel sel)
{
    if (L->failed) return;
    wsrc_tensor t;
    if (!find_tensor(L, name, n, k, 0, &t)) return;
    load_mat_sel(L, w, &t, name, n, k, want, sel);
}

static void load_mat(loader *L, linear_weight *w, const char *name, int n, int k, shard_sel sel)
{
    load_mat_as(L, w, name, n, k, L->m->wdt, sel);
}

/* A bias of a sharded projection: the slice of a column-parallel one; a
 * row-parallel one (its sums are all-reduced) on rank 0 only.  The whole
 * vector is read on every rank (a dummy source stays in step). */
static const float *load_vec_sel(loader *L, const char *name, int n, shard_sel sel)
{
    const float *v = load_vec(L, name, n, 0);
    if (!v || sel.kind == SH_FULL || L->m->tp.tp_n == 1) return v;
    if (sel.kind == SH_COLS) return L->m->tp.tp_rank == 0 ? v : NULL;
    memmove((float *)v, v + sel.off, sizeof(float) * (size_t)sel.len);
    return v;
}

void load_proj(loader *L, linear_weight *w, const char *pat, int il, int n, int k,
               int has_bias, shard_sel sel)
{
    char name[256];
    snprintf(name, sizeof name, pat, il);
    strcat(name, ".weight");
    load_mat(L, w, name, n, k, sel);
    if (has_bias && !L->failed) {
        snprintf(name, sizeof name, pat, il);
        strcat(name, ".bias");
        w->bias = load_vec_sel(L, name, n, sel);
    }
}

/* Projection pat.weight (n, k) of layer il keeping only the row ranges
 * [off[j], off[j] + len[j]) (ascending, disjoint), concatenated: a
 * column-parallel slice of a projection whose output is several segments
 * (Mamba2's in_proj: z | x | B | C | dt, each cut to this rank's heads or
 * groups).  The bias, when has_bias, is cut the same way.  As load_mat_sel,
 * a tensor without bytes is read whole (a dummy source stays in step). */
void load_proj_segs(loader *L, linear_weight *w, const char *pat, int il, int n, int k, int has_bias,
                    int nseg, const int *off, const int *len)
{
    int rows = 0;
    for (int j = 0; j < nseg; j++) rows += len[j];
    if (rows == n) { /* every row: the whole projection */
        load_proj(L, w, pat, il, n, k, has_bias, SH_ALL);
        return;
    }
    char name[256];
    snprintf(name, sizeof name, pat, il);
    strcat(name, ".weight");
    wsrc_tensor t;
    if (L->failed || !find_tensor(L, name, n, k, 0, &t)) return;
    const dtype want = L->m->wdt;
    const kern_type ty = t.data ? (kern_type)t.type : kern_type_of_dtype(want);
    const size_t rb = kern_type_row_bytes(ty, k), bytes = (size_t)rows * rb;
    wsrc_tensor p = t;
    p.ndim = 2, p.shape[0] = rows, p.shape[1] = k, p.priv = NULL;
    char *buf = aligned_alloc(64, (bytes + 63) & ~(size_t)63), *full;
    if (!buf) {
        fail(L, "out of memory for the slice of weight '%s'", name);
        return;
    }
    const char *src = shard_source(L, &t, name, n, rb, want, ty, &p, &full);
    if (!src) {
        free(buf);
        return;
    }
    for (int j = 0, r = 0; j < nseg; r += len[j++])
        memcpy(buf + (size_t)r * rb, src + (size_t)off[j] * rb, (size_t)len[j] * rb);
    free(full);
    load_shard_buf(L, w, &p, buf, bytes, name, rows, k, want);
    if (!L->failed) w->shard = (linear_shard){0, rows, n, 0, k, k};
    if (has_bias && !L->failed) {
        snprintf(name, sizeof name, pat, il);
        strcat(name, ".bias");
        float *v = (float *)load_vec(L, name, n, 0);
        for (int j = 0, r = 0; v && j < nseg; r += len[j++])
            memmove(v + r, v + off[j], sizeof(float) * (size_t)len[j]);
        w->bias = v;
    }
}

/* A fused projection `pat`.weight of layer il, (sum of rows[j], k), split
 * into n consecutive row blocks out[j] (rows[j], k): 2-D views of the one
 * tensor, read in order (a source without bytes makes them in that order),
 * each cut to this rank's slice sel[j] of its rows. */
void load_fused(loader *L, const char *pat, int il, int n, linear_weight *const *out,
                const int *rows, const char *const *part_names, const shard_sel *sel, int k)
{
    char name[256], pname[300];
    snprintf(name, sizeof name, pat, il);
    strcat(name, ".weight");
    int total = 0;
    for (int j = 0; j < n; j++) total += rows[j];
    wsrc_tensor t;
    if (L->failed || !find_tensor(L, name, total, k, 0, &t)) return;
    int64_t off = 0;
    for (int j = 0; j < n && !L->failed; j++) {
        wsrc_tensor v = wsrc_view2(&t, off * k, rows[j], k);
        snprintf(pname, sizeof pname, "%s (%s)", name, part_names[j]);
        load_mat_sel(L, out[j], &v, pname, rows[j], k, L->m->wdt, sel[j]); /* this rank's slice */
        off += rows[j];
    }
}

/* GraniteMoE: the packed expert tensors of layer il, input_linear (E,
 * 2*Ie, H) -- rows [0, Ie) gate, [Ie, 2*Ie) up -- and output_linear (E, H,
 * Ie), into ts[0], ts[1].  1 found and well-formed, else 0 (noted). */
static int find_packed_experts(loader *L, int il, wsrc_tensor *ts)
{
    model_weights *m = L->m;
    const model_config *c = &m->cfg;
    const model_tensor_names *nm = m->arch->names;
    int H = c->hidden_size, Ie = c->moe_inter, E = c->n_expert;
    char nin[256], nout[256];
    snprintf(nin, sizeof nin, nm->expert_in, il);
    snprintf(nout, sizeof nout, nm->expert_out, il);
    const int64_t want[2][3] = {{E, 2 * (int64_t)Ie, H}, {E, H, Ie}};
    int fi = wsrc_find(L->src, nin, 3, want[0], &ts[0]);
    int fo = wsrc_find(L->src, nout, 3, want[1], &ts[1]);
    if (!fi) note_missing(L, nin);
    if (!fo) note_missing(L, nout);
    if (!fi || !fo) return 0;
    for (int j = 0; j < 2; j++) {
        const wsrc_tensor *t = &ts[j];
        const char *file = t->origin;
        if (t->type < 0) {
            fail(L, "%s: tensor '%s' has type %s, which sglc cannot load", file, t->name,
                 t->type_name);
            return 0;
        }
        if (t->ndim != 3 || t->shape[0] != want[j][0] || t->shape[1] != want[j][1] ||
            t->shape[2] != want[j][2]) {
            fail(L, "%s: tensor '%s' must have shape [%lld, %lld, %lld] from config.json", file,
                 t->name, (long long)want[j][0], (long long)want[j][1], (long long)want[j][2]);
            return 0;
        }
    }
    return 1;
}

/* Expert e of MoE layer il: gate, up, down, this rank's slice of its
 * width (TP, or the EP group's moe_tp ranks); from 2-D views of the
 * packed tensors ts (GraniteMoE) or from the expert's own tensors (ts
 * NULL). */
static void load_one_expert(loader *L, model_layer *l, int il, int e, const wsrc_tensor *ts)
{
    model_weights *m = L->m;
    const model_config *c = &m->cfg;
    const model_tensor_names *nm = m->arch->names;
    int H = c->hidden_size, Ie = c->moe_inter;
    const int i0 = model_ep_inter0(m), in = m->tp.moe_inter; /* this rank's expert columns */
    shard_sel col = sh_rows(i0, in), row = sh_cols(i0, in);
    char name[300];
    if (ts) {
        int64_t mat = (int64_t)Ie * H; /* elements of one Ie x H (or H x Ie) matrix */
        wsrc_tensor v = wsrc_view2(&ts[0], (int64_t)e * 2 * mat, Ie, H);
        snprintf(name, sizeof name, "%s[%d] (gate)", ts[0].name, e);
        load_mat_sel(L, &l->egate[e], &v, name, Ie, H, m->wdt, col);
        v = wsrc_view2(&ts[0], ((int64_t)e * 2 + 1) * mat, Ie, H);
        snprintf(name, sizeof name, "%s[%d] (up)", ts[0].name, e);
        load_mat_sel(L, &l->eup[e], &v, name, Ie, H, m->wdt, col);
        wsrc_tensor d = wsrc_view2(&ts[1], (int64_t)e * mat, H, Ie);
        snprintf(name, sizeof name, "%s[%d]", ts[1].name, e);
        load_mat_sel(L, &l->edown[e], &d, name, H, Ie, m->wdt, row);
        return;
    }
    struct { const char *pat; linear_weight *w; int n, k; shard_sel sel; } p[3] = {
        {nm->expert_gate, l->egate, Ie, H, col},
        {nm->expert_up, l->eup, Ie, H, col},
        {nm->expert_down, l->edown, H, Ie, row},
    };
    for (int j = 0; j < 3 && !L->failed; j++) {
        snprintf(name, sizeof name, p[j].pat, il, e);
        strcat(name, ".weight");
        load_mat(L, &p[j].w[e], name, p[j].n, p[j].k, p[j].sel);
    }
}

/* The experts of layer il this rank holds (expert parallelism: the
 * others are skipped, or, from a dummy source that makes every tensor in
 * order, made and dropped so later values match one process). */
static void load_experts(loader *L, model_layer *l, int il, const wsrc_tensor *ts)
{
    model_weights *m = L->m;
    const int dummy = !strcmp(m->src.ops->kind, "dummy weights");
    for (int e = 0; e < m->cfg.n_expert && !L->failed; e++) {
        int held = model_ep_holds(m, il, e);
        if (!held && !dummy) continue;
        size_t before = m->weight_bytes;
        load_one_expert(L, l, il, e, ts);
        if (!held) {
            linear_free(&l->egate[e]), linear_free(&l->eup[e]), linear_free(&l->edown[e]);
            memset(&l->egate[e], 0, sizeof l->egate[e]);
            memset(&l->eup[e], 0, sizeof l->eup[e]);
            memset(&l->edown[e], 0, sizeof l->edown[e]);
            m->weight_bytes = before;
        }
    }
}

int model_load_expert(model_weights *m, int il, int e, char *err, size_t errlen)
{
    loader L = {.m = m, .src = &m->src, .err = err, .errlen = errlen};
    model_layer *l = &m->layers[il];
    wsrc_tensor ts[2];
    if (m->arch->names->expert_in && !find_packed_experts(&L, il, ts)) {
        if (!L.failed) errmsg_set(err, errlen, "missing tensor(s): %s", L.missing);
        return -1;
    }
    load_one_expert(&L, l, il, e, m->arch->names->expert_in ? ts : NULL);
    if (!L.failed && L.n_missing) errmsg_set(err, errlen, "missing tensor(s): %s", L.missing);
    return L.failed || L.n_missing ? -1 : 0;
}

/* The parts of MoE layer il beside the routed experts: the shared expert
 * (read every step, so counted as a dense weight), Qwen2-MoE's
 * shared_expert_gate (1, H; f32 like the router) and DeepSeek V3's router
 * correction bias (noaux_tc). */
static void load_moe_shared(loader *L, model_layer *l, int il)
{
    model_weights *m = L->m;
    const model_config *c = &m->cfg;
    const model_tensor_names *nm = m->arch->names;
    int H = c->hidden_size, Is = c->shared_inter;
    if (Is > 0 && nm->shared_gate) {
        /* tensor parallelism: sharded like the dense MLP (gate/up by output
         * rows, down by input columns); its partial output joins the MoE
         * block's all-reduce.  The sigmoid gate below is replicated. */
        const int s0 = m->tp.tp_rank * m->tp.shared_inter, sn = m->tp.shared_inter;
        l->has_shared = 1;
        load_proj(L, &l->wsgate, nm->shared_gate, il, Is, H, 0, sh_rows(s0, sn));
        load_proj(L, &l->wsup, nm->shared_up, il, Is, H, 0, sh_rows(s0, sn));
        load_proj(L, &l->wsdown, nm->shared_down, il, H, Is, 0, sh_cols(s0, sn));
        if (m->arch->shared_sigmoid && nm->shared_sigmoid) {
            char name[256];
            snprintf(name, sizeof name, nm->shared_sigmoid, il);
            l->has_ssig = 1;
            L->no_quant = 1;
            load_mat_as(L, &l->wssig, name, 1, H, DTYPE_F32, SH_ALL);
            L->no_quant = 0;
        }
    }
    /* the correction bias stays f32 (V3 checkpoints store it so; it only
     * orders near-equal sigmoid scores, where bf16 rounding would decide) */
    if (c->moe_topk_method == MOE_TOPK_GROUP_TOP2 && nm->router_bias) {
        L->keep_f32 = 1;
        l->router_bias = load_layer_vec(L, nm->router_bias, il, c->n_expert, 0);
        L->keep_f32 = 0;
    }
}

/* Multi-head latent attention weights of layer il (mla.c runs them):
 * q_proj, or q_a_proj + q_a_layernorm + q_b_proj; kv_a_proj_with_mqa,
 * kv_a_layernorm; kv_b_proj read as f32 and split per head (its k_nope
 * rows transposed for the absorbed query, its v rows); o_proj. */
void load_mla(loader *L, model_layer *l, int il)
{
    model_weights *m = L->m;
    const model_config *c = &m->cfg;
    const model_tensor_names *nm = m->arch->names;
    int H = c->hidden_size, nh = c->n_head, qr = c->q_lora_rank, kvr = c->kv_lora_rank;
    int nope = c->qk_nope_dim, rope = c->qk_rope_dim, vd = c->v_head_dim;
    /* tensor parallelism: this rank's heads [h0, h0 + hn) -- q / q_b rows,
     * kv_b's per-head blocks, o's input columns; q_a, kv_a and their norms
     * replicated (every rank keeps the whole latent cache) */
    const int h0 = m->tp.head0, hn = m->tp.n_head;
    if (qr) {
        load_proj(L, &l->wq_a, nm->q_a, il, qr, H, 0, SH_ALL);
        l->q_a_norm = load_layer_vec(L, nm->q_a_norm, il, qr, 0);
        load_proj(L, &l->wq_b, nm->q_b, il, nh * (nope + rope), qr, 0, sh_rows(h0 * (nope + rope), hn * (nope + rope)));
    } else {
        load_proj(L, &l->wq, nm->q, il, nh * (nope + rope), H, 0, sh_rows(h0 * (nope + rope), hn * (nope + rope)));
    }
    load_proj(L, &l->wkv_a, nm->kv_a, il, kvr + rope, H, 0, SH_ALL);
    l->kv_a_norm = load_layer_vec(L, nm->kv_a_norm, il, kvr, 0);
    load_proj(L, &l->wo, nm->o, il, H, nh * vd, 0, sh_cols(h0 * vd, hn * vd));
    if (L->failed) return;
    char name[256];
    snprintf(name, sizeof name, nm->kv_b, il);
    strcat(name, ".weight");
    wsrc_tensor t;
    if (!find_tensor(L, name, (int64_t)nh * (nope + vd), kvr, 0, &t)) return;
    size_t n = (size_t)nh * (nope + vd) * kvr;
    float *buf = malloc(n * sizeof(float));
    if (!buf || wsrc_read(L->src, &t, buf, DTYPE_F32)) {
        free(buf);
        fail(L, "cannot read weight '%s'", name);
        return;
    }
    if (m->prec != MODEL_PREC_F32)
        for (size_t i = 0; i < n; i++) buf[i] = dtype_round(buf[i], prec_dtype(m->prec));
    if (mla_split_kv_b(l, c, hn, buf + (size_t)h0 * (nope + vd) * kvr, m->wdt, &m->weight_bytes))
        fail(L, "out of memory for '%s'", name);
    free(buf);
}

/* Load the router and the E experts of MoE layer il. */
void load_moe(loader *L, model_layer *l, int il)
{
    model_weights *m = L->m;
    const model_config *c = &m->cfg;
    const model_tensor_names *nm = m->arch->names;
    int H = c->hidden_size, E = c->n_expert;
    char name[256];
    l->moe = 1;
    /* The router is stored as f32 (its values still rounded to --dtype):
     * the kernels then compute its logits in f32 from f32 activations, so
     * top-k choices near a tie do not flip on bf16 rounding of the
     * activations.  It is small (E x H). */
    snprintf(name, sizeof name, nm->router, il);
    L->no_quant = 1;
    load_mat_as(L, &l->wrouter, name, E, H, DTYPE_F32, SH_ALL); /* replicated */
    L->no_quant = 0;
    l->egate = calloc((size_t)E, sizeof(linear_weight));
    l->eup = calloc((size_t)E, sizeof(linear_weight));
    l->edown = calloc((size_t)E, sizeof(linear_weight));
    if (!l->egate || !l->eup || !l->edown) {
        fail(L, "out of memory");
        return;
    }
    size_t before = m->weight_bytes;
    wsrc_tensor ts[2];
    if (!nm->expert_in) load_experts(L, l, il, NULL);
    else if (find_packed_experts(L, il, ts)) load_experts(L, l, il, ts);
    if (!L->failed) {
        m->all_expert_bytes += m->weight_bytes - before;
        for (int e = 0; e < E && !m->expert_bytes; e++) /* one expert this rank holds */
            m->expert_bytes =
                linear_bytes(&l->egate[e]) + linear_bytes(&l->eup[e]) + linear_bytes(&l->edown[e]);
    }
    load_moe_shared(L, l, il);
}

const float *load_layer_vec(loader *L, const char *pat, int il, int n, int optional)
{
    if (!pat) return NULL;
    char name[256];
    snprintf(name, sizeof name, pat, il);
    return load_vec(L, name, n, optional);
}

/* lm_head tied to an embedding table without bytes (dummy): built from
 * its rows, borrowed when the kernels keep row-major. */
static void lm_head_from_rows(loader *L, const wsrc_tensor *te)
{
    model_weights *m = L->m;
    /* this rank's vocabulary rows (all of them in one process) */
    int V = m->tp.vocab_n, v0 = m->tp.vocab0, H = m->cfg.hidden_size;
    size_t rb = kern_type_row_bytes(kern_type_of_dtype(m->wdt), H);
    void *buf = aligned_alloc(64, ((size_t)V * rb + 63) & ~(size_t)63);
    float *row = malloc(sizeof(float) * (size_t)H);
    if (!buf || !row) {
        free(buf), free(row);
        fail(L, "out of memory for dummy embeddings");
        return;
    }
    for (int r = 0; r < V; r++) {
        L->src->ops->read_row(L->src->self, te, v0 + r, row);
        if (te->type != (int)prec_dtype(m->prec))
            for (int i = 0; i < H; i++) row[i] = dtype_round(row[i], prec_dtype(m->prec));
        dtype_from_f32((char *)buf + (size_t)r * rb, m->wdt, row, (size_t)H);
    }
    free(row);
    if (linear_init(&m->lm_head, buf, m->wdt, V, H, m->wdt, 1)) {
        free(buf);
        fail(L, "cannot prepare lm_head");
        return;
    }
    m->lm_head.shard = (linear_shard){v0, V, m->cfg.vocab_size, 0, H, H};
    m->weight_bytes += linear_bytes(&m->lm_head);
    if (m->lm_head.mat.owned) {
        free(buf);
    } else if (add_block(m, buf)) {
        free(buf);
        fail(L, "out of memory");
    }
}

/* Embedding table + lm_head, honoring both tied conventions.  A table
 * without bytes (dummy) is never stored: the decoder reads its rows
 * through the source. */
void load_embeddings(loader *L)
{
    model_weights *m = L->m;
    const model_config *c = &m->cfg;
    const model_tensor_names *nm = m->arch->names;
    int V = c->vocab_size, H = c->hidden_size;
    const int64_t shape[2] = {V, H};
    wsrc_tensor te;
    int x_exact = 1; /* logits from f32 activations (no AMX rounding) */
    shard_sel lm_sel = sh_rows(m->tp.vocab0, m->tp.vocab_n); /* vocabulary-parallel LM head */
    if (c->tie_word_embeddings && c->n_labels == 0) {
        wsrc_tensor t;
        if (!wsrc_find(L->src, nm->embed, 2, shape, &t) &&
            !wsrc_find(L->src, nm->lm_head, 2, shape, &t)) {
            note_missing(L, nm->embed);
            return;
        }
        if (!find_tensor(L, t.name, V, H, 0, &te)) return;
        if (te.data) {
            load_mat(L, &m->lm_head, te.name, V, H, lm_sel);
        } else {
            if (L->src->ops->bind_rows) L->src->ops->bind_rows(L->src->self, &te);
            lm_head_from_rows(L, &te);
        }
    } else {
        int have = find_tensor(L, nm->embed, V, H, 0, &te);
        /* rows without bytes are bound before lm_head is read: a dummy
         * source fixes their seed here */
        if (have && !te.data && L->src->ops->bind_rows) L->src->ops->bind_rows(L->src->self, &te);
        /* as before the weight-source split: an untied dummy lm_head kept
         * the kernels' default activation rounding */
        if (have && !te.data) x_exact = 0;
        if (c->n_labels > 0) { /* classifier: the score head instead of lm_head */
            L->no_quant = 1;
            load_mat_as(L, &m->score, "score.weight", c->n_labels, H, DTYPE_F32, SH_ALL);
            L->no_quant = 0;
        } else {
            load_mat(L, &m->lm_head, nm->lm_head, V, H, lm_sel);
        }
        if (!have) return;
    }
    if (L->failed) return;
    m->embed_t = te;
    m->lm_head.mat.x_exact = x_exact;
    if (!te.data) {
        m->embed = NULL;
        return;
    }
    /* embedding rows are read from the source bytes; keep them mapped */
    if ((uintptr_t)te.data % borrow_align(te.type)) {
        void *cpy = aligned_alloc(64, (te.nbytes + 63) & ~(size_t)63);
        if (!cpy || add_block(m, cpy)) {
            free(cpy);
            fail(L, "out of memory");
            return;
        }
        memcpy(cpy, te.data, te.nbytes);
        m->embed = cpy;
    } else {
        m->embed = te.data;
        /* Only keep the pages resident when lm_head shares them; otherwise
         * they are dropped after load and fault back in per token seen. */
        if (m->lm_head.mat.data == te.data) wsrc_keep(L->src, &te);
    }
    if (m->embed != m->lm_head.mat.data) m->weight_bytes += te.nbytes;
}
