/* config — see config.h.
 *
 * DESIGN: every field is read through a small typed getter that records the
 * first problem in `err` ("config.json: num_attention_heads must be an
 * integer in [1, 1024], got ...").  JSON null counts as absent, as it does
 * for transformers (e.g. "sliding_window": null, "rope_scaling": null).
 */
#include "model/config.h"
#include "util/errmsg.h"
#include "util/fileio.h"

#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/arch.h"
#include "model/moe.h"
#include "util/dtype.h"
#include "util/log.h"
#include <strings.h>


typedef struct getter {
    json_t *obj;
    const char *where; /* "config.json" or "config.json: rope_scaling" */
    char *err;
    size_t errlen;
    int bad;
} getter;

static json_t *get(getter *g, const char *key)
{
    json_t *v = json_object_get(g->obj, key);
    return json_is_null(v) ? NULL : v;
}

/* Integer in [lo, hi]; absent -> def (required if def is INT32_MIN-ish). */
static int get_int(getter *g, const char *key, long long lo, long long hi, int def, int required)
{
    json_t *v = get(g, key);
    if (!v) {
        if (required && !g->bad) {
            errmsg_set(g->err, g->errlen, "%s: missing required field '%s'", g->where, key);
            g->bad = 1;
        }
        return def;
    }
    double d;
    if (json_is_integer(v)) d = (double)json_integer_value(v);
    else if (json_is_real(v) && json_real_value(v) == floor(json_real_value(v)))
        d = json_real_value(v);
    else d = NAN;
    if (!(d >= (double)lo && d <= (double)hi)) {
        if (!g->bad)
            errmsg_set(g->err, g->errlen, "%s: '%s' must be an integer in [%lld, %lld]", g->where, key,
                   lo, hi);
        g->bad = 1;
        return def;
    }
    return (int)d;
}

static double get_num(getter *g, const char *key, double lo, double hi, double def, int required)
{
    json_t *v = get(g, key);
    if (!v) {
        if (required && !g->bad) {
            errmsg_set(g->err, g->errlen, "%s: missing required field '%s'", g->where, key);
            g->bad = 1;
        }
        return def;
    }
    if (!json_is_number(v) || !(json_number_value(v) >= lo && json_number_value(v) <= hi)) {
        if (!g->bad)
            errmsg_set(g->err, g->errlen, "%s: '%s' must be a number in [%g, %g]", g->where, key, lo,
                   hi);
        g->bad = 1;
        return def;
    }
    return json_number_value(v);
}

static int get_bool(getter *g, const char *key, int def)
{
    json_t *v = get(g, key);
    if (!v) return def;
    if (!json_is_boolean(v)) {
        if (!g->bad) errmsg_set(g->err, g->errlen, "%s: '%s' must be true or false", g->where, key);
        g->bad = 1;
        return def;
    }
    return json_is_true(v);
}

/* eos_token_id: an int or a list of ints; appended to c->eos_token_ids. */
static int add_eos(model_config *c, json_t *v, const char *where, char *err, size_t errlen)
{
    if (!v || json_is_null(v)) return 0;
    json_t *one;
    size_t i, n = json_is_array(v) ? json_array_size(v) : 1;
    for (i = 0; i < n; i++) {
        one = json_is_array(v) ? json_array_get(v, i) : v;
        if (!json_is_integer(one) || json_integer_value(one) < 0 ||
            json_integer_value(one) > 0x7fffffff) {
            errmsg_set(err, errlen, "%s: eos_token_id must be a non-negative int or a list of them",
                   where);
            return -1;
        }
        int id = (int)json_integer_value(one), dup = 0;
        for (int k = 0; k < c->n_eos; k++) dup |= c->eos_token_ids[k] == id;
        if (!dup && c->n_eos < MODEL_MAX_EOS) c->eos_token_ids[c->n_eos++] = id;
    }
    return 0;
}

const char *model_rope_kind_name(model_rope_kind k)
{
    switch (k) {
    case MODEL_ROPE_LINEAR: return "linear";
    case MODEL_ROPE_DYNAMIC: return "dynamic";
    case MODEL_ROPE_LLAMA3: return "llama3";
    case MODEL_ROPE_YARN: return "yarn";
    case MODEL_ROPE_LONGROPE: return "longrope";
    default: return "default";
    }
}

/* rope_scaling[key]: a list of exactly n positive numbers into out. */
static int get_factor_list(json_t *rs, const char *key, int n, float *out, char *err,
                           size_t errlen)
{
    json_t *v = json_object_get(rs, key);
    if (!json_is_array(v) || (int)json_array_size(v) != n) {
        errmsg_set(err, errlen, "config.json: rope_scaling (longrope): '%s' must be a list of %d "
                   "numbers (rotary dimension / 2)%s", key, n, json_is_array(v) ? "" : ", it is missing");
        return -1;
    }
    for (int i = 0; i < n; i++) {
        json_t *x = json_array_get(v, (size_t)i);
        if (!json_is_number(x) || !(json_number_value(x) > 0) || json_number_value(x) > 1e9) {
            errmsg_set(err, errlen, "config.json: rope_scaling (longrope): %s[%d] must be a positive number",
                       key, i);
            return -1;
        }
        out[i] = (float)json_number_value(x);
    }
    return 0;
}

