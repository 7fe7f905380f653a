#!/usr/bin/env bash
# Golden: tiny random-weight models (tests/ref/make_tiny_model.py, cached
# in build/tiny-models): llama (rope llama3 / linear / dynamic / yarn;
# attention_bias = q/k/v/o bias), mistral (sliding window 16 < 64-token
# prompt, sharded f32 folder), qwen2 (q/k/v bias; use_sliding_window on
# layers >= max_window_layers), qwen3 (qk-norm, head_dim != hidden/heads),
# qwen3-moe (64 experts top-8, norm_topk_prob), qwen3-moe-dense0
# (norm_topk_prob false, mlp_only_layers [0]), mixtral (8 experts top-2),
# granitemoe (packed 3-D experts, embedding/attention/residual multipliers,
# logits_scaling).
# Per model: 64-token prompt logits within 1e-4 (f32, and bf16 weights with
# f32 compute) and 2e-2 (bf16); 32 greedy ids identical in f32.
set -u
. "$(dirname "$0")/golden_common.sh"
golden_require models/TinyStories-656K/config.json \
    models/configs/meta-llama__Llama-3.2-1B-Instruct/config.json \
    models/configs/Qwen__Qwen2.5-0.5B-Instruct/config.json \
    models/configs/Qwen__Qwen3-0.6B/config.json \
    models/configs/Qwen__Qwen3-30B-A3B/config.json \
    models/configs/mistralai__Mixtral-8x7B-Instruct-v0.1/config.json \
    models/configs/ibm-granite__granite-3.0-1b-a400m-instruct/config.json \
    models/tokenizers/mistral-chatml/config.json
mkdir -p "$ROOT/build/tiny-models"
exec "$PY" "$ROOT/tests/ref/golden.py" arch --cache "$ROOT/build/tiny-models"
