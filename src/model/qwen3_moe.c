/* qwen3_moe — Qwen3MoeForCausalLM (Qwen3-30B-A3B, Qwen3-235B-A22B): Qwen3's
 * attention (qk-norm, explicit head_dim) with a sparse MoE MLP: router
 * mlp.gate (num_experts, hidden), softmax over all experts, top
 * num_experts_per_tok, renormalized when norm_topk_prob; experts
 * mlp.experts.E.{gate,up,down}_proj of width moe_intermediate_size.  Layers
 * in mlp_only_layers, or with (layer + 1) % decoder_sparse_step != 0, are
 * dense (intermediate_size) as in transformers' Qwen3MoeDecoderLayer. */
#include "model/arch.h"

static const model_tensor_names qwen3_moe_names = {
    MODEL_LLAMA_LAYOUT_NAMES,
    .q_norm = "model.layers.%d.self_attn.q_norm.weight",
    .k_norm = "model.layers.%d.self_attn.k_norm.weight",
    .gate = "model.layers.%d.mlp.gate_proj",
    .up = "model.layers.%d.mlp.up_proj",
    .down = "model.layers.%d.mlp.down_proj",
    .router = "model.layers.%d.mlp.gate.weight",
    .expert_gate = "model.layers.%d.mlp.experts.%d.gate_proj",
    .expert_up = "model.layers.%d.mlp.experts.%d.up_proj",
    .expert_down = "model.layers.%d.mlp.experts.%d.down_proj",
};

const model_arch model_arch_qwen3_moe = {
    .hf_name = "Qwen3MoeForCausalLM",
    .family = "qwen3_moe",
    .qkv_bias = -1,
    .o_bias = -1,
    .qk_norm = 1,
    .window = MODEL_WINDOW_QWEN2,
    .norm_offset = 0.0f,
    .act = MODEL_ACT_SILU,
    .mlp = MODEL_MLP_MOE,
    .moe_renorm = -1,
    .moe_inter_key = "moe_intermediate_size",
    .rope_neox = 1,
    .names = &qwen3_moe_names,
};