/* longrope ("su" is its old name, Phi3Config renames it): short/long
 * factors of rot_dim/2 each, optional factor and attention_factor;
 * original_max_position_embeddings from rope_scaling, else the top-level
 * key Phi-3 configs carry, else max_position_embeddings (as transformers'
 * _compute_longrope_parameters). */
static int parse_longrope(model_config *c, json_t *root, json_t *rs, char *err, size_t errlen)
{
    model_rope_cfg *r = &c->rope;
    getter s = {rs, "config.json: rope_scaling", err, errlen, 0};
    getter g = {root, "config.json", err, errlen, 0};
    r->kind = MODEL_ROPE_LONGROPE;
    r->factor = get_num(&s, "factor", 1e-6, 1e6, 0.0, 0);
    r->attention_factor = get_num(&s, "attention_factor", 0.0, 1e6, -1.0, 0);
    r->original_max_pos = get_int(&s, "original_max_position_embeddings", 1, 1 << 30, 0, 0);
    if (!r->original_max_pos)
        r->original_max_pos = get_int(&g, "original_max_position_embeddings", 1, 1 << 30,
                                      c->max_position_embeddings, 0);
    if (s.bad || g.bad) return -1;
    int n = (int)(c->head_dim * r->partial_rotary_factor) / 2;
    if (n < 1 || n > MODEL_ROPE_MAX_FACTORS) {
        errmsg_set(err, errlen, "config.json: longrope needs 1..%d rotary pairs, got %d",
                   MODEL_ROPE_MAX_FACTORS, n);
        return -1;
    }
    r->n_factors = n;
    if (get_factor_list(rs, "short_factor", n, r->short_factor, err, errlen) ||
        get_factor_list(rs, "long_factor", n, r->long_factor, err, errlen))
        return -1;
    return 0;
}

static int parse_rope(model_config *c, json_t *root, char *err, size_t errlen)
{
    getter g = {root, "config.json", err, errlen, 0};
    model_rope_cfg *r = &c->rope;
    memset(r, 0, sizeof *r);
    r->theta = get_num(&g, "rope_theta", 1e-3, 1e12, 10000.0, 0);
    r->partial_rotary_factor = get_num(&g, "partial_rotary_factor", 1e-3, 1.0, 1.0, 0);
    r->attention_factor = -1.0;
    r->truncate = 1;
    if (g.bad) return -1;
    json_t *rs = json_object_get(root, "rope_scaling");
    if (!rs || json_is_null(rs)) return 0;
    if (!json_is_object(rs)) {
        errmsg_set(err, errlen, "config.json: rope_scaling must be an object or null");
        return -1;
    }
    json_t *jt = json_object_get(rs, "rope_type");
    if (!jt || json_is_null(jt)) jt = json_object_get(rs, "type");
    if (!json_is_string(jt)) {
        errmsg_set(err, errlen, "config.json: rope_scaling needs a string 'rope_type' (or 'type')");
        return -1;
    }
    const char *t = json_string_value(jt);
    getter s = {rs, "config.json: rope_scaling", err, errlen, 0};
    if (!strcmp(t, "default")) {
        r->kind = MODEL_ROPE_DEFAULT;
        return 0;
    } else if (!strcmp(t, "linear")) {
        r->kind = MODEL_ROPE_LINEAR;
        r->factor = get_num(&s, "factor", 1e-6, 1e6, 1.0, 1);
    } else if (!strcmp(t, "dynamic")) {
        r->kind = MODEL_ROPE_DYNAMIC;
        r->factor = get_num(&s, "factor", 1e-6, 1e6, 1.0, 1);
    } else if (!strcmp(t, "llama3")) {
        r->kind = MODEL_ROPE_LLAMA3;
        r->factor = get_num(&s, "factor", 1e-6, 1e6, 1.0, 1);
        r->low_freq_factor = get_num(&s, "low_freq_factor", 1e-6, 1e6, 1.0, 1);
        r->high_freq_factor = get_num(&s, "high_freq_factor", 1e-6, 1e6, 1.0, 1);
        r->original_max_pos = get_int(&s, "original_max_position_embeddings", 1, 1 << 30, 0, 1);
        if (!s.bad && r->high_freq_factor <= r->low_freq_factor) {
            errmsg_set(err, errlen,
                   "config.json: rope_scaling: high_freq_factor must exceed low_freq_factor");
            return -1;
        }
    } else if (!strcmp(t, "yarn")) {
        r->kind = MODEL_ROPE_YARN;
        r->factor = get_num(&s, "factor", 1e-6, 1e6, 1.0, 1);
        r->attention_factor = get_num(&s, "attention_factor", 0.0, 1e6, -1.0, 0);
        r->beta_fast = get_num(&s, "beta_fast", 0.0, 1e6, 0.0, 0);
        r->beta_slow = get_num(&s, "beta_slow", 0.0, 1e6, 0.0, 0);
        r->mscale = get_num(&s, "mscale", 0.0, 1e6, 0.0, 0);
        r->mscale_all_dim = get_num(&s, "mscale_all_dim", 0.0, 1e6, 0.0, 0);
        r->original_max_pos = get_int(&s, "original_max_position_embeddings", 1, 1 << 30, 0, 0);
        r->truncate = get_bool(&s, "truncate", 1);
    } else if (!strcmp(t, "longrope") || !strcmp(t, "su")) {
        return parse_longrope(c, root, rs, err, errlen);
    } else {
        errmsg_set(err, errlen,
               "config.json: unsupported rope_scaling type '%.32s' (supported: default, linear, "
               "dynamic, llama3, yarn, longrope)",
               t);
        return -1;
    }
    return s.bad ? -1 : 0;
}

