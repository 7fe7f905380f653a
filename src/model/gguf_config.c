/* gguf_config — see gguf_model.h: names, finding the file, the config.
 *
 * DESIGN: files written by `sglc quantize` carry the model's config.json
 * verbatim in `sglc.hf_config` (llama.cpp ignores it); it is used as it is
 * (after checking the dimensions against the metadata), so everything the
 * metadata cannot say (Mistral's sliding window, Qwen2's
 * use_sliding_window, dynamic NTK rope, ...) survives.  Other files:
 * metadata keys are llama.cpp's ("{arch}.embedding_length", ...);
 * gguf_model_config_json turns them into the config.json a transformers
 * export of the model would carry, then model_config_parse reads that, so
 * every default and check of the HF path applies.  What GGUF leaves out:
 *   - tie_word_embeddings: output.weight absent;
 *   - attention_bias / mlp_bias: blk.0.attn_q.bias / blk.0.ffn_up.bias present;
 *   - Qwen3-MoE dense layers: layers without ffn_gate_inp (mlp_only_layers);
 *   - rope scaling "llama3": llama.cpp stores per-dimension divisors in a
 *     rope_freqs tensor instead; they are matched against llama3 scaling
 *     with factor = the largest divisor: Llama 3.1's low/high_freq_factor
 *     1/4 and original context 8192 (or rope.scaling.original_context_length)
 *     first, then power-of-two originals 16 .. 2^20 and low/high in
 *     {0.5, 1, 2, 4} x {2, 4, 8, 16}; a rope_freqs that matches nothing is
 *     refused rather than run with the wrong rope;
 *   - gemma2 / gemma3: soft-caps (absent = none), sliding_window, the
 *     local rope base (rope.freq_base_swa, else llama.cpp's 10000), the
 *     query scale (attention.scale, else llama.cpp's size rule), gelu-tanh;
 *     sliding layers by the architecture's pattern (llama.cpp's too);
 *   - phi3: longrope from rope_factors_long / _short.weight,
 *     rope.scaling.original_context_length and attn_factor;
 *   - qwen2moe: expert_shared_feed_forward_length; norm_topk_prob only
 *     from expert_weights_norm (llama.cpp's Qwen2-MoE does not renormalize);
 *   - deepseek2: its own builder (deepseek2_config): MLA ranks and head
 *     sizes, DeepSeekMoE routing, V2 or V3 by the routing, yarn mscale
 *     from yarn_log_multiplier.
 */
#include <dirent.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "model/gguf_model.h"
#include "util/errmsg.h"

/* ---- names ----------------------------------------------------------------- */

static const struct { const char *hf, *gg; } k_layer_names[] = {
    {"input_layernorm.weight", "attn_norm.weight"},
    {"post_attention_layernorm.weight", "ffn_norm.weight"},
    {"self_attn.q_proj.weight", "attn_q.weight"},
    {"self_attn.k_proj.weight", "attn_k.weight"},
    {"self_attn.v_proj.weight", "attn_v.weight"},
    {"self_attn.o_proj.weight", "attn_output.weight"},
    {"self_attn.q_proj.bias", "attn_q.bias"},
    {"self_attn.k_proj.bias", "attn_k.bias"},
    {"self_attn.v_proj.bias", "attn_v.bias"},
    {"self_attn.o_proj.bias", "attn_output.bias"},
    {"self_attn.q_norm.weight", "attn_q_norm.weight"},
    {"self_attn.k_norm.weight", "attn_k_norm.weight"},
    {"mlp.gate_proj.weight", "ffn_gate.weight"},
    {"mlp.up_proj.weight", "ffn_up.weight"},
    {"mlp.down_proj.weight", "ffn_down.weight"},
    {"mlp.gate_proj.bias", "ffn_gate.bias"},
    {"mlp.up_proj.bias", "ffn_up.bias"},
    {"mlp.down_proj.bias", "ffn_down.bias"},
    {"mlp.gate.weight", "ffn_gate_inp.weight"},
    {"block_sparse_moe.gate.weight", "ffn_gate_inp.weight"},
};

static const struct { const char *hf, *gg; } k_expert_names[] = {
    {"mlp.experts.%d.gate_proj.weight", "ffn_gate_exps.weight"},
    {"mlp.experts.%d.up_proj.weight", "ffn_up_exps.weight"},
    {"mlp.experts.%d.down_proj.weight", "ffn_down_exps.weight"},
    {"block_sparse_moe.experts.%d.w1.weight", "ffn_gate_exps.weight"},
    {"block_sparse_moe.experts.%d.w3.weight", "ffn_up_exps.weight"},
    {"block_sparse_moe.experts.%d.w2.weight", "ffn_down_exps.weight"},
};

/* per-architecture names that differ from (or are absent in) the table:
 * llama.cpp's Gemma 2/3 call HF's post_attention_layernorm (the norm on
 * the attention output) post_attention_norm and the pre-MLP norm ffn_norm;
 * Phi-3 keeps HF's fused projections (attn_qkv; ffn_up = gate rows then
 * up rows); Qwen2-MoE's one shared expert is *_shexp and its sigmoid gate
 * ffn_gate_inp_shexp. */
