/* arch — the architecture registry: one descriptor per Hugging Face
 * architecture string, one source file per architecture (llama.c,
 * mistral.c, qwen2.c, qwen3.c, qwen3_moe.c, mixtral.c, granitemoe.c, phi3.c,
 * qwen2_moe.c, deepseek.c, nemotron_h.c), all run by the shared decoder core.
 *
 * DESIGN: a descriptor states what differs between decoder-only models as
 * data, and decoder.c reads those flags instead of branching on names:
 *
 *   embed -> [ norm -> attn(q,k,v [+bias] [-> qk-norm] -> rope -> attention
 *              [window]) -> o -> +res -> norm -> MLP slot -> +res ] x L
 *         -> final norm -> lm_head (tied or not)
 *
 * Seams kept open for architectures not written yet:
 *   - MLP slot: `mlp` selects the block after the second norm: dense gated
 *     (gate/up/down), or MODEL_MLP_MOE (Qwen3-MoE, Mixtral): a router matmul
 *     (hidden -> n_expert), softmax + top-k (+ renormalization), and
 *     per-expert gate/up/down kern_mats loaded from the names in
 *     model_tensor_names.router / expert_*; decoder.c groups the batch's
 *     rows by expert (moe.h).  Qwen3-MoE layers listed in mlp_only_layers
 *     or off the decoder_sparse_step grid stay dense.
 *   - Gemma 2 / 3 (gemma.c): norm_offset = 1 (weights stored as w - 1),
 *     act = GELU_TANH, embed_scale (x *= sqrt(hidden) rounded to the
 *     model dtype), softcaps read from config.json (softcap_keys),
 *     query_pre_attn_scalar as the softmax scale (qpas_default), the
 *     post-attention / post-feedforward norms as optional tensor names
 *     (post_attn_norm / post_ffn_norm: the block output is normed before
 *     the residual add), sliding layers from layer_types or every
 *     window_pattern-th layer full (MODEL_WINDOW_LAYER_TYPES), and
 *     sliding layers rotating with rope_local_base_freq (rope_local).
 *   - Shared experts (Qwen2-MoE, DeepSeek): a dense gated MLP beside the
 *     routed experts, its output added to theirs (Qwen2-MoE scales it by
 *     sigmoid(x W_shared_expert_gate) first); DeepSeek's router options
 *     (grouped top-k, sigmoid scores + correction bias, scaling) are
 *     config values read into moe_route_cfg (moe.h).
 *   - Attention slot: `mla` swaps q/k/v attention for DeepSeek's multi-head
 *     latent attention (mla.c): the KV cache holds one compressed latent +
 *     rope key per token (model_kv_row_len).
 *   - The `check` hook lets an architecture reject configs it cannot run.
 * Descriptors are static and immutable; model_config.arch borrows them.
 */
#ifndef SGLC_MODEL_ARCH_H
#define SGLC_MODEL_ARCH_H

#include <stddef.h>

#include "model/config.h"

struct json_t; /* jansson: an architecture's parse hook reads config.json's object */

/* MLP slot: dense gated (gate/up/down), or a sparse mixture of experts
 * (router + top-k of n_expert gated experts, see moe.h). */
typedef enum model_mlp_kind { MODEL_MLP_DENSE = 0, MODEL_MLP_MOE = 1 } model_mlp_kind;
typedef enum model_act { MODEL_ACT_SILU = 0, MODEL_ACT_GELU_TANH = 1, MODEL_ACT_RELU2 = 2 } model_act;
typedef enum model_window_rule {
    MODEL_WINDOW_NONE = 0,  /* never (Llama) */
    MODEL_WINDOW_ALL = 1,   /* every layer when sliding_window is set (Mistral) */
    MODEL_WINDOW_QWEN2 = 2, /* use_sliding_window && layer >= max_window_layers */
    /* Gemma: config.layer_types[il] == "sliding_attention"; without the list,
     * layer il is full when (il + 1) % pattern == 0 (pattern =
     * sliding_window_pattern, else the descriptor's window_pattern) */
    MODEL_WINDOW_LAYER_TYPES = 3,
} model_window_rule;

