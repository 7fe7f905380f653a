/* wsource_gguf — GGUF files as a weight source (see wsource.h, gguf.h,
 * gguf_model.h for the name table).
 *
 * DESIGN: the file is mmapped once (gguf_open); find() maps the Hugging
 * Face name the loader asks for to the GGUF tensor and describes it in
 * HF terms: shape = ne reversed ((n, k) for ne [k, n]); an expert of a
 * 3-D blk.N.ffn_*_exps tensor ((E, r, c)) is a 2-D slice of it, starting
 * E * r * c elements in (kept in `tag`, so reads find it).
 *
 * Tensors hand the loader their bytes, borrowed in place: float types
 * (F32, F16, BF16) and the block-quantized types the kernels run
 * (matmul_ok: the loader keeps them quantized, linear_init_kt).  A block
 * type with a dequantizer but no kernel is reported as F32 without bytes
 * and read (row_to_f32, row by row) into the loader's buffers; the
 * embedding table is then read a row at a time on lookup.  A type without
 * a dequantizer, or one sglc has no id for, is reported with its GGUF name
 * and the loader refuses it naming the tensor.  SGLC_GGUF_DEQUANT=1 (a
 * debug switch, read at open) sends every block type the dequantizing way:
 * the tests compare that bit for bit with an independent decoder.
 *
 * llama.cpp's converter permutes the rows of attn_q / attn_k (and their
 * biases) of general.architecture "llama" per head, from Hugging Face's
 * rotate-half order to interleaved pairs: gguf row 2i = hf row i, gguf row
 * 2i+1 = hf row i + d/2.  The loader wants the HF order, so those tensors
 * are copied once with whole rows moved back (a row is whole blocks, so
 * this is exact for quantized rows too; the tensor's mapped pages are
 * dropped then) and the copies are what find() returns; they live until
 * close, or until drop() of the whole tensor (the loader repacked it into
 * its own copy: freed, made again by a later find() or read()).  qwen2 / qwen3 / qwen3moe files are not
 * permuted.
 *
 * Gemma 2 / 3 files (llama.cpp's converter, and sglc quantize, store every
 * *norm.weight as the HF weight + 1, the (1 + w) of Gemma's RMSNorm): those
 * 1-D tensors are read once into an owned F32 copy with 1 subtracted, so
 * the loader sees HF's centred weights (exact: |w| < 1 makes (1+w)-1 and
 * 1+((1+w)-1) exact in f32).
 *
 * DeepSeek V2 / V3 (deepseek2): llama.cpp's current converter splits
 * kv_b_proj (per head h, rows [k_nope (nope) | v (v)] of kv_lora_rank
 * values) into blk.N.attn_k_b.weight, ne [nope, kvr, n_head] (k_b[h][c][j]
 * = kv_b[h (nope + v) + j][c], the k part transposed), and
 * blk.N.attn_v_b.weight, ne [kvr, v, n_head] (v_b[h][i] = kv_b row
 * h (nope + v) + nope + i); older files hold blk.N.attn_kv_b.weight as HF
 * does.  The loader asks for kv_b_proj (and reads it as f32, once, to
 * split it its own way, mla.c): with attn_kv_b absent find() answers with
 * a tensor of HF's shape that has no bytes, and read() builds it from the
 * two halves (any type with a dequantizer, row by row).  Nothing is kept.
 */
#include <stdlib.h>
#include <string.h>

#include "model/gguf_model.h"
#include "model/wsource.h"
#include "util/errmsg.h"

typedef struct gg_rec {
    int ready;
    int kt;                 /* kern_type, or -1 */
    const uint8_t *bytes;   /* the tensor's bytes in HF row order: the mapping or `owned` */
    void *owned;            /* permuted copy, or NULL */
    char type_name[200];     /* the GGUF type; for one sglc cannot use, with the GGUF tensor name */
} gg_rec;

/* kv_b_proj of one deepseek2 layer rebuilt from attn_k_b / attn_v_b */
typedef struct gg_kvb {
    const gguf_tensor *kb, *vb; /* borrowed from the file; ne [nope, kvr, nh] / [kvr, v, nh] */
    int kt_k, kt_v;             /* their kern types */
    int64_t nh, nope, v, kvr;
    char why[256];              /* why the layer's halves cannot make kv_b_proj (the loader names it) */
} gg_kvb;