static const struct { const char *arch, *hf, *gg; } k_arch_names[] = {
    {"gemma2", "post_attention_layernorm.weight", "post_attention_norm.weight"},
    {"gemma2", "pre_feedforward_layernorm.weight", "ffn_norm.weight"},
    {"gemma2", "post_feedforward_layernorm.weight", "post_ffw_norm.weight"},
    {"gemma3", "post_attention_layernorm.weight", "post_attention_norm.weight"},
    {"gemma3", "pre_feedforward_layernorm.weight", "ffn_norm.weight"},
    {"gemma3", "post_feedforward_layernorm.weight", "post_ffw_norm.weight"},
    {"phi3", "self_attn.qkv_proj.weight", "attn_qkv.weight"},
    {"phi3", "mlp.gate_up_proj.weight", "ffn_up.weight"},
    {"qwen2moe", "mlp.shared_expert.gate_proj.weight", "ffn_gate_shexp.weight"},
    {"qwen2moe", "mlp.shared_expert.up_proj.weight", "ffn_up_shexp.weight"},
    {"qwen2moe", "mlp.shared_expert.down_proj.weight", "ffn_down_shexp.weight"},
    {"qwen2moe", "mlp.shared_expert_gate.weight", "ffn_gate_inp_shexp.weight"},
    /* DeepSeek V2 / V3 (llama.cpp's deepseek2): MLA projections, V3's
     * router correction bias, the shared experts.  kv_b_proj is
     * attn_kv_b in older files; current converters split it into
     * attn_k_b / attn_v_b (wsource_gguf.c rebuilds kv_b_proj from them) */
    {"deepseek2", "self_attn.q_a_proj.weight", "attn_q_a.weight"},
    {"deepseek2", "self_attn.q_a_layernorm.weight", "attn_q_a_norm.weight"},
    {"deepseek2", "self_attn.q_b_proj.weight", "attn_q_b.weight"},
    {"deepseek2", "self_attn.kv_a_proj_with_mqa.weight", "attn_kv_a_mqa.weight"},
    {"deepseek2", "self_attn.kv_a_layernorm.weight", "attn_kv_a_norm.weight"},
    {"deepseek2", "self_attn.kv_b_proj.weight", "attn_kv_b.weight"},
    {"deepseek2", "mlp.gate.e_score_correction_bias", "exp_probs_b.bias"},
    {"deepseek2", "mlp.shared_experts.gate_proj.weight", "ffn_gate_shexp.weight"},
    {"deepseek2", "mlp.shared_experts.up_proj.weight", "ffn_up_shexp.weight"},
    {"deepseek2", "mlp.shared_experts.down_proj.weight", "ffn_down_shexp.weight"},
};

int gguf_name_from_hf(const char *hf, char *out, size_t n, int *expert)
{
    return gguf_name_from_hf_arch("llama", hf, out, n, expert);
}

int gguf_name_from_hf_arch(const char *garch, const char *hf, char *out, size_t n, int *expert)
{
    *expert = -1;
    if (!garch) garch = "llama";
    if (!strcmp(hf, "model.embed_tokens.weight")) return snprintf(out, n, "token_embd.weight") > 0;
    if (!strcmp(hf, "lm_head.weight")) return snprintf(out, n, "output.weight") > 0;
    if (!strcmp(hf, "model.norm.weight")) return snprintf(out, n, "output_norm.weight") > 0;
    int il, used = 0;
    if (sscanf(hf, "model.layers.%d.%n", &il, &used) != 1 || used == 0 || il < 0) return 0;
    const char *rest = hf + used;
    for (size_t i = 0; i < sizeof k_arch_names / sizeof k_arch_names[0]; i++)
        if (!strcmp(garch, k_arch_names[i].arch) && !strcmp(rest, k_arch_names[i].hf))
            return snprintf(out, n, "blk.%d.%s", il, k_arch_names[i].gg) > 0;
    for (size_t i = 0; i < sizeof k_layer_names / sizeof k_layer_names[0]; i++)
        if (!strcmp(rest, k_layer_names[i].hf))
            return snprintf(out, n, "blk.%d.%s", il, k_layer_names[i].gg) > 0;
    for (size_t i = 0; i < sizeof k_expert_names / sizeof k_expert_names[0]; i++) {
        /* "mlp.experts.%d.gate_proj.weight": prefix, index, suffix */
        const char *pat = k_expert_names[i].hf, *pc = strstr(pat, "%d");
        size_t pre = (size_t)(pc - pat);
        if (strncmp(rest, pat, pre)) continue;
        char *end;
        long e = strtol(rest + pre, &end, 10);
        if (end == rest + pre || e < 0 || e > 1 << 20 || strcmp(end, pc + 2)) continue;
        *expert = (int)e;
        return snprintf(out, n, "blk.%d.%s", il, k_expert_names[i].gg) > 0;
    }
    return 0;
}

/* ---- finding the file ------------------------------------------------------ */

static int ends_with(const char *s, const char *suf)
{
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && !strcmp(s + a - b, suf);
}

int gguf_model_path(const char *path, int force, char *out, size_t n, char *err, size_t errlen)
{
    struct stat st;
    if (!path || stat(path, &st)) return 0;
    if (S_ISREG(st.st_mode)) {
        if (!ends_with(path, ".gguf") && !force) return 0;
        snprintf(out, n, "%s", path);
        return 1;
    }
    if (!S_ISDIR(st.st_mode)) return 0;
    char cfg[4200];
    snprintf(cfg, sizeof cfg, "%s/config.json", path);
    if (!force && !stat(cfg, &st)) return 0; /* a Hugging Face folder */
    DIR *d = opendir(path);
    if (!d) return 0;
    int found = 0;
    char first[1024] = "", second[1024] = "";
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!ends_with(e->d_name, ".gguf") || e->d_name[0] == '.') continue;
        if (found == 0) snprintf(first, sizeof first, "%s", e->d_name);
        else if (found == 1) snprintf(second, sizeof second, "%s", e->d_name);
        found++;
    }
    closedir(d);
    if (found == 0) {
        if (force) {
            errmsg_set(err, errlen, "%s: --load-format gguf, but the folder holds no .gguf file",
                       path);
            return -1;
        }
        return 0;
    }
    if (found > 1) {
        errmsg_set(err, errlen, "%s: the folder holds %d .gguf files (%s, %s%s); pass the file "
                   "as --model-path", path, found, first, second, found > 2 ? ", ..." : "");
        return -1;
    }
    snprintf(out, n, "%s/%s", path, first);
    return 1;
}

