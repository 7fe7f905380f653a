/* cmd_quantize — `sglc quantize --model-path DIR --output FILE.gguf --type
 * TYPE`: a Hugging Face folder (config.json + safetensors) to one GGUF file
 * that sglc and llama.cpp both read.  --type W8A8 / W4A16 write a
 * compressed-tensors folder instead (quantize_ct.c).
 *
 * DESIGN: three passes over the checkpoint, nothing held in memory but
 * one row:
 *   1. plan: every safetensors tensor is mapped to its GGUF name
 *      (gguf_model.h, per architecture: llama, qwen2, qwen3, qwen3moe,
 *      qwen2moe, gemma2, gemma3, phi3, deepseek2); DeepSeek's kv_b_proj is
 *      cut into attn_k_b (k rows transposed per head) and attn_v_b as
 *      llama.cpp's current converter does; Gemma norms get + 1 as llama.cpp's
 *      converter stores them; Phi-3 longrope factors become
 *      rope_factors_{long,short}.weight; the experts of a layer are stacked into one 3-D
 *      blk.N.ffn_*_exps tensor; each output tensor gets a type from the
 *      preset (below);
 *   2. the header: llama.cpp's metadata keys for the architecture, the
 *      tokenizer (quantize_tok.c) and chat template, plus one key
 *      llama.cpp ignores: sglc.hf_config, config.json verbatim, so what
 *      GGUF cannot say (Mistral's window, Qwen2's use_sliding_window,
 *      dynamic NTK rope, ...) survives (--plain leaves it out);
 *   3. the data: row by row, converted to f32, rows of attn_q / attn_k
 *      of llama-family models permuted per head to GGML's interleaved
 *      rope order (out row 2i = hf row i, 2i+1 = hf row i + d/2) as
 *      llama.cpp's converter does, then stored through the type's
 *      row_from_f32.
 *
 * Presets (llama.cpp's llama_tensor_get_type, restated for the types
 * here): 1-D tensors (norms, biases), the MoE router and rope_freqs stay
 * F32.  F32 / F16 / BF16: every matrix in that type.  Otherwise matrices
 * take the preset's base type, except
 *   - output.weight (token_embd when tied): Q6_K (Q8_0 for Q8_0, and when
 *     the row length is not whole blocks of the base type);
 *   - attn_v: Q6_K on "use_more_bits" layers for Q4_K_M / Q5_K_M (layer
 *     i < n/8, i >= 7n/8, or (i - n/8) % 3 == 2); Q5_K for IQ4_XS when
 *     heads / kv heads >= 4; Q8_0 for 8-expert models;
 *   - attn_k: Q8_0 for 8-expert models; attn_output: Q5_K for 8-expert
 *     models at Q4_K_M / IQ4_XS;
 *   - ffn_down: Q6_K on use_more_bits layers for Q4_K_M / Q5_K_M; Q5_K on
 *     the first n/8 layers for IQ4_XS;
 *   - deepseek2's attn_k_b / attn_v_b have no rule (llama.cpp's category
 *     OTHER): the base type with the row fallback below;
 * and a row length that is not whole blocks of the chosen type falls back
 * (IQ4_XS -> IQ4_NL, Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0, then F16).
 */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/quantize_ct.h"
#include "cli/quantize_tok.h"
#include "kernels/kernels.h"
#include "kernels/kern_types.h"
#include "model/arch.h"
#include "model/config.h"
#include "model/gguf_model.h"
#include "model/moe.h"
#include "model/safetensors.h"
#include "util/dtype.h"
#include "util/fileio.h"

/* ggml type ids used here */
enum { T_F32 = 0, T_F16 = 1, T_Q4_0 = 2, T_Q4_1 = 3, T_Q5_0 = 6, T_Q5_1 = 7, T_Q8_0 = 8,
       T_Q4_K = 12, T_Q5_K = 13, T_Q6_K = 14, T_IQ4_NL = 20, T_IQ4_XS = 23, T_BF16 = 30 };

typedef struct preset {
    const char *name;
    int base;        /* ggml type of most matrices */
    int ftype;       /* general.file_type (llama_ftype) */
} preset;

static const preset k_presets[] = {
    {"F32", T_F32, 0},       {"F16", T_F16, 1},       {"BF16", T_BF16, 32},
    {"Q8_0", T_Q8_0, 7},     {"Q4_0", T_Q4_0, 2},     {"Q4_1", T_Q4_1, 3},
    {"Q5_0", T_Q5_0, 8},     {"Q5_1", T_Q5_1, 9},     {"Q6_K", T_Q6_K, 18},
    {"Q4_K_M", T_Q4_K, 15},  {"Q5_K_M", T_Q5_K, 17}, {"IQ4_XS", T_IQ4_XS, 30},
};

#define MAX_SRC 4096

typedef struct qt {
    char name[128];          /* GGUF name */
    int layer;               /* -1 for model-level tensors */
    int order;               /* sort key within a layer / the model */
    int type;                /* ggml type */
    int ndim;
    int64_t ne[4];
    int n_src;
    const st_tensor **src;   /* (n_src) experts in index order, or the one tensor; borrowed */
    int permute_heads;       /* > 0: llama q/k row permutation over this many heads */
    int plus_one;            /* Gemma norms: stored as the HF weight + 1 (llama.cpp's converter) */
    int kv_split;            /* deepseek2: 1 attn_k_b, 2 attn_v_b, cut from the one kv_b_proj src */
    int64_t sp_nope, sp_v;   /* kv_split: per-head k (nope) and v rows of kv_b_proj */
    float *f32;              /* rope_freqs values (owned), else NULL */
} qt;