/* MoE fields with the transformers config classes' defaults: Qwen3MoeConfig
 * (num_experts 128, top-k 8, moe_intermediate_size 768, norm_topk_prob
 * false, decoder_sparse_step 1, mlp_only_layers []) or MixtralConfig
 * (num_local_experts 8, top-k 2, experts as wide as intermediate_size,
 * always renormalized). */
static int parse_moe(model_config *c, json_t *root, char *err, size_t errlen)
{
    const model_arch *ar = c->arch;
    getter g = {root, "config.json", err, errlen, 0};
    int qwen = ar->moe_inter_key != NULL;
    /* Qwen2MoeConfig: 60 experts, top-4, width 1408, shared expert 5632 */
    int q2 = ar->shared_inter_key != NULL;
    c->moe_score = MOE_SCORE_SOFTMAX, c->moe_topk_method = MOE_TOPK_GREEDY;
    c->n_group = c->topk_group = 1, c->routed_scale = 1.0f, c->moe_layer_freq = 1;
    if (qwen) {
        c->n_expert = get_int(&g, "num_experts", 0, 4096, q2 ? 60 : 128, 0);
        c->n_expert_used = get_int(&g, "num_experts_per_tok", 1, 4096, q2 ? 4 : 8, 0);
        c->moe_inter = get_int(&g, ar->moe_inter_key, 1, 1 << 20, q2 ? 1408 : 768, 0);
        c->norm_topk_prob = get_bool(&g, "norm_topk_prob", 0);
        c->decoder_sparse_step = get_int(&g, "decoder_sparse_step", 1, 1 << 20, 1, 0);
        if (q2) c->shared_inter = get_int(&g, ar->shared_inter_key, 0, 1 << 20, 5632, 0);
    } else {
        c->n_expert = get_int(&g, "num_local_experts", 1, 4096, 8, 0);
        c->n_expert_used = get_int(&g, "num_experts_per_tok", 1, 4096, 2, 0);
        c->moe_inter = c->intermediate_size;
        c->decoder_sparse_step = 1;
    }
    if (ar->moe_renorm >= 0) c->norm_topk_prob = ar->moe_renorm;
    if (g.bad) return -1;
    if (c->n_expert > 0 && c->n_expert_used > c->n_expert) {
        errmsg_set(err, errlen, "config.json: num_experts_per_tok (%d) exceeds the number of "
                                "experts (%d)", c->n_expert_used, c->n_expert);
        return -1;
    }
    memset(c->mlp_only, 0, sizeof c->mlp_only);
    json_t *mo = json_object_get(root, "mlp_only_layers");
    if (mo && !json_is_null(mo)) {
        if (!qwen || !json_is_array(mo)) {
            errmsg_set(err, errlen, qwen ? "config.json: mlp_only_layers must be a list of layer "
                                           "indices"
                                         : "config.json: mlp_only_layers is not supported for %s",
                       c->architecture);
            return -1;
        }
        size_t i;
        json_t *v;
        json_array_foreach(mo, i, v) {
            if (!json_is_integer(v) || json_integer_value(v) < 0) {
                errmsg_set(err, errlen, "config.json: mlp_only_layers[%zu] is not a layer index", i);
                return -1;
            }
            long long il = json_integer_value(v);
            if (il < c->n_layer) c->mlp_only[il / 8] |= (unsigned char)(1u << (il % 8));
        }
    }
    return 0;
}

/* DeepSeek V2 / V3 (DeepseekV2Config / DeepseekV3Config defaults; the
 * V2 class has no experts unless n_routed_experts is given): routed and
 * shared experts, dense first layers, the router's scoring, grouping,
 * normalization and scale.  V2 applies routed_scaling_factor only to
 * weights it does not renormalize, V3 always; both renormalize only when
 * top-k > 1. */
