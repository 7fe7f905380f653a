/* granitemoe — GraniteMoeForCausalLM (granite-3.0-1b-a400m, 3b-a800m):
 * Llama attention and a Mixtral-style MoE (softmax, top-k, renormalized)
 * whose experts are packed per layer in two 3-D tensors
 * (block_sparse_moe.input_linear (E, 2I, H): gate rows then up rows;
 * output_linear (E, H, I)), router block_sparse_moe.router.layer, plus
 * Granite's scalars from config.json: embeddings * embedding_multiplier,
 * attention softmax scale = attention_multiplier, each block's output *
 * residual_multiplier before the residual add, logits / logits_scaling
 * (as SGLang's granitemoe.py and transformers' GraniteMoeConfig defaults of 1). */
#include "model/arch.h"

static const model_tensor_names granitemoe_names = {
    MODEL_LLAMA_LAYOUT_NAMES,
    .router = "model.layers.%d.block_sparse_moe.router.layer.weight",
    .expert_in = "model.layers.%d.block_sparse_moe.input_linear.weight",
    .expert_out = "model.layers.%d.block_sparse_moe.output_linear.weight",
};

const model_arch model_arch_granitemoe = {
    .hf_name = "GraniteMoeForCausalLM",
    .family = "granitemoe",
    .qkv_bias = -1, /* GraniteMoeAttention: attention_bias (false in the released models) */
    .o_bias = -1,
    .qk_norm = 0,
    .window = MODEL_WINDOW_NONE,
    .norm_offset = 0.0f,
    .act = MODEL_ACT_SILU,
    .mlp = MODEL_MLP_MOE,
    .moe_renorm = 1,
    .moe_inter_key = NULL,
    .rope_neox = 1,
    .granite_scalars = 1,
    .names = &granitemoe_names,
};