typedef struct plan {
    qt *t;
    int n, cap;
} plan;

static qt *plan_add(plan *p)
{
    if (p->n == p->cap) {
        int nc = p->cap ? p->cap * 2 : 256;
        qt *g = realloc(p->t, sizeof *g * (size_t)nc);
        if (!g) return NULL;
        p->t = g;
        p->cap = nc;
    }
    qt *t = &p->t[p->n++];
    memset(t, 0, sizeof *t);
    return t;
}

static qt *plan_find(plan *p, const char *name)
{
    for (int i = 0; i < p->n; i++)
        if (!strcmp(p->t[i].name, name)) return &p->t[i];
    return NULL;
}

static int use_more_bits(int i, int n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

static int has(const char *name, const char *part) { return strstr(name, part) != NULL; }

static int row_fits(int type, int64_t k)
{
    int bs;
    size_t bb;
    return gguf_type_block(type, &bs, &bb) && k % bs == 0;
}

/* the preset's type for tensor t (see the DESIGN comment) */
static int choose_type(const preset *ps, const qt *t, const model_config *c, int has_output)
{
    if (t->ndim == 1 || has(t->name, "ffn_gate_inp") || !strcmp(t->name, "rope_freqs.weight"))
        return T_F32;
    int base = ps->base, ty = base;
    if (base == T_F32 || base == T_F16 || base == T_BF16) return base;
    int n_expert = c->n_expert, gqa = c->n_head / (c->n_kv_head ? c->n_kv_head : 1);
    int il = t->layer, nl = c->n_layer;
    int q4km = ps->ftype == 15, q5km = ps->ftype == 17, iq4xs = base == T_IQ4_XS;
    if (!strcmp(t->name, "output.weight") || (!has_output && !strcmp(t->name, "token_embd.weight"))) {
        if (!row_fits(base, t->ne[0])) ty = T_Q8_0;
        else if (base != T_Q8_0) ty = T_Q6_K;
    } else if (!strcmp(t->name, "token_embd.weight")) {
        ty = base;
    } else if (has(t->name, "attn_v.weight")) {
        if (iq4xs && gqa >= 4) ty = T_Q5_K;
        else if ((q4km || q5km) && use_more_bits(il, nl)) ty = T_Q6_K;
        if (n_expert == 8) ty = T_Q8_0;
    } else if (has(t->name, "attn_k.weight")) {
        if (n_expert == 8) ty = T_Q8_0;
    } else if (has(t->name, "ffn_down")) {
        if (q4km && use_more_bits(il, nl)) ty = T_Q6_K;
        else if (iq4xs && il < nl / 8) ty = T_Q5_K;
        else if (q5km && use_more_bits(il, nl)) ty = T_Q6_K;
    } else if (has(t->name, "attn_output.weight")) {
        if (n_expert == 8 && (q4km || iq4xs)) ty = T_Q5_K;
    }
    if (!row_fits(ty, t->ne[0])) {
        switch (ty) {
        case T_IQ4_XS: ty = T_IQ4_NL; break;
        case T_Q4_K: ty = T_Q5_0; break;
        case T_Q5_K: ty = T_Q5_1; break;
        case T_Q6_K: ty = T_Q8_0; break;
        default: ty = T_F16; break;
        }
        if (!row_fits(ty, t->ne[0])) ty = T_F16;
    }
    return ty;
}

static const char *gguf_arch_of(const char *hf)
{
    if (!strcmp(hf, "LlamaForCausalLM") || !strcmp(hf, "MistralForCausalLM") ||
        !strcmp(hf, "MixtralForCausalLM"))
        return "llama";
    if (!strcmp(hf, "Qwen2ForCausalLM")) return "qwen2";
    if (!strcmp(hf, "Qwen3ForCausalLM")) return "qwen3";
    if (!strcmp(hf, "Qwen3MoeForCausalLM")) return "qwen3moe";
    if (!strcmp(hf, "Gemma2ForCausalLM")) return "gemma2";
    if (!strcmp(hf, "Gemma3ForCausalLM")) return "gemma3";
    if (!strcmp(hf, "Phi3ForCausalLM")) return "phi3";
    if (!strcmp(hf, "Qwen2MoeForCausalLM")) return "qwen2moe";
    if (!strcmp(hf, "DeepseekV2ForCausalLM") || !strcmp(hf, "DeepseekV3ForCausalLM")) return "deepseek2";
    return NULL;
}

/* llama.cpp's Llama 3 per-dimension rope divisors (rope_freqs.weight) */
static float *llama3_freqs(const model_config *c)
{
    const model_rope_cfg *r = &c->rope;
    int half = c->head_dim / 2;
    float *f = malloc(sizeof(float) * (size_t)half);
    if (!f) return NULL;
    double lo_wl = r->original_max_pos / r->low_freq_factor;
    double hi_wl = r->original_max_pos / r->high_freq_factor;
    for (int i = 0; i < half; i++) {
        double freq = 1.0 / pow(r->theta, (double)(2 * i) / c->head_dim), wl = 2 * M_PI / freq;
        if (wl < hi_wl) f[i] = 1.0f;
        else if (wl > lo_wl) f[i] = (float)r->factor;
        else {
            double sm = (r->original_max_pos / wl - r->low_freq_factor) /
                        (r->high_freq_factor - r->low_freq_factor);
            f[i] = (float)(1.0 / ((1 - sm) / r->factor + sm));
        }
    }
    return f;
}

static int cmp_qt(const void *a, const void *b)
{
    const qt *x = a, *y = b;
    int lx = x->layer < 0 ? (x->order < 50 ? -1 : 1 << 30) : x->layer;
    int ly = y->layer < 0 ? (y->order < 50 ? -1 : 1 << 30) : y->layer;
    if (lx != ly) return lx < ly ? -1 : 1;
    if (x->order != y->order) return x->order < y->order ? -1 : 1;
    return strcmp(x->name, y->name);
}

/* deepseek2: kv_b_proj (n_head (nope + v), kv_lora_rank) written as llama.cpp's
 * converter does (conversion/deepseek.py DeepseekV2Model.modify_tensors):
 * blk.N.attn_k_b.weight, ne [nope, kvr, n_head] (per head the k rows
 * transposed) and blk.N.attn_v_b.weight, ne [kvr, v, n_head]. */
static int plan_kv_split(plan *p, const st_tensor *s, const model_config *c, int il)
{
    int64_t nh = c->n_head, nope = c->qk_nope_dim, v = c->v_head_dim, kvr = c->kv_lora_rank;
    if (s->ndim != 2 || s->shape[0] != nh * (nope + v) || s->shape[1] != kvr) {
        fprintf(stderr, "sglc quantize: '%s' is not (%lld, %lld) = (heads x (nope + v), kv_lora_rank)\n", s->name,
                (long long)(nh * (nope + v)), (long long)kvr);
        return -1;
    }
    for (int half = 1; half <= 2; half++) {
        qt *t = plan_add(p);
        if (!t || !(t->src = calloc(1, sizeof *t->src))) return -1;
        snprintf(t->name, sizeof t->name, "blk.%d.attn_%s_b.weight", il, half == 1 ? "k" : "v");
        t->layer = il;
        t->order = 10;
        t->ndim = 3;
        t->ne[0] = half == 1 ? nope : kvr;
        t->ne[1] = half == 1 ? kvr : v;
        t->ne[2] = nh;
        t->src[0] = s;
        t->n_src = 1;
        t->kv_split = half;
        t->sp_nope = nope;
        t->sp_v = v;
    }
    return 0;
}

/* Build the plan from the archive.  0, or -1 after printing why. */
static int make_plan(plan *p, const st_archive *a, const model_config *c, const char *garch)
{
    int llama = !strcmp(garch, "llama");
    for (int i = 0; i < a->n_tensors; i++) {
        const st_tensor *s = &a->tensors[i];
        char gn[128];
        int expert;
        if (!gguf_name_from_hf_arch(garch, s->name, gn, sizeof gn, &expert)) {
            fprintf(stderr, "sglc quantize: skipping tensor '%s' (no GGUF name)\n", s->name);
            continue;
        }
        if (s->dt < 0) {
            fprintf(stderr, "sglc quantize: tensor '%s' has dtype %s; F32, F16 and BF16 are supported\n",
                    s->name, s->dtype_str);
            return -1;
        }
        if (s->ndim < 1 || s->ndim > 2) {
            fprintf(stderr, "sglc quantize: tensor '%s' has %d dimensions\n", s->name, s->ndim);
            return -1;
        }
        int il = -1;
        sscanf(gn, "blk.%d.", &il);
        if (!strcmp(garch, "deepseek2") && has(gn, ".attn_kv_b.weight")) {
            if (plan_kv_split(p, s, c, il)) return -1;
            continue;
        }
        qt *t = plan_find(p, gn);
        if (!t) {
            if (!(t = plan_add(p))) return -1;
            snprintf(t->name, sizeof t->name, "%s", gn);
            t->layer = il;
            t->order = !strcmp(gn, "token_embd.weight") ? 0 : !strcmp(gn, "output_norm.weight") ? 60 : !strcmp(gn, "output.weight") ? 61 : 10;
            t->ndim = s->ndim;
            for (int d = 0; d < s->ndim; d++) t->ne[d] = s->shape[s->ndim - 1 - d];
            if (expert >= 0) {
                if (s->ndim != 2) {
                    fprintf(stderr, "sglc quantize: expert tensor '%s' is not 2-D\n", s->name);
                    return -1;
                }
                t->ndim = 3;
                t->ne[2] = 0;
                t->src = calloc(MAX_SRC, sizeof *t->src);
            } else {
                t->src = calloc(1, sizeof *t->src);
            }
            if (!t->src) return -1;
            t->plus_one = s->ndim == 1 && gguf_norm_plus_one(garch, gn);
            if (llama && (has(gn, ".attn_q.") || has(gn, ".attn_k.")))
                t->permute_heads = has(gn, ".attn_q.") ? c->n_head : c->n_kv_head;
        }
        if (expert >= 0) {
            if (expert >= MAX_SRC || t->ndim != 3 || s->ndim != 2 || s->shape[1] != t->ne[0] ||
                s->shape[0] != t->ne[1] || t->src[expert]) {
                fprintf(stderr, "sglc quantize: expert tensor '%s' does not stack with the others\n", s->name);
                return -1;
            }
            t->src[expert] = s;
            if (expert + 1 > t->n_src) t->n_src = expert + 1;
            t->ne[2] = t->n_src;
        } else {
            if (t->n_src) {
                fprintf(stderr, "sglc quantize: two tensors map to '%s'\n", gn);
                return -1;
            }
            t->src[0] = s;
            t->n_src = 1;
        }
    }
    for (int i = 0; i < p->n; i++)
        for (int e = 0; e < p->t[i].n_src; e++)
            if (!p->t[i].src[e]) {
                fprintf(stderr, "sglc quantize: expert %d of '%s' is missing\n", e, p->t[i].name);
                return -1;
            }
    /* tied models that store only lm_head (TinyStories): it is the embedding table */
    qt *emb = plan_find(p, "token_embd.weight"), *out = plan_find(p, "output.weight");
    if (!emb && out) {
        snprintf(out->name, sizeof out->name, "token_embd.weight");
        out->order = 0;
        emb = out;
        out = NULL;
    } else if (emb && out && c->tie_word_embeddings) {
        out->name[0] = 0; /* the tied copy is not written */
    }
    if (!emb) {
        fprintf(stderr, "sglc quantize: the checkpoint has no embedding table\n");
        return -1;
    }
    for (int lf = 0; lf < 2 && c->rope.kind == MODEL_ROPE_LONGROPE && c->rope.n_factors > 0; lf++) {
        qt *t = plan_add(p);
        if (!t) return -1;
        snprintf(t->name, sizeof t->name, lf ? "rope_factors_short.weight" : "rope_factors_long.weight");
        t->layer = -1;
        t->order = 1 + lf;
        t->ndim = 1;
        t->ne[0] = c->rope.n_factors;
        if (!(t->f32 = malloc(sizeof(float) * (size_t)c->rope.n_factors))) return -1;
        memcpy(t->f32, lf ? c->rope.short_factor : c->rope.long_factor, sizeof(float) * (size_t)c->rope.n_factors);
    }
    if (llama && c->rope.kind == MODEL_ROPE_LLAMA3) {
        qt *t = plan_add(p);
        if (!t) return -1;
        snprintf(t->name, sizeof t->name, "rope_freqs.weight");
        t->layer = -1;
        t->order = 1;
        t->ndim = 1;
        t->ne[0] = c->head_dim / 2;
        if (!(t->f32 = llama3_freqs(c))) return -1;
    }
    /* drop unnamed entries, then llama.cpp's order */
    int w = 0;
    for (int i = 0; i < p->n; i++) {
        if (p->t[i].name[0]) p->t[w++] = p->t[i];
        else free(p->t[i].src);
    }
    p->n = w;
    qsort(p->t, (size_t)p->n, sizeof *p->t, cmp_qt);
    return 0;
}

static void plan_free(plan *p)
{
    for (int i = 0; i < p->n; i++) {
        free(p->t[i].src);
        free(p->t[i].f32);
    }
    free(p->t);
}

/* deepseek2 keys as llama.cpp's converter writes them (conversion/deepseek.py
 * DeepseekV2Model.set_gguf_parameters and TextModel's MoE / rope keys).
 * The expert weights' scale is the one HF applies (V2 never scales
 * normalized weights, llama.cpp always applies the key), so a V2 config
 * with norm_topk_prob and a scale writes 1. */
static int write_meta_deepseek2(gguf_writer *w, const model_config *c, json_t *raw)
{
    int rc = 0;
    rc |= gguf_writer_u32(w, "deepseek2.leading_dense_block_count",
                          (uint32_t)(c->n_expert > 0 ? c->first_k_dense : c->n_layer));
    if (c->q_lora_rank > 0) rc |= gguf_writer_u32(w, "deepseek2.attention.q_lora_rank", (uint32_t)c->q_lora_rank);
    rc |= gguf_writer_u32(w, "deepseek2.attention.kv_lora_rank", (uint32_t)c->kv_lora_rank);
    rc |= gguf_writer_u32(w, "deepseek2.attention.key_length_mla", (uint32_t)(c->qk_nope_dim + c->qk_rope_dim));
    rc |= gguf_writer_u32(w, "deepseek2.attention.value_length_mla", (uint32_t)c->v_head_dim);
    rc |= gguf_writer_u32(w, "deepseek2.expert_feed_forward_length", (uint32_t)c->moe_inter);
    rc |= gguf_writer_u32(w, "deepseek2.expert_shared_count",
                          (uint32_t)(c->moe_inter > 0 ? c->shared_inter / c->moe_inter : 0));
    rc |= gguf_writer_f32(w, "deepseek2.expert_weights_scale", c->routed_scale);
    if (c->norm_topk_prob) rc |= gguf_writer_bool(w, "deepseek2.expert_weights_norm", 1);
    rc |= gguf_writer_u32(w, "deepseek2.expert_gating_func", c->moe_score == MOE_SCORE_SIGMOID ? 2 : 1);
    rc |= gguf_writer_u32(w, "deepseek2.expert_group_count", (uint32_t)c->n_group);
    rc |= gguf_writer_u32(w, "deepseek2.expert_group_used_count", (uint32_t)c->topk_group);
    json_t *rs = json_object_get(raw, "rope_scaling");
    json_t *ma = json_is_object(rs) ? json_object_get(rs, "mscale_all_dim") : NULL;
    if (c->rope.kind == MODEL_ROPE_YARN) {
        /* TAG_DEEPSEEK2_YARN_LOG_MUL_FIX: 0.1 x mscale_all_dim */
        if (json_is_number(ma))
            rc |= gguf_writer_f32(w, "deepseek2.rope.scaling.yarn_log_multiplier", (float)(0.1 * json_number_value(ma)));
        if (c->rope.beta_fast > 0) rc |= gguf_writer_f32(w, "deepseek2.rope.scaling.yarn_beta_fast", (float)c->rope.beta_fast);
        if (c->rope.beta_slow > 0) rc |= gguf_writer_f32(w, "deepseek2.rope.scaling.yarn_beta_slow", (float)c->rope.beta_slow);
    }
    return rc;
}

/* metadata from config.json (raw, for rope_scaling) and the parsed config */
static int write_meta(gguf_writer *w, const model_config *c, json_t *raw, const char *garch,
                      const preset *ps, const char *dir, int plain)
{
    char k[160];
    int rc = 0;
#define KEY(s) (snprintf(k, sizeof k, "%s.%s", garch, s), k)
    const char *base = strrchr(dir, '/');
    base = base && base[1] ? base + 1 : dir;
    rc |= gguf_writer_str(w, "general.architecture", garch);
    rc |= gguf_writer_str(w, "general.name", base);
    rc |= gguf_writer_u32(w, "general.file_type", (uint32_t)ps->ftype);
    rc |= gguf_writer_u32(w, "general.quantization_version", 2);
    if (!plain) {
        char *js = json_dumps(raw, JSON_COMPACT);
        rc |= !js || gguf_writer_str(w, "sglc.hf_config", js);
        free(js);
    }
    rc |= gguf_writer_u32(w, KEY("context_length"), (uint32_t)c->max_position_embeddings);
    rc |= gguf_writer_u32(w, KEY("embedding_length"), (uint32_t)c->hidden_size);
    rc |= gguf_writer_u32(w, KEY("block_count"), (uint32_t)c->n_layer);
    rc |= gguf_writer_u32(w, KEY("feed_forward_length"), (uint32_t)c->intermediate_size);
    rc |= gguf_writer_u32(w, KEY("attention.head_count"), (uint32_t)c->n_head);
    rc |= gguf_writer_u32(w, KEY("attention.head_count_kv"), (uint32_t)c->n_kv_head);
    /* deepseek2: MLA as llama.cpp runs it, MQA over the latent: keys of
     * kv_lora_rank + rope values, values of kv_lora_rank (the per-head
     * sizes go in the *_mla keys below) */
    int ds = !strcmp(garch, "deepseek2");
    rc |= gguf_writer_u32(w, KEY("attention.key_length"),
                          (uint32_t)(ds ? c->kv_lora_rank + c->qk_rope_dim : c->head_dim));
    rc |= gguf_writer_u32(w, KEY("attention.value_length"), (uint32_t)(ds ? c->kv_lora_rank : c->head_dim));
    rc |= gguf_writer_f32(w, KEY("attention.layer_norm_rms_epsilon"), c->rms_norm_eps);
    rc |= gguf_writer_f32(w, KEY("rope.freq_base"), (float)c->rope.theta);
    rc |= gguf_writer_u32(w, KEY("rope.dimension_count"),
                          (uint32_t)(c->head_dim * c->rope.partial_rotary_factor));
    rc |= gguf_writer_u32(w, KEY("vocab_size"), (uint32_t)c->vocab_size);
    if (c->sliding_window > 0 && c->arch->window == MODEL_WINDOW_ALL)
        rc |= gguf_writer_u32(w, KEY("attention.sliding_window"), (uint32_t)c->sliding_window);
    if (c->n_expert > 0) {
        rc |= gguf_writer_u32(w, KEY("expert_count"), (uint32_t)c->n_expert);
        rc |= gguf_writer_u32(w, KEY("expert_used_count"), (uint32_t)c->n_expert_used);
        if (!strcmp(garch, "qwen3moe") || !strcmp(garch, "qwen2moe")) {
            rc |= gguf_writer_u32(w, KEY("expert_feed_forward_length"), (uint32_t)c->moe_inter);
            rc |= gguf_writer_bool(w, KEY("expert_weights_norm"), c->norm_topk_prob);
        }
        if (!strcmp(garch, "qwen2moe") && c->shared_inter > 0)
            rc |= gguf_writer_u32(w, KEY("expert_shared_feed_forward_length"), (uint32_t)c->shared_inter);
    }
    /* Gemma: llama.cpp's keys (the local rope base of Gemma 3's sliding
     * layers is 10000 in llama.cpp unless rope.freq_base_swa says otherwise) */
    if (!strcmp(garch, "gemma2") || !strcmp(garch, "gemma3")) {
        if (c->sliding_window > 0)
            rc |= gguf_writer_u32(w, KEY("attention.sliding_window"), (uint32_t)c->sliding_window);
        if (c->attn_softcap > 0 && !strcmp(garch, "gemma2"))
            rc |= gguf_writer_f32(w, KEY("attn_logit_softcapping"), c->attn_softcap);
        if (c->final_softcap > 0)
            rc |= gguf_writer_f32(w, KEY("final_logit_softcapping"), c->final_softcap);
        /* llama.cpp infers Gemma's query scale from the model size; the
         * key (llama.cpp's attention.scale, which its Gemma loader does not
         * read) keeps query_pre_attn_scalar for readers that do */
        if (c->attn_mult > 0)
            rc |= gguf_writer_f32(w, KEY("attention.scale"), c->attn_mult);
        if (!strcmp(garch, "gemma3") && c->rope_local_theta > 0)
            rc |= gguf_writer_f32(w, KEY("rope.freq_base_swa"), (float)c->rope_local_theta);
    }
    /* Phi-3 longrope: the factors go in rope_factors_{long,short}.weight
     * tensors (make_plan); the keys say the original context and the
     * cos/sin scale */
    if (c->rope.kind == MODEL_ROPE_LONGROPE) {
        if (c->rope.original_max_pos > 0)
            rc |= gguf_writer_u32(w, KEY("rope.scaling.original_context_length"), (uint32_t)c->rope.original_max_pos);
        /* llama.cpp's converter always writes it: the config's, else
         * sqrt(1 + ln s / ln orig) for s = context / original > 1, else 1 */
        double af = c->rope.attention_factor, sc = c->rope.original_max_pos > 0 ?
            (double)c->max_position_embeddings / c->rope.original_max_pos : 1.0;
        if (af < 0) af = sc > 1.0 ? sqrt(1.0 + log(sc) / log((double)c->rope.original_max_pos)) : 1.0;
        rc |= gguf_writer_f32(w, KEY("rope.scaling.attn_factor"), (float)af);
    }
    if (ds) rc |= write_meta_deepseek2(w, c, raw);
    if (c->rope.kind == MODEL_ROPE_LINEAR || c->rope.kind == MODEL_ROPE_YARN) {
        rc |= gguf_writer_str(w, KEY("rope.scaling.type"), c->rope.kind == MODEL_ROPE_LINEAR ? "linear" : "yarn");
        rc |= gguf_writer_f32(w, KEY("rope.scaling.factor"), (float)c->rope.factor);
    }
    /* yarn's original context; for llama3 it tells a reader which
     * original context rope_freqs was made for */
    if ((c->rope.kind == MODEL_ROPE_YARN || c->rope.kind == MODEL_ROPE_LLAMA3) && c->rope.original_max_pos > 0)
        rc |= gguf_writer_u32(w, KEY("rope.scaling.original_context_length"), (uint32_t)c->rope.original_max_pos);
#undef KEY
    return rc ? -1 : 0;
}

/* attn_k_b / attn_v_b rows of a deepseek2 kv_b_proj (plan_kv_split) */
static int write_kv_split(gguf_writer *w, FILE *f, const qt *t, float *row, void *qrow)
{
    const kern_type_traits *tr = kern_type_get((kern_type)kern_type_of_ggml(t->type));
    const st_tensor *s = t->src[0];
    size_t eb = dtype_size((dtype)s->dt);
    int64_t kvr = s->shape[1], nope = t->sp_nope, R = t->sp_nope + t->sp_v, nh = t->ne[2];
    size_t rb = gguf_type_bytes(t->type, t->ne[0]);
    const char *base = s->data;
    if (t->kv_split == 2) { /* v rows of each head as they are */
        for (int64_t h = 0; h < nh; h++)
            for (int64_t i = 0; i < t->sp_v; i++) {
                dtype_to_f32(row, base + (size_t)((h * R + nope + i) * kvr) * eb, (dtype)s->dt, (size_t)kvr);
                tr->row_from_f32(qrow, row, kvr);
                if (gguf_writer_write_data(w, f, qrow, rb)) return -1;
            }
        return 0;
    }
    float *hk = malloc(sizeof(float) * (size_t)(nope * kvr)); /* (nope, kvr): one head's k rows */
    if (!hk) return -1;
    int rc = 0;
    for (int64_t h = 0; h < nh && !rc; h++) {
        dtype_to_f32(hk, base + (size_t)(h * R * kvr) * eb, (dtype)s->dt, (size_t)(nope * kvr));
        for (int64_t c = 0; c < kvr && !rc; c++) { /* row c of k_b[h] = column c of the k rows */
            for (int64_t j = 0; j < nope; j++) row[j] = hk[j * kvr + c];
            tr->row_from_f32(qrow, row, nope);
            rc = gguf_writer_write_data(w, f, qrow, rb);
        }
    }
    free(hk);
    return rc ? -1 : 0;
}

static int write_tensor(gguf_writer *w, FILE *f, const qt *t, float *row, void *qrow)
{
    const kern_type_traits *tr = kern_type_get((kern_type)kern_type_of_ggml(t->type));
    int64_t k = t->ne[0];
    size_t rb = gguf_type_bytes(t->type, k);
    if (t->f32) return gguf_writer_write_data(w, f, t->f32, sizeof(float) * (size_t)k);
    if (t->kv_split) return write_kv_split(w, f, t, row, qrow);
    for (int e = 0; e < t->n_src; e++) {
        const st_tensor *s = t->src[e];
        int64_t n = s->ndim == 1 ? 1 : s->shape[0];
        size_t eb = dtype_size((dtype)s->dt);
        int heads = t->permute_heads;
        int64_t rows = s->ndim == 1 ? s->shape[0] : n;          /* permuted units */
        int64_t d = heads > 0 ? rows / heads : 0;
        if (heads > 0 && (rows % heads || d % 2)) {
            fprintf(stderr, "sglc quantize: '%s': %lld rows do not split into %d heads\n", t->name,
                    (long long)rows, heads);
            return -1;
        }
        if (s->ndim == 1) {
            /* a vector (maybe a permuted bias): element by element */
            for (int64_t j = 0; j < k; j++) {
                int64_t src = j;
                if (heads > 0) {
                    int64_t h = j / d, jj = j % d;
                    src = h * d + (jj % 2 ? jj / 2 + d / 2 : jj / 2);
                }
                dtype_to_f32(row + j, (const char *)s->data + (size_t)src * eb, (dtype)s->dt, 1);
                if (t->plus_one) row[j] += 1.0f;
            }
            tr->row_from_f32(qrow, row, k);
            if (gguf_writer_write_data(w, f, qrow, rb)) return -1;
            continue;
        }
        for (int64_t r = 0; r < n; r++) {
            int64_t src = r;
            if (heads > 0) {
                int64_t h = r / d, j = r % d;
                src = h * d + (j % 2 ? j / 2 + d / 2 : j / 2);
            }
            dtype_to_f32(row, (const char *)s->data + (size_t)(src * k) * eb, (dtype)s->dt, (size_t)k);
            tr->row_from_f32(qrow, row, k);
            if (gguf_writer_write_data(w, f, qrow, rb)) return -1;
        }
    }
    return 0;
}

static void quantize_usage(FILE *f)
{
    fprintf(f, "usage: sglc quantize --model-path DIR --output FILE.gguf --type TYPE\n"
               "       sglc quantize --model-path DIR --output OUTDIR --type W8A8|W4A16 [--group-size N]\n\n"
               "Convert a Hugging Face folder (config.json, safetensors, tokenizer.json) to a GGUF\n"
               "file with llama.cpp's metadata and tensor names, or to a compressed-tensors folder\n"
               "(the layout of RedHatAI's *-quantized.w8a8 / .w4a16 checkpoints) that vLLM, SGLang\n"
               "and sglc load.\n\n"
               "  --type TYPE   GGUF: F32 F16 BF16 Q8_0 Q4_0 Q4_1 Q5_0 Q5_1 Q6_K Q4_K_M Q5_K_M IQ4_XS\n"
               "                (llama.cpp's presets: norms F32, output Q6_K, more bits for some\n"
               "                attn_v / ffn_down layers)\n"
               "                folder: W8A8 (also w8a8_int8): int8 weights per output channel,\n"
               "                int8 per-token dynamic activations (\"int-quantized\");\n"
               "                W4A16 (also w4a16_int4): 4-bit symmetric weights per group,\n"
               "                16-bit activations (\"pack-quantized\").  Round to nearest,\n"
               "                scale amax/127.5 or amax/7.5 in the weight's dtype, as\n"
               "                compressed-tensors; embeddings, norms, lm_head and MoE routers\n"
               "                stay in the source dtype; tokenizer files are copied\n"
               "  --group-size N  W4A16: inputs per scale (default 128, a multiple of 8; -1: one\n"
               "                scale per output channel).  Layers whose input size is not whole\n"
               "                groups stay unquantized (named in the config's ignore list)\n"
               "  --max-shard-size SIZE  folder output: split the safetensors into shards of at\n"
               "                most SIZE (bytes, or with KB MB GB KiB MiB GiB; default 5GB) with\n"
               "                model.safetensors.index.json\n"
               "  --plain       GGUF: only llama.cpp's metadata keys: leave out sglc.hf_config (the\n"
               "                config.json copy sglc prefers when it reads the file back)\n"
               "  --vocab-only  GGUF: metadata and tokenizer only, no tensors (DIR may be a tokenizer\n"
               "                folder without config.json)\n");
}

/* "5GB", "500MiB", "1000000" -> bytes; 0 if malformed */
static size_t parse_size(const char *s)
{
    char *end;
    double v = strtod(s, &end);
    static const struct {
        const char *u;
        double m;
    } units[] = {{"", 1}, {"b", 1}, {"kb", 1e3}, {"mb", 1e6}, {"gb", 1e9}, {"tb", 1e12},
                 {"kib", 1024.0}, {"mib", 1048576.0}, {"gib", 1073741824.0}, {"k", 1e3}, {"m", 1e6}, {"g", 1e9}};
    if (end == s || !(v > 0)) return 0;
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
        if (!strcasecmp(end, units[i].u)) {
            double b = v * units[i].m;
            return b >= 1 && b < 1e18 ? (size_t)b : 0;
        }
    return 0;
}

int cmd_quantize(int argc, char **argv)
{
    const char *dir = NULL, *out = NULL, *type = NULL, *group = NULL, *shard = NULL;
    int plain = 0, vocab_only = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            quantize_usage(stdout);
            return 0;
        }
        if (!strcmp(a, "--plain") || !strcmp(a, "--vocab-only")) {
            *(a[2] == 'p' ? &plain : &vocab_only) = 1;
            continue;
        }
        const char **dst = !strcmp(a, "--model-path") || !strcmp(a, "--model") ? &dir
                           : !strcmp(a, "--output") || !strcmp(a, "-o")     ? &out
                           : !strcmp(a, "--type")                           ? &type
                           : !strcmp(a, "--group-size")                     ? &group
                           : !strcmp(a, "--max-shard-size")                 ? &shard
                                                                            : NULL;
        if (!dst) {
            fprintf(stderr, "sglc quantize: unrecognized argument '%s'\n", a);
            quantize_usage(stderr);
            return 2;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "sglc quantize: %s expects a value\n", a);
            return 2;
        }
        *dst = argv[++i];
    }
    if (vocab_only && !type) type = "F32";
    if (!dir || !out || !type) {
        quantize_usage(stderr);
        return 2;
    }
    quantize_ct_kind ck = quantize_ct_kind_of(type);
    if (ck != QUANTIZE_CT_NONE) {
        quantize_ct_opts o = {ck, 128, (size_t)5000000000u};
        if (plain || vocab_only) {
            fprintf(stderr, "sglc quantize: %s applies to GGUF output, not --type %s\n",
                    plain ? "--plain" : "--vocab-only", type);
            return 2;
        }
        if (group) {
            char *end;
            long g = strtol(group, &end, 10);
            if (ck != QUANTIZE_CT_W4A16 || *end || end == group || !(g == -1 || (g >= 8 && g % 8 == 0 && g <= 1 << 20))) {
                fprintf(stderr, "sglc quantize: --group-size %s: %s\n", group,
                        ck != QUANTIZE_CT_W4A16 ? "only W4A16 has groups (W8A8 is per channel)"
                                                : "expected a positive multiple of 8, or -1 (per channel)");
                return 2;
            }
            o.group_size = (int)g;
        }
        if (shard && !(o.max_shard_bytes = parse_size(shard))) {
            fprintf(stderr, "sglc quantize: --max-shard-size %s: expected a size such as 5GB, 500MB or 1000000\n",
                    shard);
            return 2;
        }
        return quantize_ct_run(dir, out, &o);
    }
    if (group || shard) {
        fprintf(stderr, "sglc quantize: %s applies to --type W4A16 / W8A8 (folder output) only\n",
                group ? "--group-size" : "--max-shard-size");
        return 2;
    }
    const preset *ps = NULL;
    for (size_t i = 0; i < sizeof k_presets / sizeof k_presets[0]; i++)
        if (!strcasecmp(k_presets[i].name, type)) ps = &k_presets[i];
    if (!ps) {
        fprintf(stderr, "sglc quantize: unknown --type '%s' (F32 F16 BF16 Q8_0 Q4_0 Q4_1 Q5_0 Q5_1 "
                        "Q6_K Q4_K_M Q5_K_M IQ4_XS W8A8 W4A16)\n", type);
        return 2;
    }
    if (kernels_init(NULL)) {
        fprintf(stderr, "sglc quantize: kernel selection failed\n");
        return 1;
    }
    char err[1024];
    model_config c;
    char cpath[4200];
    snprintf(cpath, sizeof cpath, "%s/config.json", dir);
    int have_cfg = access(cpath, R_OK) == 0;
    if (vocab_only && !have_cfg) {
        /* a tokenizer folder: the vocabulary's size from tokenizer.json */
        memset(&c, 0, sizeof c);
        c.vocab_size = quantize_tok_vocab_size(dir);
        c.bos_token_id = -1;
        if (c.vocab_size <= 0) {
            fprintf(stderr, "sglc quantize: %s has no config.json and no readable tokenizer.json\n", dir);
            return 1;
        }
    } else if (model_config_load(&c, dir, NULL, 0, err, sizeof err)) {
        fprintf(stderr, "sglc quantize: %s\n", err);
        return 1;
    }
    const char *garch = have_cfg ? gguf_arch_of(c.architecture) : "llama";
    if (!garch) {
        fprintf(stderr, "sglc quantize: architecture %s has no GGUF mapping yet (Llama, Mistral, "
                        "Mixtral, Qwen2, Qwen3, Qwen3-MoE, Qwen2-MoE, Gemma 2, Gemma 3, Phi-3, DeepSeek V2 / V3 do)\n", c.architecture);
        return 1;
    }
    json_t *raw = have_cfg ? json_load_file(cpath, 0, NULL) : json_object();
    st_archive a;
    memset(&a, 0, sizeof a);
    plan p = {0};
    gguf_writer *w = NULL;
    FILE *f = NULL;
    float *row = NULL;
    void *qrow = NULL;
    int rc = 1;
    int has_output = 0;
    int64_t maxk = 1;
    if (!raw) goto done;
    if (vocab_only) goto header;
    if (st_open(&a, dir, err, sizeof err)) {
        fprintf(stderr, "sglc quantize: %s\n", err);
        goto done;
    }
    if (make_plan(&p, &a, &c, garch)) goto done;
    has_output = plan_find(&p, "output.weight") != NULL;
    for (int i = 0; i < p.n; i++) {
        qt *t = &p.t[i];
        t->type = choose_type(ps, t, &c, has_output);
        int kt = kern_type_of_ggml(t->type);
        if (kt < 0 || !kern_type_get((kern_type)kt)->row_from_f32) {
            fprintf(stderr, "sglc quantize: %s for tensor '%s': sglc cannot write this type yet\n",
                    gguf_type_name(t->type), t->name);
            goto done;
        }
        if (t->ne[0] > maxk) maxk = t->ne[0];
    }