static int parse_deepseek_moe(model_config *c, json_t *root, char *err, size_t errlen)
{
    const int v3 = c->arch->deepseek == 3;
    getter g = {root, "config.json", err, errlen, 0};
    /* an explicit null is Python's None: no routed / shared experts (the
     * defaults apply only to absent keys) */
    c->n_expert = get_int(&g, "n_routed_experts", 0, 4096, v3 && !json_object_get(root, "n_routed_experts") ? 256 : 0, 0);
    c->n_expert_used = get_int(&g, "num_experts_per_tok", 1, 4096, v3 ? 8 : 0, 0);
    c->moe_inter = get_int(&g, "moe_intermediate_size", 1, 1 << 20, v3 ? 2048 : 1407, 0);
    int n_shared = get_int(&g, "n_shared_experts", 0, 1024, v3 && !json_object_get(root, "n_shared_experts") ? 1 : 0, 0);
    c->first_k_dense = get_int(&g, "first_k_dense_replace", 0, 1 << 20, v3 ? 3 : 0, 0);
    c->moe_layer_freq = get_int(&g, "moe_layer_freq", 1, 1 << 20, 1, 0);
    c->n_group = get_int(&g, "n_group", 1, MOE_MAX_GROUPS, v3 ? 8 : 1, 0);
    c->topk_group = get_int(&g, "topk_group", 1, MOE_MAX_GROUPS, v3 ? 4 : 1, 0);
    c->norm_topk_prob = get_bool(&g, "norm_topk_prob", v3);
    double rsf = get_num(&g, "routed_scaling_factor", 1e-6, 1e6, v3 ? 2.5 : 1.0, 0);
    if (g.bad) return -1;
    json_t *sf = get(&g, "scoring_func"), *tm = get(&g, "topk_method");
    const char *sfn = json_is_string(sf) ? json_string_value(sf) : v3 ? "sigmoid" : "softmax";
    const char *tmn = json_is_string(tm) ? json_string_value(tm) : v3 ? "noaux_tc" : "greedy";
    if (!strcmp(sfn, "softmax")) c->moe_score = MOE_SCORE_SOFTMAX;
    else if (!strcmp(sfn, "sigmoid")) c->moe_score = MOE_SCORE_SIGMOID;
    else {
        errmsg_set(err, errlen, "config.json: scoring_func '%.32s' is not supported (softmax, sigmoid)", sfn);
        return -1;
    }
    if (!strcmp(tmn, "greedy")) c->moe_topk_method = MOE_TOPK_GREEDY;
    else if (!strcmp(tmn, "group_limited_greedy")) c->moe_topk_method = MOE_TOPK_GROUP_MAX;
    else if (!strcmp(tmn, "noaux_tc")) c->moe_topk_method = MOE_TOPK_GROUP_TOP2;
    else {
        errmsg_set(err, errlen, "config.json: topk_method '%.32s' is not supported (greedy, "
                                "group_limited_greedy, noaux_tc)", tmn);
        return -1;
    }
    c->shared_inter = n_shared * c->moe_inter;
    c->moe_layer_rule = 1;
    c->decoder_sparse_step = 1;
    memset(c->mlp_only, 0, sizeof c->mlp_only);
    if (c->n_expert == 0) return 0; /* dense */
    if (c->n_expert_used < 1) {
        errmsg_set(err, errlen, "config.json: n_routed_experts is set but num_experts_per_tok is not");
        return -1;
    }
    if (c->n_expert_used > c->n_expert) {
        errmsg_set(err, errlen, "config.json: num_experts_per_tok (%d) exceeds n_routed_experts (%d)",
                   c->n_expert_used, c->n_expert);
        return -1;
    }
    if (c->moe_topk_method != MOE_TOPK_GREEDY) {
        int gs = c->n_expert / c->n_group;
        if (c->n_expert % c->n_group || c->topk_group > c->n_group ||
            c->n_expert_used > c->topk_group * gs ||
            (c->moe_topk_method == MOE_TOPK_GROUP_TOP2 && gs < 2)) {
            errmsg_set(err, errlen, "config.json: grouped top-k needs n_routed_experts (%d) a "
                       "multiple of n_group (%d), topk_group (%d) <= n_group, "
                       "num_experts_per_tok (%d) <= topk_group x experts per group%s",
                       c->n_expert, c->n_group, c->topk_group, c->n_expert_used,
                       c->moe_topk_method == MOE_TOPK_GROUP_TOP2 ? " and >= 2 experts per group" : "");
            return -1;
        }
    }
    if (c->n_expert_used == 1) c->norm_topk_prob = 0;
    c->routed_scale = (!v3 && c->norm_topk_prob) ? 1.0f : (float)rsf;
    return 0;
}

/* Multi-head latent attention (DeepSeek): the low-rank sizes, head_dim =
 * qk_rope_head_dim (the rotary part, what rope.c works on), one KV "head"
 * (the latent), and the softmax scale with YaRN's mscale(factor,
 * mscale_all_dim)^2 as modeling_deepseek.py's DeepseekV2Attention. */
