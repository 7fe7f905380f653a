/* phi3 — Phi3ForCausalLM (Phi-3, Phi-3.5, Phi-4-mini): the Llama block
 * with two fused projections and Phi's rope.
 *   - self_attn.qkv_proj (n_head*hd + 2*n_kv*hd, H): q rows, k rows, v
 *     rows (Phi3Attention slices qkv[..., :q], [q : q+kv], [q+kv :]);
 *   - mlp.gate_up_proj (2*I, H): gate rows then up rows
 *     (Phi3MLP: gate, up = chunk(2); up * act(gate));
 *   both split into the decoder's q/k/v and gate/up weights at load.
 *   - rope_scaling longrope / su (Phi-3-mini-128k, Phi-3.5, Phi-4-mini):
 *     short/long per-pair factors and the sqrt(1 + ln s / ln orig) cos/sin
 *     scale (rope.c); partial_rotary_factor (Phi-4-mini 0.75: the first
 *     96 of 128 dims rotate) is the shared config's;
 *   - sliding_window: HF Phi3Model masks every layer with it when set
 *     (create_sliding_window_causal_mask; Phi-3-mini-4k 2047, Phi-3.5 /
 *     Phi-4-mini 262144, longer than their context), hence
 *     MODEL_WINDOW_ALL: W keys including the query's own.
 * No biases (Phi3Attention / Phi3MLP use bias=False), SiLU, RMSNorm. */
#include "model/arch.h"

static const model_tensor_names phi3_names = {
    MODEL_LLAMA_LAYOUT_NAMES,
    .down = "model.layers.%d.mlp.down_proj",
    .qkv = "model.layers.%d.self_attn.qkv_proj",
    .gate_up = "model.layers.%d.mlp.gate_up_proj",
};

const model_arch model_arch_phi3 = {
    .hf_name = "Phi3ForCausalLM",
    .family = "phi3",
    .qkv_bias = 0,
    .o_bias = 0,
    .mlp_bias = 0,
    .window = MODEL_WINDOW_ALL,
    .norm_offset = 0.0f,
    .act = MODEL_ACT_SILU,
    .mlp = MODEL_MLP_DENSE,
    .rope_neox = 1,
    .names = &phi3_names,
};
