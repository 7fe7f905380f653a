/* config — a Hugging Face config.json, parsed into what the forward needs.
 *
 * DESIGN: parse once with jansson into a flat struct of plain values; no
 * JSON survives the call.  `--json-model-override-args` is a JSON object
 * merged over the top level of config.json before parsing (like SGLang's
 * hf_config.update()).  Missing optional fields take the defaults of the
 * transformers config class (e.g. num_key_value_heads = num_attention_heads,
 * head_dim = hidden_size / num_attention_heads).  The architecture string
 * is looked up in the registry (arch.h); an unknown one is an error that
 * lists the supported ones.  Sizes are bounded so a hostile config cannot
 * make the loader allocate absurd buffers.
 */
#ifndef SGLC_MODEL_CONFIG_H
#define SGLC_MODEL_CONFIG_H

#include <stddef.h>

struct model_arch;

typedef enum model_rope_kind {
    MODEL_ROPE_DEFAULT = 0,
    MODEL_ROPE_LINEAR,
    MODEL_ROPE_DYNAMIC,
    MODEL_ROPE_LLAMA3,
    MODEL_ROPE_YARN,
    MODEL_ROPE_LONGROPE,          /* "longrope" (and its old name "su"): Phi-3 / Phi-4 */
} model_rope_kind;

/* Most per-dimension longrope factors (rot_dim / 2, head_dim <= 1024). */
#define MODEL_ROPE_MAX_FACTORS 512

/* rope_scaling, as transformers' modeling_rope_utils reads it. */
typedef struct model_rope_cfg {
    model_rope_kind kind;
    double theta;                 /* rope_theta */
    double partial_rotary_factor; /* 1.0 unless the config says otherwise */
    double factor;                /* linear, dynamic, llama3, yarn; longrope: 0 = absent */
    double low_freq_factor;       /* llama3 */
    double high_freq_factor;      /* llama3 */
    int original_max_pos;         /* llama3 (required), yarn (optional); 0 = absent;
                                   * longrope: rope_scaling's or the top-level key, else
                                   * max_position_embeddings */
    double attention_factor;      /* yarn, longrope; < 0 = absent */
    double beta_fast, beta_slow;  /* yarn; 0 = absent (HF: `or 32`, `or 1`) */
    double mscale, mscale_all_dim;/* yarn; 0 = absent */
    int truncate;                 /* yarn; default 1 */
    /* longrope: per rotary pair, the short factors (sequences up to
     * original_max_pos tokens) and the long ones (longer) */
    int n_factors;                /* = rot_dim / 2 */
    float short_factor[MODEL_ROPE_MAX_FACTORS];
    float long_factor[MODEL_ROPE_MAX_FACTORS];
} model_rope_cfg;

#define MODEL_MAX_EOS 16
/* sequence-classification heads: labels kept, and the longest label name */
#define MODEL_MAX_LABELS 64
#define MODEL_LABEL_LEN 48

