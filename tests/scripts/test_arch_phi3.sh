#!/usr/bin/env bash
# Golden: Phi3ForCausalLM (tests/ref/phi3_ref.py, tiny random-weight models
# cached in build/tiny-models) from the real configs of Phi-3-mini-4k
# (../shared), Phi-3.5-mini and Phi-4-mini (tests/data/configs, sources
# named in each file): fused qkv_proj / gate_up_proj, sliding window on
# every layer, longrope with the prompt past original_max_position_embeddings
# (long factors) and within it (short factors), the longrope attention
# factor, partial rotary 0.75, GQA, tied embeddings.  Per model: 64-token
# prompt logits within 1e-4 (f32; bf16 weights with f32 compute) and 2e-2
# (bf16), 32 greedy ids identical; each feature switched off in the
# reference first has to move the logits (> 1e-2).
set -u
. "$(dirname "$0")/golden_common.sh"
golden_require models/configs/microsoft__Phi-3-mini-4k-instruct/config.json
mkdir -p "$ROOT/build/tiny-models"
exec "$PY" "$ROOT/tests/ref/phi3_ref.py" check --cache "$ROOT/build/tiny-models"
