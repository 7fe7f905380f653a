#!/usr/bin/env bash
# Tensor parallelism (issue 12): `generate --tp-size 2` and `4` against the
# one-process run on every tiny architecture model and TinyStories-656K —
# prompt logits within 1e-5 relative (f32), 16 greedy ids identical, heads
# that do not divide refused (tests/scripts/tp_check.py).
set -u
. "$(dirname "$0")/golden_common.sh"
golden_require models/TinyStories-656K/config.json \
    models/configs/meta-llama__Llama-3.2-1B-Instruct/config.json \
    models/configs/Qwen__Qwen2.5-0.5B-Instruct/config.json \
    models/configs/Qwen__Qwen3-0.6B/config.json \
    models/configs/Qwen__Qwen3-30B-A3B/config.json \
    models/configs/mistralai__Mixtral-8x7B-Instruct-v0.1/config.json \
    models/configs/ibm-granite__granite-3.0-1b-a400m-instruct/config.json
mkdir -p "$ROOT/build/tiny-models"
# (classifier heads under TP / PP: tests/scripts/test_score.sh)
"$PY" "$ROOT/tests/scripts/tp_check.py"
