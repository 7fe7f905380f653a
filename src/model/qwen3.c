/* qwen3 — Qwen3ForCausalLM: explicit head_dim (q/k/v widths need not equal
 * hidden_size), RMSNorm over each head of q and k (q_norm/k_norm, shape
 * (head_dim)) before rope, q/k/v/o bias per config.attention_bias (false in
 * the released models), Qwen2's sliding-window rule. */
#include "model/arch.h"

static const model_tensor_names qwen3_names = {
    MODEL_LLAMA_LAYOUT_NAMES,
    .q_norm = "model.layers.%d.self_attn.q_norm.weight",
    .k_norm = "model.layers.%d.self_attn.k_norm.weight",
    .gate = "model.layers.%d.mlp.gate_proj",
    .up = "model.layers.%d.mlp.up_proj",
    .down = "model.layers.%d.mlp.down_proj",
};

const model_arch model_arch_qwen3 = {
    .hf_name = "Qwen3ForCausalLM",
    .family = "qwen3",
    .qkv_bias = -1,
    .o_bias = -1, /* Qwen3Attention: o_proj bias=config.attention_bias */
    .qk_norm = 1,
    .window = MODEL_WINDOW_QWEN2,
    .norm_offset = 0.0f,
    .act = MODEL_ACT_SILU,
    .mlp = MODEL_MLP_DENSE,
    .rope_neox = 1,
    .names = &qwen3_names,
};
