/* arch — the registry of architectures and the tensor naming they share.
 * Adding an architecture = one new file with its descriptor + one line in
 * `registry` below. */
#include "model/arch.h"

#include <stdio.h>
#include <string.h>

const model_tensor_names model_hf_decoder_names = {
    MODEL_LLAMA_LAYOUT_NAMES,
    .q_norm = NULL,
    .k_norm = NULL,
    .gate = "model.layers.%d.mlp.gate_proj",
    .up = "model.layers.%d.mlp.up_proj",
    .down = "model.layers.%d.mlp.down_proj",
};

static const model_arch *const registry[] = {
    &model_arch_llama,
    &model_arch_mistral,
    &model_arch_qwen2,
    &model_arch_qwen3,
    &model_arch_qwen3_moe,
    &model_arch_mixtral,
    &model_arch_granitemoe,
    &model_arch_gemma2,
    &model_arch_gemma3,
    &model_arch_gemma3_mm,
    &model_arch_phi3,
    &model_arch_qwen2_moe,
    &model_arch_deepseek_v2,
    &model_arch_deepseek_v3,
    &model_arch_nemotron_h,
};

const model_arch *model_arch_find(const char *hf_name)
{
    for (size_t i = 0; i < sizeof registry / sizeof registry[0]; i++)
        if (!strcmp(registry[i]->hf_name, hf_name)) return registry[i];
    return NULL;
}

void model_arch_list(char *buf, size_t len)
{
    size_t used = 0;
    if (len) buf[0] = 0;
    for (size_t i = 0; i < sizeof registry / sizeof registry[0]; i++) {
        int n = snprintf(buf + used, len > used ? len - used : 0, "%s%s", i ? ", " : "",
                         registry[i]->hf_name);
        if (n < 0) return;
        used += (size_t)n;
        if (used >= len) return;
    }
}