typedef struct gg_src {
    gguf_file g;
    gg_rec *rec;            /* (g.n_tensors), by file index */
    gg_kvb *kvb;            /* (n_kvb) deepseek2 split kv_b per layer (kb NULL: not asked yet), or NULL */
    int n_kvb;
    int permute;            /* llama: q/k rows interleaved */
    char arch[32];          /* general.architecture */
    int n_head, n_kv_head;
    int dequant;            /* SGLC_GGUF_DEQUANT=1: block types through row_to_f32 (tests) */
} gg_src;

static const wsrc_ops gguf_ops;

const gguf_file *wsrc_gguf_file(const wsrc *s)
{
    return s && s->ops == &gguf_ops ? &((const gg_src *)s->self)->g : NULL;
}

/* rows of t moved from GGUF's interleaved order back to HF's, per head of d rows */
static void *unpermute(const gguf_tensor *t, int heads)
{
    int64_t n = t->ndim == 1 ? t->ne[0] : t->ne[1];
    size_t rb = t->ndim == 1 ? gguf_type_bytes(t->ggml_type, 1) : gguf_type_bytes(t->ggml_type, t->ne[0]);
    if (heads <= 0 || n % heads || (n / heads) % 2 || !rb || t->ndim > 2) return NULL;
    int64_t d = n / heads, half = d / 2;
    uint8_t *out = aligned_alloc(64, (t->nbytes + 63) & ~(size_t)63);
    if (!out) return NULL;
    const uint8_t *in = t->data;
    for (int64_t h = 0; h < heads; h++)
        for (int64_t j = 0; j < d; j++) {
            int64_t src = j < half ? 2 * j : 2 * (j - half) + 1;
            memcpy(out + (size_t)(h * d + j) * rb, in + (size_t)(h * d + src) * rb, rb);
        }
    return out;
}

static int ends_with(const char *s, const char *suf)
{
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && !strcmp(s + a - b, suf);
}

/* Fill rec for tensor index i; 0, or -1 (out of memory / bad head split). */
static int rec_prepare(gg_src *s, int64_t i)
{
    gg_rec *r = &s->rec[i];
    if (r->ready) return 0;
    const gguf_tensor *t = &s->g.tensors[i];
    r->kt = kern_type_of_ggml(t->ggml_type);
    const char *gn = gguf_type_name(t->ggml_type);
    if (r->kt >= 0 && !kern_type_get((kern_type)r->kt)->row_to_f32) {
        snprintf(r->type_name, sizeof r->type_name, "%s (GGUF tensor %.120s; not supported yet)", gn, t->name);
        r->kt = -1;
    } else if (r->kt < 0) {
        snprintf(r->type_name, sizeof r->type_name, "%s (GGUF tensor %.120s)", gn, t->name);
    } else {
        snprintf(r->type_name, sizeof r->type_name, "%s", gn);
    }
    r->bytes = t->data;
    if (gguf_norm_plus_one(s->arch, t->name) && t->ndim == 1 && r->kt >= 0 &&
        r->kt < KERN_TYPE_FLOAT_COUNT) {
        float *f = aligned_alloc(64, ((size_t)t->ne[0] * sizeof(float) + 63) & ~(size_t)63);
        if (!f || wsrc_convert(f, DTYPE_F32, t->data, r->kt, (size_t)t->ne[0])) {
            free(f);
            return -1;
        }
        for (int64_t j = 0; j < t->ne[0]; j++) f[j] -= 1.0f;
        r->owned = f;
        r->bytes = r->owned;
        r->kt = KERN_TYPE_F32;
        snprintf(r->type_name, sizeof r->type_name, "F32");
    }
    if (s->permute && r->kt >= 0 &&
        (ends_with(t->name, ".attn_q.weight") || ends_with(t->name, ".attn_q.bias") ||
         ends_with(t->name, ".attn_k.weight") || ends_with(t->name, ".attn_k.bias"))) {
        int heads = strstr(t->name, ".attn_q.") ? s->n_head : s->n_kv_head;
        r->owned = unpermute(t, heads);
        if (!r->owned) return -1;
        r->bytes = r->owned;
        gguf_drop_range(&s->g, t->data, t->nbytes); /* the copy is what is read from now on */
    }
    r->ready = 1;
    return 0;
}


/* kv_b_proj of layer N answered from blk.N.attn_k_b / attn_v_b (see the
 * DESIGN comment): 1 with *out (no bytes; read() builds it), 0 when the
 * layer has neither half; a half alone or mismatched shapes are reported
 * as a type sglc cannot use, so the loader names the tensor. */