/* ---- config ---------------------------------------------------------------- */

typedef struct cfgb {
    const gguf_file *g;
    const char *arch;
    char *err;
    size_t errlen;
    int bad;
} cfgb;

/* "{arch}.{key}" as an integer: 1 found, 0 absent (bad set on a wrong type) */
static int ak_int(cfgb *b, const char *key, int64_t *v)
{
    char k[160];
    snprintf(k, sizeof k, "%s.%s", b->arch, key);
    int r = gguf_get_int(b->g, k, v, b->err, b->errlen);
    if (r < 0) b->bad = 1;
    return r > 0;
}

static int ak_float(cfgb *b, const char *key, double *v)
{
    char k[160];
    snprintf(k, sizeof k, "%s.%s", b->arch, key);
    int r = gguf_get_float(b->g, k, v, b->err, b->errlen);
    if (r < 0) b->bad = 1;
    return r > 0;
}

static void need_int(cfgb *b, json_t *o, const char *hf, const char *key)
{
    int64_t v;
    if (b->bad) return;
    if (!ak_int(b, key, &v)) {
        if (!b->bad)
            errmsg_set(b->err, b->errlen, "%s: metadata '%s.%s' is missing", b->g->path ? b->g->path : "gguf",
                       b->arch, key);
        b->bad = 1;
        return;
    }
    json_object_set_new(o, hf, json_integer(v));
}

static void opt_int(cfgb *b, json_t *o, const char *hf, const char *key)
{
    int64_t v;
    if (!b->bad && ak_int(b, key, &v)) json_object_set_new(o, hf, json_integer(v));
}

static int has_tensor(const gguf_file *g, const char *name) { return gguf_find_tensor(g, name) != NULL; }

static const char *torch_dtype_of(const gguf_file *g)
{
    const gguf_tensor *t = gguf_find_tensor(g, "blk.0.attn_q.weight");
    if (!t) t = gguf_find_tensor(g, "token_embd.weight");
    if (!t) return "float32";
    switch (t->ggml_type) {
    case 1: return "float16";
    case 30: return "bfloat16";
    default: return "float32"; /* f32, and quantized weights dequantized to f32 */
    }
}

/* Llama 3.1 rope divisors for (factor, lo, hi, old) equal to the rope_freqs tensor? */
static int llama3_matches(const float *f, int n, int dim, double base, double factor, double lo,
                          double hi, double old)
{
    double low_wl = old / lo, high_wl = old / hi;
    for (int i = 0; i < n; i++) {
        double freq = 1.0 / pow(base, (double)(2 * i) / dim), wl = 2 * M_PI / freq, want;
        if (wl < high_wl) want = 1.0;
        else if (wl > low_wl) want = factor;
        else {
            double sm = (old / wl - lo) / (hi - lo);
            want = 1.0 / ((1 - sm) / factor + sm);
        }
        if (fabs(want - f[i]) > 1e-4 * want) return 0;
    }
    return 1;
}

