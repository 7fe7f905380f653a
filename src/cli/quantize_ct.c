/* quantize_ct — a Hugging Face folder to a compressed-tensors folder
 * (see quantize_ct.h).
 *
 * DESIGN: the layout and arithmetic are those of compressed-tensors
 * (vllm-project/compressed-tensors, the library llm-compressor saves
 * with), restated here:
 *   - which tensors: every 2-D floating "X.weight" of a Linear module.
 *     Not quantized: embeddings (a name part containing "embed", wte,
 *     wpe), lm_head, MoE routers (mlp.gate, block_sparse_moe.gate,
 *     shared_expert_gate, router): kept in the source dtype; lm_head and
 *     the routers are named in "ignore" ("lm_head", "re:.*<tail>$" for
 *     the routers' layer-relative names) since vLLM treats them as
 *     Linear layers.  1-D tensors (norms, biases) and every other tensor
 *     are copied byte for byte.
 *   - scales: symmetric, s = amax / ((qmax - qmin) / 2) = amax / 127.5
 *     (int8) or amax / 7.5 (int4), computed in f32 then rounded to the
 *     weight's dtype (compressed-tensors gives the scale the weight's
 *     dtype: bf16 model -> bf16 scales, f32 -> f32); a zero scale becomes
 *     that dtype's machine epsilon (as calculate_qparams does);
 *   - codes: round-half-even(clamp(x / s, qmin, qmax)), x / s in f32 with
 *     the stored (rounded) scale; qmin/qmax = -128/127 or -8/7;
 *   - W8A8 ("int-quantized"): X.weight I8 (out, in), X.weight_scale
 *     (out, 1) per output channel; activations dynamic per token;
 *   - W4A16 ("pack-quantized"): X.weight_packed I32 (out, ceil(in/8)),
 *     eight codes per word, code j of a word at bits 4j..4j+3 as c + 8
 *     (pack_to_int32's order and offset); X.weight_scale (out, in/g);
 *     X.weight_shape I64 [out, in].  A layer whose `in` is not a multiple
 *     of g cannot be quantized per group by compressed-tensors (it
 *     raises); here it stays unquantized in the source dtype and its
 *     module name goes in "ignore".  g = -1: per channel (strategy
 *     "channel", scale (out, 1)).
 * The source's f32 compute differs from llm-compressor's on a bf16 model
 * only where torch divides x / s in bf16 (one more rounding there).
 *
 * Streaming: the source is mmapped (safetensors.c); the output files are
 * laid out first (shards of at most max_shard_bytes, tensors kept in name
 * order so a module stays in one shard) and filled row by row with
 * pwrite; memory is one f32 row, its codes and one tensor's scales.
 * config.json is the source text with "quantization_config" appended;
 * every other regular file of the folder (tokenizer, generation config,
 * chat template, README) is copied, weights in other formats are not. */
#include "cli/quantize_ct.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "model/safetensors.h"
#include "util/dtype.h"
#include "util/fileio.h"

#define P "sglc quantize: "

quantize_ct_kind quantize_ct_kind_of(const char *type)
{
    static const struct {
        const char *name;
        quantize_ct_kind k;
    } tab[] = {
        {"w8a8", QUANTIZE_CT_W8A8},   {"w8a8int8", QUANTIZE_CT_W8A8},   {"int8w8a8", QUANTIZE_CT_W8A8},
        {"ctw8a8", QUANTIZE_CT_W8A8}, {"w4a16", QUANTIZE_CT_W4A16},     {"w4a16int4", QUANTIZE_CT_W4A16},
        {"int4w4a16", QUANTIZE_CT_W4A16}, {"ctw4a16", QUANTIZE_CT_W4A16},
    };
    char n[32];
    size_t k = 0;
    for (const char *p = type; *p && k + 1 < sizeof n; p++)
        if (*p != '-' && *p != '_' && *p != '.' && *p != ' ') n[k++] = (char)tolower((unsigned char)*p);
    n[k] = 0;
    if (strlen(type) > 24) return QUANTIZE_CT_NONE;
    for (size_t i = 0; i < sizeof tab / sizeof tab[0]; i++)
        if (!strcmp(n, tab[i].name)) return tab[i].k;
    return QUANTIZE_CT_NONE;
}