static int find_split_kvb(gg_src *s, const char *gn, wsrc_tensor *out)
{
    int il = -1;
    if (sscanf(gn, "blk.%d.", &il) != 1 || il < 0 || il >= s->n_kvb) return 0;
    char kn[96], vn[96];
    snprintf(kn, sizeof kn, "blk.%d.attn_k_b.weight", il);
    snprintf(vn, sizeof vn, "blk.%d.attn_v_b.weight", il);
    const gguf_tensor *kb = gguf_find_tensor(&s->g, kn), *vb = gguf_find_tensor(&s->g, vn);
    if (!kb && !vb) return 0;
    gg_kvb *k = &s->kvb[il];
    memset(out, 0, sizeof *out);
    out->origin = s->g.path;
    out->type = -1;
    out->ndim = 2;
    if (!kb || !vb) {
        out->name = kb ? kb->name : vb->name;
        snprintf(k->why, sizeof k->why, "(%s is missing: %s alone cannot make kv_b_proj)", kb ? vn : kn,
                 kb ? kn : vn);
        out->type_name = k->why;
        return 1;
    }
    out->name = kb->name;
    int ktk = kern_type_of_ggml(kb->ggml_type), ktv = kern_type_of_ggml(vb->ggml_type);
    if (kb->ndim != 3 || vb->ndim != 3 || kb->ne[2] != vb->ne[2] || kb->ne[1] != vb->ne[0] ||
        kb->ne[0] <= 0 || vb->ne[1] <= 0) {
        out->type_name = "(attn_k_b ne [nope, kvr, heads] and attn_v_b ne [kvr, v, heads] do not fit together)";
        return 1;
    }
    if (ktk < 0 || ktv < 0 || !kern_type_get((kern_type)ktk)->row_to_f32 ||
        !kern_type_get((kern_type)ktv)->row_to_f32) {
        out->name = ktk < 0 || !kern_type_get((kern_type)ktk)->row_to_f32 ? kb->name : vb->name;
        out->type_name = gguf_type_name(out->name == kb->name ? kb->ggml_type : vb->ggml_type);
        return 1;
    }
    k->kb = kb, k->vb = vb, k->kt_k = ktk, k->kt_v = ktv;
    k->nh = kb->ne[2], k->nope = kb->ne[0], k->v = vb->ne[1], k->kvr = kb->ne[1];
    out->type = KERN_TYPE_F32;
    out->type_name = "F32 (rebuilt from attn_k_b + attn_v_b)";
    out->shape[0] = k->nh * (k->nope + k->v);
    out->shape[1] = k->kvr;
    out->priv = k;
    out->tag = UINT64_MAX; /* marks a rebuilt kv_b for read() */
    return 1;
}

/* The rebuilt kv_b_proj, (nh (nope + v), kvr) row-major f32, into dst. */
static int read_split_kvb(const gg_kvb *k, float *dst)
{
    int64_t R = k->nope + k->v;
    size_t kb_row = gguf_type_bytes(k->kb->ggml_type, k->nope), vb_row = gguf_type_bytes(k->vb->ggml_type, k->kvr);
    float *row = malloc(sizeof(float) * (size_t)(k->nope > k->kvr ? k->nope : k->kvr));
    if (!row) return -1;
    const uint8_t *kd = k->kb->data, *vd = k->vb->data;
    for (int64_t h = 0; h < k->nh; h++) {
        for (int64_t c = 0; c < k->kvr; c++) { /* k_b row (h, c): column c of the k part */
            kern_type_get((kern_type)k->kt_k)->row_to_f32(row, kd + (size_t)(h * k->kvr + c) * kb_row, k->nope);
            for (int64_t j = 0; j < k->nope; j++) dst[(size_t)(h * R + j) * k->kvr + c] = row[j];
        }
        for (int64_t i = 0; i < k->v; i++) /* v_b row (h, i) = kv_b row h R + nope + i */
            kern_type_get((kern_type)k->kt_v)->row_to_f32(dst + (size_t)(h * R + k->nope + i) * k->kvr,
                                                          vd + (size_t)(h * k->v + i) * vb_row, k->kvr);
    }
    free(row);
    return 0;
}