static int parse_mla(model_config *c, json_t *root, char *err, size_t errlen)
{
    getter g = {root, "config.json", err, errlen, 0};
    /* null (V2-Lite, Moonlight) = plain q_proj; absent = the class default */
    int v3 = c->arch->deepseek == 3 && !json_object_get(root, "q_lora_rank");
    c->q_lora_rank = get_int(&g, "q_lora_rank", 0, 1 << 16, v3 ? 1536 : 0, 0);
    c->kv_lora_rank = get_int(&g, "kv_lora_rank", 1, 1 << 16, 512, 0);
    c->qk_nope_dim = get_int(&g, "qk_nope_head_dim", 1, 4096, 128, 0);
    c->qk_rope_dim = get_int(&g, "qk_rope_head_dim", 2, 4096, 64, 0);
    c->v_head_dim = get_int(&g, "v_head_dim", 1, 4096, 128, 0);
    if (g.bad) return -1;
    if (c->qk_rope_dim % 2) {
        errmsg_set(err, errlen, "config.json: qk_rope_head_dim (%d) must be even", c->qk_rope_dim);
        return -1;
    }
    if (c->attention_bias) {
        errmsg_set(err, errlen, "config.json: attention_bias is not supported for %s",
                   c->architecture);
        return -1;
    }
    c->head_dim = c->qk_rope_dim;
    c->n_kv_head = 1;
    double scale = 1.0 / sqrt((double)(c->qk_nope_dim + c->qk_rope_dim));
    json_t *rs = json_object_get(root, "rope_scaling");
    json_t *ma = json_is_object(rs) ? json_object_get(rs, "mscale_all_dim") : NULL;
    if (c->rope.kind != MODEL_ROPE_DEFAULT && json_is_number(ma) && json_number_value(ma) != 0.0 &&
        c->rope.factor > 1.0) {
        double ms = 0.1 * json_number_value(ma) * log(c->rope.factor) + 1.0;
        scale *= ms * ms;
    }
    c->mla_scale = (float)scale;
    return 0;
}

int model_config_layer_moe(const model_config *c, int il)
{
    if (!c->arch || c->arch->mlp != MODEL_MLP_MOE || c->n_expert <= 0) return 0;
    if (il < 0 || il >= c->n_layer) return 0;
    if (c->moe_layer_rule == 1)
        return il >= c->first_k_dense && il % (c->moe_layer_freq > 0 ? c->moe_layer_freq : 1) == 0;
    if (c->mlp_only[il / 8] & (1u << (il % 8))) return 0;
    return (il + 1) % c->decoder_sparse_step == 0;
}

/* A soft-cap key: absent -> def, null -> 0 (none, as transformers' None),
 * else a positive number. */
static float get_softcap(getter *g, const char *key, float def)
{
    json_t *v = json_object_get(g->obj, key);
    if (!v) return def;
    if (json_is_null(v)) return 0.0f;
    if (!json_is_number(v) || !(json_number_value(v) > 0.0 && json_number_value(v) < 1e9)) {
        if (!g->bad) errmsg_set(g->err, g->errlen, "%s: '%s' must be a positive number or null",
                                g->where, key);
        g->bad = 1;
        return def;
    }
    return (float)json_number_value(v);
}

/* Gemma's fields (arch flags in arch.h): soft-caps, query_pre_attn_scalar
 * as the softmax scale, rope_local_base_freq, and the sliding layers from
 * layer_types (each "sliding_attention" or "full_attention") or, without
 * it, transformers' rule: layer il is full when (il + 1) % pattern == 0. */
static int parse_gemma(model_config *c, json_t *root, char *err, size_t errlen)
{
    const model_arch *ar = c->arch;
    getter g = {root, "config.json", err, errlen, 0};
    c->attn_softcap = ar->softcap_keys & 1 ? get_softcap(&g, "attn_logit_softcapping",
                                                         ar->attn_softcap)
                                           : ar->attn_softcap;
    c->final_softcap = ar->softcap_keys & 2 ? get_softcap(&g, "final_logit_softcapping",
                                                          ar->final_softcap)
                                            : ar->final_softcap;
    if (ar->qpas_default > 0.0f) {
        double q = get_num(&g, "query_pre_attn_scalar", 1e-6, 1e9, ar->qpas_default, 0);
        c->attn_mult = (float)pow(q, -0.5); /* query_pre_attn_scalar**-0.5 */
    }
    if (ar->rope_local)
        c->rope_local_theta = get_num(&g, "rope_local_base_freq", 1e-3, 1e12, 10000.0, 0);
    if (ar->qpas_default > 0.0f && get_bool(&g, "use_bidirectional_attention", 0)) {
        errmsg_set(err, errlen, "config.json: use_bidirectional_attention (EmbeddingGemma) is "
                                "not supported");
        return -1;
    }
    if (g.bad) return -1;
    memset(c->swa_layers, 0, sizeof c->swa_layers);
    if (ar->window != MODEL_WINDOW_LAYER_TYPES) return 0;
    json_t *lt = json_object_get(root, "layer_types");
    if (lt && !json_is_null(lt)) {
        if (!json_is_array(lt) || json_array_size(lt) != (size_t)c->n_layer) {
            errmsg_set(err, errlen, "config.json: layer_types must be a list of %d layer types "
                                    "(num_hidden_layers)", c->n_layer);
            return -1;
        }
        for (int il = 0; il < c->n_layer; il++) {
            const char *t = json_string_value(json_array_get(lt, (size_t)il));
            int sl = t && !strcmp(t, "sliding_attention");
            if (!sl && (!t || strcmp(t, "full_attention"))) {
                errmsg_set(err, errlen, "config.json: layer_types[%d] must be "
                                        "\"sliding_attention\" or \"full_attention\"", il);
                return -1;
            }
            if (sl) c->swa_layers[il / 8] |= (unsigned char)(1u << (il % 8));
        }
        return 0;
    }
    const char *pk = json_object_get(root, "sliding_window_pattern") ? "sliding_window_pattern"
                                                                     : "_sliding_window_pattern";
    int pat = get_int(&g, pk, 1, 1 << 20, ar->window_pattern > 0 ? ar->window_pattern : 1, 0);
    if (g.bad) return -1;
    for (int il = 0; il < c->n_layer; il++)
        if ((il + 1) % pat) c->swa_layers[il / 8] |= (unsigned char)(1u << (il % 8));
    return 0;
}