static int rope_scaling(cfgb *b, json_t *root, int head_dim)
{
    const gguf_file *g = b->g;
    gguf_str s;
    int r;
    char k[160];
    snprintf(k, sizeof k, "%s.rope.scaling.type", b->arch);
    r = gguf_get_str(g, k, &s, b->err, b->errlen);
    if (r < 0) return -1;
    double factor = 1.0, v;
    int64_t orig = 0;
    ak_float(b, "rope.scaling.factor", &factor);
    ak_int(b, "rope.scaling.original_context_length", &orig);
    if (b->bad) return -1;
    if (r > 0 && s.len == 6 && !memcmp(s.s, "linear", 6) && factor != 1.0) {
        json_object_set_new(root, "rope_scaling", json_pack("{s:s,s:f}", "rope_type", "linear", "factor", factor));
    } else if (r > 0 && s.len == 4 && !memcmp(s.s, "yarn", 4)) {
        json_t *rs = json_pack("{s:s,s:f}", "rope_type", "yarn", "factor", factor);
        if (orig > 0) json_object_set_new(rs, "original_max_position_embeddings", json_integer(orig));
        if (ak_float(b, "rope.scaling.yarn_beta_fast", &v)) json_object_set_new(rs, "beta_fast", json_real(v));
        if (ak_float(b, "rope.scaling.yarn_beta_slow", &v)) json_object_set_new(rs, "beta_slow", json_real(v));
        json_object_set_new(root, "rope_scaling", rs);
    } else if (r > 0 && !(s.len == 4 && !memcmp(s.s, "none", 4)) &&
               !(s.len == 6 && !memcmp(s.s, "linear", 6))) {
        errmsg_set(b->err, b->errlen, "%s: rope scaling type '%.*s' is not supported (none, linear, yarn)",
                   g->path ? g->path : "gguf", (int)(s.len > 32 ? 32 : s.len), s.s);
        return -1;
    }
    const gguf_tensor *rf = gguf_find_tensor(g, "rope_freqs.weight");
    if (!rf) return 0;
    if (rf->ggml_type != 0 || rf->ndim != 1 || rf->ne[0] * 2 != head_dim) {
        errmsg_set(b->err, b->errlen, "%s: rope_freqs.weight must be %d F32 values", g->path ? g->path : "gguf",
                   head_dim / 2);
        return -1;
    }
    int n = (int)rf->ne[0];
    float *f = malloc(sizeof(float) * (size_t)n);
    if (!f) return -1;
    memcpy(f, rf->data, sizeof(float) * (size_t)n);
    double mx = 1.0, base = 10000.0;
    for (int i = 0; i < n; i++) mx = f[i] > mx ? f[i] : mx;
    ak_float(b, "rope.freq_base", &base);
    /* Llama 3.1's parameters first (low/high 1/4, original 8192 or the
     * key's), then other power-of-two originals and low/high pairs */
    static const double los[] = {1.0, 0.5, 2.0, 4.0}, his[] = {4.0, 2.0, 8.0, 16.0};
    int ok = 0;
    for (int c = -2; c <= 20 && !ok; c++) {
        double old = c == -2 ? (orig > 0 ? (double)orig : 8192.0) : c == -1 ? 8192.0 : ldexp(1.0, c);
        if (c >= 0 && c < 4) continue;
        for (size_t li = 0; li < 4 && !ok; li++)
            for (size_t hi = 0; hi < 4 && !ok; hi++)
                if (his[hi] > los[li] && llama3_matches(f, n, head_dim, base, mx, los[li], his[hi], old)) {
                    json_object_set_new(root, "rope_scaling",
                                        json_pack("{s:s,s:f,s:f,s:f,s:i}", "rope_type", "llama3", "factor", mx,
                                                  "low_freq_factor", los[li], "high_freq_factor", his[hi],
                                                  "original_max_position_embeddings", (int)old));
                    ok = 1;
                }
    }
    free(f);
    if (!ok) {
        errmsg_set(b->err, b->errlen, "%s: rope_freqs.weight does not match Llama 3 rope scaling "
                   "(factor %g, low/high_freq_factor 1/4); other per-dimension rope factors are "
                   "not supported", g->path ? g->path : "gguf", mx);
        return -1;
    }
    return 0;
}

/* eos ids the tokenizer metadata names, appended to o's eos_token_id */
static void add_tok_eos(const gguf_file *g, json_t *o)
{
    json_t *eos = json_object_get(o, "eos_token_id");
    json_t *arr = json_array();
    if (json_is_integer(eos)) json_array_append(arr, eos);
    else if (json_is_array(eos)) json_array_extend(arr, eos);
    static const char *const eos_keys[] = {"tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id",
                                           "tokenizer.ggml.eom_token_id"};
    int64_t id;
    for (size_t i = 0; i < 3; i++)
        if (gguf_get_int(g, eos_keys[i], &id, NULL, 0) > 0 && id >= 0 && id < (1ll << 31))
            json_array_append_new(arr, json_integer(id));
    json_object_set_new(o, "eos_token_id", arr);
}

/* sglc quantize's copy of config.json, checked against the metadata */
static char *hf_config_json(const gguf_file *g, gguf_str hc, char *err, size_t errlen)
{
    const char *fn = g->path ? g->path : "gguf";
    json_t *o = json_loadb(hc.s, (size_t)hc.len, 0, NULL);
    gguf_str as = {0};
    gguf_get_str(g, "general.architecture", &as, NULL, 0);
    char arch[64];
    snprintf(arch, sizeof arch, "%.*s", (int)(as.len < 63 ? as.len : 63), as.s ? as.s : "");
    static const struct { const char *hf, *key; } same[] = {
        {"hidden_size", "embedding_length"}, {"num_hidden_layers", "block_count"},
        {"num_attention_heads", "attention.head_count"},
    };
    for (size_t i = 0; o && i < sizeof same / sizeof same[0]; i++) {
        char k[160];
        int64_t v = -1;
        snprintf(k, sizeof k, "%s.%s", arch, same[i].key);
        json_t *jv = json_object_get(o, same[i].hf);
        if (gguf_get_int(g, k, &v, NULL, 0) <= 0 || !json_is_integer(jv) || json_integer_value(jv) != v) {
            errmsg_set(err, errlen, "%s: sglc.hf_config disagrees with the metadata on %s / %s", fn,
                       same[i].hf, k);
            json_decref(o);
            return NULL;
        }
    }
    if (!json_is_object(o)) {
        errmsg_set(err, errlen, "%s: sglc.hf_config is not a JSON object", fn);
        json_decref(o);
        return NULL;
    }
    add_tok_eos(g, o);
    char *text = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    if (!text) errmsg_set(err, errlen, "out of memory");
    return text;
}

/* Gemma 2 / 3 keys: soft-caps (absent = none: null, so Gemma2Config's
 * 50 / 30 defaults do not apply), window, the local rope base (llama.cpp:
 * rope.freq_base_swa, 10000 when absent), and the query scale:
 * attention.scale when present (sglc quantize writes it), else what
 * llama.cpp infers from the model size (the 27B models, 46 / 62 layers,
 * scale by hidden / heads, the others by head_dim). */