static int g_find(void *self, const char *name, int ndim, const int64_t *expect, wsrc_tensor *out)
{
    gg_src *s = self;
    char gn[256];
    int expert;
    /* an HF name, or a GGUF name (the names find() hands out are GGUF's,
     * and the loader may ask for one again) */
    if (!gguf_name_from_hf_arch(s->arch, name, gn, sizeof gn, &expert)) snprintf(gn, sizeof gn, "%s", name);
    const gguf_tensor *t = gguf_find_tensor(&s->g, gn);
    if (!t && !strcmp(s->arch, "deepseek2") && ends_with(gn, ".attn_kv_b.weight"))
        return find_split_kvb(s, gn, out);
    if (!t && expert >= 0) {
        /* older Mixtral files: one tensor per expert, blk.N.ffn_gate.E.weight */
        char alt[256];
        int il = 0;
        sscanf(gn, "blk.%d.", &il);
        const char *kind = strstr(gn, "ffn_gate_exps") ? "gate" : strstr(gn, "ffn_up_exps") ? "up" : "down";
        snprintf(alt, sizeof alt, "blk.%d.ffn_%s.%d.weight", il, kind, expert);
        t = gguf_find_tensor(&s->g, alt);
        if (t) expert = -1;
    }
    if (!t) return 0;
    int64_t i = t - s->g.tensors;
    gg_rec *r = &s->rec[i];
    if (rec_prepare(s, i)) {
        /* reported as a type sglc cannot use: the loader names the tensor */
        out->name = t->name;
        out->type = -1;
        out->type_name = "(rows not divisible into heads, or out of memory)";
        out->ndim = t->ndim;
        out->origin = s->g.path;
        return 1;
    }
    out->name = t->name;
    out->origin = s->g.path;
    out->priv = r;
    out->type_name = r->type_name;
    out->ndim = t->ndim;
    for (int d = 0; d < t->ndim; d++) out->shape[d] = t->ne[t->ndim - 1 - d];
    int64_t off = 0;
    if (expert >= 0) {
        if (t->ndim != 3 || expert >= t->ne[2]) {
            /* no such expert: shape (E, r, c) tells the loader what is there */
            out->type = r->kt;
            return 1;
        }
        out->ndim = 2;
        out->shape[0] = t->ne[1];
        out->shape[1] = t->ne[0];
        off = (int64_t)expert * t->ne[0] * t->ne[1];
    }
    out->tag = (uint64_t)off;
    if (r->kt < 0) {
        out->type = -1;
        return 1;
    }
    int64_t numel = wsrc_numel(out);
    if (r->kt < KERN_TYPE_FLOAT_COUNT || (kern_type_get((kern_type)r->kt)->matmul_ok && !s->dequant)) {
        /* bytes in place: float types, and block types the kernels run */
        out->type = r->kt;
        out->nbytes = kern_type_row_bytes((kern_type)r->kt, numel);
        out->data = r->bytes + kern_type_row_bytes((kern_type)r->kt, off);
    } else {
        out->type = KERN_TYPE_F32; /* dequantized on read */
        out->nbytes = 0;
        out->data = NULL;
    }
    (void)ndim, (void)expect;
    return 1;
}

static int g_read(void *self, const wsrc_tensor *t, void *dst, dtype dst_dt)
{
    if (t->tag == UINT64_MAX && t->priv) { /* deepseek2 kv_b_proj rebuilt from attn_k_b / attn_v_b */
        const gg_kvb *k = t->priv;
        size_t n = (size_t)wsrc_numel(t);
        if (dst_dt == DTYPE_F32) return read_split_kvb(k, dst);
        float *tmp = malloc(sizeof(float) * n);
        int rc = !tmp || read_split_kvb(k, tmp) || wsrc_convert(dst, dst_dt, tmp, KERN_TYPE_F32, n) ? -1 : 0;
        free(tmp);
        return rc;
    }
    const gg_rec *r = t->priv;
    if (!r || r->kt < 0) return -1;
    if (!r->ready && rec_prepare(self, r - ((gg_src *)self)->rec)) return -1; /* its copy was dropped */
    const uint8_t *src = r->bytes + kern_type_row_bytes((kern_type)r->kt, (int64_t)t->tag);
    return wsrc_convert(dst, dst_dt, src, r->kt, (size_t)wsrc_numel(t));
}