const char *quantize_ct_kind_name(quantize_ct_kind k)
{
    return k == QUANTIZE_CT_W8A8 ? "W8A8" : k == QUANTIZE_CT_W4A16 ? "W4A16" : "?";
}

/* ---- which tensors ------------------------------------------------------ */

static int ends_with(const char *s, const char *t)
{
    size_t ls = strlen(s), lt = strlen(t);
    return ls >= lt && !strcasecmp(s + ls - lt, t);
}

/* base ends with tail at a name-part boundary */
static int tail_is(const char *base, const char *tail)
{
    size_t lb = strlen(base), lt = strlen(tail);
    return lb >= lt && !strcmp(base + lb - lt, tail) && (lb == lt || base[lb - lt - 1] == '.');
}

static int is_embedding(const char *base)
{
    if (tail_is(base, "wte") || tail_is(base, "wpe")) return 1;
    for (const char *p = base; *p;) {
        const char *e = strchr(p, '.');
        size_t l = e ? (size_t)(e - p) : strlen(p);
        char part[128];
        if (l < sizeof part) {
            memcpy(part, p, l);
            part[l] = 0;
            if (strstr(part, "embed")) return 1;
        }
        if (!e) break;
        p = e + 1;
    }
    return 0;
}

static int is_router(const char *base)
{
    static const char *const tails[] = {"mlp.gate", "block_sparse_moe.gate", "shared_expert_gate", "router",
                                        "router.layer"};
    for (size_t i = 0; i < sizeof tails / sizeof tails[0]; i++)
        if (tail_is(base, tails[i])) return 1;
    return 0;
}

/* the name relative to its layer ("mlp.gate" of "model.layers.3.mlp.gate"),
 * or NULL when there is no "layers.N." part */
static const char *layer_tail(const char *base)
{
    for (const char *p = strstr(base, "layers."); p; p = strstr(p + 1, "layers.")) {
        if (p != base && p[-1] != '.') continue;
        const char *q = p + 7;
        if (!isdigit((unsigned char)*q)) continue;
        while (isdigit((unsigned char)*q)) q++;
        if (*q == '.' && q[1]) return q + 1;
    }
    return NULL;
}

/* ---- the plan ----------------------------------------------------------- */

enum { ITEM_COPY = 0, ITEM_QUANT, ITEM_KEEP /* a Linear kept unquantized, named in ignore */ };

typedef struct ct_item {
    const st_tensor *src;  /* borrowed from the archive */
    int what;              /* ITEM_* */
    int shard;
    int iw, is, ish;       /* writer indices: weight (codes or the copy), scale, weight_shape */
    size_t bytes;          /* output bytes */
} ct_item;

typedef struct ct_plan {
    ct_item *it;           /* (n) owned */
    int n;
    json_t *ignore;        /* owned: the "ignore" array */
    int n_quant, n_keep, n_copy, n_router;
} ct_plan;

static int ignore_add(json_t *ign, const char *s)
{
    size_t i;
    json_t *v;
    json_array_foreach(ign, i, v) if (!strcmp(json_string_value(v), s)) return 0;
    return json_array_append_new(ign, json_string(s));
}

