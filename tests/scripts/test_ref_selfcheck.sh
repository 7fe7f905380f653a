#!/usr/bin/env bash
# The references themselves (tests/ref, tools/llama2c_to_hf.py,
# tools/safetensors_np.py), without sglc: documented outputs of the real
# TinyStories-656K and stories260K models, safetensors round trips and bf16
# rounding vs torch, RoPE scaling properties, prefill == cached decode,
# sliding-window reach, tokenizer.json vs llama2.c's encoder.
set -u
ROOT=${SGLC_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
SHARED=${SGLC_SHARED:-$ROOT/../shared}
export SGLC_SHARED=$SHARED
PY=/usr/bin/python3
[ -x "$PY" ] && "$PY" -c 'import torch, numpy' 2>/dev/null || { echo "skip: torch/numpy missing in $PY"; exit 77; }
for f in models/TinyStories-656K/model.safetensors models/stories260K-llama2c/stories260K.bin \
         models/stories260K-llama2c/tok512.bin; do
    [ -e "$SHARED/$f" ] || { echo "skip: $SHARED/$f not found"; exit 77; }
done
exec "$PY" "$ROOT/tests/ref/selfcheck.py"