static void g_read_row(void *self, const wsrc_tensor *t, int64_t row, float *dst)
{
    if (t->tag == UINT64_MAX) { /* a rebuilt kv_b is never an embedding table; rows are not read */
        memset(dst, 0, sizeof(float) * (size_t)t->shape[1]);
        return;
    }
    const gg_rec *r = t->priv;
    int64_t k = t->shape[1];
    const uint8_t *src = r->bytes + kern_type_row_bytes((kern_type)r->kt, (int64_t)t->tag + row * k);
    kern_type_get((kern_type)r->kt)->row_to_f32(dst, src, k);
}

static void g_keep(void *self, const wsrc_tensor *t)
{
    gg_src *s = self;
    if (t->tag == UINT64_MAX) return; /* a rebuilt kv_b has no bytes of its own */
    const gg_rec *r = t->priv;
    if (!r || r->owned) return;
    s->g.tensors[r - s->rec].keep = 1;
}

static void g_drop(void *self, const wsrc_tensor *t)
{
    gg_src *s = self;
    if (t->tag == UINT64_MAX || !t->data) return;
    gg_rec *r = (gg_rec *)t->priv;
    if (!r || s->g.tensors[r - s->rec].keep) return; /* borrowed */
    if (r->owned) {
        /* our row-order copy (attn_q / attn_k), all of it copied by the
         * loader (an 8-row repack): freed, made again if asked for again */
        if (t->data == r->owned && t->nbytes == s->g.tensors[r - s->rec].nbytes) {
            free(r->owned);
            r->owned = NULL;
            r->bytes = NULL;
            r->ready = 0;
        }
        return;
    }
    gguf_drop_range(&s->g, t->data, t->nbytes);
}

static void g_release_unused(void *self)
{
    gg_src *s = self;
    gguf_release_unused(&s->g);
}

static void g_close(void *self)
{
    gg_src *s = self;
    for (int64_t i = 0; s->rec && i < s->g.n_tensors; i++) free(s->rec[i].owned);
    free(s->rec);
    free(s->kvb);
    gguf_close(&s->g);
    free(s);
}

static const wsrc_ops gguf_ops = {
    .kind = "gguf",
    .find = g_find,
    .read = g_read,
    .read_row = g_read_row,
    .keep = g_keep,
    .drop = g_drop,
    .release_unused = g_release_unused,
    .close = g_close,
};

int wsrc_open_gguf(wsrc *w, const char *path, char *err, size_t errlen)
{
    gg_src *s = calloc(1, sizeof *s);
    if (!s) {
        errmsg_set(err, errlen, "out of memory");
        return -1;
    }
    if (gguf_open(&s->g, path, err, errlen)) {
        free(s);
        return -1;
    }
    s->rec = calloc((size_t)(s->g.n_tensors ? s->g.n_tensors : 1), sizeof *s->rec);
    if (!s->rec) {
        g_close(s);
        errmsg_set(err, errlen, "out of memory");
        return -1;
    }
    const char *dq = getenv("SGLC_GGUF_DEQUANT");
    s->dequant = dq && *dq && strcmp(dq, "0");
    gguf_str arch = {0};
    if (gguf_get_str(&s->g, "general.architecture", &arch, NULL, 0) > 0)
        snprintf(s->arch, sizeof s->arch, "%.*s", (int)(arch.len < 31 ? arch.len : 31), arch.s);
    else
        snprintf(s->arch, sizeof s->arch, "llama");
    if (arch.len == 5 &&
        !memcmp(arch.s, "llama", 5)) {
        int64_t nh = 0, nkv = 0;
        gguf_get_int(&s->g, "llama.attention.head_count", &nh, NULL, 0);
        if (gguf_get_int(&s->g, "llama.attention.head_count_kv", &nkv, NULL, 0) <= 0) nkv = nh;
        s->permute = 1;
        s->n_head = (int)(nh > 0 && nh < 1 << 20 ? nh : 0);
        s->n_kv_head = (int)(nkv > 0 && nkv < 1 << 20 ? nkv : 0);
    }
    if (!strcmp(s->arch, "deepseek2")) {
        int64_t nl = 0;
        gguf_get_int(&s->g, "deepseek2.block_count", &nl, NULL, 0);
        s->n_kvb = (int)(nl > 0 && nl < 1 << 16 ? nl : 0);
        if (s->n_kvb && !(s->kvb = calloc((size_t)s->n_kvb, sizeof *s->kvb))) {
            g_close(s);
            errmsg_set(err, errlen, "out of memory");
            return -1;
        }
    }
    w->ops = &gguf_ops;
    w->self = s;
    return 0;
}