header:
    w = gguf_writer_create(0);
    if (!w || (have_cfg ? write_meta(w, &c, raw, garch, ps, dir, plain)
                        : gguf_writer_str(w, "general.architecture", garch)) ||
        quantize_tok_meta(w, dir, &c, err, sizeof err)) {
        fprintf(stderr, "sglc quantize: %s\n", w ? err : "out of memory");
        goto done;
    }
    for (int i = 0; i < p.n; i++)
        if (gguf_writer_tensor(w, p.t[i].name, p.t[i].type, p.t[i].ndim, p.t[i].ne)) {
            fprintf(stderr, "sglc quantize: bad shape for '%s'\n", p.t[i].name);
            goto done;
        }
    f = fopen(out, "wb");
    row = malloc(sizeof(float) * (size_t)maxk);
    qrow = malloc(sizeof(float) * (size_t)maxk + 64);
    if (!f || !row || !qrow) {
        fprintf(stderr, "sglc quantize: cannot write %s\n", out);
        goto done;
    }
    if (gguf_writer_write_header(w, f)) goto write_fail;
    size_t total = 0;
    for (int i = 0; i < p.n; i++) {
        if (write_tensor(w, f, &p.t[i], row, qrow)) goto write_fail;
        int64_t numel = 1;
        for (int d = 0; d < p.t[i].ndim; d++) numel *= p.t[i].ne[d];
        total += gguf_type_bytes(p.t[i].type, numel);
    }
    if (gguf_writer_finish(w, f) || fclose(f)) {
        f = NULL;
        goto write_fail;
    }
    f = NULL;
    fprintf(stderr, "sglc quantize: wrote %s: %d tensors, %.1f MiB of weights (%s)\n", out, p.n,
            total / 1048576.0, ps->name);
    rc = 0;
    goto done;
write_fail:
    fprintf(stderr, "sglc quantize: writing %s failed\n", out);
done:
    if (f) fclose(f);
    if (rc && out) remove(out);
    free(row), free(qrow);
    gguf_writer_destroy(w);
    plan_free(&p);
    st_close(&a);
    json_decref(raw);
    return rc;
}