/* Tensor names; "%d" is the layer index.  Projection entries are prefixes:
 * the loader appends ".weight" / ".bias". NULL = the model has none. */
typedef struct model_tensor_names {
    const char *embed, *final_norm, *lm_head;
    const char *attn_norm, *q, *k, *v, *o, *q_norm, *k_norm;
    const char *ffn_norm, *gate, *up, *down;
    /* Gemma: norms applied to the attention / MLP output before the
     * residual add (full names, "%d" = layer); NULL = none */
    const char *post_attn_norm, *post_ffn_norm;
    /* MoE layers: router matrix (full name, "%d" = layer) and expert
     * projection prefixes ("%d" twice: layer, expert). */
    const char *router, *expert_gate, *expert_up, *expert_down;
    /* GraniteMoE instead stores all experts of a layer in two 3-D tensors
     * (full names, "%d" = layer): expert_in (E, 2*Ie, H) = gate rows then up
     * rows per expert, expert_out (E, H, Ie).  NULL = per-expert tensors. */
    const char *expert_in, *expert_out;
    /* Fused projections (prefixes like q/k/v; NULL = separate tensors):
     * qkv (n_head*hd + 2*n_kv*hd, H) = q rows, then k, then v (Phi-3);
     * gate_up (2*I, H) = gate rows, then up rows.  Split into wq/wk/wv
     * and wgate/wup at load (views, no copy when the bytes are kept). */
    const char *qkv, *gate_up;
    /* shared expert projection prefixes ("%d" = layer), the Qwen2-MoE
     * shared_expert_gate (1, H) and DeepSeek V3's router correction bias
     * (full names, "%d" = layer); NULL = none */
    const char *shared_gate, *shared_up, *shared_down, *shared_sigmoid, *router_bias;
    /* MLA (arch->mla): prefixes q_a_proj, q_b_proj, kv_a_proj_with_mqa,
     * kv_b_proj and the full names of q_a_layernorm / kv_a_layernorm */
    const char *q_a, *q_b, *kv_a, *kv_b, *q_a_norm, *kv_a_norm;
} model_tensor_names;

/* The Hugging Face Llama layout most architectures share: embeddings, final
 * norm, lm_head, the two layer norms and q/k/v/o.  Use first inside a
 * model_tensor_names initializer, then add the MLP / MoE / qk-norm names. */
#define MODEL_LLAMA_LAYOUT_NAMES                                              \
    .embed = "model.embed_tokens.weight", .final_norm = "model.norm.weight", \
    .lm_head = "lm_head.weight",                                              \
    .attn_norm = "model.layers.%d.input_layernorm.weight",                   \
    .q = "model.layers.%d.self_attn.q_proj",                                 \
    .k = "model.layers.%d.self_attn.k_proj",                                 \
    .v = "model.layers.%d.self_attn.v_proj",                                 \
    .o = "model.layers.%d.self_attn.o_proj",                                 \
    .ffn_norm = "model.layers.%d.post_attention_layernorm.weight"

