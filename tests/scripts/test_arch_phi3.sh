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
"$PY" "$ROOT/tests/ref/phi3_ref.py" check --cache "$ROOT/build/tiny-models" || exit 1
# The scheduler's chunked prefill (16-token chunks, each shorter than
# original_max_position_embeddings 32) of a 64-token prompt: every chunk
# must take the long factors (model_batch.seq_rope_len = the prompt's
# length), as HF does for the whole prompt.
. "$ROOT/tests/scripts/lib_server.sh"
T=$(mktemp -d)
trap server_cleanup EXIT
server_start "$T/log" --model-path "$ROOT/build/tiny-models/phi3.5-long/f32" --chunked-prefill-size 16 \
    --threads 2 --disable-radix-cache --skip-tokenizer-init || server_fail "$T/log"
"$PY" "$ROOT/tests/ref/phi3_ref.py" chunked --only phi3.5-long --url "$SERVER_URL" \
    --cache "$ROOT/build/tiny-models"
