#!/usr/bin/env bash
# Golden: tiny random-weight Gemma models (tests/ref/gemma_ref.py, cached in
# build/tiny-models) from the real configs in tests/ref/configs:
# gemma2 (Gemma2ForCausalLM: attention + final soft-caps, post-norms,
# query_pre_attn_scalar, sliding layer 0 / full layer 1), gemma3
# (Gemma3ForCausalLM: qk-norm, 5 sliding + 1 full layers, local/global rope
# bases), gemma3-mm (Gemma3ForConditionalGeneration: nested text_config,
# rope_scaling linear 8 on the full layer only), gemma3-mm-v2 (the same
# saved with transformers >= 4.52's names, model.language_model.*).
# Per model: every feature switched off in the reference moves the logits by
# > 100x the f32 tolerance; 64-token prompt logits within 1e-4 (f32, and
# bf16 weights with f32 compute) and 2e-2 (bf16); 32 greedy ids identical;
# four prompts at once through the scheduler (--requests, prefill chunks of
# 16) give the reference's 16 greedy ids each.
set -u
. "$(dirname "$0")/golden_common.sh"
golden_require
mkdir -p "$ROOT/build/tiny-models"
exec "$PY" "$ROOT/tests/ref/golden.py" gemma --cache "$ROOT/build/tiny-models"
