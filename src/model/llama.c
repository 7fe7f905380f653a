/* llama — LlamaForCausalLM (Llama 2/3.x, SmolLM2, TinyStories): the plain
 * pre-norm decoder; config.attention_bias adds q/k/v AND o_proj biases,
 * config.mlp_bias adds gate/up/down biases (as transformers' LlamaAttention
 * / LlamaMLP). */
#include "model/arch.h"

const model_arch model_arch_llama = {
    .hf_name = "LlamaForCausalLM",
    .family = "llama",
    .qkv_bias = -1,
    .o_bias = -1,
    .mlp_bias = -1,
    .qk_norm = 0,
    .window = MODEL_WINDOW_NONE,
    .norm_offset = 0.0f,
    .act = MODEL_ACT_SILU,
    .mlp = MODEL_MLP_DENSE,
    .rope_neox = 1,
    .names = &model_hf_decoder_names,
};
