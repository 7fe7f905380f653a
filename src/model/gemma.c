/* gemma — Gemma2ForCausalLM, Gemma3ForCausalLM (text), and the text part of
 * Gemma3ForConditionalGeneration, as transformers' modeling_gemma2.py /
 * modeling_gemma3.py define them:
 *
 *   x = embed(ids) * sqrt(hidden)      (the scale rounded to the model dtype)
 *   per layer:
 *     h = attn(norm_in(x)); x += norm_post_attn(h)
 *     h = mlp(norm_pre_ffn(x)); x += norm_post_ffn(h)
 *   logits = lm_head(norm(x))  [-> cap * tanh(logits / cap)]
 *
 * Every norm is RMSNorm with (1 + w) (stored weights are centred on 0).  MLP
 * = down(gelu_tanh(gate) * up) (hidden_activation gelu_pytorch_tanh).
 * Attention: softmax scale query_pre_attn_scalar^-0.5 (not head_dim's);
 * GQA; head_dim from config; sliding layers per layer_types (or the
 * pattern: Gemma 2 every other layer starting with layer 0, Gemma 3 five
 * sliding then one full, sliding_window_pattern 6).
 *   Gemma 2: attention scores soft-capped (attn_logit_softcapping, 50 in the
 *     released models) after scaling and before the mask; final logits
 *     soft-capped (final_logit_softcapping, 30); one rope base for all.
 *   Gemma 3: q_norm / k_norm over each head before rope; sliding layers
 *     rotate with rope_local_base_freq (10000) unscaled, full layers with
 *     rope_theta (1e6) and rope_scaling (the 4B and larger: linear 8);
 *     transformers passes no attention softcap to its attention function
 *     (attn_logit_softcapping is stored but unused), so neither do we.
 * Embeddings are tied unless config.json says otherwise
 * (tie_word_embeddings defaults to true in both config classes).
 *
 * Gemma3ForConditionalGeneration (gemma-3-4b-it and larger): config.json
 * nests the text model in "text_config" with most keys omitted (they take
 * Gemma3TextConfig's defaults, listed below); the checkpoint stores the
 * text weights under "language_model.model." (the hub's files) or
 * "model.language_model." (saved by transformers >= 4.52) next to the
 * vision tower, which is not loaded: only text prompts run.
 */
#include "model/arch.h"

#define GEMMA_LAYER_NAMES(P)                                              \
    .attn_norm = P "layers.%d.input_layernorm.weight",                    \
    .q = P "layers.%d.self_attn.q_proj", .k = P "layers.%d.self_attn.k_proj", \
    .v = P "layers.%d.self_attn.v_proj", .o = P "layers.%d.self_attn.o_proj", \
    .post_attn_norm = P "layers.%d.post_attention_layernorm.weight",      \
    .ffn_norm = P "layers.%d.pre_feedforward_layernorm.weight",           \
    .post_ffn_norm = P "layers.%d.post_feedforward_layernorm.weight",     \
    .gate = P "layers.%d.mlp.gate_proj", .up = P "layers.%d.mlp.up_proj", \
    .down = P "layers.%d.mlp.down_proj"

static const model_tensor_names gemma2_names = {
    .embed = "model.embed_tokens.weight", .final_norm = "model.norm.weight",
    .lm_head = "lm_head.weight",
    GEMMA_LAYER_NAMES("model."),
};

static const model_tensor_names gemma3_names = {
    .embed = "model.embed_tokens.weight", .final_norm = "model.norm.weight",
    .lm_head = "lm_head.weight",
    GEMMA_LAYER_NAMES("model."),
    .q_norm = "model.layers.%d.self_attn.q_norm.weight",
    .k_norm = "model.layers.%d.self_attn.k_norm.weight",
};

/* transformers >= 4.52 saves Gemma3ForConditionalGeneration with the text
 * model under model.language_model. and the head as lm_head */
static const model_tensor_names gemma3_mm_v2_names = {
    .embed = "model.language_model.embed_tokens.weight",
    .final_norm = "model.language_model.norm.weight",
    .lm_head = "lm_head.weight",
    GEMMA_LAYER_NAMES("model.language_model."),
    .q_norm = "model.language_model.layers.%d.self_attn.q_norm.weight",
    .k_norm = "model.language_model.layers.%d.self_attn.k_norm.weight",
};