/* Gemma3ForConditionalGeneration: the text model's config (a new object):
 * text_config (or the top level when absent) over `defaults`, with the
 * top level's token ids and dtype where text_config has none.  NULL with
 * err set on bad input. */
static json_t *nested_text_config(json_t *root, const char *defaults, char *err, size_t errlen)
{
    json_error_t jerr;
    json_t *tc = json_object_get(root, "text_config");
    if (tc && !json_is_null(tc) && !json_is_object(tc)) {
        errmsg_set(err, errlen, "config.json: text_config must be an object");
        return NULL;
    }
    json_t *text = json_deep_copy(tc && json_is_object(tc) ? tc : root);
    json_t *def = json_loads(defaults, 0, &jerr);
    if (!text || !def) {
        json_decref(text), json_decref(def);
        errmsg_set(err, errlen, "out of memory");
        return NULL;
    }
    static const char *const up[] = {"eos_token_id", "bos_token_id", "pad_token_id",
                                     "torch_dtype", "dtype", "architectures"};
    for (size_t i = 0; i < sizeof up / sizeof up[0]; i++) {
        json_t *v = json_object_get(root, up[i]);
        if (v && !json_object_get(text, up[i])) json_object_set(text, up[i], v);
    }
    json_object_update_missing(text, def);
    json_decref(def);
    return text;
}

/* architectures[0] "<Family>ForSequenceClassification": the decoder of
 * "<Family>ForCausalLM" with HF's GenericForSequenceClassification head
 * (`score`, no bias).  Labels: id2label when present (HF's num_labels is
 * its length), else num_labels, else 2 (PretrainedConfig's default), named
 * LABEL_i.  0 (c->arch set, or left NULL when no such family), or -1. */
static int parse_classifier(model_config *c, json_t *root, char *err, size_t errlen)
{
    static const char suf[] = "ForSequenceClassification";
    size_t n = strlen(c->architecture), ns = sizeof suf - 1;
    if (n <= ns || strcmp(c->architecture + n - ns, suf)) return 0;
    char base[96];
    snprintf(base, sizeof base, "%.*sForCausalLM", (int)(n - ns), c->architecture);
    const model_arch *ar = model_arch_find(base);
    if (!ar || ar->mlp != MODEL_MLP_DENSE) return 0;
    json_t *ids = json_object_get(root, "id2label");
    int nl = 2;
    if (json_is_object(ids) && json_object_size(ids) > 0) {
        nl = (int)json_object_size(ids);
    } else {
        getter g = {root, "config.json", err, errlen, 0};
        nl = get_int(&g, "num_labels", 1, MODEL_MAX_LABELS, 2, 0);
        if (g.bad) return -1;
        ids = NULL;
    }
    if (nl < 1 || nl > MODEL_MAX_LABELS) {
        errmsg_set(err, errlen, "config.json: %d labels (sglc keeps at most %d)", nl, MODEL_MAX_LABELS);
        return -1;
    }
    for (int i = 0; i < nl; i++) {
        char key[16];
        snprintf(key, sizeof key, "%d", i);
        json_t *v = ids ? json_object_get(ids, key) : NULL;
        if (ids && !json_is_string(v)) {
            errmsg_set(err, errlen, "config.json: id2label must map \"0\" .. \"%d\" to names", nl - 1);
            return -1;
        }
        snprintf(c->labels[i], MODEL_LABEL_LEN, "%s", v ? json_string_value(v) : "");
        if (!v) snprintf(c->labels[i], MODEL_LABEL_LEN, "LABEL_%d", i);
    }
    c->n_labels = nl;
    c->arch = ar;
    return 0;
}

/* SGLang's get_context_length(): max_position_embeddings times the rope
 * factor, except for llama3 and configs that state an original length. */
static int derive_context_length(const model_config *c, json_t *root)
{
    double f = 1.0;
    json_t *rs = json_object_get(root, "rope_scaling");
    if (c->rope.kind != MODEL_ROPE_DEFAULT && json_is_object(rs)) {
        f = c->rope.factor;
        if (json_object_get(rs, "original_max_position_embeddings")) f = 1.0;
        if (c->rope.kind == MODEL_ROPE_LLAMA3) f = 1.0;
        if (!(f > 0)) f = 1.0; /* longrope without a factor: rope_scaling.get("factor", 1) */
    }
    double v = f * (double)c->max_position_embeddings;
    if (v > (double)(1 << 30)) v = (double)(1 << 30);
    if (v < 1) v = 1;
    return (int)v;
}