typedef struct model_config {
    char architecture[64];        /* architectures[0] */
    const struct model_arch *arch;/* registry entry (static, borrowed) */
    int hidden_size;
    int intermediate_size;
    int n_layer;                  /* num_hidden_layers */
    int n_head;                   /* num_attention_heads */
    int n_kv_head;                /* num_key_value_heads */
    int head_dim;
    int vocab_size;
    float rms_norm_eps;
    model_rope_cfg rope;
    int max_position_embeddings;
    int context_length;           /* effective: --context-length or derived as SGLang does */
    int tie_word_embeddings;
    int sliding_window;           /* 0 = none */
    int use_sliding_window;       /* Qwen2/3 switch (default 0) */
    int max_window_layers;        /* Qwen2/3: layers >= this use the window */
    int attention_bias;
    int mlp_bias;
    char hidden_act[32];
    /* mixture of experts (arch->mlp == MODEL_MLP_MOE; all 0 otherwise) */
    int n_expert;                 /* num_experts (Qwen3-MoE) / num_local_experts (Mixtral) */
    int n_expert_used;            /* num_experts_per_tok (top-k) */
    int moe_inter;                /* expert width: moe_intermediate_size or intermediate_size */
    int norm_topk_prob;           /* renormalize the top-k weights (Mixtral: always 1) */
    int decoder_sparse_step;      /* Qwen3-MoE: layer il is sparse if (il+1) % step == 0 */
    unsigned char mlp_only[128];  /* bitmap of layers forced dense (mlp_only_layers) */
    int shared_inter;             /* shared expert width (Qwen2-MoE, DeepSeek); 0 = none */
    int moe_score;                /* moe_score_fn: softmax, or sigmoid (DeepSeek V3) */
    int moe_topk_method;          /* moe_topk_method: greedy / group_limited_greedy / noaux_tc */
    int n_group, topk_group;      /* DeepSeek grouped top-k (1, 1 = no groups) */
    float routed_scale;           /* routed_scaling_factor as applied (V2: only unnormalized) */
    int moe_layer_rule;           /* 0: Qwen (decoder_sparse_step, mlp_only_layers);
                                   * 1: DeepSeek (layer >= first_k_dense_replace and
                                   *    layer % moe_layer_freq == 0) */
    int first_k_dense, moe_layer_freq;
    /* multi-head latent attention (arch->mla; head_dim = qk_rope_dim, n_kv_head = 1) */
    int q_lora_rank;              /* 0 = plain q_proj (DeepSeek-V2-Lite) */
    int kv_lora_rank, qk_nope_dim, qk_rope_dim, v_head_dim;
    float mla_scale;              /* softmax scale: (nope + rope)^-1/2 * yarn mscale(mscale_all_dim)^2 */
    /* Granite scalars (arch->granite_scalars; 1, 0, 1, 1 otherwise) */
    float embed_mult;             /* embedding_multiplier: x = embed * m */
    float attn_mult;              /* attention_multiplier: softmax scale; 0 = 1/sqrt(head_dim) */
    float resid_mult;             /* residual_multiplier: x += block_out * m */
    float logits_scaling;         /* logits = lm_head(x) / s */
    /* Gemma (0 = none): score / logit soft-caps, the local rope base of
     * sliding layers, and which layers slide (MODEL_WINDOW_LAYER_TYPES) */
    float attn_softcap;           /* scores = cap * tanh(scores / cap) */
    float final_softcap;          /* logits = cap * tanh(logits / cap) */
    double rope_local_theta;      /* rope_local_base_freq; 0 = every layer uses rope */
    unsigned char swa_layers[128];/* bitmap of sliding layers */
    /* *ForSequenceClassification (architectures[0] names the base model's
     * family: Qwen3ForSequenceClassification runs Qwen3's decoder): a
     * `score` head (n_labels, H) on the last token replaces lm_head */
    int n_labels;                 /* 0 = a causal LM; else len(id2label), num_labels or 2 */
    char labels[MODEL_MAX_LABELS][MODEL_LABEL_LEN]; /* id2label[i] (LABEL_i by default) */
    /* hybrid Mamba2 models (NemotronH, nemotron_h.c; n_mamba = 0 otherwise) */
    char layer_kinds[1025];       /* per layer: 'M' Mamba2 mixer, '*' attention, '-' MLP
                                   * (hybrid_override_pattern); "" = a plain decoder */
    int n_mamba, n_attn;          /* layers of kind 'M' / '*' */
    int ssm_state, ssm_heads, ssm_head_dim, ssm_groups; /* N, nh, P, G */
    int ssm_conv, ssm_chunk;      /* conv_kernel, chunk_size */
    int ssm_conv_bias, ssm_proj_bias;
    float ssm_dt_lo, ssm_dt_hi;   /* time_step_limit (dt clamp; (0, inf) = none) */
    int torch_dtype;              /* dtype, or -1 when absent/unknown */
    int bos_token_id;             /* -1 = none */
    int n_eos;
    int eos_token_ids[MODEL_MAX_EOS];
} model_config;

/* Parse config.json text (json, len) with an optional override object
 * (JSON text or NULL) and a context length (0 = derive).  Returns 0, or -1
 * with a message in err. */
int model_config_parse(model_config *c, const char *json, size_t len, const char *override_json,
                       int context_length, char *err, size_t errlen);

/* Read DIR/config.json (+ eos ids from DIR/generation_config.json if
 * present) and parse as above. */
int model_config_load(model_config *c, const char *dir, const char *override_json,
                      int context_length, char *err, size_t errlen);

/* Does layer il use the sliding window (per the architecture's rule)? */
int model_config_layer_window(const model_config *c, int il);

/* Is layer il a sliding-attention layer by config.layer_types or the
 * pattern (MODEL_WINDOW_LAYER_TYPES architectures only; 0 otherwise)?
 * Gemma 3 rotates those with rope_local_theta. */
int model_config_layer_sliding(const model_config *c, int il);

/* Does layer il use the MoE block (else the dense gated MLP)? */
int model_config_layer_moe(const model_config *c, int il);

const char *model_rope_kind_name(model_rope_kind k);

#endif
