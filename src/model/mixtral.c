/* mixtral — MixtralForCausalLM (Mixtral-8x7B/8x22B): Mistral's attention
 * (no bias, sliding_window on every layer when set) with a sparse MoE MLP
 * on every layer: router block_sparse_moe.gate (num_local_experts, hidden),
 * softmax, top num_experts_per_tok, always renormalized (= softmax over the
 * chosen logits); experts block_sparse_moe.experts.E.{w1 (gate), w3 (up),
 * w2 (down)} of width intermediate_size. */
#include "model/arch.h"

static const model_tensor_names mixtral_names = {
    MODEL_LLAMA_LAYOUT_NAMES,
    .router = "model.layers.%d.block_sparse_moe.gate.weight",
    .expert_gate = "model.layers.%d.block_sparse_moe.experts.%d.w1",
    .expert_up = "model.layers.%d.block_sparse_moe.experts.%d.w3",
    .expert_down = "model.layers.%d.block_sparse_moe.experts.%d.w2",
};

const model_arch model_arch_mixtral = {
    .hf_name = "MixtralForCausalLM",
    .family = "mixtral",
    .qkv_bias = 0,
    .qk_norm = 0,
    .window = MODEL_WINDOW_ALL,
    .norm_offset = 0.0f,
    .act = MODEL_ACT_SILU,
    .mlp = MODEL_MLP_MOE,
    .moe_renorm = 1,
    .moe_inter_key = NULL,
    .rope_neox = 1,
    .names = &mixtral_names,
};