int model_config_parse(model_config *c, const char *json, size_t len, const char *override_json,
                       int context_length, char *err, size_t errlen)
{
    memset(c, 0, sizeof *c);
    json_error_t jerr;
    json_t *root = json_loadb(json, len, 0, &jerr);
    if (!root) {
        errmsg_set(err, errlen, "config.json: bad JSON: %s (line %d, column %d)", jerr.text, jerr.line,
               jerr.column);
        return -1;
    }
    int rc = -1;
    if (!json_is_object(root)) {
        errmsg_set(err, errlen, "config.json: not a JSON object");
        goto out;
    }
    if (override_json && *override_json) {
        json_t *ov = json_loads(override_json, 0, &jerr);
        if (!ov || !json_is_object(ov)) {
            errmsg_set(err, errlen, "--json-model-override-args: %s",
                   ov ? "must be a JSON object" : jerr.text);
            json_decref(ov);
            goto out;
        }
        json_object_update(root, ov);
        json_decref(ov);
    }
    json_t *archs = json_object_get(root, "architectures");
    json_t *a0 = json_is_array(archs) ? json_array_get(archs, 0) : NULL;
    char supported[512];
    model_arch_list(supported, sizeof supported);
    if (!json_is_string(a0)) {
        errmsg_set(err, errlen, "config.json: no 'architectures' list (supported: %s)", supported);
        goto out;
    }
    snprintf(c->architecture, sizeof c->architecture, "%s", json_string_value(a0));
    c->arch = model_arch_find(json_string_value(a0));
    if (!c->arch && parse_classifier(c, root, err, errlen)) goto out;
    if (!c->arch) {
        errmsg_set(err, errlen, "config.json: unsupported architecture '%.64s' (supported: %s)",
               json_string_value(a0), supported);
        goto out;
    }
    if (c->arch->text_config_defaults) {
        json_t *text = nested_text_config(root, c->arch->text_config_defaults, err, errlen);
        if (!text) goto out;
        json_decref(root);
        root = text;
    }
    getter g = {root, "config.json", err, errlen, 0};
    c->hidden_size = get_int(&g, "hidden_size", 1, 1 << 16, 0, 1);
    c->intermediate_size = get_int(&g, "intermediate_size", 1, 1 << 20, 0, 1);
    c->n_layer = get_int(&g, "num_hidden_layers", 1, 1024, 0, 1);
    c->n_head = get_int(&g, "num_attention_heads", 1, 1024, 0, 1);
    c->n_kv_head = get_int(&g, "num_key_value_heads", 1, 1024, c->n_head, 0);
    c->vocab_size = get_int(&g, "vocab_size", 1, 1 << 22, 0, 1);
    if (g.bad) goto out;
    int def_hd = c->hidden_size / c->n_head;
    c->head_dim = get_int(&g, "head_dim", 2, 1024, def_hd, 0);
    c->rms_norm_eps = (float)get_num(&g, "rms_norm_eps", 0.0, 1.0, 1e-6, 0);
    c->max_position_embeddings = get_int(&g, "max_position_embeddings", 1, 1 << 30, 2048, 0);
    c->tie_word_embeddings = get_bool(&g, "tie_word_embeddings", c->arch->tie_default);
    c->sliding_window = get_int(&g, "sliding_window", 0, 1 << 30, 0, 0);
    c->use_sliding_window = get_bool(&g, "use_sliding_window", 0);
    c->max_window_layers = get_int(&g, "max_window_layers", 0, 1 << 20, 0, 0);
    c->attention_bias = get_bool(&g, "attention_bias", 0);
    c->mlp_bias = get_bool(&g, "mlp_bias", 0);
    c->bos_token_id = get_int(&g, "bos_token_id", 0, 0x7fffffff, -1, 0);
    if (g.bad) goto out;
    json_t *act = json_object_get(root, c->arch->act_key ? c->arch->act_key : "hidden_act");
    const char *act_def = c->arch->act == MODEL_ACT_GELU_TANH ? "gelu_pytorch_tanh" : "silu";
    snprintf(c->hidden_act, sizeof c->hidden_act, "%s",
             json_is_string(act) ? json_string_value(act) : act_def);
    json_t *tdt = json_object_get(root, "torch_dtype");
    if (!tdt || json_is_null(tdt)) tdt = json_object_get(root, "dtype");
    c->torch_dtype = json_is_string(tdt) ? dtype_parse(json_string_value(tdt)) : -1;
    if (add_eos(c, json_object_get(root, "eos_token_id"), "config.json", err, errlen)) goto out;
    if (c->n_head % c->n_kv_head) {
        errmsg_set(err, errlen,
               "config.json: num_attention_heads (%d) is not a multiple of num_key_value_heads (%d)",
               c->n_head, c->n_kv_head);
        goto out;
    }
    if (c->head_dim % 2) {
        errmsg_set(err, errlen, "config.json: head_dim (%d) must be even for rotary embeddings",
               c->head_dim);
        goto out;
    }
    if (c->bos_token_id >= c->vocab_size) c->bos_token_id = -1;
    const model_arch *ar = c->arch;
    if (ar->act == MODEL_ACT_SILU && strcmp(c->hidden_act, "silu") != 0) {
        errmsg_set(err, errlen, "config.json: hidden_act '%s' is not supported for %s (expected silu)",
               c->hidden_act, c->architecture);
        goto out;
    }
    if (ar->act == MODEL_ACT_GELU_TANH && strcmp(c->hidden_act, "gelu_pytorch_tanh") != 0) {
        errmsg_set(err, errlen, "config.json: %s '%s' is not supported for %s (expected "
                   "gelu_pytorch_tanh)", ar->act_key ? ar->act_key : "hidden_act", c->hidden_act,
                   c->architecture);
        goto out;
    }
    if (c->mlp_bias && ar->mlp_bias == 0) c->mlp_bias = 0; /* the class ignores it */
    if (parse_rope(c, root, err, errlen)) goto out;
    if (ar->mla && parse_mla(c, root, err, errlen)) goto out;
    int rot = (int)(c->head_dim * c->rope.partial_rotary_factor);
    if (rot < 2 || rot % 2) {
        errmsg_set(err, errlen, "config.json: rotary dimension %d (head_dim x partial_rotary_factor) "
                            "must be even and >= 2", rot);
        goto out;
    }
    if (ar->mlp == MODEL_MLP_MOE &&
        (ar->deepseek ? parse_deepseek_moe : parse_moe)(c, root, err, errlen)) goto out;
    c->embed_mult = 1.0f, c->attn_mult = 0.0f, c->resid_mult = 1.0f, c->logits_scaling = 1.0f;
    if (ar->granite_scalars) {
        getter gs = {root, "config.json", err, errlen, 0};
        c->embed_mult = (float)get_num(&gs, "embedding_multiplier", 1e-6, 1e6, 1.0, 0);
        c->attn_mult = (float)get_num(&gs, "attention_multiplier", 1e-6, 1e6, 1.0, 0);
        c->resid_mult = (float)get_num(&gs, "residual_multiplier", 1e-6, 1e6, 1.0, 0);
        c->logits_scaling = (float)get_num(&gs, "logits_scaling", 1e-6, 1e6, 1.0, 0);
        if (gs.bad) goto out;
        json_t *pe = json_object_get(root, "position_embedding_type");
        if (pe && !json_is_null(pe) &&
            (!json_is_string(pe) || strcmp(json_string_value(pe), "rope"))) {
            errmsg_set(err, errlen, "config.json: position_embedding_type must be \"rope\" for %s",
                       c->architecture);
            goto out;
        }
    }
    if (parse_gemma(c, root, err, errlen)) goto out;
    if (ar->parse && ar->parse(c, root, err, errlen)) goto out;
    if (ar->check && ar->check(c, err, errlen)) goto out;
    int derived = derive_context_length(c, root);
    if (context_length > 0) {
        if (context_length > derived) {
            /* SGLang refuses this unless SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN is set */
            const char *allow = getenv("SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN");
            if (!allow || !*allow || !strcmp(allow, "0") || !strcasecmp(allow, "false")) {
                errmsg_set(err, errlen,
                       "--context-length %d is longer than the model's context length %d "
                       "(derived from max_position_embeddings and rope_scaling); set "
                       "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1 to allow it",
                       context_length, derived);
                goto out;
            }
            log_warn("--context-length %d is greater than the derived context length %d; "
                     "outputs past it may be wrong", context_length, derived);
        }
        c->context_length = context_length;
    } else {
        c->context_length = derived;
    }
    rc = 0;
out:
    json_decref(root);
    return rc;
}


