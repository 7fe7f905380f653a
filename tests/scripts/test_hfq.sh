#!/usr/bin/env bash
# Hugging Face quantized checkpoints (docs/notes/hfq.md): tiny random
# llama-shaped checkpoints in AWQ, GPTQ (4-bit sym / asym / act-order,
# 8-bit), compressed-tensors (int8 channel, W4A16 pack-quantized),
# w8a8_int8, fp8 128x128 blocks, w8a8_fp8, and an f32 model quantized at
# load (--quantization w8a8_int8 / fp8), written by
# tests/ref/make_hfq_models.py (cached in build/tiny-models/hfq).  Prompt
# logits of sglc against the PyTorch reference on the dequantized weights,
# within each format's stated bound; bad checkpoints and flags are clear
# errors (tests/ref/hfq_check.py).
set -u
. "$(dirname "$0")/golden_common.sh"
golden_require models/configs/meta-llama__Llama-3.2-1B-Instruct/config.json
OUT=$ROOT/build/tiny-models/hfq
"$PY" "$ROOT/tests/ref/make_hfq_models.py" --out "$OUT" --shared "$SHARED" || exit 1
exec "$PY" "$ROOT/tests/ref/hfq_check.py" "$BIN" "$OUT"