static int arch_extras_gemma(cfgb *b, json_t *o, int64_t H, int64_t nh, int64_t nl, int64_t hd)
{
    double v;
    int64_t w;
    int g2 = !strcmp(b->arch, "gemma2");
    json_object_set_new(o, "hidden_activation", json_string("gelu_pytorch_tanh"));
    json_object_set_new(o, "attn_logit_softcapping",
                        ak_float(b, "attn_logit_softcapping", &v) ? json_real(v) : json_null());
    json_object_set_new(o, "final_logit_softcapping",
                        ak_float(b, "final_logit_softcapping", &v) ? json_real(v) : json_null());
    if (ak_int(b, "attention.sliding_window", &w) && w > 0) json_object_set_new(o, "sliding_window", json_integer(w));
    if (!g2) json_object_set_new(o, "rope_local_base_freq",
                                 json_real(ak_float(b, "rope.freq_base_swa", &v) ? v : 10000.0));
    int big = nl == (g2 ? 46 : 62);
    if (ak_float(b, "attention.scale", &v) && v > 1e-4 && v < 1e4) /* sglc quantize writes it */
        json_object_set_new(o, "query_pre_attn_scalar", json_real(1.0 / (v * v)));
    else
        json_object_set_new(o, "query_pre_attn_scalar", json_integer(big && nh > 0 ? H / nh : hd));
    return b->bad ? -1 : 0;
}

/* F32 1-D tensor `name` of n values as a JSON array, or NULL (message set) */
static json_t *f32_array(cfgb *b, const char *name, int n)
{
    const gguf_tensor *t = gguf_find_tensor(b->g, name);
    if (!t || t->ggml_type != 0 || t->ndim != 1 || t->ne[0] != n) {
        errmsg_set(b->err, b->errlen, "%s: %s must be %d F32 values", b->g->path ? b->g->path : "gguf", name, n);
        return NULL;
    }
    json_t *a = json_array();
    const float *f = t->data;
    for (int i = 0; i < n; i++) json_array_append_new(a, json_real(f[i]));
    return a;
}

/* Phi-3: window; longrope from rope_factors_long / _short.weight (one
 * value per rotary pair), rope.scaling.original_context_length and
 * rope.scaling.attn_factor */
static int arch_extras_phi3(cfgb *b, json_t *o, int64_t hd)
{
    int64_t w, orig = 0, rd = hd;
    double af;
    if (ak_int(b, "attention.sliding_window", &w) && w > 0) json_object_set_new(o, "sliding_window", json_integer(w));
    int has_long = has_tensor(b->g, "rope_factors_long.weight"), has_short = has_tensor(b->g, "rope_factors_short.weight");
    if (!has_long && !has_short) return b->bad ? -1 : 0;
    ak_int(b, "rope.dimension_count", &rd);
    if (ak_int(b, "rope.scaling.original_context_length", &orig) && orig > 0)
        json_object_set_new(o, "original_max_position_embeddings", json_integer(orig));
    json_t *lf = f32_array(b, "rope_factors_long.weight", (int)(rd / 2));
    json_t *sf = lf ? f32_array(b, "rope_factors_short.weight", (int)(rd / 2)) : NULL;
    if (!lf || !sf) {
        json_decref(lf);
        return -1;
    }
    json_t *rs = json_pack("{s:s,s:o,s:o}", "rope_type", "longrope", "long_factor", lf, "short_factor", sf);
    if (ak_float(b, "rope.scaling.attn_factor", &af)) json_object_set_new(rs, "attention_factor", json_real(af));
    json_object_set_new(o, "rope_scaling", rs);
    return b->bad ? -1 : 0;
}


/* DeepSeek V2 / V3 (deepseek2) from llama.cpp's keys (conversion/deepseek.py
 * DeepseekV2Model.set_gguf_parameters writes them; llama-model.cpp reads
 * them):
 *   attention.kv_lora_rank, attention.q_lora_rank (absent: q_proj, as
 *   V2-Lite), rope.dimension_count = qk_rope_head_dim,
 *   attention.key_length_mla / value_length_mla = nope + rope / v_head_dim
 *   (older files: attention.key_length / value_length hold those; newer
 *   ones put kv_lora_rank + rope / kv_lora_rank there, the MQA view),
 *   leading_dense_block_count, expert_{count,used_count,feed_forward_length,
 *   shared_count,weights_scale,weights_norm,gating_func (1 softmax,
 *   2 sigmoid; absent = softmax, llama.cpp's rule for old V2 files),
 *   group_count,group_used_count}, rope.scaling.yarn_log_multiplier =
 *   0.1 * mscale_all_dim.
 * The HF config: DeepseekV3ForCausalLM when layers carry exp_probs_b
 * (noaux_tc routing) or the gating is sigmoid, or when the weights are
 * normalized and scaled (llama.cpp's rule; HF's V2 never scales normalized
 * weights); else DeepseekV2ForCausalLM (greedy, or group_limited_greedy
 * with more than one group).  yarn: mscale = mscale_all_dim =
 * yarn_log_multiplier / 0.1 (llama.cpp's cos/sin scale is 1, HF's is their
 * ratio); without the key no mscale and a cos/sin factor of 1. */