static int plan_build(ct_plan *p, const st_archive *a, const quantize_ct_opts *o)
{
    p->it = calloc((size_t)(a->n_tensors ? a->n_tensors : 1), sizeof *p->it);
    p->ignore = json_array();
    if (!p->it || !p->ignore || ignore_add(p->ignore, "lm_head")) return -1;
    for (int i = 0; i < a->n_tensors; i++) {
        const st_tensor *s = &a->tensors[i];
        ct_item *t = &p->it[p->n++];
        t->src = s;
        t->what = ITEM_COPY;
        size_t ln = strlen(s->name);
        if (!strcmp(s->dtype_str, "I8") || !strcmp(s->dtype_str, "F8_E4M3") || !strcmp(s->dtype_str, "F8_E5M2") ||
            ends_with(s->name, ".weight_scale") || ends_with(s->name, ".weight_packed") ||
            ends_with(s->name, ".qweight") || ends_with(s->name, ".weight_scale_inv")) {
            fprintf(stderr, P "tensor '%s' (%s) is already quantized: quantize an unquantized (f32 / f16 / bf16) "
                              "checkpoint\n", s->name, s->dtype_str);
            return -1;
        }
        char base[256];
        int lin = s->ndim == 2 && s->dt >= 0 && ln > 7 && ln - 7 < sizeof base && !strcmp(s->name + ln - 7, ".weight");
        if (lin) {
            memcpy(base, s->name, ln - 7);
            base[ln - 7] = 0;
            if (is_embedding(base) || tail_is(base, "lm_head")) lin = 0;
            else if (is_router(base)) {
                const char *lt = layer_tail(base);
                char pat[300];
                snprintf(pat, sizeof pat, lt ? "re:.*%s$" : "%s", lt ? lt : base);
                if (ignore_add(p->ignore, pat)) return -1;
                p->n_router++;
                lin = 0;
            }
        }
        if (!lin) {
            p->n_copy++;
            continue;
        }
        int64_t in = s->shape[1];
        if (o->kind == QUANTIZE_CT_W4A16 && o->group_size > 0 && in % o->group_size) {
            fprintf(stderr, P "'%s': %lld inputs are not whole groups of %d: kept %s (named in ignore)\n", s->name,
                    (long long)in, o->group_size, s->dtype_str);
            if (ignore_add(p->ignore, base)) return -1;
            t->what = ITEM_KEEP;
            p->n_keep++;
            continue;
        }
        t->what = ITEM_QUANT;
        p->n_quant++;
    }
    if (!p->n_quant) {
        fprintf(stderr, P "no Linear weight to quantize in the checkpoint\n");
        return -1;
    }
    return 0;
}

static void plan_free(ct_plan *p)
{
    free(p->it);
    json_decref(p->ignore);
}

/* groups per row for W4A16 (per channel: 1) */
static int64_t n_groups(const quantize_ct_opts *o, int64_t in)
{
    return o->kind == QUANTIZE_CT_W4A16 && o->group_size > 0 ? in / o->group_size : 1;
}

static size_t item_bytes(const ct_item *t, const quantize_ct_opts *o)
{
    const st_tensor *s = t->src;
    if (t->what != ITEM_QUANT) return s->nbytes;
    int64_t out = s->shape[0], in = s->shape[1];
    size_t es = dtype_size((dtype)s->dt);
    size_t sc = (size_t)(out * n_groups(o, in)) * es;
    if (o->kind == QUANTIZE_CT_W8A8) return (size_t)(out * in) + sc;
    return (size_t)(out * ((in + 7) / 8)) * 4 + sc + 16;
}

static const char *st_dtype_of(dtype d) { return d == DTYPE_F32 ? "F32" : d == DTYPE_F16 ? "F16" : "BF16"; }

/* declare the item's output tensors in writer w */
static int item_declare(ct_item *t, st_writer *w, const quantize_ct_opts *o)
{
    const st_tensor *s = t->src;
    char nm[300];
    t->is = t->ish = -1;
    if (t->what != ITEM_QUANT) return (t->iw = st_writer_add(w, s->name, s->dtype_str, s->ndim, s->shape)) < 0;
    size_t ln = strlen(s->name) - 7; /* without ".weight" */
    int64_t out = s->shape[0], in = s->shape[1];
    if (o->kind == QUANTIZE_CT_W8A8) {
        t->iw = st_writer_add(w, s->name, "I8", 2, s->shape);
    } else {
        int64_t sh[2] = {out, (in + 7) / 8}, two = 2;
        snprintf(nm, sizeof nm, "%.*s.weight_packed", (int)ln, s->name);
        t->iw = st_writer_add(w, nm, "I32", 2, sh);
        snprintf(nm, sizeof nm, "%.*s.weight_shape", (int)ln, s->name);
        t->ish = st_writer_add(w, nm, "I64", 1, &two);
    }
    int64_t ss[2] = {out, n_groups(o, in)};
    snprintf(nm, sizeof nm, "%.*s.weight_scale", (int)ln, s->name);
    t->is = st_writer_add(w, nm, st_dtype_of((dtype)s->dt), 2, ss);
    return t->iw < 0 || t->is < 0 || (o->kind == QUANTIZE_CT_W4A16 && t->ish < 0);
}

/* ---- the arithmetic ------------------------------------------------------ */