typedef struct model_arch {
    const char *hf_name;        /* architectures[0], e.g. "LlamaForCausalLM" */
    const char *family;         /* short name for logs */
    int qkv_bias;               /* 1 always, 0 never, -1 follow config.attention_bias */
    int o_bias;                 /* o_proj bias: 0 never, -1 follow config.attention_bias */
    int mlp_bias;               /* gate/up/down bias: 0 never, -1 follow config.mlp_bias */
    int qk_norm;                /* RMSNorm over each head of q and k before rope (Qwen3) */
    model_window_rule window;
    float norm_offset;          /* rmsnorm weight offset: 0, Gemma 1 */
    model_act act;
    int embed_scale;            /* multiply embeddings by sqrt(hidden) (Gemma) */
    float attn_softcap;         /* 0 = none */
    float final_softcap;        /* 0 = none */
    model_mlp_kind mlp;
    /* MoE only: renormalize the top-k routing weights to sum to 1:
     * 1 always (Mixtral), -1 follow config.norm_topk_prob (Qwen3-MoE). */
    int moe_renorm;
    /* MoE only: config key of the expert width ("moe_intermediate_size"),
     * NULL = intermediate_size (Mixtral). */
    const char *moe_inter_key;
    int rope_neox;              /* 1: rotate_half pairs (i, i + d/2), as HF Llama */
    /* Granite scalars from config.json: embedding_multiplier, attention_multiplier
     * (replaces 1/sqrt(head_dim)), residual_multiplier, logits_scaling */
    int granite_scalars;
    /* Gemma: */
    int tie_default;            /* tie_word_embeddings when config.json omits it */
    const char *act_key;        /* config key naming the activation; NULL = hidden_act */
    int softcap_keys;           /* 1: attn_logit_softcapping, 2: final_logit_softcapping read
                                 * from config.json (null = none); else the fields above */
    float qpas_default;         /* > 0: softmax scale = query_pre_attn_scalar^-0.5, this
                                 * value when absent */
    int window_pattern;         /* MODEL_WINDOW_LAYER_TYPES without layer_types or
                                 * sliding_window_pattern */
    int rope_local;             /* sliding layers rotate with rope_local_base_freq
                                 * (default 10000), unscaled; global ones with rope_theta
                                 * and rope_scaling (Gemma 3) */
    /* Gemma3ForConditionalGeneration: config.json nests the text model in
     * "text_config"; the keys it omits take these defaults (a JSON object,
     * the transformers text config class's), NULL = not nested */
    const char *text_config_defaults;
    /* the same architecture under other tensor names (Gemma 3 multimodal
     * saved by transformers >= 4.52: model.language_model.*, lm_head),
     * used when the checkpoint lacks this one's embedding tensor */
    const struct model_arch *alt_layout;
    /* MoE only: config key of the shared expert width (Qwen2-MoE
     * "shared_expert_intermediate_size"); NULL = no shared expert, or
     * DeepSeek's n_shared_experts * moe_intermediate_size */
    const char *shared_inter_key;
    int shared_sigmoid;         /* shared expert output * sigmoid(x Wg) (Qwen2-MoE) */
    int deepseek;               /* 2 or 3: DeepSeek V2 / V3 config keys and routing rules */
    int mla;                    /* multi-head latent attention (mla.c) */
    const model_tensor_names *names;
    /* hybrid layers (NemotronH: Mamba2 / attention / MLP blocks per
     * config.layer_kinds, run by nemotron_h.c inside the decoder pass) */
    int hybrid;
    /* optional: the architecture's own config.json keys (root is the
     * jansson object), after the common ones; 0 ok, -1 with err set */
    int (*parse)(model_config *c, const struct json_t *root, char *err, size_t errlen);
    /* optional extra validation after parsing; 0 ok, -1 with err set */
    int (*check)(const model_config *c, char *err, size_t errlen);
} model_arch;

/* The Hugging Face naming shared by Llama, Mistral, Qwen2 and Qwen3. */
extern const model_tensor_names model_hf_decoder_names;

extern const model_arch model_arch_llama;
extern const model_arch model_arch_mistral;
extern const model_arch model_arch_qwen2;
extern const model_arch model_arch_qwen3;
extern const model_arch model_arch_qwen3_moe;
extern const model_arch model_arch_mixtral;
extern const model_arch model_arch_granitemoe;
extern const model_arch model_arch_gemma2;
extern const model_arch model_arch_gemma3;
extern const model_arch model_arch_gemma3_mm;
extern const model_arch model_arch_phi3;
extern const model_arch model_arch_qwen2_moe;
extern const model_arch model_arch_deepseek_v2;
extern const model_arch model_arch_deepseek_v3;
extern const model_arch model_arch_nemotron_h;

/* Registry lookup by architectures[0]; NULL if unsupported. */
const model_arch *model_arch_find(const char *hf_name);
/* Comma-separated list of supported architecture names into buf. */
void model_arch_list(char *buf, size_t len);

#endif
