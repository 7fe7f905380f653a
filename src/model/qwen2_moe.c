/* qwen2_moe — Qwen2MoeForCausalLM (Qwen1.5-MoE-A2.7B, Qwen2-57B-A14B):
 * Qwen2's attention (q/k/v bias, no o bias, sliding window on layers >=
 * max_window_layers when use_sliding_window) with a sparse MoE MLP as
 * transformers' Qwen2MoeSparseMoeBlock: router mlp.gate (num_experts, H),
 * softmax over all experts, top num_experts_per_tok, renormalized when
 * norm_topk_prob; experts mlp.experts.E.{gate,up,down}_proj of width
 * moe_intermediate_size; plus ONE shared expert mlp.shared_expert.* of
 * width shared_expert_intermediate_size whose output is scaled by
 * sigmoid(x · mlp.shared_expert_gate (1, H)) before it is added.  Layers
 * in mlp_only_layers or off the decoder_sparse_step grid are dense
 * (intermediate_size), as Qwen2MoeDecoderLayer. */
#include "model/arch.h"

static const model_tensor_names qwen2_moe_names = {
    MODEL_LLAMA_LAYOUT_NAMES,
    .gate = "model.layers.%d.mlp.gate_proj",
    .up = "model.layers.%d.mlp.up_proj",
    .down = "model.layers.%d.mlp.down_proj",
    .router = "model.layers.%d.mlp.gate.weight",
    .expert_gate = "model.layers.%d.mlp.experts.%d.gate_proj",
    .expert_up = "model.layers.%d.mlp.experts.%d.up_proj",
    .expert_down = "model.layers.%d.mlp.experts.%d.down_proj",
    .shared_gate = "model.layers.%d.mlp.shared_expert.gate_proj",
    .shared_up = "model.layers.%d.mlp.shared_expert.up_proj",
    .shared_down = "model.layers.%d.mlp.shared_expert.down_proj",
    .shared_sigmoid = "model.layers.%d.mlp.shared_expert_gate.weight",
};

const model_arch model_arch_qwen2_moe = {
    .hf_name = "Qwen2MoeForCausalLM",
    .family = "qwen2_moe",
    .qkv_bias = 1,
    .o_bias = 0,
    .qk_norm = 0,
    .window = MODEL_WINDOW_QWEN2,
    .norm_offset = 0.0f,
    .act = MODEL_ACT_SILU,
    .mlp = MODEL_MLP_MOE,
    .moe_renorm = -1,
    .moe_inter_key = "moe_intermediate_size",
    .shared_inter_key = "shared_expert_intermediate_size",
    .shared_sigmoid = 1,
    .rope_neox = 1,
    .names = &qwen2_moe_names,
};