static const model_tensor_names gemma3_mm_names = {
    .embed = "language_model.model.embed_tokens.weight",
    .final_norm = "language_model.model.norm.weight",
    .lm_head = "language_model.lm_head.weight",
    GEMMA_LAYER_NAMES("language_model.model."),
    .q_norm = "language_model.model.layers.%d.self_attn.q_norm.weight",
    .k_norm = "language_model.model.layers.%d.self_attn.k_norm.weight",
};

const model_arch model_arch_gemma2 = {
    .hf_name = "Gemma2ForCausalLM",
    .family = "gemma2",
    .qkv_bias = -1, /* Gemma2Attention: bias=config.attention_bias on q/k/v/o */
    .o_bias = -1,
    .mlp_bias = 0,
    .qk_norm = 0,
    .window = MODEL_WINDOW_LAYER_TYPES,
    .window_pattern = 2, /* layer 0 sliding, layer 1 full, ... */
    .norm_offset = 1.0f,
    .act = MODEL_ACT_GELU_TANH,
    .act_key = "hidden_activation",
    .embed_scale = 1,
    .attn_softcap = 50.0f, /* Gemma2Config defaults */
    .final_softcap = 30.0f,
    .softcap_keys = 3,
    .qpas_default = 256.0f,
    .tie_default = 1,
    .mlp = MODEL_MLP_DENSE,
    .rope_neox = 1,
    .names = &gemma2_names,
};

const model_arch model_arch_gemma3 = {
    .hf_name = "Gemma3ForCausalLM",
    .family = "gemma3",
    .qkv_bias = -1,
    .o_bias = -1,
    .mlp_bias = 0,
    .qk_norm = 1,
    .window = MODEL_WINDOW_LAYER_TYPES,
    .window_pattern = 6, /* Gemma3TextConfig: sliding_window_pattern 6 */
    .norm_offset = 1.0f,
    .act = MODEL_ACT_GELU_TANH,
    .act_key = "hidden_activation",
    .embed_scale = 1,
    .softcap_keys = 2, /* final_logit_softcapping only (null in the released models) */
    .qpas_default = 256.0f,
    .tie_default = 1,
    .rope_local = 1,
    .mlp = MODEL_MLP_DENSE,
    .rope_neox = 1,
    .names = &gemma3_names,
};

/* transformers' Gemma3TextConfig defaults, for the keys gemma-3-4b-it's
 * text_config leaves out */
static const char gemma3_text_defaults[] =
    "{\"vocab_size\": 262208, \"hidden_size\": 2304, \"intermediate_size\": 9216,"
    " \"num_hidden_layers\": 26, \"num_attention_heads\": 8, \"num_key_value_heads\": 4,"
    " \"head_dim\": 256, \"hidden_activation\": \"gelu_pytorch_tanh\","
    " \"max_position_embeddings\": 131072, \"rms_norm_eps\": 1e-6,"
    " \"pad_token_id\": 0, \"eos_token_id\": 1, \"bos_token_id\": 2,"
    " \"tie_word_embeddings\": true, \"rope_theta\": 1000000.0, \"attention_bias\": false,"
    " \"query_pre_attn_scalar\": 256, \"sliding_window\": 4096,"
    " \"final_logit_softcapping\": null, \"attn_logit_softcapping\": null,"
    " \"rope_scaling\": null, \"rope_local_base_freq\": 10000.0,"
    " \"sliding_window_pattern\": 6}";

/* the text model of Gemma3ForConditionalGeneration: the same descriptor in
 * both checkpoint layouts (alt_layout picks the one the files hold) */
#define GEMMA3_MM_FIELDS                                                   \
    .hf_name = "Gemma3ForConditionalGeneration", .family = "gemma3", .qkv_bias = -1, \
    .o_bias = -1, .mlp_bias = 0, .qk_norm = 1, .window = MODEL_WINDOW_LAYER_TYPES, \
    .window_pattern = 6, .norm_offset = 1.0f, .act = MODEL_ACT_GELU_TANH,   \
    .act_key = "hidden_activation", .embed_scale = 1, .softcap_keys = 2,    \
    .qpas_default = 256.0f, .tie_default = 1, .rope_local = 1,              \
    .text_config_defaults = gemma3_text_defaults, .mlp = MODEL_MLP_DENSE, .rope_neox = 1

static const model_arch gemma3_mm_v2 = {
    GEMMA3_MM_FIELDS,
    .names = &gemma3_mm_v2_names,
};

const model_arch model_arch_gemma3_mm = {
    GEMMA3_MM_FIELDS,
    .names = &gemma3_mm_names,
    .alt_layout = &gemma3_mm_v2,
};