static int deepseek2_config(cfgb *b, json_t *o, const char **hf)
{
    const gguf_file *g = b->g;
    const char *fn = g->path ? g->path : "gguf";
    int64_t H = 0, nl = 0, nh = 0, kvr = 0, qr = 0, rope = 0, kl = 0, vl = 0, v;
    double d;
    need_int(b, o, "hidden_size", "embedding_length");
    need_int(b, o, "num_hidden_layers", "block_count");
    need_int(b, o, "num_attention_heads", "attention.head_count");
    need_int(b, o, "kv_lora_rank", "attention.kv_lora_rank");
    need_int(b, o, "qk_rope_head_dim", "rope.dimension_count");
    if (b->bad) return -1;
    ak_int(b, "embedding_length", &H);
    ak_int(b, "block_count", &nl);
    ak_int(b, "attention.head_count", &nh);
    ak_int(b, "attention.kv_lora_rank", &kvr);
    ak_int(b, "rope.dimension_count", &rope);
    json_object_set_new(o, "num_key_value_heads", json_integer(nh)); /* HF's; MLA has one latent "head" */
    opt_int(b, o, "max_position_embeddings", "context_length");
    int has_q_a = has_tensor(g, "blk.0.attn_q_a.weight");
    if (ak_int(b, "attention.q_lora_rank", &qr) && qr > 0) {
        json_object_set_new(o, "q_lora_rank", json_integer(qr));
    } else if (has_q_a) {
        errmsg_set(b->err, b->errlen, "%s: blk.0.attn_q_a.weight is there but metadata '%s.attention.q_lora_rank' "
                   "is missing", fn, b->arch);
        return -1;
    } else {
        json_object_set_new(o, "q_lora_rank", json_null());
    }
    int mla_keys = ak_int(b, "attention.key_length_mla", &kl);
    if (mla_keys) {
        if (!ak_int(b, "attention.value_length_mla", &vl)) {
            errmsg_set(b->err, b->errlen, "%s: metadata '%s.attention.value_length_mla' is missing", fn, b->arch);
            return -1;
        }
    } else if (!ak_int(b, "attention.key_length", &kl) || !ak_int(b, "attention.value_length", &vl)) {
        errmsg_set(b->err, b->errlen, "%s: metadata '%s.attention.key_length_mla' (or the older "
                   "key_length / value_length) is missing", fn, b->arch);
        return -1;
    }
    if (b->bad) return -1;
    if (kl <= rope || vl <= 0) {
        errmsg_set(b->err, b->errlen, "%s: %s.attention.key_length%s (%lld) must exceed rope.dimension_count (%lld)",
                   fn, b->arch, mla_keys ? "_mla" : "", (long long)kl, (long long)rope);
        return -1;
    }
    json_object_set_new(o, "qk_nope_head_dim", json_integer(kl - rope));
    json_object_set_new(o, "v_head_dim", json_integer(vl));
    int64_t ff = 0, eff = 0, ne = 0, nused = 0, nsh = 0, ndense = 0, gate = 1, ng = 1, ngu = 1, norm = 0;
    if (!ak_int(b, "feed_forward_length", &ff) && !ak_int(b, "expert_feed_forward_length", &ff)) {
        errmsg_set(b->err, b->errlen, "%s: metadata '%s.feed_forward_length' is missing", fn, b->arch);
        return -1;
    }
    json_object_set_new(o, "intermediate_size", json_integer(ff));
    ak_int(b, "expert_count", &ne);
    ak_int(b, "expert_used_count", &nused);
    ak_int(b, "expert_feed_forward_length", &eff);
    ak_int(b, "expert_shared_count", &nsh);
    ak_int(b, "leading_dense_block_count", &ndense);
    ak_int(b, "expert_gating_func", &gate);
    ak_int(b, "expert_group_count", &ng);
    ak_int(b, "expert_group_used_count", &ngu);
    ak_int(b, "expert_weights_norm", &norm);
    double scale = 1.0;
    ak_float(b, "expert_weights_scale", &scale);
    if (b->bad) return -1;
    if (gate == 0) gate = 1; /* llama.cpp: none recorded = softmax (old V2 / V2.5 files) */
    if (gate != 1 && gate != 2) {
        errmsg_set(b->err, b->errlen, "%s: %s.expert_gating_func %lld is not supported (1 softmax, 2 sigmoid)", fn,
                   b->arch, (long long)gate);
        return -1;
    }
    int bias = 0;
    for (int64_t il = 0; il < nl && il < 4096 && !bias; il++) {
        char nm[64];
        snprintf(nm, sizeof nm, "blk.%lld.exp_probs_b.bias", (long long)il);
        bias = has_tensor(g, nm);
    }
    int v3 = bias || gate == 2 || (norm && scale != 1.0);
    *hf = v3 ? "DeepseekV3ForCausalLM" : "DeepseekV2ForCausalLM";
    json_object_set_new(o, "n_routed_experts", ne > 0 ? json_integer(ne) : json_null());
    json_object_set_new(o, "num_experts_per_tok", json_integer(nused > 0 ? nused : 1));
    json_object_set_new(o, "moe_intermediate_size", json_integer(eff > 0 ? eff : ff));
    json_object_set_new(o, "n_shared_experts", json_integer(nsh));
    json_object_set_new(o, "first_k_dense_replace", json_integer(ne > 0 ? ndense : nl));
    json_object_set_new(o, "moe_layer_freq", json_integer(1));
    json_object_set_new(o, "n_group", json_integer(ng > 0 ? ng : 1));
    json_object_set_new(o, "topk_group", json_integer(ngu > 0 ? ngu : 1));
    json_object_set_new(o, "norm_topk_prob", json_boolean(norm != 0));
    json_object_set_new(o, "routed_scaling_factor", json_real(scale));
    json_object_set_new(o, "scoring_func", json_string(gate == 2 ? "sigmoid" : "softmax"));
    json_object_set_new(o, "topk_method", json_string(bias ? "noaux_tc" : ng > 1 ? "group_limited_greedy" : "greedy"));
    if (ak_float(b, "attention.layer_norm_rms_epsilon", &d)) json_object_set_new(o, "rms_norm_eps", json_real(d));
    if (ak_float(b, "rope.freq_base", &d)) json_object_set_new(o, "rope_theta", json_real(d));
    if (b->bad || rope_scaling(b, o, (int)rope)) return -1;
    json_t *rs = json_object_get(o, "rope_scaling");
    const char *rt = json_is_object(rs) ? json_string_value(json_object_get(rs, "rope_type")) : NULL;
    if (rt && !strcmp(rt, "yarn")) {
        double af = 1.0;
        if (ak_float(b, "rope.scaling.yarn_attn_factor", &af) && fabs(af - 1.0) > 1e-6) {
            errmsg_set(b->err, b->errlen, "%s: %s.rope.scaling.yarn_attn_factor %g is not supported (1)", fn,
                       b->arch, af);
            return -1;
        }
        if (ak_float(b, "rope.scaling.yarn_log_multiplier", &d) && d > 0) {
            json_object_set_new(rs, "mscale", json_real(d / 0.1));
            json_object_set_new(rs, "mscale_all_dim", json_real(d / 0.1));
        } else {
            json_object_set_new(rs, "attention_factor", json_real(1.0));
        }
    }
    json_object_set_new(o, "hidden_act", json_string("silu"));
    json_object_set_new(o, "attention_bias", json_false());
    (void)H, (void)v;
    return b->bad ? -1 : 0;
}

