#!/usr/bin/env bash
# Golden: llama2.c stories260K converted by tools/llama2c_to_hf.py (q/k rows
# permuted from interleaved to half-split RoPE).  sglc's 256 greedy ids from
# BOS equal the PyTorch reference's and decode (tok512 vocab) to the text in
# llama2.c doc/stories260K.md (run -t 0.0); 64-token prompt logits <= 1e-4.
set -u
. "$(dirname "$0")/golden_common.sh"
golden_require models/stories260K-llama2c/stories260K.bin \
    models/stories260K-llama2c/tok512.model models/stories260K-llama2c/tok512.bin
mkdir -p "$ROOT/build/tiny-models"
exec "$PY" "$ROOT/tests/ref/golden.py" stories260k --cache "$ROOT/build/tiny-models"
