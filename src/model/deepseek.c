/* deepseek — DeepseekV2ForCausalLM (DeepSeek-V2, V2-Lite, V2.5) and
 * DeepseekV3ForCausalLM (V3, R1): multi-head latent attention (mla.c)
 * over a Llama-style decoder with DeepSeekMoE MLPs, as the hub repos'
 * modeling_deepseek.py:
 *   - attention: q = q_proj(x), or q_b_proj(RMSNorm(q_a_proj(x))) when
 *     q_lora_rank is set; kv_a_proj_with_mqa(x) = [latent c_kv | k_pe];
 *     kv_a_layernorm(c_kv); kv_b_proj(c_kv) = per head [k_nope | v];
 *     rope (DeepSeek's interleaved pairs) on q_pe and the one shared k_pe;
 *     softmax scale (nope + rope)^-1/2 * mscale^2; o_proj;
 *   - MLP: dense (intermediate_size) on layers < first_k_dense_replace or
 *     off the moe_layer_freq grid; else router mlp.gate (+ V3's
 *     mlp.gate.e_score_correction_bias), routed experts
 *     mlp.experts.E.{gate,up,down}_proj (moe_intermediate_size) and the
 *     shared experts mlp.shared_experts.* (n_shared_experts *
 *     moe_intermediate_size) added unscaled.
 * V2 and V3 differ only in config defaults and the routing rules
 * config.c reads (softmax greedy / group_limited_greedy vs sigmoid
 * noaux_tc with the bias; where routed_scaling_factor applies). */
#include "model/arch.h"

static const model_tensor_names deepseek_names = {
    MODEL_LLAMA_LAYOUT_NAMES,
    .gate = "model.layers.%d.mlp.gate_proj",
    .up = "model.layers.%d.mlp.up_proj",
    .down = "model.layers.%d.mlp.down_proj",
    .router = "model.layers.%d.mlp.gate.weight",
    .router_bias = "model.layers.%d.mlp.gate.e_score_correction_bias",
    .expert_gate = "model.layers.%d.mlp.experts.%d.gate_proj",
    .expert_up = "model.layers.%d.mlp.experts.%d.up_proj",
    .expert_down = "model.layers.%d.mlp.experts.%d.down_proj",
    .shared_gate = "model.layers.%d.mlp.shared_experts.gate_proj",
    .shared_up = "model.layers.%d.mlp.shared_experts.up_proj",
    .shared_down = "model.layers.%d.mlp.shared_experts.down_proj",
    .q_a = "model.layers.%d.self_attn.q_a_proj",
    .q_b = "model.layers.%d.self_attn.q_b_proj",
    .q_a_norm = "model.layers.%d.self_attn.q_a_layernorm.weight",
    .kv_a = "model.layers.%d.self_attn.kv_a_proj_with_mqa",
    .kv_a_norm = "model.layers.%d.self_attn.kv_a_layernorm.weight",
    .kv_b = "model.layers.%d.self_attn.kv_b_proj",
};

const model_arch model_arch_deepseek_v2 = {
    .hf_name = "DeepseekV2ForCausalLM",
    .family = "deepseek_v2",
    .qkv_bias = 0,
    .o_bias = 0,
    .window = MODEL_WINDOW_NONE,
    .act = MODEL_ACT_SILU,
    .mlp = MODEL_MLP_MOE,
    .moe_renorm = -1,
    .moe_inter_key = "moe_intermediate_size",
    .deepseek = 2,
    .mla = 1,
    .rope_neox = 0,
    .names = &deepseek_names,
};

const model_arch model_arch_deepseek_v3 = {
    .hf_name = "DeepseekV3ForCausalLM",
    .family = "deepseek_v3",
    .qkv_bias = 0,
    .o_bias = 0,
    .window = MODEL_WINDOW_NONE,
    .act = MODEL_ACT_SILU,
    .mlp = MODEL_MLP_MOE,
    .moe_renorm = -1,
    .moe_inter_key = "moe_intermediate_size",
    .deepseek = 3,
    .mla = 1,
    .rope_neox = 0,
    .names = &deepseek_names,
};