char *gguf_model_config_json(const gguf_file *g, char *err, size_t errlen)
{
    const char *fn = g->path ? g->path : "gguf";
    gguf_str hc;
    if (gguf_get_str(g, "sglc.hf_config", &hc, NULL, 0) > 0) return hf_config_json(g, hc, err, errlen);
    gguf_str as;
    int r = gguf_get_str(g, "general.architecture", &as, err, errlen);
    if (r <= 0) {
        if (r == 0) errmsg_set(err, errlen, "%s: metadata 'general.architecture' is missing", fn);
        return NULL;
    }
    char arch[64];
    snprintf(arch, sizeof arch, "%.*s", (int)(as.len < 63 ? as.len : 63), as.s);
    cfgb b = {g, arch, err, errlen, 0};
    int64_t n_expert = 0;
    ak_int(&b, "expert_count", &n_expert);
    const char *hf = NULL;
    if (!strcmp(arch, "llama")) hf = n_expert > 0 ? "MixtralForCausalLM" : "LlamaForCausalLM";
    else if (!strcmp(arch, "qwen2")) hf = "Qwen2ForCausalLM";
    else if (!strcmp(arch, "qwen3")) hf = "Qwen3ForCausalLM";
    else if (!strcmp(arch, "qwen3moe")) hf = "Qwen3MoeForCausalLM";
    else if (!strcmp(arch, "qwen2moe")) hf = "Qwen2MoeForCausalLM";
    else if (!strcmp(arch, "gemma2")) hf = "Gemma2ForCausalLM";
    else if (!strcmp(arch, "gemma3")) hf = "Gemma3ForCausalLM";
    else if (!strcmp(arch, "phi3")) hf = "Phi3ForCausalLM";
    else if (!strcmp(arch, "deepseek2")) hf = "DeepseekV2ForCausalLM"; /* or V3: deepseek2_config */
    if (!hf || b.bad) {
        if (!b.bad)
            errmsg_set(err, errlen, "%s: unsupported GGUF architecture '%s' (supported: llama, "
                       "including Mistral and Mixtral files, qwen2, qwen3, qwen3moe, qwen2moe, "
                       "gemma2, gemma3, phi3, deepseek2)", fn, arch);
        return NULL;
    }
    json_t *o = json_object();
    if (!strcmp(arch, "deepseek2")) {
        if (deepseek2_config(&b, o, &hf)) goto fail;
        json_object_set_new(o, "architectures", json_pack("[s]", hf));
        const gguf_tensor *dte = gguf_find_tensor(g, "token_embd.weight");
        if (dte && dte->ndim == 2) json_object_set_new(o, "vocab_size", json_integer(dte->ne[1]));
        json_object_set_new(o, "tie_word_embeddings", json_boolean(!has_tensor(g, "output.weight")));
        json_object_set_new(o, "torch_dtype", json_string(torch_dtype_of(g)));
        int64_t bid;
        if (gguf_get_int(g, "tokenizer.ggml.bos_token_id", &bid, NULL, 0) > 0)
            json_object_set_new(o, "bos_token_id", json_integer(bid));
        add_tok_eos(g, o);
        char *dtext = json_dumps(o, JSON_COMPACT);
        json_decref(o);
        if (!dtext) errmsg_set(err, errlen, "out of memory");
        return dtext;
    }
    json_object_set_new(o, "architectures", json_pack("[s]", hf));
    need_int(&b, o, "hidden_size", "embedding_length");
    need_int(&b, o, "num_hidden_layers", "block_count");
    need_int(&b, o, "num_attention_heads", "attention.head_count");
    opt_int(&b, o, "num_key_value_heads", "attention.head_count_kv");
    opt_int(&b, o, "head_dim", "attention.key_length");
    opt_int(&b, o, "max_position_embeddings", "context_length");
    int64_t ff = 0, eff = 0, nl = 0, hd = 0, nh = 1, H = 0;
    int have_ff = ak_int(&b, "feed_forward_length", &ff);
    int have_eff = ak_int(&b, "expert_feed_forward_length", &eff);
    ak_int(&b, "block_count", &nl);
    ak_int(&b, "embedding_length", &H);
    ak_int(&b, "attention.head_count", &nh);
    if (!ak_int(&b, "attention.key_length", &hd)) hd = nh > 0 ? H / nh : 0;
    if (b.bad) goto fail;
    if (!have_ff && !have_eff) {
        errmsg_set(err, errlen, "%s: metadata '%s.feed_forward_length' is missing", fn, arch);
        goto fail;
    }
    json_object_set_new(o, "intermediate_size", json_integer(have_ff && ff > 0 ? ff : eff));
    double v;
    if (ak_float(&b, "attention.layer_norm_rms_epsilon", &v)) json_object_set_new(o, "rms_norm_eps", json_real(v));
    if (ak_float(&b, "rope.freq_base", &v)) json_object_set_new(o, "rope_theta", json_real(v));
    int64_t rd;
    if (ak_int(&b, "rope.dimension_count", &rd) && hd > 0 && rd > 0 && rd < hd)
        json_object_set_new(o, "partial_rotary_factor", json_real((double)rd / (double)hd));
    if (b.bad) goto fail;
    /* vocabulary: the embedding table's rows (the loader checks the rest against it) */
    const gguf_tensor *te = gguf_find_tensor(g, "token_embd.weight");
    const gguf_kv *toks = gguf_find_kv(g, "tokenizer.ggml.tokens");
    if (te && te->ndim == 2) json_object_set_new(o, "vocab_size", json_integer(te->ne[1]));
    else if (toks && toks->v.type == GGUF_T_ARRAY) json_object_set_new(o, "vocab_size", json_integer((json_int_t)toks->v.n));
    json_object_set_new(o, "tie_word_embeddings", json_boolean(!has_tensor(g, "output.weight")));
    json_object_set_new(o, "attention_bias", json_boolean(has_tensor(g, "blk.0.attn_q.bias")));
    json_object_set_new(o, "mlp_bias", json_boolean(has_tensor(g, "blk.0.ffn_up.bias")));
    int gemma = !strcmp(arch, "gemma2") || !strcmp(arch, "gemma3");
    json_object_set_new(o, "hidden_act", json_string(gemma ? "gelu_pytorch_tanh" : "silu"));
    if (gemma && arch_extras_gemma(&b, o, H, nh, nl, hd)) goto fail;
    if (!strcmp(arch, "phi3") && arch_extras_phi3(&b, o, hd)) goto fail;
    json_object_set_new(o, "torch_dtype", json_string(torch_dtype_of(g)));
    int64_t id;
    if (gguf_get_int(g, "tokenizer.ggml.bos_token_id", &id, NULL, 0) > 0)
        json_object_set_new(o, "bos_token_id", json_integer(id));
    add_tok_eos(g, o);
    if (n_expert > 0) {
        int64_t used = 0;
        ak_int(&b, "expert_used_count", &used);
        if (!strcmp(arch, "qwen3moe") || !strcmp(arch, "qwen2moe")) {
            json_object_set_new(o, "num_experts", json_integer(n_expert));
            json_object_set_new(o, "moe_intermediate_size", json_integer(have_eff ? eff : ff));
            int64_t norm = !strcmp(arch, "qwen3moe"), sh = 0; /* llama.cpp: Qwen2-MoE does not renormalize */
            if (!strcmp(arch, "qwen2moe") && ak_int(&b, "expert_shared_feed_forward_length", &sh))
                json_object_set_new(o, "shared_expert_intermediate_size", json_integer(sh));
            ak_int(&b, "expert_weights_norm", &norm);
            json_object_set_new(o, "norm_topk_prob", json_boolean(norm != 0));
            json_t *dense = json_array();
            for (int64_t il = 0; il < nl && il < 4096; il++) {
                char nm[64];
                snprintf(nm, sizeof nm, "blk.%lld.ffn_gate_inp.weight", (long long)il);
                if (!has_tensor(g, nm)) json_array_append_new(dense, json_integer(il));
            }
            json_object_set_new(o, "mlp_only_layers", dense);
        } else {
            json_object_set_new(o, "num_local_experts", json_integer(n_expert));
        }
        if (used > 0) json_object_set_new(o, "num_experts_per_tok", json_integer(used));
    }
    if (b.bad || rope_scaling(&b, o, (int)hd)) goto fail;
    char *text = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    if (!text) errmsg_set(err, errlen, "out of memory");
    return text;
fail:
    json_decref(o);
    return NULL;
}

int gguf_model_config(const gguf_file *g, const char *override_json, int context_length,
                      model_config *c, char *err, size_t errlen)
{
    char *text = gguf_model_config_json(g, err, errlen);
    if (!text) return -1;
    char perr[512];
    int rc = model_config_parse(c, text, strlen(text), override_json, context_length, perr, sizeof perr);
    free(text);
    if (rc) {
        /* the message says config.json: say it came from the GGUF metadata */
        errmsg_set(err, errlen, "%s (from the GGUF metadata): %s", g->path ? g->path : "gguf", perr);
        return -1;
    }
    return 0;
}

int gguf_norm_plus_one(const char *garch, const char *gguf_name)
{
    return garch && (!strcmp(garch, "gemma2") || !strcmp(garch, "gemma3")) && ends_with(gguf_name, "norm.weight");
}
