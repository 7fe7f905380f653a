#!/usr/bin/env bash
# Golden: LoRA adapters (random PEFT folders written by tests/ref/lora_ref.py:
# several ranks, target sets, F32/BF16/F16, rsLoRA, lm_head) on every tiny
# model; `sglc generate --lora-path` prompt logits equal PyTorch on the
# merged weights (W + scale B A) within 1e-4 (f32), greedy ids identical.
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
exec "$PY" "$ROOT/tests/ref/lora_ref.py" --cache "$ROOT/build/tiny-models"
