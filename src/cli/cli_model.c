/* cli_model — see cli_model.h. */
#include "cli/cli_model.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hub/hub.h"
#include "kernels/kernels.h"
#include "util/cpu.h"
#include "util/log.h"
#include "util/rng.h"

void cli_model_opts_init(cli_model_opts *o)
{
    memset(o, 0, sizeof *o);
    o->load.dtype = -1;
    o->load.load_format = MODEL_LOAD_AUTO;
    o->kv_dtype = -1;
}

static char g_model_dir[4096];

const char *cli_model_dir(void) { return g_model_dir; }

model *cli_model_load(const cli_model_opts *o)
{
    if (kernels_init(NULL)) {
        fprintf(stderr, "error: kernel selection failed (SGLC_KERNELS?)\n");
        return NULL;
    }
    log_info("kernels: %s", kernels_desc());
    /* the LM head is f32 math already (f32 hidden states, bf16 weights
     * widened exactly, f32 accumulation: what SGLang's fp32 lm_head does);
     * only the AVX-512 debug switch SGLC_BF16_DOT=1 rounds activations */
    const char *dot = getenv("SGLC_BF16_DOT");
    if (o->fp32_lm_head && kernels_isa() == KERN_ISA_AVX512 && dot && *dot && strcmp(dot, "0") != 0) {
        fprintf(stderr, "error: --enable-fp32-lm-head: SGLC_BF16_DOT=%s rounds the activations of every bf16 "
                        "matmul, the LM head included, to bf16; unset it\n", dot);
        return NULL;
    }
    kern_set_pack_threads(o->pack_threads > 0 ? o->pack_threads : 1);
    char err[1024];
    model_load_opts lo = o->load;
    char dir[4096];
    if (lo.model_path) {
        hub_opts ho = {0};
        ho.revision = o->revision;
        ho.cache_dir = o->download_dir;
        ho.skip_weights = lo.load_format == MODEL_LOAD_DUMMY;
        if (hub_resolve(lo.model_path, &ho, dir, sizeof dir, err, sizeof err) != 0) {
            fprintf(stderr, "error: %s\n", err);
            return NULL;
        }
        lo.model_path = dir;
        snprintf(g_model_dir, sizeof g_model_dir, "%s", dir);
    }
    model *m = model_load(&lo, err, sizeof err);
    if (!m) fprintf(stderr, "error: %s\n", err);
    return m;
}

int cli_tokenizer_load(const char *dir, bool required, tok_tokenizer **out)
{
    *out = NULL;
    char tjson[4200], terr[512];
    snprintf(tjson, sizeof tjson, "%s/tokenizer.json", dir);
    if (!required && access(tjson, R_OK) != 0) return 0;
    tok_load_opts to = {0};
    *out = tok_load_dir(dir, &to, terr, sizeof terr);
    if (!*out) {
        fprintf(stderr, "error: tokenizer: %s\n", terr);
        return -1;
    }
    return 0;
}

dtype cli_kv_dtype(const cli_model_opts *o, const model *m)
{
    if (o->kv_dtype >= 0) return (dtype)o->kv_dtype;
    return model_weight_dtype(m) == DTYPE_BF16 ? DTYPE_BF16 : DTYPE_F32;
}

int cli_threads(const cli_model_opts *o)
{
    if (o->threads > 0) return o->threads;
    int n = cpu_get()->n_cores;
    return n > 0 ? n : 1;
}

/* ---- sampler ------------------------------------------------------------- */

int cli_sampler_init(cli_sampler *s, int vocab, float temperature, float top_p, int top_k,
                     float min_p, uint64_t seed)
{
    memset(s, 0, sizeof *s);
    s->temperature = temperature;
    s->top_p = top_p;
    s->top_k = top_k;
    s->min_p = min_p;
    s->rng = seed;
    s->vocab = vocab;
    s->probs = malloc(sizeof(float) * (size_t)vocab);
    s->idx = malloc(sizeof(int32_t) * (size_t)vocab);
    if (!s->probs || !s->idx) {
        cli_sampler_free(s);
        return -1;
    }
    return 0;
}

void cli_sampler_free(cli_sampler *s)
{
    free(s->probs);
    free(s->idx);
    s->probs = NULL;
    s->idx = NULL;
}

static const float *g_sort_probs;
static int cmp_prob_desc(const void *a, const void *b)
{
    float x = g_sort_probs[*(const int32_t *)a], y = g_sort_probs[*(const int32_t *)b];
    if (x != y) return x > y ? -1 : 1;
    return *(const int32_t *)a - *(const int32_t *)b;
}

int cli_sample(cli_sampler *s, const float *logits)
{
    int V = s->vocab;
    if (s->temperature <= 1e-6f || s->top_k == 1) return kern_argmax(logits, V);
    float *p = s->probs;
    float inv_t = 1.0f / s->temperature;
    for (int i = 0; i < V; i++) p[i] = logits[i] * inv_t;
    kern_softmax(p, V);
    double u = (double)(rng_next(&s->rng) >> 11) * (1.0 / 9007199254740992.0);
    int filtered = (s->top_k > 0 && s->top_k < V) || s->top_p < 1.0f || s->min_p > 0.0f;
    if (!filtered) {
        double acc = 0.0;
        for (int i = 0; i < V; i++) {
            acc += p[i];
            if (u < acc) return i;
        }
        return kern_argmax(p, V);
    }
    /* sort by probability, then keep top-k, top-p prefix, min-p */
    for (int i = 0; i < V; i++) s->idx[i] = i;
    g_sort_probs = p;
    qsort(s->idx, (size_t)V, sizeof(int32_t), cmp_prob_desc);
    int keep = V;
    if (s->top_k > 0 && s->top_k < keep) keep = s->top_k;
    if (s->top_p < 1.0f) {
        double cum = 0.0;
        for (int i = 0; i < keep; i++) {
            /* SGLang masks a token when the mass before it already exceeds top_p */
            if (cum > s->top_p) {
                keep = i;
                break;
            }
            cum += p[s->idx[i]];
        }
    }
    if (s->min_p > 0.0f) {
        float thr = s->min_p * p[s->idx[0]];
        int k2 = 0;
        while (k2 < keep && p[s->idx[k2]] >= thr) k2++;
        keep = k2;
    }
    if (keep < 1) keep = 1;
    double total = 0.0;
    for (int i = 0; i < keep; i++) total += p[s->idx[i]];
    double target = u * total, acc = 0.0;
    for (int i = 0; i < keep; i++) {
        acc += p[s->idx[i]];
        if (target < acc) return s->idx[i];
    }
    return s->idx[keep - 1];
}