int model_config_load(model_config *c, const char *dir, const char *override_json,
                      int context_length, char *err, size_t errlen)
{
    char path[4096];
    size_t len;
    snprintf(path, sizeof path, "%s/config.json", dir);
    char *text = fileio_read(path, 16u << 20, &len);
    if (!text) {
        errmsg_set(err, errlen, "%s: cannot read (missing, unreadable or over 16 MiB)", path);
        return -1;
    }
    int rc = model_config_parse(c, text, len, override_json, context_length, err, errlen);
    free(text);
    if (rc) return rc;
    snprintf(path, sizeof path, "%s/generation_config.json", dir);
    text = fileio_read(path, 16u << 20, &len);
    if (text) {
        json_error_t jerr;
        json_t *g = json_loadb(text, len, 0, &jerr);
        free(text);
        if (!g || !json_is_object(g)) {
            errmsg_set(err, errlen, "%s: bad JSON", path);
            json_decref(g);
            return -1;
        }
        rc = add_eos(c, json_object_get(g, "eos_token_id"), "generation_config.json", err, errlen);
        json_decref(g);
    }
    return rc;
}

int model_config_layer_window(const model_config *c, int il)
{
    if (c->sliding_window <= 0) return 0;
    switch (c->arch->window) {
    case MODEL_WINDOW_ALL: return 1;
    case MODEL_WINDOW_QWEN2: return c->use_sliding_window && il >= c->max_window_layers;
    case MODEL_WINDOW_LAYER_TYPES: return model_config_layer_sliding(c, il);
    default: return 0;
    }
}

int model_config_layer_sliding(const model_config *c, int il)
{
    if (!c->arch || c->arch->window != MODEL_WINDOW_LAYER_TYPES || il < 0 || il >= c->n_layer)
        return 0;
    return (c->swa_layers[il / 8] >> (il % 8)) & 1;
}