/* torch.finfo(dtype).eps: the scale that replaces a zero one */
static float scale_eps(dtype d)
{
    return d == DTYPE_BF16 ? 0x1p-7f : d == DTYPE_F16 ? 0x1p-10f : 0x1p-23f;
}

/* The stored scale of a group with largest magnitude amax: amax / half in
 * f32, rounded to d; zero -> eps(d). */
static float ct_scale(float amax, float half, dtype d)
{
    float s = dtype_round(amax / half, d);
    return s == 0.0f ? scale_eps(d) : s;
}

static int ct_code(float x, float s, float lo, float hi)
{
    float v = x / s;
    v = v < lo ? lo : v > hi ? hi : v;
    return (int)rintf(v);
}

/* One tensor: quantize every row and write codes and scales. */
static int item_quantize(const ct_item *t, st_writer *w, const quantize_ct_opts *o, float *row, void *codes,
                         void *scales)
{
    const st_tensor *s = t->src;
    dtype dt = (dtype)s->dt;
    size_t es = dtype_size(dt);
    int64_t out = s->shape[0], in = s->shape[1], ng = n_groups(o, in), g = in / ng;
    int w8 = o->kind == QUANTIZE_CT_W8A8;
    float half = w8 ? 127.5f : 7.5f, lo = w8 ? -128.0f : -8.0f, hi = w8 ? 127.0f : 7.0f;
    int64_t words = (in + 7) / 8;
    size_t rowb = w8 ? (size_t)in : (size_t)words * 4;
    for (int64_t r = 0; r < out; r++) {
        dtype_to_f32(row, (const char *)s->data + (size_t)(r * in) * es, dt, (size_t)in);
        if (!w8) memset(codes, 0, rowb);
        for (int64_t k = 0; k < ng; k++) {
            const float *x = row + k * g;
            float amax = 0.0f;
            int nan = 0;
            for (int64_t i = 0; i < g; i++) {
                float a = fabsf(x[i]);
                nan |= a != a;
                if (a > amax) amax = a;
            }
            if (nan || !isfinite(amax)) {
                fprintf(stderr, P "'%s' row %lld has a non-finite weight\n", s->name, (long long)r);
                return -1;
            }
            float sc = ct_scale(amax, half, dt);
            dtype_from_f32((char *)scales + (size_t)(r * ng + k) * es, dt, &sc, 1);
            if (w8) {
                int8_t *q = (int8_t *)codes + k * g;
                for (int64_t i = 0; i < g; i++) q[i] = (int8_t)ct_code(x[i], sc, lo, hi);
            } else {
                uint32_t *q = codes;
                for (int64_t i = 0; i < g; i++) {
                    int64_t c = k * g + i;
                    q[c / 8] |= (uint32_t)(ct_code(x[i], sc, lo, hi) + 8) << (4 * (c % 8));
                }
            }
        }
        if (st_writer_pwrite(w, t->iw, (size_t)r * rowb, codes, rowb)) return -1;
    }
    if (st_writer_pwrite(w, t->is, 0, scales, (size_t)(out * ng) * es)) return -1;
    if (!w8) {
        int64_t shp[2] = {out, in};
        if (st_writer_pwrite(w, t->ish, 0, shp, sizeof shp)) return -1;
    }
    return 0;
}

/* ---- config.json ----------------------------------------------------- */

static json_t *quant_config(const quantize_ct_opts *o, json_t *ignore)
{
    int w8 = o->kind == QUANTIZE_CT_W8A8;
    int per_group = !w8 && o->group_size > 0;
    json_t *wts = json_pack("{s:n,s:n,s:b,s:o,s:i,s:s,s:{},s:s,s:b,s:s}", "actorder", "block_structure",
                            "dynamic", 0, "group_size", per_group ? json_integer(o->group_size) : json_null(),
                            "num_bits", w8 ? 8 : 4, "observer", "minmax", "observer_kwargs", "strategy",
                            per_group ? "group" : "channel", "symmetric", 1, "type", "int");
    json_t *act = w8 ? json_pack("{s:n,s:n,s:b,s:n,s:i,s:n,s:{},s:s,s:b,s:s}", "actorder", "block_structure",
                                 "dynamic", 1, "group_size", "num_bits", 8, "observer", "observer_kwargs",
                                 "strategy", "token", "symmetric", 1, "type", "int")
                     : json_null();
    if (!wts || !act) {
        json_decref(wts);
        json_decref(act);
        return NULL;
    }
    return json_pack("{s:{s:{s:o,s:n,s:[s],s:o}},s:s,s:n,s:O,s:n,s:s,s:s}", "config_groups", "group_0",
                     "input_activations", act, "output_activations", "targets", "Linear", "weights", wts, "format",
                     w8 ? "int-quantized" : "pack-quantized", "global_compression_ratio", "ignore", ignore,
                     "kv_cache_scheme", "quant_method", "compressed-tensors", "quantization_status", "compressed");
}

