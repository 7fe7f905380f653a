/* mistral — MistralForCausalLM: Llama's layout plus a sliding window on
 * every layer when config.sliding_window is set (null = full attention). */
#include "model/arch.h"

const model_arch model_arch_mistral = {
    .hf_name = "MistralForCausalLM",
    .family = "mistral",
    .qkv_bias = 0,
    .qk_norm = 0,
    .window = MODEL_WINDOW_ALL,
    .norm_offset = 0.0f,
    .act = MODEL_ACT_SILU,
    .mlp = MODEL_MLP_DENSE,
    .rope_neox = 1,
    .names = &model_hf_decoder_names,
};
