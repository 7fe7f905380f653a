/* qwen2 — Qwen2ForCausalLM (Qwen2, Qwen2.5): always has q/k/v bias (no
 * attention_bias key in its config), never an o_proj or MLP bias; the
 * sliding window applies only when
 * use_sliding_window is true, to layers >= max_window_layers. */
#include "model/arch.h"

const model_arch model_arch_qwen2 = {
    .hf_name = "Qwen2ForCausalLM",
    .family = "qwen2",
    .qkv_bias = 1,
    .qk_norm = 0,
    .window = MODEL_WINDOW_QWEN2,
    .norm_offset = 0.0f,
    .act = MODEL_ACT_SILU,
    .mlp = MODEL_MLP_DENSE,
    .rope_neox = 1,
    .names = &model_hf_decoder_names,
};