/* The source text with "quantization_config" added before its closing
 * brace (the source's keys and formatting stay as they were). */
static int write_config(const char *src_path, const char *dst_path, json_t *qc)
{
    size_t len = 0;
    char *txt = fileio_read(src_path, 64u << 20, &len);
    json_t *root = txt ? json_loadb(txt, len, 0, NULL) : NULL;
    char *qs = json_dumps(qc, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    int rc = -1;
    FILE *f = NULL;
    if (!txt || !json_is_object(root) || !qs) goto out;
    size_t end = len;
    while (end > 0 && txt[end - 1] != '}') end--;
    if (!end) goto out;
    end--; /* the closing brace */
    while (end > 0 && isspace((unsigned char)txt[end - 1])) end--;
    if (!(f = fopen(dst_path, "w"))) goto out;
    fwrite(txt, 1, end, f);
    fputs(json_object_size(root) ? ",\n  \"quantization_config\": " : "\n  \"quantization_config\": ", f);
    for (const char *p = qs; *p; p++) {
        fputc(*p, f);
        if (*p == '\n') fputs("  ", f);
    }
    fputs("\n}\n", f);
    rc = ferror(f) ? -1 : 0;
out:
    if (f && fclose(f)) rc = -1;
    free(txt);
    free(qs);
    json_decref(root);
    return rc;
}

/* ---- files ---------------------------------------------------------------- */

typedef struct made {
    char **path;  /* (n) owned: files created in the output folder */
    int n, cap;
} made;

static const char *made_add(made *m, const char *dir, const char *name)
{
    if (m->n == m->cap) {
        int nc = m->cap ? m->cap * 2 : 16;
        char **g = realloc(m->path, sizeof *g * (size_t)nc);
        if (!g) return NULL;
        m->path = g;
        m->cap = nc;
    }
    size_t l = strlen(dir) + strlen(name) + 2;
    char *s = malloc(l);
    if (!s) return NULL;
    snprintf(s, l, "%s/%s", dir, name);
    return m->path[m->n++] = s;
}


/* files of the source folder that are not copied: the weights (any format), the config */
static int not_copied(const char *n)
{
    static const char *const ext[] = {".safetensors", ".bin", ".pt", ".pth", ".gguf", ".h5", ".msgpack",
                                      ".ckpt", ".onnx", ".safetensors.index.json", ".bin.index.json"};
    if (n[0] == '.' || !strcmp(n, "config.json") || !strcmp(n, "quantize_config.json")) return 1;
    for (size_t i = 0; i < sizeof ext / sizeof ext[0]; i++)
        if (ends_with(n, ext[i])) return 1;
    return 0;
}

static int copy_file(const char *from, const char *to)
{
    int in = open(from, O_RDONLY | O_CLOEXEC), outfd = -1, rc = -1;
    char buf[1 << 16];
    if (in < 0 || (outfd = open(to, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)) < 0) goto out;
    for (;;) {
        ssize_t k = read(in, buf, sizeof buf);
        if (k < 0 && errno == EINTR) continue;
        if (k < 0) goto out;
        if (k == 0) break;
        for (ssize_t o = 0; o < k;) {
            ssize_t m = write(outfd, buf + o, (size_t)(k - o));
            if (m < 0 && errno == EINTR) continue;
            if (m < 0) goto out;
            o += m;
        }
    }
    rc = 0;
out:
    if (in >= 0) close(in);
    if (outfd >= 0 && close(outfd)) rc = -1;
    return rc;
}

/* ---- the command ---------------------------------------------------------- */

int quantize_ct_run(const char *dir, const char *out, const quantize_ct_opts *o)
{
    struct stat st;
    char err[1024], path[4400];
    if (stat(dir, &st)) {
        fprintf(stderr, P "cannot read model folder %s: %s\n", dir, strerror(errno));
        return 1;
    }
    if (!S_ISDIR(st.st_mode)) {
        fprintf(stderr, P "--model-path %s is not a folder (a Hugging Face folder with config.json and "
                          "safetensors)\n", dir);
        return 1;
    }
    snprintf(path, sizeof path, "%s/config.json", dir);
    size_t clen = 0;
    char *ctxt = fileio_read(path, 64u << 20, &clen);
    int rerr = ctxt ? 0 : errno;
    json_error_t jerr;
    json_t *cfg = ctxt ? json_loadb(ctxt, clen, 0, &jerr) : NULL;
    free(ctxt);
    if (!json_is_object(cfg)) {
        fprintf(stderr, P "%s: %s\n", path, rerr ? strerror(rerr) : cfg ? "not a JSON object" : jerr.text);
        json_decref(cfg);
        return 1;
    }
    int already = json_object_get(cfg, "quantization_config") != NULL;
    json_decref(cfg);
    if (already) {
        fprintf(stderr, P "%s already has a quantization_config: quantize an unquantized checkpoint\n", path);
        return 1;
    }
    int created = 0;
    if (!stat(out, &st)) {
        if (!S_ISDIR(st.st_mode)) {
            fprintf(stderr, P "--output %s exists and is not a folder (--type %s writes a Hugging Face folder)\n",
                    out, quantize_ct_kind_name(o->kind));
            return 1;
        }
        DIR *d = opendir(out);
        struct dirent *e;
        int empty = d != NULL;
        while (d && (e = readdir(d)))
            if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) empty = 0;
        if (d) closedir(d);
        if (!empty) {
            fprintf(stderr, P "--output folder %s is not empty\n", out);
            return 1;
        }
    } else if (mkdir(out, 0755)) {
        fprintf(stderr, P "cannot create --output folder %s: %s\n", out, strerror(errno));
        return 1;
    } else {
        created = 1;
    }

    st_archive a;
    memset(&a, 0, sizeof a);
    ct_plan p = {0};
    made m = {0};
    st_writer *ws = NULL;
    int n_shards = 0, rc = 1;
    float *row = NULL;
    void *codes = NULL, *scales = NULL;
    json_t *qc = NULL, *wmap = NULL;
    if (st_open(&a, dir, err, sizeof err)) {
        fprintf(stderr, P "%s\n", err);
        goto done;
    }
    if (plan_build(&p, &a, o)) goto done;

    /* shards: name order, a new one when the next module would not fit */
    size_t cur = 0, total = 0, maxrow = 1, maxsc = 1;
    for (int i = 0; i < p.n; i++) {
        ct_item *t = &p.it[i];
        t->bytes = item_bytes(t, o);
        if (o->max_shard_bytes && cur > 0 && cur + t->bytes > o->max_shard_bytes) n_shards++, cur = 0;
        t->shard = n_shards;
        cur += t->bytes;
        total += t->bytes;
        if (t->what == ITEM_QUANT) {
            const st_tensor *s = t->src;
            size_t in = (size_t)s->shape[1];
            if (in + 8 > maxrow) maxrow = in + 8;
            size_t sb = (size_t)(s->shape[0] * n_groups(o, s->shape[1])) * 4;
            if (sb > maxsc) maxsc = sb;
        }
    }
    n_shards++;
    ws = calloc((size_t)n_shards, sizeof *ws);
    row = malloc(sizeof(float) * maxrow);
    codes = malloc(maxrow + 64);
    scales = malloc(maxsc);
    if (!ws || !row || !codes || !scales) {
        fprintf(stderr, P "out of memory\n");
        goto done;
    }
    for (int k = 0; k < n_shards; k++) st_writer_init(&ws[k]);
    for (int i = 0; i < p.n; i++)
        if (item_declare(&p.it[i], &ws[p.it[i].shard], o)) {
            fprintf(stderr, P "cannot lay out '%s'\n", p.it[i].src->name);
            goto done;
        }
    wmap = json_object();
    for (int k = 0; k < n_shards && wmap; k++) {
        char fname[96];
        if (n_shards == 1) snprintf(fname, sizeof fname, "model.safetensors");
        else snprintf(fname, sizeof fname, "model-%05d-of-%05d.safetensors", k + 1, n_shards);
        const char *fp = made_add(&m, out, fname);
        if (!fp || st_writer_begin(&ws[k], fp, err, sizeof err)) {
            fprintf(stderr, P "%s\n", fp ? err : "out of memory");
            goto done;
        }
        for (int j = 0; j < ws[k].n; j++) json_object_set_new(wmap, ws[k].t[j].name, json_string(fname));
    }
    for (int i = 0; i < p.n; i++) {
        ct_item *t = &p.it[i];
        st_writer *w = &ws[t->shard];
        errno = 0;
        int bad = t->what == ITEM_QUANT ? item_quantize(t, w, o, row, codes, scales)
                                        : st_writer_pwrite(w, t->iw, 0, t->src->data, t->src->nbytes);
        if (bad) {
            fprintf(stderr, P "writing '%s' failed%s%s\n", t->src->name, errno ? ": " : "",
                    errno ? strerror(errno) : "");
            goto done;
        }
    }
    for (int k = 0; k < n_shards; k++)
        if (st_writer_finish(&ws[k], err, sizeof err)) {
            fprintf(stderr, P "%s: %s\n", m.path[k], err);
            goto done;
        }
    if (n_shards > 1) {
        size_t data = 0;
        for (int k = 0; k < n_shards; k++) data += st_writer_data_bytes(&ws[k]);
        json_t *idx = json_pack("{s:{s:I},s:O}", "metadata", "total_size", (json_int_t)data, "weight_map", wmap);
        const char *ip = made_add(&m, out, "model.safetensors.index.json");
        if (!idx || !ip || json_dump_file(idx, ip, JSON_INDENT(2) | JSON_PRESERVE_ORDER)) {
            fprintf(stderr, P "cannot write the shard index\n");
            json_decref(idx);
            goto done;
        }
        json_decref(idx);
    }
    qc = quant_config(o, p.ignore);
    const char *cp = made_add(&m, out, "config.json");
    if (!qc || !cp || write_config(path, cp, qc)) {
        fprintf(stderr, P "cannot write %s/config.json\n", out);
        goto done;
    }
    /* the tokenizer and the other small files */
    DIR *d = opendir(dir);
    struct dirent *e;
    int n_files = 0;
    while (d && (e = readdir(d))) {
        char from[4400];
        snprintf(from, sizeof from, "%s/%s", dir, e->d_name);
        if (not_copied(e->d_name) || stat(from, &st) || !S_ISREG(st.st_mode)) continue;
        const char *to = made_add(&m, out, e->d_name);
        if (!to || copy_file(from, to)) {
            fprintf(stderr, P "cannot copy %s: %s\n", from, strerror(errno));
            closedir(d);
            goto done;
        }
        n_files++;
    }
    if (d) closedir(d);
    fprintf(stderr, P "wrote %s (compressed-tensors %s, %s): %d Linear weights quantized, %d kept %s (in ignore), "
                      "%d other tensors copied, %.1f MiB in %d safetensors file(s), %d other file(s) copied\n",
            out, quantize_ct_kind_name(o->kind),
            o->kind == QUANTIZE_CT_W8A8 ? "int8 per channel, int8 per-token activations"
            : o->group_size > 0         ? "int4 per group, weight-only"
                                        : "int4 per channel, weight-only",
            p.n_quant, p.n_keep + p.n_router, "unquantized", p.n_copy - p.n_router, total / 1048576.0, n_shards,
            n_files);
    rc = 0;
done:
    if (rc) {
        for (int i = 0; i < m.n; i++) unlink(m.path[i]);
        if (created) rmdir(out);
    }
    for (int i = 0; i < m.n; i++) free(m.path[i]);
    free(m.path);
    for (int k = 0; ws && k < n_shards; k++) st_writer_free(&ws[k]);
    free(ws);
    free(row), free(codes), free(scales);
    json_decref(qc);
    json_decref(wmap);
    plan_free(&p);
    st_close(&a);
    return rc;
}
