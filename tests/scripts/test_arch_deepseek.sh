#!/usr/bin/env bash
# Golden: tiny random-weight Qwen2-MoE and DeepSeek V2 / V3 models
# (tests/ref/make_tiny_ds.py, from the real configs in tests/ref/configs,
# cached in build/tiny-models) against the PyTorch reference
# tests/ref/ds_ref.py: qwen2-moe (shared expert + sigmoid gate),
# qwen2-moe-sparse2 (decoder_sparse_step, mlp_only_layers, GQA),
# deepseek-v2-lite (MLA with q_proj, yarn mscale, shared experts, dense
# first layer), deepseek-v2 (q_lora_rank, group_limited_greedy,
# routed_scaling_factor 16), deepseek-v3 (sigmoid + correction bias,
# noaux_tc, normalized and scaled).  Per model: 64-token prompt logits
# within 1e-4 (f32; bf16 weights with f32 compute) and 2e-2 (bf16), 32
# greedy ids identical, every feature shown to move the reference, the
# reference's compressed latent cache == its expanded K/V, and 5 requests
# batched through the scheduler (and in 8-token prefill chunks) == each
# alone; deepseek-v3-tok: the real vocabulary with DeepSeek V3's tokenizer
# and chat template, 12 greedy ids == the reference.
set -u
. "$(dirname "$0")/golden_common.sh"
golden_require models/tokenizers/deepseek_v3/tokenizer.json
mkdir -p "$ROOT/build/tiny-models"
exec "$PY" "$ROOT/tests/ref/golden_ds.py" --cache "$ROOT/build/tiny-models" "$@"
